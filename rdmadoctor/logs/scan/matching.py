"""Matching: a line read one by one against the knowledge base's rows, and findings in the making.

Each needle in a line gets its first matching row (``_match``); a hit adds to that row's finding
for the subject (``_Agg``: the first match, ``MAX_EVIDENCE`` quoted lines, counts, hosts, ranks),
at most ``MAX_FINDINGS`` distinct ones. A line a terminal broke in two is glued back where that
explains more (``_rejoin``). NCCL's own lines also go to :mod:`.joins`, error lines to :mod:`.errors`.
"""

from __future__ import annotations

import re

from rdmadoctor.core import codes
from rdmadoctor.core.model import ERROR
from rdmadoctor.logs import kb, prefix
from rdmadoctor.logs.scan.index import _SATURATING

TYPE_CHECKING = False
if TYPE_CHECKING:
    from rdmadoctor.logs.nccl import NcclFacts
    from rdmadoctor.logs.scan.needles import _Tables

MAX_EVIDENCE = 3
MAX_FINDINGS = 512
# Words of the stacks rdmadoctor reads: a line holding one was recognised, even when no row knows it.
_SOURCE_MARKERS = ("libibverbs", "librdmacm", "mlx5_core", "mlx5_ib", "nvidia_peermem", "nvidia-peermem", "ib_core")


def _run_killed_row() -> kb.Pattern:
    from rdmadoctor.core.codes.pytorch import JOB_KILLED

    return kb.Pattern(id="run.killed", code=JOB_KILLED.code, severity=ERROR, needle="", regex="",
                      subject="{signal_text}", message="{how}.", meaning=JOB_KILLED.meaning, fix=JOB_KILLED.fix,
                      ref="rdmadoctor run: the child's wait status", symptom=True)


_RUN_KILLED = _run_killed_row()


# A colon as a writer spaces it ("NET/IB: Got completion", "failed:No space"), read the way NCCL does.
_COLON = re.compile(r"(?<=[^\s:]) ?: ?(?=[^\s:\d])")  # (not a file's line number, a time, an address)


def _variants(body: str) -> tuple[str, ...]:
    """``body`` as NCCL printed it, where a writer changed its punctuation (issue 30): without what
    ends a sentence (a full stop, a closing quote), with NCCL's full stop, with NCCL's " : "."""
    trimmed = body.rstrip(prefix.TRAILING)
    spaced = _COLON.sub(" : ", trimmed) if ":" in trimmed else trimmed
    out = [trimmed, trimmed + "."]
    if spaced != trimmed:
        out += [spaced, spaced + "."]
    return tuple(v for v in out if v != body)


class _Agg:
    """One finding in the making: the first match, a few quoted lines, counts."""

    __slots__ = ("pattern", "groups", "subject", "seq", "time", "evidence", "count", "hosts", "ranks", "symptom", "nccl_host")

    def __init__(self, pattern: kb.Pattern, groups: dict, subject: str, seq: tuple, time: str | None, symptom: bool,
                 nccl_host: str | None = None):
        self.pattern, self.groups, self.subject, self.seq, self.time = pattern, groups, subject, seq, time
        self.nccl_host = nccl_host  # first seen on a line NCCL printed itself, on this host ("" unnamed)
        self.evidence: list[dict] = []
        self.count = 0
        self.hosts: set[str] = set()
        self.ranks: set[int] = set()
        self.symptom = symptom


class Matching:
    """Owns the findings in the making (``aggs``, ``dropped_findings``) and whether anything of a
    source rdmadoctor reads was seen (``_known_text``)."""

    if TYPE_CHECKING:
        t: _Tables
        facts: NcclFacts
        _source: dict | None
        _src_index: int
        _lineno: int

        def _ensure_source(self, name: str) -> dict: ...
        def _counted(self, needle: str) -> None: ...
        def _nccl_line(self, text: str, body: str, meta: prefix.Meta, lineno: int) -> None: ...
        def _error_line(self, text: str, body: str, meta: prefix.Meta, lineno: int = 0) -> tuple[str, str, bool] | None: ...
        def _unknown(self, error: tuple[str, str, bool], text: str, lineno: int, meta: prefix.Meta, hit: set) -> None: ...
        def _warned(self, p: kb.Pattern, meta: prefix.Meta, lineno: int, agg: _Agg) -> None: ...
        _box: dict | None
        def _explained(self, error: tuple[str, str, bool] | None, text: str, lineno: int, meta: prefix.Meta,
                       hit: set) -> None: ...

    def _start_matching(self) -> None:
        self.aggs: dict[tuple[str, str], _Agg] = {}
        self.dropped_findings = 0
        self._known_text = False  # a line of a source rdmadoctor reads (a row's needle, libibverbs, mlx5 ...)

    def _rejoin(self, first: str, rest: str) -> str | None:
        """A broken line glued back (with or without a space where it broke, whichever lets more
        knowledge-base rows match, else prefix.joined's guess), or None: the two lines are two.

        Glued only where that explains more than the two lines do apart (a message whose needle or
        ending the break cut), or, where neither says anything to the knowledge base (NCCL's INFO
        lines), where the break cut a token ("[3]ml" + "x5_3:1/IB")."""
        likely, other = prefix.joined(first, rest)
        n_likely, n_other = self._rows(likely), self._rows(other)
        apart = self._rows(first) + self._rows(rest)
        if max(n_likely, n_other) > apart:
            return other if n_other > n_likely else likely
        if apart == 0 and prefix.cut_token(first, rest) and prefix.split(first[:400])[1].level == "INFO":
            return likely
        return None

    def _rows(self, text: str) -> int:
        body = prefix.split(text)[0]
        return sum(1 for needle in self.t.needles_in(text) for p in self.t.by_needle.get(needle, ())
                   if self.t.regex[p.id].search(body) or self.t.regex[p.id].search(text))

    def _match(self, text: str, lineno: int, quick: bool = False, hit: set | None = None) -> None:
        body, meta = prefix.split(text)
        if meta.level is not None or "NCCL" in text or "RCCL version" in text:
            self._nccl_line(text, body, meta, lineno)
        error = self._error_line(text, body, meta, lineno)
        if not self._known_text and any(m in text for m in _SOURCE_MARKERS):
            self._known_text = True
        # Each needle in the line gets its first matching row: a traceback pasted on one line
        # holds the exception and its "Last error:" cause, two findings.
        variants: tuple[str, ...] | None = None
        hit = set() if hit is None else hit
        for needle in self.t.needles_in(text):
            if needle in _SATURATING:
                self._counted(needle)
            rows = self.t.by_needle.get(needle, ())
            if rows:
                self._known_text = True
            for p in rows:
                rx = self.t.regex[p.id]
                g = rx.search(body) or rx.search(text)
                if g is None and variants is None:
                    variants = _variants(body)
                for v in variants or ():
                    if g is not None:
                        break
                    g = rx.search(v)
                if g is None:
                    continue
                self._hit(p, kb.groups_of(p, g, meta.loc), text, lineno, meta, hit)
                break
        if error is not None and not hit:
            self._unknown(error, text, lineno, meta, hit)
        elif hit and (error is not None or self._box is not None):  # of a message of several lines? (errors)
            self._explained(error, text, lineno, meta, hit)

    def _evidence(self, text: str, lineno: int, meta: prefix.Meta) -> dict:
        return {"file": self._source["name"] if self._source else "-", "line": lineno, "text": text[:400],
                "host": meta.host, "rank": meta.rank, "time": meta.time}

    def _hit(self, p: kb.Pattern, groups: dict, text: str, lineno: int, meta: prefix.Meta, hit: set,
             key: tuple | None = None) -> None:
        subject = kb.render(p.subject, groups).strip() or p.code
        if (p.code, subject) in hit:  # two rows saying the same thing of one line count once
            return
        hit.add((p.code, subject))
        if key is None:
            # Rows of one code that say the same of a subject (a kill, seen in torchrun's warning and
            # in its SignalException; an NCCL result and PyTorch's words for it) are one finding
            # (Code.one_per_subject); other rows keep one finding each.
            code = codes.get(p.code)
            key = (p.code, subject) if code is not None and code.one_per_subject else (p.id, subject)
        agg = self.aggs.get(key)
        if agg is None:
            if len(self.aggs) >= MAX_FINDINGS:
                self.dropped_findings += 1
                return
            symptom = kb.is_symptom(p, groups) or bool(
                p.symptom_after and any(a.pattern.code in p.symptom_after or a.pattern.id in p.symptom_after
                                        for a in self.aggs.values()))
            nccl_host = (meta.host or "") if meta.level is not None else None
            agg = self.aggs[key] = _Agg(p, groups, subject, (self._src_index, lineno), meta.time, symptom, nccl_host)
        agg.count += 1
        if meta.host and len(agg.hosts) < 64:
            agg.hosts.add(meta.host)
        if meta.rank is not None and len(agg.ranks) < 1024:
            agg.ranks.add(meta.rank)
        if len(agg.evidence) < MAX_EVIDENCE:
            agg.evidence.append(self._evidence(text, lineno, meta))
        if meta.level == "WARN":
            self._warned(p, meta, lineno, agg)

    def job_ended(self, signal: int | None = None, status: int | None = None, command: str = "the job") -> None:
        """What `rdmadoctor run` saw of its child: a kill (signal N, a status 124 from `timeout`, a
        status 128+N from a shell whose child signal N killed) is a finding at the end of its output."""
        if signal is None and status is not None and 128 < status <= 128 + 64:
            signal = status - 128
            how = f"exited with status {status} (128+{signal}: a shell's way of saying its command was killed by a signal)"
        elif signal is None and status == 124:
            signal = 15
            how = "exited with status 124, which `timeout` returns when it stopped its command (with SIGTERM by default)"
        elif signal is not None:
            how = "was killed by"
        else:
            return
        from rdmadoctor.logs.kb.pytorch import _signal

        groups = _signal({"sig": str(signal)})
        text = f"rdmadoctor run: {command} {how}" + (f" {groups['signal_text']}" if how == "was killed by" else "")
        lineno = self._lineno + 1 if self._source is not None else 1
        if self._source is None:
            self._ensure_source("-")
        self._hit(_RUN_KILLED, {**groups, "how": text}, text, lineno, prefix.Meta(), set())

    def _matching_notes(self) -> list[str]:
        """Matching's share of the finish: the findings not kept."""
        if self.dropped_findings:
            return [f"{self.dropped_findings} more distinct messages were not kept (limit {MAX_FINDINGS})"]
        return []
