"""The whole ``rdmadoctor run``: the gate (preflight's, its verdict on stderr), CMD as a watched
child, and at its end the verdict: CMD's exit status, the diagnosis of its output when it failed,
and the ``--report-file``.
"""

from __future__ import annotations

import os
import sys

from rdmadoctor.preflight.errors import PreflightError
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


def _gate_text(doc: dict[str, Any], strict: bool, verbose: bool, colour: bool) -> str:
    """preflight's text verdict, from its JSON document (the checks ran once, for both)."""
    from rdmadoctor.preflight.gate import Gate
    from rdmadoctor.preflight.master import Master
    from rdmadoctor.preflight.render import render_text

    g = Gate(doc.get("report") or {}, {}, strict)
    g.problems += [p for p in doc.get("problems", []) if p.get("check") in ("master", "gang")]
    g.warnings += [p for p in doc.get("warnings", []) if p.get("check") == "gang"]
    g.unknown += [p for p in doc.get("unknown", []) if p.get("check") == "gang"]
    m = doc.get("master")
    master = Master(m["host"], m["port"], m["host_source"], m["port_source"], m.get("rank0")) if m else None
    return render_text(g, doc["verdict"], master=master, master_note=(m or {}).get("note") or "",
                       colour=colour, verbose=verbose, gang=doc.get("gang"))


def run_gate(gate_kwargs: dict[str, Any], as_json: bool, err: Any) -> tuple[int, dict[str, Any] | None]:
    """preflight's gate with its verdict on stderr (stdout is the job's); (exit code, JSON doc)."""
    import contextlib
    import io
    import json

    from rdmadoctor.preflight.render import tty_colour
    from rdmadoctor.preflight.run import run_preflight

    kwargs = dict(gate_kwargs)
    verbose = bool(kwargs.get("verbose"))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = run_preflight(**kwargs, as_json=True, exec_argv=None)
    try:
        doc = json.loads(buf.getvalue())
    except ValueError:  # stopped by a signal before a verdict
        return code, None
    if as_json:
        err.write(json.dumps(doc, indent=2) + "\n")
    else:
        err.write(_gate_text(doc, bool(kwargs.get("strict")), verbose, tty_colour(err)))
    err.flush()
    return code, doc


def run_job(
    argv: list[str],
    *,
    gate_kwargs: dict[str, Any] | None = None,
    no_gate: bool = False,
    as_json: bool = False,
    nccl_debug: bool = False,
    report_file: str | None = None,
    env: dict[str, str] | None = None,
    read_all: bool = False,
    metrics_port: int | None = None,
) -> int:
    """The whole ``rdmadoctor run``; returns the exit code.

    Raises PreflightError (a UsageError) on a usage problem, before anything runs, and
    SpawnError (``.code`` 127 or 126) when CMD cannot be started.
    """
    import time

    from rdmadoctor.preflight.gate import EXIT, GO
    if not argv:
        raise PreflightError("run needs a command after --", "rdmadoctor run -- torchrun --nproc_per_node=8 train.py")
    if not argv[0]:  # nothing could run it: said before the gate, 127 as a shell says it
        raise spawn_error(argv[0], None, dict(os.environ if env is None else env))
    if report_file is not None:
        check_report_path(report_file)
    env, notes = child_env(dict(os.environ if env is None else env), nccl_debug)
    hang_after = hang_after_s(gate_kwargs or {})
    if metrics_port is not None and not 0 <= metrics_port <= 65535:
        raise PreflightError(f"--metrics-port {metrics_port}: not a TCP port", "a port from 1 to 65535, or 0 for a free one (said on stderr)")
    started = time.time()
    report: dict[str, Any] = {"schema": SCHEMA, "command": list(argv), "gate": None, "child": None,
                              "exit_code": None, "transport": None, "nccl": None, "findings": [], "notes": [],
                              "hang_after_s": hang_after, "hangs": [], "failover": []}
    err = sys.stderr
    if not no_gate:
        code, doc = run_gate(gate_kwargs or {}, as_json, err)
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
        return _run_child(argv, env, notes, report, report_file, started, read_all=read_all,
                          hang_watch=_hang_watch(hang_after, env, gate_kwargs or {}, report), metrics_port=metrics_port,
                          as_json=as_json)
    except KeyboardInterrupt:  # Ctrl-C after the gate, before the child took over the signal
        err.write(f"{PREFIX}interrupted before {command_text(argv)} started\n")
        report["exit_code"] = 130
        end_report(report_file, report, started, err, as_json=as_json)
        return 130


def hang_after_s(gate_kwargs: dict[str, Any]) -> float | None:
    """hang_after_s from the gate's --profile, --config, --pool and --set (checked before anything runs)."""
    from rdmadoctor.engine.expectations import ConfigError, parse_set, resolve

    try:
        expect = resolve({}, gate_kwargs.get("profile") or "generic", gate_kwargs.get("config"), gate_kwargs.get("pool"),
                         parse_set(list(gate_kwargs.get("sets") or [])))
    except ConfigError as e:
        raise PreflightError(str(e), getattr(e, "hint", "") or "rdmadoctor list-checks shows every expectation") from None
    value = expect.get("hang_after_s")
    return None if value is None else float(value)


def _hang_watch(hang_after: float | None, env: dict[str, str], gate_kwargs: dict[str, Any], report: dict[str, Any]) -> Any:
    """The hang watch (None with hang_after_s null), reading this node through the gate's --root/--bundle."""
    if hang_after is None:
        return None
    from rdmadoctor.supervise.hang import HangWatch

    root, bundle = gate_kwargs.get("root"), gate_kwargs.get("bundle")

    def host() -> Any:
        from rdmadoctor.host import open_host

        return open_host(root=root, bundle=bundle)

    gate = report.get("gate") or {}
    found = [p for key in ("problems", "warnings") for p in gate.get(key) or () if isinstance(p, dict)]
    return HangWatch(hang_after, lambda line: None, env=env, host_factory=host, gate_findings=found)


def _run_child(argv: list[str], env: dict[str, str], notes: list[str], report: dict[str, Any],
               report_file: str | None, started: float, read_all: bool = False, hang_watch: Any = None, metrics_port: int | None = None,
               as_json: bool = False) -> int:
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
    diagnosing = Diagnosing(diagnoser)
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
    child = Child(argv, env, out_sink, err_sink, on_data=on_data, on_eof=lambda name: feeds[name].close())
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
    diagnosing.job_ended()
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
