// Audit: the tenant's management events (`GET /v1/audit`), newest first, filtered by action and time, page by page.
// Each row shows who did what to what and when; the page's own links are checked here (each event names the hash
// of the one before it), and `baton audit verify` checks the whole chain.

import {get, query} from './api.js';
import {dataTable, field, h, phrase, replace, select, time} from './dom.js';
import {errorNote, loading, pager} from './ui.js';

const ACTIONS = [
  'key.issued',
  'key.revoked',
  'subject.purged',
  'thread.deleted',
  'limits.changed',
  'lease.taken_over',
  'grant.approved',
  'grant.revoked',
];

/** A `datetime-local` value (the reader's local time) as RFC 3339 UTC, or '' when empty or not a time. */
function localToUtc(value) {
  if (!value) return '';
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? '' : date.toISOString();
}

function short(hash) {
  return h('code', {title: hash}, `${hash.slice(0, 10)}…`);
}

/** The details of an event as `name: value` pairs, values as compact JSON when they are not text. */
function details(values) {
  const entries = Object.entries(values || {});
  if (!entries.length) return '—';
  return entries.map(([name, value]) => `${name}: ${typeof value === 'string' ? value : JSON.stringify(value)}`).join('; ');
}

/** Whether each event of the page names the hash of the one after it (the page is newest first). */
function linked(events) {
  for (let i = 0; i + 1 < events.length; i += 1) {
    if (events[i].seq !== events[i + 1].seq + 1 || events[i].prev_hash !== events[i + 1].hash) return false;
  }
  return true;
}

function table(events) {
  const columns = ['#', 'When', 'Action', 'Actor', 'Target', 'Outcome', 'Details', 'Hash'];
  return dataTable(
    'audit-table',
    'Newest first',
    columns,
    events.map((event) =>
      h(
        'tr',
        {},
        h('th', {scope: 'row'}, String(event.seq)),
        h('td', {}, time(event.at)),
        h('td', {}, h('code', {}, event.action)),
        h(
          'td',
          {title: event.actor.key_id || ''},
          event.actor.agent_id ? event.actor.agent_id : h('span', {class: 'muted'}, 'Baton'),
        ),
        h('td', {}, phrase`${event.target.type} ${event.target.id}`),
        h('td', {}, h('span', {class: `badge ${event.outcome === 'succeeded' ? 'active' : 'failed'}`}, event.outcome)),
        h('td', {class: 'audit-details'}, details(event.details)),
        h('td', {}, short(event.hash)),
      ),
    ),
  );
}

export async function render(root, ctx) {
  const values = {};
  for (const name of ['action', 'from', 'to', 'cursor']) values[name] = ctx.params.get(name) || '';
  const action = select('action', [['', 'every action'], ...ACTIONS], values.action);
  const from = h('input', {name: 'from', type: 'datetime-local', step: 1});
  const to = h('input', {name: 'to', type: 'datetime-local', step: 1});
  const form = h(
    'form',
    {class: 'filters', 'aria-label': 'Audit filters'},
    field('Action', action),
    field('From', from, values.from ? phrase`Now: ${values.from}` : 'Empty: the oldest kept.'),
    field('To', to, values.to ? phrase`Now: ${values.to}` : 'Empty: now.'),
    h('div', {class: 'field'}, h('button', {type: 'submit', class: 'primary'}, 'Show events')),
  );
  const go = (parameters) => ctx.navigate(ctx.href('audit', [], parameters));
  const chosen = {action: values.action, from: values.from, to: values.to};
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    go({action: action.value, from: localToUtc(from.value) || values.from, to: localToUtc(to.value) || values.to});
  });
  const answerSlot = h('div', {class: 'audit-answer', 'aria-live': 'polite'}, loading('Reading the audit trail'));
  replace(
    root,
    h('h1', {}, 'Audit'),
    h(
      'p',
      {class: 'muted'},
      'Every management action of this tenant: keys issued and revoked, subjects purged, threads deleted, limits ',
      'changed, leases taken over, OAuth grants approved and revoked. Each event carries the hash of the one before ',
      'it; ',
      h('code', {}, 'baton audit verify'),
      ' checks the whole chain.',
    ),
    form,
    answerSlot,
  );
  try {
    const parameters = {...chosen, cursor: values.cursor, limit: 50};
    const answer = await get(`/v1/audit${query(parameters)}`);
    if (!ctx.current()) return;
    const events = answer.data;
    const head = answer.meta.head;
    const status = events.length
      ? h(
          'p',
          {class: 'audit-summary'},
          `The trail's last event is #${head.seq}. `,
          linked(events)
            ? 'Each event on this page names the one before it.'
            : chosen.action || chosen.from || chosen.to
              ? 'The page is filtered: its events are not consecutive.'
              : 'Events on this page do not follow one another: run baton audit verify.',
        )
      : h('p', {class: 'muted'}, values.cursor ? 'No more events.' : 'No event matches.');
    replace(
      answerSlot,
      status,
      events.length ? table(events) : null,
      pager(
        answer.meta.next_cursor,
        (next) => go({...chosen, cursor: next}),
        values.cursor ? () => go(chosen) : null,
      ),
    );
  } catch (error) {
    if (ctx.current()) replace(answerSlot, errorNote(error));
  }
}
