"""The HTML pieces every part of the report page uses: numbers tagged with their place in report.json.

Every number shown carries ``data-key`` (a JSON pointer into report.json) and ``data-value`` (the
JSON value), so the page and the JSON can be checked against each other.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from typing import Any

RULE_PREFIX = "__rule_"
"""Name prefix of a rule group's compound attribute (:mod:`privsyn_spark.schema.synthesis_view`)."""


def format_number(value: int | float) -> str:
    """How the HTML shows a number: thousands separators for integers and for floats of 1,000 or
    more (rounded to a whole number: noisy totals, losses), 4 significant digits otherwise."""
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def attr_label(name: str) -> str:
    """An attribute as people read it: a rule group's compound ``__rule_a__b`` as ``a + b``."""
    if name.startswith(RULE_PREFIX):
        return " + ".join(m for m in name[len(RULE_PREFIX):].rstrip("_").split("__") if m)
    return name


def pointer(path: str, key: object) -> str:
    """``path`` extended by ``key`` (JSON pointer escaping, RFC 6901)."""
    return f"{path}/{str(key).replace('~', '~0').replace('/', '~1')}"


def num(value: int | float, path: str) -> str:
    """A number tagged with its JSON pointer and JSON value."""
    return (f'<span class="num" data-key="{html.escape(path)}" data-value="{html.escape(json.dumps(value))}">'
            f"{format_number(value)}</span>")


def at(report: Mapping, *keys: Any) -> Any:
    """``(value, pointer)`` of a nested key (value None when missing)."""
    node: Any = report
    path = ""
    for key in keys:
        node = node.get(key) if isinstance(node, Mapping) else (node[key] if isinstance(node, list)
                                                                and isinstance(key, int) and key < len(node) else None)
        path = pointer(path, key)
    return node, path


def n(report: Mapping, *keys: Any) -> str:
    """The number at ``keys`` tagged (a dash when it is missing or not a number)."""
    value, path = at(report, *keys)
    return num(value, path) if isinstance(value, (int, float)) and not isinstance(value, bool) else "&mdash;"
