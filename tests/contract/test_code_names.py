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
