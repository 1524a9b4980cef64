"""What `rdmadoctor run` costs in CPU while a job prints: a child printing N lines at a fixed rate.

    python bench/run_passthrough.py [--rate 50000] [--seconds 10] [--line-bytes 100] [--batch 1]

The child writes ``rate`` lines a second for ``seconds`` (``batch`` lines per write(2): 1 is the
worst case, a job that flushes every line as NCCL and `python -u` do), paced every 10 ms, with
NCCL's init lines at the start so that the Diagnoser sees a transport. It reports its own CPU
time (getrusage RUSAGE_SELF) when done.

rdmadoctor's side is measured in a fresh process per run with getrusage(RUSAGE_SELF) around the
call, so interpreter start-up and the command line's imports are left out (they cost the same
whatever the job prints; the line "cold CLI" gives them, with the whole `rdmadoctor run`
measured by RUSAGE_CHILDREN minus the child's own figure). The configurations:

  (a) passthrough only: rdmadoctor.supervise.Child with no Diagnoser;
  (b) passthrough + Diagnoser: rdmadoctor.supervise.run_job(no_gate=True), what `run` does;
  (c) cold CLI: `rdmadoctor run --no-gate -- child`, the whole process;
  (d) with --modes read-all: (b) with --read-all, the Diagnoser reading every line.

For each: the rate reached, rdmadoctor's CPU seconds, that as a share of one core over the run
and as a share of the child's own CPU time. For (a) and (b), a thread samples the CPU time four
times a second, and "steady" is the slope from 50% to 90% of the run: what a job that prints
for hours pays every second (the target: under 2% of a core at 50k lines/s). "fixed" is what
the run cost beyond that: the Diagnoser reads the first 16 MiB (NCCL's init) and, at the end,
the last 16 MiB, a fixed amount per job whatever its length, so over 10 s it weighs far more
than over a night. Output goes
to /dev/null (no terminal or reader slows anything). --json prints the figures as JSON instead
of the table. Exit status 0 when (b)'s steady share meets the target, else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

TARGET_CORE_SHARE = 0.02

CHILD = textwrap.dedent("""\
    import json, os, resource, sys, time
    rate, seconds, line_bytes, batch, report = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    init = (
        b"node1:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\\n"
        b"NCCL version 2.21.5+cuda12.4\\n"
        b"node1:1234:1290 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>\\n"
        b"node1:1234:1290 [0] NCCL INFO Using network IB\\n"
        b"node1:1234:1290 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA\\n"
        b"node1:1234:1290 [0] NCCL INFO Connected all rings\\n"
    )
    os.write(1, init)
    head = b"[rank0]:[step %08d] loss 2.345678 lr 1.000e-04 grad_norm 0.98765 tokens/s 123456.7 "
    pad = max(0, line_bytes - len(head % 0) - 1)
    template = head + b"x" * pad + b"\\n"
    total = int(rate * seconds)
    tick = 0.01
    per_tick = max(1, int(rate * tick))
    start = time.monotonic()
    n = 0
    while n < total:
        upto = min(total, n + per_tick)
        while n < upto:
            k = min(batch, upto - n)
            os.write(1, b"".join(template % (n + i) for i in range(k)))
            n += k
        target = start + (n / rate)
        delay = target - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    wall = time.monotonic() - start
    ru = resource.getrusage(resource.RUSAGE_SELF)
    with open(report, "w") as f:
        json.dump({"lines": total, "wall": wall, "cpu": ru.ru_utime + ru.ru_stime}, f)
""")

# Runs in a fresh interpreter: rdmadoctor's CPU around the call only.
DRIVER = textwrap.dedent("""\
    import json, os, resource, sys
    mode, report, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    from rdmadoctor import supervise as c
    import rdmadoctor.logs, rdmadoctor.output.text  # imported before the measure, as the CLI has them
    def cpu():
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return ru.ru_utime + ru.ru_stime
    import threading, time
    samples, stop = [], threading.Event()
    def sample():  # (time, CPU) 4 times a second: the slope in the middle of the run is its steady cost
        while not stop.wait(0.25):
            samples.append((time.monotonic(), cpu()))
    t0, before = time.monotonic(), cpu()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    if mode == "passthrough":
        code = c.Child(argv, dict(os.environ), c.Sink(1), c.Sink(2)).run().exit_code
    else:
        code = c.run_job(argv, no_gate=True, read_all=mode == "read-all")
    used = cpu() - before
    t1 = time.monotonic()
    stop.set()
    sampler.join()
    mid = [s for s in samples if t0 + 0.5 * (t1 - t0) <= s[0] <= t0 + 0.9 * (t1 - t0)]
    steady = (mid[-1][1] - mid[0][1]) / (mid[-1][0] - mid[0][0]) if len(mid) > 1 and mid[-1][0] > mid[0][0] else None
    with open(report, "w") as f:
        json.dump({"cpu": used, "code": code, "steady": steady}, f)
""")


def measure(mode: str, args: argparse.Namespace, tmp: Path) -> dict:
    child_report = tmp / f"child-{mode}.json"
    ours = tmp / f"ours-{mode}.json"
    child = [sys.executable, "-c", CHILD, str(args.rate), str(args.seconds), str(args.line_bytes), str(args.batch),
             str(child_report)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    env["RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    if mode == "cli":
        cmd = [sys.executable, "-m", "rdmadoctor", "run", "--no-gate", "--", *child]
    else:
        cmd = [sys.executable, "-c", DRIVER, mode, str(ours), *child]
    with open(os.devnull, "wb") as null:
        proc = subprocess.run(cmd, stdout=null, stderr=null, env=env, timeout=args.seconds * 20 + 120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"bench: {mode}: exit status {proc.returncode}")
    kid = json.loads(child_report.read_text())
    if mode == "cli":
        total = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        cpu = total - kid["cpu"]
        steady = None
    else:
        got = json.loads(ours.read_text())
        cpu, steady = got["cpu"], got["steady"]
    return {
        "mode": mode,
        "lines": kid["lines"],
        "wall_s": round(kid["wall"], 3),
        "rate": round(kid["lines"] / kid["wall"]),
        "cpu_s": round(cpu, 4),
        "core_share": round(cpu / kid["wall"], 5),
        "steady_core_share": None if steady is None else round(steady, 5),
        # What the run cost beyond its steady rate: the Diagnoser's head and tail, a fixed amount a job.
        "fixed_cpu_s": None if steady is None else round(max(0.0, cpu - steady * kid["wall"]), 4),
        "vs_child_cpu": round(cpu / kid["cpu"], 4) if kid["cpu"] else None,
        "child_cpu_s": round(kid["cpu"], 4),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=int, default=50000, help="lines a second (default 50000)")
    ap.add_argument("--seconds", type=float, default=10.0, help="how long the child prints (default 10)")
    ap.add_argument("--line-bytes", type=int, default=100, help="bytes a line, newline included (default 100)")
    ap.add_argument("--batch", type=int, default=1, help="lines a write(2) in the child (default 1: every line flushed)")
    ap.add_argument("--modes", default="passthrough,run,cli", help="which of passthrough,run,cli,read-all (default passthrough,run,cli)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for mode in args.modes.split(","):
            rows.append(measure(mode, args, Path(d)))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    judged = next((r for r in rows if r["mode"] == "run"), None)
    ok = judged is None or (judged["steady_core_share"] is not None and judged["steady_core_share"] < TARGET_CORE_SHARE)
    if args.json:
        print(json.dumps({"args": vars(args), "load": load, "target_core_share": TARGET_CORE_SHARE, "met": ok,
                          "rows": rows}, indent=2))
        return 0 if ok else 1
    names = {"passthrough": "(a) passthrough only", "run": "(b) passthrough + Diagnoser", "cli": "(c) cold CLI, whole process",
             "read-all": "(d) (b) with --read-all"}
    print(f"child: {args.rate} lines/s x {args.seconds:g} s, {args.line_bytes} B a line, {args.batch} a write"
          + (f"; load average {load:.2f} (other work inflates CPU figures)" if load is not None else ""))
    print(f"{'':32} {'lines/s':>9} {'cpu s':>8} {'of a core':>10} {'of child cpu':>13} {'steady':>8} {'fixed s':>8}")
    for r in rows:
        steady = "-" if r["steady_core_share"] is None else f"{r['steady_core_share'] * 100:.2f}%"
        fixed = "-" if r["fixed_cpu_s"] is None else f"{r['fixed_cpu_s']:.3f}"
        print(f"{names[r['mode']]:32} {r['rate']:>9} {r['cpu_s']:>8.3f} {r['core_share'] * 100:>9.2f}% "
              f"{(r['vs_child_cpu'] or 0) * 100:>12.1f}% {steady:>8} {fixed:>8}")
    print("steady: the share of a core from 50% to 90% of the run, once NCCL's init has been read; "
          "fixed: the rest (the Diagnoser reads the first and the last 16 MiB whatever the job's length)")
    if judged is not None:
        print(f"target: (b) under {TARGET_CORE_SHARE * 100:g}% of a core in the steady state: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
