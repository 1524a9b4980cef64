"""`rdmadoctor run` with a slow diagnosis (issue 33, item 4): the job's output is copied whole
while the scan is busy or slowed, and rdmadoctor exits a bounded time after the job, the reading
cut with a note that says what was not read, the job's last lines still read with their true
numbers. Real child processes (python -c); the scan is slowed by a patched Diagnoser. Nothing here
asserts wall-clock time: the slow scan sleeps for each call, so that reading everything would take
far longer than the drain allowed, and every wait has a generous guard that only keeps a failure
from hanging the suite."""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from rdmadoctor import supervise
from rdmadoctor.logs import Diagnoser
from rdmadoctor.supervise import diagnosis

LAST = b"h:1:2 [0] misc/socket.cc:1 NCCL WARN Call to recv failed : Connection reset by peer\n"
FILLER_LINES = 60000  # 60 bytes each: 3.6 MB, some 55 slices of the diagnosis
JOB = (
    "import sys\n"
    "w = sys.stdout.buffer.write\n"
    "w(b'h:1:2 [0] NCCL INFO NET/IB : No device found.\\n')\n"
    f"for i in range({FILLER_LINES}): w(b'[rank0] step %08d loss 2.345678 lr 1.0e-04 tokens/s 12345.6\\n' % i)\n"
    f"w({LAST!r})\n"
    "sys.exit(1)\n"
)
TOTAL_LINES = 1 + FILLER_LINES + 1


def _run_job_under(d: Diagnoser, diagnosing: diagnosis.Diagnosing, tmp_path, after_copy=None):
    watch = diagnosis.Watch(diagnosing, "job output")
    feeds = {name: supervise.LineFeed(watch.feed) for name in ("stdout", "stderr")}
    out_path, err_path = tmp_path / "out", tmp_path / "err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        job = supervise.Child([sys.executable, "-c", JOB], dict(os.environ), supervise.Sink(out.fileno()),
                              supervise.Sink(err.fileno()), on_data=lambda data, name: feeds[name].push(data),
                              on_eof=lambda name: feeds[name].close())
        result = job.run()
    if after_copy is not None:
        after_copy()
    diagnosing.job_ended()
    watch.close()
    diagnosing.close()
    return result, out_path.read_bytes(), d.finish()


def test_the_copy_completes_while_the_scan_spins_on_the_cpu(tmp_path):
    """The scan is CPU-bound (a Python loop that never sleeps, holding the GIL as long as the
    interpreter lets it) until the job has ended: the job still writes everything, and it all
    reaches rdmadoctor's stdout, while the scan has read nothing."""
    ended = threading.Event()
    guard = threading.Timer(300, ended.set)  # never a hang, even if the copy waited
    guard.daemon = True
    guard.start()
    spun: list[bool] = []

    class Spinning(Diagnoser):
        def feed(self, data: bytes, source: str = "-") -> None:
            spun.append(True)
            while not ended.is_set():
                pass
            super().feed(data, source)

    d = Spinning()
    diagnosing = diagnosis.Diagnosing(d, drain_s=300)

    def after() -> None:
        held.append(not ended.is_set())
        ended.set()

    held: list[bool] = []
    result, out, got = _run_job_under(d, diagnosing, tmp_path, after_copy=after)
    guard.cancel()
    assert result.exit_code == 1
    assert held == [True], "the copy waited for the scan"
    assert spun, "the scan never ran while the job printed"
    assert out.endswith(LAST) and out.count(b"\n") == TOTAL_LINES
    assert got.sources[0]["lines"] == TOTAL_LINES  # read whole once let go (a drain of 300 s)
    assert not any("diagnosis was cut" in n for n in got.notes)


def test_a_slow_diagnosis_is_cut_after_the_job_ends_and_says_what_was_not_read(tmp_path):
    """The scan is held while the job prints (everything queues: 3.6 MB, under the queue's
    8 MiB), then reads one slice per 0.2 s. With 0.3 s to drain after the job's end, the reading
    is cut: a note says how many lines were not read, the lines after them keep their numbers,
    and the job's last line, the WARN that explains the failure, is read all the same."""
    released = threading.Event()
    guard = threading.Timer(300, released.set)
    guard.daemon = True
    guard.start()
    calls: list[int] = []

    class Slow(Diagnoser):
        def feed(self, data: bytes, source: str = "-") -> None:
            released.wait()
            calls.append(len(data))
            time.sleep(0.2)
            super().feed(data, source)

    d = Slow()
    diagnosing = diagnosis.Diagnosing(d, drain_s=0.3)
    result, out, got = _run_job_under(d, diagnosing, tmp_path, after_copy=released.set)
    guard.cancel()
    assert result.exit_code == 1
    assert out.endswith(LAST) and out.count(b"\n") == TOTAL_LINES  # the copy is whole
    cut = [n for n in got.notes if "the diagnosis was cut 0.3 s after the job ended" in n]
    assert cut, got.notes
    not_read = int(cut[0].split()[0])
    assert 0 < not_read < TOTAL_LINES
    assert "last 256 KiB were read" in cut[0]
    assert sum(calls) < len(out)  # not everything was read
    assert got.sources[0]["lines"] == TOTAL_LINES  # what was counted kept the numbering
    found = {f.data["pattern"]: f.data["evidence"][0]["line"] for f in got.findings if f.data.get("pattern")}
    assert found.get("nccl.socket_io_failed") == TOTAL_LINES, found


def test_run_exits_with_the_note_when_the_diagnosis_is_slow(tmp_path, monkeypatch, capfd):
    """The whole `run` (run_job, as the CLI calls it) with a scan that takes 0.2 s a slice and a
    drain of 0.3 s: it returns the job's status, and the --report-file's notes say what was not
    read; the job's own output is copied whole."""
    import rdmadoctor.logs

    class Slow(Diagnoser):
        def feed(self, data: bytes, source: str = "-") -> None:
            time.sleep(0.2)
            super().feed(data, source)

    monkeypatch.setattr(rdmadoctor.logs, "Diagnoser", Slow)
    monkeypatch.setattr(diagnosis, "DRAIN_S", 0.3)
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    env["RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    code = supervise.run_job([sys.executable, "-c", JOB], no_gate=True, report_file=str(report), env=env)
    out, err = capfd.readouterr()
    assert code == 1
    assert out.count("\n") == TOTAL_LINES and out.endswith(LAST.decode())
    doc = json.loads(report.read_text())
    assert any("the diagnosis was cut 0.3 s after the job ended" in n for n in doc["notes"]), doc["notes"]
    assert "rdmadoctor: " in err and "exited with status 1" in err
