// A JSON value as a collapsible tree with a search box. Every key and value is shown as text (a state holding
// `<script>` shows those characters), the inside of each string a run of its own between its quotes, so that a key
// or value holding bidi controls reorders only itself (dom.js, `append`). Children are built when their branch is
// first opened, so a 3 MB state costs only what is shown; a search walks the value itself and opens the branches
// that lead to each match.

import {field, h, phrase, replace} from './dom.js';

const CHUNK = 200;
const MAX_MATCHES = 500;

/** RFC 6901 pointer of `parts`. */
export function pointerOf(parts) {
  return parts.map((p) => '/' + String(p).replaceAll('~', '~0').replaceAll('/', '~1')).join('');
}

/** Every pointer whose key or primitive value contains `needle` (lower case), up to MAX_MATCHES. */
export function search(value, needle) {
  const found = [];
  const walk = (node, parts) => {
    if (found.length >= MAX_MATCHES) return;
    if (node !== null && typeof node === 'object') {
      const entries = Array.isArray(node) ? node.map((v, i) => [i, v]) : Object.entries(node);
      for (const [key, child] of entries) {
        const childParts = [...parts, key];
        if (!Array.isArray(node) && String(key).toLowerCase().includes(needle)) found.push(pointerOf(childParts));
        walk(child, childParts);
        if (found.length >= MAX_MATCHES) return;
      }
    } else if (parts.length && String(node).toLowerCase().includes(needle)) {
      const pointer = pointerOf(parts);
      if (found[found.length - 1] !== pointer) found.push(pointer);
    }
  };
  walk(value, []);
  return found;
}

/** `text` as text nodes, with each occurrence of `needle` (lower case) in a <mark>. */
function marked(text, needle) {
  if (!needle) return [text];
  const lower = text.toLowerCase();
  const parts = [];
  let at = 0;
  const mark = (start, end) => {
    if (start > at) parts.push(text.slice(at, start));
    parts.push(h('mark', {}, text.slice(start, end)));
    at = end;
  };
  if (lower.length === text.length) {
    // Lower-casing kept every offset: find the matches in the lower-cased copy.
    for (let next = lower.indexOf(needle); next !== -1; next = lower.indexOf(needle, at)) mark(next, next + needle.length);
  } else {
    // Some character lower-cases to more (İ to i̇): compare the text itself, place by place.
    for (let start = 0; start < text.length; ) {
      let end = start;
      let folded = '';
      while (end < text.length && folded.length < needle.length) folded += text[end++].toLowerCase();
      if (folded === needle) {
        mark(start, end);
        start = end;
      } else {
        start += 1;
      }
    }
  }
  if (at < text.length) parts.push(text.slice(at));
  return parts;
}

/** A string as JSON writes it: its quotes around its escaped inside, which is a run (or runs, when marked) of its own. */
function quoted(text, needle) {
  return ['"', marked(JSON.stringify(text).slice(1, -1), needle), '"'];
}

function primitive(value, needle) {
  if (value === null) return h('span', {class: 'null'}, 'null');
  const kind = typeof value;
  return h('span', {class: kind}, kind === 'string' ? quoted(value, needle) : marked(String(value), needle));
}

function keyLabel(key, isIndex, needle) {
  if (key === undefined) return null;
  return [h('span', {class: 'key'}, isIndex ? `${key}` : quoted(String(key), needle)), ': '];
}

/**
 * The tree of `value`. Options: `label` (the root's name), `open` (levels open at first, default 1), `search`
 * (a search box, default true).
 */
export function jsonTree(value, {label = 'state', open = 1, search: withSearch = true} = {}) {
  const tree = h('div', {class: 'tree', role: 'region', 'aria-label': label});
  const state = {needle: '', paths: new Set(), matches: new Set()};

  const branch = (node, key, isIndex, parts, depth) => {
    const pointer = pointerOf(parts);
    if (node === null || typeof node !== 'object') {
      const item = h('li', {dataset: {pointer}}, keyLabel(key, isIndex, state.needle), primitive(node, state.needle));
      if (state.matches.has(pointer)) item.classList.add('match');
      return item;
    }
    const entries = Array.isArray(node) ? node.map((v, i) => [i, v]) : Object.entries(node);
    const count = Array.isArray(node) ? `[${entries.length}]` : `{${entries.length}}`;
    const summary = h('summary', {}, keyLabel(key, isIndex, state.needle), h('span', {class: 'count'}, count));
    const details = h('details', {}, summary);
    const list = h('ul', {});
    let shown = 0;
    const more = () => {
      const next = entries.slice(shown, shown + CHUNK);
      for (const [childKey, child] of next) {
        list.append(branch(child, childKey, Array.isArray(node), [...parts, childKey], depth + 1));
      }
      shown += next.length;
      list.querySelector(':scope > li.more')?.remove();
      if (shown < entries.length) {
        const button = h('button', {type: 'button', on: {click: more}}, `Show ${Math.min(CHUNK, entries.length - shown)} more of ${entries.length - shown}`);
        list.append(h('li', {class: 'more'}, button));
      }
    };
    details.addEventListener('toggle', () => {
      if (details.open && shown === 0 && entries.length) more();
    });
    details.append(list);
    if (depth < open || state.paths.has(pointer)) details.open = true;
    if (details.open && entries.length) more();
    // A search match past the first chunk: build the chunks up to the last child on a match's way.
    if (state.paths.has(pointer) && state.needle) {
      let last = -1;
      entries.forEach(([childKey], index) => {
        if (state.paths.has(pointerOf([...parts, childKey]))) last = index;
      });
      while (shown <= last) more();
    }
    if (state.matches.has(pointer)) summary.classList.add('match');
    return h('li', {dataset: {pointer}}, details);
  };

  const draw = () => replace(tree, h('ul', {}, branch(value, undefined, false, [], 0)));

  const count = h('span', {class: 'muted', 'aria-live': 'polite'});
  const input = h('input', {type: 'search', name: 'tree-search', placeholder: 'key or value', autocomplete: 'off'});
  const run = () => {
    const needle = input.value.trim().toLowerCase();
    state.needle = needle;
    state.paths = new Set();
    state.matches = new Set();
    if (needle) {
      const found = search(value, needle);
      for (const pointer of found) {
        state.matches.add(pointer);
        const segments = pointer.split('/').slice(1);
        for (let i = 0; i <= segments.length; i += 1) state.paths.add(segments.slice(0, i).map((s) => '/' + s).join(''));
      }
      replace(count, found.length >= MAX_MATCHES ? `${MAX_MATCHES}+ matches` : `${found.length} match${found.length === 1 ? '' : 'es'}`);
    } else {
      replace(count);
    }
    draw();
  };
  let timer = null;
  input.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(run, 150);
  });
  input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter') {
      event.preventDefault();
      clearTimeout(timer);
      run();
    }
  });
  const setAll = (openAll) => {
    for (const details of tree.querySelectorAll('details')) details.open = openAll;
  };
  draw();
  if (!withSearch) return tree;
  const tools = h(
    'div',
    {class: 'tree-tools'},
    field(phrase`Search the ${label}`, input),
    h('button', {type: 'button', on: {click: () => setAll(true)}}, 'Expand shown'),
    h('button', {type: 'button', on: {click: () => setAll(false)}}, 'Collapse all'),
    count,
  );
  return h('div', {class: 'tree-wrap'}, tools, tree);
}
