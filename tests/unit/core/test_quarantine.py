"""The one decision shared by Slurm's drains and Kubernetes' taints (rdmadoctor.core.quarantine).

Pure function tests and property tests over generated histories of whole pools: never over
budget, never an action on an unknown verdict, no flapping inside the windows, release only
what it set, no new hold in a storm."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rdmadoctor.core import quarantine as Q
from rdmadoctor.core.quarantine import (
    DEFER_BUDGET,
    DEFER_STORM,
    HEALTHY,
    HOLD,
    KEEP,
    NONE,
    PROBLEM,
    RELEASE,
    UNDECIDED,
    WAIT,
    Guardrails,
    History,
    Pool,
    budget_limit,
    decide,
    verdict_of,
)

G = Guardrails(quarantine_after=3, release_after=3, quarantine_budget=2, storm_share=0.3)
POOL = Pool(size=10, held=0, failing=1)


def run(verdicts, guard=G, pool=POOL, history=None):
    h = history or History()
    actions = []
    for v in verdicts:
        d = decide(v, "IB_PORT_DOWN" if v == PROBLEM else "", h, pool, guard)
        actions.append(d.action)
        h = d.history
    return actions, h


def test_hold_only_after_the_window():
    actions, h = run([PROBLEM] * 4)
    assert actions == [WAIT, WAIT, HOLD, KEEP]
    assert h.held and h.held_code == "IB_PORT_DOWN"


def test_release_only_after_the_window_and_quiet_counters():
    _, held = run([PROBLEM] * 3)
    actions, h = run([HEALTHY] * 3, history=held)
    assert actions == [WAIT, WAIT, RELEASE] and not h.held and h.held_code == ""
    d = decide(HEALTHY, "", Q.replace(held, healthy_streak=5), POOL, G, counters_quiet=False)
    assert d.action == WAIT and "counters" in d.reason and d.history.held


def test_unknown_breaks_both_windows_and_never_acts():
    actions, _ = run([PROBLEM, PROBLEM, UNDECIDED, PROBLEM, PROBLEM])
    assert HOLD not in actions and actions[2] == NONE
    _, held = run([PROBLEM] * 3)
    actions, h = run([HEALTHY, HEALTHY, UNDECIDED, HEALTHY, HEALTHY], history=held)
    assert RELEASE not in actions and h.held


def test_budget_and_storm():
    at_budget = Pool(size=10, held=2, failing=3)
    d = decide(PROBLEM, "X", History(problem_streak=2), at_budget, G)
    assert d.action == DEFER_BUDGET and "2 of 10" in d.reason and not d.history.held
    storm = Pool(size=10, held=0, failing=5, common_code="IB_NO_SM")
    d = decide(PROBLEM, "X", History(problem_streak=2), storm, G)
    assert d.action == DEFER_STORM and "IB_NO_SM" in d.reason and "5 of 10" in d.reason
    # exactly the share is not a storm; one failing node never is, even alone in its pool
    assert decide(PROBLEM, "X", History(problem_streak=2), Pool(size=10, failing=3), G).action == HOLD
    assert decide(PROBLEM, "X", History(problem_streak=2), Pool(size=1, failing=1), G).action == HOLD


@pytest.mark.parametrize(
    "spec,size,limit",
    [("10%", 10, 1), ("10%", 4, 1), ("10%", 100, 10), ("25%", 10, 2), (2, 10, 2), ("3", 10, 3), (0, 10, 0), ("0%", 10, 0),
     (2.0, 5, 2)],
)
def test_budget_limit(spec, size, limit):
    assert budget_limit(spec, size) == limit


@pytest.mark.parametrize("spec", ["ten", "110%", "-1%", -1, True, [2], None, "1e9", "%", 2.5])
def test_budget_refused(spec):
    with pytest.raises(Q.GuardError, match="quarantine_budget"):
        budget_limit(spec, 10)


def test_history_round_trip_and_tolerance():
    h = History(problem_streak=2, healthy_streak=0, held=True, held_code="IB_PORT_DOWN")
    assert History.from_json(h.to_json()) == h
    for junk in (None, [], "x", {"problem_streak": "2", "held": "yes"}, {"problem_streak": -3, "held_code": 7}):
        assert History.from_json(junk) == History()


def test_verdict_of_reports():
    def report(status, *findings):
        return {"status": status, "checks": [{"id": "c", "findings": list(findings)}]}

    down = {"code": "IB_PORT_DOWN", "severity": "error"}
    folded = {"code": "NCCL_FALLBACK", "severity": "error", "cause": "IB_PORT_DOWN"}
    warn = {"code": "PCIE_DEGRADED", "severity": "warning"}
    assert verdict_of(report("fail", folded, down, warn)) == (PROBLEM, "IB_PORT_DOWN", ["IB_PORT_DOWN", "PCIE_DEGRADED"])
    assert verdict_of(report("warn", warn)) == (HEALTHY, "", [])
    assert verdict_of(report("warn", warn), strict=True) == (PROBLEM, "PCIE_DEGRADED", ["PCIE_DEGRADED"])
    assert verdict_of(report("pass"))[0] == HEALTHY
    assert verdict_of(report("unknown"))[0] == UNDECIDED
    for junk in (None, [], {"status": 3}, {"checks": "x"}, {"status": "fail", "checks": [None, {"findings": [1]}]}):
        assert verdict_of(junk)[0] in (UNDECIDED, PROBLEM)


def test_declared_as_expectations():
    from rdmadoctor.engine import expectations as E

    spec = E.SPEC
    assert spec["quarantine_after"].default == 3 and spec["storm_share"].default == 0.3
    r = E.resolve(E.BASE, overrides=E.parse_set(["quarantine_budget=2", "release_after=5"]))
    g = Guardrails.from_expect(r)
    assert g.quarantine_budget == 2 and g.release_after == 5
    with pytest.raises(Q.GuardError):
        Guardrails.from_expect({**r, "quarantine_budget": "lots"})


# ---- properties over whole pools ------------------------------------------------------------

verdict = st.sampled_from([PROBLEM, HEALTHY, UNDECIDED])


@settings(max_examples=150, deadline=None)
@given(
    size=st.integers(1, 12),
    after=st.integers(1, 4),
    release=st.integers(1, 4),
    budget=st.one_of(st.integers(0, 4), st.sampled_from(["10%", "25%", "50%"])),
    share=st.sampled_from([0.0, 0.3, 0.5, 1.0]),
    rounds=st.lists(st.lists(verdict, min_size=12, max_size=12), min_size=1, max_size=25),
)
def test_pool_properties(size, after, release, budget, share, rounds):
    guard = Guardrails(quarantine_after=after, release_after=release, quarantine_budget=budget, storm_share=share)
    limit = budget_limit(budget, size)
    hist = [History() for _ in range(size)]
    seen: list[list[tuple[str, str]]] = [[] for _ in range(size)]  # (verdict, action) per node
    for r in rounds:
        verdicts = r[:size]
        failing = sum(v == PROBLEM for v in verdicts)
        for i, v in enumerate(verdicts):
            pool = Pool(size=size, held=sum(h.held for h in hist), failing=failing)
            before = hist[i]
            d = decide(v, "CODE" if v == PROBLEM else "", before, pool, guard)
            hist[i] = d.history
            seen[i].append((v, d.action))
            # never an action on an unknown verdict
            if v == UNDECIDED:
                assert d.action == NONE and d.history.held == before.held
            # release only what it set; hold only what is not held
            if d.action == RELEASE:
                assert before.held and not d.history.held
            if d.action == HOLD:
                assert not before.held and d.history.held
                # never in a storm, never over budget
                assert not (failing >= 2 and failing > share * size)
                assert pool.held < limit
            assert d.action in Q.ACTIONS
            # the history's mark changes only by HOLD or RELEASE
            assert d.history.held == before.held or d.action in (HOLD, RELEASE)
        assert sum(h.held for h in hist) <= limit
    # no flapping: a hold rests on `after` problems in a row, a release on `release` healthy ones
    for events in seen:
        for k, (_, action) in enumerate(events):
            if action == HOLD:
                assert k + 1 >= after and all(v == PROBLEM for v, _ in events[k + 1 - after : k + 1])
            if action == RELEASE:
                assert k + 1 >= release and all(v == HEALTHY for v, _ in events[k + 1 - release : k + 1])
