"""Ports over time: a bounded history of each RDMA port's error counters, and their deltas.

The agent keeps one :class:`CounterHistory` across its cycles (``check --sample SECONDS`` makes one
with two samples); the ``ib.counters`` check adds the sample it reads and judges the deltas. The
history holds numbers only (time, port, counter, value): ``MAX_SAMPLES`` samples, so a node's
memory does not grow with its uptime.

Counters go backwards three ways, and each is told by what the counter is
(Documentation/ABI/stable/sysfs-class-infiniband; drivers/infiniband/core/sysfs.c):

- The PMA error counters under ``ports/N/counters/`` are the PortCounters attribute's fields,
  4 to 16 bits wide (``link_downed`` and ``link_error_recovery`` 8, ``symbol_error`` 16), and the
  InfiniBand spec makes them saturate: they stop at their top value, they never wrap. A drop is
  a reset; a counter at its top value can no longer show growth (:func:`saturated`).
- mlx5's ``hw_counters`` are firmware counters: the Q counters (``out_of_sequence``,
  ``local_ack_timeout_err``, ...) are 32 bits and wrap, the congestion ones (``np_cnp_sent``,
  ``rp_cnp_handled``) 64 bits. A drop from near the top of the width to a small value is a
  wrap (the delta is ``new + 2**bits - old``).
- Any counter resets to 0 when the driver reloads, the HCA resets or the node reboots: the
  delta is the new value (what was counted since, a lower bound), the event is reported, and
  the counter's window starts again there (growth before and after a reset is never summed).

A counter the driver reports wider than its PMA field (a value over the field's top) is read as
a wrapping one, 32 or 64 bits by its value. Values at or beyond 2**64 are not counters and are
not read (rdmadoctor.checks.counters).
"""

from __future__ import annotations

import time
from collections import deque

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

# 256 samples: over 4 hours at the agent's 60 s interval, more than a 1 h window plus a 1 h
# recovery window need.
MAX_SAMPLES = 256
WRAP = 2**32
WRAP64 = 2**64

OK, WRAPPED, RESET = "ok", "wrap", "reset"

# The PortCounters fields' widths (bits); the spec makes these saturate, not wrap.
SATURATING = {
    "symbol_error": 16, "link_error_recovery": 8, "link_downed": 8, "port_rcv_errors": 16,
    "port_rcv_remote_physical_errors": 16, "port_rcv_switch_relay_errors": 16, "port_xmit_discards": 16,
    "port_xmit_constraint_errors": 8, "port_rcv_constraint_errors": 8, "local_link_integrity_errors": 4,
    "excessive_buffer_overrun_errors": 4, "VL15_dropped": 16,
}
# mlx5's congestion counters are 64-bit (query_cong_statistics); its Q counters 32-bit.
WIDE = frozenset({"np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored", "np_ecn_marked_roce_packets"})


def saturated(counter: str, value: int) -> bool:
    """A PMA error counter at the top of its field: it stopped, growth since is invisible."""
    bits = SATURATING.get(counter)
    return bits is not None and value == 2**bits - 1


def _width(counter: str | None, old: int) -> int:
    if counter in WIDE or old >= WRAP:
        return WRAP64
    return WRAP


def delta(old: int, new: int, counter: str | None = None) -> tuple[int, str]:
    """(how much the counter grew, how): ok, wrap or reset (driver reload, reboot), by what
    ``counter`` is (module docstring); an unnamed counter wraps at 32 bits, or 64 when above."""
    if new >= old:
        return new - old, OK
    bits = SATURATING.get(counter or "")
    if bits is not None and old < 2**bits:
        return new, RESET  # a saturating counter never wraps: it was cleared
    top = _width(counter, old)
    if old < top and new + top - old < top // 2:
        return new + top - old, WRAPPED
    return new, RESET


class CounterHistory:
    """Samples ``(time, {port subject: {counter: value}})``, oldest first, at most ``max_samples``."""

    def __init__(self, max_samples: int = MAX_SAMPLES, clock: Callable[[], float] = time.time):
        self.samples: deque[tuple[float, dict[str, dict[str, int]]]] = deque(maxlen=max_samples)
        self.clock = clock

    def add(self, values: dict[str, dict[str, int]], at: float | None = None) -> float:
        t = self.clock() if at is None else at
        if self.samples and t <= self.samples[-1][0]:
            t = self.samples[-1][0] + 1e-6  # the same instant twice (a fast test clock): keep order
        self.samples.append((t, values))
        return t

    def __len__(self) -> int:
        return len(self.samples)

    def series(self, subject: str, counter: str) -> tuple[list[float], list[int], list[tuple[float, str]]]:
        """(times, cumulative growth since the first sample, [(time, "wrap" | "reset")]) of one
        counter of one port, over the samples that have it. A reset starts the series again at
        the sample before it (cumulative 0), so the window never spans the reset."""
        times: list[float] = []
        cum: list[int] = []
        events: list[tuple[float, str]] = []
        prev = None
        total = 0
        for t, values in self.samples:
            v = (values.get(subject) or {}).get(counter)
            if v is None:
                continue
            if prev is not None:
                d, how = delta(prev, v, counter)
                if how == RESET:
                    times, cum, total = times[-1:], [0], 0
                total += d
                if how != OK:
                    events.append((t, how))
            times.append(t)
            cum.append(total)
            prev = v
        return times, cum, events
