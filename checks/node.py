"""node.labels: the labels this node should carry, compared with the ones it carries.

The labels come from the report of every other check (rdmadoctor.core.labels.compute, the same
pure function the report's "labels" come from) and pass through rdmadoctor.core.labels.validate,
the one place that refuses a key or value Kubernetes would refuse. When the bundle holds the
Node object (``cmd/node.json``, `kubectl get node <name> -o json`), the labels it carries are
compared; a value refused by validate is reported here (LABEL_INVALID).
"""

from __future__ import annotations

import json

from rdmadoctor.core import labels as L
from rdmadoctor.core.codes.node import (
    LABEL_INVALID,
    NODE_LABEL_MISSING,
    NODE_LABEL_STALE,
    NODE_LABELS,
    NODE_OBJECT_UNREADABLE,
)
from rdmadoctor.core.model import INFO, UNKNOWN, WARNING, Check, Finding
from rdmadoctor.core.quarantine import EXPECT as QUARANTINE_EXPECT
from rdmadoctor.core.record import record
from rdmadoctor.core.words import count


@record
class NodeFacts:
    labels: dict[str, str]  # valid labels, as the report publishes them
    refused: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # why a label was left out
    not_ready: tuple[str, ...] = ()  # the checks that keep ready=false
    node_name: str | None = None
    node_labels: dict[str, str] | None = None  # None: no node object to compare with
    node_error: str | None = None


def _node_object(host) -> tuple[str | None, dict[str, str] | None, str | None]:
    """(name, labels, error) of cmd/node.json; labels None when there is no node object."""
    raw = host.read_text("/cmd/node.json")
    if raw is None:
        return None, None, None
    try:
        obj = json.loads(raw)
    except ValueError as e:
        return None, None, f"cmd/node.json is not JSON ({e})"
    except RecursionError:  # json's decoder recurses once a level: [[[[... a few thousand deep
        return None, None, "cmd/node.json is nested too deeply to be a Node object (arrays or objects thousands of levels deep)"
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
    # The labels of every check that ran before this one (after=("*",): all of them, third-party
    # ones included), by the same function the report's labels come from.
    computed, notes, not_ready = L.compute(ctx.partial_report())
    good, refused = L.validate(computed)
    name, node_labels, error = _node_object(ctx.host)
    return NodeFacts(good, refused, tuple(notes), tuple(not_ready), name, node_labels, error)


def judge_node(facts: NodeFacts, expect: dict) -> list[Finding]:
    out: list[Finding] = []
    for why in facts.refused:
        out.append(Finding(LABEL_INVALID.code, WARNING, "labels", f"{why}; left out.", LABEL_INVALID.fix))
    shown = ", ".join(f"{k}={v}" for k, v in facts.labels.items()) or "none"
    if facts.node_error:
        out.append(Finding(NODE_OBJECT_UNREADABLE.code, UNKNOWN, "node", facts.node_error, NODE_OBJECT_UNREADABLE.fix))
        return out
    if facts.node_labels is None:
        out.append(
            Finding(
                NODE_LABELS.code,
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
                    NODE_LABEL_MISSING.code,
                    WARNING,
                    key,
                    f"node {node} does not carry {key}; expected {key}={value}.",
                    f"kubectl label node {node} {key}={value} --overwrite",
                )
            )
        elif have[key] != value:
            out.append(
                Finding(
                    NODE_LABEL_STALE.code,
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
                    NODE_LABEL_STALE.code,
                    WARNING,
                    key,
                    f"node {node} carries {key}={have[key]}, which rdmadoctor no longer computes for it.",
                    f"kubectl label node {node} {key}-",
                )
            )
    if not out:
        out.append(Finding(NODE_LABELS.code, INFO, "labels", f"node {node} carries the report's {count(len(facts.labels), 'label')}: {shown}."))
    return out


# Where this module's checks stand in the report (engine.registry: built-ins are found by scanning checks/).
ORDER = 910

CHECKS = [
    Check(
        id="node.labels",
        condition=None,
        gate=False,
        title="Node labels",
        probe=probe_node,
        judge=judge_node,
        codes=(NODE_LABEL_MISSING, NODE_LABEL_STALE, NODE_OBJECT_UNREADABLE, LABEL_INVALID, NODE_LABELS),
        # logs.diagnose also runs after every other check: the labels compared are the whole report's.
        after=("*", "logs.diagnose"),
        # The guardrails of what acts on the verdict (slurm health and prolog, agent --quarantine):
        # declared here, beside the labels the same verdict sets, so config, pools and --set type them.
        defaults=QUARANTINE_EXPECT,
        description="The labels this node should carry (feature.node.kubernetes.io/network-rdma.capable, "
        "rdmadoctor.io/{ready,link-layer,active-ports,min-rate-gbps,gpudirect,gpu-nic}), compared with the "
        "Node object when the bundle has cmd/node.json.",
    ),
]
