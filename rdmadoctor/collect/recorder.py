"""The Recorder: which files of a root go into a bundle, and how.

Two sources: every path the checks touched (a :class:`TracingHost` notes each read, listing,
existence test and link lookup while the checks run), and a fixed list of subtrees (RDMA devices
and their PCI functions, netdevs, NUMA nodes, modules, limits, the package database, verbs
providers, device nodes). Symlinks are resolved by the Host's own resolver, so the bundle holds
exactly the path the checks' Host took; what is read stays bounded (see the limits below).
"""

from __future__ import annotations

import os
import posixpath
import stat
from dataclasses import dataclass
from typing import Any

from rdmadoctor.host import Host, _DirTree

MAX_FILE = 1024 * 1024  # a bigger file is not a sysfs attribute or a config file we need
MAX_CONFIG = 4096  # PCI config space: the capability lists (ACS, ATS, link) live in the first 4 KiB
MAX_FILES = 200_000
MAX_BYTES = 128 * 1024 * 1024  # uncompressed; sysfs text compresses ~10x

# Never read: BARs and expansion ROMs (mmap-only, huge), VPD (slow EEPROM reads), memory images,
# blocking or secret /proc files, and the write-only triggers some sysfs folders hold.
_DENY_NAMES = frozenset(
    {
        "rom", "mem", "vpd", "environ", "kmsg", "kcore", "pagemap", "sysrq-trigger", "trace_pipe",
        "kpagecount", "kpageflags", "kpagecgroup", "remove", "rescan", "reset", "new_id", "remove_id",
        "bind", "unbind", "auxv", "clear_refs", "mem_dump",
    }
)
_DENY_PREFIXES = ("/sys/kernel/debug", "/sys/kernel/tracing", "/sys/firmware", "/proc/kcore", "/proc/sys/fs/binfmt_misc")

# /sys/class/net/<nd>: the attributes a RoCE / IPoIB check reads (not statistics/: 25 files each).
NET_FILES = (
    "operstate", "mtu", "carrier", "dev_port", "dev_id", "address", "type", "speed", "duplex",
    "ifindex", "iflink", "flags", "addr_len", "broadcast", "tx_queue_len", "phys_port_name",
    "phys_switch_id", "carrier_changes", "uevent",
)
NET_LINKS = ("device", "master")
PCI_FILES = (
    "class", "vendor", "device", "subsystem_vendor", "subsystem_device", "revision", "numa_node",
    "local_cpulist", "local_cpus", "current_link_speed", "current_link_width", "max_link_speed",
    "max_link_width", "secondary_bus_number", "subordinate_bus_number", "enable", "modalias",
    "uevent", "label", "index", "acpi_index", "sriov_numvfs", "sriov_totalvfs", "sriov_offset",
    "sriov_stride", "sriov_vf_device", "sriov_drivers_autoprobe", "ari_enabled", "aer_dev_correctable",
    "aer_dev_fatal", "aer_dev_nonfatal", "reset_method", "irq", "msi_bus",
)
PCI_LINKS = ("driver", "physfn", "iommu_group", "iommu", "firmware_node")
# Kernel modules whose version and parameters matter (mlx5_core's prof_sel, nvidia's
# NVreg_* for GPUDirect, ib_core's netns_mode ...).
MODULES = (
    "ib_core", "ib_uverbs", "ib_umad", "ib_cm", "iw_cm", "rdma_cm", "rdma_ucm", "ib_ipoib",
    "mlx5_core", "mlx5_ib", "mlx4_core", "mlx4_ib", "mlx4_en", "mlxfw", "mlx_compat", "nvidia",
    "nvidia_peermem", "nv_peer_mem", "nvidia_uvm", "nvidia_modeset", "nvidia_fs", "gdrdrv",
    "rdma_rxe", "siw", "irdma", "bnxt_re", "bnxt_en", "efa", "qedr", "hfi1", "ib_qib", "ice",
    "vfio_pci", "ib_srp", "ib_iser", "rpcrdma", "knem", "xpmem", "nvme_rdma",
)
PROC_FILES = (
    "/proc/modules", "/proc/self/limits", "/proc/self/status", "/proc/self/uid_map", "/proc/self/cgroup",
    "/proc/sys/kernel/osrelease", "/proc/sys/kernel/numa_balancing", "/proc/sys/kernel/hostname",
    "/proc/sys/vm/zone_reclaim_mode", "/proc/sys/vm/nr_hugepages", "/proc/sys/vm/max_map_count",
    "/proc/version", "/proc/cmdline", "/proc/meminfo", "/proc/mounts", "/proc/loadavg",
    "/proc/driver/nvidia/version", "/proc/sys/net/ipv4/conf/all/rp_filter",
    "/proc/sys/net/ipv4/conf/all/arp_ignore", "/proc/sys/net/ipv4/conf/all/arp_announce",
    "/proc/sys/net/core/rmem_max", "/proc/sys/net/core/wmem_max",
)
ETC_FILES = (
    "/etc/os-release", "/etc/hostname", "/etc/nccl.conf", "/etc/security/limits.conf",
    "/etc/systemd/system.conf", "/etc/infiniband/openib.conf", "/etc/infiniband/info",
    "/etc/redhat-release", "/etc/debian_version", "/etc/lsb-release", "/etc/ld.so.conf",
)
ETC_DIRS = (
    "/etc/libibverbs.d", "/etc/rdma", "/etc/modprobe.d", "/etc/security/limits.d",
    "/etc/systemd/system.conf.d", "/etc/nvidia-imex", "/etc/ld.so.conf.d",
)
SYS_FILES = (
    "/sys/devices/system/node/online", "/sys/devices/system/node/possible",
    "/sys/devices/system/node/has_cpu", "/sys/devices/system/cpu/online",
    "/sys/devices/system/cpu/possible", "/sys/devices/system/cpu/present",
    "/sys/fs/cgroup/cgroup.controllers", "/sys/fs/cgroup/rdma.max", "/sys/fs/cgroup/rdma.current",
    "/sys/fs/cgroup/memory.max", "/sys/kernel/mm/transparent_hugepage/enabled",
    "/sys/module/mlx5_core/parameters/prof_sel",
)
# Where verbs providers and the libraries NCCL loads live; only their names matter.
LIB_DIRS = (
    "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
    "/lib/x86_64-linux-gnu", "/lib64", "/usr/local/lib", "/usr/local/cuda/lib64",
    "/usr/lib/x86_64-linux-gnu/libibverbs", "/usr/lib/aarch64-linux-gnu/libibverbs",
    "/usr/lib64/libibverbs", "/usr/lib/libibverbs", "/usr/local/lib/libibverbs",
)
LIB_PREFIXES = (
    "libibverbs", "librdmacm", "libibumad", "libmlx5", "libmlx4", "libnccl", "libsharp",
    "libhcoll", "libucp", "libucs", "libucm", "libuct", "libfabric", "libcuda.so", "libnvidia-ml",
    "libgdrapi", "libcudart", "libnvidia-peermem",
)
DPKG_STATUS = "/var/lib/dpkg/status"
# Fields of a dpkg status stanza that say what is installed; Description and Conffiles are
# most of a big status file and no check needs them.
_DPKG_KEEP = ("Package:", "Status:", "Version:", "Architecture:", "Source:", "Provides:")


@dataclass
class Entry:
    kind: str  # "file" | "dir" | "link"
    data: bytes = b""
    target: str = ""
    placeholder: bool = False  # a name whose content was not read (device node, library)



class TracingHost(Host):
    """A Host that also notes existence tests and link lookups (Host.trace has reads and listings)."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.ops: list[tuple[str, str]] = []

    def read_bytes(self, path: str, limit: int = 4 * 1024 * 1024, *, fresh: bool = False) -> bytes | None:
        self.ops.append(("read", path))
        return super().read_bytes(path, limit, fresh=fresh)

    def _names(self, path: str) -> list[str]:  # under listdir and glob alike
        self.ops.append(("list", path))
        return super()._names(path)

    def exists(self, path: str) -> bool:
        self.ops.append(("probe", path))
        return super().exists(path)

    def is_dir(self, path: str) -> bool:
        self.ops.append(("probe", path))
        return super().is_dir(path)

    def readlink(self, path: str) -> str | None:
        self.ops.append(("probe", path))
        return super().readlink(path)

    def realpath(self, path: str) -> str | None:
        self.ops.append(("probe", path))
        return super().realpath(path)


def _norm(path: str) -> str:
    return posixpath.normpath("/" + path.lstrip("/"))


def _climbs_out(parent: str, target: str) -> bool:
    """Whether ``target``, read from the folder ``parent``, goes above the root at some step."""
    depth = 0 if parent == "/" else parent.count("/")
    for part in target.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part and part != ".":
            depth += 1
    return False


class Recorder:
    """Copies paths of a root directory into ``entries``, keyed by their real (link-free) path
    inside the root. Symlinks resolve inside the root, as in Host: an absolute link in a root
    mounted at /host leads to /host/..., never to the collector's own files."""

    def __init__(self, fs_root: str | None):
        self.fs = "" if not fs_root or fs_root == "/" else fs_root.rstrip("/")
        self._kinds: dict[str, str | None] = {}
        self.entries: dict[str, Entry] = {}
        self.skipped: dict[str, str] = {}  # path -> why it is not in the bundle
        self.trimmed: list[str] = []
        self.bytes = 0
        self.full = False
        self._resolver = Host(_DirTree(self.fs or "/"), label=self.fs or "/", kind="root", live_process=False, root=self.fs or "/")
        self._resolver.on_step = self._step
        self._walked: set[tuple[str, int]] = set()
        self.read_order: dict[str, int] = {}  # real path -> when the checks first read it

    # ---- primitives: the root's own files, through os (fast, and lstat tells FIFOs apart) ----
    def _kind(self, real: str) -> str | None:
        k = self._kinds.get(real, "?")
        if k != "?":
            return k
        try:
            mode = os.lstat(self.fs + real).st_mode
        except (OSError, ValueError):
            k = None
        else:
            if stat.S_ISLNK(mode):
                k = "link"
            elif stat.S_ISDIR(mode):
                k = "dir"
            else:
                k = "file" if stat.S_ISREG(mode) else "special"
        self._kinds[real] = k
        return k

    def _listdir(self, real: str) -> list[str]:
        try:
            return sorted(os.listdir(self.fs + real))
        except (OSError, ValueError):
            return []

    def _read(self, real: str, limit: int) -> bytes | None:
        try:
            with open(self.fs + real, "rb") as f:
                return f.read(limit)
        except (OSError, ValueError):
            return None

    def ls(self, path: str) -> list[str]:
        real = self.resolve(path)
        return self._listdir(real) if real is not None and self._kind(real) == "dir" else []

    def exists(self, path: str) -> bool:
        return self.resolve(path) is not None

    def _put(self, path: str, entry: Entry) -> None:
        if path in self.entries or path == "/":
            return
        if len(self.entries) >= MAX_FILES or self.bytes + len(entry.data) > MAX_BYTES:
            self.full = True
            self.skipped.setdefault(path, "bundle size limit reached")
            return
        self.entries[path] = entry
        self.bytes += len(entry.data) + 512

    def resolve(self, path: str) -> str | None:
        """The real path of ``path`` inside the root, recording every directory and symlink met on
        the way (and inside their targets). Resolution is the Host's own (Host.realpath over the
        same root, ``..`` after a link taken from the link's target as the kernel does), so the
        bundle holds exactly the path the checks' Host took. None when missing or a loop."""
        return self._resolver.realpath(path)

    def _step(self, path: str, kind: str, target: str | None) -> None:
        if kind == "dir":
            self._put(path, Entry("dir"))
            return
        # A link keeps its own target, verbatim when relative, so the bundle's Host walks it as
        # this one did (``a/../b`` through a link ``a`` is not ``b``). An absolute one is rewritten
        # to climb to the root first, which the Host reads the same way. A target that would climb
        # out of the root lexically is normalised inside it (the Host stops ``..`` at the root),
        # so an extracted bundle never points outside itself.
        assert target is not None
        parent = posixpath.dirname(path)
        if target.startswith("/"):
            target = "../" * (parent.count("/") if parent != "/" else 0) + target.lstrip("/")
        if _climbs_out(parent, target):
            target = posixpath.relpath(_norm(posixpath.join(parent, target)), parent)
        self._put(path, Entry("link", target=target))

    def _deny(self, real: str) -> str | None:
        name = posixpath.basename(real)
        if name in _DENY_NAMES or name.startswith("resource") or real.startswith(_DENY_PREFIXES):
            return "never read (BAR, ROM, VPD, memory or secret file)"
        if real.startswith("/proc/") and name in ("environ", "mem", "pagemap", "auxv"):
            return "never read (secret)"
        return None

    def add(self, path: str, mode: str = "fixed", drop_zero: bool = False) -> str | None:
        """Record ``path``: its links, then a file's content or a directory (not its entries).

        ``mode``: "read" for a path a check read (verbatim, even a library: the verbs check looks
        for IBVERBS_PRIVATE_<n> inside them); "fixed" for the fixed list (libraries by name only);
        "name" for the entries of a listed folder outside /sys, /proc and /etc (names only).
        ``drop_zero``: leave out an unused GID or P_Key slot (all zeros). 256 GIDs on every port of
        512 VFs would be most of a bundle; the inventory reads an all-zero GID as no GID, so
        leaving it out changes no verdict. A path the checks read is always recorded verbatim.
        """
        real = self.resolve(path)
        if real is None or real == "/":
            return real
        cur = self.entries.get(real)
        if cur is not None and not (mode == "read" and cur.placeholder):
            return real
        kind = self._kind(real)
        if kind == "dir":
            self._put(real, Entry("dir"))
        elif kind == "special" or real.startswith("/dev/"):
            # Device nodes, FIFOs, sockets: their names matter, reading them could block.
            self._put(real, Entry("file", placeholder=True))
        elif kind == "file":
            if mode == "name" or (mode == "fixed" and _is_library(real)):
                self._put(real, Entry("file", placeholder=True))
                return real
            why = self._deny(real)
            if why:
                self.skipped[real] = why
                return real
            limit = MAX_CONFIG if posixpath.basename(real) == "config" and real.startswith("/sys/") else MAX_FILE + 1
            data = self._read(real, limit)
            if data is None:
                return real  # unreadable (EINVAL for an unused GID slot, EACCES): absent in the bundle too
            if len(data) > MAX_FILE:
                if real == DPKG_STATUS:
                    data = self._trim_dpkg(real)
                    self.trimmed.append(real)
                elif _is_library(real):
                    # What checks search a library for (symbol versions, paths) are strings.
                    data = _strings(self._read(real, 64 * MAX_FILE) or b"")
                    self.trimmed.append(real)
                else:
                    self.skipped[real] = f"larger than {MAX_FILE // 1024} KiB"
                    return real
            if drop_zero and _zero_table_entry(real, data):
                return real
            if cur is not None:
                self.bytes += len(data)
                self.entries[real] = Entry("file", data)
            else:
                self._put(real, Entry("file", data))
        return real

    def _trim_dpkg(self, real: str) -> bytes:
        data = self._read(real, 64 * MAX_FILE) or b""
        keep = [line for line in data.split(b"\n") if not line or line.startswith(tuple(k.encode() for k in _DPKG_KEEP))]
        out = b"\n".join(keep)
        while b"\n\n\n" in out:
            out = out.replace(b"\n\n\n", b"\n\n")
        return out

    def walk(
        self, path: str, depth: int, skip: frozenset[str] = frozenset(), follow: frozenset[str] = frozenset(), mode: str = "fixed"
    ) -> None:
        """Record ``path`` and, ``depth`` levels down, its entries. Links are recorded, and their
        targets marked as existing, but followed only when named in ``follow``."""
        real = self.add(path, mode, drop_zero=True)
        if real is None or depth <= 0 or (real, depth) in self._walked:
            return
        self._walked.add((real, depth))
        entry = self.entries.get(real)
        if entry is None or entry.kind != "dir":
            return
        for name in self._listdir(real):
            if self.full:
                return
            child = posixpath.join(real, name)
            if name in skip or self._deny(child):
                continue
            if self._kind(child) == "link":
                if name in follow:
                    self.walk(child, depth - 1, skip, follow, mode)
                else:
                    self.add(child, mode)
                continue
            self.walk(child, depth - 1, skip, follow, mode)

    # ---- the fixed list ----------------------------------------------------------------------
    def netdev(self, path: str) -> None:
        real = self.add(path)
        if real is None:
            return
        for f in NET_FILES:
            self.add(f"{real}/{f}")
        for link in NET_LINKS:
            self.add(f"{real}/{link}")
        for name in self.ls(real):
            if name.startswith(("upper_", "lower_")):
                self.add(f"{real}/{name}")
        if self._kind(f"{real}/bonding") == "dir":
            self.walk(f"{real}/bonding", 1)

    def pci_device(self, path: str) -> None:
        real = self.add(path)
        if real is None or self.entries.get(real, Entry("file")).kind != "dir":
            return
        for f in PCI_FILES:
            self.add(f"{real}/{f}")
        self.add(f"{real}/config")
        names = self.ls(real)
        for link in PCI_LINKS:
            self.add(f"{real}/{link}")
        for name in names:
            if name.startswith("virtfn"):
                self.add(f"{real}/{name}")
        for sub in ("infiniband", "infiniband_verbs", "infiniband_mad", "net", "nvme"):
            if sub in names:
                self.walk(f"{real}/{sub}", 1)
        for nd in self.ls(f"{real}/net"):
            self.netdev(f"{real}/net/{nd}")

    def fixed(self) -> None:
        h = self  # the fixed list reads like a probe: h.ls, h.exists
        for dev in h.ls("/sys/class/infiniband"):
            path = f"/sys/class/infiniband/{dev}"
            skip = {"power"}
            if h.exists(f"{path}/device/physfn"):
                # A VF's counters and MR cache add ~200 files each: 512 VFs would be most of the bundle.
                skip |= {"counters", "hw_counters", "mr_cache"}
            # 5 levels: ports/1/gid_attrs/types/<n>
            self.walk(path, 5, frozenset(skip))
            self.pci_device(f"{path}/device")
        for cls in ("infiniband_verbs", "infiniband_mad", "infiniband_cm", "iommu"):
            for name in h.ls(f"/sys/class/{cls}"):
                self.walk(f"/sys/class/{cls}/{name}", 1, frozenset({"power", "subsystem", "devices"}))
        for nd in h.ls("/sys/class/net"):
            self.netdev(f"/sys/class/net/{nd}")
        for bdf in h.ls("/sys/bus/pci/devices"):
            self.pci_device(f"/sys/bus/pci/devices/{bdf}")
        for node in h.ls("/sys/devices/system/node"):
            if node.startswith("node") and node[4:].isdigit():
                for f in ("cpulist", "cpumap", "distance", "meminfo"):
                    self.add(f"/sys/devices/system/node/{node}/{f}")
        for f in SYS_FILES:
            self.add(f)
        # Which modules are loaded (and built in) is the list of /sys/module entries.
        for mod in h.ls("/sys/module"):
            if mod in MODULES:
                self.walk(f"/sys/module/{mod}", 2, frozenset({"sections", "notes", "drivers", "holders"}))
                self.walk(f"/sys/module/{mod}/holders", 1)
            else:
                self.add(f"/sys/module/{mod}")
        for f in PROC_FILES:
            self.add(f)
        self.walk("/proc/driver/nvidia", 3, frozenset({"suspend", "suspend_depth"}))
        for f in ETC_FILES:
            self.add(f)
        for d in ETC_DIRS:
            self.walk(d, 2)
        self.add(DPKG_STATUS)
        self.walk("/dev/infiniband", 1)
        for name in h.ls("/dev"):
            if name.startswith(("nvidia", "gdrdrv", "nvme-fabrics")):
                self.walk(f"/dev/{name}", 1)
        self.add("/dev/shm")  # the folder, never its contents (a job's shared memory)
        for d in LIB_DIRS:
            for name in h.ls(d):
                if name.startswith(LIB_PREFIXES) or d.endswith("/libibverbs"):
                    self.add(f"{d}/{name}")

    def absent(self) -> list[str]:
        """Places the fixed list looked at that the host does not have: a bundle without
        /usr/lib/x86_64-linux-gnu/libibverbs.so.1 then says "absent", not "not collected"."""
        places = ("/sys", "/sys/class/infiniband", "/sys/class/net", "/sys/bus/pci/devices", "/proc",
                  "/proc/driver/nvidia", "/dev", "/dev/infiniband", "/etc/libibverbs.d", DPKG_STATUS, *LIB_DIRS)
        return [p for p in places if not self.exists(p)]

    def own_process(self, names: tuple[str, ...] = ("limits", "status", "cgroup")) -> None:
        """/proc/self/* of this process, in place of the root's.

        A check on a root (``--root /host``) takes the process facts (limits, capabilities) from
        the running process, not from the root's files; the bundle must say what that check saw.
        (With the node's procfs at /host/proc the two are the same file anyway.)
        """
        base = self.resolve("/proc/self")
        if base is None or self.entries.get(base, Entry("dir")).kind != "dir":
            base = "/proc/self"
        for name in names:
            try:
                with open(f"/proc/self/{name}", "rb") as f:
                    data = f.read(MAX_FILE)
            except OSError:
                continue
            old = self.entries.get(f"{base}/{name}")
            self.bytes += len(data) - (len(old.data) if old else 0)
            self.entries[f"{base}/{name}"] = Entry("file", data)

    def traced(self, ops: list[tuple[str, str]]) -> None:
        seen: set[tuple[str, str]] = set()
        for op, path in ops:
            if (op, path) in seen or self.full:
                continue
            seen.add((op, path))
            path = _norm(path)
            if path in ("/runtime.json", "/bundle.json") or path.startswith("/cmd/"):
                continue
            if op == "read":
                real = self.resolve(path)
                if real is not None:
                    self.read_order.setdefault(real, len(self.read_order))
            if op == "list":
                # A listed folder of /usr/lib holds thousands of files nobody reads: names only.
                small = path.startswith(("/sys/", "/proc/", "/etc/"))
                self.walk(path, 1, mode="fixed" if small else "name")
            else:
                self.add(path, "read" if op == "read" else "fixed")


def _is_library(path: str) -> bool:
    name = posixpath.basename(path)
    return name.endswith((".so", ".a")) or ".so." in name or (name.startswith(LIB_PREFIXES) and path.startswith(("/usr/", "/lib")))


def _strings(data: bytes) -> bytes:
    """Printable runs of 4+ bytes, NUL-separated, as `strings` would list them."""
    import re

    return b"\x00".join(re.findall(rb"[\x20-\x7e]{4,}", data)) + b"\x00"


def _zero_table_entry(path: str, data: bytes) -> bool:
    if posixpath.basename(posixpath.dirname(path)) not in ("gids", "pkeys"):
        return False
    return data.strip().replace(b"0", b"").replace(b":", b"").replace(b"x", b"") == b""
