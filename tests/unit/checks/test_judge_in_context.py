"""Judge in context (issue 15, item 3): the pool a port is in, the HCA GPUDirect needs, and the
inventory that lists what was seen whatever a check decided."""

from __future__ import annotations

import shutil

from conftest import FIXTURES, check_json, run_cli


def test_an_infiniband_node_in_a_roce_pool_is_an_error_with_the_value_the_pool_needs():
    code, rep = check_json(["--example", "hgx-h100-ib", "--profile", "hgx-8gpu-roce-400g"])
    assert code == 1 and rep["status"] == "fail" and rep["labels"]["rdmadoctor.io/ready"] == "false"
    mism = [f for c in rep["checks"] for f in c["findings"] if f["code"] == "IB_LINK_LAYER_MISMATCH"]
    assert mism and all(f["severity"] == "error" and f["kind"] == "problem" for f in mism)
    first = mism[0]
    assert first["data"] == {"link_layer": "InfiniBand", "expected": "Ethernet", "mlxconfig": "LINK_TYPE_P1=2"}
    assert "set LINK_TYPE_P1=2" in first["remedy"] and "LINK_TYPE_P1=1" not in first["remedy"]
    assert first["remedy"].startswith("mlxconfig -d 0000:")  # the device's own PCI address
    code, out, _ = run_cli(["preflight", "--example", "hgx-h100-ib", "--profile", "hgx-8gpu-roce-400g"])
    assert code == 1 and "NO-GO" in out and "IB_LINK_LAYER_MISMATCH" in out


def test_a_roce_node_in_an_infiniband_pool_is_the_reverse():
    code, rep = check_json(["--example", "roce-node", "--profile", "hgx-8gpu-ndr"])
    mism = [f for c in rep["checks"] for f in c["findings"] if f["code"] == "IB_LINK_LAYER_MISMATCH"]
    assert code == 1 and mism and mism[0]["severity"] == "error"
    assert mism[0]["data"]["mlxconfig"] == "LINK_TYPE_P1=1" and "set LINK_TYPE_P1=1" in mism[0]["remedy"]


def _no_hca_with_peermem(tmp_path):
    """A GPU node without any HCA whose nvidia_peermem is loaded (it loads without one)."""
    root = tmp_path / "node"
    shutil.copytree(FIXTURES / "no-devices", root, symlinks=True)
    mods = root / "proc" / "modules"
    mods.write_text(mods.read_text() + "nvidia_peermem 16384 0 - Live 0x0000000000000000\n")
    return root


def test_no_gpudirect_label_without_an_rdma_device(tmp_path):
    code, rep = check_json(["--bundle", str(_no_hca_with_peermem(tmp_path))])
    assert rep["inventory"]["gpudirect"] is False
    assert rep["labels"].get("rdmadoctor.io/gpudirect", "false") == "false"
    # With an HCA the same modules give GPUDirect RDMA.
    _, rep = check_json(["--example", "hgx-h100-ib"])
    assert rep["inventory"]["gpudirect"] is True and rep["labels"]["rdmadoctor.io/gpudirect"] == "true"


def test_the_inventory_lists_gpus_seen_when_the_topology_check_skipped():
    code, rep = check_json(["--bundle", str(FIXTURES / "no-devices")])
    (topo,) = [c for c in rep["checks"] if c["id"] == "gpu.topology"]
    assert topo["status"] == "skip" and "no RDMA device" in topo["reason"]
    assert [g["name"] for g in rep["inventory"]["gpus"]] == ["GPU0", "GPU1"]
    assert rep["inventory"]["gpus"][0]["vendor"] == "NVIDIA"
    assert "rdmadoctor.io/gpu-nic" not in rep["labels"]
