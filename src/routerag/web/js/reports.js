// Routing reports ("is routing worth it on my data?") written by the operator's
// `routerag routing-report --out <data_dir>/reports/<name>`: the list, then one report's rows and figure.

import * as api from "./api.js";
import { h, fmt, pct } from "./dom.js";

let shownPlot = null; // the object URL of the figure on screen (revoked when another one replaces it)

function share(r) {
  const s = r.recovered;
  if (r.kind === "oracle" || !s || s.share === null || s.share === undefined) return "–";
  return `${pct(s.share)} [${pct(s.low)}, ${pct(s.high)}]`;
}

function rowsTable(report) {
  return h("table", { class: "summary", "data-testid": "routing-rows" },
    h("thead", {}, h("tr", {}, ["row", "kind", `recall@${report.settings.k} %`, "ms", "evidence tokens", "cost ×", "share of headroom % [95% CI]"]
      .map((t) => h("th", { text: t })))),
    h("tbody", {}, report.rows.map((r) => h("tr", { class: r.kind === "oracle" ? "oracle" : "" },
      h("th", { text: r.name }), h("td", { text: r.kind }), h("td", { class: "num", text: pct(r.recall) }),
      h("td", { class: "num", text: fmt(r.ms, 2) }), h("td", { class: "num", text: fmt(r.tokens, 0) }),
      h("td", { class: "num", text: r.cost_ratio === null ? "–" : fmt(r.cost_ratio, 2) }),
      h("td", { class: "num", text: share(r) })))));
}

async function plotImage(name) {
  const blob = await api.blob(`/v1/routing-reports/${encodeURIComponent(name)}/plot`); // the API key travels as a header
  if (shownPlot) URL.revokeObjectURL(shownPlot);
  shownPlot = URL.createObjectURL(blob);
  return h("img", { class: "routing-plot", "data-testid": "routing-plot", src: shownPlot, alt: `recall against evidence tokens for ${name}` });
}

async function showReport(entry, target) {
  target.replaceChildren(h("div", { class: "hint", text: "loading the report…" }));
  const report = await api.get(`/v1/routing-reports/${encodeURIComponent(entry.name)}`);
  const figure = entry.plot ? await plotImage(entry.name) : h("p", { class: "hint", text: "no figure in this report (written without matplotlib)" });
  target.replaceChildren(
    h("h3", { text: `${entry.name}: ${report.settings.dataset}, ${report.questions} questions` }),
    h("p", { class: "verdict", "data-testid": "routing-verdict", text: report.verdict }),
    rowsTable(report), figure,
    h("ul", { class: "hint" }, report.notes.map((n) => h("li", { text: n }))));
}

export async function loadReports(tbody, target) {
  const reports = await api.get("/v1/routing-reports");
  if (!reports.length) {
    tbody.replaceChildren(h("tr", {}, h("td", { colspan: 5, class: "hint",
      text: "no routing reports yet: `routerag routing-report --out <data_dir>/reports/<name> ...` writes one here" })));
    return;
  }
  tbody.replaceChildren(...reports.map((r) => h("tr", { class: "run-row", "data-testid": "report-row", onclick: () => showReport(r, target) },
    h("td", {}, h("code", { text: r.name })), h("td", { text: r.dataset }), h("td", { text: `${r.questions}` }),
    h("td", { text: r.choices.join(", ") }), h("td", { text: r.verdict }))));
}
