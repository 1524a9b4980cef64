"""How long `rdmadoctor check` takes, measured the way users run it: a fresh process each time.

    python bench/run.py [-n 20] [--vfs 512] [--no-collect]

`check` runs every minute on every node and in init containers, so its cost is mostly Python
start-up plus imports. This script measures, in one run and with the interpreter of the installed
`rdmadoctor` console script:

  (a) `python -c pass`: the floor, N runs (min and median);
  (b) `rdmadoctor check --example hgx-h100-ib --json`, cold (a new process per run), N runs;
      (b)/(a) should stay <= 4.5x. If the example bundles are not built yet, a bundle of the same
      node is generated with rdmadoctor.fixturegen and read with --bundle (the table says so);
  (c) `rdmadoctor check --bundle <dir> --json` on a generated HGX node with 512 SR-IOV VFs
      (8 GPUs, 10 PFs; rdmadoctor.fixturegen), target < 1 s;
  (d) `rdmadoctor collect --root <that node>`: time and bundle size (target < 5 MiB), and
      `check --bundle` of that .tar.gz (informative: a tar is read through gzip);
  and `python -X importtime` of run (b): the 10 modules that cost most, to show where time goes.

One untimed warm-up precedes each series (page cache, bytecode). PYTHONDONTWRITEBYTECODE is
removed from the children's environment: an installed package has its .pyc files, and a source
tree without them would measure the compiler. Every child gets
RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD unset, as on a node. The machine's load average is recorded
with the figures: other work on the machine shows in the medians first, so the min is the
figure that says what the code costs.

Writes bench/results.json and prints a table. Exit status 0 when every target is met, else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EXAMPLE = "hgx-h100-ib"
RATIO_TARGET = 4.5  # issue 7: 4.1x before the move into layers; subpackages must not add imports
SRIOV_TARGET_S = 1.0
BUNDLE_TARGET_BYTES = 5 * 1024 * 1024


def console_script() -> tuple[str, str]:
    """(path of the `rdmadoctor` script, the interpreter its #! line names)."""
    script = shutil.which("rdmadoctor") or str(Path(sys.executable).parent / "rdmadoctor")
    if not os.path.isfile(script):
        sys.exit("bench: no `rdmadoctor` console script on PATH or beside this python; pip install -e . first")
    with open(script, "rb") as f:
        first = f.readline().decode("utf-8", "replace").strip()
    interp = first[2:].strip().split()[0] if first.startswith("#!") else sys.executable
    return script, interp


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD", None)
    return env


def timed(argv: list[str], n: int, *, check_json: bool = False, env: dict[str, str] | None = None) -> dict:
    """min / median / all of n fresh runs (after one warm-up)."""
    env = env or child_env()

    def once() -> tuple[float, subprocess.CompletedProcess]:
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, env=env, cwd=tempfile.gettempdir())
        return time.perf_counter() - start, proc

    _, proc = once()
    last = proc
    if check_json:
        # exit 0/1/2 are verdicts; anything else, or no JSON, is a broken run not worth timing.
        if proc.returncode not in (0, 1, 2):
            sys.exit(f"bench: {' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode()[-2000:]}")
        json.loads(proc.stdout)
    runs = []
    for _ in range(n):
        took, last = once()
        runs.append(took)
    return {
        "argv": argv,
        "n": n,
        "min_s": min(runs),
        "median_s": statistics.median(runs),
        "runs_s": [round(r, 4) for r in runs],
        "exit_code": last.returncode,
        "stdout": last.stdout,
    }


def importtime(argv: list[str], interp: str) -> dict:
    """`python -X importtime` of one run: total, top 10 by own time, top-level cumulative."""
    proc = subprocess.run([interp, "-X", "importtime", *argv], capture_output=True, env=child_env(), cwd=tempfile.gettempdir())
    rows = []
    for line in proc.stderr.decode("utf-8", "replace").splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        parts = line[len("import time:"):].split("|")
        if len(parts) != 3:
            continue
        try:
            self_us, cum_us = int(parts[0]), int(parts[1])
        except ValueError:
            continue
        name = parts[2].rstrip()
        depth = (len(name) - len(name.lstrip(" "))) // 2
        rows.append({"module": name.strip(), "self_ms": self_us / 1000, "cumulative_ms": cum_us / 1000, "depth": depth})
    top_level = [r for r in rows if r["depth"] == 0]
    return {
        "total_ms": round(sum(r["cumulative_ms"] for r in top_level), 2),
        "modules": len(rows),
        "top_self": sorted(rows, key=lambda r: -r["self_ms"])[:10],
        "top_level_cumulative": sorted(top_level, key=lambda r: -r["cumulative_ms"])[:10],
    }


def generated_example(tmp: Path) -> str:
    from rdmadoctor import fixturegen

    path = tmp / f"{EXAMPLE}.tar.gz"
    fixturegen.write_tar(fixturegen.example_tree(EXAMPLE), str(path))
    return str(path)


def sriov_node(tmp: Path, vfs: int) -> Path:
    from rdmadoctor import fixturegen

    dest = tmp / f"hgx-{vfs}vf"
    fixturegen.write_dir(fixturegen.build(fixturegen.hgx_h100_ib(vfs_total=vfs)), str(dest))
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=20, help="runs per series for (a) and (b) (default 20)")
    ap.add_argument("--vfs", type=int, default=512, help="SR-IOV VFs of the big node (default 512)")
    ap.add_argument("--no-collect", action="store_true", help="skip (d)")
    ap.add_argument("-o", "--output", default=str(HERE / "results.json"))
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))

    script, interp = console_script()
    load_before = os.getloadavg()
    out: dict = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()},
        "console_script": script,
        "interpreter": interp,
    }
    with tempfile.TemporaryDirectory(prefix="rdmadoctor-bench-") as tmpdir:
        tmp = Path(tmpdir)
        bare = timed([interp, "-c", "pass"], args.n)

        from rdmadoctor.examples import HERE as EXAMPLES_DIR

        if os.path.isfile(os.path.join(EXAMPLES_DIR, f"{EXAMPLE}.tar.gz")):
            target, how = ["--example", EXAMPLE], f"--example {EXAMPLE}"
        else:
            path = generated_example(tmp)
            target, how = ["--bundle", path], f"--bundle <{EXAMPLE} generated by fixturegen; the shipped example is not built>"
        check_argv = [script, "check", *target, "--json"]
        cold = timed(check_argv, args.n, check_json=True)

        node = sriov_node(tmp, args.vfs)
        sriov = timed([script, "check", "--bundle", str(node), "--json"], max(5, args.n // 2), check_json=True)
        sriov_devices = len(json.loads(sriov["stdout"])["inventory"]["rdma_devices"] or [])

        collect_row = None
        if not args.no_collect:
            bundle = tmp / "collected.tar.gz"
            col = timed([script, "collect", "--root", str(node), "-o", str(bundle)], 3)
            tar_check = timed([script, "check", "--bundle", str(bundle), "--json"], 3, check_json=True)
            collect_row = {
                "collect_min_s": col["min_s"],
                "collect_median_s": col["median_s"],
                "bundle_bytes": bundle.stat().st_size,
                "check_tar_min_s": tar_check["min_s"],
                "check_tar_median_s": tar_check["median_s"],
                "check_tar_devices": len(json.loads(tar_check["stdout"])["inventory"]["rdma_devices"] or []),
            }

        imports = importtime(check_argv, interp)

    ratio_min = cold["min_s"] / bare["min_s"]
    ratio_median = cold["median_s"] / bare["median_s"]
    for row in (bare, cold, sriov):
        row.pop("stdout", None)
    out.update(
        {
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
            "bare_python": bare,
            "check_example": {**cold, "target": how},
            "ratio_min": ratio_min,
            "ratio_median": ratio_median,
            "ratio_target": RATIO_TARGET,
            "sriov": {**sriov, "vfs": args.vfs, "rdma_devices": sriov_devices, "target_s": SRIOV_TARGET_S},
            "collect": collect_row,
            "importtime": imports,
        }
    )
    ok = {
        "ratio (min)": ratio_min <= RATIO_TARGET,
        "ratio (median)": ratio_median <= RATIO_TARGET,
        f"{args.vfs} VFs (median)": sriov["median_s"] < SRIOV_TARGET_S,
    }
    if collect_row:
        ok["bundle size"] = collect_row["bundle_bytes"] < BUNDLE_TARGET_BYTES
    out["targets_met"] = ok
    Path(args.output).write_text(json.dumps(out, indent=2) + "\n")

    ms = lambda s: f"{s * 1000:7.1f} ms"  # noqa: E731
    print(f"rdmadoctor bench  ({interp}, {os.cpu_count()} CPUs, load {load_before[0]:.2f} -> {out['load_average_after'][0]:.2f})")
    print(f"{'what':58} {'min':>10} {'median':>10}  target")
    print(f"{'(a) python -c pass':58} {ms(bare['min_s'])} {ms(bare['median_s'])}")
    print(f"{'(b) check ' + how[:46] + ' --json':58} {ms(cold['min_s'])} {ms(cold['median_s'])}")
    print(f"{'    (b)/(a)':58} {ratio_min:9.2f}x {ratio_median:9.2f}x  <= {RATIO_TARGET:g}x  {'ok' if ok['ratio (min)'] and ok['ratio (median)'] else 'MISSED'}")
    print(f"{f'(c) check --bundle <{args.vfs}-VF node dir> --json ({sriov_devices} devices)':58} {ms(sriov['min_s'])} {ms(sriov['median_s'])}  < {SRIOV_TARGET_S:g} s  {'ok' if ok[f'{args.vfs} VFs (median)'] else 'MISSED'}")
    if collect_row:
        print(f"{'(d) collect --root <that node>':58} {ms(collect_row['collect_min_s'])} {ms(collect_row['collect_median_s'])}  bundle {collect_row['bundle_bytes'] / 1024:.0f} KiB (< 5 MiB {'ok' if ok['bundle size'] else 'MISSED'})")
        print(f"{'    check --bundle <that .tar.gz> --json':58} {ms(collect_row['check_tar_min_s'])} {ms(collect_row['check_tar_median_s'])}")
    print(f"\nimports of (b): {imports['total_ms']:.1f} ms in {imports['modules']} modules; top 10 by own time:")
    for r in imports["top_self"]:
        print(f"  {r['self_ms']:7.2f} ms  (cumulative {r['cumulative_ms']:7.2f} ms)  {r['module']}")
    print("top-level imports by cumulative time:")
    for r in imports["top_level_cumulative"]:
        print(f"  {r['cumulative_ms']:7.2f} ms  {r['module']}")
    print(f"\nwrote {args.output}")
    return 0 if all(ok.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
