"""``rdmadoctor collect``: write a bundle; a one-line summary on stderr.

``-o -`` streams the bundle to stdout and nothing else goes there, so that
``kubectl exec POD -- rdmadoctor collect -o - > node.tar.gz`` gives a clean file.
"""

from __future__ import annotations

import os
import sys

from rdmadoctor.cli.errors import fail_usage, say
from rdmadoctor.core.words import count

TIMEOUT_HINT = "seconds each tool may run before it is killed, e.g. --timeout 10 (default 5, at most an hour)"


def _refused(output: str, what: str) -> int:
    # A bundle replaces a regular file or makes a new one: never what a link points at, never a
    # device node (`-o /dev/full` stays a device, never becomes a regular file).
    return fail_usage(
        f"refusing to write the bundle to {output}: it is {what}, not a regular file",
        "give a new file name or an existing regular file, e.g. -o /tmp/node.tar.gz; for stdout give -o -",
    )


def run_collect(*, output: str, root: str | None = None, timeout: float | None = None, logs: list[str] | None = None) -> int:
    from rdmadoctor.cli.errors import TOOL_TIMEOUT_MAX, check_number
    from rdmadoctor.collect import CollectError, OutputRefused, collect
    from rdmadoctor.host import HostError

    bad = check_number("--timeout", timeout, low=0, high=TOOL_TIMEOUT_MAX, hint=TIMEOUT_HINT)
    if bad is not None:
        return bad
    stream = None
    if output == "-":
        if sys.stdout.isatty():
            return fail_usage(
                "refusing to write a .tar.gz bundle to a terminal",
                "redirect it: rdmadoctor collect -o - > node.tar.gz (or give a file: -o node.tar.gz)",
            )
        sys.stdout.flush()
        stream = sys.stdout.buffer
    elif not output or output.endswith("/") or os.path.isdir(output):
        return fail_usage(f"cannot write the bundle to {output!r}: not a file name", "give a file, e.g. -o node.tar.gz, or -o - for stdout")
    else:
        from rdmadoctor.publish.fsutil import not_regular

        what = not_regular(output)
        if what:
            return _refused(output, what)
    if logs and logs.count("-") > 1:
        return fail_usage("--log - (stdin) given more than once", "stdin can be read once: give the other logs as files")
    try:
        res = collect(output, root=root, timeout=timeout, stream=stream, logs=logs or ())
    except HostError as e:
        return fail_usage(str(e))
    except OutputRefused as e:
        return _refused(output, e.what)
    except CollectError as e:
        return fail_usage(f"--log {e}", "give a log file (plain, .gz, .bz2 or .xz); for a folder of logs give its files: --log DIR/rank0.log --log DIR/rank1.log")
    except BrokenPipeError:
        from rdmadoctor.cli.errors import pipe_closed

        pipe_closed()
        return fail_usage("the reader of stdout went away: the bundle is incomplete", "redirect to a file: rdmadoctor collect -o - > node.tar.gz")
    except OSError as e:
        if stream is not None:
            from rdmadoctor.cli.streams import discard_stdout

            discard_stdout()  # said here; the flush at exit must not fail again
        return fail_usage(
            f"cannot write the bundle to {output}: {e.strerror or e}",
            "pick a writable place, e.g. -o /tmp/node.tar.gz (in a pod: a mounted volume or /tmp)",
        )
    logs_text = ""
    if res.logs:
        cut = [log.name for log in res.logs if log.cut]
        logs_text = f", {count(len(res.logs), 'log')} in logs/" + (f" ({', '.join(cut)}: middle left out, see bundle.json)" if cut else "")
    say(
        f"wrote {'the bundle to stdout' if stream is not None else res.output}: {res.files} files, {res.commands_summary()}"
        f"{logs_text}, {max(1, round(res.size / 1024))} KiB"
    )
    for log in res.logs:
        if log.error:
            say(f"rdmadoctor: warning: {log.source}: {log.error}")
    return 0
