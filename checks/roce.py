"""roce.config: what a RoCE port needs beyond a link: a routable RoCE v2 GID, its netdev up, a 4096 MTU.

Only RoCE ports: an iWARP port (node_type "4: RNIC") has an Ethernet link layer too, but no RoCE v2
GID ever (its one GID is its MAC address, typed "IB/RoCE v1" by the kernel's GID cache, and no
RoCE MTU): checks/iwarp.py judges it as what it is.
"""

from __future__ import annotations

from rdmadoctor.checks._rdma import (
    IB_CLASS,
    IWARP,
    NET_CLASS,
    ROCE,
    ROCE_V2,
    RdmaInventory,
    ignored,
    parse_int,
    port_subject,
    probe_inventory,
    transport_of,
)
from rdmadoctor.core.codes.roce import (
    NET_MTU_LOW,
    ROCE_GIDS_UNKNOWN,
    ROCE_NETDEV_DOWN,
    ROCE_NETDEV_NOT_SEEN,
    ROCE_NO_V2_GID,
    ROCE_V2_GID,
)
from rdmadoctor.core.expect import Expect
from rdmadoctor.core.facts import Gid, Port, RdmaDevice
from rdmadoctor.core.model import (
    ERROR,
    INFO,
    LINK,
    UNKNOWN,
    WARNING,
    Check,
    Finding,
    Need,
    Paste,
)
from rdmadoctor.core.record import record


@record
class RocePort:
    dev: RdmaDevice
    port: Port
    netdev_mtu: int | None  # bytes, from /sys/class/net/<netdev>/mtu
    gids_known: bool  # the GID table was read (sysfs, show_gids, ibv_devinfo -v): an empty one is empty


@record
class RoceFacts:
    ports: tuple[RocePort, ...]
    source: str


def roce_ports(inv: RdmaInventory, expect: dict) -> list[tuple[RdmaDevice, Port]]:
    """The RoCE ports: Ethernet ports of CAs, not of iWARP RNICs."""
    return [
        (dev, port)
        for dev in inv.devices
        for port in dev.ports
        if transport_of(dev, port) == ROCE and not ignored(dev, port, expect)
    ]


def _has_ethernet(ctx) -> str | None:
    inv: RdmaInventory = ctx.get(probe_inventory)
    if inv.source == "none":
        return "the RDMA devices are unknown: ib.devices says why"
    if not inv.devices:
        return "no RDMA devices: see ib.devices"
    if not roce_ports(inv, ctx.expect):
        rnics = sorted({d.name for d in inv.devices for p in d.ports if transport_of(d, p) == IWARP})
        if rnics:
            return f"no RoCE port to judge: {', '.join(rnics)} {'is' if len(rnics) == 1 else 'are'} iWARP (see iwarp.config)"
        lls = sorted({p.link_layer or "unknown" for d in inv.devices for p in d.ports})
        return f"no Ethernet (RoCE) RDMA port to judge (link layers: {', '.join(lls) or 'no ports'})"
    return None


HAS_ROCE = Need("roce ports", _has_ethernet)


def probe_roce(ctx) -> RoceFacts:
    inv: RdmaInventory = ctx.get(probe_inventory)
    host = ctx.host
    out = []
    for dev, port in roce_ports(inv, ctx.expect):
        mtu = None
        if port.netdev and inv.sysfs:
            mtu = parse_int(host.read_value(f"{NET_CLASS}/{port.netdev}/mtu"), 10)
        if inv.source == "sysfs":
            # gid_attrs/types appeared in Linux 4.5; without it the kernel does not say which GIDs are v2.
            known = bool(port.gids) or host.is_dir(f"{IB_CLASS}/{dev.name}/ports/{port.port}/gid_attrs/types")
        else:
            # Tools list GIDs only when recorded with them (ibv_devinfo -v, show_gids).
            known = bool(port.gids)
        out.append(RocePort(dev, port, mtu, known))
    return RoceFacts(tuple(out), inv.source)


def _link_local(gid: Gid) -> bool:
    return gid.gid.lower().startswith("fe80")


def _gid_text(g: Gid) -> str:
    return f"{g.index} ({g.ipv4 or g.gid})"


def judge_roce(facts: RoceFacts, expect: dict) -> list[Finding]:
    out: list[Finding] = []
    min_mtu = expect.get("roce_min_mtu")
    for rp in facts.ports:
        dev, port = rp.dev, rp.port
        subj = port_subject(dev, port)
        nd = port.netdev or "<netdev>"
        if port.netdev_up is False:
            out.append(
                Finding(
                    ROCE_NETDEV_DOWN.code,
                    ERROR,
                    subj,
                    f"netdev {port.netdev} is down (no carrier or administratively down); expected up: "
                    f"the RoCE port follows its netdev.",
                    f"ip link set dev {nd} up   # then check the cable / switch port: ethtool {nd}",
                    data={"netdev": port.netdev},
                )
            )
        elif port.netdev_up is None:
            where = f"netdev {port.netdev}" if port.netdev else "no netdev"
            out.append(
                Finding(
                    ROCE_NETDEV_NOT_SEEN.code,
                    INFO,
                    subj,
                    f"{where} found for this RoCE port, its state is unknown ({facts.source}); in a pod the "
                    "netdev may live in another network namespace.",
                )
            )
        if not rp.gids_known:
            out.append(
                Finding(
                    ROCE_GIDS_UNKNOWN.code,
                    UNKNOWN,
                    subj,
                    f"the GID table of {subj} was not recorded ({facts.source} without GIDs); whether it has a "
                    "RoCE v2 GID is unknown.",
                    "Record it: `show_gids > cmd/show_gids.txt` or `ibv_devinfo -v > cmd/ibv_devinfo.txt`, or use "
                    "`rdmadoctor collect`.",
                )
            )
        else:
            v2 = [g for g in port.gids if g.type == ROCE_V2]
            routable = [g for g in v2 if not _link_local(g)]
            v4 = [g for g in routable if g.ipv4]
            if not routable:
                if v2:
                    seen = f"only link-local RoCE v2 {'GID' if len(v2) == 1 else 'GIDs'} at {'index' if len(v2) == 1 else 'indexes'} {', '.join(_gid_text(g) for g in v2)}"
                elif port.gids:
                    table = ", ".join(f"{g.index} {g.type or 'unknown type'}" for g in port.gids)
                    seen = f"no RoCE v2 GID (GIDs: {table})"
                else:
                    seen = "no RoCE v2 GID (the GID table is empty)"
                out.append(
                    Finding(
                        ROCE_NO_V2_GID.code,
                        ERROR,
                        subj,
                        f"{seen}; expected a RoCE v2 GID with an IPv4 address of netdev {nd}. NCCL skips "
                        "link-local GIDs.",
                        f"ip addr add <ip>/<prefix> dev {nd}   # RoCE v2 GIDs are derived from the netdev's IPs; "
                        f"if only v1 GIDs appear: cma_roce_mode -d {dev.name} -p {port.port} -m 2",
                        data={"netdev": port.netdev},
                    )
                )
            else:
                best = v4[0] if v4 else routable[0]
                out.append(
                    Finding(
                        ROCE_V2_GID.code,
                        INFO,
                        subj,
                        f"RoCE v2 {'GID' if len(routable) == 1 else 'GIDs'} at {'index' if len(routable) == 1 else 'indexes'} {', '.join(_gid_text(g) for g in routable)}: "
                        f"NCCL_IB_GID_INDEX={best.index}"
                        + ("" if best.ipv4 else " (IPv6 only: also set NCCL_IB_ADDR_FAMILY=AF_INET6)"),
                        data={"v2_gid_indices": [g.index for g in routable], "gid_index": best.index},
                    )
                )
        mtu = port.active_mtu
        # (a port that is not ACTIVE has no negotiated MTU: ibv_devinfo shows 1024 for a DOWN RoCE port, and
        # IB_PORT_DOWN tells what is wrong with it; a pasted port list is judged the same, on ACTIVE ports)
        if isinstance(min_mtu, int) and mtu is not None and mtu < min_mtu and port.state in (None, "ACTIVE"):
            nd_mtu = f"netdev {port.netdev} MTU {rp.netdev_mtu}" if rp.netdev_mtu is not None else (
                f"netdev {port.netdev} MTU unknown" if port.netdev else "netdev MTU unknown"
            )
            out.append(
                Finding(
                    NET_MTU_LOW.code,
                    WARNING,
                    subj,
                    f"active MTU {mtu} ({nd_mtu}); expected {min_mtu}: set the netdev MTU to 9000 "
                    f"(`ip link set dev {nd} mtu 9000`, and on the switch)",
                    f"ip link set dev {nd} mtu 9000   # persist it in netplan / NetworkManager; the switch ports "
                    "must allow jumbo frames (9216)",
                    data={"active_mtu": mtu, "netdev_mtu": rp.netdev_mtu},
                )
            )
    return out


def _inventory_json(facts: RoceFacts) -> dict:
    ports = {}
    for rp in facts.ports:
        v2 = [g for g in rp.port.gids if g.type == ROCE_V2]
        v4 = [g.index for g in v2 if g.ipv4]
        ports[port_subject(rp.dev, rp.port)] = {
            "netdev": rp.port.netdev,
            "netdev_up": rp.port.netdev_up,
            "netdev_mtu": rp.netdev_mtu,
            "active_mtu": rp.port.active_mtu,
            "v2_gid_indices": [g.index for g in v2] if rp.gids_known else None,
            "ipv4_gid_index": v4[0] if v4 else None,
        }
    return {"roce": ports}


# Active MTUs an RDMA port can have (IBV_MTU_256..4096); 9000 is a netdev MTU, not one of them.
RDMA_MTUS = (256, 512, 1024, 2048, 4096)


# The expectations this module's checks read: declared once, here, with type, unit and range
# (engine.expectations builds its table from every check's defaults).
EXPECT: dict[str, Expect] = {
    "roce_min_mtu": Expect(
        4096, "enum", "bytes", choices=RDMA_MTUS, null_means="no MTU check",
        doc="Lowest acceptable active MTU of a RoCE port (the RDMA MTU, not the netdev's 9000).",
    ),
}


# ---- RoCE ports in outputs pasted into a job's log (logs.diagnose) -----------------------------------

# What a pasted port list or GID table can show of a RoCE port.
PASTE_CODES = frozenset(c.code for c in (NET_MTU_LOW, ROCE_NO_V2_GID, ROCE_V2_GID))


def judge_pasted_ports(seg, expect: dict, node, layers: dict[str, str]) -> list[Finding]:
    """A pasted port list's ACTIVE RoCE ports as this check judges them: the active MTU, and the GID table
    where the output holds one (`ibv_devinfo -v`), on a RoCE node only (no port of another link layer
    listed): beside an InfiniBand port an Ethernet one is the front-end NIC (an Azure accelerated-networking
    VF at MTU 1024), not the fabric the job trains over."""
    from rdmadoctor.checks._paste import port_inventory

    inv, _ = port_inventory(seg, expect)
    if not inv.devices:
        return []  # a paste that lists no device proves nothing about the node
    roce_node = all(p.link_layer == "Ethernet" for d in inv.devices for p in d.ports)
    roce = tuple(RocePort(d, p, None, bool(p.gids)) for d, p in roce_ports(inv, expect) if p.state == "ACTIVE") if roce_node else ()
    return [f for f in judge_roce(RoceFacts(roce, seg.kind), expect) if f.code in PASTE_CODES]


def judge_pasted_gids(seg, expect: dict, node, layers: dict[str, str]) -> list[Finding]:
    """`show_gids`: each RoCE port needs a routable RoCE v2 GID (what NCCL_IB_GID_INDEX names)."""
    from rdmadoctor.checks._paste import roce_gids

    ports = []
    table = roce_gids(seg.text, layers)
    for (dev, port), (netdev, gids) in table.items():
        p = Port(port, link_layer="Ethernet", netdev=netdev, gids=gids)
        ports.append(RocePort(RdmaDevice(dev, ports=(p,), source="show_gids"), p, None, True))
    # show_gids ends with `n_gids_found=N`: without it the paste may stop inside the last port's rows,
    # whose missing v2 GID then proves nothing.
    cut = None if "n_gids_found" in seg.text or not table else "/".join(map(str, list(table)[-1]))
    codes = {ROCE_NO_V2_GID.code, ROCE_V2_GID.code}
    return [f for f in judge_roce(RoceFacts(tuple(ports), "show_gids"), {})
            if f.code in codes and not (f.code == ROCE_NO_V2_GID.code and f.subject == cut)]


def judge_pasted_netdevs(seg, expect: dict, node, layers: dict[str, str]) -> list[Finding]:
    """`ibdev2netdev`: a RoCE port works only while its netdev is up. An InfiniBand port's (Down) is its
    IPoIB interface's state, not the port's (a pure IB fabric without IPoIB shows every port Down)."""
    from rdmadoctor.checks._paste import parse_links, roce_netdev

    rows = parse_links(seg.text)
    links = [x for x in rows if roce_netdev(x.device, x.netdev, layers)]
    up = [x for x in links if x.up]
    ib = any(roce_netdev(x.device, x.netdev, layers) is False for x in rows)
    out = []
    for x in links:
        if x.up is not False:
            continue
        also = [f"{y.netdev} ({y.device})" for y in up]
        if also or ib:
            sev, tail = WARNING, (f" Other RoCE netdevs are up ({', '.join(also[:4])})" if also else
                                  " The paste also lists InfiniBand ports") + ": if this port is unused on purpose, nothing to do."
        else:
            sev, tail = ERROR, " No RoCE netdev in the paste is up: no RoCE port can carry NCCL's traffic."
        out.append(Finding(ROCE_NETDEV_DOWN.code, sev, f"{x.device}/{x.port}",
                           f"netdev {x.netdev} of {x.device} port {x.port} is Down; expected Up: a RoCE port is ACTIVE only "
                           f"while its netdev is up.{tail}",
                           f"ip link set dev {x.netdev} up   # if it stays down: the cable and switch port, `ethtool {x.netdev}`",
                           data={"netdev": x.netdev}))
    return out


def _roce_rows(seg, layers: dict[str, str]) -> bool:
    """Does a pasted `ibdev2netdev` list a RoCE port? Its IPoIB netdevs' states say nothing."""
    from rdmadoctor.checks._paste import parse_links, roce_netdev

    return any(roce_netdev(x.device, x.netdev, layers) for x in parse_links(seg.text))


PASTES = (
    *(Paste(kind, judge_pasted_ports) for kind in ("ibstat", "ibstatus", "ibv_devinfo", "rdma_link")),
    Paste("show_gids", judge_pasted_gids),
    Paste("ibdev2netdev", judge_pasted_netdevs, rows=_roce_rows),
)

# Where this module's checks stand in the report (engine.registry: built-ins are found by scanning checks/).
ORDER = 20

CHECKS = [
    Check(
        defaults=EXPECT,
        id="roce.config",
        condition=LINK,
        gate=True,
        title="RoCE configuration",
        probe=probe_roce,
        judge=judge_roce,
        codes=(ROCE_NO_V2_GID, ROCE_NETDEV_DOWN, NET_MTU_LOW, ROCE_V2_GID, ROCE_GIDS_UNKNOWN, ROCE_NETDEV_NOT_SEEN),
        needs=(HAS_ROCE,),
        inventory=_inventory_json,
        pastes=PASTES,
        description="Every Ethernet (RoCE) RDMA port: a routable RoCE v2 GID (and its index for NCCL_IB_GID_INDEX), "
        "its netdev up, an active MTU of at least roce_min_mtu (4096).",
    ),
]
