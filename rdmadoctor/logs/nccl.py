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

# RCCL (ROCm) prints "RCCL version 2.18.3+hip6.0 ..." where NCCL prints "NCCL version 2.18.3+cuda12.2".
_VERSION = re.compile(r"[NR]CCL version ?:? (\d{1,9}\.\d{1,9}\.\d{1,9})[^\s+]*(?:\+cuda(\d{1,9}\.\d{1,9}))?")
_NETWORK = re.compile(r"Using (?:internal )?[Nn]etwork (\S(?:.*?\S)?)\s*$")  # 2.2-2.4: "Using internal Network Socket"
_NET_DEVS = re.compile(r"NET/(\w+) ?: Using (\[\d+\].*)")
# "[0]mlx5_0:1/IB"; NCCL_IB_MERGE_NICS (2.19+) lists a merged device's ports in braces:
# "[0]={[0] mlx5_2:1/RoCE, [1] mlx5_3:1/RoCE} [1]={...}".
_NET_DEV = re.compile(r"\[\d{1,4}\] ?([\w.-]{1,64}):(\d{1,3})/(\w{1,16})")
# GCP's FastSocket plugin lists its interfaces as NET/Socket does ("NET/FastSocket : Using [0]eth0:...").
_SOCK_DEVS = re.compile(r"NET/(?:Fast)?Socket ?: Using ((?:\[\d+\]\S+ ?)+)")
_SOCK_DEV = re.compile(r"\[\d+\]([\w.@-]+?):")
_PLUGIN = re.compile(
    r"(?:Loaded net plugin|Initialized NET plugin|Successfully loaded external plugin|Loaded collnet plugin) "
    r"(\S(?:.*?\S)?)(?: \(v\d{1,9}\))?\s*$"
)
# "Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so" (2.19-2.2x, before the plugin loads);
# "No plugin found (libnccl-net.so), using internal implementation", "Could not find: libnccl-net.so. Using
# internal network plugin." (the default name, absent: NCCL's own transports).
_PLUGIN_PATH = re.compile(r"Plugin Path : (\S{1,300}libnccl-net\S{0,40}\.so)")
_NO_PLUGIN = re.compile(r"No plugin found \(lib[nr]ccl-net\.so\)|Could not find: lib[nr]ccl-net\.so\. Using internal")
# 2.5+: "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA"; 2.7: "Channel 00 : ..."; 2.2-2.4: "Ring 00 : ..."
_CHANNEL_NET = re.compile(r"(?:Channel|Ring) \d{1,9}(?:/\d{1,9})? : .{0,512}? via NET/([^/\s]+(?: [^/\s]+)*)/\d+(\S*)")
_CHANNEL_RING = re.compile(r"Channel (\d{1,9})/(\d{1,9}) :\s+\d+(?:\s+\d+)*\s*$")
# NCCL's "host:pid:tid [dev] " prefix, searched anywhere (after kubectl's or mpirun's prefixes) or
# found from a newline; the patterns below add what follows it.
_HOST_PREFIX = rb"(?<![\w.-])([\w.-]{1,255}):\d{1,9}:\d{1,9} \[-?\w{1,16}\] "
_LINE_PREFIX = rb"\n([a-zA-Z0-9_.\-]{1,255}):[0-9]{1,9}:[0-9]{1,9} \[-?[a-zA-Z0-9_]{1,16}\] "
_CHANNEL_HOST_BYTES = re.compile(_HOST_PREFIX + rb"(?:NCCL )?INFO (?:Channel|Ring) ")
# The same at the start of a line, found from its newline (the engine jumps from one to the next in
# C): a log whose channel lines carry no other prefix is read this way; one with kubectl's or
# mpirun's prefixes needs the search above, which tries every position.
_CHANNEL_HOST_LINE = re.compile(_LINE_PREFIX + rb"(?:NCCL )?INFO (?:Channel|Ring) ")
_NCCL_HOST_BYTES = re.compile(_HOST_PREFIX + rb"NCCL INFO ")
# (_NCCL_HOST_LINE, _CHANNEL_HOST_LINE and _CHANNEL_RING_BYTES run over every line of a block: they
# spell \w and \d as the ASCII sets they are in a bytes pattern; what follows each repeat is not in
# its set, so a failed match gives back one character at a time and fails at once (no possessive
# `{1,9}+`: Python 3.10 has none); tests/unit/logs/test_fastpath.py compares them with the plain spelling.)
_NCCL_HOST_LINE = re.compile(_LINE_PREFIX + rb"NCCL INFO ")
# A ring listing ("Channel 00/24 :    0   1   2 ..."): its first rank is followed by a blank or the
# line's end, a connection line's by "[" ("Channel 00/0 : 0[0] -> 1[1] via P2P/IPC"). Only the first
# rank is read: the engine gives up on a connection line at its "[", and no listing is walked whole.
_CHANNEL_RING_BYTES = re.compile(rb"Channel [0-9]{1,4}/([0-9]{1,4}) :[ \t]+[0-9]{1,7}(?![0-9\[])")
_COLL_CHANNELS = re.compile(r"(\d{1,9}) coll channels")
_OLD_IFACE = re.compile(r"NET(?:/IB)? : Using interface ([\w.@-]{1,64})(?::|\s+for sideband)")
_NRANKS = re.compile(r"\bn[Rr]anks (\d{1,9})")  # "comm %p rank %d nRanks %d" (2.9+), "rank %d nranks %d" (2.2-2.8)
_RANK_OF = re.compile(r"rank (\d{1,7}) n[Rr]anks (\d{1,7})\b")  # as scan._BULK_RANKS reads it, after any letter
# "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d" (init.cc, 2.19+)
_NNODES = re.compile(r"\bnNodes (\d{1,7})\b")
_LOCAL_RANKS = re.compile(r"\bnRanks (\d{1,7}) nNodes \d{1,7} localRanks (\d{1,7})\b")
# The network of a channel line that is not a socket one: "via NET/IBext/1/GDRDMA" -> IBext,
# "via NET/AWS Libfabric/0" -> "AWS Libfabric".
_CHANNEL_NET_BYTES = re.compile(rb" via NET/(?!Socket/)([^/\s]{1,32}(?: [^/\s]{1,32}){0,3})/\d")
# aws-ofi-nccl: "NET/OFI Selected Provider is efa (found 16 nics)", 1.7+: "Selected provider is efa, fabric
# is efa-direct (found 4 nics)".
_OFI_PROVIDER = re.compile(r"NET/OFI Selected [Pp]rovider is ([\w;.-]{1,64}?),? (?:fabric is ([\w;.-]{1,64}) )?\(found (\d{1,4}) nics?\)")
# NCCL's topology (NCCL_DEBUG_SUBSYS=GRAPH, 2.7+): "+ NET[25.0] - NET/3 (3/0/25.000000)", a NIC and its
# bandwidth in GB/s as NCCL sees it (25.0: a 200 Gb/s port).
_TOPO_NET = re.compile(r"NET\[(\d{1,6}(?:\.\d{1,6})?)\] - NET/(\d{1,4})\b")
# nccl-tests lists its ranks: "#  Rank  0 Group  0 Pid  63755 on DisAI-4090-3 device  0 [0x1b] ..."
_TEST_RANK = re.compile(r"#\s{1,8}Rank\s{1,8}\d{1,6}\s{1,8}(?:Group\s{1,8}\d{1,6}\s{1,8})?Pid\s{1,8}\d{1,9}\s{1,8}on\s{1,8}([\w.-]{1,255})\s")
_GDR_ON = re.compile(r"GPU Direct RDMA Enabled|GPUDirect RDMA enabled|/GDRDMA")
_GDR_OFF = re.compile(r"GPU Direct RDMA Disabled")
# GCP's own net plugins, the designed transport of its GPU VMs (google/nccl-fastsocket,
# google/nccl-plugin-gpudirecttcpx, TCPXO's FasTrak): TCP by design, not a fall back to NCCL's sockets.
# They name themselves on their own lines ("NET/FastSocket : Using [0]ens8:...", "NET/FastSocket plugin
# initialized", "NET/GPUDirectTCPX ver. 3.1.6") even where NCCL's "Loaded net plugin" line is not pasted,
# and say "GPU Direct RDMA Disabled for HCA N 'ethN'" of each TCP NIC, which has no RDMA to disable.
_GCP_PLUGIN = re.compile(r"NET/(FastSocket|GPUDirectTCPX|FasTrak)\b")
GCP_PLUGINS = ("fastsocket", "gpudirecttcpx", "fastrak")

LINK_LAYER_WORDS = {"IB": "InfiniBand", "RoCE": "RoCE", "ETH": "Ethernet"}
SOCKET_NETWORKS = ("Socket",)


class NcclFacts:
    """Accumulates what NCCL printed, host by host, in constant memory (capped lists)."""

    MAX = 256

    def __init__(self) -> None:
        self.version: str | None = None
        self.cuda: str | None = None
        self.plugin: str | None = None
        self.listed_net: str | None = None  # the NET/<name> of the first device list ("NET/IB : Using [0]...")
        # Per host: the net plugin it loaded (its name or path), "" when it said it found none and uses
        # NCCL's own transports (the hosts of one job must agree).
        self.host_plugins: dict[str | None, str] = {}
        self.networks: dict[str | None, str] = {}  # host (None: unknown) -> "IB" | "Socket" | ...
        self.net_devices: list[dict] = []
        self.socket_ifaces: list[str] = []
        self.gdr_on = False
        self.gdr_off = False
        self.net_channels = 0  # NET channel lines seen
        self.net_channels_gdr = 0
        self.channel_net: str | None = None  # the network a (non-socket) NET channel line names
        self.socket_channel_hosts: set[str | None] = set()
        # NCCL <= 2.5 may print no "Using network" line: "NET/IB : No device found." then
        # "NET/Socket : Using [0]eth0" on one host says it runs on sockets.
        self.no_ib_hosts: set[str | None] = set()
        self.socket_iface_hosts: set[str | None] = set()
        self.coll_channels: int | None = None
        self.ring_channels: int | None = None
        self.nranks: int | None = None
        self.nnodes: int | None = None  # the largest nNodes printed (a world communicator spans the most)
        self.all_local = False  # a communicator line said localRanks == nRanks (every rank on its host)
        self.ranks_seen: set[int] = set()  # ranks that printed "rank R nranks N" (for one host with every rank)
        self.init_started = False  # NCCL printed its version or an init line: communicator creation began
        self.init_complete = False  # "Init COMPLETE": a communicator was made
        self.fabric: str | None = None  # the libfabric provider (and fabric) aws-ofi-nccl selected
        self.topo_nets: dict[tuple[str | None, str], float] = {}  # (host, NET id) -> GB/s, from NCCL's topology
        self.fabric_nics: int | None = None
        self.test_hosts: set[str] = set()  # the hosts nccl-tests says its ranks run on
        self.hosts: set[str] = set()
        self.seen = False  # any NCCL line at all
        self.connected = False  # channels connected / init complete: the transport is settled
        self._new_hosts: _NewHosts | None = None  # count_hosts' pattern for the hosts known so far

    def feed(self, text: str, host: str | None) -> None:
        """One line, its wrappers removed (``text``), printed by ``host``."""
        self.seen = True
        if host and len(self.hosts) < self.MAX:
            self.hosts.add(host)
        if not self.init_started and ("NCCL version" in text or "Init START" in text or "nRanks" in text
                                      or "nranks" in text or "Bootstrap" in text):
            self.init_started = True
        if self.version is None and "CCL version" in text:
            m = _VERSION.search(text)
            if m:
                self.version, self.cuda = m.group(1), m.group(2)
        if "Using network" in text or "Using internal Network" in text:
            m = _NETWORK.search(text)
            if m and len(self.networks) < self.MAX:
                self.networks[host] = m.group(1)
        gcp = None
        if "NET/F" in text or "NET/G" in text:
            g = _GCP_PLUGIN.search(text)
            if g is not None:
                gcp = g.group(1)
                if self.plugin is None:
                    self.plugin = gcp
        if ": Using [" in text or ":Using [" in text:
            m = _SOCK_DEVS.search(text)
            if m:
                # (FastSocket lists its interfaces as NET/Socket does: its own transport, not NCCL's sockets)
                if gcp is None and len(self.socket_iface_hosts) < self.MAX:
                    self.socket_iface_hosts.add(host)
                for name in _SOCK_DEV.findall(m.group(1)):
                    if name not in self.socket_ifaces and len(self.socket_ifaces) < self.MAX:
                        self.socket_ifaces.append(name)
            else:
                m = _NET_DEVS.search(text)
                if m:
                    if self.listed_net is None:
                        self.listed_net = m.group(1)
                    for name, port, ll in _NET_DEV.findall(m.group(2)):
                        dev = {"name": name, "port": int(port), "link_layer": LINK_LAYER_WORDS.get(ll, ll)}
                        if dev not in self.net_devices and len(self.net_devices) < self.MAX:
                            self.net_devices.append(dev)
        if "Using interface " in text and not self.socket_ifaces:
            m = _OLD_IFACE.search(text)  # NCCL <= 2.4 names its interface this way
            if m:
                self.socket_ifaces.append(m.group(1))
        if "coll channels" in text:
            m = _COLL_CHANNELS.search(text)
            if m:
                self.coll_channels = max(self.coll_channels or 0, int(m.group(1)))
        if "No device found" in text and "NET/IB" in text and len(self.no_ib_hosts) < self.MAX:
            self.no_ib_hosts.add(host)
        if "plugin" in text or "Plugin" in text:
            m = _PLUGIN.search(text)
            if m and self.plugin is None:
                self.plugin = m.group(1)
            if len(self.host_plugins) < self.MAX:
                p = _PLUGIN_PATH.search(text)
                if m or p:
                    self.host_plugins[host] = (m.group(1) if m else p.group(1))  # type: ignore[union-attr]
                elif _NO_PLUGIN.search(text) and host not in self.host_plugins:
                    self.host_plugins[host] = ""
        if "NET/OFI Selected" in text and self.fabric is None:
            m = _OFI_PROVIDER.search(text)
            if m:
                prov, fab = m.group(1), m.group(2)
                self.fabric = prov if not fab or fab == prov else f"{prov} ({fab})"
                self.fabric_nics = int(m.group(3))
        if "] - NET/" in text and len(self.topo_nets) < self.MAX:
            m = _TOPO_NET.search(text)
            if m:
                self.topo_nets[(host, m.group(2))] = float(m.group(1))
        if "via NET/" in text:
            # Counted in bulk per block (count_channels): one line per channel and peer, the bulk of
            # an NCCL_DEBUG=INFO log. Only the host of a socket channel is read here.
            m = _CHANNEL_NET.search(text)
            if m and "Socket" in m.group(1) and len(self.socket_channel_hosts) < self.MAX:
                self.socket_channel_hosts.add(host)
            elif m and self.channel_net is None:
                self.channel_net = m.group(1)
        if "anks " in text:
            m = _NRANKS.search(text)
            if m:
                self.nranks = max(self.nranks or 0, int(m.group(1)))
            m = _RANK_OF.search(text)
            if m and len(self.ranks_seen) < 4096:
                self.ranks_seen.add(int(m.group(1)))
            if "nNodes" in text:
                m = _NNODES.search(text)
                if m:
                    self.nnodes = max(self.nnodes or 0, int(m.group(1)))
                m = _LOCAL_RANKS.search(text)
                if m and m.group(1) == m.group(2):
                    self.all_local = True
        if ("GPU" in text or "GDRDMA" in text) and gcp is None:
            if _GDR_OFF.search(text):
                self.gdr_off = True
            elif _GDR_ON.search(text):
                self.gdr_on = True
        if "Init COMPLETE" in text or "Connected all rings" in text:
            self.connected = True
            self.init_started = self.init_complete = True

    def feed_test_line(self, text: str) -> None:
        """One of nccl-tests' "#" lines: the hosts its ranks run on."""
        if "Rank" in text and len(self.test_hosts) < self.MAX:
            m = _TEST_RANK.match(text.lstrip())
            if m:
                self.seen = True
                self.test_hosts.add(m.group(1))

    def net_bw_gbs(self) -> float | None:
        """What one node's NICs carry together (GB/s) as NCCL's topology shows them: the least of the
        hosts that printed one (the slowest node bounds a collective). None: no topology lines."""
        per_host: dict[str | None, float] = {}
        for (host, _), bw in self.topo_nets.items():
            per_host[host] = per_host.get(host, 0.0) + bw
        return min(per_host.values()) if per_host else None

    def count_channels(self, block: bytes, hosts: bool = True, shapes: bytes | None = None) -> None:
        """The channel lines of a block of whole lines, read in C: whether NET channels were seen and
        one had GPUDirect RDMA, the network they name, and the ring listings' channel count
        ("Channel 00/24 :    0   1 ..."). ``shapes``: the block's distinct lines without their
        digits (the scan's), asked instead of the block whether a word is there at all."""
        has = block if shapes is None else shapes
        # gdr() asks only whether there were NET channel lines and whether one said GDRDMA: once one
        # did (and a line named the network), no later block can change what they say.
        if (not self.net_channels_gdr or self.channel_net is None) and b" via NET/" in has:
            self.seen = True
            self.net_channels += 1  # blocks with NET channel lines (gdr() reads it as "any")
            if not self.net_channels_gdr and b"/GDRDMA" in has:
                self.net_channels_gdr += 1
            self.connected = True
            if self.channel_net is None:
                # The first few channel lines of the block, not a search over all of it: a log whose
                # channels are all on sockets would pay a regex over every block.
                j = block.find(b" via NET/")
                for _ in range(8):
                    if j < 0:
                        break
                    m = _CHANNEL_NET_BYTES.match(block, j)
                    if m is not None:
                        self.channel_net = m.group(1).decode("utf-8", "replace")
                        break
                    j = block.find(b" via NET/", j + 9)
        if b"Channel " in has or b"Ring " in has:
            # The ring listings' count stands only where NCCL printed no "N coll channels" (channels()):
            # once one did, the regex over every ring line (a sixth of a dense log's bytes) is not paid.
            rings = set(_CHANNEL_RING_BYTES.findall(block)) if b"Channel " in has and self.coll_channels is None else ()
            if rings:
                self.seen = True
                self.ring_channels = max(self.ring_channels or 0, *(int(x) for x in rings))
            # The hosts that print channel lines, which are most of what many ranks print (when
            # every NCCL line's host is counted, count_hosts, these are among them).
            if hosts and len(self.hosts) < self.MAX:
                # (a few channel lines among many others, NCCL_DEBUG_SUBSYS=ALL: each found from its
                # words, not every line of the block tried; the same lines and counts either way)
                few = _channel_line_hosts(block, len(block) // _FEW_CHANNELS)
                if few is not None:
                    found, want = few
                else:
                    want = block.count(b"INFO Channel ") + block.count(b"INFO Ring ")
                    found = _line_hosts(_CHANNEL_HOST_LINE, block)
                if len(found) < want:
                    found = _CHANNEL_HOST_BYTES.findall(block)
                self._add_hosts(found)

    def count_coll_channels(self, block: bytes) -> None:
        """NCCL's "24 coll channels, ..." (2.20+), once per rank and communicator, in small letters the scan
        does not stop at: read in C over a block of whole lines, the most any said (as ``feed`` does)."""
        # The nine bytes before each (the count is their digits at the end): every rank prints the
        # same few, each set of them is read once.
        find, j = block.find, block.find(b" coll channels")
        before = set()
        while j >= 0:
            before.add(block[max(j - 9, 0):j])
            j = find(b" coll channels", j + 14)
        for b in before:
            digits = b[len(b.rstrip(b"0123456789")):]
            if digits:
                self.seen = True
                self.coll_channels = max(self.coll_channels or 0, int(digits))

    def count_hosts(self, block: bytes, anywhere: bool = False, shapes: bytes | None = None) -> None:
        """The hosts of every NCCL INFO line of a block (for lines not read one by one).

        Lines that start with NCCL's prefix are searched with a pattern that passes over every line
        whose host is already known (_NewHosts): the search stops only where a new host prints, a
        few times in a whole log. ``anywhere``: NCCL's prefix may follow another (kubectl --prefix,
        mpirun --tag-output), so every NCCL INFO line's host is read wherever it stands."""
        if len(self.hosts) >= self.MAX or b"NCCL INFO " not in (block if shapes is None else shapes):
            return
        if anywhere:
            self._add_hosts(_NCCL_HOST_BYTES.findall(block))
            return
        if self._new_hosts is None or self._new_hosts.known != len(self.hosts):
            self._new_hosts = _NewHosts(self.hosts)
        rx = self._new_hosts.rx
        found = []
        first = block.find(b"\n")
        m = rx.match(b"\n" + (block[:first] if first >= 0 else block))
        if m is not None:
            found.append(m.group(1))
        m = rx.search(block)
        while m is not None and len(found) < 4 * self.MAX:
            # A host not known when the pattern was made; its later lines stop the search too, until
            # the pattern is made again with it (at most once per block).
            found.append(m.group(1))
            m = rx.search(block, m.end())
        if len(found) >= 4 * self.MAX:
            found = _NCCL_HOST_LINE.findall(block)
        self._add_hosts(found)

    def _add_hosts(self, found: list[bytes]) -> None:
        for h in set(found):
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
        if self.socket_iface_hosts and not (self.net_devices or self.plugin or self.channel_net) and not self._pre25():
            # NCCL lists its socket interfaces ("NET/Socket : Using [0]bond0:...") only when it
            # initialises its socket transport, which it does only when no plugin and no IB device
            # could be used (net.cc ncclNetInit): pasted alone, that line says NCCL runs on sockets.
            # NCCL <= 2.4 printed its bootstrap interface the same way, so not for those.
            return {h: "Socket" for h in self.socket_iface_hosts}
        return {}

    def _before(self, major_minor: tuple[int, int]) -> bool:
        """NCCL's version is known and older than ``major_minor``."""
        if not self.version:
            return False
        major, _, rest = self.version.partition(".")
        minor = rest.partition(".")[0]
        return major.isdigit() and minor.isdigit() and (int(major), int(minor)) < major_minor

    def _pre26(self) -> bool:
        return self._before((2, 6))

    def _pre25(self) -> bool:
        return self._before((2, 5))

    def network(self) -> str | None:
        nets = {**self._implied(), **self.networks}
        if not nets:
            if self.socket_channel_hosts:
                return "Socket"
            # NCCL 2.5 printed no "Using network": its device list names the transport it set up.
            if self.listed_net and self._pre26() and not self.no_ib_hosts and not self.socket_iface_hosts:
                return self.listed_net
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

    def nodes(self) -> int | None:
        """How many hosts the job's ranks are on: NCCL's nNodes or nccl-tests' rank list, else 1 when
        the log shows every rank on one host (localRanks == nRanks, or one host printing every rank),
        else None."""
        n = max(self.nnodes or 0, len(self.test_hosts))
        if n == 1 and not self.nnodes and len(self.hosts) > 1:
            n = 0  # a paste of part of nccl-tests' rank list, while NCCL lines come from more hosts
        if n:
            return n
        if self.all_local:
            return 1
        if (len(self.hosts) == 1 and self.nranks is not None
                and self.ranks_seen.issuperset(range(self.nranks))):
            return 1
        return None

    def single_host(self) -> bool:
        """Every rank on one host: NCCL's network transport carries nothing."""
        return self.nodes() == 1

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
            # A NET channel line names the network too ("via NET/IBext/1"): said in the report, but
            # not while the job runs (the line that says so comes with the device list after it).
            "network": self.network() or self.channel_net,
            "plugin": self.plugin,
            "net_devices": list(self.net_devices) or None,
            "socket_ifaces": list(self.socket_ifaces) or None,
            "gdr": self.gdr(),
            "channels": self.channels(),
            "ranks": self.nranks,
            "nodes": self.nodes(),
            "hosts": sorted(self.hosts) or None,
            # One host: nothing went over the network, on sockets or otherwise.
            "socket_hosts": [] if self.single_host() else self.socket_hosts(),
            "fabric": self.fabric,
            "fabric_nics": self.fabric_nics,
            "net_bw_gbs": self.net_bw_gbs(),
        }


class _NewHosts:
    """A line that starts with NCCL's prefix (host:pid:tid [dev] NCCL INFO) and a host not in
    ``hosts``: the known hosts as a negative lookahead right after the newline, shaped as a trie so a
    line tries one branch per character. The engine jumps from newline to newline in C, and a line of
    a known host fails at its first ":"."""

    def __init__(self, hosts: set[str]):
        from rdmadoctor.logs.rx import trie

        self.known = len(hosts)
        known = trie(sorted(h.encode("utf-8", "replace").decode("latin-1") for h in hosts)).encode("latin-1")
        guard = rb"(?!(?:" + known + rb"):)" if hosts else b""
        self.rx = re.compile(rb"\n" + guard + _LINE_PREFIX[2:] + rb"NCCL INFO ")


_FEW_CHANNELS = 512  # bytes of a block a channel line at most: fewer are found from their words (_channel_line_hosts)


def _channel_line_hosts(block: bytes, most: int) -> tuple[list[bytes], int] | None:
    """``_line_hosts(_CHANNEL_HOST_LINE, block)`` (the same hosts, as many) and how many times the
    block holds "INFO Channel " or "INFO Ring " (``bytes.count``'s sum), for a block with at most
    ``most`` lines that hold them (None past that: the pattern over every line is cheaper then). Each
    such line is found with bytes.find and matched at its start, once (a line without them cannot
    match; neither word holds a newline, so the block's count is the sum of its lines')."""
    found = []
    match, find, rfind, count = _CHANNEL_HOST_LINE.match, block.find, block.rfind, block.count
    done: set[int] = set()
    n = 0
    for word in (b"INFO Channel ", b"INFO Ring "):
        j = find(word)
        while j >= 0:
            le = find(b"\n", j)
            n += count(word, j, le if le >= 0 else len(block))
            ls = rfind(b"\n", 0, j)  # the newline before the line (-1: the block's first line)
            if ls not in done:
                if len(done) >= most:
                    return None
                done.add(ls)
                m = match(block, ls) if ls >= 0 else match(b"\n" + block[: block.find(b"\n")])
                if m:
                    found.append(m.group(1))
            j = find(word, le + 1) if le >= 0 else -1
    return found, n


def _line_hosts(rx: re.Pattern[bytes], block: bytes) -> list[bytes]:
    """The host of each line ``rx`` (which starts at a newline) matches, the block's first line too."""
    found = rx.findall(block)
    m = rx.match(b"\n" + block[: block.find(b"\n")])
    if m:
        found.append(m.group(1))
    return found


# libfabric providers that move data over TCP or UDP sockets, not RDMA (aws-ofi-nccl on them is TCP).
_SOCKET_PROVIDERS = frozenset({"tcp", "sockets", "udp"})


def tcp_fabric(fabric: str | None) -> bool:
    """aws-ofi-nccl's libfabric provider is a socket one ("tcp", "tcp;ofi_rxm", "sockets (tcp)")."""
    return bool(fabric) and re.split(r"[\s;(]", fabric.strip(), maxsplit=1)[0].lower() in _SOCKET_PROVIDERS  # type: ignore[union-attr]


def gcp_plugin(name: str | None) -> bool:
    """One of GCP's own net plugins (FastSocket, GPUDirectTCPX, FasTrak): TCP as the VM was built for."""
    return bool(name) and name.lower().startswith(GCP_PLUGINS)  # type: ignore[union-attr]


def is_socket(network: str | None, plugin: str | None) -> bool:
    """NCCL's socket transport, or a socket-based plugin that is not GCP's designed transport (FastSocket
    on a GCP VM is how those VMs are built to carry NCCL's traffic: information, not a fall back)."""
    for name in (network, plugin):
        if name and "socket" in name.lower() and not gcp_plugin(name):
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
    if nccl.get("nodes") == 1:
        # One host: every byte goes over NVLink, PCIe or shared memory; the network is unused.
        return f"{who} runs on one host: nothing crosses the network (NET/{net} would carry traffic between hosts)"
    if not is_socket(net, None) and (gcp_plugin(net) or gcp_plugin(nccl.get("plugin"))):
        ifaces = ", ".join(nccl.get("socket_ifaces") or []) or "the VM's NICs"
        name = net if gcp_plugin(net) else nccl["plugin"]
        return f"{who} uses GCP's {name} plugin over {ifaces}: TCP, the designed transport of these VMs"
    if is_socket(net, nccl.get("plugin")):
        ifaces = ", ".join(nccl.get("socket_ifaces") or []) or "an unnamed interface"
        return (f"WARNING: {who} uses NET/{net} over {ifaces}: inter-node traffic goes over TCP, not RDMA; "
                "expect a fraction of the fabric's bandwidth")
    if tcp_fabric(nccl.get("fabric")):
        return (f"WARNING: {who} uses NET/{net} on libfabric provider {nccl['fabric']}: inter-node traffic goes over "
                "TCP, not RDMA (EFA's provider is efa); expect a fraction of the fabric's bandwidth")
    devs = nccl.get("net_devices") or []
    on = f" on {_device_list(devs)}" if devs else ""
    if not devs and nccl.get("fabric"):
        nics = nccl.get("fabric_nics")
        on = f" on libfabric provider {nccl['fabric']}" + (f" ({nics} NICs)" if nics else "")
    layers = sorted({d["link_layer"] for d in devs if d.get("link_layer")})
    kind = f" ({', '.join(layers)})" if layers else ""
    gdr_text: dict[bool | None, str] = {True: " with GPUDirect RDMA", False: " without GPUDirect RDMA (staged through host memory)"}
    gdr = gdr_text.get(nccl.get("gdr"), "")
    return f"{who} uses NET/{net}{on}{kind}{gdr}"
