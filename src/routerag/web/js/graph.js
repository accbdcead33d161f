// A small SVG subgraph of a graph retrieval (routerag.trace.GraphRetrieval): seed entities (left) feeding
// Personalized PageRank, the top PPR nodes (right, entities and passages) sized by score.

import { h, s } from "./dom.js";

// The graph retrieval in what a source reported (Step.source_details: one record per kind of source):
// a graph source's own, a hybrid source's graph half, or what the source behind a remote one reported.
function graphOf(details) {
  if (!details) return null;
  if (details.kind === "graph") return details;
  if (details.kind === "hybrid") return details.graph;
  if (details.kind === "remote") return graphOf(details.details);
  return null;
}

// [source, graph] for each source of the step whose graph retrieval has something to draw.
export function graphMetas(step) {
  const out = [];
  for (const [source, details] of Object.entries(step.source_details || {})) {
    const graph = graphOf(details);
    if (graph && (graph.seeds.length || graph.top_nodes.length)) out.push([source, graph]);
  }
  return out;
}

function short(text, n = 28) {
  return text.length > n ? text.slice(0, n - 1) + "…" : text;
}

export function graphView(source, graph, titles = new Map()) {
  const seeds = graph.seeds.slice(0, 8);
  const tops = graph.top_nodes.slice(0, 8);
  const rowH = 26;
  const height = Math.max(seeds.length, tops.length, 1) * rowH + 30;
  const width = 760;
  const [sx, tx] = [250, 470];
  const maxTop = Math.max(...tops.map((top) => top.score), 1e-9);
  const maxSeed = Math.max(...seeds.map((seed) => seed.weight), 1e-9);
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, width, height, class: "graph", role: "img",
    "aria-label": `graph retrieval of ${source}: seed entities and top PPR nodes` });
  svg.append(s("text", { x: 10, y: 14, class: "gh" }, "seed entities"), s("text", { x: tx - 10, y: 14, class: "gh" }, "top PPR nodes"));
  const seedPos = seeds.map((_, i) => [sx, 30 + i * rowH + rowH / 2]);
  const topPos = tops.map((_, i) => [tx, 30 + i * rowH + rowH / 2]);
  // edges: each seed to the top nodes that name the same entity, else faintly to all
  seeds.forEach((seed, i) => {
    tops.forEach((top, j) => {
      const same = top.node === seed.node;
      svg.append(s("line", { x1: seedPos[i][0], y1: seedPos[i][1], x2: topPos[j][0], y2: topPos[j][1],
        class: same ? "edge strong" : "edge" }));
    });
  });
  seeds.forEach((seed, i) => {
    const [x, y] = seedPos[i];
    svg.append(s("circle", { cx: x, cy: y, r: 4 + 6 * (seed.weight / maxSeed), class: "node seed" },
      s("title", {}, `${seed.node} (weight ${seed.weight.toFixed(3)})`)));
    svg.append(s("text", { x: x - 12, y: y + 4, "text-anchor": "end", class: "nl" }, short(seed.node, 36)));
  });
  tops.forEach((top, j) => {
    const [x, y] = topPos[j];
    svg.append(s("circle", { cx: x, cy: y, r: 4 + 6 * (top.score / maxTop), class: `node ${top.kind === "passage" ? "passage" : "entity"}` },
      s("title", {}, `${top.kind}: ${titles.get(top.node) || top.node} (PPR ${top.score.toFixed(4)})`)));
    const name = top.kind === "passage" ? `¶ ${titles.get(top.node) || top.node}` : top.node;
    svg.append(s("text", { x: x + 12, y: y + 4, class: "nl" }, `${short(name, 32)} · ${top.score.toFixed(3)}`));
  });
  return h("figure", { class: "graphfig", "data-testid": "graph-view" }, svg,
    h("figcaption", { text: `${source}: ${seeds.length} seed entities → ${tops.length} top PPR nodes (thick line: a seed that is itself a top node; thin lines: PPR mass spreads from the seed set, they are not KG edges)${graph.fallback ? ` (fallback: ${graph.fallback})` : ""}` }));
}
