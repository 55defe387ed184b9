// Usage: what `GET /v1/usage` answers for a tenant, day by day: the requests as a chart (one bar a day, split by
// route family), what was stored at each day's end as a line beside it, and every figure in a table (the chart's
// words for whoever does not see it). The range, and the tenant for a key that manages tenants, are in the hash.

import {get, query} from './api.js';
import {bytes, dataTable, field, h, phrase, replace} from './dom.js';
import {errorNote, loading} from './ui.js';

const SVG = 'http://www.w3.org/2000/svg';
const WIDTH = 720;
const HEIGHT = 220;
const PAD = {top: 12, right: 64, bottom: 28, left: 56};
/** Route families get a colour each, in this order (others share the last); the legend names them. */
const PALETTE = 8;

/** An SVG element: `svg('rect', {x: 1, class: 'bar'}, child...)`; text children become text nodes. */
function svg(tag, attributes, ...children) {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value !== null && value !== undefined) element.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    element.append(typeof child === 'string' || typeof child === 'number' ? String(child) : child);
  }
  return element;
}

function total(requests) {
  return Object.values(requests).reduce((sum, n) => sum + n, 0);
}

/** A round number at or above `value`, for an axis's top. */
function niceTop(value) {
  if (value <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  const step = [1, 2, 5, 10].find((m) => m * power >= value);
  return step * power;
}

/** The route families of the days, busiest first. */
function familiesOf(days) {
  const sums = new Map();
  for (const day of days) {
    for (const [family, n] of Object.entries(day.requests)) sums.set(family, (sums.get(family) || 0) + n);
  }
  return [...sums.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([family]) => family);
}

function chart(days, families) {
  const plotWidth = WIDTH - PAD.left - PAD.right;
  const plotHeight = HEIGHT - PAD.top - PAD.bottom;
  const top = niceTop(Math.max(...days.map((d) => total(d.requests))));
  const stored = niceTop(Math.max(...days.map((d) => d.stored_bytes)));
  const slot = plotWidth / days.length;
  const barWidth = Math.max(1, slot * 0.7);
  const y = (n) => PAD.top + plotHeight - (n / top) * plotHeight;
  const yStored = (n) => PAD.top + plotHeight - (n / stored) * plotHeight;
  const bars = days.map((day, i) => {
    let base = 0;
    const x = PAD.left + i * slot + (slot - barWidth) / 2;
    const parts = families
      .filter((family) => day.requests[family])
      .map((family) => {
        const n = day.requests[family];
        const rect = svg('rect', {
          x: x.toFixed(1),
          y: y(base + n).toFixed(1),
          width: barWidth.toFixed(1),
          height: Math.max(0, y(base) - y(base + n)).toFixed(1),
          class: `usage-bar family-${Math.min(families.indexOf(family), PALETTE - 1)}`,
        });
        base += n;
        return rect;
      });
    const label = `${day.date}: ${total(day.requests)} requests, ${bytes(day.stored_bytes)} stored`;
    return svg('g', {class: 'day'}, svg('title', {}, label), parts);
  });
  const line = days
    .map((day, i) => `${(PAD.left + i * slot + slot / 2).toFixed(1)},${yStored(day.stored_bytes).toFixed(1)}`)
    .join(' ');
  const tick = (n, at, anchor, x) =>
    svg('text', {x, y: (at + 4).toFixed(1), 'text-anchor': anchor, class: 'tick'}, n);
  const first = days[0].date;
  const last = days[days.length - 1].date;
  return svg(
    'svg',
    {
      viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
      class: 'usage-chart',
      role: 'img',
      'aria-label': `Requests per day from ${first} to ${last} (bars, left axis up to ${top}), and bytes stored at each day's end (line, right axis up to ${bytes(stored)}). The table below holds every figure.`,
    },
    svg('line', {x1: PAD.left, y1: y(0), x2: WIDTH - PAD.right, y2: y(0), class: 'axis'}),
    tick(String(top), y(top), 'end', PAD.left - 6),
    tick('0', y(0), 'end', PAD.left - 6),
    tick(bytes(stored), yStored(stored), 'start', WIDTH - PAD.right + 6),
    bars,
    svg('polyline', {points: line, class: 'stored-line'}),
    svg('text', {x: PAD.left, y: HEIGHT - 6, class: 'tick'}, first),
    svg('text', {x: WIDTH - PAD.right, y: HEIGHT - 6, 'text-anchor': 'end', class: 'tick'}, last),
  );
}

function legend(families) {
  return h(
    'ul',
    {class: 'usage-legend'},
    families.map((family, i) =>
      h('li', {}, h('span', {class: `swatch family-${Math.min(i, PALETTE - 1)}`, 'aria-hidden': 'true'}), family),
    ),
    h('li', {}, h('span', {class: 'swatch stored', 'aria-hidden': 'true'}), 'stored at the day\u2019s end'),
  );
}

function units(n) {
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}

function table(days) {
  const columns = ['Date', 'Requests', 'By family', 'Read units', 'Write units', 'S3 requests', 'Presigned URLs',
    'Stored', 'Checkpoints', 'Threads'];
  return dataTable(
    'usage-table',
    'Every day of the range, newest first',
    columns,
    [...days].reverse().map((day) =>
      h(
        'tr',
        {},
        h('th', {scope: 'row'}, day.date),
        h('td', {}, String(total(day.requests))),
        h('td', {}, Object.entries(day.requests).map(([family, n]) => `${family} ${n}`).join(', ') || '—'),
        h('td', {}, units(day.dynamodb.read_units)),
        h('td', {}, units(day.dynamodb.write_units)),
        h('td', {}, String(day.s3.requests)),
        h('td', {}, String(day.s3.presigned_urls)),
        h('td', {title: `${day.stored_bytes} bytes`}, bytes(day.stored_bytes)),
        h('td', {}, String(day.checkpoints)),
        h('td', {}, String(day.threads)),
      ),
    ),
  );
}

function summary(data) {
  const totals = data.totals;
  const last = data.days[data.days.length - 1];
  return h(
    'p',
    {class: 'usage-summary'},
    phrase`${data.tenant_id}: ${total(totals.requests)} requests over ${data.days.length} days, `,
    `${units(totals.dynamodb.read_units)} read and ${units(totals.dynamodb.write_units)} write units, `,
    `${totals.s3.requests} S3 requests; ${bytes(last.stored_bytes)} stored in ${last.checkpoints} checkpoints and `,
    `${last.threads} threads at the end.`,
  );
}

export async function render(root, ctx) {
  const values = {};
  for (const name of ['from', 'to', 'tenant']) values[name] = ctx.params.get(name) || '';
  const from = h('input', {name: 'from', type: 'date', value: values.from});
  const to = h('input', {name: 'to', type: 'date', value: values.to});
  const manages = ctx.can('tenants:manage');
  const tenant = manages ? h('input', {name: 'tenant', value: values.tenant, autocomplete: 'off'}) : null;
  const form = h(
    'form',
    {class: 'filters', 'aria-label': 'Usage range'},
    field('From', from, 'Empty: 30 days before To.'),
    field('To', to, 'Empty: today (UTC).'),
    manages ? field('Tenant', tenant, phrase`Empty: yours (${ctx.caller.tenant_id}).`) : null,
    h('div', {class: 'field'}, h('button', {type: 'submit', class: 'primary'}, 'Show usage')),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    ctx.navigate(ctx.href('usage', [], {from: from.value, to: to.value, tenant: tenant ? tenant.value.trim() : ''}));
  });
  const answer = h('div', {class: 'usage-answer', 'aria-live': 'polite'}, loading('Reading usage'));
  replace(
    root,
    h('h1', {}, 'Usage'),
    h(
      'p',
      {class: 'muted'},
      'Requests admitted by route family, the DynamoDB units and S3 requests they cost, and what was stored at each ',
      'day\u2019s end (UTC). Requests show within 30 seconds of being served; stored figures within about 20.',
    ),
    form,
    answer,
  );
  try {
    const parameters = {from: values.from, to: values.to, tenant_id: values.tenant};
    const {data} = await get(`/v1/usage${query(parameters)}`);
    if (!ctx.current()) return;
    const families = familiesOf(data.days);
    replace(answer, summary(data), chart(data.days, families), legend(families), table(data.days));
  } catch (error) {
    if (ctx.current()) replace(answer, errorNote(error));
  }
}
