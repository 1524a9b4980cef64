"""Errors: lines that say something failed, whatever their words.

An NCCL WARN, the line PyTorch quotes after ``Last error:``, an NCCL result name, NCCL's error trace
(``misc/socket.cc:505 -> 2`` up to the API) and a Python traceback's last line are errors even when
no row of the knowledge base knows them: each is a finding of its own, LOG_ERROR_UNKNOWN. So is any
other program's line shaped like a failure (``_failure_shape``: fatal, abort, failed, error, cannot, a
signal, "no ... found", a non-zero exit; issue 30, never a silent pass). The lines
after ``Last error:`` and the lines of a traceback are read whatever they hold (the router asks
``_follow`` and ``_tb``). A message of several lines (Open MPI's help box, an MPI library's ``***``
banner, MPICH's error stack, a cascade of one process's failure lines) is one finding: a row that knows one of
its lines gives it and quotes the others (``_explained``), else one LOG_ERROR_UNKNOWN quotes its first line and
what follows. A traceback without its exception line (cut) is LOG_ERROR_UNKNOWN too (``_tb_cut``).
"""

from __future__ import annotations

import re

from rdmadoctor.core.model import ERROR, WARNING
from rdmadoctor.logs import kb, prefix
from rdmadoctor.logs.scan.matching import MAX_EVIDENCE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from rdmadoctor.logs.scan.matching import _Agg

# Lines that carry an error whatever its words: a needle with no rare character to anchor it
# ("async", "onnect to ") is found on these (NCCL prints every error as a WARN line, modprobe
# says ERROR, PyTorch quotes NCCL's last error on the lines after "Last error:").
_CONTEXT_NEEDLES = ("NCCL WARN", "Error", "Last error", "Warning", "NCCL failure",
                    "Failed to open", "Count not open", "ProcessGroupNCCL",
                    # Error lines read even when no row knows them (see _ERROR_LINE).
                    # A traceback is found by its header, else its first frame (`  File "train.py", line 9`):
                    # only the header says that frames followed by another line lost their exception line
                    # (issue 30; `bench/diagnose.py --dense --mib 100`, ratio_binary_cpu over 5 runs each:
                    # 5.70 mean before, 5.67 with it).
                    'File "', "Traceback", "ncclInternalError", "ncclInvalidUsage",
                    "ncclUnhandledCudaError", "ncclSystemError", "ncclRemoteError",
                    # NCCL's error trace (`misc/socket.cc:505 -> 2`, see _NCCL_TRACE): its source files
                    # (a trace line in a header, `include/net.h:21 -> 2`, is always between two of these).
                    ".cc:", ".c:", ".cu:",
                    # Lines shaped like a failure (see _failure_shape), whatever program printed them.
                    "FATAL", "Fatal", "fatal", "ABORT", "Abort", "abort", "cannot", "Cannot", "CANNOT", "can't",
                    "Can't", "Couldn't", "couldn't", "Could not", "could not", "Unable to", "unable to", "failed", "Failed", "FAILED", "failure", "Failure", "FAILURE", "error", "ERROR",
                    "eceived signal", "on signal", "Signal: ", "Segmentation fault", "core dumped", "SIGSEGV",
                    "SIGABRT", "SIGBUS", " found", " FOUND", "xit code", "xit status", "xitcode", "non-zero exit",
                    # The frame of Open MPI's help messages (see _box_edge): a box is one message.
                    "-" * 50)
LAST_ERROR_LINES = 4  # lines after "Last error:" read as candidates: the quoted NCCL message

# The error lines read even when no row knows them (an error the knowledge base does not
# know is still an error): NCCL's results as PyTorch names them, and the last line of a traceback.
_NCCL_RESULT = re.compile(r"\b(nccl(?:InternalError|InvalidUsage|InvalidArgument|UnhandledCudaError|SystemError"
                          r"|RemoteError))\b")
_RESULT_AT = re.compile(r"(?:^\W{0,8}|:\s{0,4}|\b(?:[Ee]rror|returned|result)\W{0,4})n\Z")
_EXC_LINE = re.compile(r"([A-Za-z_][\w.]{0,200})(?::[ \t]|:$|$)")
# NCCL's error trace: every NCCLCHECK that sees a call fail prints `%s:%d -> %d` (2.19+: `-> %d (%s)`
# with the errno's text) as an INFO line, from the call that failed up to the API (src/include/
# checks.h). A log may hold only these (NCCL_DEBUG=INFO cut before the WARN, a WARN NCCL never
# printed): they are an error all the same. 7 (ncclInProgress) is not one.
_NCCL_TRACE = re.compile(r"(?P<file>[\w./+-]{1,200}\.(?:cc|c|cu|cpp|h)):(?P<line>\d{1,6}) -> (?P<rc>[1-6])\b"
                         r"(?: \((?P<why>[^()\n]{1,200})\))?")
# A trace is an error when it reaches the API (the caller gets the result): NCCL also traces failures it
# steps over, a net plugin that is disabled (`net.cc:79 -> 3` after NCCL_IBEXT_DISABLE=1) among them.
_API_FILES = frozenset({"init.cc", "init.cu", "group.cc", "enqueue.cc", "enqueue.cu", "collectives.cc"})
TRACE_GAP = 64  # lines: a thread's trace lines further apart than this are two traces
_TRACE_AFTER_WARN = 3  # lines: a trace this close after a process's explained WARN passes that error up
_NCCL_RESULTS = {"1": "ncclUnhandledCudaError", "2": "ncclSystemError", "3": "ncclInternalError",
                 "4": "ncclInvalidArgument", "5": "ncclInvalidUsage", "6": "ncclRemoteError"}
# Exceptions that only wrap a failure reported after them (torchrun's summary names the real one).
_WRAPPER_EXCEPTIONS = frozenset({"ChildFailedError"})
MAX_TRACEBACK_LINES = 400  # a traceback longer than this is not followed to its end
_TB_HEADER = "Traceback (most recent call last):"
_ELIDED = re.compile(r"[\s.…\[\]()]*$|\W{0,3}(?:snip|truncated|omitted)\b")  # "...", "[...]", "<snip>" in a paste
_NORMAL = re.compile(r"0x[0-9a-fA-F]+|\d+")  # numbers vary from rank to rank: one finding for all

# A line shaped like a failure (issue 30: never a silent pass), from any program but NCCL (whose INFO lines
# say "dlvsym failed", "No device found", "abortFlag 0" on healthy machines, and whose errors are WARN
# lines): a root word (fatal, cannot, failed, error, "no ... found") or what a failure became (an abort, a
# signal, a non-zero exit). No row explaining it, it is LOG_ERROR_UNKNOWN with the line quoted. Read only
# on lines that hold one of these words (_FAILURE_WORDS: a few `in` tests), at most _FAILURE_SPAN of it.
_FAILURE_WORDS = ("atal", "ATAL", "bort", "BORT", "annot", "ANNOT", "an't", "ailed", "AILED", "ailure", "AILURE", "rror",
                  "RROR", "ignal", "SIG", "fault", "dumped", "found", "FOUND", "xit", "ouldn't", "ould not", "nable to")
_FAILURE_SPAN = 2000
# What a program could not do, as perftest (src/perftest_communication.c, perftest_resources.c), rdma-core's
# examples (libibverbs/examples/*pingpong.c) and socket code say it: connect to a peer (`Couldn't connect to
# 10.0.0.2:18515`, `Unable to connect (retries = 3)`), open or set up a socket or connection (`Unable to init the
# socket connection`), allocate, create, register or open a verbs resource (`Couldn't allocate MR`, `Unable to
# create QP.`, `Couldn't get context for the device`, `Couldn't create CQ`), post a work request (`Couldn't post
# send`), exchange addresses over its socket (`Couldn't read remote address`), resolve an address.
_COULD_NOT = (r"(?:re)?connect\b"
              r"|(?:open|init(?:ialize)?|create|establish|bind|listen|accept)\b[^.;:\n]{0,40}?\b(?:socket|connection|port)\b"
              r"|(?:alloc(?:ate)?|create|register|reg|open|get|modify|query|attach)\b[^.;:\n]{0,30}?"
              r"\b(?:MRs?|QPs?|CQs?|PDs?|SRQs?|AHs?|TD|XRC|memory region|queue pair|completion (?:queue|channel)"
              r"|protection domain|device(?: list)?|context|IB resources?)\b"
              r"|post (?:send|recv|receive|SRQ)\b"
              r"|(?:read|send|write|exchange)\b[^.;:\n]{0,30}?\b(?:(?:remote|local) address|socket)\b"
              r"|resolve\b[^.;:\n]{0,30}?\b(?:host(?:name)?|address|addr|route)\b")
_ROOT_SHAPE = re.compile(
    r"(?P<fatal>\b(?:FATAL|[Ff]atal)\b)"
    r"|(?P<cannot>\b(?:[Cc]annot|CANNOT|[Cc]an't|CAN'T)\b)"
    # "Couldn't" / "Could not" / "Unable to" are no failure words alone ("couldn't be happier", "unable to say"):
    # with a verb a verbs program or a socket exchange fails at and its object they are (_COULD_NOT).
    r"|(?P<could>\b(?:[Cc]ouldn't|[Cc]ould not|[Uu]nable to)\s(?:" + _COULD_NOT + r"))"
    r"|(?P<failed>\b(?:[Ff]ailed|FAILED|[Ff]ailure|FAILURE)\b)"
    # An error as a program reports one: its level word, "error:", an exception's name with its colon,
    # glog's E level, "error while ...": not a metric's name ("error_rate", "val_error: 0.12") nor a count.
    r"|(?P<error>\bERROR\b|\b[Ee]rror\b(?=\s?[:\]]|\s(?:while|in|during|occurred|when|opening|loading|creating"
    r"|initializing|connecting|reading|writing)\b)|\b[A-Z]\w{0,60}(?:Error|Exception)(?=: )|^\[?E\d{4} \d\d:)"
    r"|(?P<found>\b(?:[Nn]o|NO)\b[^.;!?]{1,80}?\b(?:found|FOUND)\b|\bnot found\b|\bNOT FOUND\b)")
_END_SHAPE = re.compile(
    r"(?P<signal>received signal|\b(?:on )?[Ss]ignal:? \d{1,2}\b|Signal: [A-Z]|\bSIG(?:SEGV|ABRT|BUS)\b"
    r"|Segmentation fault|core dumped|\bBus error\b)"
    r"|(?P<abort>\b(?:ABORT(?:ED|ING)?|[Aa]bort(?:ed|ing)?)\b|MPI_ABORT)"
    r"|(?P<exit>\b(?:[Ee]xit(?:ed)?|EXIT)(?: with)?(?: exit)? ?(?:code|status|value)\b\s{0,3}[:=]?\s{0,3}(?P<rc>-?\d{1,4})\b"
    r"|\bexitcode\s{0,4}:\s{0,4}(?P<rc2>-?\d{1,4})\b|non-zero exit)")
# What makes a match no failure: the line is a warning's or information's own (PyTorch's `[W socket.cpp:663]`
# or `[W1128 ...]`, Python's `UserWarning:`, a WARNING/INFO level), the word is counted as none ("0 errors",
# "failed: 0", "no failures"), negated ("non-fatal"), or "no ... found" says nothing bad was found.
_NOT_FAILING_LINE = re.compile(r"^\W{0,4}(?:[WID]\d{4} |(?<=\[)[WID]\s|(?:WARN(?:ING)?|INFO|DEBUG|NOTICE|TRACE)\b|[Ww]arn(?:ing)?\b)"
                               r"|[Ww]arning:|WARNING\b|\b[WI]\d{4} \d\d:"
                               # Open MPI counting a help message it showed (or folded) elsewhere
                               r"|more process(?:es)? ha(?:ve|s) sent help message"
                               # a person's words in a ticket: "I cannot resolve this", a question, a link
                               r"|\b(?:I|I'm|I've|I'd|we're|we've|my|our)\b|\?\s{0,4}$|\]\(https?://")
_NONE_BEFORE = re.compile(r"(?:\b(?:0|[Nn]o|NO|[Zz]ero|without|[Nn]ot)\s{1,3}|\b[Nn]on-?)\Z")
_NONE_AFTER = re.compile(r"\s{0,3}[:=]\s{0,3}(?:0\b|[Ff]alse\b|[Nn]one\b|[Nn]o\b|[-+]?\d{0,9}\.\d)")  # (a metric's value)
_NOTHING_BAD = re.compile(r"(?i:error|problem|issue|warning|fault|conflict|leak|corrupt|vulnerab|bug|violation|fail|differen)")
# Open MPI prints its help messages (opal_show_help: "It looks like MPI_INIT failed", "No OpenFabrics connection
# schemes reported ...") between two lines of dashes, 74 of them (55 in older orterun messages), a dozen lines of
# prose between. A box is one message: the failure-shaped lines inside it ("failed", "abort", "failure") are one
# finding at most, quoting the box's headline (its first line), and none when a row knows a line of the box.
# A box not closed within MAX_BOX_LINES lines was no box (a line of dashes of another program's).
_BOX_EDGE = (50, 80)
MAX_BOX_LINES = 60
# Messages of several lines that an MPI library prints for one failure, each line shaped like a failure: Open
# MPI's MPI_ERRORS_ARE_FATAL banner ("*** An error occurred in MPI_Init" ... "*** MPI_ERRORS_ARE_FATAL
# (processes in this communicator will now abort,") and MPICH's (and Intel MPI's) error stack ("Fatal error in
# PMPI_Init: Other MPI error, error stack:", then one `MPID_Init(1139)......: what failed` frame a line). Read as
# one message: its first failure-shaped line is the finding, the next ones are quoted by it. kind -> (the most
# lines from one of its lines to the next, its lines' shape).
# A cascade: a program that prints one line per caller as a failure goes up (perftest's `Couldn't allocate MR`,
# `failed to create mr`, `Failed to create MR`; a server's `Failed to create qp`, `Failed to setup IB`): failure
# lines that are no symptom, of one process, at most two lines apart, are one failure: the first says where it
# began. (A symptom after them, a segfault, stays a finding of its own, linked to them.)
# A crash banner: Open MPI's signal handler (opal/util/stacktrace.c) prints `*** Process received signal ***`, then
# `Signal: NAME (N)`, `Signal code:`, `Failing at address:`, one `[ N] lib(func+0x..)[0x..]` frame a line (a frame may
# say `abort`, `_failed`), `*** End of error message ***`: one message, whose signal line a row knows (kb/mpi.py),
# however many frames (up to CRASH_FRAMES lines between two of its lines a failure word is on).
CRASH_FRAMES = 64
_CRASH_HEAD = re.compile(r"\*\*\*\s{0,4}Process received signal")
_MESSAGES = {"banner": (8, re.compile(r"\*\*\*")),
             "crash": (CRASH_FRAMES, re.compile(r"\*\*\*|Signal(?: code)?: |Failing at address|\[\s{0,3}\d{1,4}\] ")),
             "stack": (8, re.compile(r"(?:\w{1,80}|\(unknown\))\(\d{0,9}\)\.*:")),
             "cascade": (2, re.compile(r""))}
# A line that says a process caught an exception and prints its traceback next (vLLM's `logger.exception`: a worker's
# `WorkerProc hit an exception.`, the engine's `EngineCore encountered a fatal error.`): it and the traceback's exception
# line are one message, that exception line's finding (a row's, else one LOG_ERROR_UNKNOWN quoting both lines).
_CAUGHT = re.compile(r"\b(?:WorkerProc|EngineCore) (?:hit an exception|encountered a fatal error)\b")
_FAILURE_WHAT = {"fatal": "A line reports a fatal error", "cannot": "A line says something cannot be done",
                 "failed": "A line says something failed", "error": "A line reports an error",
                 "not found": "A line says something was not found", "signal": "A line says a process got a fatal signal",
                 "abort": "A line says a process aborted", "exit status": "A line says a process exited with a non-zero status"}


def _failure_shape(body: str) -> tuple[str, str, bool] | None:
    """(label, the line, symptom?) when ``body`` is shaped like a failure (see _ROOT_SHAPE, _END_SHAPE):
    a root word first, else what a failure became (a symptom, linked to the error before it)."""
    if not any(w in body for w in _FAILURE_WORDS):
        return None
    line = body[:_FAILURE_SPAN]
    if _NOT_FAILING_LINE.search(line) is not None:
        return None
    for rx, symptom in ((_ROOT_SHAPE, False), (_END_SHAPE, True)):
        for m in rx.finditer(line):
            kind = m.lastgroup if m.lastgroup not in (None, "rc", "rc2") else "exit"
            if kind == "exit":
                rc = m.group("rc") or m.group("rc2")
                if rc is not None and int(rc) == 0:
                    continue
            elif kind == "found":
                if _NOTHING_BAD.search(m.group()) is not None:
                    continue
            elif _NONE_BEFORE.search(line, max(0, m.start() - 12), m.start()) or _NONE_AFTER.match(line, m.end()):
                continue
            label = {"found": "not found", "exit": "exit status", "could": "cannot"}.get(kind, kind)
            return (label, body, symptom)
    return None


def _box_edge(body: str) -> bool:
    """Is ``body`` a line of dashes that frames an Open MPI help message (_BOX_EDGE)?"""
    edge = body.strip()
    return _BOX_EDGE[0] <= len(edge) <= _BOX_EDGE[1] and not edge.strip("-")


def _message_kind(quoted: str) -> str | None:
    """The kind of message of several lines (_MESSAGES) that this failure-shaped line begins, if any."""
    if quoted.startswith("***"):
        return "crash" if _CRASH_HEAD.match(quoted) else "banner"
    return "stack" if quoted.rstrip().endswith("error stack:") else None


def _trimmed(evidence: list[dict], own: int) -> list[dict]:
    """A message's quotes cut to MAX_EVIDENCE: its first line, the line its row matched (``own``) and its last
    lines (the bottom of an error stack names what failed), the lines between dropped first."""
    while len(evidence) > MAX_EVIDENCE:
        del evidence[next((i for i in range(1, len(evidence)) if evidence[i]["line"] != own), 1)]
    return evidence


def _unknown_row(symptom: bool, shaped: bool = False) -> kb.Pattern:
    from rdmadoctor.core.codes.nccl import LOG_ERROR_UNKNOWN

    return kb.Pattern(
        id=("log.unknown_failure_end" if symptom else "log.unknown_failure_line") if shaped else "log.unknown_error_symptom" if symptom else "log.unknown_error",
        code=LOG_ERROR_UNKNOWN.code, severity=ERROR,
        needle="", regex="", subject="{label}",
        message='{what}, and no row of the knowledge base explains it: "{quoted}"',
        meaning=LOG_ERROR_UNKNOWN.meaning, fix=LOG_ERROR_UNKNOWN.fix,
        ref="rdmadoctor.logs.scan: an NCCL WARN, a `Last error:` quote, an NCCL result, a traceback's last line or a "
            "line shaped like a failure (fatal, abort, failed, error, cannot, a signal, `no ... found`, a non-zero exit) "
            "that no row matched", symptom=symptom)


# An NCCL WARN or the error PyTorch quotes is a root candidate; an NCCL result name and a
# traceback's last line are what the failure became (linked to the error before them, if any).
_UNKNOWN = _unknown_row(False)
_UNKNOWN_SYMPTOM = _unknown_row(True)
# Another program's line shaped like a failure (fatal, cannot, failed, error, "no ... found"): a root of its
# own unless a known problem is next to it (linking._link: the error stack or cascade it belongs to).
_UNKNOWN_LINE = _unknown_row(False, shaped=True)
# ... and what a failure became (a non-zero exit, a signal, an abort): told once by a known row next to it.
_UNKNOWN_END = _unknown_row(True, shaped=True)


_PROBLEM_CODES: dict[int, frozenset[str]] = {}


def _problem_codes(patterns: tuple[kb.Pattern, ...]) -> frozenset[str]:
    """The codes of the rows that name a problem (an error or a warning), per set of rows."""
    codes = _PROBLEM_CODES.get(id(patterns))
    if codes is None:
        codes = _PROBLEM_CODES[id(patterns)] = frozenset(p.code for p in patterns if p.severity in (ERROR, WARNING))
    return codes


class Errors:
    """Owns what is being followed: the lines still to read after "Last error:" (``_follow``,
    ``_quote_next``), the traceback being read (``_tb``), each thread's NCCL error trace
    (``_trace_start``, ``_trace_origin``) and each process's last explained WARN (``_known_warn``)."""

    if TYPE_CHECKING:
        from rdmadoctor.logs.scan.needles import _Tables

        t: _Tables
        aggs: dict[tuple, _Agg]
        _src_index: int
        _source: dict | None

        def _evidence(self, text: str, lineno: int, meta: prefix.Meta) -> dict: ...
        def _hit(self, p: kb.Pattern, groups: dict, text: str, lineno: int, meta: prefix.Meta, hit: set,
                 key: tuple | None = None) -> None: ...

    def _start_errors(self) -> None:
        self._follow = 0  # lines still to read after a "Last error:" line
        self._tb: dict | None = None  # the Python traceback being read: whose it is, lines left
        self._traceback_seen = False
        self._quote_next = False  # the line after "Last error:" quotes NCCL's error
        self._trace_start: dict[tuple, dict] = {}  # (host, pid) -> the first line of its NCCL error trace
        self._known_warn: dict[tuple, tuple] = {}  # (host, pid) -> (line, finding) of its last WARN a row explained
        self._trace_origin: dict = {}
        self._box: dict | None = None  # the Open MPI help message being read (_boxed)
        self._messages: dict[tuple, dict] = {}  # (host, pid) -> the banner or error stack it is printing (_continues)
        self._caught: dict[tuple, dict] = {}  # (host, pid) -> its line that says its traceback follows (_CAUGHT)
        self._exc_line = -1  # the line that is a traceback's exception line (_error_line)

    def _boxed(self, text: str, body: str, meta: prefix.Meta, lineno: int) -> bool:
        """Follow Open MPI's help messages (_BOX_EDGE): True when ``text`` is a box's edge. A box opens at
        one line of dashes and closes at the next; its first line that says something is its headline,
        read whatever it holds (the scan is told to read the line after an edge)."""
        box = self._box
        if box is not None and (box["src"] != self._src_index or not 0 <= lineno - box["start"] <= MAX_BOX_LINES):
            box = self._box = None  # never closed: no box
        if "---" in body and _box_edge(body):
            # (an edge right after an edge: the first closed a box cut off above, the second opens one)
            if box is None or box["head"] is None:
                self._box = {"src": self._src_index, "start": lineno, "head": None, "key": None, "new": False,
                             "symptom": True, "known": False}
                self._follow = max(self._follow, 1)
            else:
                self._box = None
            return True
        if box is not None and box["head"] is None:
            if body.strip():
                box["head"] = (text, body.strip(), lineno, meta)
            else:
                self._follow = max(self._follow, 1)  # a blank line first: the headline is further down
        return False

    def _box_explained(self, hit: set, lineno: int) -> None:
        """A row knew a line of the box being read: the box says what that row says, and no unknown error. That
        row's finding quotes what the box's own finding quoted (its headline, its details), and takes it back."""
        box = self._box
        assert box is not None
        if box["known"] or not any(code in _problem_codes(self.t.patterns) for code, _ in hit):
            return
        box["known"] = True
        key = self._known_key(hit, lineno)
        self._take(box["key"] if box["key"] is not None and box["new"] else None, key, None)
        box.update(key=key, new=False)

    def _known_key(self, hit: set, lineno: int) -> tuple | None:
        """The key of the finding a row made of this line (a problem's), or None."""
        problem = _problem_codes(self.t.patterns)
        found = None
        for key, agg in self.aggs.items():
            if agg.pattern.code in problem and (agg.pattern.code, agg.subject) in hit:
                if agg.seq == (self._src_index, lineno) or any(e["line"] == lineno for e in agg.evidence):
                    return key
                found = found or key
        return found

    def _take(self, own: tuple | None, key: tuple | None, head: dict | None) -> None:
        """A row explains a message of several lines: its finding (``key``) quotes what the message's own finding
        (``own``, made by the message, taken back) quoted, else the message's first line (``head``)."""
        mine = self.aggs.pop(own, None) if own is not None and own != key else None
        target = self.aggs.get(key) if key is not None else None
        if target is None:
            return
        lines = mine.evidence if mine is not None else [head] if head is not None else []
        if mine is not None:
            target.hosts.update(list(mine.hosts)[: max(0, 64 - len(target.hosts))])
            target.ranks.update(list(mine.ranks)[: max(0, 1024 - len(target.ranks))])
        quoted = {(e["file"], e["line"]) for e in target.evidence}
        fresh = [e for e in lines if (e["file"], e["line"]) not in quoted]
        if target.count == 1 and target.seq[0] == self._src_index:
            # Made by the message's line: it quotes the message in the order printed, its own line kept.
            target.evidence[:] = _trimmed(sorted([*target.evidence, *fresh], key=lambda e: e["line"]), target.seq[1])
        else:
            target.evidence.extend(fresh[: max(0, MAX_EVIDENCE - len(target.evidence))])

    def _in_box(self, error: tuple[str, str, bool], text: str, lineno: int, meta: prefix.Meta, hit: set) -> None:
        """A failure-shaped line inside a box: the box's one finding, made at the box's headline (its first
        failure that is no symptom, if it has one), this line added to what it quotes."""
        box = self._box
        assert box is not None
        label, quoted, symptom = error
        # (its details, indented under the prose, are quoted too: "  ompi_mpi_init: ompi_rte_init failed")
        pre = text[: len(text) - len(quoted)] if text.endswith(quoted) else ""
        detail = pre != "" and (not pre.strip() or pre.endswith(("  ", "\t")))
        if box["known"] or (box["key"] is not None and (symptom or not box["symptom"])):
            agg = self.aggs.get(box["key"]) if box["key"] is not None else None
            if (agg is not None and detail and len(agg.evidence) < MAX_EVIDENCE
                    and all(e["line"] != lineno for e in agg.evidence)):
                agg.evidence.append(self._evidence(text, lineno, meta))
            return
        if box["key"] is not None and box["new"]:  # a symptom first ("abort"), a cause after ("failed")
            self.aggs.pop(box["key"], None)
        head_text, head, head_line, head_meta = box["head"] or (text, quoted, lineno, meta)
        key = ("unknown", _NORMAL.sub("N", head[:300]))
        box.update(key=key, new=key not in self.aggs, symptom=symptom)
        groups = {"label": label, "quoted": head[:300],
                  "what": _FAILURE_WHAT[label].replace("A line", "An Open MPI help message (a box of dashes)", 1)}
        self._hit(_UNKNOWN_END if symptom else _UNKNOWN_LINE, groups, head_text, head_line, head_meta, hit, key=key)
        agg = self.aggs.get(key)
        if agg is not None and detail and head_line != lineno and len(agg.evidence) < MAX_EVIDENCE:
            agg.evidence.append(self._evidence(text, lineno, meta))

    def _unknown(self, error: tuple[str, str, bool], text: str, lineno: int, meta: prefix.Meta, hit: set) -> None:
        """An error line no row explained: a finding of its own (LOG_ERROR_UNKNOWN)."""
        label, quoted, symptom = error
        if self._box is not None and label in _FAILURE_WHAT:
            self._in_box(error, text, lineno, meta, hit)
            return
        if label in _FAILURE_WHAT and self._continues(quoted, text, lineno, meta, symptom):
            return
        if label in _FAILURE_WHAT:
            pattern = _UNKNOWN_END if symptom else _UNKNOWN_LINE
        else:
            pattern = _UNKNOWN_SYMPTOM if symptom else _UNKNOWN
        key = ("unknown", _NORMAL.sub("N", quoted[:300]))
        if label == "trace":
            # One finding per result for all of NCCL's traces, quoted from where one began (_trace).
            o = self._trace_origin
            label, api, began = o["result"], o["api"], o["began"]
            what = (f"NCCL returned {label} to its caller from {api}" if began == api else
                    f"NCCL returned {label} to its caller ({api}), passed up from {began}{o['why']}")
            groups = {"label": label, "quoted": o["body"][:300], "what": what}
            self._hit(pattern, groups, o["text"], o["line"], o["meta"], hit, key=("trace", label))
            return
        elif label in _FAILURE_WHAT:
            # (a crash banner's first line: when its signal line follows, the row that knows it takes the finding)
            what = (_FAILURE_WHAT[label] if _message_kind(quoted) != "crash" else
                    "A crash banner cut before the signal line (`Signal: NAME (N)`, which names the signal)")
        else:
            what = {"NCCL WARN": "NCCL warned", "Last error": "PyTorch quoted NCCL's last error"}.get(
                label, f"The traceback ends with {label}" if not label.startswith("nccl") else f"NCCL returned {label}")
        groups = {"label": label, "quoted": quoted[:300], "what": what}
        self._hit(pattern, groups, text, lineno, meta, hit, key=key)
        if label in _FAILURE_WHAT:
            self._opens_message(quoted, key, text, lineno, meta, symptom=symptom)
            if "xception" in quoted or "fatal" in quoted:
                self._catches(quoted, key, text, lineno, meta)
        elif lineno == self._exc_line:
            self._caught_by(key, lineno, meta)

    def _catches(self, quoted: str, key: tuple, text: str, lineno: int, meta: prefix.Meta) -> None:
        """A line that says its process caught an exception whose traceback follows (_CAUGHT): remembered until
        that traceback's exception line (``_caught_by``)."""
        if _CAUGHT.search(quoted) is None:
            return
        if len(self._caught) >= 1024:
            self._caught.clear()
        agg = self.aggs.get(key)
        self._caught[(meta.host, meta.pid)] = {
            "key": key, "src": self._src_index, "line": lineno, "head": self._evidence(text, lineno, meta),
            "new": agg is not None and agg.seq == (self._src_index, lineno) and agg.count == 1}

    def _caught_by(self, key: tuple | None, lineno: int, meta: prefix.Meta) -> None:
        """A traceback's exception line, its finding ``key``: after its process's `WorkerProc hit an exception.`
        (``_catches``), that line's own finding is taken back and this one quotes it (one message)."""
        c = self._caught.pop((meta.host, meta.pid), None) if self._caught else None
        if c is None or key is None or c["src"] != self._src_index or not 0 < lineno - c["line"] <= MAX_TRACEBACK_LINES:
            return
        self._take(c["key"] if c["new"] else None, key, c["head"])

    def _opens_message(self, quoted: str, key: tuple, text: str, lineno: int, meta: prefix.Meta,
                       known: bool = False, symptom: bool = False) -> None:
        """A failure-shaped line that begins a message of several lines (_MESSAGES): its next lines are
        that message's (``_continues``, ``_explained``), not findings of their own. ``key``: the finding the
        message is (the unknown one its first line made, or the one a row made of it). Any other failure line
        that is no symptom may begin a cascade."""
        kind = _message_kind(quoted) or (None if symptom else "cascade")
        if kind == "cascade":
            m = self._messages.get((meta.host, meta.pid))
            if (m is not None and m["kind"] != "cascade" and m["src"] == self._src_index
                    and 0 < lineno - m["last"] <= _MESSAGES[m["kind"]][0]):
                return  # (a banner or a stack still being read is not cut short by a cascade)
        if kind is not None:
            if len(self._messages) >= 1024:
                self._messages.clear()
            agg = self.aggs.get(key)
            self._messages[(meta.host, meta.pid)] = {
                "kind": kind, "key": key, "src": self._src_index, "last": lineno,
                # made by this line (taken back when a row explains a later line), and only the message's first
                # line (a generic banner such as MPICH's `Other MPI error`, or unknown): its frames may say more
                "new": agg is not None and agg.seq == (self._src_index, lineno) and agg.count == 1,
                "generic": not known or (agg is not None and agg.pattern.symptom),
                "head": self._evidence(text, lineno, meta)}

    def _next_line(self, quoted: str, lineno: int, meta: prefix.Meta, symptom: bool = False) -> dict | None:
        """The message being read when this line is its next one (an MPI library's banner, an MPICH error
        stack's frame, a cascade's next failure): each process's own (ranks print theirs interleaved)."""
        m = self._messages.get((meta.host, meta.pid))
        if m is None or m["src"] != self._src_index:
            return None
        if m["kind"] == "cascade" and (symptom or _message_kind(quoted) is not None):
            return None  # (a symptom, or a banner or stack of its own, is no cascade's next line)
        gap, shape = _MESSAGES[m["kind"]]
        if not (0 < lineno - m["last"] <= gap and shape.match(quoted)):
            return None
        m["last"] = lineno
        return m

    def _continues(self, quoted: str, text: str, lineno: int, meta: prefix.Meta, symptom: bool = False) -> bool:
        """Is this failure-shaped line no row knows the next line of a message being read? Then the message's
        finding quotes it (its first line and its last lines: the bottom frames of a stack name what failed)."""
        m = self._next_line(quoted, lineno, meta, symptom)
        if m is None:
            return False
        agg = self.aggs.get(m["key"])
        if agg is not None:
            agg.evidence.append(self._evidence(text, lineno, meta))
            if len(agg.evidence) > MAX_EVIDENCE:
                if m["new"]:
                    agg.evidence[:] = _trimmed(agg.evidence, agg.seq[1])
                else:
                    agg.evidence.pop()
        return True

    def _explained(self, error: tuple[str, str, bool] | None, text: str, lineno: int, meta: prefix.Meta,
                   hit: set) -> None:
        """A row knew this line. In a box (``_box_explained``) or a banner or an error stack, the message is that
        row's: a generic first line (MPICH's `Fatal error in PMPI_Init: Other MPI error`) gives way to a frame a
        row knows, which names the layer that failed (an OFI call: the transport; PMI: the launch), and that
        row's finding quotes the message. A line a row knows may also begin a message (that banner)."""
        if self._box is not None:
            self._box_explained(hit, lineno)
            return
        if error is not None and lineno == self._exc_line and self._caught:
            self._caught_by(self._known_key(hit, lineno), lineno, meta)
        if error is None or error[0] not in _FAILURE_WHAT:
            return
        m = self._next_line(error[1], lineno, meta, error[2]) if self._messages else None
        if m is not None:
            if m["generic"]:
                key = self._known_key(hit, lineno)
                # (a cascade's unknown first line gives way to a row that names a cause, not to a symptom's)
                if key is not None and not (m["kind"] == "cascade" and self.aggs[key].symptom):
                    self._take(m["key"] if m["new"] else None, key, m["head"])
                    agg = self.aggs[key]
                    m.update(key=key, generic=False, new=agg.seq == (self._src_index, lineno) and agg.count == 1)
            return
        banner = _message_kind(error[1]) is not None
        if banner or not error[2]:
            key = self._known_key(hit, lineno)
            if key is not None and (banner or not self.aggs[key].symptom):  # (a cascade begins at a cause)
                self._opens_message(error[1], key, text, lineno, meta, known=True)

    def _warned(self, p: kb.Pattern, meta: prefix.Meta, lineno: int, agg: _Agg) -> None:
        """A WARN a row explained: a trace of the same process right after it passes that error up."""
        if p not in (_UNKNOWN, _UNKNOWN_SYMPTOM, _UNKNOWN_LINE, _UNKNOWN_END) and len(self._known_warn) < 1024:
            self._known_warn[(meta.host, meta.pid)] = (lineno, agg)

    def _error_line(self, text: str, body: str, meta: prefix.Meta, lineno: int = 0) -> tuple[str, str, bool] | None:
        """(label, the quoted error, symptom?) when ``text`` is an error line, whatever its words:
        an NCCL WARN, the line PyTorch quotes after "Last error:", an NCCL result name, the last line
        of a traceback. Also follows the traceback being read."""
        found = None
        if self._boxed(text, body, meta, lineno):
            return None
        if self._tb is not None:
            exc = self._traceback_line(text, body, meta, lineno)
            if exc is not None:
                found = (exc.rsplit(".", 1)[-1], body, True)
                self._exc_line = lineno
        if self._tb is None and (body.startswith('File "') and ", line " in body
                                 or "Traceback (most recent call last)" in body):
            # From its header when that line was read, else from its first frame (then no frame is seen yet).
            header = body.rstrip().endswith(_TB_HEADER)
            self._tb = {"who": (meta.pod, meta.rank), "left": MAX_TRACEBACK_LINES, "header": header,
                        "head": (text, body, lineno, meta), "frame": None if header else (text, body, lineno, meta),
                        "code": None}
            self._traceback_seen = True
            return None
        if self._quote_next:
            # The line right after "Last error:" holds NCCL's last error; blank, NCCL had none to give
            # (then C++'s "Exception raised from ..." follows, which is not the error).
            self._quote_next = False
            if body and not body.startswith("Exception raised from"):
                return found or ("Last error", body, False)
            return found
        if "Last error" in body:
            tail = body.split("Last error", 1)[1].lstrip(": \t")
            if not tail:
                self._quote_next = True
                return found
            return found or ("Last error", tail, False)
        if found is not None:
            return found
        if meta.level == "WARN":
            return ("NCCL WARN", body, False)
        if meta.level == "INFO" and " -> " in body:
            t = _NCCL_TRACE.match(body)
            if t is not None:
                return self._trace(t, text, meta, lineno)
        if "nccl" in body:
            m = _NCCL_RESULT.search(body)
            # As a program prints it: the line's first word, or after a colon or "error" / "returned"
            # ("NCCL error: ncclSystemError"), not late in a sentence someone wrote about it.
            if m is not None and _RESULT_AT.search(body, 0, m.start() + 1) is not None:
                return (m.group(1), body, True)
        if found is None and meta.level is None and self._tb is None:
            # (not NCCL's own lines: its errors are WARNs; nor a traceback's frames and code)
            return _failure_shape(body)
        return found

    def _trace(self, t: re.Match, text: str, meta: prefix.Meta, lineno: int) -> tuple[str, str, bool] | None:
        """One line of NCCL's error trace (_NCCL_TRACE): an error once the trace reaches the API,
        quoted from the line where it began (the same thread's first trace line, TRACE_GAP)."""
        who = (meta.host, meta.pid)
        start = self._trace_start.get(who)
        if start is None or lineno - start["last"] > TRACE_GAP:
            # Where the trace began, read once: the file and line that failed, and errno's text. A trace
            # that begins right after a WARN a row explained (the same process) passes that error up: the
            # result it reaches the API with is that finding's, not an unknown one.
            why = f" ({t.group('why')})" if t.group("why") else ""
            warned = self._known_warn.get(who)
            start = {"text": text, "line": lineno, "meta": meta, "last": lineno, "body": t.string,
                     "began": f"{t.group('file')}:{t.group('line')}", "why": why,
                     "explains": warned[1] if warned is not None and 0 < lineno - warned[0] <= _TRACE_AFTER_WARN else None}
            if len(self._trace_start) < 1024:
                self._trace_start[who] = start
        start["last"] = lineno
        if start.get("said") or t.group("file").rsplit("/", 1)[-1] not in _API_FILES:
            return None  # said once per trace (init.cc, then group.cc, pass the same result up)
        start["said"] = True
        agg = start["explains"]
        if agg is not None:  # the explained WARN's error, returned: its finding quotes where it surfaced
            if len(agg.evidence) < MAX_EVIDENCE:
                agg.evidence.append(self._evidence(text, lineno, meta))
            return None
        self._trace_origin = {**start, "result": _NCCL_RESULTS[t.group("rc")], "api": f"{t.group('file')}:{t.group('line')}"}
        return ("trace", text, True)

    def _traceback_line(self, text: str, body: str, meta: prefix.Meta, lineno: int = 0) -> str | None:
        """Follow a traceback: its exception's name when ``text`` is its last line (the first line
        of its stream that is not indented), else None."""
        tb = self._tb
        assert tb is not None
        tb["left"] -= 1
        if tb["left"] <= 0:
            self._tb = None
            return None
        if meta.level is not None or (meta.pod, meta.rank) != tb["who"] or not body:
            return None  # NCCL's own line, or another rank's, printed in between
        head = text[: len(text) - len(body)] if text.endswith(body) else ""
        if head.endswith(("  ", "\t")) or (head and not head.strip()):
            # a frame: `  File "train.py", line 9` and the code under it
            if body.startswith('File "'):
                tb["frame"], tb["code"] = (text, body, lineno, meta), None
            elif tb["frame"] is not None and tb["code"] is None and body.strip(" ^~"):
                tb["code"] = (text, body, lineno, meta)
            return None
        if body.startswith(("Traceback", "During handling", "The above exception")) or _ELIDED.match(body):
            return None
        self._tb = None
        m = _EXC_LINE.match(body)
        if m is None and tb["header"]:
            self._tb_cut(tb)  # a header, frames, then another line: the exception line was lost
        if m is None or m.group(1).rsplit(".", 1)[-1] in _WRAPPER_EXCEPTIONS:
            return None
        return m.group(1)

    def _tb_cut(self, tb: dict) -> None:
        """A Python traceback without its exception line: a crash all the same, LOG_ERROR_UNKNOWN quoting its header
        and its last frame with the code under it (what was running). Made when a traceback's frames end in a line
        that is no exception (its header seen: a real traceback's print), and at the end of a text (_end_errors)."""
        if tb["frame"] is None:
            return  # a header and nothing after it: no frame says what was running
        text, body, lineno, meta = tb["head"]
        name = self._source["name"] if self._source else "-"
        if any(e["line"] == lineno and e["file"] == name for a in self.aggs.values() for e in a.evidence):
            return  # a traceback pasted on one line: a row read its exception there
        frame = tb["frame"][1].strip()
        key = ("unknown", "traceback cut", _NORMAL.sub("N", frame[:300]))
        groups = {"label": "traceback", "quoted": body.strip()[:300],
                  "what": f"A Python traceback without its exception line (cut?), last in `{frame[:200]}`"}
        self._hit(_UNKNOWN_SYMPTOM, groups, text, lineno, meta, set(), key=key)
        agg = self.aggs.get(key)
        if agg is not None and agg.count == 1:
            for line in (tb["frame"], tb["code"]):
                if line is not None and line[2] != lineno and len(agg.evidence) < MAX_EVIDENCE:
                    agg.evidence.append(self._evidence(line[0], line[2], line[3]))

    def _end_errors(self) -> None:
        """The end of a text: a traceback still being read lost its exception line (a log cut short)."""
        tb, self._tb = self._tb, None
        if tb is not None:
            self._tb_cut(tb)
