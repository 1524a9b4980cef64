"""`rdmadoctor agent`'s process: build the publisher, metrics and loop, serve, stop on a signal.

One process, two threads of our own: the cycle thread runs the checks every ``interval``
seconds (jittered so a DaemonSet's pods do not all hit the API server in the same second) and
the metrics server answers scrapes. The main thread only waits for SIGTERM/SIGINT: a publish
stuck in a slow API call can then not hold up the exit, and every sleep of the cycle thread is
an ``Event.wait`` that the signal cuts short.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, Callable

from rdmadoctor import __version__
from rdmadoctor.agent.log import Log
from rdmadoctor.agent.loop import Agent, Settings, resync_seconds
from rdmadoctor.publish.fsutil import hold_writes, release_writes
from rdmadoctor.runner import Options, UsageError

LOG_FORMATS = ("text", "json")


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
    quarantine: str = "off",
) -> int:
    """The body of `rdmadoctor agent`; returns the exit code.

    A usage problem (a bad flag, a wrong --profile or --config at the first cycle, a port that
    cannot be served) is raised as UsageError; the CLI prints it and exits 2.
    """
    import signal

    from rdmadoctor import publish as publish_mod

    if log_format not in LOG_FORMATS:
        raise UsageError(f"--log-format must be text or json, got {log_format!r}")
    log = Log(log_format)
    if not interval > 0:
        raise UsageError(f"--interval must be positive, got {interval:g}")
    if not 0 <= metrics_port <= 65535:
        raise UsageError(f"--metrics-port must be 0..65535, got {metrics_port}")
    if report_file is not None:
        _check_report_file(report_file)
    if report_file and not os.path.isdir(os.path.dirname(os.path.abspath(report_file))):
        raise UsageError(f"--report-file {report_file}: its directory does not exist", "mount a writable emptyDir there, or give another path")

    from rdmadoctor.publish.quarantine import MODES as QUARANTINE_MODES

    if quarantine not in QUARANTINE_MODES:
        raise UsageError(f"--quarantine must be one of {', '.join(QUARANTINE_MODES)}, got {quarantine!r}")
    if quarantine != "off" and publish_mode != "node":
        raise UsageError(
            f"--quarantine {quarantine} needs --publish node: it taints the agent's own Node through the API",
            "run the agent with --publish node (deploy/overlays/direct-quarantine), or leave --quarantine off",
        )
    if quarantine == "taint" and dry_run:
        raise UsageError("--dry-run with --quarantine taint would still taint the node", "use --quarantine dry-run with --dry-run")

    stop = threading.Event()
    try:
        publisher = publish_mod.make_publisher(
            publish_mode, features_dir=features_dir, expiry=expiry, node=node, kubeconfig=kubeconfig,
            prefix=prefix, conditions=conditions, dry_run=dry_run, out=sys.stdout,
            cancel=stop,  # SIGTERM cuts the publisher's own retry sleeps short
        )
        actuator = None
        if quarantine != "off":
            from rdmadoctor.publish.kube import NodePublisher
            from rdmadoctor.publish.quarantine import KubeQuarantine

            assert isinstance(publisher, NodePublisher)  # --publish node, checked above
            actuator = KubeQuarantine(
                api=publisher.api, node=publisher.node, mode=quarantine, pool=opts.pool, prefix=prefix, log=log, cancel=stop,
            )
    except UsageError:
        raise
    except (publish_mod.PublishError, ValueError) as e:
        raise UsageError(str(e), getattr(e, "hint", "")) from e

    from rdmadoctor.output.metrics import AgentMetrics

    # The targets this mode can write start at 0 in rdmadoctor_node_updates_total.
    targets = {"nfd": ["nfd"], "node": ["node"], "stdout": []}.get(publish_mode, [])
    if conditions and publish_mode in ("nfd", "node"):
        targets.append("node-status")
    metrics = AgentMetrics(__version__, () if dry_run else tuple(targets))
    if actuator is not None:
        metrics.enable_quarantine(dry_run=quarantine == "dry-run")
    settings = Settings(interval=interval, report_file=report_file, conditions=conditions)
    settings.resync = resync_seconds(publish_mode, conditions, expiry)
    node_labels = None
    if publish_mode == "node":
        # A pool may be chosen by its Node's labels (match = { labels = ... }): direct mode has the Node at hand.
        from rdmadoctor.publish.kube import NodePublisher

        assert isinstance(publisher, NodePublisher)
        api, name = publisher.api, publisher.node

        def node_labels() -> dict:
            return ((api.get_node(name).get("metadata") or {}).get("labels")) or {}

    agent = Agent(opts, publisher, metrics, log, settings, stop=stop, quarantine=actuator, node_labels=node_labels)

    if once:
        try:
            report = agent.run_cycle(strict=True)  # a UsageError goes to the CLI
            if report is None:
                return 2  # the checks could not run (logged)
            if agent.pending is not None:
                return 2  # the checks ran but their result did not land (logged)
            if agent.report_error is not None:
                return 2  # nor did the --report-file that was asked for (logged)
            return int(report["exit_code"])
        finally:
            _close(publisher, log)

    server = None
    if metrics_port:
        try:
            server = _start_server(metrics, agent, metrics_address, metrics_port, log)
        except ImportError as e:
            _close(publisher, log)
            raise UsageError("the agent's /metrics needs prometheus-client", "pip install prometheus-client (a dependency of rdmadoctor; it is missing from this environment), or run with --metrics-port 0") from e
        except OSError as e:
            _close(publisher, log)
            raise UsageError(f"cannot serve metrics on {metrics_address}:{metrics_port}: {e.strerror or e}", "pick another --metrics-port, or 0 to turn metrics off") from e

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
        quarantine=quarantine if actuator is None else f"{quarantine} (pool {actuator.pool})",
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
    # An abandoned cycle may be mid-write of the report or the NFD file: let that write finish
    # and start no other, so the exit leaves no temp file beside them.
    held = hold_writes()
    try:
        return _finish(agent, publisher, server, worker, log)
    finally:
        if held:  # the cycle thread saw `stop` and starts no report write any more (Agent._write_report)
            release_writes()


def _check_report_file(path: str) -> None:
    """Refuse at start what no cycle could write, or should not replace (a device node such as
    /dev/null, a FIFO, a symlink, a directory): a usage error, exit 2, before the first cycle."""
    from rdmadoctor.publish.fsutil import target_problem

    hint = "give a new file name or an existing regular file, e.g. --report-file /var/run/rdmadoctor/report.json (replaced whole each cycle)"
    if path == "-":
        raise UsageError("--report-file -: the report file is a file, not stdout", "give a file name; for labels on stdout use --publish stdout")
    what = target_problem(path)
    if what == "an empty name":
        raise UsageError("--report-file '': an empty file name (an unset shell variable?)", hint)
    if what:
        raise UsageError(f"refusing to write --report-file {path}: it is {what}, not a regular file", hint)


def _finish(agent: Agent, publisher: Any, server: Any, worker: threading.Thread, log: Log) -> int:
    if server is not None:
        server.stop()
    if not worker.is_alive():
        _close(publisher, log)
    if agent.fatal is not None:
        raise agent.fatal
    log.info("agent stopped", cycles=agent.cycles)
    return 0


def _guarded(agent: Agent, log: Log, stop: threading.Event) -> Callable[[], None]:
    def target() -> None:
        # run_cycle already keeps check and publish errors inside; this is the last line of
        # defence: a bug in the loop itself is logged and the loop resumes after a pause.
        while not stop.is_set():
            try:
                agent.run()
            except Exception as e:  # noqa: BLE001 - a bug in the loop must not end the agent
                agent.last_error = f"agent loop: {type(e).__name__}: {e}"
                log.error("agent loop failed; restarting it", error=agent.last_error)
                stop.wait(min(agent.s.interval, 10.0))

    return target


def _start_server(metrics: Any, agent: Agent, address: str, port: int, log: Log) -> Any:
    from rdmadoctor.agent.server import MetricsServer

    # The process_* series too (memory, CPU, open files): what a pod's limits are judged by.
    return MetricsServer(address, port, metrics.registry(process=True), agent.health, log).start()


def _close(publisher: Any, log: Log) -> None:
    try:
        close = getattr(publisher, "close", None)
        if close is not None:
            close()
    except Exception as e:  # noqa: BLE001 - the agent is stopping: say so and go on
        log.warning("closing the publisher failed", error=f"{type(e).__name__}: {e}")
