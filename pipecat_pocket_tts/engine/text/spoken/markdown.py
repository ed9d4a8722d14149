"""Markdown as LLMs write it, turned into sentences a voice can read.

Code blocks are skipped; headings, list items and table rows become sentences of their own
(so the voice pauses after each); links keep their text; emphasis and inline-code marks go.
Lines that are plain prose are left exactly as they are.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

# Inline spans are bounded (300 characters) so unmatched marks cost linear time, not quadratic.
_FENCED = re.compile(r"^[ \t]*(`{3,}+|~{3,}+)[^\n]*\n.*?^[ \t]*\1[ \t]*$\n?", re.M | re.S)
_UNCLOSED_FENCE = re.compile(r"^[ \t]*(?:`{3,}+|~{3,}+).*\Z", re.M | re.S)
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_HORIZONTAL_RULE = re.compile(r"^\s{0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_SETEXT_RULE = re.compile(r"^\s{0,3}=+\s*$")
_LINK_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s+\S+.*$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_QUOTE = re.compile(r"^\s{0,3}(?:>[ \t]?)+")
_TABLE_ROW = re.compile(r"^\s*\|(.*)\|\s*$")
_BULLET = re.compile(r"^\s*[-*+•‣◦▪][ \t]+(?:\[[ xX]\][ \t]+)?(.*)$")
_NUMBERED = re.compile(r"^\s*\d{1,2}[.)][ \t]+(.*)$")

_IMAGE_OR_LINK = re.compile(
    r"!?\[([^\]\n]{0,300})\]\(\s*<?([^()\s>]*(?:\([^()\s]*\))?[^()\s>]*)>?(?:\s+\"[^\"\n]*\")?\s*\)"
)
_REFERENCE_LINK = re.compile(r"\[([^\]\n]{1,300})\]\[[^\]\n]{0,100}\]")
_FOOTNOTE = re.compile(r"\[\^[^\]\n]+\]")
_AUTOLINK = re.compile(r"<(?:mailto:)?((?:https?://|www\.)[^<>\s]+|[^<>\s@]+@[^<>\s]+)>")
_INLINE_CODE = re.compile(r"(`{1,2})(?=[^`\n])(.{1,300}?)(?<=[^`\n])\1")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.{1,300}?)(?<=\S)\1")
_STAR_ITALIC = re.compile(r"(?<![\w*])\*(?=[^\s*])(.{1,300}?)(?<=[^\s*])\*(?![\w*])")
_UNDERSCORE_ITALIC = re.compile(r"(?<![\w_])_(?=[^\s_])(.{1,300}?)(?<=[^\s_])_(?![\w_])")
_STRIKE = re.compile(r"~~(?=\S)(.{1,300}?)(?<=\S)~~")
_HTML_TAG = re.compile(r"</?[A-Za-z][\w-]*(?:\s[^<>]*)?/?>")
_ENTITY = re.compile(r"&(?:[A-Za-z]{2,8}|#\d{1,6}|#x[0-9A-Fa-f]{1,6});")
_TRIGGER = re.compile(r"[*_`#\[|>~<&]|^\s*(?:[-+•‣◦▪]|\d{1,2}[.)])[ \t]|^\s*[-=]{3,}", re.M)
_TERMINAL = ".!?…:;,"
_CLOSERS = "\"'»”’)]"


def _ensure_pause(text: str) -> str:
    """End a heading, list item or table row with a period unless it already has a stop."""
    core = text.rstrip(_CLOSERS + " ")
    if not core or core[-1] in _TERMINAL:
        return text
    return text + "."


def _block_line(text: str) -> str:
    """A heading, list item or table row: a sentence of its own, so its first letter is a
    capital (the line before it then ends its sentence, as the chunker reads line breaks)."""
    text = _ensure_pause(text)
    return text[:1].upper() + text[1:] if text[:1].islower() else text


def _inline(line: str) -> str:
    if "&" in line:
        line = _ENTITY.sub(lambda m: html.unescape(m[0]), line)
    if "[" in line:
        line = _IMAGE_OR_LINK.sub(lambda m: m[1].strip() or m[2], line)
        line = _REFERENCE_LINK.sub(r"\1", line)
        line = _FOOTNOTE.sub("", line)
    if "<" in line:
        line = _AUTOLINK.sub(r"\1", line)
        line = _HTML_TAG.sub(" ", line)
    if "`" in line:
        line = _INLINE_CODE.sub(r"\2", line)
    if "*" in line or "_" in line:
        line = _BOLD.sub(r"\2", line)
        line = _STAR_ITALIC.sub(r"\1", line)
        line = _UNDERSCORE_ITALIC.sub(r"\1", line)
    if "~" in line:
        line = _STRIKE.sub(r"\1", line)
    return line


class Markdown:
    """Markdown into speakable lines; ``month_starts`` keeps "1. Mai ..." from being a list."""

    def __init__(self, month_starts: Callable[[str], bool]) -> None:
        self.month_starts = month_starts

    def __call__(self, text: str, *, continues_line: bool = False) -> str:
        """``continues_line``: ``text`` starts inside a line that earlier text began (a
        streamed sentence), so its first line is no heading, list item, table row or fence."""
        if not _TRIGGER.search(text):
            return text
        lines: list[str] = []
        if continues_line:
            head, newline, text = text.partition("\n")
            lines.append(_inline(head))
            if not newline:
                return lines[0]
        if "```" in text or "~~~" in text:
            text = _FENCED.sub("", text)
            text = _UNCLOSED_FENCE.sub("", text)
        for raw in text.split("\n"):
            line = self._line(raw)
            if line is None:
                continue
            if lines and line != _inline(raw) and lines[-1].strip():
                # A heading, list item or table row starts a block: the line before it ends
                # its sentence (as when that line is read alone, streamed).
                lines[-1] = _ensure_pause(lines[-1].rstrip())
            lines.append(line)
        return "\n".join(lines)

    def _line(self, line: str) -> str | None:
        if _TABLE_RULE.match(line) and "-" in line and ("|" in line or line.count("-") >= 3):
            return None
        if _HORIZONTAL_RULE.match(line) or _SETEXT_RULE.match(line) or _LINK_DEFINITION.match(line):
            return None
        quote = _QUOTE.match(line)
        if quote:
            line = line[quote.end() :]
        m = _HEADING.match(line)
        if m:
            return _block_line(_inline(m[1]).strip())
        m = _TABLE_ROW.match(line)
        if m:
            cells = [_inline(c).strip() for c in re.split(r"(?<!\\)\|", m[1])]
            return _block_line(", ".join(c for c in cells if c))
        m = _BULLET.match(line)
        if m:
            return _block_line(_inline(m[1]).strip())
        m = _NUMBERED.match(line)
        if m and not self.month_starts(m[1]):
            return _block_line(_inline(m[1]).strip())
        return _inline(line)
