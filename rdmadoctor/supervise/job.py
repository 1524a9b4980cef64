"""The whole ``rdmadoctor run``: the gate (preflight's, its verdict on stderr), CMD as a watched
child, and at its end the verdict: CMD's exit status, the diagnosis of its output when it failed,
and the ``--report-file``.
"""

from __future__ import annotations

import os
import sys

from rdmadoctor.options import DRAIN_TIMEOUT_MAX
from rdmadoctor.preflight.errors import PreflightError
from rdmadoctor.preflight.request import Request
from rdmadoctor.supervise.diagnosis import Diagnosing, Watch, transport_message
from rdmadoctor.supervise.process import Child, SpawnError, signal_name, spawn_error
from rdmadoctor.supervise.report import check_report_path, end_report, write_report
from rdmadoctor.supervise.streams import PREFIX, LineFeed, Sink

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SCHEMA = "rdmadoctor.run/v1"
NCCL_DEBUG_ENV = (("NCCL_DEBUG", "INFO"), ("NCCL_DEBUG_SUBSYS", "INIT,NET"))


def command_text(argv: list[str], limit: int = 160) -> str:
    """CMD as one shell-quoted line for a message (a long ``python -c`` script shortened)."""
    from rdmadoctor.preflight.run import shell_join

    text = shell_join(argv).replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def child_env(env: dict[str, str], nccl_debug: bool) -> tuple[dict[str, str], list[str]]:
    """The child's environment (ours, plus NCCL_DEBUG* with --nccl-debug where unset) and notes
    on why NCCL's transport may not show in its output."""
    env = dict(env)
    notes = []
    if nccl_debug:
        for key, value in NCCL_DEBUG_ENV:
            env.setdefault(key, value)
    level = env.get("NCCL_DEBUG", "").strip().upper()
    if level and level not in ("INFO", "TRACE"):
        notes.append(
            f"NCCL_DEBUG={env['NCCL_DEBUG']} is set: NCCL will not print which transport it uses "
            "(NCCL_DEBUG=INFO does; --nccl-debug sets it only where it is unset)"
        )
    if level in ("INFO", "TRACE") and env.get("NCCL_DEBUG_FILE"):
        notes.append(
            f"NCCL_DEBUG_FILE={env['NCCL_DEBUG_FILE']} is set: NCCL writes its log there, not to the "
            "job's output, so rdmadoctor cannot tell which transport it uses"
        )
    return env, notes


def run_gate(req: Request, as_json: bool, err: Any) -> tuple[int, dict[str, Any] | None]:
    """preflight's gate with its verdict on stderr (stdout is the job's); (exit code, JSON doc)."""
    import json

    from rdmadoctor.preflight.render import tty_colour
    from rdmadoctor.preflight.run import run_preflight

    said: list[tuple[Any, dict[str, Any]]] = []

    def keep(verdict: Any) -> int:
        # The document as `preflight --json` prints it: the --report-file's "gate".
        said.append((verdict, json.loads(json.dumps(verdict.to_json()))))
        return int(verdict.code)

    code = run_preflight(req.replace(exec_argv=None), say=keep)
    if not said:  # stopped by a signal before a verdict
        return code, None
    verdict, doc = said[0]
    if as_json:
        err.write(json.dumps(doc, indent=2) + "\n")
    else:
        err.write(verdict.text(tty_colour(err), bool(req.verbose)))
    err.flush()
    return code, doc


def run_job(argv: list[str], request: Any = None, *, env: dict[str, str] | None = None, **fields: Any) -> int:
    """The whole ``rdmadoctor run`` of ``request`` (a :class:`~rdmadoctor.preflight.request.Request`
    of run's option record: the gate's options and run's own, ``no_gate``, ``as_json``,
    ``nccl_debug``, ``report_file``, ``read_all``, ``metrics_port``, ``drain_timeout``; or a library call's keywords:
    ``run_job(argv, no_gate=True)``); returns the exit code.

    Raises PreflightError (a UsageError) on a usage problem, before anything runs, and
    SpawnError (``.code`` 127 or 126) when CMD cannot be started.
    """
    import time

    from rdmadoctor.preflight.gate import EXIT, GO

    req = Request.of(request, **fields)
    report_file, metrics_port = req.report_file, req.metrics_port
    as_json = bool(req.as_json)
    if not argv:
        raise PreflightError("run needs a command after --", "rdmadoctor run -- torchrun --nproc_per_node=8 train.py")
    if not argv[0]:  # nothing could run it: said before the gate, 127 as a shell says it
        raise spawn_error(argv[0], None, dict(os.environ if env is None else env))
    if report_file is not None:
        check_report_path(report_file)
    env, notes = child_env(dict(os.environ if env is None else env), bool(req.nccl_debug))
    hang_after = hang_after_s(req)
    if metrics_port is not None and not 0 <= metrics_port <= 65535:
        raise PreflightError(f"--metrics-port {metrics_port}: not a TCP port", "a port from 1 to 65535, or 0 for a free one (said on stderr)")
    drain_s = req.drain_timeout
    if drain_s is not None and (isinstance(drain_s, bool) or not isinstance(drain_s, (int, float))
                                or not 0 <= drain_s <= DRAIN_TIMEOUT_MAX):
        raise PreflightError(f"--drain-timeout {drain_s!r}: not a number of seconds from 0 to {DRAIN_TIMEOUT_MAX:g}",
                             "how long rdmadoctor reads the job's output and its diagnosis after the job exits (default 5)")
    started = time.time()
    report: dict[str, Any] = {"schema": SCHEMA, "command": list(argv), "gate": None, "child": None,
                              "exit_code": None, "transport": None, "nccl": None, "findings": [], "notes": [],
                              "hang_after_s": hang_after, "hangs": [], "failover": []}
    err = sys.stderr
    if not req.no_gate:
        code, doc = run_gate(req, as_json, err)
        report["gate"] = doc
        if doc is None or doc.get("verdict") != GO:
            if doc is not None:
                err.write(f"{PREFIX}{doc['verdict'].upper()}: not running {command_text(argv)}\n")
            report["exit_code"] = code if doc is None else EXIT[doc["verdict"]]
            end_report(report_file, report, started, err, as_json=as_json)
            return report["exit_code"]
        err.write(f"{PREFIX}running {command_text(argv)}\n")
    for note in notes:
        err.write(f"{PREFIX}note: {note}\n")
    for stream in (sys.stdout, err):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    try:
        return _run_child(argv, env, notes, report, report_file, started, read_all=bool(req.read_all),
                          hang_watch=_hang_watch(hang_after, env, req, report), metrics_port=metrics_port,
                          as_json=as_json, drain_s=drain_s)
    except KeyboardInterrupt:  # Ctrl-C after the gate, before the child took over the signal
        err.write(f"{PREFIX}interrupted before {command_text(argv)} started\n")
        report["exit_code"] = 130
        end_report(report_file, report, started, err, as_json=as_json)
        return 130


def hang_after_s(req: Request) -> float | None:
    """hang_after_s from the gate's --profile, --config, --pool and --set (checked before anything runs)."""
    from rdmadoctor.engine.expectations import ConfigError, parse_set, resolve

    try:
        expect = resolve({}, req.profile or "generic", req.config, req.pool, parse_set(list(req.sets or [])))
    except ConfigError as e:
        raise PreflightError(str(e), getattr(e, "hint", "") or "rdmadoctor list-checks shows every expectation") from None
    value = expect.get("hang_after_s")
    return None if value is None else float(value)


def _hang_watch(hang_after: float | None, env: dict[str, str], req: Request, report: dict[str, Any]) -> Any:
    """The hang watch (None with hang_after_s null), reading this node through the gate's --root/--bundle."""
    if hang_after is None:
        return None
    from rdmadoctor.supervise.hang import HangWatch

    root, bundle = req.root, req.bundle

    def host() -> Any:
        from rdmadoctor.host import open_host

        return open_host(root=root, bundle=bundle)

    gate = report.get("gate") or {}
    found = [p for key in ("problems", "warnings") for p in gate.get(key) or () if isinstance(p, dict)]
    return HangWatch(hang_after, lambda line: None, env=env, host_factory=host, gate_findings=found)


def _run_child(argv: list[str], env: dict[str, str], notes: list[str], report: dict[str, Any],
               report_file: str | None, started: float, read_all: bool = False, hang_watch: Any = None, metrics_port: int | None = None,
               as_json: bool = False, drain_s: float | None = None) -> int:
    from rdmadoctor.logs import Diagnoser

    err = sys.stderr

    out_sink, err_sink = Sink(1), Sink(2)
    shown: list[str] = []
    diagnoser: Any = None

    def on_transport(nccl: dict[str, Any]) -> None:
        line = transport_message(nccl, diagnoser)
        if line and not shown:
            shown.append(line)
            err_sink.line(line)

    diagnoser = Diagnoser(on_transport=on_transport)
    # One source for both streams: the Diagnoser numbers lines per source and starts a new
    # source at every change of name, so two names interleaved would count lines wrongly.
    source = f"{os.path.basename(argv[0]) or argv[0]} output"
    diagnosing = Diagnosing(diagnoser, drain_s=drain_s)
    watch = Watch(diagnosing, source, read_all=read_all)
    feeds = {name: LineFeed(watch.feed) for name in ("stdout", "stderr")}
    hang = hang_watch
    if hang is not None:
        hang.say = err_sink.line
        saw = hang.saw

        def on_data(data: bytes, name: str) -> None:
            saw(data)
            feeds[name].push(data)
    else:
        def on_data(data: bytes, name: str) -> None:
            feeds[name].push(data)
    child = Child(argv, env, out_sink, err_sink, on_data=on_data, on_eof=lambda name: feeds[name].close(), drain_s=drain_s)
    server = None
    if hang is None and metrics_port is not None:
        err_sink.line(f"note: --metrics-port {metrics_port} serves the hang watch, which hang_after_s=null turns off: no server")
    if hang is not None:
        hang.start()
        if metrics_port is not None:
            from rdmadoctor.supervise.metrics import serve

            try:
                server = serve(metrics_port, hang)
                err_sink.line(f"metrics on :{server.port}/metrics (rdmadoctor_job_hang)")
            except OSError as e:
                err_sink.line(f"warning: could not serve --metrics-port {metrics_port}: {e.strerror or e}; the job runs without it")
    try:
        try:
            result = child.run()
        finally:
            if hang is not None:
                hang.stop()
            if server is not None:
                server.stop()
    except SpawnError as e:
        diagnosing.close()
        report["exit_code"] = e.code
        report["notes"] = notes + [str(e)]
        write_report(report_file, report, started, err)
        raise
    diagnosing.job_ended(child.exited_at)  # one bound for both drains, from the job's exit
    if child.drain_cut:
        cut = (f"the job's output was still coming {child.drain_s:g} s after it exited (a process it started holds "
               "its stdout or stderr open): rdmadoctor stopped copying it then (--drain-timeout); what it writes later "
               "is lost (redirect that process's output to a file)")
        err_sink.line(f"note: {cut}")
        notes = notes + [cut]
    watch.close()
    diagnosing.close()
    if result.pid is not None:  # a kill (or `timeout`'s 124) is a finding: never "no known error"
        diagnoser.job_ended(result.signal, result.returncode, command_text(argv))
    diagnosis = diagnoser.finish()
    code = result.exit_code
    hang_findings = hang.findings() if hang is not None else []
    if hang is not None and hang.unread_bytes:
        notes = notes + [f"{hang.unread_bytes} bytes of output were not read for PyTorch's watchdog and NCCL's failover lines: "
                         "the hang watch's thread fell behind (at most 8 MiB wait for it)"]
    report.update(child=result.to_json(), exit_code=code, nccl=diagnosis.nccl,
                  transport=shown[0] if shown else None,
                  findings=hang_findings + [f.to_json() for f in diagnosis.findings], notes=notes + list(diagnosis.notes),
                  hangs=hang.hangs if hang is not None else [], failover=hang.failover if hang is not None else [])
    if result.pid is None:  # a signal came before the job started
        err_sink.line(f"stopped by signal {result.signal} ({signal_name(result.signal or 0)}) before {command_text(argv)} started")
    elif result.failed:
        from rdmadoctor.output.text import log_summary

        err_sink.line(f"{command_text(argv)} {result.describe()}")
        for line in log_summary(report["findings"], diagnosis.nccl):
            err_sink.line(line)
    if out_sink.error:
        err_sink.line(f"writing the job's stdout failed ({out_sink.error}): {out_sink.dropped} bytes were not copied")
    end_report(report_file, report, started, err, sink=err_sink, as_json=as_json)
    return code
