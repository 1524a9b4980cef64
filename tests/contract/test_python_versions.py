"""The Python versions pyproject.toml claims (3.10 to 3.13, issue 32 item 1).

Possessive quantifiers (``\\s*+``, ``[\\w.-]{1,255}+``) and atomic groups (``(?>...)``) came with
Python 3.11: on 3.10 ``re`` refuses them ("multiple repeat", a check's internal error and a
``diagnose`` traceback), and Debian 12's 3.11.2 misread one (an early-3.11 bug, fixed in 3.11.3).
Every pattern of the package is written without them (a greedy repeat followed by what is not in
its set, or ``X*(?!X)`` where a later repeat could take the same characters): these tests find a
new one wherever it is written, the compiled patterns alive after importing every module, the
knowledge base's rows, and every string literal of the package that parses as a pattern.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import sys
from pathlib import Path

import pytest

try:
    from re import _parser as sre_parse  # Python 3.11+
except ImportError:  # pragma: no cover - 3.10
    import sre_parse  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [*sorted((ROOT / "rdmadoctor").rglob("*.py")), *sorted((ROOT / "checks").rglob("*.py"))]
_NEW_SYNTAX = {"POSSESSIVE_REPEAT", "ATOMIC_GROUP"}


def _walk(tree) -> str | None:  # tree: sre_parse's SubPattern
    for op, av in tree:
        name = str(op)
        if name in _NEW_SYNTAX:
            return name.lower().replace("_", " ")
        subs: list = []
        if name in ("MAX_REPEAT", "MIN_REPEAT"):
            subs = [av[2]]
        elif name == "SUBPATTERN":
            subs = [av[-1]]
        elif name in ("ASSERT", "ASSERT_NOT"):
            subs = [av[1]]
        elif name == "BRANCH":
            subs = list(av[1])
        elif name == "GROUPREF_EXISTS":
            subs = [a for a in av[1:] if a is not None]
        for sub in subs:
            found = _walk(sub)
            if found:
                return found
    return None


def needs_311(pattern: str | bytes, *, is_regex: bool = True) -> str | None:
    """What in ``pattern`` Python 3.10 cannot compile, or None."""
    text = pattern.decode("latin-1") if isinstance(pattern, bytes) else pattern
    if "(?>" in text:
        return "atomic group"
    try:
        tree = sre_parse.parse(text)
    except (re.error, RecursionError, OverflowError) as e:
        # 3.10 says "multiple repeat" where 3.11 parses a possessive repeat.
        return f"does not compile: {e}" if is_regex and "multiple repeat" in str(e) else None
    return _walk(tree)


def test_the_checker_knows_the_new_syntax_when_this_python_has_it():
    for old in (r"[\w.-]{1,255}:", r"^\s*(?!\s)#", r"(?=((?:-\S+\s+)*))\1exec"):
        assert needs_311(old) is None, old
    if sys.version_info >= (3, 11):
        assert needs_311(r"[\w.-]{1,255}+:") == "possessive repeat"
        assert needs_311(r"(?:\s+\d+)*+$") == "possessive repeat"
        assert needs_311(r"a(?>bc|b)c") == "atomic group"
    else:  # pragma: no cover - 3.10
        assert needs_311(r"[\w.-]{1,255}+:", is_regex=True).startswith("does not compile")


def _import_everything() -> list[str]:
    failed = []
    import rdmadoctor
    import rdmadoctor.checks

    for pkg in (rdmadoctor, rdmadoctor.checks):
        for mod in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if mod.name.endswith("__main__"):
                continue
            try:
                importlib.import_module(mod.name)
            except ImportError:  # an optional dependency this environment lacks
                continue
            except re.error as e:  # Python 3.10 refusing a pattern compiled at import
                failed.append(f"{mod.name} does not import on Python {sys.version.split()[0]}: {e}")
    return failed


def _package_patterns() -> list[re.Pattern]:
    """The compiled patterns the package holds: reachable from its modules' globals (tables,
    records, classes), not every pattern alive in the process. gc.get_objects() also saw what
    other tests had left compiled: fnmatch's translations and packaging's version pattern use
    3.11's atomic groups and possessive repeats on 3.11 themselves (and other syntax on 3.10)."""
    out: list[re.Pattern] = []
    seen: set[int] = set()
    stack: list[tuple[object, int]] = [
        (vars(m), 0) for name, m in list(sys.modules.items()) if name.startswith("rdmadoctor") and m is not None
    ]
    while stack:
        obj, depth = stack.pop()
        if id(obj) in seen or depth > 8:
            continue
        seen.add(id(obj))
        if isinstance(obj, re.Pattern):
            out.append(obj)
        elif isinstance(obj, dict):
            stack.extend((v, depth + 1) for v in [*obj.keys(), *obj.values()])
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend((v, depth + 1) for v in obj)
        elif isinstance(obj, type(sys)):
            continue  # another module: walked from its own globals, when it is the package's
        elif str(getattr(type(obj), "__module__", "")).startswith("rdmadoctor") or (
            isinstance(obj, type) and str(obj.__module__).startswith("rdmadoctor")
        ):
            d = getattr(obj, "__dict__", None)
            if isinstance(d, dict) or type(d).__name__ == "mappingproxy":
                stack.extend((v, depth + 1) for v in list(d.values()))
            for slot in getattr(type(obj), "__slots__", ()) or ():
                stack.append((getattr(obj, slot, None), depth + 1))
    return out


def test_no_compiled_pattern_of_the_package_needs_python_3_11():
    """Every pattern the package holds once every module is imported (module globals, tables,
    records) and every knowledge-base row."""
    failed = _import_everything()
    assert failed == [], "\n".join(failed)
    from rdmadoctor.logs import kb

    found = {}
    for p in kb.patterns():
        why = needs_311(p.regex)
        if why:
            found[p.id] = why
    held = _package_patterns()
    from rdmadoctor.logs.scan import index, pastes

    assert index._NCCL_SHAPE_AT in held and pastes._EXEC_VIA in held and len(held) > 50, len(held)
    for obj in held:
        why = needs_311(obj.pattern)
        if why:
            found[repr(obj.pattern)[:120]] = why
    assert len(list(kb.patterns())) > 100
    assert found == {}, "patterns Python 3.10 cannot compile (rewrite them without possessive/atomic syntax):\n" + \
        "\n".join(f"  {k}: {v}" for k, v in sorted(found.items()))


def _literals(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            yield node.lineno, node.value


def _looks_like_a_pattern(text: str | bytes) -> bool:
    t = text.decode("latin-1") if isinstance(text, bytes) else text
    return any(m in t for m in ("\\s", "\\d", "\\w", "\\S", "(?", "[^", "{1,", "{0,", "\\b", ".*"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_string_literal_of_the_package_needs_python_3_11(path):
    """Patterns built at call time (``re.search(_ARROW, line)``, a piece joined to another) are
    string literals of the source: each that parses as a pattern is checked."""
    bad = []
    for lineno, value in _literals(path):
        if not _looks_like_a_pattern(value):
            continue
        why = needs_311(value)
        if why:
            bad.append(f"{path.relative_to(ROOT)}:{lineno}: {why}: {value[:100]!r}")
    assert bad == []
