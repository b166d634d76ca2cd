"use strict";
// The run explorer (fairness-tests view). The data is the gzip + base64 JSON in
// <script id="data">; nothing is fetched. window.__explore holds the timings
// (firstRender, lastFilter: milliseconds) and the state, for tests and the bench.
const PAGE = 50;          // rows a page shows
const MAX_OPTIONS = 60;   // a column with more distinct values in a cell gets no select
const S = {data: null, run: 0, cand: 1, view: "verdicts", verdict: null, gateRow: null,
           items: {rows: [], page: 0, filters: {}, search: "", sort: "", desc: false},
           changes: {rows: [], page: 0, filters: {}}};
window.__explore = {firstRender: null, lastFilter: null, state: S};
const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k);
  return e;
}

async function load() {
  const b64 = $("data").textContent.trim();
  const bin = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const stream = new Blob([bin]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

// ---------------------------------------------------------------- records
function colOf(rec, name) {
  let c = rec._by && rec._by[name];
  if (!c) {
    rec._by = rec._by || {};
    for (const x of rec.columns.concat(rec.derived)) rec._by[x.name] = x;
    c = rec._by[name];
  }
  return c;
}
function val(col, i) {
  if (!col) return null;
  if (col.kind === "num") return col.values[i];
  const k = col.codes[i];
  return k < 0 ? null : col.dict[k];
}
function txt(v) { return v === null || v === undefined ? "" : String(v); }
function fmt(v, d) {
  if (v === null || v === undefined || v === "") return "";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toPrecision(d || 4).replace(/\.?0+$/, "");
  return String(v);
}
function records(run, name) { return run.records.find((r) => r.name === name) || null; }

function cellRows(rec, filter) {
  const out = [];
  const checks = Object.entries(filter || {}).map(([c, v]) => [colOf(rec, c), v]).filter(([c]) => c);
  for (let i = 0; i < rec.n; i++) {
    let ok = true;
    for (const [c, v] of checks) if (txt(val(c, i)) !== v) { ok = false; break; }
    if (ok) out.push(i);
  }
  return out;
}

// ---------------------------------------------------------------- tabs and runs
function setView(name) {
  S.view = name;
  for (const v of ["verdicts", "cell", "gate", "changes"]) $(v + "-view").hidden = v !== name;
  for (const b of $("tabs").querySelectorAll("button"))
    b.setAttribute("aria-current", b.dataset.view === name || (b.dataset.view === "verdicts" && name === "cell")
      || (b.dataset.view === "gate" && name === "changes") ? "page" : "false");
  $("run-pick").hidden = !(name === "verdicts" || name === "cell");
}

function buildTabs() {
  const tabs = $("tabs");
  tabs.append(el("button", {type: "button", "data-view": "verdicts", text: "Verdicts", onclick: () => setView("verdicts")}));
  if (S.data.comparisons.length)
    tabs.append(el("button", {type: "button", "data-view": "gate", text: "Gate: changed answers", onclick: () => { setView("gate"); renderGate(); }}));
  S.data.runs.forEach((r, i) => $("run").append(el("option", {value: i, text: r.label})));
  $("run").addEventListener("change", () => { S.run = +$("run").value; setView("verdicts"); buildVerdictFilters(); renderVerdicts(); });
  S.data.comparisons.forEach((c, i) => $("cand").append(el("option", {value: i, text: S.data.runs[c.candidate].label + " vs " + S.data.runs[c.baseline].label})));
  $("cand").addEventListener("change", () => { S.cand = +$("cand").value + 1; renderGate(); });
}

// ---------------------------------------------------------------- verdicts
function options(sel, label, values) {
  const keep = sel.value;
  sel.replaceChildren(el("option", {value: "", text: "all " + label}));
  for (const v of values) sel.append(el("option", {value: v, text: v}));
  if (values.includes(keep)) sel.value = keep;
}
function buildVerdictFilters() {
  const vs = S.data.runs[S.run].verdicts;
  const uniq = (f) => [...new Set(vs.map(f).filter((x) => x))].sort();
  options($("f-records"), "benchmarks", uniq((v) => v.records));
  options($("f-rule"), "rules", uniq((v) => v.rule));
  options($("f-status"), "statuses", uniq((v) => v.status));
}
function renderVerdicts() {
  const t0 = performance.now();
  const run = S.data.runs[S.run];
  const f = {records: $("f-records").value, rule: $("f-rule").value, status: $("f-status").value,
             cell: $("f-cell").value.trim().toLowerCase()};
  const rows = run.verdicts.map((v, i) => [v, i]).filter(([v]) =>
    (!f.records || v.records === f.records) && (!f.rule || v.rule === f.rule)
    && (!f.status || v.status === f.status) && (!f.cell || v.cell.toLowerCase().includes(f.cell)));
  const head = el("tr", {}, ...["rule", "cell", "metric", "value", "95% CI", "rule's bound", "status", "items"]
    .map((h) => el("th", {scope: "col", text: h})));
  const body = rows.map(([v, i]) => el("tr", {class: "st-row-" + v.status, "data-verdict": i},
    el("td", {}, el("button", {type: "button", class: "link", "aria-label": `items of ${v.rule} in ${v.cell} (${v.status})`,
      text: v.rule, onclick: () => openCell(i)})),
    el("td", {text: v.cell}), el("td", {text: v.metric}),
    el("td", {class: "num", text: fmt(v.value)}),
    el("td", {class: "num", text: v.ci_low === null ? "" : `[${fmt(v.ci_low)}, ${fmt(v.ci_high)}]`}),
    el("td", {text: `${v.compared === "value" ? "" : v.compared + " "}${v.op} ${fmt(v.bound)}`}),
    el("td", {class: "st-" + v.status, text: v.status.replace("_", " ")}),
    el("td", {class: "num", text: v.records ? String(v.n_items) : "\u2014"})));
  $("vtable").replaceChildren(el("caption", {class: "note", text: "Select a rule to see its cell's items."}),
    el("thead", {}, head), el("tbody", {}, ...body));
  $("vcount").textContent = `${rows.length} of ${run.verdicts.length} verdicts`;
  window.__explore.lastFilter = performance.now() - t0;
}

// ---------------------------------------------------------------- one cell's items
function facts(dl, pairs) {
  dl.replaceChildren(...pairs.filter(([, v]) => v !== "" && v !== null && v !== undefined)
    .flatMap(([k, v]) => [el("dt", {text: k}), el("dd", {text: String(v)})]));
}
function openCell(i) {
  const run = S.data.runs[S.run];
  const v = run.verdicts[i];
  S.verdict = i;
  const rec = v.records ? records(run, v.records) : null;
  $("cell-h").textContent = `${v.rule} \u2014 ${v.cell} (${v.status.replace("_", " ")})`;
  facts($("cell-facts"), [["run", run.label], ["metric", v.metric], ["value", fmt(v.value)],
    ["95% CI", v.ci_low === null ? "" : `[${fmt(v.ci_low)}, ${fmt(v.ci_high)}]`],
    ["rule", `${v.compared} ${v.op} ${fmt(v.bound)}`], ["why", v.why], ["rationale", v.rationale],
    ["table", v.table], ["records", v.records ? `records/${v.records}.csv.gz, rows where ` +
      (Object.entries(v.filter).map(([c, x]) => `${c} = ${x}`).join(", ") || "(all rows)") : "none found"],
    ...(rec ? rec.notes.map((n) => ["note", n]) : [])]);
  S.items = {rec, base: rec ? cellRows(rec, v.filter) : [], rows: [], page: 0, filters: {}, search: "", sort: "", desc: false};
  buildItemFilters();
  applyItems();
  setView("cell");
  $("idetail").replaceChildren();
  $("cell-h").focus();
}
function selectableColumns(rec, rows, skip) {
  const out = [];
  for (const c of rec.columns.concat(rec.derived)) {
    if (rec.text.includes(c.name) || skip.includes(c.name) || c.name in (rec.highlight || {})) continue;
    if (Object.values(rec.highlight || {}).includes(c.name)) continue;
    const seen = new Map();
    for (const i of rows) {
      const k = txt(val(c, i));
      seen.set(k, (seen.get(k) || 0) + 1);
      if (seen.size > MAX_OPTIONS) break;
    }
    if (seen.size > 1 && seen.size <= MAX_OPTIONS) out.push([c.name, seen]);
  }
  return out;
}
function selectFor(id, name, seen, onchange) {
  const keys = [...seen.keys()].sort((a, b) => (a === "" || b === "" || isNaN(a) || isNaN(b)) ? a.localeCompare(b) : a - b);
  const sel = el("select", {id, "data-column": name, onchange},
    el("option", {value: "\u0000", text: "all"}), ...keys.map((k) => el("option", {value: k, text: `${k === "" ? "(missing)" : k} (${seen.get(k)})`})));
  return el("label", {}, name, sel);
}
function buildItemFilters() {
  const f = $("ifilters");
  f.replaceChildren();
  const it = S.items;
  if (!it.rec) return;
  for (const [name, seen] of selectableColumns(it.rec, it.base, []))
    f.append(selectFor("i-" + name, name, seen, (e) => { it.filters[name] = e.target.value; it.page = 0; applyItems(); }));
  f.append(el("label", {}, "Search the text", el("input", {type: "search", id: "i-search", oninput: (e) => { it.search = e.target.value.toLowerCase(); it.page = 0; applyItems(); }})));
  const sort = el("select", {id: "i-sort", onchange: (e) => { it.sort = e.target.value; applyItems(); }},
    el("option", {value: "", text: "as stored"}), ...it.rec.columns.concat(it.rec.derived).map((c) => el("option", {value: c.name, text: c.name})));
  f.append(el("label", {}, "Sort by", sort));
  f.append(el("label", {}, "Order", el("select", {id: "i-order", onchange: (e) => { it.desc = e.target.value === "desc"; applyItems(); }},
    el("option", {value: "asc", text: "ascending"}), el("option", {value: "desc", text: "descending"}))));
  f.append(el("label", {}, "\u00a0", el("button", {type: "button", id: "print", text: "Print this cell", onclick: printCell})));
}
function matches(rec, i, filters, search) {
  for (const [name, want] of Object.entries(filters)) {
    if (want === "\u0000") continue;
    if (txt(val(colOf(rec, name), i)) !== want) return false;
  }
  if (search) {
    const cols = rec.text.length ? rec.text : [rec.answer].filter((x) => x);
    if (!cols.some((c) => txt(val(colOf(rec, c), i)).toLowerCase().includes(search))) return false;
  }
  return true;
}
function sortRows(rec, rows, name, desc) {
  if (!name) return rows;
  const c = colOf(rec, name);
  const key = rows.map((i) => [val(c, i), i]);
  key.sort((a, b) => (a[0] === null) - (b[0] === null) || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] - b[1]));
  if (desc) key.reverse();
  return key.map((k) => k[1]);
}
function applyItems() {
  const t0 = performance.now();
  const it = S.items;
  if (!it.rec) {
    $("icount").textContent = "No records of this run hold this cell's items.";
    $("itable").replaceChildren(); $("ipager").replaceChildren();
    return;
  }
  it.rows = sortRows(it.rec, it.base.filter((i) => matches(it.rec, i, it.filters, it.search)), it.sort, it.desc);
  renderItems();
  window.__explore.lastFilter = performance.now() - t0;
}
function shownColumns(rec, filters) {
  const on = Object.entries(filters || {}).filter(([, v]) => v !== "\u0000").map(([c]) => c);
  const cols = [...rec.key, rec.cluster, ...on, rec.answer, "outcome"].filter((x, k, a) => x && a.indexOf(x) === k);
  return cols.filter((c) => colOf(rec, c));
}
function renderItems(all) {
  const it = S.items, rec = it.rec;
  const pages = Math.max(1, Math.ceil(it.rows.length / PAGE));
  it.page = Math.min(it.page, pages - 1);
  const slice = all ? it.rows : it.rows.slice(it.page * PAGE, (it.page + 1) * PAGE);
  const cols = shownColumns(rec, it.filters);
  $("icount").textContent = `${it.rows.length} of ${it.base.length} answers in this cell` +
    (it.rows.length ? ` (page ${it.page + 1} of ${pages})` : "");
  $("itable").replaceChildren(
    el("thead", {}, el("tr", {}, el("th", {scope: "col", text: "#"}), ...cols.map((c) => el("th", {scope: "col", text: c})))),
    el("tbody", {}, ...slice.map((i) => el("tr", {"data-row": i},
      el("td", {}, el("button", {type: "button", class: "link", "aria-label": `answer ${i}: show its record`, text: String(i), onclick: () => showRecord($("idetail"), rec, i, null)})),
      ...cols.map((c) => { const v = val(colOf(rec, c), i); return el("td", {class: typeof v === "number" ? "num" : "clip", text: fmt(v)}); })))));
  pager($("ipager"), it, pages, renderItems);
}
function pager(nav, state, pages, render) {
  nav.replaceChildren(
    el("button", {type: "button", text: "Previous page", disabled: state.page === 0 || null, onclick: () => { state.page--; render(); }}),
    el("span", {text: `page ${state.page + 1} of ${pages}`}),
    el("button", {type: "button", text: "Next page", disabled: state.page >= pages - 1 || null, onclick: () => { state.page++; render(); }}));
}
function marked(text, spans) {
  const pre = el("pre", {});
  let at = 0;
  const list = (spans || "").split(";").filter((x) => x).map((s) => s.split(":")).map(([a, b, l]) => [+a, +b, l]);
  for (const [a, b, l] of list) {
    if (a < at) continue;
    pre.append(text.slice(at, a), el("mark", {"data-label": l, title: l, text: text.slice(a, b)}));
    at = b;
  }
  pre.append(text.slice(at));
  return pre;
}
function recordBlock(rec, i, title) {
  const box = el("div", {}, el("h3", {text: title}));
  for (const c of rec.text) {
    const t = txt(val(colOf(rec, c), i));
    const hl = (rec.highlight || {})[c];
    box.append(el("h4", {text: c}), hl ? marked(t, txt(val(colOf(rec, hl), i))) : el("pre", {text: t}));
  }
  const dl = el("dl", {});
  for (const c of rec.columns) if (!rec.text.includes(c.name)) dl.append(el("dt", {text: c.name}), el("dd", {text: fmt(val(c, i), 6)}));
  for (const c of rec.derived) dl.append(el("dt", {text: c.name + " (derived)"}), el("dd", {text: txt(val(c, i))}));
  box.append(dl);
  return box;
}
function showRecord(target, rec, i, other) {
  const cols = el("div", {class: "cols"}, recordBlock(rec, i, other ? "baseline" : `answer ${i}: its record as the run stores it`));
  if (other) cols.append(recordBlock(other.rec, other.i, "candidate"));
  target.replaceChildren(cols);
  target.focus();
}
function printCell() {
  renderItems(true);
  window.print();
  renderItems();
}

// ---------------------------------------------------------------- two runs: the gate
function renderGate() {
  const comp = S.data.comparisons[S.cand - 1];
  const base = S.data.runs[comp.baseline], cand = S.data.runs[comp.candidate];
  $("gate-h").textContent = `Gate: ${cand.label} (candidate) vs ${base.label} (baseline)`;
  $("gate-summary").textContent = [comp.note, comp.summary, comp.family, ...(comp.warnings || []).map((w) => "warning: " + w)].filter((x) => x).join(" \u2014 ");
  const rows = comp.gate || [];
  const cols = ["rule", "metric", "cell", "mode", "baseline", "candidate", "delta", "95% CI", "p adj.", "verdict", "changed answers"];
  $("gtable").replaceChildren(el("thead", {}, el("tr", {}, ...cols.map((c) => el("th", {scope: "col", text: c})))),
    el("tbody", {}, ...rows.map((r, i) => {
      const cell = r.cell_index === null ? null : comp.cells[r.cell_index];
      return el("tr", {"data-gate": i},
        el("td", {text: r.rule || ""}), el("td", {text: r.metric}), el("td", {text: r.cell}), el("td", {text: r.mode}),
        el("td", {class: "num", text: fmt(r.baseline)}), el("td", {class: "num", text: fmt(r.candidate)}),
        el("td", {class: "num", text: fmt(r.delta)}),
        el("td", {class: "num", text: r.ci_low === null ? "" : `[${fmt(r.ci_low)}, ${fmt(r.ci_high)}]`}),
        el("td", {class: "num", text: fmt(r.p_adjusted)}), el("td", {class: "v-" + r.verdict, text: r.verdict}),
        el("td", {}, cell ? el("button", {type: "button", class: "link", "aria-label": `changed answers of ${r.metric} in ${r.cell} (${r.verdict})`,
          text: `${cell.changed.length} of ${cell.n_pairs}`, onclick: () => openChanges(i)}) : "\u2014"));
    })));
}
function openChanges(i) {
  const comp = S.data.comparisons[S.cand - 1];
  const r = comp.gate[i], cell = comp.cells[r.cell_index];
  const base = S.data.runs[comp.baseline], cand = S.data.runs[comp.candidate];
  const rb = records(base, cell.records), rc = records(cand, cell.records), p = comp.pairs[cell.records];
  S.gateRow = i;
  $("changes-h").textContent = `${r.metric} \u2014 ${r.cell}: ${r.verdict}`;
  facts($("changes-facts"), [["baseline", `${base.label}: ${fmt(r.baseline)}`], ["candidate", `${cand.label}: ${fmt(r.candidate)}`],
    ["delta", `${fmt(r.delta)} [${fmt(r.ci_low)}, ${fmt(r.ci_high)}]`], ["mode", `${r.mode}, margin ${fmt(r.margin)}`], ["note", r.note],
    ["answers", `${cell.changed.length} of ${cell.n_pairs} paired answers changed (records/${cell.records}.csv.gz, ` +
      (Object.entries(cell.filter).map(([c, x]) => `${c} = ${x}`).join(", ") || "all rows") + ")"],
    ["contributions", `over the cell's ${cell.n_first} paired answers` + (Object.keys(cell.first).length ?
      " where " + Object.entries(cell.first).map(([c, x]) => `${c} = ${x}`).join(", ") : "")]]);
  $("ctable").replaceChildren(el("thead", {}, el("tr", {}, el("th", {scope: "col", text: "change"}), el("th", {scope: "col", text: "answers"}))),
    el("tbody", {}, ...Object.entries(cell.classes).map(([k, n]) => el("tr", {"data-class": k}, el("td", {text: k}), el("td", {class: "num", text: String(n)})))));
  const flags = cell.clusters.length ? Object.keys(cell.clusters[0].delta) : [];
  $("ktable").replaceChildren(el("thead", {}, el("tr", {}, ...[rb.cluster || "template", "answers", "changed", ...flags.map((f) => "\u0394 " + f)].map((c) => el("th", {scope: "col", text: c})))),
    el("tbody", {}, ...cell.clusters.map((k) => el("tr", {}, el("td", {text: k.cluster}), el("td", {class: "num", text: String(k.n)}),
      el("td", {class: "num", text: String(k.changed)}), ...flags.map((f) => el("td", {class: "num", text: signed(k.delta[f])}))))));
  S.changes = {comp, cell, rb, rc, p, rows: [], page: 0, filters: {}};
  const seen = new Map();
  for (const q of cell.changed) seen.set(p.class[q], (seen.get(p.class[q]) || 0) + 1);
  $("xfilters").replaceChildren(selectFor("x-class", "change", seen, (e) => { S.changes.filters.change = e.target.value; S.changes.page = 0; applyChanges(); }));
  applyChanges();
  setView("changes");
  $("xdetail").replaceChildren();
  $("changes-h").focus();
}
function signed(x) { return x === null || x === undefined ? "" : (x > 0 ? "+" : "") + x.toFixed(4); }
function applyChanges() {
  const t0 = performance.now();
  const x = S.changes, want = x.filters.change;
  x.rows = x.cell.changed.filter((q) => !want || want === "\u0000" || x.p.class[q] === want);
  renderChanges();
  window.__explore.lastFilter = performance.now() - t0;
}
function renderChanges() {
  const x = S.changes, rb = x.rb, rc = x.rc;
  const pages = Math.max(1, Math.ceil(x.rows.length / PAGE));
  x.page = Math.min(x.page, pages - 1);
  const key = [...rb.key, rb.cluster].filter((c, k, a) => c && a.indexOf(c) === k);
  const ans = rb.answer;
  $("xcount").textContent = `${x.rows.length} of ${x.cell.changed.length} changed answers`;
  $("xtable").replaceChildren(el("thead", {}, el("tr", {}, el("th", {scope: "col", text: "#"}), ...key.map((c) => el("th", {scope: "col", text: c})),
      el("th", {scope: "col", text: "baseline" + (ans ? " " + ans : "")}), el("th", {scope: "col", text: "candidate" + (ans ? " " + ans : "")}), el("th", {scope: "col", text: "change"}))),
    el("tbody", {}, ...x.rows.slice(x.page * PAGE, (x.page + 1) * PAGE).map((q) => {
      const ib = x.p.b[q], ic = x.p.c[q];
      return el("tr", {"data-pair": q}, el("td", {}, el("button", {type: "button", class: "link", "aria-label": `pair ${q}: both records`, text: String(q),
          onclick: () => showRecord($("xdetail"), rb, ib, {rec: rc, i: ic})})),
        ...key.map((c) => el("td", {text: fmt(val(colOf(rb, c), ib))})),
        el("td", {class: "clip", text: ans ? fmt(val(colOf(rb, ans), ib)) : txt(val(colOf(rb, "outcome"), ib))}),
        el("td", {class: "clip", text: ans ? fmt(val(colOf(rc, ans), ic)) : txt(val(colOf(rc, "outcome"), ic))}),
        el("td", {text: x.p.class[q]}));
    })));
  pager($("xpager"), x, pages, renderChanges);
}

// ---------------------------------------------------------------- start
document.addEventListener("keydown", (e) => {
  if (e.key !== "Escape") return;
  if (S.view === "cell") { setView("verdicts"); $("vtable").querySelector(`tr[data-verdict="${S.verdict}"] button`)?.focus(); }
  else if (S.view === "changes") { setView("gate"); $("gtable").querySelector(`tr[data-gate="${S.gateRow}"] button`)?.focus(); }
});
$("cell-back").addEventListener("click", () => setView("verdicts"));
$("changes-back").addEventListener("click", () => setView("gate"));
for (const id of ["f-records", "f-rule", "f-status"]) $(id).addEventListener("change", renderVerdicts);
$("f-cell").addEventListener("input", renderVerdicts);
load().then((data) => {
  S.data = data;
  buildTabs();
  buildVerdictFilters();
  renderVerdicts();
  setView("verdicts");
  const n = data.runs.reduce((a, r) => a + r.records.reduce((b, x) => b + x.n, 0), 0);
  $("status").textContent = `${data.runs.length} run(s), ${n} answers; fairness-tests ${data.version}. Keyboard: Tab between controls, Enter opens, Escape goes back.`;
  window.__explore.firstRender = performance.now();   // since the navigation started
  document.body.dataset.ready = "1";
}).catch((err) => { $("status").textContent = "Could not read the embedded data: " + err; });
