"""The gate's gang step (``--gang``): after this pod's own checks, meet the job's other members at
rank 0 (:mod:`rdmadoctor.gang`) and take the gang's verdict as this pod's.

:func:`prepare` reads the membership and binds rank 0's port before the checks run, so a usage
problem is said before any output and members that come early wait in the listen backlog;
:func:`meet` runs the exchange and merges its problems into the Gate.
"""

from __future__ import annotations

from rdmadoctor.preflight.errors import PreflightError
from rdmadoctor.preflight.gate import GO, NO_GO, UNKNOWN_VERDICT, VERDICT_TEXT

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from rdmadoctor.core.report import Report
    from rdmadoctor.preflight.gate import Gate

SHARE_KEY = "gang_slow_share"


class Plan:
    def __init__(self, membership: Any, host: str | None, port: int, host_source: str, timeout: float,
                 bandwidth: bool, share: float, server: Any = None):
        self.membership = membership
        self.host = host
        self.port = port
        self.host_source = host_source
        self.timeout = timeout
        self.bandwidth = bandwidth
        self.share = share
        self.server = server

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None


def take_share(sets: list[str]) -> tuple[list[str], float]:
    """``--set gang_slow_share=X`` out of the sets (the checks do not know the key), checked like
    any expectation."""
    from rdmadoctor.core.expect import ExpectError
    from rdmadoctor.gang.bandwidth import SLOW_SHARE

    rest, share = [], SLOW_SHARE.default
    for item in sets:
        key, eq, value = item.partition("=")
        if eq and key.strip() == SHARE_KEY:
            try:
                share = SLOW_SHARE.validate(SHARE_KEY, float(value) if _number(value) else value)
            except ExpectError as e:
                raise PreflightError(f"--set {item}: {e}", f"e.g. --set {SHARE_KEY}=0.7") from None
        else:
            rest.append(item)
    return rest, share


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def prepare(env: dict[str, str], *, rank: int | None, size: int | None, master: str | None, port: int | None,
            timeout: float | None, token: str | None, bandwidth: bool, share: float) -> Plan | None:
    """The membership and where rank 0 is; rank 0 binds its port here. None: this process does not
    take part (a local rank other than 0: another process on this node does)."""
    from rdmadoctor.gang.membership import GANG_PORT, GANG_TIMEOUT, find_membership, parse_endpoint
    from rdmadoctor.preflight.master import find_master, host_name_error
    from rdmadoctor.runner import UsageError

    wait = GANG_TIMEOUT if timeout is None else timeout
    if not wait > 0:
        raise PreflightError(f"--gang-timeout must be a positive number of seconds, got {wait:g}")
    gang_port = GANG_PORT if port is None else port
    if not 1 <= gang_port <= 65535:
        raise PreflightError(f"--gang-port {gang_port} is not a port number (1-65535)")
    try:
        ms = find_membership(env, rank, size, token)
    except UsageError as e:
        raise PreflightError(str(e), e.hint) from None
    if not ms.takes_part:
        return None
    host, source = None, "this pod is rank 0"
    if ms.rank != 0:
        if master is not None:
            try:
                host, gang_port = parse_endpoint(master, gang_port)
            except UsageError as e:
                raise PreflightError(str(e), e.hint) from None
            source = "--gang-master"
        else:
            try:
                found = find_master(env)
            except PreflightError as e:
                raise PreflightError(str(e).replace("--wait-for-master", "--gang"),
                                     (e.hint or "") + "; or give --gang-master HOST[:PORT]") from None
            if not found.host:
                raise PreflightError(f"--gang: this member has rank {ms.rank} ({ms.rank_source}) but the master "
                                     f"address points at itself ({found.host_source})",
                                     "give --gang-master HOST (rank 0's address)")
            host, source = found.host, found.host_source
        bad = host_name_error(host)
        if bad:
            raise PreflightError(f"--gang: rank 0's address {host!r} ({source}) is not a valid host name: {bad}")
    plan = Plan(ms, host, gang_port, source, wait, bandwidth, share)
    if ms.rank == 0 and (ms.size or 0) > 1:
        from rdmadoctor.gang.protocol import listen

        try:
            plan.server = listen(gang_port)
        except OSError as e:
            raise PreflightError(f"--gang: rank 0 cannot listen on port {gang_port}: {e.strerror or e}",
                                 "another process holds it (a second gang on this pod?): give every member another "
                                 "--gang-port") from None
    return plan


def _node_name(env: dict[str, str], report: Report) -> str:
    """The node's name for the verdict and the exclusion (what nodeAffinity and Slurm take): the
    downward API's NODE_NAME where the pod spec sets it, Slurm's node name, else the host's."""
    for name in ("NODE_NAME", "KUBE_NODE_NAME", "SLURMD_NODENAME"):
        if env.get(name, "").strip():
            return env[name].strip()
    return report.host.hostname or report.host.label or "?"


def meet(plan: Plan, g: Gate, env: dict[str, str], *, strict: bool,
         log: Callable[[str], None], resolve: Callable[..., Any] | None = None) -> dict[str, Any]:
    """Run the exchange; fold its problems into ``g``; returns the ``gang`` section."""
    from rdmadoctor.gang import facts as F
    from rdmadoctor.gang import session
    from rdmadoctor.gang.membership import engine_of

    report = g.rep
    live = report.host.kind == "live"
    facts = F.gang_facts(report, F.local_nccl_version(env) if live else None)
    member = {
        "host": _node_name(env, report),
        "verdict": g.verdict,
        "problems": sorted({p["code"] for p in g.problems + g.unknown}),
        "facts": facts,
        "digest": F.digest(facts),
    }
    rails = F.rails(report)
    ms = plan.membership
    if ms.size == 1:
        from rdmadoctor.gang.compare import judge

        section = dict(judge([dict(member, rank=0)], 1, strict=strict, engine=engine_of(env)), role="rank0", rank=0, size=1,
                       master="this pod", bandwidth=None, refused=[])
    elif ms.rank == 0:
        try:
            section = session.run_rank0(size=ms.size, port=plan.port, token=ms.token, member=member, rails=rails,
                                        timeout=plan.timeout, bandwidth=plan.bandwidth, share=plan.share,
                                        strict=strict, log=log, server=plan.server, engine=engine_of(env))
        finally:
            plan.server = None
    else:
        assert plan.host is not None, "plan() gives every member but rank 0 rank 0's address"
        section = session.run_member(rank=ms.rank, size=ms.size, host=plan.host, port=plan.port, token=ms.token,
                                     member=member, rails=rails, timeout=plan.timeout, log=log, resolve=resolve,
                                     bandwidth=plan.bandwidth)
    section["membership"] = dict(ms.to_json(), master_source=plan.host_source, port=plan.port)
    for p in section.get("problems") or []:
        item = dict(p, pod_fix=None)
        sev = item.get("severity")
        if sev == "error" or (sev == "warning" and strict):
            g.problems.append(item)
        elif sev == "warning":
            g.warnings.append(item)
        elif sev == "unknown":
            g.unknown.append(item)
    rank = {GO: 0, UNKNOWN_VERDICT: 1, NO_GO: 2}
    gv = str(section["verdict"]) if section.get("verdict") in rank else UNKNOWN_VERDICT
    g.verdict = max(g.verdict, gv, key=lambda v: rank[v])
    return section


def member_word(env: dict[str, str]) -> str:
    """What a member is called in the text: "this pod" in Kubernetes, "this node" elsewhere (a
    Slurm job step, `srun rdmadoctor run --gang`, a Prolog)."""
    return "this pod" if env.get("KUBERNETES_SERVICE_HOST") else "this node"


def gang_text(section: dict[str, Any], this: str = "this pod") -> list[str]:
    """The gang's part of the text verdict: the same lines in every member's log. ``this``: how
    the text names this member (:func:`member_word`)."""
    from rdmadoctor.core.words import count
    from rdmadoctor.gang.compare import FIELD, display, shown

    members = section.get("members") or []
    size = section.get("size")
    verdict = VERDICT_TEXT.get(str(section.get("verdict")), "UNKNOWN")
    where = display(section.get("master") or "?").replace("this pod", this)
    out = [f"gang: {verdict} - {len(members)} of {count(size or 0, 'member')} met ({this} is rank {section.get('rank')}; "
           f"rank 0: {where})"]
    odd = {m["rank"] for mm in section.get("mismatches") or [] for m in mm["members"]}
    odd |= {s["rank"] for s in section.get("slow") or []}
    many = len(members) > 16
    for m in members:
        if many and m.get("verdict") == GO and m["rank"] not in odd:
            continue
        out.append(f"  rank {m['rank']:<4} {VERDICT_TEXT.get(m.get('verdict'), '?'):<7} {display(m.get('fingerprint') or '-'):<16}  "
                   f"{display(m.get('host') or '?')}")
    if many:
        alike = sum(1 for m in members if m.get('verdict') == GO and m['rank'] not in odd)
        out.append(f"  (the other {count(alike, 'member')}: GO, alike)")
    for mm in section.get("mismatches") or []:
        f = FIELD.get(mm["field"])
        vals = ", ".join(f"rank {m['rank']} {shown(m['value'], f)}" for m in mm["members"])
        out.append(f"  differs: {mm['field']}: majority {shown(mm['majority'], f)}; {vals}")
    for s in section.get("slow") or []:
        out.append(f"  slow: rank {s['rank']} on {display(s.get('host'))}: {s['gbps']:g} Gb/s, gang median {s['median_gbps']:g} Gb/s")
    bw = section.get("bandwidth")
    if bw:
        out.append(f"  bandwidth: {bw['tool']}, {count(bw['rounds'], 'round')}, median {bw.get('median_gbps')} Gb/s")
    if section.get("missing"):
        out.append(f"  missing: rank {', '.join(str(r) for r in section['missing'])}")
    for r in section.get("refused") or []:
        out.append(f"  refused: {display(r)}")
    return out
