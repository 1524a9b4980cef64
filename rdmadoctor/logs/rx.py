"""Regular-expression helpers the log readers share."""

from __future__ import annotations

import re

_ESCAPED: dict[str, str] = {}  # a character -> re.escape of it


def trie(words: list[str]) -> str:
    """One regex for many literals, shaped as a trie so a position tries one branch per character."""
    root: dict = {}
    for w in words:
        d = root
        for ch in w:
            d = d.setdefault(ch, {})
        d[""] = {}

    def esc(ch: str) -> str:
        e = _ESCAPED.get(ch)
        if e is None:
            e = _ESCAPED[ch] = re.escape(ch)
        return e

    def emit(d: dict) -> str:
        # A run of nodes with one child each and no word ending there is its characters, in a loop
        # (every long literal is mostly such a run: the tables of the scan are made at each start).
        head = []
        while len(d) == 1 and "" not in d:
            (ch, d), = d.items()
            head.append(esc(ch))
        if len(d) == 1:  # a word ends here, and nothing longer
            return "".join(head)
        alts = [esc(ch) + emit(d[ch]) for ch in sorted(k for k in d if k)]
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return "".join(head) + (f"(?:{body})?" if "" in d else body)

    return emit(root)
