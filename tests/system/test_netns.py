"""nccl.env on a live host inside a real network namespace.

The namespace gets an interface that is up with an address and MTU 9000, one administratively down
at MTU 1500, one up without any address, and one up whose veth peer is down (no carrier). Then
`rdmadoctor check --only nccl.env --json` runs inside it (`ip netns exec`) with NCCL_SOCKET_IFNAME
set, and its verdicts are compared with NCCL's rules and with what `ip -j link` says.

Linux dummy links are used when the kernel has them; this CI kernel has no dummy driver, so veth
pairs stand in (a veth is up with a carrier only when its peer is up too, which gives the
no-carrier case for free). Needs root and iproute2; skipped otherwise. The namespace is always deleted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.real

IP = shutil.which("ip")


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([IP, *args], capture_output=True, text=True, check=check, timeout=20)


def _pair(ns: str, name: str, peer: str) -> None:
    ip("-n", ns, "link", "add", name, "type", "veth", "peer", "name", peer)


@pytest.fixture(scope="module")
def netns():
    if IP is None:
        pytest.skip("iproute2 (`ip`) is not installed")
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    ns = f"rdmad-test-{os.getpid()}"
    made = ip("netns", "add", ns, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot create a network namespace: {made.stderr.strip()}")
    try:
        dummy = ip("-n", ns, "link", "add", "rd-up0", "type", "dummy", check=False).returncode == 0
        if dummy:
            ip("-n", ns, "link", "add", "rd-down0", "type", "dummy")
            ip("-n", ns, "link", "add", "rd-noaddr0", "type", "dummy")
        else:
            _pair(ns, "rd-up0", "rd-peer0")
            _pair(ns, "rd-down0", "rd-peer1")
            _pair(ns, "rd-noaddr0", "rd-peer2")
        _pair(ns, "rd-va", "rd-vb")  # a veth pair, rd-vb left down: rd-va is up without a carrier
        # No IPv6 link-local address either: NCCL counts those as addresses too.
        for link in ("rd-noaddr0", "rd-peer0", "rd-peer2", "rd-va"):
            ip("-n", ns, "link", "set", "dev", link, "addrgenmode", "none", check=False)
        ip("-n", ns, "link", "set", "dev", "rd-up0", "mtu", "9000")
        ip("-n", ns, "link", "set", "dev", "rd-down0", "mtu", "1500")
        ip("-n", ns, "addr", "add", "10.77.0.1/24", "dev", "rd-up0")
        for link in ("rd-up0", "rd-noaddr0", "rd-va") + (() if dummy else ("rd-peer0", "rd-peer2")):
            ip("-n", ns, "link", "set", "dev", link, "up")
        yield ns
    finally:
        ip("netns", "del", ns, check=False)
    assert ns not in ip("netns", "list").stdout


def nccl_env(ns: str, ifname: str) -> dict:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(ROOT),
        "RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1",
        "NCCL_SOCKET_IFNAME": ifname,
    }
    code = "from rdmadoctor.cli import main; main(['check', '--only', 'nccl.env', '--json'])"
    proc = subprocess.run(
        [IP, "netns", "exec", ns, sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=str(ROOT),
    )
    assert proc.stderr == "", proc.stderr
    (check,) = [c for c in json.loads(proc.stdout)["checks"] if c["id"] == "nccl.env"]
    return check


def socket_findings(check: dict) -> list[dict]:
    return [f for f in check["findings"] if f["subject"] == "NCCL_SOCKET_IFNAME"]


def test_interface_that_is_up_with_an_address_matches(netns):
    check = nccl_env(netns, "rd-up")
    assert check["status"] == "pass"
    (f,) = socket_findings(check)
    assert f["severity"] == "info"
    assert "NCCL will use rd-up0 (10.77.0.1" in f["message"] and "[psutil]" in f["message"]


def test_down_interface_does_not_match(netns):
    check = nccl_env(netns, "=rd-down0")
    assert check["status"] == "fail"
    (f,) = socket_findings(check)
    assert f["code"] == "NCCL_SOCKET_IFNAME_NO_MATCH"
    assert "matches only rd-down0 (down)" in f["message"]
    # What we call up is what `ip` calls up: admin UP and operstate UP / UNKNOWN.
    links = json.loads(ip("-n", netns, "-j", "link", "show").stdout)
    up = {lk["ifname"] for lk in links if "UP" in lk.get("flags", []) and lk.get("operstate") in ("UP", "UNKNOWN")}
    assert set(f["data"]["up"]) == up
    assert "rd-up0" in up and "rd-down0" not in up and "rd-va" not in up


def test_up_without_carrier_does_not_match(netns):
    (f,) = socket_findings(nccl_env(netns, "=rd-va"))
    assert f["code"] == "NCCL_SOCKET_IFNAME_NO_MATCH" and "rd-va (down)" in f["message"]


def test_exclusion(netns):
    # Everything that is up excluded: only down interfaces remain.
    check = nccl_env(netns, "^rd-up,rd-noaddr,rd-peer,rd-va,lo")
    (f,) = socket_findings(check)
    assert f["code"] == "NCCL_SOCKET_IFNAME_NO_MATCH"
    # Excluding one exact name leaves rd-up0.
    check = nccl_env(netns, "^=rd-noaddr0,rd-peer0,rd-peer2")
    (g,) = socket_findings(check)
    used = g["message"].split("NCCL will use ", 1)[1]
    assert g["severity"] == "info" and used.startswith("rd-up0 (10.77.0.1") and "rd-noaddr0" not in used


def test_exact_versus_prefix(netns):
    (exact,) = socket_findings(nccl_env(netns, "=rd-up"))
    assert exact["code"] == "NCCL_SOCKET_IFNAME_NO_MATCH" and "matches no interface" in exact["message"]
    (prefix,) = socket_findings(nccl_env(netns, "rd-up"))
    assert prefix["severity"] == "info"


def test_up_without_an_address_is_not_usable(netns):
    (f,) = socket_findings(nccl_env(netns, "=rd-noaddr0"))
    assert f["code"] == "NCCL_SOCKET_IFNAME_NO_ADDR" and f["severity"] == "error"
    assert "rd-noaddr0 (up) but none has an IP address" in f["message"]
