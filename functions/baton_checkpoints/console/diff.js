// A structural diff of two JSON values, and a list that shows it. `diffJson` is a pure function (no DOM): it walks
// both values together and names each difference by its RFC 6901 pointer. Objects are compared key by key, arrays
// index by index (no move detection: an insertion at the front shows as changes down the array, which is what was
// stored), and a value whose type differs is one change. Values are shown as JSON text, never as HTML, each string
// of it (and each token of a pointer) a run of its own, so that stored text reorders only itself (dom.js, `append`).

import {h, jsonText} from './dom.js';

/** The longest value text shown whole in a change; longer ones are cut and can be opened. */
export const SHOWN_CHARACTERS = 120;

/** The most changes listed at once: a diff of two unrelated 3 MB states would otherwise build a huge list. */
export const LISTED_CHANGES = 500;

/** One reference token of an RFC 6901 pointer: `~` and `/` escaped. */
export function escapeToken(token) {
  return String(token).replaceAll('~', '~0').replaceAll('/', '~1');
}

function kindOf(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

/**
 * The differences from `before` to `after`: `[{op: 'added'|'removed'|'changed', pointer, before?, after?}]`, in the
 * order of a depth-first walk (object keys sorted as canonical JSON sorts them, array indexes ascending). An added
 * or removed member is one entry carrying its whole value; identical values give `[]`.
 */
export function diffJson(before, after) {
  const changes = [];
  const walk = (left, right, pointer) => {
    const leftKind = kindOf(left);
    const rightKind = kindOf(right);
    if (leftKind !== rightKind) {
      changes.push({op: 'changed', pointer, before: left, after: right});
      return;
    }
    if (leftKind === 'array') {
      const shared = Math.min(left.length, right.length);
      for (let index = 0; index < shared; index += 1) walk(left[index], right[index], `${pointer}/${index}`);
      for (let index = shared; index < left.length; index += 1) {
        changes.push({op: 'removed', pointer: `${pointer}/${index}`, before: left[index]});
      }
      for (let index = shared; index < right.length; index += 1) {
        changes.push({op: 'added', pointer: `${pointer}/${index}`, after: right[index]});
      }
      return;
    }
    if (leftKind === 'object') {
      const keys = [...new Set([...Object.keys(left), ...Object.keys(right)])].sort();
      for (const key of keys) {
        const child = `${pointer}/${escapeToken(key)}`;
        const inLeft = Object.prototype.hasOwnProperty.call(left, key);
        const inRight = Object.prototype.hasOwnProperty.call(right, key);
        if (inLeft && inRight) walk(left[key], right[key], child);
        else if (inLeft) changes.push({op: 'removed', pointer: child, before: left[key]});
        else changes.push({op: 'added', pointer: child, after: right[key]});
      }
      return;
    }
    if (left !== right) changes.push({op: 'changed', pointer, before: left, after: right});
  };
  walk(before, after, '');
  return changes;
}

/** A value as JSON text: whole when short, else cut with an ellipsis in a <details> that opens to the whole. */
export function valueText(value, className) {
  const compact = JSON.stringify(value);
  if (compact.length <= SHOWN_CHARACTERS) return h('code', {class: className}, jsonText(value));
  return h(
    'details',
    {class: `value-long ${className}`},
    h(
      'summary',
      {},
      h('code', {}, jsonText(value, undefined, SHOWN_CHARACTERS), '…'),
      h('span', {class: 'muted'}, ` (${compact.length.toLocaleString('en')} characters)`),
    ),
    h('pre', {}, jsonText(value, 2)),
  );
}

const WORDS = {added: 'added', removed: 'removed', changed: 'changed'};

/** A pointer as text: its slashes, and each reference token a run of its own. */
export function pointerText(pointer) {
  return pointer
    .split('/')
    .flatMap((token, index) => (index === 0 ? [token] : ['/', token]))
    .filter((part) => part !== '');
}

/** The changes as `ul.diff`, one item per change (class added, removed or changed), at most LISTED_CHANGES. */
export function renderDiff(changes, {label = 'Changes'} = {}) {
  const shown = changes.slice(0, LISTED_CHANGES);
  const list = h(
    'ul',
    {class: 'diff', 'aria-label': label},
    shown.map((change) =>
      h(
        'li',
        {class: change.op, dataset: {pointer: change.pointer}},
        h('span', {class: 'op'}, WORDS[change.op]),
        ' ',
        h('code', {class: 'pointer'}, change.pointer === '' ? '(the whole state)' : pointerText(change.pointer)),
        h(
          'div',
          {class: 'values'},
          change.op === 'added' ? null : valueText(change.before, 'before'),
          change.op === 'changed' ? h('span', {class: 'arrow', 'aria-label': 'becomes'}, ' → ') : null,
          change.op === 'removed' ? null : valueText(change.after, 'after'),
        ),
      ),
    ),
  );
  const more = changes.length - shown.length;
  return more > 0 ? [list, h('p', {class: 'muted'}, `and ${more.toLocaleString('en')} more changes not listed.`)] : list;
}
