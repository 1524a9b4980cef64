"""``explain``, ``list-checks``, ``examples`` and ``topo``."""

from __future__ import annotations

import json
import sys

from rdmadoctor.cli.errors import fail_usage, say
from rdmadoctor.core.words import count

# How `explain` and `list-checks` name a code's kind (rdmadoctor.core.model.KINDS).
KIND_WORDS = {"problem": "problem", "unknown": "could not decide", "info": "information"}
KIND_SEVERITIES_TEXT = {
    "problem": "raised only when the problem was seen, as an error or a warning",
    "unknown": "raised when a fact could not be read or decided (severity unknown, exit 2 unless a problem is also seen)",
    "info": "informational: something that looks fine or is worth knowing (severity info, shown with --verbose)",
}
CONTRACT = (
    "Codes are a stable contract: alerts, dashboards and tickets key on them "
    "(rdmadoctor_finding{code=...}, the JSON report). A code keeps its meaning and its kind for life; "
    "renaming one is a breaking change."
)


def _load():
    from rdmadoctor.engine.registry import load_checks

    return load_checks(listing=True)  # plugins.load and its codes are listed even when every plugin loaded


def _all_codes(checks) -> dict:
    """Code string -> (the Code, what raises it): every code of the registry (rdmadoctor.core.codes:
    the built-in ones and those plugins registered), and a plugin check's codes it did not register."""
    raisers: dict = {}
    for c in checks:
        for code in c.codes:
            raisers.setdefault(code.code, (code, c.id))
    from rdmadoctor.preflight import master_codes

    for code in master_codes():
        raisers.setdefault(code.code, (code, "preflight --wait-for-master"))
    from rdmadoctor.gang.compare import gang_codes

    for code in gang_codes():
        raisers.setdefault(code.code, (code, "preflight --gang"))
    from rdmadoctor.logs import kb

    for code in kb.codes():
        raisers.setdefault(code.code, (code, "logs.diagnose"))
    from rdmadoctor.core import codes as registry

    codes: dict = {code.code: (code, raisers.get(code.code, (None, "a plugin"))[1]) for code in registry.all_codes()}
    for name, pair in raisers.items():
        codes.setdefault(name, pair)
    return codes


def _patterns_of(code: str) -> list:
    from rdmadoctor.logs import kb

    return [p for p in kb.patterns() if p.code == code]


def _code_json(code, check=None) -> dict:
    return {
        "code": code.code,
        "kind": code.kind,
        "title": code.title,
        "condition": code.condition or (check.condition if check is not None else None),
    }


def _write(lines) -> None:
    from rdmadoctor.output.text import write_lines

    write_lines(lines)


def _para(text: str, indent: int = 0, style: str = "") -> list:
    """A paragraph of a code's meaning or fix: indented lines are commands or YAML, kept whole."""
    return [(indent, [(ln, style)], ln[:1].isspace() or ln.startswith("- ")) for ln in text.rstrip().splitlines()]


def run_explain(name: str) -> int:
    checks, _ = _load()
    by_id = {c.id: c for c in checks}
    codes = _all_codes(checks)
    key = name.strip()
    if key.lower() in by_id:
        return _explain_check(by_id[key.lower()])
    if key.upper() not in codes:
        from difflib import get_close_matches

        up, low = key.upper(), key.lower()
        close: list[str] = []  # the codes that start with it, then those that hold it, then its first word
        for test in (lambda c: c.startswith(up), lambda c: up in c, lambda c: c.startswith(up.split("_")[0])):
            close += sorted(c for c in codes if up and c not in close and test(c))
        # The checks first: `explain ib` is after the ib.* checks, `explain logs` after logs.diagnose.
        family = [i for i in by_id if low and i.split(".")[0] == low.rstrip(".")]
        near = [i for i in by_id if low and low in i and i not in family]
        near += [i for i in get_close_matches(low, list(by_id), n=3, cutoff=0.6) if i not in near and i not in family]
        if family:
            hint = (f"{low.rstrip('.')} is a family of checks: {', '.join(family)} "
                    f"(`rdmadoctor explain {family[0]}` explains one; `--only {low.rstrip('.')}` runs them all)")
            if close:
                hint += f"; codes: {', '.join(close[:5])}{', ...' if len(close) > 5 else ''}"
        elif near or close:
            hint = f"did you mean {', '.join((near + close)[:6])}?"
        else:
            hint = "`rdmadoctor list-checks` lists every check and its codes"
        return fail_usage(f"no code or check named {name!r}", hint)
    c, check_id = codes[key.upper()]
    lines = [
        (0, [(f"{c.code}: {c.title}", "bold")], False),
        (0, [(f"kind: {KIND_WORDS.get(c.kind, c.kind)} ({KIND_SEVERITIES_TEXT.get(c.kind, '')})", "dim")], False),
        (0, [(f"raised by check {check_id}", "dim")], False),
        (0, [], False),
        (0, [("What it means", "bold")], False),
        *_para(c.meaning),
        (0, [], False),
        (0, [("How to fix it" if c.kind == "problem" else "What to do", "bold")], False),
        *_para(c.fix),
        (0, [], False),
    ]
    rows = _patterns_of(c.code)
    if rows:
        lines.append((0, [("In a job's log (`rdmadoctor diagnose`) it comes from", "bold")], False))
        for p in rows:
            lines.append((2, [(p.id, "bold"), (f"  ({p.severity}{', a follow-on of an earlier error' if p.symptom else ''}) ", "dim"),
                              (p.meaning, "")], False))
            if p.examples:
                lines.append((4, [(p.examples[0], "")], True))
            lines.append((4, [("source: " + p.ref, "dim")], False))
        lines.append((0, [], False))
    lines.append((0, [(CONTRACT, "dim")], False))
    _write(lines)
    return 0


def _explain_check(chk) -> int:
    facts = [f"scope: {chk.scope}", f"condition: {chk.condition or 'none'}", f"preflight gates on it: {'yes' if chk.gate else 'no'}"]
    lines = [
        (0, [(f"{chk.id}: {chk.title}", "bold")], False),
        (0, [("; ".join(facts), "dim")], False),
    ]
    if chk.description:
        lines += [(0, [], False), *_para(chk.description)]
    lines += [(0, [], False), (0, [("Codes", "bold")], False)]
    width = max((len(code.code) for code in chk.codes), default=0)
    for code in chk.codes:
        lines.append((2, [(code.code.ljust(width), "bold"), (f"  {KIND_WORDS.get(code.kind, code.kind)}: ", "dim"), (code.title, "")], False))
    if not chk.codes:
        lines.append((2, [("(none declared)", "dim")], False))
    lines += [(0, [], False), (0, [("`rdmadoctor explain CODE` tells more about each code. " + CONTRACT, "dim")], False)]
    _write(lines)
    return 0


def run_list_checks(as_json: bool) -> int:
    checks, errors = _load()
    rows = [
        {
            "id": c.id,
            "title": c.title,
            "description": c.description,
            "scope": c.scope,
            "condition": c.condition,
            "gate": bool(c.gate),
            "codes": [_code_json(k, c) for k in c.codes],
            "needs": [n.name for n in c.needs],
            "module": getattr(c.probe, "__module__", ""),
        }
        for c in checks
    ]
    if as_json:
        sys.stdout.write(
            json.dumps({"checks": rows, "kinds": KIND_WORDS, "contract": CONTRACT, "plugin_errors": errors}, indent=2) + "\n"
        )
        return 0
    from rich.table import Table

    from rdmadoctor.output.text import console

    table = Table(header_style="bold", show_lines=False)
    table.add_column("check")
    table.add_column("what it establishes")
    table.add_column("codes")
    for r in rows:
        table.add_row(r["id"], r["description"] or r["title"], "\n".join(f"{k['code']} ({KIND_WORDS.get(k['kind'], k['kind'])})" for k in r["codes"]))
    console().print(table)
    for e in errors:
        say(f"warning: {e}")
    return 0


# The knowledge base's sources (rdmadoctor.logs.kb.SOURCES) as people name them.
SOURCE_TITLES = {"nccl": "NCCL", "verbs": "libibverbs", "ibtools": "IB tools", "pytorch": "PyTorch", "kernel": "kernel",
                 "ucx": "UCX", "nvshmem": "NVSHMEM", "ofi": "aws-ofi-nccl", "nccltests": "nccl-tests", "gloo": "Gloo",
                 "mpi": "MPI launchers and ssh", "k8s": "Kubernetes"}


def run_list_patterns(as_json: bool, code: str | None = None) -> int:
    """The knowledge base: every message rdmadoctor recognises in a log, its code and its source."""
    from rdmadoctor.logs import kb

    rows = []
    for mod_name, mod in zip(kb.SOURCES, kb.modules()):
        for p in mod.PATTERNS:
            if code and p.code != code.upper():
                continue
            rows.append({
                "id": p.id, "source": mod_name, "code": p.code, "severity": p.severity, "symptom": bool(p.symptom), "symptom_when": dict(p.symptom_when),
                "needle": p.needle, "regex": p.regex, "subject": p.subject, "meaning": p.meaning, "fix": p.fix,
                "ref": p.ref, "versions": p.versions, "examples": list(p.examples),
            })
    if code and not rows:
        return fail_usage(f"no pattern gives {code!r}", "`rdmadoctor list-patterns` lists them all")
    if as_json:
        sys.stdout.write(json.dumps({"patterns": rows, "sources": list(kb.SOURCES), "contract": CONTRACT}, indent=2) + "\n")
        return 0
    from rdmadoctor.output.text import console, safe

    # One table per source, in the order the sources are tried; each row says where its message
    # comes from (the NCCL or rdma-core file and versions, or the issue), as `explain CODE` does.
    # A terminal gets rich tables; a pipe a line per pattern, its columns aligned and none cut, and
    # the example message under it (both are too long for one line).
    header = ("pattern", "code", "severity", "source", "message (an example)")
    tables = []
    for source in kb.SOURCES:
        mine = [r for r in rows if r["source"] == source]
        if not mine:
            continue
        body = []
        for r in mine:
            severity = r["severity"] + (" (follow-on)" if r["symptom"] else "")
            if r["symptom_when"]:
                severity += " (follow-on when " + ", ".join(f"{k}={v}" for k, v in r["symptom_when"].items()) + ")"
            body.append((r["id"], r["code"], severity, r["ref"], safe(r["examples"][0]) if r["examples"] else ""))
        tables.append((f"{SOURCE_TITLES.get(source, source)}: {count(len(mine), 'pattern')}", body))
    out = console()
    if out.is_terminal:
        from rich.table import Table

        for title, body in tables:
            # pattern, code and severity share the first column: ids and codes are never folded.
            table = Table(title=title, title_justify="left", title_style="bold", header_style="bold", show_lines=True)
            table.add_column("pattern / code / severity", min_width=max(len(c) for row in body for c in row[:2]))
            table.add_column(header[4], overflow="fold", ratio=1)
            table.add_column(header[3], overflow="fold", ratio=1)
            for row in body:
                table.add_row("\n".join(row[:3]), row[4], row[3])
            out.print(table, markup=False, highlight=False)
            out.print()
    else:
        text = []
        for title, body in tables:
            widths = [max(len(row[i]) for row in [header, *body]) for i in range(3)]
            text.append(title + "\n")
            for row in [header, *body]:
                text.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[3] + "\n")
                if row[4]:
                    text.append(" " * (widths[0] + 2) + row[4] + "\n")
            text.append("\n")
        sys.stdout.write("".join(text))
    _write([(0, [(f"{count(len(rows), 'pattern')}. `rdmadoctor explain CODE` tells what a code means and how to fix it; "
                  "--json gives each pattern's regex, fix and source.", "dim")], False)])
    return 0


def run_schema() -> int:
    from importlib.resources import files

    sys.stdout.write(files("rdmadoctor.output").joinpath("schema.json").read_text(encoding="utf-8"))
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
    res = next((r for r in diag.results if r.id == "gpu.topology"), None)  # plugins.load may run first
    if res is not None and res.status == "unknown" and res.reason:
        say(f"rdmadoctor: {res.reason}")
        return 2
    return 0
