"""The web UI reads only what the Trace's JSON schema (published at ``GET /v1/schema/trace``) has.

A small reader of ``web/js``: it finds property chains (``step.route.reason``, ``steps[j].selection``)
rooted at a variable that holds a schema object and walks them through the schema. Which variable
holds what: the names ``trace(s)``/``step(s)``/``hit(s)`` by convention (and, for a search step's
source reports, ``details``: any kind of ``SourceDetails``; ``graph``/``seed(s)``/``top(s)``: a graph
retrieval, its seed entities and its top PPR nodes), plus what the code binds — ``const x = <chain>``, ``x = <chain>``, the parameter of ``<array chain>.map((x) =>``
(and filter/find/forEach/some/every; ``reduce``'s second parameter) and ``for (const x of <chain>)``.
Reading a property the schema does not list, or a key of a free-form object, fails; a property of a
union (``details.graph``) is read if one of its kinds has it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from routerag.trace import trace_json_schema

JS_DIR = Path(__file__).resolve().parents[2] / "src" / "routerag" / "web" / "js"

IDENT = r"[A-Za-z_$][\w$]*"
CHAIN = rf"(?<![\w$.]){IDENT}(?:\s*\??\.\s*{IDENT}|\[[^\[\]]*\])+"
SOURCE = rf"(?<![\w$.]){IDENT}(?:\s*\??\.\s*{IDENT}|\[[^\[\]]*\])*"  # a chain, or a bare name
ARRAY_METHODS = {"map", "filter", "find", "forEach", "some", "every", "flatMap", "findIndex"}
# what a value of a JSON type may be asked in JS without it being a schema field
BUILTINS = {
    "array": {"length", "map", "filter", "find", "forEach", "some", "every", "reduce", "join", "slice", "includes",
              "indexOf", "flatMap", "findIndex", "concat", "at"},
    "string": {"length", "slice", "split", "trim", "toLowerCase", "toUpperCase", "includes", "startsWith",
               "endsWith", "replace", "padStart", "at"},
    "number": {"toFixed", "toString", "toLocaleString"},
    "integer": {"toFixed", "toString", "toLocaleString"},
    "boolean": set(),
}


class Schema:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.defs: dict[str, Any] = root.get("$defs", {})

    def options(self, node: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The kinds of a union node (``oneOf``, or ``anyOf`` with more than one non-null option); None otherwise."""
        node = self.resolve(node)
        found = node.get("oneOf") or [o for o in node.get("anyOf", []) if o.get("type") != "null"]
        return [self.resolve(o) for o in found] if found else None

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        """``node`` with ``$ref`` followed and an optional (``anyOf`` [X, null]) unwrapped."""
        while True:
            if "$ref" in node:
                node = self.defs[node["$ref"].rsplit("/", 1)[-1]]
            elif "anyOf" in node:
                options = [o for o in node["anyOf"] if o.get("type") != "null"]
                if len(options) != 1:
                    return node
                node = options[0]
            else:
                return node

    def named(self, name: str) -> dict[str, Any]:
        return self.root if name == self.root.get("title") else self.defs[name]


def _tokens(suffix: str) -> list[str]:
    """``.a?.b[0]`` -> ["a", "b", "[]"]"""
    return ["[]" if t.startswith("[") else t.lstrip("?. \n") for t in re.findall(rf"\??\.\s*{IDENT}|\[[^\[\]]*\]", suffix)]


def _strip(js: str) -> str:
    """The code without comments and without the text of plain string literals."""
    js = re.sub(r"/\*.*?\*/", " ", js, flags=re.S)
    js = re.sub(r"(?m)^\s*//.*$|(?<=[;,{}()\s])//[^\n]*", " ", js)
    return re.sub(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', '""', js)


class Checker:
    """Walks the property chains of one JS source through the schema; ``problems`` lists the
    reads that the schema does not have."""

    CONVENTION = {"trace": "Trace", "traces": "Trace[]", "step": "Step", "steps": "Step[]", "hit": "Hit", "hits": "Hit[]",
                  "details": "GraphRetrieval|HybridRetrieval|RemoteRetrieval", "graph": "GraphRetrieval",
                  "seeds": "GraphSeed[]", "seed": "GraphSeed", "tops": "GraphNode[]", "top": "GraphNode"}

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = Schema(schema)

    def _type(self, name: str) -> dict[str, Any]:
        if name.endswith("[]"):
            return {"type": "array", "items": self._type(name[:-2])}
        return self.schema.named(name)

    def walk(self, node: dict[str, Any], tokens: list[str], where: str) -> tuple[dict[str, Any] | None, str | None]:
        """(the node the chain ends at, or None once JS builtins take over; a problem, if any)."""
        for i, token in enumerate(tokens):
            node = self.schema.resolve(node)
            union = self.schema.options(node)
            if union is not None:  # a union: the read is fine if one of its kinds has it
                walks = [self.walk(option, tokens[i:], where) for option in union]
                known = [w for o, w in zip(union, walks) if token in o.get("properties", {})]  # the kinds that have it
                return next((w for w in walks if w[1] is None), (known or walks)[0])
            kind = node.get("type")
            values = node.get("additionalProperties")
            if kind == "object" and isinstance(values, dict) and values and "properties" not in node:
                node = values  # a typed mapping (source_details: source name -> its report): any key, typed values
                continue
            if token == "[]":
                if kind == "array":
                    node = node.get("items", {})
                    continue
                return None, f"{where}: indexes {'.'.join(tokens[:i]) or 'it'}, which is not an array in the schema"
            if "properties" in node:
                if token not in node["properties"]:
                    return None, f"{where}: reads {token!r}, not a field of {node.get('title', 'this object')} in the Trace schema"
                node = node["properties"][token]
                continue
            if kind == "object":
                return None, f"{where}: reads key {token!r} of a free-form object (a schema field has no such key)"
            if isinstance(kind, str) and token in BUILTINS.get(kind, set()):
                return None, None
            return None, f"{where}: reads {token!r} of a {kind or 'value'}, which has none"
        return node, None

    def check(self, js: str, label: str) -> list[str]:
        code = _strip(js)
        bound: dict[str, list[dict[str, Any]]] = {n: [self._type(t) for t in ts.split("|")] for n, ts in self.CONVENTION.items()}

        def ends(chain: str) -> list[dict[str, Any]]:
            root, suffix = re.match(rf"({IDENT})(.*)", chain, flags=re.S).groups()  # type: ignore[union-attr]
            out = []
            for node in bound.get(root, []):
                end, problem = self.walk(node, _tokens(suffix), label)
                if end is not None and problem is None:
                    out.append(end)
            return out

        def bind(name: str, nodes: list[dict[str, Any]]) -> bool:
            known = bound.setdefault(name, [])
            new = [n for n in nodes if n not in known]
            known.extend(new)
            return bool(new)

        for _ in range(4):  # bindings can name variables bound later in the text
            changed = False
            for name, chain in re.findall(rf"(?:\b(?:const|let|var)\s+|[;{{(,]\s*)({IDENT})\s*=(?![=>])\s*({SOURCE})(?![\w$.(\[])", code):
                changed |= bind(name, ends(chain))
            for chain, method, params in re.findall(rf"({SOURCE})\s*\.\s*({IDENT})\(\s*\(?\s*({IDENT}(?:\s*,\s*{IDENT})*)", code):
                items = [self.schema.resolve(n).get("items") for n in ends(chain)]
                items = [i for i in items if i]
                names = [p.strip() for p in params.split(",")]
                if method in ARRAY_METHODS:
                    changed |= bind(names[0], items)
                elif method == "reduce" and len(names) > 1:
                    changed |= bind(names[1], items)
            for name, chain in re.findall(rf"for\s*\(\s*(?:const|let|var)\s+({IDENT})\s+of\s+({SOURCE})\s*\)", code):
                items = [self.schema.resolve(n).get("items") for n in ends(chain)]
                changed |= bind(name, [i for i in items if i])
            if not changed:
                break

        problems = []
        for match in re.finditer(CHAIN, code):
            chain = match.group(0)
            root, suffix = re.match(rf"({IDENT})(.*)", chain, flags=re.S).groups()  # type: ignore[union-attr]
            if root not in bound or not bound[root]:
                continue
            line = code.count("\n", 0, match.start()) + 1
            results = [self.walk(node, _tokens(suffix), f"{label}:{line} {chain}") for node in bound[root]]
            if all(problem for _, problem in results):
                problems.append(results[0][1])
        return problems


@pytest.fixture(scope="module")
def checker() -> Checker:
    return Checker(trace_json_schema())


def test_web_js_reads_only_fields_of_the_published_trace_schema(checker) -> None:
    files = sorted(JS_DIR.glob("*.js"))
    assert {"trace.js", "graph.js", "compare.js"} <= {f.name for f in files}
    problems = [p for f in files for p in checker.check(f.read_text(encoding="utf-8"), f.name)]
    assert problems == []


def test_the_checker_sees_the_trace_reads_of_the_ui(checker) -> None:
    """It is not vacuous: the chains of trace.js reach the typed records."""
    code = _strip((JS_DIR / "trace.js").read_text(encoding="utf-8"))
    for read in ("step.route", "route.reason", "selection.kept_sources", "step.subquery.preferred_source", "step.forced.reader",
                 "step.plan", "sub.depends_on", "step.intermediate", "step.iteration"):
        assert read in code
    assert checker.check("const f = (step) => step.route.reason + step.selection.kept.length;", "ok.js") == []


def test_the_checker_sees_the_source_reports_the_graph_view_reads(checker) -> None:
    """graph.js reads the typed source reports: each kind's record, the graph retrieval's seeds and nodes."""
    code = _strip((JS_DIR / "graph.js").read_text(encoding="utf-8"))
    for read in ("step.source_details", "details.kind", "details.graph", "details.details", "graph.seeds", "graph.top_nodes",
                 "graph.fallback", "seed.weight", "seed.node", "top.score", "top.kind", "top.node"):
        assert read in code, read
    assert checker.check("const f = (details) => details.graph.seeds.length + details.url.length;", "ok.js") == []


@pytest.mark.parametrize(
    ("js", "what"),
    [
        ("const f = (step) => step.kept_doc_ids.length;", "'kept_doc_ids', not a field of Step"),
        ("const f = (step) => step.routing_reason;", "'routing_reason', not a field of Step"),
        ("const f = (step) => step.metadata;", "'metadata', not a field of Step"),
        ("const f = (step) => step.plan.map((sub) => sub.text);", "'text', not a field of PlannedSubQuery"),
        ("const f = (trace) => trace.params.k;", "key 'k' of a free-form object"),
        ("const f = (details) => details.seedz;", "'seedz', not a field of GraphRetrieval"),
        ("const f = (graph) => graph.top_nodes.map((top) => top.weight);", "'weight', not a field of GraphNode"),
        ("const f = (step, name) => step.source_details[name].graph.nodes;", "'nodes', not a field of GraphRetrieval"),
        ("function g(trace) { return trace.steps.filter((s) => s.nope); }", "'nope', not a field of Step"),
        ("function g(step) { const route = step.route; return route.why; }", "'why', not a field of Route"),
        ("const n = (step) => step.model_calls.reduce((n, c) => n + c.tokens, 0);", "'tokens', not a field of ModelCall"),
        ("function g(steps, j) { return steps[j].selection.picked; }", "'picked', not a field of Selection"),
        ("function g(hits) { for (const x of hits) x.url; }", "'url', not a field of Hit"),
    ],
)
def test_a_read_outside_the_schema_fails(checker, js, what) -> None:
    problems = checker.check(js, "bad.js")
    assert len(problems) == 1 and what in problems[0], problems
