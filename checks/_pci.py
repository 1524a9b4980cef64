"""Shared probe: the PCI tree from sysfs, and the `nvidia-smi topo -m` relation of two functions.

Every function under ``/sys/bus/pci/devices`` is listed with its class and vendor only; the rest
(NUMA node, driver, link speed and width, the chain of bridges up to the host bridge) is read
for the GPUs, the RDMA PFs and the bridges above them. A node with 512 SR-IOV VFs has thousands
of sysfs files we have no use for, and `check` runs every minute.

The path of a function is its realpath below ``/sys/devices``:
``/sys/devices/pci0000:17/0000:17:00.0/0000:18:00.0/0000:19:04.0/0000:1a:00.0`` is host bridge
``pci0000:17``, root port ``17:00.0``, switch upstream port ``18:00.0``, switch downstream port
``19:04.0``, device ``1a:00.0``.
"""

from __future__ import annotations

import posixpath
import re
from functools import cached_property

from rdmadoctor.core.labels import RELATIONS
from rdmadoctor.core.record import field, record, replace

PCI_DEVICES = "/sys/bus/pci/devices"
NODE_DIR = "/sys/devices/system/node"

NVIDIA, AMD, MELLANOX = 0x10DE, 0x1002, 0x15B3
VENDOR_NAMES = {NVIDIA: "NVIDIA", AMD: "AMD"}

# Domains are 4 hex digits, or up to 8 on hosts with 32-bit domains (VMD, some VMs).
_BDF = r"^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$"
_HOST_BRIDGE = r"^pci[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}$"
_SPEED = r"^\s*(\d{1,3}(?:\.\d{1,3})?)\s*GT/s"

# Nearest first, as `nvidia-smi topo -m` and NCCL rank them.
RELATION_ORDER = RELATIONS


def relation_rank(rel: str | None) -> int | None:
    return RELATION_ORDER.index(rel) if rel in RELATION_ORDER else None


def is_bdf(text: str) -> bool:
    return re.match(_BDF, text) is not None


def bdf_key(bdf: str) -> tuple[int, ...]:
    """Sort key in PCI bus order (the order nvidia-smi numbers GPUs in)."""
    m = re.match(_BDF, bdf)
    if m is None:
        return (1 << 40, 0, 0, 0)
    return tuple(int(g, 16) for g in m.groups())


def normalize_bdf(text: str) -> str:
    """``21:00.0`` (lspci without -D) -> ``0000:21:00.0``; lower case."""
    t = text.strip().lower()
    if re.match(r"^[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", t):
        return "0000:" + t
    return t


def is_gpu(pci_class: int | None, vendor: int | None) -> bool:
    """A display-class function of NVIDIA or AMD: not their audio (0x0403) nor an NVSwitch (0x0680)."""
    if pci_class is None or vendor not in (NVIDIA, AMD):
        return False
    if pci_class >> 16 == 0x03:
        return True
    # AMD Instinct MI300-series report themselves as processing accelerators (class 0x1200).
    return vendor == AMD and pci_class >> 8 == 0x1200


@record
class PciFunction:
    bdf: str
    pci_class: int | None = None
    vendor: int | None = None
    # What follows is read only for GPUs, RDMA PFs and the bridges above them (detailed=True).
    device: int | None = None
    numa_node: int | None = None
    numa_assumed: bool = False  # sysfs said -1 on a one-node host: taken as that node
    driver: str | None = None
    is_vf: bool = False
    cur_speed_gts: float | None = None
    max_speed_gts: float | None = None
    cur_width: int | None = None
    max_width: int | None = None
    host_bridge: str | None = None  # "pci0000:17"; None when the path has none
    bridges: tuple[str, ...] = ()  # BDFs from the root port down to this function's parent
    detailed: bool = False

    @property
    def chain(self) -> tuple[str, ...] | None:
        """(host bridge, root port, ..., this function), or None when the path is unknown."""
        if self.host_bridge is None:
            return None
        return (self.host_bridge, *self.bridges, self.bdf)

    @property
    def root_port(self) -> str | None:
        return self.bridges[0] if self.bridges else None


@record
class PciTree:
    sysfs: bool  # /sys/bus/pci/devices lists something
    functions: tuple[PciFunction, ...] = ()
    gpus: tuple[str, ...] = ()  # BDFs of the GPUs (PFs), in PCI bus order
    hcas: tuple[tuple[str, str], ...] = ()  # (RDMA device name, BDF) of the RDMA PFs
    numa_nodes: tuple[int, ...] = ()
    warnings: tuple[str, ...] = ()

    @cached_property
    def by_bdf(self) -> dict[str, PciFunction]:
        return {f.bdf: f for f in self.functions}

    def get(self, bdf: str | None) -> PciFunction | None:
        return None if bdf is None else self.by_bdf.get(bdf)


def parse_hex(text: str | None) -> int | None:
    if not text:
        return None
    t = text.strip().lower()
    if t.startswith("0x"):
        t = t[2:]
    if not t or len(t) > 8 or any(c not in "0123456789abcdef" for c in t):
        return None
    return int(t, 16)


def parse_speed(text: str | None) -> float | None:
    """``"32.0 GT/s PCIe"`` (Linux >= 5.x), ``"8 GT/s"``, ``"2.5 GT/s"``; ``"Unknown"`` -> None."""
    if not text:
        return None
    m = re.match(_SPEED, text)
    if m is None:
        return None
    v = float(m.group(1))
    return v if v > 0 else None


def parse_width(text: str | None) -> int | None:
    """Lanes. 0 (no link trained, or not reported) and 255 (config space read as all ones) are unknown."""
    if not text:
        return None
    t = text.strip().lower().lstrip("x")
    if not t.isascii() or not t.isdigit() or len(t) > 3:
        return None
    v = int(t)
    return v if 1 <= v <= 32 else None


def numa_nodes(host) -> tuple[int, ...]:
    out = []
    for name in host.listdir(NODE_DIR):
        if name.startswith("node") and name[4:].isascii() and name[4:].isdigit():
            out.append(int(name[4:]))
    return tuple(sorted(out))


def _numa(host, base: str, nodes: tuple[int, ...]) -> tuple[int | None, bool]:
    raw = host.read_value(f"{base}/numa_node")
    if raw is None:
        return None, False
    t = raw.strip()
    if re.match(r"^-?[0-9]{1,6}$", t) is None:
        return None, False
    v = int(t)
    if v >= 0:
        return v, False
    # -1: the firmware did not say. On a one-node host there is only one answer; on a
    # multi-node host any pick would be a guess.
    if len(nodes) == 1:
        return nodes[0], True
    return None, False


def _path_of(host, bdf: str, real: str | None = None) -> tuple[str | None, tuple[str, ...]]:
    """(host bridge, bridges from the root port down) of a function, from its sysfs realpath."""
    link = f"{PCI_DEVICES}/{bdf}"
    real = real or host.realpath(link)
    if real is None:
        # A dangling link (a bundle that kept /sys/bus but not every /sys/devices file) still
        # names the path.
        target = host.readlink(link)
        if target is None:
            return None, ()
        real = posixpath.normpath(posixpath.join(PCI_DEVICES, target))
    parts = [p for p in real.split("/") if p]
    hb_at = None
    for i, p in enumerate(parts):
        if re.match(_HOST_BRIDGE, p):
            hb_at = i  # the last one: pci<dom>:<bus> below a VMBus or ACPI node on VMs
    if hb_at is None or not parts or parts[-1] != bdf:
        return None, ()
    bridges = tuple(p for p in parts[hb_at + 1 : -1] if is_bdf(p))
    return parts[hb_at], bridges


def read_function(
    host, bdf: str, nodes: tuple[int, ...], pci_class: int | None = None, vendor: int | None = None, base: str | None = None
) -> PciFunction:
    """Everything we use about one function. Missing or malformed files give None fields.

    ``base``: its directory under /sys/devices, for a bridge that a partial bundle left out of
    /sys/bus/pci/devices (hwloc's gather-topology does that).
    """
    if base is None or not host.is_dir(base):
        base = f"{PCI_DEVICES}/{bdf}"
    if pci_class is None:
        pci_class = parse_hex(host.read_value(f"{base}/class"))
    if vendor is None:
        vendor = parse_hex(host.read_value(f"{base}/vendor"))
    numa, assumed = _numa(host, base, nodes)
    drv = host.readlink(f"{base}/driver")
    hb, bridges = _path_of(host, bdf)
    return PciFunction(
        bdf=bdf,
        pci_class=pci_class,
        vendor=vendor,
        device=parse_hex(host.read_value(f"{base}/device")),
        numa_node=numa,
        numa_assumed=assumed,
        driver=posixpath.basename(drv.rstrip("/")) if drv else None,
        is_vf=host.readlink(f"{base}/physfn") is not None or host.exists(f"{base}/physfn"),
        cur_speed_gts=parse_speed(host.read_value(f"{base}/current_link_speed")),
        max_speed_gts=parse_speed(host.read_value(f"{base}/max_link_speed")),
        cur_width=parse_width(host.read_value(f"{base}/current_link_width")),
        max_width=parse_width(host.read_value(f"{base}/max_link_width")),
        host_bridge=hb,
        bridges=bridges,
        detailed=True,
    )


def build_tree(host, hca_pcis: list[tuple[str, str]], warnings: list[str] | None = None) -> PciTree:
    """The tree of ``host``; ``hca_pcis`` are the (RDMA device name, BDF) of the RDMA PFs."""
    warnings = list(warnings or ())
    names = [n for n in host.listdir(PCI_DEVICES)]
    if not names:
        return PciTree(sysfs=False, warnings=tuple(warnings))
    nodes = numa_nodes(host)
    basic: dict[str, PciFunction] = {}
    odd = []
    for name in names:
        if not is_bdf(name):
            odd.append(name)
            continue
        pci_class = parse_hex(host.read_value(f"{PCI_DEVICES}/{name}/class"))
        vendor = parse_hex(host.read_value(f"{PCI_DEVICES}/{name}/vendor"))
        basic[name] = PciFunction(name, pci_class, vendor)
    if odd:
        warnings.append(f"{len(odd)} entries of {PCI_DEVICES} are not PCI addresses (e.g. {odd[0]!r}): ignored")
    detailed: dict[str, PciFunction] = {}

    def detail(bdf: str, base: str | None = None) -> PciFunction:
        if bdf not in detailed:
            b = basic.get(bdf)
            fn = read_function(host, bdf, nodes, b.pci_class if b else None, b.vendor if b else None, base)
            if b is None and base is not None:
                # Not listed: its path is the one below which it was found, not unknown.
                hb, bridges = _path_of(host, bdf, base)
                fn = replace(fn, host_bridge=hb, bridges=bridges)
            detailed[bdf] = fn
        return detailed[bdf]

    gpus = []
    for bdf, f in basic.items():
        if is_gpu(f.pci_class, f.vendor):
            d = detail(bdf)
            if not d.is_vf:  # vGPU VFs share the PF's link and slot
                gpus.append(bdf)
    hcas = []
    for name, bdf in hca_pcis:
        if bdf not in basic:
            warnings.append(f"{name}: PCI function {bdf} is not in {PCI_DEVICES}")
        detail(bdf)
        hcas.append((name, bdf))
    for bdf in [*gpus, *(b for _, b in hcas)]:
        real = host.realpath(f"{PCI_DEVICES}/{bdf}")
        for br in detailed[bdf].bridges:
            at = real.find(f"/{br}/") if real else -1
            detail(br, real[: at + len(br) + 1] if at >= 0 else None)
    functions = {**basic, **detailed}
    return PciTree(
        sysfs=True,
        functions=tuple(functions[b] for b in sorted(functions, key=bdf_key)),
        gpus=tuple(sorted(gpus, key=bdf_key)),
        hcas=tuple(hcas),
        numa_nodes=nodes,
        warnings=tuple(warnings),
    )


def _rdma_pfs(ctx) -> tuple[list[tuple[str, str]], list[str]]:
    from rdmadoctor.checks._rdma import probe_inventory

    try:
        inv = ctx.get(probe_inventory)
    except Exception as e:  # noqa: BLE001 - the PCI tree is still worth having without HCAs
        return [], [f"RDMA devices unknown ({type(e).__name__}: {e})"]
    return [(d.name, d.pci) for d in inv.pfs() if d.pci], []


def probe_pci(ctx) -> PciTree:
    hcas, warnings = _rdma_pfs(ctx)
    return build_tree(ctx.host, hcas, warnings)


# ---- relations ---------------------------------------------------------------------------


def chain_relation(
    chain_a: tuple[str, ...] | None,
    chain_b: tuple[str, ...] | None,
    numa_a: int | None,
    numa_b: int | None,
) -> str | None:
    """The `nvidia-smi topo -m` relation of two functions, from their sysfs paths.

    A chain is (host bridge, root port, bridges..., function). Below a root port, the bridges of
    a PCIe switch come in pairs (upstream port, downstream port), and NCCL's topology walks
    sysfs two components at a time so that each switch is one node; the same pairing is used
    here. One bridge node traversed (a shared switch, or a shared root port) is PIX, several
    are PXB. None when it cannot be told (no path; different host bridges on a multi-node host
    whose NUMA node is unknown).
    """
    if not chain_a or not chain_b or len(chain_a) < 2 or len(chain_b) < 2:
        return None
    if chain_a == chain_b:
        return "X"
    if chain_a[0] != chain_b[0]:
        if numa_a is None or numa_b is None:
            return None
        return "NODE" if numa_a == numa_b else "SYS"
    # Same host bridge. A function on the root bus itself (no root port) talks through the host bridge.
    if len(chain_a) < 3 or len(chain_b) < 3 or chain_a[1] != chain_b[1]:
        return "PHB"
    k = 0
    while k < min(len(chain_a), len(chain_b)) and chain_a[k] == chain_b[k]:
        k += 1
    common = k - 1  # index of the lowest common ancestor; >= 1 (the root port)
    nodes: set[tuple] = set()
    if common == 1:
        nodes.add(("root port",))
    else:
        nodes.add(("switch", (common - 2) // 2))
    for side, chain in (("a", chain_a), ("b", chain_b)):
        for i in range(k, len(chain) - 1):
            sw = (i - 2) // 2
            if common >= 2 and sw == (common - 2) // 2:
                continue  # the other port of the switch the paths part in
            nodes.add((side, sw))
    return "PIX" if len(nodes) <= 1 else "PXB"


def relation(a: PciFunction, b: PciFunction) -> str | None:
    return chain_relation(a.chain, b.chain, a.numa_node, b.numa_node)


def links_of(fn: PciFunction) -> list[tuple[str | None, str]]:
    """The physical links on the path of ``fn``: (port above, function below) pairs.

    A function's own link is with its parent. Higher up, only the pairs (root port or switch
    downstream port, switch upstream port) are links; the hop from a switch's upstream port to
    its downstream port is inside the switch. That pairing is sure only when the path below
    the root port alternates up/down, i.e. when its length is even.
    """
    chain = [*fn.bridges, fn.bdf]
    if len(chain) == 1:
        return [(None, fn.bdf)]
    if len(chain) % 2 == 0:
        return [(chain[i], chain[i + 1]) for i in range(0, len(chain), 2)]
    return [(chain[-2], chain[-1])]


# ---- config space: ACS -------------------------------------------------------------------

ACS_CAP_ID = 0x000D
ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")


@record
class AcsRead:
    ctl: dict[str, bool] | None = field(default=None, compare=False)  # None: unknown; {}: no ACS capability
    offset: int | None = None  # of the ACS extended capability
    why_unknown: str | None = None


def acs_from_config(data: bytes | None) -> AcsRead:
    """Walk the PCIe extended capabilities (from 0x100) for ACS and decode its control register.

    Non-root readers get only the first 64 bytes of ``config``; the extended capabilities start
    at 0x100, so the answer is then unknown.
    """
    if data is None:
        return AcsRead(why_unknown="config space not readable")
    if len(data) < 0x104:
        return AcsRead(why_unknown=f"only {len(data)} bytes of config space readable (extended capabilities need root)")
    off = 0x100
    seen: set[int] = set()
    while off and off not in seen and off + 4 <= len(data):
        seen.add(off)
        header = int.from_bytes(data[off : off + 4], "little")
        if header in (0, 0xFFFFFFFF):
            break
        if header & 0xFFFF == ACS_CAP_ID:
            if off + 8 > len(data):
                return AcsRead(offset=off, why_unknown="ACS capability cut off in config space")
            ctl = int.from_bytes(data[off + 6 : off + 8], "little")
            return AcsRead(ctl={name: bool(ctl >> bit & 1) for bit, name in enumerate(ACS_BITS)}, offset=off)
        nxt = (header >> 20) & 0xFFC
        if nxt and nxt < 0x100:
            break  # a pointer into the legacy space: corrupt list
        off = nxt
    return AcsRead(ctl={})


def acs_redirects(ctl: dict[str, bool] | None) -> list[str]:
    if not ctl:
        return []
    return [k for k in ("ReqRedir", "CmpltRedir") if ctl.get(k)]
