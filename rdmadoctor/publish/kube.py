"""``--publish node`` (and ``--conditions``): the Node object, through lightkube.

Only these calls, and only when something changed (a steady node costs one GET a cycle):

- ``GET /api/v1/nodes/NAME``
- ``PATCH /api/v1/nodes/NAME``, ``application/merge-patch+json`` (RFC 7386): the labels under
  ``--prefix`` plus ``feature.node.kubernetes.io/network-rdma.capable`` that differ, ``null`` for
  a label rdmadoctor set before (listed in the ``<prefix-domain>/owned-labels`` annotation) and
  no longer computes, and that annotation. Any other label is never in a patch, so nobody
  else's label can be changed or removed, whatever the annotation says.
- ``PATCH /api/v1/nodes/NAME/status``, ``application/strategic-merge-patch+json``: a JSON merge
  patch would replace the whole ``status.conditions`` list, kubelet's Ready included; a
  strategic merge patch merges the list item by item on ``type`` (its patchMergeKey), which is
  what the kubelet and Node Problem Detector send, so only rdmadoctor's conditions are touched.
- ``POST /api/v1/namespaces/default/events``, ``application/json`` (with ``--conditions``): one
  core/v1 Event each time a condition changes status (see :func:`conditions.transitions`),
  about the Node, in ``default`` where the kubelet and NPD put node events. Best effort: sent
  only after the status patch that records the change succeeded, at most one short retry, and a
  failure (403 without ``events: create``, an outage) is counted in ``events_failed`` and named
  in ``summary`` and ``event_errors``, never raised: the labels and conditions are what matter.

Errors: connection refused, timeouts, 5xx, 429 and 409 are retried a few times with backoff
(the whole GET-compute-PATCH cycle, so a retry never sends a stale patch); 401 rebuilds the
client once, which reads the kubeconfig or the projected ServiceAccount token again (lightkube
>= 1.0 already re-reads an in-cluster token file on a 401 by itself; older ones and static
kubeconfig tokens need the rebuild); 403 and other 4xx are not retried and name the fix.

The requests themselves (their deadline, the answer cap, what an odd answer becomes) are
:class:`rdmadoctor.publish.nodeapi.NodeAPI`'s; the kubeconfig is read by
:mod:`rdmadoctor.publish.kubeconfig`. Every name this module offered before the split is still
importable from here.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from typing import IO, Callable

from rdmadoctor.core import labels as L
from rdmadoctor.core.words import count
from rdmadoctor.output import conditions as C
from rdmadoctor.publish.base import (
    PublishConfigError,
    Publisher,
    PublishError,
    node_labels,
    normalize_prefix,
    owned_annotation,
    parse_rfc3339,
    rfc3339,
)

# Re-exported: the agent, the fleet, quarantine and tests import these from rdmadoctor.publish.kube.
from rdmadoctor.publish.kubeconfig import (  # noqa: F401
    CREDENTIALS_HINT,
    KUBECONFIG_MAX_BYTES,
    _NotKubeconfig,
    _read_kubeconfig,
    _short,
    check_kubeconfig_shape,
    load_kubeconfig,
)
from rdmadoctor.publish.nodeapi import (  # noqa: F401
    FIELD_MANAGER,
    INSTALL_HINT,
    MAX_ANSWER_BYTES,
    MAX_LIST_NODES,
    MAX_LIST_PAGES,
    MAX_PAGE_BYTES,
    NodeAPI,
    _as_dict,
    _body_text,
    _bound_answers,
    _causes,
    _httpx,
    _Refused,
    _Retry,
    _TooLarge,
    _Unauthorized,
    retry_after,
)

# Where the kubelet and Node Problem Detector put the events of a (cluster-scoped) Node.
EVENT_NAMESPACE = "default"
EVENT_COMPONENT = "rdmadoctor"
EVENT_ACTION = "ConditionChanged"
EVENT_RETRY_DELAY = 0.5
_MAX_INSTANCE = 128  # reportingInstance, apiserver's ReportingInstanceLengthLimit
MAX_BACKOFF = 8.0


# The node's compact fingerprint (rdmadoctor.engine.fingerprint), which `rdmadoctor fleet --kube`
# reads; written with the labels, only when it changed. The admission policy (deploy/overlays/direct)
# allows this annotation and owned-labels, no other new one, and bounds its size.
FINGERPRINT_ANNOTATION = "rdmadoctor.io/fingerprint"


def fingerprint_annotation(report: dict) -> str | None:
    from rdmadoctor.engine import fingerprint as F

    fp = report.get("fingerprint")
    return F.compact_text(F.compact(fp)) if isinstance(fp, dict) else None


def _parse_time(text: str) -> float | None:
    return parse_rfc3339(text) if text else None



def _micro_time(ts: float) -> str:
    """A metav1.MicroTime: the apiserver parses it with Go's RFC3339Micro layout, which needs
    exactly six fraction digits (a plain RFC3339 time is a 400)."""
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_body(node: str, uid: str | None, event: dict, now: float) -> dict:
    """The core/v1 Event for one condition transition (``conditions.transitions`` item).

    Both shapes a reader may look for: the legacy fields the kubelet and NPD fill
    (source, firstTimestamp, lastTimestamp, count: ``kubectl get events`` sorts on them) and the
    events.k8s.io ones (eventTime, reportingComponent, reportingInstance, action). On core/v1 the
    apiserver accepts both together, and once eventTime is set it requires the reporting fields
    and action, and a cluster-scoped involvedObject only in ``default`` or ``kube-system``
    (pkg/apis/core/validation/events.go, legacyValidateEvent). The uid is the Node's real one,
    which ``kubectl describe node`` (kubectl >= 1.24) searches besides the name."""
    ref = {"apiVersion": "v1", "kind": "Node", "name": node}
    if uid:
        ref["uid"] = uid
    stamp = rfc3339(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        # The server appends 5 characters; the kubelet names its node events "<node>.<hex>" too.
        "metadata": {"generateName": node + ".", "namespace": EVENT_NAMESPACE},
        "involvedObject": ref,
        "type": event["type"],
        "reason": event["reason"],
        "message": event["message"][: C.MAX_MESSAGE],
        "source": {"component": EVENT_COMPONENT, "host": node},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "eventTime": _micro_time(now),
        "reportingComponent": EVENT_COMPONENT,
        "reportingInstance": node[:_MAX_INSTANCE],
        "action": EVENT_ACTION,
    }


def label_patch(current_labels: dict, current_annotations: dict, wanted: dict[str, str], prefix: str) -> dict:
    """The merge patch taking the node's labels to ``wanted`` ({} when nothing changes)."""
    prefix = normalize_prefix(prefix)
    ann_key = owned_annotation(prefix)
    current_labels = current_labels if isinstance(current_labels, dict) else {}
    current_annotations = current_annotations if isinstance(current_annotations, dict) else {}
    said = current_annotations.get(ann_key)
    # Not a string (a number, a list, an object someone wrote): treated as absent, so no label is
    # removed on its word, and rewritten below (NodePublisher says so in one line).
    previously = {k.strip() for k in said.split(",") if k.strip()} if isinstance(said, str) else set()
    changes: dict[str, str | None] = {}
    for k, v in wanted.items():
        if current_labels.get(k) != v:
            changes[k] = v
    for k in sorted(previously - set(wanted)):
        # in_domain: an edited annotation must never make us delete someone else's label.
        if k in current_labels and (k.startswith(prefix) or k == L.RDMA_CAPABLE):
            changes[k] = None
    owned = ",".join(sorted(wanted))
    meta: dict = {}
    if changes:
        meta["labels"] = changes
    if current_annotations.get(ann_key) != owned:
        meta["annotations"] = {ann_key: owned}
    return {"metadata": meta} if meta else {}

def _json_kind(value: object) -> str:
    """What a JSON value is, in words: "a number", "a list", "an object", ..."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    kinds: dict[type, str] = {list: "a list", dict: "an object", str: "a string"}
    return kinds.get(type(value), type(value).__name__)


class NodePublisher(Publisher):
    """Labels on the Node (``labels=True``) and/or NodeConditions on nodes/status."""

    def __init__(
        self,
        *,
        node: str | None,
        kubeconfig: str | None,
        prefix: str,
        labels: bool = True,
        conditions: bool = False,
        dry_run: bool = False,
        out: IO[str] | None = None,
        heartbeat: float = 300,
        retries: int = 3,
        backoff: float = 0.5,
        timeout: float = 5.0,
        clock: Callable[[], float] = time.time,
        cancel: threading.Event | None = None,
        api: NodeAPI | None = None,
    ):
        name = node or os.environ.get("NODE_NAME")
        if not name:
            raise PublishConfigError(
                "no node name: pass --node NAME or set NODE_NAME",
                "in a pod, set NODE_NAME from the downward API: env: [{name: NODE_NAME, "
                "valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]",
            )
        self.node: str = name
        if not L.is_dns_subdomain(self.node):
            raise PublishConfigError(f"--node {self.node!r} is not a valid Node name")
        self.prefix = normalize_prefix(prefix)
        self.do_labels = labels
        self.do_conditions = conditions
        self.dry_run = dry_run
        self.out = out if out is not None else sys.stdout
        self.heartbeat = float(heartbeat)
        self.retries = max(0, int(retries))
        self.backoff = float(backoff)
        self.clock = clock
        self.cancel = cancel
        self.api = api if api is not None else NodeAPI(kubeconfig, timeout, cancel)
        self.problems: tuple[str, ...] = ()
        self.path = f"/api/v1/nodes/{self.node}"
        # Events are best effort: counted here (the agent may export them), never raised.
        self.events_created = 0
        self.events_failed = 0
        self.event_errors: list[str] = []  # why events of the last publish were not created
        # What the last publish found odd on the Node and worked around (one line each): the
        # agent logs them as warnings, `label` prints them in its summary.
        self.notices: list[str] = []

    # -- one cycle -------------------------------------------------------------------------
    def _cycle(self, report: dict, written: list[str]) -> list[str]:
        node = self.api.get_node(self.node)
        meta = node.get("metadata") or {}
        if not isinstance(meta, dict):
            meta = {}
        notes: list[str] = []
        if self.do_labels:
            annotations = meta.get("annotations")
            said = (annotations if isinstance(annotations, dict) else {}).get(owned_annotation(self.prefix))
            if said is not None and not isinstance(said, str):
                self.notices.append(
                    f"the {owned_annotation(self.prefix)} annotation on node {self.node} is {_json_kind(said)} "
                    f"({_short(json.dumps(said, default=str), 80)}), not the comma-separated label keys rdmadoctor "
                    "writes: treated as absent (no label is removed on its word) and rewritten"
                )
            wanted, self.problems = node_labels(report, self.prefix)
            if not wanted:
                # Every report that judged anything has ready=true|false: none at all means something
                # upstream broke, and this patch would remove every label rdmadoctor set on the node.
                raise PublishError(
                    f"the report has no labels to publish ({'; '.join(self.problems) or 'none computed'}): not "
                    f"patching node {self.node}, which would remove every rdmadoctor label from it",
                    transient=False,
                )
            patch = label_patch(meta.get("labels") or {}, meta.get("annotations") or {}, wanted, self.prefix)
            fp = fingerprint_annotation(report)
            if fp is not None and (meta.get("annotations") or {}).get(FINGERPRINT_ANNOTATION) != fp:
                patch.setdefault("metadata", {}).setdefault("annotations", {})[FINGERPRINT_ANNOTATION] = fp
            if patch:
                if self.dry_run:
                    self._show("PATCH", self.path, "application/merge-patch+json", patch)
                else:
                    self.api.patch_node(self.node, patch)
                    if "node" not in written:
                        written.append("node")
                changed = patch["metadata"].get("labels") or {}
                notes.append(f"{count(len(changed), 'label')} changed on node {self.node}" if changed else f"annotations updated on node {self.node}")
            else:
                notes.append(f"node {self.node} labels unchanged ({count(len(wanted), 'label')})")
        if self.do_conditions:
            now = self.clock()
            wanted_c = C.compute(report)
            current = (node.get("status") or {}).get("conditions") or []
            send = C.plan(wanted_c, current, rfc3339(now), now, self.heartbeat, _parse_time)
            # Computed from this GET, sent only once the patch recording the change succeeded: a
            # retried cycle starts from a fresh GET, so a transition is never announced twice.
            events = C.transitions(wanted_c, current)
            if send:
                patch = {"status": {"conditions": send}}
                if self.dry_run:
                    self._show("PATCH", self.path + "/status", "application/strategic-merge-patch+json", patch)
                else:
                    self.api.patch_status(self.node, patch)
                    if "node-status" not in written:
                        written.append("node-status")
                notes.append(f"{count(len(send), 'condition')} written")
            else:
                notes.append("conditions unchanged")
            if events:
                notes.append(self._send_events(events, meta.get("uid"), now))
        if self.dry_run and self.do_labels:
            for k in sorted(wanted):
                self.out.write(f"{k}={wanted[k]}\n")
        self.summary = ("dry run: " if self.dry_run else "") + "; ".join(self.notices + notes)
        return written

    def _send_events(self, events: list[dict], uid: str | None, now: float) -> str:
        """Create one Event per transition; returns a note for the summary. Never raises."""
        path = f"/api/v1/namespaces/{EVENT_NAMESPACE}/events"
        bodies = [event_body(self.node, uid, e, now) for e in events]
        if self.dry_run:
            for body in bodies:
                self._show("POST", path, "application/json", body)
            return f"{count(len(bodies), 'event')} not sent"
        created = 0
        why = ""
        for i, body in enumerate(bodies):
            why = self._create_event(body)
            if why:
                # The next ones would meet the same RBAC or the same outage: one try is enough.
                self.events_failed += len(bodies) - i
                self.event_errors.append(why)
                break
            created += 1
        self.events_created += created
        if not why:
            return f"{count(created, 'event')} created"
        return f"{created} of {count(len(bodies), 'event')} created; not created: {why}"

    def _create_event(self, body: dict) -> str:
        """'' when created, else why not: at most one short retry, and only for what may pass."""
        for attempt in (1, 2):
            try:
                self.api.create_event(EVENT_NAMESPACE, body)
                return ""
            except _Retry as e:
                if attempt == 2:
                    return f"{e.why} (events are not retried further)"
                if self.cancel is not None:
                    if self.cancel.wait(EVENT_RETRY_DELAY):
                        return f"{e.why} (stopping)"
                else:
                    time.sleep(EVENT_RETRY_DELAY)
            except _Unauthorized as e:
                return f"401 Unauthorized: {e}"
            except _Refused as e:
                if e.code == 403:
                    return (
                        f"HTTP 403 Forbidden ({e.reason}): the ServiceAccount may not create events "
                        f"in namespace {EVENT_NAMESPACE!r}; grant it events create there (the deploy/ "
                        "direct-mode overlay's RBAC). The conditions were written all the same"
                    )
                return f"HTTP {e.code}: {e.reason}"
            except PublishError as e:  # credentials that could not be loaded
                return e.message
            except Exception as e:  # noqa: BLE001 - an event must never break the publish
                return f"{type(e).__name__}: {e}"
        return "not created"  # pragma: no cover - the loop always returns

    def _show(self, method: str, path: str, ctype: str, body: dict) -> None:
        self.out.write(f"# would send {method} {path} ({ctype}): {json.dumps(body, sort_keys=True)}\n")

    def publish(self, report: dict) -> list[str]:
        written: list[str] = []
        self.event_errors = []
        self.notices = []
        rebuilt = False
        attempt = 0
        delay = self.backoff
        while True:
            try:
                self._cycle(report, written)
                if self.dry_run:
                    self.out.flush()
                return written
            except _Unauthorized as e:
                if rebuilt:
                    raise PublishError(
                        f"the API server refused our credentials (401 Unauthorized: {e}) even after "
                        "reloading them: the ServiceAccount token or --kubeconfig is expired or revoked",
                        transient=True,
                    ) from None
                rebuilt = True
                self.api.reset()  # a rotated token: read the kubeconfig / token file again
                continue
            except _Retry as e:
                attempt += 1
                if attempt > self.retries:
                    raise PublishError(
                        f"Kubernetes API at node {self.node}: {e.why} (gave up after {count(attempt, 'attempt')})",
                        transient=True,
                    ) from None
                wait = e.after if e.after is not None else delay * (0.5 + random.random())
                wait = min(max(wait, 0.0), MAX_BACKOFF)
                delay = min(delay * 2, MAX_BACKOFF)
                if self.cancel is not None:
                    if self.cancel.wait(wait):
                        raise PublishError(f"stopped while retrying: {e.why}", transient=True) from None
                else:
                    time.sleep(wait)

    def close(self) -> None:
        self.api.close()
