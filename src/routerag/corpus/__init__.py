"""Document and question schemas and loaders for the public corpus formats."""

from routerag.corpus.datasets import Dataset, SourceSpec, load_dataset
from routerag.corpus.loaders import CorpusFormatError, LoadReport, load_corpus, load_questions
from routerag.corpus.sampling import evenly_spaced
from routerag.corpus.schema import Document, Question, SubQuestion, doc_id_for

__all__ = [
    "CorpusFormatError",
    "Dataset",
    "Document",
    "LoadReport",
    "Question",
    "SourceSpec",
    "SubQuestion",
    "doc_id_for",
    "evenly_spaced",
    "load_corpus",
    "load_dataset",
    "load_questions",
]
