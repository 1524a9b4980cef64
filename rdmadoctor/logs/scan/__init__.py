"""The Diagnoser: log text in (any chunking, any size), root causes and NCCL's facts out.

How it stays fast and small on a gigabyte from 64 ranks:

- A job prints the same lines again and again with other numbers in them (every rank, every
  communicator, every step). Each block (about a megabyte of whole lines) is read without its
  digits and split into lines, and each distinct line is scanned once (:meth:`Index._candidates`):
  a dense NCCL log's megabyte is some twenty distinct lines. The scan's literals are read without
  their digits too, so a line that holds a literal always holds what is looked for; the lines it
  stops at are found in the block again and checked against the literals themselves.
- That scan is one compiled alternation of every knowledge-base row's ``needle`` (plus the NCCL INFO
  lines that carry facts and the starts of pasted tool outputs), searched in C; only the lines that
  contain a needle are decoded, unwrapped and matched against their rows.
- Lines every rank prints for every communicator (``comm ... nRanks``, ``Init COMPLETE``,
  ``Connected all rings``, socket channel lines) are read one by one until each kind has been seen
  ``SATURATE_AFTER`` times; after that they leave the scan and what they say (ranks, nodes, hosts)
  is summed per block in C (:meth:`Index._bulk`), with the same result. Leaving the scan is
  literal: the scan is rebuilt without their anchors (:meth:`_Tables.scan_for`, once per set). Of
  the facts summed in bulk, only what can change is looked for: the hosts by a pattern that passes
  over every line of a host already known (nccl._NewHosts), the socket channel lines of a host
  already on sockets in three calls each; whether a block holds a kind of line at all is asked of
  its distinct lines, not of the block.
- Each capital letter the scan reads is a place it must try; NCCL's INFO prefix and its channel
  lines (``Channel 02/0 : 3[3] -> 4[4] via P2P/CUMEM/read``) are read in small letters, in a copy
  of the block of the same length, wherever no anchor loses a letter by it (``_QUIETER``: it pays
  where the distinct lines are many, in a log's first blocks and in text that never repeats).
  tests/unit/logs/test_fastpath.py holds all of this to a reference that reads line by line.
- Memory is bounded by constants: a line is cut at ``MAX_LINE`` bytes, each finding keeps
  ``MAX_EVIDENCE`` quoted lines and counts the rest, at most ``MAX_FINDINGS`` distinct findings
  and ``MAX_SEGMENTS`` tool outputs are kept (the overflow is counted and said).

An error line no row knows (an NCCL WARN, the line PyTorch quotes after ``Last error:``, an NCCL
result name, a traceback's last line, another program's line shaped like a failure) is a finding of its
own, LOG_ERROR_UNKNOWN; a kill is led
by how far NCCL got (JOB_KILLED); a job on one host turns its network lines into information
(NCCL_SINGLE_HOST); a setting before the failure it explains is joined to it (_SETTING_JOINS).

Root cause first: findings are ordered by when they were first seen (the log's timestamps when
every finding has one, else the order of the input). A row marked ``symptom`` (a flushed work
request, ``unhandled system error``, a connection closed by the peer) is linked to the earliest
non-symptom error seen before it (a warning only when no error came first): ``cause`` names that
problem's code and ``data["follows"]`` says where it was.

The package: :class:`Diagnoser` (here) is the router, over parts that each own their state and
their share of the finish:

- :mod:`.framing`: bytes in any chunking to blocks of whole lines (CR, CRLF cut between chunks,
  lines longer than ``MAX_LINE``), the sources and their errors;
- :mod:`.needles` and :mod:`.index`: the knowledge base compiled into the scan; which lines of a
  block are read one by one, saturation, and what is summed over a block in bulk;
- :mod:`.pastes`: tool outputs pasted after a prompt or recognised by their header (segments), a
  ticket's fences and "Expected:" blocks;
- :mod:`.errors`: NCCL WARN, NCCL's error traces, tracebacks, "Last error:" (LOG_ERROR_UNKNOWN);
- :mod:`.matching`: a line against the rows, and the findings in the making;
- :mod:`.joins` and :mod:`.linking`: what NCCL's own lines say (settings, sockets, plugins, the
  stage of a kill) and the verdict's order: causes, the socket fallback, the setting joins.

A name of a part can be read and set on the package (``scan.SATURATE_AFTER``): it is the part's.
"""

from __future__ import annotations

import sys
from types import ModuleType

from rdmadoctor.core.model import INFO, Finding
from rdmadoctor.core.record import field, record
from rdmadoctor.logs import prefix
from rdmadoctor.logs.nccl import NcclFacts, transport_line
from rdmadoctor.logs.scan import errors, framing, index, joins, linking, matching, needles, pastes
from rdmadoctor.logs.scan.errors import LAST_ERROR_LINES, Errors
from rdmadoctor.logs.scan.framing import MAX_LINE, Framing, _whole
from rdmadoctor.logs.scan.index import NCCL_LINE_AT, Index
from rdmadoctor.logs.scan.joins import Joins
from rdmadoctor.logs.scan.matching import Matching
from rdmadoctor.logs.scan.needles import _Tables, tables
from rdmadoctor.logs.scan.pastes import Pastes, Segment

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from rdmadoctor.logs import kb


@record(frozen=False)
class Diagnosis:
    findings: list[Finding] = field(default_factory=list)
    nccl: dict | None = None
    segments: list[Segment] = field(default_factory=list)
    sources: list[dict] = field(default_factory=list)  # {name, bytes, lines, error}
    notes: list[str] = field(default_factory=list)  # limits reached, lines cut
    # Something in the text was recognised (an NCCL line, a known message, an error line, a
    # traceback, a tool's output): without it there is nothing to judge, and no "no known problem".
    recognised: bool = True
    # NCCL's settings as its log says them ("NCCL_IB_HCA set by environment to mlx5_0"), the first of each:
    # name -> {"value", "evidence"} (the line).
    settings: dict = field(default_factory=dict)

    @property
    def read_any(self) -> bool:
        return any(s.get("bytes") for s in self.sources)


class Diagnoser(Framing, Index, Pastes, Errors, Matching, Joins):
    """Feed it bytes; ask it for the diagnosis. See the package docstring.

    Shared by the parts: the tables (``t``) and NCCL's facts (``facts``: fed by NCCL's lines as
    they are read, summed in bulk by the index, judged at the finish)."""

    def __init__(self, *, on_transport: Callable[[dict], None] | None = None, patterns: tuple[kb.Pattern, ...] | None = None):
        self.t = tables() if patterns is None else _Tables(patterns)
        self.facts = NcclFacts()
        self._start_framing()
        self._start_index()
        self._start_pastes()
        self._start_errors()
        self._start_matching()
        self._start_joins(on_transport)
        self._yaml_name: str | None = None  # the NCCL variable a pod spec's "- name:" line named; its value is next

    def _block(self, block: bytes) -> None:
        """Complete lines (ending in a newline): the index says which to read; a line goes to the
        tool output being collected, is read whatever it holds (after "Last error:", in a
        traceback), or is read as a candidate (``_line``)."""
        block = _whole(block)
        n = len(block)
        base = self._lineno
        starts = self._index(block)
        if not self._fired and self.on_transport is not None and self.facts.connected and self.facts.network():
            self._fire()
        pos, i = 0, 0
        while pos < n:
            if self._seg is not None:
                pos = self._segment_lines(block, pos)
                continue
            while i < len(starts) and starts[i] < pos:
                i += 1
            forced = self._follow > 0 or self._tb is not None
            if forced:  # a line after "Last error:", or of a traceback: read whatever it holds
                if self._follow > 0:
                    self._follow -= 1
                ls = pos
            elif i == len(starts):
                self._lineno = base + self._nlines  # every line of the block, counted once
                return
            else:
                ls = starts[i]
                i += 1
            self._lineno += block.count(b"\n", pos, ls) + 1
            le = block.find(b"\n", ls)
            raw = block[ls:le]
            if forced or self.t.verify.search(raw) or b"$ " in raw or b"# " in raw:
                # The next line, when this block holds it: the rest of this one if a terminal broke it.
                # (Not a line that starts with NCCL's own prefix: that is a line of its own, prefix.continues.)
                nle = -1 if forced or len(raw) < prefix.WRAP_MIN or NCCL_LINE_AT.match(block, le + 1) else block.find(b"\n", le + 1)
                if self._line(raw, self._lineno, block[le + 1:nle] if nle >= 0 else None):
                    self._lineno += 1
                    le = nle
            pos = le + 1

    def _line(self, raw: bytes, lineno: int, nxt: bytes | None = None) -> bool:
        """Read one candidate line; True when it also took ``nxt`` (the next line) as its rest."""
        if (b"``" in raw or b"xpected" in raw or self._fence) and self._hoped(raw, lineno):
            return False
        text, spans = prefix.unwrap(raw.decode("utf-8", "replace").rstrip())
        if self._yaml_name is not None or "name: " in text:
            spans = self._yaml_setting(text, spans)
        if "Last error" in text:
            self._follow = LAST_ERROR_LINES
        # A prompt with a command: its output follows, up to the next prompt.
        if ("$ " in text or "# " in text or "% " in text or "> " in text) and self.t.prompt.match(text):
            self._prompted(text, lineno)
            return False
        if self._opens_output(text, lineno):
            return False
        took = False
        if nxt is not None:
            rest = prefix.unwrap(nxt.decode("utf-8", "replace").rstrip())[0]
            whole = self._rejoin(text, rest) if prefix.continues(text, rest) and not self._starts_output(rest) else None
            if whole is not None:
                text, took = whole, True
                if "Last error" in rest:
                    self._follow = LAST_ERROR_LINES
        hit: set[tuple[str, str]] = set()
        self._match(text, lineno, hit=hit)
        if spans and self._tb is not None and ('"' in text or "'" in text):
            # A traceback's frame: what its code quotes is a string of the program (`raise RuntimeError(f"NCCL
            # error: {e}")`), not a message it printed.
            code = prefix.quoted(text)
            spans = tuple(s for s in spans if s not in code)
        for span in spans:  # messages quoted in backticks inside a sentence, each a line of its own
            self._match(span, lineno, hit=hit)
        return took

    def _yaml_setting(self, text: str, spans: tuple[str, ...]) -> tuple[str, ...]:
        """A pod spec's env entry on two lines ("- name: NCCL_IB_HCA", then "value: mlx5_0"): the value line
        gives the setting as ``export NAME=value``, read as a line of its own; the name line has the next
        line read whatever it holds (in the next block too)."""
        name, self._yaml_name = self._yaml_name, None
        if name is not None:
            value = prefix.yaml_value(text)
            return spans + (f"export {name}={value}",) if value is not None else spans
        self._yaml_name = prefix.yaml_name(text)
        if self._yaml_name is not None:
            self._follow = max(self._follow, 1)
        return spans

    def finish(self) -> Diagnosis:
        self.end_source()
        self._alias_pods()
        nccl = self.facts.to_json()
        if not self._fired and self.on_transport is not None and nccl and nccl.get("network"):
            self._fire()
        # (a tool's output counts when it is one rdmadoctor judges: `kubectl get node` read as text is not)
        judged = self._judged()
        # NCCL's facts count when they say something: a line NCCL printed itself, or a fact in the `nccl`
        # block (a ticket's prose "NCCL version is: 2.11.4" sets none, and judges nothing).
        said = self._nccl_first is not None or any(v is not None and v != [] for v in (nccl or {}).values())
        recognised = bool(self.aggs or self.facts.seen and said or judged or self._traceback_seen or self._known_text)
        findings = self._linked(nccl)
        notes = list(self.notes) + self._matching_notes() + self._pastes_notes() + self._framing_notes()
        return Diagnosis(findings=findings, nccl=nccl, segments=list(self.segments), sources=list(self.sources), notes=notes,
                         recognised=recognised, settings=self._settings_said())


def diagnose_bytes(data: bytes, name: str = "-", **kw: Any) -> Diagnosis:
    d = Diagnoser(**kw)
    d.feed(data, source=name)
    return d.finish()


def diagnose_paths(paths: list[str], *, stdin=None, progress: Callable[[int], None] | None = None, **kw: Any) -> Diagnosis:
    """Every path (``-``: stdin) read in chunks; a path that cannot be read is an error of its own."""
    d = Diagnoser(**kw)
    for path in paths:
        d.read(path, stdin=stdin, progress=progress)
    return d.finish()


_PARTS = (framing, needles, index, pastes, errors, matching, joins, linking)


class _Package(ModuleType):
    """This package as a module: it holds the names of its parts, and setting one on the package (a
    test's monkeypatch of ``SATURATE_AFTER``, ``_QUIETER``, ``_TABLES``) sets it in every part that
    holds it, where it is read."""

    def __setattr__(self, name: str, value: Any) -> None:
        for part in _PARTS:
            if name in vars(part):
                setattr(part, name, value)
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        for part in _PARTS:
            if name in vars(part):
                delattr(part, name)
        super().__delattr__(name)


for _part in _PARTS:
    for _name, _value in vars(_part).items():
        if not _name.startswith("__") and not isinstance(_value, ModuleType) and _name != "TYPE_CHECKING":
            globals().setdefault(_name, _value)
del _part, _name, _value
sys.modules[__name__].__class__ = _Package

__all__ = ["Diagnoser", "Diagnosis", "Segment", "diagnose_bytes", "diagnose_paths", "transport_line", "INFO", "MAX_LINE"]
