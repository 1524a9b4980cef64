"""The node description: what hardware a generated host has and how it is set up.

A :class:`Node` lists GPUs and HCAs, where each sits on the PCIe tree (:class:`Pcie`), the
ports of each HCA and the runtime facts of the process (limits, capabilities, environment).
:mod:`.sysfs` turns it into a host tree; :mod:`.nodes` holds the shipped ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KIB, MIB, GIB = 1024, 1024**2, 1024**3

# CapEff of a container started with Docker's / containerd's default capability set, and the
# same plus CAP_IPC_LOCK (bit 14), which pods add with securityContext.capabilities.add.
CAP_DEFAULT = 0x00000000A80425FB
CAP_DEFAULT_IPC_LOCK = CAP_DEFAULT | (1 << 14)
CAP_ALL = 0x000001FFFFFFFFFF  # privileged / root on the host (kernel 5.9+: 41 capabilities)

# Mellanox/NVIDIA HCAs (PCI vendor 0x15b3): PCI ids, what sysfs shows, the PCI and verbs drivers, PCIe generation.
HCA_MODELS: dict[str, dict[str, str]] = {
    "cx7": {"device": "0x1021", "subsystem_device": "0x0041", "hca_type": "MT4129", "board_id": "MT_0000000838",
            "fw_ver": "28.39.2048", "driver": "mlx5_core", "vf_device": "0x101e", "provider": "mlx5", "gen": "5"},
    "cx6": {"device": "0x101b", "subsystem_device": "0x0007", "hca_type": "MT4123", "board_id": "MT_0000000223",
            "fw_ver": "20.39.1002", "driver": "mlx5_core", "vf_device": "0x101c", "provider": "mlx5", "gen": "4"},
    "cx3": {"device": "0x1003", "subsystem_device": "0x0050", "hca_type": "MT4099", "board_id": "MT_1090120019",
            "fw_ver": "2.42.5000", "driver": "mlx4_core", "vf_device": "0x1004", "provider": "mlx4", "gen": "3"},
    # Chelsio T62100-CR (2x100G), an iWARP RNIC. cxgb4 binds PF4 only (device id 0x64xx: 6 for T6,
    # 4 for PF4, 0d for the T62100-CR: t4_pci_id_tbl.h), an Ethernet controller; iw_cxgb4 registers
    # the RDMA device cxgb4_0 on it, node_type "4: RNIC". Its sysfs attributes as iw_cxgb4's
    # provider.c writes them: hca_type the netdev's ethtool driver name, board_id "<vendor>.<device>",
    # fw_ver a.b.c.d.
    "t62100": {"vendor": "0x1425", "device": "0x640d", "subsystem_device": "0x0000", "hca_type": "cxgb4",
               "board_id": "1425.640d", "fw_ver": "1.27.5.0", "driver": "cxgb4", "vf_device": "0x680d",
               "provider": "cxgb4", "gen": "3", "pci_fn": "4", "class": "0x020000", "node_type": "4: RNIC",
               "modules": "cxgb4 libcxgb iw_cxgb4"},
}
# The RDMA core modules of a node with only iWARP RNICs: no ib_umad / ib_ipoib (no InfiniBand
# port), iw_cm (which the iWARP drivers depend on) and rdma_cm / rdma_ucm (rdma-core's udev rules
# load them when an iWARP device appears).
IWARP_CORE_MODULES = ["ib_core", "ib_uverbs", "iw_cm", "ib_cm", "rdma_cm", "rdma_ucm"]
GPU_MODELS: dict[str, dict[str, str]] = {
    "h100": {"device": "0x2330", "subsystem_device": "0x16c1", "name": "NVIDIA H100 80GB HBM3", "gen": "5"},
    "a100": {"device": "0x20b2", "subsystem_device": "0x1463", "name": "NVIDIA A100-SXM4-80GB", "gen": "4"},
    "l40s": {"device": "0x26b9", "subsystem_device": "0x1851", "name": "NVIDIA L40S", "gen": "4"},
}
# The dpkg status a node gets when Node.packages is None: Ubuntu 22.04 plus rdma-core 44 when it has HCAs.
RDMA_PACKAGES = {
    "libibverbs1": "44.0-2",
    "ibverbs-providers": "44.0-2",
    "librdmacm1": "44.0-2",
    "libibumad3": "44.0-2",
    "rdma-core": "44.0-2",
    "ibverbs-utils": "44.0-2",
    "infiniband-diags": "44.0-2",
    "perftest": "4.5+0.20-1",
}
BASE_PACKAGES = {"libc6": "2.35-0ubuntu3.6", "bash": "5.1-6ubuntu1", "python3": "3.10.6-1~22.04"}


@dataclass
class Port:
    """One port of an RDMA device, as its sysfs files show it."""

    state: str = "ACTIVE"
    phys_state: str = "LinkUp"
    rate: str = "400 Gb/sec (4X NDR)"
    link_layer: str = "InfiniBand"
    lid: int | None = None  # None: assigned (ACTIVE InfiniBand ports get one, others 0)
    sm_lid: int | None = None  # None: 0x1 once an SM configured the port, else 0
    netdev: str | None = ""  # "": a name from the PCI address; None: no netdev for this port
    netdev_mtu: int | None = None  # None: 4092 for IPoIB, 9000 for Ethernet
    operstate: str | None = None  # None: "up" when the port is ACTIVE, else "down"
    ipv4: str | None = None  # RoCE: adds the ::ffff:a.b.c.d GIDs (v1 and v2)
    gids: tuple[tuple[str, str], ...] | None = None  # (gid, type) by index; None: derived
    # Error counters (ports/N/counters/, and hw_counters/ on RoCE ports): name -> value; 0 when absent.
    counters: dict[str, int] = field(default_factory=dict)


def ib_port(rate: str = "400 Gb/sec (4X NDR)", **kw: Any) -> Port:
    return Port(rate=rate, **kw)


def down_port(phys_state: str = "Polling", link_layer: str = "InfiniBand", **kw: Any) -> Port:
    # A port without a link reports the lowest rate of its widest width, as mlx5 does.
    kw.setdefault("rate", "10 Gb/sec (4X SDR)" if link_layer == "InfiniBand" else "40 Gb/sec (4X QDR)")
    return Port(state="DOWN", phys_state=phys_state, link_layer=link_layer, **kw)


def roce_port(ipv4: str, rate: str = "200 Gb/sec (4X HDR)", mtu: int = 9000, **kw: Any) -> Port:
    return Port(rate=rate, link_layer="Ethernet", netdev_mtu=mtu, ipv4=ipv4, lid=0, sm_lid=0, **kw)


def iwarp_port(netdev: str, ipv4: str | None, rate: str = "100 Gb/sec (4X EDR)", mtu: int = 9000, **kw: Any) -> Port:
    """A port of an iWARP RNIC. The kernel's iw_query_port (core/device.c) makes it ACTIVE / LinkUp
    with an IPv4 address on its netdev, INIT / PortConfigurationTraining with a carrier and no IPv4
    address, DOWN / Disabled without a carrier; its rate comes from the netdev's speed
    (ib_get_eth_speed: 100 Gb/s is "100 Gb/sec (4X EDR)")."""
    if ipv4 is None:
        kw.setdefault("state", "INIT")
        kw.setdefault("phys_state", "PortConfigurationTraining")
        kw.setdefault("operstate", "up")
    return Port(rate=rate, link_layer="Ethernet", netdev=netdev, netdev_mtu=mtu, ipv4=ipv4, lid=0, sm_lid=0, **kw)


@dataclass
class Pcie:
    """Where a PCI function sits. Endpoints naming the same key share that element.

    Two endpoints with the same ``switch`` are behind one PCIe switch (nvidia-smi: PIX), the same
    ``root_port`` without a switch is impossible unless they are functions of one card (``slot``),
    the same ``host_bridge`` is PHB, the same ``numa`` NODE, else SYS.
    """

    numa: int = 0
    host_bridge: str = "hb0"
    root_port: str = "rp0"
    switch: str | None = None
    slot: str | None = None  # functions of one card share a slot (dual-port CX-7: .0 and .1)
    gen: int | None = None  # negotiated PCIe generation; None: the device's own maximum
    width: int = 16
    max_width: int = 16


@dataclass
class Hca:
    name: str
    at: Pcie
    ports: list[Port] = field(default_factory=lambda: [Port()])
    model: str = "cx7"
    vfs: int = 0
    vf_port: Port = field(default_factory=lambda: Port(state="DOWN", phys_state="LinkUp"))
    fw_ver: str | None = None


@dataclass
class Gpu:
    at: Pcie
    model: str = "h100"


@dataclass
class NetIf:
    """A netdev that is not an RDMA port (the pod's eth0, a management NIC, lo)."""

    name: str
    operstate: str = "up"
    mtu: int = 1500
    carrier: bool = True
    speed: int | None = None  # Mb/s in /sys/class/net/<name>/speed; None: no such file (lo, dummy); -1: virtio
    ipv4: str | None = None  # its address, in the recorded netlink view (Node.record_interfaces)


@dataclass
class Node:
    hostname: str = "gpu-node-001"
    gpus: list[Gpu] = field(default_factory=list)
    hcas: list[Hca] = field(default_factory=list)
    numa_cpus: dict[int, str] = field(default_factory=lambda: {0: "0-55,112-167", 1: "56-111,168-223"})
    # Runtime facts (runtime.json). Limits in bytes, None = unlimited.
    memlock_soft: int | None = None
    memlock_hard: int | None = None
    cap_eff: int | None = CAP_ALL
    shm_size: int | None = 64 * GIB
    shm_free: int | None = 64 * GIB - 12 * MIB
    env: dict[str, str] = field(default_factory=dict)
    in_container: bool = False
    netifs: list[NetIf] = field(default_factory=lambda: [NetIf("eth0"), NetIf("lo", "unknown", 65536)])
    # Userspace: None derives the value from the HCAs (every driver's provider installed).
    packages: dict[str, str] | None = None
    verbs_drivers: list[str] | None = None  # /etc/libibverbs.d/<name>.driver
    providers: list[str] | None = None  # <libdir>/libibverbs/lib<name>-rdmav34.so
    dev_infiniband: list[str] | None = None  # /dev/infiniband entries
    modules: list[str] | None = None  # /proc/modules
    sys_modules: list[str] | None = None  # /sys/module/<name>; None: the same as modules
    osrelease: str = "5.15.0-91-generic"
    acs_ctrl: dict[str, int] = field(default_factory=dict)  # switch or root port key -> ACS control
    cmds: dict[str, str] = field(default_factory=dict)  # cmd/<name>.txt (cmd/<name> when it has a suffix)
    nvidia_driver: str = "535.129.03"
    proc_self: bool = True  # /proc/self/limits and /proc/self/status, consistent with the runtime facts
    sysfs: bool = True  # False: a bundle with no /sys, /proc, /etc, /dev (only cmd/ and runtime.json)
    runtime: bool = True
    # runtime.json keeps the netlink view of the interfaces (name, up, MTU, addresses), as `collect`
    # does once a check has read them.
    record_interfaces: bool = False


def is_rnic(hca: Hca) -> bool:
    return HCA_MODELS[hca.model].get("node_type", "").endswith("RNIC")
