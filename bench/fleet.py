"""What `rdmadoctor fleet` costs: N full reports read and compared, against a bare json.load loop.

    python bench/fleet.py [--count 10000] [--compact 10000] [--keep DIR]

Writes ``--count`` generated reports (the 8-GPU example's `check --json`, about 30 KB each, one
host name each, one node in 97 on other firmware) into a temp folder, then in this one process:

- ``bare_s``: a loop that only ``json.load``s every file (the floor any reader pays);
- ``fleet_s``: ``read_fleet`` over the folder (walk, read, parse, flatten, count, outliers);
- ``ratio`` = fleet_s / bare_s (the goal: at most 3), both runs in the same process and page cache
  (the bare loop runs first and again last; its faster run is used, so a warm cache favours it);
- ``peak_mib``: tracemalloc's peak of a second fleet pass (timed apart: tracing slows it) (memory held by the Python heap), and
  ``rss_mib`` the process' peak resident size after the reports (goal: under 200 MB), ``rss_mib_end``
  after the compact runs too;
- ``compact_s``: ``--compact`` Node objects with the compact fingerprint annotation (what
  `fleet --kube` reads once listed) read and compared (goal: under a second; one node in 97 differs:
  equal annotations are parsed once), and ``compact_distinct_s`` the same with every annotation
  different (the worst case).

Prints one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import shutil
import sys
import tempfile
import time
import tracemalloc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rdmadoctor.engine import fingerprint as F
from rdmadoctor.fleet import read_fleet
from rdmadoctor.fleet.compare import Fleet
from rdmadoctor.fleet.sources import ANNOTATION, from_nodes
from rdmadoctor.runner import Options, diagnose


def base_report() -> dict:
    return diagnose(Options(example="hgx-h100-ib", profile="hgx-8gpu-ndr")).report


def write_reports(folder: str, count: int) -> tuple[int, list[str]]:
    rep = base_report()
    odd = copy.deepcopy(rep)
    for p in odd["fingerprint"]["ports"]:
        p["fw_ver"] = "28.41.1000"
    plain, other = json.dumps(rep), json.dumps(odd)
    host = '"hgx-h100-017"'  # the hostname, and the node name the fleet reads
    assert '"node": "hgx-h100-017"' in plain
    names = []
    for i in range(count):
        text = (other if i % 97 == 5 else plain).replace(host, f'"gpu-{i:05d}"')
        name = os.path.join(folder, f"gpu-{i:05d}.json")
        with open(name, "w", encoding="utf-8") as f:
            f.write(text)
        names.append(name)
    return len(plain), names


def bare(names: list[str]) -> float:
    t = time.perf_counter()
    for name in names:
        with open(name, encoding="utf-8") as f:
            json.load(f)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--compact", type=int, default=10000)
    ap.add_argument("--keep", help="write the reports here and keep them")
    args = ap.parse_args()
    folder = args.keep or tempfile.mkdtemp(prefix="rdmadoctor-fleet-bench-")
    os.makedirs(folder, exist_ok=True)
    try:
        size, names = write_reports(folder, args.count)
        bare1 = bare(names)
        t = time.perf_counter()
        result = read_fleet(paths=[folder])
        fleet_s = time.perf_counter() - t
        bare_s = min(bare1, bare(names))
        # Memory in a pass of its own: tracemalloc slows every allocation several times over.
        tracemalloc.start()
        read_fleet(paths=[folder])
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        odd_nodes = {o["node"] for o in result["outliers"]}
        assert len(odd_nodes) == len([i for i in range(args.count) if i % 97 == 5]), len(odd_nodes)

        rss_reports = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        # Node objects as the API lists them, each with its annotation: the path of fleet --kube
        # after the list (sources.from_nodes, then the comparison).
        fp = base_report()["fingerprint"]
        plain = F.compact_text(F.compact(fp))
        odd_fp = copy.deepcopy(fp)
        odd_fp["ports"][0]["fw_ver"] = "28.41.1000"
        odd = F.compact_text(F.compact(odd_fp))
        nodes = [{"metadata": {"name": f"gpu-{i:05d}", "labels": {}, "annotations": {ANNOTATION: odd if i % 97 == 5 else plain}}}
                 for i in range(args.compact)]
        texts = [plain]
        t = time.perf_counter()
        fleet = Fleet()
        for node, pool, _labels, flat, signature, _time in from_nodes(iter(nodes), None):
            fleet.add(node, pool, flat, signature)
        compact_result = fleet.result()
        compact_s = time.perf_counter() - t
        assert len({o["node"] for o in compact_result["outliers"]}) == len([i for i in range(args.compact) if i % 97 == 5])
        # The worst case: every annotation distinct (here each node's kernel string), none shared.
        for i, n in enumerate(nodes):
            n["metadata"]["annotations"][ANNOTATION] = plain.replace('"kernel":"', f'"kernel":"{i}-', 1)
        t = time.perf_counter()
        fleet = Fleet()
        for node, pool, _labels, flat, signature, _time in from_nodes(iter(nodes), None):
            fleet.add(node, pool, flat, signature)
        fleet.result()
        distinct_s = time.perf_counter() - t
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps({
        "reports": args.count, "report_bytes": size, "bare_s": round(bare_s, 3), "fleet_s": round(fleet_s, 3),
        "ratio": round(fleet_s / bare_s, 2), "peak_mib": round(peak / 2**20, 1),
        "rss_mib": round(rss_reports, 1), "rss_mib_end": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "outlier_nodes": len(odd_nodes), "compact": args.compact, "compact_s": round(compact_s, 3), "compact_distinct_s": round(distinct_s, 3),
        "compact_bytes": len(texts[0]) if texts else 0,
    }))


if __name__ == "__main__":
    main()
