// LangGraph threads: a thread's checkpoints as a timeline (newest first) with parent links, the channel versions
// each sets and its pending writes per task; one checkpoint's channel values and metadata; deleting a thread.
//
//   #/threads                          ask for a thread id; the threads opened in this tab as links
//   #/threads/<thread_id>              the timeline (?agent_id= ns= all= filter= before= limit= cursor= at=)
//   #/threads/<thread_id>/<checkpoint> one checkpoint (?agent_id= ns=)
//
// There is no route listing a tenant's threads, so the view remembers the ones opened in this tab. Every value is
// shown as text: LangGraph's typed bytes by their type and size, a `json` value as a JSON tree, a value kept in the
// bucket as a download link.

import {del, get, path, query} from './api.js';
import {bytes, facts, field, h, jsonText, phrase, replace, time} from './dom.js';
import {jsonTree} from './json-tree.js';
import {decodeValue} from './values.js';
import {announce, confirmAction, errorNote, loading, pager, section} from './ui.js';

const RECENT = 'baton.recent-threads';
const RECENT_MAX = 10;
const DEFAULT_LIMIT = 20;

export async function render(root, ctx) {
  const [threadId, checkpointId] = ctx.parts;
  if (threadId === undefined) return renderStart(root, ctx);
  if (checkpointId === undefined) return renderThread(root, ctx, threadId);
  return renderCheckpoint(root, ctx, threadId, checkpointId);
}

/** What addresses a thread besides its id: the agent (a `*` key may name another) and the namespace. */
function where(ctx) {
  const agentId = wildcard(ctx) ? ctx.params.get('agent_id') || '' : '';
  return {agentId, ns: ctx.params.get('ns') || ''};
}

function wildcard(ctx) {
  return ctx.caller.scopes.includes('*');
}

function agentOf(ctx, agentId) {
  return agentId || ctx.caller.agent_id;
}

// ---- recent threads (this tab only) ----

function recentThreads() {
  try {
    const found = JSON.parse(sessionStorage.getItem(RECENT) || '[]');
    return Array.isArray(found) ? found.filter((t) => t && typeof t.thread_id === 'string') : [];
  } catch {
    return [];
  }
}

function remember(threadId, agentId, ns) {
  const same = (t) => t.thread_id === threadId && (t.agent_id || '') === agentId && (t.ns || '') === ns;
  const kept = recentThreads().filter((t) => !same(t));
  kept.unshift({thread_id: threadId, agent_id: agentId, ns});
  sessionStorage.setItem(RECENT, JSON.stringify(kept.slice(0, RECENT_MAX)));
}

function forget(threadId, agentId) {
  const kept = recentThreads().filter((t) => !(t.thread_id === threadId && (t.agent_id || '') === agentId));
  sessionStorage.setItem(RECENT, JSON.stringify(kept));
}

// ---- #/threads ----

function renderStart(root, ctx) {
  const {agentId, ns} = where(ctx);
  const threadInput = h('input', {name: 'thread_id', required: true, maxlength: 200, autocomplete: 'off'});
  const nsInput = h('input', {name: 'ns', value: ns, maxlength: 1000, autocomplete: 'off'});
  const agentInput = wildcard(ctx)
    ? h('input', {name: 'agent_id', value: agentId, maxlength: 64, autocomplete: 'off',
        placeholder: ctx.caller.agent_id})
    : null;
  const form = h(
    'form',
    {class: 'filters', 'aria-label': 'Open a thread'},
    field('Thread id', threadInput, 'The thread_id the graph ran with (configurable.thread_id).'),
    agentInput ? field('Agent', agentInput, phrase`Empty: this key's agent (${ctx.caller.agent_id}).`) : null,
    field('Namespace', nsInput, 'checkpoint_ns; empty is the root graph.'),
    h('div', {class: 'actions'}, h('button', {type: 'submit', class: 'primary'}, 'Open thread')),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const threadId = threadInput.value;
    if (!threadId) return;
    ctx.navigate(
      ctx.href('threads', [threadId], {agent_id: agentInput ? agentInput.value.trim() : '', ns: nsInput.value}),
    );
  });
  const recent = recentThreads();
  replace(
    root,
    h('h1', {}, 'LangGraph threads'),
    h(
      'p',
      {class: 'muted'},
      'Baton keeps no list of a tenant\'s threads: name one to see its checkpoints. Threads opened in this tab are ' +
        'listed below.',
    ),
    section('Open a thread', form),
    section(
      'Opened in this tab',
      recent.length
        ? h(
            'ul',
            {class: 'thread-recent'},
            recent.map((t) =>
              h(
                'li',
                {},
                h('a', {href: ctx.href('threads', [t.thread_id], {agent_id: t.agent_id, ns: t.ns})}, t.thread_id),
                t.agent_id ? h('span', {class: 'muted'}, phrase` agent ${t.agent_id}`) : null,
                t.ns ? h('span', {class: 'muted'}, phrase` namespace ${t.ns}`) : null,
              ),
            ),
          )
        : h('p', {class: 'muted'}, 'None yet.'),
    ),
  );
  threadInput.focus();
}

// ---- #/threads/<thread_id> ----

async function renderThread(root, ctx, threadId) {
  const {agentId, ns} = where(ctx);
  const everyNs = ctx.params.get('all') === '1';
  const filter = ctx.params.get('filter') || '';
  const before = ctx.params.get('before') || '';
  const limit = ctx.params.get('limit') || String(DEFAULT_LIMIT);
  const cursor = ctx.params.get('cursor') || '';
  const base = {agent_id: agentId, ns, all: everyNs ? '1' : '', filter, before, limit: ctx.params.get('limit')};

  const heading = h('h1', {}, 'Thread ', h('code', {}, threadId));
  const results = h('div', {class: 'thread-results'}, loading('Loading checkpoints'));
  // The thread's own actions sit with its facts, apart from the form that filters its checkpoints.
  const threadActions = h('div', {class: 'actions thread-actions'});
  replace(
    root,
    h('p', {}, h('a', {href: ctx.href('threads', [], {agent_id: agentId, ns})}, '← Threads')),
    heading,
    facts([
      ['Agent', agentOf(ctx, agentId)],
      ['Namespace', everyNs ? 'every namespace' : nsLabel(ns)],
    ]),
    threadActions,
    filterForm(ctx, threadId, {agentId, ns, everyNs, filter, before, limit: ctx.params.get('limit') || ''}),
    results,
  );

  let answer;
  try {
    answer = await get(
      `/v1/threads/${path(threadId)}/checkpoints${query({
        agent_id: agentId,
        checkpoint_ns: everyNs ? undefined : ns,
        filter,
        before,
        limit,
        cursor,
      })}`,
    );
  } catch (failure) {
    if (!ctx.current()) return;
    replace(results, errorNote(failure), failure.status === 404 ? h('p', {class: 'muted'}, notFoundHint(ctx)) : null);
    return;
  }
  if (!ctx.current()) return;
  remember(threadId, agentId, everyNs ? '' : ns);

  const tuples = answer.data || [];
  const entries = new Map(tuples.map((t) => [entryKey(t.checkpoint_ns, t.checkpoint_id), t]));
  const go = (nextCursor) => ctx.navigate(ctx.href('threads', [threadId], {...base, cursor: nextCursor}));
  const first = cursor ? () => ctx.navigate(ctx.href('threads', [threadId], base)) : null;

  if (ctx.can('checkpoints:delete')) {
    threadActions.append(
      h(
        'button',
        {type: 'button', class: 'danger', on: {click: () => deleteThread(ctx, threadId, agentId, tuples, answer)}},
        'Delete thread',
      ),
    );
  }

  replace(
    results,
    h(
      'p',
      {class: 'muted'},
      tuples.length
        ? `${tuples.length} checkpoint${tuples.length === 1 ? '' : 's'} on this page, newest first.`
        : 'No checkpoint matches.',
    ),
    tuples.length
      ? h(
          'ul',
          {class: 'timeline thread-timeline', 'aria-label': 'Checkpoints, newest first'},
          tuples.map((t) => timelineEntry(ctx, threadId, agentId, t, entries)),
        )
      : null,
    pager(answer.meta.next_cursor, go, first),
  );
  const at = ctx.params.get('at');
  if (at) focusEntry(entryId(everyNs ? ctx.params.get('at_ns') || '' : ns, at));
}

function notFoundHint(ctx) {
  return wildcard(ctx)
    ? 'A thread that is missing, expired, deleted or of another agent answers 404: check the id and the agent.'
    : 'A thread that is missing, expired, deleted or of another agent answers 404.';
}

function filterForm(ctx, threadId, {agentId, ns, everyNs, filter, before, limit}) {
  const nsInput = h('input', {name: 'ns', value: ns, maxlength: 1000, autocomplete: 'off'});
  const everyInput = h('input', {type: 'checkbox', name: 'all', checked: everyNs});
  const filterInput = h('input', {name: 'filter', value: filter, autocomplete: 'off', spellcheck: 'false',
    class: 'mono', placeholder: '{"source": "loop"}'});
  const beforeInput = h('input', {name: 'before', value: before, autocomplete: 'off', spellcheck: 'false'});
  const limitInput = h('input', {name: 'limit', type: 'number', min: 1, max: 200, value: limit,
    placeholder: String(DEFAULT_LIMIT)});
  const form = h(
    'form',
    {class: 'filters thread-filters', 'aria-label': 'Filter checkpoints'},
    field('Namespace', nsInput, 'checkpoint_ns; empty is the root graph.'),
    h('div', {class: 'field thread-check'}, h('label', {}, everyInput, ' Every namespace')),
    field('Metadata filter (JSON)', filterInput, 'An object matched exactly against each checkpoint\'s metadata.'),
    field('Before checkpoint', beforeInput, 'Only checkpoints older than this id.'),
    field('Per page', limitInput),
    h('div', {class: 'actions'}, h('button', {type: 'submit', class: 'primary'}, 'Show')),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    ctx.navigate(
      ctx.href('threads', [threadId], {
        agent_id: agentId,
        ns: nsInput.value,
        all: everyInput.checked ? '1' : '',
        filter: filterInput.value.trim(),
        before: beforeInput.value.trim(),
        limit: limitInput.value,
      }),
    );
  });
  return form;
}

function nsLabel(ns) {
  return ns === '' ? 'root ("")' : ns;
}

function entryKey(ns, checkpointId) {
  return `${ns}\u0000${checkpointId}`;
}

/** The anchor id of a checkpoint's entry: its namespace and id, escaped so that no id is ambiguous. */
function entryId(ns, checkpointId) {
  return `ckpt-${encodeURIComponent(ns)}:${encodeURIComponent(checkpointId)}`;
}

function focusEntry(id) {
  const target = document.getElementById(id);
  if (!target) return false;
  for (const marked of document.querySelectorAll('.thread-entry.is-target')) marked.classList.remove('is-target');
  target.classList.add('is-target');
  target.scrollIntoView({block: 'start'});
  target.focus({preventScroll: true});
  return true;
}

function timelineEntry(ctx, threadId, agentId, tuple, entries) {
  const {checkpoint_ns: ns, checkpoint_id: id, parent_checkpoint_id: parentId} = tuple;
  const metadata = tuple.metadata || {};
  const detail = ctx.href('threads', [threadId, id], {agent_id: agentId, ns});
  return h(
    'li',
    {id: entryId(ns, id), class: 'thread-entry', tabindex: '-1', 'data-checkpoint-id': id},
    h(
      'h2',
      {class: 'thread-entry-title'},
      h('a', {href: detail}, h('code', {}, id)),
      ' ',
      metadata.source !== undefined ? h('span', {class: 'badge'}, phrase`source ${text(metadata.source)}`) : null,
      ' ',
      metadata.step !== undefined ? h('span', {class: 'badge'}, phrase`step ${text(metadata.step)}`) : null,
    ),
    facts([
      ['Namespace', nsLabel(ns)],
      ['Created', tuple.checkpoint?.ts ? time(tuple.checkpoint.ts) : null],
      ['Parent', parentLink(ctx, threadId, agentId, tuple, entries)],
    ]),
    channelsSet(tuple, entries),
    pendingWrites(tuple.pending_writes || [], {compact: true}),
  );
}

/** A stored value as text: a string as it is, anything else as JSON (each string of it a run of its own). */
function text(value) {
  return typeof value === 'string' ? value : jsonText(value);
}

function parentLink(ctx, threadId, agentId, tuple, entries) {
  const parentId = tuple.parent_checkpoint_id;
  if (!parentId) return 'none: the thread starts here';
  const ns = tuple.checkpoint_ns;
  const onPage = entries.has(entryKey(ns, parentId));
  const params = Object.fromEntries(ctx.params);
  if (onPage) {
    const target = entryId(ns, parentId);
    // The hash is the console's route, so an anchor link would re-render the view: the link moves to the entry
    // itself and records it in the address (replaceState fires no hashchange), so Back and sharing still work.
    const link = h(
      'a',
      {href: ctx.href('threads', [threadId], {...params, at: parentId, at_ns: params.all === '1' ? ns : ''}),
        class: 'parent-link'},
      h('code', {}, parentId),
    );
    link.addEventListener('click', (event) => {
      if (event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
      event.preventDefault();
      history.replaceState(null, '', link.getAttribute('href'));
      focusEntry(target);
    });
    return h('span', {}, link, h('span', {class: 'muted'}, ' (on this page)'));
  }
  return h(
    'span',
    {},
    h('code', {}, parentId),
    h('span', {class: 'muted'}, ' is on another page: '),
    h('a', {href: ctx.href('threads', [threadId, parentId], {agent_id: agentId, ns})}, 'open the parent'),
    ' · ',
    h(
      'a',
      {href: ctx.href('threads', [threadId], {...params, cursor: '', before: tuple.checkpoint_id, at: parentId,
        at_ns: params.all === '1' ? ns : ''})},
      'show older checkpoints',
    ),
  );
}

/**
 * The channel versions a checkpoint sets: those LangGraph says it updated (`updated_channels`), else those whose
 * version differs from its parent's (when the parent is on the page), else every one.
 */
function versionsSet(tuple, entries) {
  const versions = tuple.checkpoint?.channel_versions || {};
  const updated = tuple.checkpoint?.updated_channels;
  if (Array.isArray(updated)) return updated.filter((c) => Object.hasOwn(versions, c)).map((c) => [c, versions[c]]);
  const parent = entries.get(entryKey(tuple.checkpoint_ns, tuple.parent_checkpoint_id || ''));
  const before = parent?.checkpoint?.channel_versions;
  const all = Object.entries(versions);
  return before ? all.filter(([c, v]) => !Object.hasOwn(before, c) || before[c] !== v) : all;
}

function channelsSet(tuple, entries) {
  const set = versionsSet(tuple, entries);
  if (!set.length) return h('p', {class: 'muted'}, 'Sets no channel.');
  const values = tuple.channel_values || {};
  return h(
    'div',
    {class: 'thread-block'},
    h('h3', {}, 'Channel versions set'),
    h(
      'div',
      {class: 'table-wrap'},
      h(
        'table',
        {},
        h('thead', {}, h('tr', {}, h('th', {scope: 'col'}, 'Channel'), h('th', {scope: 'col'}, 'Version'),
          h('th', {scope: 'col'}, 'Value'))),
        h(
          'tbody',
          {},
          set.map(([channel, version]) =>
            h('tr', {}, h('td', {}, h('code', {}, channel)),
              h('td', {}, h('code', {class: 'thread-version'}, text(version))),
              h('td', {}, Object.hasOwn(values, channel) ? valueSummary(values[channel]) : h('span', {class: 'muted'}, 'none kept'))),
          ),
        ),
      ),
    ),
  );
}

/** A task's writes, in the answer's order (task_path, task_id, idx). */
function groupByTask(writes) {
  const tasks = new Map();
  for (const write of writes) {
    const key = `${write.task_path}\u0000${write.task_id}`;
    if (!tasks.has(key)) tasks.set(key, {task_id: write.task_id, task_path: write.task_path, writes: []});
    tasks.get(key).writes.push(write);
  }
  return [...tasks.values()];
}

function pendingWrites(writes, {compact}) {
  if (!writes.length) return h('p', {class: 'muted'}, 'No pending writes.');
  const tasks = groupByTask(writes);
  return h(
    'div',
    {class: 'thread-block'},
    h('h3', {}, `Pending writes: ${writes.length} from ${tasks.length} task${tasks.length === 1 ? '' : 's'}`),
    writes.filter((w) => w.channel === INTERRUPT).map(interruptNote),
    h(
      'ul',
      {class: 'thread-tasks'},
      tasks.map((task) => {
        return h(
          'li',
          {class: 'thread-task'},
          h('p', {}, 'Task ', h('code', {}, task.task_id),
            task.task_path ? [' · path ', h('code', {}, task.task_path)] : null),
          h(
            'div',
            {class: 'table-wrap'},
            h(
              'table',
              {},
              h('thead', {}, h('tr', {}, h('th', {scope: 'col'}, 'Channel'), h('th', {scope: 'col'}, 'idx'),
                h('th', {scope: 'col'}, 'Value'))),
              h(
                'tbody',
                {},
                task.writes.map((w) =>
                  h('tr', {}, h('td', {}, h('code', {}, w.channel)), h('td', {}, String(w.idx)),
                    h('td', {}, compact ? valueSummary(w) : valueDetail(w, w.channel))),
                ),
              ),
            ),
          ),
        );
      }),
    ),
  );
}

// ---- interrupts ----

const INTERRUPT = '__interrupt__';

/** A pending `interrupt()`: the graph waits for input, and says what it asks (decoded from the write's value). */
function interruptNote(write) {
  const title = h('strong', {}, 'Waiting for input');
  const note = h('div', {class: 'note warn thread-interrupt', role: 'note'}, title, h('span', {class: 'muted'}, ' decoding…'));
  decodeValue(write).then((result) => {
    if (!result.decoded) {
      replace(note, title, h('span', {class: 'muted'}, phrase` (${result.reason})`));
      return;
    }
    replace(note, title, ': ', asked(result.value));
  });
  return note;
}

/** What interrupts ask: each `Interrupt`'s value, text as text, a flat object as its fields, anything else as a
 * tree. Text from a checkpoint is data: it is shown, never run or read as markup. */
function asked(decoded) {
  const values = (Array.isArray(decoded) ? decoded : [decoded]).map((item) =>
    item && typeof item === 'object' && !Array.isArray(item) && 'value' in item ? item.value : item,
  );
  return values.map((value) => {
    if (typeof value === 'string') return h('q', {class: 'thread-question'}, value);
    const flat = value && typeof value === 'object' && !Array.isArray(value) &&
      Object.values(value).every((v) => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean');
    if (flat) {
      return h('span', {class: 'thread-question'}, Object.entries(value).map(([k, v], i) =>
        [i ? '; ' : '', h('span', {class: 'muted'}, `${k} `), String(v)]));
    }
    return jsonTree(value, {label: 'interrupt', search: false, open: 2});
  });
}

// ---- typed values ----

/** How many bytes standard base64 text holds, without decoding it. */
function base64Size(data) {
  const padding = data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0;
  return (data.length / 4) * 3 - padding;
}

/** The value's type and size, or its download link when it is answered by URL. */
function valueSummary(value) {
  if (typeof value.url === 'string') {
    return h('span', {class: 'thread-value'}, h('span', {class: 'badge'}, value.type), ' ', downloadLink(value));
  }
  return h(
    'span',
    {class: 'thread-value'},
    h('span', {class: 'badge'}, value.type),
    ' ',
    h('span', {class: 'muted'}, bytes(base64Size(value.data || ''))),
  );
}

function downloadLink(value) {
  // A presigned GET of the value's bytes (15 minutes), on the bucket's origin: a new tab, no opener, no referrer.
  return h('a', {href: value.url, target: '_blank', rel: 'noopener noreferrer', referrerpolicy: 'no-referrer'},
    'download (in the bucket)');
}

/** The value's type and size and, for a `json` or `msgpack` value, its content as a JSON tree (decoded when shown). */
function valueDetail(value, label) {
  const summary = valueSummary(value);
  if ((value.type !== 'json' && value.type !== 'msgpack') || typeof value.data !== 'string') return summary;
  const holder = h('div', {}, summary, h('span', {class: 'muted'}, ' decoding…'));
  decodeValue(value).then((result) => {
    if (result.decoded) replace(holder, summary, jsonTree(result.value, {label, search: false, open: 1}));
    else replace(holder, summary, h('span', {class: 'muted'}, phrase` (${result.reason})`));
  });
  return holder;
}

// ---- #/threads/<thread_id>/<checkpoint_id> ----

async function renderCheckpoint(root, ctx, threadId, checkpointId) {
  const {agentId, ns} = where(ctx);
  const back = ctx.href('threads', [threadId], {agent_id: agentId, ns});
  const backLink = () => h('p', {}, h('a', {href: back}, '← Thread ', h('code', {}, threadId)));
  replace(root, backLink(), loading('Loading the checkpoint'));
  let answer;
  try {
    answer = await get(
      `/v1/threads/${path(threadId)}/checkpoint` +
        query({agent_id: agentId, checkpoint_ns: ns, checkpoint_id: checkpointId}),
    );
  } catch (failure) {
    if (!ctx.current()) return;
    replace(root, backLink(), errorNote(failure));
    return;
  }
  if (!ctx.current()) return;
  const tuple = answer.data;
  const metadata = tuple.metadata || {};
  const versions = tuple.checkpoint?.channel_versions || {};
  const values = tuple.channel_values || {};
  const {channel_values: _unused, ...document} = tuple.checkpoint || {};
  const parentId = tuple.parent_checkpoint_id;
  replace(
    root,
    backLink(),
    h('h1', {}, 'Checkpoint ', h('code', {}, tuple.checkpoint_id)),
    section(
      'Checkpoint',
      facts([
        ['Thread', h('code', {}, tuple.thread_id)],
        ['Agent', agentOf(ctx, agentId)],
        ['Namespace', nsLabel(tuple.checkpoint_ns)],
        ['Created', tuple.checkpoint?.ts ? time(tuple.checkpoint.ts) : null],
        ['Source', metadata.source === undefined ? null : text(metadata.source)],
        ['Step', metadata.step === undefined ? null : text(metadata.step)],
        [
          'Parent',
          parentId
            ? h('a', {href: ctx.href('threads', [threadId, parentId], {agent_id: agentId, ns: tuple.checkpoint_ns})},
                h('code', {}, parentId))
            : 'none: the thread starts here',
        ],
      ]),
    ),
    section('Metadata', jsonTree(metadata, {label: 'metadata', search: true, open: 2})),
    section(
      'Channel values',
      Object.keys(versions).length
        ? h(
            'ul',
            {class: 'thread-channels'},
            Object.entries(versions).map(([channel, version]) =>
              h(
                'li',
                {},
                h('h3', {}, h('code', {}, channel)),
                h('p', {class: 'muted'}, 'version ', h('code', {class: 'thread-version'}, text(version))),
                Object.hasOwn(values, channel)
                  ? valueDetail(values[channel], channel)
                  : h('span', {class: 'muted'}, 'No value kept (empty, or never stored).'),
              ),
            ),
          )
        : h('p', {class: 'muted'}, 'No channel.'),
    ),
    section('Pending writes', pendingWrites(tuple.pending_writes || [], {compact: false})),
    section('Checkpoint document', jsonTree(document, {label: 'checkpoint', search: true, open: 1})),
  );
}

// ---- delete ----

async function deleteThread(ctx, threadId, agentId, tuples, answer) {
  // Only an unfiltered first page without a next one holds everything the list answers for its namespace(s).
  const partial = ['cursor', 'before', 'filter'].some((name) => ctx.params.get(name)) || answer.meta.next_cursor;
  const everyNs = ctx.params.get('all') === '1';
  const count = `${tuples.length} checkpoint${tuples.length === 1 ? '' : 's'}`;
  let extent;
  if (partial) extent = `${count} shown on this page; the thread holds more (other pages, or outside the filter).`;
  else if (everyNs) extent = `${count} in all: every one is shown on this page.`;
  else extent = `${count} in this namespace, all shown on this page; checkpoints of other namespaces go too.`;
  const body = h(
    'div',
    {},
    h('p', {}, 'This deletes thread ', h('code', {}, threadId), phrase` of agent ${agentOf(ctx, agentId)}: `,
      'every checkpoint in every namespace, their channel values and their pending writes. It cannot be undone; ' +
      'a graph resuming this thread starts it anew.'),
    h('p', {}, extent),
  );
  const confirmed = await confirmAction({
    title: 'Delete this thread?',
    body,
    confirmLabel: 'Delete thread',
    danger: true,
  });
  if (!confirmed || !ctx.current()) return;
  try {
    await del(`/v1/threads/${path(threadId)}${query({agent_id: agentId})}`);
  } catch (failure) {
    if (!ctx.current()) return;
    const results = document.querySelector('.thread-results');
    if (results) results.prepend(errorNote(failure));
    return;
  }
  forget(threadId, agentId);
  // The router clears the status line when the address changes: say it once the next view has started.
  window.addEventListener('hashchange', () => announce(phrase`Thread ${threadId} deleted.`), {once: true});
  ctx.navigate(ctx.href('threads', [], {agent_id: agentId}));
}
