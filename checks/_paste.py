"""What the checks' paste judges share: a pasted output as a node probe reads it, and the readings of
one paste several judges (and logs.diagnose's joins) ask for.

A check declares the outputs pasted into a job's log it can judge (``Check.pastes``, a
:class:`rdmadoctor.core.model.Paste` per kind); ``logs.diagnose`` hands each paste to them. A
judge reads the paste through the check's own probe on :class:`PasteHost`, a small in-memory
bundle that holds it as the ``cmd/`` file a bundle records it as
(:data:`rdmadoctor.parsers.outputs.CMD_OF_KIND`): a pasted ``ibstat`` is judged exactly as
``check --bundle`` judges a recorded one.
"""

from __future__ import annotations

import functools
import re

from rdmadoctor.checks._rdma import gid_of, probe_inventory
from rdmadoctor.parsers.outputs import CMD_OF_KIND


class PasteHost:
    """What a node probe reads (host, expectations, shared probes), over one pasted output."""

    def __init__(self, files: dict[str, str], expect: dict):
        from rdmadoctor.host import mem_host

        self.host = mem_host(files, label="pasted output")
        self.expect = expect
        self.logs: tuple[str, ...] = ()
        self._memo: dict = {}

    def get(self, probe):
        if probe not in self._memo:
            self._memo[probe] = probe(self)
        return self._memo[probe]


# Expectations about how many HCAs and ports a node has: a paste may show one device of eight.
COUNTS = ("expected_hcas", "expected_active_ports")

# The pasted outputs that list ports -> the cmd/<name>.txt their parser reads (the file a bundle records them as).
PORT_FILES = {kind: CMD_OF_KIND[kind] for kind in ("ibstat", "ibstatus", "ibv_devinfo", "rdma_link")}


def port_inventory(seg, expect: dict):
    """The RDMA inventory a pasted port list shows, read by the node checks' probe (the count
    expectations left out: a paste may show one device of eight)."""
    paste = PasteHost({f"/cmd/{PORT_FILES[seg.kind]}.txt": seg.text}, {k: v for k, v in expect.items() if k not in COUNTS})
    return probe_inventory(paste), paste.expect


@functools.lru_cache(maxsize=32)
def port_list(kind: str, text: str) -> tuple:
    """The devices (with their ports) a pasted port list shows, read once for every judge and join that
    asks (link layers, ACTIVE ports, GID tables); () for an output that cannot be read."""
    try:
        return probe_inventory(PasteHost({f"/cmd/{PORT_FILES[kind]}.txt": text}, {})).devices
    except Exception:  # noqa: BLE001 - an odd paste never breaks the log's diagnosis
        return ()


# Netdev names of Ethernet ports (systemd's en*, the kernel's eth*, bonds); `ib*` are InfiniBand ports'
# IPoIB netdevs. In a pod, SR-IOV CNIs name either kind net1, net2...: told only by the link layer.
_ETHERNET_NAME = re.compile(r"^(?:en|eth|bond|em|p\d)")


def roce_netdev(device: str, netdev: str | None, layers: dict[str, str]) -> bool | None:
    """Is ``netdev`` (of RDMA ``device``) a RoCE port's? The link layer the paste or NCCL shows for the
    device decides, else the netdev's name; None: it cannot be told (a pod's net1)."""
    if device in layers:
        return layers[device] == "Ethernet"
    if not netdev or netdev.startswith("ib"):
        return False
    return True if _ETHERNET_NAME.match(netdev) else None


def parse_links(text: str) -> list:
    """The rows of a pasted `ibdev2netdev`."""
    from rdmadoctor.parsers.netdev import parse_ibdev2netdev

    return parse_ibdev2netdev(text).value


def roce_gids(text: str, layers: dict[str, str]) -> dict[tuple[str, int], tuple[str | None, tuple]]:
    """(device, port) -> (its netdev, its GIDs) of the RoCE ports a pasted `show_gids` lists. A RoCE
    port: by its link layer where the paste shows it, else by a v2 GID (an InfiniBand port has none)
    or an Ethernet netdev's name; an InfiniBand port's GIDs are not RoCE's."""
    from rdmadoctor.parsers.netdev import parse_show_gids

    table: dict[tuple[str, int], list] = {}
    for row in parse_show_gids(text).value:
        table.setdefault((row.device, row.port), []).append(row)
    out = {}
    for (dev, port), rows in table.items():
        netdev = next((r.netdev for r in rows if r.netdev), None)
        if roce_netdev(dev, netdev, layers) or dev not in layers and any(r.version.lower() == "v2" for r in rows):
            out[(dev, port)] = (netdev, tuple(gid_of(r) for r in rows))
    return out


def matrix(seg):
    """The GPU x NIC matrix of a pasted `nvidia-smi topo -m` (None: another nvidia-smi output, or none)."""
    from rdmadoctor.parsers.nvidia_smi import parse_topo

    if seg.command and " topo" not in f" {seg.command}":
        return None  # `nvidia-smi`'s GPU table, `nvidia-smi -q`: nothing this judges
    parsed = parse_topo(seg.text)
    m = parsed.value if parsed.ok else None
    return m if m is not None and m.gpus and m.nics else None
