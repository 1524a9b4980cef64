"""Terminal rendering of a report (rich). Consumes only the report dict."""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any

STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "unknown": "magenta", "skip": "dim"}
ICON = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "unknown": "UNKN", "skip": "SKIP"}
SEV_STYLE = {"error": "red", "warning": "yellow", "unknown": "magenta", "info": "cyan"}

VERDICT = {
    "pass": "ready to train over RDMA",
    "warn": "usable, with warnings that may cost performance",
    "fail": "NOT ready: NCCL will fall back to TCP, hang or fail",
    "unknown": "could not decide: some facts are missing",
}


def _console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False, emoji=False)


def summary_line(rep: dict[str, Any]) -> str:
    s = rep["summary"]
    host = rep["host"]
    name = host.get("hostname") or host["label"]
    return (
        f"{rep['status'].upper()}: {name} ({host['kind']}, profile {rep['profile']}) is "
        f"{VERDICT.get(rep['status'], rep['status'])} - {s['errors']} error(s), {s['warnings']} warning(s), "
        f"{s['checks']} checks ({s['pass']} pass, {s['warn']} warn, {s['fail']} fail, "
        f"{s['unknown']} unknown, {s['skip']} skipped)"
    )


def render_report(rep: dict[str, Any], verbose: bool = False, console: Any = None) -> None:
    from rich.padding import Padding
    from rich.text import Text

    con = console or _console()
    status = rep["status"]
    con.print(Text(summary_line(rep), style=STYLE.get(status, "")))
    con.print()
    for chk in rep["checks"]:
        st = chk["status"]
        line = Text()
        line.append(f"[{ICON.get(st, st)}] ", style=STYLE.get(st, ""))
        line.append(f"{chk['id']:<16}", style="bold")
        line.append(chk["title"])
        if chk.get("reason"):
            line.append(f"  ({chk['reason']})", style="dim")
        con.print(line)
        for f in chk["findings"]:
            if f["severity"] == "info" and not verbose:
                continue
            sev = f["severity"]
            head = Text()
            head.append(f["code"], style=SEV_STYLE.get(sev, ""))
            head.append(" ")
            head.append(f["subject"], style="bold")
            head.append(": " + f["message"])
            con.print(Padding(head, (0, 0, 0, 4), expand=False))
            if f.get("remedy"):
                remedy = f["remedy"].rstrip()
                # Padding keeps wrapped lines indented under their finding.
                if "\n" in remedy:
                    con.print(Padding(Text("fix:", style="dim"), (0, 0, 0, 6), expand=False))
                    con.print(Padding(Text(remedy), (0, 0, 0, 8), expand=False))
                else:
                    con.print(Padding(Text("fix: " + remedy, style="dim"), (0, 0, 0, 6), expand=False))
    if rep.get("labels"):
        con.print()
        con.print("Node labels:", style="bold")
        for k, v in rep["labels"].items():
            con.print(Text(f"  {k}={v}"))
    for err in rep.get("plugin_errors", []):
        _console(stderr=True).print(Text(f"warning: {err}", style="yellow"))
    if rep["summary"]["errors"] or rep["summary"]["warnings"]:
        con.print()
        con.print("`rdmadoctor explain CODE` tells more about any code above.", style="dim")


def render_topology(topo: dict[str, Any] | None, console: Any = None) -> None:
    """The GPU x NIC matrix, laid out like `nvidia-smi topo -m`."""
    from rich.table import Table

    con = console or _console()
    if topo and topo.get("nics"):
        # Like nvidia-smi, never fold the matrix: widen past the terminal rather than crop columns.
        need = 8 + sum(max(len(n), 4) + 2 for n in topo["nics"]) + 6
        if con.width < need:
            con.width = need
    if not topo or not topo.get("gpus"):
        con.print("No GPU/NIC topology: no GPUs or no RDMA devices were found.")
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("")
    for nic in topo["nics"]:
        table.add_column(nic, no_wrap=True, min_width=len(nic))
    table.add_column("NUMA")
    for i, gpu in enumerate(topo["gpus"]):
        row = topo["gpu_nic"][i]
        numa = topo.get("gpu_numa", [None] * len(topo["gpus"]))[i]
        cells = []
        for rel in row:
            style = {"PIX": "green", "PXB": "green", "PHB": "yellow", "NODE": "yellow", "SYS": "red"}.get(rel or "", "")
            cells.append(f"[{style}]{rel or '?'}[/]" if style else (rel or "?"))
        table.add_row(gpu, *cells, "" if numa is None else str(numa))
    con.print(table)
    con.print()
    con.print(
        "  PIX  = at most one PCIe bridge (same switch)\n"
        "  PXB  = several PCIe bridges, no host bridge\n"
        "  PHB  = through a PCIe host bridge (the CPU)\n"
        "  NODE = across PCIe host bridges within one NUMA node\n"
        "  SYS  = across the SMP interconnect between NUMA nodes (QPI/UPI/xGMI)",
        style="dim",
    )
    src = topo.get("source")
    if src:
        con.print(f"  source: {src}", style="dim")
