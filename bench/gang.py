"""How long a gang of N members takes to meet on loopback (and with --bandwidth to measure).

    python bench/gang.py -n 64                 # the exchange alone: N processes, one odd member
    python bench/gang.py -n 64 --bandwidth     # plus two rounds of the TCP stream test (1 s each)
    python bench/gang.py -n 8 --cli            # N full `rdmadoctor preflight --gang --example ...` runs

Each member is a real process; the wall time runs from the first start to the last exit, so it
includes Python's start-up and, with --cli, each member's own checks.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MEMBER = """
import json, sys
from rdmadoctor.gang import session
rank, size, port, bw = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
odd = rank == size - 1
# With --bandwidth a socket pool (the built-in TCP test); the odd member differs in NCCL_PROTO.
facts = {"transport": "socket" if odd or bw else "rdma", "NCCL_PROTO": "Simple" if odd else None}
member = {"host": f"node-{rank}", "verdict": "go", "problems": [], "facts": facts}
if rank == 0:
    out = session.run_rank0(size=size, port=port, token="t", member=member, rails=[], timeout=300, bandwidth=bw)
else:
    out = session.run_member(rank=rank, size=size, host="127.0.0.1", port=port, token="t", member=member, rails=[],
                             timeout=300, bandwidth=bw)
print(json.dumps({"verdict": out["verdict"], "members": len(out["members"]), "slow": out["slow"],
                  "median": (out.get("bandwidth") or {}).get("median_gbps")}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("--bandwidth", action="store_true")
    ap.add_argument("--cli", action="store_true", help="full preflight runs (their checks included)")
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONPATH=str(ROOT))
    start = time.monotonic()
    procs = []
    for r in range(a.n):
        if a.cli:
            where = ["--gang-port", str(port)] if r == 0 else ["--gang-master", f"127.0.0.1:{port}"]
            argv = [sys.executable, "-m", "rdmadoctor", "preflight", "--example",
                    "roce-node" if r == a.n - 1 else "hgx-h100-ib", "--gang", "--gang-rank", str(r), "--gang-size",
                    str(a.n), "--gang-token", "t", *where, *(["--bandwidth"] if a.bandwidth else []), "--json"]
        else:
            argv = [sys.executable, "-c", MEMBER, str(r), str(a.n), str(port), "1" if a.bandwidth else "0"]
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env))
    outs = [p.communicate()[0] for p in procs]
    wall = time.monotonic() - start
    first = json.loads(outs[0])
    verdicts = {json.loads(o)["gang"]["verdict"] if a.cli else json.loads(o)["verdict"] for o in outs}
    print(f"{a.n} members{' with --bandwidth' if a.bandwidth else ''}{' (full preflight)' if a.cli else ''}: "
          f"{wall:.2f} s wall from the first start to the last exit; verdicts {sorted(verdicts)}; "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    if not a.cli:
        print(f"rank 0 saw {first['members']} members; bandwidth median {first['median']} Gb/s; slow {first['slow']}")


if __name__ == "__main__":
    main()
