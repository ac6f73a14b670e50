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

/// JSON inside <script>: "</" would end the element early; "<\/" is the
/// same JSON string.
std::string scriptSafe(const std::string &json) {
  std::string out;
  out.reserve(json.size());
  for (size_t i = 0; i < json.size(); ++i) {
    out += json[i];
    if (json[i] == '<' && i + 1 < json.size() && json[i + 1] == '/')
      out += '\\';
  }
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
  html += kind == PageKind::Memory ? kMemoryBody : kDashboardBody;
  html += "<script id=\"data\" type=\"application/json\">" + scriptSafe(dataJson) + "</script>\n";
  html += "<script>";
  html += kCommon;
  html += kind == PageKind::Memory ? kMemoryJs : kDashboardJs;
  html += "</script>\n</body></html>\n";
  return html;
}
