// Rendering a Trace (routerag.trace.Trace) and the live events of /v1/ask/stream.

import { h, fmt } from "./dom.js";
import { graphMetas, graphView } from "./graph.js";

const tokensOf = (step) => step.model_calls.reduce((n, c) => n + c.prompt_tokens + c.completion_tokens, 0);

// Which hits of a search step the selector kept: the next select step's selection (or the step's own).
function keptSets(steps) {
  const kept = new Map();
  steps.forEach((step, i) => {
    if (step.kind !== "search") return;
    let selection = step.selection;
    for (let j = i + 1; !selection && j < steps.length && steps[j].kind !== "search"; j++) {
      if (steps[j].kind === "select") selection = steps[j].selection;
    }
    if (!selection) return;
    const sources = selection.kept_sources;
    const keys = sources.length ? selection.kept.map((id, k) => `${sources[k]}:${id}`) : null;
    kept.set(i, { ids: new Set(selection.kept), keys: keys ? new Set(keys) : null });
  });
  return kept;
}

function countBy(values) {
  const counts = new Map();
  for (const v of values) counts.set(v, (counts.get(v) || 0) + 1);
  return [...counts.entries()].map(([k, v]) => `${k} ${v}`).join(", ");
}

function hitsBySource(hits) {
  const groups = new Map();
  for (const hit of hits) {
    if (!groups.has(hit.source)) groups.set(hit.source, []);
    groups.get(hit.source).push(hit);
  }
  return groups;
}

function hitTable(hits, kept) {
  const groups = hitsBySource(hits);
  return h("div", { class: "evidence" }, [...groups.entries()].map(([source, list]) =>
    h("div", { class: "source-hits", "data-source": source },
      h("div", { class: "source-name" }, h("span", { class: "badge src", text: source }), ` ${list.length} hits`),
      h("table", { class: "hits" }, h("tbody", {}, list.map((hit) => {
        const isKept = kept && (kept.keys ? kept.keys.has(`${hit.source}:${hit.doc_id}`) : kept.ids.has(hit.doc_id));
        return h("tr", { class: kept ? (isKept ? "kept" : "dropped") : "" },
          h("td", { class: "rank", text: `#${hit.rank}` }),
          h("td", { class: "score", text: hit.score.toFixed(3) }),
          h("td", { class: "kept-mark", text: kept ? (isKept ? "kept" : "–") : "" }),
          h("td", {}, h("b", { text: hit.title || "(untitled)" }), " ", h("span", { class: "snippet", text: hit.text.slice(0, 220) })));
      }))))));
}

function stepView(step, kept) {
  const calls = step.model_calls;
  const tokens = tokensOf(step);
  const modelMs = calls.reduce((n, c) => n + c.latency_ms, 0);
  const ms = step.latency_ms || step.retrieval_ms + modelMs;
  const route = step.route;
  const chosen = step.sources.length ? step.sources : route ? [route.choice] : [];
  const preferred = step.subquery ? step.subquery.preferred_source : null;
  const selection = step.selection;
  const head = h("div", { class: "step-head" },
    h("span", { class: `badge kind-${step.kind}`, text: step.kind }),
    chosen.length ? h("span", { class: "srcs", text: `→ ${chosen.join(", ")}` }) : null,
    route && route.mode ? h("span", { class: "pref", text: `mode: ${route.mode}` }) : null,
    preferred ? h("span", { class: "pref", text: `preferred: ${preferred}` }) : null,
    step.forced ? h("span", { class: "pref", text: `forced answer (${step.forced.reader})` }) : null,
    h("span", { class: "cost", text: `${fmt(ms)} ms${step.retrieval_ms ? ` (retrieval ${fmt(step.retrieval_ms)} ms)` : ""} · ${tokens} tok${calls.length ? ` · ${calls.length} call${calls.length > 1 ? "s" : ""}` : ""}` }));
  const body = h("div", { class: "step-body" },
    step.reasoning ? h("div", { class: "reasoning" }, h("i", { text: "reasoning " }), step.reasoning) : null,
    route && route.reason ? h("div", { class: "routing" }, h("i", { text: `why${route.chosen_by ? ` (${route.chosen_by})` : ""} ` }), route.reason) : null,
    step.query ? h("div", { class: "query" }, h("i", { text: "query " }), h("code", { text: step.query })) : null,
    step.plan.length ? h("div", { class: "plan" }, h("i", { text: "plan " }),
      step.plan.map((sub) => `${sub.id}: ${sub.query}${sub.depends_on.length ? ` (after ${sub.depends_on.join(", ")})` : ""}`).join("; ")) : null,
    step.kind === "select" && selection ? h("div", { class: "select" },
      `selector ${selection.selector || ""} kept ${selection.kept.length} of ${selection.candidates ?? "?"}: `,
      countBy(selection.kept_sources)) : null,
    step.hits.length ? hitTable(step.hits, kept) : null,
    ...graphMetas(step).map(([source, graph]) => graphView(source, graph, new Map(step.hits.map((x) => [x.doc_id, x.title])))),
    step.answer !== null && step.answer !== undefined ? h("div", { class: "answer" },
      h("i", { text: step.intermediate ? `intermediate answer${step.iteration !== null ? ` (round ${step.iteration + 1})` : ""} ` : "answer " }),
      step.answer) : null,
    step.format_error ? h("div", { class: "format-error", text: `format error: ${step.format_error}` }) : null);
  return h("li", { class: `step step-${step.kind}`, "data-kind": step.kind }, head, body);
}

export function renderTrace(root, trace, { animate = true } = {}) {
  root.replaceChildren();
  delete root.dataset.done;
  const kept = keptSets(trace.steps);
  const totals = h("div", { class: "totals" },
    h("div", { class: "final", "data-testid": "final-answer" }, h("span", { class: "label", text: "answer" }), h("b", { text: trace.answer || "(none)" })),
    trace.fallback_answer ? h("div", { class: "fallback" }, h("span", { class: "label", text: "fallback" }), trace.fallback_answer) : null,
    trace.error ? h("div", { class: "format-error", text: `error: ${trace.error}` }) : null,
    h("div", { class: "meta", text: `${trace.strategy} · ${trace.steps.length} steps · ${trace.steps.filter((s) => s.kind === "search").length} retrieval turns · ${fmt(trace.latency_ms)} ms · ${trace.steps.reduce((n, s) => n + tokensOf(s), 0)} tokens` }));
  const list = h("ol", { class: "steps" });
  root.append(totals, list);
  const views = trace.steps.map((step, i) => stepView(step, kept.get(i)));
  if (!animate) { list.append(...views); root.dataset.done = "1"; return Promise.resolve(); }
  // unfold step by step
  return new Promise((resolve) => {
    let i = 0;
    const next = () => {
      if (i >= views.length) { setTimeout(() => { root.dataset.done = "1"; resolve(); }, 300); return; }
      const v = views[i++];
      v.classList.add("appear");
      list.append(v);
      setTimeout(next, 120);
    };
    next();
  });
}

export function liveEvent(root, name, data) {
  if (name === "start") {
    root.replaceChildren(h("div", { class: "ev start", text: `${data.strategy} over ${data.sources.join(", ")} — ${data.question}` }));
  } else if (name === "model") {
    root.append(h("div", { class: "ev model" }, h("span", { class: "badge kind-think", text: "model" }),
      ` ${data.prompt_tokens}+${data.completion_tokens} tok · ${fmt(data.latency_ms)} ms `, h("code", { text: data.text.slice(0, 300) })));
  } else if (name === "retrieval") {
    root.append(h("div", { class: "ev retrieval" }, h("span", { class: "badge kind-search", text: "retrieve" }),
      ` ${data.sources.join(", ")} · ${data.hits} hits · ${fmt(data.wall_ms)} ms · `, h("code", { text: data.queries.join(" | ") }),
      data.top.length ? h("span", { class: "top", text: ` top: ${data.top.map((t) => `${t.source}: ${t.title} (${t.score.toFixed(2)})`).join("; ")}` }) : null));
  } else if (name === "step") {
    // a real step of the trace, sent as the strategy appended it (the full trace is rendered at the end)
    const step = data.step;
    root.append(h("div", { class: "ev step", "data-testid": "live-step", "data-kind": step.kind, "data-index": String(step.index) },
      h("span", { class: `badge kind-${step.kind}`, text: `${step.index + 1}. ${step.kind}` }),
      step.sources.length ? ` → ${step.sources.join(", ")}` : "",
      step.query ? h("code", { text: ` ${step.query}` }) : null,
      step.hits.length ? ` · ${step.hits.length} hits` : "",
      step.answer !== null && step.answer !== undefined ? h("b", { text: ` ${step.answer}` }) : null,
      step.format_error ? h("span", { class: "format-error", text: ` (${step.format_error})` }) : null));
  } else if (name === "done") {
    root.append(h("div", { class: "ev done", text: `done: ${data.retrieval_turns} retrieval turns, ${data.prompt_tokens + data.completion_tokens} tokens, ${fmt(data.latency_ms)} ms` }));
  }
}
