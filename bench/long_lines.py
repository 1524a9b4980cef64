"""What one long line costs `diagnose`, `check --bundle` and the tool-output parsers (issue 21).

    python bench/long_lines.py [--cap 60]

Each case runs in this process under a CPU-time cap (ITIMER_VIRTUAL, --cap seconds, default 60):
a case that reaches it is reported as ">CAP" (before the fix several took minutes). Figures are
CPU seconds (time.process_time), so a loaded machine changes them little. The cases:

- the scan (``rdmadoctor.logs.diagnose_bytes``) on one 65 KB line: ``NCCL WARN aaaa...``,
  ``NETDEV WATCHDOG: aaaa...``, and on 100 lines of 65 KB of base64 after ``RuntimeError:``;
- the parsers on ``cmd/env.txt`` with a line of 200,000 spaces, 100 lines with 20,000 leading
  spaces (ibstat), and ``cmd/ibdev2netdev.txt`` with a line of 1 MB of ``=``.

Prints one JSON object: case -> CPU seconds (or ">CAP").
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import signal
import time


class _Cap(Exception):
    pass


def _timed(fn, cap: float):
    def alarm(*_a: object) -> None:
        raise _Cap()

    old = signal.signal(signal.SIGVTALRM, alarm)
    signal.setitimer(signal.ITIMER_VIRTUAL, cap)
    t = time.process_time()
    try:
        fn()
    except _Cap:
        return f">{cap:g}"
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, old)
    return round(time.process_time() - t, 3)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cap", type=float, default=60.0, help="CPU seconds a case may take")
    a = ap.parse_args()

    from rdmadoctor.logs import diagnose_bytes
    from rdmadoctor.parsers.ibstat import parse_ibstat
    from rdmadoctor.parsers.netdev import parse_ibdev2netdev
    from rdmadoctor.parsers.system import parse_env

    n = 65_000
    blob = base64.b64encode(random.Random(21).randbytes(n * 3 // 4))
    cases = {
        "scan: NCCL WARN + 65 KB": lambda: diagnose_bytes(b"NCCL WARN " + b"a" * n + b"\n"),
        "scan: NETDEV WATCHDOG + 65 KB": lambda: diagnose_bytes(b"NETDEV WATCHDOG: " + b"a" * n + b"\n"),
        "scan: 100 x RuntimeError + 65 KB base64": lambda: diagnose_bytes(
            b"".join(b"RuntimeError: " + blob[i:] + blob[:i] + b"\n" for i in range(100))),
        "parse_env: 200,000 spaces": lambda: parse_env("A=1\n" + " " * 200_000 + "\nB=2\n"),
        "parse_ibstat: 100 lines, 20,000 leading spaces": lambda: parse_ibstat(
            "\n".join(" " * 20_000 + f"State: Active {i}" for i in range(100))),
        "parse_ibdev2netdev: 1 MB of '='": lambda: parse_ibdev2netdev("mlx5_0 port 1 " + "=" * 1_000_000 + "\n"),
    }
    print(json.dumps({name: _timed(fn, a.cap) for name, fn in cases.items()}, indent=1))


if __name__ == "__main__":
    main()
