"""Ports over time: ib.counters judges the counters' growth across the agent's cycles (flaps,
symbol errors, RoCE ACK timeouts), with hysteresis, 32-bit wraps and resets."""

from __future__ import annotations

import io

import pytest

from rdmadoctor.agent import loop as A
from rdmadoctor.checks.counters import last_over
from rdmadoctor.core.counters import RESET, WRAP, WRAPPED, CounterHistory, delta
from rdmadoctor.fixturegen import roce_node, write_dir
from rdmadoctor.fixturegen.fleet import counter_steps, set_counters, with_counters
from rdmadoctor.fixturegen.sysfs import build
from rdmadoctor.output.metrics import AgentMetrics
from rdmadoctor.runner import Options, diagnose
from tests.conftest import run_cli


class Clock:
    def __init__(self, t: float = 1_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_delta_tells_growth_a_32_bit_wrap_and_a_reset():
    assert delta(5, 9) == (4, "ok")
    assert delta(WRAP - 3, 2) == (5, WRAPPED)
    assert delta(1000, 3) == (3, RESET)  # a reload: what was counted since is the growth
    assert delta(2**40, 7) == (7, RESET)  # a 64-bit counter never wraps at 32 bits
    for kind in ("grow", "wrap", "reset"):
        values = counter_steps(kind, 10, per_step=3)
        total = sum(delta(a, b)[0] for a, b in zip(values, values[1:]))
        assert total == (27 if kind != "reset" else 12 + 12), (kind, values)


def test_hysteresis_raises_on_growth_and_clears_only_after_quiet():
    times = tuple(float(t) for t in range(0, 7200, 60))
    flap_at = 600.0
    cum = tuple(0 if t < flap_at else 1 for t in times)
    last, growth = last_over(times, cum, 3600, lambda g, span: g > 0)
    assert last == flap_at and growth == 0  # the flap is older than the window ending now
    last, growth = last_over(times[:20], cum[:20], 3600, lambda g, span: g > 0)
    assert last == flap_at and growth == 1


@pytest.fixture
def roce_root(tmp_path):
    node = with_counters(roce_node(), link_downed=0, symbol_error=0, local_ack_timeout_err=0)
    root = tmp_path / "node"
    write_dir(build(node), str(root))
    return str(root)


def _codes(report: dict) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for c in report["checks"]:
        if c["id"] == "ib.counters":
            for f in c["findings"]:
                out.setdefault(f["code"], set()).add(f["subject"])
    return out


def test_a_flap_is_a_finding_in_the_agent_and_quiet_again_after_the_recovery_window(roce_root):
    clock = Clock()
    opts = Options(root=roce_root, scope="node", counters=CounterHistory(clock=clock))
    metrics = AgentMetrics("0.0.0")
    agent = A.Agent(opts, _Quiet(), metrics, A.Log("json", io.StringIO()), A.Settings(interval=60.0))
    assert agent.opts.counters is opts.counters
    seen = []
    for step in range(140):  # 140 one-minute cycles
        if step == 5:
            set_counters(roce_root, "mlx5_1", 1, {"link_downed": 1})
        report = agent.run_cycle()
        seen.append(_codes(report).get("IB_LINK_FLAP", set()))
        clock.t += 60
    assert seen[4] == set()  # before the flap
    assert seen[5] == {"mlx5_1/1"}  # the cycle that saw link_downed grow
    assert seen[64] == {"mlx5_1/1"}  # still within the hour's recovery window
    assert seen[66] == set() and seen[-1] == set()  # quiet: cleared, and stays so
    rep = agent.last_report
    assert rep["inventory"]["port_counters"]["mlx5_1/1"]["link_downed"] == 1
    assert ("IB_LINK_FLAP", "error") not in metrics.snapshot.findings


class _Quiet:
    mode = "stdout"

    def publish(self, report):
        return []

    def close(self):
        pass


def test_wraps_are_growth_and_resets_are_said(roce_root):
    clock = Clock()
    history = CounterHistory(clock=clock)
    values = counter_steps("wrap", 6, per_step=10)
    for v in values:
        set_counters(roce_root, "mlx5_0", 1, {"symbol_error": v, "local_ack_timeout_err": v})
        report = diagnose(Options(root=roce_root, scope="node", counters=history)).report
        clock.t += 60
    # 50 over 5 minutes is 600 an hour: over the default 100, across the wrap.
    codes = _codes(report)
    assert codes.get("IB_SYMBOL_ERRORS") == {"mlx5_0/1"} and codes.get("ROCE_ACK_TIMEOUTS") == {"mlx5_0/1"}
    assert "PORT_COUNTERS_RESET" not in codes
    set_counters(roce_root, "mlx5_0", 1, {"symbol_error": 0, "local_ack_timeout_err": 0})
    report = diagnose(Options(root=roce_root, scope="node", counters=history)).report
    assert _codes(report)["PORT_COUNTERS_RESET"] == {"mlx5_0/1"}


def test_a_slow_trickle_is_under_the_threshold(roce_root):
    clock = Clock()
    history = CounterHistory(clock=clock)
    for v in counter_steps("grow", 30):  # 1 a minute = 60 an hour < 100
        set_counters(roce_root, "mlx5_2", 1, {"symbol_error": v})
        report = diagnose(Options(root=roce_root, scope="node", counters=history)).report
        clock.t += 60
    assert _codes(report) == {}
    rep = diagnose(Options(root=roce_root, scope="node", counters=history, sets=["symbol_errors_max_per_hour=30"])).report
    assert _codes(rep) == {"IB_SYMBOL_ERRORS": {"mlx5_2/1"}}


def test_check_without_history_skips_ib_counters_and_sample_reads_twice(roce_root):
    code, out, err = run_cli(["check", "--root", roce_root, "--only", "ib", "--json"])
    import json

    checks = {c["id"]: c for c in json.loads(out)["checks"]}
    assert checks["ib.counters"]["status"] == "skip" and "--sample" in checks["ib.counters"]["reason"]
    code, out, err = run_cli(["check", "--root", roce_root, "--only", "ib", "--json", "--sample", "0.2"])
    rep = json.loads(out)
    checks = {c["id"]: c for c in rep["checks"]}
    assert checks["ib.counters"]["status"] == "pass" and rep["inventory"]["counter_samples"] == 2
    code, _, err = run_cli(["check", "--root", roce_root, "--sample", "-1"])
    assert code == 2 and "--sample" in err
