"""`rdmadoctor agent`: the DaemonSet loop. Check, publish on change, serve metrics, repeat.

One process, two threads of our own: the cycle thread runs the checks every ``interval``
seconds (jittered so a DaemonSet's pods do not all hit the API server in the same second) and
the metrics server answers scrapes. The main thread only waits for SIGTERM/SIGINT: a publish
stuck in a slow API call can then not hold up the exit, and every sleep of the cycle thread is
an ``Event.wait`` that the signal cuts short.

Each cycle opens a fresh Host (so sysfs and /proc are read again and tools run again); the
check modules are imported once per process. Writing only on change is the Publisher's job;
the agent adds two things: it does not call an API-backed publisher at all while the labels
(and conditions) are unchanged, except for a slow resync (see RESYNC_SECONDS), and after a
failed publish it retries the same report with capped exponential backoff, never in a tight loop.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, TextIO

from rdmadoctor import __version__
from rdmadoctor.publish import fsutil
from rdmadoctor.core.model import ERROR, UNKNOWN, WARNING
from rdmadoctor.runner import Options, UsageError, diagnose


# ---- logging ----------------------------------------------------------------------------------
class Log:
    """One line per event on stderr: text, or one JSON object a line (``--log-format json``)."""

    def __init__(self, fmt: str = "text", stream: TextIO | None = None):
        self.fmt = fmt
        self.stream = stream if stream is not None else sys.stderr
        self._lock = threading.Lock()

    def _emit(self, level: str, msg: str, fields: dict[str, Any]) -> None:
        now = time.time()
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
        if self.fmt == "json":
            line = json.dumps({"ts": ts, "level": level, "msg": msg, **fields}, default=str, separators=(",", ":"))
        else:
            parts = [ts, level.upper().ljust(5), msg]
            for k, v in fields.items():
                if isinstance(v, (list, tuple)):
                    v = ",".join(map(str, v)) or "-"
                elif isinstance(v, dict):
                    v = ",".join(f"{a}={b}" for a, b in v.items()) or "-"
                parts.append(f"{k}={_quote(str(v))}")
            line = " ".join(parts)
        with self._lock:
            try:
                self.stream.write(line + "\n")
                self.stream.flush()
            except (OSError, ValueError):  # stderr closed: nothing sensible left to do
                pass

    def info(self, msg: str, **fields: Any) -> None:
        self._emit("info", msg, fields)

    def warning(self, msg: str, **fields: Any) -> None:
        self._emit("warn", msg, fields)

    def error(self, msg: str, **fields: Any) -> None:
        self._emit("error", msg, fields)


def _quote(v: str) -> str:
    return json.dumps(v, ensure_ascii=False) if (not v or any(c in v for c in " =\"\n")) else v


# ---- the report file ---------------------------------------------------------------------------
write_atomic = fsutil.write_atomic  # the report file; tests call it as agent.write_atomic


# ---- the loop ----------------------------------------------------------------------------------
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
    ):
        self.opts = opts
        self.publisher = publisher
        self.metrics = metrics
        self.log = log
        self.s = settings
        self.stop = stop or threading.Event()
        self.clock = clock
        self.rng = rng or random.Random()
        self.diagnose = diagnose_fn
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
            diag = self.diagnose(self.opts)
        except Exception as e:  # noqa: BLE001 - a broken cycle must not end the agent
            if strict and isinstance(e, UsageError):
                raise
            why = str(e) if isinstance(e, UsageError) else f"{type(e).__name__}: {e}"
            if why != self.last_error:
                self.log.error("checks could not run", error=why, hint=getattr(e, "hint", "") or None)
            self.last_error = why
            return None
        if self.last_error is not None:
            self.log.info("checks run again", previous_error=self.last_error)
        self.last_error = None
        report = diag.report
        self.last_report = report
        self.metrics.update(diag.results)
        self._log_changes(report)
        self._write_report(report)
        self.publish(report)
        self.last_finished = self.clock()
        return report

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
        if not self.s.report_file:
            return
        try:
            write_atomic(self.s.report_file, (json.dumps(report, indent=1) + "\n").encode())
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
            why = str(e) if transient_attr is not None else f"internal error {type(e).__name__}: {e}"
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


def run_agent(
    opts: Options,
    *,
    publish_mode: str = "nfd",
    features_dir: str,
    expiry: int,
    node: str | None,
    kubeconfig: str | None,
    prefix: str,
    conditions: bool,
    dry_run: bool,
    interval: float,
    metrics_port: int,
    metrics_address: str,
    report_file: str | None,
    log_format: str,
    once: bool,
) -> int:
    """The body of `rdmadoctor agent`; returns the exit code."""
    import signal

    from rdmadoctor.cli.errors import fail_usage

    log = Log(log_format)
    if interval <= 0:
        return fail_usage(f"--interval must be positive, got {interval:g}")
    if not 0 <= metrics_port <= 65535:
        return fail_usage(f"--metrics-port must be 0..65535, got {metrics_port}")
    if report_file and not os.path.isdir(os.path.dirname(os.path.abspath(report_file))):
        return fail_usage(f"--report-file {report_file}: its directory does not exist", "mount a writable emptyDir there, or give another path")
    from rdmadoctor import publish as publish_mod

    stop = threading.Event()
    try:
        publisher = publish_mod.make_publisher(
            publish_mode, features_dir=features_dir, expiry=expiry, node=node, kubeconfig=kubeconfig,
            prefix=prefix, conditions=conditions, dry_run=dry_run, out=sys.stdout,
            cancel=stop,  # SIGTERM cuts the publisher's own retry sleeps short
        )
    except (publish_mod.PublishError, UsageError, ValueError) as e:
        return fail_usage(str(e), getattr(e, "hint", ""))

    from rdmadoctor.output.metrics import AgentMetrics

    # The targets this mode can write start at 0 in rdmadoctor_node_updates_total.
    targets = {"nfd": ["nfd"], "node": ["node"], "stdout": []}.get(publish_mode, [])
    if conditions and publish_mode in ("nfd", "node"):
        targets.append("node-status")
    metrics = AgentMetrics(__version__, () if dry_run else tuple(targets))
    settings = Settings(interval=interval, report_file=report_file, conditions=conditions)
    settings.resync = resync_seconds(publish_mode, conditions, expiry)
    agent = Agent(opts, publisher, metrics, log, settings, stop=stop)

    if once:
        try:
            try:
                report = agent.run_cycle(strict=True)
            except UsageError as e:
                return fail_usage(str(e), e.hint)
            if report is None:
                return 2  # the checks could not run (logged)
            if agent.pending is not None:
                return 2  # the checks ran but their result did not land (logged)
            return int(report["exit_code"])
        finally:
            _close(publisher, log)

    server = None
    if metrics_port:
        try:
            server = _start_server(metrics, agent, metrics_address, metrics_port)
        except ImportError:
            _close(publisher, log)
            return fail_usage("the agent's /metrics needs prometheus-client", "pip install 'rdmadoctor[k8s]', or run with --metrics-port 0")
        except OSError as e:
            _close(publisher, log)
            return fail_usage(f"cannot serve metrics on {metrics_address}:{metrics_port}: {e.strerror or e}", "pick another --metrics-port, or 0 to turn metrics off")

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    log.info(
        "agent started",
        version=__version__,
        source=opts.root or opts.bundle or (f"example:{opts.example}" if opts.example else "/"),
        profile=opts.profile,
        publish=publish_mode + (" (dry run)" if dry_run else ""),
        interval=f"{interval:g}s",
        metrics=f"{server.address}:{server.port}" if server else "off",
        report_file=report_file or "-",
    )
    if expiry and expiry < 2 * interval and publish_mode == "nfd":
        log.warning("--expiry is shorter than two intervals: the NFD labels may expire between cycles", expiry=expiry, interval=f"{interval:g}s")

    worker = threading.Thread(target=_guarded(agent, log, stop), name="cycle", daemon=True)
    worker.start()
    # Waits with a timeout so the main thread gets back to the interpreter and runs the
    # signal handler promptly.
    while not stop.wait(0.5):
        if not worker.is_alive():
            break
    stop.set()
    # The cycle thread sees `stop` at its next wait; a publish blocked in an API call is
    # abandoned (daemon thread): its writes are atomic, so nothing is left half-done.
    worker.join(timeout=1.5)
    if server is not None:
        server.stop()
    if not worker.is_alive():
        _close(publisher, log)
    if agent.fatal is not None:
        return fail_usage(str(agent.fatal), agent.fatal.hint)
    log.info("agent stopped", cycles=agent.cycles)
    return 0


def _guarded(agent: Agent, log: Log, stop: threading.Event) -> Callable[[], None]:
    def target() -> None:
        # run_cycle already keeps check and publish errors inside; this is the last line of
        # defence: a bug in the loop itself is logged and the loop resumes after a pause.
        while not stop.is_set():
            try:
                agent.run()
            except Exception as e:  # noqa: BLE001
                agent.last_error = f"agent loop: {type(e).__name__}: {e}"
                log.error("agent loop failed; restarting it", error=agent.last_error)
                stop.wait(min(agent.s.interval, 10.0))

    return target


def _start_server(metrics: Any, agent: Agent, address: str, port: int) -> Any:
    from rdmadoctor.output.metrics import MetricsServer

    return MetricsServer(address, port, metrics.registry(), agent.health).start()


def _close(publisher: Any, log: Log) -> None:
    try:
        close = getattr(publisher, "close", None)
        if close is not None:
            close()
    except Exception as e:  # noqa: BLE001
        log.warning("closing the publisher failed", error=f"{type(e).__name__}: {e}")
