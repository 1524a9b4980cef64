"""Run checks: needs, probe, judge; one check's failure never stops the others."""

from __future__ import annotations

import time

from rdmadoctor.core.record import field, record

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any, Callable

from rdmadoctor.core.model import SEVERITY_STATUS, SKIP, UNKNOWN, Check, CheckResult, Finding, worst
from rdmadoctor.engine import report
from rdmadoctor.host import Host


class ProbeUnknown(Exception):
    """Raised by a probe that cannot establish its facts at all (tool hung, no source).

    The check's status becomes ``unknown`` with this message as the reason.
    """


@record(frozen=False)
class Context:
    host: Host
    expect: dict[str, Any]
    results: dict[str, CheckResult] = field(default_factory=dict)
    # Every check of this run by id (run() fills it): what the report needs of each (inventory, codes).
    checks: dict[str, Check] = field(default_factory=dict)
    # Every check loaded, selected for this run or not (run() fills it): logs.diagnose judges a pasted
    # output with the checks that declare it (Check.pastes), a plugin's among them, under --only logs too.
    loaded: tuple[Check, ...] = ()
    _memo: dict[Any, Any] = field(default_factory=dict)
    # Log files given on the command line (`rdmadoctor diagnose LOG`), "-" for stdin: the
    # logs.diagnose check reads them along with a bundle's logs/.
    logs: tuple[str, ...] = ()
    # Those logs already read (rdmadoctor.logs.Diagnosis), when the caller read them first.
    log_diagnosis: Any = None
    # The ports' counter history (rdmadoctor.core.counters.CounterHistory) the ib.counters check
    # adds its sample to and judges: the agent's, kept across cycles, or check --sample's; None: none.
    counters: Any = None

    def partial_report(self) -> dict:
        """The report of the checks that ran so far, as :func:`report.build` makes it.

        A check that runs ``after=("*",)`` (node.labels) reads the whole run through this,
        labels included, without importing the engine.
        """
        return report.build(list(self.results.values()), self.checks, self.host, self.expect)

    def known(self, probe: Callable[["Context"], Any]) -> tuple[bool, Any]:
        """(True, facts) when ``probe`` already ran through :meth:`get` and returned; else (False, None)."""
        ok, value = self._memo.get(probe, (False, None))
        return (True, value) if ok else (False, None)

    def get(self, probe: Callable[["Context"], Any]) -> Any:
        """The facts of a shared probe, computed once per run (devices, PCI tree, ...).

        A shared probe that raised raises again for every caller, without being re-run.
        """
        if probe not in self._memo:
            try:
                self._memo[probe] = (True, probe(self))
            except Exception as e:  # noqa: BLE001 - kept and re-raised per caller
                self._memo[probe] = (False, e)
        ok, value = self._memo[probe]
        if not ok:
            raise value
        return value


EVERY = "*"  # in ``after``: after every other check, third-party ones included


def order_checks(checks: list[Check]) -> list[Check]:
    """Keep the given order, but run a check after the ones it names in ``after``.

    A check whose ``after`` holds ``"*"`` runs after every check that does not; among such
    checks the given order and their named ``after`` hold. A check cannot run after a ``"*"``
    one (it would have to be both earlier and later): that name is passed over.
    """
    last = [c for c in checks if EVERY in c.after]
    first = [c for c in checks if EVERY not in c.after]
    out: list[Check] = []
    for group in (first, last):
        by_id = {c.id: c for c in group}
        done: set[str] = set()

        def visit(c: Check, stack: tuple[str, ...]) -> None:
            if c.id in done or c.id in stack:
                return
            for dep in c.after:
                if dep in by_id:
                    visit(by_id[dep], stack + (c.id,))
            done.add(c.id)
            out.append(c)

        for c in group:
            visit(c, ())
    return out


def _describe(e: BaseException) -> str:
    if isinstance(e, ProbeUnknown):
        return str(e)
    return f"internal error {type(e).__name__}: {e} (please report this with `rdmadoctor collect`)"


def run_check(check: Check, ctx: Context) -> CheckResult:
    start = time.perf_counter()
    res = CheckResult(check.id, check.title, SKIP)
    try:
        for need in check.needs:
            why = need.test(ctx)
            if why:
                res.reason = why
                # What its needs already established still goes into the inventory: a GPU that was
                # seen is listed when gpu.topology skips for want of an HCA (the report lists what
                # was seen, whatever a check decided). Nothing is probed for it.
                if check.inventory is not None:
                    res.facts = ctx.known(check.probe)[1]
                return res
        # A need that read the check's own probe (through ctx.get) already has its facts.
        seen, facts = ctx.known(check.probe)
        if not seen:
            facts = check.probe(ctx)
        res.facts = facts
        findings = list(check.judge(facts, ctx.expect))
        for f in findings:
            if not isinstance(f, Finding):
                raise TypeError(f"judge returned {type(f).__name__}, not a Finding")
        res.findings = findings
        res.status = worst([SEVERITY_STATUS.get(f.severity, UNKNOWN) for f in findings])
        unknown = [f for f in findings if f.severity == UNKNOWN]
        if res.status == UNKNOWN and unknown:
            res.reason = unknown[0].message
    except Exception as e:  # noqa: BLE001 - bad input stays inside its check
        res.status = UNKNOWN
        res.reason = _describe(e)
    finally:
        res.seconds = time.perf_counter() - start
    return res


POD_SCOPE_REASON = "judges the container that runs it, not the node; `rdmadoctor preflight` judges it in the job's pods"


def select(
    checks: list[Check],
    only: list[str] | None = None,
    skip: list[str] | None = None,
    gate_only: bool = False,
) -> list[Check]:
    """The checks a run takes: ``only`` (all when empty) minus ``skip``; with ``gate_only``,
    only those preflight gates on (``Check.gate``). Given order kept.

    ``plugins.load`` (present only when a plugin failed to load) is always taken: a selection
    cannot make a run whose plugins did not load look complete."""
    from rdmadoctor.engine.registry import PLUGINS_ID

    return [
        c
        for c in checks
        if c.id == PLUGINS_ID
        or (not only or _selected(c.id, only))
        and not (skip and _selected(c.id, skip))
        and (not gate_only or c.gate)
    ]


def run(
    checks: list[Check],
    ctx: Context,
    only: list[str] | None = None,
    skip: list[str] | None = None,
    scope: str = "all",
    gate_only: bool = False,
) -> list[CheckResult]:
    """Run the selected checks in dependency order. ``scope="node"`` skips pod-scope checks."""
    results: list[CheckResult] = []
    chosen = select(checks, only, skip, gate_only)
    ctx.checks.update((c.id, c) for c in chosen)
    ctx.loaded = tuple(checks)
    for check in order_checks(chosen):
        if scope == "node" and getattr(check, "scope", "node") == "pod":
            r = CheckResult(check.id, check.title, SKIP, reason=POD_SCOPE_REASON)
            ctx.results[check.id] = r
            results.append(r)
            continue
        r = run_check(check, ctx)
        ctx.results[check.id] = r
        results.append(r)
    return results


def _selected(check_id: str, patterns: list[str]) -> bool:
    """``ib`` selects every ``ib.*`` check; ``ib.ports`` selects one."""
    return any(check_id == p or check_id.startswith(p + ".") for p in patterns)


def overall(results: list[CheckResult]) -> str:
    return worst([r.status for r in results])
