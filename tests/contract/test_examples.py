"""The bundles shipped in rdmadoctor/examples: their verdicts, their text report, and that they are
exactly what `python -m rdmadoctor.fixturegen --examples` makes today."""

from __future__ import annotations

import os

import pytest
from conftest import check_json, codes_of, run_cli

from rdmadoctor import fixturegen
from rdmadoctor.examples import EXAMPLES, example_path
from rdmadoctor.host import mem_host

# name, extra args, exit code, status, the codes of every error/warning/unknown finding
CASES = [
    ("hgx-h100-ib", ["--profile", "hgx-8gpu-ndr"], 0, "pass", set()),
    ("hgx-h100-ib", [], 0, "pass", set()),
    ("roce-node", [], 0, "pass", set()),
    ("broken-pod", [], 1, "fail", {"MEMLOCK_LIMITED", "CAP_IPC_LOCK_MISSING", "SHM_TOO_SMALL", "IB_PORT_DOWN"}),
]


def test_generator_knows_every_shipped_example():
    assert list(fixturegen.EXAMPLES) == list(EXAMPLES)


@pytest.mark.parametrize("name,args,exit_code,status,codes", CASES, ids=[f"{c[0]}{'-' + c[1][1] if c[1] else ''}" for c in CASES])
def test_example_verdict(name, args, exit_code, status, codes):
    code, rep = check_json(["--example", name, *args])
    assert (code, rep["status"]) == (exit_code, status), codes_of(rep)
    assert codes_of(rep) == codes
    assert rep["host"]["kind"] == "bundle"
    for c in rep["checks"]:
        assert not (c.get("reason") or "").startswith("internal error"), c


def test_broken_pod_findings_name_the_subjects():
    _, rep = check_json(["--example", "broken-pod"])
    subjects = {f["code"]: f["subject"] for c in rep["checks"] for f in c["findings"] if f["severity"] == "error"}
    assert subjects["IB_PORT_DOWN"] == "mlx5_3/1"
    assert subjects["SHM_TOO_SMALL"] == "/dev/shm"


def test_hgx_inventory():
    _, rep = check_json(["--example", "hgx-h100-ib", "--profile", "hgx-8gpu-ndr"])
    inv = rep["inventory"]
    devs = inv["rdma_devices"]
    assert [d["name"] for d in devs] == [f"mlx5_{i}" for i in range(10)]
    assert all(d["driver"] == "mlx5_core" and d["fw_ver"] == "28.39.2048" for d in devs)
    assert {d["numa_node"] for d in devs[:4]} == {0} and {d["numa_node"] for d in devs[4:]} == {1}
    assert [p["rate_gbps"] for d in devs for p in d["ports"]] == [400.0] * 10
    assert len(inv["gpus"]) == 8
    # Each GPU shares its PCIe switch with one compute HCA; the storage card is far from all.
    topo = inv["topology"]
    for g, row in enumerate(topo["gpu_nic"]):
        rel = dict(zip(topo["nics"], row))
        assert rel[f"mlx5_{g}"] == "PIX"
        assert [n for n, r in rel.items() if r == "PIX"] == [f"mlx5_{g}"]
        assert rel["mlx5_8"] in ("NODE", "SYS")


@pytest.mark.parametrize("name,args,exit_code,status,codes", CASES, ids=[f"{c[0]}{'-' + c[1][1] if c[1] else ''}" for c in CASES])
def test_example_text_report(name, args, exit_code, status, codes):
    code, out, err = run_cli(["check", "--example", name, *args])
    assert code == exit_code
    assert out.startswith(status.upper() + ":")
    for c in codes:
        assert c in out
    if codes:
        assert "fix:" in out


def test_text_report_keeps_pci_addresses_verbatim():
    # rich turns ":ab:" into an emoji unless told not to; PCI bus 0xab is common on 2-socket hosts.
    code, out, _ = run_cli(["check", "--example", "roce-node", "--profile", "hgx-8gpu-ndr"])
    assert code == 1
    assert "0000:ab:00.0" in out


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_shipped_bundle_is_what_the_generator_makes(name):
    """Regenerate with `python -m rdmadoctor.fixturegen --examples`."""
    path = example_path(name)
    assert os.path.getsize(path) < 100 * 1024
    assert fixturegen.read_tar(path) == fixturegen.example_tree(name)


def test_tar_is_deterministic():
    tree = fixturegen.example_tree("roce-node")
    assert fixturegen.tar_bytes(tree) == fixturegen.tar_bytes(fixturegen.example_tree("roce-node"))


@pytest.mark.parametrize("name", ["hgx-h100-ib", "broken-pod", "roce-node"])
def test_recorded_ibstat_agrees_with_sysfs(name):
    """The example's recorded ibstat, ibdev2netdev and show_gids, read without /sys, give the ports
    sysfs gives (state, rate, LIDs, netdev and its state, the RoCE GID table)."""
    from rdmadoctor.checks._rdma import probe_inventory
    from rdmadoctor.engine.execute import Context

    tree = fixturegen.example_tree(name)

    def ports(t):
        inv = Context(mem_host(t), {}).get(probe_inventory)
        return inv.source, {
            (d.name, p.port): (
                p.state, p.phys_state, p.rate_gbps, p.link_layer, p.lid, p.sm_lid, p.netdev, p.netdev_up,
                p.gids if p.link_layer == "Ethernet" else None,  # sysfs reads the GID table for RoCE only
            )
            for d in inv.devices
            for p in d.ports
        }

    src_sys, from_sysfs = ports(tree)
    src_tool, from_ibstat = ports({k: v for k, v in tree.items() if not k.startswith("/sys/")})
    assert (src_sys, src_tool) == ("sysfs", "ibstat")
    assert from_ibstat == from_sysfs
    assert len(from_sysfs) >= 4


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_recorded_topology_agrees_with_sysfs(name):
    """nvidia-smi topo -m, written from the layout description, equals the relation gpu.topology
    computes from the sysfs tree: two independent readings of one layout."""
    from rdmadoctor.parsers.nvidia_smi import parse_topo
    from rdmadoctor.runner import Options, diagnose

    tree = fixturegen.example_tree(name)
    parsed = parse_topo(tree["/cmd/nvidia-smi-topo.txt"].decode())
    assert parsed.ok and not parsed.warnings
    recorded = {(g, n): parsed.value.gpu_nic[i][j] for i, g in enumerate(parsed.value.gpus) for j, n in enumerate(parsed.value.nics)}
    rep = diagnose(Options(only=["gpu.topology"]), host=mem_host(tree)).report
    topo = rep["inventory"]["topology"]
    assert topo["source"] == "sysfs"
    computed = {(g, n): topo["gpu_nic"][i][j] for i, g in enumerate(topo["gpus"]) for j, n in enumerate(topo["nics"])}
    assert computed == recorded


def test_sriov_big_node():
    """The benchmark's node: 8 GPUs, 10 HCAs, 512 VFs; the VFs are listed, not judged."""
    from rdmadoctor.runner import Options, diagnose

    tree = fixturegen.build(fixturegen.hgx_h100_ib(vfs_total=512))
    rep = diagnose(Options(profile="hgx-8gpu-ndr"), host=mem_host(tree)).report
    assert rep["status"] == "pass", codes_of(rep)
    devs = rep["inventory"]["rdma_devices"]
    assert sum(d["is_vf"] for d in devs) == 512
    assert [d["name"] for d in devs if not d["is_vf"]] == [f"mlx5_{i}" for i in range(10)]
    pf = "/sys/devices/pci0000:10/0000:10:01.0/0000:11:00.0/0000:12:01.0/0000:14:00.0"
    assert tree[f"{pf}/sriov_numvfs"] == b"64\n"
    assert tree[f"{pf}/virtfn63"].target == "../0000:14:08.0"
    assert tree[pf.replace("14:00.0", "14:08.0") + "/physfn"].target == "../0000:14:00.0"


@pytest.mark.parametrize("suffix", ["", ".tar.gz"])
def test_sriov_cli(tmp_path, suffix):
    out = tmp_path / f"big{suffix}"
    assert fixturegen.main(["--sriov", "16", "-o", str(out)]) == 0
    code, rep = check_json(["--bundle", str(out), "--profile", "hgx-8gpu-ndr"])
    assert (code, rep["status"]) == (0, "pass"), codes_of(rep)
    assert sum(d["is_vf"] for d in rep["inventory"]["rdma_devices"]) == 16
