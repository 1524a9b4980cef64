"""The host under examination: a live root, a mounted root, or a collected bundle.

Probes read only through a :class:`Host`. Paths are absolute paths *inside* the host
(``/sys/class/infiniband``); symlinks are resolved inside the host too, so an absolute link in
a root mounted at ``/host`` never escapes to the container's own ``/sys``.

A bundle is a directory or a ``.tar.gz`` with the same layout as a root plus:

- ``cmd/<name>.txt``: recorded tool outputs (``cmd/ibstat.txt``, ...);
- ``runtime.json``: facts that are not files (rlimits, capabilities, ``statvfs`` of ``/dev/shm``,
  the filtered environment, hostname).
"""

from __future__ import annotations

import json
import os
import posixpath
import time
from rdmadoctor.core.record import field, record
TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any

# Commands a live host may run, by the bundle name they are recorded under. Each gets a timeout:
# a hung tool (ibstat waiting on a stuck umad, nvidia-smi on a fallen-off GPU) must not hang us.
COMMANDS: dict[str, tuple[str, ...]] = {
    "ibstat": ("ibstat",),
    "ibv_devinfo": ("ibv_devinfo", "-v"),
    "nvidia-smi-topo": ("nvidia-smi", "topo", "-m"),
    "ibdev2netdev": ("ibdev2netdev",),
    "show_gids": ("show_gids",),
    "ofed_info": ("ofed_info", "-s"),
    "lspci": ("lspci", "-vvv"),
}
DEFAULT_TIMEOUT = 5.0
MAX_READ = 4 * 1024 * 1024  # no sysfs or proc file we read is near this; a bigger one is not ours
_MAX_LINKS = 40
MAX_BUNDLE = 512 * 1024 * 1024  # unpacked; a collected bundle is a few MiB


def _bounded(f) -> bytes:
    data = f.read(MAX_BUNDLE + 1)
    if len(data) > MAX_BUNDLE:
        raise HostError(f"bundle is larger than {MAX_BUNDLE >> 20} MiB unpacked; not a rdmadoctor bundle")
    return data


def _gunzip(raw: bytes) -> bytes:
    """Every member of a gzip stream, at most MAX_BUNDLE + 1 bytes (zlib alone: gzip costs an import)."""
    import zlib

    out: list[bytes] = []
    total = 0
    while raw:
        d = zlib.decompressobj(31)
        # Output stops at the cap; the caller refuses anything longer than MAX_BUNDLE.
        chunk = d.decompress(raw, MAX_BUNDLE + 1 - total)
        out.append(chunk)
        total += len(chunk)
        if total > MAX_BUNDLE:
            break
        if not d.eof:
            raise EOFError("the gzip stream ends before its last member does (a truncated download?)")
        raw = d.unused_data.lstrip(b"\0")  # members may be followed by zero padding
    return b"".join(out)


# Environment variables that matter to an RDMA job; `collect` keeps only these.
ENV_PREFIXES = ("NCCL_", "UCX_", "MASTER_", "VC_", "OMPI_", "PMIX_", "RDMADOCTOR_")
ENV_NAMES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "CUDA_VISIBLE_DEVICES", "NODE_NAME", "HOSTNAME", "HOME")  # HOME: ~/.nccl.conf


def filter_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(ENV_PREFIXES) or k in ENV_NAMES}


class HostError(Exception):
    """The host (root, bundle) cannot be used at all; a usage error, exit code 2."""


@record(frozen=False)
class CmdResult:
    """A tool's output: recorded in a bundle or run now. ``text`` is None when unavailable."""

    name: str
    text: str | None
    error: str | None = None  # why there is no text, or what went wrong while running
    timed_out: bool = False
    source: str = ""  # "bundle:cmd/ibstat.txt" or "ran: ibstat"


@record(frozen=False)
class Runtime:
    """Facts about the running process (or as recorded in a bundle). None = unknown."""

    memlock_soft: int | None | str = "unknown"  # bytes; None = unlimited; "unknown"
    memlock_hard: int | None | str = "unknown"
    cap_eff: int | None = None
    shm_size: int | None = None
    shm_free: int | None = None
    env: dict[str, str] | None = None
    hostname: str | None = None
    in_container: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "memlock_soft": self.memlock_soft,
            "memlock_hard": self.memlock_hard,
            "cap_eff": self.cap_eff,
            "shm_size": self.shm_size,
            "shm_free": self.shm_free,
            "env": self.env,
            "hostname": self.hostname,
            "in_container": self.in_container,
        }

    @classmethod
    def from_json(cls, data: Any) -> "Runtime":
        if not isinstance(data, dict):
            return cls()

        def limit(v: Any) -> int | None | str:
            if v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
                return v
            return "unknown"

        def num(v: Any) -> int | None:
            return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None

        env = data.get("env")
        if isinstance(env, dict):
            env = {str(k): str(v) for k, v in env.items()}
        else:
            env = None
        ic = data.get("in_container")
        return cls(
            memlock_soft=limit(data.get("memlock_soft", "unknown")),
            memlock_hard=limit(data.get("memlock_hard", "unknown")),
            cap_eff=num(data.get("cap_eff")),
            shm_size=num(data.get("shm_size")),
            shm_free=num(data.get("shm_free")),
            env=env,
            hostname=data.get("hostname") if isinstance(data.get("hostname"), str) else None,
            in_container=ic if isinstance(ic, bool) else None,
        )


def live_runtime() -> Runtime:
    import resource

    rt = Runtime()
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        inf = resource.RLIM_INFINITY
        rt.memlock_soft = None if soft == inf else soft
        rt.memlock_hard = None if hard == inf else hard
    except (OSError, ValueError):
        pass
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f.read().decode("ascii", "replace").splitlines():
                if line.startswith("CapEff:"):
                    rt.cap_eff = int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    try:
        st = os.statvfs("/dev/shm")
        rt.shm_size = st.f_frsize * st.f_blocks
        rt.shm_free = st.f_frsize * st.f_bavail
    except OSError:
        pass
    rt.env = filter_env(dict(os.environ))
    try:
        rt.hostname = os.uname().nodename
    except OSError:
        pass
    rt.in_container = os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv") or (
        "KUBERNETES_SERVICE_HOST" in os.environ
    )
    return rt


class _Tree:
    """Primitive access to one tree of files. Paths are normalised, absolute, unresolved."""

    def kind(self, path: str) -> str | None:  # "file" | "dir" | "link" | None
        raise NotImplementedError

    def readlink(self, path: str) -> str:
        raise NotImplementedError

    def read(self, path: str, limit: int) -> bytes:
        raise NotImplementedError

    def listdir(self, path: str) -> list[str]:
        raise NotImplementedError


class _DirTree(_Tree):
    def __init__(self, root: str):
        self.root = root.rstrip("/") or "/"

    def _p(self, path: str) -> str:
        return self.root + path if self.root != "/" else path

    def kind(self, path: str) -> str | None:
        import stat

        try:
            m = os.lstat(self._p(path)).st_mode
        except (OSError, ValueError):
            return None
        if stat.S_ISLNK(m):
            return "link"
        if stat.S_ISDIR(m):
            return "dir"
        return "file"

    def readlink(self, path: str) -> str:
        return os.readlink(self._p(path))

    def read(self, path: str, limit: int) -> bytes:
        with open(self._p(path), "rb") as f:
            return f.read(limit)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(self._p(path))


class _TarTree(_Tree):
    """A tar bundle (plain, .gz, .bz2, .xz), unpacked in memory, never on disk."""

    def __init__(self, path: str):
        import io

        # Decompress once into memory: reading members of a .tar.gz one by one seeks backwards in
        # the gzip stream, which restarts decompression each time (0.4 s for a 40 KB bundle).
        try:
            with open(path, "rb") as f:
                raw = f.read(MAX_BUNDLE + 1)
            if raw[:2] == b"\x1f\x8b":
                raw = _gunzip(raw)
            elif raw[:3] == b"BZh":
                import bz2

                raw = _bounded(bz2.BZ2File(io.BytesIO(raw)))
            elif raw[:6] == b"\xfd7zXZ\x00":
                import lzma

                raw = _bounded(lzma.LZMAFile(io.BytesIO(raw)))
            if len(raw) > MAX_BUNDLE:
                raise HostError(f"bundle {path} is larger than {MAX_BUNDLE >> 20} MiB unpacked; not a rdmadoctor bundle")
            try:
                entries = _scan_tar(raw)
            except ValueError:
                entries = _scan_tar_slow(raw)  # something our reader does not know: let tarfile try
        except HostError:
            raise
        except Exception as e:  # noqa: BLE001 - OSError, tarfile/zlib/lzma errors: a corrupt archive
            raise HostError(f"cannot read bundle {path}: {type(e).__name__}: {e}") from e
        self._raw = raw
        self._members: dict[str, tuple[str, int, int, str]] = {}
        self._children: dict[str, set[str]] = {"/": set()}
        tops = {n.split("/", 1)[0] for n, *_ in entries if n}
        # A bundle made with `tar czf x.tar.gz bundle/` has one top folder; look through it.
        prefix = ""
        if len(tops) == 1:
            top = next(iter(tops))
            if top not in ("sys", "proc", "etc", "dev", "cmd", "var", "usr", "lib", "runtime.json", "bundle.json"):
                prefix = "/" + top
        members, children = self._members, self._children
        plen = len(prefix)
        for name, kind, off, size, link in entries:
            p = "/" + name
            # normpath costs more than the rest of the loop; tar and collect write clean names.
            if "//" in p or "/." in p or p.endswith("/"):
                p = posixpath.normpath(p)
            if prefix:
                if not p.startswith(prefix + "/"):
                    continue
                p = p[plen:]
            members[p] = (kind, off, size, link)
            child = p
            while child != "/":
                parent, _, base = child.rpartition("/")
                parent = parent or "/"
                kids = children.get(parent)
                if kids is not None:
                    kids.add(base)
                    break
                children[parent] = {base}
                child = parent

    def kind(self, path: str) -> str | None:
        m = self._members.get(path)
        if m is None:
            return "dir" if path in self._children else None
        return m[0] if m[0] != "hard" else "file"

    def readlink(self, path: str) -> str:
        m = self._members.get(path)
        if m is None or m[0] != "link":
            raise OSError(f"not a symlink: {path}")
        return m[3]

    def read(self, path: str, limit: int) -> bytes:
        m = self._members.get(path)
        for _ in range(8):  # a hard link names its target's data
            if m is None or m[0] != "hard":
                break
            m = self._members.get(posixpath.normpath("/" + m[3]))
        if m is None or m[0] != "file":
            raise FileNotFoundError(path)
        _, off, size, _ = m
        return self._raw[off : off + min(size, limit)]

    def listdir(self, path: str) -> list[str]:
        if path not in self._children:
            if self.kind(path) == "dir":
                return []
            raise NotADirectoryError(path)
        return sorted(self._children[path])


_TAR_KINDS = {b"0": "file", b"\0": "file", b"7": "file", b"1": "hard", b"2": "link", b"3": "file", b"4": "file", b"5": "dir"}


def _octal(field: bytes) -> int:
    text = field.split(b"\0", 1)[0].strip()
    return int(text, 8) if text else 0


def _scan_tar(raw: bytes) -> list[tuple[str, str, int, int, str]]:
    """Index a tar (ustar, GNU long names, pax paths): (name, kind, data offset, size, link target).

    tarfile builds a TarInfo per member and checks every field: 80 ms for a 2000-member bundle,
    most of a `check` run. This reads only what a bundle needs and raises ValueError on anything
    else, and the caller falls back to tarfile.
    """
    out = []
    off, n = 0, len(raw)
    if n < 512:
        raise ValueError("shorter than one tar header")
    long_name = long_link = None
    while off + 512 <= n:
        hdr = raw[off : off + 512]
        if hdr[0] == 0 and hdr.count(0) == 512:
            break
        if not hdr[257:262] == b"ustar":
            raise ValueError("not a ustar header")
        try:
            size = int(hdr[124:135], 8)  # 11 octal digits then NUL or space, as tar writes them
        except ValueError:
            size = _octal(hdr[124:136])
        flag = hdr[156:157]
        data = off + 512
        off = data + (size + 511) // 512 * 512
        if off > n:
            raise ValueError("truncated member")
        if flag in (b"x", b"L", b"K"):
            body = raw[data : data + size]
            if flag == b"L":
                long_name = body.rstrip(b"\0").decode("utf-8", "surrogateescape")
            elif flag == b"K":
                long_link = body.rstrip(b"\0").decode("utf-8", "surrogateescape")
            else:
                pos = 0
                while pos < len(body):
                    length = int(body[pos : body.index(b" ", pos)])
                    key, _, value = body[body.index(b" ", pos) + 1 : pos + length - 1].partition(b"=")
                    if key == b"path":
                        long_name = value.decode("utf-8", "surrogateescape")
                    elif key == b"linkpath":
                        long_link = value.decode("utf-8", "surrogateescape")
                    pos += length
            continue
        if flag == b"g":
            continue
        name = long_name or (
            (hdr[345:500].split(b"\0", 1)[0] + b"/" if hdr[345] else b"") + hdr[0:100].split(b"\0", 1)[0]
        ).decode("utf-8", "surrogateescape")
        link = long_link or hdr[157:257].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
        long_name = long_link = None
        kind = _TAR_KINDS.get(flag)
        if kind is None:
            continue  # fifos and the like: nothing a check reads
        if kind == "file" and flag in (b"3", b"4"):
            size = 0  # device nodes recorded by collect: they exist, they have no content
        out.append((name.lstrip("./") if name.startswith("./") else name.lstrip("/"), kind, data, size, link))
    return out


def _scan_tar_slow(raw: bytes) -> list[tuple[str, str, int, int, str]]:
    import io
    import tarfile

    out = []
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tf:
        for m in tf.getmembers():
            kind = "link" if m.issym() else "hard" if m.islnk() else "dir" if m.isdir() else "file" if (m.isfile() or m.ischr() or m.isblk()) else None
            if kind is None:
                continue
            size = m.size if m.isfile() else 0
            out.append((m.name.lstrip("./") if m.name.startswith("./") else m.name.lstrip("/"), kind, m.offset_data, size, m.linkname))
    return out


class Host:
    """Read-only view of a machine. Construct with :func:`open_host`."""

    def __init__(self, tree: _Tree, *, label: str, kind: str, live_process: bool, root: str | None):
        self._tree = tree
        self.label = label  # what to call it in the report: "/" or "/host" or "bundle.tar.gz"
        self.kind = kind  # "live" | "root" | "bundle"
        self.live_process = live_process  # runtime facts and tools come from this process
        self.root = root
        self._real: dict[str, str | None] = {}
        self._runtime: Runtime | None = None
        self.timeout = DEFAULT_TIMEOUT
        self.trace: list[str] = []  # every path and command read, for `collect`
        self._cmd_cache: dict[str, CmdResult] = {}
        self._reads: dict[tuple[str, int], bytes | None] = {}

    # ---- path resolution inside the host ------------------------------------------------
    def realpath(self, path: str) -> str | None:
        """Resolve every symlink inside the host. None when a component is missing or loops."""
        real = self._real
        if path in real:  # checks ask for the same paths many times: skip normpath on a hit
            return real[path]
        norm = posixpath.normpath("/" + path.lstrip("/"))
        if norm in real:
            out = real[norm]
        else:
            out = real[norm] = self._resolve(norm, 0)
        real[path] = out
        return out

    def _resolve(self, path: str, depth: int) -> str | None:
        if depth > _MAX_LINKS:
            return None
        if path == "/":
            return "/"
        parent, _, name = path.rpartition("/")  # path is normalised and absolute
        parent = parent or "/"
        rparent = self.realpath(parent) if depth == 0 else self._resolve(parent, depth + 1)
        if rparent is None:
            return None
        cur = rparent + "/" + name if rparent != "/" else "/" + name
        k = self._tree.kind(cur)
        if k is None:
            return None
        if k != "link":
            return cur
        try:
            target = self._tree.readlink(cur)
        except (OSError, ValueError):
            return None
        nxt = posixpath.normpath(target if target.startswith("/") else posixpath.join(rparent, target))
        return self._resolve(nxt, depth + 1)

    # ---- reads ----------------------------------------------------------------------------
    def read_bytes(self, path: str, limit: int = MAX_READ) -> bytes | None:
        """File content, or None when missing, unreadable, a directory or a broken link."""
        key = (path, limit)
        if key in self._reads:
            return self._reads[key]
        self.trace.append(path)
        data: bytes | None = None
        real = self.realpath(path)
        if real is not None:
            try:
                data = self._tree.read(real, limit)
            except (OSError, ValueError, EOFError):
                pass
            except Exception:  # noqa: BLE001 - a corrupt tar member (zlib, tarfile errors) is unreadable
                pass
        # Several checks read the same attributes (PCI class and vendor, port state); a run sees
        # one moment of the host, so each file is read once.
        self._reads[key] = data
        return data

    def read_text(self, path: str, limit: int = MAX_READ) -> str | None:
        data = self.read_bytes(path, limit)
        return None if data is None else data.decode("utf-8", "replace")

    def read_value(self, path: str) -> str | None:
        """A one-value sysfs attribute, stripped; None when missing or empty."""
        t = self.read_text(path, 65536)
        if t is None:
            return None
        t = t.strip().replace("\x00", "")
        return t or None

    def listdir(self, path: str) -> list[str]:
        """Sorted entries of a directory; [] when missing or unreadable."""
        self.trace.append(path)
        real = self.realpath(path)
        if real is None:
            return []
        try:
            return sorted(self._tree.listdir(real))
        except (OSError, ValueError):
            return []

    def exists(self, path: str) -> bool:
        return self.realpath(path) is not None

    def is_dir(self, path: str) -> bool:
        real = self.realpath(path)
        return real is not None and self._tree.kind(real) == "dir"

    def readlink(self, path: str) -> str | None:
        path = posixpath.normpath("/" + path.lstrip("/"))
        parent = self.realpath(posixpath.dirname(path))
        if parent is None:
            return None
        p = posixpath.join(parent, posixpath.basename(path))
        if self._tree.kind(p) != "link":
            return None
        try:
            return self._tree.readlink(p)
        except (OSError, ValueError):
            return None

    def glob(self, pattern: str) -> list[str]:
        """fnmatch-style glob over host paths (no ``**``). Sorted."""
        import fnmatch

        parts = [p for p in pattern.split("/") if p]
        found = ["/"]
        for part in parts:
            nxt = []
            magic = any(c in part for c in "*?[")
            for base in found:
                if magic:
                    for name in self.listdir(base):
                        if fnmatch.fnmatchcase(name, part):
                            nxt.append(posixpath.join(base, name))
                else:
                    cand = posixpath.join(base, part)
                    if self.exists(cand) or self.readlink(cand) is not None:
                        nxt.append(cand)
            found = nxt
        return sorted(found)

    def open_rw(self, path: str) -> str | None:
        """Try to open a device node read-write (live hosts only). None on success, else why."""
        if not self.live_process:
            return "not checked (not a live host)"
        if self.kind != "live":
            # A mounted root's device nodes (the DaemonSet's /host/dev) are the node's: whether a
            # pod may open them is its device plugin's grant, not this container's.
            return "not checked (a device node of a mounted root)"
        full = (self.root.rstrip("/") if self.root and self.root != "/" else "") + path
        try:
            fd = os.open(full, os.O_RDWR)
        except OSError as e:
            return e.strerror or str(e)
        os.close(fd)
        return None

    # ---- non-file facts -------------------------------------------------------------------
    @property
    def runtime(self) -> Runtime:
        if self._runtime is None:
            if self.live_process:
                self._runtime = live_runtime()
            else:
                raw = self.read_bytes("/runtime.json")
                try:
                    self._runtime = Runtime.from_json(json.loads(raw)) if raw else Runtime()
                except (ValueError, UnicodeDecodeError):
                    self._runtime = Runtime()
        return self._runtime

    def cmd(self, name: str) -> CmdResult:
        """A tool's output: ``cmd/<name>.txt`` from a bundle, or the tool run now on a live host."""
        if name in self._cmd_cache:
            return self._cmd_cache[name]
        res = self._cmd(name)
        self._cmd_cache[name] = res
        return res

    def _cmd(self, name: str) -> CmdResult:
        rel = f"/cmd/{name}.txt"
        if self.kind == "bundle" or not self.live_process:
            data = self.read_bytes(rel)
            if data is None:
                # collect records why a tool gave nothing (timed out, failed) in cmd/errors.json.
                try:
                    why = json.loads(self.read_bytes("/cmd/errors.json") or b"{}").get(name)
                except (ValueError, AttributeError, UnicodeDecodeError):
                    why = None
                if isinstance(why, dict) and why.get("error"):
                    return CmdResult(name, None, error=f"at collect time: {why['error']}", timed_out=bool(why.get("timed_out")))
                return CmdResult(name, None, error=f"not recorded ({rel[1:]} absent)")
            return CmdResult(name, data.decode("utf-8", "replace"), source=f"bundle:{rel[1:]}")
        argv = COMMANDS.get(name)
        if argv is None:
            return CmdResult(name, None, error="no such command")
        return run_tool(argv, self.timeout, name)


def run_tool(argv: tuple[str, ...], timeout: float, name: str | None = None) -> CmdResult:
    import shutil  # with subprocess, ~3 ms of imports a bundle or a sysfs-only run never needs
    import subprocess

    name = name or argv[0]
    exe = shutil.which(argv[0])
    if exe is None:
        return CmdResult(name, None, error=f"{argv[0]} not installed")
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            (exe, *argv[1:]),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as e:
        return CmdResult(name, None, error=f"cannot run {argv[0]}: {e}")
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        import signal

        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        out, _ = proc.communicate()
        took = time.monotonic() - start
        return CmdResult(
            name,
            None,
            error=f"{' '.join(argv)} did not finish within {timeout:g} s (killed after {took:.1f} s)",
            timed_out=True,
        )
    text = out.decode("utf-8", "replace")
    err = None if proc.returncode == 0 else f"{' '.join(argv)} exited with {proc.returncode}"
    return CmdResult(name, text, error=err, source=f"ran: {' '.join(argv)}")


def open_host(root: str | None = None, bundle: str | None = None, *, host_class: type[Host] | None = None) -> Host:
    """The host to examine: ``bundle`` (dir or tar) if given, else ``root`` (default ``/``)."""
    cls = host_class or Host  # collect passes a subclass that also traces existence tests
    if bundle is not None:
        if os.path.isdir(bundle):
            return cls(_DirTree(os.path.abspath(bundle)), label=bundle, kind="bundle", live_process=False, root=None)
        if os.path.isfile(bundle):
            return cls(_TarTree(bundle), label=bundle, kind="bundle", live_process=False, root=None)
        raise HostError(f"bundle {bundle} does not exist (expected a directory or a .tar.gz)")
    root = root or "/"
    if not os.path.isdir(root):
        raise HostError(f"root {root} is not a directory")
    root = os.path.abspath(root)
    kind = "live" if root == "/" else "root"
    return cls(_DirTree(root), label=root, kind=kind, live_process=True, root=root)


@record(frozen=False)
class MemTree(_Tree):
    """An in-memory tree for tests and generated examples: path -> bytes, or ``Link(target)``."""

    files: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._children: dict[str, set[str]] = {"/": set()}
        norm = {}
        for p, v in self.files.items():
            p = posixpath.normpath("/" + p.lstrip("/"))
            norm[p] = v
            child = p
            while child != "/":
                parent = posixpath.dirname(child)
                self._children.setdefault(parent, set()).add(posixpath.basename(child))
                child = parent
        self.files = norm

    def kind(self, path: str) -> str | None:
        v = self.files.get(path, None)
        if v is None:
            return "dir" if path in self._children else None
        if isinstance(v, Link):
            return "link"
        return "file"

    def readlink(self, path: str) -> str:
        v = self.files.get(path)
        if not isinstance(v, Link):
            raise OSError(path)
        return v.target

    def read(self, path: str, limit: int) -> bytes:
        v = self.files.get(path)
        if v is None or isinstance(v, Link):
            raise FileNotFoundError(path)
        if isinstance(v, str):
            v = v.encode()
        if isinstance(v, BaseException):
            raise v
        return v[:limit]

    def listdir(self, path: str) -> list[str]:
        if path not in self._children:
            raise NotADirectoryError(path)
        return sorted(self._children[path])


@record
class Link:
    target: str


def mem_host(files: dict[str, Any], label: str = "memory") -> Host:
    return Host(MemTree(files), label=label, kind="bundle", live_process=False, root=None)
