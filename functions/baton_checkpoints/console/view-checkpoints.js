// Checkpoints: a subject's checkpoints (filtered, paged, newest first) and one checkpoint in full: its metadata and
// ETag, expiry counting down, its state as a tree, its resources, an OpenCheckpoint document laid out, its lease, and
// deletion. Everything goes through the public API; everything a checkpoint holds is shown as text.

import {del, get, path, post, query} from './api.js';
import {bytes, dataTable, duration, facts, field, h, jsonText, phrase, replace, select, time, until} from './dom.js';
import {jsonTree} from './json-tree.js';
import {announce, confirmAction, copyButton, errorNote, loading, pager, section} from './ui.js';

const KINDS = ['task_state', 'conversation', 'workflow', 'cursor'];
const STATUSES = ['active', 'completed', 'cancelled'];
const PAGE_SIZES = ['5', '10', '25', '50', '100', '200'];
const DEFAULT_PAGE_SIZE = '50';
const RECENT = 'baton.recent-subjects';
const RECENT_MAX = 10;
const CHECKPOINT_ID = /^ckpt_[0-9a-f]{32}$/;
const OPENCHECKPOINT = 'opencheckpoint/0.1';
// An operation in one of these states is finished; any other status is pending (docs/api.md, "Resume").
const FINISHED = new Set(['done', 'completed', 'cancelled', 'failed']);
const LEASE_TTL = {min: 10, max: 86400, default: 300};

// Lease tokens this tab was given, by checkpoint id: kept in memory only (never stored), so "Release" can send it;
// forgotten when the tab signs out (the next key to sign in must not be handed another holder's token).
const leaseTokens = new Map();
window.addEventListener('baton:session-ended', () => leaseTokens.clear());

/** The view: the list of a subject's checkpoints, or one checkpoint when the hash names it. */
export async function render(root, ctx) {
  if (ctx.parts.length > 0) {
    await renderCheckpoint(root, ctx, ctx.parts[0]);
  } else {
    await renderList(root, ctx);
  }
}

// ---- pieces ----------------------------------------------------------------------------------------------------

/** A one-line text control that takes identifiers and tokens as typed (no autocompletion or spelling fixes). */
function textInput(name, value, extra = {}) {
  return h('input', {type: 'text', name, value, autocomplete: 'off', spellcheck: 'false', ...extra});
}

/** A table that scrolls sideways on its own when narrow: column titles, then one row of cells per item. */
function table(className, titles, items, cells) {
  return h(
    'div',
    {class: 'table-wrap'},
    h(
      'table',
      {class: className},
      h('thead', {}, h('tr', {}, titles.map((title) => h('th', {scope: 'col'}, title)))),
      h('tbody', {}, items.map((item) => h('tr', {}, cells(item).map((cell) => h('td', {}, cell))))),
    ),
  );
}

let panels = 0;
/** A panel whose heading names it (for screen readers' region lists); `name` is its class. */
function panel(name, title, ...children) {
  panels += 1;
  const id = `${name}-title-${panels}`;
  return h('section', {class: `panel ${name}`, 'aria-labelledby': id}, h('h2', {id}, title), children);
}

// ---- the list -------------------------------------------------------------------------------------------------

function recentSubjects() {
  try {
    const stored = JSON.parse(sessionStorage.getItem(RECENT) || '[]');
    return Array.isArray(stored) ? stored.filter((s) => typeof s === 'string').slice(0, RECENT_MAX) : [];
  } catch {
    return [];
  }
}

function rememberSubject(subject) {
  const kept = [subject, ...recentSubjects().filter((s) => s !== subject)].slice(0, RECENT_MAX);
  sessionStorage.setItem(RECENT, JSON.stringify(kept));
}

/** The filters of the list as the hash holds them, with the defaults filled in. */
function listFilters(ctx) {
  const params = ctx.params;
  // A `*` key may list every agent's checkpoints: that is what such a key most often wants to see.
  const everyAgent = holdsEveryAgent(ctx);
  return {
    subject: params.get('subject') || '',
    kind: params.get('kind') || '',
    status: params.get('status') || '',
    agent: params.has('agent') ? params.get('agent') : everyAgent ? '*' : '',
    limit: PAGE_SIZES.includes(params.get('limit')) ? params.get('limit') : DEFAULT_PAGE_SIZE,
    cursor: params.get('cursor') || '',
  };
}

function holdsEveryAgent(ctx) {
  return (ctx.caller.scopes || []).includes('*');
}

/**
 * The `agent_id` the list asks for. The API lists every agent's work when a `*` key names none (an `agent_id` is an
 * agent's name: `*` itself is refused), and only the caller's own for any other key; so `*` and an empty field
 * both send none.
 */
function agentQuery(agent) {
  return agent === '*' ? '' : agent;
}

function listHref(ctx, filters) {
  const {subject, kind, status, agent, limit, cursor} = filters;
  return ctx.href('checkpoints', [], {
    subject,
    kind,
    status,
    agent,
    limit: limit === DEFAULT_PAGE_SIZE ? '' : limit,
    cursor,
  });
}

function subjectForm(ctx, filters) {
  const input = textInput('subject', filters.subject, {required: true});
  const form = h(
    'form',
    {class: 'filters ckpt-filters', 'aria-label': 'Find a subject'},
    field('Subject id', input, 'Baton lists no subjects: name the one whose checkpoints you want.'),
    h('div', {class: 'actions'}, h('button', {type: 'submit', class: 'primary'}, 'Show checkpoints')),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const subject = input.value; // as typed: a subject id may begin or end with spaces
    if (!subject) return;
    ctx.navigate(listHref(ctx, {...listFilters(ctx), subject, cursor: ''}));
  });
  return form;
}

function openByIdForm(ctx) {
  const input = textInput('checkpoint_id', '', {required: true, placeholder: 'ckpt_…'});
  const problem = h('div', {'aria-live': 'polite'});
  const form = h(
    'form',
    {class: 'filters ckpt-filters', 'aria-label': 'Open a checkpoint by id', novalidate: true},
    field('Checkpoint id', input, 'ckpt_ followed by 32 lowercase hex digits.'),
    h('div', {class: 'actions'}, h('button', {type: 'submit'}, 'Open checkpoint')),
    problem,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const id = input.value.trim();
    if (!CHECKPOINT_ID.test(id)) {
      replace(problem, h('p', {class: 'note error'}, 'A checkpoint id is ckpt_ followed by 32 lowercase hex digits.'));
      input.focus();
      return;
    }
    ctx.navigate(ctx.href('checkpoints', [id]));
  });
  return form;
}

function recentList(ctx, filters) {
  const recent = recentSubjects();
  if (!recent.length) return null;
  return h(
    'nav',
    {class: 'ckpt-recent', 'aria-label': 'Subjects opened in this tab'},
    h('h2', {}, 'Opened in this tab'),
    h(
      'ul',
      {},
      recent.map((subject) =>
        h(
          'li',
          {},
          h(
            'a',
            {
              href: listHref(ctx, {...filters, subject, cursor: ''}),
              'aria-current': subject === filters.subject ? 'page' : null,
            },
            subject,
          ),
        ),
      ),
    ),
  );
}

function filterForm(ctx, filters) {
  const kind = select('kind', [['', 'any kind'], ...KINDS], filters.kind);
  const status = select('status', [['', 'any status'], ...STATUSES], filters.status);
  const agent = textInput('agent_id', filters.agent);
  const limit = select('limit', PAGE_SIZES, filters.limit);
  const form = h(
    'form',
    {class: 'filters ckpt-filters', 'aria-label': 'Filters'},
    field('Kind', kind),
    field(
      'Agent',
      agent,
      holdsEveryAgent(ctx)
        ? '* (or empty) for every agent, or one agent’s id.'
        : 'This key sees its own agent’s work only.',
    ),
    field('Status', status),
    field('Per page', limit),
    h('div', {class: 'actions'}, h('button', {type: 'submit', class: 'primary'}, 'Apply filters')),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    ctx.navigate(
      listHref(ctx, {
        subject: filters.subject,
        kind: kind.value,
        status: status.value,
        agent: agent.value.trim(),
        limit: limit.value,
        cursor: '',
      }),
    );
  });
  return form;
}

function statusBadge(status) {
  return h('span', {class: `badge ${STATUSES.includes(status) ? status : ''}`}, status);
}

function summaryRow(ctx, summary) {
  return h(
    'tr',
    {},
    h('td', {class: 'id'}, h('a', {href: ctx.href('checkpoints', [summary.checkpoint_id]), class: 'mono'}, summary.checkpoint_id)),
    h('td', {}, summary.kind),
    h('td', {}, summary.agent_id),
    h('td', {}, statusBadge(summary.status)),
    h('td', {class: 'wide'}, String(summary.revision)),
    h('td', {class: 'wide'}, time(summary.updated_at)),
    h('td', {}, h('span', {title: summary.expires_at}, until(summary.expires_at))),
    h('td', {}, summary.lease ? summary.lease.holder : h('span', {class: 'muted'}, '—')),
  );
}

function checkpointTable(ctx, summaries) {
  const headings = [
    ['Checkpoint', ''],
    ['Kind', ''],
    ['Agent', ''],
    ['Status', ''],
    ['Revision', 'wide'],
    ['Updated', 'wide'],
    ['Expires', ''],
    ['Lease holder', ''],
  ];
  return dataTable('ckpt-list', 'Newest first', headings, summaries.map((summary) => summaryRow(ctx, summary)));
}

async function renderList(root, ctx) {
  const filters = listFilters(ctx);
  const results = h('div', {class: 'ckpt-results'});
  replace(
    root,
    h('h1', {}, 'Checkpoints'),
    h(
      'div',
      {class: 'ckpt-finders'},
      section('A subject', subjectForm(ctx, filters)),
      section('A checkpoint', openByIdForm(ctx)),
    ),
    recentList(ctx, filters),
    results,
  );
  if (!filters.subject) return;

  replace(results, loading('Loading checkpoints'));
  const parameters = {
    kind: filters.kind,
    status: filters.status,
    agent_id: agentQuery(filters.agent),
    limit: filters.limit,
    cursor: filters.cursor,
  };
  const url = `/v1/subjects/${path(filters.subject)}/checkpoints${query(parameters)}`;
  let answer;
  try {
    answer = await get(url);
  } catch (failure) {
    if (!ctx.current()) return;
    if (failure.status === 401) throw failure;
    // A cursor that no longer fits the query is the likeliest 400 here: offer the way back to the first page.
    const first = filters.cursor ? () => ctx.navigate(listHref(ctx, {...filters, cursor: ''})) : null;
    replace(
      results,
      section(
        phrase`Subject ${filters.subject}`,
        filterForm(ctx, filters),
        errorNote(failure),
        first ? pager(null, () => {}, first) : null,
      ),
    );
    return;
  }
  if (!ctx.current()) return;
  rememberSubject(filters.subject);
  const summaries = answer.data || [];
  const first = filters.cursor ? () => ctx.navigate(listHref(ctx, {...filters, cursor: ''})) : null;
  replace(
    results,
    section(
      phrase`Subject ${filters.subject}`,
      filterForm(ctx, filters),
      summaries.length
        ? checkpointTable(ctx, summaries)
        : h('p', {class: 'muted'}, filters.cursor ? 'No more checkpoints.' : 'No live checkpoint matches.'),
      pager(answer.meta.next_cursor, (cursor) => ctx.navigate(listHref(ctx, {...filters, cursor})), first),
    ),
  );
  // Replace the recent subjects now that this one is remembered (it may be new).
  const stale = root.querySelector('.ckpt-recent');
  const fresh = recentList(ctx, filters);
  if (stale && fresh) stale.replaceWith(fresh);
  else if (fresh) results.before(fresh);
}

// ---- one checkpoint -------------------------------------------------------------------------------------------

/**
 * Spans that show "in 3 min 20 s" for a time, refreshed every second until the view is left. `span(iso)` makes one;
 * `reset()` forgets those of a page that was drawn again.
 */
function countdowns(ctx) {
  let live = [];
  const timer = setInterval(() => {
    if (!ctx.current()) return;
    for (const [span, iso] of live) replace(span, until(iso));
  }, 1000);
  ctx.onLeave(() => clearInterval(timer));
  return {
    span(iso) {
      const span = h('span', {class: 'countdown'}, until(iso));
      live.push([span, iso]);
      return span;
    },
    reset() {
      live = [];
    },
  };
}

function textList(items, empty) {
  if (!Array.isArray(items) || !items.length) return h('span', {class: 'muted'}, empty);
  return h('ul', {class: 'ckpt-items'}, items.map((item) => h('li', {}, asText(item))));
}

/** A value of a document as text: a string as it is, anything else as JSON (each string of it a run of its own). */
function asText(value) {
  if (value === null || value === undefined) return null;
  return typeof value === 'string' ? value : jsonText(value);
}

/** An OpenCheckpoint 0.1 document laid out: the task, the pending operations and the stop conditions. */
function openCheckpointPanel(documentState) {
  const task = documentState && typeof documentState.task === 'object' && documentState.task ? documentState.task : {};
  const known = ['title', 'status', 'objective', 'success_criteria', 'done', 'next'];
  const otherTaskFields = Object.entries(task)
    .filter(([name]) => !known.includes(name))
    .map(([name, value]) => [name, asText(value)]);
  const operations = Array.isArray(documentState?.operations) ? documentState.operations : [];
  const pending = operations.filter((op) => op && typeof op === 'object' && !FINISHED.has(op.status));
  const stopConditions = documentState?.continuation?.stop_conditions;
  const stops = Array.isArray(stopConditions) ? stopConditions : [];
  return panel(
    'ckpt-ocp',
    'OpenCheckpoint document',
    h('h3', {}, 'Task'),
    facts([
      ['Title', asText(task.title)],
      ['Status', asText(task.status)],
      ...(task.objective !== undefined ? [['Objective', asText(task.objective)]] : []),
      ['Success criteria', textList(task.success_criteria, 'none stated')],
      ['Done', textList(task.done, 'none stated')],
      ['Next', textList(task.next, 'none stated')],
      ...otherTaskFields,
    ]),
    h('h3', {}, `Pending operations (${pending.length} of ${operations.length})`),
    pending.length
      ? table('ckpt-operations', ['Kind', 'Status', 'Description', 'Owner', 'Safe to repeat'], pending, (op) => [
          asText(op.kind),
          h('span', {class: 'badge'}, asText(op.status)),
          asText(op.description),
          asText(op.owner) ?? '—',
          op.repeat_safe === undefined ? '—' : op.repeat_safe ? 'yes' : 'no',
        ])
      : h('p', {class: 'muted'}, 'No pending operation.'),
    h('h3', {}, 'Stop conditions'),
    stops.length
      ? h('ul', {class: 'ckpt-stops'}, stops.map((stop) => h('li', {}, asText(stop?.description ?? stop))))
      : h('p', {class: 'muted'}, 'No stop condition.'),
    h('p', {class: 'muted'}, 'Statements, resources and anything else the document holds are in the state below.'),
  );
}

function resourcesPanel(resources) {
  if (!resources.length) return section('Resources', h('p', {class: 'muted'}, 'No resource is attached.'));
  return section(
    'Resources',
    table('ckpt-resources', ['Name', 'Media type', 'Size', 'SHA-256', 'Download'], resources, (resource) => [
      resource.name,
      resource.media_type,
      bytes(resource.size),
      h('code', {class: 'ckpt-hash'}, resource.sha256),
      resource.download_url
        ? h(
            'a',
            {
              href: resource.download_url,
              target: '_blank',
              rel: 'noopener noreferrer',
              'aria-label': `Download ${resource.name}`,
            },
            'Download',
          )
        : '—',
    ]),
    h('p', {class: 'muted'}, 'Download links are presigned and valid for 15 minutes from this page’s load.'),
  );
}

function leasePanel(ctx, record, countdown, redraw, justTaken) {
  const id = record.checkpoint_id;
  const parts = [];
  if (justTaken) {
    parts.push(
      h(
        'div',
        {class: 'note ckpt-token', role: 'status'},
        h('p', {}, 'Lease taken. Its token (the fencing token) is shown once; this tab keeps it to release the lease.'),
        h(
          'div',
          {class: 'secret'},
          h('code', {}, justTaken.lease_token),
          copyButton(justTaken.lease_token, 'Copy token'),
        ),
      ),
    );
  }
  if (record.lease) {
    parts.push(
      facts([
        ['Holder', record.lease.holder],
        ['Expires', h('span', {}, time(record.lease.expires_at), ' (', countdown(record.lease.expires_at), ')')],
      ]),
    );
  } else {
    parts.push(h('p', {class: 'muted ckpt-no-lease'}, 'No lease is held.'));
  }
  const problem = h('div', {'aria-live': 'polite'});
  if (ctx.can('leases:write')) {
    if (!record.lease) parts.push(takeLeaseForm(ctx, id, problem, redraw));
    else parts.push(releaseLeaseForm(ctx, record, problem, redraw));
  }
  parts.push(problem);
  return panel('ckpt-lease', 'Lease', parts);
}

function takeLeaseForm(ctx, id, problem, redraw) {
  const ttl = h('input', {
    type: 'number',
    name: 'ttl_seconds',
    min: LEASE_TTL.min,
    max: LEASE_TTL.max,
    step: 1,
    required: true,
    value: String(LEASE_TTL.default),
  });
  const holder = textInput('holder', '');
  const form = h(
    'form',
    {class: 'filters ckpt-filters', 'aria-label': 'Take a lease', novalidate: true},
    field('Lease for (seconds)', ttl, `${LEASE_TTL.min} to ${LEASE_TTL.max}.`),
    field('Holder', holder, 'Optional: the calling key’s id by default.'),
    h('div', {class: 'actions'}, h('button', {type: 'submit', class: 'primary'}, 'Take a lease')),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const seconds = Number(ttl.value);
    if (!Number.isInteger(seconds) || seconds < LEASE_TTL.min || seconds > LEASE_TTL.max) {
      replace(problem, h('p', {class: 'note error'}, `The lease lasts ${LEASE_TTL.min} to ${LEASE_TTL.max} seconds.`));
      ttl.focus();
      return;
    }
    const body = {ttl_seconds: seconds};
    if (holder.value.trim()) body.holder = holder.value.trim();
    const confirmed = await confirmAction({
      title: 'Take a lease',
      body: h(
        'div',
        {},
        h('p', {}, `POST /v1/checkpoints/${id}/lease`),
        facts([
          ['Holder', body.holder || 'this key’s id'],
          ['Lasts', duration(seconds * 1000)],
        ]),
        h('p', {}, 'While it is live, every save, restore and delete of this checkpoint must carry its token.'),
      ),
      confirmLabel: 'Take the lease',
      danger: false,
    });
    if (!confirmed || !ctx.current()) return;
    try {
      const answer = await post(`/v1/checkpoints/${path(id)}/lease`, body);
      leaseTokens.set(id, answer.data.lease_token);
      if (!ctx.current()) return;
      announce(phrase`Lease taken by ${answer.data.holder}.`);
      await redraw(answer.data);
    } catch (failure) {
      if (ctx.current()) replace(problem, errorNote(failure));
    }
  });
  return form;
}

function releaseLeaseForm(ctx, record, problem, redraw) {
  const id = record.checkpoint_id;
  const token = textInput('lease_token', leaseTokens.get(id) || '', {required: true});
  const form = h(
    'form',
    {class: 'filters ckpt-filters', 'aria-label': 'Release the lease'},
    field('Lease token', token, leaseTokens.has(id) ? 'The token this tab was given.' : 'Paste the holder’s token.'),
    h('div', {class: 'actions'}, h('button', {type: 'submit', class: 'danger'}, 'Release the lease')),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const sent = token.value.trim();
    if (!sent) return;
    const confirmed = await confirmAction({
      title: 'Release the lease',
      body: h(
        'div',
        {},
        h('p', {}, `DELETE /v1/checkpoints/${id}/lease`),
        facts([['Holder', record.lease.holder]]),
        h('p', {}, 'The lease ends at once: its holder can no longer write with its token.'),
      ),
      confirmLabel: 'Release',
    });
    if (!confirmed || !ctx.current()) return;
    try {
      await del(`/v1/checkpoints/${path(id)}/lease`, {headers: {'Lease-Token': sent}});
      leaseTokens.delete(id);
      if (!ctx.current()) return;
      announce('Lease released.');
      await redraw(null);
    } catch (failure) {
      if (ctx.current()) replace(problem, errorNote(failure));
    }
  });
  return form;
}

function deletePanel(ctx, record, etag) {
  const id = record.checkpoint_id;
  const problem = h('div', {'aria-live': 'polite'});
  const button = h('button', {type: 'button', class: 'danger'}, 'Delete checkpoint');
  button.addEventListener('click', async () => {
    const headers = {};
    if (etag) headers['If-Match'] = etag;
    // A live lease makes Baton refuse a delete without its token: say so, and ask for it (prefilled when this tab
    // took the lease).
    const token = record.lease ? textInput('lease_token', leaseTokens.get(id) || '', {required: true}) : null;
    const confirmed = await confirmAction({
      title: 'Delete this checkpoint',
      body: h(
        'div',
        {},
        h('p', {}, `DELETE /v1/checkpoints/${id}`),
        facts([
          ['Subject', record.subject_id],
          ['Agent', record.agent_id],
          ['Kind', record.kind],
          ['Revision', String(record.revision)],
          ['If-Match', etag || 'not sent'],
        ]),
        h(
          'p',
          {},
          'The checkpoint, its kept revisions and its resources go; this cannot be undone. ',
          etag ? 'If it changed since this page loaded, Baton refuses.' : '',
        ),
        record.lease
          ? h(
              'div',
              {class: 'note warn'},
              h('p', {}, phrase`Leased by ${record.lease.holder} until ${record.lease.expires_at} (${until(record.lease.expires_at)}): `,
                'Baton deletes it only with the lease’s token.'),
              field('Lease token', token, leaseTokens.has(id) ? 'The token this tab was given.' : 'Paste the holder’s token.'),
            )
          : null,
      ),
      confirmLabel: 'Delete',
    });
    if (!confirmed || !ctx.current()) return;
    if (token && token.value.trim()) headers['Lease-Token'] = token.value.trim();
    try {
      await del(`/v1/checkpoints/${path(id)}`, {headers});
      leaseTokens.delete(id);
      if (!ctx.current()) return;
      announce(phrase`Checkpoint ${id} deleted.`);
      ctx.navigate(ctx.href('checkpoints', [], {subject: record.subject_id}));
    } catch (failure) {
      if (ctx.current()) replace(problem, errorNote(failure));
    }
  });
  return section(
    'Delete',
    h('p', {}, 'Deleting removes the checkpoint with its kept revisions; its blobs are removed afterwards.'),
    h('div', {class: 'actions'}, button),
    problem,
  );
}

function metadataPanel(ctx, record, etag, countdown) {
  const source = record.source || {};
  const etagShown = etag
    ? h('span', {class: 'secret'}, h('code', {class: 'ckpt-etag'}, etag), copyButton(etag, 'Copy ETag'))
    : null;
  return panel(
    'ckpt-meta',
    'Metadata',
    facts([
      ['Subject', h('a', {href: ctx.href('checkpoints', [], {subject: record.subject_id})}, record.subject_id)],
      ['Agent', record.agent_id],
      ['Kind', record.kind],
      ['Status', statusBadge(record.status)],
      ['Format', record.format ?? null],
      ['Revision', String(record.revision)],
      ['Created', time(record.created_at)],
      ['Updated', time(record.updated_at)],
      ['ETag', etagShown],
      ['Expires', h('span', {}, time(record.expires_at), ' (', countdown(record.expires_at), ')')],
      ['Time to live', `${duration(record.ttl_seconds * 1000)} after each write (${record.ttl_seconds} s)`],
      [
        'Keeps revisions',
        record.keep_revisions
          ? h(
              'span',
              {},
              `${record.keep_revisions} `,
              h('a', {href: ctx.href('history', [record.checkpoint_id])}, 'Open its history'),
            )
          : 'none',
      ],
      ['State', `${bytes(record.state_bytes)} of canonical JSON`],
      ['State hash', h('code', {}, record.state_hash)],
      ['Source host', source.host ?? null],
      ['Source session', source.session ?? null],
      ['Source model', source.model ?? null],
    ]),
  );
}

async function renderCheckpoint(root, ctx, id) {
  replace(root, h('h1', {}, 'Checkpoint'), loading('Loading the checkpoint'));
  const answer = await get(`/v1/checkpoints/${path(id)}`);
  if (!ctx.current()) return;
  drawCheckpoint(root, ctx, countdowns(ctx), answer.data, answer.headers.get('ETag'), null);
}

function drawCheckpoint(root, ctx, timers, record, etag, justTaken) {
  const countdown = (iso) => timers.span(iso);
  const redraw = async (taken) => {
    // A lease changes the record (its `lease`) but not its revision: read it again to show what Baton holds now.
    const again = await get(`/v1/checkpoints/${path(record.checkpoint_id)}`);
    if (ctx.current()) drawCheckpoint(root, ctx, timers, again.data, again.headers.get('ETag'), taken);
  };
  timers.reset();
  const subjectHref = ctx.href('checkpoints', [], {subject: record.subject_id});
  replace(
    root,
    h(
      'p',
      {class: 'ckpt-back'},
      h('a', {href: subjectHref}, phrase`All checkpoints of ${record.subject_id}`),
    ),
    h('h1', {}, 'Checkpoint ', h('code', {class: 'ckpt-id'}, record.checkpoint_id)),
    metadataPanel(ctx, record, etag, countdown),
    leasePanel(ctx, record, countdown, redraw, justTaken),
    record.format === OPENCHECKPOINT ? openCheckpointPanel(record.state) : null,
    panel('ckpt-state', 'State', jsonTree(record.state, {label: 'state', search: true, open: 2})),
    resourcesPanel(record.resources || []),
    ctx.can('checkpoints:delete') ? deletePanel(ctx, record, etag) : null,
  );
}
