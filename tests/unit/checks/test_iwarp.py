"""iWARP judged as iWARP (issue 11): iwarp.config, the transport facts, and NCCL's IB transport on an RNIC.

The fixtures are generated (tests/fixtures/iwarp-*, a Chelsio T62100-CR as iw_cxgb4 lays it out in
sysfs: node_type "4: RNIC", link layer Ethernet, one GID typed "IB/RoCE v1", no umad); the judges
are also run on facts built here, for the drivers and cases a fixture does not cover.
"""

from __future__ import annotations

import ast
import inspect
import json
import shutil

import pytest
from conftest import FIXTURES, check_json, run_cli

from rdmadoctor.checks import iwarp, nccl
from rdmadoctor.checks._rdma import INFINIBAND, IWARP, ROCE, RdmaInventory, is_rnic, transport_of
from rdmadoctor.checks.ib import judge_ports
from rdmadoctor.core.facts import Port, RdmaDevice
from rdmadoctor.core.model import ERROR, INFO, KIND_SEVERITIES, KINDS, UNKNOWN, WARNING
from rdmadoctor.engine import expectations

IW = FIXTURES / "iwarp-cxgb4"


def findings(rep: dict, check_id: str | None = None) -> list[dict]:
    return [f for c in rep["checks"] if check_id is None or c["id"] == check_id for f in c["findings"]]


def check_of(rep: dict, check_id: str) -> dict:
    (c,) = [c for c in rep["checks"] if c["id"] == check_id]
    return c


# ---- transport facts ---------------------------------------------------------------------------


def _port(ll="Ethernet", state="ACTIVE", **kw) -> Port:
    return Port(1, state=state, phys_state="LinkUp", rate_gbps=100.0, link_layer=ll, **kw)


@pytest.mark.parametrize(
    "dev,ll,want",
    [
        (RdmaDevice("mlx5_0", driver="mlx5_core", node_type="CA"), "Ethernet", ROCE),
        (RdmaDevice("mlx5_0", driver="mlx5_core", node_type="CA"), "InfiniBand", INFINIBAND),
        (RdmaDevice("cxgb4_0", driver="cxgb4", node_type="RNIC"), "Ethernet", IWARP),
        # irdma registers RoCE or iWARP depending on the port's mode: only node_type tells.
        (RdmaDevice("irdma0", driver="irdma.gen_2", node_type="RNIC"), "Ethernet", IWARP),
        (RdmaDevice("irdma0", driver="irdma.gen_2", node_type="CA"), "Ethernet", ROCE),
        # soft iWARP on a VM's virtio NIC: the device's parent is the netdev's (virtio_net).
        (RdmaDevice("siw0", driver="virtio_net", node_type="RNIC"), "Ethernet", IWARP),
        # `ibstat` calls its CA type "iWARP RNIC"; a tool output without a node type: by driver or name.
        (RdmaDevice("cxgb4_1", node_type="iWARP RNIC", source="ibstat"), "Ethernet", IWARP),
        (RdmaDevice("cxgb4_1", node_type=None, source="ibv_devinfo"), "Ethernet", IWARP),
        (RdmaDevice("siw_eth0", node_type=None, source="ibv_devinfo"), "Ethernet", IWARP),
        (RdmaDevice("rxe0", driver="rdma_rxe", node_type=None), "Ethernet", ROCE),
        (RdmaDevice("mlx5_0", node_type="CA"), None, None),
    ],
)
def test_transport_of(dev, ll, want):
    assert transport_of(dev, _port(ll)) == want


def test_is_rnic_unknown_is_none_not_false():
    assert is_rnic(RdmaDevice("foo0")) is None
    assert is_rnic(RdmaDevice("foo0", node_type="CA")) is False


# ---- the fixture: a Chelsio T6 judged as iWARP ----------------------------------------------------


def test_iwarp_fixture_is_judged_as_iwarp_with_no_roce_finding():
    code, rep = check_json(["--bundle", str(IW), "--verbose"])
    assert code == 0 and rep["status"] == "pass"
    assert not [f for f in findings(rep) if f["code"].startswith(("ROCE_", "NET_MTU"))]
    roce = check_of(rep, "roce.config")
    assert roce["status"] == "skip" and "cxgb4_0 is iWARP" in roce["reason"]
    iw = check_of(rep, "iwarp.config")
    assert iw["status"] == "pass"
    ports = {f["subject"]: f for f in iw["findings"] if f["code"] == "IWARP_PORT"}
    assert set(ports) == {"cxgb4_0/1", "cxgb4_0/2"}
    p1 = ports["cxgb4_0/1"]
    assert p1["severity"] == "info" and "netdev enp129s0f4, 100 Gb/s, MTU 9000" in p1["message"]
    assert "Chelsio T4-T7, driver cxgb4, provider libcxgb4" in p1["message"]
    assert rep["inventory"]["iwarp"]["cxgb4_0/2"]["netdev"] == "enp129s0f4d1"
    assert rep["inventory"]["rdma_devices"][0]["node_type"] == "RNIC"
    # Its userspace provider is judged like any other (libcxgb4 in the fixture's image).
    assert check_of(rep, "verbs.userspace")["status"] == "pass"
    # The job trains over TCP on purpose on the RNIC's netdev, which is right for iWARP.
    env = [f for f in findings(rep, "nccl.env") if f["subject"] == "NCCL_IB_DISABLE"]
    assert env and "iWARP" in env[0]["message"] and env[0]["severity"] == "info"
    (sock,) = [f for f in findings(rep, "nccl.env") if f["code"] == "NCCL_SOCKET_TRANSPORT"]
    assert sock["data"]["verdict"] == "ready to train over sockets on enp129s0f4 at 100 Gb/s"


def _as_ca(tmp_path, src=IW):
    """The same bundle, its RNIC relabelled a CA: what every check saw before iWARP had a name."""
    dest = tmp_path / src.name
    shutil.copytree(src, dest, symlinks=True)
    node_type = dest.joinpath("sys/class/infiniband/cxgb4_0").resolve() / "node_type"
    node_type.write_text("1: CA\n")
    return dest


def test_as_a_roce_port_the_same_fixture_would_fail_on_its_gid(tmp_path):
    # The test above could fail: the port has no RoCE v2 GID, and a RoCE judge says so.
    code, rep = check_json(["--bundle", str(_as_ca(tmp_path))])
    (f,) = [f for f in findings(rep, "roce.config") if f["subject"] == "cxgb4_0/1"]
    assert f["code"] == "ROCE_NO_V2_GID" and "0 IB/RoCE v1" in f["message"]
    assert check_of(rep, "iwarp.config")["status"] == "skip"


def test_nccl_ib_on_iwarp_is_the_error_that_says_what_happens():
    code, rep = check_json(["--bundle", str(FIXTURES / "iwarp-nccl-ib")])
    assert code == 1
    (f,) = [f for f in findings(rep, "nccl.env") if f["code"] == "IWARP_NCCL_IB"]
    assert f["severity"] == "error" and f["data"]["iwarp_ports"] == ["cxgb4_0/1", "cxgb4_0/2"]
    assert "ibv_modify_qp failed with 22 Invalid argument" in f["message"] and "unhandled system error" in f["message"]
    assert "NCCL_IB_DISABLE" in f["remedy"]
    assert f["pod"]["env"][0]["name"] == "NCCL_IB_DISABLE" and f["pod"]["env"][0]["value"] == "1"
    # NCCL_IB_GID_INDEX means nothing on iWARP: no RoCE GID verdict on these ports.
    assert not [x for x in findings(rep, "nccl.env") if x["code"].startswith("NCCL_IB_GID_INDEX")]
    # The same NCCL settings with IB off: no error.
    code, rep = check_json(["--bundle", str(IW)])
    assert not [x for x in findings(rep) if x["code"] == "IWARP_NCCL_IB"]


def test_preflight_stops_the_job_with_the_pod_change(tmp_path):
    code, out, err = run_cli(["preflight", "--bundle", str(FIXTURES / "iwarp-nccl-ib")])
    assert code == 1
    assert "IWARP_NCCL_IB" in out + err and "NCCL_IB_DISABLE" in out + err


def test_no_ipv4_keeps_the_port_in_init_and_is_not_a_subnet_manager_problem():
    code, rep = check_json(["--bundle", str(FIXTURES / "iwarp-no-ipv4"), "--set", "expected_active_ports=2"])
    (f,) = [f for f in findings(rep, "iwarp.config") if f["code"] == "IWARP_NO_IPV4"]
    assert f["subject"] == "cxgb4_0/2" and "enp129s0f4d1" in f["message"] and "ip addr add" in f["remedy"]
    ports = findings(rep, "ib.ports")
    assert not [x for x in ports if x["code"] in ("IB_PORT_INIT", "IB_NO_SM")]
    (low,) = [x for x in ports if x["code"] == "IB_ACTIVE_PORTS_LOW"]
    assert low["cause"] == "IWARP_NO_IPV4"


# ---- judges on facts ---------------------------------------------------------------------------


def _dev(name="cxgb4_0", driver="cxgb4", *ports) -> RdmaDevice:
    return RdmaDevice(name, driver=driver, node_type="RNIC", ports=ports or (_port(netdev="enp1s0f4", netdev_up=True),))


def _facts(*devs, modules=frozenset({"iw_cm", "rdma_cm", "rdma_ucm"}), others=()) -> iwarp.IwarpFacts:
    ports = tuple(iwarp.IwarpPort(d, p, 9000, 100000) for d in devs for p in d.ports)
    return iwarp.IwarpFacts(ports, "sysfs", others, True, modules, "/proc/modules")


EXPECT = expectations.resolve({})


def test_netdev_down_is_the_root_cause_of_the_port_down():
    down = Port(1, state="DOWN", phys_state="Disabled", rate_gbps=100.0, link_layer="Ethernet", netdev="enp1s0f4", netdev_up=False)
    dev = _dev("cxgb4_0", "cxgb4", down)
    (f,) = iwarp.judge_iwarp(_facts(dev), EXPECT)
    assert (f.code, f.severity) == ("IWARP_NETDEV_DOWN", ERROR) and "ip link set dev enp1s0f4 up" in f.remedy
    (p,) = judge_ports(RdmaInventory((dev,), "sysfs", sysfs=True), EXPECT)
    assert p.code == "IB_PORT_DOWN" and p.cause == "IWARP_NETDEV_DOWN"
    # Disabled means "no carrier" for an iWARP port, not "disabled by software".
    assert "no carrier" in p.message and "software" not in p.message


def test_connection_manager_modules():
    out = iwarp.judge_iwarp(_facts(_dev(), modules=frozenset({"iw_cm", "rdma_ucm"})), EXPECT)
    (m,) = [f for f in out if f.code == "IWARP_CM_MISSING"]
    assert m.subject == "rdma_cm" and m.severity == ERROR and "cxgb4_0/1" in m.message
    assert not [f for f in iwarp.judge_iwarp(_facts(_dev(), modules=None), EXPECT) if f.code == "IWARP_CM_MISSING"]


@pytest.mark.parametrize("driver,name,text", [("irdma.gen_2", "irdma0", "Intel E810/X722"), ("virtio_net", "siw0", "soft iWARP")])
def test_other_iwarp_drivers_are_named(driver, name, text):
    out = iwarp.judge_iwarp(_facts(_dev(name, driver)), EXPECT)
    assert [f.code for f in out] == ["IWARP_PORT"] and text in out[0].message


def test_a_roce_pool_refuses_an_iwarp_port():
    e = expectations.resolve({}, profile="hgx-8gpu-roce-400g")
    out = iwarp.judge_iwarp(_facts(_dev()), e)
    (f,) = [f for f in out if f.code == "IWARP_UNEXPECTED"]
    assert f.severity == ERROR and "expects RoCE" in f.message


def test_the_iwarp_profile(tmp_path):
    code, rep = check_json(["--bundle", str(IW), "--profile", "iwarp"])
    assert rep["status"] == "pass", [f for f in findings(rep) if f["severity"] != "info"]
    code, rep = check_json(["--bundle", str(FIXTURES / "roce"), "--profile", "iwarp"])
    (f,) = [f for f in findings(rep, "iwarp.config") if f["code"] == "IWARP_NO_PORTS"]
    assert "mlx5_0/1 (RoCE)" in f["message"] and f.get("cause") is None
    code, rep = check_json(["--bundle", str(FIXTURES / "no-devices"), "--profile", "iwarp"])
    (f,) = [f for f in findings(rep, "iwarp.config") if f["code"] == "IWARP_NO_PORTS"]
    assert f.get("cause") == "IB_NO_DEVICES"
    # And a RoCE pool takes the iWARP node as what it is.
    code, rep = check_json(["--bundle", str(IW), "--profile", "hgx-8gpu-roce-400g"])
    assert {"IWARP_UNEXPECTED"} <= {f["code"] for f in findings(rep, "iwarp.config")}


# ---- nccl.env on iWARP ports ------------------------------------------------------------------


def hp(dev, iw=False, state="ACTIVE"):
    return nccl.HcaPort(dev, 1, state, "Ethernet", (), True, iw)


MIXED = (hp("mlx5_0"), hp("mlx5_1"), hp("cxgb4_0", iw=True))


def judge(settings, ports=MIXED):
    return nccl.judge_nccl(nccl.NcclFacts(dict(settings), {}, "test", ports, None, ""), EXPECT)


def test_mixed_node_the_fix_names_the_roce_devices_only():
    (f,) = [f for f in judge({}) if f.code == "IWARP_NCCL_IB"]
    assert "NCCL_IB_HCA is unset" in f.message and f.data["iwarp_ports"] == ["cxgb4_0/1"]
    assert '"=mlx5_0,mlx5_1"' in f.remedy and f.pod.env == (("NCCL_IB_HCA", "=mlx5_0,mlx5_1", f.pod.env[0][2]),)
    assert not [f for f in judge({"NCCL_IB_HCA": "=mlx5_0,mlx5_1"}) if f.code == "IWARP_NCCL_IB"]
    assert not [f for f in judge({"NCCL_IB_HCA": "^=cxgb4_0"}) if f.code == "IWARP_NCCL_IB"]
    (g,) = [f for f in judge({"NCCL_IB_HCA": "cxgb4"}) if f.code == "IWARP_NCCL_IB"]
    assert "NCCL_IB_HCA=cxgb4 selects cxgb4_0/1" in g.message


def test_ib_off_on_iwarp_only_is_right_not_an_error():
    only = (hp("cxgb4_0", iw=True),)
    for settings in ({"NCCL_IB_DISABLE": "1"}, {"NCCL_NET": "Socket"}):
        out = judge(settings, only)
        assert not [f for f in out if f.severity in (ERROR, WARNING, UNKNOWN)], out
        assert any("iWARP" in f.message for f in out if f.severity == INFO)
    # A plugin named by NCCL_NET (aws-ofi-nccl is "AWS Libfabric") keeps NET/IB off as well.
    assert not [f for f in judge({"NCCL_NET": "AWS Libfabric"}, only) if f.code == "IWARP_NCCL_IB"]
    # With RoCE ports beside it, disabling IB still costs the RoCE ports: that error stays.
    assert [f for f in judge({"NCCL_IB_DISABLE": "1"}) if f.code == "NCCL_IB_DISABLED_BY_ENV"]


def test_nccl_hca_fix_never_suggests_the_iwarp_device():
    (f,) = [f for f in judge({"NCCL_IB_HCA": "=mlx5_9"}) if f.code == "NCCL_IB_HCA_NO_MATCH"]
    assert "=mlx5_0,mlx5_1" in f.remedy and "cxgb4" not in f.remedy


# ---- codes: one meaning, one kind, explained ----------------------------------------------------


def test_iwarp_codes_are_declared_with_their_kind_and_emitted_with_it():
    declared = {c.code: c for check in iwarp.CHECKS for c in check.codes}
    src = inspect.getsource(iwarp)
    # kind= on every Code: tests/contract/test_node_codes.py, over every check module (two of these live in _rdma).
    assert all(c.kind in KINDS for c in declared.values())
    sev = {"ERROR": ERROR, "WARNING": WARNING, "INFO": INFO, "UNKNOWN": UNKNOWN}
    used = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Finding":
            code = getattr(iwarp, node.args[0].value.id).code
            used.add(code)
            assert declared[code].kind in KINDS
            assert sev[node.args[1].id] in KIND_SEVERITIES[declared[code].kind], code
    assert used == set(declared)
    assert all(c.startswith("IWARP_") for c in declared)


@pytest.mark.parametrize("code", ["IWARP_PORT", "IWARP_NCCL_IB", "IWARP_NO_IPV4", "IWARP_NETDEV_DOWN", "IWARP_CM_MISSING",
                                  "IWARP_UNEXPECTED", "IWARP_NO_PORTS"])
def test_explain_knows_the_code(code):
    rc, out, err = run_cli(["explain", code])
    assert rc == 0 and out.startswith(code), err


def test_explain_says_what_each_library_does_with_iwarp():
    rc, out, _ = run_cli(["explain", "IWARP_PORT"])
    for needle in ("NCCL", "UCX", "uct_ib_device_is_supported", "Open MPI 5", "verbs;ofi_rxm", "FI_PROVIDER=verbs", "rdma_cm"):
        assert needle in out, needle
    rc, out, _ = run_cli(["explain", "IWARP_NCCL_IB"])
    for needle in ("ncclIbInitDevices", "ibv_modify_qp", "EINVAL", "unhandled system error", "NCCL_IB_DISABLE", "NCCL_IB_HCA"):
        assert needle in out, needle


def test_json_report_of_the_iwarp_fixture_validates_against_the_schema():
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources

    schema = json.loads(resources.files("rdmadoctor.output").joinpath("schema.json").read_text())
    code, rep = check_json(["--bundle", str(IW)])
    jsonschema.validate(rep, schema)
