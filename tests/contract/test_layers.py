"""The house rules that tools enforce: the import layers (import-linter), @record as a dataclass
for type checkers (mypy), the mypy step over the whole package (scripts/typecheck.py), and the
fixture generator's command line after its split.

The layer lint runs against an ordinary install of the tree, never the editable one: grimp
builds its graph by walking the package folder, and the editable install maps
``rdmadoctor.checks`` onto the top-level ``checks/`` with an import hook that no folder walk
sees, so the checks would silently be left out of the graph. ``scripts/test.sh`` runs
``python tests/contract/test_layers.py`` for the same lint before pytest.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# What `pip install .` needs from the tree: the build config and every package-dir it maps.
SOURCES = ("pyproject.toml", "README.md", "rdmadoctor", "checks")


def _tool(name: str) -> str | None:
    """A console script of this interpreter's environment (the venv's), else one on PATH."""
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)


def _install(src: Path, workdir: Path) -> Path:
    """An ordinary (not editable) install of ``src`` (a tree laid out like the repo) in ``workdir/site``."""
    site = workdir / "site"
    # --no-build-isolation when setuptools is at hand: the same build, without fetching it again.
    try:
        import setuptools  # noqa: F401

        isolation = ["--no-build-isolation"]
    except ImportError:
        isolation = []
    # A copy of only what the build reads: setuptools leaves build/ and *.egg-info beside the sources
    # (stale modules in build/lib would reach the graph), and tests/fixtures holds symlink cycles.
    build = _scratch_tree(src, workdir / "build-src")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", *isolation,
         "--target", str(site), str(build)],
        check=True, capture_output=True, text=True,
    )
    # fixturegen builds test trees and is left out of the wheel; its layer is linted all the same.
    shutil.copytree(src / "rdmadoctor" / "fixturegen", site / "rdmadoctor" / "fixturegen",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return site


def lint_imports(src: Path, workdir: Path, *contracts: str) -> subprocess.CompletedProcess:
    """Install ``src`` into ``workdir/site`` and lint it there."""
    site = _install(src, workdir)
    args = [_tool("lint-imports") or "lint-imports", "--no-cache", "--no-logo", "--config", str(src / "pyproject.toml")]
    for c in contracts:
        args += ["--contract", c]
    # cwd and PYTHONPATH: the installed copy, so neither the checkout nor the editable hook is found first.
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(args, cwd=site, env=env, capture_output=True, text=True)


def _scratch_tree(src: Path, dest: Path) -> Path:
    dest.mkdir(parents=True)
    for name in SOURCES:
        s = src / name
        if s.is_dir():
            shutil.copytree(s, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(s, dest / name)
    return dest


needs_linter = pytest.mark.skipif(_tool("lint-imports") is None, reason="import-linter is not installed (pip install -e '.[test]')")


@needs_linter
def test_the_tree_keeps_its_layers(tmp_path):
    result = lint_imports(REPO, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_linter
def test_an_upward_import_breaks_the_layers(tmp_path):
    """Planted in checks/ (installed as rdmadoctor.checks through package-dir) and in core: both
    must be named, or the contract is not looking at those modules at all."""
    src = _scratch_tree(REPO, tmp_path / "src")
    with open(src / "checks" / "ib.py", "a") as f:
        f.write("\nfrom rdmadoctor.output import text as _planted  # noqa: E402,F401\n")
    with open(src / "rdmadoctor" / "core" / "facts.py", "a") as f:
        f.write("\nimport rdmadoctor.host as _planted  # noqa: E402,F401\n")
    result = lint_imports(src, tmp_path / "work", "layers")
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert "rdmadoctor.checks.ib -> rdmadoctor.output.text" in out, out
    assert "rdmadoctor.core.facts -> rdmadoctor.host" in out, out
    assert "rdmadoctor.checks is not allowed to import rdmadoctor.output" in out, out


@needs_linter
def test_a_cli_import_below_the_cli_breaks_both_contracts(tmp_path):
    src = _scratch_tree(REPO, tmp_path / "src")
    with open(src / "rdmadoctor" / "output" / "conditions.py", "a") as f:
        f.write("\nfrom rdmadoctor.cli import errors as _planted  # noqa: E402,F401\n")
    layers = lint_imports(src, tmp_path / "w1", "layers")
    forbidden = lint_imports(src, tmp_path / "w2", "no-cli-below")
    for result in (layers, forbidden):
        assert result.returncode != 0
        assert "rdmadoctor.output.conditions -> rdmadoctor.cli.errors" in result.stdout, result.stdout


# ---- @record, as type checkers read it -----------------------------------------------------

SNIPPET = '''\
from rdmadoctor.core.record import field, record


@record
class Port:
    name: str
    rate: float | None = None
    extra: dict = field(default_factory=dict, compare=False)


@record(frozen=False)
class Counter:
    n: int = 0


right = Port("mlx5_0/1", 400.0, extra={"k": 1})
right_kw = Port(name="mlx5_1/1", rate=None)
wrong_type = Port(name=7)  # line 18
missing = Port()  # line 19
right.rate = 1.0  # line 20: frozen by default
c = Counter()
c.n = 3
'''


@pytest.mark.skipif(_tool("mypy") is None, reason="mypy is not installed (pip install -e '.[test]')")
def test_mypy_reads_record_as_a_frozen_dataclass(tmp_path):
    (tmp_path / "snippet.py").write_text(SNIPPET)
    env = {**os.environ, "MYPYPATH": str(REPO)}
    result = subprocess.run(
        [_tool("mypy"), "--no-incremental", "--python-version", "3.10", "--no-error-summary", "snippet.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    )
    lines = {int(line.split(":")[1]): line for line in result.stdout.splitlines() if line.startswith("snippet.py:")}
    assert sorted(lines) == [18, 19, 20], result.stdout + result.stderr
    assert "[arg-type]" in lines[18] and '"int"; expected "str"' in lines[18]
    assert "[call-arg]" in lines[19] and '"name"' in lines[19]
    assert "read-only" in lines[20]
    # and record.py itself checks clean (the declaration agrees with what it declares)
    assert "record.py" not in result.stdout


@pytest.mark.skipif(_tool("mypy") is None, reason="mypy is not installed (pip install -e '.[test]')")
def test_typecheck_covers_checks_and_the_package(tmp_path):
    """scripts/typecheck.py (the mypy step of scripts/test.sh) reads checks/ as rdmadoctor.checks:
    a type error planted there and one in the package are both reported, under checkout paths."""
    src = _scratch_tree(REPO, tmp_path / "src")
    (src / "scripts").mkdir()
    shutil.copy2(REPO / "scripts" / "typecheck.py", src / "scripts" / "typecheck.py")
    with open(src / "checks" / "ib.py", "a") as f:
        f.write('\n_planted_in_checks: int = "not an int"\n')
    with open(src / "rdmadoctor" / "core" / "facts.py", "a") as f:
        f.write('\n_planted_in_core: str = 7\n')
    result = subprocess.run([sys.executable, str(src / "scripts" / "typecheck.py"), "--no-incremental"],
                            capture_output=True, text=True)
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 2, out
    assert any(e.startswith("checks/ib.py:") for e in errors), out
    assert any(e.startswith("rdmadoctor/core/facts.py:") for e in errors), out


def test_record_imports_nothing_at_run_time():
    """The declaration for type checkers costs the check path nothing: no typing, no typing_extensions."""
    code = (
        "import sys; before = set(sys.modules); import rdmadoctor.core.record; "
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert set(out.stdout.split()) <= {"rdmadoctor", "rdmadoctor.core", "rdmadoctor.core.record"}, out.stdout


# ---- fixturegen's command line after the split --------------------------------------------


def test_fixturegen_runs_as_a_module(tmp_path):
    """`python -m rdmadoctor.fixturegen` needs the package's __main__.py."""
    out = tmp_path / "big"
    result = subprocess.run([sys.executable, "-m", "rdmadoctor.fixturegen", "--sriov", "2", "-o", str(out)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (out / "sys" / "class" / "infiniband").is_dir()
    # two VFs, each with its physfn link back to its PF
    assert len(list((out / "sys" / "bus" / "pci" / "devices").glob("*/physfn"))) == 2


def test_fixturegen_examples_land_in_the_examples_package(tmp_path, monkeypatch):
    """--examples writes beside rdmadoctor/examples/__init__.py, where `check --example` reads."""
    import rdmadoctor.examples
    from rdmadoctor import fixturegen

    assert fixturegen.examples_dir() == os.path.dirname(rdmadoctor.examples.__file__)
    monkeypatch.setattr(rdmadoctor.examples, "HERE", str(tmp_path))
    assert fixturegen.main(["--examples"]) == 0
    assert sorted(os.listdir(tmp_path)) == sorted(f"{name}.tar.gz" for name in fixturegen.EXAMPLES)
    assert fixturegen.read_tar(str(tmp_path / "roce-node.tar.gz")) == fixturegen.example_tree("roce-node")


CYCLES = """
import sys
import grimp

# Imports under `if TYPE_CHECKING:` are left out: they never run, and the log reader's parts (mixins
# of one Diagnoser, rdmadoctor/logs/scan/) name each other's types for mypy only.
graph = grimp.build_graph("rdmadoctor", exclude_type_checking_imports=True)
# Tarjan's strongly connected components over module -> directly imported module (grimp counts
# imports inside functions too, as it should: a lazy import is still a dependency).
index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(10000)

def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in graph.find_modules_directly_imported_by(v):
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            on.discard(w)
            comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            comps.append(sorted(comp))

for m in sorted(graph.modules):
    if m not in index:
        visit(m)
print(len(graph.modules))
for c in comps:
    print(" <-> ".join(c))
"""


def _cycles(src: Path, workdir: Path) -> tuple[int, list[str]]:
    """(modules in the graph, one line per import cycle) of an ordinary install of ``src``."""
    site = _install(src, workdir)
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run([sys.executable, "-c", CYCLES], cwd=site, env=env, capture_output=True, text=True, check=True)
    first, *cycles = out.stdout.splitlines()
    return int(first), cycles


@needs_linter
def test_no_import_cycles_between_modules(tmp_path):
    """Issue 7: cli/app <-> cli/agent, publish <-> nfd <-> kube, host <-> host.bundle are gone, and stay gone."""
    modules, cycles = _cycles(REPO, tmp_path)
    assert modules > 60  # the checks are in the graph (an editable install would hide them)
    assert cycles == []


@needs_linter
def test_a_planted_cycle_is_found(tmp_path):
    src = _scratch_tree(REPO, tmp_path / "src")
    with open(src / "rdmadoctor" / "publish" / "base.py", "a") as f:
        f.write("\n\ndef _planted():\n    from rdmadoctor.publish import nfd  # noqa: F401\n")
    _, cycles = _cycles(src, tmp_path / "work")
    assert any("rdmadoctor.publish.base" in c and "rdmadoctor.publish.nfd" in c for c in cycles), cycles


if __name__ == "__main__":
    # scripts/test.sh: the layer lint, with lint-imports' own report.
    with tempfile.TemporaryDirectory() as work:
        res = lint_imports(REPO, Path(work))
    sys.stdout.write(res.stdout)
    sys.stderr.write(res.stderr)
    raise SystemExit(res.returncode)


def test_checks_read_only_through_the_host():
    """STYLE: no open(), os.listdir/scandir/walk or subprocess inside checks/: every fact comes
    through the Host (live root, --root, bundle), so a bundle and a mounted root see the same."""
    import ast

    banned_calls = {"open", "os.open", "os.listdir", "os.scandir", "os.walk", "os.popen", "os.stat", "os.lstat",
                    "os.readlink", "io.open", "pathlib.Path"}
    found = []
    for path in sorted((REPO / "checks").glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                # psutil and pyroute2 read the network namespace: Host.interfaces() (host/net.py) does that.
                if any(n.split(".")[0] in ("subprocess", "pathlib", "glob", "shutil", "psutil", "pyroute2", "socket") for n in names):
                    found.append(f"{path.name}:{node.lineno}: imports {', '.join(names)}")
            elif isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else (
                    f"{f.value.id}.{f.attr}" if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else "")
                if name in banned_calls:
                    found.append(f"{path.name}:{node.lineno}: calls {name}()")
    assert found == [], "read through ctx.host instead:\n" + "\n".join(found)
