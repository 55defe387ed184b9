// Resume preview: what `POST /v1/resume` answers for a subject (and optionally a kind, agent, checkpoint and
// budget), laid out by its status. The request reads and writes nothing, so the view asks it whenever the hash
// names a subject: a preview can be linked and Back works.

import {post} from './api.js';
import {bytes, facts, field, h, jsonText, phrase, replace, select, time, until} from './dom.js';
import {jsonTree} from './json-tree.js';
import {errorNote, loading} from './ui.js';

const KINDS = ['task_state', 'conversation', 'workflow', 'cursor'];
const BUDGET_MIN = 1024;
const BUDGET_MAX = 6000000;

/** The request body from the hash's parameters: only what was given. */
function requestOf(values) {
  const body = {subject_id: values.subject};
  if (values.kind) body.kind = values.kind;
  if (values.agent) body.agent_id = values.agent;
  if (values.checkpoint) body.checkpoint_id = values.checkpoint;
  // A budget that is not a whole number goes as written, so that Baton's own message names it.
  if (values.budget) body.budget_bytes = /^\d+$/.test(values.budget) ? Number(values.budget) : values.budget;
  return body;
}

function statusBadge(status) {
  return h('span', {class: `badge ${status}`}, status);
}

/** A checkpoint's id as a link to its view. */
function checkpointLink(ctx, checkpointId) {
  return h('a', {href: ctx.href('checkpoints', [checkpointId])}, h('code', {}, checkpointId));
}

/** A table head of column names. */
function head(names) {
  return h('thead', {}, h('tr', {}, names.map((name) => h('th', {scope: 'col'}, name))));
}

/** A checkpoint's summary, its id linking to the checkpoint's view. */
function summary(ctx, checkpoint) {
  const lease = checkpoint.lease;
  return facts([
    ['Checkpoint', checkpointLink(ctx, checkpoint.checkpoint_id)],
    ['Subject', checkpoint.subject_id],
    ['Agent', checkpoint.agent_id],
    ['Kind', checkpoint.kind],
    ['Status', statusBadge(checkpoint.status)],
    ['Revision', String(checkpoint.revision)],
    ['Format', checkpoint.format || null],
    ['State', `${bytes(checkpoint.state_bytes)} (${checkpoint.state_bytes} bytes)`],
    ['Updated', time(checkpoint.updated_at)],
    ['Expires', [time(checkpoint.expires_at), ' ', h('small', {class: 'muted'}, until(checkpoint.expires_at))]],
    ['Lease', lease ? [phrase`held by ${lease.holder || 'an unnamed holder'}, until `, time(lease.expires_at)] : 'none'],
  ]);
}

/** A value of the document, as text: an object's fields one per line (each string of it a run of its own). */
function plain(value) {
  return h('pre', {}, jsonText(value, 2));
}

/** Pending operations of an OpenCheckpoint document, as a table of their usual fields (the rest as JSON). */
function operationsTable(operations) {
  if (!operations.length) return h('p', {class: 'muted'}, 'None pending.');
  const known = ['kind', 'status', 'description', 'repeat_safe', 'owner'];
  return h(
    'div',
    {class: 'table-wrap'},
    h(
      'table',
      {},
      head(['Kind', 'Status', 'Description', 'Repeat safe', 'Owner', 'Other fields']),
      h(
        'tbody',
        {},
        operations.map((operation) => {
          const rest = Object.fromEntries(Object.entries(operation).filter(([name]) => !known.includes(name)));
          const text = (value) =>
            value === undefined ? '—' : typeof value === 'string' ? value : jsonText(value);
          return h(
            'tr',
            {},
            known.map((name) => h('td', {}, text(operation[name]))),
            h('td', {}, Object.keys(rest).length ? plain(rest) : '—'),
          );
        }),
      ),
    ),
  );
}

function stopConditionsList(conditions) {
  if (!conditions.length) return h('p', {class: 'muted'}, 'None.');
  return h(
    'ul',
    {class: 'resume-stops'},
    conditions.map((condition) =>
      h('li', {}, typeof condition.description === 'string' ? condition.description : plain(condition)),
    ),
  );
}

/** The answer's size against the budget: the compact JSON of `data`, measured here. */
function sizeLine(data, budget) {
  const size = new TextEncoder().encode(JSON.stringify(data)).length;
  const share = budget ? Math.round((size / budget) * 100) : 0;
  const within = budget ? `${share}% of the budget of ${bytes(budget)} (${budget} bytes)` : 'no budget given';
  const measured = `This answer is about ${bytes(size)} (${size} bytes of compact JSON)`;
  return h('p', {class: 'resume-size'}, `${measured}: ${within}.`);
}

function layout(ctx, data, values) {
  const budget = /^\d+$/.test(values.budget) ? Number(values.budget) : null;
  const title = h('h2', {}, 'Answer: ', statusBadge(data.status));
  switch (data.status) {
    case 'ready': {
      const openCheckpoint = 'pending_operations' in data || 'stop_conditions' in data;
      return [
        title,
        h('p', {}, 'Exactly one active checkpoint matches: an agent resuming now gets this one, whole.'),
        summary(ctx, data.checkpoint),
        sizeLine(data, budget),
        openCheckpoint ? [h('h3', {}, 'Pending operations'), operationsTable(data.pending_operations || [])] : null,
        openCheckpoint ? [h('h3', {}, 'Stop conditions'), stopConditionsList(data.stop_conditions || [])] : null,
        h('h3', {}, 'State'),
        jsonTree(data.checkpoint.state, {label: 'state', open: 1, search: true}),
        h(
          'p',
          {},
          h('a', {href: ctx.href('checkpoints', [data.checkpoint.checkpoint_id])}, 'Open the checkpoint and its state'),
        ),
      ];
    }
    case 'ambiguous': {
      const shown = data.candidates.length;
      const cut = data.candidate_count > shown ? ` (the newest ${shown} shown)` : '';
      return [
        title,
        h(
          'p',
          {},
          `${data.candidate_count} checkpoints match${cut}. `,
          'Baton never picks one by recency: name a kind, an agent or a checkpoint.',
        ),
        h(
          'div',
          {class: 'table-wrap'},
          h(
            'table',
            {},
            h('caption', {class: 'muted'}, 'Candidates, newest first'),
            head(['Checkpoint', 'Agent', 'Kind', 'Status', 'Revision', 'Updated', 'Resume']),
            h(
              'tbody',
              {},
              data.candidates.map((c) =>
                h(
                  'tr',
                  {},
                  h('td', {class: 'id'}, checkpointLink(ctx, c.checkpoint_id)),
                  h('td', {}, c.agent_id),
                  h('td', {}, c.kind),
                  h('td', {}, statusBadge(c.status)),
                  h('td', {}, String(c.revision)),
                  h('td', {}, time(c.updated_at)),
                  h(
                    'td',
                    {},
                    h(
                      'a',
                      {
                        href: ctx.href('resume', [], {...values, checkpoint: c.checkpoint_id}),
                        'aria-label': `Preview resuming ${c.checkpoint_id}`,
                      },
                      'Preview this one',
                    ),
                  ),
                ),
              ),
            ),
          ),
        ),
      ];
    }
    case 'none':
      return [title, h('p', {}, 'No live checkpoint matches: an agent resuming now starts from scratch.')];
    case 'closed':
      return [
        title,
        h('p', {}, 'No active checkpoint matches, and exactly one finished one does: the work is over.'),
        summary(ctx, data.checkpoint),
      ];
    case 'omitted': {
      const raise = data.required_bytes <= BUDGET_MAX ? Math.max(data.required_bytes, BUDGET_MIN) : null;
      return [
        title,
        h(
          'p',
          {class: 'note warn'},
          `The answer would take ${bytes(data.required_bytes)} (${data.required_bytes} bytes), `,
          'more than the budget of ',
          budget ? `${bytes(budget)} (${budget} bytes)` : 'the request',
          ': Baton sends no part of a checkpoint, only its summary.',
        ),
        raise
          ? h(
              'p',
              {},
              h(
                'a',
                {href: ctx.href('resume', [], {...values, budget: raise})},
                `Preview with a budget of ${raise} bytes`,
              ),
            )
          : h('p', {}, `That is more than the largest budget (${BUDGET_MAX} bytes).`),
        summary(ctx, data.checkpoint),
      ];
    }
    default:
      return [title, plain(data)];
  }
}

export async function render(root, ctx) {
  const values = {};
  for (const name of ['subject', 'kind', 'agent', 'checkpoint', 'budget']) values[name] = ctx.params.get(name) || '';

  const text = {autocomplete: 'off', spellcheck: 'false'};
  const subject = h('input', {name: 'subject', value: values.subject, required: true, maxlength: 200, ...text});
  const kind = select('kind', [['', 'any'], ...KINDS], values.kind);
  const agent = h('input', {name: 'agent', value: values.agent, ...text});
  const checkpoint = h('input', {name: 'checkpoint', value: values.checkpoint, placeholder: 'ckpt_…', ...text});
  const budget = h('input', {
    name: 'budget',
    type: 'number',
    min: BUDGET_MIN,
    max: BUDGET_MAX,
    step: 1,
    value: values.budget,
    inputmode: 'numeric',
  });
  const form = h(
    'form',
    {class: 'filters', 'aria-label': 'Resume request'},
    field('Subject', subject),
    field('Kind', kind),
    field('Agent', agent, ctx.can('*') ? 'Empty: every agent.' : phrase`Empty: yours (${ctx.caller.agent_id}).`),
    field('Checkpoint id', checkpoint),
    field('Budget (bytes)', budget, `${BUDGET_MIN}–${BUDGET_MAX}; empty: none.`),
    h('div', {class: 'field'}, h('button', {type: 'submit', class: 'primary'}, 'Preview resume')),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const target = ctx.href('resume', [], {
      subject: subject.value, // as typed: a subject id may begin or end with spaces
      kind: kind.value,
      agent: agent.value.trim(),
      checkpoint: checkpoint.value.trim(),
      budget: budget.value.trim(),
    });
    if (target === location.hash) ctx.refresh();
    else ctx.navigate(target);
  });

  const answerSlot = h('section', {class: 'panel resume-answer', 'aria-live': 'polite'});
  replace(
    root,
    h('h1', {}, 'Resume preview'),
    h(
      'p',
      {class: 'muted'},
      'What POST /v1/resume would answer an agent picking this work up again. It reads and writes nothing.',
    ),
    h('section', {class: 'panel'}, form),
    values.subject ? answerSlot : null,
  );
  if (!values.subject) return;

  replace(answerSlot, loading('Asking Baton'));
  let answer;
  try {
    answer = await post('/v1/resume', requestOf(values));
  } catch (failure) {
    if (!ctx.current()) return;
    replace(answerSlot, errorNote(failure));
    return;
  }
  if (!ctx.current()) return;
  replace(answerSlot, layout(ctx, answer.data, values));
}
