"""The real-log corpus is well formed: every fixture has its header and a row in the table, and
every row says only things the diagnose test can check (see tests/logs_expected.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import logs_expected
from logs_expected import EXPECTED, LOGS, NEW_CODES, body, header

FILES = sorted(p.name for p in LOGS.glob("*.log"))
ROWS = {row["file"]: row for row in EXPECTED}
CODE = re.compile(r"^[A-Z][A-Z0-9_]+$")
ISSUE_URL = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+( \(.+\))?$")
FILE_URL = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/blob/[0-9a-f]{40}/\S+?(#L\d+(-L\d+)?)?( \(.+\))?$")
ROW_KEYS = {"file", "codes", "absent", "root", "nccl", "subjects", "pre25", "note", "xfail"}
NCCL_KEYS = {"version", "cuda", "network", "plugin", "net_devices", "socket_ifaces", "gdr", "channels",
             "ranks", "hosts", "socket_hosts", "nodes", "fabric", "fabric_nics", "net_bw_gbs"}
MAX_LINES = 400


def test_the_corpus_is_big_and_varied() -> None:
    assert len(FILES) >= 32
    sources = {_source_key(header(f)["source"]) for f in FILES}
    assert len(sources) >= 30, sorted(sources)


def test_table_and_folder_agree() -> None:
    names = [row["file"] for row in EXPECTED]
    assert len(names) == len(set(names)), "a fixture has two rows"
    assert sorted(names) == FILES, {"rows without a file": sorted(set(names) - set(FILES)),
                                    "files without a row": sorted(set(FILES) - set(names))}


@pytest.mark.parametrize("name", FILES)
def test_fixture_header_and_body(name: str) -> None:
    raw = (LOGS / name).read_bytes()
    lines = raw.split(b"\n")
    assert lines[0].startswith(b"# source: "), "line 1 must be '# source: <url>'"
    assert lines[1].startswith(b"# what: ") and len(lines[1]) > len(b"# what: ") + 10, "line 2 must be '# what: ...'"
    assert lines[2] == b"# ---", "line 3 must be '# ---'"
    source = header(name)["source"]
    assert ISSUE_URL.match(source) or FILE_URL.match(source), f"not an issue URL nor a file at a commit: {source}"
    log = body(name)
    assert log.strip(), "the log is empty"
    assert log.endswith(b"\n"), "the last line of the log is cut"
    assert log.count(b"\n") <= MAX_LINES, "trim the log to the part that matters"
    log.decode("utf-8")  # the corpus is text as posted; a bad byte would be a copying accident


@pytest.mark.parametrize("row", EXPECTED, ids=lambda r: r["file"])
def test_row_is_checkable(row: dict) -> None:
    assert set(row) <= ROW_KEYS, set(row) - ROW_KEYS
    codes, absent = row["codes"], row["absent"]
    assert isinstance(codes, set) and isinstance(absent, set)
    assert all(CODE.match(c) for c in codes | absent)
    assert not codes & absent, "a code cannot be both required and forbidden"
    assert row["root"] is None or row["root"] in codes, "the headline root cause must be a required code"
    for code, parts in row.get("subjects", {}).items():
        assert code in codes and parts and all(isinstance(p, str) and p for p in parts)
    nccl = row["nccl"]
    assert nccl is None or isinstance(nccl, dict)
    if nccl:
        assert set(nccl) <= NCCL_KEYS, set(nccl) - NCCL_KEYS
        for dev in nccl.get("net_devices") or []:
            assert set(dev) == {"name", "port", "link_layer"} and isinstance(dev["port"], int)
            assert dev["link_layer"] in ("InfiniBand", "RoCE", "Ethernet")
        if nccl.get("hosts"):
            assert nccl["hosts"] == sorted(nccl["hosts"])
        assert nccl.get("gdr") in (True, False, None)
        if nccl.get("version") is not None:
            assert re.fullmatch(r"2\.\d+\.\d+", nccl["version"])


@pytest.mark.parametrize("row", EXPECTED, ids=lambda r: r["file"])
def test_nccl_facts_are_in_the_log(row: dict) -> None:
    """A hand-read fact must be visible in the text: the version, each device, host and interface."""
    nccl = row["nccl"] or {}
    text = body(row["file"]).decode("utf-8")
    if nccl.get("version"):
        assert f"version {nccl['version']}" in text
    if nccl.get("cuda"):
        assert f"+cuda{nccl['cuda']}" in text
    if nccl.get("network"):
        assert re.search(rf"Using (internal )?[Nn]etwork {re.escape(nccl['network'])}\b", text)
    if nccl.get("plugin"):
        assert nccl["plugin"] in text
    for dev in nccl.get("net_devices") or []:
        ll = {"InfiniBand": "IB"}.get(dev["link_layer"], dev["link_layer"])
        assert re.search(rf"\]{re.escape(dev['name'])}:{dev['port']}/{ll}\b", text), dev
    for iface in nccl.get("socket_ifaces") or []:
        assert re.search(rf"NET/Socket ?: Using .*\]{re.escape(iface)}:", text), iface
    for host in nccl.get("hosts") or []:
        assert re.search(rf"(^|[\s:>`]){re.escape(host)}:\d+:\d+ \[\d+\]", text, re.M), host
    if nccl.get("gdr") is True:
        assert "/GDRDMA" in text
    if nccl.get("gdr") is False:
        assert "/GDRDMA" not in text
        assert re.search(r"via NET/|GPU Direct RDMA Disabled", text)
    if nccl.get("ranks"):
        assert re.search(rf"\bn[Rr]anks {nccl['ranks']}\b", text)


def test_every_code_is_known_or_declared_new() -> None:
    known = _known_codes()
    used = set().union(*(row["codes"] | row["absent"] for row in EXPECTED))
    unknown = used - known - set(NEW_CODES)
    assert not unknown, f"codes neither defined nor listed in logs_expected.NEW_CODES: {sorted(unknown)}"
    assert set(NEW_CODES) <= used, "NEW_CODES lists a code no row uses"


def _known_codes() -> set[str]:
    from rdmadoctor.engine.registry import load_checks
    from rdmadoctor.logs import kb

    checks, _ = load_checks()
    return {code.code for c in checks for code in c.codes} | {code.code for code in kb.codes()}


def _source_key(source: str) -> str:
    """One source per issue or pull request, or per file: comments of one thread are one source."""
    url = source.split(" ", 1)[0]
    m = re.match(r"(https://github\.com/[^/]+/[^/]+/(?:issues|pull)/\d+)", url)
    return m.group(1) if m else url.split("#", 1)[0]


def test_body_strips_exactly_the_header() -> None:
    name = FILES[0]
    raw = (LOGS / name).read_bytes()
    assert raw.endswith(body(name))
    assert raw[: len(raw) - len(body(name))].endswith(logs_expected.HEADER_END)
