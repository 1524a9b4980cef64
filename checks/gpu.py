"""gpu.topology: the GPUs, and how far each one is from its nearest RDMA device.

The relation is computed from the sysfs PCI tree (checks/_pci.py) in `nvidia-smi topo -m` terms,
so it works without the NVIDIA driver, in an init container, and for AMD GPUs. A bundle made of
pasted outputs has no tree: then the recorded `nvidia-smi topo -m` is read.
"""

from __future__ import annotations

from rdmadoctor.checks._pci import RELATION_ORDER, VENDOR_NAMES, PciTree, probe_pci, relation, relation_rank
from rdmadoctor.core.codes.gpu import (
    GPU_COUNT_LOW,
    GPU_COUNT_UNKNOWN,
    GPU_NIC_FAR,
    GPU_NIC_MAX_INVALID,
    GPU_NIC_NEAR,
    GPU_NIC_UNKNOWN,
    TOPO_PARSE_ERROR,
)
from rdmadoctor.core.expect import Expect
from rdmadoctor.core.model import (
    ERROR,
    GPUDIRECT,
    INFO,
    UNKNOWN,
    WARNING,
    Check,
    Finding,
    Need,
    Paste,
)
from rdmadoctor.core.record import record
from rdmadoctor.core.words import count, listing

_MEANING = {
    "PIX": "on the same PCIe switch",
    "PXB": "below the same root port, across several PCIe switches",
    "PHB": "through the CPU's PCIe host bridge",
    "NODE": "across PCIe host bridges within one NUMA node",
    "SYS": "across the inter-socket link, UPI or xGMI",
}


@record
class Gpu:
    name: str  # GPU0, ... in PCI bus order, as nvidia-smi numbers them
    pci: str | None = None
    vendor: str | None = None  # "NVIDIA" | "AMD"
    numa_node: int | None = None
    numa_assumed: bool = False
    pci_id: str | None = None  # PCI vendor:device ("10de:2330"): the GPU model as the bus names it


@record
class GpuTopology:
    gpus: tuple[Gpu, ...]
    nics: tuple[str, ...] = ()  # RDMA device names (or NICn when a recorded matrix has no legend)
    gpu_nic: tuple[tuple[str | None, ...], ...] = ()  # gpu_nic[g][n]: PIX|PXB|PHB|NODE|SYS|None
    source: str = "none"  # "sysfs" | "nvidia-smi topo -m" | "none"
    nic_pci: tuple[str | None, ...] = ()
    parse_error: str | None = None  # the recorded matrix is malformed
    recorded: str | None = None  # where the recorded matrix came from (bundle:cmd/...)
    notes: tuple[str, ...] = ()
    numa_nodes: int | None = None  # NUMA nodes in /sys/devices/system/node; None when not read
    # nvlink[g]: the GPUs GPU g reaches over NVLink (a recorded matrix's NV# cells; /sys does not say).
    nvlink: tuple[tuple[int, ...], ...] = ()


def _from_tree(tree: PciTree) -> tuple[list[Gpu], list[str], list[str], list[tuple[str | None, ...]], list[str]]:
    notes = list(tree.warnings)
    gpus = []
    gpu_fns = []
    for i, bdf in enumerate(tree.gpus):
        fn = tree.get(bdf)
        gpu_fns.append(fn)
        gpus.append(
            Gpu(
                f"GPU{i}",
                bdf,
                VENDOR_NAMES.get(fn.vendor) if fn and fn.vendor is not None else None,
                fn.numa_node if fn else None,
                bool(fn and fn.numa_assumed),
                f"{fn.vendor:04x}:{fn.device:04x}" if fn and fn.vendor is not None and fn.device is not None else None,
            )
        )
    nics = [name for name, _ in tree.hcas]
    nic_pci = [bdf for _, bdf in tree.hcas]
    nic_fns = [tree.get(bdf) for bdf in nic_pci]
    matrix = []
    for g, gfn in zip(gpus, gpu_fns):
        row = []
        for name, nfn in zip(nics, nic_fns):
            rel = relation(gfn, nfn) if gfn is not None and nfn is not None else None
            if rel is None:
                if gfn is None or nfn is None or gfn.chain is None or nfn.chain is None:
                    why = "its PCI path is not in sysfs"
                else:
                    why = "they are on different host bridges and the NUMA node is not reported"
                notes.append(f"{g.name}-{name}: relation unknown ({why})")
            row.append(rel)
        matrix.append(tuple(row))
    return gpus, nics, nic_pci, matrix, notes


def probe_topology(ctx) -> GpuTopology:
    host = ctx.host
    tree: PciTree = ctx.get(probe_pci)
    recorded = None
    # A live host with a PCI tree never runs nvidia-smi: sysfs answers in a millisecond, and a
    # hung driver would stall the check for the whole timeout.
    if not tree.sysfs or not host.live_process or host.kind == "bundle":
        recorded = host.cmd("nvidia-smi-topo")
    matrix = None
    parse_error = None
    notes: list[str] = []
    if recorded is not None and recorded.text is not None:
        from rdmadoctor.parsers.nvidia_smi import parse_topo

        parsed = parse_topo(recorded.text)
        if parsed.ok and parsed.value is not None:
            matrix = parsed.value
            notes.extend(f"nvidia-smi topo: {w}" for w in parsed.warnings)
        else:
            parse_error = "; ".join(parsed.warnings) or "no GPU x NIC matrix found"
            if recorded.error:  # "nvidia-smi topo -m exited with 9": its message is the text
                parse_error += f"; {recorded.error}"
    elif recorded is not None and recorded.timed_out:
        notes.append(f"nvidia-smi topo -m: {recorded.error}")
    where = recorded.source if recorded is not None and recorded.text is not None else None

    if tree.sysfs:
        gpus, nics, nic_pci, rel, more = _from_tree(tree)
        return GpuTopology(
            tuple(gpus), tuple(nics), tuple(rel), "sysfs", tuple(nic_pci), parse_error, where, tuple(notes + more),
            numa_nodes=len(tree.numa_nodes) or None,
        )
    if matrix is not None:
        return topology_of(matrix, where, tuple(notes))
    if recorded is not None and recorded.text is None and recorded.error:
        notes.append(f"nvidia-smi topo -m: {recorded.error}")
    return GpuTopology((), source="none", parse_error=parse_error, recorded=where, notes=tuple(notes))


def topology_of(matrix, where: str | None = None, notes: tuple[str, ...] = ()) -> GpuTopology:
    """A recorded `nvidia-smi topo -m` matrix (parsers.nvidia_smi.TopoMatrix) as the topology judged."""
    numa = list(matrix.gpu_numa) + [None] * (len(matrix.gpus) - len(matrix.gpu_numa))
    gpus = [Gpu(name, None, "NVIDIA", numa[i]) for i, name in enumerate(matrix.gpus)]
    rows = tuple(tuple(c if c in RELATION_ORDER else None for c in row) for row in matrix.gpu_nic)
    nvlink = tuple(tuple(h for h, c in enumerate(row) if c.startswith("NV")) for row in matrix.gpu_gpu)
    return GpuTopology(tuple(gpus), tuple(matrix.nics), rows, "nvidia-smi topo -m", tuple(None for _ in matrix.nics), None, where, notes,
                       nvlink=nvlink)


def _needs_gpus(ctx) -> str | None:
    topo: GpuTopology = ctx.get(probe_topology)
    want = ctx.expect.get("expected_gpus")
    if isinstance(want, int) and not isinstance(want, bool) and want > 0:
        return None  # no GPU (or no NIC) where the profile expects GPUs: GPU_COUNT_LOW is judged
    if topo.parse_error:
        return None
    if not topo.gpus:
        if topo.source == "none":
            return "no GPUs found (no PCI tree in /sys and no recorded nvidia-smi topo -m)"
        return "no GPUs found"
    if not topo.nics:
        # Nothing to pair them with: ib.devices says so (IB_NO_DEVICES), the one headline.
        return f"{count(len(topo.gpus), 'GPU')} but no RDMA device to pair them with: see ib.devices"
    return None


GPUS_PRESENT = Need("gpus", _needs_gpus)


def _wanted_nics(topo: GpuTopology, expect: dict) -> list[int]:
    ignore = set(expect.get("ignore_ports") or ())
    compute = expect.get("compute_hcas")
    if isinstance(compute, str):
        compute = [compute]
    out = []
    for i, name in enumerate(topo.nics):
        if name in ignore:
            continue
        if compute and not any(name == c or name.startswith(str(c)) for c in compute):
            continue
        out.append(i)
    return out


def _gpu_subject(g: Gpu) -> str:
    return g.name


def _gpu_where(g: Gpu) -> str:
    bits = [b for b in (g.pci, None if g.numa_node is None else f"NUMA {g.numa_node}") if b]
    return f"{g.name} ({', '.join(bits)})" if bits else g.name


def judge_topology(topo: GpuTopology, expect: dict) -> list[Finding]:
    out: list[Finding] = []
    if topo.parse_error:
        used = (
            "GPU-NIC relations are taken from sysfs instead"
            if topo.source == "sysfs"
            else "GPU-NIC relations and the GPU count are unknown"
        )
        out.append(
            Finding(
                TOPO_PARSE_ERROR.code,
                WARNING,
                topo.recorded or "nvidia-smi topo -m",
                f"the recorded nvidia-smi topo -m is not a well-formed matrix ({topo.parse_error}); expected one "
                f"relation per GPU and NIC column. It is not used: {used}.",
                TOPO_PARSE_ERROR.fix,
            )
        )
    want = expect.get("expected_gpus")
    if isinstance(want, int) and not isinstance(want, bool) and want > 0:
        known = topo.source != "none"
        if not known:
            out.append(
                Finding(
                    GPU_COUNT_UNKNOWN.code,
                    UNKNOWN,
                    "host",
                    f"the GPU count cannot be established (no PCI tree in /sys, no readable nvidia-smi topo -m); "
                    f"the profile expects {want}.",
                    GPU_COUNT_UNKNOWN.fix,
                )
            )
        elif len(topo.gpus) < want:
            listed = ", ".join(f"{g.name} {g.pci}" if g.pci else g.name for g in topo.gpus) or "none"
            out.append(
                Finding(
                    GPU_COUNT_LOW.code,
                    ERROR,
                    "host",
                    f"{count(len(topo.gpus), 'GPU')} found ({listed}, from {topo.source}); the profile expects {want}.",
                    GPU_COUNT_LOW.fix,
                    data={"gpus": len(topo.gpus), "expected": want},
                )
            )
    limit = expect.get("gpu_nic_max") or "PXB"
    limit_rank = relation_rank(limit)
    if limit_rank is None:
        out.append(
            Finding(
                GPU_NIC_MAX_INVALID.code,
                UNKNOWN,
                "gpu_nic_max",
                f"gpu_nic_max is {limit!r}; expected one of {', '.join(RELATION_ORDER)}.",
                "Fix gpu_nic_max in the config.",
            )
        )
        return out
    nic_idx = _wanted_nics(topo, expect)
    if not nic_idx or not topo.gpus:
        return out
    severity = ERROR if expect.get("gpudirect_required") else WARNING

    def ranked_of(g_i: int) -> list[tuple[int, str]]:
        """(relation rank, RDMA device) of GPU g_i's known relations to the wanted devices."""
        row = topo.gpu_nic[g_i] if g_i < len(topo.gpu_nic) else ()
        return [(r, topo.nics[n]) for n in nic_idx if n < len(row) and (r := relation_rank(row[n])) is not None]

    bests = [min(ranked) if (ranked := ranked_of(g_i)) else None for g_i in range(len(topo.gpus))]
    # Each GPU's nearest RDMA device within the limit (None: none that near).
    near = [b[1] if b is not None and b[0] <= limit_rank else None for b in bests]
    via: list[str] = []  # GPUs that reach a near RDMA device through an NVLink peer
    for g_i, gpu in enumerate(topo.gpus):
        row = topo.gpu_nic[g_i] if g_i < len(topo.gpu_nic) else ()
        unknown = [topo.nics[n] for n in nic_idx if n >= len(row) or relation_rank(row[n]) is None]
        best = bests[g_i]
        if near[g_i] is None:
            # NVLink to a GPU beside a NIC: NCCL's PXN (2.12+, on by default) moves this GPU's data over
            # NVLink to that GPU, which sends it with GPUDirect RDMA: it never crosses the CPU.
            peer = next((h for h in (topo.nvlink[g_i] if g_i < len(topo.nvlink) else ()) if h < len(near) and near[h]), None)
            if peer is not None:
                via.append(f"{gpu.name} (over NVLink to {topo.gpus[peer].name}, beside {near[peer]})")
                continue
        node_rank = RELATION_ORDER.index("NODE")
        # An unknown relation is between different host bridges: NODE or SYS, never nearer.
        if best is not None and (best[0] <= node_rank or not unknown):
            rank, nic = best
            if rank <= limit_rank:
                continue
            rel = RELATION_ORDER[rank]
            msg = (
                f"{_gpu_where(gpu)}: the nearest RDMA device is {nic} at {rel} ({_MEANING[rel]}); "
                f"expected {limit} or nearer (gpu_nic_max)."
            )
            data = {"nearest": nic, "relation": rel, "limit": limit}
        else:
            # The nearest is NODE or SYS.
            if limit_rank >= RELATION_ORDER.index("SYS"):
                continue
            nearest_known = f"; the nearest known is {best[1]} at {RELATION_ORDER[best[0]]}" if best else ""
            if limit_rank >= node_rank:
                out.append(
                    Finding(
                        GPU_NIC_UNKNOWN.code,
                        UNKNOWN,
                        _gpu_subject(gpu),
                        f"{_gpu_where(gpu)}: {', '.join(unknown)} are on other host bridges and the NUMA node is "
                        f"not reported, so NODE and SYS cannot be told apart{nearest_known}; expected {limit} or nearer.",
                        GPU_NIC_UNKNOWN.fix,
                    )
                )
                continue
            msg = (
                f"{_gpu_where(gpu)}: no RDMA device shares a host bridge with it ({', '.join(unknown)}: NODE or SYS, "
                f"NUMA node not reported){nearest_known}; expected {limit} or nearer (gpu_nic_max)."
            )
            data = {"nearest": None, "relation": None, "limit": limit}
        out.append(Finding(GPU_NIC_FAR.code, severity, _gpu_subject(gpu), msg, GPU_NIC_FAR.fix, data=data))
    if not out and topo.gpus:
        if via:
            what = (f"{count(len(topo.gpus) - len(via), 'GPU')} with an RDMA device at {limit} or nearer, and "
                    f"{listing(via)}: NCCL's PXN (2.12+, NCCL_PXN_DISABLE unset) sends their traffic through that "
                    f"GPU's NIC without crossing the CPU ({topo.source})")
        else:
            what = f"{count(len(topo.gpus), 'GPU')}, each with an RDMA device at {limit} or nearer ({topo.source})"
        out.append(Finding(GPU_NIC_NEAR.code, INFO, "host", f"{what}.", data={"via_nvlink": [v.split()[0] for v in via]}))
    return out


def _inventory(topo: GpuTopology) -> dict:
    return {
        "gpus": [
            {"name": g.name, "pci": g.pci, "vendor": g.vendor, "numa_node": g.numa_node, "pci_id": g.pci_id} for g in topo.gpus
        ],
        "topology": {
            "gpus": [g.name for g in topo.gpus],
            "nics": list(topo.nics),
            "gpu_nic": [list(row) for row in topo.gpu_nic],
            "gpu_numa": [g.numa_node for g in topo.gpus],
            "source": topo.source,
            "numa_nodes": topo.numa_nodes,
        },
    }


# The expectations this module's checks read: declared once, here, with type, unit and range
# (engine.expectations builds its table from every check's defaults).
EXPECT: dict[str, Expect] = {
    "expected_gpus": Expect(
        None, "int", "GPUs", min=0, max=1024, null_means="any number", example=8,
        doc="Number of GPUs expected; fewer is GPU_COUNT_LOW (0: no expectation).",
    ),
    "gpudirect_required": Expect(
        False, "bool", nullable=False,
        doc="A missing nvidia_peermem (GPUDirect RDMA) is an error, not a warning.",
    ),
    "gpu_nic_max": Expect(
        "PXB", "enum", choices=RELATION_ORDER, nullable=False,
        doc="Worst acceptable nvidia-smi topo relation between a GPU and its nearest compute HCA.",
    ),
}


# Where this module's checks stand in the report (engine.registry: built-ins are found by scanning checks/).
ORDER = 70


def judge_pasted_topo(seg, expect: dict, node, layers: dict[str, str]) -> list[Finding]:
    """A pasted `nvidia-smi topo -m` (logs.diagnose): each GPU near an RDMA device, as this check judges
    the node's from /sys."""
    from rdmadoctor.checks._paste import matrix

    m = matrix(seg)
    if m is None:
        return []
    wanted = {k: v for k, v in expect.items() if k != "expected_gpus"}  # a paste may show a few GPUs of the node
    return [f for f in judge_topology(topology_of(m), wanted) if f.code in (GPU_NIC_FAR.code, GPU_NIC_NEAR.code)]


def _has_matrix(seg, layers: dict[str, str]) -> bool:
    """Is a pasted nvidia-smi output the GPU x NIC matrix (not the GPU table, not `-q`)?"""
    from rdmadoctor.checks._paste import matrix

    return matrix(seg) is not None


CHECKS = [
    Check(
        id="gpu.topology",
        condition=GPUDIRECT,
        gate=True,
        title="GPU to RDMA device topology",
        probe=probe_topology,  # its need reads it through ctx.get: the engine reuses those facts
        judge=judge_topology,
        codes=(GPU_NIC_FAR, GPU_COUNT_LOW, TOPO_PARSE_ERROR, GPU_COUNT_UNKNOWN, GPU_NIC_UNKNOWN, GPU_NIC_MAX_INVALID, GPU_NIC_NEAR),
        needs=(GPUS_PRESENT,),
        defaults=EXPECT,
        inventory=_inventory,
        pastes=(Paste("nvidia-smi", judge_pasted_topo, rows=_has_matrix),),
        description="GPUs (NVIDIA, AMD) on the PCI bus and, for each, its nearest RDMA device in nvidia-smi topo -m "
        "terms (PIX/PXB/PHB/NODE/SYS), computed from the sysfs PCI tree.",
    ),
]
