"""URLs and e-mail addresses in a form a voice can say: "github dot com slash kyutai labs"."""

from __future__ import annotations

import re

from .language import SpokenLanguage

_TLDS = (
    "com|org|net|io|ai|dev|app|edu|gov|co|uk|de|fr|es|it|pt|nl|eu|ch|be|at|br|info|xyz|tech|"
    "cloud|ly|me|tv|us|ca"
)
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}(?![\w@])")
_URL = re.compile(
    r"(?<![\w@])(?:(?:https?|ftp)://|www\.)[^\s<>()\[\]{}\"'`]+"
    rf"|(?<![\w@./-])(?:[A-Za-z0-9-]+\.)+(?:{_TLDS})(?![\w-])(?::\d+)?(?:/[^\s<>()\[\]{{}}\"'`]*)?",
    re.IGNORECASE,
)
_SCHEME = re.compile(r"^(?:[a-z]+://)?(?:www\.)?", re.IGNORECASE)
_TRAILING = ".,;:!?"
_WORD_PARTS = re.compile(r"(\d+|[^\W\d_]+)")


class WebAddresses:
    """Rewrites e-mail addresses and URLs; the scheme, "www.", queries and fragments are dropped."""

    def __init__(self, lang: SpokenLanguage) -> None:
        self.lang = lang
        w = lang.words
        self._symbols = {".": w.dot, "-": w.dash, "_": w.underscore, "+": w.plus, "/": w.slash}

    def __call__(self, text: str) -> str:
        if "@" in text:
            text = _EMAIL.sub(self._email, text)
        if "." in text:
            text = _URL.sub(self._url, text)
        return text

    def _label(self, label: str, separators: str) -> str:
        """One piece of an address: letters kept, digits by name, separators said."""
        out = []
        for piece in re.split(rf"([{re.escape(separators)}])", label):
            if not piece:
                continue
            if piece in self._symbols and piece in separators:
                out.append(self._symbols[piece])
                continue
            for part in _WORD_PARTS.findall(piece):
                out.append(self.lang.digits(part) if part.isdigit() else part)
        return " ".join(out)

    def _email(self, match: re.Match[str]) -> str:
        local, _, domain = match[0].partition("@")
        return f"{self._label(local, '._-+')} {self.lang.words.at} {self._label(domain, '.-')}"

    def _url(self, match: re.Match[str]) -> str:
        url = match[0]
        stripped = url.rstrip(_TRAILING)
        trailing = url[len(stripped) :]
        body = _SCHEME.sub("", stripped)
        body = re.split(r"[?#]", body, maxsplit=1)[0].rstrip("/")
        host, _, path = body.partition("/")
        host = host.split(":", 1)[0]
        words = [self._label(host, ".-")]
        for segment in path.split("/"):
            if segment:
                words.append(self.lang.words.slash)
                words.append(self._label(segment, ".-_"))
        return " ".join(w for w in words if w) + trailing
