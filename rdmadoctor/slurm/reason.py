"""The drain reasons rdmadoctor writes, and how it knows its own.

Every reason starts with ``rdmadoctor:`` and then the root code, so ``sinfo -R`` (which cuts the
reason at 20 columns by default) still shows whose drain it is and what to look up
(``rdmadoctor explain CODE``): ``rdmadoctor: IB_PORT_DOWN mlx5_3/1 (+2 more)``. A drain whose
reason starts otherwise (an administrator's, NHC's, Slurm's own "Prolog error") is never resumed
nor rewritten.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PREFIX = "rdmadoctor:"
# Slurm stores any length, but a reason is read in `sinfo -R` and in alerts: one short line.
MAX_REASON = 120


def is_ours(reason: str | None) -> bool:
    return bool(reason) and str(reason).strip().startswith(PREFIX)


def code_of(reason: str | None) -> str:
    """The code an rdmadoctor reason names first ("" for another's reason)."""
    if not is_ours(reason):
        return ""
    words = str(reason).strip()[len(PREFIX):].split()
    return words[0] if words else ""


def clean(text: str) -> str:
    """One line of printable ASCII: no newline, no control character, no quote that a shell
    script around scontrol could trip on."""
    out = "".join(c if 32 <= ord(c) < 127 and c not in "\"'`\\" else " " for c in str(text))
    return " ".join(out.split())


def bounded(text: str, limit: int = MAX_REASON) -> str:
    text = clean(text)
    if len(text) <= limit:
        return text
    return text[: limit - 3].rstrip() + "..."


def problems(report: dict[str, Any], strict: bool = False, unknown: bool = False) -> list[dict[str, Any]]:
    """The report's root findings that make the node a problem (errors; warnings with ``strict``;
    could-not-decide findings with ``unknown``), in report order; a finding another causes is left
    under its cause, as the text report shows it."""
    sevs = {"error"} | ({"warning"} if strict else set()) | ({"unknown"} if unknown else set())
    out = []
    for c in report.get("checks") or ():
        if not isinstance(c, dict):
            continue
        for f in c.get("findings") or ():
            if isinstance(f, dict) and not f.get("cause") and f.get("severity") in sevs and isinstance(f.get("code"), str):
                out.append(f)
        if unknown and c.get("status") == "unknown" and not any(
                isinstance(f, dict) and f.get("severity") == "unknown" for f in c.get("findings") or ()):
            out.append({"code": "CHECK_UNKNOWN", "subject": c.get("id"), "severity": "unknown"})
    return out


def node_reason(report: dict[str, Any], root_code: str, strict: bool = False, unknown: bool = False) -> str:
    """``rdmadoctor: IB_PORT_DOWN mlx5_3/1 (+2 more)``: the root code first, its subject, how many
    other problems the report names."""
    found = problems(report, strict=strict, unknown=unknown)
    root = next((f for f in found if f.get("code") == root_code), found[0] if found else None)
    code = root_code or (root.get("code") if root else "") or "UNKNOWN_PROBLEM"
    subject = clean(str(root.get("subject") or "")) if root else ""
    more = len(found) - 1 if root else 0
    text = f"{PREFIX} {code}" + (f" {subject}" if subject else "") + (f" (+{more} more)" if more > 0 else "")
    return bounded(text)
