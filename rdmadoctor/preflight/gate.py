"""The gate: the checks that decide whether *this pod* can train over RDMA -> problems,
warnings, what could not be established, and the pod-spec YAML that fixes the problems.

Which checks gate a pod is declared by each check (``Check.gate``), third-party ones included:
no list here to keep in step with ``checks/``.
"""

from __future__ import annotations

from rdmadoctor.core.report import Report, read
from rdmadoctor.preflight.errors import PreflightError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

GO, NO_GO, UNKNOWN_VERDICT = "go", "no-go", "unknown"
VERDICT_TEXT = {GO: "GO", NO_GO: "NO-GO", UNKNOWN_VERDICT: "UNKNOWN"}
EXIT = {GO: 0, NO_GO: 1, UNKNOWN_VERDICT: 2}


class Gate:
    """The outcome of the checks: verdict, problems, warnings, what could not be established.

    ``report`` is kept as the report dict (preflight's JSON carries it whole); the gate reads it
    as a :class:`Report`. Each problem, warning or unknown item is the finding's own dict plus the
    check's id, as the JSON shows it."""

    def __init__(self, report: Report | dict[str, Any], expect: dict[str, Any], strict: bool):
        self.rep = rep = read(report)
        self.report: dict[str, Any] = rep.raw
        self.strict = strict
        self.problems: list[dict[str, Any]] = []
        self.warnings: list[dict[str, Any]] = []
        self.unknown: list[dict[str, Any]] = []
        self.info: list[dict[str, Any]] = []  # shown with --verbose only
        from rdmadoctor.output.podspec import PodFix
        from rdmadoctor.output.text import folding

        self.fix = PodFix()
        # A finding that only follows from another (MOD_MISSING ib_core under IB_NO_DEVICES) is
        # listed under its cause as `check` shows it, not as a problem of its own with its own fix:
        # one root cause, one verdict in every command (output.text.folding decides for all).
        folds = folding(rep, verbose=False)
        folded = {id(f): cause for cause, fs in folds.items() for f in fs}
        causes: dict[Any, dict[str, Any]] = {}
        for check in rep.checks:
            listed = False
            for f in check.findings:
                if id(f) in folded:
                    listed = True
                    continue
                item = dict(f.raw, check=check.id)
                sev = f.severity
                for key in (f.code, (f.code, f.subject)):
                    if key in folds and key not in causes:
                        causes[key] = item
                if sev == "error" or (sev == "warning" and strict):
                    item["pod_fix"] = self.fix.add(f.pod)
                    self.problems.append(item)
                elif sev == "warning":
                    # Warnings do not block, so their fixes stay out of the YAML of a GO.
                    item["pod_fix"] = None
                    self.warnings.append(item)
                elif sev == "unknown":
                    self.unknown.append(item)
                else:
                    self.info.append(item)
                    continue
                listed = True
            if check.status == "unknown" and not listed:
                # A probe that could not run at all: no finding, only the reason.
                self.unknown.append(
                    {"check": check.id, "code": "UNKNOWN", "severity": "unknown", "subject": check.id,
                     "message": check.reason or "could not be established", "remedy": ""}
                )
        for key, item in causes.items():
            item.setdefault("follow_ons", []).extend(
                {"code": f.code, "subject": f.subject, "severity": f.severity, "message": f.message}
                for f in folds[key]
            )
        code = rep.exit_code
        self.verdict = GO if code == 0 else NO_GO if code == 1 else UNKNOWN_VERDICT


def _matches(cid: str, patterns: list[str]) -> bool:
    return any(cid == p or cid.startswith(p + ".") for p in patterns)


def select_checks(checks: list, only: list[str] | None = None, skip: list[str] | None = None) -> list[str]:
    """The ids preflight runs: every check that declares ``gate=True``, narrowed by ``--only``.

    ``--only`` picks among those (ids or families, like ``check --only``); a check that does not
    gate a pod is refused by name rather than quietly dropped. ``--skip`` is left to the runner,
    but a selection it empties is refused here: a gate that ran nothing must not say GO.
    """
    from rdmadoctor.engine.registry import PLUGINS_ID
    from rdmadoctor.runner import split_ids

    # plugins.load (a plugin that failed to load) always runs; it is not one to choose among.
    gated = [c.id for c in checks if c.gate and c.id != PLUGINS_ID]
    known = [c.id for c in checks]
    only_ids, skip_ids = split_ids(list(only or [])), split_ids(list(skip or []))
    if only and not only_ids:  # `--only "$UNSET"`: a gate on nothing must not become a gate on everything
        raise PreflightError("--only is empty: it names no check", f"give check ids or families, e.g. --only ib,limits; preflight runs {', '.join(gated)}")
    for pat in only_ids + skip_ids:
        if not any(_matches(cid, [pat]) for cid in known):
            raise PreflightError(f"no check matches {pat!r}", "list them with `rdmadoctor list-checks`")
    for pat in only_ids:
        if not any(_matches(cid, [pat]) for cid in gated):
            raise PreflightError(
                f"--only {pat}: not a check preflight gates a pod on",
                f"preflight runs {', '.join(gated)}; `rdmadoctor check --only {pat}` runs the others",
            )
    chosen = [cid for cid in gated if not only_ids or _matches(cid, only_ids)]
    if not [cid for cid in chosen if not _matches(cid, skip_ids)]:
        raise PreflightError(
            "--only/--skip leave no check to run", f"preflight runs {', '.join(gated)}; skip fewer of them"
        )
    return chosen


def gate(request: Any = None, *, scope: str = "all", **fields: Any) -> Gate:
    """Run the gating checks of ``request`` (a :class:`~rdmadoctor.preflight.request.Request`, or
    a library call's keywords: ``gate(example="roce-node")``) in ``scope`` ("node": the Slurm
    Prolog's, the machine only); raises PreflightError (a UsageError) on a bad option or source."""
    from rdmadoctor.engine.registry import load_checks
    from rdmadoctor.preflight.request import Request
    from rdmadoctor.runner import diagnose, options_of

    req = Request.of(request, **fields)
    req.check_overrides()
    timeout = req.timeout
    if timeout is not None and not timeout > 0:
        raise PreflightError(f"--timeout must be a positive number of seconds, got {timeout:g}", "it bounds each tool the checks run, as in `check`; the wait for rank 0 is --master-timeout")
    checks, _ = load_checks()
    diag = diagnose(options_of(req, scope, sets=req.set_items(), only=select_checks(checks, req.only, req.skip)))
    return Gate(diag.report, diag.ctx.expect, bool(req.strict))
