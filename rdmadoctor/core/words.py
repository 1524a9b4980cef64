"""Counted nouns in messages: "1 pattern", "2 patterns", never "1 patterns" or "pattern(s)"."""

from __future__ import annotations


def count(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word``, singular for exactly one; ``many`` is the plural where adding "s" is
    wrong (``count(n, "entry", "entries")``)."""
    return f"{n} {word}" if n == 1 else f"{n} {many or word + 's'}"


def listing(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1] if names else ""
