// The console's shell: sign-in, the navigation the key's scopes allow, and a hash router that loads each view's
// module when it is first shown. Views get a context: the caller (GET /v1/whoami), the route's parts and
// parameters, and helpers to link and to move between views.

import {ApiError, get, signIn, signOut, signedInKey} from './api.js';
import {field, h, phrase, replace} from './dom.js';
import {announce, errorNote, loading} from './ui.js';

/** The sections, the scope each needs (a key without it is not offered the section), and their modules. */
export const SECTIONS = [
  {name: 'checkpoints', label: 'Checkpoints', scope: 'checkpoints:read', module: './view-checkpoints.js'},
  {name: 'threads', label: 'LangGraph threads', scope: 'checkpoints:read', module: './view-threads.js'},
  {name: 'resume', label: 'Resume preview', scope: 'checkpoints:read', module: './view-resume.js'},
  {name: 'keys', label: 'Keys', scope: 'keys:manage', module: './view-keys.js'},
  {name: 'usage', label: 'Usage', scope: 'usage:read', module: './view-usage.js'},
  {name: 'audit', label: 'Audit', scope: 'audit:read', module: './view-audit.js'},
  // Reached from a checkpoint, not from the navigation.
  {name: 'history', label: 'History', scope: 'checkpoints:read', module: './view-history.js', hidden: true},
];

const view = document.getElementById('view');
let caller = null;
let leaving = [];
let rendering = 0;

/** A link target inside the console: `#/section/part/part?name=value`. */
export function href(section, parts = [], parameters = {}) {
  const path = [section, ...parts].map((p) => encodeURIComponent(p)).join('/');
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(parameters)) {
    if (value !== undefined && value !== null && value !== '') search.set(name, String(value));
  }
  const text = search.toString();
  return `#/${path}${text ? `?${text}` : ''}`;
}

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [pathText, searchText = ''] = raw.split('?');
  let parts;
  try {
    parts = pathText.split('/').filter(Boolean).map((p) => decodeURIComponent(p));
  } catch {
    return {section: '', parts: [], params: new URLSearchParams(), malformed: true};
  }
  return {section: parts[0] || '', parts: parts.slice(1), params: new URLSearchParams(searchText)};
}

function can(scope) {
  return Boolean(caller && caller.effective_scopes.includes(scope));
}

function renderNav() {
  const nav = document.getElementById('nav');
  const who = document.getElementById('who');
  if (!caller) {
    nav.hidden = true;
    who.hidden = true;
    replace(nav);
    replace(who);
    return;
  }
  const current = parseHash().section;
  const offered = SECTIONS.filter((s) => !s.hidden && can(s.scope));
  replace(
    nav,
    h(
      'ul',
      {},
      offered.map((s) =>
        h('li', {}, h('a', {href: href(s.name), 'aria-current': s.name === current ? 'page' : null}, s.label)),
      ),
    ),
  );
  replace(
    who,
    h('span', {class: 'identity', title: `key ${caller.key_id}`}, phrase`${caller.tenant_id} / ${caller.agent_id}`),
    h('button', {type: 'button', on: {click: () => leave('Signed out.')}}, 'Sign out'),
  );
  nav.hidden = false;
  who.hidden = false;
}

function leave(message) {
  signOut();
  // The address names what the previous key was looking at (a subject, a thread): the next key to sign in starts
  // from the console's start, not from there (its view would open, and remember, the previous key's subject).
  history.replaceState(null, '', location.pathname + location.search);
  caller = null;
  renderNav();
  showSignIn(message ? h('div', {class: 'note'}, message) : null);
}

function showSignIn(notice) {
  rendering += 1; // a view still waiting for an answer must not draw over the sign-in
  stopView();
  const input = h('input', {
    type: 'password',
    name: 'key',
    autocomplete: 'off',
    spellcheck: 'false',
    required: true,
    placeholder: 'btn_…',
  });
  const problem = h('div', {'aria-live': 'assertive'});
  const form = h(
    'form',
    {class: 'signin', 'aria-labelledby': 'signin-title'},
    h('h1', {id: 'signin-title'}, 'Sign in'),
    h('p', {}, 'Paste an API key. It stays in this tab only (sessionStorage) and goes to Baton as the bearer header.'),
    notice,
    field('API key', input),
    problem,
    h('button', {type: 'submit', class: 'primary'}, 'Sign in'),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const key = input.value.trim();
    if (!key) return;
    signIn(key);
    replace(problem, loading('Checking the key'));
    try {
      caller = (await get('/v1/whoami')).data;
    } catch (failure) {
      signOut();
      replace(problem, errorNote(failure));
      input.focus();
      return;
    }
    input.value = '';
    renderNav();
    const first = SECTIONS.find((s) => !s.hidden && can(s.scope));
    if (location.hash && parseHash().section) route();
    else location.hash = first ? href(first.name) : '#/';
  });
  replace(view, form);
  document.title = 'Sign in · Baton console';
  input.focus();
}

function stopView() {
  for (const stop of leaving) stop();
  leaving = [];
  // A confirmation left open (Back pressed while it asked) belongs to the view being left: it answers "cancel".
  for (const dialog of document.querySelectorAll('dialog[open]')) dialog.close('cancel');
}

/** After a view is drawn for a navigation, put the focus on its heading (or the view), so that a keyboard or
 * screen-reader user starts there, unless the view already placed it inside itself. */
function focusView() {
  if (view.contains(document.activeElement) && document.activeElement !== view) return;
  const heading = view.querySelector('h1');
  if (heading) {
    heading.setAttribute('tabindex', '-1');
    heading.focus({preventScroll: false});
  } else {
    view.focus();
  }
}

async function route(focusAfter = false) {
  if (!signedInKey() || !caller) return;
  const ticket = ++rendering;
  stopView();
  renderNav();
  announce('');
  const {section, parts, params, malformed} = parseHash();
  if (malformed) {
    replace(view, h('h1', {}, 'Not found'), h('p', {}, 'This address is not one the console knows.'),
      h('p', {}, h('a', {href: '#/'}, 'Go to the start')));
    focusView();
    return;
  }
  const named = SECTIONS.find((s) => s.name === section);
  const found = named || SECTIONS.find((s) => !s.hidden && can(s.scope));
  if (!found) {
    replace(view, h('h1', {}, 'Nothing to show'), h('p', {}, 'This key holds none of the scopes the console shows.'));
    focusView();
    return;
  }
  if (!can(found.scope)) {
    replace(
      view,
      h('h1', {}, `No access to ${found.label.toLowerCase()}`),
      h('p', {}, `This key lacks the scope ${found.scope}, which ${found.label.toLowerCase()} needs.`),
    );
    focusView();
    return;
  }
  replace(view, loading());
  const module = await import(found.module);
  if (ticket !== rendering) return;
  const root = h('div', {class: `view view-${found.name}`});
  replace(view, root);
  document.title = `${found.label} · Baton console`;
  const context = {
    caller,
    parts,
    params,
    can,
    href,
    navigate: (target) => {
      location.hash = target;
    },
    onLeave: (stop) => leaving.push(stop),
    current: () => ticket === rendering,
    refresh: () => route(),
  };
  try {
    await module.render(root, context);
    if (ticket === rendering && focusAfter) focusView();
  } catch (failure) {
    if (ticket !== rendering) return;
    if (failure instanceof ApiError && failure.status === 401) return; // signed out: the event shows the sign-in
    replace(root, failure instanceof ApiError ? errorNote(failure) : h('p', {class: 'note error'}, String(failure)));
    if (!(failure instanceof ApiError)) console.warn(failure);
  }
}

window.addEventListener('baton:signed-out', (event) => {
  caller = null;
  renderNav();
  showSignIn(errorNote(event.detail));
});
window.addEventListener('hashchange', () => {
  // Only the console's own addresses (`#/…`) are routes; any other fragment is left to the page.
  if (location.hash === '' || location.hash.startsWith('#/')) route(true);
});
// "Skip to content" moves the focus to the view without touching the address (which holds the route).
document.querySelector('.skip').addEventListener('click', (event) => {
  event.preventDefault();
  view.focus();
});

async function start() {
  if (!signedInKey()) {
    showSignIn(null);
    return;
  }
  replace(view, loading('Checking the key'));
  try {
    caller = (await get('/v1/whoami')).data;
  } catch (failure) {
    if (failure.status !== 401) showSignIn(errorNote(failure));
    return;
  }
  route();
}

start();
