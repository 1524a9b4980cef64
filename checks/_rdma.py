"""Shared probe: the RDMA devices and their ports, from sysfs or from recorded tool outputs.

sysfs is the source of truth when the host has it. Tools are read only when the bundle has no
``/sys`` (a ticket with nothing but a pasted ``ibstat``): gpud learned that ``ibstat`` can print
half its output and abort (gpud PR #752), so we never prefer it over sysfs.
"""

from __future__ import annotations

import posixpath
import re

from rdmadoctor.core.codes.roce import ROCE_NETDEV_DOWN  # noqa: F401 - checks/logs.py imports it from here
from rdmadoctor.core.facts import Gid, Port, RdmaDevice
from rdmadoctor.core.record import fields, record, replace
from rdmadoctor.host.net import NET_CLASS
from rdmadoctor.host.net import speed_mbps as netdev_speed_mbps  # noqa: F401 - iwarp, nccl: the Host's reading
from rdmadoctor.host.net import sysfs_int as parse_int  # roce, iwarp, nccl read sysfs integers with it too
from rdmadoctor.parsers.common import ipv4_of_gid, leading_number, phys_state, port_state

IB_CLASS = "/sys/class/infiniband"


@record
class RdmaInventory:
    devices: tuple[RdmaDevice, ...]
    source: str  # "sysfs" | "ibstat" | "ibv_devinfo" | "none"
    sysfs: bool  # the host has a /sys to read at all
    warnings: tuple[str, ...] = ()
    # Why IB_CLASS could not be listed ("Permission denied"), when it is there but unreadable and
    # no tool output stood in: the devices are unknown (source "none"), not absent.
    unreadable: str | None = None
    # The host's kind ("live", "root", "bundle") and label, for the words of an unknown inventory:
    # a bundle lacks sys/, a mounted root lacks its /sys mount.
    host_kind: str = "bundle"
    host_label: str = ""

    def pfs(self) -> tuple[RdmaDevice, ...]:
        return tuple(d for d in self.devices if not d.is_vf)


def parse_rate(text: str | None) -> float | None:
    """sysfs ``rate``: "400 Gb/sec (4X NDR)", "2.5 Gb/sec (1X SDR)"; ibstat: "400"."""
    return leading_number(text)


def iboe_mtu(netdev_mtu: int | None) -> int | None:
    """The RoCE MTU a netdev MTU allows, as the kernel's iboe_get_mtu() computes it.

    RoCE v2 headers (GRH 40 + UDP 8 + BTH 12 + XRC 4 + AtomicETH 28 + ICRC 4 = 96 bytes) come
    out of the Ethernet MTU; the rest is rounded down to an IB MTU. 1500 gives 1024, 9000 gives 4096.
    """
    if netdev_mtu is None:
        return None
    room = netdev_mtu - 96
    for ib in (4096, 2048, 1024, 512, 256):
        if room >= ib:
            return ib
    return None


def _netdevs_of(host, dev_path: str) -> dict[int, str]:
    """netdev per port number: from device/net/*/dev_port (IPoIB and RoCE alike)."""
    out: dict[int, str] = {}
    for nd in host.listdir(f"{dev_path}/device/net"):
        port = parse_int(host.read_value(f"{dev_path}/device/net/{nd}/dev_port"))
        out.setdefault((port or 0) + 1, nd)
    return out


def _port(host, dev: str, pdir: str, num: int, netdevs: dict[int, str]) -> Port:
    link_layer = host.read_value(f"{pdir}/link_layer")
    if link_layer is None and not host.exists(f"{pdir}/link_layer") and host.exists(f"{pdir}/state"):
        # No link_layer file at all (kernels before 2.6.37 added RoCE; ibsim's umad2sim): the
        # port is InfiniBand, as libibumad's umad.c and ibstatus assume.
        link_layer = "InfiniBand"
    gids: list[Gid] = []
    netdev = None
    if link_layer == "Ethernet":
        # RoCE: the GID table says which GIDs are v2 and which netdev each belongs to.
        for name in host.listdir(f"{pdir}/gid_attrs/types"):
            idx = parse_int(name, 10)
            if idx is None:
                continue
            gtype = host.read_value(f"{pdir}/gid_attrs/types/{name}")
            if gtype is None:  # unused table entry (reading it gives EINVAL)
                continue
            gid = host.read_value(f"{pdir}/gids/{name}") or ""
            if gid.replace("0", "").replace(":", "") == "":
                continue
            nd = host.read_value(f"{pdir}/gid_attrs/ndevs/{name}")
            netdev = netdev or nd
            gids.append(Gid(idx, gid, gtype, nd, ipv4_of_gid(gid)))
    netdev = netdev or netdevs.get(num)
    if netdev is None and link_layer == "Ethernet":
        netdev = host.read_value(f"{IB_CLASS}/{dev}/parent")  # rxe: the netdev it sits on
    up = mtu = None
    rate_text = host.read_value(f"{pdir}/rate")
    width = re.search(r"\((\d{1,2}X)\b", rate_text or "")
    subnet_prefix = None
    if link_layer == "InfiniBand":
        gid0 = host.read_value(f"{pdir}/gids/0") or ""
        if re.fullmatch(r"[0-9a-fA-F]{4}(:[0-9a-fA-F]{4}){7}", gid0):
            subnet_prefix = gid0[:19].lower()
    if netdev:
        oper = host.read_value(f"{NET_CLASS}/{netdev}/operstate")
        up = None if oper is None else oper in ("up", "unknown") and _carrier(host, netdev)
        mtu = parse_int(host.read_value(f"{NET_CLASS}/{netdev}/mtu"), 10)
    return Port(
        port=num,
        state=port_state(host.read_value(f"{pdir}/state")),
        phys_state=phys_state(host.read_value(f"{pdir}/phys_state")),
        rate_gbps=parse_rate(rate_text),
        link_layer=link_layer,
        lid=parse_int(host.read_value(f"{pdir}/lid")),
        sm_lid=parse_int(host.read_value(f"{pdir}/sm_lid")),
        netdev=netdev,
        netdev_up=up,
        active_mtu=iboe_mtu(mtu) if link_layer == "Ethernet" else None,
        max_mtu=None,
        gids=tuple(sorted(gids, key=lambda g: g.index)),
        width=width.group(1) if width else None,
        pkey=host.read_value(f"{pdir}/pkeys/0"),
        subnet_prefix=subnet_prefix,
        netdev_mtu=mtu,
    )


def _carrier(host, netdev: str) -> bool:
    c = host.read_value(f"{NET_CLASS}/{netdev}/carrier")
    return c != "0"


def _device(host, name: str) -> RdmaDevice:
    path = f"{IB_CLASS}/{name}"
    real_dev = host.realpath(f"{path}/device")
    pci = None
    if real_dev and re.fullmatch(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]", posixpath.basename(real_dev)):
        pci = posixpath.basename(real_dev)
    driver_link = host.readlink(f"{path}/device/driver")
    driver = posixpath.basename(driver_link) if driver_link else None
    numa = parse_int(host.read_value(f"{path}/device/numa_node"), 10)
    if numa is not None and numa < 0:
        numa = None  # -1: the platform does not say (single-socket machines, VMs)
    node_type = host.read_value(f"{path}/node_type")
    if node_type and ":" in node_type:
        node_type = node_type.split(":", 1)[1].strip()
    netdevs = _netdevs_of(host, path)
    ports = []
    # Every port, not ports/1: dual-port and multi-plane cards (sichek PRs #98, #112).
    for pname in host.listdir(f"{path}/ports"):
        num = parse_int(pname, 10)
        if num is None:
            continue
        ports.append(_port(host, name, f"{path}/ports/{pname}", num, netdevs))
    return RdmaDevice(
        name=name,
        driver=driver,
        pci=pci,
        numa_node=numa,
        fw_ver=host.read_value(f"{path}/fw_ver"),
        board_id=host.read_value(f"{path}/board_id"),
        node_type=node_type,
        node_guid=host.read_value(f"{path}/node_guid"),
        hca_type=host.read_value(f"{path}/hca_type"),
        ports=tuple(sorted(ports, key=lambda p: p.port)),
        is_vf=host.exists(f"{path}/device/physfn"),
        source="sysfs",
        pci_id=_pci_id(host, f"{path}/device"),
        driver_version=host.read_value(f"/sys/module/{driver}/version") if driver else None,
    )


def _pci_id(host, dev_path: str) -> str | None:
    """PCI "vendor:device" ("15b3:1021") from sysfs' vendor and device files ("0x15b3")."""
    ids = [host.read_value(f"{dev_path}/{name}") or "" for name in ("vendor", "device")]
    if not all(re.fullmatch(r"0x[0-9a-fA-F]{4}", i) for i in ids):
        return None
    return f"{ids[0][2:].lower()}:{ids[1][2:].lower()}"


def parse_ibstat_runs(text: str):  # Parsed[list[RdmaDevice]]
    """ibstat output read past an ``ibpanic`` line, one run of the parser per piece.

    ``ibstat mlx5_an0`` panics on a device it cannot stat (Azure's accelerated-networking NIC:
    "stat of IB device 'mlx5_an0' failed"), and a transcript or a loop over the devices records
    the next ``ibstat mlx5_ib0`` after it; the parser stops at a panic (gpud PR #752: ibstat can
    abort halfway), so each piece is parsed on its own. rdma-core later made ibstat warn and go
    on (its PR #1501).
    """
    from rdmadoctor.core.facts import Parsed
    from rdmadoctor.parsers.ibstat import parse_ibstat

    if "ibpanic:" not in text.lower():
        return parse_ibstat(text)
    runs: list[list[str]] = [[]]
    for line in text.splitlines():
        runs[-1].append(line)
        if line.strip().lower().startswith("ibpanic:"):
            runs.append([])
    runs = [r for r in runs if any(x.strip() for x in r)]
    devices: dict[str, RdmaDevice] = {}
    warnings: list[str] = []
    ok = False
    for i, run in enumerate(runs):
        parsed = parse_ibstat("\n".join(run) + "\n")
        panic = run[-1].strip() if run[-1].strip().lower().startswith("ibpanic:") else None
        for w in parsed.warnings:
            if panic is not None and i + 1 < len(runs) and w.startswith("ibstat aborted"):
                w = f"{panic}; the listing after it was read"
            if w not in warnings:
                warnings.append(w)
        if parsed.ok:
            ok = True
            for d in parsed.value:
                devices.pop(d.name, None)  # a later listing of the same device wins, in its place
                devices[d.name] = d
    return Parsed(list(devices.values()), tuple(warnings), ok=ok)


def _from_tools(host) -> RdmaInventory | None:
    from rdmadoctor.parsers.ibv_devinfo import parse_ibv_devinfo
    from rdmadoctor.parsers.netdev import parse_ibdev2netdev, parse_show_gids
    from rdmadoctor.parsers.rdma_link import parse_rdma_link

    warnings: list[str] = []
    devices: list[RdmaDevice] | None = None
    source = "none"
    for name, parser in (("ibstat", parse_ibstat_runs), ("ibv_devinfo", parse_ibv_devinfo), ("rdma-link", parse_rdma_link)):
        res = host.cmd(name)
        if res.text is None:
            continue
        parsed = parser(res.text)
        warnings.extend(f"{name}: {w}" for w in parsed.warnings)
        if not parsed.ok:
            continue
        if devices is None:
            devices, source = list(parsed.value), name
        else:
            devices = _merge(devices, parsed.value)
    if devices is None:
        return None
    links = host.cmd("ibdev2netdev")
    if links.text is not None:
        parsed_links = parse_ibdev2netdev(links.text)
        warnings.extend(f"ibdev2netdev: {w}" for w in parsed_links.warnings)
        by = {(link.device, link.port): link for link in parsed_links.value}
        devices = [
            replace(
                d,
                ports=tuple(
                    replace(p, netdev=by[(d.name, p.port)].netdev, netdev_up=by[(d.name, p.port)].up)
                    if (d.name, p.port) in by
                    else p
                    for p in d.ports
                ),
            )
            for d in devices
        ]
    gids = host.cmd("show_gids")
    if gids.text is not None:
        parsed_gids = parse_show_gids(gids.text)
        warnings.extend(f"show_gids: {w}" for w in parsed_gids.warnings)
        table: dict[tuple[str, int], list[Gid]] = {}
        for row in parsed_gids.value:
            table.setdefault((row.device, row.port), []).append(gid_of(row))
        devices = [
            replace(d, ports=tuple(replace(p, gids=tuple(table[(d.name, p.port)])) if (d.name, p.port) in table and not p.gids else p for p in d.ports))
            for d in devices
        ]
    return RdmaInventory(tuple(devices), source, sysfs=False, warnings=tuple(warnings))


def gid_of(row) -> Gid:
    """One `show_gids` row (parsers.netdev.GidRow) as the GID the checks judge (sysfs's type names)."""
    return Gid(row.index, row.gid, {"v1": "IB/RoCE v1", "v2": ROCE_V2}.get((row.version or "").lower()), row.netdev, row.ipv4)


def _merge(base: list[RdmaDevice], extra: list[RdmaDevice]) -> list[RdmaDevice]:
    """Fill what ``base`` lacks from ``extra`` (ibstat has rates, ibv_devinfo has MTUs and GIDs)."""
    more = {d.name: d for d in extra}
    out = []
    for d in base:
        e = more.get(d.name)
        if e is None:
            out.append(d)
            continue
        eports = {p.port: p for p in e.ports}
        ports = []
        for p in d.ports:
            ep = eports.get(p.port)
            if ep is not None:
                p = replace(p, **{k: getattr(ep, k) for k in fields(p) if getattr(p, k) in (None, ()) and getattr(ep, k) not in (None, ())})
            ports.append(p)
        d = replace(d, **{k: getattr(e, k) for k in ("fw_ver", "board_id", "node_guid", "hca_type") if getattr(d, k) is None})
        out.append(replace(d, ports=tuple(ports)))
    names = {d.name for d in base}
    out.extend(d for d in extra if d.name not in names)
    return out


def probe_inventory(ctx) -> RdmaInventory:
    host = ctx.host
    sysfs = host.is_dir("/sys")
    names = host.listdir(IB_CLASS)
    if names:
        return RdmaInventory(tuple(_device(host, n) for n in names), "sysfs", sysfs=True)
    kind, label = getattr(host, "kind", "bundle"), getattr(host, "label", "")
    why = (getattr(host, "unlisted", None) or {}).get(IB_CLASS)
    if why is not None:
        # There but not listable (mode 000, an LSM, a /sys this user may not read): unknown, not
        # "no devices". Not the tools either: they read the same sysfs, and the other checks
        # (GPU pairing, PCI) would judge a different inventory than this one.
        return RdmaInventory((), "none", sysfs=sysfs, unreadable=why, host_kind=kind, host_label=label)
    if sysfs:
        return RdmaInventory((), "sysfs", sysfs=True)
    from_tools = _from_tools(host)
    if from_tools is not None:
        return from_tools
    return RdmaInventory((), "none", sysfs=False, host_kind=kind, host_label=label)


def port_subject(dev: RdmaDevice, port: Port) -> str:
    return f"{dev.name}/{port.port}"


# ---- transport: InfiniBand, RoCE or iWARP ------------------------------------------------------
#
# The link layer does not tell RoCE from iWARP: both say "Ethernet" (the kernel's
# rdma_port_get_link_layer() answers Ethernet for every port of an RNIC). The node type does:
# sysfs node_type is "1: CA" for InfiniBand and RoCE HCAs and "4: RNIC" for iWARP
# (drivers/infiniband/core/sysfs.c node_type_string: RDMA_NODE_RNIC -> "RNIC"); libibverbs maps
# the same number to transport_type IBV_TRANSPORT_IWARP, which `ibv_devinfo` prints as
# "transport: iWARP (1)" and `ibstat` as the CA type "iWARP RNIC".
INFINIBAND, ROCE, IWARP = "InfiniBand", "RoCE", "iWARP"
ROCE_V2 = "RoCE v2"  # a GID's type as sysfs spells it (gid_attrs/types/<n>)
# Kernel drivers that only ever register iWARP devices (Chelsio T4-T7, soft iWARP). irdma and
# qedr register RoCE or iWARP depending on the port's mode, so only node_type tells for them.
IWARP_ONLY_DRIVERS = frozenset({"cxgb4", "iw_cxgb4", "siw"})
IWARP_NAME_PREFIXES = ("cxgb4_", "siw")


def is_rnic(dev: RdmaDevice) -> bool | None:
    """True: an iWARP RNIC; False: an InfiniBand/RoCE CA (or a switch); None: not known."""
    nt = (dev.node_type or "").strip().lower()
    if nt:
        return "rnic" in nt or "iwarp" in nt
    driver = (dev.driver or "").split(".", 1)[0]
    if driver in IWARP_ONLY_DRIVERS or dev.name.startswith(IWARP_NAME_PREFIXES):
        return True
    return None


def transport_of(dev: RdmaDevice, port: Port) -> str | None:
    """InfiniBand, RoCE or iWARP; None when the link layer (or, on Ethernet, the node type) is unknown.

    An Ethernet port of a CA whose node type was not recorded (a pasted `ibv_devinfo` without its
    transport line) is taken as RoCE, the usual Ethernet RDMA transport; an iWARP driver (cxgb4,
    siw) or device name still says iWARP."""
    ll = port.link_layer
    if ll == "InfiniBand":
        return INFINIBAND
    if ll != "Ethernet":
        return None
    return IWARP if is_rnic(dev) else ROCE


def ignored(dev: RdmaDevice, port: Port | None, expect: dict) -> bool:
    names = set(expect.get("ignore_ports") or ())
    if dev.name in names or (port is not None and port_subject(dev, port) in names):
        return True
    return bool(dev.is_vf and expect.get("ignore_vfs", True))
