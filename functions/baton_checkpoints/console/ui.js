// Shared pieces of the views: confirmations, error notes, copy buttons, pagers, the status line.

import {h, phrase, replace, uid} from './dom.js';

/** Say something in the status line (read out by screen readers): text, or children (phrase`… ${data} …`). */
export function announce(text) {
  const status = document.getElementById('status');
  replace(status, text ? h('p', {}, text) : null);
}

/** An error answer as a note: the contract's code and message, and each named field. */
export function errorNote(error) {
  const fields = (error.details?.errors || []).map((e) => h('li', {}, phrase`${e.pointer || '(body)'}: ${e.message}`));
  return h(
    'div',
    {class: 'note error', role: 'alert'},
    h('strong', {}, error.code || 'ERROR'),
    ' ',
    error.message,
    fields.length ? h('ul', {}, fields) : null,
    error.requestId ? h('small', {class: 'request-id'}, `request ${error.requestId}`) : null,
  );
}

/**
 * Ask before a destructive or writing action: a modal dialog showing what will happen. Resolves true only when
 * the confirm button is pressed; Escape, Cancel or closing resolve false.
 */
export function confirmAction({title, body, confirmLabel, danger = true}) {
  return new Promise((resolve) => {
    const cancel = h('button', {type: 'button', value: 'cancel'}, 'Cancel');
    const confirm = h('button', {type: 'submit', value: 'confirm', class: danger ? 'danger' : 'primary'}, confirmLabel);
    // Named by its heading: a title may be words with data (phrase`…`), each value isolated in the heading.
    const titleId = uid('dialog-title');
    const heading = h('h2', {id: titleId}, title);
    const form = h('form', {method: 'dialog'}, heading, h('div', {class: 'dialog-body'}, body), h('menu', {}, cancel, confirm));
    const dialog = h('dialog', {'aria-labelledby': titleId}, form);
    cancel.addEventListener('click', () => dialog.close('cancel'));
    dialog.addEventListener('close', () => {
      dialog.remove();
      resolve(dialog.returnValue === 'confirm');
    });
    document.body.append(dialog);
    dialog.showModal();
    cancel.focus();
  });
}

/** A button that copies `text` to the clipboard and says so. */
export function copyButton(text, label = 'Copy') {
  const button = h('button', {type: 'button', class: 'copy'}, label);
  button.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(text);
      replace(button, 'Copied');
      announce('Copied to the clipboard.');
    } catch {
      replace(button, 'Copy failed: select the text');
    }
    setTimeout(() => {
      replace(button, label);
    }, 2000);
  });
  return button;
}

/** "Next page" for a list whose answer gave `next_cursor`; `go(cursor)` shows that page. */
export function pager(nextCursor, go, previous) {
  return h(
    'nav',
    {class: 'pager', 'aria-label': 'Pages'},
    previous ? h('button', {type: 'button', on: {click: previous}}, 'First page') : null,
    nextCursor ? h('button', {type: 'button', on: {click: () => go(nextCursor)}}, 'Next page') : h('span', {class: 'muted'}, 'Last page'),
  );
}

/** A loading placeholder. */
export function loading(what = 'Loading') {
  return h('p', {class: 'muted', 'aria-busy': 'true'}, `${what}…`);
}

/** A section with a heading. */
export function section(title, ...children) {
  return h('section', {class: 'panel'}, h('h2', {}, title), children);
}
