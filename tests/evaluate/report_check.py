"""Checks shared by the report tests: strict HTML nesting, embedded PNGs, numbers equal to report.json."""

from __future__ import annotations

import base64
import json
from html.parser import HTMLParser

from privsyn_spark.evaluate.report import is_plotted
from privsyn_spark.evaluate.report_html import format_number

VOID = {"meta", "img", "br", "hr", "link", "input", "col", "area", "base", "source", "wbr"}


class StrictParser(HTMLParser):
    """Collects images and numbers, and fails on a closing tag that does not match the open one."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.images: list[str] = []
        self.numbers: list[dict] = []
        self.text: list[str] = []
        self._number: dict | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs["src"])
        if tag not in VOID:
            self.stack.append(tag)
        if "data-key" in attrs:
            self._number = {"key": attrs["data-key"], "value": attrs["data-value"], "text": ""}
            self.numbers.append(self._number)

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1] if self.stack else None}>"
        self.stack.pop()
        if tag == "span":
            self._number = None

    def handle_data(self, data):
        self.text.append(data)
        if self._number is not None:
            self._number["text"] += data


def resolve(doc, pointer: str):
    """Follow a JSON pointer (RFC 6901) into ``doc``."""
    for part in pointer.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def numeric_leaves(doc, pointer: str = ""):
    """Pointers of every number in ``doc`` outside the plotted parts."""
    if is_plotted(pointer):
        return
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from numeric_leaves(v, f"{pointer}/{k.replace('~', '~0').replace('/', '~1')}")
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from numeric_leaves(v, f"{pointer}/{i}")
    elif isinstance(doc, (int, float)) and not isinstance(doc, bool):
        yield pointer


def check_report(json_path, html_path, min_images: int) -> tuple[dict, StrictParser]:
    """Assert the HTML is well formed, holds PNG data URIs and shows exactly the JSON's numbers."""
    report = json.loads(json_path.read_text())
    page = html_path.read_text()
    assert page.startswith("<!DOCTYPE html>")
    parser = StrictParser()
    parser.feed(page)
    parser.close()
    assert parser.stack == [], f"unclosed tags: {parser.stack}"
    assert len(parser.images) >= min_images
    for src in parser.images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    for number in parser.numbers:
        value = resolve(report, number["key"])
        assert json.loads(number["value"]) == value, number
        assert number["text"] == format_number(value), number
    shown = {n["key"] for n in parser.numbers}
    missing = set(numeric_leaves(report)) - shown
    assert not missing, f"numbers of report.json missing from report.html: {sorted(missing)[:10]}"
    text = " ".join(parser.text)
    assert "not differentially private" in text.lower()
    return report, parser
