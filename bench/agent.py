"""What `rdmadoctor agent` costs on a node: resident memory and CPU seconds per cycle.

    python bench/agent.py [--cycles 200] [--interval 0.05] [--example hgx-h100-ib] [--idle 10]

Runs the real agent as a child process (the interpreter of the installed `rdmadoctor`, or this
one) on the 8-GPU example, publishing to an NFD features dir in a temp folder, writing
--report-file and serving /metrics, with a short interval so many cycles pass quickly. With
psutil on the child:

- ``rss_mib_first`` after the first cycle, ``rss_mib_end`` after all of them (growth = a leak);
- ``cpu_s_per_cycle``: the child's CPU time (user + system, all threads) between the first
  cycle and the end, divided by the cycles in between (from the agent's own count, logged when
  it stops); ``cpu_percent_at_60s`` = that per 60 s interval, the default;
- ``idle_cpu_percent``: a second child with a one-hour interval, measured for --idle seconds
  after its first cycle: the cost of the waiting itself (thread wake-ups, the metrics server);
- ``scrape_ms``: wall time of one /metrics scrape (median of 20).

Prints one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import psutil


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def python() -> str:
    """The interpreter of the installed console script, as a node would run it."""
    exe = shutil.which("rdmadoctor")
    if exe:
        with open(exe, "rb") as f:
            first = f.readline().decode(errors="replace").strip()
        if first.startswith("#!") and os.path.exists(first[2:].split()[0]):
            return first[2:].split()[0]
    return sys.executable


def start(args: list[str], tmp: str, name: str) -> tuple[psutil.Popen, str, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    features = os.path.join(tmp, name, "features.d")
    os.makedirs(features)
    env = dict(os.environ)
    env.pop("RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD", None)  # as on a node
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    err = os.path.join(tmp, name, "stderr")
    cmd = [
        python(), "-m", "rdmadoctor", "agent", "--publish", "nfd", "--features-dir", features,
        "--report-file", os.path.join(tmp, name, "report.json"), "--metrics-address", "127.0.0.1",
        "--metrics-port", str(port), "--log-format", "json", *args,
    ]
    proc = psutil.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(err, "w"), env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"agent exited {proc.returncode}: {open(err).read()}")
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=1) as r:
                if r.status == 200:
                    return proc, url, err
        except OSError:
            pass
        time.sleep(0.01)
    proc.kill()
    raise SystemExit("agent never became healthy")


def cpu(proc: psutil.Popen) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def stop(proc: psutil.Popen, err: str) -> int:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)
    for line in reversed(open(err).read().splitlines()):
        rec = json.loads(line)
        if rec.get("msg") == "agent stopped":
            return int(rec["cycles"])
    raise SystemExit(f"no 'agent stopped' line: {open(err).read()}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=200)
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("--example", default="hgx-h100-ib")
    ap.add_argument("--profile", default="hgx-8gpu-ndr")
    ap.add_argument("--idle", type=float, default=10.0, help="seconds to measure the idle agent (0: skip)")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="rdmadoctor-bench-agent-")
    try:
        proc, url, err = start(["--example", a.example, "--profile", a.profile, "--interval", str(a.interval)], tmp, "busy")
        rss_first = proc.memory_info().rss
        cpu_first = cpu(proc)
        t_first = time.monotonic()
        time.sleep(a.cycles * a.interval)
        scrapes = []
        for _ in range(20):
            t0 = time.perf_counter()
            with urllib.request.urlopen(url + "/metrics", timeout=2) as r:
                body = r.read()
            scrapes.append((time.perf_counter() - t0) * 1000)
        cpu_end = cpu(proc)
        rss_end = proc.memory_info().rss
        uss_end = getattr(proc.memory_full_info(), "uss", rss_end)
        wall = time.monotonic() - t_first
        cycles = stop(proc, err)
        per_cycle = (cpu_end - cpu_first) / max(1, cycles - 1)

        idle_pct = None
        if a.idle > 0:
            iproc, _, ierr = start(["--example", a.example, "--profile", a.profile, "--interval", "3600"], tmp, "idle")
            c0 = cpu(iproc)
            time.sleep(a.idle)
            idle_pct = round((cpu(iproc) - c0) / a.idle * 100, 3)
            stop(iproc, ierr)

        out = {
            "bench": "agent",
            "example": a.example,
            "interval_s": a.interval,
            "cycles": cycles,
            "wall_s": round(wall, 2),
            "rss_mib_first": round(rss_first / 2**20, 1),
            "rss_mib_end": round(rss_end / 2**20, 1),
            "uss_mib_end": round(uss_end / 2**20, 1),
            "cpu_s_per_cycle": round(per_cycle, 4),
            "cpu_percent_at_60s": round(per_cycle / 60 * 100, 4),
            "idle_cpu_percent": idle_pct,
            "scrape_ms_median": round(statistics.median(scrapes), 2),
            "metrics_bytes": len(body),
            "python": sys.version.split()[0],
            "loadavg_1m": round(os.getloadavg()[0], 2),
        }
        print(json.dumps(out))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
