"""The root of routerag's own exceptions. Every error routerag raises on purpose — bad
configuration, an unknown registry name, invalid strategy parameters, a model that cannot be
built, a run directory that does not match — derives from :class:`RouteragError` (and, where
callers already catch it, from the builtin it always was: ``ValueError``, ``KeyError`` ...), so the
CLI catches this one type and prints its message; anything else is a bug and keeps its traceback.

This module imports nothing, so every layer may use it."""

from __future__ import annotations


class RouteragError(Exception):
    """Something routerag refuses, with a message that says what and why."""
