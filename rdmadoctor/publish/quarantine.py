"""``agent --publish node --quarantine dry-run|taint``: hold the agent's own Node out of new work.

The decision is :func:`rdmadoctor.core.quarantine.decide`, shared with ``rdmadoctor slurm``; this
module only reads the world, calls it, and carries out the one action it returns:

- HOLD: add ``rdmadoctor.io/unhealthy=<ROOT_CODE>:NoSchedule`` to the Node's taints;
- RELEASE: remove that taint (only a taint with that key, which only rdmadoctor writes).

Never ``NoExecute`` (running work is never evicted), never a cordon (``spec.unschedulable``),
never another taint key: the taint list is one list the API replaces whole, so it is read,
changed in that one entry and written back with the ``metadata.resourceVersion`` it was read at
(a JSON merge patch with that precondition); a 409 Conflict (someone else wrote the Node in
between: the kubelet, an administrator's taint) reads it again and retries. An administrator's
taints are therefore always kept.

The pool's budget: the Nodes labelled ``<prefix>pool=<pool>`` (the agent writes that label
from ``--pool``, ``default`` without) are listed and the ones carrying the taint counted. Two
agents must not both take the last place, so count-then-taint runs under a
``coordination.k8s.io/v1`` Lease per pool (``rdmadoctor-quarantine-<pool>`` in the agent's
namespace), held for the few requests it takes and released at once; its duration is short
(:data:`LEASE_SECONDS`), so a holder that died mid-way blocks the pool for that long at most,
then the next agent takes it over. An agent that finds the Lease held waits for its next cycle.

The storm rule counts the pool's Nodes labelled ``<prefix>ready=false``, and names the most
common ``<prefix>problem`` label (the root code each agent writes while its node fails).

A dry run (``--quarantine dry-run``) decides the same way and writes no taint: where ``taint``
would add one, it sets the label ``<prefix>would-hold=<ROOT_CODE>`` on its own Node instead (a
JSON merge patch of that label, under the same Lease), and removes it where ``taint`` would
release. The pool's count takes that label as a hold, so the dry runs of a pool announce exactly
the holds, deferrals and releases that ``taint`` would make, within the one budget.

Requests, all through :class:`rdmadoctor.publish.nodeapi.NodeAPI` (its deadline, retries, 401
handling): ``GET`` the Node when an action may follow (a healthy node that holds nothing costs no
request, except a re-read every :data:`RESYNC_SECONDS`); ``GET /api/v1/nodes?labelSelector=``
and the Lease calls only when a hold is due; ``PATCH`` the Node for a hold or a release; ``POST``
an Event for each action; ``PATCH nodes/status`` for the ``RDMAQuarantineDeferred`` condition
when it changes (not in a dry run). Events and the condition are best effort (a failure is logged, never raised).
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections import Counter
from typing import Any, Callable

from rdmadoctor.core import codes
from rdmadoctor.core import quarantine as Q
from rdmadoctor.core.record import replace
from rdmadoctor.publish.base import PublishConfigError, PublishError, normalize_prefix, owned_annotation, rfc3339
from rdmadoctor.publish.kube import EVENT_NAMESPACE, _micro_time, event_body
from rdmadoctor.publish.nodeapi import NodeAPI, _as_dict, _Refused, _Retry, _Unauthorized

MODES = ("off", "dry-run", "taint")
TAINT_KEY = "rdmadoctor.io/unhealthy"
TAINT_EFFECT = "NoSchedule"
LEASE_PREFIX = "rdmadoctor-quarantine-"
# Seconds a Lease holder keeps the pool's count-then-taint to itself: a few requests take well
# under a second; a holder that died is taken over after this.
LEASE_SECONDS = 15
DEFAULT_POOL = "default"
# A node that holds nothing and is healthy is read again this often (an agent restarted while
# its taint stayed; a taint an administrator removed).
RESYNC_SECONDS = 300.0
CONFLICT_RETRIES = 5
EVENT_ACTION = "Quarantine"
CONDITION = "RDMAQuarantineDeferred"
# Event reasons, one per action.
REASONS = {
    Q.HOLD: "RDMAQuarantined",
    Q.RELEASE: "RDMAReleased",
    Q.DEFER_BUDGET: "RDMAQuarantineDeferred",
    Q.DEFER_STORM: "RDMAQuarantineStorm",
}
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def check_pool(pool: str | None) -> str:
    """The pool's name (``default`` when None); PublishConfigError unless it is a label value."""
    name = DEFAULT_POOL if pool is None else pool
    if not name or len(name) > 63 or not _LABEL_VALUE.fullmatch(name):
        raise PublishConfigError(
            f"--pool {name!r} cannot name a quarantine pool: it becomes the label value rdmadoctor.io/pool={name}",
            "a pool name of at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
        )
    return name


def lease_name(pool: str) -> str:
    """``rdmadoctor-quarantine-<pool>``, a DNS subdomain: a pool name that is not one (capitals,
    '_') is lowered and its other characters become '-', with a short hash so two pools never
    share a Lease."""
    clean = re.sub(r"[^a-z0-9.-]+", "-", pool.lower()).strip("-.") or "pool"
    if clean != pool:
        clean = f"{clean[:40]}-{hashlib.sha256(pool.encode()).hexdigest()[:8]}"
    return LEASE_PREFIX + clean


def taint_for(code: str) -> dict:
    value = re.sub(r"[^A-Za-z0-9_.-]+", "_", code or "UNKNOWN_PROBLEM")[:63].strip("_.-") or "UNKNOWN_PROBLEM"
    return {"key": TAINT_KEY, "value": value, "effect": TAINT_EFFECT}


def own_taint(node: dict) -> dict | None:
    """rdmadoctor's taint on a Node (its key, any effect: one an administrator changed is still
    ours to remove), or None."""
    for t in _taints(node):
        if t.get("key") == TAINT_KEY:
            return t
    return None


def _labels(node: dict) -> dict:
    meta = node.get("metadata") if isinstance(node, dict) else None
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return labels if isinstance(labels, dict) else {}


def _taints(node: dict) -> list[dict]:
    spec = node.get("spec") if isinstance(node, dict) else None
    taints = spec.get("taints") if isinstance(spec, dict) else None
    return [t for t in taints if isinstance(t, dict)] if isinstance(taints, list) else []


def counters_quiet(report: dict) -> bool:
    """No finding of a port's error counters inside their recovery window (Code.from_counters,
    checks/counters.py) is left: a release waits until none is."""
    for c in report.get("checks") or ():
        for f in c.get("findings") or () if isinstance(c, dict) else ():
            name = f.get("code") if isinstance(f, dict) else None
            code = codes.get(name) if isinstance(name, str) else None
            if code is not None and code.from_counters:
                return False
    return True


class KubeQuarantine:
    """One node's quarantine actuator. ``cycle(report, guard)`` once per agent cycle, after the
    labels were published; returns the state for the report (``report["quarantine"]``)."""

    def __init__(
        self,
        *,
        api: NodeAPI,
        node: str,
        mode: str,
        pool: str | None,
        prefix: str,
        namespace: str | None = None,
        log: Any = None,
        clock: Callable[[], float] = time.time,
        cancel: threading.Event | None = None,
        lease_seconds: int = LEASE_SECONDS,
    ):
        if mode not in MODES[1:]:
            raise PublishConfigError(f"--quarantine must be one of {', '.join(MODES)}, got {mode!r}")
        self.api = api
        self.node = node
        self.mode = mode
        self.dry_run = mode == "dry-run"
        self.pool = check_pool(pool)
        # Without --pool the pool is the one a [pools.NAME] table's `match` chose for this node
        # (one DaemonSet serving several pools): each pool then has its own budget and storm.
        self.pool_from_report = pool is None
        self.prefix = normalize_prefix(prefix)
        self._namespace = namespace
        self.log = log
        self.clock = clock
        self.cancel = cancel
        self.lease_seconds = int(lease_seconds)
        self.history = Q.History()
        self.last_read: float | None = None
        self.last_action: str | None = None  # of the last decided cycle
        self.last_deferral: str | None = None  # DEFER_BUDGET or DEFER_STORM while one lasts
        self.state: dict = {}
        # For the agent's metrics: actions taken since start, and the storm seen now.
        self.actions: Counter = Counter()
        self.storm: tuple[str, str] | None = None  # (pool, most common code) while deferred by a storm
        self.errors: list[str] = []  # what went wrong this cycle (best-effort parts included)
        # Whether the RDMAQuarantineDeferred condition is True on the Node, as last read or written:
        # None until known (the first cycle that reads the Node finds out).
        self.condition_true: bool | None = None

    # -- names ----------------------------------------------------------------------------------
    @property
    def pool_label(self) -> str:
        return self.prefix + "pool"

    @property
    def problem_label(self) -> str:
        return self.prefix + "problem"

    @property
    def would_hold_label(self) -> str:
        return self.prefix + "would-hold"

    def follow_pool(self, report: dict) -> str:
        """Without --pool, take the pool a [pools.NAME] table's `match` chose for this node in
        ``report`` as the quarantine pool (its budget, storm and Lease); returns the pool. The
        agent calls it once a cycle, before :meth:`labels` and :meth:`cycle`."""
        chosen = report.get("pool") if isinstance(report, dict) else None
        name = chosen.get("name") if isinstance(chosen, dict) else None
        if self.pool_from_report and isinstance(name, str):
            try:
                self.pool = check_pool(name)
            except PublishConfigError:
                pass  # a pool name that is no label value keeps the pool as it was (said by the config's check)
        return self.pool

    def labels(self, report: dict) -> dict[str, str]:
        """The labels the agent adds to the report's while quarantine is on: the pool, the root
        code while the node fails (the storm's most common code is counted from it) and, in a dry
        run, the hold it would have made (the pool's count reads it). Reads only."""
        verdict, code, _ = Q.verdict_of(report)
        out = {Q_LABEL_POOL: self.pool}
        if verdict == Q.PROBLEM and code:
            out[Q_LABEL_PROBLEM] = taint_for(code)["value"]
        if self.dry_run and self.history.held:
            out[Q_LABEL_WOULD_HOLD] = taint_for(self.history.held_code)["value"]
        return out

    def namespace(self) -> str:
        if self._namespace is None:
            ns = getattr(self.api.client(), "namespace", None)
            self._namespace = ns if isinstance(ns, str) and ns else "default"
        return self._namespace

    # -- one cycle --------------------------------------------------------------------------------
    def cycle(self, report: dict, guard: Q.Guardrails) -> dict:
        self.errors = []
        verdict, code, codes = Q.verdict_of(report)
        quiet = counters_quiet(report)
        now = self.clock()
        node: dict | None = None
        need_read = (
            self.last_read is None or self.history.held or verdict != Q.HEALTHY or now - self.last_read >= RESYNC_SECONDS
        )
        try:
            if need_read:
                node = self.api.get_node(self.node)
                self.last_read = now
                mine = self._mark(node)
                what = f"dry-run label {self.would_hold_label}" if self.dry_run else "taint"
                if mine is not None and not self.history.held:
                    self._note(f"found rdmadoctor's own {what} on the node (set before this agent started)", mark=mine)
                elif mine is None and self.history.held:
                    self._note(f"rdmadoctor's {what} is gone from the node (removed by someone else)")
                self.history = replace(self.history, held=mine is not None, held_code=mine or "")
            # Would the node be held, whatever the pool? Only then is the pool counted.
            free_pool = Q.Pool(size=1 << 30)
            decision = Q.decide(verdict, code, self.history, free_pool, guard, counters_quiet=quiet)
            if decision.action == Q.HOLD:
                decision = self._hold(verdict, code, guard, quiet, node)
            elif decision.action == Q.RELEASE:
                decision = self._release(decision)
        except (_Retry, _Unauthorized, PublishError) as e:
            why = getattr(e, "why", None) or getattr(e, "message", None) or str(e)
            self.errors.append(f"quarantine: {why}")
            self.state = self._state("error", f"the Kubernetes API failed ({why}): nothing decided this cycle", code)
            return self.state
        self.history = decision.history
        self._announce(decision, node)
        self.last_action = decision.action
        self.storm = (self.pool, self._storm_code or decision.code) if decision.action == Q.DEFER_STORM else None
        self.state = self._state(decision.action, decision.reason, decision.code or self.history.held_code)
        return self.state

    _storm_code = ""

    def _state(self, action: str, reason: str, code: str) -> dict:
        held = self.history.held
        return {
            "mode": self.mode,
            "pool": self.pool,
            "held": held,
            "taint": _taint_text(taint_for(self.history.held_code)) if held else None,
            "action": action,
            "reason": ("dry run: " if self.dry_run and action in (Q.HOLD, Q.RELEASE) else "") + reason,
            "code": code or None,
            "problem_streak": self.history.problem_streak,
            "healthy_streak": self.history.healthy_streak,
        }

    # -- hold: under the pool's Lease, count then taint -------------------------------------------
    def _hold(self, verdict: str, code: str, guard: Q.Guardrails, quiet: bool, node: dict | None) -> Q.Decision:
        """Count the pool; a storm or a spent budget defers without the Lease. A hold counts again
        under the pool's Lease (another node may have taken the last place meanwhile), then taints
        (a dry run: sets its would-hold label, which the pool's count reads as a hold)."""
        decision = Q.decide(verdict, code, self.history, self._count(verdict, code), guard, counters_quiet=quiet)
        if decision.action != Q.HOLD:
            return decision
        taken = self._acquire()
        if isinstance(taken, str):
            waiting = replace(self.history, problem_streak=self.history.problem_streak + 1, healthy_streak=0)
            return Q.Decision(Q.WAIT, taken, waiting, code)
        try:
            decision = Q.decide(verdict, code, self.history, self._count(verdict, code), guard, counters_quiet=quiet)
            if decision.action == Q.HOLD and not self._write_mark(code):
                what = "dry-run label" if self.dry_run else "taint"
                return Q.Decision(Q.KEEP, f"rdmadoctor's {what} was already on the node", decision.history, code)
            return decision
        finally:
            self._release_lease(taken)

    def _count(self, verdict: str, code: str) -> Q.Pool:
        size = held = failing = 0
        codes: Counter = Counter()
        for item in self._list_pool():
            meta = item.get("metadata") or {}
            labels = meta.get("labels") or {}
            if meta.get("name") == self.node:
                continue  # this node counts by what it knows now, not by a label that may lag
            size += 1
            if own_taint(item) is not None or (self.dry_run and _labels(item).get(self.would_hold_label)):
                held += 1
            if labels.get(self.prefix + "ready") == "false":
                failing += 1
                c = labels.get(self.problem_label) or (own_taint(item) or {}).get("value")
                if isinstance(c, str) and c:
                    codes[c] += 1
        size += 1
        if verdict == Q.PROBLEM:
            failing += 1
            if code:
                codes[code] += 1
        if self.history.held:
            held += 1
        common = codes.most_common(1)[0][0] if codes else ""
        self._storm_code = common
        return Q.Pool(size=size, held=held, failing=failing, common_code=common)

    def _list_pool(self):
        from lightkube.resources.core_v1 import Node

        selector = f"{self.pool_label}={self.pool}"
        state: dict = {}

        def first(c):
            state["chunks"] = c._client.list_chunks(
                c._client.prepare_request("list", res=Node, params={"limit": 500, "labelSelector": selector})
            )
            return next(state["chunks"], None)

        try:
            chunk = self.api._call(first, f"GET /api/v1/nodes?labelSelector={selector}")
            while chunk is not None:
                for item in chunk[1]:
                    yield _as_dict(item)
                chunk = self.api._call(lambda c: next(state["chunks"], None), "GET /api/v1/nodes (next page)")
        except _Refused as e:
            raise PublishError(
                f"listing pool {self.pool}'s Nodes (labelSelector {selector}): HTTP {e.code} ({e.reason}); the agent's "
                "ServiceAccount needs list on nodes to count its pool: the ClusterRole of deploy/overlays/direct-quarantine",
                transient=False,
            ) from None

    # -- the mark: rdmadoctor's taint, or in a dry run its would-hold label ------------------------
    def _mark(self, node: dict) -> str | None:
        """The root code this node is held for, as the Node says it (rdmadoctor's taint; in a dry
        run the would-hold label), or None when it carries no such mark."""
        if self.dry_run:
            value = _labels(node).get(self.would_hold_label)
            return value if isinstance(value, str) and value else None
        mine = own_taint(node)
        return str(mine.get("value") or "") if mine is not None else None

    def _write_mark(self, code: str | None) -> bool:
        """Hold for ``code`` (release when None); False when there was nothing to do."""
        if self.dry_run:
            return self._write_label(code)
        return self._write_taint(add=taint_for(code) if code is not None else None)

    def _write_label(self, code: str | None) -> bool:
        """A dry run's hold: the label ``<prefix>would-hold=<code>`` on its own Node (removed when
        ``code`` is None), by a JSON merge patch of that one label; no taint, nothing in spec.
        Recorded in the owned-labels annotation as the publisher's labels are, so a later publish
        that no longer wants it (quarantine off or taint) removes it."""
        node = self.api.get_node(self.node)
        key = self.would_hold_label
        have = _labels(node).get(key)
        if (code is None) == (have is None):
            return False
        meta: dict = {"labels": {key: taint_for(code)["value"] if code is not None else None}}
        if code is not None:
            annotations = (node.get("metadata") or {}).get("annotations")
            said = (annotations if isinstance(annotations, dict) else {}).get(owned_annotation(self.prefix))
            owned = {k.strip() for k in said.split(",") if k.strip()} if isinstance(said, str) else set()
            if key not in owned:
                meta["annotations"] = {owned_annotation(self.prefix): ",".join(sorted(owned | {key}))}
        self.api.patch_node(self.node, {"metadata": meta})
        return True

    # -- the taint: read, change our one entry, write with the resourceVersion --------------------
    def _write_taint(self, add: dict | None) -> bool:
        """Add ``add`` (or remove rdmadoctor's taint when None); False when there was nothing to
        do. Retries a 409 Conflict with a fresh read."""
        for attempt in range(CONFLICT_RETRIES + 1):
            node = self.api.get_node(self.node)
            taints = _taints(node)
            others = [t for t in taints if t.get("key") != TAINT_KEY]
            if add is None and len(others) == len(taints):
                return False
            if add is not None and any(t.get("key") == TAINT_KEY for t in taints):
                return False
            new = others + ([add] if add is not None else [])
            rv = (node.get("metadata") or {}).get("resourceVersion")
            patch = {"metadata": {"resourceVersion": rv}, "spec": {"taints": new}}
            try:
                self.api.patch_node(self.node, patch)
                return True
            except _Refused as e:
                if e.code != 403:
                    raise
                raise PublishError(
                    f"{'adding' if add is not None else 'removing'} the taint {TAINT_KEY} on node {self.node}: HTTP 403 ({e.reason}). "
                    "The agent's ServiceAccount needs patch on nodes, and the admission policy rdmadoctor-own-node-labels must "
                    "admit the taint: apply deploy/overlays/direct of this version (an older policy refuses any change of spec)",
                    transient=False,
                ) from None
            except _Retry as e:
                if not e.why.startswith("HTTP 409") or attempt == CONFLICT_RETRIES:
                    raise
                self._note("the Node changed while its taints were written (409 Conflict): read again", attempt=attempt + 1)
        return False  # pragma: no cover - the loop returns or raises

    def _release(self, decision: Q.Decision) -> Q.Decision:
        if not self._write_mark(None):
            what = "dry-run label" if self.dry_run else "taint"
            return replace(decision, action=Q.NONE, reason=f"rdmadoctor's {what} was already gone from the node")
        return decision

    # -- the Lease -------------------------------------------------------------------------------
    def _lease_call(self, method: str, body: dict | None = None) -> dict:
        from lightkube.generic_resource import GenericNamespacedResource
        from lightkube.resources.coordination_v1 import Lease

        class RawLease(GenericNamespacedResource):
            _api_info = Lease._api_info

        ns, name = self.namespace(), lease_name(self.pool)
        path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
        if method == "get":
            got = self.api._call(lambda c: c.get(RawLease, name=name, namespace=ns), f"GET {path}/{name}", "Lease")
        elif method == "create":
            got = self.api._call(lambda c: c.create(RawLease(body), namespace=ns), f"POST {path}", "Lease")  # type: ignore[arg-type]
        else:
            got = self.api._call(lambda c: c.replace(RawLease(body), namespace=ns), f"PUT {path}/{name}", "Lease")  # type: ignore[arg-type]
        out = got.to_dict() if hasattr(got, "to_dict") else got
        return out if isinstance(out, dict) else {}

    def _lease_body(self, old: dict | None, holder: str | None, now: float) -> dict:
        spec = dict((old or {}).get("spec") or {})
        meta: dict = {"name": lease_name(self.pool), "namespace": self.namespace()}
        if old is not None:
            meta["resourceVersion"] = (old.get("metadata") or {}).get("resourceVersion")
        if holder is not None:
            if spec.get("holderIdentity") != holder:
                spec["acquireTime"] = _micro_time(now)
                spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if old is not None else 0)
            spec["holderIdentity"] = holder
            spec["leaseDurationSeconds"] = self.lease_seconds
            spec["renewTime"] = _micro_time(now)
        else:
            spec.pop("holderIdentity", None)
            spec.pop("acquireTime", None)
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}

    def _acquire(self) -> dict | str:
        """The Lease, now ours; or why not (a line: who holds it)."""
        now = self.clock()
        try:
            old: dict | None = self._lease_call("get")
        except _Refused as e:
            if e.code != 404:
                raise self._lease_refused(e) from None
            old = None
        try:
            if old is None:
                return self._lease_call("create", self._lease_body(None, self.node, now))
            spec = old.get("spec") or {}
            holder = spec.get("holderIdentity")
            if holder and holder != self.node:
                from rdmadoctor.publish.base import parse_rfc3339

                renewed = parse_rfc3339(str(spec.get("renewTime") or "")) or 0.0
                duration = spec.get("leaseDurationSeconds")
                duration = duration if isinstance(duration, int) and duration > 0 else self.lease_seconds
                if renewed + duration > now:
                    return f"node {holder} is counting the pool's places (Lease {lease_name(self.pool)}); this node tries again next cycle"
                self._note("took over the pool's Lease from a holder that did not release it", holder=holder)
            return self._lease_call("update", self._lease_body(old, self.node, now))
        except _Retry as e:
            if e.why.startswith("HTTP 409"):
                return f"another node of pool {self.pool} took the Lease {lease_name(self.pool)} first; this node tries again next cycle"
            raise
        except _Refused as e:
            raise self._lease_refused(e) from None

    def _lease_refused(self, e: _Refused) -> PublishError:
        return PublishError(
            f"the pool's Lease {self.namespace()}/{lease_name(self.pool)}: HTTP {e.code} ({e.reason}); the agent's "
            "ServiceAccount needs get, create and update on leases (coordination.k8s.io) in its namespace: the Role "
            "of deploy/overlays/direct-quarantine",
            transient=False,
        )

    def _release_lease(self, lease: dict) -> None:
        try:
            self._lease_call("update", self._lease_body(lease, None, self.clock()))
        except Exception as e:  # noqa: BLE001 - the Lease expires by itself after LEASE_SECONDS
            self.errors.append(f"the pool's Lease was not released (it expires in {self.lease_seconds} s): {e}")

    # -- what others see: Events, the condition, the log -----------------------------------------
    def _announce(self, d: Q.Decision, node: dict | None) -> None:
        reason = REASONS.get(d.action)
        # A deferral is announced once, when it starts or changes kind; a cycle that waited for
        # the Lease in between does not start it again.
        changed = d.action != self.last_deferral
        if d.action in (Q.DEFER_BUDGET, Q.DEFER_STORM):
            self.last_deferral = d.action
        elif d.action != Q.WAIT:
            self.last_deferral = None
        if d.action in (Q.HOLD, Q.RELEASE) or (reason and changed):
            key = ("would-" if self.dry_run and d.action in (Q.HOLD, Q.RELEASE) else "") + d.action
            self.actions[key] += 1
            code = d.code or self.history.held_code or ""
            if d.action == Q.HOLD:
                what = f"{'would add' if self.dry_run else 'added'} taint {_taint_text(taint_for(code))}"
            elif d.action == Q.RELEASE:
                what = f"{'would remove' if self.dry_run else 'removed'} taint {TAINT_KEY}"
            elif d.action == Q.DEFER_STORM:
                what = f"no taint: a storm in pool {self.pool}"
            else:
                what = f"no taint: pool {self.pool}'s quarantine budget is spent"
            message = f"{'dry run: ' if self.dry_run else ''}{what}: {d.reason}"
            if d.code:
                message += f" [codes: {d.code}]"
            if self.log is not None:
                (self.log.info if d.action == Q.RELEASE else self.log.warning)(
                    "quarantine", action=key, mode=self.mode, pool=self.pool, code=code or None, reason=d.reason,
                )
            self._event(reason or "", "Normal" if d.action == Q.RELEASE else "Warning", message, node)
        if not self.dry_run:
            deferred = d.action in (Q.DEFER_BUDGET, Q.DEFER_STORM)
            self._condition(node, deferred, d)

    def _info(self, msg: str, **fields: Any) -> None:
        if self.log is not None:
            self.log.info(msg, **fields)

    def _note(self, msg: str, **fields: Any) -> None:
        self._info("quarantine: " + msg, **fields)

    def _event(self, reason: str, kind: str, message: str, node: dict | None) -> None:
        uid = ((node or {}).get("metadata") or {}).get("uid")
        body = event_body(self.node, uid, {"type": kind, "reason": reason, "message": message}, self.clock())
        body["action"] = EVENT_ACTION
        try:
            self.api.create_event(EVENT_NAMESPACE, body)
        except (_Retry, _Unauthorized, PublishError) as e:
            why = getattr(e, "why", None) or getattr(e, "message", None) or str(e)
            self.errors.append(f"event {reason} not created: {why}")
        except Exception as e:  # noqa: BLE001 - an event must never break the cycle
            self.errors.append(f"event {reason} not created: {type(e).__name__}: {e}")

    def _condition(self, node: dict | None, deferred: bool, d: Q.Decision) -> None:
        """``RDMAQuarantineDeferred`` on nodes/status, written only when it changes (True: the
        hold waits for the budget or a storm; False once it no longer does)."""
        if not deferred and (self.condition_true is False or (self.condition_true is None and node is None)):
            return
        try:
            if node is None:
                node = self.api.get_node(self.node)
            current = next(
                (c for c in ((node.get("status") or {}).get("conditions") or []) if isinstance(c, dict) and c.get("type") == CONDITION),
                None,
            )
            self.condition_true = bool(current and current.get("status") == "True")
            if deferred:
                reason = "PoolStorm" if d.action == Q.DEFER_STORM else "BudgetSpent"
                message = d.reason[:1024]
                if self.condition_true and current and current.get("reason") == reason:
                    return
                status = "True"
            else:
                if not current or current.get("status") != "True":
                    return
                reason, message, status = "NotDeferred", f"no hold is waiting ({d.action}: {d.reason})"[:1024], "False"
            stamp = rfc3339(self.clock())
            cond = {"type": CONDITION, "status": status, "reason": reason, "message": message,
                    "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}
            self.api.patch_status(self.node, {"status": {"conditions": [cond]}})
            self.condition_true = deferred
        except (_Retry, _Unauthorized, PublishError) as e:
            why = getattr(e, "why", None) or getattr(e, "message", None) or str(e)
            self.errors.append(f"condition {CONDITION} not written: {why}")


Q_LABEL_POOL = "rdmadoctor.io/pool"
Q_LABEL_PROBLEM = "rdmadoctor.io/problem"
# A dry run's hold, in place of the taint (the publisher moves it under --prefix as the others).
Q_LABEL_WOULD_HOLD = "rdmadoctor.io/would-hold"


def _taint_text(t: dict) -> str:
    return f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}"
