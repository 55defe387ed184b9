// Building the page: elements from data, text always as text. Nothing in the console sets HTML from a string
// (no innerHTML, no insertAdjacentHTML): whatever a checkpoint holds, `<script>` included, shows as the characters.
//
// Text always in its own direction too: stored text may hold right-to-left letters or the bidi controls (U+202A–U+202E
// embeddings and overrides, U+2066–U+2069 isolates, U+200F RLM, U+061C ALM), which reorder whatever shares their
// line: a label, the next value, the rest of a row. So every string that becomes text here (`append`, which `h` and
// `replace` use) is drawn in a <bdi> of its own when it holds one of them: it can reorder only itself. Each string
// is one run, so words and data are never joined into one string: pass them as separate children, or with
// phrase`History of ${subject}`. No other module creates text (tests/unit/test_console_files.py checks).

/** Characters that can reorder the text around them: right-to-left scripts (and their unassigned code points, which
 * Unicode makes right-to-left), RLM, the embeddings and overrides (U+202A–U+202E) and the isolates (U+2066–U+2069). */
const BIDI = /[\u0590-\u08ff\u200f\u202a-\u202e\u2066-\u2069\ufb1d-\ufdff\ufe70-\ufeff\u{10800}-\u{10fff}\u{1e800}-\u{1efff}]/u;

/** Elements whose content is text only (a <bdi> inside would not be drawn): such text isolates through `dir`. */
const TEXT_ONLY = new Set(['option', 'textarea', 'title']);

/** Whether `text` holds a character that could reorder the text around it. */
export function reorders(text) {
  return BIDI.test(text);
}

/**
 * Text for the page: a text node, or a <bdi> holding it when the text could reorder its neighbours (a <bdi> takes
 * its direction from its own first strong letter and is one neutral character to the text around it).
 */
export function isolated(text) {
  const node = document.createTextNode(text);
  if (!reorders(text)) return node;
  const bdi = document.createElement('bdi');
  bdi.append(node);
  return bdi;
}

/**
 * Words with data in them, as children for `h`: phrase`Lease taken by ${holder}.` gives the words and each value
 * as separate children, so that a value is isolated on its own (see `isolated`) and cannot reorder the words. Values
 * may be strings, numbers, nodes or arrays of them; null and undefined show nothing.
 */
export function phrase(words, ...values) {
  const parts = [];
  words.forEach((word, index) => {
    if (word) parts.push(word);
    if (index < values.length) parts.push(values[index]);
  });
  return parts;
}

/**
 * An element: h('button', {class: 'x', on: {click: f}}, 'Label', child...). Strings and numbers become text nodes;
 * null, undefined and false are skipped; arrays are flattened. Attributes whose value is null/false are left out.
 */
export function h(tag, attributes, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === 'on') {
      for (const [event, handler] of Object.entries(value)) element.addEventListener(event, handler);
    } else if (name === 'dataset') {
      Object.assign(element.dataset, value);
    } else if (name === 'value' || name === 'checked' || name === 'selected') {
      element[name] = value;
    } else {
      element.setAttribute(name, value === true ? '' : String(value));
    }
  }
  append(element, children);
  return element;
}

/**
 * Append children (text, nodes, arrays of them) to `parent`. Each string or number is its own run of text, isolated
 * when it could reorder the text around it: in a <bdi> (in an <option>, which holds only text, by `dir="auto"`).
 */
export function append(parent, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    if (child instanceof Node) {
      parent.append(child);
    } else if (TEXT_ONLY.has(parent.localName)) {
      const text = String(child);
      if (reorders(text)) parent.setAttribute('dir', 'auto');
      parent.append(document.createTextNode(text));
    } else {
      parent.append(isolated(String(child)));
    }
  }
  return parent;
}

/**
 * JSON text of `value` (as `JSON.stringify(value, null, space)` writes it) as children: the punctuation as it is and
 * the inside of each string its own run, so that a stored key or value can reorder only itself, never the JSON
 * around it. `cut` shortens the text to that many characters first (a string cut open is still a run of its own).
 */
export function jsonText(value, space, cut) {
  let text = JSON.stringify(value, null, space);
  if (text === undefined) return [];
  if (cut !== undefined && text.length > cut) text = text.slice(0, cut);
  return jsonRuns(text);
}

/** Text of JSON (maybe cut short) split so that each string's inside is a run of its own. */
export function jsonRuns(text) {
  const parts = [];
  let at = 0;
  for (const match of text.matchAll(/"((?:[^"\\]|\\[\s\S])*\\?)("?)/g)) {
    parts.push(text.slice(at, match.index + 1), match[1], match[2]);
    at = match.index + match[0].length;
  }
  parts.push(text.slice(at));
  return parts.filter((part) => part !== '');
}

/** Replace everything inside `parent` with `children`. */
export function replace(parent, ...children) {
  parent.replaceChildren();
  return append(parent, children);
}

let ids = 0;
/** A fresh id for label/control pairs. */
export function uid(prefix = 'f') {
  ids += 1;
  return `${prefix}-${ids}`;
}

/** A labelled control: the label's `for` names the control's id. */
export function field(label, control, hint) {
  if (!control.id) control.id = uid();
  const parts = [h('label', {for: control.id}, label), control];
  if (hint) {
    const hintId = uid('hint');
    control.setAttribute('aria-describedby', hintId);
    parts.push(h('small', {id: hintId, class: 'hint'}, hint));
  }
  return h('div', {class: 'field'}, parts);
}

/** A <select> of `options` ([value, label] pairs or plain values), `value` selected. */
export function select(name, options, value) {
  return h(
    'select',
    {name},
    options.map((option) => {
      const [optionValue, label] = Array.isArray(option) ? option : [option, option || 'any'];
      return h('option', {value: optionValue, selected: optionValue === (value || '')}, label);
    }),
  );
}

/**
 * A table in its scrolling wrapper: its class, its caption, its columns (a heading each, or [heading, class]) and
 * its rows (<tr> elements).
 */
export function dataTable(className, caption, columns, rows) {
  const heading = (column) => {
    const [label, wide] = Array.isArray(column) ? column : [column, null];
    return h('th', {scope: 'col', class: wide || null}, label);
  };
  return h(
    'div',
    {class: 'table-wrap'},
    h(
      'table',
      {class: className},
      h('caption', {class: 'muted'}, caption),
      h('thead', {}, h('tr', {}, columns.map(heading))),
      h('tbody', {}, rows),
    ),
  );
}

/** A definition list of [term, description] pairs (descriptions may be nodes). */
export function facts(pairs) {
  return h(
    'dl',
    {class: 'facts'},
    pairs.filter(([, d]) => d !== undefined).map(([t, d]) => [h('dt', {}, t), h('dd', {}, d === null ? '—' : d)]),
  );
}

/** A time as the reader's local time, with the exact value in a tooltip. */
export function time(iso) {
  if (!iso) return '—';
  const date = new Date(iso);
  return h('time', {datetime: iso, title: iso}, date.toLocaleString());
}

/** How long until `iso` (or since it), in words: "in 3 min 20 s", "expired 5 s ago". */
export function until(iso, now = Date.now()) {
  const ms = Date.parse(iso) - now;
  const words = duration(Math.abs(ms));
  return ms >= 0 ? `in ${words}` : `expired ${words} ago`;
}

/** A duration in words, largest two units. */
export function duration(ms) {
  let seconds = Math.floor(ms / 1000);
  const units = [['d', 86400], ['h', 3600], ['min', 60], ['s', 1]];
  const parts = [];
  for (const [unit, size] of units) {
    if (seconds >= size || (unit === 's' && parts.length === 0)) {
      parts.push(`${Math.floor(seconds / size)} ${unit}`);
      seconds %= size;
    }
    if (parts.length === 2) break;
  }
  return parts.join(' ');
}

/** Bytes in words. */
export function bytes(count) {
  if (count === null || count === undefined) return '—';
  if (count < 1024) return `${count} B`;
  if (count < 1024 * 1024) return `${(count / 1024).toFixed(1)} KB`;
  return `${(count / 1024 / 1024).toFixed(2)} MB`;
}
