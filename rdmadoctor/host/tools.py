"""Tools a live host may run (ibstat, nvidia-smi, ...), each with a timeout, and their results.

subprocess and shutil are imported only when a tool is actually run: a bundle or a sysfs-only
run never pays for them.
"""

from __future__ import annotations

import os
import time

from rdmadoctor.core.record import record

# Commands a live host may run, by the bundle name they are recorded under. Each gets a timeout:
# a hung tool (ibstat waiting on a stuck umad, nvidia-smi on a fallen-off GPU) must not hang us
# (Host.timeout, rdmadoctor.host.DEFAULT_TIMEOUT unless --timeout says otherwise).
COMMANDS: dict[str, tuple[str, ...]] = {
    "ibstat": ("ibstat",),
    "ibv_devinfo": ("ibv_devinfo", "-v"),
    "nvidia-smi-topo": ("nvidia-smi", "topo", "-m"),
    "ibdev2netdev": ("ibdev2netdev",),
    "show_gids": ("show_gids",),
    "ofed_info": ("ofed_info", "-s"),
    "lspci": ("lspci", "-vvv"),
}


@record(frozen=False)
class CmdResult:
    """A tool's output: recorded in a bundle or run now. ``text`` is None when unavailable."""

    name: str
    text: str | None
    error: str | None = None  # why there is no text, or what went wrong while running
    timed_out: bool = False
    source: str = ""  # "bundle:cmd/ibstat.txt" or "ran: ibstat"


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
