"""Where the public benchmark files live, and the registry of named datasets over them.

``load_dataset(name)`` returns a :class:`Dataset`: questions plus either one corpus or, for the
multi-source (RealRoute / DeepSieve) sets, named sources each with documents and a profile.

=====================  ===========================================================================
``2wiki``              2WikiMultihopQA as used by HippoRAG 2 / RouteRAG: 1,000 questions, 6,119 passages
``musique``            100 MuSiQue questions, 1,890 passages, precomputed OpenIE (``openie_path``)
``hotpotqa``           100 HotpotQA questions, 994 passages
``hotpotqa-distractor``  held-out: the 500 HotpotQA distractor ``test.jsonl`` questions over the pooled
                       10-paragraph contexts of that split
``hotpotqa-distractor-train``  training: the 600 ``train.jsonl`` + ``dev.jsonl`` questions over one
                       corpus pooled from their contexts (never evaluated on)
``routerag-train``      RouteRAG's released RL training questions (10,000, ``train.parquet``; no passages)
``routerag-train-dev``  its 100 ``dev.parquet`` questions
``law-med``            RealRoute law-med: 400 questions over sources ``law`` and ``med``
``2wiki-train``        training: the 900 2Wiki questions outside the evaluation sample ``2wiki:100`` (same index)
``2wiki-multisource``  the 2Wiki questions over the corpus split into sources ``local`` and ``global``
``r1router-steps``     R1-Router's released trajectories: one question per decompose-and-route step (346)
``r1router-steps-train``  its steps of the 89 training trajectories of the fixed split by trajectory
``r1router-steps-heldout``  its steps of the 30 held-out trajectories (never trained on)
``demo``               bundled: a 2Wiki slice (questions whose answers occur in its passages)
``demo-musique``       bundled: a MuSiQue slice with its precomputed OpenIE records
``tables``             bundled: a small table knowledge base of public facts, with a few questions
``demo-tables``        bundled: two sources, ``text`` (the ``demo`` passages) and ``tables`` (the ``tables``
                       rows), with the questions of both, each with its gold source (text / table routing)
``wtq``                WikiTableQuestions: the 4,344 test questions over tables unseen in training, over all
                       2,108 tables (answers: one list, scored by its evaluator's rules; ``answer_scheme="wtq"``)
``wtq-train``          its 14,152 ``training.tsv`` questions over the same tables (training side)
``2wiki-wtq``          text + tables: ``2wiki:100`` (gold ``text``) and 100 ``wtq`` questions (gold ``tables``)
                       over sources ``text`` and ``tables`` (:mod:`routerag.corpus.wtq_datasets`)
``file:<path>``        a user file (any format of :mod:`routerag.corpus.loaders`) or a folder in
                       HippoRAG layout (``X_corpus.json`` + ``X.json``/``X_questions.jsonl``
                       [+ ``openie_X*.json``]) or RealRoute layout (``X_corpus_local.json``, ...)
=====================  ===========================================================================

The benchmark sets are read from :func:`data_root`; the bundled ones ship inside the package.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from routerag.corpus.loaders import (
    CorpusFormatError,
    LoadReport,
    attach_supporting_docs,
    detect_corpus_format,
    detect_question_format,
    load_corpus,
    load_questions,
)
from routerag.corpus.r1router_split import split_ids, trajectory_id
from routerag.corpus.readers import iter_json
from routerag.corpus.sampling import evenly_spaced
from routerag.corpus.schema import Document, Question
from routerag.errors import RouteragError
from routerag.registry import Registry, UnknownNameError, callables_taking

__all__ = [
    "DATASETS",
    "DataNotFoundError",
    "Dataset",
    "SourceSpec",
    "bundled_data_dir",
    "data_root",
    "dataset_names",
    "load_dataset",
    "load_profiles",
    "register_dataset",
]


class DataNotFoundError(RouteragError, FileNotFoundError):
    pass


def data_root() -> Path:
    """The shared benchmark folder: ``ROUTERAG_DATA_DIR`` if set, else the first ``shared/data``
    folder found walking up from the current directory and from this package's location."""
    env = os.environ.get("ROUTERAG_DATA_DIR")
    if env:
        path = Path(env)
        if not path.is_dir():
            raise DataNotFoundError(f"ROUTERAG_DATA_DIR={env} is not a directory")
        return path
    starts = [Path.cwd().resolve(), Path(__file__).resolve().parent]
    for start in starts:
        for folder in [start, *start.parents]:
            candidate = folder / "shared" / "data"
            if candidate.is_dir():
                return candidate
    raise DataNotFoundError(
        "benchmark data not found: set ROUTERAG_DATA_DIR to the folder holding 2wikimultihopqa/, musique_train100/, ..."
    )


def bundled_data_dir() -> Path:
    """``routerag/data`` inside the installed package (demo slices, tables)."""
    return Path(__file__).resolve().parent.parent / "data"


class SourceSpec(BaseModel):
    """One named knowledge source of a multi-source dataset."""

    name: str
    docs: list[Document]
    profile: str = ""  # the natural-language description a router reads
    role: str = ""  # "local" / "global" in RealRoute's files


class Dataset(BaseModel):
    """Questions plus their knowledge: one ``corpus``, or named ``sources`` (multi-source)."""

    name: str
    questions: list[Question] = Field(default_factory=list)
    corpus: list[Document] = Field(default_factory=list)
    sources: dict[str, SourceSpec] = Field(default_factory=dict)
    openie_path: Path | None = None  # precomputed OpenIE for the corpus (HippoRAG results format)
    reports: list[LoadReport] = Field(default_factory=list)
    description: str = ""
    index_name: str | None = None  # the cached index is shared with this dataset's (the same corpus); None: its own

    @property
    def multisource(self) -> bool:
        return bool(self.sources)

    def documents(self) -> list[Document]:
        """Every document: the corpus, or all sources in order (each tagged with its source)."""
        if not self.sources:
            return list(self.corpus)
        return [doc for spec in self.sources.values() for doc in spec.docs]

    def sample(self, n: int | None) -> "Dataset":
        """The same dataset with ``n`` evenly spaced questions (RealRoute's protocol)."""
        return self.model_copy(update={"questions": evenly_spaced(self.questions, n)})


# ---------------------------------------------------------------------------------------------
# building blocks


def load_profiles(path: str | Path) -> dict[str, str]:
    """A RealRoute profiles file ``{local_profile, global_profile}`` -> ``{"local": ..., "global": ...}``."""
    profiles = {}
    for where, value in iter_json(path):
        key = where.key or ""
        if not isinstance(value, str):
            raise CorpusFormatError(where, "expected a profile string", field=key)
        profiles[key.removesuffix("_profile")] = value
    return profiles


def _need(path: Path) -> Path:
    if not path.exists():
        raise DataNotFoundError(f"{path}: not found (is ROUTERAG_DATA_DIR / shared/data complete?)")
    return path


def _question_file(folder: Path, stem: str) -> Path | None:
    for candidate in (f"{stem}.json", f"{stem}.jsonl", f"{stem}_questions.jsonl", f"{stem}_questions.json"):
        if (folder / candidate).is_file():
            return folder / candidate
    return None


def hipporag_folder(folder: str | Path, name: str, *, stem: str | None = None, qid_prefix: str | None = None) -> Dataset:
    """A folder in HippoRAG layout: ``<stem>_corpus.json`` plus questions ``<stem>.json`` /
    ``<stem>_questions.jsonl`` and, if present, OpenIE results ``openie_<stem>*.json``."""
    folder = _need(Path(folder))
    if stem is None:
        corpora = sorted(p for p in folder.glob("*_corpus.json*") if p.suffix in {".json", ".jsonl"})
        if len(corpora) != 1:
            found = ", ".join(p.name for p in corpora) or "none"
            raise DataNotFoundError(f"{folder}: expected exactly one *_corpus.json file (found: {found}); name the file instead")
        stem = corpora[0].name.split("_corpus.")[0]
    corpus_path = next((p for p in (folder / f"{stem}_corpus.json", folder / f"{stem}_corpus.jsonl") if p.is_file()), None)
    if corpus_path is None:
        raise DataNotFoundError(f"{folder}: no {stem}_corpus.json")
    docs, report = load_corpus(corpus_path)
    qfile = _question_file(folder, stem)
    questions = load_questions(qfile, dataset=qid_prefix or name) if qfile else []
    openie = sorted(folder.glob(f"openie_{stem}*.json"))
    return Dataset(
        name=name, questions=questions, corpus=docs, reports=[report], openie_path=openie[0] if openie else None
    )


def realroute_folder(
    folder: str | Path, prefix: str, name: str, *, source_names: dict[str, str] | None = None, questions: list[Question] | None = None
) -> Dataset:
    """RealRoute / DeepSieve multi-source files ``<prefix>_corpus_{local,global}.json``,
    ``<prefix>_corpus_profiles.json`` and optional questions ``<prefix>_qa.json``.
    ``source_names`` renames roles to source names (``{"local": "law", "global": "med"}``)."""
    folder = _need(Path(folder))
    source_names = source_names or {}
    profiles_path = folder / f"{prefix}_corpus_profiles.json"
    profiles = load_profiles(profiles_path) if profiles_path.is_file() else {}
    sources: dict[str, SourceSpec] = {}
    reports = []
    for role in ("local", "global"):
        path = _need(folder / f"{prefix}_corpus_{role}.json")
        source = source_names.get(role, role)
        docs, report = load_corpus(path, source=source)
        sources[source] = SourceSpec(name=source, docs=docs, profile=profiles.get(role, ""), role=role)
        reports.append(report)
    if questions is None:
        qpath = folder / f"{prefix}_qa.json"
        questions = load_questions(qpath, "realroute", dataset=name) if qpath.is_file() else []
        questions = _link_gold_sources(questions, sources)
    return Dataset(name=name, questions=questions, sources=sources, reports=reports)


def _link_gold_sources(questions: list[Question], sources: dict[str, SourceSpec]) -> list[Question]:
    """Resolve supporting titles against each question's gold source (or all sources)."""
    out = list(questions)
    for gold in {q.gold_source for q in questions}:
        pool = [sources[gold]] if gold in sources else list(sources.values())
        rows = [i for i, q in enumerate(questions) if q.gold_source == gold]
        linked = attach_supporting_docs([questions[i] for i in rows], [d for spec in pool for d in spec.docs])
        for i, q in zip(rows, linked):
            out[i] = q
    return out


def file_dataset(path: str | Path) -> Dataset:
    """A dataset from one user file (corpus or question file) or a folder in HippoRAG / RealRoute layout.

    A question file whose records carry their passages (MuSiQue, HotpotQA, PopQA) yields both the
    questions and a corpus of those passages; a plain question file yields questions only; a
    corpus file yields documents only."""
    path = Path(path).expanduser()
    name = f"file:{path}"
    if path.is_dir():
        local = sorted(path.glob("*_corpus_local.json"))
        if len(local) == 1 and not list(path.glob("*_corpus.json")):
            return realroute_folder(path, local[0].name.removesuffix("_corpus_local.json"), name)
        return hipporag_folder(path, name, qid_prefix=path.name)
    if not path.is_file():
        raise DataNotFoundError(f"{path}: no such file or folder")
    try:
        qformat = detect_question_format(path)
    except CorpusFormatError:
        qformat = None
    questions = load_questions(path, qformat, dataset=path.stem) if qformat else []
    docs: list[Document] = []
    reports = []
    if qformat is None or qformat in {"musique", "hotpotqa", "popqa"}:
        docs, report = load_corpus(path, detect_corpus_format(path))
        reports.append(report)
    return Dataset(name=name, questions=questions, corpus=docs, reports=reports)


# ---------------------------------------------------------------------------------------------
# named datasets


def _2wiki() -> Dataset:
    return hipporag_folder(data_root() / "2wikimultihopqa", "2wiki", stem="2wikimultihopqa")


TWOWIKI_EVAL_SAMPLE = 100
"""The 2Wiki evaluation sample (``2wiki:100``, evenly spaced); ``2wiki-train`` is the rest."""


def _2wiki_train() -> Dataset:
    data = _2wiki()
    held_out = {q.qid for q in data.sample(TWOWIKI_EVAL_SAMPLE).questions}
    return data.model_copy(update={
        "name": "2wiki-train", "index_name": "2wiki", "questions": [q for q in data.questions if q.qid not in held_out],
        "description": f"the {len(data.questions) - len(held_out)} 2Wiki questions outside the evaluation sample "
                       f"2wiki:{TWOWIKI_EVAL_SAMPLE}, over the same corpus and cached index (training questions)",
    })


def _musique() -> Dataset:
    return hipporag_folder(data_root() / "musique_train100", "musique", stem="musique_train")


def _hotpotqa() -> Dataset:
    return hipporag_folder(data_root() / "hotpotqa_train100", "hotpotqa", stem="hotpotqa_train")


HOTPOTQA_DISTRACTOR_SPLITS = {"hotpotqa-distractor": ("test",), "hotpotqa-distractor-train": ("train", "dev")}


def hotpotqa_distractor_folder() -> Path:
    return data_root() / "hotpotqa_distractor1100"


def pooled_question_files(paths: list[Path], name: str) -> Dataset:
    """Questions of several question files that carry their passages (HotpotQA distractor
    contexts, MuSiQue paragraphs), over ONE corpus pooled from all their passages: a paragraph
    with the same title and text (the same ``doc_id``) is kept once across files; the report
    counts the repeats as duplicates. Each question's ``supporting_doc_ids`` point into it."""
    from routerag.corpus.loaders import iter_documents

    questions: list[Question] = []
    docs: list[Document] = []
    seen: set[str] = set()
    report = LoadReport(path=", ".join(str(p) for p in paths), format="")
    for path in paths:
        qformat = detect_question_format(path)
        report.format = qformat
        questions += load_questions(path, qformat, dataset=name)
        for doc in iter_documents(path, qformat, report=report):  # repeats inside a file counted there
            if doc.doc_id in seen:
                report.loaded -= 1
                report.duplicates += 1
                continue
            seen.add(doc.doc_id)
            docs.append(doc)
    return Dataset(name=name, questions=questions, corpus=docs, reports=[report])


def _hotpotqa_distractor(name: str) -> Dataset:
    folder = _need(hotpotqa_distractor_folder())
    paths = [_need(folder / f"{split}.jsonl") for split in HOTPOTQA_DISTRACTOR_SPLITS[name]]
    data = pooled_question_files(paths, name)
    splits = " + ".join(f"{s}.jsonl" for s in HOTPOTQA_DISTRACTOR_SPLITS[name])
    return data.model_copy(update={"description": f"HotpotQA distractor ({splits}, CC BY-SA 4.0) over its pooled contexts"})


def _routerag_train(split: str, name: str) -> Dataset:
    path = _need(data_root() / "routerag_train" / f"{split}.parquet")
    return Dataset(name=name, questions=load_questions(path, "searchr1-parquet", dataset=name),
                   description="RouteRAG's released training questions (HotpotQA train; no corpus: their evidence is "
                   "in no index here — for export-verl and closed-book labels, not for retrieval training)")


def _law_med() -> Dataset:
    return realroute_folder(
        data_root() / "multisource", "law-med", "law-med", source_names={"local": "law", "global": "med"}
    )


def _2wiki_multisource() -> Dataset:
    root = data_root()
    # the same questions (and ids) as "2wiki"; RealRoute's 2Wiki split names no gold source
    questions = load_questions(_need(root / "2wikimultihopqa" / "2wikimultihopqa_questions.jsonl"), "qa", dataset="2wiki")
    return realroute_folder(root / "multisource", "2wikimultihopqa", "2wiki-multisource", questions=questions)


def r1_router_trajectories_path() -> Path:
    """R1-Router's released Step-GRPO trajectories in the shared data (dataset ``r1router-steps``,
    and golden trajectories for training)."""
    return data_root() / "r1router" / "stepgrpo_valid.jsonl"


def _r1router_steps(side: str | None = None) -> Dataset:
    """All decompose-and-route steps, or those of one side of the fixed split by trajectory
    (``r1router-steps-train`` / ``r1router-steps-heldout``, :mod:`routerag.corpus.r1router_split`);
    question ids stay those of ``r1router-steps`` so that runs on a side compare with the whole."""
    path = _need(r1_router_trajectories_path())
    questions = load_questions(path, "r1router-steps", dataset="r1router-steps")
    description = "R1-Router's released trajectories, one question per decompose-and-route step (no corpus)"
    name = "r1router-steps"
    if side is not None:
        keep = set(split_ids("train" if side == "train" else "heldout"))
        questions = [q for q in questions if trajectory_id(int(q.metadata["trajectory"])) in keep]
        name = f"r1router-steps-{side}"
        description += f"; the {side} side of the fixed split by trajectory ({len(keep)} trajectories)"
    return Dataset(name=name, questions=questions, description=description)


def _demo() -> Dataset:
    data = hipporag_folder(bundled_data_dir() / "demo", "demo", stem="2wiki", qid_prefix="demo")
    return data.model_copy(update={"description": "a 2WikiMultihopQA slice (Apache-2.0); see data/demo/ATTRIBUTION.md"})


def _demo_musique() -> Dataset:
    data = hipporag_folder(bundled_data_dir() / "demo", "demo-musique", stem="musique")
    return data.model_copy(update={"description": "a MuSiQue slice (CC BY 4.0) with OpenIE; see data/demo/ATTRIBUTION.md"})


def _tables() -> Dataset:
    from routerag.corpus.tables import bundled_tables_path, load_bundled_tables, table_documents

    docs = [doc for table in load_bundled_tables() for doc in table_documents(table)]
    qpath = bundled_tables_path().with_name("questions.jsonl")
    questions = load_questions(qpath, "qa", dataset="tables") if qpath.is_file() else []
    report = LoadReport(path=str(bundled_tables_path()), format="table-json", loaded=len(docs))
    return Dataset(name="tables", questions=questions, corpus=docs, reports=[report],
                   description="public factual tables; see data/tables/ATTRIBUTION.md")


def _demo_tables() -> Dataset:
    """Text and tables as two named sources (R1-Router's Text / Table Retriever): the ``demo``
    passages as ``text``, the ``tables`` rows as ``tables``; each question's gold source is the one
    its dataset came with, so a run scores routing as well as answers."""
    text, tables = _demo(), _tables()
    questions = [q.model_copy(update={"gold_source": source, "dataset": "demo-tables"})
                 for source, data in (("text", text), ("tables", tables)) for q in data.questions]
    def tagged(docs: list[Document], name: str) -> list[Document]:
        return [d.model_copy(update={"source": name}) for d in docs]

    sources = {"text": SourceSpec(name="text", docs=tagged(text.corpus, "text"),
                                  profile="Wikipedia passages about people, films and places"),
               "tables": SourceSpec(name="tables", docs=tagged(tables.corpus, "tables"),
                                    profile="tables of Olympic hosts, FIFA World Cup finals and other public facts")}
    return Dataset(name="demo-tables", questions=questions, sources=sources, reports=[*text.reports, *tables.reports],
                   description="the demo passages and the bundled tables as two sources; see data/demo and data/tables")


DATASETS: Registry[Callable[[], Dataset]] = Registry("dataset", callables_taking())
for _name, _loader in {
    "2wiki": _2wiki,
    "2wiki-train": _2wiki_train,
    "musique": _musique,
    "hotpotqa": _hotpotqa,
    "hotpotqa-distractor": lambda: _hotpotqa_distractor("hotpotqa-distractor"),
    "hotpotqa-distractor-train": lambda: _hotpotqa_distractor("hotpotqa-distractor-train"),
    "routerag-train": lambda: _routerag_train("train", "routerag-train"),
    "routerag-train-dev": lambda: _routerag_train("dev", "routerag-train-dev"),
    "law-med": _law_med,
    "2wiki-multisource": _2wiki_multisource,
    "r1router-steps": _r1router_steps,
    "r1router-steps-train": lambda: _r1router_steps("train"),
    "r1router-steps-heldout": lambda: _r1router_steps("heldout"),
    "demo": _demo,
    "demo-musique": _demo_musique,
    "tables": _tables,
    "demo-tables": _demo_tables,
}.items():
    DATASETS.register(_name, _loader)
for _name, _path in {  # WikiTableQuestions: routerag.corpus.wtq_datasets, imported on first use
    "wtq": "routerag.corpus.wtq_datasets:wtq_test",
    "wtq-train": "routerag.corpus.wtq_datasets:wtq_train",
    "2wiki-wtq": "routerag.corpus.wtq_datasets:text_tables_mix",
}.items():
    DATASETS.register(_name, _path)


def register_dataset(name: str, loader: Callable[[], Dataset], *, replace: bool = False) -> None:
    """Add a named dataset (a zero-argument function returning a :class:`Dataset`)."""
    DATASETS.register(name, loader, replace=replace)


def dataset_names() -> list[str]:
    return DATASETS.names()


def load_dataset(name: str, *, n_questions: int | None = None) -> Dataset:
    """A named dataset or ``file:<path>``; ``n_questions`` keeps that many evenly spaced questions."""
    if name.startswith("file:"):
        data = file_dataset(name.removeprefix("file:"))
    else:
        try:
            loader = DATASETS.get(name)
        except UnknownNameError as exc:
            raise UnknownNameError(f"{exc}, or file:<path>") from None
        data = loader()
    return data.sample(n_questions) if n_questions is not None else data
