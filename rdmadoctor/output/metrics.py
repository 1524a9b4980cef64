"""The agent's Prometheus metrics: a report's check results -> metric families (no HTTP here).

The metrics are one collector that renders a snapshot of the last cycle, swapped in whole by
the agent after each cycle. A scrape therefore never sees half of an update, and a series whose
check or finding code went away is simply not rendered any more: nothing stale to remove by
hand. The collector lives in its own ``CollectorRegistry``, never prometheus-client's global
one, so nothing else imported lands in it (and tests can build as many as they like); the agent
adds prometheus-client's ProcessCollector (the ``process_*`` series) to the one it serves.

prometheus-client is imported only when metrics are rendered (rdmadoctor.agent.server serves
them): the agent with ``--metrics-port 0`` (and the ``check`` path, always) runs without it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from rdmadoctor.core.model import FAIL, PASS, SKIP, UNKNOWN, WARN
from rdmadoctor.output import fleet_metrics

# A check that passed or only warned still lets a job train; fail and unknown do not.
CHECK_OK_VALUE = {PASS: 1.0, WARN: 1.0, FAIL: 0.0, UNKNOWN: 0.0}

# Gb/s (10^9 bit/s, the unit of sysfs' ports/N/rate) in base units, bytes per second.
BYTES_PER_SECOND_PER_GBPS = 1e9 / 8

HELP = {
    "rdmadoctor_check_ok": (
        "1 when the check passed or only warned, 0 when it failed or could not decide (unknown). "
        "Skipped checks (a precondition unmet, e.g. roce.config on an InfiniBand node) have no series."
    ),
    "rdmadoctor_finding": (
        "Findings of the last run per code and severity (error, warning, unknown, info); a code that "
        "is no longer found has no series. cause is empty for a root cause; a finding that follows from "
        "another found with it (MOD_MISSING under IB_NO_DEVICES) has that code as its cause: alert on an "
        "empty cause, one alert per root cause. `rdmadoctor explain CODE` says what it means and how to fix it."
    ),
    "rdmadoctor_check_duration_seconds": "Seconds the check (its preconditions, probe and judge) took in the last run.",
    "rdmadoctor_last_run_timestamp_seconds": "Unix time the last run of the checks finished (alert when it stops advancing).",
    "rdmadoctor_node_updates": (
        "Writes of the node's labels (or conditions) per target: nfd (the NFD features file), node "
        "(Node labels), node-status (NodeConditions). A node whose state does not change makes none."
    ),
    "rdmadoctor_api_errors": (
        "Publish attempts that failed after the publisher's own short retries (API refused, 5xx, 409, "
        "timeouts, expired token; or the NFD file could not be written). The agent keeps retrying with backoff."
    ),
    "rdmadoctor_build_info": "Always 1; the version label says which rdmadoctor runs.",
    "rdmadoctor_quarantine_actions": (
        "Quarantine actions of the agent (--quarantine): hold (taint added), release (taint removed), "
        "defer-budget and defer-storm (a hold deferred: counted once each time a deferral starts); with "
        "--quarantine dry-run, would-hold and would-release."
    ),
    "rdmadoctor_quarantined": "1 while rdmadoctor's NoSchedule taint (rdmadoctor.io/unhealthy) holds this node out of new work (dry run: would).",
    "rdmadoctor_quarantine_storm": (
        "1 while this node's hold is deferred because more than storm_share of its pool fails at once (a shared "
        "cause: a switch, the subnet manager, a configuration push); code is the pool's most common root code."
    ),
    "rdmadoctor_port_active": (
        "1 when the RDMA port's state is ACTIVE, else 0 (DOWN, INIT, ARMED), per device and port, from the "
        "last run; ports excluded with ignore_ports have no series."
    ),
    "rdmadoctor_port_rate_bytes_per_second": (
        "The RDMA port's link rate in bytes per second (the kernel's Gb/s times 125000000, as node_exporter's "
        "node_infiniband_rate_bytes_per_second), from the last run (no series when unknown)."
    ),
}


@dataclass(frozen=True)
class Snapshot:
    """What the last finished cycle measured; replaced whole, never mutated."""

    check_ok: dict[str, float] = field(default_factory=dict)
    findings: dict[tuple[str, str], int] = field(default_factory=dict)  # root causes: (code, severity)
    durations: dict[str, float] = field(default_factory=dict)
    last_run: float | None = None
    # (device, port, link layer) -> 1.0 / 0.0, and -> bytes per second
    port_active: dict[tuple[str, str, str], float] = field(default_factory=dict)
    port_rate: dict[tuple[str, str, str], float] = field(default_factory=dict)
    fingerprint: dict | None = None  # the report's, for the fleet's info metrics (output.fleet_metrics)
    # Findings folded under a cause found with them: (code, severity, cause)
    follow_ons: dict[tuple[str, str, str], int] = field(default_factory=dict)


def ports_of(report: dict | None) -> tuple[dict, dict]:
    """The report's RDMA ports (inventory.rdma_devices) as port_active and port_rate entries."""
    active: dict[tuple[str, str, str], float] = {}
    rate: dict[tuple[str, str, str], float] = {}
    devices = ((report or {}).get("inventory") or {}).get("rdma_devices") or []
    for dev in devices:
        if not isinstance(dev, dict):
            continue
        for p in dev.get("ports") or []:
            if not isinstance(p, dict) or p.get("ignored"):
                continue
            key = (str(dev.get("name") or ""), str(p.get("port") or ""), str(p.get("link_layer") or ""))
            active[key] = 1.0 if str(p.get("state") or "").upper() == "ACTIVE" else 0.0
            if isinstance(p.get("rate_gbps"), (int, float)) and not isinstance(p["rate_gbps"], bool):
                rate[key] = float(p["rate_gbps"]) * BYTES_PER_SECOND_PER_GBPS
    return active, rate


def _folded(report: dict | None) -> set[tuple[str, int]]:
    """(check id, index) of the report's findings that follow from another one found with them
    (MOD_MISSING under IB_NO_DEVICES): counted apart, with their cause as a label, so the alerts
    (which select cause="") fire once, for the root cause, as the text report, preflight and the
    NPD line name it (output.text.folding is the one rule)."""
    if not report:
        return set()
    from rdmadoctor.output.text import folding

    ids = {id(f) for fs in folding(report, verbose=True).values() for f in fs}
    return {
        (str(c.get("id")), i)
        for c in report.get("checks") or () if isinstance(c, dict)
        for i, f in enumerate(c.get("findings") or ()) if id(f) in ids
    }


def snapshot_of(results: list, finished_at: float, report: dict | None = None) -> Snapshot:
    """Build a snapshot from engine CheckResults (they carry status, findings and seconds) and,
    when given, the report built from them (its inventory gives the per-port series)."""
    check_ok: dict[str, float] = {}
    findings: dict[tuple[str, str], int] = {}
    durations: dict[str, float] = {}
    follow_ons: dict[tuple[str, str, str], int] = {}
    folded = _folded(report)
    for r in results:
        durations[r.id] = float(r.seconds)
        if r.status != SKIP:
            check_ok[r.id] = CHECK_OK_VALUE.get(r.status, 0.0)
        for i, f in enumerate(r.findings):
            if (r.id, i) in folded:
                # The text report, preflight and the NPD line fold it under its cause: a series
                # of its own, labelled with that cause, which the alerts leave out.
                fkey = (f.code, f.severity, f.cause or "")
                follow_ons[fkey] = follow_ons.get(fkey, 0) + 1
                continue
            key = (f.code, f.severity)
            findings[key] = findings.get(key, 0) + 1
    active, rate = ports_of(report)
    return Snapshot(check_ok, findings, durations, finished_at, active, rate, (report or {}).get("fingerprint"), follow_ons)


class AgentMetrics:
    """The agent's metric state. Thread-safe: the agent thread writes, scrape threads read."""

    def __init__(self, version: str, targets: tuple[str, ...] = ()):
        self.version = version
        self._lock = threading.Lock()
        self._snap = Snapshot()
        # Targets this publish mode can write start at 0, so rate() works from the first write.
        self._updates: dict[str, int] = {t: 0 for t in targets}
        self._api_errors = 0
        # --quarantine: None (off, no series) or (actions by kind, quarantined, storm (pool, code) or None).
        self._quarantine: tuple[dict[str, int], float, tuple[str, str] | None] | None = None

    # -- writers (the agent) ---------------------------------------------------------------
    def update(self, results: list, finished_at: float | None = None, report: dict | None = None) -> None:
        snap = snapshot_of(results, time.time() if finished_at is None else finished_at, report)
        with self._lock:
            self._snap = snap

    def record_updates(self, targets: list[str]) -> None:
        with self._lock:
            for t in targets:
                self._updates[t] = self._updates.get(t, 0) + 1

    def enable_quarantine(self, dry_run: bool = False) -> None:
        """Export the quarantine series, their actions starting at 0 (rate() from the first one)."""
        kinds = ("would-hold", "would-release") if dry_run else ("hold", "release")
        with self._lock:
            self._quarantine = ({k: 0 for k in kinds + ("defer-budget", "defer-storm")}, 0.0, None)

    def record_quarantine(self, q) -> None:
        """The state of a rdmadoctor.publish.quarantine.KubeQuarantine after its cycle."""
        with self._lock:
            base = self._quarantine[0] if self._quarantine is not None else {}
            actions = {**base, **{k: int(v) for k, v in q.actions.items()}}
            self._quarantine = (actions, 1.0 if q.history.held else 0.0, q.storm)

    def record_api_error(self) -> None:
        with self._lock:
            self._api_errors += 1

    # -- readers -----------------------------------------------------------------------------
    @property
    def api_errors(self) -> int:
        with self._lock:
            return self._api_errors

    def updates(self) -> dict[str, int]:
        with self._lock:
            return dict(self._updates)

    @property
    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._snap

    def collect(self):
        """The prometheus-client Collector protocol: yield metric families."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        with self._lock:
            snap, updates, api_errors, quarantine = self._snap, dict(self._updates), self._api_errors, self._quarantine

        ok = GaugeMetricFamily("rdmadoctor_check_ok", HELP["rdmadoctor_check_ok"], labels=["check"])
        for check, v in sorted(snap.check_ok.items()):
            ok.add_metric([check], v)
        yield ok

        fnd = GaugeMetricFamily("rdmadoctor_finding", HELP["rdmadoctor_finding"], labels=["code", "severity", "cause"])
        counts = {(code, severity, ""): n for (code, severity), n in snap.findings.items()}
        for key, n in snap.follow_ons.items():
            counts[key] = counts.get(key, 0) + n
        for (code, severity, cause), n in sorted(counts.items()):
            fnd.add_metric([code, severity, cause], n)
        yield fnd

        dur = GaugeMetricFamily("rdmadoctor_check_duration_seconds", HELP["rdmadoctor_check_duration_seconds"], labels=["check"], unit="seconds")
        for check, s in sorted(snap.durations.items()):
            dur.add_metric([check], s)
        yield dur

        port_labels = ["device", "port", "link_layer"]
        up = GaugeMetricFamily("rdmadoctor_port_active", HELP["rdmadoctor_port_active"], labels=port_labels)
        for key, v in sorted(snap.port_active.items()):
            up.add_metric(list(key), v)
        yield up

        rate = GaugeMetricFamily(
            "rdmadoctor_port_rate_bytes_per_second", HELP["rdmadoctor_port_rate_bytes_per_second"], labels=port_labels, unit="bytes_per_second"
        )
        for key, v in sorted(snap.port_rate.items()):
            rate.add_metric(list(key), v)
        yield rate

        last = GaugeMetricFamily("rdmadoctor_last_run_timestamp_seconds", HELP["rdmadoctor_last_run_timestamp_seconds"], unit="seconds")
        if snap.last_run is not None:
            last.add_metric([], snap.last_run)
        yield last

        # CounterMetricFamily appends _total itself; no _created series (they would only add noise).
        upd = CounterMetricFamily("rdmadoctor_node_updates", HELP["rdmadoctor_node_updates"], labels=["target"])
        for target, n in sorted(updates.items()):
            upd.add_metric([target], n)
        yield upd

        yield CounterMetricFamily("rdmadoctor_api_errors", HELP["rdmadoctor_api_errors"], value=api_errors)

        if quarantine is not None:
            actions, held, storm = quarantine
            act = CounterMetricFamily("rdmadoctor_quarantine_actions", HELP["rdmadoctor_quarantine_actions"], labels=["action"])
            for kind, n in sorted(actions.items()):
                act.add_metric([kind], n)
            yield act
            yield GaugeMetricFamily("rdmadoctor_quarantined", HELP["rdmadoctor_quarantined"], value=held)
            st = GaugeMetricFamily("rdmadoctor_quarantine_storm", HELP["rdmadoctor_quarantine_storm"], labels=["pool", "code"])
            if storm is not None:
                st.add_metric([storm[0], storm[1] or "UNKNOWN_PROBLEM"], 1)
            yield st

        yield from fleet_metrics.families(snap.fingerprint)

        info = GaugeMetricFamily("rdmadoctor_build_info", HELP["rdmadoctor_build_info"], labels=["version"])
        info.add_metric([self.version], 1)
        yield info

    def registry(self, process: bool = False):
        """A CollectorRegistry of its own holding these metrics, and with ``process`` the
        ``process_*`` series of this process (prometheus-client's ProcessCollector)."""
        from prometheus_client import CollectorRegistry

        reg = CollectorRegistry(auto_describe=True)  # its names: for name[] filters
        reg.register(self)
        if process:
            from prometheus_client import ProcessCollector

            ProcessCollector(registry=reg)
        return reg


def render(registry) -> bytes:
    from prometheus_client import generate_latest

    return generate_latest(registry)
