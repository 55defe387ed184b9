// Building the page: elements from data, text always as text. Nothing in the console sets HTML from a string
// (no innerHTML, no insertAdjacentHTML): whatever a checkpoint holds, `<script>` included, shows as the characters.

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

/** Append children (text, nodes, arrays of them) to `parent`. */
export function append(parent, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return parent;
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
