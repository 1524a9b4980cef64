"""Rank 0's judgement: the members' facts against the majority -> the gang's verdict.

Pure functions of what the members sent: no sockets here, so the tests give members as data.
What is compared, and what a difference does to NCCL, is one table (:data:`FIELDS`).
"""

from __future__ import annotations

import json
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from rdmadoctor.core.codes.gang import (
    GANG_BANDWIDTH_UNMEASURED,
    GANG_MEMBER_MISSING,
    GANG_MEMBER_NO_GO,
    GANG_MEMBER_SLOW,
    GANG_MEMBER_UNKNOWN,
    GANG_MISMATCH_HANG,
    GANG_MISMATCH_SLOW,
    GANG_PROTOCOL,
    GANG_REFUSED,
    GANG_UNREACHABLE,
)
from rdmadoctor.core.model import Code
from rdmadoctor.core.words import count

GO, NO_GO, UNKNOWN_VERDICT = "go", "no-go", "unknown"  # preflight's words (preflight.gate)
HANG, SLOW = "hang", "slow"


class Field:
    """One compared fact: what a member that differs does to the job, and the fix."""

    def __init__(self, name: str, label: str, effect: str, why: str, fix: str, unset_is_value: bool = False,
                 slurm_fix: str = "", vouched_by: tuple[str, ...] = ()):
        self.name = name
        self.label = label
        self.effect = effect  # HANG: NCCL hangs, fails or falls back (NO-GO); SLOW: the gang crawls (a warning)
        self.why = why
        self.fix = fix
        self.slurm_fix = slurm_fix or fix  # the fix in Slurm's words, where they differ (features, not labels)
        # An NCCL_* setting that is unset differs from one that is set; a hardware fact that could
        # not be read (None) is left out, never taken for a difference.
        self.unset_is_value = unset_is_value
        # The expectations by which a node's own checks judge this fact: with one of them set, a
        # healthy node has it as its pool expects, so `slurm health` may resume a node the gang
        # drained for it (rdmadoctor.slurm.health.gang_release). Empty: only a person can vouch.
        self.vouched_by = vouched_by


_ENV_FIX = "give every member the same value (the job's env: one place in the PyTorchJob/MPIJob spec, or `mpirun -x`)"
FIELDS: tuple[Field, ...] = (
    Field("transport", "transport", HANG,
          "a member that trains over TCP sockets among members on RDMA: NCCL cannot connect the two and "
          "hangs at init (NVIDIA/nccl#234)",
          "fix that member's own RDMA problems (its own preflight lists them), or exclude its node"),
    Field("link_layer", "link layer", HANG,
          "InfiniBand and Ethernet (RoCE) ports are different fabrics: NCCL's IB transport cannot connect them",
          "run the job on one fabric: exclude the odd node, or select nodes by rdmadoctor.io/link-layer",
          slurm_fix="run the job on one fabric: exclude the odd node, or select nodes by feature "
                    "(`sbatch --constraint=ib`, kept by `rdmadoctor slurm health --features`)",
          vouched_by=("link_layer", "rdma_transport")),
    Field("subnet_prefix", "IB subnet prefix", HANG,
          "two IB subnets (two fabrics, two subnet managers): the members cannot reach each other over IB",
          "run the job within one fabric: exclude the odd node, or label nodes by fabric and select on it"),
    Field("roce_gid_index", "RoCE GID index", HANG,
          "a GID of another type or address family on one member: QP setup fails (ibv_modify_qp to RTR) or "
          "hangs", "set NCCL_IB_GID_INDEX to the RoCE v2 IPv4 GID on every member (`show_gids`), alike"),
    Field("roce_version", "RoCE version", HANG,
          "RoCE v1 and v2 do not interoperate: the connection never completes",
          "use RoCE v2 GIDs everywhere (NCCL_IB_GID_INDEX, NCCL_IB_ROCE_VERSION_NUM=2)"),
    Field("nccl_version", "NCCL version", HANG,
          "NCCL compares versions at init: 'Mismatched NCCL version detected' and ncclInvalidUsage",
          "use one training image for every member (one tag, or a digest)"),
    Field("NCCL_IB_DISABLE", "NCCL_IB_DISABLE", HANG,
          "members with IB disabled use sockets while the others use IB: init hangs", _ENV_FIX, True),
    Field("NCCL_NET", "NCCL_NET", HANG, "members pick different network transports: init hangs", _ENV_FIX, True),
    Field("NCCL_NET_PLUGIN", "NCCL_NET_PLUGIN", HANG,
          "a net plugin on some members only: they speak another transport", _ENV_FIX, True),
    Field("NCCL_PROTO", "NCCL_PROTO", HANG,
          "ranks must pick the same protocol for a collective; NCCL does not check it across ranks: hang or "
          "corrupt results", _ENV_FIX, True),
    Field("NCCL_ALGO", "NCCL_ALGO", HANG,
          "ranks must pick the same algorithm for a collective; NCCL does not check it across ranks: hang",
          _ENV_FIX, True),
    Field("NCCL_SOCKET_FAMILY", "NCCL_SOCKET_FAMILY", HANG,
          "IPv4 and IPv6 bootstrap sockets cannot reach each other", _ENV_FIX, True),
    Field("NCCL_COLLNET_ENABLE", "NCCL_COLLNET_ENABLE", HANG,
          "CollNet (SHARP) on some ranks only: the collective's algorithm differs", _ENV_FIX, True),
    Field("NCCL_NVLS_ENABLE", "NCCL_NVLS_ENABLE", HANG,
          "NVLS on some ranks only: the collective's algorithm differs", _ENV_FIX, True),
    Field("NCCL_IB_TC", "NCCL_IB_TC", SLOW,
          "another traffic class: that member's traffic lands in another switch queue (no PFC/ECN there)",
          _ENV_FIX, True),
    Field("NCCL_IB_SL", "NCCL_IB_SL", SLOW, "another service level: another virtual lane", _ENV_FIX, True),
    Field("NCCL_CROSS_NIC", "NCCL_CROSS_NIC", SLOW, "rings cross rails on some members only", _ENV_FIX, True),
    Field("NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_LEVEL", SLOW,
          "GPUDirect RDMA used on some members only: the others copy through host memory", _ENV_FIX, True),
    Field("active_ports", "ACTIVE ports", SLOW,
          "fewer rails on one member: every ring goes through its few ports", "bring the missing ports up "
          "(its own preflight names them) or exclude the node"),
    Field("rates_gbps", "port rates", SLOW,
          "a slower rail on one member: every collective runs at its speed", "look at the slow port "
          "(`ibstat`, the cable, the switch port), or exclude the node"),
    Field("nccl_ib_hca_ports", "ports NCCL_IB_HCA keeps", SLOW,
          "NCCL_IB_HCA keeps fewer ports on one member: fewer rails there", _ENV_FIX),
    Field("mtu", "active MTU", SLOW,
          "the connection runs at the smaller MTU of the two ends", "set one MTU on every port and switch"),
    Field("gpudirect", "GPUDirect RDMA", SLOW,
          "without GPUDirect RDMA a member copies every message through host memory",
          "load nvidia_peermem (or use DMA-BUF) on that node; its own preflight says why it is off"),
)
FIELD = {f.name: f for f in FIELDS}


# GANG_MEMBER_SLOW's fix without its exclusion, which the finding gives in the engine's words.
_LOOK_AT_LINKS = "Look at that node's links (`ibstat`, `ethtool`, the cable and switch port, its NIC's PCIe link)"


def gang_codes() -> tuple[Code, ...]:
    return (GANG_MISMATCH_HANG, GANG_MISMATCH_SLOW, GANG_MEMBER_NO_GO, GANG_MEMBER_UNKNOWN, GANG_MEMBER_MISSING,
            GANG_MEMBER_SLOW, GANG_UNREACHABLE, GANG_REFUSED, GANG_PROTOCOL, GANG_BANDWIDTH_UNMEASURED)


_PLAIN_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,251}[A-Za-z0-9])?")
# YAML 1.1 reads these plain words as booleans or null, and a number as a number.
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}


def display(text: Any) -> str:
    """A name or value a member sent, for a line of text: as it is when it is printable, else in
    JSON quotes with every control character escaped (a newline cannot start a forged line)."""
    s = str(text)
    return s if s.isprintable() else json.dumps(s)


def plain_name(name: str) -> bool:
    """A host name that YAML, a shell and Slurm all read as itself, unquoted."""
    return bool(_PLAIN_NAME.fullmatch(name))


def shown(value: Any, field: Field | None = None) -> str:
    if value is None:
        return "unset" if field is not None and field.unset_is_value else "unknown"
    if value is True:
        return "yes"
    if value is False:
        return "no"
    return display(value)


def _who(m: dict[str, Any]) -> str:
    return f"rank {m['rank']} on {display(m.get('host') or '?')}"


def mismatches(members: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each field where some member differs from the majority: {field, effect, majority, members}.

    The majority is the most common value; a tie goes to the value of the lowest rank (rank 0's side
    is the one the others met). ``members`` lists the odd ones, lowest rank first.
    """
    out = []
    ordered = sorted(members, key=lambda m: m["rank"])
    for f in FIELDS:
        groups: dict[str, list[dict[str, Any]]] = {}
        values: dict[str, Any] = {}
        for m in ordered:
            value = (m.get("facts") or {}).get(f.name)
            if value is None and not f.unset_is_value:
                continue
            key = json.dumps(value, sort_keys=True)
            groups.setdefault(key, []).append(m)
            values[key] = value
        if len(groups) < 2:
            continue
        majority = max(groups, key=lambda k: (len(groups[k]), -groups[k][0]["rank"]))
        odd = sorted((m for k, ms in groups.items() if k != majority for m in ms), key=lambda m: m["rank"])
        out.append({
            "field": f.name,
            "effect": f.effect,
            "majority": values[majority],
            "majority_count": len(groups[majority]),
            "members": [{"rank": m["rank"], "host": m.get("host"), "value": m["facts"].get(f.name)} for m in odd],
        })
    return out


KUBERNETES, SLURM, ANY_ENGINE = "kubernetes", "slurm", "unknown"
ENGINES = (KUBERNETES, SLURM, ANY_ENGINE)
# The first line of the Slurm remedy that rdmadoctor's Prolog replaces once it drained the node.
_KEEP_OFF = "Keep every job off it until it is fixed: "


def exclusion(hosts: list[str | None], engine: str = ANY_ENGINE, code: str = "") -> str:
    """How to keep the job off ``hosts``, in the words of the engine the gang runs under
    (:func:`rdmadoctor.gang.membership.engine_of`): a nodeAffinity NotIn on Kubernetes, sbatch's
    --exclude and scontrol's drain under Slurm, both (each labelled) when the engine is not known.
    ``code``: the finding's code, for the drain reason of the scontrol line."""
    names = sorted({h for h in hosts if h})
    if not names:
        return ""
    what = "the node" if len(names) == 1 else f"these {len(names)} nodes"
    if engine == KUBERNETES:
        return f"Exclude {what} from the job: in the pod template\n" + _affinity(names)
    if engine == SLURM:
        return _slurm(names, what, code)
    return (f"Exclude {what} from the job. On Kubernetes, in the pod template:\n" + _affinity(names) + "\n"
            + "Under Slurm: " + _slurm(names, what, code, head=False))


def _affinity(names: list[str]) -> str:
    def yaml_value(name: str) -> str:
        # Plain when YAML reads it back as this string; else a double-quoted scalar (JSON's
        # escapes are YAML's): a name cannot close the list or add a matchExpression.
        if plain_name(name) and name.lower() not in _YAML_WORDS and not _number(name):
            return name
        return json.dumps(name)

    values = ", ".join(yaml_value(n) for n in names)
    return (
        "affinity:\n"
        "  nodeAffinity:\n"
        "    requiredDuringSchedulingIgnoredDuringExecution:\n"
        "      nodeSelectorTerms:\n"
        "      - matchExpressions:\n"
        f"        - {{key: kubernetes.io/hostname, operator: NotIn, values: [{values}]}}"
    )


def _slurm(names: list[str], what: str, code: str, head: bool = True) -> str:
    """sbatch's --exclude for this job; scontrol's drain (a reason of the administrator's own, which
    rdmadoctor never resumes) for every job until the node is fixed, and its resume."""
    shell = [n for n in names if plain_name(n)]
    odd = len(names) - len(shell)
    listed = ",".join(shell) or "NODE"
    lines = [(f"Exclude {what} from the job: " if head else "")
             + f"sbatch --exclude={listed} (or `#SBATCH --exclude={listed}` in the script; srun and salloc take it too)"]
    why = f"{code} gang" if code else "gang preflight"
    lines.append(f'{_KEEP_OFF}scontrol update nodename={listed} state=drain reason="{why}: see the job log"; '
                 f"once fixed: scontrol update nodename={listed} state=resume")
    if odd:
        lines.append(f"({count(odd, 'name')} left out of the shell lines: not a plain host name "
                     "(letters, digits, '.', '-', '_'))")
    return "\n".join(lines)


def excluded(remedy: str) -> list[str]:
    """The nodes a remedy of :func:`exclusion` tells Slurm to exclude (its ``--exclude=`` list)."""
    m = re.search(r"sbatch --exclude=(\S+)", remedy)
    return m.group(1).split(",") if m else []


def drained_note(remedy: str, node: str, reason: str) -> str:
    """``remedy`` once rdmadoctor's Prolog drained ``node`` with ``reason``: the scontrol line that
    tells the reader to drain it says what was done instead (only when the remedy names that node
    alone: with several, the line still serves the others)."""
    gang = reason.split(":", 1)[-1].strip().startswith("GANG_")  # the gang's blame, not the node's own code
    later = ("`rdmadoctor slurm health` resumes it only where the node's own checks vouch for what the gang "
             "blamed: the link layer, with link_layer or rdma_transport set for the partition (docs/slurm.md)" if gang else
             "`rdmadoctor slurm health` also resumes it once the node's own checks pass: the reason is rdmadoctor's")
    note = (f'rdmadoctor drained {node} in its Prolog (reason "{reason}") and Slurm requeues the job onto other '
            f"nodes; once fixed: scontrol update nodename={node} state=resume ({later})")
    out, done = [], False
    for line in remedy.split("\n"):
        if line.startswith(_KEEP_OFF) and f"nodename={node} " in line:
            out.append(note)
            done = True
        else:
            out.append(line)
    if not done:
        out.append(note)
    return "\n".join(out)


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _finding(code: Code, severity: str, subject: str, message: str, remedy: str) -> dict[str, Any]:
    return {"check": "gang", "code": code.code, "severity": severity, "subject": subject, "message": message,
            "remedy": remedy, "pod_fix": None}


def judge(
    members: list[dict[str, Any]],
    size: int,
    *,
    slow: list[dict[str, Any]] | None = None,
    unmeasured: list[dict[str, Any]] | None = None,
    strict: bool = False,
    left: dict[int, str] | None = None,
    engine: str = ANY_ENGINE,
) -> dict[str, Any]:
    """The gang's verdict from the members that arrived (``size`` expected): the ``gang`` JSON section.

    A member's ``verdict`` is its own preflight's; its ``problems`` the codes of its own problems.
    ``left``: the members that joined and then died before the verdict (why, by rank): missing.
    ``engine``: what runs the job (:data:`ENGINES`): the exclusion in each remedy is in its words.
    """
    arrived = sorted(members, key=lambda m: m["rank"])
    ranks = {m["rank"] for m in arrived}
    missing = [r for r in range(size) if r not in ranks]
    found = mismatches(arrived)
    problems: list[dict[str, Any]] = []
    total = len(arrived)
    for r in missing:
        came = ", ".join(f"{m['rank']} {display(m.get('host') or '?')}" for m in arrived) or "none"
        what = (f"{left[r]} (the pod died or was killed)" if left and r in left else
                f"rank {r} never joined the gang")
        problems.append(_finding(
            GANG_MEMBER_MISSING, "error", f"rank {r}",
            f"{what} ({total} of {size} arrived; the ranks and hosts that did: {came}); "
            f"expected all {size} before NCCL starts.",
            GANG_MEMBER_MISSING.fix))
    for mm in found:
        f = FIELD[mm["field"]]
        hang = f.effect == HANG
        odd = mm["members"]
        majority = shown(mm["majority"], f)
        others = mm["majority_count"]
        who = "; ".join(f"{_who(m)}: {f.label} {shown(m['value'], f)}" for m in odd)
        message = (f"{who}; the other {count(others, 'member')} {'has' if others == 1 else 'have'} {majority}: {f.why}. "
                   f"Expected every member alike.")
        code = GANG_MISMATCH_HANG if hang else GANG_MISMATCH_SLOW
        remedy = f"{f.slurm_fix if engine == SLURM else f.fix}.\n{exclusion([m.get('host') for m in odd], engine, code.code)}"
        severity = "error" if hang or strict else "warning"
        problems.append(_finding(code, severity,
                                 f"{f.name}: rank {', '.join(str(m['rank']) for m in odd)}", message, remedy))
    for m in arrived:
        codes = ", ".join(m.get("problems") or []) or "none named"
        if m.get("verdict") == NO_GO:
            problems.append(_finding(
                GANG_MEMBER_NO_GO, "error", _who(m),
                f"{_who(m)}: its own preflight said NO-GO ({codes}); expected GO on every member.",
                f"Its log lists each problem with its fix (`rdmadoctor explain CODE`).\n"
                f"{exclusion([m.get('host')], engine, GANG_MEMBER_NO_GO.code)}"))
        elif m.get("verdict") != GO:
            problems.append(_finding(
                GANG_MEMBER_UNKNOWN, "unknown", _who(m),
                f"{_who(m)}: its own preflight could not decide ({codes}).", GANG_MEMBER_UNKNOWN.fix))
    for s in slow or []:
        problems.append(_finding(
            GANG_MEMBER_SLOW, "error", _who(s),
            f"{_who(s)}: at best {s['gbps']:.3g} Gb/s{' on ' + display(s['rail']) if s.get('rail') else ''} "
            f"({s.get('direction', 'send')}, in both rounds, with two peers) against a gang median of "
            f"{s['median_gbps']:.3g} Gb/s; expected at least {s['share']:g} of the median.",
            f"{_LOOK_AT_LINKS}, or exclude it.\n{exclusion([s.get('host')], engine, GANG_MEMBER_SLOW.code)}"))
    by_error: dict[str, list[str]] = {}
    for u in unmeasured or []:  # one finding per reason: a tool missing everywhere is one line, not 2N
        by_error.setdefault(u["error"], []).append(u["pair"])
    for error, pairs in by_error.items():
        subject = ", ".join(pairs[:4]) + (f" and {len(pairs) - 4} more" if len(pairs) > 4 else "")
        problems.append(_finding(GANG_BANDWIDTH_UNMEASURED, "unknown", subject,
                                 f"{count(len(pairs), 'pair')} not measured: {error}.", GANG_BANDWIDTH_UNMEASURED.fix))
    verdict = GO
    if any(p["severity"] == "unknown" for p in problems):
        verdict = UNKNOWN_VERDICT
    if any(p["severity"] == "error" for p in problems):
        verdict = NO_GO
    return {
        "verdict": verdict,
        "size": size,
        "members": [{"rank": m["rank"], "host": m.get("host"), "verdict": m.get("verdict"),
                     "fingerprint": m.get("digest")} for m in arrived],
        "mismatches": [{k: v for k, v in mm.items() if k in ("field", "majority", "members")} for mm in found],
        "slow": [{k: s[k] for k in ("rank", "host", "gbps", "median_gbps")} for s in slow or []],
        "missing": missing,
        "problems": problems,
    }
