"""``explain``, ``list-checks``, ``examples`` and ``topo``."""

from __future__ import annotations

import json
import sys

from rdmadoctor.cli.errors import fail_usage


def _all_codes() -> dict:
    from rdmadoctor.engine.registry import load_checks

    checks, _ = load_checks()
    codes = {}
    for c in checks:
        for code in c.codes:
            codes.setdefault(code.code, (code, c.id))
    from rdmadoctor.preflight import master_codes

    for code in master_codes():
        codes.setdefault(code.code, (code, "preflight --wait-for-master"))
    return codes


def run_explain(code: str) -> int:
    from rich.console import Console
    from rich.text import Text

    codes = _all_codes()
    key = code.strip().upper()
    if key not in codes:
        close = [c for c in codes if key and (key in c or c.startswith(key.split("_")[0]))]
        hint = f"did you mean {', '.join(sorted(close)[:5])}?" if close else "`rdmadoctor list-checks` lists every code"
        return fail_usage(f"unknown code {code!r}", hint)
    c, check_id = codes[key]
    con = Console(highlight=False)
    con.print(Text(f"{c.code}: {c.title}", style="bold"))
    con.print(Text(f"raised by check {check_id}", style="dim"))
    con.print()
    con.print(Text("What it means", style="bold"))
    con.print(Text(c.meaning))
    con.print()
    con.print(Text("How to fix it", style="bold"))
    con.print(Text(c.fix))
    return 0


def run_list_checks(as_json: bool) -> int:
    from rdmadoctor.engine.registry import load_checks

    checks, errors = load_checks()
    rows = [
        {
            "id": c.id,
            "title": c.title,
            "description": c.description,
            "codes": [k.code for k in c.codes],
            "needs": [n.name for n in c.needs],
            "module": getattr(c.probe, "__module__", ""),
        }
        for c in checks
    ]
    if as_json:
        sys.stdout.write(json.dumps({"checks": rows, "plugin_errors": errors}, indent=2) + "\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(header_style="bold", show_lines=False)
    table.add_column("check")
    table.add_column("what it establishes")
    table.add_column("codes")
    for r in rows:
        table.add_row(r["id"], r["description"] or r["title"], "\n".join(r["codes"]))
    con = Console(highlight=False)
    con.print(table)
    for e in errors:
        Console(stderr=True).print(f"warning: {e}", style="yellow")
    return 0


def run_examples(as_json: bool) -> int:
    from rdmadoctor.examples import EXAMPLES

    if as_json:
        sys.stdout.write(json.dumps({"examples": EXAMPLES}, indent=2) + "\n")
        return 0
    for name, desc in EXAMPLES.items():
        sys.stdout.write(f"{name:<14} {desc}\n")
    sys.stdout.write("\nRun one: rdmadoctor check --example NAME\n")
    return 0


def run_topo(root=None, bundle=None, example=None, as_json=False) -> int:
    from rdmadoctor.runner import Options, UsageError, diagnose

    try:
        diag = diagnose(Options(root=root, bundle=bundle, example=example, only=["gpu.topology"]))
    except UsageError as e:
        return fail_usage(str(e), e.hint)
    topo = diag.report["inventory"].get("topology")
    if as_json:
        sys.stdout.write(json.dumps(topo, indent=2) + "\n")
        return 0
    from rdmadoctor.output.text import render_topology

    render_topology(topo)
    res = diag.results[0] if diag.results else None
    if res is not None and res.status == "unknown" and res.reason:
        sys.stderr.write(f"rdmadoctor: {res.reason}\n")
        return 2
    return 0
