"""kernel.modules: the RDMA kernel modules, the HCA's IB driver, and GPUDirect RDMA (peermem / dma-buf)."""

from __future__ import annotations

import re

from rdmadoctor.checks._rdma import RdmaInventory, probe_inventory
from rdmadoctor.checks.verbs import RDMA_DRIVERS, rdma_driver_entry
from rdmadoctor.core.codes.ib import IB_NO_DEVICES
from rdmadoctor.core.codes.node import (
    GDR_DMABUF,
    GDR_PEERMEM_MISSING,
    MOD_MISSING,
    MODULES_UNKNOWN,
)
from rdmadoctor.core.expect import Expect
from rdmadoctor.core.model import (
    CONFIG,
    ERROR,
    INFO,
    UNKNOWN,
    WARNING,
    Check,
    Finding,
    Paste,
)
from rdmadoctor.core.record import record
from rdmadoctor.core.words import count

PEERMEM = ("nvidia_peermem", "nv_peer_mem")
# What the inventory lists: the modules an RDMA/GPU job depends on, when found.
RELEVANT = frozenset(
    {"ib_core", "ib_uverbs", "rdma_ucm", "rdma_cm", "ib_cm", "iw_cm", "ib_umad", "ib_ipoib", "mlx5_core", "mlx4_core"}
    | {row[3] for row in RDMA_DRIVERS}
    | {"nvidia", "nvidia_uvm", "nvidia_peermem", "nv_peer_mem", "nvidia_fs", "gdrdrv"}
)
MODULE_WHY = {
    "ib_core": "the RDMA core every RDMA driver registers with",
    "ib_uverbs": "userspace verbs: it creates /dev/infiniband/uverbs* that libibverbs and NCCL open",
    "rdma_ucm": "the RDMA connection manager for userspace: /dev/infiniband/rdma_cm (librdmacm, UCX, MPI)",
}


@record
class KernelFacts:
    modules: frozenset[str] | None  # loaded modules; None = unknown
    builtin: frozenset[str]  # built into the kernel (no /proc/modules line)
    source: str | None  # "/proc/modules" | "cmd/lsmod.txt" | "/sys/module"
    # (IB module, why it is needed): HCAs bound to their core driver, waiting for the IB half.
    hca_needs: tuple[tuple[str, str], ...] = ()
    # IB modules whose devices exist in /sys/class/infiniband: loaded, whatever the lists say.
    ib_present: frozenset[str] = frozenset()
    gpus_present: bool | None = None
    gpu_count: int | None = None
    osrelease: str | None = None
    nvidia_open: bool | None = None  # /proc/driver/nvidia/version says "Open Kernel Module"
    dmabuf_possible: bool = False
    gpudirect: bool | None = None  # what node.labels reads: peermem or dma-buf with GPUs and an RDMA device
    gpudirect_path: str | None = None  # "peermem" | "dmabuf" | "none" (GPUs, neither) | None (unknown or no GPU)
    nvidia_driver: str | None = None  # the NVIDIA kernel module's version ("535.129.03")
    # Does the RDMA inventory list a device? False: it was read and is empty (ib.devices reports
    # IB_NO_DEVICES, the root cause the module findings then follow from); None: unknown.
    rdma_devices: bool | None = None
    notes: tuple[str, ...] = ()

    def has(self, module: str) -> bool:
        m = module.replace("-", "_")
        return m in (self.modules or ()) or m in self.builtin or m in self.ib_present


def kernel_version(osrelease: str | None) -> tuple[int, int] | None:
    """"6.1.0-18-amd64" -> (6, 1)."""
    m = re.match(r"\s*(\d{1,4})\.(\d{1,4})", osrelease or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def parse_proc_modules(text: str) -> set[str]:
    """First column of /proc/modules ("mlx5_ib 466944 0 - Live 0x0000000000000000")."""
    out = set()
    for line in text.splitlines():
        words = line.split()
        if words and re.fullmatch(r"[A-Za-z0-9_]{1,64}", words[0]):
            out.add(words[0])
    return out


def _modules(host, notes: list[str]) -> tuple[frozenset[str] | None, frozenset[str], str | None]:
    loaded: set[str] | None = None
    source = None
    text = host.read_text("/proc/modules")
    if text is not None:
        loaded, source = parse_proc_modules(text), "/proc/modules"
    else:
        res = host.cmd("lsmod")
        if res.text is not None:
            from rdmadoctor.parsers.system import parse_lsmod

            parsed = parse_lsmod(res.text)
            notes.extend(f"cmd/lsmod.txt: {w}" for w in parsed.warnings)
            if parsed.ok:
                loaded, source = set(parsed.value), "cmd/lsmod.txt"
    builtin: set[str] = set()
    names = host.listdir("/sys/module")
    if names:
        # A loadable module has /sys/module/<m>/initstate ("live"); a built-in one has the
        # directory (when it has parameters) but no initstate. Kernels built without module
        # support (CONFIG_MODULES=n) have no /proc/modules at all, only built-ins here.
        live = {n for n in names if host.exists(f"/sys/module/{n}/initstate")}
        builtin = set(names) - live
        if loaded is None:
            loaded, source = live, "/sys/module"
        else:
            builtin -= loaded
    osrelease = _osrelease(host)
    if osrelease:
        # modules.builtin names built-ins without parameters too; absent in most containers.
        text = host.read_text(f"/lib/modules/{osrelease}/modules.builtin")
        for line in (text or "").splitlines():
            name = line.strip().rsplit("/", 1)[-1]
            if name.endswith(".ko"):
                builtin.add(name[:-3].replace("-", "_"))
    return (frozenset(loaded) if loaded is not None else None), frozenset(builtin), source


def _osrelease(host) -> str | None:
    rel = host.read_value("/proc/sys/kernel/osrelease")
    if rel:
        return rel
    m = re.match(r"Linux version (\S+)", host.read_value("/proc/version") or "")
    return m.group(1) if m else None


def _pci_scan(ctx) -> tuple[int | None, list[tuple[str, str]]]:
    """(NVIDIA GPUs, [(IB module, why)]) from the shared PCI probe (the one gpu.topology reads)."""
    from rdmadoctor.checks._pci import MELLANOX, NVIDIA, probe_pci

    host = ctx.host
    tree = ctx.get(probe_pci)
    if not tree.sysfs:
        return None, []
    by_bdf = {f.bdf: f for f in tree.functions}
    # GPU PFs: a vGPU VF shares its PF's modules. NVSwitches (0x0680) are not GPUs.
    gpus = sum(1 for b in tree.gpus if by_bdf[b].vendor == NVIDIA)
    needs: list[tuple[str, str]] = []
    for f in tree.functions:
        # An HCA bound to its core driver without the IB half loaded is an Ethernet NIC only.
        # Only Mellanox/NVIDIA functions and InfiniBand controllers (0x0207; 0x0c06 on older
        # HCAs such as QLogic's) are taken as meant for RDMA: a management NIC on ice or
        # bnxt_en does not need irdma or bnxt_re.
        cls = f.pci_class
        if f.vendor != MELLANOX and (cls is None or cls >> 8 not in (0x0207, 0x0C06)):
            continue
        base = f"/sys/bus/pci/devices/{f.bdf}"
        if f.detailed:
            driver, is_vf = f.driver, f.is_vf
        else:
            link = host.readlink(f"{base}/driver")
            driver = link.rstrip("/").rsplit("/", 1)[-1] if link else None
            is_vf = host.exists(f"{base}/physfn")
        if driver is None or is_vf:
            continue  # unbound, or an SR-IOV VF (the pod's business)
        row = rdma_driver_entry(driver)
        if row is not None:
            needs.append((row[3], f"the IB driver of {f.bdf} (bound to {driver})"))
    return gpus, needs


def probe_kernel(ctx) -> KernelFacts:
    host = ctx.host
    notes: list[str] = []
    modules, builtin, source = _modules(host, notes)
    try:
        inv: RdmaInventory | None = ctx.get(probe_inventory)
    except Exception as e:  # noqa: BLE001 - the device list is a hint here, not a need
        inv = None
        notes.append(f"RDMA devices unknown: {e}")
    rdma_devices = None if inv is None or inv.source == "none" else bool(inv.pfs())
    # Any RDMA device, a pod's VF included: what GPUDirect RDMA needs beside the GPU.
    any_rdma = None if inv is None or inv.source == "none" else bool(inv.devices)
    present = set()
    for dev in inv.devices if inv is not None and inv.source == "sysfs" else ():
        row = rdma_driver_entry(dev.driver, dev.name)
        if row is not None:
            present.add(row[3])
    try:
        gpus, needs = _pci_scan(ctx)
    except Exception as e:  # noqa: BLE001 - PCI facts refine the verdict; modules still decide
        gpus, needs = None, []
        notes.append(f"PCI functions unknown: {type(e).__name__}: {e}")
    needs = [n for n in dict.fromkeys(needs) if n[0] not in present]
    osrelease = _osrelease(host)
    nv_text = host.read_text("/proc/driver/nvidia/version", 65536)
    nvidia_open = None if nv_text is None else "Open Kernel Module" in nv_text
    nvidia_loaded = (modules is not None and "nvidia" in modules) or "nvidia" in builtin
    if gpus is None and modules is None:
        gpus_present = None
    else:
        gpus_present = bool(gpus) or bool(nvidia_loaded)
    kv = kernel_version(osrelease)
    dmabuf = bool(nvidia_loaded and nvidia_open and kv is not None and kv >= (5, 12))
    peermem = modules is not None and any(m in modules or m in builtin for m in PEERMEM)
    # GPUDirect RDMA is a GPU-HCA property: peermem or dma-buf with no RDMA device to read GPU
    # memory is no GPUDirect at all (a GPU machine with a virtio NIC published gpudirect=true).
    if any_rdma is False:
        gpudirect = False
    elif modules is None or gpus_present is None or any_rdma is None:
        gpudirect = None
    else:
        gpudirect = bool(gpus_present and (peermem or dmabuf))
    path = None
    if gpudirect is not None and gpus_present:
        path = "peermem" if peermem else "dmabuf" if dmabuf else "none"
    nv_version = re.search(r"Kernel Module(?: for \S+)?\s+(\d[\w.\-]{0,40})", nv_text or "")
    return KernelFacts(
        gpudirect_path=path,
        nvidia_driver=nv_version.group(1) if nv_version else host.read_value("/sys/module/nvidia/version"),
        modules=modules,
        builtin=builtin,
        source=source,
        hca_needs=tuple(needs),
        ib_present=frozenset(present),
        gpus_present=gpus_present,
        gpu_count=gpus,
        osrelease=osrelease,
        nvidia_open=nvidia_open,
        dmabuf_possible=dmabuf,
        gpudirect=gpudirect,
        rdma_devices=rdma_devices,
        notes=tuple(notes),
    )


def _remedy(module: str) -> str:
    name = module.replace("_", "-") if module == "nvidia_peermem" else module
    return (
        f"modprobe {name}\n"
        f"echo {name} >> /etc/modules-load.d/rdma.conf   # load it at every boot\n"
        "(With MLNX_OFED / DOCA-OFED: `/etc/init.d/openibd restart`; with the NVIDIA network operator, "
        "check its MOFED driver pod on this node.)"
    )


def judge_kernel(f: KernelFacts, expect: dict) -> list[Finding]:
    if f.modules is None:
        why = "; ".join(f.notes) or "no /proc/modules, cmd/lsmod.txt or /sys/module"
        return [
            Finding(
                MODULES_UNKNOWN.code,
                UNKNOWN,
                "kernel",
                f"the loaded kernel modules could not be read ({why}).",
                MODULES_UNKNOWN.fix,
            )
        ]
    out: list[Finding] = []
    required = expect.get("required_modules") or []
    if isinstance(required, str):
        required = [required]
    wanted: dict[str, str] = {}
    for m in required:
        if isinstance(m, str) and m.strip():
            wanted.setdefault(m.strip().replace("-", "_"), MODULE_WHY.get(m.strip(), "required by the profile"))
    # A socket pool (rdma_required = false) runs its NICs as Ethernet NICs on purpose: an HCA
    # without its IB driver is not missing anything there.
    socket_pool = expect.get("rdma_required") is False
    for m, why in () if socket_pool else f.hca_needs:
        wanted.setdefault(m, why)
    # No RDMA device at all: nothing has loaded the RDMA core modules, which follows from the
    # missing device (IB_NO_DEVICES), the one headline. An HCA waiting for its IB driver is
    # different: that missing module is why there is no device, so it stays a root cause.
    hca_modules = {m for m, _ in f.hca_needs}
    for m, why in wanted.items():
        if f.has(m):
            continue
        follows = f.rdma_devices is False and m not in hca_modules
        out.append(
            Finding(
                MOD_MISSING.code,
                ERROR,
                m,
                f"kernel module {m} is not loaded (not in {f.source}, not built in); expected: {why}."
                + (" There is no RDMA device on this host, so nothing has loaded it." if follows else ""),
                _remedy(m),
                cause=IB_NO_DEVICES.code if follows else None,
            )
        )
    if f.gpus_present and not (socket_pool and f.rdma_devices is False):
        # (No GPUDirect RDMA to want without RDMA, in a pool that trains over sockets by design.)
        gpus = f"{count(f.gpu_count, 'NVIDIA GPU')}" if f.gpu_count else "NVIDIA GPUs (the nvidia module is loaded)"
        if any(f.has(m) for m in PEERMEM):
            pass
        elif f.dmabuf_possible:
            out.append(
                Finding(
                    GDR_DMABUF.code,
                    INFO,
                    "GPUDirect RDMA",
                    f"no nvidia_peermem, but the open NVIDIA kernel module on kernel {f.osrelease} allows "
                    "GPUDirect RDMA through dma-buf (NCCL >= 2.19).",
                )
            )
        else:
            sev = ERROR if expect.get("gpudirect_required") else WARNING
            reasons = []
            if f.nvidia_open is False:
                reasons.append("the proprietary NVIDIA kernel module has no dma-buf export")
            kv = kernel_version(f.osrelease)
            if kv is not None and kv < (5, 12):
                reasons.append(f"kernel {f.osrelease} is older than 5.12 (no dma-buf for RDMA)")
            tail = f" ({'; '.join(reasons)})" if reasons else ""
            # Without an RDMA device there is no GPUDirect RDMA to have; still true, folded under it.
            no_nic = f.rdma_devices is False
            out.append(
                Finding(
                    GDR_PEERMEM_MISSING.code,
                    sev,
                    "GPUDirect RDMA",
                    f"{gpus} present but neither nvidia_peermem nor nv_peer_mem is loaded and no dma-buf path{tail}; "
                    "expected GPUDirect RDMA: NCCL stages every transfer through host memory."
                    + (" (There is no RDMA device on this host yet: fix that first.)" if no_nic else ""),
                    GDR_PEERMEM_MISSING.fix,
                    data={"gpus": f.gpu_count, "osrelease": f.osrelease, "nvidia_open": f.nvidia_open},
                    cause=IB_NO_DEVICES.code if no_nic else None,
                )
            )
    return out


def _inventory(f: KernelFacts) -> dict:
    found = set(f.modules or ()) | set(f.builtin) | set(f.ib_present)
    return {
        "kernel_modules": sorted(found & RELEVANT) if f.modules is not None else None,
        "gpudirect": f.gpudirect,
        "kernel_release": f.osrelease,
        "gpudirect_path": f.gpudirect_path,
        "nvidia_driver": f.nvidia_driver,
    }


# The expectations this module's checks read: declared once, here, with type, unit and range
# (engine.expectations builds its table from every check's defaults).
EXPECT: dict[str, Expect] = {
    "required_modules": Expect(
        ["ib_core", "ib_uverbs", "rdma_ucm"], "list", nullable=False,
        doc="Kernel modules that must be loaded.",
    ),
}


def judge_pasted_lsmod(seg, expect: dict, node, layers: dict[str, str]) -> list[Finding]:
    """A pasted `lsmod` (logs.diagnose): only the modules a paste can prove missing. GPUDirect over
    dma-buf, for one, depends on the driver and kernel, which an lsmod does not show."""
    from rdmadoctor.checks._paste import PasteHost

    facts = probe_kernel(PasteHost({"/cmd/lsmod.txt": seg.text}, expect))
    if facts.modules is None:
        return []
    return [f for f in judge_kernel(facts, expect) if f.code == MOD_MISSING.code]


# Where this module's checks stand in the report (engine.registry: built-ins are found by scanning checks/).
ORDER = 60

CHECKS = [
    Check(
        defaults=EXPECT,
        id="kernel.modules",
        condition=CONFIG,
        gate=True,
        title="RDMA kernel modules and GPUDirect RDMA",
        probe=probe_kernel,
        judge=judge_kernel,
        codes=(MOD_MISSING, GDR_PEERMEM_MISSING, GDR_DMABUF, MODULES_UNKNOWN),
        inventory=_inventory,
        pastes=(Paste("lsmod", judge_pasted_lsmod),),
        description="ib_core, ib_uverbs, rdma_ucm and each HCA's IB driver (mlx5_ib, ...) loaded or built in; "
        "with NVIDIA GPUs, nvidia_peermem (or the dma-buf path of the open kernel module).",
    ),
]
