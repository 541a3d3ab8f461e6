// EvidentialRAG inspector: a page over the server's documented JSON endpoints only
// (GET /health, GET /config, POST /ask, POST /fuse). No framework, no CDN, no build step.
// Every text that comes from a user, a chunk or a model is inserted with textContent, never as HTML.
"use strict";

const $ = (sel) => document.querySelector(sel);
const state = { original: null, current: null, texts: {}, fusion: null, key: sessionStorage.getItem("erag-key") || "", renders: 0, fuseSeq: 0 };

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k === "style") node.setAttribute("style", v);
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

const fmt = (x, d = 4) => (typeof x === "number" && isFinite(x) ? x.toFixed(d) : "–");
const num = (x) => (typeof x === "number" && isFinite(x) ? String(Number(x.toFixed(4))) : "–");

function showError(message) {
  const box = $("#error");
  box.hidden = !message;
  box.textContent = message || "";
}

async function api(method, path, body) {
  const headers = { "Content-Type": "application/json" };
  if (state.key) headers["X-API-Key"] = state.key;
  const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let data = null;
  try { data = await resp.json(); } catch (e) { data = null; }
  if (resp.status === 401) {
    $("#key-box").hidden = false;
    throw new Error("this server needs an API key: type it in the box at the top and try again");
  }
  if (!resp.ok) {
    let detail = data && data.detail !== undefined ? data.detail : resp.statusText;
    if (Array.isArray(detail)) detail = detail.map((e) => `${(e.loc || []).join(".")}: ${e.msg}`).join("\n");
    throw new Error(`${resp.status}: ${detail}`);
  }
  return data;
}

// ------------------------------------------------------------------------------------------ set-up
async function connect() {
  try {
    const health = await api("GET", "/health");
    const config = await api("GET", "/config");
    state.fusion = config.run.fusion;
    $("#server-status").textContent = `evaluator ${health.evaluator} · generator ${health.models.generator.name}` +
      (health.index ? ` · index ${health.index}` : " · no index (paste chunks)");
    const sel = $("#evaluator");
    sel.replaceChildren(...health.evaluators.available.map((n) => el("option", { value: n, text: n, selected: n === health.evaluator })));
    const choices = config.choices || { rule: [], policy: [] };
    $("#ask-rule").replaceChildren(el("option", { value: "", text: "config" }), ...choices.rule.map((r) => el("option", { value: r, text: r })));
    $("#refuse-rule").replaceChildren(...choices.rule.map((r) => el("option", { value: r, text: r })));
    $("#refuse-policy").replaceChildren(...choices.policy.map((p) => el("option", { value: p, text: p })));
    document.body.dataset.ready = "1";
  } catch (e) {
    $("#server-status").textContent = "not connected";
    showError(e.message);
  }
}

// ------------------------------------------------------------------------------------------ chunks
function parseChunks(text) {
  const lines = text.split("\n").map((l) => l.trim()).filter(Boolean);
  if (!lines.length) return null;
  const parsed = [];
  let jsonl = true;
  for (const line of lines) {
    try {
      const obj = JSON.parse(line);
      if (!obj || typeof obj !== "object" || typeof obj.text !== "string") { jsonl = false; break; }
      parsed.push(obj);
    } catch (e) { jsonl = false; break; }
  }
  if (jsonl) {
    return parsed.map((o, i) => {
      const c = { id: o.id !== undefined ? String(o.id) : `c${i + 1}`, text: o.text };
      if (typeof o.source === "string") c.source = o.source;
      if (Number.isInteger(o.rank)) c.rank = o.rank;
      if (typeof o.score === "number") c.score = o.score;
      return c;
    });
  }
  return text.split(/\n\s*\n/).map((p) => p.trim()).filter(Boolean).map((p, i) => ({ id: `p${i + 1}`, text: p }));
}

async function ask() {
  showError("");
  const question = $("#question").value.trim();
  if (!question) { showError("type a question first"); return; }
  const body = { question, include_chunk_text: true, evaluator: $("#evaluator").value || undefined };
  const chunks = parseChunks($("#chunks").value);
  if (chunks) body.chunks = chunks;
  for (const [id, key] of [["#ask-lam", "lam"], ["#ask-tau1", "tau1"], ["#ask-tau2", "tau2"]]) {
    const v = $(id).value;
    if (v !== "") body[key] = Number(v);
  }
  if ($("#ask-rule").value) body.rule = $("#ask-rule").value;
  $("#ask-state").textContent = "asking…";
  $("#ask-button").disabled = true;
  try {
    const t0 = performance.now();
    const rec = await api("POST", "/ask", body);
    $("#ask-state").textContent = `answered in ${((performance.now() - t0) / 1000).toFixed(2)} s`;
    show(rec, chunks || []);
  } catch (e) {
    $("#ask-state").textContent = "";
    showError(e.message);
  } finally {
    $("#ask-button").disabled = false;
  }
}

// A new record to inspect: it becomes the one re-fusion starts from.
function show(rec, chunks) {
  state.original = rec;
  state.texts = {};
  for (const c of chunks) state.texts[c.id] = c.text;
  for (const c of (rec.retrieval && rec.retrieval.chunks) || []) if (typeof c.text === "string") state.texts[c.id] = c.text;
  const f = rec.fusion || state.fusion || {};
  $("#refuse-lam").value = f.lam ?? 0.5;
  $("#refuse-lam-value").textContent = fmt(Number($("#refuse-lam").value), 2);
  $("#refuse-tau1").value = f.tau1 ?? "";
  $("#refuse-tau2").value = f.tau2 ?? "";
  if (f.rule) $("#refuse-rule").value = f.rule;
  if (f.policy) $("#refuse-policy").value = f.policy;
  render(rec, false);
}

// ------------------------------------------------------------------------------------------ re-fusion
let fuseTimer = null;
function scheduleRefuse() {
  $("#refuse-lam-value").textContent = fmt(Number($("#refuse-lam").value), 2);
  clearTimeout(fuseTimer);
  document.body.dataset.pending = "1";
  fuseTimer = setTimeout(refuse, 120);
}

async function refuse() {
  if (!state.original) return;
  const seq = ++state.fuseSeq;
  const body = {
    record: state.original,
    lam: Number($("#refuse-lam").value),
    rule: $("#refuse-rule").value || undefined,
    policy: $("#refuse-policy").value || undefined,
  };
  if ($("#refuse-tau1").value !== "") body.tau1 = Number($("#refuse-tau1").value);
  if ($("#refuse-tau2").value !== "") body.tau2 = Number($("#refuse-tau2").value);
  try {
    const rec = await api("POST", "/fuse", body);
    if (seq === state.fuseSeq) { showError(""); render(rec, true); }
  } catch (e) {
    if (seq === state.fuseSeq) { showError(e.message); delete document.body.dataset.pending; }
  }
}

// ------------------------------------------------------------------------------------------ rendering
function routeWhy(rec) {
  const f = rec.fusion, u = rec.uncertainty;
  if (!f) return "";
  if (f.policy === "direct") return `policy direct: always the direct answer (U = ${fmt(u)})`;
  if (u < f.tau1) return `U = ${fmt(u)} < τ1 = ${num(f.tau1)}`;
  if (u >= f.tau2) return `U = ${fmt(u)} ≥ τ2 = ${num(f.tau2)}`;
  return `τ1 = ${num(f.tau1)} ≤ U = ${fmt(u)} < τ2 = ${num(f.tau2)}` + (f.policy === "decomposed" ? " (decomposed: conflict vs ignorance decides)" : "");
}

function render(rec, refused) {
  state.current = rec;
  $("#result").hidden = false;
  const route = $("#route");
  route.textContent = rec.route;
  route.className = `route ${rec.route}`;
  route.dataset.route = rec.route;
  $("#route-why").textContent = `${routeWhy(rec)} · ${rec.fusion ? `${rec.fusion.rule}, λ = ${num(rec.fusion.lam)}, policy ${rec.fusion.policy}` : ""}`;
  $("#refused-note").hidden = !refused;

  const cited = new Set(rec.cited_chunk_ids || []);
  $("#response").textContent = rec.response;
  $("#cited-ids").replaceChildren(...[...cited].map((id) => el("span", { class: "chip cited", text: id, "data-chunk": id })));
  if (!cited.size) $("#cited-ids").textContent = "none";

  const u = rec.uncertainty, ign = rec.ignorance, conf = rec.conflict;
  $("#u-value").textContent = fmt(u);
  $("#u-value").dataset.value = String(u);
  $("#u-ignorance").textContent = fmt(ign);
  $("#u-conflict").textContent = fmt(conf);
  $("#confidence").textContent = fmt(rec.confidence);
  $("#calibrated").textContent = rec.calibrated_confidence !== undefined ? ` (calibrated ${fmt(rec.calibrated_confidence)})` : "";
  $("#kbar").textContent = fmt(rec.mean_pairwise_conflict);
  const pct = (x) => `${Math.max(0, Math.min(100, 100 * x)).toFixed(2)}%`;
  $("#u-bar").replaceChildren(
    el("div", { class: "belief", style: `width:${pct(1 - u)}`, title: `claims ${fmt(1 - u)}` }),
    el("div", { class: "ign", style: `width:${pct(ign)}`, title: `ignorance ${fmt(ign)}` }),
    el("div", { class: "conf", style: `width:${pct(conf)}`, title: `conflict ${fmt(conf)}` }),
  );

  const claims = [...(rec.claims || [])].sort((a, b) => b.mass - a.mass);
  const stated = new Set(rec.stated_claims || []);
  const maxMass = Math.max(1e-9, ...claims.map((c) => c.mass));
  $("#claims tbody").replaceChildren(...claims.map((c) => el("tr", { class: stated.has(c.text) ? "claim-row stated" : "claim-row", "data-claim": c.text, "data-mass": String(c.mass) },
    el("td", { class: "claim-name", text: c.text + (stated.has(c.text) ? " ✓" : "") }),
    el("td", { class: "claim-mass", text: fmt(c.mass) }),
    el("td", { class: "bar" }, el("div", { class: "bar-track" }, el("div", { class: "bar-fill", style: `width:${(100 * c.mass / maxMass).toFixed(1)}%` }))),
    el("td", {}, ...(c.chunk_ids || []).map((id) => el("span", { class: cited.has(id) ? "chip cited" : "chip", text: id }))),
  )));
  const total = claims.reduce((s, c) => s + c.mass, 0) + u;
  $("#mass-sum").textContent = fmt(total);
  $("#mass-sum").dataset.value = String(total);

  const steps = rec.step_conflict || [];
  $("#steps").replaceChildren(...(steps.length ? steps.map((k, i) => el("div", { class: "step", style: `height:${Math.max(1, 56 * k)}px`, title: `fold step ${i + 2}: K = ${fmt(k)}` }, el("span", { text: fmt(k, 2) })))
    : [el("span", { class: "muted", text: "no fold step (fewer than two chunks)" })]));

  const claimText = {};
  for (const c of rec.claims || []) claimText[c.id] = c.text;
  $("#chunk-list").replaceChildren(...(rec.chunks || []).map((d) => {
    const text = state.texts[d.chunk_id];
    const ev = Object.entries(d.evidence || {}).filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1]);
    const maxEv = Math.max(1e-9, ...ev.map(([, v]) => v));
    return el("div", { class: cited.has(d.chunk_id) ? "chunk cited" : "chunk", "data-chunk": d.chunk_id },
      el("div", { class: "meta" },
        el("b", { text: `#${d.rank ?? "?"} ${d.chunk_id}` }), ` · ${d.source || "no source"} · claim `,
        el("b", { text: d.claim ?? "none" }), " · ",
        el("span", { class: `stance-${d.stance}`, text: d.stance }),
        d.grounded === false ? el("span", { class: "muted", text: " · grounding dropped evidence for claims the chunk does not state" }) : "",
        d.valid ? "" : el("span", { class: "bad", text: d.repaired ? " · repaired output" : " · invalid output" })),
      text !== undefined ? el("div", { class: "text", text }) : el("div", { class: "muted", text: "(chunk text not in this record)" }),
      ev.length ? el("div", { class: "ev" }, ...ev.flatMap(([cid, v]) => [
        el("span", { text: claimText[cid] ?? cid }),
        el("div", { class: "bar-track", style: "width:200px" }, el("div", { class: "bar-fill", style: `width:${(100 * v / maxEv).toFixed(1)}%` })),
        el("span", { text: fmt(v, 3) }),
      ])) : el("div", { class: "muted", text: "no evidence (ignorance)" }),
      ...(d.grounding_notes || []).map((n) => el("div", { class: "muted", text: n })),
      d.rationale ? el("div", { class: "muted", text: d.rationale }) : "",
    );
  }));

  const rows = Object.entries(rec.timings || {}).map(([k, v]) => [k, `${fmt(v, 3)} s`]);
  rows.push(["evaluator", `${rec.evaluator} (${rec.evaluator_passes ?? rec.batched_passes} pass${(rec.evaluator_passes ?? 1) === 1 ? "" : "es"})`]);
  rows.push(["generator", rec.generation ? `${rec.generation.generator}${rec.generation.fallback ? " (template fallback)" : ""}` : "template"]);
  rows.push(["logical decisions / batched passes", `${rec.logical_decisions} / ${rec.batched_passes}`]);
  $("#timings tbody").replaceChildren(...rows.map(([k, v]) => el("tr", {}, el("td", { text: k }), el("td", { text: v }))));

  state.renders += 1;
  document.body.dataset.renders = String(state.renders);
  delete document.body.dataset.pending;
}

// ------------------------------------------------------------------------------------------ records
let records = [];
function judged(row) {
  if (typeof row.correct === "boolean") return row.correct;
  const acc = row.scores && row.scores.accuracy;
  return typeof acc === "number" ? acc >= 1 : undefined;
}

function loadRecords(text) {
  records = [];
  const bad = [];
  text.split("\n").forEach((line, i) => {
    if (!line.trim()) return;
    try {
      const row = JSON.parse(line);
      const rec = row.record && typeof row.record === "object" ? row.record : row;
      if (!Array.isArray(rec.claims) || !Array.isArray(rec.chunks)) { bad.push(i + 1); return; }
      records.push({ rec, correct: judged(row), line: i + 1, id: row.id });
    } catch (e) { bad.push(i + 1); }
  });
  showError(bad.length ? `skipped ${bad.length} line(s) that are not answer records: ${bad.slice(0, 10).join(", ")}${bad.length > 10 ? ", …" : ""}` : "");
  listRecords();
}

function listRecords() {
  const route = $("#filter-route").value, correct = $("#filter-correct").value;
  const shown = records.filter((r) => (!route || r.rec.route === route) &&
    (!correct || (correct === "correct" ? r.correct === true : r.correct === false)));
  $("#records-count").textContent = `${shown.length} of ${records.length}`;
  $("#records tbody").replaceChildren(...shown.map((r) => {
    const tr = el("tr", { "data-line": String(r.line) },
      el("td", { text: String(r.line) }),
      el("td", { class: `route-cell`, text: r.rec.route }),
      el("td", { class: r.correct === true ? "ok" : r.correct === false ? "bad" : "muted", text: r.correct === true ? "✓" : r.correct === false ? "✗" : "–" }),
      el("td", { text: r.rec.question }));
    tr.addEventListener("click", () => {
      for (const other of document.querySelectorAll("#records tr.active")) other.classList.remove("active");
      tr.classList.add("active");
      show(r.rec, []);
    });
    return tr;
  }));
}

function readFile(input, then) {
  const file = input.files && input.files[0];
  if (!file) return;
  const reader = new FileReader();
  reader.onload = () => then(String(reader.result));
  reader.onerror = () => showError(`could not read ${file.name}`);
  reader.readAsText(file);
}

// ------------------------------------------------------------------------------------------ wiring
$("#api-key").value = state.key;
$("#api-key").addEventListener("change", () => { state.key = $("#api-key").value.trim(); sessionStorage.setItem("erag-key", state.key); connect(); });
$("#ask-button").addEventListener("click", ask);
$("#question").addEventListener("keydown", (e) => { if (e.key === "Enter") ask(); });
$("#chunks-file").addEventListener("change", () => readFile($("#chunks-file"), (t) => { $("#chunks").value = t; }));
$("#records-file").addEventListener("change", () => readFile($("#records-file"), loadRecords));
$("#filter-route").addEventListener("change", listRecords);
$("#filter-correct").addEventListener("change", listRecords);
for (const id of ["#refuse-lam", "#refuse-tau1", "#refuse-tau2", "#refuse-rule", "#refuse-policy"]) {
  $(id).addEventListener("input", scheduleRefuse);
  $(id).addEventListener("change", scheduleRefuse);
}
$("#refuse-reset").addEventListener("click", () => {
  if (!state.original) return;
  const texts = state.texts;
  show(state.original, []);
  Object.assign(state.texts, texts);
  render(state.original, false);
});
connect();
