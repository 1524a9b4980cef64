"""Facts about the process under examination that are not files: rlimits, capabilities, the
size of /dev/shm, the environment that matters to an RDMA job, the hostname.

A live host reads them from this process; a bundle carries them in ``runtime.json``.
"""

from __future__ import annotations

import os

from rdmadoctor.core.record import record

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any

# Environment variables that matter to an RDMA job; `collect` keeps only these.
ENV_PREFIXES = ("NCCL_", "UCX_", "MASTER_", "VC_", "OMPI_", "PMIX_", "RDMADOCTOR_")
ENV_NAMES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "CUDA_VISIBLE_DEVICES", "NODE_NAME", "HOSTNAME", "HOME")  # HOME: ~/.nccl.conf


def filter_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(ENV_PREFIXES) or k in ENV_NAMES}


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
    uid: int | None = None  # effective uid of the process (the memlock verdict names it)
    # The network interfaces of the process's namespace as the kernel showed them (name, up, mtu,
    # addresses: sysfs has no addresses; psutil, else netlink). Read only when a check needs them:
    # Host.interfaces() fills it (host/net.py), and `collect` writes it to runtime.json so a
    # bundle has the same facts.
    interfaces: list[dict[str, Any]] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "memlock_soft": self.memlock_soft,
            "memlock_hard": self.memlock_hard,
            "cap_eff": self.cap_eff,
            "shm_size": self.shm_size,
            "shm_free": self.shm_free,
            "env": self.env,
            "hostname": self.hostname,
            "in_container": self.in_container,
        }
        if self.uid is not None:  # older bundles have none; a generated fixture keeps its bytes
            out["uid"] = self.uid
        if self.interfaces is not None:
            out["interfaces"] = self.interfaces
        return out

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
            uid=num(data.get("uid")),
            # Checked item by item where it is read (host/net.py NetIf.from_json).
            interfaces=[d for d in data["interfaces"] if isinstance(d, dict)] if isinstance(data.get("interfaces"), list) else None,
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
    rt.uid = os.geteuid()
    try:
        rt.hostname = os.uname().nodename
    except OSError:
        pass
    rt.in_container = os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv") or (
        "KUBERNETES_SERVICE_HOST" in os.environ
    )
    return rt
