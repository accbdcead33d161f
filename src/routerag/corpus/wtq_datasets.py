"""The WikiTableQuestions datasets (registered lazily in :mod:`routerag.corpus.datasets`):

=============  =================================================================================
``wtq``        the 4,344 questions over tables never seen in training (``pristine-unseen-tables``)
``wtq-train``  the 14,152 ``training.tsv`` questions (training side)
``2wiki-wtq``  text + tables: the 2Wiki evaluation sample ``2wiki:100`` (gold source ``text``) and
               as many evenly spaced ``wtq`` questions (gold source ``tables``), over two named
               sources, ``text`` (the 2Wiki corpus) and ``tables`` (every WikiTableQuestions table)
=============  =================================================================================

``wtq`` and ``wtq-train`` share one corpus, every table laid out by :class:`TableLayout` (whole
tables, a long one cut into row groups of at most 2,000 characters: ``DEFAULT_LAYOUT``), and one
cached index. :func:`wtq_dataset` and :func:`text_tables_mix` take
another layout from Python.
"""

from __future__ import annotations

from pathlib import Path

from routerag.corpus.datasets import (
    TWOWIKI_EVAL_SAMPLE,
    DataNotFoundError,
    Dataset,
    LoadReport,
    SourceSpec,
    data_root,
    load_dataset,
)
from routerag.corpus.sampling import evenly_spaced
from routerag.corpus.schema import Document, Question
from routerag.corpus.wikitablequestions import (
    DEFAULT_LAYOUT,
    WTQ_FOLDER,
    Split,
    TableLayout,
    load_tables,
    read_split,
    table_corpus,
    to_questions,
)

NAMES: dict[str, Split] = {"wtq": "test", "wtq-train": "train"}
MIX_NAME = "2wiki-wtq"
MIX_PER_SOURCE = TWOWIKI_EVAL_SAMPLE
"""Questions of each gold source in ``2wiki-wtq``: the 2Wiki evaluation sample (never trained on)
and as many WikiTableQuestions test questions."""
TEXT_PROFILE = "Wikipedia passages about people, films, places and their relations (biographies, births, directors)"
TABLES_PROFILE = ("Wikipedia tables: sports results and records, elections, discographies, rankings, lists of "
                  "episodes, buildings and events, with counts, years and positions per row")


def wtq_folder() -> Path:
    """``<data_root>/wikitablequestions`` (:class:`DataNotFoundError` when it is not there)."""
    folder = data_root() / WTQ_FOLDER
    if not (folder / "csv").is_dir():
        raise DataNotFoundError(f"{folder}: not found (is ROUTERAG_DATA_DIR / shared/data complete?)")
    return folder


def _layout_note(layout: TableLayout) -> str:
    rows = "whole tables" if layout.rows_per_doc is None else f"groups of {layout.rows_per_doc} rows"
    cut = f" of at most {layout.max_chars} characters" if layout.max_chars else ""
    return f"{rows}{cut}, {layout.style} style"


def wtq_dataset(split: Split = "test", layout: TableLayout = DEFAULT_LAYOUT, *, name: str | None = None) -> Dataset:
    """A WikiTableQuestions split over every table of the release (the open-domain setting: the
    question's table must be found among all 2,108)."""
    folder = wtq_folder()
    name = name or next(n for n, s in NAMES.items() if s == split)
    corpus = table_corpus(load_tables(folder), layout)
    questions = to_questions(read_split(folder, split), corpus, dataset=name)
    report = LoadReport(path=str(folder / "csv"), format="wikitablequestions", loaded=len(corpus.docs))
    return Dataset(name=name, questions=questions, corpus=corpus.docs, reports=[report], index_name="wtq",
                   description=f"WikiTableQuestions {split} questions (CC BY-SA 4.0) over its {len(corpus.doc_ids)} "
                               f"tables ({_layout_note(layout)}); answers scored by its evaluator's rules")


def wtq_test() -> Dataset:
    return wtq_dataset("test")


def wtq_train() -> Dataset:
    return wtq_dataset("train")


def _tagged(docs: list[Document], source: str) -> list[Document]:
    return [d.model_copy(update={"source": source}) for d in docs]


def _labelled(questions: list[Question], source: str) -> list[Question]:
    return [q.model_copy(update={"gold_source": source, "dataset": MIX_NAME, "metadata": {**q.metadata, "type": source}})
            for q in questions]


def text_tables_mix(layout: TableLayout = DEFAULT_LAYOUT, per_source: int = MIX_PER_SOURCE) -> Dataset:
    """Text and tables as two named sources, ``text`` (2Wiki's passages) and ``tables`` (every
    WikiTableQuestions table), with ``per_source`` questions of each: 2Wiki's evaluation sample
    ``2wiki:100`` (evenly spaced within it when fewer), then as many evenly spaced ``wtq`` test
    questions. Each question carries
    its gold source (and it as its ``type``, for the per-type breakdown); the two halves are
    equal, so every evenly spaced ``--limit`` stays balanced."""
    if not 1 <= per_source <= TWOWIKI_EVAL_SAMPLE:
        raise ValueError(f"per_source must be 1 to {TWOWIKI_EVAL_SAMPLE}: the text questions come from the 2Wiki "
                         f"evaluation sample (the other 2Wiki questions are training questions)")
    text = load_dataset("2wiki")
    tables = wtq_dataset("test", layout)
    questions = [*_labelled(evenly_spaced(text.sample(TWOWIKI_EVAL_SAMPLE).questions, per_source), "text"),
                 *_labelled(evenly_spaced(tables.questions, per_source), "tables")]
    sources = {"text": SourceSpec(name="text", docs=_tagged(text.corpus, "text"), profile=TEXT_PROFILE),
               "tables": SourceSpec(name="tables", docs=_tagged(tables.corpus, "tables"), profile=TABLES_PROFILE)}
    return Dataset(name=MIX_NAME, questions=questions, sources=sources, reports=[*text.reports, *tables.reports],
                   description=f"text + tables: {per_source} 2Wiki questions (the 2wiki:{TWOWIKI_EVAL_SAMPLE} sample) "
                               f"and {per_source} WikiTableQuestions test questions, each with its gold source; sources "
                               f"text (2Wiki passages) and tables ({_layout_note(layout)})")
