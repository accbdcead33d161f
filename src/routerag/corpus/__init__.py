"""Document and question schemas and loaders for the public corpus formats."""

from routerag.corpus.schema import Document, Question, SubQuestion, doc_id_for

__all__ = ["Document", "Question", "SubQuestion", "doc_id_for"]
