"""Regular-expression helpers the log readers share."""

from __future__ import annotations

import re


def trie(words: list[str]) -> str:
    """One regex for many literals, shaped as a trie so a position tries one branch per character."""
    root: dict = {}
    for w in words:
        d = root
        for ch in w:
            d = d.setdefault(ch, {})
        d[""] = {}

    def emit(d: dict) -> str:
        if set(d) == {""}:
            return ""
        alts = [re.escape(ch) + emit(d[ch]) for ch in sorted(k for k in d if k)]
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if "" in d else body

    return emit(root)
