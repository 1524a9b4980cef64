"""Real /sys snapshots from hwloc's test data, read by rdmadoctor and by hwloc's own lstopo.

lstopo is an independent reading of the same tree: where both report a fact (the RDMA devices,
their PCI address, NUMA locality and port state; each PCI device's chain of bridges; link
bandwidth), they must agree.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import REALWORLD, check_json

from rdmadoctor.checks._pci import build_tree, chain_relation, numa_nodes, read_function, relation
from rdmadoctor.core.facts import PORT_STATES
from rdmadoctor.host import open_host

TARBALLS = (
    "40intel64-2g2n4c+pcilocality",
    "fakepcilocalities",
    "32intel64-2p8co2t+8ve",
    "2pa-pcidomain32bits",
    "40intel64-4n10c+pci-conflicts",
)
LSTOPO = shutil.which("lstopo-no-graphics")


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory):
    """name -> unpacked root, each tarball unpacked once per module (a few thousand files each)."""
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            tarball = REALWORLD / "hwloc-sysfs" / f"{name}.tar.bz2"
            if not tarball.is_file():
                pytest.skip(f"{tarball} is absent")
            dest = tmp_path_factory.mktemp(name.replace("+", "_"))
            with tarfile.open(tarball) as tf:
                if hasattr(tarfile, "data_filter"):
                    tf.extractall(dest, filter="data")
                else:  # Python < 3.11.4
                    tf.extractall(dest)
            (cache[name],) = [p for p in dest.iterdir() if p.is_dir()]
        return cache[name]

    return get


_LSTOPO: dict[Path, "Lstopo"] = {}


def lstopo(root: Path) -> "Lstopo":
    if root not in _LSTOPO:
        _LSTOPO[root] = Lstopo(root)
    return _LSTOPO[root]


# ---- lstopo's view --------------------------------------------------------------------------


class Lstopo:
    """The PCI devices of ``lstopo --of xml``: bridge chain, NUMA locality, link, OS devices."""

    def __init__(self, root: Path):
        env = dict(os.environ, HWLOC_FSROOT=str(root), HWLOC_THISSYSTEM="0")
        out = subprocess.run(
            [LSTOPO, "--whole-io", "--of", "xml", "-"], env=env, capture_output=True, timeout=60, check=True
        ).stdout
        self.devices: dict[str, dict] = {}
        self._walk(ET.fromstring(out).find("object"), [], None, set())

    @staticmethod
    def _nodeset(obj) -> set[int]:
        raw = obj.get("nodeset")
        if not raw:
            return set()
        bits = int("".join(w.replace("0x", "") for w in raw.split(",")), 16)
        return {i for i in range(bits.bit_length()) if bits >> i & 1}

    def _walk(self, obj, bridges: list, host_bridge, locality: set[int]) -> None:
        kind = obj.get("type")
        if kind in ("Machine", "Package", "Group", "NUMANode", "Die"):
            locality = self._nodeset(obj) or locality
        if kind == "Bridge":
            if obj.get("bridge_type", "").startswith("0-"):  # a host bridge: "0000:[40-46]"
                host_bridge = obj.get("bridge_pci")
                bridges = []
            else:
                bridges = bridges + [obj.get("pci_busid")]
        if kind == "PCIDev":
            osdevs = {
                o.get("name"): {i.get("name"): i.get("value") for i in o.findall("info")} | {"osdev_type": o.get("osdev_type")}
                for o in obj.findall("object")
                if o.get("type") == "OSDev"
            }
            self.devices[obj.get("pci_busid")] = {
                "bridges": bridges,
                "host_bridge": host_bridge,
                "locality": locality,
                "link_gbs": float(obj.get("pci_link_speed") or 0),
                "class": obj.get("pci_type", "").split()[0],
                "osdevs": osdevs,
            }
        for child in obj.findall("object"):
            self._walk(child, bridges, host_bridge, locality)

    def openfabrics(self) -> dict[str, tuple[str, dict]]:
        """RDMA device name -> (PCI address, its attributes). osdev_type 3 is OpenFabrics."""
        return {
            name: (busid, attrs)
            for busid, d in self.devices.items()
            for name, attrs in d["osdevs"].items()
            if attrs["osdev_type"] == "3"
        }

    def chain(self, busid: str) -> tuple[str, ...]:
        d = self.devices[busid]
        hb = d["host_bridge"]  # "0000:[17-1e]" -> "pci0000:17", the name sysfs gives the root bus
        dom, _, rng = hb.partition(":[")
        return (f"pci{dom}:{rng.split('-')[0]}", *d["bridges"], busid)


def gbs(speed_gts: float, width: int) -> float:
    """GB/s of a link as hwloc computes it: 8b/10b encoding up to 5 GT/s, 128b/130b above."""
    return speed_gts * width * (0.8 if speed_gts <= 5 else 128 / 130) / 8


needs_lstopo = pytest.mark.skipif(LSTOPO is None, reason="lstopo-no-graphics (Debian package hwloc) not installed")


# ---- every tarball: rdmadoctor runs, and agrees with lstopo ----------------------------------


@pytest.mark.parametrize("name", TARBALLS)
def test_check_runs_on_real_sysfs(snapshots, name):
    root = snapshots(name)
    code, rep = check_json(["--root", str(root), "--only", "ib,gpu,pci"])
    for c in rep["checks"]:
        assert "internal error" not in (c.get("reason") or ""), c
    # No GPU in any of them (the 8 cards of +8ve are NEC vector engines): gpu.topology skips.
    (gpu_check,) = [c for c in rep["checks"] if c["id"] == "gpu.topology"]
    assert gpu_check["status"] == "skip" and gpu_check["reason"] == "no GPUs found"


@needs_lstopo
@pytest.mark.parametrize("name", TARBALLS)
def test_rdma_devices_agree_with_lstopo(snapshots, name):
    root = snapshots(name)
    _, rep = check_json(["--root", str(root), "--only", "ib,gpu,pci"])
    ours = {d["name"]: d for d in rep["inventory"]["rdma_devices"] or []}
    topo = lstopo(root)
    theirs = topo.openfabrics()
    assert set(ours) == set(theirs)
    for name_, (busid, attrs) in theirs.items():
        dev = ours[name_]
        assert dev["pci"] == busid
        # Where lstopo attaches the device tells its locality: a NUMA node we report must be in it.
        locality = topo.devices[busid]["locality"]
        if dev["numa_node"] is not None:
            assert dev["numa_node"] in locality
        for port in dev["ports"]:
            assert PORT_STATES[int(attrs[f"Port{port['port']}State"])] == port["state"]
            assert int(attrs[f"Port{port['port']}LID"], 16) == port["lid"]
        # The HCA's link, from both readings.
        (link,) = [lk for lk in rep["inventory"]["pcie"]["links"] if lk["child"] == busid]
        assert link["parent"] == topo.chain(busid)[-2]
        assert gbs(link["speed_gts"], link["width"]) == pytest.approx(topo.devices[busid]["link_gbs"], rel=1e-4)


@needs_lstopo
@pytest.mark.parametrize("name", TARBALLS)
def test_pci_paths_agree_with_lstopo(snapshots, name):
    root = snapshots(name)
    host = open_host(root=str(root))
    listed = set(host.listdir("/sys/bus/pci/devices"))
    nodes = numa_nodes(host)
    topo = lstopo(root)
    assert topo.devices, "lstopo saw no PCI device"
    for busid in topo.devices:
        fn = read_function(host, busid, nodes)
        # gather-topology did not keep every bridge in /sys/bus/pci/devices (+8ve: 0000:5f:03.0),
        # and lstopo leaves out what it cannot list; compare the bridges both can see.
        assert (fn.host_bridge, *[b for b in fn.bridges if b in listed], busid) == topo.chain(busid)
        if fn.numa_node is not None:
            assert fn.numa_node in topo.devices[busid]["locality"]
        if fn.cur_speed_gts and fn.cur_width:
            assert gbs(fn.cur_speed_gts, fn.cur_width) == pytest.approx(topo.devices[busid]["link_gbs"], rel=1e-4)


# ---- what each snapshot is known to hold ------------------------------------------------------


def test_qib0_on_pcilocality_host(snapshots):
    root = snapshots("40intel64-2g2n4c+pcilocality")
    _, rep = check_json(["--root", str(root), "--only", "ib,gpu,pci"])
    (qib,) = rep["inventory"]["rdma_devices"]
    assert (qib["name"], qib["pci"], qib["numa_node"], qib["driver"]) == ("qib0", "0000:43:00.0", 2, "ib_qib")
    assert [(p["port"], p["state"], p["rate_gbps"]) for p in qib["ports"]] == [(1, "ACTIVE", 40.0)]
    (link,) = rep["inventory"]["pcie"]["links"]
    # The root port above reports no link attributes on this 2013 kernel: known speed, unknown maximum.
    assert (link["parent"], link["speed_gts"], link["width"], link["max_speed_gts"]) == ("0000:40:03.0", 8.0, 4, None)
    (pci_check,) = [c for c in rep["checks"] if c["id"] == "pci.link"]
    assert pci_check["status"] == "pass"
    assert any("not judged" in n for n in rep["inventory"]["pcie"]["notes"])


def test_fake_pci_locality_moves_qib0_to_node1(snapshots):
    root = snapshots("fakepcilocalities")
    _, rep = check_json(["--root", str(root), "--only", "ib"])
    (qib,) = rep["inventory"]["rdma_devices"]
    assert qib["numa_node"] == 1
    if LSTOPO:
        assert lstopo(root).devices["0000:43:00.0"]["locality"] == {1}


def test_numa_minus_one_on_four_node_host_is_unknown(snapshots):
    root = snapshots("40intel64-4n10c+pci-conflicts")
    host = open_host(root=str(root))
    tree = build_tree(host, [])
    assert tree.numa_nodes == (0, 1, 2, 3)
    raid = read_function(host, "0000:01:00.0", tree.numa_nodes)
    assert raid.numa_node is None and not raid.numa_assumed
    assert raid.bridges == ("0000:00:03.0",) and raid.driver == "megaraid_sas"


def test_plx_tree_of_vector_engine_host(snapshots):
    root = snapshots("32intel64-2p8co2t+8ve")
    host = open_host(root=str(root))
    tree = build_tree(host, [])
    nodes = tree.numa_nodes
    mlx = [f.bdf for f in tree.functions if f.vendor == 0x15B3]
    ve = [f.bdf for f in tree.functions if f.vendor == 0x1BCF]
    assert mlx == ["0000:1a:00.0", "0000:3e:00.0"] and len(ve) == 8
    fns = {b: read_function(host, b, nodes) for b in mlx + ve}
    a = fns["0000:1a:00.0"]
    # Root port 17:00.0, PLX upstream 18:00.0, PLX downstream 19:04.0.
    assert (a.host_bridge, a.bridges) == ("pci0000:17", ("0000:17:00.0", "0000:18:00.0", "0000:19:04.0"))
    assert (a.pci_class, a.driver, a.cur_speed_gts, a.cur_width) == (0x020700, "mlx5_core", 8.0, 16)
    assert relation(a, fns["0000:1b:00.0"]) == "PIX"  # same PLX switch
    assert relation(fns["0000:3e:00.0"], fns["0000:41:00.0"]) == "PIX"
    assert relation(a, fns["0000:3e:00.0"]) == "NODE"  # other host bridge, same NUMA node 0
    if LSTOPO:
        topo = lstopo(root)
        for x, y in itertools.combinations(sorted(fns), 2):
            theirs = chain_relation(topo.chain(x), topo.chain(y), fns[x].numa_node, fns[y].numa_node)
            assert relation(fns[x], fns[y]) == theirs, (x, y)
        assert {topo.devices[b]["class"] for b in mlx} == {"0207"}


def test_32bit_pci_domains_parse(snapshots):
    root = snapshots("2pa-pcidomain32bits")
    host = open_host(root=str(root))
    tree = build_tree(host, [])
    bdfs = [f.bdf for f in tree.functions]
    assert bdfs[-2:] == ["10000:00:00.0", "10000:00:04.0"]  # bus order: domain 0x10000 after 0x0000
    assert len(bdfs) == 9 and not tree.warnings
    nodes = tree.numa_nodes
    blk = read_function(host, "10000:00:04.0", nodes)
    assert (blk.host_bridge, blk.bridges, blk.vendor, blk.pci_class) == ("pci10000:00", (), 0x1AF4, 0x010000)
    assert blk.numa_node == 0 and blk.numa_assumed  # -1 on a one-node host
    net = read_function(host, "0000:00:03.0", nodes)
    assert relation(net, blk) == "NODE"
    if LSTOPO:
        # hwloc built without 32-bit domain support drops them; the 16-bit ones it keeps are ours too.
        theirs = set(lstopo(root).devices)
        assert theirs <= set(bdfs) and "0000:00:03.0" in theirs


def test_unlisted_bridge_is_read_from_its_path(snapshots):
    # The X722 NIC at 60:00.0 sits below 5f:03.0, which the snapshot left out of /sys/bus/pci/devices.
    # That port can only do 2.5 GT/s x1, so the NIC's 2.5 GT/s link (capable of 8) is not degraded.
    from rdmadoctor.checks.pci import _from_sysfs, judge_links
    from rdmadoctor.engine.expectations import BASE

    root = snapshots("32intel64-2p8co2t+8ve")
    host = open_host(root=str(root))
    tree = build_tree(host, [("i40e-port0", "0000:60:00.0")])
    port = tree.get("0000:5f:03.0")
    assert port.detailed and (port.driver, port.max_speed_gts, port.max_width) == ("pcieport", 2.5, 1)
    assert tree.get("0000:60:00.0").max_speed_gts == 8.0
    facts = _from_sysfs(host, tree)
    (link,) = [lk for lk in facts.links if lk.child == "0000:60:00.0"]
    assert (link.parent, link.cur_speed_gts, link.max_speed_gts) == ("0000:5f:03.0", 2.5, 2.5)
    assert judge_links(facts, dict(BASE)) == []
