"""What `diagnose` says of every fixture log, as JSON, to hold a speed change to the same results.

    python bench/same_findings.py OUT.json [--pkg DIR] [EXTRA_LOG ...]

Reads every file under tests/fixtures/{logs,frames,silent,heldout} and ../shared/realworld (and
the extra logs given, such as the ones ``bench/diagnose.py --keep`` wrote) with
``rdmadoctor.logs.diagnose_paths``, imported from ``--pkg`` (a folder that holds an ``rdmadoctor``
package: an export of the base commit, ``git archive BASE rdmadoctor | tar -x -C DIR``) or from
this checkout, and writes each file's findings, ``nccl`` block, notes, sources, settings, whether
anything was recognised and how many tool outputs were read. Run it for the base and for the
change, then ``cmp`` the two files.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOTS = ("tests/fixtures/logs", "tests/fixtures/frames", "tests/fixtures/silent", "tests/fixtures/heldout", "../shared/realworld")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--pkg", default=os.path.dirname(HERE), help="the folder that holds the rdmadoctor package to run")
    ap.add_argument("extra", nargs="*", help="more logs to read")
    a = ap.parse_args()
    sys.path.insert(0, a.pkg)
    from rdmadoctor.logs import diagnose_paths

    extra = [os.path.abspath(x) for x in a.extra]
    os.chdir(os.path.dirname(HERE))
    files = sorted(os.path.join(dp, f) for r in ROOTS for dp, _, fs in os.walk(r) for f in fs) + extra
    out = {}
    for p in files:
        d = diagnose_paths([p])
        out[p] = {"findings": [f.to_json() for f in d.findings], "nccl": d.nccl, "notes": d.notes, "sources": d.sources,
                  "settings": d.settings, "recognised": d.recognised, "segments": len(d.segments)}
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, sort_keys=True, default=str)
    print(f"{len(files)} files -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
