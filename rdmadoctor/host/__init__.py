"""The host under examination: a live root, a mounted root, or a collected bundle.

Probes read only through a :class:`Host`. Paths are absolute paths *inside* the host
(``/sys/class/infiniband``); symlinks are resolved inside the host too, so an absolute link in
a root mounted at ``/host`` never escapes to the container's own ``/sys``.

A bundle is a directory or a ``.tar.gz`` with the same layout as a root plus:

- ``cmd/<name>.txt``: recorded tool outputs (``cmd/ibstat.txt``, ...);
- ``runtime.json``: facts that are not files (rlimits, capabilities, ``statvfs`` of ``/dev/shm``,
  the filtered environment, hostname).

Here: Host, open_host, HostError and the directory tree (live root, --root, an unpacked bundle).
Beside it, each imported on first use: ``bundle`` (a tar read in memory), ``runtime`` (facts that
are not files), ``net`` (the network interfaces of the host's namespace: psutil, netlink, sysfs or
the bundle's record), ``tools`` (commands a live host runs), ``memory`` (a tree for tests and examples).
"""

from __future__ import annotations

import io
import json
import os
import posixpath

from rdmadoctor.host.tree import HostError, _Tree  # the trees' base, in its own module: no cycle

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any

    from rdmadoctor.host.net import NetIf
    from rdmadoctor.host.runtime import Runtime
    from rdmadoctor.host.tools import CmdResult

__all__ = [
    "COMMANDS", "DEFAULT_TIMEOUT", "ENV_NAMES", "ENV_PREFIXES", "LOGS_DIR", "MAX_BUNDLE", "MAX_LIST", "MAX_LOGS", "MAX_READ", "CmdResult", "Host",
    "HostError", "Link", "MemTree", "Runtime", "filter_env", "live_runtime", "mem_host", "open_host", "run_tool",
]

MAX_READ = 4 * 1024 * 1024  # no sysfs or proc file we read is near this; a bigger one is not ours
LOGS_DIR = "/logs"  # a bundle's job logs (`collect --log`); read in pieces, never whole
MAX_LOGS = 256
# Entries a listing gives the checks, which make facts (and often a finding) per entry: a bundle
# of 100,000 made-up devices took 936 MB. Far above a real node's longest folder the checks walk
# (/sys/bus/pci/devices with every SR-IOV function, /sys/class/net with every veth); a longer one
# gives its first MAX_LIST names, sorted, and says so in Host.notes.
MAX_LIST = 8192
DEFAULT_TIMEOUT = 5.0  # seconds a live host gives each tool (tools.COMMANDS)
_MAX_LINKS = 40  # symlinks followed in one lookup, as the kernel's MAXSYMLINKS
_MAX_PATH = 4096  # PATH_MAX
# Every name the package offers, by the module that holds it, imported on first use: `import
# rdmadoctor.host` is this file alone, and a run loads only what it touches (a live run never
# loads the tar reader, a bundle never subprocess).
_LAZY = {
    "Runtime": "runtime", "live_runtime": "runtime", "filter_env": "runtime", "ENV_PREFIXES": "runtime",
    "ENV_NAMES": "runtime",
    "COMMANDS": "tools", "CmdResult": "tools", "run_tool": "tools",
    "MemTree": "memory", "Link": "memory", "mem_host": "memory",
    "_TarTree": "bundle", "MAX_BUNDLE": "bundle", "gunzip": "bundle", "scan_tar": "bundle",
}


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value




# O_NONBLOCK: opening a FIFO planted in a bundle (proc/modules) for reading waits for a writer
# that never comes; O_NOCTTY: a tty node must not become our terminal; O_NOFOLLOW: Host resolved
# every link inside the tree, so a link here was swapped in after that and would lead outside.
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_NOFOLLOW


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
        """Content of a regular file only: a FIFO, socket or device node reads as unreadable."""
        import stat

        fd = os.open(self._p(path), _OPEN_FLAGS)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(f"not a regular file: {path}")
            f = open(fd, "rb")  # owns fd from here; O_NONBLOCK does nothing to regular files
        except BaseException:
            os.close(fd)
            raise
        with f:
            return f.read(limit)

    def read_at(self, path: str, offset: int, size: int) -> bytes:
        import stat

        fd = os.open(self._p(path), _OPEN_FLAGS)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(f"not a regular file: {path}")
            return os.pread(fd, size, offset)
        finally:
            os.close(fd)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(self._p(path))


class _TreeFile(io.RawIOBase):
    """A file of a tree as a stream, read ``read_at`` piece by piece."""

    def __init__(self, tree: _Tree, path: str):
        self._tree, self._path, self._pos = tree, path, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # a writable buffer
        data = self._tree.read_at(self._path, self._pos, len(b))
        n = len(data)
        b[:n] = data
        self._pos += n
        return n


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
        self._transcripts: dict[str, list | None] = {}
        self._reads: dict[tuple[str, int], bytes | None] = {}
        self.cut_listings: dict[str, int] = {}  # folder -> its entries, when more than MAX_LIST
        # folder -> why it could not be listed ("Permission denied"), when it is there but
        # unreadable: a check tells "absent" (a finding about the node) from "could not look".
        self.unlisted: dict[str, str] = {}
        self.notes: list[str] = list(getattr(tree, "notes", ()))  # what this host's reader left out, for the report
        # Called as on_step(path, kind, target) for every directory ("dir", None) and symlink
        # ("link", its target) that resolution walks through: collect's Recorder records them, so
        # a bundle holds exactly the path the Host took (one resolver for both).
        self.on_step: Any = None
        self._interfaces: tuple | None = None

    # ---- path resolution inside the host ------------------------------------------------
    def realpath(self, path: str) -> str | None:
        """Resolve every symlink inside the host. None when a component is missing or loops."""
        real = self._real
        if path in real:  # checks ask for the same paths many times: skip normpath on a hit
            return real[path]
        norm = posixpath.normpath("/" + path.lstrip("/"))
        if len(norm) > _MAX_PATH:
            out = None  # ENAMETOOLONG; caching every prefix of such a path would cost its square
        else:
            # Resolve the uncached ancestors top down and cache each: siblings share the walk.
            pending = []
            p = norm
            while p not in real and p != "/":
                pending.append(p)
                p = p.rpartition("/")[0] or "/"
            out = "/" if p == "/" else real[p]
            for p in reversed(pending):
                if out is not None:
                    out = self._walk(out, [p.rpartition("/")[2]])
                real[p] = out
        real[path] = out
        return out

    def _walk(self, cur: str, todo: list[str]) -> str | None:
        """Resolve the components ``todo`` (last first) from the resolved directory ``cur``.

        As the kernel does: ".." is the parent of where the walk is, and at most _MAX_LINKS
        symlinks are followed in all. Bounding depth alone let a bundle whose links name
        other links twice (``l0 -> l1/l1``, ``l1 -> l2/l2``, ...) cost 2**20 lookups.
        """
        tree = self._tree
        links = 0
        while todo:
            name = todo.pop()
            if not name or name == ".":
                continue
            if name == "..":
                cur = cur.rpartition("/")[0] or "/"
                continue
            nxt = cur + "/" + name if cur != "/" else "/" + name
            k = tree.kind(nxt)
            if k is None:
                return None
            if k != "link":
                if self.on_step is not None and k == "dir":
                    self.on_step(nxt, k, None)
                cur = nxt
                continue
            links += 1
            if links > _MAX_LINKS:
                return None
            try:
                target = tree.readlink(nxt)
            except (OSError, ValueError):
                return None
            if self.on_step is not None:
                self.on_step(nxt, k, target)
            if target.startswith("/"):
                cur = "/"
            todo.extend(reversed(target.split("/")))
        return cur

    # ---- reads ----------------------------------------------------------------------------
    def read_bytes(self, path: str, limit: int = MAX_READ, *, fresh: bool = False) -> bytes | None:
        """File content, or None when missing, unreadable, a directory or a broken link.

        ``fresh``: read the file again even if this run read it already (a port's counters,
        read several times by `check --sample`); the cache then holds the newest read."""
        key = (path, limit)
        if not fresh and key in self._reads:
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

    def read_text(self, path: str, limit: int = MAX_READ, *, fresh: bool = False) -> str | None:
        data = self.read_bytes(path, limit, fresh=fresh)
        return None if data is None else data.decode("utf-8", "replace")

    def read_value(self, path: str, *, fresh: bool = False) -> str | None:
        """A one-value sysfs attribute, stripped; None when missing or empty. ``fresh``: read it
        again, not the value this run read before (a counter)."""
        t = self.read_text(path, 65536, fresh=fresh)
        if t is None:
            return None
        t = t.strip().replace("\x00", "")
        return t or None

    def listdir(self, path: str) -> list[str]:
        """Sorted entries of a directory, at most MAX_LIST; [] when missing or unreadable (then
        ``unlisted[path]`` says why: absent and unreadable are not the same answer)."""
        self.trace.append(path)
        names = self._names(path)
        if len(names) > MAX_LIST:
            if path not in self.cut_listings:
                self.cut_listings[path] = len(names)
                self.notes.append(
                    f"{path} has {len(names)} entries; the checks read its first {MAX_LIST} of {len(names)} (sorted by name): "
                    "far more than a node has, so the bundle or root is most likely not a real node's"
                )
            del names[MAX_LIST:]
        return names

    def _names(self, path: str) -> list[str]:
        real = self.realpath(path)
        if real is None:
            return []
        try:
            return sorted(self._tree.listdir(real))
        except (FileNotFoundError, NotADirectoryError):
            return []  # gone since it was resolved, or a file: absent as a folder
        except OSError as e:
            self.unlisted.setdefault(path, e.strerror or type(e).__name__)
            return []
        except ValueError:
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
                    # The whole folder is matched (a library past the first MAX_LIST names of a
                    # big /usr/lib is still found); the matches are capped like a listing.
                    self.trace.append(base)
                    for name in self._names(base):
                        if fnmatch.fnmatchcase(name, part):
                            nxt.append(posixpath.join(base, name))
                            if len(nxt) >= MAX_LIST:
                                break
                else:
                    cand = posixpath.join(base, part)
                    if self.exists(cand) or self.readlink(cand) is not None:
                        nxt.append(cand)
                if len(nxt) >= MAX_LIST:
                    break
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

    # ---- a bundle's job logs ---------------------------------------------------------------
    def logs(self) -> list[str]:
        """The job logs a bundle carries: its regular files under ``logs/`` (``collect --log``),
        sub-folders included, sorted; at most MAX_LOGS. [] for a live host or a mounted root,
        whose /logs is not ours to read."""
        if self.kind != "bundle":
            return []
        # Not in self.trace: the trace tells `collect` what to copy from a host, and logs/ is
        # never a host's (collect takes logs from --log only).
        out: list[str] = []
        todo = [(LOGS_DIR, 0)]
        while todo and len(out) < MAX_LOGS:
            folder, depth = todo.pop()
            real_folder = self.realpath(folder)
            try:
                names = sorted(self._tree.listdir(real_folder)) if real_folder is not None else []
            except (OSError, ValueError):
                names = []
            for name in reversed(names):
                path = f"{folder}/{name}"
                real = self.realpath(path)
                if real is None:
                    continue
                kind = self._tree.kind(real)
                if kind == "dir" and depth < 4:
                    todo.append((path, depth + 1))
                elif kind == "file":
                    out.append(path)
        return sorted(out[:MAX_LOGS])

    def open_log(self, path: str):  # a binary stream
        """A job log of the bundle as a binary stream read in pieces: a log of gigabytes in a
        bundle folder never sits whole in memory. A gzipped log comes as it is stored;
        rdmadoctor.logs.reader.chunks gunzips it member by member. Raises HostError."""
        real = self.realpath(path)
        if real is None or self._tree.kind(real) != "file":
            raise HostError(f"{path}: not a file in the bundle")
        stream = io.BufferedReader(_TreeFile(self._tree, real), 1 << 20)
        try:
            head = stream.peek(2)[:2]
        except (OSError, ValueError) as e:
            raise HostError(f"{path}: cannot read it ({e})") from None
        except Exception as e:  # noqa: BLE001 - a corrupt tar member
            raise HostError(f"{path}: cannot read it ({type(e).__name__}: {e})") from None
        del head
        return stream

    # ---- non-file facts -------------------------------------------------------------------
    @property
    def runtime(self) -> Runtime:
        if self._runtime is None:
            from rdmadoctor.host.runtime import Runtime, live_runtime

            if self.live_process:
                self._runtime = live_runtime()
            else:
                raw = self.read_bytes("/runtime.json")
                try:
                    self._runtime = Runtime.from_json(json.loads(raw)) if raw else Runtime()
                except (ValueError, UnicodeDecodeError, RecursionError):  # "[[[[..." nests past the stack
                    self._runtime = Runtime()
        return self._runtime

    def interfaces(self) -> tuple[tuple[NetIf, ...] | None, str]:
        """The network interfaces of this host's network namespace (name, running, MTU, addresses,
        the speed sysfs reports) and where they came from: this process's namespace on a live host
        (psutil, else netlink), the same on a mounted root while it is the root's (else the root's
        /sys/class/net), what `collect` recorded on a bundle; None when nothing could tell.
        Read once, on first use (rdmadoctor.host.net.read_interfaces says how, per kind)."""
        if self._interfaces is None:
            from rdmadoctor.host.net import read_interfaces

            self._interfaces = read_interfaces(self)
        return self._interfaces

    def cmd(self, name: str) -> CmdResult:
        """A tool's output: ``cmd/<name>.txt`` from a bundle, or the tool run now on a live host."""
        if name in self._cmd_cache:
            return self._cmd_cache[name]
        res = self._cmd(name)
        self._cmd_cache[name] = res
        if res.truncated:
            # The checks judge the beginning they have; the report says that it is only that.
            self.notes.append(f"the output of `{name}` ({res.source}) is cut ({res.error}): the checks read only its beginning")
        return res

    def _transcript(self, rel: str, text: str | None = None) -> list | None:
        """The parts of a recorded cmd/*.txt that is a terminal transcript; None when it is not one."""
        if rel not in self._transcripts:
            from rdmadoctor.host.transcript import split

            if text is None:
                data = self.read_bytes(rel)
                text = None if data is None else _tool_text(data)
            stem = posixpath.basename(rel)[:-4]
            self._transcripts[rel] = None if text is None else split(text, stem)
        return self._transcripts[rel]

    def _from_transcripts(self, name: str, own: str) -> CmdResult | None:
        """Every part of the bundle's transcripts that is ``name``'s output (its own file first)."""
        files = [own] + [f"/cmd/{n}" for n in self.listdir("/cmd") if n.endswith(".txt") and f"/cmd/{n}" != own]
        found = [(f, p) for f in files for p in (self._transcript(f) or ()) if p.name == name]
        if not found:
            return None
        from rdmadoctor.host.tools import CmdResult

        where = ", ".join(f"{f[1:]} line {p.line - 1 if p.command else p.line} (`{p.command or name}`)" for f, p in found[:4])
        if len(found) > 4:
            where += f" and {len(found) - 4} more"
        return CmdResult(name, "\n".join(p.text for _, p in found), source=f"bundle transcript: {where}")

    def _collect_note(self, name: str) -> dict | None:
        """What collect recorded about tool ``name`` in cmd/errors.json (timed out, failed, cut)."""
        try:
            why = json.loads(self.read_bytes("/cmd/errors.json") or b"{}").get(name)
        except (ValueError, AttributeError, UnicodeDecodeError, RecursionError):
            return None
        return why if isinstance(why, dict) else None

    def _cmd(self, name: str) -> CmdResult:
        from rdmadoctor.host.tools import COMMANDS, CmdResult, run_tool

        rel = f"/cmd/{name}.txt"
        if self.kind == "bundle" or not self.live_process:
            data = self.read_bytes(rel)
            text = None if data is None else _tool_text(data)
            if text is not None and self._transcript(rel, text) is None:
                why = self._collect_note(name)
                if why is not None and why.get("truncated"):
                    # collect stopped the tool at its output cap: what is here is its beginning.
                    error = why.get("error") if isinstance(why.get("error"), str) else "output cut"
                    return CmdResult(name, text, error=f"at collect time: {error}", truncated=True, source=f"bundle:{rel[1:]}")
                return CmdResult(name, text, source=f"bundle:{rel[1:]}")
            # A terminal transcript (here or in another cmd/*.txt): the parts of this command.
            found = self._from_transcripts(name, rel)
            if found is not None:
                return found
            if text is not None:
                return CmdResult(name, None, error=f"{rel[1:]} is a terminal transcript with no `{name}` command in it")
            if data is None:
                # collect records why a tool gave nothing (timed out, failed) in cmd/errors.json.
                why = self._collect_note(name)
                if why is not None and why.get("error"):
                    return CmdResult(name, None, error=f"at collect time: {why['error']}", timed_out=bool(why.get("timed_out")))
                return CmdResult(name, None, error=f"not recorded ({rel[1:]} absent)")
            return CmdResult(name, _tool_text(data), source=f"bundle:{rel[1:]}")
        argv = COMMANDS.get(name)
        if argv is None:
            return CmdResult(name, None, error="no such command")
        res = run_tool(argv, self.timeout, name)
        if res.text is not None:
            res.text = _tool_text(res.text)
        return res


def _tool_text(data: bytes | str) -> str:
    """A tool's output as every parser reads it, recorded or run now: text without terminal escapes
    (a CUDA 13 `nvidia-smi topo -m` underlines its header with ESC[4m even into a file), so a
    bundle's verdict is the live one."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    if "\x1b" in text:
        from rdmadoctor.parsers.common import strip_escapes

        text = strip_escapes(text)
    return text


def open_host(root: str | None = None, bundle: str | None = None, *, host_class: type[Host] | None = None) -> Host:
    """The host to examine: ``bundle`` (dir or tar) if given, else ``root`` (default ``/``)."""
    cls = host_class or Host  # collect passes a subclass that also traces existence tests
    if bundle is not None:
        if os.path.isdir(bundle):
            return cls(_DirTree(os.path.abspath(bundle)), label=bundle, kind="bundle", live_process=False, root=None)
        if os.path.isfile(bundle):
            from rdmadoctor.host.bundle import _TarTree

            return cls(_TarTree(bundle), label=bundle, kind="bundle", live_process=False, root=None)
        raise HostError(_not_a_bundle(bundle))
    root = root or "/"
    if not os.path.isdir(root):
        raise HostError(f"root {root} is not a directory")
    root = os.path.abspath(root)
    kind = "live" if root == "/" else "root"
    return cls(_DirTree(root), label=root, kind=kind, live_process=True, root=root)


def _not_a_bundle(bundle: str) -> str:
    """Why ``bundle`` (neither a folder nor a regular file) cannot be read as one: absent, or what
    it is instead (/dev/null is a character device, not a missing file)."""
    try:
        mode = os.stat(bundle).st_mode
    except FileNotFoundError:
        return f"bundle {bundle} does not exist (expected a directory or a .tar.gz)"
    except OSError as e:
        return f"bundle {bundle} cannot be read: {e.strerror or e} (expected a directory or a .tar.gz)"
    from rdmadoctor.core.files import kind

    what = kind(mode)
    if what != "not a regular file":
        return f"bundle {bundle} is {what}, not a bundle (expected a directory or a .tar.gz from `rdmadoctor collect`)"
    return f"bundle {bundle} is not a regular file or a directory (expected a directory or a .tar.gz)"


class _EmptyTree(_Tree):
    """No machine at all: `rdmadoctor diagnose LOG` without --root/--bundle/--example/--live."""

    def kind(self, path: str) -> str | None:
        return None

    def readlink(self, path: str) -> str:
        raise FileNotFoundError(path)

    def read(self, path: str, limit: int) -> bytes:
        raise FileNotFoundError(path)

    def listdir(self, path: str) -> list[str]:
        raise FileNotFoundError(path)


def logs_only_host(label: str) -> Host:
    """A host with nothing on it, for judging logs alone (kind "logs")."""
    return Host(_EmptyTree(), label=label, kind="logs", live_process=False, root=None)
