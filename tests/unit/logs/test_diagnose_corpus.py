"""Real logs from public issues and docs (tests/fixtures/logs/), each diagnosed and held to what a
person read in it (tests/logs_expected.py): the codes it must and must not report, the root cause
that heads the report, and what NCCL did.

The diagnosis runs the way `rdmadoctor diagnose FILE` runs it (the logs.diagnose check on a
logs-only host), so pasted tool outputs are judged by the same checks as a node's.
"""

from __future__ import annotations

import pytest

from rdmadoctor.host import logs_only_host
from rdmadoctor.logs import Diagnoser
from rdmadoctor.runner import Options, diagnose
from tests.logs_expected import EXPECTED, body

PROBLEM = ("error", "warning")


def report_of(name: str) -> dict:
    reader = Diagnoser()  # what `rdmadoctor diagnose FILE` hands the logs.diagnose check
    reader.feed(body(name), source=name)
    reader.end_source()
    opts = Options(only=["logs"], logs=[name], log_diagnosis=reader)
    return diagnose(opts, host=logs_only_host(name)).report


def findings(rep: dict) -> list[dict]:
    return [f for c in rep["checks"] for f in c["findings"]]


def root_code(rep: dict) -> str | None:
    """The headline: the first error (else warning) that does not follow from another shown finding."""
    shown = findings(rep)
    present = {f["code"] for f in shown}
    for f in sorted(shown, key=lambda f: f["severity"] != "error"):
        if f["severity"] not in PROBLEM:
            continue
        if f.get("cause") and f["cause"] in present and f["cause"] != f["code"]:
            continue
        follows = (f.get("data") or {}).get("follows")
        if f.get("cause") and isinstance(follows, dict) and any(
                g is not f and g["code"] == f["cause"] and g["subject"] == follows.get("subject") for g in shown):
            continue
        return f["code"]
    return None


@pytest.mark.parametrize("row", EXPECTED, ids=[r["file"] for r in EXPECTED])
def test_real_log(row: dict, request: pytest.FixtureRequest) -> None:
    if row.get("xfail"):  # waits on a change to the scan, named in the row
        request.applymarker(pytest.mark.xfail(reason=row["xfail"], strict=True))
    rep = report_of(row["file"])
    got = {f["code"] for f in findings(rep)}
    missing = set(row["codes"]) - got
    assert not missing, f"missing {sorted(missing)}; got {sorted(got)}"
    wrong = set(row.get("absent") or ()) & got
    assert not wrong, f"reported {sorted(wrong)}, which the log does not show"
    if row.get("root"):
        assert root_code(rep) == row["root"], [(f["code"], f["subject"], f.get("cause")) for f in findings(rep)]
    for code, parts in (row.get("subjects") or {}).items():
        subjects = [f["subject"] for f in findings(rep) if f["code"] == code]
        for part in parts:
            assert any(part in s for s in subjects), (code, part, subjects)
    if row.get("nccl"):
        nccl = rep["nccl"] or {}
        for key, want in row["nccl"].items():
            assert nccl.get(key) == want, (key, nccl.get(key), want)
    for f in findings(rep):  # every finding from a log quotes where it was seen
        if f["code"] in ("LOGS_READ", "LOG_UNREADABLE", "LOGS_NOTHING_TO_JUDGE"):  # about the files themselves
            continue
        ev = (f.get("data") or {}).get("evidence")
        assert ev and ev[0]["file"] == row["file"] and ev[0]["line"] >= 1, f


def test_the_corpus_is_large_and_varied() -> None:
    assert len(EXPECTED) >= 30
    assert len({r["file"].split("-")[0] for r in EXPECTED}) >= 15  # many projects, not one issue tracker


# ---- never a silent pass (issue 30, item 2) ---------------------------------------------------------


def _kinds() -> dict[str, str]:
    """Every code the logs.diagnose check can emit -> its kind (problem, could-not-decide, information)."""
    from rdmadoctor.checks.logs import CHECKS

    return {c.code: c.kind for check in CHECKS for c in check.codes}


def failing(row: dict) -> bool:
    """A text whose reader named a problem in it: a root cause, or a problem code it must report."""
    kinds = _kinds()
    return bool(row.get("root")) or any(kinds.get(code) == "problem" for code in row["codes"])


# Failing texts the diagnosis still passes or calls "nothing to judge", each waiting on a change to the scan
# (rdmadoctor/logs/scan.py, being split into a package when this was written): file -> the change it needs.
SILENT_PASS_XFAIL: dict[str, str] = {}

FAILING = [r for r in EXPECTED if failing(r)]


def test_the_corpus_has_failing_and_healthy_texts() -> None:
    assert len(FAILING) >= 40 and len(EXPECTED) - len(FAILING) >= len(EXPECTED) // 5


@pytest.mark.parametrize("row", FAILING, ids=[r["file"] for r in FAILING])
def test_no_failing_text_passes(row: dict, request: pytest.FixtureRequest) -> None:
    """Worse than a wrong root cause: a failing job read as clean, or as nothing to judge. Every text whose
    reader named a problem gets at least one error or warning, and the report does not pass."""
    if row["file"] in SILENT_PASS_XFAIL:
        request.applymarker(pytest.mark.xfail(reason=SILENT_PASS_XFAIL[row["file"]], strict=True))
    rep = report_of(row["file"])
    problems = [(f["code"], f["severity"]) for f in findings(rep) if f["severity"] in PROBLEM]
    assert problems, f"a failing text read as {rep['status']}: {[(f['code'], f['severity']) for f in findings(rep)]}"
    assert rep["status"] not in ("pass", "ok"), rep["status"]


@pytest.mark.parametrize("name", ["nccl-651-fastsocket-init-healthy.log", "nccl-1519-fastsocket-gdr-per-nic.log"])
def test_gcp_plugins_are_the_designed_transport(name: str) -> None:
    rep = report_of(name)
    assert "NCCL_SOCKET_FALLBACK" not in {f["code"] for f in findings(rep)}
    assert (rep["nccl"] or {}).get("plugin") == "FastSocket" and (rep["nccl"] or {}).get("gdr") is None


# Lines shaped like a failure that no row knows (the shapes issue 30 lists: a signal banner cut before its
# signal line, "cannot", "fatal", "no ... found", a non-zero exit). Written here to stand for each shape. Each
# read as "nothing to judge" until the scan's unknown-error reader (rdmadoctor/logs/scan/errors.py,
# _failure_shape) made it LOG_ERROR_UNKNOWN with the line quoted.
FAILURE_SHAPES = [
    "[node1:12345] *** Process received signal ***",
    "cannot create cq",
    "FATAL: rank 3 aborted: unable to allocate verbs resources",
    "No RDMA-capable devices found.",
    "srun: error: node7: task 3: Exited with exit code 1",
]


@pytest.mark.parametrize("line", FAILURE_SHAPES)
def test_a_failure_shaped_line_no_row_knows_is_an_unknown_error(line: str) -> None:
    reader = Diagnoser()
    reader.feed(f"{line}\n".encode(), source="paste.txt")
    reader.end_source()
    rep = diagnose(Options(only=["logs"], logs=["paste.txt"], log_diagnosis=reader), host=logs_only_host("paste.txt")).report
    got = {f["code"]: f for f in findings(rep)}
    assert "LOG_ERROR_UNKNOWN" in got and line.strip() in str(got["LOG_ERROR_UNKNOWN"]["data"].get("evidence"))
