"""Codes are a contract, and the checks declare everything about themselves.

- The built-in checks are found by scanning checks/ (no second list), and a new module loads.
- Every code any check emits, on every fixture, every shipped example and this very machine, is
  declared in its check's ``codes`` and explained by ``rdmadoctor explain``; and the finding's
  severity is one its code's kind allows (core.model.KIND_SEVERITIES): a problem's code is never
  the "could not read it" finding.
"""

from __future__ import annotations

import pytest
from conftest import FIXTURES, ROOT, run_cli

from rdmadoctor.core.model import CONDITIONS, KIND_SEVERITIES, KINDS
from rdmadoctor.engine import registry
from rdmadoctor.examples import EXAMPLES
from rdmadoctor.runner import Options, diagnose

try:
    import tomllib
except ImportError:  # Python 3.10: the tomli backport, a dependency there
    import tomli as tomllib

CHECKS, LOAD_ERRORS = registry.load_checks(autoload=False)
DECLARED = {c.id: {k.code: k for k in c.codes} for c in CHECKS}

# Where findings come from: every fixture bundle, every shipped example (also under the profile
# its description names), and the machine the tests run on.
SOURCES = (
    [("fixture", p.name) for p in sorted(FIXTURES.iterdir()) if p.is_dir()]
    + [("example", name) for name in EXAMPLES]
    + [("example:hgx-8gpu-ndr", "hgx-h100-ib"), ("live", "this machine")]
)


def test_builtin_checks_are_found_by_scanning_and_declared_nowhere_else():
    # No second list: pyproject.toml declares no built-in entry point (it would load them twice).
    with open(ROOT / "pyproject.toml", "rb") as f:
        table = tomllib.load(f)["project"].get("entry-points", {}).get("rdmadoctor.checks", {})
    assert not [v for v in table.values() if v.startswith("rdmadoctor.checks")], table
    # Every module of checks/ that is not private is a built-in, in its declared order.
    modules = registry.builtin_modules()
    found = [name for name, _ in modules]
    on_disk = sorted(p.stem for p in (ROOT / "checks").glob("*.py") if not p.stem.startswith("_"))
    assert sorted(found) == on_disk
    # No two modules claim one place (the name would silently decide); the ports come first, and
    # logs.diagnose (which reads the node checks' findings) and node.labels (which sums them) last.
    orders = {name: mod.ORDER for name, mod in modules if hasattr(mod, "ORDER")}
    assert len(set(orders.values())) == len(orders), orders
    assert found[0] == "ib" and found[-2:] == ["logs", "node"], found


def test_a_new_check_module_loads_with_no_list_and_no_reinstall(tmp_path, monkeypatch):
    """CONTRIBUTING.md's promise: drop a module in checks/ and it runs. A folder added to the
    package's __path__ stands in for checks/ (the tree itself is not written)."""
    import rdmadoctor.checks as pkg

    (tmp_path / "zzfresh.py").write_text(
        "from rdmadoctor.core.model import INFO, Check, Code, Finding\n"
        "FRESH = Code('FRESH_SEEN', 'fresh', 'a new check ran', 'nothing', kind='info')\n"
        "CHECKS = [Check(id='zzfresh.seen', title='Fresh', probe=lambda ctx: 1,\n"
        "                judge=lambda f, e: [Finding(FRESH.code, INFO, 'host', 'seen', '')], codes=(FRESH,))]\n"
    )
    (tmp_path / "_helper.py").write_text("raise RuntimeError('a private module is not a check module')\n")
    monkeypatch.setattr(pkg, "__path__", [*pkg.__path__, str(tmp_path)])
    checks, errors = registry.load_checks(autoload=False)
    assert errors == []
    ids = [c.id for c in checks]
    # ORDER not given: after the node checks, before logs.diagnose and node.labels.
    assert ids.index("nccl.env") < ids.index("zzfresh.seen") < ids.index("logs.diagnose")
    code, out, err = run_cli(["check", "--example", "roce-node", "--only", "zzfresh", "--json"])
    assert '"FRESH_SEEN"' in out, err


def test_checks_declare_valid_kinds_and_conditions():
    assert LOAD_ERRORS == []
    bad = []
    for c in CHECKS:
        if c.condition is not None and c.condition not in CONDITIONS:
            bad.append(f"{c.id}: condition {c.condition!r}")
        if c.scope not in ("node", "pod"):
            bad.append(f"{c.id}: scope {c.scope!r}")
        for k in c.codes:
            if k.kind not in KINDS:
                bad.append(f"{c.id} {k.code}: kind {k.kind!r}")
            if k.condition is not None and k.condition not in CONDITIONS:
                bad.append(f"{c.id} {k.code}: condition {k.condition!r}")
    assert bad == []


def _report(kind: str, name: str) -> dict:
    if kind == "fixture":
        opts = Options(bundle=str(FIXTURES / name))
    elif kind == "live":
        opts = Options()
    else:
        profile = kind.partition(":")[2] or "generic"
        opts = Options(example=name, profile=profile)
    return diagnose(opts).report


@pytest.mark.parametrize("kind,name", SOURCES, ids=[f"{k}-{n}".replace(" ", "-") for k, n in SOURCES])
def test_every_emitted_code_is_declared_explained_and_of_its_kind(kind, name):
    rep = _report(kind, name)
    undeclared, wrong_kind, unexplained = [], [], []
    explained: dict[str, bool] = {}
    for check in rep["checks"]:
        codes = DECLARED.get(check["id"], {})
        for f in check["findings"]:
            code = codes.get(f["code"])
            where = f"{check['id']} {f['severity']}:{f['code']} ({f['subject']})"
            if code is None:
                undeclared.append(where)
                continue
            if f["severity"] not in KIND_SEVERITIES[code.kind]:
                wrong_kind.append(f"{where}: a code of kind {code.kind!r} is never {f['severity']!r}")
            if f.get("kind") != code.kind:
                wrong_kind.append(f"{where}: the report says kind {f.get('kind')!r}, the code {code.kind!r}")
            if f["code"] not in explained:
                rc, out, err = run_cli(["explain", f["code"]])
                explained[f["code"]] = rc == 0 and out.startswith(f"{f['code']}: ")
            if not explained[f["code"]]:
                unexplained.append(where)
    broken = (
        [f"not in the check's codes: {w}" for w in undeclared]
        + [f"`rdmadoctor explain` does not know it: {w}" for w in unexplained]
        + [f"severity not of its code's kind: {w}" for w in wrong_kind]
    )
    assert not broken, f"{len(broken)} finding(s) break the code contract:\n" + "\n".join(broken)


def test_built_in_checks_name_codes_by_their_code_object():
    """Finding(IB_PORT_DOWN.code, ...), never Finding("IB_PORT_DOWN", ...): a mistyped code is then a
    NameError when the module loads, not a silent new code that alerts do not know."""
    import re
    from pathlib import Path

    checks_dir = Path(__file__).resolve().parents[2] / "checks"
    literal = re.compile(r'Finding\(\s*["\']')
    offenders = [
        f"{p.name}:{text.count(chr(10), 0, m.start()) + 1}"
        for p in sorted(checks_dir.glob("*.py"))
        for text in [p.read_text()]
        for m in literal.finditer(text)
    ]
    assert offenders == []
