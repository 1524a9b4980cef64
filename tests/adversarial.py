"""Long adversarial lines built from a regular expression's own text, and a runner that times each
search in CPU seconds (the process's own, so a loaded machine does not inflate it).

Python's ``re`` backtracks: a pattern with two adjacent unbounded runs that can match the same
characters (``.+?\\s*$``, ``[\\w.-]+:\\d+`` searched at every start) costs the square of the line, a
nested quantifier (``(?:\\[\\d+\\]\\S+ ?)+``) more. The lines here are made of what such a pattern is
slow on: its literal pieces repeated, long runs of the characters its classes take after its
needle and after each of its examples, then a character that makes the match fail at the end.

Run as a script it prints one JSON line per case that took more than the budget (or was cut by it)
and ``done`` at the end; tests/contract/test_linear.py runs it in a subprocess with a generous timeout.
Used by hand: ``python tests/adversarial.py --budget 0.2`` lists the slowest cases.
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
import signal
import sys
import time

try:
    from re import _parser as sre_parse  # Python 3.11+
except ImportError:  # pragma: no cover
    import sre_parse  # type: ignore[no-redef]

LENGTH = 64 * 1024
_CATEGORY_SAMPLES = {
    "CATEGORY_DIGIT": "7", "CATEGORY_NOT_DIGIT": "a", "CATEGORY_SPACE": " ", "CATEGORY_NOT_SPACE": "a",
    "CATEGORY_WORD": "a", "CATEGORY_NOT_WORD": " ",
}
_GENERIC = " a0.:-/\tZ"


def _walk(tree, pieces: list[str], chars: set[str]) -> None:
    run: list[str] = []

    def flush() -> None:
        if run:
            pieces.append("".join(run))
            run.clear()

    for op, av in tree:
        name = str(op)
        if name == "LITERAL":
            run.append(chr(av))
            if not chr(av).isalnum():
                chars.add(chr(av))
            continue
        flush()
        if name == "NOT_LITERAL":
            chars.add("a" if chr(av) != "a" else "b")
        elif name == "IN":
            for iop, iav in av:
                iname = str(iop)
                if iname == "LITERAL":
                    chars.add(chr(iav))
                elif iname == "RANGE":
                    chars.add(chr(iav[0]))
                    chars.add(chr(iav[1]))
                elif iname == "CATEGORY":
                    chars.add(_CATEGORY_SAMPLES.get(str(iav), "a"))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            _walk(av[2], pieces, chars)
        elif name == "SUBPATTERN":
            _walk(av[-1], pieces, chars)
        elif name == "ATOMIC_GROUP":
            _walk(av, pieces, chars)
        elif name in ("ASSERT", "ASSERT_NOT"):
            _walk(av[1], pieces, chars)
        elif name == "BRANCH":
            for alt in av[1]:
                _walk(alt, pieces, chars)
        elif name == "GROUPREF_EXISTS":
            for alt in av[1:]:
                if alt is not None:
                    _walk(alt, pieces, chars)
    flush()


def _in_class(c: str, items) -> bool:
    hit = False
    for op, av in items:
        name = str(op)
        if name == "LITERAL" and c == chr(av) or name == "RANGE" and av[0] <= ord(c) <= av[1]:
            hit = True
        elif name == "CATEGORY":
            probe = {"CATEGORY_DIGIT": r"\d", "CATEGORY_NOT_DIGIT": r"\D", "CATEGORY_SPACE": r"\s",
                     "CATEGORY_NOT_SPACE": r"\S", "CATEGORY_WORD": r"\w", "CATEGORY_NOT_WORD": r"\W"}.get(str(av))
            hit = hit or (probe is not None and re.fullmatch(probe, c) is not None)
    negate = any(str(op) == "NEGATE" for op, _ in items)
    return hit != negate


def _sample(tree) -> str:
    """A short string the (sub)pattern matches: the fewest repeats, the first alternative."""
    out: list[str] = []
    for op, av in tree:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(av))
        elif name == "NOT_LITERAL":
            out.append("a" if chr(av) != "a" else "b")
        elif name == "ANY":
            out.append("a")
        elif name == "IN":
            own = [chr(x) for op, x in av if str(op) == "LITERAL"] + [chr(x[0]) for op, x in av if str(op) == "RANGE"]
            out.append(next((c for c in [*own, *"a0 _.:-/Z!"] if _in_class(c, av)), ""))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            out.append(_sample(av[2]) * max(1, av[0]) if av[0] else "")
        elif name == "SUBPATTERN":
            out.append(_sample(av[-1]))
        elif name == "ATOMIC_GROUP":
            out.append(_sample(av))
        elif name == "BRANCH":
            out.append(_sample(av[1][0]))
    return "".join(out)


def sample(regex: str) -> str | None:
    """A string that ``regex`` matches, made from its text; None when the simple walk misses."""
    try:
        text = _sample(sre_parse.parse(regex))
    except Exception:  # noqa: BLE001 - a construct the walk does not know
        return None
    return text if re.search(regex, text) else None


def parts(regex: str) -> tuple[list[str], list[str]]:
    """The literal pieces of ``regex`` and a character from each of its classes (plus a few generic ones)."""
    pieces: list[str] = []
    chars: set[str] = set(_GENERIC)
    _walk(sre_parse.parse(regex), pieces, chars)
    return sorted(set(pieces)), sorted(chars)


def _fill(unit: str, n: int) -> str:
    return (unit * (n // max(1, len(unit)) + 1))[:n]


def lines(regex: str, needle: str = "", examples: tuple[str, ...] = (), n: int = LENGTH) -> list[tuple[str, str]]:
    """(label, line) pairs of about ``n`` characters built from ``regex``'s own text."""
    pieces, chars = parts(regex)
    made = sample(regex)
    examples = (*examples[:2], made) if made else examples[:2]
    heads = [("needle", needle)] if needle else []
    heads += [(f"example{i}", ex) for i, ex in enumerate(examples)]
    heads += [(f"piece{i}", p) for i, p in enumerate(pieces) if len(p) >= 3][:3]
    out: list[tuple[str, str]] = []
    for i, p in enumerate(pieces):
        if p.strip():
            out.append((f"piece{i}*", _fill(p, n)))
            out.append((f"(piece{i}+' ')*", _fill(p + " ", n)))
    for label, head in heads:
        out.append((f"{label}*", _fill(head + " ", n)))
        for c in chars:
            end = "!" if c != "!" else "?"
            out.append((f"{label}+{c!r}*+{end!r}", head + " " + c * n + end))
    for i, ex in enumerate(examples):
        for c in (" ", "a", "0"):
            out.append((f"example{i}+{c!r}*", ex + c * n))
    return out


# The modules whose compiled patterns run on every line the scan looks at (or every line a tool
# output parser reads): all their module-level patterns are checked, so a new one is covered.
LINE_MODULES = ("rdmadoctor.logs.prefix", "rdmadoctor.logs.nccl", "rdmadoctor.logs.scan", "rdmadoctor.logs.reader",
                "rdmadoctor.parsers.ncclras", "rdmadoctor.supervise.hang")


def cases() -> list[tuple[str, re.Pattern, str, tuple[str, ...]]]:
    """(name, compiled, needle, examples) for every knowledge-base row and every line pattern."""
    import importlib

    from rdmadoctor.logs import kb

    out = [(p.id, re.compile(p.regex), p.needle, tuple(p.examples)) for p in kb.patterns()]
    for modname in LINE_MODULES:
        mod = importlib.import_module(modname)
        for attr, value in sorted(vars(mod).items()):
            if isinstance(value, re.Pattern) and isinstance(value.pattern, str):
                out.append((f"{modname}.{attr}", value, "", ()))
            elif isinstance(value, re.Pattern):  # a bytes pattern: its text, as latin-1
                out.append((f"{modname}.{attr}", value, "", ()))
    from rdmadoctor.parsers import common

    out.append(("parsers.common.PROMPT", re.compile(common.PROMPT), "", ()))
    from rdmadoctor.logs import scan

    for h, kind in scan._HEADERS:
        out.append((f"scan._HEADERS[{kind}]", re.compile(h), "", ()))
    return out


class _Cut(Exception):
    pass


class OverBudget(Exception):
    pass


# How often (wall-clock seconds) a CPU budget is checked. The budget itself is in CPU seconds.
_POLL_S = 0.05


@contextlib.contextmanager
def _cpu_guard(seconds: float, exc: type[Exception], message: str = ""):
    """Raise ``exc`` once this process has spent ``seconds`` of CPU inside the block.

    Checked by a wall-clock timer (ITIMER_REAL, every ``_POLL_S``) whose handler reads the CPU
    clock, never by a CPU-time timer: while an ITIMER_VIRTUAL or ITIMER_PROF is armed, Linux reads
    the process's CPU clock from its timer accounting, a scheduler tick (4 ms here) behind, so a
    search of 10 ms read as 4, 8 or 16 ms and the ratio of two such readings was the tick's (the
    flake of 2026-11-28). ``re`` checks for signals while it matches, so a runaway search is cut
    too. Main thread only (a signal handler)."""
    start = time.process_time()

    def check(*_a: object) -> None:
        if time.process_time() - start > seconds:
            raise exc(message or f"more than {seconds} s of CPU")

    old = signal.signal(signal.SIGALRM, check)
    signal.setitimer(signal.ITIMER_REAL, _POLL_S, _POLL_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def cpu_budget(seconds: float):
    """Raise OverBudget once this process has spent ``seconds`` of CPU inside the block (a runaway
    search is stopped too). CPU time, not wall clock: a loaded machine does not advance it."""
    return _cpu_guard(seconds, OverBudget)


SMALL = 16 * 1024
RATIO = 8.0  # time at LENGTH over time at SMALL: about 4 for a linear search, 16 for a quadratic one
# CPU seconds: a search of LENGTH faster than this is linear whatever its ratio says. A linear search
# of 64 KiB takes a few milliseconds and the quadratic rows found took 0.4 s.
FLOOR = 0.05
# Each time of a ratio is the best of RUNS searches (a preemption, a cold cache or a page fault only
# ever adds time, so the least is the search's own); a ratio over RATIO is measured again, with
# RETRY_RUNS each, and only a case over it both times is slow. Sound: a linear case is about 4x, so
# noise has to double one reading to pass 8x, and twice in a row independently; a quadratic case
# is about 16x every time (its cost is the search's, not the noise's), so it fails both.
RUNS = 3
RETRY_RUNS = 5


def _timed(rx: re.Pattern, subject, budget: float) -> tuple[float, bool]:
    """CPU seconds of one search (cut at twice ``budget``), and whether it was cut."""
    collecting = gc.isenabled()
    gc.disable()  # a collection inside one search is not the pattern's time
    cut = False
    t0 = time.process_time()
    try:
        with _cpu_guard(budget * 2, _Cut):
            rx.search(subject)
    except _Cut:
        cut = True
    finally:
        spent = time.process_time() - t0
        if collecting:
            gc.enable()
    return spent, cut


def ratio(rx: re.Pattern, large, small, budget: float, runs: int = RUNS, first: float | None = None) -> tuple[float, float, float]:
    """(best time on ``large``, best time on ``small``, their ratio), the best of ``runs`` each."""
    bigs = [] if first is None else [first]  # a time on ``large`` already taken
    big = min(bigs + [_timed(rx, large, budget)[0] for _ in range(runs - len(bigs))])
    little = min(_timed(rx, small, budget)[0] for _ in range(runs))
    return big, little, big / max(little, FLOOR / 16)


def run(budget: float, only: str | None = None, n: int = LENGTH, max_slow: int = 0, verbose: bool = False) -> list[dict]:
    """Every case searched at ``n`` and at a quarter of it, with a CPU-time budget each; the ones over
    the budget (or cut by it) or whose time grows faster than the line (``RATIO``, on two
    measurements), the first ``max_slow`` of them when it is set. The ratio holds on any machine: a
    loaded one slows both. ``verbose`` prints every ratio measured, slow or not."""
    slow: list[dict] = []
    for name, rx, needle, examples in cases():
        if only and only not in name:
            continue
        text_pattern = isinstance(rx.pattern, str)
        source = rx.pattern if text_pattern else rx.pattern.decode("latin-1")
        small = [line for _, line in lines(source, needle, examples, n // 4)]  # the same cases, in the same order
        for k, (label, line) in enumerate(lines(source, needle, examples, n)):
            def subject(text: str):
                return text if text_pattern else text.encode("latin-1", "replace")

            spent, cut = _timed(rx, subject(line), budget)
            measured: list[float] = []
            if not cut and spent > FLOOR and k < len(small):
                spent, little, r = ratio(rx, subject(line), subject(small[k]), budget, RUNS, first=spent)
                measured.append(round(r, 2))
                if r > RATIO:  # again, before calling it slow: see RETRY_RUNS
                    spent, little, r = ratio(rx, subject(line), subject(small[k]), budget, RETRY_RUNS)
                    measured.append(round(r, 2))
                if verbose:
                    print(json.dumps({"ratio": measured, "pattern": name, "line": label, "cpu_s": round(spent, 4),
                                      "small_s": round(little, 4)}), file=sys.stderr, flush=True)
            if cut or spent > budget or (measured and spent > FLOOR and min(measured) > RATIO):
                slow.append({"pattern": name, "line": label, "cpu_s": round(spent, 3), "cut": cut,
                             "ratio": measured or None})
                print(json.dumps(slow[-1]), flush=True)
                if max_slow and len(slow) >= max_slow:
                    print("stopped", flush=True)
                    return slow
    print("done", flush=True)
    return slow


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=float, default=1.0, help="CPU seconds one search may take")
    ap.add_argument("--only", default=None, help="patterns whose name holds this")
    ap.add_argument("--length", type=int, default=LENGTH)
    ap.add_argument("--max-slow", type=int, default=0, help="stop after this many slow cases")
    ap.add_argument("--verbose", action="store_true", help="print every ratio measured (on stderr)")
    a = ap.parse_args()
    sys.exit(1 if run(a.budget, a.only, a.length, a.max_slow, a.verbose) else 0)
