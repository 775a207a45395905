// An environment's timeline (hand-drawn SVG) from its audit log: lease grants (blue dots),
// the fence (a step line: the highest generation accepted so far, raised by grants in
// STRICT), publications (green squares) and rejections (red crosses; a stale agent's sits
// below the fence). One slot per point, in time order; the time axis below names the
// time of a few slots.

import { el, svg } from './dom.js';

const W = 400, H = 146, L = 30, R = 10, T = 10, B = 36;
/** Time labels on the axis, at most. */
const TICKS = 4;

function clock(at, withDate) {
  const date = new Date(at);
  const time = date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
  return withDate ? `${date.toLocaleDateString([], { month: 'short', day: 'numeric' })} ${time}` : time;
}

/** Slots that get a time label: first, last and evenly between. */
function tickSlots(count) {
  if (count <= TICKS) return [...Array(count).keys()];
  return [...new Set(Array.from({ length: TICKS }, (_, i) => Math.round((i * (count - 1)) / (TICKS - 1))))];
}

export function timeline(env, details) {
  const events = [...details.auditEvents].reverse().filter((e) => e.generation != null);
  const published = details.plans.filter((p) => p.publishedAt);
  if (!events.length && !published.length) return el('p', 'empty', 'no generations yet');
  // Chronological order, one slot per point: bursts a few milliseconds apart stay readable.
  const points = [...events.map((e) => ({ at: Date.parse(e.at), e })), ...published.map((p) => ({ at: Date.parse(p.publishedAt), p }))]
    .sort((a, b) => a.at - b.at);
  const gMax = Math.max(1, env.fence, env.lastIssuedGeneration, ...events.map((e) => e.generation));
  const x = (i) => L + ((i + 0.5) / points.length) * (W - L - R);
  const y = (g) => H - B - (g / gMax) * (H - T - B);
  const chart = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img' });
  chart.append(svg('title', {}, `${env.name}: generations, fence, publications and rejections over time`));
  chart.append(svg('line', { x1: L, y1: y(0), x2: W - R, y2: y(0), class: 'axis' }));
  chart.append(svg('text', { x: 2, y: y(gMax) + 4, class: 'label' }, `g${gMax}`));
  chart.append(svg('text', { x: 2, y: y(0), class: 'label' }, 'g0'));
  // The time axis: a tick and the time under a few slots; the date too when the points span days.
  const first = points[0].at, last = points[points.length - 1].at;
  const withDate = new Date(first).toDateString() !== new Date(last).toDateString();
  const axis = svg('g', { class: 'time-axis' });
  const slots = tickSlots(points.length);
  slots.forEach((i, n) => {
    const anchor = slots.length === 1 ? 'middle' : n === 0 ? 'start' : n === slots.length - 1 ? 'end' : 'middle';
    axis.append(svg('line', { x1: x(i), y1: y(0), x2: x(i), y2: y(0) + 4, class: 'axis tick' }));
    const label = svg('text', { x: anchor === 'start' ? Math.max(L, x(i) - 4) : anchor === 'end' ? Math.min(W - R, x(i) + 4) : x(i), y: y(0) + 14, 'text-anchor': anchor, class: 'label time-label' }, clock(points[i].at, withDate));
    label.dataset.at = new Date(points[i].at).toISOString();
    axis.append(label);
  });
  axis.append(svg('text', { x: W - R, y: H - 4, 'text-anchor': 'end', class: 'label axis-name' }, 'time (one slot per event) →'));
  chart.append(axis);
  // The fence as a step line.
  let fence = 0;
  let path = `M${L},${y(0)}`;
  points.forEach(({ e }, i) => {
    const raises = e && e.outcome === 'ACCEPTED' && (e.action !== 'ACQUIRE_LEASE' || env.mode === 'STRICT');
    if (raises && e.generation > fence) {
      path += ` H${x(i)} V${y(e.generation)}`;
      fence = e.generation;
    }
  });
  path += ` H${W - R}`;
  chart.append(svg('path', { d: path, class: 'fence-line' }));
  points.forEach(({ e, at }, i) => {
    if (!e) return;
    const cx = x(i), cy = y(e.generation);
    const label = `${e.actor} ${e.action} generation ${e.generation}${e.code ? ` ${e.code}` : ''} at ${clock(at, true)}`;
    let mark = null;
    if (e.outcome === 'REJECTED') {
      mark = svg('path', { d: `M${cx - 4},${cy - 4} L${cx + 4},${cy + 4} M${cx - 4},${cy + 4} L${cx + 4},${cy - 4}`, class: 'rejection' });
    } else if (e.action === 'ACQUIRE_LEASE') {
      mark = svg('circle', { cx, cy, r: 3.5, class: 'grant' });
    }
    if (mark) {
      mark.append(svg('title', {}, label));
      chart.append(mark);
    }
  });
  points.forEach(({ p, at }, i) => {
    if (!p) return;
    const cx = x(i), cy = y(p.generation);
    const mark = svg('rect', { x: cx - 4, y: cy - 4, width: 8, height: 8, class: 'publication' });
    mark.append(svg('title', {}, `published ${p.id} at ${clock(at, true)}`));
    chart.append(mark);
  });
  const legend = el('p', 'legend',
    el('span', 'k-grant', '● grant'), ' ', el('span', 'k-fence', '— fence'), ' ',
    el('span', 'k-pub', '■ published'), ' ', el('span', 'k-rej', '✕ turned away'));
  return el('div', null, chart, legend);
}
