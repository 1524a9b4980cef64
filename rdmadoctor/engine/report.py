"""The report: one dict, versioned (``rdmadoctor.report/v1``), that every renderer consumes.

Schema (v1); every value a check could not establish is ``null``:

- ``schema``: "rdmadoctor.report/v1"; ``version``: rdmadoctor's version
- ``status``: pass | warn | fail | unknown (worst of the checks; skipped checks do not count)
- ``exit_code``: what ``rdmadoctor check`` exits with (0 healthy, 1 a problem, 2 unknown)
- ``host``: {label, kind (live|root|bundle), hostname}; ``profile``: the expectations' profile
- ``scope``: all (this container on this node) | node (the machine only: the agent, `label`)
- ``summary``: {checks, pass, warn, fail, unknown, skip, errors, warnings}
- ``checks``: [{id, title, status, reason?, findings: [{code, severity, subject, message, remedy, data?}]}]
- ``inventory``: rdma_source, rdma_devices [{name, driver, pci, numa_node, fw_ver, board_id,
  node_type, is_vf, ports [{port, state, phys_state, rate_gbps, link_layer, lid, sm_lid, netdev,
  active_mtu}]}], gpus, topology {gpus, nics, gpu_nic, source}, memlock_bytes (null: unlimited),
  memlock_known, cap_ipc_lock, shm_bytes, shm_free_bytes, kernel_modules, packages, nccl_env ...
- ``labels``: the node labels rdmadoctor would set ({} when node.labels did not run)
- ``plugin_errors``: checks that failed to load
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any

from rdmadoctor import __version__
from rdmadoctor.core.model import ERROR, FAIL, PASS, SKIP, UNKNOWN, WARN, WARNING, CheckResult, worst

SCHEMA = "rdmadoctor.report/v1"

# Keys the schema promises in "inventory", null until a check fills them.
INVENTORY_KEYS = ("rdma_devices", "gpus", "topology", "memlock_bytes", "shm_bytes")


def exit_code(status: str, strict: bool = False) -> int:
    if status == FAIL:
        return 1
    if status == UNKNOWN:
        return 2
    if status == WARN and strict:
        return 1
    return 0


def build(results: list[CheckResult], checks: dict, host: Any, expect: dict, *, strict: bool = False, plugin_errors: list[str] | None = None) -> dict:
    status = worst([r.status for r in results if r.status != SKIP]) if results else UNKNOWN
    inventory: dict[str, Any] = {k: None for k in INVENTORY_KEYS}
    labels: dict[str, str] = {}
    for r in results:
        check = checks.get(r.id)
        if check is None or check.inventory is None or r.facts is None:
            continue
        try:
            inventory.update(check.inventory(r.facts))
        except Exception as e:  # noqa: BLE001 - the report still renders
            inventory.setdefault("errors", []).append(f"{r.id}: {type(e).__name__}: {e}")
    node = next((r for r in results if r.id == "node.labels"), None)
    if node is not None and node.facts is not None:
        labels = dict(getattr(node.facts, "labels", {}) or {})
    counts = {s: sum(1 for r in results if r.status == s) for s in (PASS, WARN, FAIL, UNKNOWN, SKIP)}
    findings = [f for r in results for f in r.findings]
    runtime_host = None
    try:
        runtime_host = host.runtime.hostname
    except Exception:  # noqa: BLE001
        pass
    return {
        "schema": SCHEMA,
        "version": __version__,
        "status": status,
        "exit_code": exit_code(status, strict),
        "host": {"label": host.label, "kind": host.kind, "hostname": runtime_host},
        "profile": expect.get("_profile", "generic"),
        "summary": {
            "checks": len(results),
            **counts,
            "errors": sum(1 for f in findings if f.severity == ERROR),
            "warnings": sum(1 for f in findings if f.severity == WARNING),
        },
        "checks": [r.to_json() for r in results],
        "inventory": inventory,
        "labels": labels,
        "plugin_errors": list(plugin_errors or []),
    }
