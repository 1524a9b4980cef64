"""What NCCL did, from its INFO lines: the report's ``nccl`` section.

Strings, from NVIDIA/nccl (2.5 .. 2.30): ``NCCL version %s+cuda%d.%d`` (init.cc), ``Using network
%s`` (net.cc / init.cc), ``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:<ip>``
(net_ib), ``NET/Socket : Using [0]eth0:<ip>`` (net_socket.cc), ``NET/Plugin: Loaded net plugin %s
(v%d)`` / ``Initialized NET plugin %s`` (2.27+), ``Channel %02d/%d : %d[%d] -> %d[%d] [send] via
NET/%s/%d[/GDRDMA]`` (transport/net.cc), ``%d coll channels, ...`` (2.20+), ``comm %p rank %d
nRanks %d`` / ``nranks %d``. A field the log does not show stays None: never guessed.
"""

from __future__ import annotations

import re

_VERSION = re.compile(r"NCCL version (\d{1,9}\.\d{1,9}\.\d{1,9})[^\s+]*(?:\+cuda(\d{1,9}\.\d{1,9}))?")
_NETWORK = re.compile(r"Using (?:internal )?[Nn]etwork (\S(?:.*?\S)?)\s*$")  # 2.2-2.4: "Using internal Network Socket"
_NET_DEVS = re.compile(r"NET/(\w+) ?: Using ((?:\[\d+\]\S+ ?)+)")
_NET_DEV = re.compile(r"\[\d+\]([\w.:-]+?):(\d+)/(\w+)")
_SOCK_DEVS = re.compile(r"NET/Socket ?: Using ((?:\[\d+\]\S+ ?)+)")
_SOCK_DEV = re.compile(r"\[\d+\]([\w.@-]+?):")
_PLUGIN = re.compile(
    r"(?:Loaded net plugin|Initialized NET plugin|Successfully loaded external plugin|Loaded collnet plugin) "
    r"(\S(?:.*?\S)?)(?: \(v\d{1,9}\))?\s*$"
)
# 2.5+: "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA"; 2.7: "Channel 00 : ..."; 2.2-2.4: "Ring 00 : ..."
_CHANNEL_NET = re.compile(r"(?:Channel|Ring) \d{1,9}(?:/\d{1,9})? : .{0,512}? via NET/([^/\s]+(?: [^/\s]+)*)/\d+(\S*)")
_CHANNEL_RING = re.compile(r"Channel (\d{1,9})/(\d{1,9}) :\s+\d+(?:\s+\d+)*+\s*$")
_CHANNEL_HOST_BYTES = re.compile(rb"(?<![\w.-])([\w.-]{1,255}+):\d{1,9}:\d{1,9} \[-?\w{1,16}\] (?:NCCL )?INFO (?:Channel|Ring) ")
_CHANNEL_RING_BYTES = re.compile(rb"Channel \d{1,4}/(\d{1,4}) :(?:[ \t]+\d{1,7})+[ \t]*\r?$", re.M)
_COLL_CHANNELS = re.compile(r"(\d{1,9}) coll channels")
_NRANKS = re.compile(r"\bn[Rr]anks (\d{1,9})")  # "comm %p rank %d nRanks %d" (2.9+), "rank %d nranks %d" (2.2-2.8)
_GDR_ON = re.compile(r"GPU Direct RDMA Enabled|GPUDirect RDMA enabled|/GDRDMA")
_GDR_OFF = re.compile(r"GPU Direct RDMA Disabled")

LINK_LAYER_WORDS = {"IB": "InfiniBand", "RoCE": "RoCE", "ETH": "Ethernet"}
SOCKET_NETWORKS = ("Socket",)


class NcclFacts:
    """Accumulates what NCCL printed, host by host, in constant memory (capped lists)."""

    MAX = 256

    def __init__(self) -> None:
        self.version: str | None = None
        self.cuda: str | None = None
        self.plugin: str | None = None
        self.networks: dict[str | None, str] = {}  # host (None: unknown) -> "IB" | "Socket" | ...
        self.net_devices: list[dict] = []
        self.socket_ifaces: list[str] = []
        self.gdr_on = False
        self.gdr_off = False
        self.net_channels = 0  # NET channel lines seen
        self.net_channels_gdr = 0
        self.socket_channel_hosts: set[str | None] = set()
        # NCCL <= 2.5 may print no "Using network" line: "NET/IB : No device found." then
        # "NET/Socket : Using [0]eth0" on one host says it runs on sockets.
        self.no_ib_hosts: set[str | None] = set()
        self.socket_iface_hosts: set[str | None] = set()
        self.coll_channels: int | None = None
        self.ring_channels: int | None = None
        self.nranks: int | None = None
        self.hosts: set[str] = set()
        self.seen = False  # any NCCL line at all
        self.connected = False  # channels connected / init complete: the transport is settled

    def feed(self, text: str, host: str | None) -> None:
        """One line, its wrappers removed (``text``), printed by ``host``."""
        self.seen = True
        if host and len(self.hosts) < self.MAX:
            self.hosts.add(host)
        if self.version is None and "NCCL version" in text:
            m = _VERSION.search(text)
            if m:
                self.version, self.cuda = m.group(1), m.group(2)
        if "Using network" in text or "Using internal Network" in text:
            m = _NETWORK.search(text)
            if m and len(self.networks) < self.MAX:
                self.networks[host] = m.group(1)
        if ": Using [" in text or ":Using [" in text:
            m = _SOCK_DEVS.search(text)
            if m:
                if len(self.socket_iface_hosts) < self.MAX:
                    self.socket_iface_hosts.add(host)
                for name in _SOCK_DEV.findall(m.group(1)):
                    if name not in self.socket_ifaces and len(self.socket_ifaces) < self.MAX:
                        self.socket_ifaces.append(name)
            else:
                m = _NET_DEVS.search(text)
                if m:
                    for name, port, ll in _NET_DEV.findall(m.group(2)):
                        dev = {"name": name, "port": int(port), "link_layer": LINK_LAYER_WORDS.get(ll, ll)}
                        if dev not in self.net_devices and len(self.net_devices) < self.MAX:
                            self.net_devices.append(dev)
        if "No device found" in text and "NET/IB" in text and len(self.no_ib_hosts) < self.MAX:
            self.no_ib_hosts.add(host)
        if "plugin" in text:
            m = _PLUGIN.search(text)
            if m and self.plugin is None:
                self.plugin = m.group(1)
        if "via NET/" in text:
            # Counted in bulk per block (count_channels): one line per channel and peer, the bulk of
            # an NCCL_DEBUG=INFO log. Only the host of a socket channel is read here.
            m = _CHANNEL_NET.search(text)
            if m and "Socket" in m.group(1) and len(self.socket_channel_hosts) < self.MAX:
                self.socket_channel_hosts.add(host)
        if "coll channels" in text:
            m = _COLL_CHANNELS.search(text)
            if m:
                self.coll_channels = int(m.group(1))
        if "anks " in text:
            m = _NRANKS.search(text)
            if m:
                self.nranks = max(self.nranks or 0, int(m.group(1)))
        if "GPU" in text or "GDRDMA" in text:
            if _GDR_OFF.search(text):
                self.gdr_off = True
            elif _GDR_ON.search(text):
                self.gdr_on = True
        if "Init COMPLETE" in text or "Connected all rings" in text:
            self.connected = True

    def count_channels(self, block: bytes) -> None:
        """The channel lines of a block of whole lines, counted in C: NET channels, those with
        GPUDirect RDMA, and the ring listings' channel count ("Channel 00/24 :    0   1 ...")."""
        n = block.count(b" via NET/")
        if n:
            self.seen = True
            self.net_channels += n
            self.net_channels_gdr += block.count(b"/GDRDMA")
            self.connected = True
        if b"Channel " in block or b"Ring " in block:
            for m in _CHANNEL_RING_BYTES.finditer(block):
                self.seen = True
                self.ring_channels = max(self.ring_channels or 0, int(m.group(1)))
            # The hosts that print channel lines, which are most of what many ranks print.
            if len(self.hosts) < self.MAX:
                for h in set(_CHANNEL_HOST_BYTES.findall(block)):
                    self.seen = True
                    if len(self.hosts) < self.MAX:
                        self.hosts.add(h.decode("utf-8", "replace"))

    # -- derived ------------------------------------------------------------------------
    def _implied(self) -> dict[str | None, str]:
        """Hosts that said no IB device and then listed socket interfaces, without a network line."""
        if self.networks:
            return {h: "Socket" for h in self.no_ib_hosts & self.socket_iface_hosts if h not in self.networks}
        if self.no_ib_hosts and self.socket_iface_hosts:  # interleaved ranks: any host said both halves
            return {h: "Socket" for h in self.no_ib_hosts | self.socket_iface_hosts}
        return {}

    def network(self) -> str | None:
        nets = {**self._implied(), **self.networks}
        if not nets:
            if self.socket_channel_hosts:
                return "Socket"
            return None
        counts: dict[str, int] = {}
        for n in nets.values():
            counts[n] = counts.get(n, 0) + 1
        return max(counts, key=lambda n: (counts[n], n not in SOCKET_NETWORKS))

    def socket_hosts(self) -> list[str] | None:
        """Hosts whose NCCL used sockets between nodes; None when the log does not say per host."""
        nets = {**self._implied(), **self.networks}
        hosts = {h for h, n in nets.items() if is_socket(n, None)} | self.socket_channel_hosts
        if None in hosts:
            hosts.discard(None)
            if not hosts and not self.hosts:
                return None
        if not self.hosts and not hosts:
            return None
        return sorted(h for h in hosts if h)

    def gdr(self) -> bool | None:
        if self.gdr_on or self.net_channels_gdr:
            return True
        if self.gdr_off or self.net_channels:
            return False
        return None

    def channels(self) -> int | None:
        return self.coll_channels if self.coll_channels is not None else self.ring_channels

    def to_json(self) -> dict | None:
        if not self.seen:
            return None
        return {
            "version": self.version,
            "cuda": self.cuda,
            "network": self.network(),
            "plugin": self.plugin,
            "net_devices": list(self.net_devices) or None,
            "socket_ifaces": list(self.socket_ifaces) or None,
            "gdr": self.gdr(),
            "channels": self.channels(),
            "ranks": self.nranks,
            "hosts": sorted(self.hosts) or None,
            "socket_hosts": self.socket_hosts(),
        }


def is_socket(network: str | None, plugin: str | None) -> bool:
    """NCCL's socket transport, or a socket-based plugin (FastSocket)."""
    for name in (network, plugin):
        if name and "socket" in name.lower():
            return True
    return False


def _device_list(devs: list[dict]) -> str:
    names = [d["name"] for d in devs]
    m = [re.match(r"^(.*?)(\d+)$", n) for n in names]
    if len(names) > 2 and all(m):
        stems = {x.group(1) for x in m if x}
        nums = [int(x.group(2)) for x in m if x]
        if len(stems) == 1 and nums == list(range(nums[0], nums[0] + len(nums))):
            return f"{names[0]}..{names[-1]}"
    return ", ".join(names)


def transport_line(nccl: dict | None) -> str | None:
    """One sentence: which transport NCCL uses, on what, with or without GPUDirect RDMA."""
    if not nccl or not nccl.get("network"):
        return None
    who = f"NCCL {nccl['version']}" if nccl.get("version") else "NCCL"
    net = nccl["network"]
    if is_socket(net, nccl.get("plugin")):
        ifaces = ", ".join(nccl.get("socket_ifaces") or []) or "an unnamed interface"
        return (f"WARNING: {who} uses NET/{net} over {ifaces}: inter-node traffic goes over TCP, not RDMA; "
                "expect a fraction of the fabric's bandwidth")
    devs = nccl.get("net_devices") or []
    on = f" on {_device_list(devs)}" if devs else ""
    layers = sorted({d["link_layer"] for d in devs if d.get("link_layer")})
    kind = f" ({', '.join(layers)})" if layers else ""
    gdr = {True: " with GPUDirect RDMA", False: " without GPUDirect RDMA (staged through host memory)"}.get(nccl.get("gdr"), "")
    return f"{who} uses NET/{net}{on}{kind}{gdr}"
