"""A griffe extension for the API reference: the docstrings are written for Sphinx and doctest, and
mkdocstrings reads them as Markdown. Sphinx roles (:func:`x`, :class:`x`, ...) become inline code, and
doctest examples (a ``>>>`` line up to the next blank line) become code blocks."""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc|obj):`~?([^`]+)`")
DOCTEST = re.compile(r"^(?P<indent>[ \t]*)>>>.*?(?=\n[ \t]*\n|\Z)", re.DOTALL | re.MULTILINE)


def _fence(match: re.Match[str]) -> str:
    indent = match.group("indent")
    return f"{indent}```pycon\n{match.group(0)}\n{indent}```"


class SphinxDocstrings(griffe.Extension):
    """Rewrites each loaded object's docstring: roles to inline code, doctest examples to code blocks."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = DOCTEST.sub(_fence, ROLE.sub(r"`\1`", obj.docstring.value))
