"""A real Slurm on this machine for the tests: its own munged, slurmctld and five slurmd (or the
nodes a test names).

Debian's slurmctld, slurmd, slurm-client and munge (scripts/test.sh installs them as root). Every
file lives in one temp dir: the munge key and socket, slurm.conf, the state and spool dirs, the
logs. The five nodes (n1..n5) are five ``slurmd -N nX`` on this host, each on its own port at
127.0.0.1 (``NodeName=nX NodeHostname=<this host> NodeAddr=127.0.0.1 Port=P``). Every daemon runs
in the foreground (-D / -F) as a child of the test process, so it is stopped by its own PID, and
nothing else is touched. ``SLURM_CONF`` points the clients (scontrol, sinfo, sbatch) at it.

Which facts each fake node has: the file ``facts/<node>`` in the temp dir names a shipped example
(hgx-h100-ib, roce-node, broken-pod); the Prolog and health wrappers read it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

BINARIES = ("munged", "mungekey", "slurmctld", "slurmd", "scontrol", "sinfo", "sbatch", "squeue")
NODES = tuple(f"n{i}" for i in range(1, 6))
CLUSTER = "rdt"
PARTITION = "debug"


def unavailable() -> str | None:
    """Why a real Slurm cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "a real Slurm needs root (slurmd runs jobs as their users; scripts/test.sh runs the suite as root)"
    missing = [b for b in BINARIES if shutil.which(b) is None and not Path("/usr/sbin", b).exists()]
    if missing:
        return (f"Slurm/munge not installed ({', '.join(missing)} missing): "
                "apt-get install slurmctld slurmd slurm-client munge (scripts/test.sh does)")
    return None


def _binary(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def free_ports(n: int) -> list[int]:
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def wait_for(condition, timeout: float = 90.0, interval: float = 0.5, what: str = "a condition"):
    """Poll ``condition()`` until it returns something true; its value, or AssertionError."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last: {last!r})")


class SlurmCluster:
    """``nodes``: the slurmd to run (n1..n5 by default). ``health_interval``: slurm.conf's
    HealthCheckInterval (0: slurmd never runs the health script itself; the tests call it);
    ``health_node_state``: its HealthCheckNodeState (Slurm's default when None)."""

    def __init__(self, base: Path, nodes: tuple[str, ...] = NODES, health_interval: int = 0,
                 health_node_state: str | None = None):
        self.base = base
        self.nodes = tuple(nodes)
        self.health_interval = health_interval
        self.health_node_state = health_node_state
        self.procs: list[subprocess.Popen] = []
        self.conf = base / "slurm.conf"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))
        for k in [k for k in self.env if k.startswith(("SLURM_", "SLURMD_")) and k != "SLURM_CONF"]:
            del self.env[k]
        self.facts = base / "facts"
        self.host = socket.gethostname().split(".")[0]

    # -- setup -------------------------------------------------------------------------------
    def write(self, prolog: str, health: str) -> None:
        b = self.base
        for d in ("state", "log", "facts", *(f"spool/{n}" for n in self.nodes)):
            (b / d).mkdir(parents=True, exist_ok=True)
        for n in self.nodes:
            self.set_facts(n, "hgx-h100-ib")
        ctld, *node_ports = free_ports(1 + len(self.nodes))
        for name, text in (("prolog.sh", prolog), ("health.sh", health)):
            (b / name).write_text(text)
            (b / name).chmod(0o755)
        nodes = "\n".join(
            f"NodeName={n} NodeHostname={self.host} NodeAddr=127.0.0.1 Port={p} CPUs=1 State=UNKNOWN"
            for n, p in zip(self.nodes, node_ports)
        )
        node_state = f"HealthCheckNodeState={self.health_node_state}\n" if self.health_node_state else ""
        self.conf.write_text(f"""\
ClusterName={CLUSTER}
SlurmctldHost={self.host}
SlurmctldPort={ctld}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# Its own munged; cred_expire bounds how long a requeued batch job waits before it may start
# again (Slurm's default is 120 s).
AuthInfo=socket={b}/munge.sock,cred_expire=10
StateSaveLocation={b}/state
SlurmdSpoolDir={b}/spool/%n
SlurmctldPidFile={b}/slurmctld.pid
SlurmdPidFile={b}/slurmd.%n.pid
SlurmctldLogFile={b}/log/slurmctld.log
SlurmdLogFile={b}/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/linear
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=20
MessageTimeout=20
InactiveLimit=0
MinJobAge=600
KillWait=2
Waittime=0
PrologFlags=Alloc
Prolog={b}/prolog.sh
SchedulerParameters=nohold_on_prolog_fail
HealthCheckProgram={b}/health.sh
HealthCheckInterval={self.health_interval}
{node_state}{nodes}
PartitionName={PARTITION} Nodes={",".join(self.nodes)} Default=YES MaxTime=INFINITE State=UP
""")

    def set_facts(self, node: str, example: str) -> None:
        (self.facts / node).write_text(example + "\n")

    def _start(self, argv: list[str], name: str) -> subprocess.Popen:
        out = open(self.base / "log" / f"{name}.out", "ab")
        try:
            p = subprocess.Popen(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 cwd=self.base, start_new_session=True)
        finally:
            out.close()
        self.procs.append(p)
        return p

    def start(self) -> None:
        b = self.base
        key = b / "munge.key"
        subprocess.run([_binary("mungekey"), "--create", f"--keyfile={key}"], check=True, capture_output=True, timeout=30)
        key.chmod(0o400)
        self._start([_binary("munged"), "--foreground", "--force", f"--socket={b}/munge.sock", f"--key-file={key}",
                     f"--pid-file={b}/munged.pid", f"--log-file={b}/log/munged.log", f"--seed-file={b}/munged.seed"],
                    "munged")
        wait_for(lambda: (b / "munge.sock").exists(), 30, 0.1, "munged's socket")
        # -i: ignore a state from an earlier run (there is none: the dir is new).
        self._start([_binary("slurmctld"), "-D", "-i", "-f", str(self.conf)], "slurmctld")
        wait_for(lambda: self.run(["scontrol", "ping"], check=False).stdout.count("UP") >= 1, 60, 0.5, "slurmctld to answer")
        for n in self.nodes:
            self._start([_binary("slurmd"), "-D", "-N", n, "-f", str(self.conf)], f"slurmd.{n}")
        wait_for(lambda: all(self.state(n) == "IDLE" for n in self.nodes), 90, 0.5,
                 f"all {len(self.nodes)} nodes idle")

    def stop(self) -> None:
        # slurmd first (they talk to slurmctld on the way out), then slurmctld, then munged.
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in reversed(self.procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        self.procs.clear()

    # -- clients ----------------------------------------------------------------------------
    def run(self, argv: list[str], check: bool = True, env: dict | None = None, timeout: float = 60):
        argv = [shutil.which(argv[0]) or argv[0], *argv[1:]]
        r = subprocess.run(argv, env=dict(self.env, **(env or {})), capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {r.returncode}: {r.stderr.strip()} {r.stdout.strip()}")
        return r

    def node(self, name: str) -> dict[str, str]:
        """``scontrol show node -o NAME`` as key=value pairs (Reason runs to the end of the line)."""
        out = self.run(["scontrol", "show", "node", "-o", name]).stdout.strip()
        fields: dict[str, str] = {}
        head, sep, reason = out.partition(" Reason=")
        for word in head.split():
            k, _, v = word.partition("=")
            fields[k] = v
        if sep:
            fields["Reason"] = reason.strip()
        return fields

    def state(self, name: str) -> str:
        return self.node(name).get("State", "")

    def drained(self, name: str) -> bool:
        return "DRAIN" in self.state(name).split("+")

    def reason(self, name: str) -> str:
        """The drain reason without Slurm's ``[user@time]`` tail."""
        text = self.node(name).get("Reason", "")
        return text.rsplit(" [", 1)[0] if text.endswith("]") else text

    def reset(self, *nodes: str) -> None:
        """Every node back to idle with no reason, and to healthy facts (between tests)."""
        for n in nodes or self.nodes:
            self.set_facts(n, "hgx-h100-ib")
            if "DRAIN" in self.state(n) or "DOWN" in self.state(n):
                self.run(["scontrol", "update", f"nodename={n}", "state=resume"], check=False)
        wait_for(lambda: all(self.state(n) == "IDLE" for n in nodes or self.nodes), 60, 0.5, "the nodes idle again")

    def rdmadoctor(self, args: list[str], node: str | None = None, env: dict | None = None, timeout: float = 120):
        extra = dict(env or {})
        if node:
            extra["SLURMD_NODENAME"] = node
        return self.run([sys.executable, "-m", "rdmadoctor", *args], check=False, env=extra, timeout=timeout)

    def logs(self) -> str:
        """The daemons' logs, for an assertion's message."""
        parts = []
        for f in sorted((self.base / "log").glob("*")):
            text = f.read_text(errors="replace")
            parts.append(f"--- {f.name}\n{text[-3000:]}")
        return "\n".join(parts)
