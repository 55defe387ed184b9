// Keys: the live keys of the caller's tenant (or, for an operator, of a tenant it names), issuing a key with
// scopes and a validity, and revoking one. A new key's secret is shown once, in this view only: it is never
// stored, and it is dropped when the user presses "Done" or leaves the view.

import {ApiError, del, get, path, post, query, signOut} from './api.js';
import {facts, field, h, phrase, replace, time, until} from './dom.js';
import {announce, confirmAction, copyButton, errorNote, loading, pager} from './ui.js';

/** Every scope, in the order the form offers them (the caller is offered only those it holds). */
const SCOPES = [
  'checkpoints:read',
  'checkpoints:write',
  'checkpoints:delete',
  'blobs:write',
  'leases:write',
  'mcp:call',
  'keys:manage',
  'subjects:purge',
  'usage:read',
  'audit:read',
  'tenants:manage',
  '*',
];
const DAY_MS = 24 * 60 * 60 * 1000;

/** A `datetime-local` value (the reader's local time) as RFC 3339 UTC, or '' when empty or not a time. */
function localToUtc(value) {
  if (!value) return '';
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? '' : date.toISOString();
}

/** The scopes a key holds, `*` expanded as Baton expands it (every scope but tenants:manage). */
function expanded(scopes) {
  const held = new Set(scopes);
  if (held.has('*')) for (const scope of SCOPES) if (scope !== 'tenants:manage') held.add(scope);
  return held;
}

function scopeList(scopes) {
  return h('ul', {class: 'key-scopes'}, scopes.map((scope) => h('li', {}, h('code', {}, scope))));
}

export async function render(root, ctx) {
  const {caller} = ctx;
  const operator = ctx.can('tenants:manage');
  const wildcard = ctx.can('*');
  const held = new Set(caller.effective_scopes);
  const tenant = operator ? ctx.params.get('tenant') || '' : '';
  const agent = wildcard ? ctx.params.get('agent') || '' : '';
  const cursor = ctx.params.get('cursor') || '';

  const secretSlot = h('div', {class: 'key-secret-slot'});
  const listSlot = h('div', {}, loading('Loading keys'));
  const listProblem = h('div', {'aria-live': 'assertive'});
  // The secret lives only in this panel's nodes: leaving the view empties it.
  ctx.onLeave(() => replace(secretSlot));

  function go(parameters) {
    const target = ctx.href('keys', [], parameters);
    if (target === location.hash) ctx.refresh();
    else ctx.navigate(target);
  }

  // Filters: a key without `*` sees only its own agent's keys, and only an operator names a tenant.
  const agentFilter = h('input', {name: 'agent', value: agent, autocomplete: 'off', spellcheck: 'false'});
  const tenantFilter = h('input', {name: 'tenant', value: tenant, autocomplete: 'off', spellcheck: 'false'});
  const filters = h(
    'form',
    {class: 'filters', 'aria-label': 'Filter keys'},
    operator ? field('Tenant', tenantFilter, phrase`Empty: your own (${caller.tenant_id}).`) : null,
    wildcard ? field('Agent', agentFilter, 'Empty: every agent.') : null,
    h('div', {class: 'field'}, h('button', {type: 'submit'}, 'Show keys')),
  );
  filters.addEventListener('submit', (event) => {
    event.preventDefault();
    go({tenant: tenantFilter.value.trim(), agent: agentFilter.value.trim()});
  });

  async function showList() {
    replace(listProblem);
    let answer;
    try {
      answer = await get(`/v1/keys${query({tenant_id: tenant, agent_id: agent, cursor})}`);
    } catch (failure) {
      if (!ctx.current()) return;
      replace(listSlot, errorNote(failure));
      return;
    }
    if (!ctx.current()) return;
    const keys = answer.data;
    const rows = keys.map((key) => {
      const own = key.key_id === caller.key_id;
      const lacking = [...expanded(key.scopes)].filter((scope) => !held.has(scope));
      // Baton refuses to revoke a key holding a scope the caller lacks: not offered.
      const action = lacking.length
        ? h('span', {class: 'muted'}, `Holds ${lacking.join(', ')}, which your key lacks`)
        : h(
            'button',
            {type: 'button', class: 'danger', 'aria-label': `Revoke ${key.key_id}`, on: {click: () => revoke(key)}},
            'Revoke',
          );
      return h(
        'tr',
        {class: own ? 'own-key' : null},
        h('td', {class: 'id'}, h('code', {}, key.key_id), own ? [' ', h('span', {class: 'badge own'}, 'this console')] : null),
        h('td', {}, h('code', {}, key.agent_id), key.tenant_id !== caller.tenant_id ? phrase` (${key.tenant_id})` : null),
        h('td', {}, scopeList(key.scopes)),
        h('td', {class: 'wide'}, key.description || h('span', {class: 'muted'}, '—')),
        h('td', {class: 'wide'}, key.not_before ? time(key.not_before) : h('span', {class: 'muted'}, 'at once')),
        h(
          'td',
          {},
          key.expires_at
            ? [time(key.expires_at), h('br'), h('small', {class: 'muted'}, until(key.expires_at))]
            : 'never',
        ),
        h('td', {class: 'wide'}, time(key.created_at)),
        h('td', {}, action),
      );
    });
    const table = keys.length
      ? h(
          'div',
          {class: 'table-wrap'},
          h(
            'table',
            {class: 'keys-table'},
            h('caption', {class: 'muted'}, 'Live keys, oldest first', tenant ? phrase` (tenant ${tenant})` : null),
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                ['Key', 'Agent', 'Scopes'].map((t) => h('th', {scope: 'col'}, t)),
                ['Description', 'Not before'].map((t) => h('th', {scope: 'col', class: 'wide'}, t)),
                h('th', {scope: 'col'}, 'Expires'),
                h('th', {scope: 'col', class: 'wide'}, 'Created'),
                h('th', {scope: 'col'}, h('span', {class: 'visually-hidden'}, 'Actions')),
              ),
            ),
            h('tbody', {}, rows),
          ),
        )
      : h(
          'p',
          {class: 'muted'},
          // A request reads a bounded number of keys: a page may come back empty with more after it.
          answer.meta.next_cursor ? 'No live keys on this page; the next may hold more.' : 'No live keys match.',
        );
    replace(
      listSlot,
      table,
      pager(
        answer.meta.next_cursor,
        (next) => go({tenant, agent, cursor: next}),
        cursor ? () => go({tenant, agent}) : null,
      ),
    );
  }

  async function revoke(key) {
    const own = key.key_id === caller.key_id;
    const confirmed = await confirmAction({
      title: `Revoke ${key.key_id}?`,
      body: h(
        'div',
        {},
        facts([
          ['Key', h('code', {}, key.key_id)],
          ['Tenant', key.tenant_id],
          ['Agent', key.agent_id],
          ['Scopes', scopeList(key.scopes)],
          ['Description', key.description || null],
        ]),
        own
          ? h(
              'p',
              {class: 'note warn'},
              'This is the key this console is signed in with: revoking it signs the console out at once.',
            )
          : null,
        h('p', {}, 'Baton refuses it at once in the container that answers this request, and everywhere within a minute (each container trusts a key it checked for up to 60 s). A revoked key cannot be restored.'),
      ),
      confirmLabel: 'Revoke key',
      danger: true,
    });
    if (!ctx.current()) return;
    if (!confirmed) {
      announce(`Nothing was revoked: ${key.key_id} still works.`);
      return;
    }
    const tenantQuery = key.tenant_id !== caller.tenant_id ? key.tenant_id : '';
    try {
      await del(`/v1/keys/${path(key.key_id)}${query({tenant_id: tenantQuery})}`);
    } catch (failure) {
      if (!ctx.current()) return;
      replace(listProblem, errorNote(failure));
      return;
    }
    if (own) {
      // The key is gone: sign out now rather than wait for the next request's 401 (another container may still
      // hold the key for up to a minute).
      signOut();
      const notice = new ApiError(0, 'SIGNED_OUT', `You revoked ${key.key_id}, the key this console used.`, {}, null);
      window.dispatchEvent(new CustomEvent('baton:signed-out', {detail: notice}));
      return;
    }
    if (!ctx.current()) return;
    announce(`Revoked ${key.key_id}.`);
    await showList();
  }

  replace(
    root,
    h('h1', {}, 'Keys'),
    secretSlot,
    h(
      'section',
      {class: 'panel', 'aria-labelledby': 'keys-live'},
      h('h2', {id: 'keys-live'}, 'Live keys'),
      wildcard ? null : h('p', {class: 'muted'}, phrase`This key sees and issues only agent ${caller.agent_id}'s keys.`),
      operator || wildcard ? filters : null,
      listProblem,
      listSlot,
    ),
    grantsPanel(ctx, {tenant, agent}),
    createPanel(ctx, {operator, wildcard, held, secretSlot, refresh: showList}),
  );
  await showList();
}

/** The OAuth grants people approved with the tenant's keys (the MCP clients connected by OAuth), with Revoke. */
function grantsPanel(ctx, {tenant, agent}) {
  const {caller} = ctx;
  const slot = h('div', {}, loading('Loading connected apps'));
  const problem = h('div', {'aria-live': 'assertive'});
  let cursor = '';

  async function show() {
    replace(problem);
    let answer;
    try {
      answer = await get(`/v1/oauth/grants${query({tenant_id: tenant, agent_id: agent, cursor})}`);
    } catch (failure) {
      if (!ctx.current()) return;
      replace(slot, errorNote(failure));
      return;
    }
    if (!ctx.current()) return;
    const grants = answer.data;
    const rows = grants.map((grant) =>
      h(
        'tr',
        {},
        h('td', {}, grant.client_name || h('span', {class: 'muted'}, 'unnamed'), h('br'), h('small', {class: 'id'}, h('code', {}, grant.client_id))),
        h('td', {}, h('code', {}, grant.agent_id), grant.tenant_id !== caller.tenant_id ? phrase` (${grant.tenant_id})` : null),
        h('td', {}, scopeList(grant.scopes)),
        h('td', {class: 'id wide'}, h('code', {}, grant.key_id)),
        h('td', {class: 'wide'}, time(grant.created_at)),
        h('td', {}, time(grant.expires_at), h('br'), h('small', {class: 'muted'}, until(grant.expires_at))),
        h(
          'td',
          {},
          h(
            'button',
            {type: 'button', class: 'danger', 'aria-label': `Revoke ${grant.grant_id}`, on: {click: () => revoke(grant)}},
            'Revoke',
          ),
        ),
      ),
    );
    const table = grants.length
      ? h(
          'div',
          {class: 'table-wrap'},
          h(
            'table',
            {class: 'grants-table'},
            h('caption', {class: 'muted'}, 'Live grants, oldest first'),
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                ['App', 'Agent', 'Scopes'].map((t) => h('th', {scope: 'col'}, t)),
                ['Approved with', 'Approved'].map((t) => h('th', {scope: 'col', class: 'wide'}, t)),
                h('th', {scope: 'col'}, 'Lapses'),
                h('th', {scope: 'col'}, h('span', {class: 'visually-hidden'}, 'Actions')),
              ),
            ),
            h('tbody', {}, rows),
          ),
        )
      : h('p', {class: 'muted'}, answer.meta.next_cursor ? 'None on this page; the next may hold more.' : 'No app is connected.');
    replace(
      slot,
      table,
      pager(
        answer.meta.next_cursor,
        (next) => {
          cursor = next;
          show();
        },
        cursor
          ? () => {
              cursor = '';
              show();
            }
          : null,
      ),
    );
  }

  async function revoke(grant) {
    const confirmed = await confirmAction({
      title: `Disconnect ${grant.client_name || grant.client_id}?`,
      body: h(
        'div',
        {},
        facts([
          ['App', grant.client_name || null],
          ['Client', h('code', {}, grant.client_id)],
          ['Agent', grant.agent_id],
          ['Scopes', scopeList(grant.scopes)],
        ]),
        h('p', {}, 'Its refresh token is refused at once; its access token within a minute (each container trusts a token it checked for up to 60 s). To connect again, a person approves it again.'),
      ),
      confirmLabel: 'Revoke grant',
      danger: true,
    });
    if (!ctx.current()) return;
    if (!confirmed) {
      announce(`Nothing was revoked: ${grant.client_name || grant.client_id} stays connected.`);
      return;
    }
    const tenantQuery = grant.tenant_id !== caller.tenant_id ? grant.tenant_id : '';
    try {
      await del(`/v1/oauth/grants/${path(grant.grant_id)}${query({tenant_id: tenantQuery})}`);
    } catch (failure) {
      if (!ctx.current()) return;
      replace(problem, errorNote(failure));
      return;
    }
    if (!ctx.current()) return;
    announce(`Disconnected ${grant.client_name || grant.client_id}.`);
    await show();
  }

  show();
  return h(
    'section',
    {class: 'panel', 'aria-labelledby': 'keys-grants'},
    h('h2', {id: 'keys-grants'}, 'Connected apps'),
    h(
      'p',
      {class: 'muted'},
      'MCP clients a person approved by OAuth with one of these keys (Claude.ai, ChatGPT, …): each acts as that key\'s agent, with the scopes listed, until revoked here or its key is.',
    ),
    problem,
    slot,
  );
}

/** The form that issues a key; the answer's secret goes to `secretSlot`, shown once. */
function createPanel(ctx, {operator, wildcard, held, secretSlot, refresh}) {
  const {caller} = ctx;
  const tenantInput = h('input', {
    name: 'tenant_id',
    autocomplete: 'off',
    spellcheck: 'false',
    placeholder: caller.tenant_id,
  });
  // A key with * issues for any agent: the field starts empty (a placeholder, not the caller's own agent, which
  // a hurried click would have issued a second operator key for); a narrower key issues for its own agent only.
  const agentInput = h('input', {
    name: 'agent_id',
    value: wildcard ? '' : caller.agent_id,
    placeholder: wildcard ? 'e.g. planner' : '',
    required: true,
    autocomplete: 'off',
    spellcheck: 'false',
    readonly: !wildcard,
  });
  const boxes = SCOPES.filter((scope) => held.has(scope)).map((scope) =>
    h('input', {type: 'checkbox', name: 'scopes', value: scope}),
  );
  const scopes = h(
    'fieldset',
    {class: 'key-scope-choice'},
    h('legend', {}, 'Scopes'),
    boxes.map((box) => h('label', {}, box, ' ', h('code', {}, box.value))),
    h('small', {class: 'hint'}, 'Only the scopes your own key holds. * is every scope but tenants:manage.'),
  );
  const description = h('input', {name: 'description', maxlength: 500, autocomplete: 'off'});
  const days = h('input', {name: 'days', type: 'number', min: 1, max: 3650, step: 1, inputmode: 'numeric'});
  const expires = h('input', {name: 'expires_at', type: 'datetime-local', step: 1});
  const notBefore = h('input', {name: 'not_before', type: 'datetime-local', step: 1});
  const ceiling = caller.expires_at
    ? `Your key expires ${caller.expires_at}; a new key cannot outlive it. Empty: it expires with your key.`
    : 'Empty: it does not expire (your key does not).';
  const problem = h('div', {'aria-live': 'assertive'});
  const form = h(
    'form',
    {class: 'key-create', 'aria-labelledby': 'keys-create'},
    h(
      'div',
      {class: 'filters'},
      operator ? field('Tenant', tenantInput, phrase`Empty: your own (${caller.tenant_id}).`) : null,
      field(
        'Agent',
        agentInput,
        wildcard ? 'Any agent of the tenant.' : 'A key without * issues keys for its own agent only.',
      ),
      field('Description', description, 'Optional, up to 500 characters.'),
    ),
    scopes,
    h(
      'fieldset',
      {class: 'key-validity'},
      h('legend', {}, 'Validity'),
      h(
        'div',
        {class: 'filters'},
        field('Valid for (days)', days, 'From now, or from "Not before".'),
        field('Expires at (your local time)', expires, ceiling),
        field('Not before (your local time)', notBefore, 'Empty: valid at once.'),
      ),
    ),
    problem,
    h('div', {class: 'actions'}, h('button', {type: 'submit', class: 'primary'}, 'Create key')),
  );

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    replace(problem);
    const chosen = boxes.filter((box) => box.checked).map((box) => box.value);
    if (!chosen.length) {
      replace(problem, h('p', {class: 'note error', role: 'alert'}, 'Choose at least one scope.'));
      return;
    }
    if (days.value && expires.value) {
      const both = 'Give either "Valid for" or "Expires at", not both.';
      replace(problem, h('p', {class: 'note error', role: 'alert'}, both));
      return;
    }
    const body = {agent_id: agentInput.value.trim(), scopes: chosen};
    if (operator && tenantInput.value.trim()) body.tenant_id = tenantInput.value.trim();
    if (description.value.trim()) body.description = description.value.trim();
    const start = localToUtc(notBefore.value);
    if (start) body.not_before = start;
    if (days.value) {
      const from = start ? Date.parse(start) : Date.now();
      body.expires_at = new Date(from + Number(days.value) * DAY_MS).toISOString();
    } else if (localToUtc(expires.value)) {
      body.expires_at = localToUtc(expires.value);
    }
    const confirmed = await confirmAction({
      title: 'Issue this key?',
      body: h(
        'div',
        {},
        facts([
          ['Tenant', body.tenant_id || caller.tenant_id],
          ['Agent', body.agent_id],
          ['Scopes', scopeList(chosen)],
          ['Description', body.description || null],
          ['Not before', body.not_before ? time(body.not_before) : 'at once'],
          [
            'Expires at',
            body.expires_at
              ? [time(body.expires_at), ` (${body.expires_at})`]
              : caller.expires_at
                ? `with your key, ${caller.expires_at}`
                : 'never',
          ],
        ]),
        h('p', {}, 'Its secret is shown once, on this page, and never again.'),
      ),
      confirmLabel: 'Issue key',
      danger: false,
    });
    if (!ctx.current()) return;
    if (!confirmed) {
      announce('No key was issued.');
      return;
    }
    let created;
    try {
      created = (await post('/v1/keys', body)).data;
    } catch (failure) {
      if (!ctx.current()) return;
      replace(problem, errorNote(failure));
      return;
    }
    if (!ctx.current()) return;
    form.reset();
    // As it started: empty for a key with * (the next key is for another agent), the caller's own agent otherwise.
    agentInput.value = wildcard ? '' : caller.agent_id;
    showSecret(secretSlot, created);
    announce(`Issued ${created.key_id}. Copy its secret now.`);
    await refresh();
  });

  return h('section', {class: 'panel'}, h('h2', {id: 'keys-create'}, 'Create a key'), form);
}

/** The new key's secret, once: a copy button, a warning, and "Done", which drops it from the page. */
function showSecret(slot, created) {
  const heading = h('h2', {tabindex: '-1', id: 'key-secret-title'}, `New key ${created.key_id}`);
  const done = h('button', {type: 'button', class: 'primary'}, 'Done');
  done.addEventListener('click', () => {
    replace(slot);
    announce('The secret was removed from the page.');
  });
  replace(
    slot,
    h(
      'section',
      {class: 'panel key-secret', 'aria-labelledby': 'key-secret-title'},
      heading,
      h('p', {class: 'note warn'}, 'Copy the secret now: it will not be shown again.'),
      h(
        'div',
        {class: 'secret'},
        h('code', {class: 'key-secret-value', 'aria-label': 'Secret'}, created.secret),
        copyButton(created.secret, 'Copy secret'),
      ),
      facts([
        ['Agent', created.agent_id],
        ['Tenant', created.tenant_id],
        ['Scopes', scopeList(created.scopes)],
        ['Not before', created.not_before ? time(created.not_before) : 'at once'],
        ['Expires', created.expires_at ? time(created.expires_at) : 'never'],
      ]),
      h('div', {class: 'actions'}, done),
    ),
  );
  heading.focus();
}
