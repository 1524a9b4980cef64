"""``rdmadoctor collect``: write a bundle; a one-line summary on stderr, nothing on stdout."""

from __future__ import annotations

import os
import sys

from rdmadoctor.cli.errors import fail_usage


def run_collect(*, output: str, root: str | None = None, timeout: float | None = None) -> int:
    from rdmadoctor.collect import collect
    from rdmadoctor.host import HostError

    if timeout is not None and timeout <= 0:
        return fail_usage(f"--timeout must be positive, got {timeout:g}")
    if not output or output.endswith("/") or os.path.isdir(output):
        return fail_usage(f"cannot write the bundle to {output!r}: not a file name", "give a file, e.g. -o node.tar.gz")
    try:
        res = collect(output, root=root, timeout=timeout)
    except HostError as e:
        return fail_usage(str(e))
    except OSError as e:
        return fail_usage(
            f"cannot write the bundle to {output}: {e.strerror or e}",
            "pick a writable place, e.g. -o /tmp/node.tar.gz (in a pod: a mounted volume or /tmp)",
        )
    shown = ", ".join(res.commands)
    failed = ""
    if res.failed:
        failed = "; failed: " + ", ".join(
            f"{name} ({'timed out' if why.get('timed_out') else 'see cmd/errors.json'})" for name, why in sorted(res.failed.items())
        )
    sys.stderr.write(
        f"wrote {res.output}: {res.files} files, {len(res.commands)} commands ({shown}){failed}, "
        f"{max(1, round(res.size / 1024))} KiB\n"
    )
    return 0
