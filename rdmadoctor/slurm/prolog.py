"""``rdmadoctor slurm prolog [--gang]``: Slurm's Prolog (PrologFlags=Alloc: on every node of the
allocation at once, as root, before the job).

Without --gang: this node's own gating checks; on a problem it sets its own drain reason
(``rdmadoctor: CODE subject (+N more) (job N)``) and exits 1: Slurm drains the node (the reason
stays rdmadoctor's: Slurm does not rewrite the reason of a node already drained) and requeues the
job (SchedulerParameters=nohold_on_prolog_fail keeps it from being held).

With --gang: the job's nodes meet as ``preflight --gang`` members do (rdmadoctor.preflight.gang,
rdmadoctor.gang): the members are SLURM_JOB_NODELIST (SLURM_NODELIST in the Prolog), this node's
rank its place there, rank 0's address the NodeAddr slurmctld has for the first node, the token
the cluster's name and the job id. Only the members the verdict blames drain and exit 1:

- a member whose own checks said NO-GO;
- the odd one out: a member that differs from a clear majority (more than half of the gang) in
  a fact that makes NCCL hang (GANG_MISMATCH_HANG), with no member missing;
- with --bandwidth, a member slower than gang_slow_share of the median (GANG_MEMBER_SLOW).

A gang where no member can be blamed (a two-two split, a member missing, unknown) drains nobody;
with --strict rank 0 then requeues the job (``scontrol requeue``), so it does not start on nodes
that cannot train together, and every member still exits 0 (a Prolog's non-zero exit would drain
its node with Slurm's own "Prolog error").
"""

from __future__ import annotations

import json
import os

from rdmadoctor.slurm import reason as R
from rdmadoctor.slurm.hostlist import HostlistError, expand
from rdmadoctor.slurm.scontrol import Scontrol, SlurmError, describe, is_drained

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

SCHEMA = "rdmadoctor.slurm-prolog/v1"
DRAIN_SET = "drain reason set: "
# The Prolog's own usage problems: said, exit 2 (Slurm drains a node whose Prolog fails: the
# message in slurmd's log names the fix).


def node_gate(req: Any) -> Any:
    """preflight's gate of ``req`` on this node as a machine (scope node: the Prolog's own process
    is root, not the job's, so the checks of a process are the job's preflight's business)."""
    from rdmadoctor.preflight.gate import gate

    return gate(req, scope="node")


def job_nodes(env: dict[str, str]) -> tuple[list[str], str]:
    for name in ("SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        raw = env.get(name, "").strip()
        if raw:
            try:
                return expand(raw), name
            except HostlistError as e:
                raise SlurmError(f"{name}: {e}", "the Prolog reads the job's nodes from Slurm's environment") from None
    raise SlurmError("--gang: neither SLURM_JOB_NODELIST nor SLURM_NODELIST is set: not a Slurm Prolog or job",
                     "run it as Slurm's Prolog (PrologFlags=Alloc), or use `rdmadoctor preflight --gang` elsewhere")


def master_address(sc: Scontrol, first: str) -> str:
    """Rank 0's address: the NodeAddr slurmctld has for the job's first node."""
    node = sc.node(first)
    addr = (node or {}).get("NodeAddr") or first
    return f"[{addr}]" if ":" in addr else addr


def blame(section: dict[str, Any], rank: int, own_no_go: bool, own_reason: str) -> str:
    """Why this member is to blame for the gang's verdict (its drain reason's text after the
    prefix), or "" when it is not."""
    from rdmadoctor.gang.compare import FIELD, HANG, shown

    if own_no_go:
        return own_reason
    members = section.get("members") or []
    arrived = len(members)
    if section.get("missing") or not arrived:
        return ""  # who is odd among a part of the gang is not known
    for mm in section.get("mismatches") or []:
        f = FIELD.get(mm.get("field"))
        if f is None or f.effect != HANG:
            continue
        odd = mm.get("members") or []
        if 2 * len(odd) >= arrived:
            continue  # no clear majority: a two-two split blames nobody
        mine = next((m for m in odd if m.get("rank") == rank), None)
        if mine is not None:
            others = arrived - len(odd)
            return f"GANG_MISMATCH_HANG {f.name} {shown(mine.get('value'), f)}, the other {others} {shown(mm.get('majority'), f)}"
    for s in section.get("slow") or []:
        if s.get("rank") == rank:
            return f"GANG_MEMBER_SLOW {s.get('gbps', 0):.3g} Gb/s, gang median {s.get('median_gbps', 0):.3g} Gb/s"
    return ""


def blamed_ranks(section: dict[str, Any]) -> set[int]:
    """The ranks :func:`blame` blames, as every member can work out from the same section."""
    from rdmadoctor.preflight.gate import NO_GO

    out = set()
    for m in section.get("members") or []:
        r = m.get("rank")
        if isinstance(r, int) and blame(section, r, m.get("verdict") == NO_GO, "own NO-GO"):
            out.add(r)
    return out


def drain_self(sc: Scontrol, name: str, text: str) -> str:
    """Set this node's drain reason (never over another's drain)."""
    me = sc.node(name)
    if me is None:
        raise SlurmError(f"slurmctld knows no node {name!r}", "SLURMD_NODENAME must be the node's NodeName")
    if is_drained(me) and not R.is_ours(me.get("Reason")):
        return f"already drained by another ({describe(me)}): its reason is kept"
    sc.drain(name, text)
    return f"{DRAIN_SET}{text}"


def mark_drained(g: Any, name: str, reason: str) -> None:
    """The gang's remedies that tell the reader to exclude this node say that rdmadoctor drained it."""
    from rdmadoctor.gang.compare import drained_note, excluded

    for p in g.problems + g.warnings:
        remedy = p.get("remedy") or ""
        if p.get("check") == "gang" and name in excluded(remedy):
            p["remedy"] = drained_note(remedy, name, reason)


def run_prolog(*, gate_args: Any, name: str, sc: Scontrol, env: dict[str, str], gang: bool = False,
               strict: bool = False, bandwidth: bool = False, gang_port: int | None = None,
               gang_timeout: float | None = None, report_file: str | None = None,
               say: Callable[[str], None] = print, log: Callable[[str], None] = print) -> int:
    """The whole Prolog; returns its exit code (0: the job may start here). ``gate_args``: the
    gate's request (:class:`~rdmadoctor.preflight.request.Request`, or a dict of its fields:
    root, bundle, example, profile, config, pool, sets, only, skip, timeout)."""
    from rdmadoctor.core import quarantine as Q
    from rdmadoctor.preflight.gate import GO, NO_GO
    from rdmadoctor.preflight.render import render_text
    from rdmadoctor.preflight.request import Request

    req = Request.of(gate_args, strict=strict)

    job = env.get("SLURM_JOB_ID", "").strip()
    suffix = f" (job {job})" if job else ""
    plan = None
    section = None
    rank = 0
    gang_error = ""
    if gang:
        from rdmadoctor.preflight import gang as G
        from rdmadoctor.preflight.errors import PreflightError

        nodes, source = job_nodes(env)
        if name not in nodes:
            raise SlurmError(f"--gang: this node {name!r} is not in the job's node list ({source}={env.get(source)})",
                             "SLURMD_NODENAME (or --node) must be the NodeName slurm.conf has for this node")
        rank = nodes.index(name)
        token = f"{env.get('SLURM_CLUSTER_NAME', '').strip() or 'slurm'}:{job or '?'}"
        master = None if rank == 0 else master_address(sc, nodes[0])
        sets, share = G.take_share(list(req.sets or []))
        req = req.replace(sets=sets)
        try:
            plan = G.prepare(env, rank=rank, size=len(nodes), master=master, port=gang_port, timeout=gang_timeout,
                             token=token, bandwidth=bandwidth, share=share)
        except PreflightError as e:
            if rank == 0 and "cannot listen" in str(e):
                # Another job's Prolog on this node holds the port (nodes shared between jobs): the
                # gang cannot meet, which is no fault of this node; its members find no rank 0
                # (GANG_UNREACHABLE) and nobody is blamed.
                gang_error = f"{e} ({e.hint})" if e.hint else str(e)
            else:
                raise SlurmError(str(e), e.hint) from None
    try:
        g = node_gate(req)
        own = g.verdict
        own_root = Q.verdict_of(g.report, strict)[1]
        own_text = R.node_reason(g.report, own_root, strict=strict)[len(R.PREFIX):].strip()
        if plan is not None:
            from rdmadoctor.preflight import gang as G
            from rdmadoctor.preflight.master import _resolve

            section = G.meet(plan, g, dict(env, SLURMD_NODENAME=name), strict=strict, log=log, resolve=_resolve)
    finally:
        if plan is not None:
            plan.close()
    if gang_error:
        section = {"role": "rank0", "rank": 0, "size": None, "verdict": "unknown", "members": [], "mismatches": [],
                   "slow": [], "missing": [], "error": gang_error}
    blamed = ""
    if section is None:
        blamed = own_text if own == NO_GO else ""
    else:
        blamed = blame(section, rank, own == NO_GO, own_text)
    done, code, error, drained = "", 0, "", ""
    try:
        if blamed:
            text = R.bounded(f"{R.PREFIX} {blamed}", R.MAX_REASON - len(suffix)) + suffix
            done = drain_self(sc, name, text)
            drained = text if done.startswith(DRAIN_SET) and not sc.dry_run else ""
            code = 1
        elif section is not None and blamed_ranks(section) - {rank}:
            who = ", ".join(f"rank {r}" for r in sorted(blamed_ranks(section)))
            done = f"{who} blamed: that node drains and Slurm requeues the job; this node is not drained"
        elif section is not None and g.verdict != GO:
            if strict and rank == 0 and job:
                sc.requeue(job)
                done = f"no member to blame; --strict: job {job} requeued, no node drained"
            else:
                done = ("no member to blame (a split without a clear majority, a member missing, or unknown): "
                        "no node drained, the job starts" + ("" if strict else " (--strict requeues it)"))
        elif section is None and g.verdict != GO:
            done = "could not decide: no drain, the job starts"
    except SlurmError as e:
        error = str(e)
        code = 2 if not blamed else 1
    if drained:
        mark_drained(g, name, drained)
    # Said after the change, so that a remedy says what rdmadoctor did (drained this node).
    text = render_text(g, g.verdict, colour=False, gang=None if gang_error else section).rstrip("\n")
    say(text.replace("rdmadoctor preflight:", "rdmadoctor slurm prolog:", 1))
    if gang_error:
        say(f"gang: not run: {gang_error}")
    say(f"slurm: node {name}{' rank ' + str(rank) if section is not None else ''}: "
        f"{'blamed: ' + blamed if blamed else 'not blamed'}; {done or 'nothing to change'}")
    if error:
        say(f"slurm: error: {error}")
    if report_file:
        doc = {"schema": SCHEMA, "node": name, "job": job or None, "gang": section, "verdict": g.verdict,
               "own_verdict": own, "blamed": blamed or None, "done": done, "error": error or None,
               "commands": list(sc.changes), "exit_code": code, "report": g.report}
        tmp = f"{report_file}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2)
        os.replace(tmp, report_file)
    return code
