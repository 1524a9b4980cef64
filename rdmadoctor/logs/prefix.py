"""What wraps a log line, removed: who printed it (host, rank, pid) and when; and what a ticket,
a chat or a web page wrapped around it (:func:`unwrap`, :func:`continues`).

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
_SPACE = re.compile(r"\s*")
# NCCL's own prefix. host names may carry dots and dashes; [dev] is the CUDA device or -1. Every
# run is bounded and the host starts a word (a search never rescans a long run from each of its
# characters); only a match near the start counts, so only a window of a long line is searched.
_NCCL = re.compile(
    r"(?:\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]{0,16})\] )?"
    r"(?<![\w.-])(?P<host>[\w.-]{1,255}):(?P<pid>\d{1,9}):(?P<tid>\d{1,9}) \[(?P<dev>-?\d{1,4}|\w{1,16})\] "
    r"(?:(?P<loc>[\w./-]{1,255}:\d{1,6}) )?(?:NCCL )?(?P<level>INFO|WARN|TRACE|ABORT)\b ?"  # 2.2-2.3: no "NCCL"
)
_NCCL_WINDOW = 1024  # longer than any match that starts in the first 64 characters
_RANK_IN_TEXT = re.compile(r"\[Rank (\d{1,6})\]|\brank (\d{1,6})\b")
# An NCCL line pasted without its "host:pid:tid [dev]" (a ticket quotes the message alone), or
# with the device only: "NCCL INFO NET/Socket : Using [0]bond0:...", "[0] init.cc:123 NCCL WARN ...".
_NCCL_BARE = re.compile(
    r"(?:\[-?\d{1,4}\] )?(?:[\w./-]{1,200}:\d{1,6} )?NCCL (?P<level>INFO|WARN|TRACE|ABORT)\b ?"
)


@record
class Meta:
    """Who printed a line and when; None when the line does not say."""

    host: str | None = None
    pid: str | None = None
    rank: int | None = None
    time: str | None = None
    level: str | None = None  # NCCL's INFO | WARN | TRACE | ABORT
    pod: str | None = None
    loc: str | None = None  # NCCL's source file and line of a WARN ("transport/nvls.cc:598")


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
    host = pid = level = loc = None
    m = _NCCL.search(rest, 0, _NCCL_WINDOW)
    if m is not None and m.start() < 64:
        host, pid, level, loc = m.group("host"), m.group("pid"), m.group("level"), m.group("loc")
        ts = m.group("ts") or ts
        rest = rest[m.end():]
    else:
        bare = _NCCL_BARE.match(rest)
        if bare is not None:
            level, rest = bare.group("level"), rest[bare.end():]
    if rank is None:
        r = _RANK_IN_TEXT.search(rest, 0, 40)  # only a rank near the start counts
        if r is not None and r.start() < 24:
            rank = int(r.group(1) or r.group(2))
    return rest.strip(), Meta(host=host or pod, pid=pid, rank=rank, time=ts, level=level, pod=pod, loc=loc)


# ---- what a ticket, a chat or a web page wrapped around the lines --------------------------------

# Markdown block quotes (GitHub replies, e-mail): "> ", ">> ", "> > ", and a bare ">" between.
_QUOTE = re.compile(r"[ \t]{0,3}(?:>[ \t]?){1,16}")
# A file name a chat tool or GitHub turned into a link ([init.cc](http://init.cc):123, Slack's
# <http://init.cc|init.cc>): .cc, .py, .sh are top-level domains. The link goes, the name stays.
_AUTOLINK = re.compile(r"\[([^\[\]()\s]{1,256})\]\((?:https?://|mailto:)?\1/?\)|<https?://([^<>|\s]{1,256})\|\2>")
# Inline code in a sentence: `NCCL WARN Call to ibv_create_qp failed`.
_CODE_SPAN = re.compile(r"`{1,3}([^`]{1,4096})`{1,3}")
MAX_SPANS = 8


# Markdown emphasis a ticket puts around a message. Bold: `**` pairs around text that does not
# start or end with a blank. Italics: only a whole line in single underscores (a dunder name such as
# `__init__` is never a whole log line, and `_` starts and ends identifiers everywhere else).
_BOLD = re.compile(r"\*\*(?=\S)([^*\n]{1,2000}?)(?<=\S)\*\*")
_ITALIC_LINE = re.compile(r"^\s*_(?!_)(\S(?:[^\n]{0,65000}\S)?)(?<!_)_\s*$")


_RAY_REPEATED = re.compile(r"[\[(]repeated \d{1,9}x across cluster[\])]$")
_ENTITIES = {"&lt;": "<", "&gt;": ">", "&amp;": "&", "&quot;": '"', "&#39;": "'", "&#x27;": "'", "&nbsp;": " "}
_ENTITY = re.compile("|".join(_ENTITIES))
# A container runtime's JSON log line (docker's json-file driver, what `cat /var/lib/docker/containers/
# */*-json.log` shows; fluentd and Loki exports): {"log":"<the line>\n","stream":"stderr","time":"..."}.
_JSON_LOG = re.compile(r'\{"(?:log|message|msg)": ?"((?:[^"\\]|\\.){0,65536})"')


def _json_log(line: str) -> str:
    """The line a JSON log record holds, with the record's time in front (as kubectl --timestamps
    puts it); ``line`` itself when it is not one."""
    m = _JSON_LOG.match(line)
    if m is None:
        return line
    import json

    try:
        text = json.loads(f'"{m.group(1)}"')
    except ValueError:
        return line
    t = re.search(r'"time": ?"(' + _ISO + r')"', line[m.end():m.end() + 400])
    text = text.rstrip("\r\n")
    return f"{t.group(1)} {text}" if t is not None else text


def unwrap(line: str) -> tuple[str, tuple[str, ...]]:
    """A pasted line as the program printed it: (the line, the inline code spans in it).

    Removes what a ticket puts around log lines: markdown quote markers (``> ``, ``>> ``), the
    backticks of inline code around the whole line, the links chat tools make of file names
    (``[init.cc](http://init.cc):123`` -> ``init.cc:123``). A sentence that quotes a message in
    backticks (``the job dies with `NCCL WARN ...` after a minute``) gives the line with the
    backticks removed and each quoted message on its own, to be read as a line of its own.
    Linear: a few anchored regexes over a line the scanner has already capped.
    """
    if line[:2] == '{"':
        line = _json_log(line)
    if line.endswith("across cluster]") or line.endswith("across cluster)"):
        # Ray's log dedup: "... Using network Socket [repeated 15x across cluster]"
        m = _RAY_REPEATED.search(line, max(0, len(line) - 64))
        if m is not None:
            line = line[:m.start()].rstrip()
    if "&" in line and ";" in line:  # copied from a web page's source or an HTML export: `10.0.0.1&lt;0&gt;`
        line = _ENTITY.sub(lambda m: _ENTITIES[m.group()], line)
    if line[:4].lstrip(" \t")[:1] == ">":
        m = _QUOTE.match(line)
        if m is not None:
            line = line[m.end():]
    if "](" in line or "|" in line and "<http" in line:
        line = _AUTOLINK.sub(lambda m: m.group(1) or m.group(2), line)
    if "**" in line:  # markdown bold around a message: `... include/shm.h:28 **NCCL WARN ...**`
        line = _BOLD.sub(r"\1", line)
    if line[-1:] == "_" and line.lstrip()[:1] == "_":  # a whole line in italics: `_ibvwrap.cc: NCCL WARN ..._`
        m = _ITALIC_LINE.match(line)
        if m is not None:
            line = m.group(1)
    if "`" not in line:
        return line, ()
    stripped = line.strip()
    inner = stripped.strip("`")
    if "`" not in inner:  # the whole line is inline code (or a fence's opening/closing on it)
        return inner, ()
    # (a span of one word is a name mentioned in a sentence, `ncclRemoteError`, `NCCL_IB_DISABLE=1`:
    # not a line the job printed)
    spans = tuple(s.strip() for s in _CODE_SPAN.findall(line)[:MAX_SPANS] if len(s.split()) > 1)
    return line.replace("`", ""), spans


# ---- a long line broken in two ---------------------------------------------------------------------

# A terminal or a web page broke a long line: its rest comes on the next line with no prefix of its
# own. Only a line at least this long is taken to have been broken (terminals are 80 wide or more).
WRAP_MIN = 64
# What starts a line of its own, never the rest of a broken one: indentation, a label ("Last
# error:", "ncclSystemError:", "INFO:"), an exception, a traceback, a prompt, a rule, a bracketed
# tag ([rank0]:, [W ...]), a date.
_OWN_START = re.compile(
    r"\s|$|[^\s:]{0,40}?:(?:\s|$)|[\w -]{0,40}?:(?:\s|$)|Traceback\b|File \"|[\w.]{0,80}(?:Error|Exception|Warning)\b|NCCL |[$%>#*=|]|-{2,}"
    r"|\[(?:default|rank|Rank|[WEIF]\d|[WEIF] )|\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d"
)
# A token that a line break cut in the middle: a device list entry, an address, a path.
_TOKEN_END = re.compile(r"(?<![\w.:/\[\]<>=-])[\w.:/\[\]<>=-]{0,80}[\d\[\]:/<>=][\w.:/\[\]<>=-]{0,80}$")  # starts a token: linear
_TOKEN_START = re.compile(r"[\w.:/\[\]<>=-]{0,80}[\d\[\]:/<>=]")


def continues(first: str, nxt: str) -> bool:
    """Is ``nxt`` the rest of ``first``, a long line a terminal or a web page broke in two?

    Both are unwrapped lines (see :func:`unwrap`). ``nxt`` must not start the way a line of its own
    starts (a prefix, indentation, a label, an exception, a prompt), and ``first`` must be long."""
    if len(first) < WRAP_MIN or not nxt or len(nxt) > MAX_WRAPPED:
        return False
    if _OWN_START.match(nxt) is not None:
        return False
    _, meta = split(nxt[:200])  # a prefix is at the start
    return meta.host is None and meta.level is None and meta.time is None and meta.rank is None and meta.pod is None


MAX_WRAPPED = 4096


def cut_token(first: str, nxt: str) -> bool:
    """Did a break fall inside a token (a device list entry, an address, a path)?"""
    return (first[-1:].strip() != "" and nxt[:1].strip() != ""
            and _TOKEN_END.search(first[-80:]) is not None and _TOKEN_START.match(nxt) is not None)


def joined(first: str, nxt: str) -> tuple[str, str]:
    """The two ways of gluing a broken line back: (the likelier, the other).

    A terminal breaks at its width, in the middle of a word ("mlx5_1" as "ml" + "x5_1"); a web page
    breaks at a space, which goes. Likelier without a space: where the break cut a token (a
    device, an address, a path: digits, brackets, slashes, colons around it); else with one."""
    tight, spaced = first + nxt, first + " " + nxt
    if first.endswith((" ", "\t")):
        return tight, spaced
    if first.endswith((",", ";", ".", ")")):
        return spaced, tight
    if _TOKEN_END.search(first[-80:]) is not None or _TOKEN_START.match(nxt) is not None:
        return tight, spaced
    return spaced, tight
