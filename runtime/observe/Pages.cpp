//===- Pages.cpp - self-contained HTML pages ------------------------------===//
#include "observe/Pages.h"

using namespace zrt;

namespace {

const char *kStyle = R"css(
body { font: 14px system-ui, sans-serif; margin: 16px 24px; color: #1d1d1f; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 20px 0 6px; }
.sub { color: #555; margin-bottom: 8px; }
.chart { position: relative; height: 340px; max-width: 1200px; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 12px; }
.grid .chart { height: 260px; }
table { border-collapse: collapse; font-size: 13px; }
td, th { padding: 2px 10px; border-bottom: 1px solid #e3e3e3; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 6px; }
#tip { position: fixed; background: #fff; border: 1px solid #999; padding: 4px 6px;
       pointer-events: none; display: none; font-size: 12px; max-width: 480px; }
#error { color: #b00020; font-weight: bold; white-space: pre-wrap; }
canvas.map { border: 1px solid #ddd; max-width: 100%; }
)css";

// Shared by both pages: the data, errors shown on the page, byte formats.
const char *kCommon = R"js(
'use strict';
window.addEventListener('error', e => {
  document.body.dataset.error = String(e.message);
  document.getElementById('error').textContent = 'page error: ' + e.message;
});
const D = JSON.parse(document.getElementById('data').textContent);
const GiB = 1 << 30, MiB = 1 << 20;
function bytes(b) {
  if (b >= GiB) return (b / GiB).toFixed(2) + ' GiB';
  if (b >= MiB) return (b / MiB).toFixed(2) + ' MiB';
  if (b >= 1024) return (b / 1024).toFixed(1) + ' KiB';
  return b + ' B';
}
function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
Chart.defaults.animation = false;
Chart.defaults.font.size = 12;
const COLORS = {
  'parameters': '#4e79a7', 'parameter copies': '#a0cbe8', 'gradients': '#f28e2b',
  'optimizer state': '#e15759', 'frozen buffers': '#bab0ac', 'state padding': '#d7d7d7',
  'constants': '#9c755f', 'inputs': '#edc948', 'activations': '#59a14f',
  'gathered parameters': '#76b7b2', 'communication buffers': '#b07aa1',
  'offloaded parameters': '#4e79a7', 'offloaded gradients': '#f28e2b',
  'offloaded optimizer state': '#e15759', 'host temporaries': '#59a14f',
};
const color = k => COLORS[k] || '#888';
)js";

const char *kMemoryJs = R"js(
document.getElementById('title').textContent = 'Memory over the step: ' + D.source;
const sub = document.getElementById('sub');
sub.textContent = (D.model ? D.model + ', ' : '') + 'world size ' + D.world_size + ', ZeRO stage ' +
  D.zero_stage + ', target ' + D.target + '. Every rank runs this plan: the map is each rank\'s.';
const summary = document.getElementById('summary');
const rows = [['peak (planned)', D.peak_bytes, 'state + constants + inputs + the device arena\'s high-water mark (64-byte aligned)']];
for (const k in D.static) rows.push([k, D.static[k], 'whole step']);
rows.push(['device arena', D.arenas.device, 'temporaries, reused by liveness; high-water ' + bytes(D.peak.device_high_water)]);
if (D.arenas.host > 0) rows.push(['host arena (pinned)', D.arenas.host, 'offloaded state and host temporaries']);
for (const m of D.measured) rows.push([m.label, m.bytes, 'measured by zrun']);
for (const [name, b, note] of rows) {
  const tr = el('tr');
  const td = el('td'); td.appendChild(el('span', {class: 'swatch', style: 'background:' + color(name)}));
  td.appendChild(document.createTextNode(name)); tr.appendChild(td);
  tr.appendChild(el('td', {class: 'n', 'data-bytes': b}, bytes(b)));
  tr.appendChild(el('td', {}, note)); summary.appendChild(tr);
}
document.getElementById('peakid').dataset.peak = D.peak_bytes;
document.getElementById('peakid').textContent = bytes(D.peak_bytes);

// The curve: whole-step state as flat bands, the device arena's live bytes
// by kind stacked on them, the high-water mark (what is allocated) above.
const N = D.timeline.length, labels = D.timeline.map((_, i) => i);
const datasets = [];
for (const k in D.static)
  datasets.push({label: k, data: labels.map(() => D.static[k]), backgroundColor: color(k),
                 borderColor: color(k), fill: true, stack: 'm', pointRadius: 0, borderWidth: 0});
const kinds = new Set();
for (const t of D.timeline) for (const k in t.by_kind) kinds.add(k);
for (const k of kinds)
  datasets.push({label: k, data: D.timeline.map(t => t.by_kind[k] || 0), backgroundColor: color(k),
                 borderColor: color(k), fill: true, stack: 'm', pointRadius: 0, borderWidth: 0,
                 stepped: true});
datasets.push({label: 'allocated: static + device high-water', stack: 'hw', fill: false,
               data: D.timeline.map(t => D.static_bytes + t.high_water), borderColor: '#222',
               borderWidth: 1.5, pointRadius: 0, stepped: true});
datasets.push({label: 'peak ' + bytes(D.peak_bytes), stack: 'pk', type: 'scatter', showLine: false,
               data: [{x: D.peak.position, y: D.peak_bytes}], backgroundColor: '#b00020',
               borderColor: '#b00020', pointRadius: 6, pointStyle: 'triangle'});
D.measured.forEach((m, i) =>
  datasets.push({label: m.label + ' (measured)', stack: 'r' + i, fill: false,
                 borderDash: [6, 4], borderColor: '#555', borderWidth: 1, pointRadius: 0,
                 data: labels.map(() => m.bytes)}));
const programAt = i => D.programs.find(p => p.first <= i && i <= p.last);
new Chart(document.getElementById('curve'), {
  type: 'line', data: {labels, datasets},
  options: {
    maintainAspectRatio: false, interaction: {mode: 'index', intersect: false},
    scales: {
      x: {type: 'linear', min: 0, max: Math.max(N - 1, 1), title: {display: true, text: 'instruction (micro_step, then apply)'},
          ticks: {callback: v => { const p = programAt(v); return p && v === p.first ? p.name : v; }}},
      y: {stacked: true, beginAtZero: true, title: {display: true, text: 'bytes per rank'},
          ticks: {callback: v => bytes(v)}}},
    plugins: {tooltip: {callbacks: {
      title: items => { const t = D.timeline[items[0].dataIndex]; return t ? t.program + ':' + t.index + ' ' + t.op + (t.node ? ' (' + t.node + ')' : '') : ''; },
      label: it => it.dataset.label + ': ' + bytes(it.parsed.y)}}}}});

// The map: each temporary a box over its lifetime at its byte range.
function drawMap(canvas, arena, size) {
  const ctx = canvas.getContext('2d'), W = canvas.width, H = canvas.height, pad = 40;
  const boxes = D.buffers.filter(b => b.arena === arena && b.first !== undefined && !b.view);
  const x = p => pad + (W - pad - 4) * p / Math.max(N, 1);
  const y = o => H - 18 - (H - 24) * o / Math.max(size, 1);
  ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, W, H);
  for (const b of boxes) {
    ctx.fillStyle = color(b.kind);
    ctx.globalAlpha = 0.75;
    const x0 = x(b.first), x1 = Math.max(x(b.last + 1), x0 + 1);
    const y1 = y(b.offset), y0 = Math.min(y(b.offset + b.bytes), y1 - 1);
    ctx.fillRect(x0, y0, x1 - x0, y1 - y0);
  }
  ctx.globalAlpha = 1;
  ctx.strokeStyle = '#b00020'; ctx.beginPath();
  ctx.moveTo(x(D.peak.position + 0.5), 4); ctx.lineTo(x(D.peak.position + 0.5), H - 18); ctx.stroke();
  ctx.fillStyle = '#333'; ctx.font = '11px sans-serif';
  ctx.fillText(bytes(size), 2, 12); ctx.fillText('0', 2, H - 20);
  for (const p of D.programs) ctx.fillText(p.name, x(p.first) + 2, H - 4);
  const tip = document.getElementById('tip');
  canvas.addEventListener('mousemove', e => {
    const r = canvas.getBoundingClientRect(), sx = W / r.width, sy = H / r.height;
    const mx = (e.clientX - r.left) * sx, my = (e.clientY - r.top) * sy;
    const hit = boxes.find(b => x(b.first) <= mx && mx <= Math.max(x(b.last + 1), x(b.first) + 1) &&
                                y(b.offset + b.bytes) <= my && my <= y(b.offset));
    if (!hit) { tip.style.display = 'none'; return; }
    tip.textContent = hit.name + ': ' + bytes(hit.bytes) + ', ' + hit.kind + (hit.node ? ', from ' + hit.node : '') +
      ', instructions ' + hit.first + '-' + hit.last;
    tip.style.left = (e.clientX + 12) + 'px'; tip.style.top = (e.clientY + 12) + 'px'; tip.style.display = 'block';
  });
  canvas.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
  return boxes.length;
}
drawMap(document.getElementById('map'), 'device', D.arenas.device);
if (D.arenas.host > 0 && D.buffers.some(b => b.arena === 'host' && b.first !== undefined)) {
  document.getElementById('hostsec').style.display = '';
  drawMap(document.getElementById('hostmap'), 'host', D.arenas.host);
}
const legend = document.getElementById('legend');
for (const k of new Set(D.buffers.filter(b => b.first !== undefined).map(b => b.kind))) {
  legend.appendChild(el('span', {class: 'swatch', style: 'background:' + color(k)}));
  legend.appendChild(document.createTextNode(k + '   '));
}

const at = D.timeline[D.peak.position] || {};
document.getElementById('peakat').textContent = 'At instruction ' + D.peak.position + ' (' +
  D.peak.program + ':' + D.peak.index + ' ' + (at.op || '') + (at.node ? ', ONNX node ' + at.node : '') +
  '): ' + bytes(D.peak_bytes) + ' in all, the device arena at ' + bytes(D.peak.device_high_water) + '.';
const live = document.getElementById('live');
live.appendChild(el('tr')).append(el('th', {}, 'buffer'), el('th', {}, 'kind'), el('th', {}, 'bytes'),
                                  el('th', {}, 'ONNX node'));
for (const b of D.peak.live.slice(0, 60)) {
  const tr = el('tr');
  tr.append(el('td', {}, b.name), el('td', {}, b.kind), el('td', {class: 'n'}, bytes(b.bytes)),
            el('td', {}, b.node || ''));
  live.appendChild(tr);
}
if (D.peak.live.length > 60)
  live.appendChild(el('tr')).appendChild(el('td', {colspan: 4}, (D.peak.live.length - 60) + ' smaller buffers not listed'));
document.body.dataset.drawn = 'yes';
)js";

const char *kMemoryBody = R"html(
<h1 id="title"></h1><div class="sub" id="sub"></div><div id="error"></div>
<p>Peak per rank: <b id="peakid"></b></p>
<table id="summary"></table>
<h2>Memory over the step</h2>
<div class="chart"><canvas id="curve"></canvas></div>
<h2>Device arena: every temporary at its offset over its lifetime</h2>
<div id="legend" class="sub"></div>
<canvas class="map" id="map" width="1200" height="380"></canvas>
<div id="hostsec" style="display:none"><h2>Host arena (pinned): offloaded state and host temporaries</h2>
<canvas class="map" id="hostmap" width="1200" height="220"></canvas></div>
<h2>Live at the peak</h2><p id="peakat"></p>
<table id="live"></table>
<div id="tip"></div>
)html";

const char *kDashboardJs = R"js(
document.getElementById('title').textContent = 'Training: ' + D.plan;
document.getElementById('sub').textContent = (D.model ? D.model + ', ' : '') + 'world size ' +
  D.world_size + ', ZeRO stage ' + D.zero_stage + ', ' + D.backend + '; ' + D.records.length + ' of ' +
  D.steps + ' steps' + (D.state === 'running' ? ' (running; the page reloads every ' + D.refresh + ' s)' :
  ' (' + D.state + (D.reason ? ': ' + D.reason : '') + ')');
const R = D.records, steps = R.map(r => r.step + 1);
function chart(id, label, series, opts) {
  const ds = series.map(([name, values, c, extra]) => Object.assign({label: name, data: values,
    borderColor: c, backgroundColor: c, pointRadius: R.length > 60 ? 0 : 2, borderWidth: 1.5,
    spanGaps: true}, extra || {}));
  new Chart(document.getElementById(id), {type: 'line', data: {labels: steps, datasets: ds},
    options: Object.assign({maintainAspectRatio: false, interaction: {mode: 'index', intersect: false},
      scales: {x: {title: {display: true, text: 'step'}}, y: {title: {display: true, text: label}}}},
      opts || {})});
}
chart('loss', 'loss', [['loss', R.map(r => r.loss), '#4e79a7'],
  ['eval loss', R.map(r => r.eval_loss === undefined ? null : r.eval_loss), '#e15759',
   {showLine: false, pointRadius: 4}]]);
const maxLr = Math.max(...R.map(r => r.lr), 0);
chart('lr', 'learning rate', [['lr', R.map(r => r.lr), '#59a14f']],
  {scales: {y: {beginAtZero: true, suggestedMax: 1.1 * maxLr || 1, title: {display: true, text: 'learning rate'},
                ticks: {callback: v => Number(v).toExponential(1)}}}});
chart('norm', 'gradient norm', [['grad norm', R.map(r => r.grad_norm), '#f28e2b']]);
chart('scale', 'loss scale', [['loss scale', R.map(r => r.loss_scale), '#76b7b2'],
  ['skipped (fp16 overflow)', R.map(r => r.skipped ? r.loss_scale : null), '#b00020',
   {showLine: false, pointRadius: 5, pointStyle: 'crossRot'}]],
  {scales: {y: {type: 'logarithmic', title: {display: true, text: 'loss scale'}}}});
chart('speed', 'tokens/s', [['tokens/s', R.map(r => r.tokens_per_s), '#b07aa1']]);
const hasMfu = R.some(r => r.mfu !== undefined);
chart('mfu', hasMfu ? 'MFU (%)' : 'matmul TFLOP/s per rank',
  [[hasMfu ? 'MFU' : 'TFLOP/s', R.map(r => hasMfu ? (r.mfu === undefined ? null : 100 * r.mfu) : r.tflops),
    '#9c755f']]);
const mem = [['planned peak', R.map(r => r.peak_bytes), '#222', {borderDash: [6, 4]}]];
const palette = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7'];
const labelsSeen = new Set();
for (const r of R) for (const m of r.memory || []) labelsSeen.add(m.label);
[...labelsSeen].forEach((label, i) => mem.push([label, R.map(r => {
  const m = (r.memory || []).find(x => x.label === label); return m ? m.bytes : null; }),
  palette[i % palette.length]]));
chart('memory', 'bytes per rank', mem, {scales: {y: {beginAtZero: true, ticks: {callback: v => bytes(v)},
  title: {display: true, text: 'bytes per rank'}}}});
const last = R[R.length - 1];
if (last) document.getElementById('last').textContent = 'step ' + (last.step + 1) + ': loss ' +
  (last.loss === null ? 'n/a' : last.loss.toFixed(5)) + ', lr ' + last.lr.toExponential(3) + ', grad norm ' +
  (last.grad_norm === null ? 'n/a' : last.grad_norm.toFixed(4)) + ', ' + Math.round(last.tokens_per_s) +
  ' tokens/s, ' + last.step_ms.toFixed(1) + ' ms';
document.body.dataset.drawn = 'yes';
)js";

const char *kDashboardBody = R"html(
<h1 id="title"></h1><div class="sub" id="sub"></div><div id="error"></div><p id="last"></p>
<div class="grid">
<div class="chart"><canvas id="loss"></canvas></div>
<div class="chart"><canvas id="lr"></canvas></div>
<div class="chart"><canvas id="norm"></canvas></div>
<div class="chart"><canvas id="scale"></canvas></div>
<div class="chart"><canvas id="speed"></canvas></div>
<div class="chart"><canvas id="mfu"></canvas></div>
<div class="chart"><canvas id="memory"></canvas></div>
</div>
)html";

const char *kTraceJs = R"js(
// The timeline: a lane per (process, thread) of the trace, each complete
// event a box (nested events, e.g. a program run inside its step, one row
// below); wheel zooms about the cursor, drag pans, double-click shows all,
// and #from=A&to=B (milliseconds) opens a window of the trace.
const meta = {pname: {}, psort: {}, tname: {}, tsort: {}};
for (const e of D.traceEvents) {
  if (e.ph !== 'M' || !e.args) continue;
  const t = e.pid + ':' + e.tid;
  if (e.name === 'process_name') meta.pname[e.pid] = e.args.name;
  if (e.name === 'process_sort_index') meta.psort[e.pid] = e.args.sort_index;
  if (e.name === 'thread_name') meta.tname[t] = e.args.name;
  if (e.name === 'thread_sort_index') meta.tsort[t] = e.args.sort_index;
}
const X = D.traceEvents.filter(e => e.ph === 'X');
const lanes = new Map();
for (const e of X) {
  const k = e.pid + ':' + e.tid;
  if (!lanes.has(k)) lanes.set(k, {pid: e.pid, tid: e.tid, slices: [], rows: 0,
    label: (meta.pname[e.pid] || 'process ' + e.pid) + ' / ' + (meta.tname[k] || 'thread ' + e.tid)});
  lanes.get(k).slices.push(e);
}
const order = (m, k, d) => (m[k] !== undefined ? m[k] : d);
const L = [...lanes.values()].sort((a, b) =>
  order(meta.psort, a.pid, a.pid) - order(meta.psort, b.pid, b.pid) ||
  order(meta.tsort, a.pid + ':' + a.tid, a.tid) - order(meta.tsort, b.pid + ':' + b.tid, b.tid));
const ROW = 18, GAP = 8, GUTTER = 170, AXIS = 26;
let y = AXIS;
for (const l of L) {
  l.slices.sort((a, b) => a.ts - b.ts || b.dur - a.dur);
  // A row's last end; an event takes the first row free at its start (10 ns
  // of slack: the file rounds start and duration to nanoseconds separately).
  const ends = [];
  for (const s of l.slices) {
    let r = ends.findIndex(end => end <= s.ts + 0.01);
    if (r < 0) { r = ends.length; ends.push(0); }
    ends[r] = s.ts + s.dur; s.row = r;
  }
  l.rows = Math.max(ends.length, 1); l.y = y; y += l.rows * ROW + GAP;
}
let t0 = Infinity, t1 = -Infinity;
for (const e of X) { t0 = Math.min(t0, e.ts); t1 = Math.max(t1, e.ts + e.dur); }
if (!(t1 > t0)) t1 = t0 + 1;
const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#76b7b2', '#edc948', '#af7aa1', '#ff9da7',
                 '#9c755f', '#8cd17d', '#86bcb6', '#f1ce63', '#a0cbe8', '#ffbe7d', '#d4a6c8'];
const FIXED = {wait: '#d62728', step: '#c7c7c7', program: '#dedede', collective: '#7b4ea3',
               copy: '#bcbd22'};
function hue(name) { let h = 0; for (const c of name) h = (h * 31 + c.charCodeAt(0)) >>> 0; return PALETTE[h % PALETTE.length]; }
const sliceColor = s => FIXED[s.cat] || hue(s.name);
const canvas = document.getElementById('timeline');
canvas.height = y + 4;
const ctx = canvas.getContext('2d');
let v0 = t0, v1 = t1;
const m = /from=([0-9.eE+-]+)&to=([0-9.eE+-]+)/.exec(location.hash);
if (m && +m[2] > +m[1]) { v0 = 1000 * m[1]; v1 = 1000 * m[2]; }
const W = () => canvas.width - GUTTER - 8;
const px = t => GUTTER + (t - v0) / (v1 - v0) * W();
function niceStep(span) {
  const raw = span / 8, p = Math.pow(10, Math.floor(Math.log10(raw)));
  return [1, 2, 5, 10].map(f => f * p).find(s => s >= raw);
}
function draw() {
  ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.font = '11px sans-serif'; ctx.textBaseline = 'middle';
  const step = niceStep(v1 - v0);
  ctx.strokeStyle = '#eee'; ctx.fillStyle = '#555';
  for (let t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
    const x = px(t);
    ctx.beginPath(); ctx.moveTo(x, AXIS - 6); ctx.lineTo(x, canvas.height); ctx.stroke();
    if (x < canvas.width - 44)
      ctx.fillText((t / 1000).toFixed(step >= 1000 ? 0 : step >= 100 ? 1 : step >= 10 ? 2 : 3) + ' ms', x + 2, 10);
  }
  let drawn = 0;
  for (const l of L) {
    ctx.fillStyle = '#f7f7f7'; ctx.fillRect(GUTTER, l.y, W(), l.rows * ROW);
    ctx.fillStyle = '#222'; ctx.fillText(l.label, 4, l.y + ROW / 2);
    ctx.save(); ctx.beginPath(); ctx.rect(GUTTER, l.y, W(), l.rows * ROW); ctx.clip();
    for (const s of l.slices) {
      const x0 = px(s.ts), x1 = px(s.ts + s.dur);
      if (x1 < GUTTER || x0 > canvas.width) continue;
      const yy = l.y + s.row * ROW + 1, w = Math.max(x1 - x0, 1);
      ctx.fillStyle = sliceColor(s); ctx.fillRect(x0, yy, w, ROW - 2);
      if (w > 36) {
        ctx.fillStyle = s.cat === 'step' || s.cat === 'program' ? '#222' : '#fff';
        const label = s.name, room = Math.floor((w - 4) / 6);
        ctx.fillText(label.length > room ? label.slice(0, Math.max(room - 1, 1)) + '…' : label,
                     Math.max(x0, GUTTER) + 2, yy + ROW / 2 - 1);
      }
      ++drawn;
    }
    ctx.restore();
  }
  return drawn;
}
const tip = document.getElementById('tip');
function hit(e) {
  const r = canvas.getBoundingClientRect();
  const mx = (e.clientX - r.left) * canvas.width / r.width, my = (e.clientY - r.top) * canvas.height / r.height;
  const l = L.find(l => l.y <= my && my < l.y + l.rows * ROW);
  if (!l || mx < GUTTER) return {mx};
  const row = Math.floor((my - l.y) / ROW), t = v0 + (mx - GUTTER) / W() * (v1 - v0);
  const tol = 2 * (v1 - v0) / W();  // a sliver a pixel wide is still hit
  return {mx, s: l.slices.find(s => s.row === row && s.ts - tol <= t && t <= s.ts + s.dur + tol)};
}
let drag = null;
canvas.addEventListener('mousedown', e => { drag = {x: e.clientX, v0, v1}; });
window.addEventListener('mouseup', () => { drag = null; });
canvas.addEventListener('mousemove', e => {
  if (drag) {
    const dt = (e.clientX - drag.x) / canvas.getBoundingClientRect().width * canvas.width / W() * (drag.v1 - drag.v0);
    v0 = drag.v0 - dt; v1 = drag.v1 - dt; draw(); return;
  }
  const {s} = hit(e);
  if (!s) { tip.style.display = 'none'; return; }
  const a = Object.entries(s.args || {}).map(([k, v]) => k + ': ' + v).join('\n');
  tip.textContent = s.name + '  ' + (s.dur / 1000).toFixed(3) + ' ms at ' + (s.ts / 1000).toFixed(3) + ' ms' + (a ? '\n' + a : '');
  tip.style.whiteSpace = 'pre'; tip.style.left = (e.clientX + 12) + 'px'; tip.style.top = (e.clientY + 12) + 'px';
  tip.style.display = 'block';
});
canvas.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
canvas.addEventListener('wheel', e => {
  e.preventDefault();
  const {mx} = hit(e), at = v0 + (Math.max(mx, GUTTER) - GUTTER) / W() * (v1 - v0);
  const f = e.deltaY > 0 ? 1.25 : 0.8;
  v0 = at - (at - v0) * f; v1 = at + (v1 - at) * f; draw();
}, {passive: false});
canvas.addEventListener('dblclick', () => { v0 = t0; v1 = t1; draw(); });
const drawn = draw();

const other = D.otherData || {};
document.getElementById('title').textContent = 'Timeline: ' + D.sources.join(', ');
document.getElementById('sub').textContent = [other.plan ? 'plan ' + other.plan : '',
  other.backend ? other.backend + ' backend' : '', other.world_size ? 'world size ' + other.world_size : '',
  other.zero_stage !== undefined ? 'ZeRO stage ' + other.zero_stage : '',
  X.length + ' slices over ' + ((t1 - t0) / 1000).toFixed(3) + ' ms'].filter(x => x).join(', ') +
  (D.sources.length > 1 ? '. Each file\'s times count from its own first slice.' : '.');

// Time by kind on each process's compute track (zrun's thread named
// 'compute'; another producer's busiest thread): what --profile tables.
const procs = [...new Set(L.map(l => l.pid))];
const by = {}, kinds = new Map();
for (const pid of procs) {
  const mine = L.filter(l => l.pid === pid);
  const lane = mine.find(l => meta.tname[pid + ':' + l.tid] === 'compute') ||
               mine.reduce((a, b) => (b.slices.length > a.slices.length ? b : a));
  by[pid] = {};
  for (const s of lane.slices) {
    const k = by[pid][s.name] || (by[pid][s.name] = {us: 0, n: 0});
    k.us += s.dur; k.n += 1; kinds.set(s.name, (kinds.get(s.name) || 0) + s.dur);
  }
  const steps = L.filter(l => l.pid === pid).flatMap(l => l.slices).filter(s => s.cat === 'step');
  by[pid].__step = steps.reduce((a, s) => a + s.dur, 0) / Math.max(steps.length, 1);
}
const kindOrder = [...kinds.entries()].sort((a, b) => b[1] - a[1]).map(([k]) => k);
const table = document.getElementById('kinds');
const head = el('tr'); head.appendChild(el('th', {}, 'kind'));
for (const pid of procs) head.appendChild(el('th', {}, (meta.pname[pid] || 'process ' + pid) + ': ms (count)'));
table.appendChild(head);
for (const k of kindOrder) {
  const tr = el('tr'); const td = el('td');
  td.appendChild(el('span', {class: 'swatch', style: 'background:' + (k === 'wait' ? FIXED.wait : hue(k))}));
  td.appendChild(document.createTextNode(k)); tr.appendChild(td);
  for (const pid of procs) {
    const v = by[pid][k];
    tr.appendChild(v ? el('td', {class: 'n', 'data-rank': pid, 'data-kind': k, 'data-us': v.us.toFixed(3),
                                 'data-count': v.n}, (v.us / 1000).toFixed(3) + ' (' + v.n + ')')
                     : el('td', {class: 'n'}, ''));
  }
  table.appendChild(tr);
}
const topKinds = kindOrder.slice(0, 14);
new Chart(document.getElementById('bykind'), {type: 'bar',
  data: {labels: topKinds, datasets: procs.map((pid, i) => ({label: meta.pname[pid] || 'process ' + pid,
    data: topKinds.map(k => by[pid][k] ? by[pid][k].us / 1000 : 0), backgroundColor: PALETTE[i % PALETTE.length]}))},
  options: {indexAxis: 'y', maintainAspectRatio: false,
            scales: {x: {title: {display: true, text: 'ms on the compute track (all traced steps)'}}}}});
document.body.dataset.slices = drawn;
document.body.dataset.drawn = drawn === X.length || (v0 !== t0 || v1 !== t1) ? 'yes' : 'partly';
)js";

const char *kTraceBody = R"html(
<h1 id="title"></h1><div class="sub" id="sub"></div><div id="error"></div>
<div class="sub">Wheel: zoom about the cursor; drag: pan; double-click: the whole trace; hover: a slice's
arguments. Waits (exposed communication) are red, collectives purple, steps and program runs gray.</div>
<canvas class="map" id="timeline" width="1240" height="200"></canvas>
<h2>Time by kind on the compute track</h2>
<div class="chart"><canvas id="bykind"></canvas></div>
<table id="kinds"></table>
<div id="tip"></div>
)html";

std::string escapeHtml(const std::string &s) {
  std::string out;
  for (char c : s)
    switch (c) {
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '&':
      out += "&amp;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  return out;
}

/// JSON inside <script>, every '<' as the same JSON string's \u003c.
std::string scriptSafe(const std::string &json) {
  std::string out;
  out.reserve(json.size());
  // Every '<' (it only occurs inside JSON strings) as \u003c: then neither
  // "</script>" nor "<!--" (which, followed by "<script", would make the
  // parser swallow the rest of the page) can appear in the element's text.
  for (char c : json)
    if (c == '<')
      out += "\\u003c";
    else
      out += c;
  return out;
}

} // namespace

std::string zrt::renderPage(PageKind kind, const std::string &title, const std::string &dataJson,
                            int refreshSeconds) {
  std::string html = "<!doctype html>\n<html><head><meta charset=\"utf-8\">\n";
  if (refreshSeconds > 0)
    html += "<meta http-equiv=\"refresh\" content=\"" + std::to_string(refreshSeconds) + "\">\n";
  html += "<title>" + escapeHtml(title) + "</title>\n<style>" + kStyle + "</style>\n";
  html += "<script>/* Chart.js v3 (MIT), from Debian's libjs-chart.js */\n";
  html += kChartJs;
  html += "\n</script>\n</head><body>\n";
  const char *body = kind == PageKind::Memory  ? kMemoryBody
                     : kind == PageKind::Trace ? kTraceBody
                                               : kDashboardBody;
  const char *script = kind == PageKind::Memory  ? kMemoryJs
                       : kind == PageKind::Trace ? kTraceJs
                                                 : kDashboardJs;
  html += body;
  html += "<script id=\"data\" type=\"application/json\">" + scriptSafe(dataJson) + "</script>\n";
  html += "<script>";
  html += kCommon;
  html += script;
  html += "</script>\n</body></html>\n";
  return html;
}
