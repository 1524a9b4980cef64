"""The report: one dict, versioned (``rdmadoctor.report/v1``), that every renderer consumes.

This module builds it; whatever reads one (renderers, the gate, the gang, the fleet) reads it
through :class:`rdmadoctor.core.report.Report` (``Report.from_json``), which spells each key once.

Schema (v1); every value a check could not establish is ``null``:

- ``schema``: "rdmadoctor.report/v1"; ``version``: rdmadoctor's version; ``time``: when the
  report was made, RFC 3339 UTC ("2026-11-23T20:31:53Z")
- ``status``: pass | warn | fail | unknown (worst of the checks; skipped checks do not count)
- ``exit_code``: what ``rdmadoctor check`` exits with (0 healthy, 1 a problem, 2 unknown)
- ``host``: {label, kind (live|root|bundle), hostname}; ``profile``: the expectations' profile
- ``scope``: all (this container on this node) | node (the machine only: the agent, `label`)
- ``summary``: {checks, pass, warn, fail, unknown, skip, errors, warnings}
- ``checks``: [{id, title, status, reason?, condition, findings: [{code, severity, subject, message,
  remedy, kind, condition?, data?, pod?, cause?}]}]. ``condition`` is the NodeCondition family the
  check declares (link | config | gpudirect | null); a finding carries its own when its code
  overrides the check's. ``kind`` is its code's kind (problem | unknown | info), null when the
  check did not declare the code.
- ``inventory``: rdma_source, rdma_devices [{name, driver, pci, numa_node, fw_ver, board_id,
  node_type, is_vf, ports [{port, state, phys_state, rate_gbps, link_layer, lid, sm_lid, netdev,
  active_mtu, ignored}]}], gpus, topology {gpus, nics, gpu_nic, source}, memlock_bytes (null: unlimited),
  memlock_known, cap_ipc_lock, shm_bytes, shm_free_bytes, kernel_modules, packages, nccl_env ...
- ``labels``: the node labels rdmadoctor would set, computed from this report by
  :func:`rdmadoctor.core.labels.compute` whichever checks ran (a failing plugin makes ready=false)
- ``nccl``: what NCCL did, read from the job's logs (``rdmadoctor diagnose``, a bundle's logs/,
  ``rdmadoctor run``); null when no log was read. {version, cuda, network, plugin, net_devices
  [{name, port, link_layer}], socket_ifaces, gdr (true | false | null), channels, ranks, hosts,
  socket_hosts, nodes, fabric, fabric_nics, net_bw_gbs}: a field the log does not show is null, never guessed. A check fills it through
  its inventory's "nccl" key (rdmadoctor.checks.logs).
- ``plugin_errors``: plugins that failed to load, one line each; each is also a finding of the
  check ``plugins.load`` (``PLUGIN_LOAD_FAILED``, unknown; ``PLUGIN_OPTIONAL_NOT_LOADED``, a
  warning, for a plugin the config lists in ``optional_plugins``), so the status counts it
- ``fingerprint``: the node's facts a fleet compares (rdmadoctor.engine.fingerprint, ``rdmadoctor.fingerprint/v1``)
"""

from __future__ import annotations

import time

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any

from rdmadoctor import __version__
from rdmadoctor.core import labels as L
from rdmadoctor.core.model import ERROR, FAIL, PASS, SKIP, UNKNOWN, WARN, WARNING, CheckResult, worst
from rdmadoctor.core.report import SCHEMA
from rdmadoctor.engine import fingerprint

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


def rfc3339(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def mark_ignored(inventory: dict, expect: dict) -> None:
    """Set ``ignored`` on every port of ``inventory["rdma_devices"]`` that the expectations leave out.

    ``ignore_ports`` names devices ("mlx5_4") or ports ("mlx5_4/1"); ``ignore_vfs`` (default true)
    leaves out every port of a virtual function. The checks judge with the same rule
    (rdmadoctor.checks._rdma.ignored); a port the inventory already marks keeps its mark.
    """
    devices = inventory.get("rdma_devices")
    if not isinstance(devices, list):
        return
    names = {str(n) for n in (expect.get("ignore_ports") or ())}
    vfs = bool(expect.get("ignore_vfs", True))
    for d in devices:
        if not isinstance(d, dict):
            continue
        whole = d.get("name") in names or bool(d.get("is_vf") and vfs)
        for p in d.get("ports") or ():
            if isinstance(p, dict):
                p.setdefault("ignored", whole or f"{d.get('name')}/{p.get('port')}" in names)


def _check_json(r: CheckResult, check: Any) -> dict:
    """A result as the report shows it, with what its check declares (condition, codes' kinds)."""
    out = r.to_json()
    out["condition"] = getattr(check, "condition", None)
    # Read only for findings: a skipped logs.diagnose's codes (LazyCodes) would import the kb.
    codes = {k.code: k for k in getattr(check, "codes", ()) or ()} if out["findings"] else {}
    for f in out["findings"]:
        code = codes.get(f["code"])
        f["kind"] = code.kind if code is not None else None
        if code is not None and code.condition is not None:
            f["condition"] = code.condition
    return out


def _host_notes(host: Any) -> list[str]:
    """What the host's reader left out (archive members it refused, a listing cut at MAX_LIST, a
    tool's output cut at its cap): the findings were made without it, and the report says so.
    Once each, in order."""
    notes = getattr(host, "notes", None)
    return list(dict.fromkeys(n for n in notes if isinstance(n, str))) if isinstance(notes, list) else []


def build(
    results: list[CheckResult],
    checks: dict,
    host: Any,
    expect: dict,
    *,
    strict: bool = False,
    plugin_errors: list[str] | None = None,
    now: float | None = None,
) -> dict:
    status = worst([r.status for r in results if r.status != SKIP]) if results else UNKNOWN
    inventory: dict[str, Any] = {k: None for k in INVENTORY_KEYS}
    for r in results:
        check = checks.get(r.id)
        if check is None or check.inventory is None or r.facts is None:
            continue
        try:
            inventory.update(check.inventory(r.facts))
        except Exception as e:  # noqa: BLE001 - the report still renders
            inventory.setdefault("errors", []).append(f"{r.id}: {type(e).__name__}: {e}")
    mark_ignored(inventory, expect)
    counts = {s: sum(1 for r in results if r.status == s) for s in (PASS, WARN, FAIL, UNKNOWN, SKIP)}
    findings = [f for r in results for f in r.findings]
    runtime_host = None
    try:
        runtime_host = host.runtime.hostname
    except Exception:  # noqa: BLE001 - the report still renders, without the hostname
        pass
    report = {
        "schema": SCHEMA,
        "version": __version__,
        "time": rfc3339(time.time() if now is None else now),
        "status": status,
        "exit_code": exit_code(status, strict),
        "host": {"label": host.label, "kind": host.kind, "hostname": runtime_host, "notes": _host_notes(host)},
        "profile": expect.get("_profile", "generic"),
        "summary": {
            "checks": len(results),
            **counts,
            "errors": sum(1 for f in findings if f.severity == ERROR),
            "warnings": sum(1 for f in findings if f.severity == WARNING),
        },
        "checks": [_check_json(r, checks.get(r.id)) for r in results],
        "inventory": inventory,
        "nccl": inventory.pop("nccl", None),
        "labels": {},
        "plugin_errors": list(plugin_errors or []),
    }
    # Refused labels are dropped here; node.labels reports why (LABEL_INVALID).
    report["labels"], _ = L.validate(L.compute(report)[0])
    report["fingerprint"] = fingerprint.build(report)
    return report
