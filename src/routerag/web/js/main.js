// Wiring of the page: configuration, custom source upload, live ask, comparison, run browser.

import * as api from "./api.js";
import { $, $$, h } from "./dom.js";
import { ParamsForm } from "./form.js";
import { liveEvent, renderTrace } from "./trace.js";
import { loadRuns, renderReport, runComparison } from "./compare.js";
import { loadReports } from "./reports.js";

const state = { strategies: [], builtinSources: [], custom: null, configs: [], running: false, runId: null, info: null };
const form = new ParamsForm($("#params"));

function banner(message) {
  const b = $("#banner");
  b.textContent = message || "";
  b.hidden = !message;
}

// ---------------------------------------------------------------- configuration
function currentStrategy() {
  return state.strategies.find((s) => s.name === $("#strategy").value);
}

function mountedNames() {
  return state.custom && state.custom.state === "ready" && $("#custom-enable").checked ? [state.custom.name] : [];
}

function currentConfig() {
  return { strategy: $("#strategy").value, params: form.values(), sources: mountedNames() };
}

function parseQuestions() {
  return $("#questions").value.split("\n").map((l) => l.trim()).filter(Boolean).map((line) => {
    const [q, gold] = line.split("||").map((x) => x.trim());
    return gold ? { question: q, answers: gold.split("|").map((x) => x.trim()).filter(Boolean) } : { question: q };
  });
}

function questionSpec() {
  const size = Number($("#sample-size").value) || undefined;
  if ($("input[name=qmode]:checked").value === "dataset") return { dataset: $("#dataset").value, sample_size: size };
  return { questions: parseQuestions(), sample_size: size };
}

function updateRunButton() {
  const customOn = $("#custom-enable").checked;
  const ready = !customOn || (state.custom && state.custom.state === "ready");
  $("#run").disabled = state.running || !ready;
  $("#run-hint").textContent = ready ? "" : "Upload a valid custom source (or switch it off) to run.";
  form.setSources([...state.builtinSources, ...mountedNames()]);
}

// ---------------------------------------------------------------- custom source
function showUploadErrors(errors) {
  const table = $("#custom-errors");
  table.hidden = !errors.length;
  $("tbody", table).replaceChildren(...errors.map((e) => h("tr", {},
    h("td", { text: e.line ?? "–" }), h("td", { text: e.field ?? "" }), h("td", { text: e.message }))));
}

async function refreshSourceList() {
  const all = await api.get("/v1/sources");
  state.builtinSources = all.filter((s) => s.kind === "builtin").map((s) => s.name);
  $("#source-list").replaceChildren(...all.filter((s) => s.kind === "custom").map((s) =>
    h("li", {}, h("code", { text: s.name }), ` ${s.state} · ${s.n_docs} passages `,
      h("button", { type: "button", class: "small", onclick: async () => { await api.del(`/v1/sources/${encodeURIComponent(s.name)}`); if (state.custom?.name === s.name) state.custom = null; await refreshSourceList(); updateRunButton(); } }, "delete"),
      h("button", { type: "button", class: "small", onclick: () => { state.custom = s; $("#custom-name").value = s.name; $("#custom-status").textContent = `using ${s.name} (${s.state})`; updateRunButton(); } }, "use"))));
  updateRunButton();
}

async function doUpload() {
  const file = $("#custom-file").files[0];
  const name = $("#custom-name").value.trim();
  state.custom = null;
  showUploadErrors([]);
  updateRunButton();
  if (!file || !name) { $("#custom-status").textContent = "choose a name and a file"; return; }
  $("#custom-status").textContent = `uploading ${file.name}…`;
  try {
    let meta = await api.upload(name, $("#custom-profile").value, file);
    $("#custom-status").textContent = `parsed ${meta.n_docs} passages (${meta.duplicates} duplicates); indexing…`;
    while (meta.state === "indexing") {
      await new Promise((r) => setTimeout(r, 200));
      meta = await api.get(`/v1/sources/${encodeURIComponent(name)}`);
    }
    if (meta.state !== "ready") throw new Error(`indexing failed: ${meta.error}`);
    state.custom = { ...meta, state: "ready" };
    $("#custom-status").textContent = `ready: ${meta.name} · ${meta.n_docs} passages · indexed in ${meta.index_ms} ms`;
    $("#custom-status").className = "status ok";
  } catch (err) {
    $("#custom-status").textContent = `rejected (${err.status || "error"}): ${err.message}`;
    $("#custom-status").className = "status bad";
    showUploadErrors(err.errors || []);
  }
  await refreshSourceList();
}

// ---------------------------------------------------------------- ask
async function doAsk() {
  const question = $("#ask-question").value.trim();
  if (!question) return;
  let config;
  try { config = currentConfig(); } catch (err) { banner(err.message); return; }
  banner("");
  state.running = true;
  updateRunButton();
  $("#trace").replaceChildren();
  delete $("#trace").dataset.done;
  $("#live").replaceChildren();
  try {
    await api.stream("/v1/ask/stream", { question, ...config }, (name, data) => {
      liveEvent($("#live"), name, data);
      if (name === "trace") renderTrace($("#trace"), data);
    });
  } catch (err) {
    banner(`ask failed: ${err.message}`);
    $("#trace").dataset.done = "1";
  } finally {
    state.running = false;
    updateRunButton();
  }
}

// ---------------------------------------------------------------- compare
function renderConfigs() {
  $("#configs").replaceChildren(...state.configs.map((c, i) => h("li", { "data-testid": "config" },
    h("b", { text: c.label }), ` ${c.strategy} `, h("code", { text: JSON.stringify(c.params) }),
    c.sources.length ? ` + ${c.sources.join(", ")} ` : " ",
    h("button", { type: "button", class: "small", onclick: () => { state.configs.splice(i, 1); renderConfigs(); } }, "remove"))));
  $("#run-compare").disabled = state.configs.length < 1 || Boolean(state.runId);
}

async function doCompare() {
  banner("");
  $("#compare-report").replaceChildren();
  const progress = $("#compare-progress");
  try {
    const body = { ...questionSpec(), configs: state.configs.map((c) => ({ ...c })) };
    const report = await runComparison(body, {
      onStart: (s) => { state.runId = s.run_id; progress.hidden = false; progress.max = s.total; progress.value = 0; $("#cancel-compare").disabled = false; renderConfigs(); },
      onProgress: (s) => { progress.value = s.done + s.skipped; $("#compare-status").textContent = `${s.state}: ${s.done}/${s.total} answers${s.errors ? `, ${s.errors} errors` : ""}`; },
    });
    $("#compare-status").textContent = `${report.status.state}: ${report.status.done}/${report.status.total} answers`;
    renderReport($("#compare-report"), report);
  } catch (err) {
    banner(`comparison failed: ${err.message}`);
  } finally {
    state.runId = null;
    $("#cancel-compare").disabled = true;
    renderConfigs();
  }
}

// ---------------------------------------------------------------- start-up
// the header names the model, the policy adapter that answers the chosen strategy, and the sources
function showBackend() {
  const info = state.info;
  if (!info) return;
  const adapter = (info.strategy_adapters || {})[$("#strategy").value] || info.adapter;
  $("#backend").textContent = `model: ${info.model} (${info.backend}) · adapter: ${adapter || "none"}`
    + ` · sources: ${info.sources.join(", ") || "none"}`;
}

async function init() {
  document.body.dataset.ready = "0";  // set again when the strategies, datasets and sources are loaded
  $("#api-key").value = sessionStorage.getItem("routerag-key") || "";
  try {
    const [info, strategies, datasets] = await Promise.all([api.get("/v1/info"), api.get("/v1/strategies"), api.get("/v1/datasets")]);
    banner("");
    state.info = info;
    state.strategies = strategies;
    $("#strategy").replaceChildren(...strategies.map((s) => h("option", { value: s.name, text: s.name })));
    $("#strategy").value = strategies.some((s) => s.name === "vanilla") ? "vanilla" : strategies[0].name;
    form.render(currentStrategy().params_schema);
    showBackend();
    $("#dataset").replaceChildren(...datasets.map((d) => h("option", { value: d.name, text: d.name })));
    await refreshSourceList();
  } catch (err) {
    banner(err.status === 401 ? "This server needs an API key: enter it at the top right." : `cannot reach the service: ${err.message}`);
  }
  document.body.dataset.ready = "1";
}

$("#api-key").addEventListener("change", () => { sessionStorage.setItem("routerag-key", $("#api-key").value); init(); });
$("#strategy").addEventListener("change", () => { form.render(currentStrategy().params_schema); showBackend(); updateRunButton(); });
$$("input[name=qmode]").forEach((r) => r.addEventListener("change", () => {
  const dataset = $("input[name=qmode]:checked").value === "dataset";
  $("#qmode-dataset").hidden = !dataset;
  $("#qmode-custom").hidden = dataset;
}));
$("#custom-enable").addEventListener("change", () => { $("#custom-fields").hidden = !$("#custom-enable").checked; updateRunButton(); });
$("#custom-upload").addEventListener("click", doUpload);
$("#custom-file").addEventListener("change", () => { state.custom = null; showUploadErrors([]); $("#custom-status").textContent = ""; updateRunButton(); });
$("#run").addEventListener("click", doAsk);
$("#ask-question").addEventListener("keydown", (e) => { if (e.key === "Enter" && !$("#run").disabled) doAsk(); });
$("#add-config").addEventListener("click", () => {
  try {
    const c = currentConfig();
    state.configs.push({ ...c, label: `${c.strategy} ${state.configs.length + 1}` });
    renderConfigs();
  } catch (err) { banner(err.message); }
});
$("#run-compare").addEventListener("click", doCompare);
$("#cancel-compare").addEventListener("click", () => state.runId && api.del(`/v1/runs/${state.runId}`));
function refreshRuns() {
  loadRuns($("#runs tbody"), $("#run-report")).catch((err) => banner(err.message));
  loadReports($("#routing-reports tbody"), $("#routing-report")).catch((err) => banner(err.message));
}
$("#refresh-runs").addEventListener("click", refreshRuns);
$$(".tabs button").forEach((b) => b.addEventListener("click", () => {
  $$(".tabs button").forEach((x) => x.classList.toggle("active", x === b));
  $$(".tab").forEach((t) => { t.hidden = t.id !== `tab-${b.dataset.tab}`; });
  if (b.dataset.tab === "runs") refreshRuns();
}));

init();
