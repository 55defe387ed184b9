// History of one checkpoint (`#/history/<checkpoint_id>`): its current revision and the superseded revisions it
// keeps, as a timeline; a structural diff between any two of them; and restoring a kept revision, which writes its
// state as the checkpoint's next revision (never a rewind) after a confirmation that shows what will be written.
// Hash parameters: `from` and `to` (the revisions compared), `cursor` and `limit` (the timeline's page).

import {get, path, post, query} from './api.js';
import {diffJson, renderDiff} from './diff.js';
import {jsonTree} from './json-tree.js';
import {bytes, facts, field, h, phrase, replace, time} from './dom.js';
import {announce, confirmAction, errorNote, loading, pager, section} from './ui.js';

const PAGE_SIZE = 20;
const MAX_PAGE_SIZE = 200;

/** A revision number of a hash parameter (a positive safe integer), else null. */
function revisionParameter(text) {
  if (!text || !/^[1-9][0-9]{0,15}$/.test(text)) return null;
  const number = Number(text);
  return Number.isSafeInteger(number) ? number : null;
}

function pageSize(text) {
  const number = Number(text);
  return Number.isInteger(number) && number >= 1 && number <= MAX_PAGE_SIZE ? number : PAGE_SIZE;
}

/** A hash's short form: the first 12 hex digits, the whole in a tooltip. */
function shortHash(hash) {
  return hash ? h('code', {title: hash}, `${hash.slice(0, 12)}…`) : '—';
}

/** A sentence counting the changes by kind. */
function changeCount(changes) {
  const counted = {added: 0, removed: 0, changed: 0};
  for (const change of changes) counted[change.op] += 1;
  const parts = Object.entries(counted)
    .filter(([, n]) => n)
    .map(([op, n]) => `${n} ${op}`);
  return `${changes.length} change${changes.length === 1 ? '' : 's'}: ${parts.join(', ')}.`;
}

export async function render(root, ctx) {
  const checkpointId = ctx.parts[0];
  if (!checkpointId) {
    replace(
      root,
      h('h1', {}, 'History'),
      h('p', {}, 'Open a checkpoint to see its history.'),
      h('a', {href: ctx.href('checkpoints')}, 'Checkpoints'),
    );
    return;
  }
  const base = `/v1/checkpoints/${path(checkpointId)}`;
  const cursor = ctx.params.get('cursor') || '';
  const limit = pageSize(ctx.params.get('limit'));
  const from = revisionParameter(ctx.params.get('from'));
  const to = revisionParameter(ctx.params.get('to'));

  /** A link to this view with some parameters changed (undefined removes one). */
  const here = (changes) => {
    const parameters = Object.fromEntries(ctx.params.entries());
    return ctx.href('history', [checkpointId], {...parameters, ...changes});
  };

  // The first drawing of an address naming two revisions brings their comparison into view; a redrawing after a
  // restore leaves the page where its outcome is.
  const draw = async (notice, {showComparison = false, focus = false} = {}) => {
    const [answer, listed] = await Promise.all([
      get(base),
      get(`${base}/revisions${query({limit: limit === PAGE_SIZE ? '' : limit, cursor})}`),
    ]);
    if (!ctx.current()) return;
    const current = answer.data;
    const kept = listed.data;
    // Each revision's full record, read once per drawing: the current one is the checkpoint itself.
    const records = new Map([[current.revision, current]]);
    const readRevision = async (revision) => {
      if (!records.has(revision)) records.set(revision, (await get(`${base}/revisions/${revision}`)).data);
      return records.get(revision);
    };
    const writable = ctx.can('checkpoints:write') && current.status === 'active';
    const outcome = h('div', {class: 'history-outcome'}, notice);
    // A click's work: its failure is shown here, never left as an unhandled rejection.
    const guarded = (work) => () =>
      work().catch((failure) => {
        if (ctx.current() && failure.status !== 401) replace(outcome, errorNote(failure));
      });

    const restore = async (revision) => {
      replace(outcome, loading(`Reading revision ${revision}`));
      let target;
      try {
        target = await readRevision(revision);
      } catch (failure) {
        if (ctx.current()) replace(outcome, errorNote(failure));
        return;
      }
      if (!ctx.current()) return;
      replace(outcome);
      const next = current.revision + 1;
      const changes = diffJson(current.state, target.state);
      const leaseToken = h('input', {type: 'text', name: 'lease_token', autocomplete: 'off', spellcheck: 'false'});
      const body = h(
        'div',
        {class: 'restore-preview'},
        h(
          'p',
          {},
          `Revision ${revision}'s state, with its format, resources and source, will be written as revision ${next} `,
          `of this checkpoint. This is a new revision, never a rewind: revision ${current.revision} `,
          current.keep_revisions ? 'is kept in the history like any superseded revision.' : 'is not kept (keep_revisions 0).',
        ),
        h(
          'p',
          {},
          `It is written only if the checkpoint is still at revision ${current.revision}; a write since this page `,
          'was loaded makes Baton refuse it, and nothing is written.',
        ),
        facts([
          [
            'Format',
            target.format === current.format
              ? target.format ?? 'none (plain JSON)'
              : phrase`${current.format ?? 'none'} → ${target.format ?? 'none'}`,
          ],
          ['Resources', `${target.resources.length}${target.resources.length === current.resources.length ? '' : ` (now ${current.resources.length})`}`],
          ['State', `${bytes(target.state_bytes)}, SHA-256 ${target.state_hash.slice(0, 12)}…`],
        ]),
        h('h3', {}, `What changes from revision ${current.revision} (current) to revision ${next}`),
        changes.length
          ? [h('p', {}, changeCount(changes)), renderDiff(changes, {label: `Changes written by the restore`})]
          : h('p', {class: 'note'}, `The state is the same as the current one; the restore still writes revision ${next}.`),
        current.lease
          ? field(
              'Lease token',
              leaseToken,
              phrase`Leased by ${current.lease.holder} until ${current.lease.expires_at}: a restore must carry the lease's token.`,
            )
          : null,
      );
      const confirmed = await confirmAction({
        title: `Restore revision ${revision}?`,
        body,
        confirmLabel: `Restore as revision ${next}`,
        danger: false,
      });
      if (!confirmed || !ctx.current()) return;
      const request = {revision, expected_revision: current.revision};
      if (current.lease && leaseToken.value.trim()) request.lease_token = leaseToken.value.trim();
      replace(outcome, loading(`Restoring revision ${revision}`));
      let saved;
      try {
        saved = await post(`${base}/restore`, request);
      } catch (failure) {
        if (ctx.current()) replace(outcome, errorNote(failure));
        return;
      }
      if (!ctx.current()) return;
      const etag = saved.headers.get('ETag');
      const text = `Restored revision ${revision} as revision ${saved.data.revision}.`;
      announce(text);
      await draw(
        h(
          'div',
          {class: 'note', role: 'status', tabindex: '-1'},
          h('strong', {}, text),
          ' ETag ',
          h('code', {}, etag || '—'),
          `, SHA-256 ${saved.data.state_hash.slice(0, 12)}…, expires `,
          time(saved.data.expires_at),
          '.',
        ),
        {focus: true},
      );
    };

    const entry = (summary, isCurrent) =>
      h(
        'li',
        {class: isCurrent ? 'current' : 'kept', dataset: {revision: String(summary.revision)}},
        h(
          'h3',
          {},
          `Revision ${summary.revision}`,
          isCurrent ? [' ', h('span', {class: 'badge active'}, 'current')] : null,
        ),
        h(
          'p',
          {class: 'revision-facts'},
          isCurrent ? 'Saved ' : 'Superseded revision, saved ',
          time(summary.updated_at),
          ` · ${bytes(summary.state_bytes)} · SHA-256 `,
          shortHash(summary.state_hash),
          isCurrent ? null : [' · kept until ', time(summary.expires_at)],
        ),
        isCurrent
          ? null
          : h(
              'div',
              {class: 'actions'},
              h('a', {href: here({from: summary.revision, to: current.revision})}, `Compare revision ${summary.revision} with the current one`),
              writable
                ? h('button', {type: 'button', on: {click: guarded(() => restore(summary.revision))}}, `Restore revision ${summary.revision}…`)
                : null,
            ),
      );

    // A redrawing after a click puts the focus on what it says (the button pressed is gone).
    const heading = h('h1', {tabindex: '-1'}, phrase`History of ${current.subject_id}`);
    const firstPage = !cursor;
    const items = [firstPage ? entry(current, true) : null, kept.map((summary) => entry(summary, false))];
    let keptNote = null;
    if (!current.keep_revisions) {
      keptNote = h(
        'p',
        {class: 'note'},
        'This checkpoint keeps no revisions (keep_revisions 0): each save replaces the state, so only the current ',
        'revision can be read. A save that sends keep_revisions above 0 starts keeping the ones it supersedes.',
      );
    } else if (firstPage && !kept.length) {
      keptNote = h('p', {class: 'note'}, `It keeps up to ${current.keep_revisions} superseded revisions; none is kept yet.`);
    }

    const timeline = section(
      'Revisions',
      keptNote,
      h('ul', {class: 'timeline', 'aria-label': 'Revisions, newest first'}, items),
      cursor || listed.meta.next_cursor
        ? pager(
            listed.meta.next_cursor,
            (next) => ctx.navigate(here({cursor: next})),
            cursor ? () => ctx.navigate(here({cursor: undefined})) : null,
          )
        : null,
    );

    // Comparing: every revision on this page, the current one, and those named in the hash.
    const choices = [...new Set([current.revision, ...kept.map((k) => k.revision), from, to].filter(Boolean))].sort((a, b) => b - a);
    const option = (revision) => [String(revision), revision === current.revision ? `revision ${revision} (current)` : `revision ${revision}`];
    const compareFrom = h(
      'select',
      {name: 'from'},
      choices.map((r) => h('option', {value: String(r), selected: r === (from ?? kept[0]?.revision ?? current.revision)}, option(r)[1])),
    );
    const compareTo = h(
      'select',
      {name: 'to'},
      choices.map((r) => h('option', {value: String(r), selected: r === (to ?? current.revision)}, option(r)[1])),
    );
    const compareForm = h(
      'form',
      {class: 'filters compare-form', 'aria-label': 'Compare two revisions'},
      field('Compare from revision', compareFrom),
      field('to revision', compareTo),
      h('div', {class: 'compare-submit'}, h('button', {type: 'submit', class: 'primary'}, 'Compare')),
    );
    compareForm.addEventListener('submit', (event) => {
      event.preventDefault();
      ctx.navigate(here({from: compareFrom.value, to: compareTo.value}));
    });
    const comparison = h('div', {class: 'comparison', 'aria-live': 'polite'});
    const compare = section(
      'Compare',
      choices.length > 1
        ? compareForm
        : h('p', {class: 'muted'}, 'There is only the current revision: nothing to compare it with.'),
      comparison,
    );

    replace(
      root,
      h('p', {class: 'history-back'}, h('a', {href: ctx.href('checkpoints', [checkpointId])}, '← Back to the checkpoint')),
      heading,
      h(
        'section',
        {class: 'panel', 'aria-label': 'Checkpoint'},
        facts([
          ['Checkpoint', h('code', {}, current.checkpoint_id)],
          ['Agent and kind', phrase`${current.agent_id} · ${current.kind}`],
          ['Status', h('span', {class: `badge ${current.status}`}, current.status)],
          ['Current revision', h('span', {}, `${current.revision} · ETag `, h('code', {}, answer.headers.get('ETag') || '—'))],
          ['Keeps revisions', current.keep_revisions ? `the last ${current.keep_revisions} superseded` : 'none (keep_revisions 0)'],
          ['Updated', time(current.updated_at)],
          current.lease ? ['Lease', h('span', {}, phrase`held by ${current.lease.holder} until `, time(current.lease.expires_at))] : ['Lease', 'none'],
        ]),
        h(
          'div',
          {class: 'actions'},
          h('button', {type: 'button', on: {click: guarded(() => draw(null, {focus: true}))}}, 'Reload'),
          !ctx.can('checkpoints:write')
            ? h('span', {class: 'muted'}, 'This key cannot write checkpoints: restoring is not offered.')
            : current.status !== 'active'
              ? h('span', {class: 'muted'}, `The checkpoint is ${current.status}: Baton refuses to restore a closed checkpoint.`)
              : null,
        ),
      ),
      outcome,
      timeline,
      compare,
    );

    if (focus) (notice || heading).focus();
    if (from === null || to === null) return;
    replace(comparison, loading(`Reading revisions ${from} and ${to}`));
    let before;
    let after;
    try {
      [before, after] = await Promise.all([readRevision(from), readRevision(to)]);
    } catch (failure) {
      if (ctx.current()) replace(comparison, errorNote(failure));
      return;
    }
    if (!ctx.current()) return;
    const changes = diffJson(before.state, after.state);
    replace(
      comparison,
      h('h3', {}, `Revision ${from} → revision ${to}`),
      changes.length
        ? [h('p', {}, changeCount(changes)), renderDiff(changes, {label: `Changes from revision ${from} to revision ${to}`})]
        : h('p', {class: 'note'}, `The two revisions hold identical states (SHA-256 ${after.state_hash.slice(0, 12)}…).`),
    );
    // Both states whole, as trees, built when first opened.
    const states = h('details', {class: 'history-states'}, h('summary', {}, `Both states as trees (revision ${from} and revision ${to})`));
    states.addEventListener('toggle', () => {
      if (!states.open || states.querySelector('.history-trees')) return;
      states.append(
        h(
          'div',
          {class: 'history-trees'},
          [before, after].map((side) =>
            h('div', {}, h('h4', {}, `Revision ${side.revision}`), jsonTree(side.state, {label: `state of revision ${side.revision}`})),
          ),
        ),
      );
    });
    comparison.append(states);
    if (showComparison) comparison.scrollIntoView({block: 'start'});
  };

  replace(root, loading('Reading the history'));
  await draw(null, {showComparison: true});
}
