"""One table: a scenario bundle under tests/fixtures -> the verdict, the findings and the labels.

The fixture dirs are generated (`python -m rdmadoctor.fixturegen --scenarios tests/fixtures`) and
committed with their relative symlinks; `test_fixtures_match_generator` keeps them in step.
Each row runs the real CLI on the directory, so the bundle reader, the symlink resolution and
every check take part.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pytest
from conftest import FIXTURES, check_json

from rdmadoctor import fixturegen

# "severity:CODE" for every finding that is not info. A code listed once may occur several times.
E, W, U = "error:", "warning:", "unknown:"
TOOLS_ONLY_UNKNOWN = {
    # A pasted ibstat says nothing about the container, the libraries or the kernel.
    # Each "could not read" has its own code: a problem's code is emitted only when it was seen.
    U + "VERBS_LIB_UNKNOWN",
    U + "DEV_INFINIBAND_UNKNOWN",
    U + "MEMLOCK_UNREADABLE",
    U + "CAPS_UNREADABLE",
    U + "SHM_UNREADABLE",
    U + "MODULES_UNKNOWN",
}
READY = "rdmadoctor.io/ready"
LL = "rdmadoctor.io/link-layer"
ACTIVE = "rdmadoctor.io/active-ports"
GPU_NIC = "rdmadoctor.io/gpu-nic"

@dataclass(frozen=True)
class Scenario:
    """One row: the bundle's name, the verdict it must get, and what the report must say.

    findings: "severity:CODE" for every finding that is not info (exactly these); labels and ports
    ({"dev/port": "STATE Phys rate"}): a subset; devices: every RDMA device, VFs marked ":vf"
    (None: not asserted); expect: expectation overrides the row runs with (``--set key=value``).
    """

    name: str
    status: str
    findings: frozenset[str] = frozenset()
    labels: dict[str, str] = field(default_factory=dict)
    ports: dict[str, str] = field(default_factory=dict)
    devices: list[str] | None = None
    expect: dict[str, str] = field(default_factory=dict)


S = Scenario
SCENARIOS = [
    S("healthy-ib", "pass", labels={READY: "true", LL: "infiniband", ACTIVE: "2", GPU_NIC: "PIX"},
      ports={"mlx5_0/1": "ACTIVE LinkUp 400", "mlx5_1/1": "ACTIVE LinkUp 400"}, devices=["mlx5_0", "mlx5_1"]),
    S("roce", "pass", labels={READY: "true", LL: "ethernet", ACTIVE: "2", GPU_NIC: "PIX"},
      ports={"mlx5_0/1": "ACTIVE LinkUp 200"}, devices=["mlx5_0", "mlx5_1"]),
    S("port-down", "fail", frozenset({E + "IB_PORT_DOWN", W + "NCCL_IB_HCA_NO_MATCH"}), labels={READY: "false", ACTIVE: "1"},
      ports={"mlx5_0/1": "ACTIVE LinkUp 400", "mlx5_1/1": "DOWN Polling 10"}),
    S("port-init-no-sm", "fail", frozenset({E + "IB_PORT_INIT", E + "IB_NO_SM", E + "NCCL_IB_HCA_NO_MATCH"}),
      labels={READY: "false", ACTIVE: "0"}, ports={"mlx5_0/1": "INIT LinkUp 400", "mlx5_1/1": "INIT LinkUp 400"}),
    S("no-provider", "fail", frozenset({E + "VERBS_PROVIDER_MISSING", W + "VERBS_PKG_MISSING"}), labels={READY: "false"}),
    # The fixture's process holds every capability (CapEff 1ffffffffff), CAP_IPC_LOCK included: the
    # kernel does not apply its 64 KiB limit to RDMA registrations (MEMLOCK_BYPASSED_BY_IPC_LOCK,
    # info). The failing case (no IPC_LOCK) is tests/unit/checks/test_pod_checks.py and the broken-pod example.
    S("memlock-64k", "fail", frozenset({E + "MEMLOCK_LIMITED", E + "CAP_IPC_LOCK_MISSING"}), labels={READY: "false"}),
    # The users' recipe: IPC_LOCK with the runtime's default limit is ready (issue 7, wrong answer 7).
    S("memlock-64k-ipc-lock", "pass", labels={READY: "true"}),
    S("shm-64m", "fail", frozenset({E + "SHM_TOO_SMALL"}), labels={READY: "false"}),
    S("gpu-far", "warn", frozenset({W + "GPU_NIC_FAR"}), labels={READY: "true", GPU_NIC: "SYS"}),
    S("dual-port-port2-down", "fail", frozenset({E + "IB_PORT_DOWN"}), labels={READY: "false", ACTIVE: "1"},
      ports={"mlx4_0/1": "ACTIVE LinkUp 56", "mlx4_0/2": "DOWN Polling 10"}, devices=["mlx4_0"]),
    # VFs are listed but not judged: their ports are DOWN (no vport policy) and nothing says so.
    S("sriov", "pass", labels={READY: "true", ACTIVE: "2"}, ports={"mlx5_2/1": "DOWN LinkUp 400"},
      devices=["mlx5_0", "mlx5_1", "mlx5_2:vf", "mlx5_3:vf", "mlx5_4:vf", "mlx5_5:vf"]),
    S("no-devices", "fail", frozenset({E + "IB_NO_DEVICES", E + "MOD_MISSING", W + "GDR_PEERMEM_MISSING"}),
      labels={READY: "false", LL: "none", ACTIVE: "0"}, devices=[]),
    # Generated beyond the first list, one per check that landed later.
    S("acs-redirect", "warn", frozenset({W + "PCIE_ACS_ENABLED"}), labels={READY: "true"}),
    S("pcie-degraded", "warn", frozenset({W + "PCIE_LINK_DEGRADED"}), labels={READY: "true"}),
    S("roce-mtu-1500", "warn", frozenset({W + "NET_MTU_LOW"}), labels={READY: "true", LL: "ethernet"}),
    S("node-labels-stale", "fail", frozenset({E + "IB_PORT_DOWN", W + "NCCL_IB_HCA_NO_MATCH", W + "NODE_LABEL_STALE"}),
      labels={READY: "false", ACTIVE: "1"}),
    S("ibstat-only", "fail", frozenset({E + "IB_PORT_DOWN"} | TOOLS_ONLY_UNKNOWN), labels={READY: "false", LL: "infiniband", ACTIVE: "1"},
      ports={"mlx4_0/1": "ACTIVE LinkUp 56", "mlx4_0/2": "DOWN Polling 10"}, devices=["mlx4_0"]),
    # What was printed before the abort is kept; that the listing is cut off is said, not hidden.
    # (its ibpanic is the tool's failure, IB_TOOL_FAILED, as diagnose reads the same output pasted: issue 30)
    S("truncated-ibstat", "unknown", frozenset({W + "IB_TOOL_FAILED"} | TOOLS_ONLY_UNKNOWN), labels={ACTIVE: "2"},
      ports={"mlx5_0/1": "ACTIVE LinkUp 400", "mlx5_1/1": "ACTIVE LinkUp 400"}, devices=["mlx5_0", "mlx5_1"]),
    # iWARP (issue 11), judged as iWARP: no RoCE finding on a port that has no RoCE v2 GID by nature.
    # tests/unit/checks/test_iwarp.py has the rest.
    S("iwarp-cxgb4", "pass", labels={READY: "true", LL: "ethernet", ACTIVE: "2", GPU_NIC: "PIX"},
      ports={"cxgb4_0/1": "ACTIVE LinkUp 100", "cxgb4_0/2": "ACTIVE LinkUp 100"}, devices=["cxgb4_0"]),
    S("iwarp-nccl-ib", "fail", frozenset({E + "IWARP_NCCL_IB"}), labels={READY: "false", ACTIVE: "2"}, devices=["cxgb4_0"]),
    S("iwarp-no-ipv4", "fail", frozenset({E + "IWARP_NO_IPV4"}), labels={READY: "false", ACTIVE: "1"},
      ports={"cxgb4_0/2": "INIT PortConfigurationTraining 100"}, devices=["cxgb4_0"]),
    # Socket pools under the generic profile, which expects RDMA; under the tcp profile the first
    # passes and the second fails on its 1 Gb/s interface (tests/unit/checks/test_tcp_pool.py).
    S("tcp-pool", "fail", frozenset({E + "IB_NO_DEVICES", E + "MOD_MISSING", W + "CAP_IPC_LOCK_MISSING", W + "GDR_PEERMEM_MISSING"}),
      labels={READY: "false", LL: "none", "feature.node.kubernetes.io/network-rdma.capable": "false"}, devices=[]),
    S("tcp-pool-slow", "fail", frozenset({E + "IB_NO_DEVICES", E + "MOD_MISSING", W + "CAP_IPC_LOCK_MISSING", W + "GDR_PEERMEM_MISSING"}),
      labels={READY: "false", LL: "none"}, devices=[]),
]


def _findings(rep: dict) -> set[str]:
    return {f"{f['severity']}:{f['code']}" for c in rep["checks"] for f in c["findings"] if f["severity"] != "info"}


def _ports(rep: dict) -> dict[str, str]:
    out = {}
    for d in rep["inventory"].get("rdma_devices") or []:
        for p in d["ports"]:
            rate = "?" if p["rate_gbps"] is None else f"{p['rate_gbps']:g}"
            out[f"{d['name']}/{p['port']}"] = f"{p['state']} {p['phys_state']} {rate}"
    return out


def test_every_scenario_has_a_row():
    assert [row.name for row in SCENARIOS] == list(fixturegen.SCENARIOS)


@pytest.mark.parametrize("row", SCENARIOS, ids=[r.name for r in SCENARIOS])
def test_scenario(row: Scenario):
    name, status, labels, ports, devices = row.name, row.status, row.labels, row.ports, row.devices
    sets = [arg for key, value in row.expect.items() for arg in ("--set", f"{key}={value}")]
    code, rep = check_json(["--bundle", str(FIXTURES / name), *sets])
    assert rep["status"] == status, _findings(rep)
    assert code == {"pass": 0, "warn": 0, "fail": 1, "unknown": 2}[status]
    assert _findings(rep) == set(row.findings)
    for c in rep["checks"]:
        assert not (c.get("reason") or "").startswith("internal error"), c
    assert {k: rep["labels"].get(k) for k in labels} == labels
    seen = _ports(rep)
    assert {k: seen.get(k) for k in ports} == ports
    if devices is not None:
        listed = [d["name"] + (":vf" if d["is_vf"] else "") for d in rep["inventory"].get("rdma_devices") or []]
        assert listed == devices


@pytest.mark.parametrize("name", list(fixturegen.SCENARIOS))
def test_fixtures_match_generator(name):
    """Nobody hand-edits a fixture: regenerate with `python -m rdmadoctor.fixturegen --scenarios tests/fixtures`."""
    root = FIXTURES / name
    assert root.is_dir(), f"{root} is missing: regenerate the fixtures"
    assert fixturegen.read_dir(str(root)) == fixturegen.scenario_tree(name)


@pytest.mark.parametrize("name", list(fixturegen.SCENARIOS))
def test_fixture_symlinks_are_relative_and_resolve_inside(name):
    root = os.path.realpath(FIXTURES / name)
    for base, dirs, files in os.walk(root):
        for entry in dirs + files:
            path = os.path.join(base, entry)
            if not os.path.islink(path):
                continue
            target = os.readlink(path)
            assert not target.startswith("/"), f"{path} -> {target}"
            real = os.path.realpath(path)
            assert real.startswith(root + os.sep), f"{path} -> {target} leaves the fixture"
            assert os.path.exists(real), f"{path} -> {target} is broken"


def _non_info(rep: dict) -> list[dict]:
    return [f for c in rep["checks"] for f in c["findings"] if f["severity"] != "info"]


def test_no_rdma_is_one_root_cause():
    # A GPU node without any HCA: one headline (IB_NO_DEVICES); the RDMA modules nobody loaded
    # and the missing GPUDirect RDMA follow from it and say so, with their severity kept.
    code, rep = check_json(["--bundle", str(FIXTURES / "no-devices")])
    found = _non_info(rep)
    roots = [f for f in found if not f.get("cause")]
    assert [(f["code"], f["severity"]) for f in roots] == [("IB_NO_DEVICES", "error")]
    follows = {(f["code"], f["severity"], f["subject"]) for f in found if f.get("cause") == "IB_NO_DEVICES"}
    assert follows == {
        ("MOD_MISSING", "error", "ib_core"),
        ("MOD_MISSING", "error", "ib_uverbs"),
        ("MOD_MISSING", "error", "rdma_ucm"),
        ("GDR_PEERMEM_MISSING", "warning", "GPUDirect RDMA"),
    }
    assert len(follows) + len(roots) == len(found)
    # The GPUs have nothing to pair with: gpu.topology says why it did not judge.
    (topo,) = [c for c in rep["checks"] if c["id"] == "gpu.topology"]
    assert topo["status"] == "skip" and "ib.devices" in topo["reason"]


def test_ports_waiting_for_a_subnet_manager_fold_under_it():
    code, rep = check_json(["--bundle", str(FIXTURES / "port-init-no-sm")])
    ports = [f for c in rep["checks"] if c["id"] == "ib.ports" for f in c["findings"]]
    assert {(f["code"], f.get("cause")) for f in ports} == {("IB_PORT_INIT", "IB_NO_SM"), ("IB_NO_SM", None)}
    assert all(f["severity"] == "error" for f in ports)


@pytest.mark.parametrize("name", list(fixturegen.SCENARIOS))
def test_every_cause_names_a_root_finding_of_the_report(name):
    # A renderer folds a finding under its cause: the cause must be in the report, and be a root.
    code, rep = check_json(["--bundle", str(FIXTURES / name)])
    findings = [f for c in rep["checks"] for f in c["findings"]]
    roots = {f["code"] for f in findings if not f.get("cause")}
    for f in findings:
        assert not f.get("cause") or f["cause"] in roots, f
