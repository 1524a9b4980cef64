"""What `rdmadoctor run` costs in CPU while a job prints: a child printing N lines at a fixed rate.

    python bench/run_passthrough.py [--rate 50000] [--seconds 10] [--line-bytes 100] [--batch 1]

The child writes ``rate`` lines a second for ``seconds`` (``batch`` lines per write(2): 1 is the
worst case, a job that flushes every line as NCCL and `python -u` do), paced every 10 ms, with
NCCL's init lines at the start so that the Diagnoser sees a transport. It reports its own CPU
time (getrusage RUSAGE_SELF) when done.

rdmadoctor's side is measured in a fresh process per run with getrusage(RUSAGE_SELF) around the
call, so interpreter start-up and the command line's imports are left out (they cost the same
whatever the job prints; the line "cold CLI" gives them, with the whole `rdmadoctor run`
measured by RUSAGE_CHILDREN minus the child's own figure). Three configurations:

  (a) passthrough only: rdmadoctor.preflight.child.Child with no Diagnoser;
  (b) passthrough + Diagnoser: rdmadoctor.preflight.child.run_job(no_gate=True), what `run` does;
  (c) cold CLI: `rdmadoctor run --no-gate -- child`, the whole process.

For each: the rate reached, rdmadoctor's CPU seconds, that as a share of one core over the run
(the target: under 2% at 50k lines/s), and as a share of the child's own CPU time. Output goes
to /dev/null (no terminal or reader slows anything). --json prints the figures as JSON instead
of the table. Exit status 0 when (b) meets the target, else 1.
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
    from rdmadoctor.preflight import child as c
    import rdmadoctor.logs, rdmadoctor.output.text  # imported before the measure, as the CLI has them
    def cpu():
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return ru.ru_utime + ru.ru_stime
    before = cpu()
    if mode == "passthrough":
        code = c.Child(argv, dict(os.environ), c.Sink(1), c.Sink(2)).run().exit_code
    else:
        code = c.run_job(argv, no_gate=True)
    used = cpu() - before
    with open(report, "w") as f:
        json.dump({"cpu": used, "code": code}, f)
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
    else:
        cpu = json.loads(ours.read_text())["cpu"]
    return {
        "mode": mode,
        "lines": kid["lines"],
        "wall_s": round(kid["wall"], 3),
        "rate": round(kid["lines"] / kid["wall"]),
        "cpu_s": round(cpu, 4),
        "core_share": round(cpu / kid["wall"], 5),
        "vs_child_cpu": round(cpu / kid["cpu"], 4) if kid["cpu"] else None,
        "child_cpu_s": round(kid["cpu"], 4),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=int, default=50000, help="lines a second (default 50000)")
    ap.add_argument("--seconds", type=float, default=10.0, help="how long the child prints (default 10)")
    ap.add_argument("--line-bytes", type=int, default=100, help="bytes a line, newline included (default 100)")
    ap.add_argument("--batch", type=int, default=1, help="lines a write(2) in the child (default 1: every line flushed)")
    ap.add_argument("--modes", default="passthrough,run,cli", help="which of passthrough,run,cli (default all)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for mode in args.modes.split(","):
            rows.append(measure(mode, args, Path(d)))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    judged = next((r for r in rows if r["mode"] == "run"), None)
    ok = judged is None or judged["core_share"] < TARGET_CORE_SHARE
    if args.json:
        print(json.dumps({"args": vars(args), "load": load, "target_core_share": TARGET_CORE_SHARE, "met": ok,
                          "rows": rows}, indent=2))
        return 0 if ok else 1
    names = {"passthrough": "(a) passthrough only", "run": "(b) passthrough + Diagnoser", "cli": "(c) cold CLI, whole process"}
    print(f"child: {args.rate} lines/s x {args.seconds:g} s, {args.line_bytes} B a line, {args.batch} a write"
          + (f"; load average {load:.2f} (other work inflates CPU figures)" if load is not None else ""))
    print(f"{'':32} {'lines/s':>9} {'cpu s':>8} {'of a core':>10} {'of child cpu':>13}")
    for r in rows:
        print(f"{names[r['mode']]:32} {r['rate']:>9} {r['cpu_s']:>8.3f} {r['core_share'] * 100:>9.2f}% "
              f"{(r['vs_child_cpu'] or 0) * 100:>12.1f}%")
    if judged is not None:
        print(f"target: (b) under {TARGET_CORE_SHARE * 100:g}% of a core: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
