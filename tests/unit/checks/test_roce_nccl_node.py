"""roce.config, nccl.env, node.labels: pure matchers, judges on facts built here, probes on trees."""

from __future__ import annotations

import json
import re
import string

import pytest
from conftest import sample_text
from hypothesis import given, settings
from hypothesis import strategies as st

from rdmadoctor.checks import nccl, node, roce
from rdmadoctor.core import labels as L
from rdmadoctor.core.facts import Gid
from rdmadoctor.core.model import ERROR, INFO, UNKNOWN, WARNING, CheckResult
from rdmadoctor.engine import execute as engine
from rdmadoctor.engine import expectations
from rdmadoctor.host import mem_host, net  # net: the interface readers behind Host.interfaces()

EXPECT = expectations.resolve({})


def run(check, host, expect=None, results=None):
    ctx = engine.Context(host=host, expect=dict(expect or EXPECT))
    if results:
        ctx.results.update(results)
    return engine.run_check(check, ctx)


def by_code(findings, code, severity=None):
    return [f for f in findings if f.code == code and (severity is None or f.severity == severity)]


def gid_v4(ip: str) -> str:
    a, b, c, d = (int(x) for x in ip.split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a << 8 | b:04x}:{c << 8 | d:04x}"


# ---- sysfs trees -------------------------------------------------------------------------------

LL = "fe80:0000:0000:0000:a288:c2ff:fe63:5a20"


def roce_tree(
    *,
    dev="mlx5_0",
    netdev="enp1s0f0np0",
    mtu=9000,
    operstate="up",
    carrier="1",
    state="4: ACTIVE",
    gids=((0, LL, "IB/RoCE v1"), (1, LL, "RoCE v2"), (2, gid_v4("10.99.91.39"), "IB/RoCE v1"), (3, gid_v4("10.99.91.39"), "RoCE v2")),
    link_layer="Ethernet",
) -> dict:
    base = f"/sys/class/infiniband/{dev}"
    files = {
        f"{base}/ports/1/state": state + "\n",
        f"{base}/ports/1/phys_state": "5: LinkUp\n",
        f"{base}/ports/1/rate": "100 Gb/sec (2X HDR)\n",
        f"{base}/ports/1/link_layer": link_layer + "\n",
        f"{base}/node_type": "1: CA\n",
        f"{base}/device/net/{netdev}/dev_port": "0\n",
        f"/sys/class/net/{netdev}/operstate": operstate + "\n",
        f"/sys/class/net/{netdev}/carrier": carrier + "\n",
        f"/sys/class/net/{netdev}/mtu": f"{mtu}\n",
        # the kernel creates the whole table; unused entries read EINVAL
        f"{base}/ports/1/gid_attrs/types/9": OSError(22, "Invalid argument"),
        f"{base}/ports/1/gids/9": "0000:0000:0000:0000:0000:0000:0000:0000\n",
    }
    for idx, gid, gtype in gids:
        files[f"{base}/ports/1/gids/{idx}"] = gid + "\n"
        files[f"{base}/ports/1/gid_attrs/types/{idx}"] = gtype + "\n"
        files[f"{base}/ports/1/gid_attrs/ndevs/{idx}"] = netdev + "\n"
    return files


def ib_tree(dev="mlx5_0", state="4: ACTIVE", rate="400 Gb/sec (4X NDR)") -> dict:
    base = f"/sys/class/infiniband/{dev}/ports/1"
    return {
        f"{base}/state": state + "\n",
        f"{base}/phys_state": "5: LinkUp\n",
        f"{base}/rate": rate + "\n",
        f"{base}/link_layer": "InfiniBand\n",
        f"{base}/lid": "0x5\n",
        f"{base}/sm_lid": "0x1\n",
    }


ROCE = roce.CHECKS[0]
NCCL = nccl.CHECKS[0]
NODE = node.CHECKS[0]


# ---- roce.config: probes on trees ----------------------------------------------------------


def test_roce_v2_gid_mtu_9000_passes_and_reports_the_ipv4_index():
    res = run(ROCE, mem_host(roce_tree()))
    assert res.status == "pass", res.findings
    (info,) = by_code(res.findings, "ROCE_V2_GID", INFO)
    assert info.subject == "mlx5_0/1"
    assert info.message == "RoCE v2 GID at index 3 (10.99.91.39): NCCL_IB_GID_INDEX=3"
    # the link-local v2 GID (index 1) is not offered: NCCL skips link-local GIDs
    assert info.data["v2_gid_indices"] == [3]
    inv = ROCE.inventory(res.facts)["roce"]["mlx5_0/1"]
    assert inv["ipv4_gid_index"] == 3 and inv["netdev_mtu"] == 9000 and inv["active_mtu"] == 4096


def test_roce_without_v2_gid_is_an_error_naming_the_netdev():
    tree = roce_tree(gids=((0, LL, "IB/RoCE v1"), (2, gid_v4("10.0.0.1"), "IB/RoCE v1")))
    res = run(ROCE, mem_host(tree))
    assert res.status == "fail"
    (f,) = by_code(res.findings, "ROCE_NO_V2_GID", ERROR)
    assert "no RoCE v2 GID" in f.message and "0 IB/RoCE v1, 2 IB/RoCE v1" in f.message
    assert "ip addr add" in f.remedy and "dev enp1s0f0np0" in f.remedy and "cma_roce_mode" in f.remedy


def test_roce_only_link_local_v2_gid_is_not_routable():
    # A netdev without an IP address: the kernel only has the fe80 v1/v2 pair.
    res = run(ROCE, mem_host(roce_tree(gids=((0, LL, "IB/RoCE v1"), (1, LL, "RoCE v2")))))
    (f,) = by_code(res.findings, "ROCE_NO_V2_GID", ERROR)
    assert "only link-local" in f.message and "index 1" in f.message


def test_roce_empty_gid_table_is_an_error_not_unknown():
    res = run(ROCE, mem_host(roce_tree(gids=())))
    (f,) = by_code(res.findings, "ROCE_NO_V2_GID")
    assert f.severity == ERROR and "empty" in f.message


def test_roce_mtu_1500_gives_the_exact_warning():
    res = run(ROCE, mem_host(roce_tree(mtu=1500)))
    assert res.status == "warn"
    (f,) = by_code(res.findings, "NET_MTU_LOW", WARNING)
    assert f.message == (
        "active MTU 1024 (netdev enp1s0f0np0 MTU 1500); expected 4096: set the netdev MTU to 9000 "
        "(`ip link set dev enp1s0f0np0 mtu 9000`, and on the switch)"
    )
    assert "ip link set dev enp1s0f0np0 mtu 9000" in f.remedy


def test_roce_min_mtu_follows_the_expectation():
    expect = dict(EXPECT, roce_min_mtu=1024)
    res = run(ROCE, mem_host(roce_tree(mtu=1500)), expect)
    assert not by_code(res.findings, "NET_MTU_LOW")


def test_roce_netdev_down():
    res = run(ROCE, mem_host(roce_tree(operstate="down", carrier="0", state="1: DOWN")))
    (f,) = by_code(res.findings, "ROCE_NETDEV_DOWN", ERROR)
    assert "enp1s0f0np0 is down" in f.message and f.remedy.startswith("ip link set dev enp1s0f0np0 up")


def test_roce_netdev_down_is_the_root_cause_of_the_port_down():
    # One root cause, one headline: ib.ports' IB_PORT_DOWN for the port follows from its netdev.
    from rdmadoctor.checks import ib

    host = mem_host(roce_tree(operstate="down", carrier="0", state="1: DOWN"))
    (f,) = by_code(run(ib.CHECKS[1], host).findings, "IB_PORT_DOWN", ERROR)
    assert f.cause == "ROCE_NETDEV_DOWN" and "netdev enp1s0f0np0 is down" in f.message
    (root,) = by_code(run(ROCE, host).findings, "ROCE_NETDEV_DOWN", ERROR)
    assert root.cause is None
    # A port down with its netdev up (a cable on the switch side) is a root cause of its own.
    host = mem_host(roce_tree(state="1: DOWN"))
    (f,) = by_code(run(ib.CHECKS[1], host).findings, "IB_PORT_DOWN", ERROR)
    assert f.cause is None


def test_roce_gid_table_not_in_sysfs_is_unknown_not_no_v2_gid():
    # A kernel before 4.5 has no gid_attrs/types: which GIDs are v2 cannot be told. That is
    # ROCE_GIDS_UNKNOWN; ROCE_NO_V2_GID is only said when the table was read and has none.
    tree = {k: v for k, v in roce_tree(gids=()).items() if "/gid_attrs/" not in k and "/gids/" not in k}
    res = run(ROCE, mem_host(tree))
    assert [(f.code, f.severity) for f in res.findings] == [("ROCE_GIDS_UNKNOWN", UNKNOWN)]
    assert res.status == "unknown"


def test_roce_netdev_not_visible_is_information():
    # In a pod the netdev lives in the host's namespace: not ROCE_NETDEV_DOWN in any severity.
    tree = {k: v for k, v in roce_tree().items() if not k.startswith("/sys/class/net/")}
    res = run(ROCE, mem_host(tree))
    assert res.status == "pass"
    (f,) = by_code(res.findings, "ROCE_NETDEV_NOT_SEEN", INFO)
    assert f.subject == "mlx5_0/1" and not by_code(res.findings, "ROCE_NETDEV_DOWN")


def test_roce_no_carrier_is_down_too():
    res = run(ROCE, mem_host(roce_tree(operstate="up", carrier="0")))
    assert by_code(res.findings, "ROCE_NETDEV_DOWN", ERROR)


def test_roce_skipped_without_ethernet_ports():
    res = run(ROCE, mem_host(ib_tree()))
    assert res.status == "skip" and "InfiniBand" in res.reason
    res = run(ROCE, mem_host({"/sys/class/net/lo/mtu": "65536"}))
    assert res.status == "skip" and "no RDMA devices" in res.reason


def test_roce_ignored_ports_and_vfs_are_not_judged():
    tree = roce_tree(mtu=1500)
    expect = dict(EXPECT, ignore_ports=["mlx5_0"])
    assert run(ROCE, mem_host(tree), expect).status == "skip"
    tree["/sys/class/infiniband/mlx5_0/device/physfn"] = "x"
    assert run(ROCE, mem_host(tree)).status == "skip"


def test_roce_from_real_ibv_devinfo_mtu_1024_and_unknown_gids(realworld, tmp_path):
    # DGX Spark: 4 RoCE ports ACTIVE at active_mtu 1024, no GIDs in plain ibv_devinfo.
    text = sample_text(realworld / "samples/ibv_devinfo/dgxspark_4_roce_ports_active_mtu1024_tabs.txt")
    res = run(ROCE, mem_host({"/cmd/ibv_devinfo.txt": text}))
    mtu = by_code(res.findings, "NET_MTU_LOW", WARNING)
    assert sorted(f.subject for f in mtu) == ["roceP2p1s0f0/1", "roceP2p1s0f1/1", "rocep1s0f0/1", "rocep1s0f1/1"]
    assert all("active MTU 1024 (netdev MTU unknown)" in f.message for f in mtu)
    assert len(by_code(res.findings, "ROCE_GIDS_UNKNOWN", UNKNOWN)) == 4
    assert not by_code(res.findings, "ROCE_NO_V2_GID")
    assert res.status == "unknown"


def test_roce_from_real_ibv_devinfo_v_gid_index_3(realworld):
    text = sample_text(realworld / "samples/ibv_devinfo/scaleoutsean_cx6_roce_ibv_devinfo_v_full.txt")
    res = run(ROCE, mem_host({"/cmd/ibv_devinfo.txt": text}))
    infos = {f.subject: f for f in by_code(res.findings, "ROCE_V2_GID", INFO)}
    assert infos["mlx5_0/1"].message == "RoCE v2 GID at index 3 (192.168.1.11): NCCL_IB_GID_INDEX=3"


# ---- NCCL list syntax ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, exclude, exact, entries",
    [
        ("mlx5_0,mlx5_1", False, False, [("mlx5_0", -1), ("mlx5_1", -1)]),
        ("=mlx5_0", False, True, [("mlx5_0", -1)]),
        ("^mlx5_0", True, False, [("mlx5_0", -1)]),
        ("^=mlx5_0:1,mlx5_1:2", True, True, [("mlx5_0", 1), ("mlx5_1", 2)]),
        ("mlx5_0:", False, False, [("mlx5_0", 0)]),  # atoi("") = 0: port 0, which never exists
        ("mlx5_0:1:2", False, False, [("mlx5_0", 1)]),
        (",,mlx5_0,:1,", False, False, [("mlx5_0", -1)]),
        ("^", True, False, []),
        ("=^mlx5_0", False, True, [("^mlx5_0", -1)]),  # '^' only counts first
        ("mlx5_0, mlx5_1", False, False, [("mlx5_0", -1), (" mlx5_1", -1)]),
    ],
)
def test_parse_if_list(value, exclude, exact, entries):
    lst = nccl.parse_if_list(value)
    assert (lst.exclude, lst.exact) == (exclude, exact)
    assert [(e.prefix, e.port) for e in lst.entries] == entries


DEVICES = [f"mlx5_{i}" for i in range(12)]


def taken(value, port=1):
    lst = nccl.parse_if_list(value)
    return [d for d in DEVICES if nccl.list_matches(lst, d, port)]


def test_list_matches_prefix_exact_exclusion_and_ports():
    assert taken("mlx5_1") == ["mlx5_1", "mlx5_10", "mlx5_11"]
    assert taken("=mlx5_1") == ["mlx5_1"]
    assert taken("^mlx5_1") == [d for d in DEVICES if d not in ("mlx5_1", "mlx5_10", "mlx5_11")]
    assert taken("^=mlx5_1") == [d for d in DEVICES if d != "mlx5_1"]
    assert taken("=mlx5_0:1,mlx5_2:1", port=1) == ["mlx5_0", "mlx5_2"]
    assert taken("=mlx5_0:2", port=1) == []
    assert taken("^=mlx5_0:1", port=2) == DEVICES  # excludes port 1 only
    assert taken("mlx5") == DEVICES
    assert taken("^") == []
    assert taken("") == DEVICES  # NCCL: an empty list matches everything
    assert taken("mlx5_0, mlx5_1") == ["mlx5_0"]


@pytest.mark.parametrize(
    "text, value, exact",
    [
        ("1", 1, True),
        ("0", 0, True),
        ("true", 0, False),
        ("yes", 0, False),
        ("0x10", 16, True),
        ("010", 8, True),
        ("08", 0, False),
        ("  -3", -3, True),
        ("1abc", 1, False),
        ("99999999999999999999", None, True),
    ],
)
def test_c_strtoll(text, value, exact):
    assert nccl.c_strtoll(text) == value
    assert nccl.numeric_exact(text) == exact


@pytest.mark.parametrize(
    "value, bad",
    [
        ("10.0.0.1", False),
        ("fd00::1", False),
        ("job-master-0.job.default.svc", False),
        ("master.", False),
        ("", True),
        ("  ", True),
        (" master", True),
        ("10.0.0.300", True),
        ("mas ter", True),
        ("-master", True),
        ("tcp://10.0.0.1", True),
        ("a" * 64, True),
    ],
)
def test_master_addr_error(value, bad):
    assert (nccl.master_addr_error(value) is not None) == bad


# ---- nccl.env judges on facts built here -----------------------------------------------------


def hp(dev, port=1, state="ACTIVE", ll="InfiniBand", gids=(), known=True):
    return nccl.HcaPort(dev, port, state, ll, tuple(gids), known)


IB8 = tuple(hp(f"mlx5_{i}") for i in range(12)) + (hp("mlx5_12", state="DOWN"),)


def judge(settings, ports=IB8, interfaces=None, origin=None, if_source="netlink"):
    facts = nccl.NcclFacts(dict(settings), dict(origin or {}), "test", ports, interfaces, if_source)
    return nccl.judge_nccl(facts, EXPECT)


def test_no_nccl_settings_is_a_pass_with_an_info():
    (f,) = judge({})
    assert f.severity == INFO and f.message.startswith("no NCCL settings: NCCL picks all HCAs")


def test_hca_naming_a_missing_device_is_an_error_listing_active_ports():
    out = judge({"NCCL_IB_HCA": "=mlx5_20"})
    (f,) = by_code(out, "NCCL_IB_HCA_NO_MATCH", ERROR)
    assert "'mlx5_20' matches no device" in f.message
    assert "mlx5_0/1, mlx5_1/1" in f.message and "mlx5_12/1" not in f.message.split("ACTIVE ports:")[1]
    assert 'name: NCCL_IB_HCA' in f.remedy and '"=mlx5_0,mlx5_1,mlx5_10' in f.remedy
    # The pod-spec change is data on the finding (preflight's YAML is built from it, not from the prose).
    ((name, value, why),) = f.pod.env
    assert name == "NCCL_IB_HCA" and value.startswith("=mlx5_0,mlx5_1,mlx5_10") and "ACTIVE" in why


def test_hca_remedy_keeps_the_compute_hcas_of_the_profile():
    facts = nccl.NcclFacts({"NCCL_IB_HCA": "=mlx5_20"}, {}, "test", IB8)
    (f,) = nccl.judge_nccl(facts, dict(EXPECT, compute_hcas=["mlx5_1", "mlx5_2"]))
    assert '"=mlx5_1,mlx5_10,mlx5_11,mlx5_2"' in f.remedy and "compute_hcas" in f.remedy


def test_hca_one_missing_device_among_good_ones_is_still_an_error():
    out = judge({"NCCL_IB_HCA": "=mlx5_0,mlx5_99"})
    (f,) = by_code(out, "NCCL_IB_HCA_NO_MATCH", ERROR)
    assert "'mlx5_99' matches no device" in f.message
    assert any(i.code == "NCCL_ENV_INFO" and "NCCL will use mlx5_0/1" in i.message for i in out)


def test_hca_down_port_is_a_warning_when_others_remain():
    out = judge({"NCCL_IB_HCA": "=mlx5_0,mlx5_12"})
    assert not by_code(out, "NCCL_IB_HCA_NO_MATCH", ERROR)
    (w,) = by_code(out, "NCCL_IB_HCA_NO_MATCH", WARNING)
    assert "mlx5_12/1 DOWN" in w.message and "runs on 1 port (mlx5_0/1)" in w.message


def test_hca_only_down_port_is_an_error():
    (f,) = by_code(judge({"NCCL_IB_HCA": "=mlx5_12"}), "NCCL_IB_HCA_NO_MATCH", ERROR)
    assert "names no ACTIVE port" in f.message


def test_hca_missing_port_number():
    (f,) = by_code(judge({"NCCL_IB_HCA": "=mlx5_0:2"}), "NCCL_IB_HCA_NO_MATCH", ERROR)
    assert "mlx5_0 has no port 2" in f.message


def test_hca_space_after_comma_is_pointed_out():
    out = judge({"NCCL_IB_HCA": "mlx5_0, mlx5_2"})
    (f,) = by_code(out, "NCCL_IB_HCA_NO_MATCH", ERROR)
    assert "' mlx5_2' matches no device (NCCL does not trim spaces)" in f.message


def test_hca_prefix_ambiguity_is_an_info():
    out = judge({"NCCL_IB_HCA": "mlx5_1"})
    assert not [f for f in out if f.severity in (ERROR, WARNING)]
    (f,) = by_code(out, "NCCL_IB_HCA_PREFIX", INFO)
    assert "'mlx5_1' also selects mlx5_10, mlx5_11" in f.message and "NCCL_IB_HCA==mlx5_1" in f.remedy
    assert not by_code(judge({"NCCL_IB_HCA": "=mlx5_1"}), "NCCL_IB_HCA_PREFIX")
    assert not by_code(judge({"NCCL_IB_HCA": "mlx5"}), "NCCL_IB_HCA_PREFIX")  # meant all of them
    (x,) = by_code(judge({"NCCL_IB_HCA": "^mlx5_1"}), "NCCL_IB_HCA_PREFIX")
    assert "also excludes mlx5_10, mlx5_11" in x.message and "^=mlx5_1" in x.remedy


def test_hca_exclusion_leaving_nothing_and_excluding_nothing():
    (f,) = by_code(judge({"NCCL_IB_HCA": "^mlx5"}), "NCCL_IB_HCA_NO_MATCH", ERROR)
    assert "the exclusion leaves no ACTIVE port" in f.message
    out = judge({"NCCL_IB_HCA": "^=mlx5_99"})
    assert not [f for f in out if f.severity in (ERROR, WARNING)]
    assert any("excludes nothing" in f.message for f in out)


def test_hca_with_no_rdma_devices_and_unknown_devices():
    (f,) = by_code(judge({"NCCL_IB_HCA": "mlx5_0"}, ports=()), "NCCL_IB_HCA_NO_MATCH", ERROR)
    assert "ACTIVE ports: none" in f.message and "no ACTIVE RDMA port" in f.remedy
    # Unknown devices: a code of its own, never the problem's.
    out = judge({"NCCL_IB_HCA": "mlx5_0"}, ports=None)
    assert not by_code(out, "NCCL_IB_HCA_NO_MATCH")
    (u,) = by_code(out, "NCCL_IB_HCA_UNKNOWN")
    assert u.severity == UNKNOWN


def test_hca_origin_is_shown():
    (f,) = by_code(judge({"NCCL_IB_HCA": "=mlx5_77"}, origin={"NCCL_IB_HCA": "/etc/nccl.conf"}), "NCCL_IB_HCA_NO_MATCH")
    assert "NCCL_IB_HCA==mlx5_77 (from /etc/nccl.conf)" in f.message


def test_ib_disable_with_active_ports_is_an_error():
    (f,) = by_code(judge({"NCCL_IB_DISABLE": "1"}), "NCCL_IB_DISABLED_BY_ENV", ERROR)
    assert "12 RDMA ports are ACTIVE" in f.message
    (g,) = by_code(judge({"NCCL_NET": "Socket"}), "NCCL_IB_DISABLED_BY_ENV", ERROR)
    assert "NCCL_NET=Socket" in g.message
    assert not by_code(judge({"NCCL_IB_DISABLE": "0"}), "NCCL_IB_DISABLED_BY_ENV")
    # no ACTIVE port: disabling RDMA costs nothing here
    out = judge({"NCCL_IB_DISABLE": "1"}, ports=(hp("mlx5_0", state="DOWN"),))
    assert not by_code(out, "NCCL_IB_DISABLED_BY_ENV", ERROR)


def test_ib_disable_true_is_read_as_zero():
    out = judge({"NCCL_IB_DISABLE": "true"})
    assert not by_code(out, "NCCL_IB_DISABLED_BY_ENV")
    (w,) = by_code(out, "NCCL_ENV_INVALID", WARNING)
    assert "reads it as 0 (IB enabled)" in w.message


def test_ib_disable_skips_the_hca_check():
    out = judge({"NCCL_IB_DISABLE": "1", "NCCL_IB_HCA": "=nothing"})
    assert not by_code(out, "NCCL_IB_HCA_NO_MATCH")


ROCE_GIDS = (
    Gid(0, LL, "IB/RoCE v1"),
    Gid(1, LL, "RoCE v2"),
    Gid(2, "::ffff:10.0.0.1", "IB/RoCE v1", ipv4="10.0.0.1"),
    Gid(3, "::ffff:10.0.0.1", "RoCE v2", ipv4="10.0.0.1"),
)
ROCE_PORTS = (
    hp("mlx5_0", ll="Ethernet", gids=ROCE_GIDS),
    hp("mlx5_1", ll="Ethernet", gids=ROCE_GIDS),
    hp("mlx5_2", ll="Ethernet", gids=ROCE_GIDS[:2]),  # no IP on its netdev
)


def test_gid_index_on_roce_ports():
    out = judge({"NCCL_IB_GID_INDEX": "3", "NCCL_IB_HCA": "=mlx5_0,mlx5_1"}, ports=ROCE_PORTS)
    assert not by_code(out, "NCCL_IB_GID_INDEX_BAD")
    for idx, why in (("2", "is IB/RoCE v1"), ("1", "is link-local"), ("7", "has no GID 7")):
        (f,) = by_code(judge({"NCCL_IB_GID_INDEX": idx, "NCCL_IB_HCA": "=mlx5_0,mlx5_1"}, ports=ROCE_PORTS), "NCCL_IB_GID_INDEX_BAD", ERROR)
        assert why in f.message and "its RoCE v2 IPv4 GID is index 3" in f.message
        assert 'name: NCCL_IB_GID_INDEX\n  value: "3"' in f.remedy
    # unset NCCL_IB_HCA: NCCL uses every ACTIVE port, mlx5_2 included, whose GID 3 does not exist
    (f,) = by_code(judge({"NCCL_IB_GID_INDEX": "3"}, ports=ROCE_PORTS), "NCCL_IB_GID_INDEX_BAD", ERROR)
    assert "mlx5_2/1 has no GID 3; it has no RoCE v2 IPv4 GID" in f.message


def test_gid_index_auto_unknown_and_irrelevant():
    assert not [f for f in judge({"NCCL_IB_GID_INDEX": "-1"}, ports=ROCE_PORTS) if f.severity != INFO]
    unknown = (hp("mlx5_0", ll="Ethernet", known=False),)
    out = judge({"NCCL_IB_GID_INDEX": "3"}, ports=unknown)
    assert not by_code(out, "NCCL_IB_GID_INDEX_BAD")
    (u,) = by_code(out, "NCCL_IB_GID_INDEX_UNKNOWN")
    assert u.severity == UNKNOWN
    (u,) = by_code(judge({"NCCL_IB_GID_INDEX": "3"}, ports=None), "NCCL_IB_GID_INDEX_UNKNOWN")
    assert u.severity == UNKNOWN
    out = judge({"NCCL_IB_GID_INDEX": "3"})  # InfiniBand only
    assert any("has no effect here" in f.message for f in out)
    (bad,) = by_code(judge({"NCCL_IB_GID_INDEX": "x"}, ports=ROCE_PORTS[:1]), "NCCL_IB_GID_INDEX_BAD")
    assert "NCCL reads 'x' as 0" in bad.message


IFS = (
    nccl.NetIf("lo", True, 65536, ("127.0.0.1",)),
    nccl.NetIf("eth0", True, 1500, ("10.1.0.5",)),
    nccl.NetIf("eth10", False, 1500, ()),
    nccl.NetIf("ib0", False, 2044, ()),
    nccl.NetIf("net1", True, 9000, ()),
)


def sock(value, interfaces=IFS, **kw):
    return [f for f in judge({"NCCL_SOCKET_IFNAME": value}, interfaces=interfaces, **kw)]


def test_socket_ifname_matches():
    (ok,) = sock("eth")
    assert ok.severity == INFO and "NCCL will use eth0 (10.1.0.5)" in ok.message
    (f,) = by_code(sock("ib"), "NCCL_SOCKET_IFNAME_NO_MATCH", ERROR)
    assert "matches only ib0 (down)" in f.message and "Up: lo, eth0, net1" in f.message
    assert '"=eth0"' in f.remedy
    (g,) = by_code(sock("=eth1"), "NCCL_SOCKET_IFNAME_NO_MATCH", ERROR)
    assert "matches no interface" in g.message
    (x,) = by_code(sock("^=eth10,ib0,lo,eth0"), "NCCL_SOCKET_IFNAME_NO_ADDR", ERROR)
    assert "net1 (up) but none has an IP address" in x.message
    (y,) = sock("^lo,net")
    assert y.severity == INFO and "eth0" in y.message


def test_socket_ifname_edge_cases():
    (one,) = sock("e")
    assert one.severity == INFO and "ignored by NCCL" in one.message
    (u,) = sock("eth0", interfaces=None, if_source="no /sys/class/net in bundle")
    assert u.severity == UNKNOWN and u.code == "NCCL_SOCKET_IFNAME_UNKNOWN"
    # sysfs does not show addresses: an up interface is enough
    (s,) = sock("net1", interfaces=(nccl.NetIf("net1", True, 9000, None),), if_source="sysfs")
    assert s.severity == INFO
    (d,) = sock("net1", interfaces=(nccl.NetIf("net1", None, 9000, None),), if_source="sysfs")
    assert d.severity == UNKNOWN and d.code == "NCCL_SOCKET_IFNAME_UNKNOWN"


def test_master_addr_and_port_findings():
    out = judge({"MASTER_ADDR": "", "MASTER_PORT": "29500x"})
    assert {f.subject for f in by_code(out, "NCCL_MASTER_ADDR_BAD", ERROR)} == {"MASTER_ADDR", "MASTER_PORT"}
    assert not by_code(judge({"MASTER_ADDR": "job-master-0.job", "MASTER_PORT": "29500"}), "NCCL_MASTER_ADDR_BAD")


# ---- nccl.env probe on trees -----------------------------------------------------------------


def runtime(env):
    return json.dumps({"env": env})


def test_nccl_probe_reads_runtime_env_conf_file_and_sysfs_interfaces():
    files = roce_tree()
    files.update(
        {
            "/runtime.json": runtime({"NCCL_IB_HCA": "=mlx5_0", "NCCL_SOCKET_IFNAME": "=enp1s0f0np0", "PATH": "/bin"}),
            "/etc/nccl.conf": "# site\nNCCL_IB_HCA==mlx5_9\nNCCL_IB_GID_INDEX=3\nNCCL_DEBUG =INFO\n",
        }
    )
    res = run(NCCL, mem_host(files))
    f = res.facts
    assert f.settings["NCCL_IB_HCA"] == "=mlx5_0" and f.origin["NCCL_IB_HCA"] == "env"  # env wins
    assert f.settings["NCCL_IB_GID_INDEX"] == "3" and f.origin["NCCL_IB_GID_INDEX"] == "/etc/nccl.conf"
    assert "NCCL_DEBUG" not in f.settings  # "NCCL_DEBUG " (with the space) is another variable to NCCL
    assert f.interfaces_source == "sysfs" and [i.name for i in f.interfaces] == ["enp1s0f0np0"]
    (w,) = by_code(res.findings, "NCCL_ENV_INVALID", WARNING)
    assert "'NCCL_DEBUG '" in w.message and w.subject == "nccl.conf"
    assert not [x for x in res.findings if x.severity not in (INFO, WARNING)], res.findings
    assert NCCL.inventory(f) == {"nccl_env": {"NCCL_IB_HCA": "=mlx5_0", "NCCL_SOCKET_IFNAME": "=enp1s0f0np0", "NCCL_IB_GID_INDEX": "3"}}


def test_nccl_probe_netdev_down_in_sysfs():
    files = roce_tree(operstate="down", carrier="0")
    files["/runtime.json"] = runtime({"NCCL_SOCKET_IFNAME": "enp"})
    res = run(NCCL, mem_host(files))
    assert [f.code for f in res.findings if f.severity == ERROR] == ["NCCL_SOCKET_IFNAME_NO_MATCH"]


def test_nccl_probe_falls_back_to_recorded_env_then_skips():
    res = run(NCCL, mem_host({"/cmd/env.txt": "PATH=/bin\nNCCL_IB_DISABLE=1\n", **ib_tree()}))
    assert res.facts.env_source.endswith("cmd/env.txt")
    assert by_code(res.findings, "NCCL_IB_DISABLED_BY_ENV", ERROR)
    res = run(NCCL, mem_host(ib_tree()))
    assert res.status == "skip" and "environment is not known" in res.reason


def test_nccl_probe_without_interfaces_in_bundle_is_unknown_not_a_crash():
    res = run(NCCL, mem_host({"/runtime.json": runtime({"NCCL_SOCKET_IFNAME": "eth0"}), "/sys/class/net": b"garbage"}))
    assert res.status == "unknown"


# ---- labels ------------------------------------------------------------------------------------


def test_label_validation_rules():
    assert L.key_error("rdmadoctor.io/ready") is None
    assert L.key_error(L.RDMA_CAPABLE) is None
    assert L.key_error("plain-name") is None
    assert L.key_error("Upper.io/x") is not None  # prefix must be lowercase
    assert L.key_error("rdmadoctor.io/") is not None
    assert L.key_error("/x") is not None
    assert L.key_error("rdmadoctor.io/" + "a" * 64) is not None
    assert L.key_error("rdmadoctor.io/-x") is not None
    assert L.value_error("") is None and L.value_error("PXB") is None and L.value_error("2.5") is None
    assert L.value_error("a" * 64) is not None
    assert L.value_error("NV 12") is not None
    assert L.value_error("-x") is not None
    assert L.value_error(True) is not None
    good, bad = L.validate({"rdmadoctor.io/ok": "1", "rdmadoctor.io/bad": "a b"})
    assert good == {"rdmadoctor.io/ok": "1"} and len(bad) == 1 and "'a b'" in bad[0]


_VALUE_CHARS = set(string.ascii_letters + string.digits + "-_.")


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=80), st.one_of(st.text(max_size=80), st.integers(), st.none())))
def test_an_invalid_label_never_comes_out(labels):
    good, bad = L.validate(labels)
    assert len(good) + len(bad) == len(labels)
    for k, v in good.items():
        # checked independently of labels.py's own patterns
        assert isinstance(v, str) and len(v) <= 63 and set(v) <= _VALUE_CHARS
        assert v == "" or (v[0].isascii() and v[0].isalnum() and v[-1].isascii() and v[-1].isalnum())
        name = k.rsplit("/", 1)[-1]
        assert 1 <= len(name) <= 63 and set(name) <= _VALUE_CHARS and name[0].isalnum() and name[-1].isalnum()
        if "/" in k:
            prefix = k.rsplit("/", 1)[0]
            assert prefix == prefix.lower() and len(prefix) <= 253
            assert all(re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", part) for part in prefix.split("."))


def pi(subject, state="ACTIVE", ll="InfiniBand", rate=400.0):
    return node.PortInput(subject, state, ll, rate)


class _Facts:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def result(cid, status, facts=None):
    return CheckResult(cid, cid, status, facts=facts)


def node_json(labels, name="gpu-node-7"):
    return json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}})


def test_node_object_in_sync_and_unreadable():
    others = {"ib.ports": result("ib.ports", "pass")}
    first = run(NODE, mem_host(ib_tree()), results=others).facts.labels
    res = run(NODE, mem_host({**ib_tree(), "/cmd/node.json": node_json(first)}), results=others)
    assert res.status == "pass" and "carries the report's 1 label" in res.findings[0].message
    listed = json.dumps({"kind": "List", "items": [json.loads(node_json(first))]})
    assert run(NODE, mem_host({**ib_tree(), "/cmd/node.json": listed}), results=others).status == "pass"
    for bad in ("{not json", "[]", json.dumps({"kind": "Pod", "metadata": {}}), b"\xff\xfe"):
        res = run(NODE, mem_host({**ib_tree(), "/cmd/node.json": bad}), results=others)
        assert res.status == "unknown" and by_code(res.findings, "NODE_OBJECT_UNREADABLE")


def test_full_run_publishes_labels_in_the_report(tmp_path):
    from conftest import check_json

    bundle = tmp_path / "b"
    for path, data in {**roce_tree(mtu=1500), "/runtime.json": runtime({"NCCL_IB_HCA": "=mlx5_0"})}.items():
        if isinstance(data, BaseException):
            continue
        p = bundle / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(data)
    code, rep = check_json(["--bundle", str(bundle)])
    checks = {c["id"]: c for c in rep["checks"]}
    assert checks["roce.config"]["status"] == "warn"
    assert checks["nccl.env"]["status"] == "pass"
    assert rep["labels"][L.LINK_LAYER] == "ethernet" and rep["labels"][L.ACTIVE_PORTS] == "1"
    assert rep["labels"][L.READY] == ("true" if all(c["status"] in ("pass", "warn", "skip") for i, c in checks.items() if i != "node.labels") else "false")
    assert rep["inventory"]["nccl_env"] == {"NCCL_IB_HCA": "=mlx5_0"}
    assert rep["inventory"]["roce"]["mlx5_0/1"]["netdev_mtu"] == 1500


def test_mounted_root_whose_netns_differs_uses_the_roots_sysfs(tmp_path):
    from rdmadoctor.host import open_host

    for name, oper in (("ens9f0", "up"), ("ens9f1", "down")):
        d = tmp_path / "sys/class/net" / name
        d.mkdir(parents=True)
        (d / "operstate").write_text(oper + "\n")
        (d / "flags").write_text("0x1003\n" if oper == "up" else "0x1002\n")
        (d / "mtu").write_text("9000\n")
    host = open_host(root=str(tmp_path))
    assert host.kind == "root" and host.live_process
    interfaces, source = host.interfaces()
    # This process's namespace has no ens9f0: the mounted root is another machine's (or the host's) view.
    assert source.startswith("sysfs of ") and "differs" in source
    assert {i.name: i.up for i in interfaces} == {"ens9f0": True, "ens9f1": False}


def test_live_host_without_psutil_or_netlink_falls_back_to_sysfs(monkeypatch):
    def boom():
        raise ImportError("No module named 'pyroute2'")

    def no_proc():
        raise FileNotFoundError(2, "No such file or directory", "/proc/net/dev")

    monkeypatch.setattr(net, "_psutil_interfaces", no_proc)
    monkeypatch.setattr(net, "_netlink_interfaces", boom)
    host = mem_host({"/sys/class/net/eth0/operstate": "up\n", "/sys/class/net/eth0/mtu": "1500\n"})
    host.live_process = True
    interfaces, source = host.interfaces()
    assert [i.name for i in interfaces] == ["eth0"]
    assert source.startswith("sysfs; interfaces unreadable (psutil failed (FileNotFoundError") and "netlink: ImportError" in source


def test_live_host_where_psutil_fails_asks_netlink(monkeypatch):
    def no_proc():
        raise PermissionError(13, "Permission denied", "/proc/net/dev")

    monkeypatch.setattr(net, "_psutil_interfaces", no_proc)
    monkeypatch.setattr(net, "_netlink_interfaces", lambda: (nccl.NetIf("eth0", True, 9000, ("10.0.0.1",)),))
    host = mem_host({"/sys/class/net/eth0/operstate": "up\n", "/sys/class/net/eth0/mtu": "9000\n"})
    host.live_process = True
    interfaces, source = host.interfaces()
    assert source == "netlink" and interfaces[0].addresses == ("10.0.0.1",)


def test_psutil_and_netlink_read_the_same_interfaces():
    """On this machine's namespace the two readers agree: names in ifindex order, up (IFF_UP and
    IFF_RUNNING), MTU, and the addresses (IPv4 first, no IPv6 loopback, no %scope)."""
    try:
        via_netlink = net._netlink_interfaces()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"netlink cannot be read here: {type(e).__name__}: {e}")
    assert net._psutil_interfaces() == via_netlink


def test_psutil_reader_joins_address_labels_and_old_psutil(monkeypatch):
    """getifaddrs names an IPv4 address by its label (eth0:1); psutil < 5.9.3 has no flags."""
    import socket
    from collections import namedtuple

    import psutil

    Stat = namedtuple("Stat", "isup duplex speed mtu")  # psutil 5.9.0-5.9.2: no flags
    Addr = namedtuple("Addr", "family address netmask broadcast ptp")
    monkeypatch.setattr(psutil, "net_if_stats", lambda: {"eth0": Stat(True, 2, 25000, 9000), "eth1": Stat(False, 0, 0, 1500)})
    monkeypatch.setattr(psutil, "net_if_addrs", lambda: {
        "eth0": [Addr(psutil.AF_LINK, "02:00:00:00:00:01", None, None, None),
                 Addr(socket.AF_INET6, "fe80::1%eth0", None, None, None), Addr(socket.AF_INET, "10.0.0.1", None, None, None)],
        "eth0:1": [Addr(socket.AF_INET, "10.0.1.1", None, None, None)],
    })
    monkeypatch.setattr(net, "_ifindex", {"eth0": 2, "eth1": 3}.get)
    got = net._psutil_interfaces()
    assert got == (nccl.NetIf("eth0", True, 9000, ("10.0.0.1", "fe80::1", "10.0.1.1")), nccl.NetIf("eth1", False, 1500, ()))


def test_pyroute2_is_not_imported_without_socket_ifname():
    code = (
        "import sys; from rdmadoctor.cli import main\n"
        "try:\n main(['check', '--only', 'nccl.env', '--json'])\n"
        "except SystemExit: pass\n"
        "sys.stderr.write(str('pyroute2' in sys.modules))"
    )
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    env.update(RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD="1", NCCL_IB_HCA="mlx5_0")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.stderr == "False"
    # The interfaces are read (psutil) when a verdict needs them, without pyroute2 where psutil answers.
    env["NCCL_SOCKET_IFNAME"] = "lo"
    proc = subprocess.run([sys.executable, "-c", code.replace("'pyroute2' in sys.modules", "('pyroute2' in sys.modules, 'psutil' in sys.modules)")],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.stderr == "(False, True)"


@pytest.mark.parametrize(
    "patch",
    [
        {"/sys/class/net/enp1s0f0np0/mtu": "garbage\n"},
        {"/sys/class/net/enp1s0f0np0/mtu": b"\xff\xfe"},
        {"/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/3": b"\xffRoCE v2"},
        {"/sys/class/infiniband/mlx5_0/ports/1/gids/3": "not-a-gid\n"},
        {"/sys/class/net/enp1s0f0np0/operstate": OSError(5, "Input/output error")},
        {"/runtime.json": b"{\xff"},
        {"/runtime.json": json.dumps({"env": {"NCCL_IB_HCA": "\x00", "NCCL_SOCKET_IFNAME": "^=", "NCCL_IB_GID_INDEX": "0x" + "f" * 40}})},
        {"/cmd/node.json": json.dumps({"kind": "Node", "metadata": {"name": 7, "labels": ["x"]}})},
    ],
)
def test_bad_input_never_raises(patch):
    files = {**roce_tree(), "/runtime.json": runtime({"NCCL_IB_HCA": "mlx5", "NCCL_IB_GID_INDEX": "3"}), **patch}
    for check in (ROCE, NCCL, NODE):
        res = run(check, mem_host(files))
        assert "internal error" not in (res.reason or ""), (check.id, res.reason)


def test_nccl_probe_reads_the_job_users_nccl_conf_before_etc():
    # NCCL (ncclLoadParam / initEnv): NCCL_CONF_FILE, else ~/.nccl.conf, then /etc/nccl.conf.
    files = roce_tree()
    files.update(
        {
            "/runtime.json": runtime({"HOME": "/home/trainer"}),
            "/home/trainer/.nccl.conf": "NCCL_IB_DISABLE=1\n",
            "/etc/nccl.conf": "NCCL_IB_DISABLE=0\nNCCL_IB_GID_INDEX=3\n",
        }
    )
    f = run(NCCL, mem_host(files)).facts
    assert f.settings["NCCL_IB_DISABLE"] == "1" and f.origin["NCCL_IB_DISABLE"] == "/home/trainer/.nccl.conf"
    assert f.origin["NCCL_IB_GID_INDEX"] == "/etc/nccl.conf"
    # NCCL_CONF_FILE replaces ~/.nccl.conf
    files["/runtime.json"] = runtime({"HOME": "/home/trainer", "NCCL_CONF_FILE": "/opt/nccl.conf"})
    files["/opt/nccl.conf"] = "NCCL_IB_GID_INDEX=5\n"
    f = run(NCCL, mem_host(files)).facts
    assert f.settings["NCCL_IB_DISABLE"] == "0" and f.settings["NCCL_IB_GID_INDEX"] == "5"
