"""Property-based fuzzing of both HTTP APIs over real HTTP on loopback.

Every endpoint of the ask service (with its mounted retrieval API) and of the standalone retrieval
server gets hypothesis-generated requests: arbitrary JSON values (recursive), Unicode with lone
surrogates sent as ``\\ud800`` escapes, huge/negative/NaN/infinite numbers, integers too long to
convert, wrong types, extra fields, raw bytes with assorted content types, hostile multipart file
names and contents, and hostile path segments and query strings. The invariants, checked after
every example:

* never a 5xx (and a stream that starts always ends with its ``done`` event);
* the server stays healthy: ``/health`` answers 200 on the same client;
* no module a request names is imported: plugin names (``sys:exit``, ``os:abort``,
  ``builtins:print``, ``this:x``) and paths outside the data folder are among the values sent as
  strategies and in params, and ``this`` (whose import prints the Zen of Python) is never loaded;
* nothing is written outside the service's data directory, and inside it only the layout the
  service owns (``sources/<valid name>/...``, ``runs/<id>.json``);
* every accepted run (202) ends as ``done`` or ``failed`` within a bounded wait and is stored;
  every accepted upload ends ``ready`` or ``failed``.

``test_every_route_is_fuzzed`` lists the apps' routes, so a new endpoint without a fuzz case fails.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from routerag.edge.serving import BackgroundServer
from routerag.llm.scripted import ScriptedModel
from routerag.server.app import create_app
from routerag.server.retrieval_app import create_retrieval_app
from routerag.server.settings import SearchR1Settings, ServerSettings, ServiceSettings
from routerag.server.upload_parse import NAME_PATTERN
from routerag.strategies import STRATEGIES

pytestmark = pytest.mark.service
FUZZ = settings(max_examples=int(os.environ.get("ROUTERAG_FUZZ_EXAMPLES", "40")), deadline=None, database=None,
                print_blob=True, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                                        HealthCheck.data_too_large])
RUN_WAIT_S = 30.0  # an accepted run of at most a few dozen scripted answers must end well within this
REQUEST_TIMEOUT_S = 30.0  # a reply that takes longer is a hang


def answer(messages, params, continue_final) -> str:
    return "Lothair II" if "Lothair II" in messages[0].content else "unknown"


# ------------------------------------------------------------------ JSON with hostile leaves


class RawJson:
    """A JSON fragment sent verbatim (json.dumps cannot write an integer of over 4,300 digits)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"RawJson({self.text[:40]!r}{'...' if len(self.text) > 40 else ''})"


def to_json(value: object) -> str:
    """JSON with ASCII escapes, so a lone surrogate travels as ``\\ud800``; NaN/Infinity as Python writes them."""
    if isinstance(value, RawJson):
        return value.text
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k), ensure_ascii=True)}: {to_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(to_json(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=True, allow_nan=True)


CODE_NAMES = ["sys:exit", "os:abort", "builtins:print", "this:x"]  # a request names no code (docs/concepts/security.md)
HOSTILE_STRINGS = [*CODE_NAMES, "/tmp", "../../routers/strategy",
    "\ud800", "a \udfff b", "\ud83d", "\x00", "\x00\x01\x7f", "", " ", "\n", "../../../etc/passwd", "..\\..\\boot.ini",
    "/etc/passwd", "C:\\Windows\\win.ini", "%2e%2e%2f", "<script>alert(1)</script>", "' OR 1=1 --", "${jndi:x}",
    "{{7*7}}", "bm25", "bm25\n", "passage", "graph", "[graph] q", "[nope] q", "[bm25][graph] who", "[] x", "[" * 50,
    "x" * 2_001, "x" * 4_001, "é" * 300, "\u202e\u0000rtl", "\ufeffbom", "\U0001f600" * 10, "file:/etc/passwd",
    "demo", "2wikimultihopqa", "vanilla", "NaN", "-1", "1e309",
]
ALL_CHARS = st.characters(exclude_categories=())  # includes Cs: lone surrogates
hostile_text = st.one_of(
    st.text(max_size=30),
    st.text(ALL_CHARS, max_size=30),
    st.sampled_from(HOSTILE_STRINGS),
)
numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, 2**31, 2**63, -(2**63), 10**100, -(10**300)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=4_301, max_value=6_000).map(lambda n: RawJson("9" * n)),  # too long to convert
    st.sampled_from([RawJson("1e999"), RawJson("-1e999"), RawJson("1" + "0" * 400 + ".5"), RawJson("-0")]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, hostile_text)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(hostile_text, children, max_size=4)),
    max_leaves=12,
)
# nesting beyond the guard's limit (32) and far beyond Python's recursion limit
deep_json = st.integers(min_value=30, max_value=100_000).flatmap(
    lambda n: st.sampled_from([RawJson("[" * n + "]" * n), RawJson('{"a": ' * n + "1" + "}" * n)]))
hostile_values = st.one_of(json_values, json_values, json_values, deep_json)


def maybe(value_strategy: st.SearchStrategy, *, hostile: st.SearchStrategy = hostile_values) -> st.SearchStrategy:
    """Mostly a plausible value, sometimes anything."""
    return st.one_of(value_strategy, value_strategy, value_strategy, hostile)


def fuzzed(valid: st.SearchStrategy) -> st.SearchStrategy:
    """A valid body; or one with a single field replaced by a hostile value, or with unknown
    fields added; or any JSON value at all. Valid bodies stay frequent, so that requests get past
    validation into the work behind it (strategy runs, retrieval, background runs)."""

    def replace_one(args: tuple[dict, int, object]) -> dict:
        body, which, value = args
        if body:
            body = dict(body)
            body[sorted(body)[which % len(body)]] = value
        return body

    branches = [
        valid,  # half of the examples
        st.tuples(valid, st.integers(0, 16), hostile_values).map(replace_one),
        st.tuples(valid, st.dictionaries(hostile_text, json_values, min_size=1, max_size=2))
        .map(lambda t: {**t[1], **t[0]}),
        hostile_values,
    ]
    return st.sampled_from([0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 3, 1]).flatmap(lambda i: branches[i])


PARAM_KEYS = sorted({"source", "k", "max_tokens", "temperature", "max_turns", "selector", "kk", "sourse",
                     "max_new_tokens", "text_source", "mode_sources", "router", "sources", "router_model",
                     "mode_router_model", "strategies", "adapters"})
code_or_path = st.sampled_from([*CODE_NAMES, "/etc", "../outside"])
QUESTIONS = ["Who was Teutberga married to?", "Where is Leeds?", "Who found the moon Zorblax?"]
safe_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
# a configuration that passes validation: a strategy that runs over the bm25 source ...
valid_config = st.one_of(
    st.fixed_dictionaries({"strategy": st.just("vanilla"),
                           "params": st.fixed_dictionaries({"source": st.just("bm25")},
                                                           optional={"k": st.integers(1, 10)})}),
    st.fixed_dictionaries({"strategy": st.sampled_from(["direct", "rule"])}),
)
# ... or any strategy with any params (mostly refused, which exercises every strategy's Params)
any_config = st.fixed_dictionaries(
    {"strategy": st.one_of(st.sampled_from(STRATEGIES.names()), code_or_path)},
    optional={"params": st.dictionaries(st.one_of(st.sampled_from(PARAM_KEYS), hostile_text),
                                        st.one_of(st.sampled_from(["bm25", 0, 1, 2, 3, 0.5, True, None, "score",
                                                                   10**9]), code_or_path,
                                                  st.dictionaries(st.sampled_from(["direct", "a"]), code_or_path,
                                                                  max_size=2), json_values), max_size=4),
              "sources": st.lists(st.sampled_from(["bm25", "notes", "fzsrc"]), max_size=2)})
config = st.one_of(valid_config, valid_config, any_config)

ask_bodies = fuzzed(st.tuples(
    st.fixed_dictionaries({"question": st.sampled_from(QUESTIONS)}, optional={"qid": safe_text}), config)
    .map(lambda t: {**t[0], **t[1]}))
run_question = st.fixed_dictionaries(
    {"question": st.sampled_from(QUESTIONS)},
    optional={"answers": st.lists(safe_text, max_size=3)})
unique_qids = st.lists(run_question, min_size=1, max_size=4).map(
    lambda qs: [{**q, "qid": f"q{i}"} if i % 2 else q for i, q in enumerate(qs)])
run_bodies = st.one_of(
    fuzzed(st.tuples(st.fixed_dictionaries({"questions": unique_qids}), config).map(lambda t: {**t[0], **t[1]})),
    fuzzed(st.fixed_dictionaries({"questions": unique_qids,
                                  "configs": st.lists(config, min_size=1, max_size=3)})),
    fuzzed(st.tuples(st.fixed_dictionaries({"dataset": st.sampled_from(["demo", "demo", "file:/etc/passwd", "../demo"])},
                                           optional={"sample_size": st.integers(min_value=1, max_value=3)}),
                     valid_config).map(lambda t: {**t[0], **t[1]})),
)
chat_content = st.one_of(
    st.sampled_from(QUESTIONS), hostile_text,
    st.lists(st.one_of(st.fixed_dictionaries({"type": st.just("text"), "text": st.sampled_from(QUESTIONS)}),
                       st.fixed_dictionaries({"type": st.sampled_from(["image_url", "input_audio", "text"]),
                                              "image_url": json_values})), max_size=3))
chat_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "user", "user", "system", "assistant", "tool", "developer"])},
    optional={"content": maybe(chat_content), "name": safe_text, "tool_call_id": safe_text})
chat_bodies = fuzzed(st.fixed_dictionaries(
    {"model": st.sampled_from([*STRATEGIES.names(), "routerag-1.5b", "gpt-4o", "vanilla ", "", *CODE_NAMES]),
     "messages": st.tuples(st.lists(chat_message, max_size=3), st.sampled_from(QUESTIONS))
     .map(lambda t: [*t[0], {"role": "user", "content": t[1]}])},
    optional={"stream": st.booleans(), "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()}),
              "max_tokens": st.integers(min_value=-1, max_value=10**6), "max_completion_tokens": st.integers(1, 100),
              "n": st.integers(0, 3), "temperature": numbers, "top_p": numbers, "stop": maybe(st.lists(safe_text)),
              "tools": json_values, "response_format": json_values,
              "routerag": st.fixed_dictionaries({}, optional={
                  "params": st.dictionaries(st.one_of(st.sampled_from(PARAM_KEYS), hostile_text),
                                            st.one_of(st.sampled_from(["bm25", 0, 1, 2, 0.5, True, None]), code_or_path,
                                                      json_values), max_size=3),
                  "sources": st.lists(st.sampled_from(["bm25", "notes", "fzsrc"]), max_size=2)})}))
QUERIES = ["who was Teutberga married to", "[bm25] Leeds", "[bm25][bm25] x", "Zorblax moon", "[BM25]  Leeds city"]
query_lists = st.lists(st.sampled_from(QUERIES), min_size=1, max_size=5)
retrieve_bodies = fuzzed(st.fixed_dictionaries(
    {"queries": query_lists, "sources": st.just(["bm25"])}, optional={"k": st.integers(min_value=1, max_value=100)}))
searchr1_bodies = fuzzed(st.fixed_dictionaries(
    {"queries": query_lists}, optional={"topk": st.integers(min_value=1, max_value=100),
                                        "return_scores": st.booleans()}))
CONTENT_TYPES = ["application/json", "application/json; charset=latin-1", "application/vnd.api+json", "text/plain",
                 "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "multipart/form-data",
                 "application/octet-stream", "", "text/csv", "application/json; charset=utf-16"]
raw_bodies = st.one_of(
    st.binary(max_size=300),
    st.sampled_from([b"{", b"[]", b"null", b"\xff\xfe{}", b'{"question": "\xed\xa0\x80"}', b"\x00" * 100,
                     b'{"queries": ["a"], "k": 1e999}', b"--x\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n",
                     b"a=b&c=%ff", b'{"a":1,"a":2}']),
)


# ------------------------------------------------------------------ servers and checks


@pytest.fixture(scope="module")
def fuzz_root(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture(scope="module")
def data_dir(fuzz_root):
    return fuzz_root / "service-data"


@pytest.fixture(scope="module")
def service(sources, data_dir):
    settings = ServiceSettings(data_dir=data_dir, run_workers=2, keep_runs=1_000,
                               retrieval=ServerSettings(searchr1=SearchR1Settings(default_source="bm25")))
    with BackgroundServer(create_app(ScriptedModel(answer), sources, settings)) as running:
        yield running


@pytest.fixture(scope="module")
def svc(service):
    with httpx.Client(base_url=service.url, timeout=REQUEST_TIMEOUT_S) as client:
        yield client


@pytest.fixture(scope="module")
def ret(retrieval):
    with httpx.Client(base_url=retrieval.url, timeout=REQUEST_TIMEOUT_S) as client:
        yield client


def files_under(root: Path, skip: Path | None = None) -> set[str]:
    found = set()
    for dirpath, dirnames, filenames in os.walk(root):
        if skip is not None and Path(dirpath) == skip:
            dirnames[:] = []
            continue
        found.update(os.path.join(dirpath, f) for f in filenames)
        found.update(os.path.join(dirpath, d) for d in dirnames if skip is None or Path(dirpath, d) != skip)
    return found


@pytest.fixture(scope="module")
def outside_before(service, retrieval):
    """Requested by every fuzz test: both servers are up (the check below runs around each test)."""
    return True


def _outside(fuzz_root: Path, data_dir: Path, cache_dir) -> dict[str, set[str]]:
    default_data = Path(cache_dir("service"))
    return {
        # this module's temp tree in full; the session's temp root and the working directory at
        # their top level (other test modules own what lies below)
        "tmp": files_under(fuzz_root, skip=data_dir) | set(os.listdir(fuzz_root.parent)),
        "default data_dir": files_under(default_data) if default_data.exists() else set(),
        "cwd": set(os.listdir(os.getcwd())) - {".hypothesis", ".pytest_cache", "__pycache__"},
        # where the hostile upload names below would land if a name were ever used as a path
        "targets": {str(p) for p in (Path("/tmp/evil.json"), Path("/tmp/evil.csv"), fuzz_root / "evil.csv",
                                     data_dir / "evil.json") if p.exists()},
    }


# runs/<id>.json (status, questions) and runs/<id>/<n>/ (each configuration's answers, eval's run format)
OWNED = re.compile(r"^(runs(/\.?[0-9a-f]{16}\.json(\.[^/]*\.tmp)?"
                   r"|/[0-9a-f]{16}(/[0-9]+(/\.?(run\.json|results\.jsonl|summary\.json)(\.[^/]*\.tmp)?)?)?)?"
                   r"|sources(/" + NAME_PATTERN.strip("^$") + r"(/.*)?)?)$")


@pytest.fixture(autouse=True)
def nothing_written_outside(request, fuzz_root, data_dir):
    """Checked around every fuzz test: no new file outside the data directory, and only the
    service's own layout inside it."""
    if "outside_before" not in request.fixturenames:
        yield
        return
    from routerag.paths import cache_dir

    request.getfixturevalue("outside_before")  # the servers first: their start-up writes are theirs
    before = _outside(fuzz_root, data_dir, cache_dir)
    yield
    after = _outside(fuzz_root, data_dir, cache_dir)
    for where, names in after.items():
        assert names <= before[where], f"new files in {where}: {sorted(names - before[where])[:10]}"
    for path in files_under(data_dir):
        rel = Path(path).relative_to(data_dir).as_posix()
        assert OWNED.match(rel), f"unexpected path in the data directory: {rel!r}"


def healthy(client: httpx.Client, path: str = "/health") -> None:
    r = client.get(path)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "ok"
    assert "this" not in sys.modules, "a module named in a request was imported"


def no_5xx(r: httpx.Response) -> httpx.Response:
    assert r.status_code < 500, f"{r.request.method} {r.request.url.path} -> {r.status_code}: {r.text[:500]}"
    try:
        event(f"{r.request.method} {r.request.url.path.split('/')[-1][:20]}: {r.status_code}")
    except InvalidArgument:  # outside a hypothesis test
        pass
    if r.status_code >= 400:  # a reason, always: the service's {"detail"}, or OpenAI's shape on its routes
        reason = r.json()["detail"] if "detail" in r.json() else r.json()["error"]["message"]
        assert isinstance(reason, str) and reason, r.text
    return r


def post_json(client: httpx.Client, path: str, body: object, content_type: str = "application/json") -> httpx.Response:
    data = body if isinstance(body, bytes) else to_json(body).encode("ascii")
    return no_5xx(client.post(path, content=data, headers={"content-type": content_type}))


def wait_run_ended(client: httpx.Client, data_dir: Path, run_id: str) -> None:
    deadline = time.monotonic() + RUN_WAIT_S
    while True:
        status = no_5xx(client.get(f"/v1/runs/{run_id}")).json()
        if status["finished_at"] is not None:
            break
        assert time.monotonic() < deadline, f"run {run_id} has not ended after {RUN_WAIT_S} s: {status}"
        time.sleep(0.05)
    assert status["state"] in ("done", "failed"), status
    assert (data_dir / "runs" / f"{run_id}.json").is_file(), "an ended run is stored"
    no_5xx(client.get(f"/v1/runs/{run_id}/traces"))
    no_5xx(client.get(f"/v1/runs/{run_id}/report"))


def path_segment(text: str) -> str:
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


# ------------------------------------------------------------------ the ask service


@FUZZ
@given(body=ask_bodies)
def test_fuzz_ask(svc, outside_before, body):
    r = post_json(svc, "/v1/ask", body)
    if r.status_code == 200:
        assert "answer" in r.json()
    healthy(svc)


@FUZZ
@given(body=ask_bodies)
def test_fuzz_ask_stream(svc, outside_before, body):
    r = post_json(svc, "/v1/ask/stream", body)
    if r.status_code == 200:
        events = re.findall(r"^event: (\S+)$", r.text, flags=re.M)
        assert events[0] == "start" and events[-1] == "done", events
    healthy(svc)


@FUZZ
@given(body=run_bodies)
def test_fuzz_runs(svc, data_dir, outside_before, body):
    r = post_json(svc, "/v1/runs", body)
    if r.status_code == 202:
        wait_run_ended(svc, data_dir, r.json()["run_id"])
    else:
        assert r.status_code in (400, 422), r.text
    healthy(svc)


@FUZZ
@given(body=chat_bodies)
def test_fuzz_chat_completions(svc, outside_before, body):
    r = post_json(svc, "/v1/chat/completions", body)
    if r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream"):
        events = re.findall(r"^data: (.+)$", r.text, flags=re.M)
        assert '"role":"assistant"' in events[0] and events[-1] == "[DONE]", events
    elif r.status_code == 200:
        assert r.json()["object"] == "chat.completion" and r.json()["choices"][0]["message"]["role"] == "assistant"
    healthy(svc)


@FUZZ
@given(path=st.sampled_from(["/v1/ask", "/v1/ask/stream", "/v1/runs", "/retrieval/retrieve",
                             "/retrieval/retrieve/searchr1", "/v1/sources", "/v1/chat/completions"]),
       body=st.one_of(raw_bodies, hostile_values.map(lambda v: to_json(v).encode("ascii"))),
       content_type=st.sampled_from(CONTENT_TYPES))
def test_fuzz_raw_bodies_and_content_types(svc, outside_before, path, body, content_type):
    r = post_json(svc, path, body, content_type)
    if path == "/v1/runs" and r.status_code == 202:  # cannot be: no raw body is a valid run... but if it is, it ends
        pytest.fail(f"a raw body started a run: {body!r}")
    healthy(svc)


upload_names = st.one_of(st.from_regex(r"fz[a-z0-9_-]{0,10}", fullmatch=True), hostile_text)
file_names = st.one_of(
    st.sampled_from(["notes.json", "notes.csv", "../../../../tmp/evil.json", "..\\..\\evil.csv", "/etc/passwd",
                     "a\x00b.json", "x.json\r\nX-Injected: 1", "evil.json;.csv", "." * 300 + ".json", "", "CON.csv",
                     "%2e%2e%2fx.json", "ü\u202e.json", "\ud800.json"]),
    st.text(max_size=40).map(lambda s: s + ".json"),
)
file_contents = st.one_of(
    st.just(json.dumps([{"title": "Zorblax", "text": "Zorblax is a fictional moon of Neptune."}]).encode()),
    st.just(b"title,text\nLeeds,Leeds is a city in West Yorkshire.\n"),
    st.lists(st.one_of(st.fixed_dictionaries({"title": maybe(hostile_text), "text": maybe(hostile_text)}), hostile_text,
                       json_values), max_size=4).map(lambda v: to_json(v).encode("ascii")),
    hostile_values.map(lambda v: to_json(v).encode("ascii")),
    st.text(ALL_CHARS, max_size=200).map(lambda s: s.encode("utf-8", "surrogatepass")),
    raw_bodies,
    st.sampled_from([b"text\n" + b"x," * 1000, b"\xef\xbb\xbftitle,text\nA,\"unterminated\n", b"PK\x03\x04zip",
                     b"\x1f\x8b\x08gzip", b"title,text\n" + b"the,and of\n" * 3]),
)
file_types = st.sampled_from(["application/json", "text/csv", "application/octet-stream", "text/plain", "image/png",
                              "", "application/json; charset=utf-8", "text/html"])


@FUZZ
@given(name=upload_names, filename=file_names, content=file_contents, content_type=file_types,
       profile=st.one_of(st.none(), hostile_text, st.just("p" * 600)))
def test_fuzz_uploads(svc, outside_before, name, filename, content, content_type, profile):
    fields = {"name": name.encode("utf-8", "surrogatepass")}
    if profile is not None:
        fields["profile"] = profile.encode("utf-8", "surrogatepass")
    files = {"file": (filename.encode("utf-8", "surrogatepass").decode("latin-1"), content, content_type)}
    r = no_5xx(svc.post("/v1/sources", data=fields, files=files))
    if r.status_code == 202:
        deadline = time.monotonic() + RUN_WAIT_S
        while (state := no_5xx(svc.get(f"/v1/sources/{name}")).json()["state"]) == "indexing":
            assert time.monotonic() < deadline, f"upload {name!r} still indexing"
            time.sleep(0.05)
        assert state in ("ready", "failed")
        no_5xx(svc.request("DELETE", f"/v1/sources/{name}"))  # the store has a limit of 50 sources
    healthy(svc)


@FUZZ
@given(data=st.data())
def test_fuzz_multipart_shapes(svc, outside_before, data):
    """Multipart bodies with missing, repeated and odd parts, sent as raw bytes."""
    boundary = data.draw(st.sampled_from(["x", "----b", "a" * 70, "é"]), label="boundary")
    parts = data.draw(st.lists(st.tuples(
        st.sampled_from(["file", "name", "profile", "extra", "", "fi\"le"]),
        st.one_of(st.none(), file_names),
        st.one_of(file_contents, st.sampled_from([b"fzmulti", b"", b"\r\n--x--"]))), max_size=4), label="parts")
    body = b""
    for field, filename, content in parts:
        disposition = f'form-data; name="{field}"' + (f'; filename="{filename}"' if filename is not None else "")
        body += (f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode("utf-8", "surrogatepass")
                 + content + b"\r\n")
    body += data.draw(st.sampled_from([f"--{boundary}--\r\n".encode(), b"", b"--"]), label="end")
    r = no_5xx(svc.post("/v1/sources", content=body,
                        headers={"content-type": f"multipart/form-data; boundary={boundary}".encode()}))
    if r.status_code == 202:
        name = r.json()["name"]
        deadline = time.monotonic() + RUN_WAIT_S
        while no_5xx(svc.get(f"/v1/sources/{name}")).json()["state"] == "indexing":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        no_5xx(svc.request("DELETE", f"/v1/sources/{name}"))
    healthy(svc)


GET_PATHS = ["/v1/runs/{x}", "/v1/runs/{x}/traces", "/v1/runs/{x}/report", "/v1/sources/{x}", "/v1/strategies",
             "/v1/info", "/v1/schema/trace", "/v1/datasets", "/v1/runs", "/v1/sources", "/health", "/ready", "/retrieval/sources",
             "/retrieval/health", "/", "/ui/{x}", "/ui/../{x}", "/{x}", "/openapi.json", "/retrieval/openapi.json",
             "/v1/models", "/v1/models/{x}", "/v1/runs/{x}/resume", "/v1/routing-reports", "/v1/routing-reports/{x}",
             "/v1/routing-reports/{x}/plot"]
query_params = st.dictionaries(
    st.one_of(st.sampled_from(["offset", "limit", "config"]), hostile_text),
    st.one_of(st.integers(min_value=-(2**70), max_value=2**70).map(str), st.sampled_from(["1.5", "NaN", "true", ""]),
              hostile_text),
    max_size=3)


@FUZZ
@given(method=st.sampled_from(["GET", "GET", "HEAD", "DELETE"]), template=st.sampled_from(GET_PATHS),
       segment=st.one_of(hostile_text, st.sampled_from(["..", "%2e%2e", "..%2f..%2fetc%2fpasswd", "%00", "%ed%a0%80",
                                                       "%ff", "index.html", "app.js", "notes", "fzx"])),
       query=query_params)
def test_fuzz_paths_and_query_params(svc, outside_before, method, template, segment, query):
    quoted = segment if re.fullmatch(r"[\w.]*(%[0-9a-fA-F]{2}[\w.]*)+", segment) else path_segment(segment)
    qs = "&".join(f"{path_segment(k)}={path_segment(v)}" for k, v in query.items())
    url = template.replace("{x}", quoted) + (f"?{qs}" if qs else "")
    if method == "DELETE" and not template.startswith("/v1/sources/"):
        url = "/v1/runs/" + quoted + (f"?{qs}" if qs else "")  # DELETE of a run that does not exist
    if template.endswith("/resume"):
        method = "POST"  # resuming a run that does not exist
    r = svc.request(method, url)
    assert r.status_code < 500, f"{method} {url} -> {r.status_code}: {r.text[:300]}"
    healthy(svc)


@FUZZ
@given(headers=st.dictionaries(
    st.sampled_from(["origin", "sec-fetch-site", "host", "x-api-key", "authorization", "content-encoding", "accept",
                     "x-forwarded-host", "content-type"]),
    st.one_of(st.text(st.characters(min_codepoint=32, max_codepoint=255), max_size=40),
              st.sampled_from(["null", "http://localhost", "none", "same-origin", "cross-site", "127.0.0.1",
                               "[::1]", "localhost.:0", "-1", "gzip", "chunked", "Bearer ", "99999999999999999999"])),
    max_size=3))
def test_fuzz_headers(svc, outside_before, headers):
    """Odd Origin/Sec-Fetch-Site/Host/key/encoding headers on a write (a refusal that closes the
    connection is fine: the client opens a new one)."""
    headers = {k: v.strip().encode("latin-1") for k, v in headers.items()}
    body = b'{"question": "Who?", "params": {"source": "bm25"}}'
    try:
        r = svc.post("/v1/ask", content=body, headers={"content-type": "application/json", **headers})
    except (httpx.RemoteProtocolError, httpx.LocalProtocolError):  # h11 refused the header before the app saw it
        event("refused by h11")
    else:
        event(f"status {r.status_code}")
        assert r.status_code < 500, (headers, r.status_code, r.text[:300])
    healthy(svc)


# ------------------------------------------------------------------ retrieval (mounted and standalone)


@FUZZ
@given(body=retrieve_bodies)
def test_fuzz_retrieve(svc, ret, outside_before, body):
    for client, path in ((svc, "/retrieval/retrieve"), (ret, "/retrieve")):
        r = post_json(client, path, body)
        if r.status_code == 200:
            assert set(r.json()["results"]) <= {"bm25"}
    healthy(svc, "/retrieval/health")
    healthy(ret)


@FUZZ
@given(body=searchr1_bodies)
def test_fuzz_searchr1(svc, ret, outside_before, body):
    for client, path in ((svc, "/retrieval/retrieve/searchr1"), (ret, "/retrieve/searchr1")):
        r = post_json(client, path, body)
        if r.status_code == 200:
            assert len(r.json()["result"]) == len(body["queries"])  # one answer per query, in order
    healthy(svc, "/retrieval/health")
    healthy(ret)


@FUZZ
@given(method=st.sampled_from(["GET", "HEAD", "POST", "DELETE", "PUT"]),
       template=st.sampled_from(["/sources", "/health", "/{x}", "/retrieve/{x}", "/docs", "/openapi.json"]),
       segment=hostile_text, query=query_params)
def test_fuzz_retrieval_server_paths(ret, outside_before, method, template, segment, query):
    qs = "&".join(f"{path_segment(k)}={path_segment(v)}" for k, v in query.items())
    url = template.replace("{x}", path_segment(segment)) + (f"?{qs}" if qs else "")
    r = ret.request(method, url)
    assert r.status_code < 500, f"{method} {url} -> {r.status_code}: {r.text[:300]}"
    healthy(ret)


@pytest.fixture(scope="module")
def keyed(sources):
    """The retrieval server with an API key: its writes are refused before any body is read."""
    settings = ServerSettings(api_key="fuzz-key", searchr1=SearchR1Settings(default_source="bm25"))
    with BackgroundServer(create_retrieval_app(sources, settings)) as running, \
            httpx.Client(base_url=running.url, timeout=REQUEST_TIMEOUT_S) as client:
        yield client


@FUZZ
@given(path=st.sampled_from(["/retrieve", "/retrieve/searchr1", "/sources", "/nope"]),
       body=st.one_of(raw_bodies, st.one_of(retrieve_bodies, searchr1_bodies).map(lambda v: to_json(v).encode("ascii"))),
       key=st.one_of(st.none(), st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=20)),
       scheme=st.sampled_from(["X-API-Key", "Bearer", "bearer", "Basic"]))
def test_fuzz_without_the_key_every_write_is_401(keyed, outside_before, path, body, key, scheme):
    headers = {"content-type": "application/json"}
    if key is not None and key != "fuzz-key":
        headers.update({"X-API-Key": key} if scheme == "X-API-Key" else {"Authorization": f"{scheme} {key}"})
    r = keyed.post(path, content=body, headers=headers)
    assert r.status_code == 401, (path, headers, r.status_code, r.text[:200])
    assert keyed.get("/sources").status_code == 401  # reads of data need the key too
    healthy(keyed)


# ------------------------------------------------------------------ coverage of the route table

FUZZED = {
    ("POST", "/v1/ask"), ("POST", "/v1/ask/stream"), ("POST", "/v1/runs"), ("POST", "/v1/sources"),
    ("GET", "/v1/runs"), ("GET", "/v1/runs/{run_id}"), ("GET", "/v1/runs/{run_id}/traces"),
    ("GET", "/v1/runs/{run_id}/report"), ("DELETE", "/v1/runs/{run_id}"), ("GET", "/v1/sources"),
    ("GET", "/v1/sources/{name}"), ("DELETE", "/v1/sources/{name}"), ("GET", "/v1/strategies"), ("GET", "/v1/info"),
    ("GET", "/v1/datasets"), ("GET", "/v1/schema/trace"), ("GET", "/health"), ("GET", "/ready"), ("GET", "/openapi.json"),
    ("GET", "/"),
    ("POST", "/retrieve"), ("POST", "/retrieve/searchr1"), ("GET", "/sources"), ("POST", "/v1/runs/{run_id}/resume"),
    ("POST", "/v1/chat/completions"), ("GET", "/v1/models"), ("GET", "/v1/models/{model}"),
    ("GET", "/v1/routing-reports"), ("GET", "/v1/routing-reports/{name}"), ("GET", "/v1/routing-reports/{name}/plot"),
}
NOT_FUZZED = {"/docs", "/docs/oauth2-redirect", "/redoc"}  # FastAPI's static documentation pages


def routes_of(app) -> set[tuple[str, str]]:
    from starlette.routing import Mount, Route

    found: set[tuple[str, str]] = set()
    for route in app.routes:
        if hasattr(route, "original_router"):  # a router included by FastAPI >= 0.165 (its routes keep their paths)
            found |= routes_of(route.original_router)
            continue
        if isinstance(route, Mount):
            if route.app is not None and hasattr(route.app, "routes"):
                found |= routes_of(route.app)
            continue
        if isinstance(route, Route) and route.path not in NOT_FUZZED:
            found |= {(m, route.path) for m in (route.methods or set()) - {"HEAD"}}
    return found


def test_every_route_is_fuzzed(sources, tmp_path):
    service = create_app(ScriptedModel(answer), sources, ServiceSettings(data_dir=tmp_path))
    retrieval = create_retrieval_app(sources, ServerSettings())
    missing = (routes_of(service) | routes_of(retrieval)) - FUZZED
    assert not missing, f"routes without a fuzz case: {sorted(missing)}"


def test_fuzz_values_reach_the_server_as_sent(svc):
    """The encoder sends what the strategies mean: a lone surrogate as an escape, NaN as NaN,
    an over-long integer verbatim (each refused with its reason)."""
    assert to_json({"q": "\ud800"}) == '{"q": "\\ud800"}'
    assert to_json([math.nan, math.inf]) == "[NaN, Infinity]"
    r = post_json(svc, "/v1/ask", {"question": "\ud800"})
    assert r.status_code == 422 and "surrogate" in r.json()["detail"]
    r = post_json(svc, "/v1/ask", {"question": "Who?", "params": {"k": RawJson("9" * 5_000)}})
    assert r.status_code == 422 and "cannot be read" in r.json()["detail"]
