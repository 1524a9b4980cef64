"""The bundle itself: run the tools and the checks, record what they read, and write the manifest
(``bundle.json``), ``runtime.json``, ``cmd/*.txt`` and the files as one ``.tar.gz``."""

from __future__ import annotations

import io
import json
import posixpath
import tarfile
import time
from typing import Any

from rdmadoctor import __version__
from rdmadoctor.collect.logs import Log
from rdmadoctor.collect.recorder import Entry, Recorder, TracingHost
from rdmadoctor.collect.tools import record_outputs, run_commands


class Counting:
    """A write-only stream that counts what passes: the size of a bundle streamed to stdout.

    It has no ``name``, so gzip records none (``<stdout>`` would be a misleading file name)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.size = 0

    def write(self, data: bytes) -> int:
        self.stream.write(data)
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        self.stream.flush()


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(text: str) -> str:
    """A string from the environment, its bytes that are not UTF-8 as \\xNN: mlx\\xff."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def write_bundle(host: TracingHost, timeout: float, job_logs: list[Log], started: float, out_f: Any) -> tuple:
    """Run the tools and the checks, record what they read, write the bundle to ``out_f``."""
    cmds = run_commands(host, timeout)
    check_error = None
    check_status = None
    try:
        from rdmadoctor.runner import Options, diagnose

        diag = diagnose(Options(root=host.root, timeout=timeout), host=host)
        check_status = diag.report.get("status")
    except Exception as e:  # noqa: BLE001 - the bundle is most wanted when the checks break
        check_error = f"{type(e).__name__}: {e}"
    ops = list(host.ops)
    runtime = host.runtime.to_json()

    rec = Recorder(host.root)
    rec.fixed()
    rec.traced(ops)
    if host.root and host.root != "/":
        rec.own_process()

    extra, recorded, failed, missing = record_outputs(cmds)
    env = runtime.get("env") or {}
    # os.environ holds bytes that are not UTF-8 as lone surrogates (NCCL_IB_HCA=$'mlx\xff'):
    # env.txt gets the bytes back, as `env` prints them; runtime.json escapes them ("\udcff",
    # ASCII JSON), which json.loads reads back as the same string; the manifest lists them.
    extra["cmd/env.txt"] = "".join(f"{k}={v}\n" for k, v in sorted(env.items())).encode("utf-8", "surrogateescape")
    not_utf8 = {_shown(k): _shown(v) for k, v in sorted(env.items()) if not _is_utf8(k) or not _is_utf8(v)}
    recorded.append("env")
    if failed:
        extra["cmd/errors.json"] = (json.dumps(failed, indent=2, sort_keys=True) + "\n").encode()
    extra["runtime.json"] = (json.dumps(runtime, indent=2, sort_keys=True) + "\n").encode()
    for log in job_logs:
        if log.data or not log.error:
            extra[log.name] = log.data
    absent = rec.absent()
    files = sum(1 for e in rec.entries.values() if e.kind != "dir")
    manifest = {
        "schema": "rdmadoctor.bundle/v1",
        "rdmadoctor_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "host": {"label": host.label, "kind": host.kind, "hostname": runtime.get("hostname")},
        "timeout_seconds": timeout,
        "files": files,
        "bytes_uncompressed": rec.bytes,
        "commands": sorted(recorded),
        "commands_failed": failed,
        "commands_missing": sorted(missing),
        "check_status": check_status,
        "check_error": check_error,
        "skipped": dict(sorted(rec.skipped.items())[:200]),
        "skipped_count": len(rec.skipped),
        "trimmed": rec.trimmed,
        "absent": absent,
        "size_limit_reached": rec.full,
        "logs": [log.to_json() for log in job_logs],
        **({"env_not_utf8": not_utf8} if not_utf8 else {}),
        "seconds": round(time.time() - started, 2),
    }
    extra["bundle.json"] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    _write_tar(out_f, rec.entries, extra, started, rec.read_order)
    return files, extra, recorded, failed, manifest


def _write_tar(fileobj: Any, entries: dict[str, Entry], extra: dict[str, bytes], mtime: float, order: dict[str, int]) -> None:
    # Readers derive folders from member names, so only empty folders get a member of their own
    # (an empty /sys/class/infiniband says "no devices", which is not the same as no /sys).
    parents: set[str] = set()
    for path in list(entries) + ["/" + name for name in extra]:
        parent = posixpath.dirname(path)
        while parent != "/" and parent not in parents:
            parents.add(parent)
            parent = posixpath.dirname(parent)
    # Members in the order the checks read them, the manifest and runtime facts first: a reader
    # of a .tar.gz that seeks back to an earlier member decompresses from the start again.
    never = len(order)
    with tarfile.open(fileobj=fileobj, mode="w:gz", compresslevel=6) as tf:
        for name in ("bundle.json", "runtime.json", *sorted(n for n in extra if n not in ("bundle.json", "runtime.json"))):
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.mtime = len(extra[name]), 0o644, int(mtime)
            _add(tf, ti, io.BytesIO(extra[name]))
        for path in sorted(entries, key=lambda p: (order.get(p, never), p)):
            e = entries[path]
            ti = tarfile.TarInfo(path[1:])
            ti.mtime = int(mtime)
            data = None
            if e.kind == "dir":
                if path in parents:
                    continue
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
            elif e.kind == "link":
                ti.type, ti.linkname, ti.mode = tarfile.SYMTYPE, e.target, 0o777
            else:
                ti.size, ti.mode = len(e.data), 0o644
                data = io.BytesIO(e.data)
            _add(tf, ti, data)


def _add(tf: tarfile.TarFile, ti: tarfile.TarInfo, data: Any) -> None:
    """One header block where ustar's 155+100 name split allows it (most sysfs paths are over
    100 characters; a pax header per member would double the headers a reader parses)."""
    tf.format = tarfile.USTAR_FORMAT
    try:
        tf.addfile(ti, data)
    except ValueError:  # raised before anything is written: a name or link ustar cannot hold
        tf.format = tarfile.PAX_FORMAT
        tf.addfile(ti, data)
