"""Node Problem Detector-style NodeConditions from a report (``--conditions``). Pure functions.

Three conditions, ``status: "True"`` meaning there IS a problem (NPD's convention, so
``kubectl describe node`` and NPD-aware remediation read them the same way):

- ``RDMALinkProblem``: devices and ports (checks declaring ``condition=LINK``: ib.*, roce.config)
- ``RDMAConfigProblem``: the software around them (``CONFIG``: verbs, limits, shm, kernel
  modules, NCCL, PCIe)
- ``GPUDirectRDMAProblem``: GPU<->NIC paths (``GPUDIRECT``: gpu.topology, and the codes that
  say so themselves, GDR_PEERMEM_MISSING and GDR_DMABUF of kernel.modules)

Each check declares the condition it feeds (``Check.condition``) and a code may override it
(``Code.condition``); the report carries both (``checks[].condition``, ``findings[].condition``),
so a third-party check that declares one feeds it too, and no list here needs keeping in step.
A check with no condition (node.labels: it judges the labels this very publisher writes, so it
would flap with them) feeds none.

An error or warning finding makes a condition True; otherwise an unknown check makes it
Unknown; otherwise False. The message names codes and subjects only, never measured values, so
an unchanged node gives an unchanged condition (and no write).

:func:`transitions` turns a change of these conditions into the core/v1 Events that go with it
(Warning when a problem appears, Normal when it clears), as Node Problem Detector does.
"""

from __future__ import annotations

from rdmadoctor.core import model as M
from rdmadoctor.core.report import Check, Report, read

LINK = "RDMALinkProblem"
CONFIG = "RDMAConfigProblem"
GPUDIRECT = "GPUDirectRDMAProblem"
TYPES = (LINK, CONFIG, GPUDIRECT)

# Check.condition / Code.condition (rdmadoctor.core.model) -> the condition type.
_TYPE_OF = {M.LINK: LINK, M.CONFIG: CONFIG, M.GPUDIRECT: GPUDIRECT}

_PROBLEM = ("error", "warning")
_SEVERITY_ORDER = {"error": 0, "warning": 1, "unknown": 2}
# Upper-case words kept whole in a reason (IB_PORT_DOWN -> IBPortDown).
_ACRONYMS = {"IB", "GPU", "NIC", "PCIE", "PCI", "NCCL", "GDR", "HCA", "MTU", "GID", "IPC", "CAP", "ACS", "SM", "ABI", "ENV", "DMABUF", "RDMA", "IP"}
_SPECIAL = {"ROCE": "RoCE", "PCIE": "PCIe", "DMABUF": "DMABuf", "SHM": "Shm"}
MAX_MESSAGE = 1024


def reason_of(code: str) -> str:
    """A CamelCase reason from a finding code: IB_PORT_DOWN -> IBPortDown."""
    words = []
    for w in code.split("_"):
        if not w:
            continue
        if w in _SPECIAL:
            words.append(_SPECIAL[w])
        elif w in _ACRONYMS:
            words.append(w)
        else:
            words.append(w[:1].upper() + w[1:].lower())
    return "".join(words) or "Unknown"


_declared: dict[str, tuple[str | None, dict[str, str]]] | None = None


def _declarations() -> dict[str, tuple[str | None, dict[str, str]]]:
    """{check id: (its condition, {code: the code's own condition})} of the installed checks."""
    global _declared
    if _declared is None:
        from rdmadoctor.engine.registry import load_checks

        checks, _ = load_checks()
        _declared = {
            c.id: (c.condition, {k.code: k.condition for k in c.codes if k.condition is not None}) for c in checks
        }
    return _declared


def _check_condition(check: Check) -> tuple[str | None, dict[str, str]]:
    """(the check's condition, codes that override it), from the report.

    A report without ``checks[].condition`` (written by hand, or before reports carried it) is
    read with the declarations of the installed checks, looked up by id.
    """
    if check.declares_condition:
        return check.condition, {}
    return _declarations().get(check.id, (None, {}))


def _group(condition: object) -> str | None:
    return _TYPE_OF.get(condition) if isinstance(condition, str) else None


def compute(report: Report | dict) -> list[dict]:
    """[{type, status, reason, message}] for the three condition types, in TYPES order."""
    problems: dict[str, list[tuple[int, int, str, str]]] = {t: [] for t in TYPES}
    unknown: dict[str, list[str]] = {t: [] for t in TYPES}
    ran: dict[str, int] = {t: 0 for t in TYPES}
    order = 0
    for check in read(report).checks:
        cid = check.id
        status = check.status
        if status == "skip":
            continue
        declared, overrides = _check_condition(check)
        base = _group(declared)
        touched = set()
        for f in check.findings:
            code = f.code
            group = _group(f.condition or overrides.get(code) or declared)
            if group is None:
                continue
            touched.add(group)
            sev = f.severity
            if sev in _PROBLEM:
                order += 1
                problems[group].append((_SEVERITY_ORDER[sev], order, code, f.subject))
            elif sev == "unknown":
                unknown[group].append(code)
        if base is not None:
            ran[base] += 1
            touched.add(base)
        if status == "unknown":
            for group in touched or ({base} if base else set()):
                if not problems[group]:
                    unknown[group].append(cid)
    out = []
    for t in TYPES:
        if problems[t]:
            found = sorted(problems[t])
            first_code = found[0][2]
            by_code: dict[str, list[str]] = {}
            for _, _, code, subject in found:
                subs = by_code.setdefault(code, [])
                if subject and subject not in subs:
                    subs.append(subject)
            parts = [f"{c} ({', '.join(s)})" if s else c for c, s in by_code.items()]
            message = "; ".join(parts) + f". Fix: rdmadoctor explain {first_code}"
            out.append(_cond(t, "True", reason_of(first_code), message))
        elif unknown[t]:
            names = ", ".join(dict.fromkeys(unknown[t]))
            out.append(_cond(t, "Unknown", "CheckUnknown", f"rdmadoctor could not establish: {names}"))
        elif ran[t]:
            out.append(_cond(t, "False", "No" + t, "rdmadoctor found no problem"))
        else:
            out.append(_cond(t, "False", "NotApplicable", "no rdmadoctor check of this kind ran on this node"))
    return out


def _cond(ctype: str, status: str, reason: str, message: str) -> dict:
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    return {"type": ctype, "status": status, "reason": reason, "message": message}


def plan(
    wanted: list[dict], current: list[dict], now_iso: str, now: float, heartbeat: float, parse_time
) -> list[dict]:
    """The conditions to send in a strategic merge patch of nodes/status ([] = no write).

    A condition is sent when it is new or its status, reason or message changed; when any of
    ours has a heartbeat older than ``heartbeat`` seconds, all of ours are sent with a fresh
    heartbeat. ``lastTransitionTime`` is set only when the status changes (or the condition is
    new): left out of the patch, the server keeps the old one."""
    cur = {c.get("type"): c for c in current if isinstance(c, dict)}
    changed: list[dict] = []
    stale = False
    for w in wanted:
        old = cur.get(w["type"])
        if old is None or any(old.get(k) != w[k] for k in ("status", "reason", "message")):
            changed.append(w)
            continue
        beat = parse_time(old.get("lastHeartbeatTime") or "")
        if beat is None or now - beat >= heartbeat or beat - now > heartbeat:
            stale = True
    send = wanted if stale else changed
    if not send:
        return []
    out = []
    for w in send:
        old = cur.get(w["type"])
        item = dict(w)
        item["lastHeartbeatTime"] = now_iso
        if old is None or old.get("status") != w["status"] or not old.get("lastTransitionTime"):
            item["lastTransitionTime"] = now_iso
        out.append(item)
    return out


# -- Events on transitions -------------------------------------------------------------------

UNKNOWN_REASON = "CheckUnknown"


def ok_reason(ctype: str) -> str:
    """The reason of the Normal event when a condition clears: RDMALinkProblem -> RDMALinkOK."""
    return (ctype[: -len("Problem")] if ctype.endswith("Problem") else ctype) + "OK"


def transitions(wanted: list[dict], current: list[dict]) -> list[dict]:
    """The events [{condition, type, reason, message}] for going from the node's ``current``
    conditions to ``wanted`` (both as in :func:`compute`), in ``wanted`` order.

    A condition the node does not have yet counts as False, so a first publish of a healthy
    node says nothing and a first publish of a broken one says what is broken; the node's own
    conditions are the memory, so a restarted agent does not repeat itself.

    - to True, or still True with another reason (a different problem now leads): Warning,
      the condition's reason;
    - to Unknown: Warning, ``CheckUnknown`` (rdmadoctor can no longer see this part of the node);
    - to False from True or Unknown: Normal, ``<Type minus Problem>OK`` (RDMALinkOK...).

    A message that changes under an unchanged status and reason (a second port down) makes no
    event: the condition carries it, and an event a minute on a flapping port is noise."""
    cur = {c.get("type"): c for c in current if isinstance(c, dict)}
    out = []
    for w in wanted:
        old = cur.get(w["type"]) or {}
        was = old.get("status") or "False"
        status = w["status"]
        if status == "True":
            if was == "True" and old.get("reason") == w["reason"]:
                continue
            etype, reason = "Warning", w["reason"]
        elif status == "Unknown":
            if was == "Unknown":
                continue
            etype, reason = "Warning", UNKNOWN_REASON
        else:
            if was == "False":
                continue
            etype, reason = "Normal", ok_reason(w["type"])
        out.append({"condition": w["type"], "type": etype, "reason": reason, "message": w["message"]})
    return out
