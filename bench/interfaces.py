"""What reading the network interfaces costs a cold `rdmadoctor check`, measured as users run it.

    python bench/interfaces.py [-n 30] [--before DIR]

`nccl.env` reads the interfaces of the job's network namespace only when a verdict needs them
(NCCL_SOCKET_IFNAME names some, or a socket pool: `--profile tcp`). Each run is a fresh process:

  (a) `python -c pass`, the floor;
  (b) `rdmadoctor check --profile tcp --only nccl.env --json` on this host: reads the interfaces;
  (c) `rdmadoctor check --only nccl.env --json`: the same command that does not read them;
  (d) each reader alone in a fresh process (import + one read): `_psutil_interfaces` and
      `_netlink_interfaces` of rdmadoctor.host.net (behind Host.interfaces(); older versions
      kept them in rdmadoctor.checks.nccl);
  (e) `rdmadoctor check --profile tcp --json`: the whole cold check of a socket pool.

--before DIR adds (b) and (e) run with another version's sources first on PYTHONPATH (DIR holds
its rdmadoctor/ with a `checks` link to its checks/, e.g. from `git archive REV rdmadoctor checks`),
so a change is measured against what it replaces in the same run.

The series are interleaved (a, b, c, d..., a, b, ...) so that load on the machine falls on all of
them alike; min and median of each are printed, and (b)-(c), what the interfaces cost a check.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

RD = [sys.executable, "-c", "from rdmadoctor.cli import main; main()"]
READER = "import {module} as n; r = getattr(n, {name!r}); print(len(r()))"


def series() -> dict[str, list[str]]:
    import importlib

    try:
        module = "rdmadoctor.host.net"
        n = importlib.import_module(module)
    except ImportError:  # a version before the readers moved behind the Host
        module = "rdmadoctor.checks.nccl"
        n = importlib.import_module(module)

    out = {
        "(a) python -c pass": [sys.executable, "-c", "pass"],
        "(b) check --profile tcp --only nccl.env": RD[:] + ["check", "--profile", "tcp", "--only", "nccl.env", "--json"],
        "(c) check --only nccl.env": RD[:] + ["check", "--only", "nccl.env", "--json"],
        "(e) check --profile tcp (every check)": RD[:] + ["check", "--profile", "tcp", "--json"],
    }
    for name in ("_psutil_interfaces", "_netlink_interfaces"):
        if hasattr(n, name):
            out[f"(d) {name}()"] = [sys.executable, "-c", READER.format(module=module, name=name)]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=30)
    ap.add_argument("--before", metavar="DIR", help="another version's sources to measure (b) and (e) with")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "NCCL_SOCKET_IFNAME", "PYTHONPATH")}
    runs = {name: (argv, env) for name, argv in series().items()}
    if args.before:
        before = {**env, "PYTHONPATH": str(Path(args.before).resolve())}
        for name in ("(b) check --profile tcp --only nccl.env", "(e) check --profile tcp (every check)"):
            runs[name.replace(")", ", before)", 1)] = (runs[name][0], before)
    times: dict[str, list[float]] = {k: [] for k in runs}
    for i in range(args.n + 1):
        for name, (argv, child_env) in runs.items():
            t = time.perf_counter()
            proc = subprocess.run(argv, env=child_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=Path.home())
            dt = time.perf_counter() - t
            if proc.returncode not in (0, 1, 2) or b"Traceback" in proc.stderr:
                sys.exit(f"{name}: exit {proc.returncode}\n{proc.stderr.decode()}")
            if i:  # the first round warms the page cache
                times[name].append(dt)
    print(f"{args.n} cold runs each, interleaved; load average {os.getloadavg()[0]:.2f}")
    for name, ts in times.items():
        print(f"  {name:<48} min {min(ts) * 1000:7.1f} ms   median {statistics.median(ts) * 1000:7.1f} ms")
    b, c = times["(b) check --profile tcp --only nccl.env"], times["(c) check --only nccl.env"]
    print(f"  interfaces' cost in a check (b - c)                min {(min(b) - min(c)) * 1000:7.1f} ms   "
          f"median {(statistics.median(b) - statistics.median(c)) * 1000:7.1f} ms")
    for name in ("(b) check --profile tcp --only nccl.env", "(e) check --profile tcp (every check)"):
        old = times.get(name.replace(")", ", before)", 1))
        if old:
            print(f"  {name}: before / after   min {min(old) / min(times[name]):.2f}x   "
                  f"median {statistics.median(old) / statistics.median(times[name]):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
