"""Socket-only pools (issue 11): the tcp profile, NCCL's socket interfaces judged for speed and MTU,
the labels, and the netlink facts a bundle carries.

The fixtures (tests/fixtures/tcp-pool*, generated) are a node without RDMA whose pod trains over its
25 Gb/s eth0; variants are generated here from the same description. The last tests build real
interfaces in a network namespace (veth pairs, as tests/system/test_netns.py does) and run the CLI, live and
on a bundle `collect` made there; they need root and iproute2 and skip cleanly otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile

import pytest
from conftest import FIXTURES, ROOT, check_json

from rdmadoctor import fixturegen
from rdmadoctor.core import labels as L
from rdmadoctor.fixturegen import NetIf

POOL = FIXTURES / "tcp-pool"


def findings(rep: dict, check_id: str | None = None) -> list[dict]:
    return [f for c in rep["checks"] if check_id is None or c["id"] == check_id for f in c["findings"]]


def problems(rep: dict) -> set[str]:
    return {f"{f['severity']}:{f['code']}" for f in findings(rep) if f["severity"] != "info"}


def socket_finding(rep: dict, code: str) -> dict:
    (f,) = [f for f in findings(rep, "nccl.env") if f["code"] == code]
    return f


def variant(tmp_path, change, name="pool") -> str:
    """The tcp-pool node with ``change`` applied, written as a bundle directory."""
    node = fixturegen.SCENARIOS["tcp-pool"]()
    change(node)
    dest = tmp_path / name
    fixturegen.write_dir(fixturegen.build(node), str(dest))
    return str(dest)


def tcp(bundle, *more: str) -> tuple[int, dict]:
    return check_json(["--bundle", str(bundle), "--profile", "tcp", "--verbose", *more])


# ---- the profile: a socket pool passes, with its verdict and labels -----------------------------


def test_socket_pool_passes_under_its_profile_with_the_verdict():
    code, rep = tcp(POOL)
    assert code == 0 and rep["status"] == "pass", problems(rep)
    (no_rdma,) = findings(rep, "ib.devices")
    assert (no_rdma["code"], no_rdma["severity"]) == ("RDMA_NOT_REQUIRED", "info")
    f = socket_finding(rep, "NCCL_SOCKET_TRANSPORT")
    assert f["data"]["verdict"] == "ready to train over sockets on eth0 at 25 Gb/s"
    assert "NCCL will use eth0 (10.20.0.7) [recorded by collect]" in f["message"] and "eth0 at 25 Gb/s, MTU 9000" in f["message"]
    # NCCL_IB_DISABLE is what this pool expects, not an error.
    (ib_off,) = [x for x in findings(rep, "nccl.env") if x["subject"] == "NCCL_IB_DISABLE"]
    assert ib_off["severity"] == "info" and "as the profile expects" in ib_off["message"]
    # Nothing RDMA-only is asked for: no modules, no GPUDirect RDMA, no IPC_LOCK (the pod has none).
    assert not {f["code"] for f in findings(rep)} & {"MOD_MISSING", "GDR_PEERMEM_MISSING", "CAP_IPC_LOCK_MISSING", "IB_NO_DEVICES"}
    assert rep["labels"][L.RDMA_CAPABLE] == "false" and rep["labels"][L.READY] == "true"


def test_the_same_pool_under_the_generic_profile_wants_rdma():
    code, rep = check_json(["--bundle", str(POOL)])
    assert code == 1 and "error:IB_NO_DEVICES" in problems(rep)
    assert rep["labels"][L.READY] == "false"


def test_labels_of_a_socket_pool_are_computed_from_the_report_alone():
    code, rep = tcp(POOL)
    labels, notes, not_ready = L.compute(rep)
    assert labels[L.RDMA_CAPABLE] == "false" and labels[L.READY] == "true" and not_ready == []
    assert labels[L.LINK_LAYER] == "none" and labels[L.ACTIVE_PORTS] == "0"


# ---- the interface: slow, missing, down, without an address, MTU, speed unknown ----------------


def test_a_slow_interface_among_the_matched_ones_fails_with_the_fast_one_as_the_fix():
    code, rep = tcp(FIXTURES / "tcp-pool-slow")
    assert code == 1 and problems(rep) == {"error:NCCL_SOCKET_IFNAME_SLOW"}
    f = socket_finding(rep, "NCCL_SOCKET_IFNAME_SLOW")
    assert "eth1 runs at 1 Gb/s" in f["message"] and "expected at least 25 Gb/s" in f["message"]
    assert f["data"]["slow"] == {"eth1": 1000}
    assert f["pod"]["env"][0]["name"] == "NCCL_SOCKET_IFNAME" and f["pod"]["env"][0]["value"] == "=eth0"
    assert rep["labels"][L.READY] == "false"
    # A pool whose interfaces are 1 Gb/s by design says so.
    code, rep = tcp(FIXTURES / "tcp-pool-slow", "--set", "socket_min_gbps=1")
    assert code == 0
    assert socket_finding(rep, "NCCL_SOCKET_TRANSPORT")["data"]["verdict"] == "ready to train over sockets on eth0 at 25 Gb/s, eth1 at 1 Gb/s"


def test_only_a_slow_interface_names_no_faster_one(tmp_path):
    def slow(node):
        node.netifs[0].speed = 10000

    code, rep = tcp(variant(tmp_path, slow))
    f = socket_finding(rep, "NCCL_SOCKET_IFNAME_SLOW")
    assert "eth0 runs at 10 Gb/s" in f["message"] and "No interface here runs at 25 Gb/s" in f["remedy"] and "pod" not in f


@pytest.mark.parametrize(
    "change,code,text",
    [
        (lambda n: n.env.__setitem__("NCCL_SOCKET_IFNAME", "=eth7"), "NCCL_SOCKET_IFNAME_NO_MATCH", "matches no interface"),
        (lambda n: setattr(n.netifs[0], "operstate", "down"), "NCCL_SOCKET_IFNAME_NO_MATCH", "eth0 (down)"),
        (lambda n: setattr(n.netifs[0], "ipv4", None), "NCCL_SOCKET_IFNAME_NO_ADDR", "none has an IP address"),
    ],
    ids=["missing", "down", "no-address"],
)
def test_missing_down_or_addressless_interface_fails(tmp_path, change, code, text):
    rc, rep = tcp(variant(tmp_path, change))
    assert rc == 1 and f"error:{code}" in problems(rep)
    assert text in socket_finding(rep, code)["message"]


def test_mtu_below_the_pools_is_a_warning(tmp_path):
    def mtu1500(node):
        node.netifs[0].mtu = 1500

    rc, rep = tcp(variant(tmp_path, mtu1500), "--set", "socket_min_mtu=9000")
    assert rep["status"] == "warn" and problems(rep) == {"warning:NCCL_SOCKET_IFNAME_MTU_LOW"}
    assert "ip link set dev eth0 mtu 9000" in socket_finding(rep, "NCCL_SOCKET_IFNAME_MTU_LOW")["remedy"]
    assert tcp(POOL, "--set", "socket_min_mtu=9000")[1]["status"] == "pass"


def test_a_virtio_nic_without_a_speed_is_a_warning_and_the_pool_is_ready(tmp_path):
    """Terway ENI / virtio-net report speed -1: the socket pools are built on them (issue 15, item 3)."""
    def virtio(node):
        node.netifs[0].speed = -1

    bundle = variant(tmp_path, virtio)
    rc, rep = tcp(bundle)
    assert rc == 0 and rep["status"] == "warn" and problems(rep) == {"warning:NCCL_SOCKET_SPEED_NOT_REPORTED"}
    f = socket_finding(rep, "NCCL_SOCKET_SPEED_NOT_REPORTED")
    assert "/sys/class/net/eth0/speed is -1" in f["message"] and "iperf3 -c" in f["remedy"] and "all_reduce_perf" in f["remedy"]
    assert socket_finding(rep, "NCCL_SOCKET_TRANSPORT")["data"]["verdict"] == "ready to train over sockets on eth0 (speed not reported)"
    assert rep["labels"][L.READY] == "true"
    proc = subprocess.run([sys.executable, "-m", "rdmadoctor", "preflight", "--bundle", bundle, "--profile", "tcp"],
                          capture_output=True, text=True, cwd=str(ROOT), timeout=300)
    assert proc.returncode == 0 and "GO" in proc.stdout and "NO-GO" not in proc.stdout, proc.stdout + proc.stderr
    proc = subprocess.run([sys.executable, "-m", "rdmadoctor", "label", "--publish", "stdout", "--bundle", bundle, "--profile", "tcp"],
                          capture_output=True, text=True, cwd=str(ROOT), timeout=300)
    assert proc.returncode == 0 and "rdmadoctor.io/ready=true" in proc.stdout.splitlines(), proc.stderr
    rc, rep = tcp(bundle, "--set", "socket_min_gbps=null")
    assert rc == 0 and rep["status"] == "pass"
    assert socket_finding(rep, "NCCL_SOCKET_TRANSPORT")["data"]["verdict"] == "ready to train over sockets on eth0 (speed not reported)"


def test_a_speed_that_cannot_be_read_is_still_unknown(tmp_path):
    def unreadable(node):
        node.netifs[0].speed = None  # no speed file at all: nothing was read, nothing is judged

    rc, rep = tcp(variant(tmp_path, unreadable))
    assert rc == 2 and problems(rep) == {"unknown:NCCL_SOCKET_SPEED_UNKNOWN"}


def test_unset_ifname_in_a_socket_pool(tmp_path):
    def unset_two(node):
        del node.env["NCCL_SOCKET_IFNAME"]
        node.netifs.insert(1, NetIf("eth1", speed=1000, ipv4="192.168.10.7"))

    rc, rep = tcp(variant(tmp_path, unset_two, "two"))
    f = socket_finding(rep, "NCCL_SOCKET_IFNAME_UNSET")
    assert f["severity"] == "warning" and f["data"]["interfaces"] == ["eth0", "eth1"] and '"=eth0"' in f["remedy"]
    assert "error:NCCL_SOCKET_IFNAME_SLOW" in problems(rep)  # NCCL would use the 1 Gb/s one too

    def unset_one(node):
        del node.env["NCCL_SOCKET_IFNAME"]

    rc, rep = tcp(variant(tmp_path, unset_one, "one"))
    assert rc == 0
    assert socket_finding(rep, "NCCL_SOCKET_TRANSPORT")["data"]["verdict"] == "ready to train over sockets on eth0 at 25 Gb/s"


def test_socket_pool_with_rdma_hardware_disabling_ib_is_on_purpose():
    # The RoCE fixture with IB turned off: an error in an RDMA pool, the design in a socket pool.
    rc, rep = check_json(["--bundle", str(FIXTURES / "roce"), "--profile", "tcp", "--verbose"])
    assert "error:NCCL_IB_DISABLED_BY_ENV" not in problems(rep)


def test_speed_is_judged_only_when_sockets_carry_the_data():
    # An RDMA pool that bootstraps over a slow eth0: NET/IB carries the data, no speed verdict.
    rc, rep = check_json(["--bundle", str(FIXTURES / "roce"), "--set", "socket_min_gbps=400", "--verbose"])
    assert not [f for f in findings(rep, "nccl.env") if f["code"].startswith("NCCL_SOCKET_IFNAME_SLOW")]


def test_bundle_without_recorded_interfaces_reads_sysfs(tmp_path):
    def no_record(node):
        node.record_interfaces = False

    rc, rep = tcp(variant(tmp_path, no_record))
    f = socket_finding(rep, "NCCL_SOCKET_TRANSPORT")
    assert "[sysfs]" in f["message"] and f["data"]["verdict"] == "ready to train over sockets on eth0 at 25 Gb/s"


def test_pyroute2_stays_off_the_plain_check_path():
    code = (
        "import sys; from rdmadoctor.cli import main\n"
        "try:\n main(['check', '--json'])\n"
        "except SystemExit: pass\n"
        "sys.stderr.write(str('pyroute2' in sys.modules))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, cwd=str(ROOT))
    assert proc.stderr.endswith("False"), proc.stderr[-500:]


# ---- real interfaces in a network namespace ------------------------------------------------------

IP = shutil.which("ip")


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([IP, *args], capture_output=True, text=True, check=check, timeout=20)


@pytest.fixture(scope="module")
def netns():
    if IP is None:
        pytest.skip("iproute2 (`ip`) is not installed")
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    ns = f"rdmad-tcp-{os.getpid()}"
    made = ip("netns", "add", ns, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot create a network namespace: {made.stderr.strip()}")
    try:
        # veth pairs: each end up with its peer up; a veth reports 10000 Mb/s in sysfs.
        ip("-n", ns, "link", "add", "rd-data0", "type", "veth", "peer", "name", "rd-peer0")
        ip("-n", ns, "link", "set", "dev", "rd-data0", "mtu", "9000")
        ip("-n", ns, "addr", "add", "10.88.0.1/24", "dev", "rd-data0")
        for link in ("rd-data0", "rd-peer0", "lo"):
            ip("-n", ns, "link", "set", "dev", link, "up")
        speed = subprocess.run(
            [IP, "netns", "exec", ns, "cat", "/sys/class/net/rd-data0/speed"], capture_output=True, text=True, timeout=20
        )
        if speed.returncode != 0 or not speed.stdout.strip().lstrip("-").isdigit():
            pytest.skip(f"this kernel's veth reports no speed: {speed.stderr.strip() or speed.stdout.strip()}")
        yield ns, int(speed.stdout)
    finally:
        ip("netns", "del", ns, check=False)
    assert ns not in ip("netns", "list").stdout


def in_netns(ns: str, argv: list[str], env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(ROOT),
        "RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1",
        **env_extra,
    }
    code = f"from rdmadoctor.cli import main; main({argv!r})"
    return subprocess.run([IP, "netns", "exec", ns, sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120, cwd=str(ROOT))


def nccl_check(proc: subprocess.CompletedProcess) -> dict:
    (check,) = [c for c in json.loads(proc.stdout)["checks"] if c["id"] == "nccl.env"]
    return check


JOB = {"NCCL_SOCKET_IFNAME": "=rd-data0", "NCCL_IB_DISABLE": "1"}


@pytest.mark.real
def test_live_interface_fast_enough_slow_and_missing(netns):
    ns, speed = netns
    gbps = speed / 1000
    ok = nccl_check(in_netns(ns, ["check", "--only", "nccl.env", "--profile", "tcp", "--json", "--set", f"socket_min_gbps={gbps:g}"], JOB))
    assert ok["status"] == "pass", ok
    (f,) = [f for f in ok["findings"] if f["code"] == "NCCL_SOCKET_TRANSPORT"]
    assert f["data"]["verdict"] == f"ready to train over sockets on rd-data0 at {gbps:g} Gb/s"
    assert "10.88.0.1" in f["message"] and "MTU 9000" in f["message"] and "[psutil]" in f["message"]
    slow = nccl_check(in_netns(ns, ["check", "--only", "nccl.env", "--profile", "tcp", "--json", "--set", f"socket_min_gbps={gbps * 4:g}"], JOB))
    assert slow["status"] == "fail" and [f["code"] for f in slow["findings"] if f["severity"] == "error"] == ["NCCL_SOCKET_IFNAME_SLOW"]
    missing = nccl_check(in_netns(ns, ["check", "--only", "nccl.env", "--profile", "tcp", "--json"], {**JOB, "NCCL_SOCKET_IFNAME": "=rd-gone0"}))
    assert [f["code"] for f in missing["findings"] if f["severity"] == "error"] == ["NCCL_SOCKET_IFNAME_NO_MATCH"]


@pytest.mark.real
def test_collect_records_the_netlink_view_and_the_bundle_gives_the_same_verdict(netns, tmp_path):
    ns, speed = netns
    out = tmp_path / "pod.tar.gz"
    proc = in_netns(ns, ["collect", "-o", str(out)], JOB)
    assert proc.returncode == 0, proc.stderr
    with tarfile.open(out) as tf:
        runtime = json.load(tf.extractfile("runtime.json"))
    recorded = {i["name"]: i for i in runtime["interfaces"]}
    # (and its IPv6 link-local address, which NCCL counts as an address too)
    assert "10.88.0.1" in recorded["rd-data0"]["addresses"] and recorded["rd-data0"]["mtu"] == 9000
    assert recorded["rd-data0"]["up"] is True
    setting = f"socket_min_gbps={speed / 1000:g}"
    live = nccl_check(in_netns(ns, ["check", "--only", "nccl.env", "--profile", "tcp", "--json", "--set", setting], JOB))
    code, rep = check_json(["--bundle", str(out), "--only", "nccl.env", "--profile", "tcp", "--set", setting])
    (bundled,) = rep["checks"]
    verdict = [f["data"]["verdict"] for f in bundled["findings"] if f["code"] == "NCCL_SOCKET_TRANSPORT"]
    assert verdict == [f["data"]["verdict"] for f in live["findings"] if f["code"] == "NCCL_SOCKET_TRANSPORT"] != []
    assert "[recorded by collect]" in json.dumps(bundled)
