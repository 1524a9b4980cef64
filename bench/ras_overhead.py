"""Does the hang watch slow the job? Its throughput under `rdmadoctor run` with the watch on and off.

    python bench/ras_overhead.py [--seconds 5] [--repeat 5] [--json]

The job is a Python child that, for ``seconds``, does a little work per step (a few microseconds of
arithmetic) and prints one flushed line per step, as a training loop that logs every step does, and
writes its own steps per second when done. It runs under `rdmadoctor run --no-gate` twice per round:

  on:  the default hang_after_s (300 s): HangWatch.saw() on every batch the copy loop reads, its
       thread waking every second (no hang happens, so RAS is never asked);
  off: --set hang_after_s=null: no watch at all.

The rounds alternate on/off so a machine's drift weighs on both. On a shared machine the spread
between rounds is far larger than the watch's cost, so the script also times what the watch adds
to the copy loop itself, HangWatch.saw() on one batch (a 64 KiB batch of step lines, and one short
line), in this process: the copy loop makes at most about 100 such calls a second (it reads every
10 ms), so that figure times 100 is the watch's whole cost on the job's path, per second. Reported: each side's median steps
per second and the ratio on/off (1.0: no difference; the spread says what noise the machine adds).
Exit status 0 when the median ratio is at least 0.97 (the watch costs the job under 3%).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

TARGET = 0.97

CHILD = textwrap.dedent("""\
    import os, sys, time
    seconds, out = float(sys.argv[1]), sys.argv[2]
    print("NCCL version 2.28.9+cuda12.9", flush=True)
    steps, x = 0, 1.0
    start = time.perf_counter()
    end = start + seconds
    while time.perf_counter() < end:
        for _ in range(200):
            x = (x * 1.0000001 + 0.5) % 1000.0
        steps += 1
        sys.stdout.write(f"[rank0] step {steps} loss {x:.6f} tokens/s 123456.7\\n")
        sys.stdout.flush()
    import resource
    ru = resource.getrusage(resource.RUSAGE_SELF)
    with open(out, "w") as f:
        f.write(f"{steps / (time.perf_counter() - start)} {ru.ru_utime + ru.ru_stime}")
""")


def one(seconds: float, on: bool, tmp: Path, n: int) -> tuple[float, float]:
    """(the job's steps per second, rdmadoctor's own CPU seconds: all children's less the job's)."""
    import resource

    child = tmp / "child.py"
    out = tmp / f"rate-{n}.txt"
    args = [sys.executable, "-m", "rdmadoctor", "run", "--no-gate"]
    if not on:
        args += ["--set", "hang_after_s=null"]
    env = dict(os.environ, RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD="1", NCCL_RAS_ADDR="127.0.0.1:1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([*args, "--", sys.executable, str(child), str(seconds), str(out)], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=seconds * 10 + 120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    rate, child_cpu = (float(x) for x in out.read_text().split())
    total = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return rate, total - child_cpu


def saw_cost() -> dict[str, float]:
    """Nanoseconds one HangWatch.saw() call takes, on a 64 KiB batch and on one short line."""
    import timeit

    from rdmadoctor.supervise.hang import HangWatch

    w = HangWatch(300, lambda line: None, env={})  # never started: saw() alone
    big = b"[rank0] step 12345 loss 2.345678 tokens/s 123456.7\n" * 1300
    small = b"[rank0] step 12345 loss 2.345678 tokens/s 123456.7\n"
    out = {}
    for name, data in (("batch_64k", big), ("one_line", small)):
        n = 20000
        out[name] = min(timeit.repeat(lambda: w.saw(data), number=n, repeat=5)) / n * 1e9
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "child.py").write_text(CHILD)
        rates: dict[str, list[float]] = {"on": [], "off": []}
        cpu: dict[str, list[float]] = {"on": [], "off": []}
        for i in range(a.repeat):
            for side in (("on", "off") if i % 2 == 0 else ("off", "on")):
                rate, used = one(a.seconds, side == "on", tmp, len(rates["on"]) + len(rates["off"]))
                rates[side].append(rate)
                cpu[side].append(used / rate)  # rdmadoctor's CPU seconds per step of the job
    on, off = statistics.median(rates["on"]), statistics.median(rates["off"])
    saw = saw_cost()
    pairs = [x / y for x, y in zip(rates["on"], rates["off"])]
    out = {"seconds": a.seconds, "repeat": a.repeat, "steps_per_s_on": round(on, 1), "steps_per_s_off": round(off, 1),
           "ratio_on_off": round(on / off, 4), "ratio_per_round": [round(r, 4) for r in pairs],
           "runs_on": [round(r, 1) for r in rates["on"]], "runs_off": [round(r, 1) for r in rates["off"]],
           "rdmadoctor_cpu_us_per_step_on": round(statistics.median(cpu["on"]) * 1e6 / a.seconds, 3),
           "rdmadoctor_cpu_us_per_step_off": round(statistics.median(cpu["off"]) * 1e6 / a.seconds, 3),
           "saw_ns_batch_64k": round(saw["batch_64k"], 1), "saw_ns_one_line": round(saw["one_line"], 1),
           "saw_core_share_at_100_batches_per_s": round(saw["batch_64k"] * 100 / 1e9, 8)}
    if a.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"job throughput, steps/s (median of {a.repeat} runs of {a.seconds:g} s each side):")
        print(f"  hang watch on:  {on:,.0f}   runs {out['runs_on']}")
        print(f"  hang watch off: {off:,.0f}   runs {out['runs_off']}")
        print(f"  ratio on/off:   {on / off:.4f}   per round {out['ratio_per_round']}")
        print(f"  rdmadoctor's CPU per job step: on {out['rdmadoctor_cpu_us_per_step_on']} us, "
              f"off {out['rdmadoctor_cpu_us_per_step_off']} us (the rest of the machine's noise is in the spread)")
        print(f"  HangWatch.saw() per batch: {out['saw_ns_batch_64k']:.0f} ns (64 KiB), {out['saw_ns_one_line']:.0f} ns (one line); "
              f"at 100 batches/s {out['saw_core_share_at_100_batches_per_s'] * 100:.4f}% of a core")
    return 0 if on / off >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
