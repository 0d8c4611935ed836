// rec browse: the grid, the filters, the record view, the augmentation
// preview, the charts and the comparison of datasets. Every value from a
// record is put in the page as text (textContent), never as markup.
"use strict";

const NS = "http://www.w3.org/2000/svg";
const FILTERS = ["class", "problem", "side", "aspect"];
const state = { ds: 0, start: 0, seed: null, size: 160, count: 100, filter: {} };
let shown = [];  // the records of the page shown, in order
let viewing = -1;  // their index in the record view, or -1
let datasets = [];  // what /api/datasets said
let hidden = new Set();  // class names whose boxes the record view hides

function readHash() {
  const h = new URLSearchParams(location.hash.slice(1));
  state.ds = Number(h.get("ds") || 0);
  state.start = Number(h.get("start") || 0);
  state.seed = h.has("seed") ? Number(h.get("seed")) : null;
  state.size = Number(h.get("size") || 160);
  state.count = Math.min(Math.max(Number(h.get("count") || 100), 1), 1000);
  state.filter = {};
  for (const f of FILTERS) if (h.has(f)) state.filter[f] = h.get(f);
}

function writeHash() {
  const h = new URLSearchParams({ ds: state.ds, start: state.start, size: state.size });
  if (state.seed !== null) h.set("seed", state.seed);
  if (state.count !== 100) h.set("count", state.count);
  for (const [k, v] of Object.entries(state.filter)) h.set(k, v);
  const next = "#" + h.toString();
  if (location.hash !== next) history.pushState(null, "", next);
}

async function api(path, params) {
  const q = new URLSearchParams(params);
  const r = await fetch(`/api/${path}?${q}`, { credentials: "same-origin" });
  if (!r.ok) {
    let why = `${path}: ${r.status}`;
    try { why = (await r.json()).error || why; } catch (e) { /* the status says enough */ }
    throw new Error(why);
  }
  return r.json();
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function svgEl(tag, attrs) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

// boxes (normalised corners) over a frame: an SVG of rectangles and a
// name tag for each, placed in percent of the frame
function drawBoxes(frame, boxes) {
  for (const old of frame.querySelectorAll("svg, .tag")) old.remove();
  const svg = svgEl("svg", { viewBox: "0 0 1 1", preserveAspectRatio: "none" });
  for (const b of boxes) {
    const [x0, y0, x1, y1] = b.box;
    const r = svgEl("rect", { x: x0, y: y0, width: Math.max(x1 - x0, 0), height: Math.max(y1 - y0, 0) });
    r.dataset.name = b.name;
    if (hidden.has(b.name)) r.classList.add("off");
    const t = svgEl("title");
    t.textContent = b.name;
    r.appendChild(t);
    svg.appendChild(r);
    const tag = el("span", b.name, "tag");
    tag.dataset.name = b.name;
    if (hidden.has(b.name)) tag.classList.add("off");
    tag.style.left = `${Math.max(0, Math.min(x0, 1)) * 100}%`;
    tag.style.top = `${Math.max(0, Math.min(y0, 1)) * 100}%`;
    frame.appendChild(tag);
  }
  frame.appendChild(svg);
}

function tile(rec, k) {
  const d = el("div", undefined, "tile");
  d.dataset.position = rec.position;
  if (rec.error) {
    d.appendChild(el("div", rec.error, "bad"));
    return d;
  }
  const frame = el("div", undefined, "frame");
  const img = new Image();
  img.alt = `record ${rec.key}`;
  img.src = `/api/thumb?ds=${state.ds}&i=${rec.position}&size=${state.size}`;
  img.onerror = async () => {
    const r = await fetch(img.src);
    let why = "not an image";
    try { why = (await r.json()).error; } catch (e) { /* the status says enough */ }
    frame.replaceChildren(el("div", why, "bad"));
  };
  frame.appendChild(img);
  drawBoxes(frame, rec.boxes);
  d.appendChild(frame);
  const names = rec.names.join(", ") + (rec.broken ? " (label broken)" : "");
  d.appendChild(el("div", `${rec.key}: ${names}`, "caption"));
  d.addEventListener("click", () => openView(k));
  return d;
}

async function loadGrid() {
  const params = { ds: state.ds, start: state.start, count: state.count, ...state.filter };
  if (state.seed !== null) params.seed = state.seed;
  const page = await api("records", params);
  const grid = document.getElementById("grid");
  shown = page.records;
  grid.replaceChildren(...shown.map(tile));
  const total = page.total === null ? "(counting)" : page.total.toLocaleString();
  const last = state.start + shown.length;
  document.getElementById("where").textContent = `${shown.length ? state.start + 1 : 0}-${last} of ${total}`;
  grid.dataset.loaded = "1";
  showFilters();
}

function setFilter(name, value) {
  if (value === null || state.filter[name] === value) delete state.filter[name];
  else state.filter[name] = value;
  state.start = 0;
  writeHash(); refresh();
}

function showFilters() {
  const chips = document.getElementById("filters");
  chips.replaceChildren(...Object.entries(state.filter).map(([k, v]) => {
    const b = el("button", `${k}: ${v} \u00d7`, "chip");
    b.addEventListener("click", () => setFilter(k, null));
    return b;
  }));
}

function item(name, count, active, onclick) {
  const li = el("li");
  li.appendChild(el("span", name));
  li.appendChild(el("span", count === null ? "" : count.toLocaleString()));
  if (active) li.className = "on";
  li.addEventListener("click", onclick);
  return li;
}

async function loadClasses() {
  const ds = state.ds;
  const s = await api("scan", { ds });
  if (ds !== state.ds) return;
  const p = document.getElementById("progress");
  p.replaceChildren();
  if (!s.started) {
    const b = el("button", "count classes (reads the whole file)", "start");
    b.addEventListener("click", async () => { await api("scan", { ds, start: 1 }); loadClasses(); });
    p.appendChild(b);
  } else if (s.error) p.textContent = s.error;
  else if (!s.finished) p.textContent = `scanning labels ${s.done.toLocaleString()} / ${s.total.toLocaleString()}`;
  else if (!s.images_finished) p.textContent = `scanning images ${s.images_done.toLocaleString()} / ${s.total.toLocaleString()}`;
  else p.textContent = `${s.total.toLocaleString()} records` + (s.kept ? " (counts kept)" : "");
  const cls = state.filter.class === undefined ? null : Number(state.filter.class);
  document.getElementById("classes").replaceChildren(...s.classes.map((c) => {
    const li = item(c.name, c.count, cls === c.label, () => setFilter("class", String(c.label)));
    li.dataset.label = c.label;
    return li;
  }));
  const problems = [["broken", "label layout broken", s.finished ? s.broken : null],
    ["undecodable", "undecodable", s.images_finished ? s.undecodable : null]];
  document.getElementById("problems").replaceChildren(...problems.map(([key, name, n]) => {
    const li = item(name, n, state.filter.problem === key, () => setFilter("problem", key));
    li.dataset.problem = key;
    return li;
  }));
  if (s.started && !s.images_finished && !s.error) setTimeout(loadClasses, 500);
  if (s.images_finished && Object.keys(state.filter).length && !shown.length) loadGrid();
  else if (s.finished && state.filter.class !== undefined && !shown.length) loadGrid();
}

async function openView(k) {
  viewing = k;
  const rec = await api("record", { ds: state.ds, i: shown[k].position });
  if (viewing !== k) return;  // (closed, or another record asked for, meanwhile)
  document.getElementById("full").src = `/api/image?ds=${state.ds}&i=${rec.position}`;
  const names = [...new Set((rec.boxes || []).map((b) => b.name))];
  document.getElementById("toggles").replaceChildren(...names.map((name) => {
    const l = el("label");
    const c = el("input");
    c.type = "checkbox"; c.checked = !hidden.has(name); c.dataset.name = name;
    c.addEventListener("change", () => {
      if (c.checked) hidden.delete(name); else hidden.add(name);
      for (const e of document.querySelectorAll("#fullframe [data-name]")) e.classList.toggle("off", hidden.has(e.dataset.name));
    });
    l.appendChild(c); l.appendChild(document.createTextNode(` ${name}`));
    return l;
  }));
  drawBoxes(document.getElementById("fullframe"), rec.boxes || []);
  const rows = [["key", rec.key], ["id", rec.id], ["id2", rec.id2], ["flag", rec.flag],
    ["label", (rec.label || []).join(" ")], ["offset", rec.offset], ["size", rec.size],
    ["format", rec.format], ["pixels", rec.pixels ? rec.pixels.join(" x ") : "unknown"],
    ["EXIF orientation", rec.orientation], ["classes", (rec.names || []).join(", ")],
    ["problem", rec.broken || rec.error || ""]];
  document.getElementById("fields").replaceChildren(...rows.map(([k2, v]) => {
    const tr = el("tr");
    tr.appendChild(el("td", k2));
    tr.appendChild(el("td", v === null || v === undefined ? "" : String(v)));
    return tr;
  }));
  document.getElementById("download").href = `/api/payload?ds=${state.ds}&i=${rec.position}`;
  const kind = (rec.boxes || []).length ? "detection" : "classification";
  document.getElementById("augkind").value = kind;
  augmentForm(kind);
  document.getElementById("draws").replaceChildren();
  document.getElementById("view").hidden = false;
}

function augmentForm(kind) {
  const table = datasets.augment[kind];
  document.getElementById("augopts").replaceChildren(...Object.entries(table).map(([name, o]) => {
    const l = el("label", `${name} `);
    const i = el("input");
    i.name = name;
    if (o.kind === "bool") { i.type = "checkbox"; i.checked = Boolean(o.default); }
    else { i.type = "number"; i.min = o.low; i.max = o.high; i.step = o.kind === "int" ? 1 : 0.01; i.value = o.default; }
    l.appendChild(i);
    return l;
  }));
}

async function augment() {
  const params = { ds: state.ds, i: shown[viewing].position, draws: 6,
    seed: Number(document.getElementById("augseed").value), kind: document.getElementById("augkind").value };
  for (const i of document.querySelectorAll("#augopts input")) params[i.name] = i.type === "checkbox" ? (i.checked ? 1 : 0) : i.value;
  const out = document.getElementById("draws");
  let found;
  try { found = await api("augment", params); } catch (e) { out.replaceChildren(el("div", e.message, "bad")); return; }
  out.replaceChildren(...found.draws.map((d) => {
    const frame = el("div", undefined, "frame draw");
    const img = new Image();
    img.src = `/api/drawn?n=${d.image}`;
    img.alt = "a draw";
    frame.appendChild(img);
    drawBoxes(frame, d.boxes);
    return frame;
  }));
  out.dataset.kind = found.kind;
}

function closeView() { viewing = -1; document.getElementById("view").hidden = true; }

function chart(c) {
  const box = el("figure", undefined, "chart");
  box.appendChild(el("figcaption", c.title));
  const most = Math.max(1, ...c.bars.map((b) => b.count));
  const w = 20, h = 120, width = Math.max(c.bars.length * w, 120);
  const svg = svgEl("svg", { viewBox: `0 0 ${width} ${h + 64}`, width, height: h + 64 });
  c.bars.forEach((b, k) => {
    const bh = (b.count / most) * h;
    const r = svgEl("rect", { x: k * w + 2, y: h - bh, width: w - 4, height: Math.max(bh, 0.5) });
    const t = svgEl("title");
    t.textContent = `${b.label}: ${b.count.toLocaleString()}`;
    r.appendChild(t);
    if (b.filter) {
      r.classList.add("link");
      r.addEventListener("click", () => { closePanel(); for (const [f, v] of Object.entries(b.filter)) setFilter(f, v); });
    }
    svg.appendChild(r);
    const label = svgEl("text", { x: k * w + w / 2 - 3, y: h + 8, transform: `rotate(60 ${k * w + w / 2 - 3} ${h + 8})` });
    label.textContent = b.label;
    svg.appendChild(label);
  });
  box.appendChild(svg);
  return box;
}

async function openStats() {
  const s = await api("stats", { ds: state.ds });
  const body = document.getElementById("panelbody");
  if (s.pending) { body.replaceChildren(el("p", "the scan is still counting: try again in a moment")); }
  else {
    const names = ["classes", "objects", "boxes", "sides", "aspects", "bytes"];
    body.replaceChildren(...names.filter((n) => s[n]).map((n) => chart(s[n])));
    if (s.images_pending) body.appendChild(el("p", "image sizes: the scan of the images is still running"));
  }
  document.getElementById("panel").hidden = false;
}

async function openCompare() {
  const scans = await Promise.all(datasets.sets.map((d) => api("scan", { ds: d.number })));
  const names = new Map();
  scans.forEach((s) => s.classes.forEach((c) => {
    if (!names.has(c.label) || names.get(c.label) === String(c.label)) names.set(c.label, c.name);
  }));
  const table = el("table", undefined, "compare");
  const head = el("tr");
  head.appendChild(el("th", "class"));
  datasets.sets.forEach((d) => head.appendChild(el("th", d.name)));
  table.appendChild(head);
  for (const [label, name] of [...names.entries()].sort((a, b) => a[0] - b[0])) {
    const tr = el("tr");
    tr.appendChild(el("td", name));
    scans.forEach((s) => {
      const c = s.classes.find((x) => x.label === label);
      tr.appendChild(el("td", c ? c.count.toLocaleString() : "0"));
    });
    table.appendChild(tr);
  }
  const body = document.getElementById("panelbody");
  body.replaceChildren(table);
  if (scans.some((s) => !s.finished)) body.appendChild(el("p", "some datasets are still being counted"));
  document.getElementById("panel").hidden = false;
}

function closePanel() { document.getElementById("panel").hidden = true; }

function refresh() {
  document.getElementById("dataset").value = state.ds;
  document.getElementById("order").value = state.seed === null ? "" : "shuffle";
  document.getElementById("seed").value = state.seed === null ? 0 : state.seed;
  document.getElementById("size").value = state.size;
  shown = [];
  loadGrid();
  loadClasses();
}

function on(id, event, fn) { document.getElementById(id).addEventListener(event, fn); }

async function start() {
  readHash();
  datasets = await api("datasets", {});
  const sel = document.getElementById("dataset");
  sel.replaceChildren(...datasets.sets.map((d) => {
    const o = el("option", `${d.name} (${d.records.toLocaleString()})`);
    o.value = d.number;
    return o;
  }));
  document.getElementById("compare").hidden = datasets.sets.length < 2;
  on("dataset", "change", () => { state.ds = Number(sel.value); state.start = 0; state.filter = {}; writeHash(); refresh(); });
  const order = document.getElementById("order"), seed = document.getElementById("seed");
  const reorder = () => { state.seed = order.value ? Number(seed.value) : null; state.start = 0; writeHash(); loadGrid(); };
  order.addEventListener("change", reorder);
  seed.addEventListener("change", reorder);
  on("size", "change", (e) => { state.size = Number(e.target.value); writeHash(); loadGrid(); });
  on("boxes", "change", (e) => document.body.classList.toggle("noboxes", !e.target.checked));
  on("prev", "click", () => { state.start = Math.max(0, state.start - state.count); writeHash(); loadGrid(); });
  on("next", "click", () => { state.start += state.count; writeHash(); loadGrid(); });
  on("close", "click", closeView);
  on("stats", "click", openStats);
  on("compare", "click", openCompare);
  on("closepanel", "click", closePanel);
  on("augkind", "change", (e) => augmentForm(e.target.value));
  on("augment", "click", augment);
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape") { closeView(); closePanel(); }
    if (viewing < 0 || e.target.tagName === "INPUT") return;
    if (e.key === "ArrowRight" && viewing + 1 < shown.length) openView(viewing + 1);
    if (e.key === "ArrowLeft" && viewing > 0) openView(viewing - 1);
  });
  window.addEventListener("popstate", () => { readHash(); refresh(); });
  refresh();
}

start();
