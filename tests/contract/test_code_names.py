"""Every ``NAME = Code("...")`` in the package binds a Code whose string is ``NAME`` (issue 31 item 3).

Findings name their code by the object (``Finding(HCA_FW_OLD.code, ...)``) and tests, docs and alerts
by the string: a typo in the string (``HCA_FW_OLD = Code("HCA_FW_0LD", ...)``) passed every other
test. Read from the source of every module of ``rdmadoctor/`` and ``checks/`` (no import: a module
that only some commands load is covered too).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def misnamed(source: str, filename: str = "<source>") -> list[str]:
    """``file:line: NAME = Code(...)`` for each Code bound to a name that is not its string (or
    whose string is not written out), in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or not isinstance(node.value, ast.Call):
            continue
        call = node.value
        if getattr(call.func, "id", None) != "Code" and getattr(call.func, "attr", None) != "Code":
            continue
        string = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "code"), None)
        for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
            name = target.id if isinstance(target, ast.Name) else ast.unparse(target)
            if not (isinstance(string, ast.Constant) and string.value == name):
                said = ast.unparse(string) if string is not None else "nothing"
                out.append(f"{filename}:{node.lineno}: {name} = Code({said}, ...)")
    return out


def _sources() -> list[Path]:
    return sorted(p for d in ("rdmadoctor", "checks") for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts)


def test_every_code_is_bound_to_its_own_name() -> None:
    found = 0
    bad: list[str] = []
    for path in _sources():
        text = path.read_text(encoding="utf-8")
        found += text.count("Code(")
        bad += misnamed(text, str(path.relative_to(ROOT)))
    assert found >= 150  # the codes are where this looks
    assert bad == [], "\n".join(bad)


def test_a_typo_in_a_codes_string_is_caught() -> None:
    source = ('from rdmadoctor.core.model import Code, PROBLEM\n'
              'HCA_FW_OLD = Code("HCA_FW_0LD", "t", "m", "f", kind=PROBLEM)\n'
              'IB_NO_SM: Code = Code(code="IB_NO_SM", title="t", meaning="m", fix="f", kind=PROBLEM)\n'
              'NAMED = Code(NAME_FROM_ELSEWHERE, "t", "m", "f", kind=PROBLEM)\n')
    assert misnamed(source, "x.py") == ['x.py:2: HCA_FW_OLD = Code(\'HCA_FW_0LD\', ...)',
                                        "x.py:4: NAMED = Code(NAME_FROM_ELSEWHERE, ...)"]


# ---- one registry: every code defined once, in its family module (rdmadoctor/core/codes/) ----------

FAMILIES = ROOT / "rdmadoctor" / "core" / "codes"


def _code_calls(path: Path) -> list[ast.Call]:
    return [n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path)))
            if isinstance(n, ast.Call) and (getattr(n.func, "id", None) == "Code" or getattr(n.func, "attr", None) == "Code")]


def _family_names() -> list[tuple[str, str]]:
    """(family module, NAME) of every ``NAME = Code(...)`` in the registry's family modules."""
    out = []
    for path in sorted(FAMILIES.glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and getattr(getattr(node.value, "func", None), "id", None) == "Code":
                out += [(f"rdmadoctor.core.codes.{path.stem}", t.id) for t in node.targets if isinstance(t, ast.Name)]
    return out


def test_codes_are_defined_in_the_registry_only() -> None:
    # A Code(...) anywhere else is a second place a code's text lives: kb rows, checks, the gang and
    # the scan import theirs from rdmadoctor/core/codes/<family>.py.
    elsewhere = [f"{p.relative_to(ROOT)}:{call.lineno}" for p in _sources() if FAMILIES not in p.parents
                 for call in _code_calls(p)]
    assert elsewhere == [], "Code(...) outside rdmadoctor/core/codes/: " + ", ".join(elsewhere)


def test_every_builtin_code_is_in_the_registry_exactly_once() -> None:
    import importlib

    from rdmadoctor.core import codes

    defined = _family_names()
    names = [name for _, name in defined]
    assert len(names) >= 180
    assert len(names) == len(set(names)), f"defined twice: {sorted({n for n in names if names.count(n) > 1})}"
    for module, name in defined:
        assert codes.get(name) is getattr(importlib.import_module(module), name), f"{module}.{name}"
    every = [c.code for c in codes.all_codes()]
    assert len(every) == len(set(every))
    assert set(names) <= set(every)


def test_no_two_codes_share_a_string() -> None:
    """Every Code object any loaded module holds is the registry's one of its string."""
    import sys

    from rdmadoctor.cli.info import _all_codes, _load
    from rdmadoctor.core import codes
    from rdmadoctor.core.model import Code

    checks, _ = _load()
    raised = _all_codes(checks)  # every check, the kb, the gang, preflight: all loaded
    # Built-in modules only: a test of the check loader (tests/contract/test_codes.py) leaves its own
    # plugin-like check from a temporary folder in sys.modules, with a code the registry never saw.
    homes = (ROOT / "rdmadoctor", ROOT / "checks")
    held = [(name, v) for name, m in list(sys.modules.items()) if name.startswith("rdmadoctor")
            and any(Path(getattr(m, "__file__", None) or "/").resolve().is_relative_to(h) for h in homes)
            for v in list(vars(m).values()) if isinstance(v, Code)]
    held += [(c.id, k) for c in checks for k in c.codes]
    assert held
    for where, code in held:
        assert codes.get(code.code) is code, f"{where}: a second Code of the string {code.code}"
    # ... and each code of the registry is raised by something `explain` can name.
    assert not [name for name, (_, by) in raised.items() if by == "a plugin"]


def _roles() -> list[str]:
    from rdmadoctor.core.model import Code
    from rdmadoctor.core.record import fields

    return [n for n in fields(Code) if Code.__record_defaults__.get(n) is False]  # type: ignore[attr-defined]


def test_every_role_is_carried_by_codes_that_are_raised() -> None:
    """A role (an attribute of Code the scan or quarantine reads) is carried by at least one code,
    and only by codes that the part reading it can see: a role on a code no one raises is dead."""
    from rdmadoctor.core import codes
    from rdmadoctor.engine import registry
    from rdmadoctor.logs import kb, scan

    roles = _roles()
    assert roles == ["one_per_subject", "kill", "explained_by_errors_only", "slow_symptom", "from_counters"]
    from_rows = {p.code for p in kb.patterns()} | {v.code for v in vars(scan).values() if isinstance(v, kb.Pattern)}
    counters = {k.code for c in registry.load_checks(autoload=False)[0] if c.id == "ib.counters" for k in c.codes}
    for role in roles:
        carriers = {c.code for c in codes.all_codes() if getattr(c, role)}
        assert carriers, f"no code has the role {role}"
        seen_by = counters if role == "from_counters" else from_rows
        assert carriers <= seen_by, f"{role}: {sorted(carriers - seen_by)} never reach the part that reads it"


def test_a_builtin_checks_codes_state_their_kind() -> None:
    """``kind=`` is written on every code a built-in check declares (the knowledge base's own codes
    may take the default, problem): nobody reads a check's problem code out of a default."""
    from rdmadoctor.engine import registry
    from rdmadoctor.logs import kb

    calls = {}
    for path in sorted(FAMILIES.glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and getattr(getattr(node.value, "func", None), "id", None) == "Code":
                calls[node.targets[0].id] = (path.name, node.value)  # type: ignore[union-attr]
    mine = {k.code for c in registry.load_checks(autoload=False)[0] for k in c.codes} - {c.code for c in kb.codes()}
    bad = [f"{calls[n][0]}: {n}" for n in sorted(mine) if n in calls and not any(k.arg == "kind" for k in calls[n][1].keywords)]
    assert bad == [], "Code without kind=: " + ", ".join(bad)
