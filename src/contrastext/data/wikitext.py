"""Wikitext → plain text, categories and (optionally) link spans.

Parsing uses ``mwparserfromhell`` (a maintained MediaWiki parser with a C tokenizer) rather than regular
expressions: nested templates, tables inside templates and links inside image captions are common in real
dumps and regexes get them wrong. Templates, tables, ``<ref>``s, files/images, comments and interlanguage
links are removed; links keep their visible text; headings keep their title on a line of its own.
"""

from __future__ import annotations

import bisect
import html
import re
from dataclasses import dataclass, field

import mwparserfromhell
from mwparserfromhell.nodes import (Argument, Comment, ExternalLink, Heading, HTMLEntity, Tag, Template,
                                    Text, Wikilink)
from mwparserfromhell.wikicode import Wikicode

# Tags whose contents are not prose (references, formulas, galleries, code, tables...).
_DROPPED_TAGS = frozenset({
    "ref", "references", "table", "gallery", "math", "chem", "ce", "timeline", "imagemap", "score",
    "syntaxhighlight", "source", "pre", "templatedata", "graph", "mapframe", "maplink", "hiero",
    "inputbox", "includeonly", "noinclude", "categorytree", "indicator", "templatestyles", "style",
})
_LINE_BREAK_TAGS = frozenset({"br", "p", "li", "dt", "dd", "hr", "tr"})
_MEDIA_PREFIXES = frozenset({"file", "image", "media"})
_CATEGORY_PREFIX = "category"
_LANGUAGE_PREFIX = re.compile(r"^[a-z]{2,3}(?:-[a-z0-9]+)*$")
_MAGIC_WORD = re.compile(r"__[A-Z]+__")
_STYLE_QUOTES = re.compile(r"'{2,}")
_LEFTOVER_REF = re.compile(r"<ref\b[^>]*/>|<ref\b[^>]*>.*?</ref>", re.IGNORECASE | re.DOTALL)
_LEFTOVER_TAG = re.compile(r"</?[a-zA-Z][a-zA-Z0-9]*\b[^<>]*/?>")
_EMPTY_PARENS = re.compile(r"\(\s*[,;:]?\s*\)")
_LEADING_PUNCT_IN_PARENS = re.compile(r"\(\s*[,;]\s*")
_SPACES = re.compile(r"[ \t\u00a0]+")
_SPACE_AROUND_NEWLINE = re.compile(r" ?\n ?")
_BLANK_LINES = re.compile(r"\n{3,}")
_SPACE_BEFORE_PUNCT = re.compile(r" +(?=[,.;:!?])")


@dataclass
class LinkSpan:
    """A link of the page: its target title and where its visible text is in the plain text."""

    target: str
    start: int
    end: int


@dataclass
class ParsedWikitext:
    text: str
    categories: list[str]
    links: list[LinkSpan] = field(default_factory=list)


def normalize_title(name: str) -> str:
    """A page or category name as MediaWiki stores it: entities decoded, ``_`` → space, first letter upper."""
    name = html.unescape(name).replace("_", " ")
    name = " ".join(name.split())
    return name[:1].upper() + name[1:] if name else name


def normalize_category(name: str) -> str:
    """``[[Category:foo_bar |Sort key]]`` target → ``Foo bar`` (the sort key is already split off)."""
    return normalize_title(name.split("|", 1)[0])


def _split_prefix(title: str) -> tuple[str, str]:
    if ":" not in title:
        return "", title
    prefix, rest = title.split(":", 1)
    return prefix.strip().lower(), rest


class _Builder:
    """Accumulates plain-text pieces and link spans while walking the parse tree."""

    def __init__(self, want_links: bool):
        self.parts: list[str] = []
        self.length = 0
        self.want_links = want_links
        self.links: list[LinkSpan] = []

    def add(self, text: str) -> None:
        if text:
            self.parts.append(text)
            self.length += len(text)

    def walk(self, code: Wikicode | None) -> None:
        if code is None:
            return
        for node in code.nodes:
            if isinstance(node, Text):
                self.add(node.value)
            elif isinstance(node, Wikilink):
                self._link(node)
            elif isinstance(node, Tag):
                self._tag(node)
            elif isinstance(node, Heading):
                self.add("\n")
                self.walk(node.title)
                self.add("\n")
            elif isinstance(node, ExternalLink):
                if node.title is not None:
                    self.walk(node.title)
            elif isinstance(node, HTMLEntity):
                self.add(node.normalize())
            elif isinstance(node, (Template, Argument, Comment)):
                continue

    def _link(self, node: Wikilink) -> None:
        raw_title = str(node.title).strip()
        visible_colon = raw_title.startswith(":")
        title = raw_title.lstrip(":").strip()
        prefix, _ = _split_prefix(title)
        if not visible_colon:
            if prefix in _MEDIA_PREFIXES or prefix == _CATEGORY_PREFIX:
                return
            if node.text is None and _LANGUAGE_PREFIX.match(prefix or "-"):
                return  # interlanguage link: [[de:Titel]]
        start = self.length
        if node.text is not None and str(node.text).strip():
            self.walk(node.text)
        else:
            shown = title
            if node.text is not None:  # pipe trick: [[Foo (bar)|]] shows "Foo"
                shown = re.sub(r"\s*\([^)]*\)\s*$", "", title.split(":", 1)[-1])
            self.add(html.unescape(shown))
        target = normalize_title(title.split("#", 1)[0])
        if self.want_links and target and self.length > start:
            self.links.append(LinkSpan(target, start, self.length))

    def _tag(self, node: Tag) -> None:
        name = str(node.tag).strip().lower()
        if name in _DROPPED_TAGS:
            return
        if name in _LINE_BREAK_TAGS:
            self.add("\n")
        if not node.self_closing and node.contents is not None:
            self.walk(node.contents)


class _Edits:
    """Regex substitutions on the text that keep link offsets pointing at the same characters."""

    def __init__(self, text: str, links: list[LinkSpan]):
        self.text = text
        self.links = links

    def sub(self, pattern: re.Pattern[str], replacement: str) -> None:
        if not self.links:
            self.text = pattern.sub(replacement, self.text)
            return
        starts: list[int] = []
        ends: list[int] = []
        shifts: list[int] = []  # cumulative length change after each match
        pieces: list[str] = []
        last, shift = 0, 0
        for m in pattern.finditer(self.text):
            pieces.append(self.text[last:m.start()])
            pieces.append(replacement)
            shift += len(replacement) - (m.end() - m.start())
            starts.append(m.start())
            ends.append(m.end())
            shifts.append(shift)
            last = m.end()
        if not starts:
            return
        pieces.append(self.text[last:])
        self.text = "".join(pieces)

        def moved(position: int) -> int:
            k = bisect.bisect_right(starts, position) - 1
            if k < 0:
                return position
            before = shifts[k - 1] if k > 0 else 0
            if position < ends[k]:  # inside a replaced match
                return starts[k] + before + min(position - starts[k], len(replacement))
            return position + shifts[k]

        for link in self.links:
            link.start, link.end = moved(link.start), moved(link.end)

    def strip(self) -> None:
        lead = len(self.text) - len(self.text.lstrip())
        self.text = self.text.strip()
        for link in self.links:
            link.start = min(max(link.start - lead, 0), len(self.text))
            link.end = min(max(link.end - lead, 0), len(self.text))


def parse_wikitext(wikitext: str, *, links: bool = False) -> ParsedWikitext:
    """Plain text, normalised categories (in page order, no duplicates) and, if asked, link spans.

    Link spans are ``(target, start, end)`` character offsets of the link's visible text in ``text``.
    """
    # bold/italic quotes stay text (removed below): unbalanced italics otherwise make the parser give up on
    # whole regions, leaving <ref>s and links in the output
    code = mwparserfromhell.parse(wikitext, skip_style_tags=True)
    categories: list[str] = []
    seen: set[str] = set()
    for link in code.filter_wikilinks():
        title = str(link.title).strip()
        if title.startswith(":"):
            continue
        prefix, name = _split_prefix(title)
        if prefix == _CATEGORY_PREFIX:
            category = normalize_category(name)
            if category and category not in seen:
                seen.add(category)
                categories.append(category)

    builder = _Builder(want_links=links)
    builder.walk(code)
    edits = _Edits("".join(builder.parts), builder.links)
    for pattern, replacement in ((_MAGIC_WORD, ""), (_STYLE_QUOTES, ""), (_LEFTOVER_REF, ""), (_LEFTOVER_TAG, ""),
                                 (_EMPTY_PARENS, ""), (_LEADING_PUNCT_IN_PARENS, "("),
                                 (_SPACES, " "), (_SPACE_AROUND_NEWLINE, "\n"), (_BLANK_LINES, "\n\n"),
                                 (_SPACE_BEFORE_PUNCT, "")):
        edits.sub(pattern, replacement)
    edits.strip()
    spans = [s for s in edits.links if s.end > s.start]
    return ParsedWikitext(edits.text, categories, spans)
