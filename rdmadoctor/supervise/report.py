"""``--report-file``: refused before anything runs when it could not be written (or its
replacing would do harm), and written whole, atomically, at exit; with ``--json`` the same
document is also the last line of stderr."""

from __future__ import annotations

import os

from rdmadoctor.preflight.errors import PreflightError
from rdmadoctor.supervise.streams import PREFIX

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from rdmadoctor.supervise.streams import Sink

REPORT_FILE_HINT = "give a new file name or an existing regular file, e.g. --report-file /tmp/run.json (it is replaced whole at exit)"


def check_report_path(path: str) -> None:
    """Refuse, before the gate and the job, a --report-file that could not be written at exit or
    whose replacing would do harm (``/dev/null`` was deleted, a symlink replaced)."""
    from rdmadoctor.publish.fsutil import target_problem

    if path == "-":
        raise PreflightError("--report-file -: stdout belongs to CMD (its output passes through there), not to the report",
                             "give a file name, e.g. --report-file /tmp/run.json; the gate's verdict is on stderr (--json for JSON)")
    what = target_problem(path)
    if what == "an empty name":
        raise PreflightError("--report-file '': an empty file name (an unset shell variable?)", REPORT_FILE_HINT)
    if what:
        raise PreflightError(f"refusing to write --report-file {path}: it is {what}, not a regular file", REPORT_FILE_HINT)
    directory = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(directory):
        raise PreflightError(f"--report-file {path}: no directory {directory}", "create it first, or write the report elsewhere")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PreflightError(f"--report-file {path}: cannot write in {directory}", "choose a writable directory (e.g. /tmp)")


def write_report(path: str | None, report: dict[str, Any], started: float, err: Any, sink: Sink | None = None) -> None:
    if path is None:
        return
    import json
    import time

    from rdmadoctor.publish.fsutil import write_atomic

    report["started"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
    try:
        write_atomic(path, (json.dumps(report, indent=2) + "\n").encode(), regular_only=True)
    except OSError as e:
        msg = f"could not write --report-file {path}: {e.strerror or e}"
        if sink is not None:
            sink.line(msg)
        else:
            err.write(PREFIX + msg + "\n")


def end_report(path: str | None, report: dict[str, Any], started: float, err: Any, sink: Sink | None = None,
               as_json: bool = False) -> None:
    """The run's document at exit: to --report-file, and with --json as the last line of stderr.

    One line of JSON (``rdmadoctor.run/v1``, the --report-file's document: the gate's verdict, how
    the job ended, the live hangs and failover with their findings, the diagnosis), after every
    byte of the job's output and every ``rdmadoctor: `` line, so ``tail -n 1`` of stderr is it.
    stdout stays the job's alone; the gate's verdict still opens stderr, as before."""
    import json
    import time

    report["started"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
    write_report(path, report, started, err, sink=sink)
    if not as_json:
        return
    data = json.dumps(report) + "\n"
    if sink is not None:
        with sink.lock:
            sink.write(("" if sink.at_line_start else "\n").encode() + data.encode())
    else:
        err.write(data)
        err.flush()
