"""What wraps a log line, removed: who printed it (host, rank, pid) and when; and what a ticket,
a chat or a web page wrapped around it (:func:`unwrap`, :func:`continues`).

Wrappers come stacked in any order a pipeline made them: ``kubectl logs --prefix
--timestamps`` puts ``[pod/NAME/CONTAINER] 2024-05-01T12:00:00.123456789Z`` in front of what the
container printed; mpirun ``--tag-output`` puts ``[1,3]<stderr>:``; torchrun ``[default3]:``;
PyTorch 2.2+ ``[rank3]:``; NCCL itself ``[2024-05-01 12:00:00] host:pid:tid [dev]`` (the date
part from 2.26, NCCL_DEBUG_TIMESTAMP_FORMAT) then ``NCCL INFO`` or ``file.cc:123 NCCL WARN``; a
site adds its own (Ray's ``(RayTrainWorker pid=N, ip=A)``, a ``[host:pid=N]`` tag, ``grep -r``'s
file name, a log viewer's frame). Each is context (host, rank, time) when it is there and never a
gate: the scan finds a row's message wherever it stands in a line, and :func:`unwrap` also gives
the messages a sentence quotes and the settings a line of code makes (:func:`quoted`,
:func:`settings_said`).
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
_SITE = re.compile(
    r"(?:"
    # A site's own prefixes before NCCL's (issue 30): Ray's actor prefix "(RayTrainWorker pid=123,
    # ip=10.0.0.1)" and "(pid=123)", vLLM's "(VllmWorker rank=1 pid=123)"; a "[host:pid=N]" or
    # "[host:N]" tag; a bracketed time "[2024-05-01 12:00:00]" or "[12:00:00.123]"; `grep -r`'s file
    # name ("logs/rank-3.log:" with its line number after -n); a log viewer's box characters.
    # Context, never a gate: a line without them reads the same.
    r"\((?:[\w.-]{1,64} )?(?:rank=(?P<vrank>\d{1,6}) )?pid=(?P<raypid>\d{1,9})(?:, ip=(?P<rayip>[\da-fA-F.:]{2,64}))?\)"
    r"|\[(?P<taghost>[A-Za-z][\w.-]{0,252}):(?:pid=)?(?P<tagpid>\d{1,9})\]:?"
    r"|\[(?P<bts>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d[^\]]{0,16}|\d\d:\d\d:\d\d(?:[.,]\d{1,9})?)\]"
    # (`grep -n` marks a context line of -A/-B/-C with dashes: "logs/rank-3.log-1043-")
    r"|(?P<file>[\w./-]{0,255}[\w-]\.(?:log|out|err|txt)(?:\.\d{1,6})?(?::(?:\d{1,9}:)?|-\d{1,9}-))"
    r"|[\u2502\u2503|]"
    r")"
)
# What a site's prefix starts with: _SITE is tried only there (or where a file name may end before
# the first colon), so a line of NCCL's own pays one regex call for its wrappers, as before.
_SITE_FIRST = frozenset("([|\u2502\u2503")
_SPACE = re.compile(r"\s*")
# vLLM's logger ("ERROR 03-23 21:43:38 [worker_base.py:620] ", before 0.6 "ERROR 04-07 00:57:46 ray_utils.py:45] ")
# logs a traceback line by line: around a traceback's lines it is context (their indentation, the exception
# line after it, is what the traceback is read by); around any other line its level word is the line's own.
_LOGGER = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})? \[?[\w./-]{1,200}:\d{1,6}\] ?")
_LOGGER_FIRST = frozenset("DIWEC")
_TRACEBACK_LINE = re.compile(r"\s|Traceback \(most recent call last\)|File \"|During handling|The above exception"
                             r"|[\w.]{0,120}(?:Error|Exception|Exit|Interrupt)(?::|\s*$)")
# NCCL's own prefix. host names may carry dots and dashes; [dev] is the CUDA device or -1; a ticket
# may have replaced the pid and tid with letters, or both with one word ("host-01:XXXXXX [5]",
# "pod-id:num:num [3]"), or the host with a placeholder ("[pod-name]:5310:5433 [7]",
# "<cluster_name>:924:924 [5]": no host then, as the bulk count of hosts in nccl.py has none). Every
# run is bounded and the host starts a word (a search never rescans a long run from each of its
# characters); only a match near the start counts, so only a window of a long line is searched.
_NCCL = re.compile(
    r"(?:\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]{0,16})\] )?"
    r"(?:(?<![\w.-])(?P<host>[\w.-]{1,255})|\[[\w.-]{1,64}\]|<[\w.-]{1,64}>):(?P<pid>\d{1,9}|[A-Za-z]{1,12})(?::(?P<tid>\d{1,9}|[A-Za-z]{1,12}))? \[(?P<dev>-?\d{1,4}|\w{1,16})\] "
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


def _file_before_colon(line: str, start: int) -> bool:
    """May ``line`` start with a file name at ``start`` (a dot before the first colon)?"""
    colon = line.find(":", start, start + 262)
    return colon > 0 and line.find(".", start, colon) >= 0


# NCCL's own prefix at a line's very start, with a host of letters, digits, "_" and "-" that starts
# with an ASCII letter ("gpu-7:12:34 [3] NCCL INFO ", "vm:5:5 [0] init.cc:42 NCCL WARN "): _NCCL from
# its pid on, the host narrowed. No wrapper of _WRAPPERS starts with a letter, _SITE is not tried
# there (no dot before the first colon, a letter is not in _SITE_FIRST) and _LOGGER needs a blank
# before any colon, so split's general path reads such a line the same (_own_nccl).
# (_NCCL's own text from the pid on: a change to it is a change to this)
_NCCL_OWN = re.compile(r"(?P<host>[A-Za-z][\w-]{0,254})" + _NCCL.pattern[_NCCL.pattern.index("):(?P<pid>") + 1:])


def _own_nccl(line: str) -> tuple[str, Meta] | None:
    """:func:`split` of a line that starts with NCCL's own prefix (_NCCL_OWN), the commonest shape
    of a log's lines, in one match; None for any other line (the general path reads it).
    tests/unit/logs/test_prefix_fast.py holds it to the general path's answer."""
    m = _NCCL_OWN.match(line, 0, _NCCL_WINDOW)
    if m is None:
        return None
    rest = line[m.end():]
    rank = None
    r = _RANK_IN_TEXT.search(rest, 0, 40)  # only a rank near the start counts
    if r is not None and r.start() < 24:
        rank = int(r.group(1) or r.group(2))
    host, pid, level, loc = m.group("host", "pid", "level", "loc")
    return rest.strip(), Meta(host, pid, rank, None, level, None, loc)  # (positional: the fields' order)


def split(line: str) -> tuple[str, Meta]:
    """``line`` -> (the message without its wrappers, who printed it). Never raises."""
    own = _own_nccl(line)
    if own is not None:
        return own
    pos, pod, rank, ts = 0, None, None, None
    host = pid = None  # a site's prefix may name them; NCCL's own prefix wins
    for _ in range(6):  # a pipeline stacks a few wrappers, never many
        start = _SPACE.match(line, pos).end()  # type: ignore[union-attr]
        m = _WRAPPERS.match(line, start)
        if m is None and start < len(line) and (line[start] in _SITE_FIRST or _file_before_colon(line, start)):
            m = _SITE.match(line, start)
        if m is None or m.end() == pos:
            break
        if m.re is _SITE:
            if m.group("raypid"):
                pid = pid or m.group("raypid")  # (its ip is not a host name: the hosts NCCL names are counted)
                if m.group("vrank") and rank is None:  # vLLM's "(VllmWorker rank=1 pid=123)"
                    rank = int(m.group("vrank"))
            elif m.group("taghost"):
                host, pid = host or m.group("taghost"), pid or m.group("tagpid")
            elif m.group("bts") and "-" in m.group("bts"):  # (a time without its date orders nothing)
                ts = ts or m.group("bts")
        elif m.group("pod"):
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
    if line[pos:pos + 1] in _LOGGER_FIRST:
        m = _LOGGER.match(line, pos)
        if m is not None and _TRACEBACK_LINE.match(line, m.end()) is not None:
            pos = m.end()
    rest = line[pos:]
    level = loc = None
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


# ---- a launcher's tag before a tool's output ---------------------------------------------------------

# What a launcher puts before each line a rank printed (issue 30), read where a tool's output (nccl-tests'
# table, `ibstat`) is recognised and collected: Open MPI's --tag-output ("[1,0]<stdout>:", "[1,0]<stderr>:"),
# a "[host:rank]" tag, torchrun's "[default3]:" and PyTorch's "[rank3]:", MPICH's and Intel MPI's -l
# ("[0] "), srun --label ("  0: "), pdsh's host name as DeepSpeed's multi-node launcher runs it ("worker-1: ").
# NCCL's own prefix is not one (split reads it).
_LAUNCHER_TAG = re.compile(
    r"[ \t]{0,8}(?:\[\d{1,6},\d{1,6}\]<(?:stdout|stderr|stddiag)>:"
    r"|\[(?:default|rank)\d{1,6}\]:"
    r"|\[[A-Za-z][\w.-]{0,252}:\d{1,9}\]:?"
    r"|\[\d{1,6}\](?= )"
    r"|(?:\d{1,6}|[A-Za-z][\w.-]{0,252}):(?= ))"
    r"[ \t]?"
)


def launcher_tag(line: str) -> int:
    """The length of the launcher's tag that starts ``line`` (see _LAUNCHER_TAG); 0 when none does."""
    m = _LAUNCHER_TAG.match(line)
    return m.end() if m is not None else 0


# ---- what a ticket, a chat or a web page wrapped around the lines --------------------------------

# Markdown block quotes (GitHub replies, e-mail): "> ", ">> ", "> > ", and a bare ">" between.
_QUOTE = re.compile(r"[ \t]{0,3}(?:>[ \t]?){1,16}")
# A file name a chat tool or GitHub turned into a link ([init.cc](http://init.cc):123, Slack's
# <http://init.cc|init.cc>): .cc, .py, .sh are top-level domains. The link goes, the name stays.
_AUTOLINK = re.compile(r"\[([^\[\]()\s]{1,256})\]\((?:https?://|mailto:)?\1/?\)|<https?://([^<>|\s]{1,256})\|\2>")
# Inline code in a sentence: `NCCL WARN Call to ibv_create_qp failed`.
_CODE_SPAN = re.compile(r"`{1,3}([^`]{1,4096})`{1,3}")
MAX_SPANS = 8
# A message quoted in a sentence (issue 30): straight double quotes, typographic ones either way round
# (a ticket written with an input method that swaps them: ”... failed“), single ones that open after a
# blank and close before one, corner brackets, guillemets. Each run stops at the next quote of its
# kind: linear.
_QUOTE_SPAN = re.compile(
    r'"([^"]{8,4096})"'
    "|[\u201c\u201d\u201e]([^\u201c\u201d\u201e]{8,4096})[\u201c\u201d]"
    "|\u2018([^\u2018\u2019]{8,4096})\u2019"
    r"|(?:^|(?<=[\s(:]))'([^'\n]{8,4096})'(?=[\s.,;:!?)]|$)"
    "|\u300c([^\u300c\u300d]{8,4096})\u300d"
    "|\u00ab([^\u00ab\u00bb]{8,4096})\u00bb"
)
_WIDE_QUOTE = re.compile("[\u201c\u201d\u201e\u2018\u300c\u00ab]")
# What a writer puts after a quoted message: a full stop, a comma, a closing quote or bracket (the
# reader also tries a message without them, see scan.matching).
TRAILING = " \t.,;:!?\"'\u201c\u201d\u2019\u300d\u00bb)\u3002\uff0c\uff1b"
# A log viewer's frame at the end of a line.
_BOX_END = ("\u2502", "\u2503")
# NCCL settings as code or a config file writes them (issue 30), each read as the shell line the
# knowledge base knows (`export NAME=value`): Python's os.environ[...] = ..., setdefault and putenv, a
# dict or JSON entry, Kubernetes' {"name": ..., "value": ...}, a YAML mapping or compose list entry,
# csh's setenv, a Dockerfile's old `ENV NAME value`, DeepSpeed's launcher's log of them.
_CODE_SETTING = re.compile(
    r"""(?:environ\[|environ\.setdefault\(|putenv\(|setenv\()\s{0,8}["'](?P<n1>NCCL_\w{1,40})["']\s{0,8}(?:\]\s{0,8}=|,)\s{0,8}(?:str\()?["']?(?P<v1>[^"'\s,)\]]{1,200})"""
    r'''|"name":\s{0,8}"(?P<n2>NCCL_\w{1,40})",\s{0,8}"value":\s{0,8}"(?P<v2>[^"\s]{1,200})"'''
    r"""|["'](?P<n3>NCCL_\w{1,40})["']\s{0,8}:\s{0,8}["']?(?P<v3>[^"'\s,}]{1,200})"""
    r"""|^\s{0,40}-\s{1,8}["']?(?P<n4>NCCL_\w{1,40})=["']?(?P<v4>[^"'\s#]{1,200})"""
    r"""|^\s{0,40}(?:-\s{1,8})?(?P<n7>NCCL_\w{1,40}):\s{1,8}["']?(?P<v7>[^"'\s#]{1,200})"""
    r"""|\bsetenv\s{1,8}(?P<n5>NCCL_\w{1,40})\s{1,8}["']?(?P<v5>[^"'\s]{1,200})"""
    r"""|^\s{0,40}ENV\s{1,8}(?P<n6>NCCL_\w{1,40})\s{1,8}["']?(?P<v6>[^"'\s=]{1,200})"""
    # DeepSpeed's launcher logs the NCCL variables each node starts its ranks with (deepspeed/launcher/launch.py,
    # "[launch.py:139:main] 0 NCCL_IB_DISABLE=1"; before 0.4 "[launch.py:71:main] 0 NCCL_IB_DISABLE 1").
    r"""|\[launch\.py:\d{1,6}:main\] \d{1,6} (?P<n8>NCCL_\w{1,40})[= ](?P<v8>\S{1,200})"""
)


# A pod spec's env entry on two lines: "- name: NCCL_IB_HCA", then "  value: mlx5_0" (quoted or not; a
# diff's "+" or "-" may start either). The scan reads the line after a name (Diagnoser._line).
_YAML_NAME = re.compile(r"""[ \t]{0,40}[-+]?[ \t]{0,40}-[ \t]{1,8}name:[ \t]{1,8}["']?(NCCL_\w{1,40})["']?[ \t]{0,8}$""")
_YAML_VALUE = re.compile(r"""[ \t]{0,40}[-+]?[ \t]{0,40}value:[ \t]{1,8}["']?([^"'\s#]{1,200})""")


def yaml_name(line: str) -> str | None:
    """The NCCL variable a pod spec's ``- name: NCCL_...`` line names, or None."""
    m = _YAML_NAME.match(line)
    return m.group(1) if m is not None else None


def yaml_value(line: str) -> str | None:
    """The value a pod spec's ``value: ...`` line gives, or None."""
    m = _YAML_VALUE.match(line)
    return m.group(1) if m is not None else None


def settings_said(line: str) -> tuple[str, ...]:
    """The NCCL settings a line of code or config makes, each as ``export NAME=value``."""
    out = []
    for m in _CODE_SETTING.finditer(line):
        name = next((g for g in m.group("n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8") if g), None)
        value = next((g for g in m.group("v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8") if g), None)
        if name and value:
            out.append(f"export {name}={value}")
        if len(out) >= MAX_SPANS:
            break
    return tuple(out)


def quoted(line: str) -> tuple[str, ...]:
    """The messages a sentence quotes (more than one word each), without what ends the sentence."""
    if '"' not in line and "'" not in line and (line.isascii() or _WIDE_QUOTE.search(line) is None):
        return ()
    out = []
    for m in _QUOTE_SPAN.finditer(line):
        span = next(g for g in m.groups() if g is not None).strip().rstrip(TRAILING)
        if " " in span:
            out.append(span)
        if len(out) >= MAX_SPANS:
            break
    return tuple(out)


# Markdown emphasis a ticket puts around a message. Bold: `**` pairs around text that does not
# start or end with a blank. Italics: only a whole line in single underscores (a dunder name such as
# `__init__` is never a whole log line, and `_` starts and ends identifiers everywhere else).
_BOLD = re.compile(r"\*\*(?=\S)([^*\n]{1,2000}?)(?<=\S)\*\*")
_ITALIC_LINE = re.compile(r"^\s*_(?!_)(\S(?:[^\n]{0,65000}\S)?)(?<!_)_\s*$")


_LOST_SGR = re.compile(r"\[\d{1,3}(?:;\d{1,3}){0,4}m")
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
    if "[0m" in line:  # colour codes whose ESC a copy lost: " [36m(RayWorkerVllm pid=5310) [0m host:..."
        line = _LOST_SGR.sub("", line).rstrip()
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
    if line.endswith(_BOX_END):
        line = line.rstrip(" \u2502\u2503")
    extra = settings_said(line) if "NCCL_" in line else ()
    if "`" not in line:
        return line, extra + quoted(line)
    stripped = line.strip()
    inner = stripped.strip("`")
    if "`" not in inner:  # the whole line is inline code (or a fence's opening/closing on it)
        return inner, extra + quoted(inner)
    # (a span of one word is a name mentioned in a sentence, `ncclRemoteError`, `NCCL_IB_DISABLE=1`:
    # not a line the job printed)
    spans = tuple(s.strip() for s in _CODE_SPAN.findall(line)[:MAX_SPANS] if len(s.split()) > 1)
    line = line.replace("`", "")
    return line, spans + extra + quoted(line)


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
