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
def test_real_log(row: dict) -> None:
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
