"""Slurm's hostlist syntax, expanded without calling ``scontrol show hostnames``.

``n[1-2,4-5]`` -> n1 n2 n4 n5; ``a[01-03]b`` -> a01b a02b a03b (the width of a zero-padded bound is
kept); ``r[1-2]n[1-2]`` -> r1n1 r1n2 r2n1 r2n2 (several brackets: a product, the first varies
slowest, as Slurm writes them); commas outside brackets separate hosts: ``gpu1,n[3-4]``.
"""

from __future__ import annotations

# A job's node list never holds more; a range that would is a typo (n[1-1000000000]), not a list.
MAX_HOSTS = 65536


class HostlistError(ValueError):
    """Not a hostlist Slurm would write."""


def _split_top(text: str) -> list[str]:
    """Split at the commas outside brackets."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "[":
            if depth:
                raise HostlistError(f"hostlist {text!r}: a bracket inside a bracket")
            depth = 1
        elif ch == "]":
            if not depth:
                raise HostlistError(f"hostlist {text!r}: a ']' without its '['")
            depth = 0
        if ch == "," and not depth:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise HostlistError(f"hostlist {text!r}: a '[' without its ']'")
    out.append("".join(cur))
    return out


def _range(spec: str, whole: str) -> list[str]:
    """One bracket's content: ``1-2,4-5``, ``01-03``, ``7``."""
    out: list[str] = []
    for part in spec.split(","):
        part = part.strip()
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise HostlistError(f"hostlist {whole!r}: {part!r} in [{spec}] is not a number or a range N-M")
        if not dash:
            out.append(lo)
            continue
        a, b = int(lo), int(hi)
        if b < a:
            raise HostlistError(f"hostlist {whole!r}: the range {part} runs backwards")
        if b - a + 1 > MAX_HOSTS:
            raise HostlistError(f"hostlist {whole!r}: the range {part} holds more than {MAX_HOSTS} hosts")
        width = len(lo) if lo.startswith("0") and len(lo) > 1 else 0
        out.extend(str(i).zfill(width) for i in range(a, b + 1))
    return out


def _expand_one(item: str, whole: str) -> list[str]:
    names = [""]
    rest = item
    while rest:
        head, bracket, tail = rest.partition("[")
        names = [n + head for n in names]
        if not bracket:
            break
        spec, _, rest = tail.partition("]")
        values = _range(spec, whole)
        if len(names) * len(values) > MAX_HOSTS:
            raise HostlistError(f"hostlist {whole!r} holds more than {MAX_HOSTS} hosts")
        names = [n + v for n in names for v in values]
    return names


def expand(text: str) -> list[str]:
    """The hosts of a hostlist, in order (duplicates kept, as Slurm keeps them)."""
    text = (text or "").strip()
    if not text:
        raise HostlistError("the hostlist is empty")
    out: list[str] = []
    for item in _split_top(text):
        item = item.strip()
        if not item:
            raise HostlistError(f"hostlist {text!r}: an empty name between commas")
        if any(c.isspace() for c in item):
            raise HostlistError(f"hostlist {text!r}: a blank inside {item!r}")
        out.extend(_expand_one(item, text))
        if len(out) > MAX_HOSTS:
            raise HostlistError(f"hostlist {text!r} holds more than {MAX_HOSTS} hosts")
    return out
