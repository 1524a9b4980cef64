"""What the container may do: locked memory, capabilities, /dev/shm (limits.memlock, shm.size).

The built-in codes of this family; the registry (rdmadoctor.core.codes) finds them here. A
code keeps its string and its meaning for life (docs/architecture.md, "Codes are a contract").
"""

from __future__ import annotations

from rdmadoctor.core.model import Code

_IPC_LOCK_YAML = (
    "securityContext:\n"
    "  capabilities:\n"
    "    add: [\"IPC_LOCK\"]\n"
)
_RAISE_DEFAULT = (
    "Kubernetes has no ulimit field: pods inherit the container runtime's own limit, so raise it on "
    "every node. containerd:\n"
    "  mkdir -p /etc/systemd/system/containerd.service.d\n"
    "  printf '[Service]\\nLimitMEMLOCK=infinity\\n' > /etc/systemd/system/containerd.service.d/memlock.conf\n"
    "  systemctl daemon-reload && systemctl restart containerd\n"
    "CRI-O: in /etc/crio/crio.conf, [crio.runtime] default_ulimits = [\"memlock=-1:-1\"], then "
    "`systemctl restart crio`. Docker: `docker run --ulimit memlock=-1:-1 ...`."
)

MEMLOCK_LIMITED = Code(
    "MEMLOCK_LIMITED",
    "Locked-memory limit (RLIMIT_MEMLOCK) binds RDMA and is too low",
    "RDMA memory registration (ibv_reg_mr) pins pages, and the kernel counts them against "
    "RLIMIT_MEMLOCK for a process without CAP_IPC_LOCK. A container's default (64 KiB or 8 MiB) "
    "is exhausted at once: ibv_reg_mr fails with ENOMEM and NCCL reports 'Cannot allocate memory' "
    "or 'ibv_reg_mr failed', or falls back to sockets. Seen only when the job's process has a "
    "finite limit below the expectation and does not hold CAP_IPC_LOCK.",
    "Either fix is complete. In the pod, when the container runs as root: add IPC_LOCK, and the "
    "kernel stops applying the limit to RDMA registrations:\n" + _IPC_LOCK_YAML
    + "(Docker: `--cap-add IPC_LOCK`). A non-root container does not get added capabilities in its "
    "effective set, so for it raise the limit instead. " + _RAISE_DEFAULT + "\nIf only the soft limit is low, `ulimit -l unlimited` in "
    "the entrypoint before the launcher raises it.",
    kind="problem",
)
MEMLOCK_UNREADABLE = Code(
    "MEMLOCK_UNREADABLE",
    "Locked-memory limit could not be read",
    "Could not decide: neither /proc/self/limits, a recorded `ulimit -a` nor runtime.json gave "
    "the memlock limit, and the process is not known to hold CAP_IPC_LOCK (which would make the "
    "limit irrelevant for RDMA). Whether ibv_reg_mr can pin memory is unknown.",
    "Run the check inside the training container (`rdmadoctor check --only limits`), or record "
    "the bundle there with `rdmadoctor collect`, which keeps /proc/self/limits and /proc/self/status.",
    kind="unknown",
)
MEMLOCK_BYPASSED_BY_IPC_LOCK = Code(
    "MEMLOCK_BYPASSED_BY_IPC_LOCK",
    "Memlock limit does not bind: the process holds CAP_IPC_LOCK",
    "The memlock limit is below the expectation (or unreadable), but the process that runs the job "
    "holds CAP_IPC_LOCK in its effective set: the kernel does not count RDMA registrations against "
    "RLIMIT_MEMLOCK for it (ib_umem_get in drivers/infiniband/core/umem.c), so ibv_reg_mr is not "
    "limited. This is the usual recipe for pods (IPC_LOCK added, the runtime's default limit kept).",
    "Nothing to fix for RDMA. Keep IPC_LOCK in the pod spec; a process that drops it (another user, "
    "`setpriv`, a non-root entrypoint) would be held to the limit.",
    kind="info",
)
CAP_IPC_LOCK_MISSING = Code(
    "CAP_IPC_LOCK_MISSING",
    "CAP_IPC_LOCK not in the effective capabilities",
    "With CAP_IPC_LOCK the kernel lets RDMA pin memory past RLIMIT_MEMLOCK (ib_umem_get skips the "
    "limit for a capable process); without it every registration counts against the limit. It is "
    "the capability the NVIDIA network operator and most RDMA pod examples add. Seen only when the "
    "capabilities were read and the bit is not set (or the job runs as another user, who does not "
    "inherit it).",
    "Add it to the container:\n" + _IPC_LOCK_YAML
    + "(Docker: `--cap-add IPC_LOCK`). A non-root container only gets it in its effective set when "
    "the process runs as root or the capability is made ambient.",
    kind="problem",
)
CAPS_UNREADABLE = Code(
    "CAPS_UNREADABLE",
    "Capabilities could not be read",
    "Could not decide: the memlock limit is low (or unknown), and whether it binds RDMA depends on "
    "CAP_IPC_LOCK, but no CapEff was found in /proc/self/status or runtime.json (or, for a job that "
    "runs as root under a non-root check, no CapBnd).",
    "Run the check inside the training container, or record the bundle there with `rdmadoctor "
    "collect`, which keeps /proc/self/status.",
    kind="unknown",
)
SHM_TOO_SMALL = Code(
    "SHM_TOO_SMALL",
    "/dev/shm too small",
    "NCCL's shared-memory transport (and its proxy buffers, and PyTorch DataLoader workers) live "
    "in /dev/shm. The container default of 64 MiB is exhausted at once: NCCL fails with "
    "'unhandled system error' (shm_open / posix_fallocate ENOSPC) or the process dies of a bus error.",
    "Mount a memory-backed emptyDir on /dev/shm in the pod spec:\n"
    "volumes:\n"
    "- name: dshm\n"
    "  emptyDir: {medium: Memory, sizeLimit: 16Gi}\n"
    "containers:\n"
    "- volumeMounts:\n"
    "  - {name: dshm, mountPath: /dev/shm}\n"
    "(Docker: `--shm-size=16g` or `--ipc=host`).",
    kind="problem",
)
SHM_NEARLY_FULL = Code(
    "SHM_NEARLY_FULL",
    "/dev/shm nearly full",
    "/dev/shm is big enough but less than half of the expected size is free: files left by earlier "
    "jobs (NCCL segments, DataLoader tensors) fill it, and the next job's shm_open/posix_fallocate "
    "fails with ENOSPC: 'unhandled system error' or a bus error.",
    "Find and remove the leftovers: `ls -la /dev/shm` (`rm /dev/shm/nccl-*` when no job runs), or "
    "restart the pod; if the space is really used, give /dev/shm a larger sizeLimit in the pod spec.",
    kind="problem",
)
SHM_UNREADABLE = Code(
    "SHM_UNREADABLE",
    "/dev/shm size could not be read",
    "Could not decide: /dev/shm is not mounted in this process, or the bundle has neither a shm_size "
    "in runtime.json nor a recorded `df /dev/shm`. Whether NCCL's shared-memory transport has room "
    "is unknown.",
    "Run the check inside the training container, or record the bundle there with `rdmadoctor "
    "collect`; a pasted bundle needs `df -h /dev/shm > cmd/df-shm.txt`.",
    kind="unknown",
)
