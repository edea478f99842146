# ruff: noqa: E501  (the page's script and styles: long lines are the JavaScript's own)
"""The page template of ``fastprof.report.html``: styles and script, no external resource.
``__TITLE__`` and ``__DATA__`` (the inlined JSON) are filled in by ``render_html``."""

PAGE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>__TITLE__</title>
<style>
body { font: 13px/1.35 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0;
       color: #222; background: #fafafa; }
header { padding: 8px 14px; background: #263238; color: #eceff1; }
header h1 { font-size: 15px; margin: 0 0 2px 0; }
header .sub { color: #b0bec5; font-size: 12px; }
section { padding: 8px 14px; }
.bar { display: flex; gap: 10px; align-items: center; flex-wrap: wrap; margin-bottom: 6px; }
.bar input[type=search] { width: 260px; padding: 3px 6px; }
#flame-wrap { position: relative; border: 1px solid #ccc; background: #fff; overflow: auto;
              height: 200px; }
#flame { position: absolute; left: 0; top: 0; display: block; }
#tip { position: fixed; pointer-events: none; background: #fffde7; border: 1px solid #999;
       padding: 5px 8px; font-size: 12px; display: none; max-width: 520px; z-index: 10;
       white-space: pre-wrap; font-family: ui-monospace, Menlo, Consolas, monospace; }
table { border-collapse: collapse; font-size: 12px; }
th, td { padding: 2px 8px; text-align: right; white-space: nowrap; }
th { cursor: pointer; background: #eceff1; position: sticky; top: 0; user-select: none; }
td.name, th.name { text-align: left; }
td.loc { text-align: left; color: #666; }
tr.sel { background: #fff3c4; }
tbody tr:hover { background: #f1f8e9; cursor: pointer; }
.lib { color: #546e7a; }
#funcs-wrap { max-height: 45vh; overflow: auto; border: 1px solid #ccc; background: #fff; }
#detail { display: flex; gap: 24px; flex-wrap: wrap; margin-top: 8px; }
#detail h3 { font-size: 13px; margin: 4px 0; }
.muted { color: #777; }
pre.src { margin: 0; }
.lines td.code { text-align: left; font-family: ui-monospace, Menlo, Consolas, monospace;
                 white-space: pre; }
.hot { background: #ffebee; }
button { font-size: 12px; }
</style>
</head>
<body>
<header><h1 id="title"></h1><div class="sub" id="summary"></div></header>
<section id="flame-section">
  <div class="bar">
    <label><span id="root-noun">thread</span> <select id="thread"></select></label>
    <input type="search" id="search" placeholder="search functions (name or file)">
    <span id="search-info" class="muted"></span>
    <button id="reset">reset zoom</button>
    <span id="zoom-info" class="muted"></span>
  </div>
  <div id="flame-wrap"><div id="flame-space"></div><canvas id="flame" height="40"></canvas></div>
  <div class="muted" id="legend"></div>
</section>
<section id="funcs-section">
  <div class="bar"><strong>functions</strong>
    <input type="search" id="filter" placeholder="filter (name or file)">
    <span id="filter-info" class="muted"></span></div>
  <div id="funcs-wrap"><table id="funcs"><thead><tr></tr></thead><tbody></tbody></table></div>
  <div id="detail"></div>
</section>
<section id="lines-section" style="display:none"><strong>line timings</strong>
  <div id="lines"></div></section>
<div id="tip"></div>
<script type="application/json" id="fastprof-data">__DATA__</script>
<script>
"use strict";
(function () {
const D = JSON.parse(document.getElementById("fastprof-data").textContent);
const K = D.keys;  // [file, line, name, library, label, location]
const ROW = 18;
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s).replace(/[&<>"']/g,
  (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
function secs(x) {
  const a = Math.abs(x);
  if (a >= 100) return x.toFixed(1) + " s";
  if (a >= 1) return x.toFixed(3) + " s";
  if (a >= 1e-3) return (x * 1e3).toFixed(2) + " ms";
  return (x * 1e6).toFixed(1) + " \u00b5s";
}
function pct(a, b) { return b > 0 ? (100 * a / b).toFixed(1) + "%" : "-"; }
function keyText(k) { const r = K[k]; return r[4] + (r[5] ? "  " + r[5] : ""); }

$("title").textContent = D.title;

// ---- the trees: one per thread, and all threads summed by path ----------------------------
function makeView(t) {
  // node 0 is the thread's root; node i+1 is t's node i
  const n = t.parent.length + 1;
  const parent = new Int32Array(n), key = new Int32Array(n), depth = new Int32Array(n);
  const calls = new Float64Array(n), self = new Float64Array(n), total = new Float64Array(n);
  const diff = !!t.btotal;
  const btotal = diff ? new Float64Array(n) : null, bself = diff ? new Float64Array(n) : null;
  const bcalls = diff ? new Float64Array(n) : null;
  const levels = new Int32Array(n).fill(1);
  if (t.levels) for (let i = 1; i < n; i++) levels[i] = t.levels[i - 1];
  parent[0] = -1; key[0] = -1;
  for (let i = 1; i < n; i++) {
    parent[i] = t.parent[i - 1] + 1; key[i] = t.key[i - 1];
    calls[i] = t.calls[i - 1]; self[i] = t.self[i - 1]; total[i] = t.total[i - 1];
    if (diff) { btotal[i] = t.btotal[i - 1]; bself[i] = t.bself[i - 1]; bcalls[i] = t.bcalls[i - 1]; }
  }
  return finish({label: t.label, n, parent, key, depth, calls, self, total, btotal, bself, bcalls, levels});
}
function finish(v) {
  const n = v.n, cnt = new Int32Array(n + 1);
  for (let i = 1; i < n; i++) cnt[v.parent[i] + 1]++;
  const start = new Int32Array(n + 1);
  for (let i = 0; i < n; i++) start[i + 1] = start[i] + cnt[i + 1];
  const fill = start.slice(0, n), kids = new Int32Array(Math.max(n - 1, 0));
  for (let i = 1; i < n; i++) kids[fill[v.parent[i]]++] = i;
  let rootTotal = 0;
  for (let j = start[0]; j < start[1]; j++) rootTotal += v.total[kids[j]];
  v.total[0] = rootTotal;
  if (v.btotal) { let b = 0; for (let j = start[0]; j < start[1]; j++) b += v.btotal[kids[j]]; v.btotal[0] = b; }
  for (let i = 0; i < n; i++) {  // widest first
    const a = start[i], b = start[i + 1];
    if (b - a > 1) {
      const part = Array.from(kids.subarray(a, b)).sort((x, y) => v.total[y] - v.total[x]);
      kids.set(part, a);
    }
  }
  const x0 = new Float64Array(n);
  let maxDepth = 0;
  const stack = [0];
  while (stack.length) {
    const i = stack.pop();
    let x = x0[i];
    for (let j = start[i]; j < start[i + 1]; j++) {
      const c = kids[j];
      x0[c] = x; x += v.total[c]; v.depth[c] = v.depth[i] + 1;
      if (v.depth[c] > maxDepth) maxDepth = v.depth[c];
      stack.push(c);
    }
  }
  v.start = start; v.kids = kids; v.x0 = x0; v.maxDepth = maxDepth;
  return v;
}
function mergeViews(views) {
  const parent = [-1], key = [-1], calls = [0], self = [0], total = [0];
  const diff = views.length && !!views[0].btotal;
  const bt = [0], bs = [0], bc = [0], levels = [1];
  const index = new Map();
  for (const v of views) {
    const map = new Int32Array(v.n); map[0] = 0;
    for (let i = 1; i < v.n; i++) {
      const p = map[v.parent[i]], id = p + ":" + v.key[i];
      let m = index.get(id);
      if (m === undefined) {
        m = parent.length; index.set(id, m);
        parent.push(p); key.push(v.key[i]); calls.push(0); self.push(0); total.push(0);
        bt.push(0); bs.push(0); bc.push(0); levels.push(1);
      }
      map[i] = m; calls[m] += v.calls[i]; self[m] += v.self[i]; total[m] += v.total[i];
      levels[m] = Math.max(levels[m], v.levels[i]);
      if (diff) { bt[m] += v.btotal[i]; bs[m] += v.bself[i]; bc[m] += v.bcalls[i]; }
    }
  }
  const n = parent.length;
  return finish({label: "all " + ROOT[1], n, parent: Int32Array.from(parent),
    key: Int32Array.from(key), depth: new Int32Array(n), calls: Float64Array.from(calls),
    self: Float64Array.from(self), total: Float64Array.from(total),
    btotal: diff ? Float64Array.from(bt) : null, bself: diff ? Float64Array.from(bs) : null,
    bcalls: diff ? Float64Array.from(bc) : null, levels: Int32Array.from(levels)});
}

// a job's merged profile has one root per process, others one per thread
const ROOT = D.roots === "processes" ? ["process", "processes"] : ["thread", "threads"];
$("root-noun").textContent = ROOT[0];
const views = D.threads.map(makeView);
let runTotal = 0;
for (const v of views) runTotal += v.total[0];
const sel = $("thread");
if (views.length > 1) {
  const o = document.createElement("option"); o.value = "all";
  o.textContent = "all " + ROOT[1] + " (summed by path)"; sel.appendChild(o);
}
views.forEach((v, i) => {
  const o = document.createElement("option"); o.value = String(i);
  o.textContent = v.label + " \u2014 " + pct(v.total[0], runTotal); sel.appendChild(o);
});
let merged = null;
function viewFor(value) {
  if (value === "all") { if (!merged) merged = mergeViews(views); return merged; }
  return views[+value];
}
let V = views.length ? viewFor(sel.value || "0") : null;
let focus = 0, matches = null, drawn = [];

// ---- the icicle graph -----------------------------------------------------------------------
const canvas = $("flame"), ctx = canvas.getContext("2d");
function hash(s) { let h = 2166136261; for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); } return h >>> 0; }
const colorCache = new Map();
function color(i) {
  const k = V.key[i];
  if (k < 0) return "#cfd8dc";
  if (V.btotal) {
    const d = V.total[i] - V.btotal[i], base = Math.max(V.btotal[i], V.total[i], 1e-12);
    const r = Math.min(1, Math.abs(d) / base);
    if (Math.abs(d) < 1e-12) return "#e0e0e0";
    const c = Math.round(230 - 150 * r);
    return d > 0 ? `rgb(255,${c},${c})` : `rgb(${c},${c},255)`;
  }
  let c = colorCache.get(k);
  if (c) return c;
  const h = hash(K[k][2]);
  const lib = K[k][3];
  if (lib === "builtins") c = `hsl(200,8%,${70 + h % 12}%)`;
  else if (lib) c = `hsl(${195 + h % 30},45%,${68 + h % 12}%)`;
  else c = `hsl(${10 + h % 40},85%,${58 + h % 14}%)`;
  colorCache.set(k, c);
  return c;
}
function nameOf(i) {
  if (i === 0) return V.label + " (root)";
  return K[V.key[i]][4] + (V.levels[i] > 1 ? " (recursion, " + V.levels[i] + " levels)" : "");
}
// layout() picks the frames to draw (down to half a pixel wide); paint() draws those in the
// scrolled-to part of the graph on a canvas the size of the visible box.
let list = [], graphH = 0;
function layout() {
  if (!V) return;
  const wrap = $("flame-wrap");
  const W = wrap.clientWidth || 1000;
  const fx = V.x0[focus], fw = V.total[focus] || 1e-300, scale = W / fw;
  const fd = V.depth[focus];
  list = [];
  for (let a = V.parent[focus], d = fd - 1; a >= 0; a = V.parent[a], d--) list.push([a, 0, W, d]);
  let maxD = fd;
  const stack = [focus];
  while (stack.length) {
    const i = stack.pop();
    const px = (V.x0[i] - fx) * scale, pw = V.total[i] * scale;
    if (pw < 0.5) continue;
    const d = V.depth[i];
    if (d > maxD) maxD = d;
    list.push([i, px, pw, d]);
    for (let j = V.start[i]; j < V.start[i + 1]; j++) stack.push(V.kids[j]);
  }
  drawn = [];
  for (const item of list) (drawn[item[3]] || (drawn[item[3]] = [])).push([item[1], item[2], item[0]]);
  graphH = (maxD + 1) * ROW;
  $("flame-space").style.height = graphH + "px";
  wrap.style.height = Math.min(graphH + 2, Math.max(200, Math.floor(window.innerHeight * 0.7))) + "px";
  $("zoom-info").textContent = focus === 0 ? "click a frame to zoom" :
    "zoomed on " + nameOf(focus) + " (" + pct(V.total[focus], V.total[0]) + " of the " + ROOT[0] + ")";
  window.fastprofState = {focus: focus, drawn: list.length, depth: maxD};
}
function paint() {
  if (!V) return;
  const wrap = $("flame-wrap");
  const dpr = window.devicePixelRatio || 1;
  const W = wrap.clientWidth || 1000, H = Math.max(wrap.clientHeight, 1);
  const top = wrap.scrollTop;
  canvas.style.top = top + "px";
  canvas.style.width = W + "px"; canvas.style.height = H + "px";
  canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);
  ctx.setTransform(dpr, 0, 0, dpr, 0, -top * dpr);
  ctx.clearRect(0, top, W, H);
  ctx.font = "11px ui-monospace, Menlo, Consolas, monospace";
  ctx.textBaseline = "middle";
  const d0 = Math.floor(top / ROW), d1 = Math.ceil((top + H) / ROW);
  for (let d = d0; d <= d1; d++) {
    const row = drawn[d];
    if (!row) continue;
    const y = d * ROW;
    for (const [px, pw, i] of row) {
      const m = matches && matches[i];
      let fill = color(i);
      if (matches && !m) fill = "#eeeeee";
      if (m) fill = "#e040fb";
      ctx.fillStyle = fill;
      ctx.fillRect(px, y, Math.max(pw - 0.5, 0.5), ROW - 1);
      if (pw > 30) {
        ctx.fillStyle = "#111";
        const label = nameOf(i), maxc = Math.floor((pw - 6) / 6.6);
        ctx.fillText(label.length > maxc ? label.slice(0, Math.max(maxc - 1, 1)) + "\u2026" : label, px + 3, y + ROW / 2);
      }
    }
  }
}
function draw() { layout(); paint(); }
$("flame-wrap").addEventListener("scroll", paint);
function hit(ev) {
  const r = canvas.getBoundingClientRect();
  const x = ev.clientX - r.left, d = Math.floor((ev.clientY - r.top + $("flame-wrap").scrollTop) / ROW);
  const row = drawn[d];
  if (!row) return -1;
  for (const [px, pw, i] of row) if (x >= px && x < px + pw) return i;
  return -1;
}
function zoomTo(i) { focus = i < 0 ? 0 : i; draw(); }
canvas.addEventListener("click", (ev) => { const i = hit(ev); if (i >= 0) zoomTo(i); });
$("reset").addEventListener("click", () => zoomTo(0));
const tip = $("tip");
canvas.addEventListener("mousemove", (ev) => {
  const i = hit(ev);
  if (i < 0) { tip.style.display = "none"; return; }
  let t = nameOf(i);
  if (i > 0) {
    const k = K[V.key[i]];
    if (k[0] !== "~") t += "\n" + k[0] + ":" + k[1];
    if (k[3]) t += "\nlibrary: " + k[3];
  }
  t += "\ntotal " + secs(V.total[i]) + "  (" + pct(V.total[i], runTotal) + " of the run)" +
       "\nself  " + secs(V.self[i]) + "  (" + pct(V.self[i], runTotal) + ")" +
       "\ncalls " + V.calls[i];
  if (V.btotal) t += "\nbefore: total " + secs(V.btotal[i]) + ", self " + secs(V.bself[i]) +
       ", calls " + V.bcalls[i] + "\nchange: total " + (V.total[i] >= V.btotal[i] ? "+" : "") +
       secs(V.total[i] - V.btotal[i]);
  tip.textContent = t; tip.style.display = "block";
  tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - 540) + "px";
  tip.style.top = (ev.clientY + 14) + "px";
});
canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; });
function search(text) {
  const q = text.trim().toLowerCase();
  if (!q || !V) { matches = null; $("search-info").textContent = ""; draw(); return 0; }
  const hitKey = new Uint8Array(K.length);
  for (let k = 0; k < K.length; k++)
    if ((K[k][4] + " " + K[k][0]).toLowerCase().includes(q)) hitKey[k] = 1;
  matches = new Uint8Array(V.n);
  let count = 0, time = 0;
  const under = new Uint8Array(V.n);  // a matching ancestor: its time is counted already
  for (let i = 1; i < V.n; i++) {  // parents precede children
    const p = V.parent[i];
    under[i] = p > 0 && (under[p] || matches[p]) ? 1 : 0;
    if (hitKey[V.key[i]]) { matches[i] = 1; count++; if (!under[i]) time += V.total[i]; }
  }
  $("search-info").textContent = count + " frames match, " + pct(time, V.total[0]) + " of the " + ROOT[0];
  draw();
  return count;
}
$("search").addEventListener("input", (ev) => search(ev.target.value));
sel.addEventListener("change", () => { V = viewFor(sel.value); focus = 0; search($("search").value); });
window.addEventListener("resize", draw);
if (!views.length) {
  document.querySelector("#flame-section .bar").style.display = "none";
  $("flame-wrap").style.display = "none";
  $("legend").textContent = D.funcs.length ? "No call tree in this profile (a pstats file without " +
    "FILE.tree.json beside it): the tables below are what there is." :
    D.lines.length ? "Line timings only: they are below." :
    "Nothing was recorded: the profile holds no calls.";
}
if (D.merged) $("legend").textContent = D.merged + " calls merged (node cap " + D.node_cap +
  "): counted in the functions' totals, not in the graph.";

// ---- the function table ----------------------------------------------------------------------
const F = D.funcs;  // [key, calls, primcalls, self, total]
let fTotal = 0;
for (const f of F) fTotal += f[3];
const before = new Map();
if (D.bfuncs) for (const b of D.bfuncs) before.set(b[0], b);
const cols = D.bfuncs ? [
  ["function", (f) => K[f[0]][4], "name"], ["location", (f) => K[f[0]][5], "name"],
  ["calls", (f) => f[1]], ["\u0394 calls", (f) => f[1] - (before.get(f[0]) || [0, 0])[1]],
  ["self", (f) => f[3]], ["\u0394 self", (f) => f[3] - (before.get(f[0]) || [0, 0, 0])[2]],
  ["total", (f) => f[4]], ["\u0394 total", (f) => f[4] - (before.get(f[0]) || [0, 0, 0, 0])[3]],
] : [
  ["function", (f) => K[f[0]][4], "name"], ["location", (f) => K[f[0]][5], "name"],
  ["calls", (f) => f[1]], ["self", (f) => f[3]], ["self %", (f) => f[3]],
  ["total", (f) => f[4]], ["per call", (f) => f[1] ? f[4] / f[1] : 0],
];
let sortCol = D.bfuncs ? 7 : 3, sortDesc = true, selected = -1;
const thead = document.querySelector("#funcs thead tr"), tbody = document.querySelector("#funcs tbody");
cols.forEach((c, j) => {
  const th = document.createElement("th"); th.textContent = c[0];
  if (c[2]) th.className = "name";
  th.addEventListener("click", () => { if (sortCol === j) sortDesc = !sortDesc; else { sortCol = j; sortDesc = j > 1; } table(); });
  thead.appendChild(th);
});
function cell(j, f) {
  const v = cols[j][1](f);
  if (j === 0) return '<td class="name' + (K[f[0]][3] ? " lib" : "") + '">' + esc(v) + "</td>";
  if (j === 1) return '<td class="loc" title="' + esc(K[f[0]][0]) + '">' + esc(v) + "</td>";
  if (cols[j][0] === "calls" || cols[j][0] === "\u0394 calls") return "<td>" + v + "</td>";
  if (cols[j][0] === "self %") return "<td>" + pct(v, fTotal) + "</td>";
  return "<td>" + (cols[j][0][0] === "\u0394" && v > 0 ? "+" : "") + secs(v) + "</td>";
}
function table() {
  const q = $("filter").value.trim().toLowerCase();
  let rows = q ? F.filter((f) => (K[f[0]][4] + " " + K[f[0]][0]).toLowerCase().includes(q)) : F.slice();
  const get = cols[sortCol][1];
  rows.sort((a, b) => {
    let x = get(a), y = get(b);
    if (D.bfuncs && sortCol > 2) { x = Math.abs(x); y = Math.abs(y); }
    return (x < y ? -1 : x > y ? 1 : 0) * (sortDesc ? -1 : 1);
  });
  const shown = rows.slice(0, 500);
  $("filter-info").textContent = rows.length + " of " + F.length + " functions" +
    (rows.length > shown.length ? " (first 500 shown)" : "");
  tbody.innerHTML = shown.map((f) => '<tr data-k="' + f[0] + '"' + (f[0] === selected ? ' class="sel"' : "") + ">" +
    cols.map((c, j) => cell(j, f)).join("") + "</tr>").join("");
  Array.from(thead.children).forEach((th, j) => { th.textContent = cols[j][0] + (j === sortCol ? (sortDesc ? " \u25be" : " \u25b4") : ""); });
}
tbody.addEventListener("click", (ev) => {
  const tr = ev.target.closest("tr"); if (!tr) return;
  selected = +tr.dataset.k; table(); detail(selected);
});
$("filter").addEventListener("input", table);
function edgeTable(title, rows, which) {
  if (!rows.length) return "<div><h3>" + title + "</h3><span class=muted>none</span></div>";
  rows.sort((a, b) => b[4] - a[4]);
  return "<div><h3>" + title + "</h3><table><thead><tr><th class=name>function</th><th>calls</th><th>self</th><th>total</th></tr></thead><tbody>" +
    rows.map((e) => "<tr><td class=name>" + esc(keyText(e[which])) + "</td><td>" + e[2] + "</td><td>" + secs(e[3]) + "</td><td>" + secs(e[4]) + "</td></tr>").join("") +
    "</tbody></table></div>";
}
function detail(k) {
  const callers = D.edges.filter((e) => e[1] === k), callees = D.edges.filter((e) => e[0] === k);
  $("detail").innerHTML = "<div><h3>" + esc(keyText(k)) + "</h3><span class=muted>" + esc(K[k][0]) + "</span></div>" +
    edgeTable("callers (calls of it they made)", callers, 0) + edgeTable("callees (its calls of them)", callees, 1);
}
if (F.length) table(); else $("funcs-section").style.display = "none";

// ---- line timings ----------------------------------------------------------------------------
if (D.lines.length) {
  $("lines-section").style.display = "";
  $("lines").innerHTML = D.lines.map((fn) => {
    let tot = 0; for (const r of fn.rows) tot += r[2];
    return "<h3>" + esc(fn.name) + " <span class=muted>" + esc(fn.file) + ":" + fn.line + " \u2014 " + secs(tot) + "</span></h3>" +
      '<table class="lines"><thead><tr><th>line</th><th>hits</th><th>time</th><th>per hit</th><th>%</th><th class=name>source</th></tr></thead><tbody>' +
      fn.rows.map((r) => "<tr" + (tot > 0 && r[2] / tot > 0.2 ? ' class="hot"' : "") + "><td>" + r[0] + "</td><td>" + r[1] + "</td><td>" + secs(r[2]) + "</td><td>" +
        (r[1] ? secs(r[2] / r[1]) : "-") + "</td><td>" + pct(r[2], tot) + '</td><td class="code">' + esc(r[3]) + "</td></tr>").join("") +
      "</tbody></table>";
  }).join("");
}

let nodes = 0; for (const v of views) nodes += v.n - 1;
$("summary").textContent = (views.length ? secs(runTotal) + " in " + views.length + " " + ROOT[views.length > 1 ? 1 : 0] + ", " + nodes + " call paths, " : "") +
  (F.length || !D.lines.length ? F.length + " functions" + (D.lines.length ? ", " : "") : "") +
  (D.lines.length ? "line timings of " + D.lines.length + " function" + (D.lines.length > 1 ? "s" : "") : "") +
  (D.diff ? " \u2014 differential: red paths took longer than before, blue less" : "");
draw();
window.fastprof = {zoomTo: zoomTo, search: search, view: () => V, draw: draw,
  selectThread: (value) => { sel.value = value; sel.dispatchEvent(new Event("change")); }};
})();
</script>
</body>
</html>
"""
