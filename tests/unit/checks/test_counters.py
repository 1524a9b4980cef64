"""Ports over time: ib.counters judges the counters' growth across the agent's cycles (flaps,
symbol errors, RoCE ACK timeouts), with hysteresis, 32-bit wraps and resets."""

from __future__ import annotations

import io

import pytest

from rdmadoctor.agent import loop as A
from rdmadoctor.checks.counters import last_over
from rdmadoctor.core.counters import RESET, WRAP, WRAPPED, CounterHistory, delta
from rdmadoctor.fixturegen import roce_node, write_dir
from rdmadoctor.fixturegen.fleet import counter_path, counter_steps, set_counters, with_counters
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


# ---- issue 33 item 1: `check --sample` reads the counters fresh, and tells resets and wraps ----


def _watched_host(root: str, path_end: str):
    """A real Host on ``root`` whose reads of the file ending ``path_end`` are counted: the first
    read sets ``first``; the next waits (generously) until the test has changed the file, so the
    change falls between two samples by construction, not by timing."""
    import threading

    from rdmadoctor.host import open_host

    host = open_host(root)
    first, changed = threading.Event(), threading.Event()
    reads = []
    real = host.read_bytes

    def read_bytes(path, limit=1 << 22, *, fresh=False):
        if not path.endswith(path_end):
            return real(path, limit, fresh=fresh)
        reads.append(path)
        if len(reads) == 2:
            changed.wait(60)
        data = real(path, limit, fresh=fresh)
        if len(reads) == 1:
            first.set()  # after the read: the change comes after what the first sample saw
        return data

    host.read_bytes = read_bytes  # type: ignore[method-assign]
    return host, first, changed, reads


def _sample(root: str, host, seconds: float, **kw):
    return diagnose(Options(root=root, scope="node", only=["ib.counters"], sample=seconds, **kw), host=host).report


def _changed_during_sample(root: str, device: str, before: dict, after: dict, seconds: float = 0.3):
    import threading

    for n, v in before.items():  # not set_counters: it keeps values under 2**32
        with open(counter_path(root, device, 1, n), "w") as f:
            f.write(f"{v}\n")
    name = next(iter(after))
    host, first, changed, reads = _watched_host(root, f"/{device}/ports/1/{'counters' if name in ('link_downed', 'symbol_error') else 'hw_counters'}/{name}")

    def writer():
        if first.wait(60):  # the first sample has read the file
            for n, v in after.items():
                with open(counter_path(root, device, 1, n), "w") as f:
                    f.write(f"{v}\n")
        changed.set()

    t = threading.Thread(target=writer)
    t.start()
    try:
        rep = _sample(root, host, seconds)
    finally:
        changed.set()
        t.join(60)
    assert len(reads) >= 2, reads
    return rep


def _finding(rep: dict, code: str) -> dict | None:
    for c in rep["checks"]:
        for f in c["findings"]:
            if f["code"] == code:
                return f
    return None


def test_sample_sees_a_flap_written_to_the_real_file_during_the_sample(roce_root):
    rep = _changed_during_sample(roce_root, "mlx5_1", {"link_downed": 0}, {"link_downed": 3})
    flap = _finding(rep, "IB_LINK_FLAP")
    assert flap is not None and flap["subject"] == "mlx5_1/1" and flap["data"]["growth"] == 3, rep["checks"]
    assert rep["inventory"]["port_counters"]["mlx5_1/1"]["link_downed"] == 3
    assert rep["inventory"]["counter_samples"] >= 2


def test_sample_reads_a_counter_that_went_back_as_a_reset_and_starts_again(roce_root):
    set_counters(roce_root, "mlx5_1", 1, {"link_downed": 200})
    rep = _changed_during_sample(roce_root, "mlx5_1", {"link_downed": 200}, {"link_downed": 0})
    assert _finding(rep, "PORT_COUNTERS_RESET")["subject"] == "mlx5_1/1"
    assert _finding(rep, "IB_LINK_FLAP") is None  # back to 0: nothing counted since the reset


def test_sample_counts_a_32_bit_wrap_of_a_hw_counter_as_growth(roce_root):
    rep = _changed_during_sample(roce_root, "mlx5_0", {"local_ack_timeout_err": WRAP - 5},
                                 {"local_ack_timeout_err": 400}, seconds=0.3)
    ack = _finding(rep, "ROCE_ACK_TIMEOUTS")
    assert ack is not None and ack["data"]["growth"] == 405, rep["checks"]
    assert _finding(rep, "PORT_COUNTERS_RESET") is None


def test_flaps_across_a_wrap_of_a_wide_link_downed_are_flaps(roce_root):
    # A driver that reports link_downed wider than its 8-bit PMA field: it wraps, 11 flaps.
    rep = _changed_during_sample(roce_root, "mlx5_1", {"link_downed": WRAP - 5}, {"link_downed": 6})
    assert _finding(rep, "IB_LINK_FLAP")["data"]["growth"] == 11
    assert _finding(rep, "PORT_COUNTERS_RESET") is None


def test_delta_knows_each_counters_width():
    from rdmadoctor.core.counters import WRAP64, saturated

    assert delta(250, 3, "link_downed") == (3, RESET)  # 8-bit PMA counters saturate: a drop is a reset
    assert delta(WRAP - 3, 2, "link_downed") == (5, WRAPPED)  # wider than its field: wraps like any
    assert delta(WRAP - 3, 2, "local_ack_timeout_err") == (5, WRAPPED)
    assert delta(WRAP - 3, 2, "np_cnp_sent") == (2, RESET)  # a 64-bit counter does not wrap at 32
    assert delta(WRAP64 - 3, 4, "np_cnp_sent") == (7, WRAPPED)
    assert delta(WRAP64 - 3, 4, "local_ack_timeout_err") == (7, WRAPPED)  # its value says 64 bits
    assert delta(WRAP64 - 3, WRAP64 - 1) == (2, "ok")
    assert delta(2**63, 5) == (5, RESET)  # halfway down is no wrap
    assert saturated("link_downed", 255) and saturated("symbol_error", 65535)
    assert not saturated("link_downed", 254) and not saturated("local_ack_timeout_err", WRAP - 1)


def test_a_reset_starts_the_window_again():
    h = CounterHistory(clock=Clock())
    for t, v in enumerate((10, 14, 2, 5)):
        h.add({"p": {"symbol_error": v}}, at=float(t))
    times, cum, events = h.series("p", "symbol_error")
    assert times == [1.0, 2.0, 3.0] and cum == [0, 2, 5]  # from the sample before the reset
    assert events == [(2.0, RESET)]


def test_values_near_and_beyond_2_64_are_read_or_refused(roce_root):
    from rdmadoctor.checks.counters import _int
    from rdmadoctor.core.counters import WRAP64

    assert _int(str(WRAP64 - 1)) == WRAP64 - 1
    for bad in (str(WRAP64), "9" * 400, "-1", "1e3", " 12", ""):
        assert _int(bad) is None, bad
    rep = _changed_during_sample(roce_root, "mlx5_0", {"np_cnp_sent": WRAP64 - 2}, {"np_cnp_sent": 1})
    assert rep["inventory"]["port_counters"]["mlx5_0/1"]["np_cnp_sent"] == 1
    assert _finding(rep, "PORT_COUNTERS_RESET") is None  # a 64-bit wrap, not a reset
    with open(counter_path(roce_root, "mlx5_0", 1, "np_cnp_sent"), "w") as f:
        f.write(f"{WRAP64 + 5}\n")
    rep = _sample(roce_root, None, 0)
    assert "np_cnp_sent" not in rep["inventory"]["port_counters"]["mlx5_0/1"]


def test_a_saturated_pma_counter_is_said(roce_root):
    set_counters(roce_root, "mlx5_2", 1, {"link_downed": 255})
    rep = _sample(roce_root, None, 0)
    f = _finding(rep, "PORT_COUNTERS_SATURATED")
    assert f is not None and f["subject"] == "mlx5_2/1" and f["data"]["counters"] == ["link_downed"]
    assert "perfquery -R" in str(f)


def test_ctrl_c_during_sample_exits_130_with_one_line(roce_root):
    import os
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "rdmadoctor", "check", "--root", roce_root, "--only", "ib.counters", "--sample", "600"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        line = proc.stderr.readline()  # the progress line: the sample has started
        assert "--sample" in line, line
        # Poll: the sample reads the counter files right after that line; SIGINT any time now.
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(2)
            except subprocess.TimeoutExpired:
                pass
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, (proc.returncode, err)
    assert "Traceback" not in err and "interrupted" in err and out == ""
