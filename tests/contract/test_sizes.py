"""No room of the house is over MAX_LINES lines but data: a module that grows past it has several
jobs, and splits them (docs/architecture.md, "The rooms"; CONTRIBUTING.md: a check module keeps its
CHECKS and moves the rest into `_<family>_<job>.py`).

The exempt modules are data, listed here by folder: the knowledge base's rows (one module per
source, `rdmadoctor/logs/kb/`) and the code registry's definitions (one module per family,
`rdmadoctor/core/codes/`). Nothing else is exempt; a new kind of data module is added here, with
the reason, in review."""

from __future__ import annotations

from conftest import ROOT

MAX_LINES = 800
# Data, not code: rows and definitions that grow with what rdmadoctor knows, read in order.
DATA = {
    "rdmadoctor/logs/kb": "the knowledge base: one Pattern table per source",
    "rdmadoctor/core/codes": "the code registry: one module of Code definitions per family",
}


def _modules() -> list[tuple[str, int]]:
    out = []
    for top in ("rdmadoctor", "checks"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "__pycache__" in rel:
                continue
            out.append((rel, len(path.read_text(encoding="utf-8").splitlines())))
    return out


def _data(rel: str) -> bool:
    return rel.rsplit("/", 1)[0] in DATA


def test_no_module_but_data_is_over_the_limit():
    over = [f"{rel}: {n} lines" for rel, n in _modules() if n > MAX_LINES and not _data(rel)]
    assert not over, (f"over {MAX_LINES} lines: {', '.join(over)}; split the module by its jobs "
                      "(docs/architecture.md, 'The rooms'), or, if it is data, add its folder to DATA with the reason")


def test_each_exemption_names_a_folder_of_modules():
    # A folder renamed or emptied leaves no exemption behind.
    for folder in DATA:
        assert list((ROOT / folder).glob("*.py")), f"{folder}: no module there; drop it from DATA"
    assert [rel for rel, _ in _modules() if rel == "rdmadoctor/logs/kb/nccl.py"], "the walk finds the package"
