"""A griffe extension for the API reference: Sphinx roles in the docstrings (:func:`x`, :class:`x`, ...)
rendered as inline code, since mkdocstrings reads the docstrings as Markdown."""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc|obj):`~?([^`]+)`")


class RstRoles(griffe.Extension):
    """Rewrites every ``:role:`target``` of a loaded object's docstring to ```target```."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(r"`\1`", obj.docstring.value)
