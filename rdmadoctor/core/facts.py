"""Plain facts that probes and parsers return. They decide nothing.

Every field a source could not tell is ``None`` (or an empty tuple), never a guess.
"""

from __future__ import annotations

from rdmadoctor.core.record import field, record

# Names as the kernel's sysfs ABI (Documentation/ABI/stable/sysfs-class-infiniband) spells them.
PORT_STATES = ("NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER")
PHYS_STATES = {
    0: "NoStateChange",
    1: "Sleep",
    2: "Polling",
    3: "Disabled",
    4: "PortConfigurationTraining",
    5: "LinkUp",
    6: "LinkErrorRecovery",
    7: "PhyTest",
}


TYPE_CHECKING = False  # typing costs ~3 ms to import; type checkers read the branch below
if TYPE_CHECKING:
    # What type checkers see: Parsed is generic in its value. The fields are the run-time class's
    # below (keep the two alike); never executed.
    from typing import Generic, TypeVar

    _V = TypeVar("_V")

    @record
    class Parsed(Generic[_V]):
        value: _V
        warnings: tuple[str, ...] = ()
        ok: bool = True

else:

    @record
    class Parsed:
        """What a parser read, plus what it noticed was wrong or missing in its input.

        Annotated as ``Parsed[T]``; subscripting returns the class (no ``typing.Generic``: start-up).
        """

        def __class_getitem__(cls, item):
            return cls

        value: object  # the parser's result type (Parsed[T] in annotations)
        warnings: tuple[str, ...] = ()
        # False when the input was not recognisable at all (garbage, empty, another tool's output).
        ok: bool = True


@record
class Gid:
    index: int
    gid: str
    type: str | None = None  # "IB/RoCE v1" | "RoCE v2" (sysfs spelling) | None
    netdev: str | None = None
    ipv4: str | None = None


@record
class Port:
    port: int
    state: str | None = None  # DOWN | INIT | ARMED | ACTIVE | ACTIVE_DEFER
    phys_state: str | None = None  # Sleep | Polling | Disabled | LinkUp | ...
    rate_gbps: float | None = None
    link_layer: str | None = None  # InfiniBand | Ethernet
    lid: int | None = None
    sm_lid: int | None = None
    netdev: str | None = None
    netdev_up: bool | None = None
    active_mtu: int | None = None  # bytes (256..4096)
    max_mtu: int | None = None
    gids: tuple[Gid, ...] = ()
    # For the fleet fingerprint (rdmadoctor.engine.fingerprint): facts no check judges yet.
    width: str | None = None  # "4X", from sysfs rate "400 Gb/sec (4X NDR)"
    pkey: str | None = None  # pkeys/0, the default P_Key ("0xffff")
    subnet_prefix: str | None = None  # InfiniBand: the first 64 bits of GID 0 ("fe80:0000:0000:0000")
    netdev_mtu: int | None = None  # the netdev's MTU (RoCE: what active_mtu is derived from)


@record
class RdmaDevice:
    name: str
    driver: str | None = None  # mlx5_core, irdma, bnxt_en, efa, ib_qib, rdma_rxe, ...
    pci: str | None = None  # 0000:17:00.0
    numa_node: int | None = None
    fw_ver: str | None = None
    board_id: str | None = None
    node_type: str | None = None  # "CA", "Switch", "RNIC", ...
    node_guid: str | None = None
    hca_type: str | None = None
    ports: tuple[Port, ...] = ()
    is_vf: bool = False
    source: str = "sysfs"  # where these facts came from: sysfs | ibstat | ibv_devinfo | ...
    pci_id: str | None = None  # PCI vendor:device, "15b3:1021"
    driver_version: str | None = None  # /sys/module/<driver>/version (MLNX_OFED / DOCA drivers have it; in-tree ones do not)


@record
class NetLink:
    """One row of `ibdev2netdev`: device port ==> netdev (Up|Down)."""

    device: str
    port: int
    netdev: str
    up: bool | None


@record
class GidRow:
    """One row of `show_gids`."""

    device: str
    port: int
    index: int
    gid: str
    ipv4: str | None
    version: str | None  # "v1" | "v2"
    netdev: str | None


@record
class TopoMatrix:
    """`nvidia-smi topo -m`: GPU x NIC relations, NIC names resolved through the NIC Legend."""

    gpus: tuple[str, ...]  # "GPU0", ...
    nics: tuple[str, ...]  # RDMA device names when the legend gives them, else "NIC0", ...
    gpu_nic: tuple[tuple[str, ...], ...]  # gpu_nic[g][n] in PIX|PXB|PHB|NODE|SYS|NV#|X
    gpu_numa: tuple[int | None, ...] = ()
    gpu_cpu_affinity: tuple[str | None, ...] = ()
    gpu_gpu: tuple[tuple[str, ...], ...] = ()  # gpu_gpu[g][h] between the GPUs above: X|NV#|PIX|...|SYS


@record
class LspciDevice:
    bdf: str  # as printed, e.g. "21:00.0" or "0000:21:00.0"
    description: str = ""
    numa_node: int | None = None
    lnkcap_speed_gts: float | None = None
    lnkcap_width: int | None = None
    lnksta_speed_gts: float | None = None
    lnksta_width: int | None = None
    acsctl: dict[str, bool] | None = None  # {"SrcValid": False, ...}; None when not shown
    driver: str | None = None


@record
class DfRow:
    filesystem: str
    size_bytes: int | None
    used_bytes: int | None
    avail_bytes: int | None
    mountpoint: str


@record
class Limits:
    """RLIMIT_MEMLOCK; None means unlimited, a missing Limits object means unknown."""

    memlock_soft: int | None
    memlock_hard: int | None


@record
class PackageDb:
    packages: dict[str, str] = field(default_factory=dict)  # name -> version
    source: str = ""  # dpkg | rpm | ofed_info
    ofed_version: str | None = None  # MLNX_OFED_LINUX-23.10-1.1.9.0
