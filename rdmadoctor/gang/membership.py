"""Who is in the gang: this member's rank, the gang's size and its job token, read from what the
launcher already set (torchrun / PyTorchJob, MPI, Slurm) or from the ``--gang-*`` flags.

A gang member is a node (a pod), not a process: with several ranks per node only the one with
local rank 0 takes part. Rank 0's address is found by preflight (``--gang-master``, else the
MASTER_ADDR logic of ``--wait-for-master``); the port is the gang's own, never the launcher's.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from rdmadoctor.runner import UsageError

# Not a port a launcher uses: torchrun's master 29500, its c10d rendezvous 29400, Volcano's pytorch
# plugin 23456, MPI's ssh 22, perftest 18515; next to the agent's metrics port 9470.
GANG_PORT = 9471
GANG_TIMEOUT = 120.0
MAX_GANG = 4096

# Where a job's identity is, in the order they are read: a value every member of one job shares
# and another job (an earlier run of the same name included) does not.
TOKEN_ENV = (
    "RDMADOCTOR_GANG_TOKEN",  # the deploy/ examples set it per run (a generated job name; Volcano's job UID)
    "SLURM_JOB_ID",
    "PMIX_NAMESPACE",  # Open MPI 5 / PRRTE: one namespace per mpirun
    "OMPI_MCA_ess_base_jobid",  # Open MPI 4
    "TORCHELASTIC_RUN_ID",  # torchrun --rdzv-id (under torchrun)
    "PET_RDZV_ID",
)
# Slurm sets these in a job (its steps, its Prolog); a Kubernetes pod has KUBERNETES_SERVICE_HOST.
SLURM_ENV = ("SLURM_JOB_ID", "SLURM_JOBID", "SLURMD_NODENAME", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
LOCAL_RANK_ENV = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID")


def engine_of(env: dict[str, str]) -> str:
    """What runs the job, for the words of an exclusion: "slurm" (a Slurm job, its step or Prolog:
    Slurm first, since slurmd in pods, as Slinky runs it, also sees KUBERNETES_SERVICE_HOST, and
    Slurm places its jobs), "kubernetes", else "unknown"."""
    if any(env.get(name, "").strip() for name in SLURM_ENV):
        return "slurm"
    if env.get("KUBERNETES_SERVICE_HOST", "").strip():
        return "kubernetes"
    return "unknown"


class Membership:
    def __init__(self, rank: int | None, size: int | None, rank_source: str, size_source: str,
                 token: str, token_source: str, takes_part: bool = True, why_not: str = ""):
        self.rank = rank
        self.size = size
        self.rank_source = rank_source
        self.size_source = size_source
        self.token = token
        self.token_source = token_source
        self.takes_part = takes_part
        self.why_not = why_not

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "size": self.size, "rank_source": self.rank_source,
                "size_source": self.size_source, "token_source": self.token_source}


def _int(env: dict[str, str], name: str) -> int | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise UsageError(f"--gang: {name}={raw!r} is not a whole number",
                         "give the node's rank and the number of nodes with --gang-rank N --gang-size M") from None


def _per_node(env: dict[str, str], total: str, local: str) -> tuple[int, str] | None:
    """(value // ranks per node) from a launcher that counts processes."""
    t, n = _int(env, total), _int(env, local)
    if t is None or n is None or n < 1:
        return None
    return t // n, f"{total} / {local}"


def _volcano(env: dict[str, str], hostname: str | None) -> tuple[int, int] | None:
    """(rank, size) from Volcano's svc plugin: every pod's host in VC_<TASK>_HOSTS, the master task's
    first, then the other tasks by name; this pod is the host whose first label is its hostname
    (the plugin names each pod's host <pod>.<job>, and the pod's hostname is its name)."""
    lists = {k: v for k, v in env.items() if k.startswith("VC_") and k.endswith("_HOSTS") and len(k) > 9 and v.strip()}
    if not lists:
        return None
    order = sorted(lists, key=lambda k: (k != "VC_MASTER_HOSTS", k))
    hosts = [h.strip().split(".")[0].lower() for k in order for h in lists[k].split(",") if h.strip()]
    if hostname is None:
        import socket

        hostname = socket.gethostname()
    mine = (hostname or "").split(".")[0].lower()
    if not mine or mine not in hosts:
        return None
    return hosts.index(mine), len(hosts)


def find_membership(env: dict[str, str], rank: int | None = None, size: int | None = None,
                    token: str | None = None, hostname: str | None = None) -> Membership:
    """This member's rank and the gang's size (flags first), and the job token."""
    if token is not None:
        tok, tok_src = token, "--gang-token"
    else:
        tok, tok_src = "", "none"
        for name in TOKEN_ENV:
            if env.get(name, "").strip():
                tok, tok_src = env[name].strip(), name
                break
    local = next((n for n in LOCAL_RANK_ENV if env.get(n, "").strip()), None)
    if rank is None and local is not None and env[local].strip() != "0":
        return Membership(None, None, "", "", tok, tok_src, False,
                          f"{local}={env[local].strip()}: one process per node takes part (local rank 0)")
    r_src = s_src = ""
    if rank is not None:
        r, r_src = rank, "--gang-rank"
    else:
        r = None
        for name in ("NODE_RANK", "PET_NODE_RANK", "GROUP_RANK", "SLURM_NODEID"):
            if _int(env, name) is not None:
                r, r_src = _int(env, name), name
                break
        if r is None:
            for total, per in (("RANK", "LOCAL_WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
                               ("PMI_RANK", "MPI_LOCALNRANKS")):
                got = _per_node(env, total, per)
                if got is not None:
                    r, r_src = got
                    break
        if r is None:
            for name in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):  # one process per node
                if _int(env, name) is not None:
                    r, r_src = _int(env, name), name
                    break
    if size is not None:
        s, s_src = size, "--gang-size"
    else:
        s = None
        for name in ("NNODES", "PET_NNODES", "GROUP_WORLD_SIZE", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"):
            raw = env.get(name, "").strip()
            if raw and ":" in raw:  # torchrun's elastic MIN:MAX
                raise UsageError(f"--gang: {name}={raw!r} is an elastic range: the gang's size is not known",
                                 "give it: --gang-size N (the number of nodes the job starts with)")
            if _int(env, name) is not None:
                s, s_src = _int(env, name), name
                break
        if s is None:
            for total, per in (("WORLD_SIZE", "LOCAL_WORLD_SIZE"), ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"),
                               ("PMI_SIZE", "MPI_LOCALNRANKS")):
                got = _per_node(env, total, per)
                if got is not None:
                    s, s_src = got
                    break
        if s is None:
            for name in ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
                if _int(env, name) is not None:
                    s, s_src = _int(env, name), name
                    break
    if r is None and s == 1:
        r, r_src = 0, "a gang of one"
    if r is None or s is None:
        vc = _volcano(env, hostname)
        if vc is not None:
            if r is None:
                r, r_src = vc[0], "this pod's place in VC_<TASK>_HOSTS"
            if s is None:
                s, s_src = vc[1], "the hosts in VC_<TASK>_HOSTS"
    if r is None or s is None:
        missing = " and ".join(w for w, v in (("this node's rank", r), ("the number of nodes", s)) if v is None)
        raise UsageError(
            f"--gang: {missing} not known: no --gang-rank/--gang-size, and none of NODE_RANK, RANK, NNODES, "
            "WORLD_SIZE, OMPI_COMM_WORLD_*, PMI_*, SLURM_NODEID/SLURM_NNODES, Volcano's VC_<TASK>_HOSTS in the "
            "environment",
            "give them: --gang-rank N --gang-size M (in an init container, where the launcher sets nothing: "
            "e.g. from the pod's replica index)")
    if not 1 <= s <= MAX_GANG:
        raise UsageError(f"--gang: the gang's size {s} ({s_src}) is not between 1 and {MAX_GANG}")
    if not 0 <= r < s:
        raise UsageError(f"--gang: rank {r} ({r_src}) is not between 0 and {s - 1} (size {s} from {s_src})")
    return Membership(r, s, r_src, s_src, tok, tok_src)


def parse_endpoint(text: str, default_port: int) -> tuple[str, int]:
    """``--gang-master HOST[:PORT]`` (``[v6]:PORT`` for an IPv6 address with a port)."""
    text = text.strip()
    if not text:
        raise UsageError("--gang-master is empty", "e.g. --gang-master trainer-master-0:9471")
    if "://" in text:
        raise UsageError(f"--gang-master {text!r} is a URL; it takes HOST or HOST:PORT", "e.g. --gang-master 10.0.0.5:9471")
    host, port_text = text, ""
    if text.startswith("["):
        inner, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise UsageError(f"--gang-master {text!r}: an IPv6 address with a port is [ADDRESS]:PORT")
        host, port_text = inner, rest[1:]
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    port = default_port
    if port_text:
        if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
            raise UsageError(f"--gang-master {text!r}: {port_text!r} is not a port number (1-65535)")
        port = int(port_text)
    if not host:
        raise UsageError(f"--gang-master {text!r} has no host")
    return host, port
