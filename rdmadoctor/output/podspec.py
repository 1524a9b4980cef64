"""The pod-spec change that fixes a set of findings, as one YAML block: built from data.

Each finding that a pod-spec change fixes carries it as ``Finding.pod`` (a
:class:`~rdmadoctor.core.model.PodChange`, ``"pod"`` in the JSON report). This module merges
those of every problem into one document a person pastes into the pod spec; nothing here reads
a remedy's prose.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

GIB = 1024**3
# /dev/shm sizeLimit when the expectation asks for less: NCCL's shared-memory transport and the
# DataLoader workers of an 8-GPU pod use several GiB.
DEFAULT_SHM_LIMIT_GIB = 16


class PodFix:
    """What to add to the pod spec, merged from every problem that a pod-spec change fixes."""

    def __init__(self) -> None:
        self.ipc_lock = False
        self.rdma_device = False
        self.shm_gib: int | None = None
        self.env: dict[str, tuple[str, str]] = {}  # name -> (value, comment)

    def __bool__(self) -> bool:
        return bool(self.ipc_lock or self.rdma_device or self.shm_gib or self.env)

    def add(self, pod: dict[str, Any] | None) -> str | None:
        """Merge one finding's ``pod`` (its JSON form); "full", "part", or None (no pod change)."""
        if not isinstance(pod, dict):
            return None
        took = False
        if "IPC_LOCK" in (pod.get("capabilities_add") or ()):
            self.ipc_lock = took = True
        if pod.get("rdma_device"):
            self.rdma_device = took = True
        want = pod.get("shm_min_bytes")
        if isinstance(want, int) and not isinstance(want, bool) and want > 0:
            gib = max(DEFAULT_SHM_LIMIT_GIB, -(-want // GIB))
            self.shm_gib = max(self.shm_gib or 0, gib)
            took = True
        for item in pod.get("env") or ():
            if isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("value"), str):
                self.env[item["name"]] = (item["value"], str(item.get("why") or ""))
                took = True
        if not took:
            return None
        return "full" if pod.get("whole", True) else "part"

    def yaml(self) -> str:
        """The lines to merge into the pod spec, as one document (valid YAML)."""
        import json

        c = ["spec:", "  containers:", "  - name: trainer   # your container's name"]
        if self.ipc_lock:
            c += [
                "    securityContext:",
                "      capabilities:",
                '        add: ["IPC_LOCK"]   # lets RDMA pin memory past RLIMIT_MEMLOCK',
            ]
        if self.rdma_device:
            c += [
                "    resources:",
                "      limits:",
                "        rdma/hca: 1   # the resourceName of your RDMA device plugin",
            ]
        if self.env:
            c.append("    env:")
            for name in sorted(self.env):
                value, comment = self.env[name]
                c.append(f"    - name: {name}")
                c.append(f"      value: {json.dumps(value)}" + (f"   # {comment}" if comment else ""))
        if self.shm_gib:
            c += ["    volumeMounts:", "    - {name: dshm, mountPath: /dev/shm}"]
            c += [
                "  volumes:",
                "  - name: dshm",
                f"    emptyDir: {{medium: Memory, sizeLimit: {self.shm_gib}Gi}}",
            ]
        return "\n".join(c) + "\n"

    def to_json(self) -> dict[str, Any]:
        return {
            "ipc_lock": self.ipc_lock,
            "rdma_device": self.rdma_device,
            "shm_size_limit": f"{self.shm_gib}Gi" if self.shm_gib else None,
            "env": {k: v for k, (v, _) in sorted(self.env.items())},
        }
