"""Issue 10, item 14: a MASTER_ADDR no resolver can take (an empty label, a label over 63
characters, a name over 253) is MASTER_UNRESOLVED, a NO-GO with its JSON, not an idna traceback
that loses the --json output. It can never resolve, so preflight says so at once instead of
retrying until --master-timeout."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

from rdmadoctor.preflight import master as M

BAD_NAMES = {
    "empty label": "a..b",
    "leading dot": ".job-master-0",
    "label of 64": "x" * 64 + ".job.svc",
    "name of 254": ".".join(["y" * 50] * 5) + ".abc",
}


@pytest.mark.parametrize("name", list(BAD_NAMES.values()), ids=list(BAD_NAMES))
def test_preflight_says_master_unresolved_with_json(name, monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", name)
    monkeypatch.setenv("MASTER_PORT", "29500")
    for var in ("RANK", "NODE_RANK", "PET_NODE_RANK", "GROUP_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    code, out, err = run_cli(["preflight", "--example", "hgx-h100-ib", "--wait-for-master", "--master-timeout", "60", "--json"])
    assert "Traceback" not in err and "UnicodeError" not in err, err
    doc = json.loads(out)
    assert code == 1 and doc["verdict"] == "no-go" and doc["exit_code"] == 1
    (problem,) = [p for p in doc["problems"] if p["check"] == "master"]
    assert problem["code"] == "MASTER_UNRESOLVED" and problem["severity"] == "error"
    wait = doc["master"]["wait"]
    assert wait["ok"] is False and wait["resolved"] == []
    assert wait["attempts"] == 1  # a name that can never resolve is not retried for 60 s
    assert "not a valid host name" in wait["last_error"] and "not a valid host name" in problem["message"]


def test_the_reason_names_what_is_wrong():
    assert "empty" in M.host_name_error("a..b")
    assert "64 characters" in M.host_name_error("x" * 64 + ".svc") and "63" in M.host_name_error("x" * 64)
    assert "253" in M.host_name_error(BAD_NAMES["name of 254"])
    for good in ("job-master-0.job", "job-master-0.job.ns.svc.cluster.local.", "10.0.0.5", "fd00::5", "x" * 63, "under_score", "localhost"):
        assert M.host_name_error(good) is None, good


def test_wait_for_master_reports_a_bad_name_without_raising():
    res = M.wait_for_master(M.Master("a..b", 29500, "MASTER_ADDR", "MASTER_PORT"), 60.0, own=set)
    assert not res.ok and res.attempts == 1 and res.resolved == []
    assert "'a..b' is not a valid host name" in res.last_error


def test_a_name_the_resolver_refuses_is_an_attempt_error_not_a_crash(monkeypatch):
    """Whatever getaddrinfo raises besides OSError (the idna codec's UnicodeError for a name that
    passed the label rules) is the attempt's error, and it ends the wait: no retry fixes a name."""
    import socket

    def refuse(*a, **k):
        raise UnicodeError("encoding with 'idna' codec failed (UnicodeError: label empty or too long)")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    res = M.wait_for_master(M.Master("job-master-0.job", 29500, "MASTER_ADDR", "MASTER_PORT"), 60.0, own=set)
    assert not res.ok and res.attempts == 1 and "idna" in res.last_error
