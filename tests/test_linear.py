"""Time per line is linear (issue 21, items 1 and 3): every knowledge-base row and line pattern on
long adversarial lines built from its own text, the scan and ``check --bundle`` on long lines, and
``run``, whose copy of the job's output never waits for the diagnosis.

Bounded in the tests themselves, never by wall clock: the pattern test runs in a subprocess that
times each search in CPU seconds of its own (tests/adversarial.py; a linear search of 64 KiB takes
a few milliseconds, the budget is a second, the quadratic ones took from two seconds to minutes),
the scans run under a CPU-time alarm (ITIMER_VIRTUAL: a loaded machine does not advance it), and
the run test asserts what was copied while the diagnosis was held, not how fast.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import adversarial
import pytest
from adversarial import cpu_budget
from conftest import FIXTURES

HERE = Path(__file__).resolve().parent
N = 65 * 1000


def test_every_pattern_is_linear_on_long_lines_made_from_its_own_text():
    """Every row of the knowledge base (read from the registry: a new row is covered) and every
    compiled pattern of the line machinery, searched in 64 KiB lines of its literal pieces
    repeated, long runs of its classes' characters after its needle and its examples."""
    from rdmadoctor.logs import kb

    names = {name for name, *_ in adversarial.cases()}
    assert {p.id for p in kb.patterns()} <= names
    assert {"rdmadoctor.logs.prefix._NCCL", "rdmadoctor.logs.prefix._WRAPPERS", "parsers.common.PROMPT",
            "rdmadoctor.logs.nccl._COLL_CHANNELS"} <= names
    p = subprocess.run([sys.executable, str(HERE / "adversarial.py"), "--budget", "1.0", "--max-slow", "5"],
                       capture_output=True, text=True, timeout=1200, cwd=HERE.parent)
    slow = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    assert slow == [] and p.stdout.rstrip().endswith("done"), (slow, p.stderr[-2000:])


LONG_LINES = {
    "NCCL WARN": b"NCCL WARN " + b"a" * N + b"\n",
    "prefixed NCCL WARN": b"host-1:12:34 [0] misc/socket.cc:50 NCCL WARN " + b"a" * N + b"\n",
    "kubectl-wrapped NCCL WARN": b"[pod/p-0/c] 2024-05-01T12:00:00.1Z NCCL WARN " + b"a" * N + b"\n",
    "NETDEV WATCHDOG": b"NETDEV WATCHDOG: " + b"a" * N + b"\n",
    "NETDEV WATCHDOG dashes": b"NETDEV WATCHDOG: " + b"-" * N + b"\n",
    "coll channels": b"NCCL INFO " + b"7" * N + b" coll channel\n",
    "mlx5 command": b"mlx5_core 0000:3b:00.0: Will cause a leak of a command resource " + b"A" * N + b"\n",
    "ibpanic spaces": b"ibpanic: [1] umad_init: can't init UMAD library: x" + b" " * N + b"!\n",
}


@pytest.mark.parametrize("name", sorted(LONG_LINES))
def test_the_scan_reads_a_long_line_in_linear_time(name):
    from rdmadoctor.logs.scan import diagnose_bytes

    with cpu_budget(10.0):  # about 0.05 s now; 20 to 60 s each before
        d = diagnose_bytes(LONG_LINES[name] + b"host-1:12:34 [0] NCCL INFO Using network IB\n")
    assert d.sources[0]["lines"] == 2 and (d.nccl or {}).get("network") == "IB"


def test_the_scan_reads_a_hundred_long_base64_lines_in_linear_time():
    from rdmadoctor.logs.scan import diagnose_bytes

    blob = base64.b64encode(os.urandom(N * 3 // 4))
    data = b"".join(b"RuntimeError: " + blob[i:] + blob[:i] + b"\n" for i in range(100))
    with cpu_budget(60.0):  # about 1 s now; killed at 300 s before
        d = diagnose_bytes(data)
    assert d.sources[0]["lines"] == 100


def test_check_bundle_with_long_lines_in_its_logs(tmp_path):
    from rdmadoctor.runner import Options, diagnose

    root = tmp_path / "bundle"
    shutil.copytree(FIXTURES / "healthy-ib", root, symlinks=True)
    (root / "logs").mkdir(exist_ok=True)
    (root / "logs" / "rank0.log").write_bytes(b"".join(LONG_LINES.values()))
    (root / "logs" / "dmesg.log").write_bytes(LONG_LINES["NETDEV WATCHDOG"] * 3)
    with cpu_budget(60.0):  # about 2 s now; 45 s for three such lines before
        d = diagnose(Options(bundle=str(root)))
    sources = {s["name"]: s for s in d.report["inventory"]["logs"]["sources"]}
    assert sources["logs/rank0.log"]["lines"] == len(LONG_LINES) and sources["logs/dmesg.log"]["lines"] == 3


# ---- run: the copy never waits for the diagnosis ----------------------------------------------


def test_run_copies_the_whole_output_while_the_diagnosis_is_held(tmp_path):
    """A job prints long NCCL lines and far more than a pipe holds while the diagnosis thread is
    held: the copy finishes complete and in order before the diagnosis is let go, what could not
    wait is counted and said, and the line numbers after it stay true."""
    from rdmadoctor import supervise
    from rdmadoctor.logs import Diagnoser

    gate = threading.Event()
    release = threading.Timer(300, gate.set)  # the test never hangs, even if the copy waits
    release.daemon = True
    release.start()

    class Held(Diagnoser):
        def feed(self, data: bytes, source: str = "-") -> None:
            gate.wait()
            super().feed(data, source)

    d = Held()
    diagnosing = supervise.Diagnosing(d, limit=1 << 20)
    watch = supervise.Watch(diagnosing, "job output")
    feeds = {name: supervise.LineFeed(watch.feed) for name in ("stdout", "stderr")}
    script = (
        "import sys\n"
        "w = sys.stdout.buffer.write\n"
        "w(b'h:1:2 [0] NCCL INFO NET/IB : No device found.\\n')\n"
        "for i in range(5): w(b'h:1:2 [0] NCCL WARN ' + b'a' * 65000 + b'\\n')\n"
        "for i in range(100000): w(b'line %06d\\n' % i)\n"
        "w(b'h:1:2 [0] NCCL WARN Call to recv failed : Connection reset by peer\\n')\n"
    )
    out_path, err_path = tmp_path / "out", tmp_path / "err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        job = supervise.Child([sys.executable, "-c", script], dict(os.environ), supervise.Sink(out.fileno()),
                          supervise.Sink(err.fileno()), on_data=lambda data, name: feeds[name].push(data),
                          on_eof=lambda name: feeds[name].close())
        result = job.run()
        held = not gate.is_set()
    gate.set()
    release.cancel()
    diagnosing.job_ended()
    watch.close()
    diagnosing.close()
    got = d.finish()
    assert result.exit_code == 0
    expected = (b"h:1:2 [0] NCCL INFO NET/IB : No device found.\n" + b"".join(b"h:1:2 [0] NCCL WARN " + b"a" * 65000 + b"\n" for _ in range(5))
                + b"".join(b"line %06d\n" % i for i in range(100000))
                + b"h:1:2 [0] NCCL WARN Call to recv failed : Connection reset by peer\n")
    assert out_path.read_bytes() == expected
    assert held, "the copy waited for the diagnosis"
    assert any("the diagnosis fell behind" in n for n in got.notes)
    assert got.sources[0]["lines"] == 1 + 5 + 100000 + 1
    lines = {f.data["pattern"]: f.data["evidence"][0]["line"] for f in got.findings}
    assert lines["nccl.ib_no_device"] == 1  # the first read: queued, never dropped
    assert lines.get("nccl.socket_io_failed", 100007) == 100007  # read or dropped, never misnumbered


def test_run_reads_nccl_batches_after_the_head_within_a_budget(monkeypatch):
    """A job printing NCCL channel lines for ever, its transport never shown, is read for at
    most READ_NCCL bytes after the head, as the middle of any output is counted, not read."""
    from rdmadoctor.supervise import diagnosis

    monkeypatch.setattr(diagnosis, "READ_HEAD", 1 << 20)
    monkeypatch.setattr(diagnosis, "READ_TAIL", 1 << 20)
    monkeypatch.setattr(diagnosis, "READ_NCCL", 2 << 20)

    class Counting:
        transport_shown = False

        def __init__(self) -> None:
            self.fed = 0
            self.notes: list[str] = []

        def feed(self, data: bytes, source: str = "-") -> None:
            self.fed += len(data)

        def skip(self, lines: int, nbytes: int, source: str = "-") -> None:
            pass

    d = Counting()
    w = diagnosis.Watch(d, "job output")
    batch = b"h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0\n" * 4096
    for _ in range((64 << 20) // len(batch)):
        w.feed(batch)
    w.close()
    assert d.fed <= (1 << 20) + (2 << 20) + (1 << 20) + 2 * len(batch)
    assert any("were not read" in n for n in d.notes)
