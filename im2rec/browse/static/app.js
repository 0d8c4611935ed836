// rec browse: the grid, the class filter and the record view. Every value
// from a record is put in the page as text (textContent), never as markup.
"use strict";

const NS = "http://www.w3.org/2000/svg";
const state = { ds: 0, start: 0, seed: null, cls: null, size: 160, count: 100 };
let shown = [];  // the records of the page shown, in order
let viewing = -1;  // their index in the record view, or -1

function readHash() {
  const h = new URLSearchParams(location.hash.slice(1));
  state.ds = Number(h.get("ds") || 0);
  state.start = Number(h.get("start") || 0);
  state.seed = h.has("seed") ? Number(h.get("seed")) : null;
  state.cls = h.has("class") ? Number(h.get("class")) : null;
  state.size = Number(h.get("size") || 160);
}

function writeHash() {
  const h = new URLSearchParams({ ds: state.ds, start: state.start, size: state.size });
  if (state.seed !== null) h.set("seed", state.seed);
  if (state.cls !== null) h.set("class", state.cls);
  const next = "#" + h.toString();
  if (location.hash !== next) history.pushState(null, "", next);
}

async function api(path, params) {
  const q = new URLSearchParams(params);
  const r = await fetch(`/api/${path}?${q}`, { credentials: "same-origin" });
  if (!r.ok) throw new Error(`${path}: ${r.status}`);
  return r.json();
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function drawBoxes(svg, boxes) {
  svg.replaceChildren();
  for (const b of boxes) {
    const [x0, y0, x1, y1] = b.box;
    const r = document.createElementNS(NS, "rect");
    r.setAttribute("x", x0); r.setAttribute("y", y0);
    r.setAttribute("width", Math.max(x1 - x0, 0)); r.setAttribute("height", Math.max(y1 - y0, 0));
    r.dataset.name = b.name;
    const t = document.createElementNS(NS, "title");
    t.textContent = b.name;
    r.appendChild(t);
    svg.appendChild(r);
  }
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
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", "0 0 1 1");
  svg.setAttribute("preserveAspectRatio", "none");
  drawBoxes(svg, rec.boxes);
  frame.appendChild(svg);
  d.appendChild(frame);
  const names = rec.names.join(", ") + (rec.broken ? " (label broken)" : "");
  d.appendChild(el("div", `${rec.key}: ${names}`, "caption"));
  d.addEventListener("click", () => openView(k));
  return d;
}

async function loadGrid() {
  const params = { ds: state.ds, start: state.start, count: state.count };
  if (state.seed !== null) params.seed = state.seed;
  if (state.cls !== null) params.class = state.cls;
  const page = await api("records", params);
  const grid = document.getElementById("grid");
  shown = page.records;
  grid.replaceChildren(...shown.map(tile));
  const total = page.total === null ? "(counting)" : page.total.toLocaleString();
  const last = state.start + shown.length;
  document.getElementById("where").textContent = `${state.start + 1}-${last} of ${total}`;
  grid.dataset.loaded = "1";
}

async function loadClasses() {
  const s = await api("scan", { ds: state.ds });
  const p = document.getElementById("progress");
  p.textContent = s.finished ? `${s.total.toLocaleString()} records` :
    `scanning ${s.done.toLocaleString()} / ${s.total.toLocaleString()}`;
  const ul = document.getElementById("classes");
  ul.replaceChildren(...s.classes.map((c) => {
    const li = el("li");
    li.dataset.label = c.label;
    li.appendChild(el("span", c.name));
    li.appendChild(el("span", c.count.toLocaleString()));
    if (state.cls === c.label) li.className = "on";
    li.addEventListener("click", () => {
      state.cls = state.cls === c.label ? null : c.label;
      state.start = 0;
      writeHash(); refresh();
    });
    return li;
  }));
  if (!s.finished && !s.error) setTimeout(loadClasses, 500);
  else if (state.cls !== null) loadGrid();
}

async function openView(k) {
  viewing = k;
  const rec = await api("record", { ds: state.ds, i: shown[k].position });
  const full = document.getElementById("full");
  full.src = `/api/image?ds=${state.ds}&i=${rec.position}`;
  drawBoxes(document.getElementById("fullboxes"), rec.boxes || []);
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
  const a = document.getElementById("download");
  a.href = `/api/payload?ds=${state.ds}&i=${rec.position}`;
  document.getElementById("view").hidden = false;
}

function closeView() { viewing = -1; document.getElementById("view").hidden = true; }

function refresh() {
  document.getElementById("dataset").value = state.ds;
  document.getElementById("order").value = state.seed === null ? "" : "shuffle";
  document.getElementById("seed").value = state.seed === null ? 0 : state.seed;
  document.getElementById("size").value = state.size;
  loadGrid();
  loadClasses();
}

async function start() {
  readHash();
  const sets = await api("datasets", {});
  const sel = document.getElementById("dataset");
  sel.replaceChildren(...sets.map((d) => {
    const o = el("option", `${d.name} (${d.records.toLocaleString()})`);
    o.value = d.number;
    return o;
  }));
  sel.addEventListener("change", () => { state.ds = Number(sel.value); state.start = 0; state.cls = null; writeHash(); refresh(); });
  const order = document.getElementById("order"), seed = document.getElementById("seed");
  const reorder = () => { state.seed = order.value ? Number(seed.value) : null; state.start = 0; writeHash(); loadGrid(); };
  order.addEventListener("change", reorder);
  seed.addEventListener("change", reorder);
  document.getElementById("size").addEventListener("change", (e) => { state.size = Number(e.target.value); writeHash(); loadGrid(); });
  document.getElementById("boxes").addEventListener("change", (e) => document.body.classList.toggle("noboxes", !e.target.checked));
  document.getElementById("prev").addEventListener("click", () => { state.start = Math.max(0, state.start - state.count); writeHash(); loadGrid(); });
  document.getElementById("next").addEventListener("click", () => { state.start += state.count; writeHash(); loadGrid(); });
  document.getElementById("close").addEventListener("click", closeView);
  document.addEventListener("keydown", (e) => {
    if (viewing < 0) return;
    if (e.key === "Escape") closeView();
    if (e.key === "ArrowRight" && viewing + 1 < shown.length) openView(viewing + 1);
    if (e.key === "ArrowLeft" && viewing > 0) openView(viewing - 1);
  });
  window.addEventListener("popstate", () => { readHash(); refresh(); });
  refresh();
}

start();
