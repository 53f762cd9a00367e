"""The dashboard: one self-contained page, its style and script inline.

Nothing is loaded from anywhere but the control peer itself, so it works on a
machine with no network; the Content-Security-Policy sent with it allows exactly
this script and this style (by hash) and fetches to the same origin, nothing else.

The page polls ``api/status`` every second and redraws in place. Elements a test
or a scraper may rely on: ``tr[data-peer=ID][data-state=STATE]`` per peer with
``td.<column>[data-value]`` cells, ``tr#totals`` with ``td#total-<column>``,
``canvas#chart[data-points][data-events]`` (membership events marked), and
``body[data-polls]`` (answers received).
"""

from __future__ import annotations

import base64
import hashlib
from typing import Final

COLUMNS: Final = (
    "id",
    "address",
    "state",
    "started",
    "uptime",
    "pages",
    "rate",
    "errors",
    "timeouts",
    "frontier",
    "hosts",
    "bytes-in",
    "bytes-out",
    "slowest",
)

_STYLE: Final = r"""
:root { color-scheme: light dark; --fg: #1b1f24; --muted: #5f6b77; --bg: #fff;
  --line: #d8dee4; --head: #f3f5f7; --dead: #c62828; --suspect: #b26a00; --alive: #2e7d32; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6e8eb; --muted: #9aa5b1; --bg: #15181c;
  --line: #2e353d; --head: #1d2227; } }
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.2em 1.5em; color: var(--fg);
  background: var(--bg); }
header { display: flex; align-items: baseline; gap: 1.5em; flex-wrap: wrap; }
h1 { font-size: 1.3em; margin: 0 0 .4em; }
#conn { color: var(--muted); }
#conn[data-ok="false"] { color: var(--dead); font-weight: 600; }
.cards { display: flex; gap: 2.5em; margin: .6em 0 1em; }
.card b { display: block; font-size: 1.7em; font-variant-numeric: tabular-nums; }
.card span { color: var(--muted); }
#chart { width: 100%; height: 260px; display: block; border: 1px solid var(--line); }
#legend { margin: .3em 0 1.2em; color: var(--muted); }
#legend .key { margin-right: 1.2em; white-space: nowrap; }
#legend .swatch { display: inline-block; width: 1.4em; height: .35em; margin-right: .35em;
  vertical-align: middle; }

.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: .3em .5em; border-bottom: 1px solid var(--line); text-align: right;
  white-space: nowrap; }
th { background: var(--head); font-weight: 600; }
th:nth-child(-n+4), td:nth-child(-n+4) { text-align: left; }
td.id { font-family: ui-monospace, monospace; }
tfoot td { font-weight: 600; border-top: 2px solid var(--line); }
tr.state-alive td.state { color: var(--alive); }
tr.state-suspect td.state { color: var(--suspect); font-weight: 600; }
tr.state-dead td.state { color: var(--dead); font-weight: 600; }
tr.state-dead, tr.state-left { color: var(--muted); }
tr.paused td.state { color: var(--suspect); font-weight: 600; }
tr.stale td.uptime { color: var(--suspect); }
td.slowest { text-align: left; }
"""

_SCRIPT: Final = r"""
"use strict";
const POLL_MS = 1000, TIMEOUT_MS = 5000;
const COLUMNS = __COLUMNS__;
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
  "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"];
const colours = new Map();
const rows = new Map();
let polls = 0, last = null;

function colourOf(id) {
  if (!colours.has(id)) colours.set(id, PALETTE[colours.size % PALETTE.length]);
  return colours.get(id);
}
const pad2 = (n) => String(n).padStart(2, "0");
const count = (n) => Math.round(n).toLocaleString("en-US");
const perSecond = (n) => n.toFixed(1);
function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + units[i];
}
function duration(s) {
  s = Math.max(0, Math.floor(s));
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  return (d ? d + "d " : "") + (d || h ? pad2(h) + "h " : "") + pad2(m) + "m " + pad2(s % 60) + "s";
}
const seconds = (s) => s >= 120 ? (s / 60).toFixed(1) + " min"
  : s < 1 ? Math.round(s * 1000) + " ms" : s.toFixed(2) + " s";
// One of a peer's slowest hosts: [host, seconds to answer (-1: none timed), seconds
// it waits between requests or until its next, strikes, failed tries of its robots.txt].
function slowHost(h) {
  const notes = (h[4] ? [h[4] + (h[4] === 1 ? " try" : " tries") + " failed"] : [])
    .concat(h[3] ? [h[3] + " × 503/429"] : []);
  return h[0] + (h[1] < 0 ? "" : " " + seconds(h[1]) + ",") + " waits " +
    seconds(h[2]) + (h[4] ? " for its robots.txt" : "") +
    (notes.length ? " (" + notes.join("; ") + ")" : "");
}
function when(t) {
  if (t === null || t === undefined) return "–";
  const d = new Date(t * 1000);
  return d.getFullYear() + "-" + pad2(d.getMonth() + 1) + "-" + pad2(d.getDate()) + " " +
    pad2(d.getHours()) + ":" + pad2(d.getMinutes()) + ":" + pad2(d.getSeconds());
}

function newRow() {
  const tr = document.createElement("tr");
  for (const c of COLUMNS) {
    const td = document.createElement("td");
    td.className = c;
    tr.appendChild(td);
  }
  return tr;
}
function put(tr, column, text, value) {
  const td = tr.querySelector("td." + column);
  td.textContent = text;
  td.dataset.value = String(value === undefined ? text : value);
}
function fill(tr, p) {
  const shown = p.reported;
  put(tr, "id", p.peer_id);
  put(tr, "address", p.address);
  put(tr, "state", p.note ? p.state + " · " + p.note : p.state, p.state);
  put(tr, "started", when(p.started_at), p.started_at === null ? "" : p.started_at);
  put(tr, "uptime", shown ? duration(p.uptime) : "–", p.uptime);
  put(tr, "pages", shown ? count(p.pages) : "–", p.pages);
  put(tr, "rate", shown ? perSecond(p.pages_per_second) : "–", p.pages_per_second);
  put(tr, "errors", shown ? count(p.errors) : "–", p.errors);
  put(tr, "timeouts", shown ? count(p.timeouts) : "–", p.timeouts);
  put(tr, "frontier", shown ? count(p.frontier) : "–", p.frontier);
  put(tr, "hosts", shown ? count(p.hosts) : "–", p.hosts);
  put(tr, "bytes-in", shown ? bytes(p.bytes_in) : "–", p.bytes_in);
  put(tr, "bytes-out", shown ? bytes(p.bytes_out) : "–", p.bytes_out);
  const slow = p.slowest || [];
  put(tr, "slowest", shown && slow.length ? slowHost(slow[0]) : "–", slow.length ? slow[0][0] : "");
  tr.querySelector("td.slowest").title = slow.map(slowHost).join("\n");
}

function renderRows(peers) {
  const body = document.getElementById("peer-rows");
  const seen = new Set();
  for (const p of peers) {
    seen.add(p.peer_id);
    let tr = rows.get(p.peer_id);
    if (!tr) {
      tr = newRow();
      tr.dataset.peer = p.peer_id;
      rows.set(p.peer_id, tr);
    }
    body.appendChild(tr);  // appending again keeps the server's order
    tr.dataset.state = p.state;
    const stale = p.reported && p.age !== null && p.age > 5 &&
      (p.state === "alive" || p.state === "suspect");
    tr.className = "peer state-" + p.state + (stale ? " stale" : "") +
      (p.note.startsWith("paused") ? " paused" : "");
    tr.title = stale ? "no new figures for " + Math.round(p.age) + " s" : "";
    fill(tr, p);
  }
  for (const [id, tr] of rows) {
    if (!seen.has(id)) { tr.remove(); rows.delete(id); }
  }
}

function renderTotals(t) {
  const tr = document.getElementById("totals");
  const states = Object.entries(t.by_state).filter(([, n]) => n > 0)
    .map(([s, n]) => n + " " + s).join(", ");
  put(tr, "id", "cluster");
  put(tr, "address", t.peers + (t.peers === 1 ? " peer" : " peers"), t.peers);
  put(tr, "state", states || "–");
  put(tr, "started", "");
  put(tr, "uptime", "");
  put(tr, "pages", count(t.pages), t.pages);
  put(tr, "rate", perSecond(t.pages_per_second), t.pages_per_second);
  put(tr, "errors", count(t.errors), t.errors);
  put(tr, "timeouts", count(t.timeouts), t.timeouts);
  put(tr, "frontier", count(t.frontier), t.frontier);
  put(tr, "hosts", count(t.hosts), t.hosts);
  put(tr, "bytes-in", bytes(t.bytes_in), t.bytes_in);
  put(tr, "bytes-out", bytes(t.bytes_out), t.bytes_out);
  document.getElementById("card-pages").textContent = count(t.pages);
  document.getElementById("card-rate").textContent = perSecond(t.pages_per_second);
  document.getElementById("card-peers").textContent =
    (t.by_state.alive || 0) + (t.by_state.suspect || 0) + " / " + t.peers;
}

function niceCeiling(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}
function line(ctx, xs, ys, colour, width) {
  ctx.strokeStyle = colour;
  ctx.lineWidth = width;
  ctx.beginPath();
  let pen = false;
  for (let i = 0; i < xs.length; i++) {
    if (ys[i] === null) { pen = false; continue; }
    if (pen) ctx.lineTo(xs[i], ys[i]); else ctx.moveTo(xs[i], ys[i]);
    pen = true;
  }
  ctx.stroke();
}
function drawChart(chart) {
  const canvas = document.getElementById("chart");
  const ratio = window.devicePixelRatio || 1;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  if (canvas.width !== Math.round(w * ratio)) canvas.width = Math.round(w * ratio);
  if (canvas.height !== Math.round(h * ratio)) canvas.height = Math.round(h * ratio);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, w, h);
  const left = 52, right = 12, top = 10, bottom = 24, span = chart.history;
  const fg = getComputedStyle(document.body).color;
  const top_ = niceCeiling(Math.max(1, ...chart.total) * 1.1);
  const x = (t) => left + ((t + span) / span) * (w - left - right);
  const y = (v) => (v === null ? null : h - bottom - (v / top_) * (h - top - bottom));
  ctx.font = "11px system-ui, sans-serif";
  ctx.fillStyle = fg;
  ctx.globalAlpha = 0.25;
  ctx.strokeStyle = fg;
  ctx.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const gy = Math.round(y((top_ * i) / 4)) + 0.5;
    ctx.beginPath(); ctx.moveTo(left, gy); ctx.lineTo(w - right, gy); ctx.stroke();
  }
  ctx.globalAlpha = 0.8;
  ctx.textAlign = "right"; ctx.textBaseline = "middle";
  for (let i = 0; i <= 4; i++) ctx.fillText(String((top_ * i) / 4), left - 6, y((top_ * i) / 4));
  ctx.textAlign = "center"; ctx.textBaseline = "top";
  const step = [10, 30, 60, 120, 300, 600, 1800].find((s) => span / s <= 6) || 3600;
  for (let s = 0; s <= span; s += step) {
    const label = s === 0 ? "now" : step < 60 ? "-" + s + " s" : "-" + s / 60 + " min";
    ctx.fillText(label, x(-s), h - bottom + 6);
  }
  ctx.globalAlpha = 1;
  const xs = chart.t.map(x);
  for (const [id, values] of Object.entries(chart.peers)) {
    line(ctx, xs, values.map(y), colourOf(id), 1.5);
  }
  line(ctx, xs, chart.total.map(y), fg, 2.5);
  // Membership events: a dashed line at the time, in the peer's colour, and what.
  const events = (chart.events || []).filter((e) => e.t >= -span);
  ctx.textAlign = "left"; ctx.textBaseline = "top";
  events.forEach((e, i) => {
    const ex = Math.round(x(e.t)) + 0.5;
    ctx.strokeStyle = colourOf(e.peer); ctx.fillStyle = colourOf(e.peer);
    ctx.setLineDash([3, 3]);
    ctx.beginPath(); ctx.moveTo(ex, top); ctx.lineTo(ex, h - bottom); ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillText(e.peer.slice(0, 6) + " " + e.what, ex + 3, top + 12 * (i % 4));
  });
  canvas.dataset.points = String(chart.t.length);
  canvas.dataset.events = String(events.length);
  renderLegend(Object.keys(chart.peers), fg);
}
function renderLegend(ids, fg) {
  const legend = document.getElementById("legend");
  legend.textContent = "";
  for (const [id, colour] of [["total", fg], ...ids.map((i) => [i, colourOf(i)])]) {
    const key = document.createElement("span");
    key.className = "key";
    key.dataset.peer = id;
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = colour;
    key.append(swatch, id === "total" ? "all peers" : id);
    legend.appendChild(key);
  }
}

function render(data) {
  for (const p of data.peers) colourOf(p.peer_id);
  renderRows(data.peers);
  renderTotals(data.totals);
  drawChart(data.chart);
}
function setConn(ok, text) {
  const conn = document.getElementById("conn");
  conn.dataset.ok = String(ok);
  conn.textContent = text;
}
async function poll() {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), TIMEOUT_MS);
  try {
    const answer = await fetch("api/status", { cache: "no-store", signal: abort.signal });
    if (!answer.ok) throw new Error("HTTP " + answer.status);
    last = await answer.json();
    render(last);
    document.body.dataset.polls = String(++polls);
    setConn(true, "updated " + when(last.now));
  } catch (e) {
    setConn(false, "cannot reach the control peer (" + e.message + "); retrying");
  } finally {
    clearTimeout(timer);
    setTimeout(poll, POLL_MS);
  }
}
window.addEventListener("resize", () => { if (last) drawChart(last.chart); });
poll();
"""

_SCRIPT_TEXT: Final = _SCRIPT.replace(
    "__COLUMNS__", "[" + ", ".join(f'"{c}"' for c in COLUMNS) + "]"
)

_HEADINGS: Final = {
    "id": "peer",
    "address": "address",
    "state": "state",
    "started": "started",
    "uptime": "uptime",
    "pages": "pages",
    "rate": "pages/s",
    "errors": "errors",
    "timeouts": "time-outs",
    "frontier": "frontier",
    "hosts": "hosts",
    "bytes-in": "bytes in",
    "bytes-out": "bytes out",
    "slowest": "slowest host",
}

_HTML: Final = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ubipy control centre</title>
<link rel="icon" href="data:,">
<style>{_STYLE}</style>
</head>
<body data-polls="0">
<header><h1>ubipy control centre</h1><span id="conn" data-ok="true">connecting…</span></header>
<div class="cards">
<div class="card"><b id="card-pages">–</b><span>pages fetched</span></div>
<div class="card"><b id="card-rate">–</b><span>pages/s</span></div>
<div class="card"><b id="card-peers">–</b><span>peers live / known</span></div>
</div>
<canvas id="chart" data-points="0" aria-label="pages per second per peer and in total">
</canvas>
<div id="legend"></div>
<div class="scroll"><table id="peers">
<thead><tr>{"".join(f'<th class="{c}">{_HEADINGS[c]}</th>' for c in COLUMNS)}</tr></thead>
<tbody id="peer-rows"></tbody>
<tfoot><tr id="totals">{"".join(f'<td class="{c}" id="total-{c}"></td>' for c in COLUMNS)}</tr>
</tfoot>
</table></div>
<script>{_SCRIPT_TEXT}</script>
</body>
</html>
"""


def _hash(source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


PAGE: Final = _HTML.encode("utf-8")
CONTENT_SECURITY_POLICY: Final = (
    f"default-src 'none'; script-src {_hash(_SCRIPT_TEXT)}; style-src {_hash(_STYLE)}; "
    "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
