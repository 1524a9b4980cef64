"""What the node's tools print, rendered from the same description: `ibstat`, `ibdev2netdev`,
`show_gids` (read back from the sysfs tree, as the tools do) and `nvidia-smi topo -m` (from the
description itself, so a test can hold it against the tree)."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from rdmadoctor.fixturegen.model import Gpu, Node
from rdmadoctor.fixturegen.sysfs import build, pci_layout

_IBSTAT_STATE = {"DOWN": "Down", "INIT": "Initializing", "ARMED": "Armed", "ACTIVE": "Active", "ACTIVE_DEFER": "Active/Defer"}
_IBSTAT_PHYS = {"PhyTest": "Phy Test"}


def ibstat_text(tree: dict[str, Any]) -> str:
    """What `ibstat` prints for the RDMA devices of ``tree`` (it reads the same sysfs files)."""
    from rdmadoctor.host import mem_host

    host = mem_host(tree)
    out = []
    for name in host.listdir("/sys/class/infiniband"):
        base = f"/sys/class/infiniband/{name}"
        guid = "0x" + (host.read_value(f"{base}/node_guid") or "0").replace(":", "")
        ports = host.listdir(f"{base}/ports")
        out.append(f"CA '{name}'")
        out.append(f"\tCA type: {host.read_value(f'{base}/hca_type') or ''}")
        out.append(f"\tNumber of ports: {len(ports)}")
        out.append(f"\tFirmware version: {host.read_value(f'{base}/fw_ver') or ''}")
        out.append("\tHardware version: 0")
        out.append(f"\tNode GUID: {guid}")
        out.append(f"\tSystem image GUID: {guid}")
        for num in sorted(ports, key=int):
            pdir = f"{base}/ports/{num}"
            state = (host.read_value(f"{pdir}/state") or ": ").split(": ", 1)[1]
            phys = (host.read_value(f"{pdir}/phys_state") or ": ").split(": ", 1)[1]
            rate = (host.read_value(f"{pdir}/rate") or "0").split()[0]
            gid = (host.read_value(f"{pdir}/gids/0") or "").replace(":", "")
            out.append(f"\tPort {num}:")
            out.append(f"\t\tState: {_IBSTAT_STATE.get(state, state)}")
            out.append(f"\t\tPhysical state: {_IBSTAT_PHYS.get(phys, phys)}")
            out.append(f"\t\tRate: {rate}")
            out.append(f"\t\tBase lid: {int(host.read_value(f'{pdir}/lid') or '0', 16)}")
            out.append("\t\tLMC: 0")
            out.append(f"\t\tSM lid: {int(host.read_value(f'{pdir}/sm_lid') or '0', 16)}")
            out.append(f"\t\tCapability mask: {host.read_value(f'{pdir}/cap_mask')}")
            out.append(f"\t\tPort GUID: 0x{gid[16:] or '0'}")
            out.append(f"\t\tLink layer: {host.read_value(f'{pdir}/link_layer')}")
    return "\n".join(out) + "\n"


def ibdev2netdev_text(tree: dict[str, Any]) -> str:
    """mlnx-tools' `ibdev2netdev`: a shell script over the same sysfs files."""
    from rdmadoctor.host import mem_host

    host = mem_host(tree)
    out = []
    for name in host.listdir("/sys/class/infiniband"):
        base = f"/sys/class/infiniband/{name}"
        for nd in host.listdir(f"{base}/device/net"):
            port = int(host.read_value(f"{base}/device/net/{nd}/dev_port") or "0") + 1
            up = host.read_value(f"/sys/class/net/{nd}/operstate") == "up"
            out.append(f"{name} port {port} ==> {nd} ({'Up' if up else 'Down'})")
    return "\n".join(out) + "\n"


def show_gids_text(tree: dict[str, Any]) -> str:
    """mlnx-tools' `show_gids`: every valid GID of every port, with its type and netdev."""
    from rdmadoctor.host import mem_host

    host = mem_host(tree)
    out = ["DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV", "---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---"]
    n = 0
    for name in host.listdir("/sys/class/infiniband"):
        base = f"/sys/class/infiniband/{name}/ports"
        for port in host.listdir(base):
            for idx in sorted(host.listdir(f"{base}/{port}/gid_attrs/types"), key=int):
                gtype = host.read_value(f"{base}/{port}/gid_attrs/types/{idx}") or ""
                gid = host.read_value(f"{base}/{port}/gids/{idx}") or ""
                ndev = host.read_value(f"{base}/{port}/gid_attrs/ndevs/{idx}") or ""
                ver = "v2" if gtype == "RoCE v2" else "v1"
                ipv4 = ""
                if gid.startswith("0000:0000:0000:0000:0000:ffff:"):
                    h = gid.replace(":", "")[-8:]
                    ipv4 = ".".join(str(int(h[i : i + 2], 16)) for i in (0, 2, 4, 6))
                out.append(f"{name}\t{port}\t{idx}\t{gid}\t{ipv4}  \t{ver}\t{ndev}")
                n += 1
    out.append(f"n_gids_found={n}")
    return "\n".join(out) + "\n"


NVLINKS = {"h100": "NV18", "a100": "NV12"}


def nvidia_smi_topo_text(node: Node) -> str:
    """`nvidia-smi topo -m` for the layout of ``node``: its relations come from the description
    (the same switch is PIX, one card's functions PIX, the same host bridge PHB, the same NUMA
    node NODE, else SYS), not from the sysfs tree, so a test can hold one against the other."""
    placed = pci_layout(node)
    gpus = sorted(node.gpus, key=lambda g: _bdf_key(placed[id(g)][0].bdf))
    nics = sorted(node.hcas, key=lambda h: _bdf_key(placed[id(h)][0].bdf))

    def rel(x: Any, y: Any) -> str:
        a, c = x.at, y.at
        if a.switch is not None and a.switch == c.switch:
            return "PIX"
        if a.root_port == c.root_port and a.host_bridge == c.host_bridge:
            return "PIX"
        if a.host_bridge == c.host_bridge:
            return "PHB"
        return "NODE" if a.numa == c.numa else "SYS"

    cols = [f"GPU{i}" for i in range(len(gpus))] + [f"NIC{i}" for i in range(len(nics))]
    lines = ["\t" + "\t".join(cols) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
    everyone = [*gpus, *nics]
    for i, x in enumerate(everyone):
        cells = []
        for j, y in enumerate(everyone):
            if i == j:
                cells.append(" X ")
            elif isinstance(x, Gpu) and isinstance(y, Gpu):
                cells.append(NVLINKS.get(x.model, "SYS") if x.model in NVLINKS else rel(x, y))
            else:
                cells.append(rel(x, y))
        if isinstance(x, Gpu):
            tail = [node.numa_cpus.get(x.at.numa, ""), str(x.at.numa), "N/A"]
            lines.append(f"GPU{i}\t" + "\t".join(cells + tail))
        else:
            lines.append(f"NIC{i - len(gpus)}\t" + "\t".join(cells + ["", "", ""]))
    lines += [
        "",
        "Legend:",
        "",
        "  X    = Self",
        "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
        "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
        "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
        "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
        "  PIX  = Connection traversing at most a single PCIe bridge",
        "  NV#  = Connection traversing a bonded set of # NVLinks",
    ]
    if nics:
        lines += ["", "NIC Legend:", ""] + [f"  NIC{i}: {h.name}" for i, h in enumerate(nics)]
    return "\n".join(lines) + "\n"


def _bdf_key(bdf: str) -> tuple[int, ...]:
    dom, bus, rest = bdf.split(":")
    dev, fn = rest.split(".")
    return (int(dom, 16), int(bus, 16), int(dev, 16), int(fn))


def with_tool_outputs(node: Node) -> Node:
    """``node`` plus the outputs `rdmadoctor collect` records (ibstat, ibdev2netdev, show_gids, nvidia-smi topo -m)."""
    node = copy.deepcopy(node)
    if node.hcas:
        tree = build(replace(node, cmds={}))
        node.cmds.setdefault("ibstat", ibstat_text(tree))
        node.cmds.setdefault("ibdev2netdev", ibdev2netdev_text(tree))
        if any(p.link_layer == "Ethernet" for h in node.hcas for p in h.ports):
            node.cmds.setdefault("show_gids", show_gids_text(tree))
    if node.gpus:
        node.cmds.setdefault("nvidia-smi-topo", nvidia_smi_topo_text(node))
    return node
