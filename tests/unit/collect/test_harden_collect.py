"""Issue 10, items 7-10 and `collect --timeout`: `collect` against tools, outputs and
environments that misbehave.

Time is bounded by counting, never by the clock: bytes a tool's output kept, processes left
behind, whether a call returned at all (a thread joined with a long grace that only stops a
regression from hanging the suite). Memory is the peak (``ru_maxrss``) of a child process.
"""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import sys
import tarfile
import textwrap
import threading
from pathlib import Path

import pytest
from conftest import run_cli

from rdmadoctor.host import open_host

PY = sys.executable
GRACE = 120  # seconds a regression may hang before the test gives up on it (not a measurement)


def _w(root: Path, rel: str, data: str | bytes = "") -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data.encode() if isinstance(data, str) else data)


@pytest.fixture
def small_root(tmp_path: Path) -> Path:
    """A root with one ACTIVE IB port: enough for collect to run every check."""
    root = tmp_path / "node"
    ib = "sys/devices/pci0000:00/0000:01:00.0/infiniband/mlx5_0"
    for f, v in {"node_type": "1: CA", "ports/1/state": "4: ACTIVE", "ports/1/phys_state": "5: LinkUp",
                 "ports/1/rate": "400 Gb/sec (4X NDR)", "ports/1/link_layer": "InfiniBand"}.items():
        _w(root, f"{ib}/{f}", v + "\n")
    (root / "sys/class/infiniband").mkdir(parents=True)
    os.symlink("../../devices/pci0000:00/0000:01:00.0/infiniband/mlx5_0", root / "sys/class/infiniband/mlx5_0")
    _w(root, "proc/modules", "mlx5_ib 483328 0 - Live 0x0\n")
    return root


def _tool(bindir: Path, name: str, script: str) -> Path:
    bindir.mkdir(exist_ok=True)
    p = bindir / name
    p.write_text("#!/bin/sh\n" + textwrap.dedent(script))
    p.chmod(0o755)
    return p


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for its parent counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _stays(pid: int) -> bool:
    """True when ``pid`` still runs after a grace for a SIGKILL already sent to take effect: a
    killed process on a loaded machine may need a moment to be scheduled and exit. Bounded by
    count (200 looks), and only a process that was not killed uses all of it."""
    import time

    for _ in range(200):
        if not _alive(pid):
            return False
        time.sleep(0.05)
    return True


def _kill(pid: int) -> None:
    try:
        os.kill(pid, 9)
    except OSError:
        pass


def _in_thread(fn):
    box: dict = {}
    t = threading.Thread(target=lambda: box.setdefault("v", fn()), daemon=True)
    t.start()
    t.join(GRACE)
    return t, box


def _members(bundle: Path) -> dict[str, bytes]:
    with tarfile.open(bundle) as tf:
        return {m.name: (tf.extractfile(m).read() if m.isfile() else b"") for m in tf.getmembers()}


_HWM = """
import atexit, sys
def _hwm(path=sys.argv.pop(1)):
    with open("/proc/self/status") as f, open(path, "w") as out:
        out.write(next(line for line in f if line.startswith("VmHWM:")).split()[1])
atexit.register(_hwm)
"""


def _child_peak(code: str, hwm: Path, env: dict[str, str] | None = None, as_limit: int | None = None) -> tuple[int, str, int]:
    """Run ``code`` in a child Python; (exit code, output, peak RSS in bytes). The peak is the
    child's own VmHWM, written as it exits (wait4's ru_maxrss would count the pages of this big
    test process the child was forked from). ``as_limit`` caps the child's address space, so
    that a regression fails with MemoryError instead of eating the machine."""

    def limit() -> None:
        if as_limit:
            resource.setrlimit(resource.RLIMIT_AS, (as_limit, as_limit))

    proc = subprocess.run([PY, "-c", _HWM + code, str(hwm)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                          preexec_fn=limit)
    peak = int(hwm.read_text()) * 1024 if hwm.exists() else -1
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), peak


# ---- 7: a tool that never stops talking ------------------------------------------------------


def test_endless_output_is_cut_at_the_cap_and_the_tool_killed(tmp_path: Path) -> None:
    # `yes` installed as ibstat: the old reader kept every byte until the timeout (6-12 GB) and
    # then read on after the kill. Now reading stops at MAX_OUTPUT and the tool is killed at once.
    pidfile = tmp_path / "yes.pid"
    bindir = tmp_path / "bin"
    _tool(bindir, "ibstat", f"echo $$ > {pidfile}\nexec yes\n")
    code = textwrap.dedent(f"""
        import json, os
        os.environ["PATH"] = {str(bindir)!r} + os.pathsep + os.environ["PATH"]
        from rdmadoctor.host import run_tool
        from rdmadoctor.host.tools import MAX_OUTPUT
        res = run_tool(("ibstat",), timeout=600)
        print(json.dumps({{"kept": len(res.text or ""), "cap": MAX_OUTPUT, "truncated": res.truncated,
                           "timed_out": res.timed_out, "error": res.error}}))
    """)
    rc, out, peak = _child_peak(code, tmp_path / "hwm", as_limit=2 << 30)
    pid = int(pidfile.read_text())
    alive = _stays(pid)
    _kill(pid)
    assert rc == 0, out[-2000:]
    got = json.loads(out.splitlines()[-1])
    assert got["kept"] == got["cap"] and got["truncated"] is True and got["timed_out"] is False
    assert f"cut at {got['cap']} bytes" in got["error"]
    assert not alive  # killed as soon as the cap was reached, long before the 600 s timeout
    # What the child held: the interpreter (~10 MiB), the kept cap, and pieces of it being joined
    # (27 MiB measured; 7 GB before).
    assert 0 < peak < 64 * 1024 * 1024, peak


def test_collect_records_a_cut_output_and_check_reads_it_as_cut(tmp_path: Path, small_root: Path) -> None:
    bindir = tmp_path / "bin"
    pidfile = tmp_path / "yes.pid"
    _tool(bindir, "ibstat", f"echo $$ > {pidfile}\nexec yes\n")
    out = tmp_path / "b.tar.gz"
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    code = f"from rdmadoctor.cli import main; main(['collect', '--root', {str(small_root)!r}, '-o', {str(out)!r}, '--timeout', '600'])"
    rc, text, peak = _child_peak(code, tmp_path / "hwm", env=env, as_limit=3 << 30)
    _kill(int(pidfile.read_text()))
    assert rc == 0, text[-3000:]
    assert "Traceback" not in text and "ibstat: output cut at" in text, text
    m = _members(out)
    from rdmadoctor.host.tools import MAX_OUTPUT

    assert len(m["cmd/ibstat.txt"]) == MAX_OUTPUT and set(m["cmd/ibstat.txt"]) == {ord("y"), ord("\n")}
    errors = json.loads(m["cmd/errors.json"])["ibstat"]
    assert errors["truncated"] is True and errors["timed_out"] is False and errors["output_recorded"] is True
    assert json.loads(m["bundle.json"])["commands_failed"]["ibstat"]["truncated"] is True
    # The bundle's reading of it says it is cut, and the text is there for the parsers.
    res = open_host(bundle=str(out)).cmd("ibstat")
    assert res.truncated and len(res.text) == MAX_OUTPUT
    assert f"cut at {MAX_OUTPUT} bytes" in res.error and "at collect time" in res.error
    assert 0 < peak < 256 * 1024 * 1024, peak  # 50 MiB measured: the checks ran too


def test_a_report_says_which_tool_output_it_judged_cut(tmp_path: Path) -> None:
    # A bundle whose lspci -vvv collect stopped at its cap: the PCIe checks read the devices it
    # lists, and the report (JSON and text) says that the rest of that output was never seen.
    from rdmadoctor.host.tools import MAX_OUTPUT, cut_message

    root = tmp_path / "b"
    _w(root, "sys/class/infiniband/.keep")
    _w(root, "cmd/lspci.txt", "00:00.0 Host bridge: Intel Corporation Device 09a2 (rev 04)\n\tSubsystem: Intel Corporation Device 0000\n")
    _w(root, "cmd/errors.json", json.dumps({"lspci": {"argv": ["lspci", "-vvv"], "error": f"lspci -vvv: {cut_message(MAX_OUTPUT)}",
                                                     "timed_out": False, "truncated": True, "output_recorded": True}}))
    whole = tmp_path / "whole.tar.gz"
    cut = tmp_path / "cut.tar.gz"
    with tarfile.open(cut, "w:gz") as tf:
        tf.add(root, arcname=".")
    (root / "cmd" / "errors.json").unlink()
    with tarfile.open(whole, "w:gz") as tf:
        tf.add(root, arcname=".")

    code, out, err = run_cli(["check", "--bundle", str(cut), "--json"])
    notes = json.loads(out)["host"]["notes"]
    assert len(notes) == 1 and "`lspci`" in notes[0] and "cmd/lspci.txt" in notes[0] and f"cut at {MAX_OUTPUT} bytes" in notes[0], notes
    code, text, err = run_cli(["check", "--bundle", str(cut)])
    assert "Not read (the checks judged without it):" in text and f"cut at {MAX_OUTPUT} bytes" in text
    # The same output recorded whole: nothing to say.
    code, out, err = run_cli(["check", "--bundle", str(whole), "--json"])
    assert json.loads(out)["host"]["notes"] == []
    code, text, err = run_cli(["check", "--bundle", str(whole)])
    assert "Not read" not in text


# ---- 8: a tool whose grandchild keeps its stdout --------------------------------------------


@pytest.mark.parametrize("leader", ["exits", "hangs"])
def test_a_setsid_grandchild_holding_stdout_never_blocks_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, leader: str) -> None:
    from rdmadoctor.host import run_tool

    gpid = tmp_path / "grandchild.pid"
    lpid = tmp_path / "leader.pid"
    bindir = tmp_path / "bin"
    # The grandchild leaves the tool's process group and session (setsid) and keeps stdout open:
    # killing the group does not reach it, and the pipe never reaches end of file.
    tail = "exit 0" if leader == "exits" else "exec sleep 1000"
    _tool(bindir, "ibstat", f"""
        echo $$ > {lpid}
        echo "CA 'mlx5_0'"
        setsid sh -c 'echo $$ > {gpid}; exec sleep 1000' &
        {tail}
    """)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    t, box = _in_thread(lambda: run_tool(("ibstat",), timeout=1.0))
    pids = [int(p.read_text()) for p in (lpid, gpid) if p.exists() and p.read_text().strip()]
    left = [p for p in pids if _stays(p)] if "v" in box else pids
    for p in pids:
        _kill(p)  # unblocks the old reader, whatever happened
    t.join(GRACE)
    assert "v" in box, "run_tool blocked on a pipe a setsid grandchild held open"
    res = box["v"]
    assert left == [], f"left running: {left}"
    if leader == "exits":
        # Its own output is whole (it exited); the straggler is said.
        assert res.text == "CA 'mlx5_0'\n" and not res.timed_out
        assert "kept its output open" in (res.error or "")
    else:
        assert res.timed_out and res.text is None and "did not finish within 1 s" in res.error


def test_a_tool_that_closes_its_output_but_keeps_running_is_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rdmadoctor.host import run_tool

    lpid = tmp_path / "leader.pid"
    _tool(tmp_path / "bin", "ibstat", f"echo $$ > {lpid}\necho partial\nexec >/dev/null 2>&1\nexec sleep 1000\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    t, box = _in_thread(lambda: run_tool(("ibstat",), timeout=1.0))
    pid = int(lpid.read_text())
    alive = _stays(pid) if "v" in box else True
    _kill(pid)
    assert "v" in box and box["v"].timed_out and box["v"].text is None
    assert not alive


# ---- 9: -o and what is already there ---------------------------------------------------------


def _collect(root: Path, out: str) -> tuple[int, str, str]:
    return run_cli(["collect", "--root", str(root), "-o", out])


def test_a_symlink_planted_at_a_temp_name_is_never_followed(tmp_path: Path, small_root: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    drop = tmp_path / "drop"
    drop.mkdir()
    out = drop / "b.tar.gz"
    # The old writer opened `<out>.tmp<PID>` with truncation: a name anyone could plant a link at.
    for name in (f"b.tar.gz.tmp{os.getpid()}", *(f"b.tar.gz.tmp{n}" for n in range(os.getpid() - 5, os.getpid() + 5))):
        if not (drop / name).exists():
            os.symlink(victim, drop / name)
    code, stdout, stderr = _collect(small_root, str(out))
    assert code == 0, stderr
    assert victim.read_text() == "precious\n"
    assert stat.S_ISREG(os.lstat(out).st_mode) and out.read_bytes()[:2] == b"\x1f\x8b"
    assert all(p.is_symlink() for p in drop.iterdir() if p.name != "b.tar.gz")  # the plants untouched
    assert not [p for p in drop.iterdir() if not p.is_symlink() and p.name != "b.tar.gz"]  # no temp left


def _fifo(p: Path) -> Path:
    os.mkfifo(p)
    return p


def _chardev(p: Path) -> Path:
    try:
        os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # what /dev/null is
    except PermissionError:
        pytest.skip("cannot make a device node here (not root)")
    return p


def _link(p: Path) -> Path:
    target = p.parent / "target.txt"
    target.write_text("keep\n")
    os.symlink(target, p)
    return p


@pytest.mark.parametrize("make", [_fifo, _chardev, _link], ids=["fifo", "device", "symlink"])
def test_output_onto_something_not_a_regular_file_is_refused(tmp_path: Path, small_root: Path, make) -> None:
    target = make(tmp_path / "out.tar.gz")
    before = os.lstat(target)
    code, stdout, stderr = _collect(small_root, str(target))
    assert code == 2 and stdout == "", stderr
    assert stderr.startswith(f"rdmadoctor: error: refusing to write the bundle to {target}: ") and "Traceback" not in stderr
    assert "  hint: " in stderr
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)  # left as it was
    if target.is_symlink():
        assert (tmp_path / "target.txt").read_text() == "keep\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["node", "out.tar.gz"] + (["target.txt"] if make is _link else []))


def test_output_onto_an_existing_regular_file_replaces_it_whole(tmp_path: Path, small_root: Path) -> None:
    out = tmp_path / "b.tar.gz"
    out.write_text("an old bundle\n")
    os.chmod(out, 0o640)
    code, stdout, stderr = _collect(small_root, str(out))
    assert code == 0, stderr
    assert out.read_bytes()[:2] == b"\x1f\x8b" and "bundle.json" in _members(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.tar.gz", "node"]


# ---- 10: bytes that are not UTF-8 in the environment ----------------------------------------


def test_a_non_utf8_environment_value_is_recorded_and_read_back(tmp_path: Path, small_root: Path) -> None:
    out = tmp_path / "b.tar.gz"
    env = {k: v for k, v in os.environb.items() if not k.startswith(b"NCCL_")}
    env[b"NCCL_IB_HCA"] = b"mlx\xff"
    env[b"NCCL_SOCKET_IFNAME"] = b"eth0"
    proc = subprocess.run([PY, "-m", "rdmadoctor", "collect", "--root", str(small_root), "-o", str(out)], env=env,
                          capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")
    assert b"Traceback" not in proc.stderr
    m = _members(out)
    assert b"NCCL_IB_HCA=mlx\xff\n" in m["cmd/env.txt"]  # the bytes as `env` would print them
    manifest = json.loads(m["bundle.json"])
    assert manifest["env_not_utf8"] == {"NCCL_IB_HCA": "mlx\\xff"}
    json.loads(m["runtime.json"].decode("ascii"))  # plain ASCII JSON, any reader takes it
    host = open_host(bundle=str(out))
    assert host.runtime.env["NCCL_IB_HCA"] == "mlx\udcff" and host.runtime.env["NCCL_SOCKET_IFNAME"] == "eth0"
    # check --bundle reads it back: a finding on NCCL_IB_HCA, no traceback, in text and JSON.
    for args in (["--json"], []):
        chk = subprocess.run([PY, "-m", "rdmadoctor", "check", "--bundle", str(out), *args], capture_output=True)
        assert chk.returncode in (0, 1, 2) and b"Traceback" not in chk.stderr, chk.stderr
        assert b"NCCL_IB_HCA" in chk.stdout
    rep = json.loads(subprocess.run([PY, "-m", "rdmadoctor", "check", "--bundle", str(out), "--json"], capture_output=True).stdout)
    nccl = next(c for c in rep["checks"] if c["id"] == "nccl.env")
    assert any(f["subject"] == "NCCL_IB_HCA" and f["severity"] in ("error", "warning") for f in nccl["findings"]), nccl


# ---- --timeout -------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400", "0", "-1", "1e20", "3601"])
def test_collect_timeout_is_finite_positive_and_bounded(tmp_path: Path, small_root: Path, value: str) -> None:
    out = tmp_path / "b.tar.gz"
    code, stdout, stderr = run_cli(["collect", "--root", str(small_root), "-o", str(out), "--timeout", value])
    assert code == 2 and stdout == "", stderr
    assert stderr.startswith("rdmadoctor: error: --timeout ") and "  hint: " in stderr and "Traceback" not in stderr
    assert not out.exists()
