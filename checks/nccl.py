"""nccl.env: the job's NCCL settings against this node (HCAs, socket interfaces, GID index, IB on/off).

The matching follows NCCL's own code (src/misc/utils.cc parseStringList / matchIfList, the callers
in net_ib.cc and socket.cc), not its docs' summary of it:

- the list is comma separated; a leading ``^`` excludes, then a leading ``=`` matches exactly; both
  apply to the whole list, in that order only (``^=mlx5_0`` works, ``=^mlx5_0`` names "^mlx5_0");
- without ``=`` an entry is a prefix: ``mlx5_1`` also selects ``mlx5_10`` .. ``mlx5_17``;
- ``dev:port`` limits an entry to one port, the port read with atoi (``mlx5_0:`` means port 0);
- nothing is trimmed: ``mlx5_0, mlx5_1`` has an entry " mlx5_1" that matches no device;
- only ACTIVE ports are candidates for NCCL_IB_HCA; NCCL_SOCKET_IFNAME only sees interfaces that are
  running (up with a carrier) and have an IPv4/IPv6 address, and is ignored when 1 character long;
- numeric variables are read with strtoll(value, NULL, 0): ``NCCL_IB_DISABLE=true`` reads as 0.

Two transports are judged beyond the settings' syntax:

- NET/IB on iWARP: ncclIbInitDevices (src/transport/net_ib/init.cc) keeps every ACTIVE port whose
  link layer is InfiniBand or Ethernet and never reads the device's transport type, so an iWARP RNIC
  is listed as a RoCE device ("NET/IB : Using [0]cxgb4_0:1/RoCE"). The job then fails at its first
  inter-node connection: NCCL connects QPs itself with ibv_modify_qp to RTR and RTS (connect.cc
  ncclIbQpRtr / ncclIbQpRts, an address handle built from GID index 0, the RNIC's only GID:
  ncclIbGetGidIndex finds no other in a one-entry table), and an iWARP driver accepts RTS only for
  a QP the iWARP connection manager connected (checks/iwarp.py cites the drivers): IWARP_NCCL_IB.
- NET/Socket: with NCCL_IB_DISABLE, without a usable RDMA port, or in a pool that trains over TCP by
  design (rdma_required = false), every byte between nodes goes through the interfaces NCCL's
  socket transport found (src/misc/socket.cc ncclFindInterfaces: NCCL_SOCKET_IFNAME, else "ib*",
  else anything but docker, lo and virbr), each at the speed NCCL itself reads from
  /sys/class/net/<if>/speed (net_socket.cc ncclNetSocketGetSpeed). Their speed and MTU are judged
  against socket_min_gbps and socket_min_mtu.
"""

from __future__ import annotations

import re

from rdmadoctor.core.expect import Expect
from rdmadoctor.core.record import field, record

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Iterable, Sequence

from rdmadoctor.checks._rdma import IWARP, NET_CLASS, RdmaInventory, netdev_speed_mbps, parse_int, probe_inventory, transport_of
from rdmadoctor.core.facts import Gid
from rdmadoctor.core.model import CONFIG, ERROR, INFO, UNKNOWN, WARNING, Check, Code, Finding, Need, PodChange
from rdmadoctor.core.words import count

ROCE_V2 = "RoCE v2"
IFF_UP = 0x1
IFF_RUNNING = 0x40  # what NCCL's findInterfaces tests: admin up and operationally up

NCCL_IB_HCA_NO_MATCH = Code(
    "NCCL_IB_HCA_NO_MATCH",
    "NCCL_IB_HCA names no usable port",
    "NCCL only uses the ACTIVE ports NCCL_IB_HCA selects. An entry that names no device (a typo, a device "
    "renamed by the driver, mlx5_N vs ibpXsY naming) or a port that is down is silently skipped: the job "
    "runs on fewer rails, or with no port at all falls back to TCP sockets (`NET/IB : No device found`).",
    "Name the ACTIVE ports this node has (see `ibstat` / `rdma link`), exactly, in the pod spec:\n"
    "  env:\n  - name: NCCL_IB_HCA\n    value: \"=mlx5_0,mlx5_1\"\n"
    "A leading `=` makes NCCL match names exactly; `^` excludes; `dev:port` picks one port.",
    kind="problem",
)
NCCL_IB_HCA_PREFIX = Code(
    "NCCL_IB_HCA_PREFIX",
    "NCCL_IB_HCA entry is a prefix of other devices",
    "Information: without a leading `=`, NCCL matches NCCL_IB_HCA entries as prefixes: `mlx5_1` also selects (or with "
    "`^` also excludes) mlx5_10, mlx5_11, ... which is rarely what was meant on a node with 10+ HCAs.",
    "Write exact names: `NCCL_IB_HCA==mlx5_0,mlx5_1` (or `^=mlx5_1` to exclude only mlx5_1).",
    kind="info",
)
NCCL_SOCKET_IFNAME_NO_MATCH = Code(
    "NCCL_SOCKET_IFNAME_NO_MATCH",
    "NCCL_SOCKET_IFNAME matches no interface that is up",
    "NCCL bootstraps (and without RDMA, moves all data) over the interfaces NCCL_SOCKET_IFNAME selects. "
    "When none is up, NCCL fails at init with `Bootstrap : no socket interface found` or hangs.",
    "Set it to an interface that exists and is up in the job's network namespace (`ip -br link`); in a pod "
    "without hostNetwork that is usually eth0 (or net1 for a Multus network):\n"
    "  env:\n  - name: NCCL_SOCKET_IFNAME\n    value: \"=eth0\"",
    kind="problem",
)
NCCL_SOCKET_IFNAME_NO_ADDR = Code(
    "NCCL_SOCKET_IFNAME_NO_ADDR",
    "NCCL_SOCKET_IFNAME interfaces have no IP address",
    "NCCL only takes interfaces that carry an IPv4 or IPv6 address: an interface that is up without one "
    "is skipped, and NCCL fails with `Bootstrap : no socket interface found`.",
    "Give the interface an address (`ip addr add <ip>/<prefix> dev <if>`, or the CNI / Multus "
    "NetworkAttachmentDefinition's IPAM), or point NCCL_SOCKET_IFNAME at one that has an address.",
    kind="problem",
)
NCCL_IB_DISABLED_BY_ENV = Code(
    "NCCL_IB_DISABLED_BY_ENV",
    "RDMA disabled by the environment",
    "NCCL_IB_DISABLE=1 (or NCCL_NET=Socket) makes NCCL use TCP sockets although this node has ACTIVE "
    "RDMA ports: collectives run at a fraction of the bandwidth. It is often left over from debugging.",
    "Remove NCCL_IB_DISABLE (and NCCL_NET=Socket) from the job's environment, the image (/etc/nccl.conf) "
    "and the launcher scripts.",
    kind="problem",
)
NCCL_IB_GID_INDEX_BAD = Code(
    "NCCL_IB_GID_INDEX_BAD",
    "NCCL_IB_GID_INDEX does not point at a RoCE v2 GID",
    "On RoCE NCCL addresses the peer with the GID at NCCL_IB_GID_INDEX. If that entry is missing, RoCE v1, "
    "or link-local, connections fail (`ibv_modify_qp failed with 110 Connection timed out`) or stay in "
    "one L2 segment. Indexes differ between hosts when the netdevs' addresses differ.",
    "Set the index of the RoCE v2 GID with the IPv4 address (`show_gids`), or leave NCCL_IB_GID_INDEX unset "
    "on NCCL 2.21+, which picks that GID per port by itself.",
    kind="problem",
)
NCCL_ENV_INVALID = Code(
    "NCCL_ENV_INVALID",
    "NCCL reads a setting differently from how it is written",
    "NCCL parses numeric settings with strtoll: `NCCL_IB_DISABLE=true` is read as 0 and does nothing, "
    "and a value with a trailing unit or typo is cut at the first non-digit.",
    "Write numbers: NCCL_IB_DISABLE=1 or 0.",
    kind="problem",
)
NCCL_MASTER_ADDR_BAD = Code(
    "NCCL_MASTER_ADDR_BAD",
    "MASTER_ADDR / MASTER_PORT malformed",
    "torch.distributed (and NCCL's bootstrap through it) connects every rank to MASTER_ADDR:MASTER_PORT; an "
    "empty or malformed value fails at rendezvous on every rank.",
    "Set MASTER_ADDR to the rank-0 pod's hostname or IP (e.g. the headless service name "
    "`job-master-0.job`) and MASTER_PORT to a port number (1-65535).",
    kind="problem",
)
NCCL_ENV_INFO = Code(
    "NCCL_ENV_INFO",
    "NCCL settings",
    "What NCCL will use on this node with the job's settings.",
    "Nothing to fix.",
    kind="info",
)

NCCL_IB_HCA_UNKNOWN = Code(
    "NCCL_IB_HCA_UNKNOWN",
    "What NCCL_IB_HCA selects is unknown",
    "Could not decide: NCCL_IB_HCA is set but the node's RDMA devices and port states could not be read, so "
    "whether it selects an ACTIVE port is unknown.",
    "Run the check on the node (or in the pod) where /sys/class/infiniband is visible, or record the bundle "
    "with `rdmadoctor collect`.",
    kind="unknown",
)
NCCL_SOCKET_IFNAME_UNKNOWN = Code(
    "NCCL_SOCKET_IFNAME_UNKNOWN",
    "What NCCL_SOCKET_IFNAME selects is unknown",
    "Could not decide: the network interfaces (or the state of the ones NCCL_SOCKET_IFNAME matches) could not "
    "be read, so whether NCCL finds a socket interface that is up is unknown.",
    "Run the check in the job's network namespace (inside the pod), or record the bundle there with "
    "`rdmadoctor collect`.",
    kind="unknown",
)
NCCL_IB_GID_INDEX_UNKNOWN = Code(
    "NCCL_IB_GID_INDEX_UNKNOWN",
    "What NCCL_IB_GID_INDEX points at is unknown",
    "Could not decide: NCCL_IB_GID_INDEX is set but the RDMA devices or the GID tables of the RoCE ports NCCL "
    "uses were not recorded, so whether that index is a RoCE v2 GID is unknown.",
    "Record the GID tables: `show_gids > cmd/show_gids.txt` in the bundle, or use `rdmadoctor collect`.",
    kind="unknown",
)

IWARP_NCCL_IB = Code(
    "IWARP_NCCL_IB",
    "NCCL's IB transport would use an iWARP port",
    "NCCL's IB transport (NET/IB) takes every ACTIVE port whose link layer is InfiniBand or Ethernet and never "
    "looks at the transport type (src/transport/net_ib/init.cc, ncclIbInitDevices), so it lists an iWARP RNIC as "
    "a RoCE device ('NET/IB : Using [0]cxgb4_0:1/RoCE') and init succeeds. The first connection between two nodes "
    "then fails: NCCL creates an RC QP and moves it to RTR and RTS with ibv_modify_qp itself, addressing the peer "
    "by GID index 0 (connect.cc ncclIbQpRtr, ncclIbQpRts, ncclIbGetGidIndex), while an iWARP QP reaches RTS only "
    "through the iWARP connection manager (iw_cm, driven by rdma_cm's rdma_connect / rdma_accept), which NCCL "
    "never calls. The kernel driver answers EINVAL: cxgb4 (T5 and later) refuses the RTR call, irdma and siw the "
    "RTS call. NCCL prints 'NCCL WARN Call to ibv_modify_qp failed with 22 Invalid argument, on dev cxgb4_0:1, "
    "curr state INIT, next state RTR ...' followed by a hint about NCCL_IB_GID_INDEX that does not apply to "
    "iWARP, and the communicator fails with 'unhandled system error' (ncclSystemError): NCCL chose NET/IB at "
    "init and does not fall back to sockets then.",
    "Keep NET/IB off the iWARP ports. With other RDMA ports on the node, name only those:\n"
    "  env:\n  - name: NCCL_IB_HCA\n    value: \"=mlx5_0,mlx5_1\"\n"
    "(or exclude the RNIC: \"^=cxgb4_0\"). With iWARP only, train over TCP on purpose:\n"
    "  env:\n  - name: NCCL_IB_DISABLE\n    value: \"1\"\n  - name: NCCL_SOCKET_IFNAME\n    value: \"=<the RNIC's netdev>\"\n"
    "(the RNIC's netdev is a fast plain NIC for NCCL's sockets), or use a NCCL net plugin over libfabric "
    "(aws-ofi-nccl with FI_PROVIDER=verbs: libfabric's verbs;ofi_rxm connects through rdma_cm, which iWARP "
    "needs; not a path NCCL documents, so test it).",
    kind="problem",
)
NCCL_SOCKET_IFNAME_SLOW = Code(
    "NCCL_SOCKET_IFNAME_SLOW",
    "NCCL's socket interface is slower than the pool expects",
    "When NCCL moves its data over TCP (a socket pool, NCCL_IB_DISABLE, or no usable RDMA port), every byte "
    "between nodes goes through the interfaces NCCL_SOCKET_IFNAME selects, and NCCL spreads its traffic over "
    "all of them: one slow interface (a 1 Gb/s management NIC matched by a prefix, a pod's veth instead of the "
    "ENI) caps the job's bandwidth. The speed is what the kernel reports in /sys/class/net/<if>/speed, the value "
    "NCCL itself reads (net_socket.cc ncclNetSocketGetSpeed).",
    "Point NCCL_SOCKET_IFNAME at the fast interface, exactly:\n"
    "  env:\n  - name: NCCL_SOCKET_IFNAME\n    value: \"=eth0\"\n"
    "`ethtool <if>` shows its negotiated speed; a link that trained below its rating needs its cable or switch "
    "port checked. If the pool's interfaces are slower by design, lower socket_min_gbps in the config.",
    kind="problem",
)
NCCL_SOCKET_IFNAME_MTU_LOW = Code(
    "NCCL_SOCKET_IFNAME_MTU_LOW",
    "NCCL's socket interface MTU below the pool's",
    "NCCL's socket transport sends large messages as TCP streams: with a 1500-byte MTU on a network built for "
    "jumbo frames (socket_min_mtu, usually 9000), each message is cut into six times as many segments and the "
    "CPU cost per byte goes up, which shows at 25 Gb/s and beyond.",
    "`ip link set dev <if> mtu 9000` (persist it in netplan / NetworkManager, or the CNI config for a pod "
    "interface); every hop must allow it. If 1500 is the design, lower socket_min_mtu in the config.",
    kind="problem",
)
NCCL_SOCKET_IFNAME_UNSET = Code(
    "NCCL_SOCKET_IFNAME_UNSET",
    "NCCL picks its socket interfaces itself in a socket pool",
    "NCCL_SOCKET_IFNAME is not set in a pool that trains over TCP: NCCL then uses every interface whose name "
    "starts with 'ib', or else every interface that is up with an address except lo, docker* and virbr* "
    "(src/misc/socket.cc ncclFindInterfaces), and spreads its traffic over all of them: a management or "
    "storage NIC becomes part of the job's network.",
    "Name the fast interface, exactly:\n  env:\n  - name: NCCL_SOCKET_IFNAME\n    value: \"=eth0\"",
    kind="problem",
)
NCCL_SOCKET_SPEED_UNKNOWN = Code(
    "NCCL_SOCKET_SPEED_UNKNOWN",
    "Speed of NCCL's socket interface unknown",
    "Could not decide: the pool expects a minimum speed (socket_min_gbps), and the interface's "
    "/sys/class/net/<if>/speed could not be read or says -1 (virtio-net and many virtual NICs report no speed; "
    "NCCL then assumes 10 Gb/s).",
    "Check the speed by hand (`ethtool <if>`, the cloud's instance type). For virtual NICs that never report "
    "one, set socket_min_gbps = null for that pool and measure with a NCCL test (nccl-tests all_reduce_perf).",
    kind="unknown",
)
NCCL_SOCKET_SPEED_NOT_REPORTED = Code(
    "NCCL_SOCKET_SPEED_NOT_REPORTED",
    "NCCL's socket interface reports no speed (a virtual NIC)",
    "The interface's /sys/class/net/<if>/speed is -1: its driver reports no link speed, as virtio-net and the "
    "elastic NICs a cloud CNI gives pods (Terway ENI) do. NCCL then assumes 10 Gb/s (net_socket.cc "
    "ncclNetSocketGetSpeed) and the pool's socket_min_gbps cannot be compared here. The pool is still usable: "
    "such NICs are what socket-only pools are built on; only the bandwidth is unmeasured.",
    "Measure it between two nodes of the pool, on this interface:\n"
    "  iperf3 -s                                   # on one node\n"
    "  iperf3 -c <peer address> -P 8 -t 10         # on the other: the sum is the usable bandwidth\n"
    "or run nccl-tests across two nodes (`NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME==eth0 all_reduce_perf -b 1G -e 1G`, "
    "busbw); the cloud's instance type states the NIC's rated bandwidth. If the pool's NICs never report a speed, "
    "set socket_min_gbps = null for that pool to leave the speed to those measurements.",
    kind="problem",
)
NCCL_SOCKET_TRANSPORT = Code(
    "NCCL_SOCKET_TRANSPORT",
    "NCCL trains over TCP sockets",
    "Information: NCCL will move the data between nodes over TCP sockets on these interfaces, at this speed and "
    "MTU; in a socket pool (the tcp profile) that is the design, and this is its verdict.",
    "Nothing to fix.",
    kind="info",
)


# ---- NCCL's list syntax ----------------------------------------------------------------------


@record
class IfEntry:
    prefix: str
    port: int = -1  # -1: any port
    port_text: str | None = field(default=None, compare=False)  # after ':', as written

    def port_misread(self) -> str | None:
        """How NCCL's atoi reads a port written as a number it cannot hold, or None."""
        m = re.match(r"[ \t\n\v\f\r]*[+-]?(\d+)", self.port_text or "")
        if m is None:
            return None
        written = m.group(1).lstrip("0") or "0"
        if len(written) <= 9 or (len(written) == 10 and written <= "2147483647"):
            return None  # it fits in an int: atoi reads what is written
        port = f"'{clip(self.port_text or '')}'"
        if self.port == -1:
            return f"port {port} is out of range: NCCL reads it with atoi as -1, which means any port of {self.prefix}"
        return f"port {port} is out of range: NCCL reads it with atoi as {self.port} (the low 32 bits)"

    def text(self) -> str:
        return self.prefix if self.port == -1 else f"{self.prefix}:{self.port}"


@record
class IfList:
    value: str
    exclude: bool
    exact: bool
    entries: tuple[IfEntry, ...]


# Python's int() refuses more than 4300 digits (CVE-2020-10735); a C long has at most 19 decimal,
# 16 hex or 22 octal digits, so a longer run of significant digits overflows whatever it says.
_LONG_DIGITS = {10: 19, 16: 16, 8: 22}
LLONG_MIN, LLONG_MAX = -(2**63), 2**63 - 1


def _c_long(sign: str, digits: str, base: int) -> int | None:
    """The value of ``digits`` in ``base``, or None when it overflows a 64-bit long (ERANGE)."""
    significant = digits.lstrip("0") or "0"
    if len(significant) > _LONG_DIGITS[base]:
        return None
    v = int(significant, base)
    v = -v if sign == "-" else v
    return v if LLONG_MIN <= v <= LLONG_MAX else None


def c_atoi(text: str) -> int:
    """glibc's atoi: ``(int) strtol(text, NULL, 10)``. strtol saturates at LONG_MAX/LONG_MIN and
    the cast keeps the low 32 bits, so ``4294967297`` reads as 1 and a huge number as -1."""
    m = re.match(r"[ \t\n\v\f\r]*([+-]?)(\d+)", text)
    if m is None:
        return 0
    v = _c_long(m.group(1), m.group(2), 10)
    if v is None:
        v = LLONG_MIN if m.group(1) == "-" else LLONG_MAX
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def c_strtoll(text: str) -> int | None:
    """strtoll(text, NULL, 0): the longest numeric prefix, 0 when there is none; None on overflow."""
    s = text.lstrip(" \t\n\v\f\r")
    m = re.match(r"([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", s)
    if m is None:
        return 0
    digits = m.group(2)
    if digits[:2].lower() == "0x":
        return _c_long(m.group(1), digits[2:], 16)
    if digits.startswith("0"):
        return _c_long(m.group(1), digits, 8)
    return _c_long(m.group(1), digits, 10)  # None: ERANGE, NCCL keeps the default


def clip(text: str, limit: int = 40) -> str:
    """A value as written, cut for a message: the 4301 digits someone pasted are not repeated."""
    if len(text) <= limit:
        return text
    what = f"{len(text)} digits" if text.isdigit() else f"{len(text)} characters"
    return f"{text[:limit]}... ({what})"


def numeric_exact(text: str) -> bool:
    """strtoll would consume the whole value (so it means what it says)."""
    return re.fullmatch(r"[ \t\n\v\f\r]*[+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", text) is not None


def parse_if_list(value: str) -> IfList:
    """NCCL_IB_HCA / NCCL_SOCKET_IFNAME as NCCL reads them."""
    s = value
    exclude = s.startswith("^")
    if exclude:
        s = s[1:]
    exact = s.startswith("=")
    if exact:
        s = s[1:]
    entries = []
    for part in s.split(","):
        name, sep, port = part.partition(":")
        if not name:  # ",," and ":1" add nothing
            continue
        entries.append(IfEntry(name, c_atoi(port) if sep else -1, port if sep else None))
    return IfList(value, exclude, exact, tuple(entries))


def entry_matches(entry: IfEntry, exact: bool, name: str, port: int = -1) -> bool:
    name_ok = name == entry.prefix if exact else name.startswith(entry.prefix)
    port_ok = entry.port == -1 or port == -1 or entry.port == port
    return name_ok and port_ok


def list_matches(lst: IfList, name: str, port: int = -1) -> bool:
    """matchIfList(...) ^ searchNot: would NCCL take this device/port (or interface)?"""
    # NCCL: an empty list matches everything, so "^" alone excludes everything.
    hit = True if not lst.entries else any(entry_matches(e, lst.exact, name, port) for e in lst.entries)
    return hit != lst.exclude


# ---- facts -----------------------------------------------------------------------------------


@record
class HcaPort:
    device: str
    port: int
    state: str | None
    link_layer: str | None
    gids: tuple[Gid, ...] = ()
    gids_known: bool = False
    iwarp: bool = False  # an iWARP RNIC's port: NET/IB takes it for RoCE and cannot connect it

    @property
    def subject(self) -> str:
        return f"{self.device}/{self.port}"

    @property
    def active(self) -> bool:
        return self.state == "ACTIVE"  # NCCL skips every port that is not IBV_PORT_ACTIVE


@record
class NetIf:
    name: str
    up: bool | None  # running: admin up and operationally up (IFF_RUNNING)
    mtu: int | None = None
    addresses: tuple[str, ...] | None = None  # None: unknown (sysfs does not show addresses)
    speed_mbps: int | None = None  # /sys/class/net/<if>/speed; None: unreadable or -1 (no speed reported)
    # The file says -1 (or 0): the driver reports no speed (virtio-net, a cloud ENI), which is not
    # the same as a speed that could not be read.
    speed_not_reported: bool = False

    @property
    def usable(self) -> bool | None:
        """Would NCCL take it: running with an address (None: the addresses are unknown)."""
        if not self.up:
            return False if self.up is False else None
        return None if self.addresses is None else bool(self.addresses)

    def shown(self) -> str:
        speed = f"{self.speed_mbps / 1000:g} Gb/s" if self.speed_mbps else "speed unknown"
        addr = f", {', '.join(self.addresses)}" if self.addresses else ""
        mtu = f", MTU {self.mtu}" if self.mtu is not None else ""
        return f"{self.name} ({speed}{mtu}{addr})"

    def to_json(self) -> dict:
        return {"name": self.name, "up": self.up, "mtu": self.mtu, "addresses": list(self.addresses) if self.addresses is not None else None}

    @classmethod
    def from_json(cls, d: object) -> "NetIf | None":
        """One interface as `collect` records it in runtime.json; None when it is not one."""
        if not isinstance(d, dict) or not isinstance(d.get("name"), str) or not d["name"]:
            return None
        up, mtu, addrs = d.get("up"), d.get("mtu"), d.get("addresses")
        return cls(
            d["name"],
            up if isinstance(up, bool) else None,
            mtu if isinstance(mtu, int) and not isinstance(mtu, bool) and mtu > 0 else None,
            tuple(a for a in addrs if isinstance(a, str)) if isinstance(addrs, list) else None,
        )


@record
class NcclFacts:
    settings: dict[str, str]  # NCCL_* and MASTER_* as the job sees them
    origin: dict[str, str] = field(default_factory=dict)  # name -> "env" | "/etc/nccl.conf" | ...
    env_source: str = ""
    ports: tuple[HcaPort, ...] | None = None  # None: the RDMA devices are unknown
    interfaces: tuple[NetIf, ...] | None = None  # None: not read, or unknown
    interfaces_source: str = ""
    conf_problems: tuple[str, ...] = ()  # lines of nccl.conf that NCCL reads differently than meant


@record
class HcaEntryReport:
    entry: IfEntry
    devices: tuple[str, ...]  # existing devices the name matches
    ports: tuple[HcaPort, ...]  # their ports the entry matches (any state)
    others: tuple[str, ...] = ()  # devices matched only because the entry is a prefix of their name


@record
class HcaSelection:
    lst: IfList
    selected: tuple[HcaPort, ...]  # ACTIVE ports NCCL will use
    entries: tuple[HcaEntryReport, ...]


def select_hcas(value: str, ports: Sequence[HcaPort]) -> HcaSelection:
    lst = parse_if_list(value)
    selected = tuple(p for p in ports if p.active and list_matches(lst, p.device, p.port))
    devices = sorted({p.device for p in ports})
    reports = []
    for e in lst.entries:
        devs = tuple(d for d in devices if entry_matches(IfEntry(e.prefix), lst.exact, d))
        eports = tuple(p for p in ports if entry_matches(e, lst.exact, p.device, p.port))
        others = tuple(d for d in devs if d != e.prefix) if e.prefix in devs and not lst.exact else ()
        reports.append(HcaEntryReport(e, devs, eports, others))
    return HcaSelection(lst, selected, tuple(reports))


def select_interfaces(value: str, interfaces: Iterable[NetIf]) -> tuple[list[NetIf], list[NetIf]]:
    """(interfaces the list matches, of those the ones NCCL can use: running)."""
    lst = parse_if_list(value)
    matched = [i for i in interfaces if list_matches(lst, i.name)]
    return matched, [i for i in matched if i.up]


def master_addr_error(value: str) -> str | None:
    if not value.strip():
        return "is empty"
    if value != value.strip():
        return "has leading or trailing spaces"
    import ipaddress

    try:
        ipaddress.ip_address(value)
        return None
    except ValueError:
        pass
    host = value[:-1] if value.endswith(".") else value
    labels = host.split(".")
    if len(host) > 253 or not all(re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?", lb) for lb in labels):
        return "is neither an IP address nor a valid hostname"
    if all(lb.isdigit() for lb in labels):
        return "looks like an IPv4 address but is not a valid one"
    return None


# ---- probe -----------------------------------------------------------------------------------

_RELEVANT = ("NCCL_", "MASTER_ADDR", "MASTER_PORT")


def _relevant(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(_RELEVANT)}


def _job_env(host) -> tuple[dict[str, str] | None, str]:
    env = host.runtime.env
    if env is not None:
        return dict(env), ("process environment" if host.live_process else "runtime.json")
    res = host.cmd("env")
    if res.text is not None:
        from rdmadoctor.parsers.system import parse_env

        parsed = parse_env(res.text)
        if parsed.ok:
            return dict(parsed.value), res.source or "cmd/env.txt"
    return None, "no runtime.json env and no cmd/env.txt"


def _env_known(ctx) -> str | None:
    env, why = _job_env(ctx.host)
    if env is None:
        return f"the job's environment is not known ({why}); record it with `rdmadoctor collect` inside the pod"
    return None


HAS_ENV = Need("job environment", _env_known)


def _conf_file(host, path: str) -> tuple[dict[str, str], list[str]]:
    """NCCL's setEnvFile: KEY=VALUE lines, '#' comments, nothing trimmed. (settings, problems)"""
    text = host.read_text(path, 1 << 20)
    out: dict[str, str] = {}
    problems: list[str] = []
    if not text:
        return out, problems
    for line in text.split("\n"):
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        if key.strip().startswith(_RELEVANT) and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            problems.append(f"{path}: {line.strip()!r} sets a variable named {key!r}, which NCCL never reads (no spaces around '=')")
            continue
        out.setdefault(key[:1023], value[:1023])
    return out, problems


def _psutil_interfaces() -> tuple[NetIf, ...]:
    """This process's network namespace through psutil (a dependency already): the names from
    /proc/net/dev, flags and MTU by ioctl, the addresses from getifaddrs. pyroute2 takes several
    times longer only to import (bench/interfaces.py: a cold `check --profile tcp` 3.3x faster)."""
    import socket

    import psutil

    stats = psutil.net_if_stats()
    by_name: dict[str, list[str]] = {}
    for name, addrs in psutil.net_if_addrs().items():
        if name not in stats and ":" in name and name.split(":")[0] in stats:
            name = name.split(":")[0]  # getifaddrs names an IPv4 address by its label: eth0:1 is eth0's
        got = by_name.setdefault(name, [])
        # IPv4 first, as a netlink dump lists them; a link-local IPv6 address without its %scope.
        for family in (socket.AF_INET, socket.AF_INET6):
            for a in addrs:
                addr = a.address.split("%")[0] if a.family == family and a.address else ""
                if addr and addr != "::1":  # NCCL skips the IPv6 loopback
                    got.append(addr)
    out = []
    for name, st in stats.items():
        flags = set(st.flags.split(",")) if getattr(st, "flags", None) else None  # psutil >= 5.9.3
        up = ("up" in flags and "running" in flags) if flags is not None else bool(st.isup)
        out.append((_ifindex(name), NetIf(name, up, st.mtu or None, tuple(by_name.get(name, ())))))
    # In ifindex order, as netlink lists the links and NCCL's findInterfaces walks getifaddrs.
    return tuple(i for _, i in sorted(out, key=lambda t: t[0]))


def _ifindex(name: str) -> int:
    import socket

    try:
        return socket.if_nametoindex(name)
    except OSError:  # gone since /proc/net/dev was read
        return 1 << 30


def _live_interfaces() -> tuple[tuple[NetIf, ...], str]:
    """psutil where it answers, netlink (pyroute2) where it does not (no /proc/net/dev in this
    sandbox, psutil failing): the interfaces and which of the two read them."""
    try:
        got = _psutil_interfaces()
        if got:
            return got, "psutil"
        why = "psutil found no interface"
    except Exception as e:  # noqa: BLE001 - psutil's readers raise OSError, or worse on odd kernels
        why = f"psutil failed ({type(e).__name__}: {e})"
    try:
        return _netlink_interfaces(), "netlink"
    except Exception as e:  # noqa: BLE001
        raise OSError(f"{why}; netlink: {type(e).__name__}: {e}") from e


def _netlink_interfaces() -> tuple[NetIf, ...]:
    from pyroute2 import IPRoute  # ~80 ms: only where psutil cannot read the interfaces

    with IPRoute() as ipr:
        links = list(ipr.get_links())
        addrs = list(ipr.get_addr())
    by_index: dict[int, list[str]] = {}
    for a in addrs:
        addr = a.get_attr("IFA_ADDRESS") or a.get_attr("IFA_LOCAL")
        if addr and addr != "::1":  # NCCL skips the IPv6 loopback
            by_index.setdefault(a["index"], []).append(addr)
    out = []
    for link in links:
        name = link.get_attr("IFLA_IFNAME")
        if not name:
            continue
        flags = link["flags"]
        out.append(
            NetIf(
                name,
                bool(flags & IFF_UP and flags & IFF_RUNNING),
                link.get_attr("IFLA_MTU"),
                tuple(by_index.get(link["index"], ())),
            )
        )
    return tuple(out)


def _sysfs_interfaces(host) -> tuple[NetIf, ...] | None:
    names = host.listdir(NET_CLASS)
    if not names:
        return None
    out = []
    for name in names:
        oper = host.read_value(f"{NET_CLASS}/{name}/operstate")
        flags = parse_int(host.read_value(f"{NET_CLASS}/{name}/flags"), 16)
        if oper is None:
            up = None
        else:
            # IFF_RUNNING is netif_oper_up(): operstate up, or unknown for drivers that do not track it (lo, dummy).
            up = oper in ("up", "unknown") and (flags is None or bool(flags & IFF_UP))
        out.append(NetIf(name, up, parse_int(host.read_value(f"{NET_CLASS}/{name}/mtu"), 10), None))
    return tuple(out)


def _speed(host, name: str) -> int | None:
    return netdev_speed_mbps(host, name)


def _with_speeds(host, interfaces: tuple[NetIf, ...] | None) -> tuple[NetIf, ...] | None:
    if interfaces is None:
        return None
    from rdmadoctor.core.record import replace

    return tuple(
        replace(i, speed_mbps=_speed(host, i.name), speed_not_reported=_speed_not_reported(host, i.name)) for i in interfaces
    )


def _speed_not_reported(host, name: str) -> bool:
    """/sys/class/net/<if>/speed reads -1 or 0 (SPEED_UNKNOWN: the driver has no speed to give)."""
    v = parse_int(host.read_value(f"{NET_CLASS}/{name}/speed"), 10)
    return v is not None and v <= 0


def _recorded_interfaces(host) -> tuple[NetIf, ...] | None:
    """The netlink view `collect` kept in runtime.json (names, state, MTU, addresses)."""
    raw = getattr(host.runtime, "interfaces", None)
    if not isinstance(raw, list):
        return None
    got = [NetIf.from_json(d) for d in raw]
    return tuple(i for i in got if i is not None)


def _interfaces(host) -> tuple[tuple[NetIf, ...] | None, str]:
    """The network interfaces of the job's namespace, with their speeds, and where they came from.

    A live host asks the kernel for this process's namespace (psutil, else netlink: addresses are
    not in sysfs) and keeps what it read in the Host's runtime facts, so `collect` records it in
    runtime.json; a bundle reads that record back. Speeds always come from sysfs, where NCCL reads
    them (and where a bundle keeps them)."""
    tree = _sysfs_interfaces(host)
    if not host.live_process:
        recorded = _recorded_interfaces(host)
        if recorded is not None:
            return _with_speeds(host, recorded), "recorded by collect"
        return _with_speeds(host, tree), ("sysfs" if tree is not None else f"no {NET_CLASS} in {host.label}")
    try:
        live, reader = _live_interfaces()
    except OSError as e:  # neither psutil nor netlink answered: fall back to the tree
        why = f"interfaces unreadable ({e})"
        return _with_speeds(host, tree), (f"sysfs; {why}" if tree is not None else why)
    if host.kind == "root" and tree is not None and {i.name for i in tree} != {i.name for i in live}:
        # An agent without hostNetwork sees its pod's namespace over netlink; the mounted root's /sys is the host's.
        return _with_speeds(host, tree), f"sysfs of {host.label} (this process's network namespace differs from the host's)"
    try:
        host.runtime.interfaces = [i.to_json() for i in live]  # what `collect` writes to runtime.json
    except AttributeError:
        pass  # a Runtime without the field (an older host module): the bundle then has sysfs only
    return _with_speeds(host, live), reader


def probe_nccl(ctx) -> NcclFacts:
    host = ctx.host
    env, source = _job_env(host)
    env = env or {}
    settings = _relevant(env)
    origin = {k: "env" for k in settings}
    # NCCL fills unset variables from NCCL_CONF_FILE (or ~/.nccl.conf), then /etc/nccl.conf.
    if env.get("NCCL_CONF_FILE"):
        confs = [env["NCCL_CONF_FILE"]]
    elif env.get("HOME", "").startswith("/"):
        confs = [env["HOME"].rstrip("/") + "/.nccl.conf"]  # the job user's; `collect` keeps HOME
    else:
        confs = []
    problems: list[str] = []
    for path in confs + ["/etc/nccl.conf"]:
        conf, bad = _conf_file(host, path)
        problems.extend(bad)
        for k, v in _relevant(conf).items():
            if k not in settings:
                settings[k], origin[k] = v, path

    inv: RdmaInventory = ctx.get(probe_inventory)
    ports = None
    if inv.source != "none":
        ports = tuple(
            HcaPort(
                d.name,
                p.port,
                p.state,
                p.link_layer,
                p.gids,
                inv.source == "sysfs" or bool(p.gids),
                transport_of(d, p) == IWARP,
            )
            for d in inv.devices
            for p in d.ports
        )
    interfaces, if_source = None, ""
    ifname = settings.get("NCCL_SOCKET_IFNAME")
    # Read the interfaces only when a verdict needs them (a named socket
    # interface, or a pool that trains over sockets, where NCCL's own choice is judged).
    if (ifname is not None and len(ifname) > 1) or ctx.expect.get("rdma_required") is False:
        interfaces, if_source = _interfaces(host)
    return NcclFacts(settings, origin, source, ports, interfaces, if_source, tuple(problems))


# ---- judge -----------------------------------------------------------------------------------


def _yaml_env(name: str, value: str) -> str:
    return f'env:\n- name: {name}\n  value: "{value}"'


def _shown(facts: NcclFacts, name: str) -> str:
    where = facts.origin.get(name, "env")
    return f"{name}={clip(facts.settings[name], 80)}" + ("" if where == "env" else f" (from {where})")


def _entry_problem(r: HcaEntryReport) -> str | None:
    e = r.entry
    hint = " (NCCL does not trim spaces)" if e.prefix != e.prefix.strip() else ""
    odd = next((c for c in e.prefix if not (c.isascii() and c.isprintable())), None)
    if odd is not None:
        # A no-break space from a copied web page, a byte that is not UTF-8, a control character:
        # no device name holds one, and NCCL compares bytes.
        if odd == "\ufffd":
            what = "a byte that is not UTF-8"
        elif 0xDC80 <= ord(odd) <= 0xDCFF:  # os.environ's surrogateescape: the raw byte
            what = f"the byte 0x{ord(odd) - 0xDC00:02X}, not UTF-8"
        else:
            import unicodedata

            called = unicodedata.name(odd, "").lower()
            what = f"the character U+{ord(odd):04X}" + (f" ({called})" if called else "")
        hint = f" (it holds {what}; no device name has one: retype the value)"
    if not r.devices:
        return f"'{e.text()}' matches no device{hint}"
    if not r.ports:
        return f"'{e.text()}': {', '.join(r.devices)} has no port {e.port}"
    if not any(p.active for p in r.ports):
        states = ", ".join(f"{p.subject} {p.state or 'state unknown'}" for p in r.ports)
        return f"'{e.text()}' names no ACTIVE port ({states})"
    return None


def _misread_ports(facts: NcclFacts, value: str) -> list[Finding]:
    """A port NCCL's atoi cannot hold (``mlx5_0:99999999999``) is read as something else."""
    out = []
    for e in parse_if_list(value).entries:
        why = e.port_misread()
        if why:
            out.append(
                Finding(
                    NCCL_ENV_INVALID.code,
                    WARNING,
                    "NCCL_IB_HCA",
                    f"{_shown(facts, 'NCCL_IB_HCA')}: entry '{clip(e.prefix)}': {why}; expected a port number "
                    "(1 for the first port).",
                    f"Write the port as a small number, e.g. NCCL_IB_HCA={clip(e.prefix)}:1, or leave the port out "
                    "to use every ACTIVE port of the device.",
                )
            )
    return out


def _judge_hca(facts: NcclFacts, value: str, compute_hcas: object = None) -> list[Finding]:
    return _misread_ports(facts, value) + _judge_hca_selection(facts, value, compute_hcas)


def _judge_hca_selection(facts: NcclFacts, value: str, compute_hcas: object = None) -> list[Finding]:
    subj = "NCCL_IB_HCA"
    shown = _shown(facts, subj)
    if facts.ports is None:
        return [Finding(NCCL_IB_HCA_UNKNOWN.code, UNKNOWN, subj, f"{shown}: the RDMA devices are unknown, so what it selects is unknown.")]
    sel = select_hcas(value, facts.ports)
    active = [p for p in facts.ports if p.active]
    active_txt = ", ".join(p.subject for p in active) or "none"
    # iWARP devices are never suggested: NET/IB cannot connect them (IWARP_NCCL_IB).
    active_devs = sorted({p.device for p in active if not p.iwarp})
    note = "the ACTIVE devices of this node; keep only the compute HCAs"
    if isinstance(compute_hcas, (list, tuple)) and compute_hcas:
        # The profile says which HCAs are for NCCL (storage and management NICs are not).
        meant = [d for d in active_devs if any(d.startswith(str(c)) for c in compute_hcas)]
        if meant:
            active_devs, note = meant, "the ACTIVE compute HCAs of this node (compute_hcas in the config)"
    fix_value = "=" + ",".join(active_devs) if active_devs else ""
    remedy = (
        _yaml_env(subj, fix_value) + f"   # {note}"
        if fix_value
        else "This node has no ACTIVE RDMA port: fix the ports first (see ib.ports)."
    )
    pod = PodChange(env=((subj, fix_value, note),)) if fix_value else None
    out: list[Finding] = []
    problems = [] if sel.lst.exclude else [(r, _entry_problem(r)) for r in sel.entries]
    problems = [(r, why) for r, why in problems if why]
    missing = [why for r, why in problems if not r.devices]
    if not sel.selected:
        if sel.lst.exclude:
            why = "the exclusion leaves no ACTIVE port"
        elif not sel.entries:
            why = "it names no device"
        else:
            why = "; ".join(w for _, w in problems) or "no entry matches an ACTIVE port"
        out.append(
            Finding(
                NCCL_IB_HCA_NO_MATCH.code,
                ERROR,
                subj,
                f"{shown} selects no ACTIVE port: {why}. ACTIVE ports: {active_txt}. Expected at least one; "
                "NCCL will fall back to TCP sockets.",
                remedy,
                data={"active_ports": [p.subject for p in active]},
                pod=pod,
            )
        )
    else:
        if missing:
            out.append(
                Finding(
                    NCCL_IB_HCA_NO_MATCH.code,
                    ERROR,
                    subj,
                    f"{shown}: {'; '.join(missing)}. ACTIVE ports: {active_txt}. Expected every entry to name a "
                    "device of this node.",
                    remedy,
                    pod=pod,
                )
            )
        down = [why for r, why in problems if r.devices]
        if down:
            out.append(
                Finding(
                    NCCL_IB_HCA_NO_MATCH.code,
                    WARNING,
                    subj,
                    f"{shown}: {'; '.join(down)}: NCCL skips it and runs on "
                    f"{count(len(sel.selected), 'port')} ({', '.join(p.subject for p in sel.selected)}).",
                    "Bring the port up (see ib.ports), or drop it from NCCL_IB_HCA.",
                )
            )
    if sel.lst.exclude:
        for r in sel.entries:
            if not r.devices:
                out.append(Finding(NCCL_ENV_INFO.code, INFO, subj, f"{shown}: the exclusion '{r.entry.text()}' matches no device and excludes nothing."))
    for r in sel.entries:
        if r.others:
            verb = "excludes" if sel.lst.exclude else "selects"
            exact = ("^=" if sel.lst.exclude else "=") + ",".join(x.entry.text() for x in sel.entries)
            out.append(
                Finding(
                    NCCL_IB_HCA_PREFIX.code,
                    INFO,
                    subj,
                    f"{shown}: NCCL prefix-matches, so '{r.entry.text()}' also {verb} {', '.join(r.others)}.",
                    f"For exact names: NCCL_IB_HCA={exact}",
                )
            )
    if sel.selected:
        out.append(Finding(NCCL_ENV_INFO.code, INFO, subj, f"{shown}: NCCL will use {', '.join(p.subject for p in sel.selected)}."))
    return out


def _used_ports(facts: NcclFacts) -> list[HcaPort]:
    if facts.ports is None:
        return []
    value = facts.settings.get("NCCL_IB_HCA")
    if value:
        return list(select_hcas(value, facts.ports).selected)
    return [p for p in facts.ports if p.active]


def _net_not_ib(facts: NcclFacts) -> bool:
    """NCCL_NET names another network than IB (Socket, or a plugin such as aws-ofi-nccl's "AWS Libfabric")."""
    net = facts.settings.get("NCCL_NET")
    return bool(net) and net.lower() != "ib"


def _judge_disable(facts: NcclFacts, expect: dict | None = None) -> tuple[list[Finding], bool]:
    out: list[Finding] = []
    disabled_by = []
    raw = facts.settings.get("NCCL_IB_DISABLE")
    if raw:  # NCCL treats an empty value as unset
        v = c_strtoll(raw)
        if v:
            disabled_by.append(_shown(facts, "NCCL_IB_DISABLE"))
        if v is None:
            out.append(
                Finding(
                    NCCL_ENV_INVALID.code,
                    WARNING,
                    "NCCL_IB_DISABLE",
                    f"{_shown(facts, 'NCCL_IB_DISABLE')} is out of range for a 64-bit integer: NCCL ignores it and "
                    "keeps its default 0 (IB enabled); expected 0 or 1.",
                    "Write NCCL_IB_DISABLE=0 (or remove it) to use RDMA, 1 to turn it off.",
                )
            )
        elif not numeric_exact(raw):
            out.append(
                Finding(
                    NCCL_ENV_INVALID.code,
                    WARNING,
                    "NCCL_IB_DISABLE",
                    f"{_shown(facts, 'NCCL_IB_DISABLE')} is not a number; NCCL reads it as {v if v is not None else 'its default'}"
                    f"{' (IB disabled)' if v else ' (IB enabled)'}; expected 0 or 1.",
                    "Write NCCL_IB_DISABLE=0 (or remove it) to use RDMA.",
                )
            )
    net = facts.settings.get("NCCL_NET")
    if net and net.lower() == "socket":
        disabled_by.append(_shown(facts, "NCCL_NET"))
    if not disabled_by:
        return out, False
    active = [p for p in facts.ports or () if p.active and not p.iwarp]
    iwarp = [p for p in facts.ports or () if p.active and p.iwarp]
    what = " and ".join(disabled_by)
    if (expect or {}).get("rdma_required") is False:
        out.append(
            Finding(
                NCCL_ENV_INFO.code,
                INFO,
                disabled_by[0].split("=")[0],
                f"{what}: NCCL uses TCP sockets, as the profile expects (rdma_required = false)"
                + (f"; the ACTIVE RDMA {'port' if len(active) == 1 else 'ports'} {', '.join(p.subject for p in active)} {'stays' if len(active) == 1 else 'stay'} unused." if active else "."),
            )
        )
    elif active:
        out.append(
            Finding(
                NCCL_IB_DISABLED_BY_ENV.code,
                ERROR,
                disabled_by[0].split("=")[0],
                f"{what}: NCCL will use TCP sockets although {count(len(active), 'RDMA port')} {'is' if len(active) == 1 else 'are'} ACTIVE "
                f"({', '.join(p.subject for p in active)}); expected RDMA enabled.",
                "Remove NCCL_IB_DISABLE / NCCL_NET=Socket from the pod spec's env, the image's /etc/nccl.conf and "
                "the launch script.",
            )
        )
    elif iwarp:
        out.append(
            Finding(
                NCCL_ENV_INFO.code,
                INFO,
                disabled_by[0].split("=")[0],
                f"{what}: NCCL uses TCP sockets, which is right here: the ACTIVE RDMA {'port' if len(iwarp) == 1 else 'ports'} "
                f"{', '.join(p.subject for p in iwarp)} {'is' if len(iwarp) == 1 else 'are'} iWARP, which NCCL's IB transport cannot connect.",
            )
        )
    else:
        out.append(Finding(NCCL_ENV_INFO.code, INFO, disabled_by[0].split("=")[0], f"{what}: NCCL uses TCP sockets (no ACTIVE RDMA port here anyway)."))
    return out, True


def _judge_iwarp(facts: NcclFacts) -> list[Finding]:
    """NET/IB would take an iWARP port (init.cc keeps any ACTIVE InfiniBand or Ethernet port)."""
    taken = [p for p in _used_ports(facts) if p.iwarp]
    if not taken:
        return []
    names = ", ".join(p.subject for p in taken)
    hca = facts.settings.get("NCCL_IB_HCA")
    how = f"{_shown(facts, 'NCCL_IB_HCA')} selects" if hca else "NCCL_IB_HCA is unset, so NCCL's IB transport takes every ACTIVE port, including"
    others = sorted({p.device for p in facts.ports or () if p.active and not p.iwarp})
    if others:
        value = "=" + ",".join(others)
        remedy = _yaml_env("NCCL_IB_HCA", value) + "   # the ACTIVE InfiniBand / RoCE devices of this node, without the iWARP ones"
        pod = PodChange(env=(("NCCL_IB_HCA", value, "the ACTIVE InfiniBand / RoCE devices, without the iWARP RNIC"),))
    else:
        remedy = (
            'env:\n- name: NCCL_IB_DISABLE\n  value: "1"   # NCCL trains over TCP sockets on purpose; set NCCL_SOCKET_IFNAME to the '
            "RNIC's netdev to use its bandwidth. Or a libfabric net plugin (aws-ofi-nccl, FI_PROVIDER=verbs): `rdmadoctor explain IWARP_NCCL_IB`"
        )
        pod = PodChange(env=(("NCCL_IB_DISABLE", "1", "the node's only RDMA ports are iWARP, which NCCL's IB transport cannot connect"),), whole=False)
    return [
        Finding(
            IWARP_NCCL_IB.code,
            ERROR,
            "NCCL_IB_HCA",
            f"{how} {names}: iWARP, which NCCL lists as a RoCE device, and the job fails at its first inter-node "
            "connection ('Call to ibv_modify_qp failed with 22 Invalid argument', then 'unhandled system error'), "
            "because iWARP QPs are connected only through the iWARP connection manager. Expected NET/IB to use "
            "InfiniBand or RoCE ports only.",
            remedy,
            data={"iwarp_ports": [p.subject for p in taken], "other_devices": others},
            pod=pod,
        )
    ]


def _judge_gid_index(facts: NcclFacts) -> list[Finding]:
    subj = "NCCL_IB_GID_INDEX"
    raw = facts.settings.get(subj)
    if not raw:
        return []
    shown = _shown(facts, subj)
    idx = c_strtoll(raw)
    if idx is None:
        return [
            Finding(
                NCCL_ENV_INVALID.code,
                WARNING,
                subj,
                f"{shown} is out of range for a 64-bit integer: NCCL ignores it and keeps its default (NCCL 2.21+ "
                "picks the RoCE v2 GID of each port itself; older versions use GID 0, RoCE v1 or link-local); "
                "expected a GID index such as 3.",
                "Set the index of the RoCE v2 GID with the IPv4 address (`show_gids`), or remove NCCL_IB_GID_INDEX "
                "on NCCL 2.21+.",
            )
        ]
    if idx < 0:
        return [Finding(NCCL_ENV_INFO.code, INFO, subj, f"{shown}: NCCL picks the GID itself (NCCL 2.21+).")]
    roce = [p for p in _used_ports(facts) if p.link_layer == "Ethernet" and not p.iwarp]
    if facts.ports is None:
        return [Finding(NCCL_IB_GID_INDEX_UNKNOWN.code, UNKNOWN, subj, f"{shown}: the RDMA devices are unknown, so the GID cannot be checked.")]
    if not roce:
        return [Finding(NCCL_ENV_INFO.code, INFO, subj, f"{shown} has no effect here: NCCL uses no RoCE port on this node.")]
    read_as = "" if numeric_exact(raw) else f" (NCCL reads '{raw}' as {idx})"
    bad, unknown = [], []
    good_idx: set[int] = set()
    for p in roce:
        if not p.gids_known:
            unknown.append(p.subject)
            continue
        gid = next((g for g in p.gids if g.index == idx), None)
        v4 = [g.index for g in p.gids if g.type == ROCE_V2 and g.ipv4]
        good_idx.update(v4[:1])
        hint = f"; its RoCE v2 IPv4 GID is index {v4[0]}" if v4 else "; it has no RoCE v2 IPv4 GID"
        if gid is None:
            bad.append(f"{p.subject} has no GID {idx}{hint}")
        elif gid.type != ROCE_V2:
            bad.append(f"GID {idx} of {p.subject} is {gid.type or 'of unknown type'} ({gid.gid}){hint}")
        elif gid.gid.lower().startswith("fe80"):
            bad.append(f"GID {idx} of {p.subject} is link-local ({gid.gid}), not routable{hint}")
    out = []
    if bad:
        if len(good_idx) == 1:
            remedy = _yaml_env(subj, str(next(iter(good_idx))))
            pod = PodChange(env=((subj, str(next(iter(good_idx))), ""),))
        else:
            pod = None
            remedy = "Remove NCCL_IB_GID_INDEX (NCCL 2.21+ picks the RoCE v2 IPv4 GID of each port), or give every port's netdev an IPv4 address so the index is the same on all."
        out.append(
            Finding(
                NCCL_IB_GID_INDEX_BAD.code,
                ERROR,
                subj,
                f"{shown}{read_as}: {'; '.join(bad)}. Expected a RoCE v2 GID with an IPv4 address on every port NCCL uses.",
                remedy,
                pod=pod,
            )
        )
    if unknown:
        out.append(
            Finding(
                NCCL_IB_GID_INDEX_UNKNOWN.code,
                UNKNOWN,
                subj,
                f"{shown}: the GID tables of {', '.join(unknown)} were not recorded; whether GID {idx} is RoCE v2 is unknown.",
                "Record them: `show_gids > cmd/show_gids.txt`, or use `rdmadoctor collect`.",
            )
        )
    if not out:
        out.append(Finding(NCCL_ENV_INFO.code, INFO, subj, f"{shown}: RoCE v2 with IPv4 on {', '.join(p.subject for p in roce)}."))
    return out


def nccl_auto_interfaces(interfaces: Iterable[NetIf]) -> list[NetIf]:
    """What NCCL's socket transport takes with NCCL_SOCKET_IFNAME unset (src/misc/socket.cc
    ncclFindInterfaces): interfaces named ib*, else any but docker*, lo and virbr*, else docker*,
    else lo; each only when running with an address."""
    have = [i for i in interfaces if i.usable is not False]
    for pick in (lambda n: n.startswith("ib"), lambda n: not n.startswith(("docker", "lo", "virbr")), lambda n: n.startswith("docker"), lambda n: n.startswith("lo")):
        found = [i for i in have if pick(i.name)]
        if found:
            return found
    return []


def _judge_socket(facts: NcclFacts, expect: dict | None = None, sockets: bool = False) -> list[Finding]:
    """NCCL_SOCKET_IFNAME: up, with an address; when NCCL's data goes over sockets (``sockets``), also
    fast enough (socket_min_gbps) with the MTU the pool wants (socket_min_mtu)."""
    expect = expect or {}
    subj = "NCCL_SOCKET_IFNAME"
    value = facts.settings.get(subj)
    socket_pool = expect.get("rdma_required") is False
    if value is None or len(value) <= 1:
        out = []
        if value is not None:
            out.append(Finding(NCCL_ENV_INFO.code, INFO, subj, f"{_shown(facts, subj)} is ignored by NCCL (it needs more than 1 character); NCCL picks the interface itself."))
        if socket_pool and facts.interfaces is not None:
            out.extend(_judge_auto_interfaces(facts, expect))
        return out
    shown = _shown(facts, subj)
    if facts.interfaces is None:
        return [
            Finding(
                NCCL_SOCKET_IFNAME_UNKNOWN.code,
                UNKNOWN,
                subj,
                f"{shown}: the network interfaces are unknown ({facts.interfaces_source or 'not read'}).",
            )
        ]
    matched, running = select_interfaces(value, facts.interfaces)
    src = f" [{facts.interfaces_source}]" if facts.interfaces_source else ""
    if not running:
        undecided = [i for i in matched if i.up is None]
        up = [i for i in facts.interfaces if i.up]
        if undecided:
            return [
                Finding(
                    NCCL_SOCKET_IFNAME_UNKNOWN.code,
                    UNKNOWN,
                    subj,
                    f"{shown} matches {', '.join(i.name for i in undecided)}, whose state is unknown{src}.",
                )
            ]
        seen = (
            "matches only " + ", ".join(f"{i.name} (down)" for i in matched)
            if matched
            else "matches no interface"
        )
        candidates = [i.name for i in _fastest_first(up) if not i.name.startswith(("lo", "docker", "virbr"))]
        remedy = (
            _yaml_env(subj, "=" + candidates[0]) + f"   # an interface that is up here: {', '.join(candidates)}"
            if candidates
            else "No interface other than loopback is up here: check the pod's network (CNI, Multus) first."
        )
        pod = (
            PodChange(env=((subj, "=" + candidates[0], f"an interface that is up here: {', '.join(candidates)}"),))
            if candidates
            else None
        )
        return [
            Finding(
                NCCL_SOCKET_IFNAME_NO_MATCH.code,
                ERROR,
                subj,
                f"{shown} {seen}; expected at least one interface that is up. Up: "
                f"{', '.join(i.name for i in up) or 'none'}{src}.",
                remedy,
                pod=pod,
                data={"matched": [i.name for i in matched], "up": [i.name for i in up]},
            )
        ]
    if all(i.addresses is not None for i in running) and not any(i.addresses for i in running):
        return [
            Finding(
                NCCL_SOCKET_IFNAME_NO_ADDR.code,
                ERROR,
                subj,
                f"{shown} matches {', '.join(i.name for i in running)} (up) but none has an IP address; "
                "NCCL only uses interfaces with an IPv4/IPv6 address.",
                f"ip addr add <ip>/<prefix> dev {running[0].name}   # or fix the IPAM of the pod network",
            )
        ]
    usable = [i for i in running if i.addresses is None or i.addresses]
    if sockets or socket_pool:
        return _judge_socket_data(facts, expect, shown, usable, src)
    return [Finding(NCCL_ENV_INFO.code, INFO, subj, f"{shown}: NCCL will use {_addressed(usable)}{src}.")]


def _addressed(interfaces: Iterable[NetIf]) -> str:
    return ", ".join(i.name + (f" ({', '.join(i.addresses)})" if i.addresses else "") for i in interfaces)


def _speed_mtu(i: NetIf) -> str:
    speed = f"{i.speed_mbps / 1000:g} Gb/s" if i.speed_mbps else "speed unknown"
    return f"{i.name} at {speed}" + (f", MTU {i.mtu}" if i.mtu is not None else "")


def _fastest_first(interfaces: Iterable[NetIf]) -> list[NetIf]:
    return sorted(interfaces, key=lambda i: -(i.speed_mbps or 0))


def _judge_auto_interfaces(facts: NcclFacts, expect: dict) -> list[Finding]:
    """A socket pool without NCCL_SOCKET_IFNAME: judge what NCCL picks by itself."""
    subj = "NCCL_SOCKET_IFNAME"
    src = f" [{facts.interfaces_source}]" if facts.interfaces_source else ""
    picked = nccl_auto_interfaces(facts.interfaces or ())
    real = [i for i in picked if not i.name.startswith("lo")]
    if not real:
        return [
            Finding(
                NCCL_SOCKET_IFNAME_NO_MATCH.code,
                ERROR,
                subj,
                f"NCCL_SOCKET_IFNAME is unset and no interface but loopback is up with an address{src}: NCCL's sockets "
                "cannot reach another node; expected the pod network's interface.",
                "Check the pod's network (CNI, Multus): `ip -br addr` in the pod should list an interface with an address.",
            )
        ]
    if len(real) > 1:
        best = _fastest_first(real)[0]
        return [
            Finding(
                NCCL_SOCKET_IFNAME_UNSET.code,
                WARNING,
                subj,
                f"NCCL_SOCKET_IFNAME is unset in a socket pool: NCCL takes {', '.join(i.shown() for i in real)} and spreads "
                f"its traffic over all of them{src}; expected one named interface.",
                _yaml_env(subj, "=" + best.name) + "   # the fastest interface here",
                pod=PodChange(env=((subj, "=" + best.name, "the fastest interface here"),)),
                data={"interfaces": [i.name for i in real]},
            )
        ] + _judge_socket_data(facts, expect, "NCCL_SOCKET_IFNAME (unset)", real, src)
    return _judge_socket_data(facts, expect, "NCCL_SOCKET_IFNAME (unset)", real, src)


def _judge_socket_data(facts: NcclFacts, expect: dict, shown: str, used: list[NetIf], src: str) -> list[Finding]:
    """The interfaces NCCL's socket transport moves the job's data over: speed, MTU, the verdict."""
    subj = "NCCL_SOCKET_IFNAME"
    out: list[Finding] = []
    min_gbps = expect.get("socket_min_gbps")
    min_mtu = expect.get("socket_min_mtu")
    others = [i for i in _fastest_first(facts.interfaces or ()) if i.usable is not False and i not in used and not i.name.startswith(("lo", "docker", "virbr"))]
    if isinstance(min_gbps, (int, float)) and not isinstance(min_gbps, bool):
        slow = [i for i in used if i.speed_mbps is not None and i.speed_mbps < min_gbps * 1000]
        unknown = [i for i in used if i.speed_mbps is None]
        if slow:
            fast = [i for i in others if i.speed_mbps is not None and i.speed_mbps >= min_gbps * 1000]
            keep = [i for i in used if i not in slow and i not in unknown]
            target = (keep or fast)[:1]
            if target:
                remedy = _yaml_env(subj, "=" + target[0].name) + f"   # {target[0].shown()}"
                pod = PodChange(env=((subj, "=" + target[0].name, f"the interface at >= {min_gbps:g} Gb/s here"),))
            else:
                remedy = (
                    f"No interface here runs at {min_gbps:g} Gb/s: check the link (`ethtool {slow[0].name}`), the cable and "
                    "the switch port, or the instance type; if the pool is slower by design, lower socket_min_gbps."
                )
                pod = None
            out.append(
                Finding(
                    NCCL_SOCKET_IFNAME_SLOW.code,
                    ERROR,
                    subj,
                    f"{shown}: NCCL's sockets would carry the job's data over {', '.join(i.shown() for i in used)}"
                    + (", spread over all of them" if len(used) > 1 else "")
                    + ", and "
                    + ", ".join(f"{i.name} runs at {i.speed_mbps / 1000:g} Gb/s" for i in slow)
                    + f"; expected at least {min_gbps:g} Gb/s (socket_min_gbps) on every interface NCCL uses"
                    + (f". Faster here: {', '.join(i.shown() for i in fast)}" if fast else "")
                    + f"{src}.",
                    remedy,
                    pod=pod,
                    data={"slow": {i.name: i.speed_mbps for i in slow}, "min_gbps": min_gbps},
                )
            )
        silent = [i for i in unknown if i.speed_not_reported]
        unknown = [i for i in unknown if not i.speed_not_reported]
        if silent:
            names = ", ".join(i.name for i in silent)
            out.append(
                Finding(
                    NCCL_SOCKET_SPEED_NOT_REPORTED.code,
                    WARNING,
                    subj,
                    f"{shown}: {names} reports no speed (/sys/class/net/{silent[0].name}/speed is -1: a virtual NIC such as "
                    f"virtio-net or a cloud ENI; NCCL assumes 10 Gb/s), so the pool's {min_gbps:g} Gb/s (socket_min_gbps) "
                    f"cannot be checked here; expected a speed to compare, or a measurement{src}.",
                    NCCL_SOCKET_SPEED_NOT_REPORTED.fix.replace("eth0", silent[0].name),
                    data={"not_reported": [i.name for i in silent], "min_gbps": min_gbps},
                )
            )
        if unknown:
            out.append(
                Finding(
                    NCCL_SOCKET_SPEED_UNKNOWN.code,
                    UNKNOWN,
                    subj,
                    f"{shown}: the speed of {', '.join(i.name for i in unknown)} is unknown (/sys/class/net/<if>/speed "
                    f"unreadable or -1; NCCL assumes 10 Gb/s); the pool expects at least {min_gbps:g} Gb/s{src}.",
                    NCCL_SOCKET_SPEED_UNKNOWN.fix,
                )
            )
    if isinstance(min_mtu, int) and not isinstance(min_mtu, bool):
        low = [i for i in used if i.mtu is not None and i.mtu < min_mtu]
        if low:
            out.append(
                Finding(
                    NCCL_SOCKET_IFNAME_MTU_LOW.code,
                    WARNING,
                    subj,
                    f"{shown}: MTU " + ", ".join(f"{i.mtu} on {i.name}" for i in low) + f"; expected at least {min_mtu} "
                    f"(socket_min_mtu){src}.",
                    f"ip link set dev {low[0].name} mtu {min_mtu}   # persist it (netplan, NetworkManager or the CNI "
                    "config); every hop must allow it",
                    data={"mtu": {i.name: i.mtu for i in low}, "min_mtu": min_mtu},
                )
            )
    # A NIC that reports no speed leaves the pool ready (it is what socket pools are built on):
    # the verdict stands beside the warning that asks for a measurement.
    if not any(f.severity in (ERROR, WARNING, UNKNOWN) and f.code != NCCL_SOCKET_SPEED_NOT_REPORTED.code for f in out):
        verdict = "ready to train over sockets on " + ", ".join(
            i.name + (f" at {i.speed_mbps / 1000:g} Gb/s" if i.speed_mbps else " (speed not reported)" if i.speed_not_reported else "")
            for i in used
        )
        out.append(
            Finding(
                NCCL_SOCKET_TRANSPORT.code,
                INFO,
                subj,
                f"{shown}: NCCL will use {_addressed(used)}{src}, and the data between nodes goes over TCP there ("
                + ", ".join(_speed_mtu(i) for i in used)
                + f"): {verdict}.",
                data={"verdict": verdict, "interfaces": [{**i.to_json(), "speed_mbps": i.speed_mbps} for i in used]},
            )
        )
    return out


def _judge_master(facts: NcclFacts) -> list[Finding]:
    out = []
    addr = facts.settings.get("MASTER_ADDR")
    if addr is not None:
        why = master_addr_error(addr)
        if why:
            out.append(
                Finding(
                    NCCL_MASTER_ADDR_BAD.code,
                    ERROR,
                    "MASTER_ADDR",
                    f"MASTER_ADDR={addr!r} {why}; expected the hostname or IP of rank 0.",
                    NCCL_MASTER_ADDR_BAD.fix,
                )
            )
    port = facts.settings.get("MASTER_PORT")
    if port is not None and not (re.fullmatch(r"[0-9]{1,5}", port) and 1 <= int(port) <= 65535):
        out.append(
            Finding(
                NCCL_MASTER_ADDR_BAD.code,
                ERROR,
                "MASTER_PORT",
                f"MASTER_PORT={port!r} is not a port number; expected 1-65535.",
                NCCL_MASTER_ADDR_BAD.fix,
            )
        )
    return out


def _sockets_carry_data(facts: NcclFacts, ib_off: bool) -> bool:
    """Will NCCL move the job's data over TCP: IB off, or no ACTIVE port NET/IB can use."""
    if ib_off:
        return True
    if facts.ports is None:
        return False  # unknown: no speed verdict on a guess
    return not any(p.active and not p.iwarp for p in facts.ports)


def judge_nccl(facts: NcclFacts, expect: dict) -> list[Finding]:
    out: list[Finding] = []
    for why in facts.conf_problems:
        out.append(Finding(NCCL_ENV_INVALID.code, WARNING, "nccl.conf", why, "Write KEY=VALUE with nothing around '='."))
    nccl = {k: v for k, v in facts.settings.items() if k.startswith("NCCL_")}
    if not nccl:
        active = [p.subject for p in facts.ports or () if p.active]
        what = f" ({count(len(active), 'ACTIVE port')}: {', '.join(active)})" if active else ""
        out.append(Finding(NCCL_ENV_INFO.code, INFO, "env", f"no NCCL settings: NCCL picks all HCAs{what}."))
        out.extend(_judge_iwarp(facts))
        out.extend(_judge_socket(facts, expect, _sockets_carry_data(facts, False)))
    else:
        disable, ib_off = _judge_disable(facts, expect)
        out.extend(disable)
        hca = facts.settings.get("NCCL_IB_HCA")
        if hca and not ib_off:  # NCCL reads an empty value as unset
            out.extend(_judge_hca(facts, hca, expect.get("compute_hcas")))
        if not ib_off:
            if not _net_not_ib(facts):
                out.extend(_judge_iwarp(facts))
            out.extend(_judge_gid_index(facts))
        out.extend(_judge_socket(facts, expect, _sockets_carry_data(facts, ib_off)))
    out.extend(_judge_master(facts))
    return out


def _inventory_json(facts: NcclFacts) -> dict:
    return {"nccl_env": {k: v for k, v in facts.settings.items() if k.startswith("NCCL_")}}


# The expectations this module's checks read: declared once, here, with type, unit and range
# (engine.expectations builds its table from every check's defaults).
EXPECT: dict[str, Expect] = {
    "compute_hcas": Expect(
        None, "list", null_means="every HCA", example=["mlx5_0", "mlx5_1"],
        doc="Names (or prefixes) of the HCAs meant for NCCL; storage and management ones are left out.",
    ),
    "socket_min_gbps": Expect(
        None, "number", "Gb/s", above=0, max=10000, null_means="no minimum", example=25,
        doc="Lowest acceptable speed (/sys/class/net/<if>/speed) of the interfaces NCCL_SOCKET_IFNAME selects, "
        "judged when NCCL moves its data over TCP sockets.",
    ),
    "socket_min_mtu": Expect(
        None, "int", "bytes", min=68, max=65536, null_means="no MTU check", example=9000,
        doc="Lowest acceptable MTU of the interfaces NCCL_SOCKET_IFNAME selects, judged when NCCL moves its data "
        "over TCP sockets.",
    ),
}


# Where this module's checks stand in the report (engine.registry: built-ins are found by scanning checks/).
ORDER = 90

CHECKS = [
    Check(
        defaults=EXPECT,
        scope="pod",
        id="nccl.env",
        condition=CONFIG,
        gate=True,
        title="NCCL settings",
        probe=probe_nccl,
        judge=judge_nccl,
        codes=(
            NCCL_IB_HCA_NO_MATCH,
            NCCL_IB_HCA_UNKNOWN,
            NCCL_IB_HCA_PREFIX,
            NCCL_SOCKET_IFNAME_NO_MATCH,
            NCCL_SOCKET_IFNAME_NO_ADDR,
            NCCL_SOCKET_IFNAME_UNKNOWN,
            NCCL_IB_DISABLED_BY_ENV,
            NCCL_IB_GID_INDEX_BAD,
            NCCL_IB_GID_INDEX_UNKNOWN,
            NCCL_ENV_INVALID,
            NCCL_MASTER_ADDR_BAD,
            NCCL_ENV_INFO,
            IWARP_NCCL_IB,
            NCCL_SOCKET_IFNAME_SLOW,
            NCCL_SOCKET_IFNAME_MTU_LOW,
            NCCL_SOCKET_IFNAME_UNSET,
            NCCL_SOCKET_SPEED_UNKNOWN,
            NCCL_SOCKET_SPEED_NOT_REPORTED,
            NCCL_SOCKET_TRANSPORT,
        ),
        needs=(HAS_ENV,),
        inventory=_inventory_json,
        description="The job's NCCL_* settings (environment, NCCL_CONF_FILE, /etc/nccl.conf) against this node: "
        "NCCL_IB_HCA selects ACTIVE ports and no iWARP one, NCCL_SOCKET_IFNAME an interface that is up with an address "
        "(and, when NCCL's data goes over sockets, at socket_min_gbps and socket_min_mtu), NCCL_IB_GID_INDEX a RoCE v2 "
        "GID, no NCCL_IB_DISABLE while RDMA works (unless rdma_required = false), MASTER_ADDR/PORT well-formed.",
    ),
]
