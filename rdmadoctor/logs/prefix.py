"""What wraps a log line, removed: who printed it (host, rank, pid) and when.

Wrappers come stacked in any order a pipeline made them: ``kubectl logs --prefix
--timestamps`` puts ``[pod/NAME/CONTAINER] 2024-05-01T12:00:00.123456789Z`` in front of what the
container printed; mpirun ``--tag-output`` puts ``[1,3]<stderr>:``; torchrun ``[default3]:``;
PyTorch 2.2+ ``[rank3]:``; NCCL itself ``[2024-05-01 12:00:00] host:pid:tid [dev]`` (the date
part from 2.26, NCCL_DEBUG_TIMESTAMP_FORMAT) then ``NCCL INFO`` or ``file.cc:123 NCCL WARN``.
"""

from __future__ import annotations

import re

from rdmadoctor.core.record import record

# kubectl --timestamps (RFC 3339 with nanoseconds), journald short-iso, docker --timestamps.
_ISO = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?"
_WRAPPERS = re.compile(
    r"(?:"
    r"\[(?:pod/)?(?P<pod>[\w.-]{1,253})/(?P<container>[\w.-]{1,253})\]"  # kubectl --prefix
    r"|(?P<iso>" + _ISO + r")"  # kubectl --timestamps
    r"|\[(?P<job>\d{1,6}),(?P<mpirank>\d{1,6})\]<(?:stdout|stderr)>:"  # mpirun --tag-output
    r"|\[(?:default|rank)(?P<trank>\d{1,6})\]:"  # torchrun --tee / PyTorch 2.2+
    r")"
)
_SPACE = re.compile(r"\s*+")
# NCCL's own prefix. host names may carry dots and dashes; [dev] is the CUDA device or -1. Every
# run is bounded and the host starts a word (a search never rescans a long run from each of its
# characters); only a match near the start counts, so only a window of a long line is searched.
_NCCL = re.compile(
    r"(?:\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]{0,16})\] )?"
    r"(?<![\w.-])(?P<host>[\w.-]{1,255}+):(?P<pid>\d{1,9}):(?P<tid>\d{1,9}) \[(?P<dev>-?\d{1,4}|\w{1,16})\] "
    r"(?:(?P<loc>[\w./-]{1,255}:\d{1,6}) )?(?:NCCL )?(?P<level>INFO|WARN|TRACE|ABORT)\b ?"  # 2.2-2.3: no "NCCL"
)
_NCCL_WINDOW = 1024  # longer than any match that starts in the first 64 characters
_RANK_IN_TEXT = re.compile(r"\[Rank (\d{1,6})\]|\brank (\d{1,6})\b")


@record
class Meta:
    """Who printed a line and when; None when the line does not say."""

    host: str | None = None
    pid: str | None = None
    rank: int | None = None
    time: str | None = None
    level: str | None = None  # NCCL's INFO | WARN | TRACE | ABORT
    pod: str | None = None


def split(line: str) -> tuple[str, Meta]:
    """``line`` -> (the message without its wrappers, who printed it). Never raises."""
    pos, pod, rank, ts = 0, None, None, None
    for _ in range(6):  # a pipeline stacks a few wrappers, never many
        m = _WRAPPERS.match(line, _SPACE.match(line, pos).end())  # type: ignore[union-attr]
        if m is None or m.end() == pos:
            break
        if m.group("pod"):
            pod = m.group("pod")
        elif m.group("iso"):
            ts = ts or m.group("iso")
        elif m.group("mpirank"):
            rank = int(m.group("mpirank"))
        elif m.group("trank"):
            rank = int(m.group("trank"))
        pos = m.end()
        if pos < len(line) and line[pos] == " ":
            pos += 1
    rest = line[pos:]
    host = pid = level = None
    m = _NCCL.search(rest, 0, _NCCL_WINDOW)
    if m is not None and m.start() < 64:
        host, pid, level = m.group("host"), m.group("pid"), m.group("level")
        ts = m.group("ts") or ts
        rest = rest[m.end():]
    if rank is None:
        r = _RANK_IN_TEXT.search(rest, 0, 40)  # only a rank near the start counts
        if r is not None and r.start() < 24:
            rank = int(r.group(1) or r.group(2))
    return rest.strip(), Meta(host=host or pod, pid=pid, rank=rank, time=ts, level=level, pod=pod)
