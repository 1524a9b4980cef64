"""Counted nouns in messages: "1 pattern", "2 patterns", never "1 patterns" or "pattern(s)"."""

from __future__ import annotations


def count(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word``, singular for exactly one; ``many`` is the plural where adding "s" is
    wrong (``count(n, "entry", "entries")``)."""
    return f"{n} {word}" if n == 1 else f"{n} {many or word + 's'}"


def listing(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1] if names else ""


# C0 controls (newline and tab too: a name is one line), DEL, C1, the bidirectional controls
# (CVE-2021-42574, "Trojan Source") and the Unicode line and paragraph separators.
_UNPRINTABLE = None


def printable(text: object, limit: int = 512) -> str:
    """``text`` as one line safe to print: every control character (an escape sequence, a newline
    that would forge a line of its own, a bidi override) shown as ``\\x1b`` / ``\\u202e``, never
    obeyed; cut to ``limit`` characters."""
    global _UNPRINTABLE
    if _UNPRINTABLE is None:
        import re

        _UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
    s = text if isinstance(text, str) else str(text)
    if len(s) > limit:
        s = s[:limit] + "..."
    return _UNPRINTABLE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) <= 0xFF else f"\\u{ord(m.group()):04x}", s)
