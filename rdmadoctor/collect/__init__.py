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

The package, one module per job: ``logs`` (job logs, bounded), ``recorder`` (which files of the
root go in, the Recorder and the tracing Host), ``tools`` (the tools' outputs) and ``bundle``
(the manifest and the tar); here, :func:`collect` and what callers import.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Any

from rdmadoctor.collect.bundle import Counting, write_bundle
from rdmadoctor.collect.logs import LOG_HEAD, LOG_TAIL, MAX_LOG_BYTES, CollectError, Log, read_log, read_logs
from rdmadoctor.collect.recorder import (
    DPKG_STATUS,
    ETC_DIRS,
    ETC_FILES,
    LIB_DIRS,
    LIB_PREFIXES,
    MAX_BYTES,
    MAX_CONFIG,
    MAX_FILE,
    MAX_FILES,
    MODULES,
    NET_FILES,
    NET_LINKS,
    PCI_FILES,
    PCI_LINKS,
    PROC_FILES,
    SYS_FILES,
    Entry,
    Recorder,
    TracingHost,
)
from rdmadoctor.collect.tools import EXTRA_COMMANDS, MAX_CMD_OUTPUT, by_reason
from rdmadoctor.host import DEFAULT_TIMEOUT, open_host
from rdmadoctor.publish.fsutil import NotRegularFile, not_regular, replacing

__all__ = [
    "DPKG_STATUS", "ETC_DIRS", "ETC_FILES", "EXTRA_COMMANDS", "LIB_DIRS", "LIB_PREFIXES", "LOG_HEAD", "LOG_TAIL", "MAX_BYTES",
    "MAX_CMD_OUTPUT", "MAX_CONFIG", "MAX_FILE", "MAX_FILES", "MAX_LOG_BYTES", "MODULES", "NET_FILES", "NET_LINKS",
    "PCI_FILES", "PCI_LINKS", "PROC_FILES", "SYS_FILES", "CollectError", "Collected", "Entry", "Log", "OutputRefused",
    "Recorder", "TracingHost", "collect", "read_log", "read_logs",
]


class OutputRefused(Exception):
    """``-o`` names something that is not a regular file (a symlink, a device, a FIFO): a bundle
    replaces a regular file or makes a new one, never what a link points at or a device node."""

    def __init__(self, output: str, what: str):
        super().__init__(f"{output} is {what}")
        self.output, self.what = output, what


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
            text += f", {len(partial)} of them incomplete or with an error ({by_reason(partial)})"
        if lost:
            text += f"; not recorded: {by_reason(lost)}"
        return text


def collect(output: str, root: str | None = None, timeout: float | None = None, stream: Any = None,
            logs: list[str] | tuple[str, ...] = (), stdin: Any = None) -> Collected:
    """Write the bundle of ``root`` (default ``/``) to ``output``, or to the binary ``stream``
    when one is given (``collect -o -``; ``output`` is then only its name in the result).
    ``logs``: job logs to put under ``logs/`` (see read_log). Raises HostError, CollectError, OSError."""
    started = time.time()
    timeout = DEFAULT_TIMEOUT if timeout is None else timeout
    # open_host makes a host_class when no bundle is given; its signature says only Host.
    host: TracingHost = open_host(root=root, host_class=TracingHost)  # type: ignore[assignment]
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
            out_f = Counting(stream) if stream is not None else stack.enter_context(replacing(output, _file_mode(), regular_only=True))
            files, extra, recorded, failed, manifest = write_bundle(host, timeout, job_logs, started, out_f)
            if stream is not None:
                out_f.flush()
    except NotRegularFile:  # it became one while the tools ran: left as it is
        raise OutputRefused(output, not_regular(output) or "no longer a regular file") from None
    size = out_f.size if isinstance(out_f, Counting) else os.path.getsize(output)  # Counting: the stream
    return Collected(output, files + len(extra), sorted(recorded), failed, size, manifest, job_logs)


def _file_mode() -> int:
    """0666 less the umask, as open() would make the file (mkstemp makes 0600)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask
