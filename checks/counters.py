"""ib.counters: each RDMA port's error counters over time (flaps, symbol errors, ACK timeouts).

node_exporter's infiniband collector exports the raw counters; this judges them. The history is
the agent's (one sample a cycle, rdmadoctor.core.counters.CounterHistory) or `check --sample
SECONDS` (two samples); without one there is nothing to judge and the check is skipped.

Hysteresis: a finding is raised when a counter grows past its threshold within
``counter_window_seconds`` and stays until the counter has been quiet (below the threshold) for
``counter_recovery_seconds``: one flap during bring-up is a finding for an hour, not for ever
(the complaint gpud's and NVSentinel's users filed about sticky counters), and a link that keeps
flapping never clears between its flaps.
"""

from __future__ import annotations

from rdmadoctor.checks._rdma import IB_CLASS, ROCE, ignored, is_rnic, port_subject, probe_inventory, transport_of
from rdmadoctor.checks.ib import HAS_DEVICES
from rdmadoctor.core.codes.ib import (
    IB_LINK_FLAP,
    IB_SYMBOL_ERRORS,
    PORT_COUNTERS_RESET,
    PORT_COUNTERS_SATURATED,
    PORT_COUNTERS_UNREADABLE,
    ROCE_ACK_TIMEOUTS,
)
from rdmadoctor.core.counters import RESET, WRAP64, saturated
from rdmadoctor.core.expect import Expect
from rdmadoctor.core.model import (
    ERROR,
    INFO,
    LINK,
    UNKNOWN,
    WARNING,
    Check,
    Finding,
    Need,
)
from rdmadoctor.core.record import record
from rdmadoctor.core.words import count

# The IB PMA error counters (sysfs ports/N/counters/) and mlx5's firmware counters
# (ports/N/hw_counters/) that are read; CNPs say congestion control is working, kept for history.
COUNTERS = (
    "symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors", "port_xmit_discards",
    "excessive_buffer_overrun_errors", "local_link_integrity_errors",
)
HW_COUNTERS = (
    "out_of_sequence", "local_ack_timeout_err", "rnr_nak_retry_err", "roce_slow_restart", "np_cnp_sent", "rp_cnp_handled",
)

DEFAULTS = {
    "counter_window_seconds": Expect(
        3600, "int", "seconds", min=1, max=7 * 86400, nullable=False,
        doc="How far back ib.counters counts growth: flaps within it, and the rates per hour.",
    ),
    "counter_recovery_seconds": Expect(
        3600, "int", "seconds", min=0, max=7 * 86400, nullable=False,
        doc="How long a port's counter finding stays after the counter was last over its threshold (hysteresis).",
    ),
    "flap_max": Expect(
        0, "int", "flaps", min=0, max=1000, nullable=False,
        doc="Link flaps (link_downed growth) tolerated within counter_window_seconds; more is IB_LINK_FLAP.",
    ),
    "symbol_errors_max_per_hour": Expect(
        100, "number", "per hour", min=0, max=1e12, null_means="no symbol error check",
        doc="Highest acceptable growth of a port's symbol_error counter, per hour over counter_window_seconds.",
    ),
    "ack_timeouts_max_per_hour": Expect(
        100, "number", "per hour", min=0, max=1e12, null_means="no ACK timeout check",
        doc="Highest acceptable growth of a RoCE port's local_ack_timeout_err, per hour over counter_window_seconds.",
    ),
}


@record
class PortCounters:
    subject: str
    transport: str | None
    values: dict  # counter -> its value now
    # counter -> (times, cumulative growth since the first sample), from the history
    series: dict
    resets: tuple[float, ...] = ()  # times a counter was seen reset


@record
class CounterFacts:
    ports: tuple[PortCounters, ...]
    now: float
    samples: int
    unreadable: tuple[str, ...] = ()


def _int(text: str | None) -> int | None:
    """A counter's value: a non-negative integer under 2**64 (no counter is wider), else None."""
    if text is None or not text.isdigit() or len(text) > 20:
        return None
    v = int(text)
    return v if v < WRAP64 else None


def read_counters(host, inv, expect: dict | None = None) -> tuple[dict[str, dict[str, int]], list[str], dict[str, str | None]]:
    """({port subject: {counter: value}}, ports without counters, {subject: transport}) of every
    RDMA PF port the expectations do not leave out, read through the Host."""
    values: dict[str, dict[str, int]] = {}
    unreadable: list[str] = []
    transports: dict[str, str | None] = {}
    for dev in inv.pfs():
        for port in dev.ports:
            if ignored(dev, port, expect or {}):
                continue
            subject = port_subject(dev, port)
            transports[subject] = transport_of(dev, port)
            base = f"{IB_CLASS}/{dev.name}/ports/{port.port}"
            got: dict[str, int] = {}
            for folder, names in (("counters", COUNTERS), ("hw_counters", HW_COUNTERS)):
                present = set(host.listdir(f"{base}/{folder}"))
                for name in names:
                    if name in present:
                        # Fresh: `check --sample` reads the same files several times in one run.
                        v = _int(host.read_value(f"{base}/{folder}/{name}", fresh=True))
                        if v is not None:
                            got[name] = v
            if got:
                values[subject] = got
            elif not is_rnic(dev):  # iWARP RNICs have no PMA counters by nature
                unreadable.append(subject)
    return values, unreadable, transports


def probe_counters(ctx) -> CounterFacts:
    history = ctx.counters
    inv = ctx.get(probe_inventory)
    values, unreadable, transports = read_counters(ctx.host, inv, ctx.expect)
    now = history.add(values)
    ports = []
    for subject, now_values in values.items():
        series = {}
        resets: list[float] = []
        for name in now_values:
            times, cum, events = history.series(subject, name)
            series[name] = (tuple(times), tuple(cum))
            resets += [t for t, how in events if how == RESET]
        ports.append(PortCounters(subject, transports.get(subject), dict(now_values), series, tuple(sorted(set(resets)))))
    return CounterFacts(tuple(ports), now, len(history), tuple(unreadable))


def _has_history(ctx) -> str | None:
    if getattr(ctx, "counters", None) is None:
        return "no counter history to judge: the agent judges the ports' counters every cycle; `rdmadoctor check --sample 10` reads them twice"
    return None


HAS_HISTORY = Need("counter history", _has_history)


def last_over(times: tuple, cum: tuple, window: float, over) -> tuple[float | None, int]:
    """(the last time the counter grew and its growth within ``window`` before then was ``over(growth,
    span)``, the growth within the window ending now). Linear: one pass with a trailing pointer."""
    last = None
    j = 0
    for i in range(1, len(times)):
        while times[j] < times[i] - window and j < i - 1:
            j += 1
        grew = cum[i] - cum[i - 1]
        if grew > 0 and over(cum[i] - cum[j], times[i] - times[j]):
            last = times[i]
    growth = 0
    if times:
        k = 0
        while times[k] < times[-1] - window and k < len(times) - 1:
            k += 1
        growth = cum[-1] - cum[min(k, max(len(times) - 2, 0))]
    return last, growth


def _ago(seconds: float) -> str:
    s = int(max(seconds, 0))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def judge_counters(f: CounterFacts, expect: dict) -> list[Finding]:
    window = float(expect.get("counter_window_seconds", 3600))
    recovery = float(expect.get("counter_recovery_seconds", 3600))
    flap_max = int(expect.get("flap_max", 0))
    sym_max = expect.get("symbol_errors_max_per_hour", 100)
    ack_max = expect.get("ack_timeouts_max_per_hour", 100)
    out: list[Finding] = []
    for subject in f.unreadable:
        out.append(Finding(PORT_COUNTERS_UNREADABLE.code, UNKNOWN, subject, f"no readable counters in {IB_CLASS}/.../counters/ for {subject}; "
                           "expected the PMA error counters (symbol_error, link_downed, ...).", PORT_COUNTERS_UNREADABLE.fix))
    rules: list[tuple] = [("link_downed", None, lambda g, span: g > flap_max, f"at most {count(flap_max, 'flap')} in {_ago(window)}")]
    if sym_max is not None:
        rules.append(("symbol_error", None, lambda g, span: g * 3600 / max(span, 1) > sym_max, f"at most {sym_max:g} symbol errors per hour"))
    if ack_max is not None:
        rules.append(("local_ack_timeout_err", ROCE, lambda g, span: g * 3600 / max(span, 1) > ack_max,
                      f"at most {ack_max:g} local ACK timeouts per hour"))
    for p in f.ports:
        for counter, transport, over, expected in rules:
            if transport is not None and p.transport != transport or counter not in p.series:
                continue
            times, cum = p.series[counter]
            last, growth = last_over(times, cum, window, over)
            if last is None or f.now - last > recovery:
                continue
            span = times[-1] - times[0] if times else 0
            quiet = f.now - last
            message = (
                f"{counter} grew by {growth} in the last {_ago(min(window, span))} (now {p.values.get(counter)}); "
                f"last over the threshold {_ago(quiet)} ago; expected {expected}. Clears after {_ago(recovery)} under it."
            )
            data = {"counter": counter, "growth": growth, "window_seconds": window, "last_over_seconds_ago": round(quiet, 1),
                    "value": p.values.get(counter)}
            if counter == "link_downed":
                out.append(Finding(IB_LINK_FLAP.code, ERROR, p.subject, message, IB_LINK_FLAP.fix, data=data))
            elif counter == "symbol_error":
                out.append(Finding(IB_SYMBOL_ERRORS.code, WARNING, p.subject, message, IB_SYMBOL_ERRORS.fix, data=data))
            else:
                out.append(Finding(ROCE_ACK_TIMEOUTS.code, WARNING, p.subject, message, ROCE_ACK_TIMEOUTS.fix, data=data))
        recent = [t for t in p.resets if f.now - t <= window]
        if recent:
            out.append(Finding(PORT_COUNTERS_RESET.code, INFO, p.subject,
                               f"counters went back {_ago(f.now - recent[-1])} ago (not a wrap of the counter's width): a driver reload, HCA reset or reboot; "
                               "growth is counted again from there.", PORT_COUNTERS_RESET.fix))
        stuck = sorted(name for name, v in p.values.items() if saturated(name, v))
        if stuck:
            out.append(Finding(PORT_COUNTERS_SATURATED.code, INFO, p.subject,
                               ", ".join(f"{name} is {p.values[name]}" for name in stuck) + ": the top of the counter's field, where it "
                               "stops; growth since is not seen (expected a value under the top: clear the counters to see it again).",
                               PORT_COUNTERS_SATURATED.fix, data={"counters": stuck}))
    return out


def _inventory(f: CounterFacts) -> dict:
    return {"port_counters": {p.subject: dict(p.values) for p in f.ports}, "counter_samples": f.samples}


CHECKS = [
    Check(
        id="ib.counters",
        condition=LINK,
        gate=False,
        title="RDMA port error counters over time",
        probe=probe_counters,
        judge=judge_counters,
        codes=(IB_LINK_FLAP, IB_SYMBOL_ERRORS, ROCE_ACK_TIMEOUTS, PORT_COUNTERS_RESET, PORT_COUNTERS_SATURATED, PORT_COUNTERS_UNREADABLE),
        needs=(HAS_DEVICES, HAS_HISTORY),
        defaults=dict(DEFAULTS),
        inventory=_inventory,
        description="Each port's error counters (counters/, hw_counters/) across the agent's cycles or `check --sample`: "
        "link flaps, symbol errors, RoCE local ACK timeouts, with hysteresis, saturated PMA counters, 32/64-bit wraps and resets.",
    ),
]

# After the node checks, before logs.diagnose and node.labels (engine/registry.py).
ORDER = 95
