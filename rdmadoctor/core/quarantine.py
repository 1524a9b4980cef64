"""What to do with a node after a verdict: hold it out of scheduling, release it, or leave it.

One pure function, :func:`decide`, of this cycle's verdict, the node's recent history and its
pool's counts, shared by every actuator: ``rdmadoctor slurm health`` / ``slurm prolog`` (a drain
reason through scontrol) and ``agent --quarantine taint`` (a NoSchedule taint through the API).
The actuators only read the world (is the node held by us, how many of its pool are held and
failing), call :func:`decide`, and carry out the one action it returns.

The guardrails are what users of such tools asked for after the fact:

- a window (``quarantine_after`` consecutive problem cycles before a hold, ``release_after``
  consecutive healthy ones before a release): one bad read never drains a node, and a node that
  flaps is not taken in and out every cycle;
- a budget (``quarantine_budget``, a count or a percentage of the pool, at least 1): rdmadoctor
  never holds more than that many nodes of a pool at once (NVSentinel#1663 and #1716, a rule that
  marked every GB300 node of a cluster);
- a storm rule (``storm_share``): when more than that share of the pool fails at once, the cause
  is shared (a switch, a subnet manager, a bad configuration push) and holding nodes fixes nothing,
  so no new node is held;
- an unknown verdict (a check that could not run) neither holds nor releases, and breaks both
  windows;
- only what rdmadoctor set is released: ``History.held`` is true only for a mark the actuator
  found to be its own (a drain reason starting ``rdmadoctor:``, its own taint key).

Kept import-cheap (stdlib only, no typing at run time): the agent imports it on every cycle.
"""

from __future__ import annotations

from rdmadoctor.core.expect import Expect
from rdmadoctor.core.record import record, replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "PROBLEM", "HEALTHY", "UNDECIDED", "HOLD", "RELEASE", "KEEP", "WAIT", "DEFER_BUDGET", "DEFER_STORM", "NONE",
    "EXPECT", "Guardrails", "History", "Pool", "Decision", "decide", "budget_limit", "verdict_of", "GuardError",
]

# A cycle's verdict on the node.
PROBLEM, HEALTHY, UNDECIDED = "problem", "healthy", "unknown"

# Actions. HOLD and RELEASE change the world; the others only say why nothing changed.
HOLD = "hold"                  # mark the node (drain / taint) for its root code
RELEASE = "release"            # remove rdmadoctor's own mark
KEEP = "keep"                  # held, still failing (or not yet healthy long enough): stays held
WAIT = "wait"                  # a window is not complete yet (problem or healthy streak too short)
DEFER_BUDGET = "defer-budget"  # would hold, but the pool's budget is spent
DEFER_STORM = "defer-storm"    # would hold, but too much of the pool fails at once: a shared cause
NONE = "none"                  # healthy and not held, or an unknown verdict: nothing to do
ACTIONS = (HOLD, RELEASE, KEEP, WAIT, DEFER_BUDGET, DEFER_STORM, NONE)

EXPECT = {
    "quarantine_after": Expect(
        3, "int", "cycles", min=1, max=10000, nullable=False,
        doc="consecutive problem verdicts before rdmadoctor holds a node out of scheduling (Slurm drain, "
            "Kubernetes NoSchedule taint); one bad read never does",
    ),
    "release_after": Expect(
        3, "int", "cycles", min=1, max=10000, nullable=False,
        doc="consecutive healthy verdicts (and quiet port counters) before rdmadoctor releases a node it held",
    ),
    "quarantine_budget": Expect(
        "10%", "any", nullable=False, example="2",
        doc="most nodes of a pool (Slurm: partition) rdmadoctor holds at once: a count (2) or a percentage "
            "of the pool ('10%'), never less than 1 for a percentage",
    ),
    "storm_share": Expect(
        0.3, "number", min=0, max=1, nullable=False,
        doc="when more than this share of a pool fails at once (at least 2 nodes), the cause is shared "
            "(a switch, the subnet manager, a configuration push): no new node is held",
    ),
}


class GuardError(ValueError):
    """A guardrail setting that cannot be used (a budget that is neither a count nor a percentage)."""


def budget_limit(spec: Any, pool_size: int) -> int:
    """How many nodes of a pool of ``pool_size`` may be held at once.

    ``spec`` is a count (2, "2") or a percentage ("10%", "12.5%"); a percentage rounds down and is
    never less than 1 (a 10% budget of a 4-node pool still lets one broken node out), a count is
    taken as written (0 turns holding off)."""
    size = max(int(pool_size), 0)
    if isinstance(spec, bool):
        raise GuardError(f"quarantine_budget: {spec!r} is not a count or a percentage; expected e.g. 2 or '10%'")
    if isinstance(spec, int):
        if spec < 0:
            raise GuardError(f"quarantine_budget: {spec} is negative; expected a count >= 0 or a percentage such as '10%'")
        return spec
    if isinstance(spec, float) and spec == spec and spec >= 0 and spec == int(spec):
        return int(spec)
    if isinstance(spec, str):
        text = spec.strip()
        if text.endswith("%"):
            number = text[:-1].strip()
            try:
                share = float(number)
            except ValueError:
                share = -1.0
            if not (0 <= share <= 100) or len(number) > 20:
                raise GuardError(
                    f"quarantine_budget: {spec!r} is not a percentage from 0% to 100%; expected e.g. '10%' or a count such as 2"
                )
            return max(1, int(size * share / 100.0)) if share > 0 else 0
        if text.isdigit() and len(text) <= 9:
            return int(text)
    raise GuardError(f"quarantine_budget: {spec!r} is not a count or a percentage; expected e.g. 2 or '10%'")


@record
class Guardrails:
    quarantine_after: int = 3
    release_after: int = 3
    quarantine_budget: Any = "10%"
    storm_share: float = 0.3

    @classmethod
    def from_expect(cls, expect: dict) -> Guardrails:
        """The guardrails from resolved expectations (profile < config < pool < --set); a budget
        that is neither a count nor a percentage raises GuardError (a usage error)."""
        g = cls(
            quarantine_after=int(expect.get("quarantine_after", 3)),
            release_after=int(expect.get("release_after", 3)),
            quarantine_budget=expect.get("quarantine_budget", "10%"),
            storm_share=float(expect.get("storm_share", 0.3)),
        )
        budget_limit(g.quarantine_budget, 10)  # refuse a bad budget now, not at the first hold
        return g


@record
class History:
    """What an actuator remembers of one node between cycles (a small state file for Slurm, the
    agent's memory on Kubernetes). ``held`` is set by the actuator from the world before each
    decision: true only when the node carries rdmadoctor's own mark."""

    problem_streak: int = 0
    healthy_streak: int = 0
    held: bool = False
    held_code: str = ""

    def to_json(self) -> dict:
        return {
            "problem_streak": self.problem_streak,
            "healthy_streak": self.healthy_streak,
            "held": self.held,
            "held_code": self.held_code,
        }

    @classmethod
    def from_json(cls, data: Any) -> History:
        """Tolerant: a missing, damaged or foreign state is a fresh history (the windows start
        again, which only ever delays an action)."""
        if not isinstance(data, dict):
            return cls()

        def count(key: str) -> int:
            v = data.get(key)
            return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 31 else 0

        code = data.get("held_code")
        return cls(
            problem_streak=count("problem_streak"),
            healthy_streak=count("healthy_streak"),
            held=data.get("held") is True,
            held_code=code[:64] if isinstance(code, str) else "",
        )


@record
class Pool:
    """The pool (Kubernetes: the nodes labelled with its rdmadoctor.io/pool; Slurm: the
    partition) as the actuator counted it just before deciding.

    ``held``: nodes rdmadoctor holds now (this node included when it is held);
    ``failing``: nodes whose latest verdict is a problem (this node included when this cycle's
    verdict is one); ``common_code``: the most common root code among the failing, for the storm
    message."""

    size: int
    held: int = 0
    failing: int = 0
    common_code: str = ""


@record
class Decision:
    action: str
    reason: str
    history: History
    code: str = ""


def _storm(pool: Pool, guard: Guardrails) -> bool:
    # One failing node is never a storm, however small its pool: a shared cause needs two.
    return pool.failing >= 2 and pool.size > 0 and pool.failing > guard.storm_share * pool.size


def decide(
    verdict: str,
    root_code: str,
    history: History,
    pool: Pool,
    guard: Guardrails,
    *,
    counters_quiet: bool = True,
) -> Decision:
    """The action for this cycle and the history to keep for the next.

    ``verdict`` is PROBLEM, HEALTHY or UNDECIDED (:func:`verdict_of` reads it from a report);
    ``root_code`` the problem's root code (empty when healthy); ``counters_quiet`` false while the
    ports' error counters are still inside their recovery window (a release waits for it)."""
    if verdict == PROBLEM:
        h = replace(history, problem_streak=history.problem_streak + 1, healthy_streak=0)
        if h.held:
            return Decision(KEEP, f"still failing ({root_code or 'a problem'}); held since {h.held_code or 'earlier'}", h, root_code)
        if h.problem_streak < guard.quarantine_after:
            return Decision(
                WAIT, f"problem {h.problem_streak} of {guard.quarantine_after} consecutive cycles before a hold", h, root_code,
            )
        if _storm(pool, guard):
            common = f", most often {pool.common_code}" if pool.common_code else ""
            return Decision(
                DEFER_STORM,
                f"{pool.failing} of {pool.size} nodes of the pool fail at once (more than {guard.storm_share:.0%}{common}): "
                f"a shared cause (switch, subnet manager, configuration push) that holding nodes does not fix; no new node is held",
                h, root_code,
            )
        limit = budget_limit(guard.quarantine_budget, pool.size)
        if pool.held >= limit:
            return Decision(
                DEFER_BUDGET,
                f"the pool's budget is spent: {pool.held} of {pool.size} nodes held, at most {limit} "
                f"(quarantine_budget {guard.quarantine_budget}); this node waits for a place",
                h, root_code,
            )
        return Decision(
            HOLD, f"{root_code or 'a problem'} for {h.problem_streak} consecutive cycles", replace(h, held=True, held_code=root_code),
            root_code,
        )
    if verdict == HEALTHY:
        h = replace(history, healthy_streak=history.healthy_streak + 1, problem_streak=0)
        if not h.held:
            return Decision(NONE, "healthy", h)
        if h.healthy_streak < guard.release_after:
            return Decision(
                WAIT, f"healthy {h.healthy_streak} of {guard.release_after} consecutive cycles before the release", h,
            )
        if not counters_quiet:
            return Decision(WAIT, "healthy, but the ports' error counters are still inside their recovery window", h)
        return Decision(
            RELEASE, f"healthy for {h.healthy_streak} consecutive cycles (held for {h.held_code or 'a problem'})",
            replace(h, held=False, held_code=""),
        )
    # Unknown (a check could not run) or anything unrecognised: say nothing about the node, and
    # break both windows, so a hold or a release always rests on consecutive decided verdicts.
    h = replace(history, problem_streak=0, healthy_streak=0)
    return Decision(NONE, "the verdict is unknown (a check could not decide): no hold and no release", h)


def verdict_of(report: dict, strict: bool = False) -> tuple[str, str, list[str]]:
    """(verdict, root code, problem codes) of a ``rdmadoctor.report/v1`` dict.

    fail is a problem, pass a healthy node, warn healthy unless ``strict``; unknown, and a report
    that is not one, are UNDECIDED. The root code is the first error's (warning's, when only
    warnings) code that no other finding causes, in report order."""
    status = report.get("status") if isinstance(report, dict) else None
    errors: list[str] = []
    warnings: list[str] = []
    checks = report.get("checks") if isinstance(report, dict) else None
    for c in checks if isinstance(checks, list) else ():
        for f in c.get("findings", ()) if isinstance(c, dict) and isinstance(c.get("findings"), list) else ():
            if not isinstance(f, dict) or not isinstance(f.get("code"), str) or f.get("cause"):
                continue
            sev = f.get("severity")
            into = errors if sev == "error" else warnings if sev == "warning" else None
            if into is not None and f["code"] not in into:
                into.append(f["code"])
    if status == "fail":
        return PROBLEM, (errors or warnings or ["UNKNOWN_PROBLEM"])[0], errors + [w for w in warnings if w not in errors]
    if status == "warn" and strict:
        return PROBLEM, (warnings or ["UNKNOWN_PROBLEM"])[0], warnings
    if status in ("pass", "warn"):
        return HEALTHY, "", []
    return UNDECIDED, "", []
