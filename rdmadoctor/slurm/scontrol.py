"""Every read and change of Slurm goes through ``scontrol``, each call with a deadline.

``--dry-run`` prints each change (``scontrol update nodename=n3 state=drain reason='...'``) instead
of running it; reads still run, since the decision depends on what Slurm says now.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

# How long one scontrol call may take before it is killed: slurmctld answers in milliseconds, and
# a HealthCheckProgram or Prolog that hangs on a dead controller holds the node's slurmd.
TIMEOUT_S = 20.0
# Where Slurm's clients live when the Prolog's environment has no PATH (slurmd gives it none).
FALLBACK_PATH = "/usr/bin:/usr/local/bin:/opt/slurm/bin:/usr/sbin:/bin"

# `Reason=TEXT [user@2026-11-28T19:55:42]`: the tail Slurm adds, where the reason ends.
_REASON = re.compile(r"(?:^| )Reason=(.*?) \[([^\[\]@ ]*)@(\d{4}-\d\d-\d\dT[\d:]+)\]")
_KEY = re.compile(r"(?:^| )([A-Za-z][A-Za-z0-9_]*)=")


class SlurmError(Exception):
    """scontrol missing, failing or too slow: nothing was decided from it (exit 2)."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.hint = hint


def parse_node_line(line: str) -> dict[str, str]:
    """One line of ``scontrol show node -o`` as {key: value}; ``Reason`` without Slurm's
    ``[user@time]`` tail (that is in ``ReasonUser`` / ``ReasonTime``). Values may hold blanks
    (``OS=Linux 6.1.0 #1 SMP ...``): a value runs to the next `` Key=``."""
    out: dict[str, str] = {}
    m = _REASON.search(line)
    if m:
        out["Reason"], out["ReasonUser"], out["ReasonTime"] = m.group(1), m.group(2), m.group(3)
        line = line[: m.start()] + line[m.end():]
    keys = list(_KEY.finditer(line))
    for i, k in enumerate(keys):
        end = keys[i + 1].start() if i + 1 < len(keys) else len(line)
        out.setdefault(k.group(1), line[k.end():end].strip())
    if "Reason" in out and not m:  # a reason without the tail (an older or newer scontrol)
        out["Reason"] = out["Reason"].strip()
    return out


def partitions(node: dict[str, str]) -> list[str]:
    raw = node.get("Partitions", "")
    return [p for p in raw.split(",") if p and p != "(null)"]


def state_words(node: dict[str, str]) -> set[str]:
    """``IDLE+DRAIN`` -> {"IDLE", "DRAIN"}; Slurm writes a drained node's state as IDLE+DRAIN,
    ALLOCATED+DRAIN (draining), DOWN+DRAIN, ..."""
    return {w.strip("*~#!%$@^-").upper() for w in node.get("State", "").split("+") if w}


def is_drained(node: dict[str, str]) -> bool:
    return "DRAIN" in state_words(node)


def find(path: str | None, env: dict[str, str] | None = None) -> str:
    """The scontrol to run: ``--scontrol PATH``, else the one on PATH (the Prolog's PATH is empty:
    the usual places then)."""
    found_in = (os.environ.get("PATH") if env is None else env.get("PATH")) or FALLBACK_PATH
    if path is not None:
        if not path.strip():
            raise SlurmError("--scontrol is empty", "give the path of scontrol, e.g. --scontrol /usr/bin/scontrol")
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise SlurmError(f"--scontrol {path}: not an executable file", "give the path of scontrol, e.g. --scontrol /usr/bin/scontrol")
        return path
    found = shutil.which("scontrol", path=found_in)
    if not found:
        raise SlurmError("scontrol not found on PATH (is this a Slurm node?)",
                         "install Slurm's client tools, or give --scontrol PATH")
    return found


class Scontrol:
    """One scontrol; ``echo`` receives each change as a shell line (what --dry-run prints)."""

    def __init__(self, path: str, *, timeout: float = TIMEOUT_S, dry_run: bool = False,
                 echo: Callable[[str], None] | None = None, env: dict[str, str] | None = None):
        self.path = path
        self.timeout = timeout
        self.dry_run = dry_run
        self.echo = echo or (lambda _line: None)
        self.env = env
        self.changes: list[str] = []  # what was run (or printed), in order

    def _run(self, args: list[str]) -> str:
        argv = [self.path, *args]
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout, env=self.env,
                               stdin=subprocess.DEVNULL, errors="replace")
        except subprocess.TimeoutExpired:
            raise SlurmError(f"`{self.shown(args)}` did not answer within {self.timeout:g} s",
                             "is slurmctld up (`scontrol ping`)?") from None
        except OSError as e:
            raise SlurmError(f"cannot run {self.path}: {e.strerror or e}", "give the path of scontrol with --scontrol PATH") from None
        if r.returncode != 0:
            err = (r.stderr or r.stdout).strip().splitlines()
            raise SlurmError(f"`{self.shown(args)}` failed (exit {r.returncode}): {err[-1] if err else 'no message'}",
                             "is slurmctld up (`scontrol ping`), and does this user may change nodes (root or SlurmUser)?")
        return r.stdout

    def shown(self, args: list[str]) -> str:
        return " ".join(shlex.quote(a) for a in ["scontrol", *args])

    def read(self, args: list[str]) -> str:
        return self._run(args)

    def change(self, args: list[str]) -> None:
        line = self.shown(args)
        self.changes.append(line)
        self.echo(line)
        if not self.dry_run:
            self._run(args)

    # -- reads --------------------------------------------------------------------------------
    def node(self, name: str) -> dict[str, str] | None:
        """The node as slurmctld has it, or None when it knows no such node."""
        try:
            out = self._run(["show", "node", "-o", name])
        except SlurmError as e:
            if "not found" in str(e).lower() or "invalid node name" in str(e).lower():
                return None
            raise
        for line in out.splitlines():
            if line.startswith("NodeName="):
                node = parse_node_line(line)
                if node.get("NodeName") == name:
                    return node
        return None

    def nodes(self) -> list[dict[str, str]]:
        return [parse_node_line(line) for line in self._run(["show", "node", "-o"]).splitlines() if line.startswith("NodeName=")]

    # -- changes ------------------------------------------------------------------------------
    def drain(self, node: str, reason: str) -> None:
        self.change(["update", f"nodename={node}", "state=drain", f"reason={reason}"])

    def resume(self, node: str) -> None:
        self.change(["update", f"nodename={node}", "state=resume"])

    def set_features(self, node: str, available: list[str], active: list[str]) -> None:
        self.change(["update", f"nodename={node}", f"availablefeatures={','.join(available)}",
                     f"activefeatures={','.join(active)}"])

    def requeue(self, job: str) -> None:
        self.change(["requeue", job])


def describe(node: dict[str, Any]) -> str:
    state = node.get("State") or "?"
    reason = node.get("Reason")
    return f"{state}" + (f" (reason {reason!r})" if reason else "")
