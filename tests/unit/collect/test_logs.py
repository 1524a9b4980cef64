"""`collect --log FILE`: job logs go into the bundle under logs/, bounded, and `check --bundle`
diagnoses them; the Host reads a bundle's logs in pieces."""

from __future__ import annotations

import gzip
import json
import tarfile
from pathlib import Path

import pytest
from conftest import check_json, run_cli

from rdmadoctor.collect import CollectError, read_log, read_logs
from rdmadoctor.collect import logs as collect_mod  # where read_log's limits live
from rdmadoctor.host import mem_host, open_host

FALLBACK_LOG = """\
job-0:1234:1234 [0] NCCL INFO NET/IB : No device found.
job-0:1234:1234 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>
job-0:1234:1234 [0] NCCL INFO Using network Socket
NCCL version 2.18.5+cuda12.2
job-0:1234:1250 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
"""


def _members(bundle: Path) -> dict[str, bytes]:
    with tarfile.open(bundle) as tf:
        return {m.name: tf.extractfile(m).read() for m in tf.getmembers() if m.isfile()}


# ---- read_log: what is kept ---------------------------------------------------------------------


def test_a_short_log_is_kept_whole_and_gzip_is_unpacked(tmp_path):
    plain = tmp_path / "rank0.log"
    plain.write_text(FALLBACK_LOG)
    packed = tmp_path / "rank1.log.gz"
    packed.write_bytes(gzip.compress(FALLBACK_LOG.encode()))
    logs = read_logs([str(plain), str(packed), str(plain)])
    assert [log.name for log in logs] == ["logs/rank0.log", "logs/rank1.log", "logs/rank0-2.log"]
    assert all(log.data == FALLBACK_LOG.encode() and log.cut == 0 and log.error is None for log in logs)
    assert logs[1].bytes_read == len(FALLBACK_LOG)


def test_a_long_log_keeps_its_head_and_tail_in_whole_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(collect_mod, "LOG_HEAD", 100)
    monkeypatch.setattr(collect_mod, "LOG_TAIL", 200)
    lines = [f"line {i:05d} " + "x" * 20 for i in range(1000)]
    text = "\n".join(lines) + "\n"
    p = tmp_path / "big.log"
    p.write_text(text)
    log = read_log(str(p), set())
    kept = log.data.decode().split("\n")
    marker = next(i for i, x in enumerate(kept) if x.startswith("[rdmadoctor collect:"))
    head, tail = kept[:marker], kept[marker + 1 : -1]
    assert head == lines[: len(head)] and 0 < len(head) <= 100 // 27 + 1  # whole lines from the start
    assert tail == lines[-len(tail) :] and 0 < len(tail) <= 200 // 27  # whole lines to the end
    assert log.cut == len(text) - sum(len(x) + 1 for x in head + tail) and log.cut > 0
    assert f"{log.cut} bytes of this log left out here" in kept[marker]
    assert log.bytes_read == len(text)


def test_a_log_with_no_newline_is_still_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(collect_mod, "LOG_HEAD", 1000)
    monkeypatch.setattr(collect_mod, "LOG_TAIL", 1000)
    p = tmp_path / "one-line.log"
    p.write_bytes(b"y" * 100_000)
    log = read_log(str(p), set())
    assert len(log.data) < 2200 and log.cut >= 98_000


def test_a_truncated_gzip_keeps_what_was_read_and_says_so(tmp_path):
    p = tmp_path / "cut.log.gz"
    p.write_bytes(gzip.compress((FALLBACK_LOG * 2000).encode(), compresslevel=1)[:2000])
    log = read_log(str(p), set())
    assert log.error and "cut short" in log.error and log.data and FALLBACK_LOG.encode()[:40] in log.data


@pytest.mark.parametrize("make,why", [
    (lambda d: d / "missing.log", "no such file"),
    (lambda d: d, "is a directory"),
])
def test_an_unreadable_log_is_an_error(tmp_path, make, why):
    with pytest.raises(CollectError, match=why):
        read_log(str(make(tmp_path)), set())


def test_past_the_total_a_log_is_listed_not_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(collect_mod, "MAX_LOG_BYTES", len(FALLBACK_LOG) + 10)
    p = tmp_path / "rank0.log"
    p.write_text(FALLBACK_LOG)
    first, second = read_logs([str(p), str(p)])
    assert first.data and not second.data and "not kept" in second.error


# ---- the command --------------------------------------------------------------------------------


def test_collect_puts_logs_in_the_bundle_and_check_diagnoses_them(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    log = tmp_path / "rank0.log.gz"
    log.write_bytes(gzip.compress(FALLBACK_LOG.encode()))
    out = tmp_path / "b.tar.gz"
    code, stdout, stderr = run_cli(["collect", "--root", str(root), "-o", str(out), "--timeout", "1", "--log", str(log)])
    assert code == 0, stderr
    assert "1 log in logs/" in stderr
    members = _members(out)
    assert members["logs/rank0.log"] == FALLBACK_LOG.encode()
    manifest = json.loads(members["bundle.json"])
    assert manifest["logs"] == [{"name": "logs/rank0.log", "source": str(log), "bytes_read": len(FALLBACK_LOG),
                                 "bytes_kept": len(FALLBACK_LOG), "cut_bytes": 0, "error": None}]
    code, rep = check_json(["--bundle", str(out), "--only", "logs"])
    (check,) = rep["checks"]
    assert check["id"] == "logs.diagnose" and check["status"] == "fail"
    assert "NCCL_SOCKET_FALLBACK" in [f["code"] for f in check["findings"]]
    assert rep["nccl"]["network"] == "Socket" and rep["nccl"]["version"] == "2.18.5"


def test_collect_refuses_a_missing_log_before_doing_anything(tmp_path):
    out = tmp_path / "b.tar.gz"
    code, stdout, stderr = run_cli(["collect", "--root", str(tmp_path), "-o", str(out), "--log", str(tmp_path / "nope.log")])
    assert code == 2 and "--log" in stderr and "no such file" in stderr
    assert not out.exists() and not list(tmp_path.glob("b.tar.gz.tmp*"))


def test_collect_help_says_what_is_kept():
    code, stdout, _ = run_cli(["collect", "--help"])
    assert code == 0
    flat = " ".join(stdout.replace("│", " ").split())
    assert "--log" in flat and "4 MiB" in flat and "28 MiB" in flat


# ---- the Host reads logs in pieces ----------------------------------------------------------------


class Counting:
    """Wraps a tree: how many bytes the biggest single read asked for."""

    def __init__(self, tree):
        self.tree, self.biggest = tree, 0

    def __getattr__(self, name):
        return getattr(self.tree, name)

    def read(self, path, limit):
        self.biggest = max(self.biggest, limit)
        return self.tree.read(path, limit)

    def read_at(self, path, offset, size):
        self.biggest = max(self.biggest, size)
        return self.tree.read_at(path, offset, size)


@pytest.mark.parametrize("kind", ["dir", "tar"])
def test_the_host_lists_and_streams_a_bundles_logs(tmp_path, kind):
    big = b"".join(b"%08d NCCL INFO something\n" % i for i in range(200_000))  # ~6 MiB
    root = tmp_path / "b"
    (root / "logs" / "job").mkdir(parents=True)
    (root / "logs" / "rank0.log").write_bytes(big)
    (root / "logs" / "job" / "rank1.log.gz").write_bytes(gzip.compress(b"packed\n"))
    (root / "cmd").mkdir()
    (root / "cmd" / "ibstat.txt").write_text("CA 'mlx5_0'\n")
    target = root
    if kind == "tar":
        target = tmp_path / "b.tar.gz"
        with tarfile.open(target, "w:gz") as tf:
            tf.add(root, arcname=".")
    host = open_host(bundle=str(target))
    assert host.logs() == ["/logs/job/rank1.log.gz", "/logs/rank0.log"]
    counting = Counting(host._tree)
    host._tree = counting
    got = b"".join(iter(lambda s=host.open_log("/logs/rank0.log"): s.read(1 << 16), b""))
    assert got == big and counting.biggest <= 1 << 20  # never the whole file in one read
    # Stored as it came; the log reader gunzips it (member by member, bounded pieces).
    from rdmadoctor.logs.reader import chunks

    assert b"".join(chunks(host.open_log("/logs/job/rank1.log.gz"))) == b"packed\n"
    assert "/logs" not in host.trace  # logs are a bundle's, never copied from a host by collect


def test_a_live_host_or_a_root_has_no_bundle_logs(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "x.log").write_text("hi\n")
    assert open_host(root=str(tmp_path)).logs() == []
    assert mem_host({"/logs/x.log": b"hi\n"}).logs() == ["/logs/x.log"]
