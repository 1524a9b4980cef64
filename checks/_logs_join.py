"""logs.diagnose's join of the log with the node: what the node checks that ran before it found
(:class:`NodeView`), and the log's findings made to follow from them (NCCL's fallback to sockets
with the reason the node shows, a registration failing under a low memlock limit, ...).
"""

from __future__ import annotations

from rdmadoctor.checks import kernel, limits
from rdmadoctor.checks._rdma import ignored, port_subject
from rdmadoctor.checks.ib import IB_NO_DEVICES, IB_NO_SM, IB_PORT_DOWN, IB_PORT_INIT
from rdmadoctor.checks.limits import MEMLOCK_LIMITED, SHM_NEARLY_FULL, SHM_TOO_SMALL
from rdmadoctor.checks.nccl import NCCL_IB_DISABLED_BY_ENV, NCCL_IB_GID_INDEX_BAD, NCCL_IB_HCA_NO_MATCH
from rdmadoctor.checks.roce import ROCE_NO_V2_GID
from rdmadoctor.checks.verbs import DEV_UVERBS_MISSING, VERBS_ABI_MISMATCH, VERBS_LIB_MISSING, VERBS_PROVIDER_MISSING
from rdmadoctor.core.model import ERROR, WARNING, Code, Finding
from rdmadoctor.core.record import record, replace
from rdmadoctor.logs.kb.nccl import (
    NCCL_GDR_DISABLED,
    NCCL_IB_MODIFY_QP_FAILED,
    NCCL_QP_CQ_CREATE_FAILED,
    NCCL_REG_MR_FAILED,
    NCCL_SHM_FAILED,
    NCCL_SOCKET_FALLBACK,
)
from rdmadoctor.logs.kb.ucx import UCX_IB_RESOURCE_FAILED

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any



@record
class NodeView:
    """What the node checks that ran before this one established, for the join with the log."""

    ran: bool  # the RDMA devices were established (ib.devices ran and knew them)
    active: tuple[tuple[str, str | None], ...] = ()  # (port, link layer) of every ACTIVE port
    # (check id, finding) of every problem the node checks found, in report order.
    problems: tuple[tuple[str, Finding], ...] = ()
    memlock: Any = None  # limits.memlock's facts, for a pasted ulimit
    hostname: str | None = None
    rates: tuple[tuple[str, float], ...] = ()  # (device, Gb/s) of every ACTIVE port with a known rate


def _node_view(ctx) -> NodeView:
    results = getattr(ctx, "results", {}) or {}
    problems = tuple(
        (cid, f) for cid, r in results.items() if cid != "logs.diagnose" for f in r.findings if f.severity in (ERROR, WARNING)
    )
    mem = results.get("limits.memlock")
    memlock = mem.facts if mem is not None and isinstance(mem.facts, limits.MemlockFacts) else None
    try:
        hostname = ctx.host.runtime.hostname
    except Exception:  # noqa: BLE001 - an odd runtime.json: the host is unnamed
        hostname = None
    dev = results.get("ib.devices")
    facts = getattr(dev, "facts", None)
    inv = getattr(facts, "inv", facts)
    if inv is None or getattr(inv, "source", "none") == "none":
        return NodeView(False, (), problems, memlock, hostname)
    expect = getattr(ctx, "expect", {}) or {}
    active = tuple(
        (port_subject(d, p), p.link_layer)
        for d in inv.pfs()
        for p in d.ports
        if p.state == "ACTIVE" and not ignored(d, p, expect)
    )
    rates = tuple((d.name, p.rate_gbps) for d in inv.pfs() for p in d.ports
                  if p.state == "ACTIVE" and p.rate_gbps and not ignored(d, p, expect))
    return NodeView(True, active, problems, memlock, hostname, rates)


# Why NCCL takes sockets on a node with ACTIVE ports, as the node checks say it, surest first: a
# setting that turns IB off, then the pod not reaching the devices, then the userspace, then a
# device list that selects nothing.
_FALLBACK_REASONS = (
    NCCL_IB_DISABLED_BY_ENV, DEV_UVERBS_MISSING, VERBS_LIB_MISSING, VERBS_PROVIDER_MISSING, VERBS_ABI_MISMATCH,
    NCCL_IB_HCA_NO_MATCH,
)
# Why NCCL takes sockets on a node without a usable port.
_NO_PORT_REASONS = (IB_NO_DEVICES, IB_NO_SM, IB_PORT_INIT, IB_PORT_DOWN)
# A failure in the log -> the node findings it follows from (when the log's words allow it).
_NODE_CAUSES: dict[str, tuple[tuple[str, str | None], ...]] = {
    NCCL_REG_MR_FAILED.code: ((MEMLOCK_LIMITED.code, "Cannot allocate memory"),),
    NCCL_QP_CQ_CREATE_FAILED.code: ((MEMLOCK_LIMITED.code, "Cannot allocate memory"),),
    UCX_IB_RESOURCE_FAILED.code: ((MEMLOCK_LIMITED.code, "Cannot allocate memory"),),
    NCCL_SHM_FAILED.code: ((SHM_TOO_SMALL.code, None), (SHM_NEARLY_FULL.code, None)),
    NCCL_GDR_DISABLED.code: ((kernel.GDR_PEERMEM_MISSING.code, None),),
    # A QP moved to RTR with a GID a peer cannot route to (NCCL_IB_GID_INDEX on a v1 or link-local entry).
    NCCL_IB_MODIFY_QP_FAILED.code: ((NCCL_IB_GID_INDEX_BAD.code, None), (ROCE_NO_V2_GID.code, None)),
}


def _pick(problems: tuple[tuple[str, Finding], ...], codes: tuple[Code, ...]) -> tuple[str, Finding] | None:
    for severity in (ERROR, WARNING):
        for code in codes:
            for cid, f in problems:
                if f.code == code.code and f.severity == severity:
                    return cid, f
    return None


def _ports_text(active: tuple[tuple[str, str | None], ...]) -> str:
    layers = {ll for _, ll in active}
    word = {"InfiniBand": "InfiniBand", "Ethernet": "RoCE"}.get(next(iter(layers)) or "", "RDMA") if len(layers) == 1 else "RDMA"
    return f"{len(active)} ACTIVE {word} port{'s' if len(active) != 1 else ''}"


def _follows(cid: str, f: Finding) -> dict:
    return {"code": f.code, "subject": f.subject, "check": cid}


def _join_fallback(fb: Finding, node: NodeView, nccl: dict | None) -> Finding:
    if not node.ran:
        return fb
    hosts, on_sockets = (nccl or {}).get("hosts") or [], (nccl or {}).get("socket_hosts") or []
    if node.hostname and node.hostname in hosts and node.hostname not in on_sockets:
        # The log shows this very host on RDMA: other hosts fell back, the reason is theirs.
        return replace(fb, message=f"{fb.message} This node ({node.hostname}) is not one of them: check those hosts.")
    data = {**fb.data, "log_message": fb.message, "active_ports": [p for p, _ in node.active]}
    if node.active:
        head = f"NCCL fell back to sockets although this node has {_ports_text(node.active)}"
        hit = _pick(node.problems, _FALLBACK_REASONS)
        if hit is None:
            return replace(
                fb,
                message=f"{head}, and the checks of this node found no reason for it (IB enabled, uverbs devices present, "
                "libibverbs and its provider installed): the job's pod may not be the one checked; run `rdmadoctor "
                f"diagnose LOG --live` inside it. The log: {fb.message}",
                data=data,
            )
    else:
        head = "NCCL fell back to sockets: this node has no ACTIVE RDMA port"
        hit = _pick(node.problems, _NO_PORT_REASONS)
        if hit is None:
            return replace(fb, message=f"{head}. The log: {fb.message}", data=data)
    cid, why = hit
    data["follows"] = _follows(cid, why)
    return replace(
        fb,
        message=f"{head}: {why.message}",
        remedy=why.remedy or fb.remedy,
        pod=why.pod or fb.pod,
        cause=why.code,
        data=data,
    )


def _quoted(f: Finding) -> str:
    return " ".join([f.message] + [str(e.get("text", "")) for e in f.data.get("evidence") or ()])


def _join(findings: list[Finding], pasted: list[Finding], node: NodeView, nccl: dict | None = None) -> list[Finding]:
    problems = tuple(("logs.diagnose", f) for f in pasted if f.severity in (ERROR, WARNING)) + node.problems
    out = []
    for f in findings:
        if f.code == NCCL_SOCKET_FALLBACK.code:
            f = _join_fallback(f, node, nccl)
        elif f.code in _NODE_CAUSES and not f.cause:
            for code, words in _NODE_CAUSES[f.code]:
                hit = next(((cid, p) for cid, p in problems if p.code == code), None)
                if hit is not None and (words is None or words in _quoted(f)):
                    f = replace(f, cause=code, data={**f.data, "follows": _follows(*hit)})
                    break
        out.append(f)
    return out
