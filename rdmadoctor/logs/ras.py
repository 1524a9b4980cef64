"""NCCL's RAS report judged: findings, root cause first, each with its rank, process, GPU and node.

One judge for both readers: ``rdmadoctor run`` asks the job's RAS when it hangs
(:mod:`rdmadoctor.supervise.ras`), ``rdmadoctor diagnose`` reads a pasted report (checks/logs.py).
The report itself is parsed by :mod:`rdmadoctor.parsers.ncclras`.

Order: processes RAS considers dead, then those that did not answer, then ranks with an NCCL
error (a ``Remote process error`` follows from another rank's error when there is one), then the
stragglers (the ranks *behind*, never the ranks ahead that NCCL lists as outliers: nccl#1911),
then ranks whose status differs (an abort). A report that shows nothing wrong is
NCCL_RAS_QUIET, information, and beside a hang it says that RAS does not see every hang
(nccl#1730): never "healthy".
"""

from __future__ import annotations

from rdmadoctor.core.codes.nccl import (
    NCCL_RAS_PROCESS_DEAD,
    NCCL_RAS_QUIET,
    NCCL_RAS_RANK_ERROR,
    NCCL_RAS_RANK_MISSING,
    NCCL_RAS_STRAGGLER,
    NCCL_RAS_UNAVAILABLE,
)
from rdmadoctor.core.model import ERROR, INFO, UNKNOWN, WARNING, Finding

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from rdmadoctor.parsers.ncclras import OpGroup, RasRank, RasReport

MAX_FINDINGS = 64  # a job of 10k ranks with half of them behind is one finding per group, not 5000
NAMED = 8  # ranks named in one message


def _ranks(ranks: tuple[RasRank, ...] | list[RasRank]) -> str:
    shown = [r.where() for r in list(ranks)[:NAMED]]
    more = len(ranks) - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


def _nodes(ranks: tuple[RasRank, ...] | list[RasRank]) -> list[str]:
    return list(dict.fromkeys(r.node for r in ranks if r.node))


def _data(ranks: tuple[RasRank, ...] | list[RasRank], evidence: list[dict] | None, **extra: Any) -> dict:
    out: dict = {"ranks": [{"rank": r.rank, "gpu": r.gpu, "pid": r.pid, "node": r.node} for r in list(ranks)[:64]],
                 "nodes": _nodes(ranks)[:64], **extra}
    if evidence:
        out["evidence"] = evidence
    return out


def _subject(ranks: tuple[RasRank, ...] | list[RasRank], fallback: str) -> str:
    nodes = _nodes(ranks)
    if len(ranks) == 1:
        r = ranks[0]
        head = f"rank {r.rank}" if r.rank is not None else f"process {r.pid}" if r.pid is not None else fallback
        return head + (f" on {r.node}" if r.node else "")
    if nodes and len(nodes) <= 2:
        return f"{len(ranks)} ranks on {', '.join(nodes)}" if any(r.rank is not None for r in ranks) else \
            f"{len(ranks)} processes on {', '.join(nodes)}"
    return fallback


def judge_report(report: RasReport, *, hang: str | None = None, evidence: list[dict] | None = None,
                 source: str = "NCCL's RAS") -> list[Finding]:
    """Findings from one report. ``hang``: what says the job hangs ("no output for 300 s",
    "PyTorch's watchdog: ..."), when something does; then a quiet report is said beside it."""
    from rdmadoctor.parsers.ncclras import stragglers

    out: list[Finding] = []
    gone: dict[tuple, str] = {}  # (node, pid) -> the code that already names that process

    def proc_key(r: RasRank) -> tuple:
        return (r.node, r.pid)

    # The text report lists dead and missing processes without their ranks; a communicator's
    # missing ranks name them (same node and process).
    from rdmadoctor.core.record import replace

    rank_of = {proc_key(r): r for c in report.comms for r in c.missing_ranks if r.pid is not None}
    report = replace(report, dead=tuple(replace(rank_of[proc_key(r)], dead=True) if r.rank is None and proc_key(r) in rank_of
                                        else r for r in report.dead),
                     missing=tuple(rank_of.get(proc_key(r), r) if r.rank is None else r for r in report.missing))

    # Dead, then not answering: the processes first, then the ranks of each communicator.
    for code, procs, n, what in (
        (NCCL_RAS_PROCESS_DEAD, report.dead, report.dead_processes,
         "is considered dead by NCCL's RAS (unreachable via the RAS network for a minute): its ranks will never enter a "
         "collective again, and every rank that needs them waits"),
        (NCCL_RAS_RANK_MISSING, report.missing, report.missing_processes,
         "did not answer NCCL's RAS (its communicators' data is missing): it hangs, or the network to its node is broken"),
    ):
        for r in procs[:MAX_FINDINGS]:
            gone.setdefault(proc_key(r), code.code)
            out.append(_gone(code is NCCL_RAS_PROCESS_DEAD, _subject([r], "a process"), f"{r.where()} {what}.",
                             _data([r], evidence)))
        if n > len(procs):
            out.append(_gone(code is NCCL_RAS_PROCESS_DEAD, f"{n - len(procs)} processes",
                             f"{n - len(procs)} more job processes {what.split(':')[0].replace('is ', 'are ', 1)} "
                             "(NCCL's text report lists them only when they are few; the JSON report of 2.28.7+ lists all).",
                             _data([], evidence, count=n - len(procs))))
    for c in report.comms:
        listed = list(c.missing_ranks)
        new = [r for r in listed if proc_key(r) not in gone or r.pid is None]
        dead = [r for r in new if r.dead]
        alive = [r for r in new if not r.dead]
        for code, ranks in ((NCCL_RAS_PROCESS_DEAD, dead), (NCCL_RAS_RANK_MISSING, alive)):
            if not ranks:
                continue
            for r in ranks:
                gone.setdefault(proc_key(r), code.code)
            said = "considered dead by NCCL's RAS" if code is NCCL_RAS_PROCESS_DEAD else "missing from NCCL's RAS report"
            out.append(_gone(code is NCCL_RAS_PROCESS_DEAD, _subject(ranks, f"communicator {c.id}"),
                             f"{len(ranks)} rank{'s' if len(ranks) > 1 else ''} of communicator {c.id} "
                             f"{'are' if len(ranks) > 1 else 'is'} {said}: {_ranks(ranks)}. The collectives of that "
                             "communicator cannot complete without them.", _data(ranks, evidence, communicator=c.id)))
        if c.missing > len(listed) and not listed:
            out.append(Finding(NCCL_RAS_RANK_MISSING.code, ERROR, f"communicator {c.id}",
                               f"{c.missing} ranks of communicator {c.id} did not answer NCCL's RAS (the report does not "
                               "name them: they are many, or their processes are unknown).", NCCL_RAS_RANK_MISSING.fix,
                               data=_data([], evidence, communicator=c.id, count=c.missing)))
    # Errors: a rank's own error first; "Remote process error" follows from another rank's.
    first_error: str | None = None
    for c in report.comms:
        for e in sorted(c.errors, key=lambda e: e.error == "Remote process error"):
            ranks = list(e.ranks)
            kind = "an asynchronous error" if e.kind == "async" else "an initialisation error"
            who = _ranks(ranks) if ranks else f"{e.count} ranks (not named: too many)"
            cause = NCCL_RAS_RANK_ERROR.code if (e.error == "Remote process error" and first_error) else None
            f = Finding(NCCL_RAS_RANK_ERROR.code, ERROR, _subject(ranks, f"communicator {c.id}"),
                        f"{e.count} rank{'s' if e.count > 1 else ''} of communicator {c.id} reported {kind}, "
                        f"`{e.error}`: {who}." + (" A remote process error means a peer failed first." if
                                                  e.error == "Remote process error" else ""),
                        NCCL_RAS_RANK_ERROR.fix, data=_data(ranks, evidence, communicator=c.id, error=e.error, kind=e.kind),
                        cause=cause)
            first_error = first_error or f.subject
            out.append(f)
    # Stragglers: per communicator and collective, the ranks with the lowest count.
    for c in report.comms:
        for op, groups in c.op_counts:
            behind, ahead = stragglers(groups)
            if behind is None:
                continue
            out.append(_straggler(c.id, op, behind, ahead, gone, hang, evidence))
        aborted = [g for g in c.statuses if g.value in ("ABORT", "INIT")]
        for g in aborted:
            ranks = list(g.ranks)
            out.append(Finding(NCCL_RAS_RANK_ERROR.code, ERROR if g.value == "ABORT" else WARNING,
                               _subject(ranks, f"communicator {c.id}"),
                               f"{g.count} rank{'s' if g.count > 1 else ''} of communicator {c.id} "
                               f"{'aborted it' if g.value == 'ABORT' else 'are still initialising it'} while others run it"
                               + (f": {_ranks(ranks)}." if ranks else "."), NCCL_RAS_RANK_ERROR.fix,
                               data=_data(ranks, evidence, communicator=c.id, status=g.value)))
    if report.timeouts and not out:
        out.append(Finding(NCCL_RAS_RANK_MISSING.code, WARNING, "RAS",
                           f"NCCL's RAS met {report.timeouts} communication timeout{'s' if report.timeouts > 1 else ''} while "
                           "it gathered the communicators' data: some process answered late or not at all.",
                           NCCL_RAS_RANK_MISSING.fix, data=_data([], evidence, timeouts=report.timeouts)))
    if out:
        return out[:MAX_FINDINGS]
    return [quiet(report, hang, evidence, source)]


def _gone(dead: bool, subject: str, message: str, data: dict) -> Finding:
    """A process or rank RAS considers dead, or one that did not answer."""
    if dead:
        return Finding(NCCL_RAS_PROCESS_DEAD.code, ERROR, subject, message, NCCL_RAS_PROCESS_DEAD.fix, data=data)
    return Finding(NCCL_RAS_RANK_MISSING.code, ERROR, subject, message, NCCL_RAS_RANK_MISSING.fix, data=data)


def _straggler(cid: str, op: str, behind: OpGroup, ahead: tuple[OpGroup, ...], gone: dict, hang: str | None,
               evidence: list[dict] | None) -> Finding:
    ranks = list(behind.ranks)
    op_name = "collective" if op == "collective" else op
    at = f"operation {behind.value}" if behind.value else "no operation yet"
    lead = ", ".join(f"{g.count} rank{'s are' if g.count > 1 else ' is'} at {g.value}" for g in ahead[:4])
    if ranks:
        who = f"{_ranks(ranks)} {'is' if len(ranks) == 1 else 'are'} behind: launched {op_name} up to {at}, while {lead}"
    else:
        named = [r for g in ahead for r in g.ranks]
        who = (f"{behind.count} ranks are behind at {op_name} {at}, while {lead} (NCCL's text report names only the small "
               f"groups: {_ranks(named) + ' are ahead and only waiting' if named else 'none named'}; its JSON report, "
               "NCCL 2.28.7+, names every rank)")
    cause = next((gone[(r.node, r.pid)] for r in ranks if (r.node, r.pid) in gone and r.pid is not None), None)
    sev = ERROR if hang else WARNING
    return Finding(NCCL_RAS_STRAGGLER.code, sev, _subject(ranks, f"communicator {cid}") if ranks else f"communicator {cid}",
                   f"In communicator {cid}, {who}. The ranks behind are the stragglers: the others wait for them.",
                   NCCL_RAS_STRAGGLER.fix,
                   data=_data(ranks, evidence, communicator=cid, collective=op_name, behind_at=behind.value,
                              behind_count=behind.count, ahead=[{"at": g.value, "count": g.count} for g in ahead]),
                   cause=cause)


def quiet(report: RasReport, hang: str | None, evidence: list[dict] | None, source: str) -> Finding:
    """The report shows nothing wrong (or nothing at all): information, or could-not-decide."""
    if not report.complete or report.no_comms or not report.communicators:
        why = ("it holds no communicator (none made yet, or all destroyed)" if report.no_comms or report.communicators == 0
               else "the report was cut before its end")
        return Finding(NCCL_RAS_UNAVAILABLE.code, UNKNOWN, "NCCL RAS", f"{source} gave a report with nothing to judge: {why}.",
                       NCCL_RAS_UNAVAILABLE.fix, data={"evidence": evidence} if evidence else {})
    scope = (f"{report.communicators} communicator{'s' if report.communicators != 1 else ''}"
             + (f" on {report.nodes} node{'s' if report.nodes != 1 else ''}" if report.nodes else "")
             + (f", {report.processes} processes" if report.processes else ""))
    msg = (f"{source} sees nothing wrong: {scope}, every process answered, every communicator RUNNING with the same "
           "operation counts and no error")
    if hang:
        msg += (f"; yet the job hangs ({hang}). RAS sees collectives launched, not completed: a collective that every "
                "rank entered but that does not finish (a network path that drops traffic, a GPU that stopped) looks "
                "healthy to it (NVIDIA/nccl#1730). This is not a clean bill of health: look at the network and GPUs under "
                "the collective")
    return Finding(NCCL_RAS_QUIET.code, INFO, "NCCL RAS", msg + ".", NCCL_RAS_QUIET.fix,
                   data={"evidence": evidence, "hang": hang} if evidence else {"hang": hang})


def blamed_nodes(findings: list[Finding]) -> list[str]:
    """The nodes the findings name, root cause first (what `run` exposes as the blamed node)."""
    out: list[str] = []
    for f in findings:
        for n in (f.data or {}).get("nodes") or ():
            if n not in out:
                out.append(n)
    return out
