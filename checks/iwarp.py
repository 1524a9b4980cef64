"""iwarp.config: iWARP ports judged as iWARP, not as RoCE.

iWARP is RDMA over TCP (Chelsio T4-T7 with cxgb4/iw_cxgb4, Intel E810/X722 with irdma in iWARP mode,
soft iWARP `siw` on any NIC). Its ports have an Ethernet link layer like RoCE ports, but the device's
node_type is "4: RNIC" (drivers/infiniband/core/sysfs.c node_type_string), and it needs other things:

- a connection manager: an iWARP QP becomes usable (RTS) only when the iWARP CM (iw_cm) has set up
  its TCP connection and MPA negotiation, driven from userspace by rdma_cm (rdma_connect and
  rdma_accept through /dev/infiniband/rdma_cm, module rdma_ucm). The drivers refuse to move a QP to
  RTS without one: irdma_modify_qp returns -EINVAL for IB_QPS_RTS when the QP has no cm_id, siw's
  siw_qp_nextstate_from_idle when it has no socket ("no socket"), and cxgb4 (c4iw_ib_modify_qp,
  T5 and later) already refuses the RTR call when it carries IB_QP_RQ_PSN;
- an IPv4 address on its netdev: the kernel's common iWARP query_port (core/device.c
  iw_query_port) reports the port DOWN / Disabled without a carrier, INIT /
  PortConfigurationTraining with a carrier but no IPv4 address, and ACTIVE / LinkUp only with one;
  rdma_cm resolves the peer by IP address;
- no RoCE v2 GID, ever: the GID table has one entry, the MAC address (cxgb4, irdma and siw
  query_gid), which the kernel's GID cache types "IB/RoCE v1".

What it means for a job is in the codes (``rdmadoctor explain IWARP_PORT``): NCCL's IB transport
takes an iWARP port for a RoCE one and fails at the first connection (nccl.env says so as
IWARP_NCCL_IB, with the job's environment); UCX skips iWARP devices; Open MPI 5 reaches them through
libfabric's verbs;ofi_rxm.
"""

from __future__ import annotations

from rdmadoctor.checks._rdma import (
    IWARP,
    NET_CLASS,
    RdmaInventory,
    ignored,
    netdev_speed_mbps,
    parse_int,
    port_subject,
    probe_inventory,
    transport_of,
)
from rdmadoctor.core.codes.ib import IB_NO_DEVICES
from rdmadoctor.core.codes.roce import (
    IWARP_CM_MISSING,
    IWARP_NETDEV_DOWN,
    IWARP_NO_IPV4,
    IWARP_NO_PORTS,
    IWARP_PORT,
    IWARP_UNEXPECTED,
)
from rdmadoctor.core.expect import Expect
from rdmadoctor.core.facts import Port, RdmaDevice
from rdmadoctor.core.model import ERROR, INFO, LINK, Check, Finding, Need
from rdmadoctor.core.record import record

# The iWARP drivers: kernel driver (as bound to the device) -> (kernel IB module, libibverbs
# provider library, what it is). verbs.userspace checks that the provider is installed.
IWARP_DRIVERS = {
    "cxgb4": ("iw_cxgb4", "libcxgb4", "Chelsio T4-T7"),
    "iw_cxgb4": ("iw_cxgb4", "libcxgb4", "Chelsio T4-T7"),
    "irdma": ("irdma", "libirdma", "Intel E810/X722 in iWARP mode"),
    "i40e": ("irdma", "libirdma", "Intel X722 in iWARP mode"),
    "ice": ("irdma", "libirdma", "Intel E810 in iWARP mode"),
    "qede": ("qedr", "libqedr", "Marvell FastLinQ in iWARP mode"),
    "qedr": ("qedr", "libqedr", "Marvell FastLinQ in iWARP mode"),
    "siw": ("siw", "libsiw", "soft iWARP"),
}
# The connection managers an iWARP connection goes through (iw_cm under rdma_cm).
CM_MODULES = {
    "iw_cm": "the iWARP connection manager: it sets up the TCP connection and MPA negotiation of every iWARP QP",
    "rdma_cm": "the RDMA connection manager above iw_cm: librdmacm's rdma_connect / rdma_accept (libfabric verbs, "
    "MPI) resolve the peer by IP address through it",
}


@record
class IwarpPort:
    dev: RdmaDevice
    port: Port
    netdev_mtu: int | None = None  # bytes, /sys/class/net/<netdev>/mtu
    speed_mbps: int | None = None  # /sys/class/net/<netdev>/speed; None: unknown or not a number


@record
class IwarpFacts:
    ports: tuple[IwarpPort, ...]
    source: str
    others: tuple[str, ...] = ()  # the node's other RDMA ports, "mlx5_0/1 (RoCE)"
    devices: bool = True  # the inventory lists an RDMA device at all
    modules: frozenset[str] | None = None  # loaded or built-in modules; None: unknown
    modules_source: str | None = None


def _iwarp_ports(inv: RdmaInventory, expect: dict) -> list[tuple[RdmaDevice, Port]]:
    return [(d, p) for d in inv.devices for p in d.ports if transport_of(d, p) == IWARP and not ignored(d, p, expect)]


def _needs_iwarp(ctx) -> str | None:
    if ctx.expect.get("rdma_transport") == IWARP:
        return None  # the profile expects iWARP: no iWARP port is a finding, not a skip
    inv: RdmaInventory = ctx.get(probe_inventory)
    if inv.source == "none":
        return "the RDMA devices are unknown: ib.devices says why"
    if not _iwarp_ports(inv, ctx.expect):
        return "no iWARP (RNIC) port on this node"
    return None


HAS_IWARP = Need("iwarp ports", _needs_iwarp)


def probe_iwarp(ctx) -> IwarpFacts:
    from rdmadoctor.checks.kernel import probe_kernel

    inv: RdmaInventory = ctx.get(probe_inventory)
    host = ctx.host
    ports = []
    for dev, port in _iwarp_ports(inv, ctx.expect):
        mtu = speed = None
        if port.netdev and inv.sysfs:
            mtu = parse_int(host.read_value(f"{NET_CLASS}/{port.netdev}/mtu"), 10)
            speed = netdev_speed_mbps(host, port.netdev)
        ports.append(IwarpPort(dev, port, mtu, speed))
    others = tuple(
        f"{port_subject(d, p)} ({transport_of(d, p) or p.link_layer or 'unknown link layer'})"
        for d in inv.devices
        for p in d.ports
        if transport_of(d, p) != IWARP and not ignored(d, p, ctx.expect)
    )
    kernel = ctx.get(probe_kernel)
    modules = None
    if kernel.modules is not None:
        modules = frozenset(kernel.modules) | kernel.builtin | kernel.ib_present
    return IwarpFacts(tuple(ports), inv.source, others, bool(inv.pfs()), modules, kernel.source)


def _driver_text(dev: RdmaDevice) -> str:
    base = (dev.driver or "").split(".", 1)[0]
    row = IWARP_DRIVERS.get(base) or IWARP_DRIVERS.get(dev.name.rstrip("0123456789_"))
    if row is None and dev.name.startswith("siw"):
        row = IWARP_DRIVERS["siw"]
    if row is None:
        return f"driver {dev.driver}" if dev.driver else "driver unknown"
    return f"{row[2]}, driver {dev.driver or row[0]}, provider {row[1]}"


def judge_iwarp(facts: IwarpFacts, expect: dict) -> list[Finding]:
    out: list[Finding] = []
    want = expect.get("rdma_transport")
    if want == IWARP and not facts.ports:
        seen = f"its RDMA ports are {', '.join(facts.others)}" if facts.others else "it has no RDMA port"
        out.append(
            Finding(
                IWARP_NO_PORTS.code,
                ERROR,
                "host",
                f"the profile expects iWARP ports and this node has none: {seen}.",
                IWARP_NO_PORTS.fix,
                cause=None if facts.devices or facts.source == "none" else IB_NO_DEVICES.code,
            )
        )
        return out
    for ip in facts.ports:
        dev, port = ip.dev, ip.port
        subj = port_subject(dev, port)
        nd = port.netdev or "<netdev>"
        if want and want != IWARP:
            out.append(
                Finding(
                    IWARP_UNEXPECTED.code,
                    ERROR,
                    subj,
                    f"{subj} is an iWARP port (node_type {dev.node_type or 'unknown'}, {_driver_text(dev)}); the profile "
                    f"expects {want}. NCCL jobs placed here fail at their first connection (IWARP_NCCL_IB).",
                    IWARP_UNEXPECTED.fix,
                    data={"expected": want, "driver": dev.driver},
                )
            )
        if port.state == "DOWN" and port.netdev_up is False:
            out.append(
                Finding(
                    IWARP_NETDEV_DOWN.code,
                    ERROR,
                    subj,
                    f"netdev {port.netdev} is down (no carrier or administratively down); expected up: an iWARP port "
                    "is DOWN while its netdev has no carrier.",
                    f"ip link set dev {nd} up   # then check the cable / switch port: ethtool {nd}",
                    data={"netdev": port.netdev},
                )
            )
            continue
        if port.state == "INIT":
            out.append(
                Finding(
                    IWARP_NO_IPV4.code,
                    ERROR,
                    subj,
                    f"state INIT, phys {port.phys_state or 'unknown'}: netdev {nd} has a carrier but no IPv4 address, and "
                    "the kernel reports an iWARP port ACTIVE only once it has one; expected ACTIVE. rdma_cm cannot "
                    "resolve a peer without it.",
                    f"ip addr add <ip>/<prefix> dev {nd}   # persist it in netplan / NetworkManager, or the pod "
                    "network's IPAM",
                    data={"netdev": port.netdev, "state": port.state, "phys_state": port.phys_state},
                )
            )
            continue
        if port.state != "ACTIVE":
            continue  # DOWN with the netdev's state unknown: ib.ports says IB_PORT_DOWN
        rate = f"{port.rate_gbps:g} Gb/s" if port.rate_gbps is not None else "rate unknown"
        where = f"netdev {port.netdev}" if port.netdev else "netdev not visible here"
        mtu = f", MTU {ip.netdev_mtu}" if ip.netdev_mtu is not None else ""
        out.append(
            Finding(
                IWARP_PORT.code,
                INFO,
                subj,
                f"iWARP (RDMA over TCP; {_driver_text(dev)}) on {where}, {rate}{mtu}: judged as iWARP, not RoCE (no RoCE "
                "v2 GID to expect). NCCL's IB transport cannot connect it: NCCL jobs need NCCL_IB_DISABLE=1, "
                "NCCL_IB_HCA without it, or a libfabric net plugin; MPI jobs use libfabric (FI_PROVIDER=verbs); UCX "
                "ignores it and uses TCP.",
                data={"netdev": port.netdev, "driver": dev.driver, "rate_gbps": port.rate_gbps, "netdev_mtu": ip.netdev_mtu},
            )
        )
    if facts.ports and facts.modules is not None:
        for m, why in CM_MODULES.items():
            if m not in facts.modules:
                out.append(
                    Finding(
                        IWARP_CM_MISSING.code,
                        ERROR,
                        m,
                        f"kernel module {m} is not loaded (not in {facts.modules_source}, not built in); expected with "
                        f"iWARP ports ({', '.join(port_subject(p.dev, p.port) for p in facts.ports)}): {why}.",
                        f"modprobe {m} && echo {m} >> /etc/modules-load.d/iwarp.conf",
                    )
                )
    return out


def _inventory(facts: IwarpFacts) -> dict:
    return {
        "iwarp": {
            port_subject(p.dev, p.port): {
                "driver": p.dev.driver,
                "state": p.port.state,
                "netdev": p.port.netdev,
                "netdev_up": p.port.netdev_up,
                "netdev_mtu": p.netdev_mtu,
                "speed_mbps": p.speed_mbps,
            }
            for p in facts.ports
        }
    }


# The expectations this module's checks read: declared once, here, with type, unit and range
# (engine.expectations builds its table from every check's defaults).
EXPECT: dict[str, Expect] = {
    "rdma_transport": Expect(
        None, "enum", choices=("InfiniBand", "RoCE", "iWARP"), null_means="any", example="RoCE",
        aliases={"ib": "InfiniBand", "infiniband": "InfiniBand", "roce": "RoCE", "rocev2": "RoCE", "iwarp": "iWARP"},
        doc="The RDMA transport the pool is built for. RoCE and iWARP ports both have an Ethernet link layer; "
        "an iWARP port where RoCE is expected is IWARP_UNEXPECTED.",
    ),
}


# Where this module's checks stand in the report (engine.registry: built-ins are found by scanning checks/).
ORDER = 30

CHECKS = [
    Check(
        defaults=EXPECT,
        id="iwarp.config",
        condition=LINK,
        gate=True,
        title="iWARP configuration",
        probe=probe_iwarp,
        judge=judge_iwarp,
        codes=(IWARP_PORT, IWARP_NETDEV_DOWN, IWARP_NO_IPV4, IWARP_CM_MISSING, IWARP_UNEXPECTED, IWARP_NO_PORTS),
        needs=(HAS_IWARP,),
        inventory=_inventory,
        description="Every iWARP port (node_type RNIC: cxgb4, irdma in iWARP mode, siw) judged as iWARP: its netdev up "
        "with an IPv4 address (the port is ACTIVE only then), iw_cm and rdma_cm loaded, and the transport the profile "
        "expects (rdma_transport). What it means for NCCL, UCX and MPI jobs: `rdmadoctor explain IWARP_PORT`.",
    ),
]
