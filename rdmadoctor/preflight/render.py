"""The verdict as text: short and plain, to read well in ``kubectl logs`` (colour only on a terminal)."""

from __future__ import annotations

import os

from rdmadoctor.core.words import count
from rdmadoctor.preflight.gate import GO, NO_GO, VERDICT_TEXT

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from rdmadoctor.preflight.gate import Gate
    from rdmadoctor.preflight.master import Master


def _indent(text: str, pad: str) -> str:
    return "\n".join(pad + line if line.strip() else line for line in text.splitlines())


def _follow_ons(item: dict[str, Any], pad: str) -> list[str]:
    """The findings folded under ``item`` (they follow from it: fixing it fixes them), one line."""
    fs = item.get("follow_ons") or ()
    if not fs:
        return []
    names = ", ".join(f"{f.get('code')} {f.get('subject')}".rstrip() for f in fs)
    return [f"{pad}follow-ons (fixing this fixes them): {names}"]


def tty_colour(stream: Any) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)()) and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def render_text(
    g: Gate | None,
    verdict: str,
    *,
    master: Master | None = None,
    master_note: str = "",
    colour: bool = False,
    verbose: bool = False,
    gang: dict[str, Any] | None = None,
) -> str:
    """``verbose``: also each check's status and the informational findings (as ``check --verbose``)."""
    word = VERDICT_TEXT[verdict]
    if colour:
        word = {GO: "\x1b[1;32m", NO_GO: "\x1b[1;31m"}.get(verdict, "\x1b[1;33m") + word + "\x1b[0m"
    out = [f"rdmadoctor preflight: {word}"]
    if g is not None:
        rep = g.rep
        host = rep.host
        s = rep.summary
        name = host.hostname or host.label or "this host"
        counts = ", ".join(
            f"{s.count(k)} {done}" for k, done in (("pass", "passed"), ("warn", "warned"), ("fail", "failed"),
                                                   ("unknown", "unknown"), ("skip", "skipped")) if s.count(k)
        )
        out.append(
            f"{name} ({host.kind or '?'}, profile {rep.profile or 'generic'}): "
            f"{count(s.checks, 'check')} ({counts or 'none ran'}); "
            f"{count(len(g.problems), 'problem')}, {count(len(g.warnings), 'warning')}"
            + (f", {len(g.unknown)} unknown" if g.unknown else "")
        )
        for i, p in enumerate(g.problems, 1):
            out.append("")
            out.append(f"problem {i}/{len(g.problems)}: {p['code']} {p['subject']} ({p['check']})")
            out.append(_indent(p.get("message", ""), "  "))
            how = p.get("pod_fix")
            remedy = p.get("remedy") or ""
            if how == "full":
                out.append("  fix: the pod-spec YAML below")
            elif how == "part":
                out.append("  fix: the pod-spec YAML below, or:")
                out.append(_indent(remedy, "    "))
            elif remedy:
                out.append("  fix:")
                out.append(_indent(remedy, "    "))
            out += _follow_ons(p, "  ")
        for u in g.unknown:
            out.append("")
            out.append(f"unknown: {u['code']} {u['subject']} ({u['check']})")
            out.append(_indent(u.get("message", ""), "  "))
            out += _follow_ons(u, "  ")
        if g.warnings:
            out.append("")
            out.append("warnings (do not block; --strict makes them problems):")
            for w in g.warnings:
                out.append(f"  {w['code']} {w['subject']}: {w.get('message', '')}")
                out += _follow_ons(w, "    ")
        if verbose:
            out.append("")
            out.append("checks:")
            for c in rep.checks:
                why = f" ({c.reason})" if c.reason and c.status in ("skip", "unknown") else ""
                out.append(f"  {c.status or '?':7} {c.id}{why}")
            for item in g.info:
                out.append(f"  info: {item['code']} {item['subject']} ({item['check']}): {item.get('message', '')}")
        if g.fix and g.problems:
            out.append("")
            out.append(
                "Add to the pod spec (in the training container, and in the init container if "
                "rdmadoctor preflight runs in one: it judges the container it runs in):"
            )
            out.append(_indent(g.fix.yaml().rstrip("\n"), "  "))
    if master is not None:
        out.append("")
        out.append(f"master: {master.endpoint} ({master.host_source}; port from {master.port_source})")
        if master_note:
            out.append(f"  {master_note}")
    if gang is not None and gang.get("role") != "none":
        import os

        from rdmadoctor.preflight.gang import gang_text, member_word

        out.append("")
        out.extend(gang_text(gang, member_word(dict(os.environ))))
    if g is not None and (g.problems or g.unknown):
        codes = sorted({p["code"] for p in g.problems + g.unknown if p["check"] != "master" and p["code"] != "UNKNOWN"})
        if codes:
            out.append("")
            out.append(f"`rdmadoctor explain {codes[0]}` (or any code above) tells more.")
    # Names come from the node and the environment: an escape sequence in one is shown, not obeyed.
    from rdmadoctor.output.text import safe

    return out[0] + "\n" + safe("\n".join(out[1:])) + "\n" if len(out) > 1 else out[0] + "\n"
