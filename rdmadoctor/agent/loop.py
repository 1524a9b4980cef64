"""The agent's loop: check, record, publish on change (retrying with backoff), repeat.

Each cycle opens a fresh Host (so sysfs and /proc are read again and tools run again); the
check modules are imported once per process. Writing only on change is the Publisher's job;
the agent adds two things: it does not call an API-backed publisher at all while the labels
(and conditions) are unchanged, except for a slow resync (see RESYNC_SECONDS), and after a
failed publish it retries the same report with capped exponential backoff, never in a tight loop.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from rdmadoctor.agent.log import Log
from rdmadoctor.core.model import ERROR, UNKNOWN, WARNING
from rdmadoctor.publish.fsutil import write_atomic
from rdmadoctor.runner import Options, UsageError, diagnose

__all__ = ["RESYNC_SECONDS", "Agent", "Settings", "backoff_delays", "problems_of", "resync_seconds", "write_atomic"]


@dataclass
class Settings:
    interval: float = 60.0
    jitter: float = 0.1  # each wait is interval * (1 +- jitter)
    report_file: str | None = None
    # Healthy while the last cycle finished less than this many intervals (+ slack) ago.
    stale_intervals: float = 3.0
    stale_slack: float = 10.0
    # Seconds between publisher calls while what it publishes is unchanged (0: every cycle).
    resync: float = 0.0
    # Conditions are published too: they follow the findings, not only the labels.
    conditions: bool = False


def backoff_delays(interval: float) -> tuple[float, float]:
    """(first, cap) of the publish retry backoff: it doubles from ``first`` and stays below the
    interval, so a retry always comes before the next cycle would have retried anyway."""
    cap = min(300.0, interval / 2)
    first = min(1.0, cap / 4)
    return first, cap


# The node publisher GETs the Node on every call (to see drift: a label someone removed). Called
# every cycle, that is a GET per node per minute across the fleet for nothing; so while the labels
# (and conditions) stay the same, the agent calls it only this often, which also bounds how late a
# NodeCondition heartbeat (publish.DEFAULT_HEARTBEAT, 300 s) or a drift repair can be.
RESYNC_SECONDS = 300.0


def resync_seconds(mode: str, conditions: bool, expiry: float) -> float:
    """How long the agent may skip the publisher while what it would publish is unchanged."""
    if mode == "stdout":
        return float("inf")  # print on change only (`label --publish stdout` prints every time)
    if mode == "nfd" and not conditions:
        return 0.0  # a local file, no API: the NFD publisher itself decides when the expiry needs a rewrite
    if mode == "nfd":
        # The NFD file's expiry is refreshed at half its window: call often enough to catch that.
        return min(RESYNC_SECONDS, max(expiry, 0) / 4)
    return RESYNC_SECONDS


class NodeLabelsUnread(Exception):
    """A pool's `match` names Node labels and none could be read yet: the cycle cannot choose the pool."""


def problems_of(report: dict) -> list[str]:
    """Codes that make the node not (fully) ready, in report order, each once."""
    out: list[str] = []
    for c in report.get("checks", []):
        for f in c.get("findings", []):
            if f.get("severity") in (ERROR, WARNING, UNKNOWN) and f["code"] not in out:
                out.append(f["code"])
    return out


class Agent:
    def __init__(
        self,
        opts: Options,
        publisher: Any,
        metrics: Any,
        log: Log,
        settings: Settings,
        *,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        diagnose_fn: Callable[..., Any] = diagnose,
        quarantine: Any = None,
        node_labels: Callable[[], dict] | None = None,
    ):
        self.opts = opts
        if getattr(opts, "counters", None) is None:
            # The ports' counters across cycles: ib.counters judges flaps and error rates on it.
            from rdmadoctor.core.counters import CounterHistory

            opts.counters = CounterHistory()
        self.publisher = publisher
        self.metrics = metrics
        self.log = log
        self.s = settings
        self.stop = stop or threading.Event()
        self.clock = clock
        self.rng = rng or random.Random()
        self.diagnose = diagnose_fn
        # --quarantine dry-run|taint: rdmadoctor.publish.quarantine.KubeQuarantine, run after each publish.
        self.quarantine = quarantine
        # --publish node: reads the Node's labels, for a pool whose `match` names labels.
        self.node_labels = node_labels
        self.labels_read_at: float | None = None
        self.labels_error: str | None = None
        self.cycles = 0
        # health
        self.last_finished: float | None = None  # monotonic time of the last cycle that ran the checks
        self.last_error: str | None = None  # why the last cycle could not run the checks
        # change tracking, so a steady node logs nothing
        self.status: str | None = None
        self.problems: list[str] | None = None
        self.published_labels: dict | None = None
        # publishing
        self.pending: dict | None = None  # report still to publish (its publish failed)
        self.published_key: str | None = None  # publish_key of the last successful publish
        self.last_published: float | None = None
        self.publish_failures = 0
        self.retry_at: float | None = None
        self.last_publish_error: str | None = None
        self.report_error: str | None = None
        self.last_report: dict | None = None
        self.fatal: UsageError | None = None

    # -- health -------------------------------------------------------------------------------
    def health(self) -> tuple[bool, str]:
        if self.last_error is not None:
            return False, f"the last cycle failed: {self.last_error}"
        if self.last_finished is None:
            return False, "starting: no cycle has finished yet"
        age = self.clock() - self.last_finished
        limit = self.s.stale_intervals * self.s.interval + self.s.stale_slack
        if age > limit:
            return False, f"stuck: the last cycle finished {age:.0f}s ago (interval {self.s.interval:g}s, limit {limit:.0f}s)"
        return True, "ok"

    # -- one cycle ----------------------------------------------------------------------------
    def run_cycle(self, strict: bool = False) -> dict | None:
        """Run the checks, record and publish; returns the report (None when the checks could not run).

        ``strict``: a UsageError (bad --profile, --config, source) is raised, not logged: at start
        it is a mistake in the DaemonSet's arguments, later a ConfigMap edited under our feet.
        """
        self.cycles += 1
        try:
            self._read_node_labels()
            diag = self.diagnose(self.opts)
        except Exception as e:  # a broken cycle must not end the agent
            if strict and isinstance(e, UsageError):
                raise
            why = str(e) if isinstance(e, (UsageError, NodeLabelsUnread)) else f"{type(e).__name__}: {e}"
            if why != self.last_error:
                self.log.error("checks could not run", error=why, hint=getattr(e, "hint", "") or None)
            self.last_error = why
            return None
        if self.last_error is not None:
            self.log.info("checks run again", previous_error=self.last_error)
        self.last_error = None
        report = diag.report
        if self.quarantine is not None:
            guard = self._guardrails(diag, strict)
            if guard is None:
                return None
            # The pool this cycle counts in (a [pools.NAME] match may choose it), then its labels: the
            # pool, and the root code while failing: what the pool's budget and storm count.
            self.quarantine.follow_pool(report)
            report.setdefault("labels", {}).update(self.quarantine.labels(report))
        self.last_report = report
        self.metrics.update(diag.results, report=report)
        self._log_changes(report)
        if self.quarantine is None:
            self._write_report(report)
            self.publish(report)
        else:
            # The labels first (the pool counts them), then the action, then the report that says it.
            self.publish(report)
            self._quarantine(report, guard)
            self._write_report(report)
        self.last_finished = self.clock()
        return report

    def _read_node_labels(self) -> None:
        """Give the pools' `match = { labels = ... }` the Node's labels (issue 32 item 3). Read only
        where a pool of the config names labels, then again at the publisher's resync pace, not
        every cycle (a GET per node per minute across the fleet; labels rarely change). A failed
        read keeps the labels read before; with none read yet the cycle cannot choose the pool,
        so it fails (logged, /healthz says why) rather than judge the node as another pool's."""
        if self.node_labels is None or not self.opts.config or self.opts.pool:
            return
        from rdmadoctor.engine import expectations

        try:
            if not any("labels" in match for _, match in expectations.pool_rules(self.opts.config)):
                return
        except expectations.ConfigError:
            return  # the checks say what is wrong with the config
        now = self.clock()
        if self.opts.node_labels is not None and self.labels_read_at is not None and now - self.labels_read_at < self.s.resync:
            return
        try:
            labels = self.node_labels()
        except Exception as e:  # PublishError, or anything the client raised
            why = f"{type(e).__name__}: {e}" if not str(e) else str(e)
            if self.opts.node_labels is None:
                raise NodeLabelsUnread(
                    f"a pool's match names Node labels, and reading this Node's failed: {why}") from e
            if why != self.labels_error:
                self.log.warning("could not read the Node's labels; the pool is chosen with the ones read before", error=why)
            self.labels_error = why
            return
        if self.labels_error is not None:
            self.log.info("the Node's labels are read again", previous_error=self.labels_error)
        self.labels_error = None
        self.opts.node_labels = {str(k): str(v) for k, v in (labels or {}).items()}
        self.labels_read_at = now

    def _guardrails(self, diag: Any, strict: bool) -> Any:
        from rdmadoctor.core.quarantine import GuardError, Guardrails

        try:
            return Guardrails.from_expect(getattr(getattr(diag, "ctx", None), "expect", None) or {})
        except (GuardError, TypeError, ValueError) as e:
            if strict:
                raise UsageError(str(e), "set quarantine_budget to a count (2) or a percentage ('10%') in --config or --set") from e
            why = f"the quarantine guardrails: {e}"
            if why != self.last_error:
                self.log.error("checks could not run", error=why)
            self.last_error = why
            return None

    def _quarantine(self, report: dict, guard: Any) -> None:
        q = self.quarantine
        before = (q.state or {}).get("action"), (q.state or {}).get("held")
        try:
            state = q.cycle(report, guard)
        except Exception as e:  # noqa: BLE001 - a bug in the actuator must not end the agent
            state = {"mode": q.mode, "pool": q.pool, "held": q.history.held, "action": "error",
                     "reason": f"internal error {type(e).__name__}: {e}", "code": None}
            q.errors = [state["reason"]]
        report["quarantine"] = state
        for why in q.errors:
            self.metrics.record_api_error()
            self.log.warning("quarantine: a request failed", error=why)
        record = getattr(self.metrics, "record_quarantine", None)
        if record is not None:
            record(q)
        if (state.get("action"), state.get("held")) != before and state.get("action") in ("wait", "none", "keep"):
            self.log.info("quarantine", action=state.get("action"), held=state.get("held"), reason=state.get("reason"))

    def _log_changes(self, report: dict) -> None:
        status, problems = report["status"], problems_of(report)
        if status != self.status or problems != self.problems:
            fields: dict[str, Any] = {"status": status, "problems": problems}
            if self.status is not None:
                fields["previous"] = self.status
            s = report.get("summary", {})
            fields["checks"] = f"{s.get('pass', 0)} pass, {s.get('warn', 0)} warn, {s.get('fail', 0)} fail, {s.get('unknown', 0)} unknown, {s.get('skip', 0)} skipped"
            (self.log.info if status in ("pass", "warn") else self.log.warning)(
                "node status" if self.status is None else "node status changed", **fields
            )
            self.status, self.problems = status, problems

    def _write_report(self, report: dict) -> None:
        # After SIGTERM the process is about to exit: a write begun now could be cut off and leave
        # its temp file; the last report written stays whole.
        if not self.s.report_file or self.stop.is_set():
            return
        try:
            write_atomic(self.s.report_file, (json.dumps(report, indent=1) + "\n").encode(), regular_only=True)
        except OSError as e:
            why = f"{e.strerror or e} ({self.s.report_file})"
            if why != self.report_error:
                self.log.error("cannot write the report file", error=why, path=self.s.report_file)
            self.report_error = why
            return
        if self.report_error is not None:
            self.log.info("report file written again", path=self.s.report_file)
        self.report_error = None

    # -- publishing ---------------------------------------------------------------------------
    def publish_key(self, report: dict) -> str:
        """What the publisher's writes depend on: the labels, and with conditions the findings."""
        parts: list[Any] = [report.get("labels") or {}]
        if self.s.conditions:
            parts.append([(c.get("id"), c.get("status"), c.get("findings")) for c in report.get("checks", [])])
        return json.dumps(parts, sort_keys=True, default=str)

    def publish(self, report: dict) -> bool:
        key = self.publish_key(report)
        if (
            self.pending is None
            and key == self.published_key
            and self.last_published is not None
            and self.clock() - self.last_published < self.s.resync
        ):
            return True  # nothing new to say, and the last successful call is recent
        try:
            targets = list(self.publisher.publish(report) or [])
        except Exception as e:  # noqa: BLE001 - PublishError, or a publisher bug: both are retried
            # publish.PublishError carries `transient`; anything else is a bug, retried at the next cycle.
            if self.stop.is_set():
                return False  # the publisher gave up because we are stopping: not an API error
            transient_attr = getattr(e, "transient", None)
            transient = bool(transient_attr)
            if transient_attr is not None:
                why = str(e)
            elif isinstance(e, OSError):  # --publish stdout to a closed or full stdout: no bug
                why = f"cannot write: {e.strerror or e}"
            else:
                why = f"internal error {type(e).__name__}: {e}"
            self.metrics.record_api_error()
            self.pending = report
            self.publish_failures += 1
            if transient:
                first, cap = backoff_delays(self.s.interval)
                delay = min(cap, first * 2 ** min(self.publish_failures - 1, 30))
                delay *= self.rng.uniform(0.8, 1.0)  # spread the retries of many nodes after an outage
                self.retry_at = self.clock() + delay
            else:
                delay = None  # retrying fast does not fix 403 or a missing Node: the next cycle retries
                self.retry_at = None
            self.log.error(
                "publish failed",
                error=why,
                transient=transient,
                failures=self.publish_failures,
                retry_in=f"{delay:.1f}s" if delay is not None else "next cycle",
            )
            self.last_publish_error = why
            return False
        self.metrics.record_updates(targets)
        # --conditions events are best effort: the publish succeeded, but say what was lost.
        for part in getattr(self.publisher, "parts", None) or [self.publisher]:
            for why in getattr(part, "event_errors", None) or ():
                self.metrics.record_api_error()
                self.log.warning("event not created", error=why)
            for note in getattr(part, "notices", None) or ():
                self.log.warning("node metadata malformed", note=note)
        if self.publish_failures:
            self.log.info("publish recovered", failures=self.publish_failures, targets=targets)
        labels = report.get("labels") or {}
        if labels != self.published_labels:
            if targets:
                self.log.info("labels published", targets=targets, labels=labels)
            self.published_labels = dict(labels)
        self.pending, self.publish_failures, self.retry_at, self.last_publish_error = None, 0, None, None
        self.published_key, self.last_published = key, self.clock()
        return True

    # -- the loop -----------------------------------------------------------------------------
    def next_wait(self) -> float:
        j = self.s.jitter
        return self.s.interval * self.rng.uniform(1 - j, 1 + j)

    def run(self) -> None:
        """Cycle until ``stop`` is set; the first cycle at once.

        A UsageError in the very first cycle (bad --profile or --config) is kept in ``fatal``
        and stops the agent: the DaemonSet's arguments are wrong, and a crash-looping pod with
        that message says so better than a log line a minute.
        """
        next_cycle = self.clock()
        first = self.cycles == 0
        while not self.stop.is_set():
            now = self.clock()
            if now >= next_cycle:
                try:
                    self.run_cycle(strict=first)
                except UsageError as e:
                    self.fatal = e
                    self.stop.set()
                    return
                first = False
                # Cadence from the start of the cycle; a cycle longer than the interval runs the next at once.
                next_cycle = now + self.next_wait()
            elif self.pending is not None and self.retry_at is not None and now >= self.retry_at:
                self.publish(self.pending)
            wake = next_cycle
            if self.pending is not None and self.retry_at is not None:
                wake = min(wake, self.retry_at)
            self.stop.wait(max(0.0, wake - self.clock()))
