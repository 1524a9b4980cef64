"""Linking: the findings in order, root cause first, each symptom linked to what explains it.

Findings are ordered by when they were first seen (the log's timestamps when every finding has one,
else the order of the input). A row marked ``symptom`` is linked to the earliest non-symptom error
seen before it (a warning only when no error came first; the first one in the next
``LOOKAHEAD_LINES`` lines when nothing came before): ``cause`` names that problem's code and
``data["follows"]`` says where it was. NCCL on sockets is NCCL_SOCKET_FALLBACK, with the first
problem that explains a fallback as its reason. Pure functions of the findings in the making.
"""

from __future__ import annotations

import re

from rdmadoctor.core import codes
from rdmadoctor.core.model import ERROR, INFO, WARNING, Finding
from rdmadoctor.logs import kb
from rdmadoctor.logs.nccl import is_socket, tcp_fabric
from rdmadoctor.logs.scan.errors import _UNKNOWN, _UNKNOWN_END, _UNKNOWN_LINE, _UNKNOWN_SYMPTOM
from rdmadoctor.logs.scan.matching import MAX_EVIDENCE

_UNKNOWNS = (_UNKNOWN, _UNKNOWN_SYMPTOM, _UNKNOWN_LINE, _UNKNOWN_END)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from rdmadoctor.logs.nccl import NcclFacts
    from rdmadoctor.logs.scan.matching import _Agg

_TS_SORTABLE = re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?")


def _ib_off(aggs: list[_Agg]) -> list[_Agg]:
    """With NCCL_IB_DISABLE (or NCCL_NET=Socket) set, NCCL's `Failed to open libibverbs` is information:
    NCCL was told not to use IB, and the setting (its own finding) is what keeps the job off RDMA."""
    from rdmadoctor.logs.kb.nccl import NCCL_IB_DISABLED_BY_ENV, VERBS_LIB_MISSING

    if not any(a.pattern.code == NCCL_IB_DISABLED_BY_ENV for a in aggs):
        return aggs
    for a in aggs:
        if a.pattern.code == VERBS_LIB_MISSING:
            _as_information(a, a.pattern.message.rstrip(".") + "; NCCL was also told not to use IB (NCCL_IB_DISABLE, "
                            "NCCL_NET=Socket), so it would not have: information here.")
    return aggs



def _told(aggs: list[_Agg]) -> list[_Agg]:
    """What a failure became (an exit status, a signal, an abort) that no row knows, a few lines from a
    problem a row knows (torchrun's `exitcode : -9` over its `Signal 9 (SIGKILL) received`, mpirun's
    "non-zero exit code" under nccl-tests' failure): told by that finding, whose evidence quotes it too."""
    known = [a for a in aggs if a.pattern not in _UNKNOWNS and a.pattern.severity in (ERROR, WARNING)]
    if not known or not any(a.pattern is _UNKNOWN_END for a in aggs):
        return aggs
    out = []
    for a in aggs:
        if a.pattern is _UNKNOWN_END:
            by = next((k for k in known if k.seq[0] == a.seq[0] and abs(k.seq[1] - a.seq[1]) <= LOOKAHEAD_LINES), None)
            if by is not None:
                by.evidence.extend(a.evidence[:max(0, MAX_EVIDENCE - len(by.evidence))])
                continue
        out.append(a)
    return out


def _as_information(a: _Agg, message: str) -> None:
    """A problem its row calls one, made information by what else the input shows (its message says why)."""
    from rdmadoctor.core.record import replace

    if a.pattern.severity != INFO:
        a.pattern = replace(a.pattern, severity=INFO, explains_fallback=False, message=message)


def _order_key(aggs: list[_Agg]) -> Callable[[_Agg], Any]:
    """By time when every finding has a sortable timestamp, else by position in the input."""
    if aggs and all(a.time and _TS_SORTABLE.match(a.time) for a in aggs):
        return lambda a: (a.time.replace("T", " ")[:26], a.seq)  # type: ignore[union-attr]
    return lambda a: a.seq


def _finding(a: _Agg) -> Finding:
    p = a.pattern
    data: dict[str, Any] = {
        "pattern": p.id,
        "count": a.count,
        "evidence": a.evidence,
        "meaning": p.meaning,
        "ref": p.ref,
    }
    if a.hosts:
        data["hosts"] = sorted(a.hosts)
    if a.ranks:
        data["ranks"] = sorted(a.ranks)
    if a.symptom:
        data["symptom"] = True
    return Finding(p.code, p.severity, a.subject, kb.render(p.message, a.groups), p.fix, data=data)


# PyTorch raises `NCCL error in: ..., unhandled system error` and prints the NCCL WARN that
# explains it on the lines after ("Last error:"): a symptom with no cause before it takes one
# from this many lines after it, in the same input.
LOOKAHEAD_LINES = 8


def _link(aggs: list[_Agg]) -> tuple[list[Finding], dict[int, int]]:
    """Findings in order, each symptom linked to its cause.

    A symptom's cause is the earliest problem seen before it (one its row ``follows`` first), else
    the first one in the next LOOKAHEAD_LINES lines of the same input. Two passes: a symptom that
    finds no cause among the root problems (``Error while creating shared memory segment`` quoted
    alone under PyTorch's ``Last error:``) is a root itself, and the symptoms left over link to it.
    """
    found = [_finding(a) for a in aggs]
    problem = [a.pattern.severity in (ERROR, WARNING) for a in aggs]
    cause: dict[int, int] = {}
    roots = [i for i, a in enumerate(aggs) if problem[i] and not a.symptom]
    # An NCCL WARN no row knows, right before a known error NCCL printed on the same host, is part of
    # that error's cascade (`Call to open failed` then `Error while attaching to shared memory
    # segment`): it folds under the known one. After a known error, it follows from that error.
    for i in [i for i in roots if aggs[i].pattern is _UNKNOWN]:
        a = aggs[i]
        c = next((j for j in roots if j < i and aggs[j].pattern not in _UNKNOWNS and aggs[j].pattern.severity == ERROR), None)
        if c is None and a.nccl_host is not None:
            c = next((j for j, b in enumerate(aggs) if j > i and problem[j] and b.pattern not in _UNKNOWNS
                      and b.nccl_host == a.nccl_host and b.seq[0] == a.seq[0]
                      and a.seq[1] < b.seq[1] <= a.seq[1] + LOOKAHEAD_LINES), None)
        if c is not None:
            cause[i] = c
    # Another program's line shaped like a failure that no row knows ("Fatal error in PMPI_Init: ... error
    # stack:", "hfi_userinit: ... failed", "Cannot allocate memory") belongs to the known problem next to it:
    # the first known error before it (a cascade), a known warning a few lines before (RLIMIT_MEMLOCK, then
    # the registration that failed), or the known problem a few lines after it (the bottom of MPICH's error
    # stack names what failed). Alone, it is a root of its own.
    known = [j for j, b in enumerate(aggs) if problem[j] and b.pattern not in _UNKNOWNS]
    for i in [i for i in roots if aggs[i].pattern is _UNKNOWN_LINE]:
        a = aggs[i]

        def near(j: int, a: _Agg = a) -> bool:
            return aggs[j].seq[0] == a.seq[0] and abs(aggs[j].seq[1] - a.seq[1]) <= LOOKAHEAD_LINES

        c = next((j for j in known if j < i and aggs[j].pattern.severity == ERROR), None)
        if c is None:
            c = next((j for j in known if j < i and near(j) and not aggs[j].pattern.explains_fallback), None)
        if c is None:
            # (not a symptom's row: MPICH's generic `Other MPI error` banner after a UCX ERROR line follows from it)
            after = [j for j in known if j > i and near(j) and not aggs[j].symptom]
            c = next((j for j in after if aggs[j].pattern.severity == ERROR), after[0] if after else None)
        if c is not None:
            cause[i] = c
    roots = [i for i in roots if i not in cause]
    for i, a in enumerate(aggs):
        if a.symptom:
            c = _cause_for(aggs, i, roots)
            if c is not None:
                cause[i] = c
    # What a failure became (an NCCL result name, a traceback's last line, unknown) explains nothing.
    more = sorted(roots + [i for i, a in enumerate(aggs) if a.symptom and problem[i] and i not in cause
                           and a.pattern is not _UNKNOWN_SYMPTOM and a.pattern is not _UNKNOWN_END])
    # A victim's line that names what it follows (its row's `follows`) takes the first such line before
    # it first: NCCL's proxy failing after the socket error that broke its connection.
    for i, a in enumerate(aggs):
        if a.symptom and i not in cause and a.pattern.follows:
            wanted = set(a.pattern.follows)
            c = next((j for j in more if j < i and (aggs[j].pattern.code in wanted or aggs[j].pattern.id in wanted)), None)
            if c is not None and cause.get(c) != i:
                cause[i] = c
    for i, a in enumerate(aggs):
        if a.symptom and i not in cause:
            c = _cause_for(aggs, i, [j for j in more if j != i])
            if c is not None and cause.get(c) != i:
                cause[i] = c
    out: list[Finding] = []
    for i, f in enumerate(found):
        if i in cause:
            ca, cf = aggs[cause[i]], found[cause[i]]
            ev = ca.evidence[0] if ca.evidence else {}
            f.data["follows"] = {"code": cf.code, "subject": cf.subject, "file": ev.get("file"), "line": ev.get("line")}
            f = Finding(f.code, f.severity, f.subject, f.message, f.remedy, data=f.data, cause=cf.code)
        out.append(f)
    return out, cause


def _explains_fallback(a: _Agg) -> bool:
    """A problem that says why NCCL went to sockets (the first one is the NCCL_SOCKET_FALLBACK's cause)."""
    return not a.symptom and a.pattern.severity in (ERROR, WARNING) and a.pattern.explains_fallback


def _rank_key(aggs: list[_Agg], cause: dict[int, int], fallback: bool = False,
              reason: int | None = None) -> Callable[[int], int]:
    """Root causes first among the roots, each with what follows from it (a stable sort: the order
    seen stays within a rank): 0, a problem that came first and led to an error (itself or what
    follows from it); 1, a victim's line (a symptom) nothing before or right after explains, the
    job's own account of a failure that started elsewhere; 2, a warning nothing failed after (the
    IB transport off in a job that then died of a full GPU is not why it died); 3, information."""
    def root(i: int) -> int:
        seen = set()
        while i in cause and i not in seen:
            seen.add(i)
            i = cause[i]
        return i

    roots = {i: root(i) for i in range(len(aggs))}
    failed = {roots[i] for i, a in enumerate(aggs) if a.pattern.severity == ERROR}
    rank = {}
    for r in set(roots.values()):
        a = aggs[r]
        if a.pattern.severity not in (ERROR, WARNING):
            rank[r] = 3
        elif r in failed:
            rank[r] = 1 if a.symptom else 0
        else:
            rank[r] = 2
    # The socket fallback (an error) follows from its reason, or is a root of its own; the one-host
    # note is information.
    if fallback:
        roots[-1] = reason if reason is not None else -1
        rank[roots[-1]] = 0
    roots[-2], rank[-2] = -2, 3
    roots[-3], rank[-3] = -3, 0  # hosts on different net plugins: an error of its own
    return lambda i: rank[roots[i]]


def _cause_for(aggs: list[_Agg], i: int, candidates: list[int]) -> int | None:
    a = aggs[i]
    before = [j for j in candidates if j < i]
    wanted = set(a.pattern.follows)
    if wanted:
        for j in before:
            if aggs[j].pattern.code in wanted or aggs[j].pattern.id in wanted:
                return j
    # An error is explained by the first error before it; a warning (IB not found, a fallback) is
    # its cause only when no error came before: an unknown NCCL WARN outranks a known benign line.
    errors = [j for j in before if aggs[j].pattern.severity == ERROR]
    if errors:
        return errors[0]
    # Symptoms that only an error explains (Code.explained_by_errors_only): a job killed after a
    # warning (IB not found, say) was not killed because of it; the kill leads unless an error came
    # before it. What a job on sockets instead of RDMA can end in (Code.slow_symptom): a collective
    # too slow for the timeout.
    code = codes.get(a.pattern.code)
    slow = code is not None and code.slow_symptom
    if before and not (code is not None and code.explained_by_errors_only):
        # A warning that only says why NCCL is on sockets (IB off, not found) explains a slow job and
        # its timeouts, not a connection a peer closed or refused.
        warnings = [j for j in before if not aggs[j].pattern.explains_fallback or slow]
        if warnings:
            return warnings[0]
    # Right after it (a summary line pasted above the log that explains it): the first error there,
    # else the first problem.
    after = [j for j in candidates if j > i and aggs[j].seq[0] == a.seq[0]
             and a.seq[1] <= aggs[j].seq[1] <= a.seq[1] + LOOKAHEAD_LINES
             and (aggs[j].pattern.severity == ERROR or not aggs[j].pattern.explains_fallback
                  or slow)]
    return next((j for j in after if aggs[j].pattern.severity == ERROR), after[0] if after else None)


def _socket_fallback(facts: NcclFacts, nccl: dict | None, aggs: list[_Agg]) -> Finding | None:
    """NCCL_SOCKET_FALLBACK from what NCCL said it uses, with the reason the log gives."""
    if not nccl:
        return None
    hosts = nccl.get("socket_hosts")
    socket_net = [n for n in {**facts._implied(), **facts.networks}.values() if is_socket(n, None)]
    ofi_tcp = tcp_fabric(facts.fabric)
    if not (socket_net or facts.socket_channel_hosts or is_socket(None, nccl.get("plugin")) or ofi_tcp):
        return None
    name = (socket_net[0] if socket_net else f"libfabric's {facts.fabric} provider" if ofi_tcp and not facts.socket_channel_hosts
            else (nccl.get("plugin") or "Socket"))
    ifaces = ", ".join(nccl.get("socket_ifaces") or []) or "the interface NCCL picked"
    where = ""
    all_hosts = nccl.get("hosts") or []
    if hosts and all_hosts and len(hosts) < len(all_hosts):
        others = sorted({n for h, n in facts.networks.items() if h not in hosts and not is_socket(n, None)})
        rest = f"while the others use {' and '.join(others)}" if others else "(the others' transport is not in the log)"
        where = f" on {len(hosts)} of {len(all_hosts)} hosts ({', '.join(hosts[:8])}{', ...' if len(hosts) > 8 else ''}) {rest}"
    elif hosts:
        where = f" on {', '.join(hosts[:8])}{', ...' if len(hosts) > 8 else ''}"
    reasons = [a for a in aggs if _explains_fallback(a)]
    why = ""
    cause = None
    follows = None
    if reasons:
        r = reasons[0]
        cause = r.pattern.code
        why = f", because: {kb.render(r.pattern.message, r.groups).rstrip('.')}"
        ev = r.evidence[0] if r.evidence else {}
        follows = {"code": cause, "subject": r.subject, "file": ev.get("file"), "line": ev.get("line")}
    # One host in the log and nothing saying how many the job has: whether TCP carries anything between
    # hosts is not known (a job on one machine sends nothing over it), so it is not an error yet.
    # (a NET channel line is traffic between nodes: NCCL keeps ranks of one node on P2P or SHM)
    one = len(all_hosts) <= 1 and facts.nodes() is None and not facts.socket_channel_hosts and not facts.net_channels
    message = (f"NCCL uses {name} (TCP) for inter-node traffic{where}, over {ifaces}{why}. "
               "Expected: NET/IB (InfiniBand or RoCE) with GPUDirect RDMA on an RDMA pool"
               + ("; the log shows one host and not how many the job spans: this matters only if it spans several"
                  if one else ""))
    data: dict[str, Any] = {"network": name, "socket_hosts": hosts, "socket_ifaces": nccl.get("socket_ifaces")}
    if follows:
        data["follows"] = follows
    from rdmadoctor.core.codes.nccl import NCCL_SOCKET_FALLBACK

    fix = NCCL_SOCKET_FALLBACK.fix
    if ofi_tcp and not socket_net:
        fix = ("aws-ofi-nccl took libfabric's tcp provider because it found no EFA device: give the pod the EFA "
               "devices (the `vpc.amazonaws.com/efa` resource of the EFA device plugin, /dev/infiniband/uverbs* in the "
               "container) and unset FI_PROVIDER if it says tcp; `fi_info -p efa` in the pod must list them.")
    return Finding(NCCL_SOCKET_FALLBACK.code, WARNING if one else ERROR, ", ".join(hosts[:8]) if hosts else "NCCL", message,
                   fix, data=data, cause=cause)
