"""``rdmadoctor collect``: write a bundle of everything the checks read on this host.

A bundle is a ``.tar.gz`` laid out like a root (``sys/...``, ``proc/...``, ``etc/...``) plus
``cmd/<name>.txt`` (tool outputs), ``cmd/errors.json`` (tools that timed out or failed),
``runtime.json`` (facts that are not files) and ``bundle.json`` (the manifest).
``rdmadoctor check --bundle`` reads it through the same :class:`~rdmadoctor.host.Host` as a live
root, so a bundle reproduces the live verdict on another machine.

What goes in:

1. every path today's checks touch: the checks run once against the host through a Host that
   records each read, listing, existence test and link lookup; every symlink on the way to a
   recorded path is kept as a symlink (relative, like the kernel's), so ``realpath`` inside the
   bundle lands where it landed on the host;
2. a fixed list of subtrees (RDMA devices and their PCI functions, netdevs, NUMA nodes, the
   relevant modules, limits, package database, verbs providers, device nodes), so that a bundle
   made today also serves checks that read a little more tomorrow.

It stays bounded: PCI ``config`` is cut at 4096 bytes, files over 1 MiB are skipped, BAR / ROM /
VPD / memory files are never read (reading ``vpd`` can stall for seconds on some devices), device
nodes are recorded by name only, links never lead out of the root, and the environment is
filtered to the variables that matter to a job (never ``/proc/self/environ``: secrets live there).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import posixpath
import stat
import tarfile
import time
from dataclasses import dataclass, field
from typing import Any

from rdmadoctor import __version__
from rdmadoctor.host import COMMANDS, DEFAULT_TIMEOUT, CmdResult, Host, _DirTree, open_host, run_tool
from rdmadoctor.host.tools import MAX_OUTPUT, cut_message
from rdmadoctor.publish.fsutil import NotRegularFile, not_regular, replacing

# Tools recorded besides host.COMMANDS (which the checks may run themselves).
EXTRA_COMMANDS: dict[str, tuple[str, ...]] = {
    "dpkg-l": ("dpkg", "-l"),
    "rpm-qa": ("rpm", "-qa"),
    "lsmod": ("lsmod",),
    "ulimit": ("sh", "-c", "ulimit -a"),
    "df-shm": ("df", "-h", "/dev/shm"),
}

MAX_FILE = 1024 * 1024  # a bigger file is not a sysfs attribute or a config file we need
MAX_CONFIG = 4096  # PCI config space: the capability lists (ACS, ATS, link) live in the first 4 KiB
MAX_CMD_OUTPUT = MAX_OUTPUT  # run_tool stops a tool there; `lspci -vvv` of a 512-VF node is ~2 MiB
MAX_FILES = 200_000
MAX_BYTES = 128 * 1024 * 1024  # uncompressed; sysfs text compresses ~10x
# Job logs (`collect --log FILE`): of a longer log the first LOG_HEAD bytes (NCCL's version, its
# choice of network and the first errors are printed at init) and the last LOG_TAIL (where the
# job died) are kept, whole lines each, with a marker line where the middle was left out. All
# logs together keep at most MAX_LOG_BYTES, so a bundle stays far below what a reader accepts
# (host.bundle.MAX_BUNDLE).
LOG_HEAD = 4 * 1024 * 1024
LOG_TAIL = 28 * 1024 * 1024
MAX_LOG_BYTES = 128 * 1024 * 1024

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


class CollectError(Exception):
    """An input of ``collect`` cannot be used (a --log file that is missing, a directory ...)."""


class OutputRefused(Exception):
    """``-o`` names something that is not a regular file (a symlink, a device, a FIFO): a bundle
    replaces a regular file or makes a new one, never what a link points at or a device node."""

    def __init__(self, output: str, what: str):
        super().__init__(f"{output} is {what}")
        self.output, self.what = output, what


@dataclass
class Log:
    name: str  # its member in the bundle: "logs/rank0.log"
    source: str  # the path given ("-": stdin)
    data: bytes
    bytes_read: int  # decompressed
    cut: int = 0  # bytes left out of the middle
    error: str | None = None  # reading stopped early (a gzip file cut short)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "bytes_read": self.bytes_read, "bytes_kept": len(self.data),
                "cut_bytes": self.cut, "error": self.error}


def _log_name(path: str, gz: bool, taken: set[str]) -> str:
    import re

    base = "stdin.log" if path == "-" else posixpath.basename(path.rstrip("/")) or "log"
    if gz:
        base = re.sub(r"\.(?:gz|gzip|bz2|xz)$", "", base) or "log"
    base = re.sub(r"[^A-Za-z0-9._+-]", "_", base)
    if base.startswith("."):
        base = "log" + base
    name, n = base, 1
    while name in taken:  # rank0.log from two folders: rank0-2.log
        n += 1
        stem, dot, ext = base.rpartition(".")
        name = f"{stem}-{n}.{ext}" if dot and stem else f"{base}-{n}"
    taken.add(name)
    return name


def read_log(path: str, taken: set[str], stdin: Any = None) -> Log:
    """A job log for the bundle: whole when it is short, else its first LOG_HEAD and last LOG_TAIL
    bytes (whole lines) around a marker line. gzip, bzip2 and xz input is stored unpacked. Raises CollectError
    (and reads no further) for an input that is not text: binary data, zstd."""
    from collections import deque

    from rdmadoctor.logs import reader

    try:
        stream = reader.open_source(path, stdin=stdin)
    except reader.SourceError as e:
        raise CollectError(str(e)) from None
    peek = getattr(stream, "peek", None)
    gz = bool(peek and reader.compression(peek(10)[:10]) in ("gzip", "bzip2", "xz"))
    # A regular file ends; stdin, a FIFO or a device (/dev/zero, `yes |`) may not: reading one
    # stops at MAX_LOG_BYTES, the logs' budget, and keeps what was read up to there.
    try:
        budget = None if stat.S_ISREG(os.fstat(stream.fileno()).st_mode) else MAX_LOG_BYTES
    except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
        budget = MAX_LOG_BYTES
    head = bytearray()
    tail: deque[bytes] = deque()
    tail_len = total = 0
    error = None
    try:
        for chunk in reader.chunks(stream):  # decompressed stream by stream, bounded pieces
            if not total:
                why = reader.binary_reason(chunk)
                if why:  # /dev/zero, /dev/urandom, a zip: not read further, the command stops
                    raise CollectError(f"{path}: {reader.binary_message(why)}")
            total += len(chunk)
            if len(head) < LOG_HEAD:
                take = LOG_HEAD - len(head)
                head += chunk[:take]
                chunk = chunk[take:]
            if chunk:
                tail.append(chunk)
                tail_len += len(chunk)
                while tail and tail_len - len(tail[0]) >= LOG_TAIL:
                    tail_len -= len(tail.popleft())
            if budget is not None and total >= budget:
                error = (f"reading stopped after {total} bytes, collect's log budget ({MAX_LOG_BYTES // (1 << 20)} MiB): "
                         f"{'stdin' if path == '-' else path} is not a regular file and may never end; what was read up "
                         "to there is kept (its first and last bytes)")
                break
    except reader.SourceError as e:  # zstd: no reader
        raise CollectError(f"{path}: {e}") from None
    except reader.TruncatedInput as e:
        if not total:  # nothing of the log to keep: as for a file that cannot be read, the command stops
            raise CollectError(f"{path}: {e}; nothing before it could be read") from None
        error = f"{e}; the bytes before it are kept in the bundle"
    finally:
        if path != "-":
            stream.close()
    rest = b"".join(tail)
    rest = rest[-LOG_TAIL:] if len(rest) > LOG_TAIL else rest
    kept_head = bytes(head)
    if total > len(head) + len(rest):
        # The middle goes: end the head and start the tail on a line boundary.
        nl = kept_head.rfind(b"\n")
        kept_head = kept_head[: nl + 1] if nl >= 0 else kept_head
        nl = rest.find(b"\n")
        rest = rest[nl + 1 :] if 0 <= nl < len(rest) - 1 else rest
        cut = total - len(kept_head) - len(rest)
        marker = (f"[rdmadoctor collect: {cut} bytes of this log left out here; its first {len(kept_head)} and last "
                  f"{len(rest)} bytes are kept]\n").encode()
        return Log(f"logs/{_log_name(path, gz, taken)}", path, kept_head + marker + rest, total, cut, error)
    return Log(f"logs/{_log_name(path, gz, taken)}", path, kept_head + rest, total, 0, error)


def read_logs(paths: list[str] | tuple[str, ...], stdin: Any = None) -> list[Log]:
    """Every --log, in order; past MAX_LOG_BYTES in all a log is listed in the manifest, not kept."""
    out: list[Log] = []
    taken: set[str] = set()
    kept = 0
    for path in paths:
        log = read_log(path, taken, stdin=stdin)
        if kept + len(log.data) > MAX_LOG_BYTES:
            log = Log(log.name, path, b"", log.bytes_read, log.bytes_read,
                      f"not kept: the bundle's logs already hold {kept} bytes (at most {MAX_LOG_BYTES} in all)")
        kept += len(log.data)
        out.append(log)
    return out


@dataclass
class Collected:
    """What a collection produced, for the CLI's summary line and for tests."""

    output: str
    files: int
    commands: list[str]
    failed: dict[str, dict[str, Any]]
    size: int
    manifest: dict[str, Any] = field(default_factory=dict)
    logs: list[Log] = field(default_factory=list)

    def commands_summary(self) -> str:
        """The tools in one consistent phrase: each named once, under what happened to it.

        ``commands`` are the outputs recorded; ``failed`` holds the tools that failed outright
        (nothing recorded) and the ones recorded with an error or cut (``output_recorded``):
        "3 commands recorded (env, lsmod, ulimit), 1 of them incomplete or with an error (ulimit:
        stopped at the deadline, its output so far kept); not recorded: dpkg-l: timed out"."""
        partial = {n: why for n, why in self.failed.items() if why.get("output_recorded") and n in self.commands}
        lost = {n: why for n, why in self.failed.items() if n not in partial}
        n = len(self.commands)
        text = f"{n} command{'' if n == 1 else 's'} recorded ({', '.join(self.commands) or 'none'})"
        if partial:
            text += f", {len(partial)} of them incomplete or with an error ({_by_reason(partial)})"
        if lost:
            text += f"; not recorded: {_by_reason(lost)}"
        return text


def _by_reason(failed: dict[str, dict[str, Any]]) -> str:
    """"a, b: timed out; c: see cmd/errors.json": the names grouped by why."""
    groups: dict[str, list[str]] = {}
    for name, why in sorted(failed.items()):
        groups.setdefault(_why_failed(why), []).append(name)
    return "; ".join(f"{', '.join(names)}: {why}" for why, names in groups.items())


def _why_failed(why: dict[str, Any]) -> str:
    if why.get("timed_out"):
        return "timed out"
    if why.get("truncated"):
        return f"output cut at {MAX_CMD_OUTPUT} bytes, its beginning kept"
    if why.get("output_recorded") and "deadline" in (why.get("error") or ""):
        return "stopped at the deadline, its output so far kept"
    if why.get("output_recorded"):
        return "exited with an error, its output kept"
    return "see cmd/errors.json"


class _TracingHost(Host):
    """A Host that also notes existence tests and link lookups (Host.trace has reads and listings)."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.ops: list[tuple[str, str]] = []

    def read_bytes(self, path: str, limit: int = 4 * 1024 * 1024) -> bytes | None:
        self.ops.append(("read", path))
        return super().read_bytes(path, limit)

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


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(text: str) -> str:
    """A string from the environment, its bytes that are not UTF-8 as \\xNN: mlx\\xff."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


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


# ---- commands -------------------------------------------------------------------------------
def _run_commands(host: Host, timeout: float) -> dict[str, tuple[tuple[str, ...], CmdResult, float]]:
    """Every tool at once: a hung tool costs one timeout, not one per tool."""
    from concurrent.futures import ThreadPoolExecutor

    jobs: dict[str, tuple[str, ...]] = {**COMMANDS, **EXTRA_COMMANDS}

    def one(name: str) -> tuple[str, tuple[str, ...], CmdResult, float]:
        start = time.monotonic()
        # host.cmd caches: the checks run right after reuse these outputs instead of running again.
        res = host.cmd(name) if name in COMMANDS else run_tool(jobs[name], timeout, name)
        return name, jobs[name], res, time.monotonic() - start

    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        done = list(pool.map(one, jobs))
    return {name: (argv, res, took) for name, argv, res, took in done}


def _missing(res: CmdResult) -> bool:
    return res.text is None and not res.timed_out and bool(res.error) and res.error.endswith("not installed")


# ---- the bundle -----------------------------------------------------------------------------
class _Counting:
    """A write-only stream that counts what passes: the size of a bundle streamed to stdout.

    It has no ``name``, so gzip records none (``<stdout>`` would be a misleading file name)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.size = 0

    def write(self, data: bytes) -> int:
        self.stream.write(data)
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        self.stream.flush()


def collect(output: str, root: str | None = None, timeout: float | None = None, stream: Any = None,
            logs: list[str] | tuple[str, ...] = (), stdin: Any = None) -> Collected:
    """Write the bundle of ``root`` (default ``/``) to ``output``, or to the binary ``stream``
    when one is given (``collect -o -``; ``output`` is then only its name in the result).
    ``logs``: job logs to put under ``logs/`` (see read_log). Raises HostError, CollectError, OSError."""
    started = time.time()
    timeout = DEFAULT_TIMEOUT if timeout is None else timeout
    host = open_host(root=root, host_class=_TracingHost)
    # The logs first: a --log that cannot be read fails the command before seconds go to tools.
    job_logs = read_logs(logs, stdin=stdin)
    host.timeout = timeout
    if stream is None:
        why = not_regular(output)
        if why:
            raise OutputRefused(output, why)
    try:
        with contextlib.ExitStack() as stack:
            # Fail on an unwritable output before spending seconds on tools: the bundle goes to a
            # temp file of an unpredictable name, made exclusively beside it, renamed over it at
            # the end (fsutil.replacing). A stream is written only at the end, in one go, once
            # everything is recorded: nothing half-made reaches the reader early.
            out_f = _Counting(stream) if stream is not None else stack.enter_context(replacing(output, _file_mode(), regular_only=True))
            files, extra, recorded, failed, manifest = _record(host, timeout, job_logs, started, out_f)
            if stream is not None:
                out_f.flush()
    except NotRegularFile:  # it became one while the tools ran: left as it is
        raise OutputRefused(output, not_regular(output) or "no longer a regular file") from None
    size = out_f.size if stream is not None else os.path.getsize(output)
    return Collected(output, files + len(extra), sorted(recorded), failed, size, manifest, job_logs)


def _file_mode() -> int:
    """0666 less the umask, as open() would make the file (mkstemp makes 0600)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def _record(host: Host, timeout: float, job_logs: list[Log], started: float, out_f: Any) -> tuple:
    """Run the tools and the checks, record what they read, write the bundle to ``out_f``."""
    cmds = _run_commands(host, timeout)
    check_error = None
    check_status = None
    try:
        from rdmadoctor.runner import Options, diagnose

        diag = diagnose(Options(root=host.root, timeout=timeout), host=host)
        check_status = diag.report.get("status")
    except Exception as e:  # noqa: BLE001 - the bundle is most wanted when the checks break
        check_error = f"{type(e).__name__}: {e}"
    ops = list(host.ops)
    runtime = host.runtime.to_json()

    rec = Recorder(host.root)
    rec.fixed()
    rec.traced(ops)
    if host.root and host.root != "/":
        rec.own_process()

    extra: dict[str, bytes] = {}
    recorded, failed, missing = [], {}, []
    for name, (argv, res, took) in sorted(cmds.items()):
        if _missing(res):
            missing.append(name)
            continue
        if res.text is None:
            failed[name] = {"argv": list(argv), "error": res.error, "timed_out": res.timed_out, "seconds": round(took, 2)}
            continue
        data = res.text.encode("utf-8")
        if res.truncated or len(data) > MAX_CMD_OUTPUT:
            # Kept, and said cut: the checks read its beginning, cmd/errors.json says the rest is unknown.
            data = data[:MAX_CMD_OUTPUT]
            error = res.error if res.truncated and res.error else f"{' '.join(argv)}: {cut_message(MAX_CMD_OUTPUT)}"
            failed[name] = {"argv": list(argv), "error": error, "timed_out": False, "truncated": True, "output_recorded": True,
                            "seconds": round(took, 2)}
        elif res.error:
            # Recorded all the same: `ibstat` and `ibv_devinfo` exit non-zero with no devices.
            failed[name] = {"argv": list(argv), "error": res.error, "timed_out": False, "output_recorded": True}
        extra[f"cmd/{name}.txt"] = data
        recorded.append(name)
    env = runtime.get("env") or {}
    # os.environ holds bytes that are not UTF-8 as lone surrogates (NCCL_IB_HCA=$'mlx\xff'):
    # env.txt gets the bytes back, as `env` prints them; runtime.json escapes them ("\udcff",
    # ASCII JSON), which json.loads reads back as the same string; the manifest lists them.
    extra["cmd/env.txt"] = "".join(f"{k}={v}\n" for k, v in sorted(env.items())).encode("utf-8", "surrogateescape")
    not_utf8 = {_shown(k): _shown(v) for k, v in sorted(env.items()) if not _is_utf8(k) or not _is_utf8(v)}
    recorded.append("env")
    if failed:
        extra["cmd/errors.json"] = (json.dumps(failed, indent=2, sort_keys=True) + "\n").encode()
    extra["runtime.json"] = (json.dumps(runtime, indent=2, sort_keys=True) + "\n").encode()
    for log in job_logs:
        if log.data or not log.error:
            extra[log.name] = log.data
    absent = rec.absent()
    files = sum(1 for e in rec.entries.values() if e.kind != "dir")
    manifest = {
        "schema": "rdmadoctor.bundle/v1",
        "rdmadoctor_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "host": {"label": host.label, "kind": host.kind, "hostname": runtime.get("hostname")},
        "timeout_seconds": timeout,
        "files": files,
        "bytes_uncompressed": rec.bytes,
        "commands": sorted(recorded),
        "commands_failed": failed,
        "commands_missing": sorted(missing),
        "check_status": check_status,
        "check_error": check_error,
        "skipped": dict(sorted(rec.skipped.items())[:200]),
        "skipped_count": len(rec.skipped),
        "trimmed": rec.trimmed,
        "absent": absent,
        "size_limit_reached": rec.full,
        "logs": [log.to_json() for log in job_logs],
        **({"env_not_utf8": not_utf8} if not_utf8 else {}),
        "seconds": round(time.time() - started, 2),
    }
    extra["bundle.json"] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    _write_tar(out_f, rec.entries, extra, started, rec.read_order)
    return files, extra, recorded, failed, manifest


def _write_tar(fileobj: Any, entries: dict[str, Entry], extra: dict[str, bytes], mtime: float, order: dict[str, int]) -> None:
    # Readers derive folders from member names, so only empty folders get a member of their own
    # (an empty /sys/class/infiniband says "no devices", which is not the same as no /sys).
    parents: set[str] = set()
    for path in list(entries) + ["/" + name for name in extra]:
        parent = posixpath.dirname(path)
        while parent != "/" and parent not in parents:
            parents.add(parent)
            parent = posixpath.dirname(parent)
    # Members in the order the checks read them, the manifest and runtime facts first: a reader
    # of a .tar.gz that seeks back to an earlier member decompresses from the start again.
    never = len(order)
    with tarfile.open(fileobj=fileobj, mode="w:gz", compresslevel=6) as tf:
        for name in ("bundle.json", "runtime.json", *sorted(n for n in extra if n not in ("bundle.json", "runtime.json"))):
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.mtime = len(extra[name]), 0o644, int(mtime)
            _add(tf, ti, io.BytesIO(extra[name]))
        for path in sorted(entries, key=lambda p: (order.get(p, never), p)):
            e = entries[path]
            ti = tarfile.TarInfo(path[1:])
            ti.mtime = int(mtime)
            data = None
            if e.kind == "dir":
                if path in parents:
                    continue
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
            elif e.kind == "link":
                ti.type, ti.linkname, ti.mode = tarfile.SYMTYPE, e.target, 0o777
            else:
                ti.size, ti.mode = len(e.data), 0o644
                data = io.BytesIO(e.data)
            _add(tf, ti, data)


def _add(tf: tarfile.TarFile, ti: tarfile.TarInfo, data: Any) -> None:
    """One header block where ustar's 155+100 name split allows it (most sysfs paths are over
    100 characters; a pax header per member would double the headers a reader parses)."""
    tf.format = tarfile.USTAR_FORMAT
    try:
        tf.addfile(ti, data)
    except ValueError:  # raised before anything is written: a name or link ustar cannot hold
        tf.format = tarfile.PAX_FORMAT
        tf.addfile(ti, data)
