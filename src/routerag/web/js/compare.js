// Comparison runs and the run browser: summary tables, per-question disagreements, traces.

import * as api from "./api.js";
import { h, fmt, pct } from "./dom.js";
import { renderTrace } from "./trace.js";

export function summaryTable(report) {
  const rows = report.summaries.map((s) => h("tr", {},
    h("th", { text: s.label }), h("td", { text: s.strategy }),
    h("td", { class: "num", text: pct(s.em) }), h("td", { class: "num", text: pct(s.f1) }),
    h("td", { class: "num", text: fmt(s.latency_ms) }), h("td", { class: "num", text: fmt(s.total_tokens, 0) }),
    h("td", { class: "num", text: fmt(s.retrieval_turns, 2) }), h("td", { class: "num", text: `${s.n_done}` }),
    h("td", { class: "num", text: `${s.n_errors}` })));
  return h("table", { class: "summary", "data-testid": "summary-table" },
    h("thead", {}, h("tr", {}, ["config", "strategy", "EM %", "F1 %", "latency ms", "tokens", "turns", "done", "errors"].map((t) => h("th", { text: t })))),
    h("tbody", {}, rows));
}

async function showTraces(report, row, target) {
  target.replaceChildren(h("div", { class: "hint", text: "loading traces…" }));
  const columns = await Promise.all(report.status.configs.map(async (config, c) => {
    const traces = await api.get(`/v1/runs/${report.status.run_id}/traces?config=${c}&limit=1000`);
    const trace = traces.find((t) => t.qid === row.qid);
    const box = h("div", { class: "trace-col" }, h("h4", { text: config.label }));
    const inner = h("div", { class: "trace" });
    box.append(inner);
    if (trace) renderTrace(inner, trace, { animate: false });
    else inner.append(h("div", { class: "hint", text: "not answered" }));
    return box;
  }));
  target.replaceChildren(h("h3", { text: row.question }), h("div", { class: "side-by-side" }, columns));
}

export function questionTable(report, target) {
  const onlyDisagree = h("input", { type: "checkbox", checked: report.disagreements > 0 });
  const tbody = h("tbody");
  const fill = () => {
    tbody.replaceChildren(...report.questions.filter((q) => !onlyDisagree.checked || q.disagree).map((q) =>
      h("tr", { class: `qrow${q.disagree ? " disagree" : ""}`, "data-testid": "question-row", onclick: () => showTraces(report, q, target) },
        h("td", { text: q.question }), h("td", { text: q.golds.join(" / ") || "–" }),
        q.answers.map((a) => h("td", { class: a.em === 1 ? "right" : a.em === 0 ? "wrong" : "" },
          a.prediction === null ? "…" : a.prediction || "(empty)",
          a.error ? h("span", { class: "format-error", text: " error" }) : null)))));
  };
  onlyDisagree.addEventListener("change", fill);
  fill();
  return h("div", {},
    h("h3", {}, `Questions — ${report.disagreements} disagreement${report.disagreements === 1 ? "" : "s"} `,
      h("label", { class: "small" }, onlyDisagree, " only disagreements")),
    h("table", { class: "questions" },
      h("thead", {}, h("tr", {}, h("th", { text: "question" }), h("th", { text: "gold" }),
        report.status.configs.map((c) => h("th", { text: c.label })))), tbody),
    h("p", { class: "hint", text: "Click a question to see every configuration's trace side by side." }));
}

export function renderReport(root, report) {
  const traces = h("div", { class: "compare-traces" });
  root.replaceChildren(
    h("div", { class: "meta", text: `run ${report.status.run_id} · ${report.status.state} · ${report.status.n_questions} questions${report.status.dataset ? ` from ${report.status.dataset}` : ""}` }),
    summaryTable(report), questionTable(report, traces), traces);
}

export async function runComparison(body, ui) {
  const status = await api.post("/v1/runs", body);
  ui.onStart(status);
  let current = status;
  while (current.finished_at === null) {
    await new Promise((r) => setTimeout(r, 250));
    current = await api.get(`/v1/runs/${status.run_id}`);
    ui.onProgress(current);
  }
  return api.get(`/v1/runs/${status.run_id}/report`);
}

export async function loadRuns(tbody, target) {
  const runs = await api.get("/v1/runs");
  tbody.replaceChildren(...runs.map((r) => h("tr", { class: "run-row", "data-testid": "run-row", onclick: async () => renderReport(target, await api.get(`/v1/runs/${r.run_id}/report`)) },
    h("td", {}, h("code", { text: r.run_id.slice(0, 8) })),
    h("td", { text: new Date(r.created_at * 1000).toLocaleString() }),
    h("td", { text: r.configs.map((c) => c.label).join(" vs ") }),
    h("td", { text: `${r.n_questions}${r.dataset ? ` (${r.dataset})` : ""}` }),
    h("td", { text: r.state }), h("td", { text: `${r.done}/${r.total}` }), h("td", { text: `${r.errors}` }))));
}
