"""node.labels: the labels this node should carry, from what the other checks found.

The labels are computed by a pure function of plain inputs (ports, the other checks' statuses,
GPUDirect, the GPU-NIC relation) and pass through rdmadoctor.core.labels.validate, the one place that
refuses a key or value Kubernetes would refuse. When the bundle holds the Node object
(``cmd/node.json``, `kubectl get node <name> -o json`), the labels it carries are compared.
"""

from __future__ import annotations

import json
from rdmadoctor.core.record import field, record
TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any

from rdmadoctor.core import labels as L
from rdmadoctor.core.model import INFO, PASS, SKIP, UNKNOWN, WARN, WARNING, Check, Code, Finding

from rdmadoctor.checks._rdma import RdmaInventory, ignored, probe_inventory

NODE_LABEL_MISSING = Code(
    "NODE_LABEL_MISSING",
    "Node label missing",
    "The node does not carry a label rdmadoctor computes for it. Schedulers and nodeSelectors that "
    "rely on it (rdmadoctor.io/ready=true, feature.node.kubernetes.io/network-rdma.capable=true) skip "
    "the node, or a DaemonSet meant for RDMA nodes does not land on it.",
    "Run the rdmadoctor agent (it publishes the labels), or set it by hand: "
    "`kubectl label node <name> <key>=<value> --overwrite`.",
)
NODE_LABEL_STALE = Code(
    "NODE_LABEL_STALE",
    "Node label out of date",
    "The node carries an rdmadoctor (or NFD RDMA) label whose value no longer matches the node: jobs "
    "are scheduled on a node that lost a port or GPUDirect, or kept off one that was repaired.",
    "`kubectl label node <name> <key>=<value> --overwrite` (or `kubectl label node <name> <key>-` to "
    "remove it), or let the rdmadoctor agent publish the labels.",
)
NODE_OBJECT_UNREADABLE = Code(
    "NODE_OBJECT_UNREADABLE",
    "Node object unreadable",
    "cmd/node.json is not a Node object as `kubectl get node <name> -o json` prints it, so the labels "
    "it carries cannot be compared.",
    "Record it again: `kubectl get node <name> -o json > cmd/node.json`.",
)
LABEL_INVALID = Code(
    "LABEL_INVALID",
    "Computed label refused",
    "A label value computed from this node's facts breaks the Kubernetes label rules (63 characters, "
    "alphanumerics, '-', '_', '.'); it is left out rather than published half-valid.",
    "Report it with `rdmadoctor collect`: a value from an odd tool output slipped through.",
)
NODE_LABELS = Code(
    "NODE_LABELS",
    "Node labels",
    "The labels rdmadoctor computes for this node.",
    "Nothing to fix.",
)

# nvidia-smi topo -m relations, nearest first. NV# (NVLink) never appears between a GPU and a NIC.
_RELATIONS = ("PIX", "PXB", "PHB", "NODE", "SYS")


@record
class PortInput:
    subject: str
    state: str | None
    link_layer: str | None
    rate_gbps: float | None


@record
class LabelInputs:
    ports: tuple[PortInput, ...] | None  # non-VF, not ignored; None: the RDMA devices are unknown
    statuses: dict[str, str] = field(default_factory=dict)  # other checks that ran: id -> status
    gpudirect: bool | None = None  # None: kernel.modules did not say
    gpu_nearest: tuple[str | None, ...] | None = None  # nearest NIC relation per GPU; None: no topology


@record
class NodeFacts:
    labels: dict[str, str]  # what report.py publishes (facts.labels)
    refused: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # why a label was left out
    not_ready: tuple[str, ...] = ()  # the checks that keep ready=false
    node_name: str | None = None
    node_labels: dict[str, str] | None = None  # None: no node object to compare with
    node_error: str | None = None


def worst_nearest(nearest: tuple[str | None, ...]) -> str | None:
    """The worst of the GPUs' nearest-NIC relations; None when any is unknown or not a relation."""
    if not nearest or any(r not in _RELATIONS for r in nearest):
        return None
    return max(nearest, key=_RELATIONS.index)  # type: ignore[arg-type]


def compute_labels(inp: LabelInputs) -> tuple[dict[str, str], list[str], list[str]]:
    """(labels, notes on labels left out, checks keeping ready false). Values are not validated here."""
    out: dict[str, str] = {}
    notes: list[str] = []
    if inp.ports is None:
        notes.append("RDMA devices unknown: no port labels")
    else:
        active = [p for p in inp.ports if p.state == "ACTIVE"]
        out[L.RDMA_CAPABLE] = L.bool_value(bool(active))
        lls = {p.link_layer for p in inp.ports}
        if not inp.ports:
            out[L.LINK_LAYER] = "none"
        elif lls == {"InfiniBand"}:
            out[L.LINK_LAYER] = "infiniband"
        elif lls == {"Ethernet"}:
            out[L.LINK_LAYER] = "ethernet"
        elif lls <= {"InfiniBand", "Ethernet"}:
            out[L.LINK_LAYER] = "mixed"
        else:
            notes.append("a port's link layer is unknown: no link-layer label")
        out[L.ACTIVE_PORTS] = str(len(active))
        rates = [p.rate_gbps for p in active if p.rate_gbps is not None]
        if active and len(rates) == len(active):
            out[L.MIN_RATE_GBPS] = str(int(min(rates)))
        elif active:
            notes.append("the rate of an ACTIVE port is unknown: no min-rate-gbps label")
    not_ready = sorted(cid for cid, st in inp.statuses.items() if st not in (PASS, WARN))
    if inp.statuses:
        out[L.READY] = L.bool_value(not not_ready)
    else:
        notes.append("no other check ran: no ready label")
    if inp.gpudirect is not None:
        out[L.GPUDIRECT] = L.bool_value(inp.gpudirect)
    if inp.gpu_nearest:
        rel = worst_nearest(inp.gpu_nearest)
        if rel is not None:
            out[L.GPU_NIC] = rel
        else:
            notes.append("a GPU's nearest RDMA device is unknown: no gpu-nic label")
    return out, notes, not_ready


# ---- reading the other checks' results, defensively: they are written by others ---------------


def _gpudirect(result: Any) -> bool | None:
    facts = getattr(result, "facts", None)
    value = getattr(facts, "gpudirect", None)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


def _gpu_nearest(result: Any) -> tuple[str | None, ...] | None:
    """Nearest relation per GPU from gpu.topology's facts (gpus, gpu_nic[g][n]); None: no GPUs."""
    facts = getattr(result, "facts", None)
    if facts is None or getattr(result, "status", None) in (SKIP, None):
        return None
    gpus = getattr(facts, "gpus", None)
    matrix = getattr(facts, "gpu_nic", None)
    try:
        n = len(gpus) if gpus is not None else len(matrix or ())
        if not n:
            return None
        rows = list(matrix or ())
        out: list[str | None] = []
        for g in range(n):
            row = [r for r in (rows[g] if g < len(rows) else ()) if isinstance(r, str) and r in _RELATIONS]
            out.append(min(row, key=_RELATIONS.index) if row else None)
        return tuple(out)
    except (TypeError, IndexError):
        return None


def _node_object(host) -> tuple[str | None, dict[str, str] | None, str | None]:
    """(name, labels, error) of cmd/node.json; labels None when there is no node object."""
    raw = host.read_text("/cmd/node.json")
    if raw is None:
        return None, None, None
    try:
        obj = json.loads(raw)
    except ValueError as e:
        return None, None, f"cmd/node.json is not JSON ({e})"
    if isinstance(obj, dict) and obj.get("kind") == "List":  # `kubectl get nodes -o json` of one node
        items = obj.get("items")
        if not isinstance(items, list) or len(items) != 1:
            return None, None, "cmd/node.json is a List; expected exactly one Node in it"
        obj = items[0]
    if not isinstance(obj, dict) or obj.get("kind", "Node") != "Node" or not isinstance(obj.get("metadata"), dict):
        return None, None, "cmd/node.json is not a Node object (no metadata)"
    meta = obj["metadata"]
    name = meta.get("name") if isinstance(meta.get("name"), str) else None
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict):
        return name, None, "cmd/node.json: metadata.labels is not a map"
    return name, {str(k): str(v) for k, v in labels.items()}, None


def probe_node(ctx) -> NodeFacts:
    inv: RdmaInventory = ctx.get(probe_inventory)
    ports = None
    if inv.source != "none":
        ports = tuple(
            PortInput(f"{d.name}/{p.port}", p.state, p.link_layer, p.rate_gbps)
            for d in inv.devices
            if not d.is_vf
            for p in d.ports
            if not ignored(d, p, ctx.expect)
        )
    statuses = {cid: r.status for cid, r in ctx.results.items() if cid != "node.labels" and r.status != SKIP}
    inputs = LabelInputs(
        ports=ports,
        statuses=statuses,
        gpudirect=_gpudirect(ctx.results.get("kernel.modules")),
        gpu_nearest=_gpu_nearest(ctx.results.get("gpu.topology")),
    )
    computed, notes, not_ready = compute_labels(inputs)
    good, refused = L.validate(computed)
    name, node_labels, error = _node_object(ctx.host)
    return NodeFacts(good, refused, tuple(notes), tuple(not_ready), name, node_labels, error)


def judge_node(facts: NodeFacts, expect: dict) -> list[Finding]:
    out: list[Finding] = []
    for why in facts.refused:
        out.append(Finding("LABEL_INVALID", WARNING, "labels", f"{why}; left out.", LABEL_INVALID.fix))
    shown = ", ".join(f"{k}={v}" for k, v in facts.labels.items()) or "none"
    if facts.node_error:
        out.append(Finding("NODE_OBJECT_UNREADABLE", UNKNOWN, "node", facts.node_error, NODE_OBJECT_UNREADABLE.fix))
        return out
    if facts.node_labels is None:
        out.append(
            Finding(
                "NODE_LABELS",
                INFO,
                "labels",
                f"labels computed; no node object to compare (the agent publishes them): {shown}"
                + (f" (ready=false: {', '.join(facts.not_ready)})." if facts.not_ready else "."),
                data={"not_ready": list(facts.not_ready)} if facts.not_ready else {},
            )
        )
        return out
    node = facts.node_name or "<node>"
    have = facts.node_labels
    for key, value in facts.labels.items():
        if key not in have:
            out.append(
                Finding(
                    "NODE_LABEL_MISSING",
                    WARNING,
                    key,
                    f"node {node} does not carry {key}; expected {key}={value}.",
                    f"kubectl label node {node} {key}={value} --overwrite",
                )
            )
        elif have[key] != value:
            out.append(
                Finding(
                    "NODE_LABEL_STALE",
                    WARNING,
                    key,
                    f"node {node} carries {key}={have[key]}; this node now gives {key}={value}.",
                    f"kubectl label node {node} {key}={value} --overwrite",
                )
            )
    for key in L.OWNED:
        if key in have and key not in facts.labels:
            out.append(
                Finding(
                    "NODE_LABEL_STALE",
                    WARNING,
                    key,
                    f"node {node} carries {key}={have[key]}, which rdmadoctor no longer computes for it.",
                    f"kubectl label node {node} {key}-",
                )
            )
    if not out:
        out.append(Finding("NODE_LABELS", INFO, "labels", f"node {node} carries all {len(facts.labels)} label(s): {shown}."))
    return out


def _other_builtin_ids() -> tuple[str, ...]:
    """Every other built-in check: node.labels reads their results, so it runs after all of them."""
    import importlib

    from rdmadoctor.engine.registry import BUILTIN

    ids: list[str] = []
    for mod in BUILTIN:
        if mod == "node":
            continue
        try:
            checks = importlib.import_module(f"rdmadoctor.checks.{mod}").CHECKS
        except Exception:  # noqa: BLE001 - a broken sibling is reported by the registry, not here
            continue
        ids.extend(c.id for c in checks if getattr(c, "id", None))
    return tuple(ids)


CHECKS = [
    Check(
        id="node.labels",
        condition=None,
        gate=False,
        title="Node labels",
        probe=probe_node,
        judge=judge_node,
        codes=(NODE_LABEL_MISSING, NODE_LABEL_STALE, NODE_OBJECT_UNREADABLE, LABEL_INVALID, NODE_LABELS),
        after=_other_builtin_ids(),
        description="The labels this node should carry (feature.node.kubernetes.io/network-rdma.capable, "
        "rdmadoctor.io/{ready,link-layer,active-ports,min-rate-gbps,gpudirect,gpu-nic}), compared with the "
        "Node object when the bundle has cmd/node.json.",
    ),
]
