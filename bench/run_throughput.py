"""What `rdmadoctor run` costs the job while it pours output that the scan reads slowly, and how
late `run` exits after the job ends (issue 33, item 4).

    python bench/run_throughput.py [--mb 40] [--payload 2000] [--repeat 3] [--modes bare,passthrough,run,cli]

The workloads (each written as fast as the child can, in writes of 8 KiB as Python's buffered
stdout makes them to a pipe):

- ``warn``: ``--mb`` MB of ``NCCL WARN`` lines, each with a ``--payload``-character payload that
  differs from line to line (words drawn at random: no two lines alike, so the scan cannot read
  one for many), the job then exits 1 (a failed job: its diagnosis is printed);
- ``anchor``: the one line ``('NCCL_ ' * 10923)[:65536]``, then exit 1 (issue 33's repeated
  first word);
- ``steps``: ``--mb`` MB of 100-byte training-step lines after NCCL's init lines, exit 0.

The configurations, each a fresh process:

- ``bare``: the child alone, its stdout and stderr on /dev/null: the baseline;
- ``pipe``: the child's stdout through a pipe to ``cat`` (what a job's output meets anyway);
- ``passthrough``: the child under rdmadoctor.supervise.Child with no diagnosis (the copy alone);
- ``run``: the child under rdmadoctor.supervise.run_job(no_gate=True), what `run` does;
- ``cli``: ``rdmadoctor run --no-gate -- child``, the whole process.

For each: the child's own wall time from its first write to its last write returning (its
throughput; the ratio to ``bare`` is what rdmadoctor costs the job), and for ``run`` and ``cli``
the exit delay: from the child's exit to rdmadoctor's (for ``run``, to run_job's return; for
``cli``, to the process's end, interpreter shutdown included). Each figure is the median of
``--repeat`` runs. rdmadoctor's output goes to /dev/null. --json prints the figures as JSON.

``--gil`` measures instead what the diagnosis thread costs the copy loop in Python's lock, apart
from the CPU: a loop of the syscalls a copy makes (each gives the lock up and takes it back),
three a turn, each turn copying 1 MB of WARN lines to /dev/null and handing it to the diagnosis,
for 3 s, in a fresh process each: without a diagnosis, with the diagnosis reading as fast as it
can (POUR_S = 0) and as `run` reads (giving way between slices while output pours). It prints
the MB a second copied for each.
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
import time
from pathlib import Path

CHILD = textwrap.dedent("""\
    import json, os, random, sys, time
    kind, mb, payload, report = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    rng = random.Random(33)
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(4096)]
    if kind == "warn":
        lines, size = [], 0
        while size < mb * 1e6:
            text = b" ".join(rng.choices(words, k=payload // 5))[:payload]
            line = b"node%d:%d:%d [%d] enqueue.cc:123 NCCL WARN %s\\n" % (len(lines) % 64, 4000 + len(lines) % 8, len(lines), len(lines) % 8, text)
            lines.append(line)
            size += len(line)
        data, code = b"".join(lines), 1
    elif kind == "anchor":
        data, code = (("NCCL_ " * 10923)[:65536] + "\\n").encode(), 1
    else:
        init = (b"node1:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\\n"
                b"NCCL version 2.21.5+cuda12.4\\n"
                b"node1:1234:1290 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>\\n"
                b"node1:1234:1290 [0] NCCL INFO Using network IB\\n")
        step = b"[rank0]:[step %08d] loss 2.345678 lr 1.000e-04 grad_norm 0.98765 tokens/s 123456.7 xxxxxxxxx\\n"
        data, code = init + b"".join(step % i for i in range(int(mb * 1e6 / 100))), 0
    view = memoryview(data)
    start = time.monotonic()
    for i in range(0, len(view), 8192):
        chunk = view[i:i + 8192]
        while chunk:
            chunk = chunk[os.write(1, chunk):]
    wrote = time.monotonic()
    with open(report, "w") as f:
        json.dump({"bytes": len(data), "write_s": wrote - start, "exit_at": time.monotonic()}, f)
    os._exit(code)
""")

DRIVER = textwrap.dedent("""\
    import json, os, sys, time
    mode, report, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    from rdmadoctor import supervise as c
    import rdmadoctor.logs, rdmadoctor.output.text  # imported before, as the CLI has them
    if mode == "passthrough":
        code = c.Child(argv, dict(os.environ), c.Sink(1), c.Sink(2)).run().exit_code
    else:
        code = c.run_job(argv, no_gate=True)
    with open(report, "w") as f:
        json.dump({"code": code, "return_at": time.monotonic()}, f)
    sys.exit(code)
""")


def one(mode: str, kind: str, args: argparse.Namespace, tmp: Path) -> dict:
    child_report, ours = tmp / "child.json", tmp / "ours.json"
    for p in (child_report, ours):
        p.unlink(missing_ok=True)
    child = [sys.executable, "-c", CHILD, kind, str(args.mb), str(args.payload), str(child_report)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    env["RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    if mode == "bare":
        cmd = child
    elif mode == "pipe":
        cmd = ["sh", "-c", '"$@" | cat', "sh", *child]
    elif mode == "cli":
        cmd = [sys.executable, "-m", "rdmadoctor", "run", "--no-gate", "--", *child]
    else:
        cmd = [sys.executable, "-c", DRIVER, mode, str(ours), *child]
    with open(os.devnull, "wb") as null:
        proc = subprocess.run(cmd, stdout=null, stderr=null, env=env, timeout=args.timeout)
    ended = time.monotonic()
    kid = json.loads(child_report.read_text())
    row = {"mode": mode, "kind": kind, "bytes": kid["bytes"], "write_s": kid["write_s"], "code": proc.returncode,
           "exit_delay_s": None}
    if mode == "cli":
        row["exit_delay_s"] = ended - kid["exit_at"]
    elif mode in ("run", "passthrough"):
        row["exit_delay_s"] = json.loads(ours.read_text())["return_at"] - kid["exit_at"]
    return row


GIL_PROBE = textwrap.dedent("""\
    import os, random, sys, time
    from rdmadoctor.logs import Diagnoser
    from rdmadoctor.supervise import diagnosis
    rng = random.Random(33)
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(4096)]
    batch = b"".join(b"node%d:%d:%d [0] enqueue.cc:123 NCCL WARN %s\\n" % (i % 64, 4000, i, b" ".join(rng.choices(words, k=400))[:2000])
                     for i in range(512))
    mode = sys.argv[1]
    if mode == "eager":
        diagnosis.POUR_S = 0.0
    d = diagnosis.Diagnosing(Diagnoser()) if mode != "none" else None
    null = os.open(os.devnull, os.O_WRONLY)
    r, w = os.pipe()
    small = b"x" * 4096
    n, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < 3.0:  # a copy loop's turn: poll, read, write (each gives the lock up)
        os.write(w, small); os.read(r, 65536); os.write(null, batch)
        n += 1
        if d is not None:
            d.feed(batch, "job")
    print(round(n * len(batch) / 1e6 / (time.monotonic() - t0)))
""")


def gil(args: argparse.Namespace) -> int:
    names = {"none": "no diagnosis", "eager": "diagnosis, never giving way", "run": "diagnosis as run reads (gives way)"}
    got: dict[str, list[int]] = {m: [] for m in names}
    for _ in range(args.repeat):
        for mode in names:
            out = subprocess.run([sys.executable, "-c", GIL_PROBE, mode], capture_output=True, text=True, check=True,
                                 timeout=args.timeout)
            got[mode].append(int(out.stdout.split()[-1]))
    rows = {m: statistics.median(v) for m, v in got.items()}
    if args.json:
        print(json.dumps({"gil": rows, "runs": got}, indent=2))
        return 0
    for mode, name in names.items():
        print(f"{name:40} {rows[mode]:>10.0f} MB/s copied  (runs: {', '.join(str(v) for v in got[mode])})")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=40.0, help="MB the warn and steps workloads write (default 40)")
    ap.add_argument("--payload", type=int, default=2000, help="characters of a WARN line's payload (default 2000)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each, the median reported (default 3)")
    ap.add_argument("--kinds", default="warn,anchor,steps", help="workloads (default warn,anchor,steps)")
    ap.add_argument("--modes", default="bare,pipe,passthrough,run,cli", help="configurations (default bare,pipe,passthrough,run,cli)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds one run may take (default 600)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--gil", action="store_true", help="the copy loop's rate with and without the diagnosis thread, apart from the job")
    args = ap.parse_args()
    if args.gil:
        return gil(args)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for kind in args.kinds.split(","):
            for mode in args.modes.split(","):
                runs = [one(mode, kind, args, Path(d)) for _ in range(args.repeat)]
                row = dict(runs[0])
                row["write_s"] = statistics.median(r["write_s"] for r in runs)
                if row["exit_delay_s"] is not None:
                    row["exit_delay_s"] = statistics.median(r["exit_delay_s"] for r in runs)
                    row["exit_delay_max_s"] = max(r["exit_delay_s"] for r in runs)
                rows.append(row)
    for row in rows:
        bare = next((r for r in rows if r["kind"] == row["kind"] and r["mode"] == "bare"), None)
        row["vs_bare"] = round(row["write_s"] / bare["write_s"], 2) if bare and bare["write_s"] > 0 else None
        pipe = next((r for r in rows if r["kind"] == row["kind"] and r["mode"] == "pipe"), None)
        row["vs_pipe"] = round(row["write_s"] / pipe["write_s"], 2) if pipe and pipe["write_s"] > 0 else None
        row["mb_per_s"] = round(row["bytes"] / 1e6 / row["write_s"], 1) if row["write_s"] > 0 else None
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    if args.json:
        print(json.dumps({"args": vars(args), "load": load, "rows": rows}, indent=2))
        return 0
    print(f"median of {args.repeat}; load average {load:.2f} (other work on the machine slows every column)"
          if load is not None else f"median of {args.repeat}")
    print(f"{'workload':8} {'mode':12} {'MB':>6} {'job write s':>12} {'MB/s':>8} {'x bare':>7} {'x pipe':>7} {'exit delay s':>13} {'(max)':>7} {'status':>6}")
    for r in rows:
        delay = "-" if r["exit_delay_s"] is None else f"{r['exit_delay_s']:.3f}"
        worst = "-" if r.get("exit_delay_max_s") is None else f"{r['exit_delay_max_s']:.3f}"
        print(f"{r['kind']:8} {r['mode']:12} {r['bytes'] / 1e6:>6.1f} {r['write_s']:>12.3f} {r['mb_per_s'] or 0:>8.1f} "
              f"{r['vs_bare'] or 0:>7.2f} {r['vs_pipe'] or 0:>7.2f} {delay:>13} {worst:>7} {r['code']:>6}")
    print("job write s: the child's first write to its last write returning; x bare, x pipe: that over the bare run's, the pipe run's; "
          "exit delay: the child's exit to rdmadoctor's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
