"""Real tools on a simulated InfiniBand fabric: ibsim, libumad2sim, opensm, ibstat.

ibsim simulates the fabric of tests/ibsim/one-switch.net. A process run with
LD_PRELOAD=libumad2sim.so and SIM_HOST=<node> talks to it instead of /dev/infiniband/umad*,
sees one device ``ibsim0`` (the first port of that node) and reads a fake
/sys/class/infiniband that umad2sim writes under ./sys-<pid>/ in its working directory.

The tests read the node under test twice, from the real ``ibstat`` output (a bundle with
cmd/ibstat.txt) and from umad2sim's sysfs tree (``--root``), before and after opensm
configures the fabric, and require both readings to agree.

Debian packages: ibsim-utils, libumad2sim0, opensm, infiniband-diags. Root is not needed.
"""

from __future__ import annotations

import glob
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, check_json, codes_of

pytestmark = pytest.mark.real

IBSIM_DIR = ROOT / "tests" / "ibsim"
FABRIC = IBSIM_DIR / "one-switch.net"
SNAPSHOT = IBSIM_DIR / "snapshot_sysfs.py"
UMAD2SIM_GLOBS = (
    "/usr/lib/*/umad2sim/libumad2sim.so",  # Debian, Ubuntu (multiarch)
    "/usr/lib64/umad2sim/libumad2sim.so",  # Fedora, RHEL
    "/usr/lib/umad2sim/libumad2sim.so",
    "/usr/local/lib*/umad2sim/libumad2sim.so",  # built from source
)
TOOL_TIMEOUT = 120.0  # a client waits forever for an ibsim that is gone: never run one without a cap
# (a deadline, never a duration: a loaded machine can take seconds where an idle one takes 0.1 s)
HOST = "H-host"
PORT_FIELDS = ("state", "phys_state", "rate_gbps", "link_layer", "lid", "sm_lid")


def _umad2sim() -> str | None:
    for pattern in UMAD2SIM_GLOBS:
        for path in sorted(glob.glob(pattern)):
            return path
    return None


def _requirements() -> str | None:
    if not sys.platform.startswith("linux"):
        return "ibsim needs Linux"
    missing = [t for t in ("ibsim", "opensm", "ibstat") if shutil.which(t) is None]
    if _umad2sim() is None:
        missing.append("libumad2sim.so")
    if missing:
        return f"{', '.join(missing)} not installed (apt install ibsim-utils libumad2sim0 opensm infiniband-diags)"
    return None


class Sim:
    """One ibsim process and the preloaded clients run against it, all in one directory."""

    def __init__(self, workdir: Path, so: str):
        self.dir = workdir
        self.so = so
        # ibsim and its clients meet on abstract unix sockets named <IBSIM_SOCKNAME>:ctl,
        # :outN, :inPID (default "sim"): a name of our own keeps parallel runs apart.
        self.sockname = f"rdmadoctor-{os.getpid()}-{secrets.token_hex(4)}"
        self.ibsim: subprocess.Popen | None = None
        self.log = workdir / "ibsim.log"

    def env(self, node: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("IBSIM_", "SIM_", "OSM_"))}
        env.update(
            LD_PRELOAD=self.so,
            IBSIM_SOCKNAME=self.sockname,
            SIM_HOST=node,
            OSM_TMP_DIR=str(self.dir),
            OSM_CACHE_DIR=str(self.dir),
        )
        return env

    def start(self, fabric: Path = FABRIC) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "IBSIM_SERVER_NAME")}
        env["IBSIM_SOCKNAME"] = self.sockname
        with open(self.log, "wb") as log:
            self.ibsim = subprocess.Popen(
                ["ibsim", "-s", "-n", str(fabric)],
                cwd=self.dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        # ibsim parses the fabric, then binds its sockets: once :ctl is listed it is ready.
        # (A client started earlier would still connect, after a 2 s retry sleep.)
        want = f"@{self.sockname}:ctl"
        deadline = time.monotonic() + 60  # polled: returns as soon as ibsim listens
        while time.monotonic() < deadline:
            if self.ibsim.poll() is not None:
                pytest.fail(f"ibsim exited with {self.ibsim.returncode}:\n{self.log.read_text(errors='replace')}")
            try:
                with open("/proc/net/unix", encoding="ascii", errors="replace") as f:
                    # An abstract name shows as @name, padded with @ for its trailing NULs.
                    if any(line.rstrip().rstrip("@").endswith(want) for line in f):
                        return
            except OSError:
                time.sleep(0.5)
                return
            time.sleep(0.02)
        pytest.fail(f"ibsim did not open {want} within 60 s:\n{self.log.read_text(errors='replace')}")

    def run(self, argv: list[str], node: str, timeout: float = TOOL_TIMEOUT) -> subprocess.CompletedProcess:
        proc = subprocess.Popen(
            argv,
            cwd=self.dir,  # umad2sim writes its ./sys-<pid> tree here
            env=self.env(node),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            pytest.fail(
                f"{' '.join(argv)} (SIM_HOST={node}) did not finish within {timeout:g} s\n"
                f"stdout: {out.decode(errors='replace')}\nstderr: {err.decode(errors='replace')}\n"
                f"ibsim: {self.log.read_text(errors='replace')}"
            )
        res = subprocess.CompletedProcess(argv, proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))
        assert res.returncode == 0, f"{' '.join(argv)} (SIM_HOST={node}) exited {res.returncode}:\n{res.stdout}\n{res.stderr}"
        return res

    def ibstat_bundle(self, node: str, dest: Path) -> str:
        """Run the real ibstat as ``node``; save it as a bundle's cmd/ibstat.txt. Returns the text."""
        text = self.run(["ibstat"], node).stdout
        (dest / "cmd").mkdir(parents=True)
        (dest / "cmd" / "ibstat.txt").write_text(text)
        return text

    def sysfs_root(self, node: str, dest: Path) -> Path:
        """Copy the /sys tree umad2sim writes for ``node`` into ``dest`` (a root for --root)."""
        res = self.run([sys.executable, str(SNAPSHOT), str(dest)], node)
        assert res.stdout.split() == ["ibsim0"], res.stdout + res.stderr
        return dest

    def opensm_once(self, node: str = "H-sm") -> str:
        """One opensm sweep from ``node`` (assign LIDs, bring ports to ACTIVE), then exit."""
        log = self.dir / "opensm.log"
        # -F /dev/null: not the host's /etc/opensm/opensm.conf; -f: not /var/log/opensm.log.
        res = self.run(["opensm", "--once", "-F", os.devnull, "-f", str(log)], node, timeout=180)
        assert "SUBNET UP" in log.read_text(errors="replace"), res.stdout + log.read_text(errors="replace")
        return res.stdout

    def stop(self) -> None:
        if self.ibsim is None or self.ibsim.poll() is not None:
            return
        os.killpg(self.ibsim.pid, signal.SIGTERM)
        try:
            self.ibsim.wait(timeout=3)
        except subprocess.TimeoutExpired:
            os.killpg(self.ibsim.pid, signal.SIGKILL)
            self.ibsim.wait()


@pytest.fixture
def sim(tmp_path):
    why = _requirements()
    if why:
        pytest.skip(why)
    work = tmp_path / "sim"
    work.mkdir()
    s = Sim(work, _umad2sim())
    try:
        s.start()
        yield s
    finally:
        s.stop()


# ---- reading the reports ------------------------------------------------------------------


def read_ibstat(sim: Sim, node: str, tmp: Path) -> tuple[int, dict, str]:
    bundle = tmp / "ibstat-bundle"
    text = sim.ibstat_bundle(node, bundle)
    code, rep = check_json(["--bundle", str(bundle), "--only", "ib"])
    assert rep["inventory"]["rdma_source"] == "ibstat", rep["inventory"]
    return code, rep, text


def read_sysfs(sim: Sim, node: str, tmp: Path) -> tuple[int, dict]:
    root = sim.sysfs_root(node, tmp / "sysfs-root")
    code, rep = check_json(["--root", str(root), "--only", "ib"])
    assert rep["inventory"]["rdma_source"] == "sysfs", rep["inventory"]
    return code, rep


def port1(rep: dict) -> dict:
    devices = rep["inventory"]["rdma_devices"]
    # ibsim0 proves the tool talked to the simulator, not to a real HCA of this machine.
    assert [d["name"] for d in devices] == ["ibsim0"], devices
    ports = {p["port"]: p for p in devices[0]["ports"]}
    assert 1 in ports, ports
    return ports[1]


def findings(rep: dict, code: str) -> list[dict]:
    return [f for c in rep["checks"] for f in c["findings"] if f["code"] == code]


def assert_same_reading(from_ibstat: dict, from_sysfs: dict) -> None:
    """Devices, ports and every port field must agree where both sources know the value."""
    a = {d["name"]: d for d in from_ibstat["inventory"]["rdma_devices"]}
    b = {d["name"]: d for d in from_sysfs["inventory"]["rdma_devices"]}
    assert sorted(a) == sorted(b)
    diffs = []
    for name in a:
        for key in ("fw_ver", "node_type", "is_vf"):
            if a[name][key] is not None and b[name][key] is not None and a[name][key] != b[name][key]:
                diffs.append(f"{name} {key}: ibstat {a[name][key]!r}, sysfs {b[name][key]!r}")
        pa = {p["port"]: p for p in a[name]["ports"]}
        pb = {p["port"]: p for p in b[name]["ports"]}
        assert sorted(pa) == sorted(pb), f"{name} ports: ibstat {sorted(pa)}, sysfs {sorted(pb)}"
        for num in pa:
            for key in PORT_FIELDS:
                va, vb = pa[num][key], pb[num][key]
                if va is not None and vb is not None and va != vb:
                    diffs.append(f"{name}/{num} {key}: ibstat {va!r}, sysfs {vb!r}")
    assert not diffs, "ibstat and sysfs readings differ:\n" + "\n".join(diffs)


def ib_ports_status(rep: dict) -> str:
    return next(c["status"] for c in rep["checks"] if c["id"] == "ib.ports")


# ---- the fabric before and after the subnet manager ---------------------------------------


def test_ports_are_init_without_sm_and_active_after_opensm(sim, tmp_path):
    # Before any SM: the link trained (LinkUp) but nobody assigned a LID.
    code, rep, text = read_ibstat(sim, HOST, tmp_path / "before")
    assert re.search(r"^\s*State: Initializing$", text, re.M), text
    p = port1(rep)
    assert (p["state"], p["phys_state"], p["lid"], p["sm_lid"]) == ("INIT", "LinkUp", 0, 0), p
    assert p["link_layer"] == "InfiniBand" and p["rate_gbps"] == 40.0, p
    assert {"IB_PORT_INIT", "IB_NO_SM"} <= codes_of(rep, "ib.ports"), rep["checks"]
    assert [f["subject"] for f in findings(rep, "IB_PORT_INIT")] == ["ibsim0/1"]
    # One root cause: the port waits because no SM runs; it folds under IB_NO_SM, still an error.
    assert [(f["severity"], f.get("cause")) for f in findings(rep, "IB_PORT_INIT")] == [("error", "IB_NO_SM")]
    assert [f.get("cause") for f in findings(rep, "IB_NO_SM")] == [None]
    assert code == 1 and ib_ports_status(rep) == "fail"

    scode, srep = read_sysfs(sim, HOST, tmp_path / "before")
    sp = port1(srep)
    assert (sp["state"], sp["phys_state"], sp["lid"], sp["sm_lid"]) == ("INIT", "LinkUp", 0, 0), sp
    assert_same_reading(rep, srep)
    # umad2sim writes no link_layer file (nor did kernels before 2.6.37); libibumad and
    # ibstatus then assume InfiniBand, and so must we, or an INIT port goes unreported.
    assert sp["link_layer"] == "InfiniBand", sp
    assert {"IB_PORT_INIT", "IB_NO_SM"} <= codes_of(srep, "ib.ports"), srep["checks"]
    assert [f.get("cause") for f in findings(srep, "IB_PORT_INIT")] == ["IB_NO_SM"]
    assert scode == 1

    sim.opensm_once("H-sm")
    sm_text = sim.run(["ibstat"], "H-sm").stdout
    sm_lid = int(re.search(r"^\s*Base lid: (\d+)$", sm_text, re.M).group(1))
    assert sm_lid > 0, sm_text

    code, rep, text = read_ibstat(sim, HOST, tmp_path / "after")
    p = port1(rep)
    assert (p["state"], p["phys_state"]) == ("ACTIVE", "LinkUp"), p
    assert p["lid"] not in (None, 0) and p["lid"] != sm_lid, p
    assert p["sm_lid"] == sm_lid, (p, sm_text)
    assert not {"IB_PORT_INIT", "IB_NO_SM", "IB_PORT_DOWN"} & codes_of(rep), rep["checks"]
    assert code == 0 and ib_ports_status(rep) == "pass"

    scode, srep = read_sysfs(sim, HOST, tmp_path / "after")
    sp = port1(srep)
    assert (sp["state"], sp["phys_state"], sp["lid"], sp["sm_lid"]) == ("ACTIVE", "LinkUp", p["lid"], sm_lid), sp
    assert not {"IB_PORT_INIT", "IB_NO_SM", "IB_PORT_DOWN"} & codes_of(srep), srep["checks"]
    assert scode == 0
    assert_same_reading(rep, srep)


def test_facts_agree_beyond_the_report(sim, tmp_path):
    """The probe's facts (GUID, HCA type) from ibstat and from sysfs name the same port."""
    from rdmadoctor.checks._rdma import probe_inventory
    from rdmadoctor.engine import execute as engine
    from rdmadoctor.host import open_host

    sim.opensm_once()
    bundle = tmp_path / "bundle"
    sim.ibstat_bundle(HOST, bundle)
    root = sim.sysfs_root(HOST, tmp_path / "root")
    a = probe_inventory(engine.Context(open_host(bundle=str(bundle)), {}))
    b = probe_inventory(engine.Context(open_host(root=str(root)), {}))
    assert (a.source, b.source) == ("ibstat", "sysfs")
    (da,), (db,) = a.devices, b.devices
    assert da.node_guid == db.node_guid and da.node_guid and da.node_guid != "0000:0000:0000:0000", (da, db)
    assert (da.hca_type, da.fw_ver, da.node_type) == (db.hca_type, db.fw_ver, db.node_type) == ("simulator", "1", "CA")
    assert not a.warnings, a.warnings


def test_unplugged_port_reads_down_polling(sim, tmp_path):
    sim.opensm_once()  # an SM changes nothing for a port without a cable
    code, rep, _ = read_ibstat(sim, "H-unplugged", tmp_path)
    scode, srep = read_sysfs(sim, "H-unplugged", tmp_path)
    for r in (rep, srep):
        p = port1(r)
        assert (p["state"], p["phys_state"], p["lid"]) == ("DOWN", "Polling", 0), p
        (f,) = findings(r, "IB_PORT_DOWN")
        assert f["subject"] == "ibsim0/1" and f["severity"] == "error", f
        assert "no cable" in f["message"] and "Polling" in f["message"], f
        assert "IB_PORT_INIT" not in codes_of(r)
    assert code == scode == 1
    assert_same_reading(rep, srep)


def test_two_fabrics_run_side_by_side(sim, tmp_path):
    """A second ibsim with its own socket name: opensm on one leaves the other untouched."""
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    other = Sim(other_dir, sim.so)
    try:
        other.start()
        sim.opensm_once()
        active = sim.run(["ibstat"], HOST).stdout
        waiting = other.run(["ibstat"], HOST).stdout
    finally:
        other.stop()
    assert re.search(r"State: Active$", active, re.M), active
    assert re.search(r"State: Initializing$", waiting, re.M), waiting


# ---- a tool that hangs --------------------------------------------------------------------


def _gone(pid: int) -> bool:
    """Dead: no such process, or a zombie nobody reaped yet (PID 1 in a container may not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def test_hung_tool_is_killed_with_its_children(tmp_path, monkeypatch):
    from rdmadoctor.host import run_tool

    if not Path("/proc/self/stat").exists():
        pytest.skip("no /proc to look for leftover processes")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    pidfile = tmp_path / "sleep.pid"
    fake = bindir / "ibstat"
    # Like ibstat stuck on a umad that never answers, with a child of its own: killing only the
    # shell would leave the sleep behind, holding our stdout pipe open.
    fake.write_text(f"#!/bin/sh\necho \"CA 'mlx5_0'\"\nsleep 300 &\necho $! > {pidfile}\nwait\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    assert shutil.which("ibstat") == str(fake)

    start = time.monotonic()
    res = run_tool(("ibstat",), timeout=0.5)
    took = time.monotonic() - start

    # Not a speed claim: the tool's child sleeps 300 s, so returning at all before that proves
    # the run did not wait for it (a loaded machine can take seconds, never minutes).
    assert took < 150, took
    assert res.timed_out and res.text is None, res
    assert "did not finish within 0.5 s" in (res.error or ""), res.error
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 60  # polled: a killed process on a loaded machine may take a while
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    if not _gone(pid):
        os.kill(pid, signal.SIGKILL)
        pytest.fail(f"the hung tool's child (pid {pid}) survived the timeout")
