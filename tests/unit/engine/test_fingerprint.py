"""The fingerprint: the facts each report carries for the fleet (and the gang) to compare."""

from __future__ import annotations

import copy
import json

import pytest

from rdmadoctor.engine import fingerprint as F
from rdmadoctor.fixturegen import hgx_h100_ib, roce_node, write_dir
from rdmadoctor.fixturegen.sysfs import build
from tests.conftest import check_json


@pytest.fixture(scope="module")
def hgx() -> dict:
    return check_json(["--example", "hgx-h100-ib", "--profile", "hgx-8gpu-ndr"])[1]


@pytest.fixture(scope="module")
def roce() -> dict:
    return check_json(["--example", "roce-node"])[1]


def test_every_report_has_the_facts_of_its_node(hgx):
    fp = hgx["fingerprint"]
    assert fp["schema"] == F.SCHEMA
    assert fp["node"] == {
        "kernel": "5.15.0-91-generic",
        "rdma_driver": "mlx5_core",
        "rdma_driver_version": None,  # the in-tree driver has no /sys/module/mlx5_core/version
        "rdma_core": "44.0-2",
        "ofed": None,
        "nvidia_driver": "535.129.03",
        "gpudirect": "peermem",
        "gpu_count": 8,
        "gpu_model": "10de:2330",
        "numa_nodes": 2,
        "rails": {f"GPU{i}": f"mlx5_{i}" for i in range(8)},
        "pcie": {**{f"GPU{i}": {"gen": 5, "width": 16} for i in range(8)}, **{f"mlx5_{i}": {"gen": 5, "width": 16} for i in range(10)}},
    }
    assert len(fp["ports"]) == 10
    assert fp["ports"][0] == {
        "device": "mlx5_0", "port": 1, "hca_type": "MT4129", "board_id": "MT_0000000838", "pci_id": "15b3:1021",
        "fw_ver": "28.39.2048", "link_layer": "InfiniBand", "rate_gbps": 400.0, "width": "4X", "state": "ACTIVE",
        "active_mtu": None, "netdev": "ibp20s0", "netdev_mtu": 4092, "subnet_prefix": "fe80:0000:0000:0000",
        "sm_lid": 1, "gid_index": None, "pkey": "0xffff", "v2_gid_indices": None,
    }
    assert fp["identity"]["hostname"] == "hgx-h100-017"
    assert fp["identity"]["lids"]["mlx5_0/1"] == hgx["inventory"]["rdma_devices"][0]["ports"][0]["lid"]


def test_roce_ports_carry_the_gid_index_nccl_would_pick_and_the_netdev_mtu(roce):
    port = roce["fingerprint"]["ports"][0]
    assert (port["link_layer"], port["gid_index"], port["netdev_mtu"], port["active_mtu"]) == ("Ethernet", 3, 9000, 4096)
    assert port["subnet_prefix"] is None  # a RoCE GID is the netdev's address, not an IB subnet
    assert port["v2_gid_indices"] == [1, 3]  # carried for the gang, never compared
    assert not any(k.endswith("v2_gid_indices") for k in F.flatten(roce["fingerprint"]))


def test_the_flat_view_never_holds_identity_or_unknowns(hgx):
    flat = F.flatten(hgx["fingerprint"])
    assert flat["port.mlx5_0/1.fw_ver"] == "28.39.2048"
    assert flat["port.mlx5_0/1.rate_gbps"] == 400 and isinstance(flat["port.mlx5_0/1.rate_gbps"], int)
    assert flat["node.kernel"] == "5.15.0-91-generic"
    assert flat["node.rails.GPU3"] == "mlx5_3" and flat["node.pcie.mlx5_9.width"] == 16
    assert flat["node.ports"] == ",".join(sorted(f"mlx5_{i}/1" for i in range(10)))
    assert not any(k.startswith(F.IDENTITY) or "guid" in k or k.endswith(".lid") for k in flat)
    assert "node.ofed" not in flat and None not in flat.values()
    # Identity can change freely: the flat view does not move.
    other = copy.deepcopy(hgx["fingerprint"])
    other["identity"] = {"hostname": "elsewhere", "node_guids": {}, "lids": {"mlx5_0/1": 99}, "addresses": ["10.0.0.1"]}
    assert F.flatten(other) == flat


@pytest.mark.parametrize("name", ["hgx", "roce"])
def test_the_compact_form_flattens_to_the_same_view_and_stays_small(name, request):
    fp = request.getfixturevalue(name)["fingerprint"]
    small = F.compact(fp)
    assert F.flatten(small) == F.flatten(fp)
    text = F.compact_text(small)
    assert len(text) < 2048 and json.loads(text) == small
    assert F.compact_text(F.compact(copy.deepcopy(fp))) == text  # the same facts, the same bytes


def test_a_compact_form_over_its_bound_keeps_the_node_and_the_port_list(hgx):
    small = F.compact(hgx["fingerprint"], max_bytes=600)
    assert small["t"] is True and small["p"] == {}
    flat = F.flatten(small)
    assert flat["node.kernel"] == "5.15.0-91-generic" and "node.ports" in flat
    assert not any(k.startswith("port.") for k in flat)


def test_a_node_with_other_firmware_and_mtu_differs_in_exactly_those_fields(tmp_path):
    base = roce_node()
    odd = roce_node()
    odd.hcas[1].fw_ver = "28.41.1000"
    odd.hcas[2].ports[0].netdev_mtu = 1500
    reps = []
    for i, node in enumerate((base, odd)):
        root = tmp_path / f"n{i}"
        write_dir(build(node), str(root))
        reps.append(check_json(["--root", str(root)])[1])
    a, b = (F.flatten(r["fingerprint"]) for r in reps)
    diff = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
    assert diff == {"port.mlx5_1/1.fw_ver", "port.mlx5_2/1.netdev_mtu", "port.mlx5_2/1.active_mtu"}
    assert (b["port.mlx5_2/1.netdev_mtu"], b["port.mlx5_2/1.active_mtu"]) == (1500, 1024)


def test_an_hgx_node_generated_here_matches_the_shipped_example(tmp_path, hgx):
    root = tmp_path / "hgx"
    write_dir(build(hgx_h100_ib()), str(root))
    rep = check_json(["--root", str(root), "--profile", "hgx-8gpu-ndr"])[1]
    assert F.flatten(rep["fingerprint"]) == F.flatten(hgx["fingerprint"])
