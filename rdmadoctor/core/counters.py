"""Ports over time: a bounded history of each RDMA port's error counters, and their deltas.

The agent keeps one :class:`CounterHistory` across its cycles (``check --sample SECONDS`` makes one
with two samples); the ``ib.counters`` check adds the sample it reads and judges the deltas. The
history holds numbers only (time, port, counter, value): ``MAX_SAMPLES`` samples, so a node's
memory does not grow with its uptime.

Counters go backwards two ways: a 32-bit counter wraps (mlx5's hw_counters are 32-bit firmware
counters; the sysfs PMA counters are 16/32-bit), and a counter resets to 0 when the driver reloads
or the node reboots. A drop from the top half of the 32-bit range to a small value is a wrap
(the delta is ``new + 2**32 - old``); any other drop is a reset, whose delta is the new value (what
was counted since it, a lower bound) and which is reported, so rates across it are read as such.
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

OK, WRAPPED, RESET = "ok", "wrap", "reset"


def delta(old: int, new: int) -> tuple[int, str]:
    """(how much the counter grew, how): ok, wrap (32-bit) or reset (driver reload, reboot)."""
    if new >= old:
        return new - old, OK
    if WRAP // 2 <= old < WRAP and new + WRAP - old < WRAP // 2:
        return new + WRAP - old, WRAPPED
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
        counter of one port, over the samples that have it."""
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
                d, how = delta(prev, v)
                total += d
                if how != OK:
                    events.append((t, how))
            times.append(t)
            cum.append(total)
            prev = v
        return times, cum, events
