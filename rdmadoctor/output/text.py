"""Text rendering of a report. Consumes only the report (read as rdmadoctor.core.report.Report).

Text is read two ways, and a pasted fix must run either way:

- through a pipe (``kubectl logs``, CI logs, ``| less``, a ticket): plain lines, never wrapped
  and never padded, so a ``printf ... > /etc/systemd/...`` fix stays one line; rich is not even
  imported (it costs ~25 ms, more than many checks);
- on a terminal: rich colours, prose wrapped to the width, but command and YAML lines (the
  indented lines of a remedy) and `backticked` commands are never broken: a line wider than the
  terminal is left for the terminal to soft-wrap, which copies back as one line.

A finding whose ``cause`` names another code in the same report is folded under that finding
("follows from IB_NO_DEVICES: ..."), and the headline counts root causes only.
"""

from __future__ import annotations

import re
import sys

from rdmadoctor.core.report import Finding, Report, read
from rdmadoctor.core.words import count as _plural
from rdmadoctor.core.words import listing

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any

STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "unknown": "magenta", "skip": "dim"}
ICON = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "unknown": "UNKN", "skip": "SKIP"}
SEV_STYLE = {"error": "red", "warning": "yellow", "unknown": "magenta", "info": "cyan"}
PROBLEM_SEVERITIES = ("error", "warning")

VERDICT = {
    "pass": "is ready to train over RDMA",
    "warn": "is usable, with warnings that may cost performance",
    "fail": "is NOT ready: NCCL will fall back to TCP, hang or fail",
}

# A word for wrapping: a `backticked command` (spaces and all), else a run of non-blanks.
_WORD = re.compile(r"(?:`[^`\n]*`|[^\s`]|`)+")

# One line of output: (indent, [(text, style)], verbatim[, hang]). Verbatim lines are never
# wrapped; a wrapped line continues ``hang`` columns further in.
if TYPE_CHECKING:
    Line = tuple[int, list[tuple[str, str]], bool] | tuple[int, list[tuple[str, str]], bool, int]


def _shown(f: Finding, verbose: bool) -> bool:
    return verbose or f.severity != "info"


def folding(rep: Report | dict[str, Any], verbose: bool = True) -> dict[Any, list[Any]]:
    """cause -> the findings folded under the first finding of that cause.

    The one rule of folding: the text report, preflight and ``run``'s gate, the NPD line and the
    metrics all fold by it, so every command names the same root causes.

    A finding is folded when its ``cause`` is the code of another shown finding of the same
    report and following causes from there does not lead back to it (a cycle folds nothing).
    A finding from a log names its cause exactly (``data.follows``: code and subject, a flushed
    work completion after the retry-exceeded one of the same code): it is folded under that one
    finding, keyed ``(code, subject)``.

    Given a :class:`Report`, the folded findings are its :class:`Finding` records; given a report
    dict (a caller that keeps dicts), the finding dicts themselves.
    """
    if not isinstance(rep, Report):
        return {k: [f.raw for f in fs] for k, fs in _folding(Report.from_json(rep), verbose).items()}
    return _folding(rep, verbose)


def _folding(rep: Report, verbose: bool) -> dict[Any, list[Finding]]:
    findings = [f for c in rep.checks for f in c.findings if verbose or f.severity != "info"]
    present = {f.code for f in findings}
    exact: dict[tuple, Finding] = {}  # (code, subject) -> its first finding (a follow-on may share both)
    for f in findings:
        exact.setdefault((f.code, f.subject), f)
    cause_of: dict[Any, str] = {}  # code -> its cause (a finding without a code has the key "")
    for f in findings:
        if f.cause and f.code not in cause_of and f.cause != f.code:
            cause_of[f.code] = f.cause
    out: dict[Any, list[Finding]] = {}
    for f in findings:
        cause = f.cause
        follows = f.data.get("follows") or {}
        target = exact.get((cause, follows.get("subject"))) if cause and isinstance(follows, dict) else None
        if target is not None and target is not f and not _follows_exactly(target):
            out.setdefault((cause, follows.get("subject")), []).append(f)
            continue
        if not cause or cause == f.code or cause not in present:
            continue
        seen, cur = {f.code}, cause
        while cur in cause_of and cur not in seen:
            seen.add(cur)
            cur = cause_of[cur]
        if cur in seen:  # the chain comes back to this code: nothing is a root
            continue
        out.setdefault(cause, []).append(f)
    return out


def _follows_exactly(f: Finding) -> bool:
    follows = f.data.get("follows")
    return bool(f.cause and isinstance(follows, dict) and follows.get("subject") is not None)


def _problem_counts(rep: Report) -> tuple[int, int, int, int]:
    """(root problems, problems that follow from another, root errors, root warnings)."""
    folded = {id(f) for fs in _folding(rep, True).values() for f in fs}
    roots = followers = errors = warnings = 0
    for f in rep.findings():
        if f.severity not in PROBLEM_SEVERITIES:
            continue
        if id(f) in folded:
            followers += 1
            continue
        roots += 1
        errors += f.severity == "error"
        warnings += f.severity == "warning"
    return roots, followers, errors, warnings


def undecided(rep: Report | dict[str, Any]) -> str:
    """What could not be established, as the end of a sentence ('' when everything was)."""
    names = [f"{c.title} ({c.id})" for c in read(rep).checks if c.status == "unknown"]
    if not names:
        return ""
    return f"{listing(names)} could not be established"


def _socket_verdict(rep: Report) -> str | None:
    """nccl.env's verdict for a socket-only pool ("ready to train over sockets on eth0 at 25 Gb/s")."""
    for f in rep.findings():
        verdict = f.data.get("verdict") if f.code == "NCCL_SOCKET_TRANSPORT" else None
        if isinstance(verdict, str) and verdict:
            return verdict
    return None


def _judged_outputs(rep: Report) -> str:
    """" (judged: NCCL's own lines and the pasted `ibstat`)": what a log's verdict rests on."""
    judged: list[str] = []
    notices = 0
    for f in rep.findings():
        if f.code == "LOGS_READ":
            judged = [f"`{x}`" for x in f.data.get("judged") or () if isinstance(x, str)]
        elif f.severity == "info":
            notices += 1
    nccl = any(v is not None and v != [] for v in (rep.nccl or {}).values())
    if judged:
        pasted = f"the pasted {listing(judged)}"
        return f" (judged: NCCL's own lines and {pasted})" if nccl else f" (judged: {pasted})"
    if notices and not nccl:
        # Known messages that are not problems (PyTorch's exit warnings): say so, and where to read them.
        return f" ({_plural(notices, 'known notice')}, none a problem: --verbose shows {'it' if notices == 1 else 'them'})"
    return ""


def summary_line(rep: Report | dict[str, Any]) -> str:
    """The headline: a sentence that says the verdict, then the counts of root causes and checks."""
    rep = read(rep)
    s = rep.summary
    host = rep.host
    name = host.hostname or host.label
    status = rep.status
    # The pool the report was judged for ([pools.NAME], chosen by --pool or by its match).
    pool = rep.pool.name if rep.pool is not None else None
    head = f"{status.upper()}: {name} ({host.kind}, profile {rep.profile}{f', pool {pool}' if pool else ''})"
    missing = undecided(rep)
    if host.kind == "logs":  # no node was judged: the verdict is the log's
        roots, followers, errors, warnings = _problem_counts(rep)
        if status == "unknown":
            return f"UNKNOWN: {name}: {missing or 'the log could not be read'}"
        if not roots:
            return f"{status.upper()}: {name}: no known problem in the log{_judged_outputs(rep)}"
        word = _plural(roots, "problem") + (f" (and {followers} that follow from {'it' if roots == 1 else 'them'})" if followers else "")
        return f"{status.upper()}: {name}: the log shows {word}, root cause first"
    sockets = _socket_verdict(rep)
    if status == "unknown" or status not in VERDICT:
        head += f": could not decide: {missing or 'no check could judge this host'}"
    elif sockets is not None and status in ("pass", "warn"):
        # A socket-only pool (profile tcp): NCCL trains over TCP on purpose, and says where.
        head += f" is {sockets}" + ("" if status == "pass" else ", with warnings that may cost performance")
    elif rep.profile == "tcp" and status == "fail":
        head += " is NOT ready to train over sockets"
    else:
        head += f" {VERDICT[status]}"
        if missing:
            head += f"; could not decide: {missing}"
    roots, followers, errors, warnings = _problem_counts(rep)
    problems = _plural(roots, "problem") if roots else "no problems"
    if errors and warnings:
        problems += f" ({_plural(errors, 'error')}, {_plural(warnings, 'warning')})"
    if followers:
        problems += f" (and {followers} that follow from {'it' if roots == 1 else 'them'})"
    counts = ", ".join(
        f"{s.count(k)} {word}" for k, word in (("pass", "pass"), ("warn", "warn"), ("fail", "fail"), ("unknown", "unknown"), ("skip", "skipped")) if s.count(k)
    )
    return f"{head} - {problems}; {_plural(s.checks, 'check')}" + (f" ({counts})" if counts else "")


def _remedy_lines(remedy: str, indent: int) -> list[Line]:
    remedy = remedy.rstrip()
    if "\n" not in remedy:
        return [(indent, [("fix: ", "dim"), (remedy, "dim")], False)]
    out: list[Line] = [(indent, [("fix:", "dim")], False)]
    for raw in remedy.splitlines():
        raw = raw.rstrip()
        # Indented lines and YAML list items are commands or YAML: copied as they are.
        verbatim = raw[:1].isspace() or raw.startswith("- ")
        out.append((indent + 2, [(raw, "")], verbatim))
    return out


def _finding_lines(f: Finding, indent: int, folds: dict[Any, list[Finding]], done: set[int], prefix: str = "") -> list[Line]:
    sev = f.severity
    segs = [(prefix, "dim")] if prefix else []
    segs += [(f.code, SEV_STYLE.get(sev, "")), (" ", ""), (f.subject, "bold"), (": " + f.message, "")]
    out: list[Line] = [(indent, segs, False)]
    out += evidence_lines(f, indent + 2)
    if f.remedy and not prefix:
        out += _remedy_lines(f.remedy, indent + 2)
    for sub in [*folds.get(f.code, ()), *folds.get((f.code, f.subject), ())]:
        if id(sub) in done:
            continue
        done.add(id(sub))
        out += _finding_lines(sub, indent + 2, folds, done, prefix=f"follows from {f.code}: ")
    return out


def evidence_lines(f: Finding | dict[str, Any], indent: int) -> list[Line]:
    """Where a finding from a log was seen: file:line, host, rank, how often; the line quoted."""
    data = f.data if isinstance(f, Finding) else f.get("data") or {}
    ev = data.get("evidence")
    if not isinstance(ev, list) or not ev or not isinstance(ev[0], dict):
        return []
    e = ev[0]
    where = f"{e.get('file')}:{e.get('line')}"
    who = ", ".join(x for x in (f"host {e['host']}" if e.get("host") else "", f"rank {e['rank']}" if e.get("rank") is not None else "") if x)
    count = data.get("count") or 1
    more = ""
    if count > 1:
        hosts = data.get("hosts") or []
        more = f"; {count} times" + (f" on {_plural(len(hosts), 'host')}" if len(hosts) > 1 else "")
    head = f"seen at {where}" + (f" ({who})" if who else "") + more + ":"
    return [(indent, [(head, "dim")], False), (indent + 2, [(safe(str(e.get("text", ""))), "")], True)]


# C0 and C1 controls but tab and newline (escape sequences: clear screen, window title, OSC 52
# clipboard), and the bidirectional controls, which reorder what a terminal or an editor shows
# (U+202E makes "mlx5_0\u202e1/1" read backwards: CVE-2021-42574, "Trojan Source"): U+061C,
# U+200E/200F, U+202A-202E, U+2066-2069.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escaped(m: re.Match) -> str:
    n = ord(m.group())
    return f"\\x{n:02x}" if n <= 0xFF else f"\\u{n:04x}"


def safe(text: str) -> str:
    """A quoted log line with its control characters (escape sequences, bidi overrides) shown,
    never obeyed: ``\\x1b``, ``\\u202e``."""
    return _CONTROL.sub(_escaped, text)


def nccl_lines(nccl: dict[str, Any] | None) -> list[Line]:
    """The short block that says what NCCL did, when a log was read."""
    if not nccl:
        return []
    from rdmadoctor.logs.nccl import transport_line

    out: list[Line] = [(0, [("NCCL (from the log):", "bold")], False)]
    line = transport_line(nccl)
    if line:
        out.append((2, [(line, "bold red" if line.startswith("WARNING") else "")], False))
    facts = []
    for key, word in (("version", "version"), ("cuda", "CUDA"), ("network", "network"), ("plugin", "plugin")):
        if nccl.get(key):
            facts.append(f"{word} {nccl[key]}")
    if nccl.get("gdr") is not None:
        facts.append("GPUDirect RDMA " + ("on" if nccl["gdr"] else "off"))
    for key, word in (("channels", "channel"), ("ranks", "rank")):
        if nccl.get(key) is not None:
            facts.append(_plural(nccl[key], word))
    if nccl.get("hosts"):
        facts.append(_plural(len(nccl["hosts"]), "host"))
    if nccl.get("nodes") and nccl["nodes"] != len(nccl.get("hosts") or ()):
        facts.append(_plural(nccl["nodes"], "node"))
    if nccl.get("fabric"):
        nics = f", {_plural(nccl['fabric_nics'], 'NIC')}" if nccl.get("fabric_nics") else ""
        facts.append(f"libfabric {nccl['fabric']}{nics}")
    if facts:
        out.append((2, [("; ".join(facts), "")], False))
    if nccl.get("net_devices"):
        devs = " ".join(f"{d['name']}:{d['port']}/{d.get('link_layer') or '?'}" for d in nccl["net_devices"])
        out.append((2, [("devices: ", "dim"), (devs, "")], False))
    if nccl.get("socket_hosts"):
        out.append((2, [("on sockets: ", "dim"), (", ".join(nccl["socket_hosts"]), "bold red")], False))
    if len(out) == 1:
        return []  # NCCL's lines were there, but none says a fact: no empty heading
    out.append((0, [], False))
    return out


def log_summary(findings: list[dict[str, Any]], nccl: dict[str, Any] | None = None, limit: int = 8) -> list[str]:
    """Plain lines for stderr (``rdmadoctor run`` after a failed job): root causes first, each with its fix."""
    rep = Report.from_json({"checks": [{"findings": findings}]})
    folds = _folding(rep, verbose=False)
    folded = {id(f) for fs in folds.values() for f in fs}
    out: list[str] = []
    roots = [f for f in rep.findings() if f.severity in PROBLEM_SEVERITIES and id(f) not in folded]
    for f in roots[:limit]:
        out.append(f"{f.code} {f.subject}: {f.message}")
        for _, segs, _verbatim, *_ in evidence_lines(f, 2):
            out.append("  " + "".join(t for t, _ in segs))
        if f.remedy:
            out.append("  fix: " + " ".join(f.remedy.split()))
        n = len(folds.get(f.code, ())) + len(folds.get((f.code, f.subject), ()))
        if n:
            out.append(f"  ({_plural(n, 'finding')} follow from it)")
    if len(roots) > limit:
        out.append(f"... and {len(roots) - limit} more; `rdmadoctor diagnose LOG` shows them all")
    if not roots:
        line = transport_line_or_none(nccl)
        out.append("no known error in the output" + (f"; {line}" if line else ""))
    return out


def transport_line_or_none(nccl: dict[str, Any] | None) -> str | None:
    from rdmadoctor.logs.nccl import transport_line

    return transport_line(nccl)


def report_lines(rep: Report | dict[str, Any], verbose: bool = False) -> list[Line]:
    rep = read(rep)
    folds = _folding(rep, verbose)
    folded = {id(f): cause for cause, fs in folds.items() for f in fs}
    done: set[int] = set()
    status = rep.status
    out: list[Line] = [(0, [(summary_line(rep), STYLE.get(status, ""))], False), (0, [], False)]
    out += nccl_lines(rep.nccl)
    for chk in rep.checks:
        st = chk.status
        segs = [(f"[{ICON.get(st, st)}] ", STYLE.get(st, "")), (f"{chk.id:<16}", "bold"), (chk.title, "")]
        if chk.reason:
            segs.append((f"  ({chk.reason})", "dim"))
        out.append((0, segs, False, 7))  # a wrapped reason continues under the check id
        elsewhere: dict[str, int] = {}
        for f in chk.findings:
            if not _shown(f, verbose):
                continue
            if id(f) in folded:
                elsewhere[folded[id(f)]] = elsewhere.get(folded[id(f)], 0) + 1
                continue
            out += _finding_lines(f, 4, folds, done)
        for cause, n in elsewhere.items():
            name = " ".join(cause) if isinstance(cause, tuple) else cause  # (code, subject) of a log finding
            out.append((4, [(f"({_plural(n, 'finding')} following from {name}, shown under it)", "dim")], False))
    notes = rep.host.notes
    if notes:  # what the reader left out: the verdict above was made without it
        out.append((0, [], False))
        out.append((0, [("Not read (the checks judged without it):", "bold")], False))
        for note in notes:
            out.append((2, [("- " + note, "")], False, 2))
    if rep.labels and rep.host.kind != "logs":  # a log alone labels no node
        out.append((0, [], False))
        out.append((0, [("Node labels:", "bold")], False))
        for k, v in rep.labels.items():
            out.append((2, [(f"{k}={v}", "")], True))
    q = rep.quarantine
    if q is not None:  # agent --quarantine: what it did with the node, and why
        held = q.get("taint") or "no taint"
        mode = " (dry run)" if q.get("mode") == "dry-run" else ""
        out.append((0, [], False))
        out.append((0, [(f"Quarantine{mode}, pool {q.get('pool')}:", "bold"), (f" {q.get('action')}, {held}", "")], False))
        out.append((2, [(str(q.get("reason") or ""), "")], False, 2))
    if rep.summary.errors or rep.summary.warnings:
        out.append((0, [], False))
        out.append((0, [("`rdmadoctor explain CODE` tells more about any code above.", "dim")], False))
    return out


def _wrap(text: str, width: int) -> list[tuple[int, int]]:
    """(start, end) of each line of ``text`` wrapped greedily at ``width``, never inside a word."""
    spans: list[tuple[int, int]] = []
    start = end = -1
    for m in _WORD.finditer(text):
        if start < 0:
            start, end = m.start(), m.end()
        elif m.end() - start <= width:
            end = m.end()
        else:
            spans.append((start, end))
            start, end = m.start(), m.end()
    if start >= 0:
        spans.append((start, end))
    return spans


def write_lines(lines: list[Line], console: Any = None, stream: Any = None) -> None:
    """Plain to a non-terminal (no rich), styled and prose-wrapped to a terminal console.

    Every text is made safe first: names come from bundles and logs people attach, and an
    escape sequence in a device or interface name must be shown (``\\x1b``), never obeyed.
    """
    lines = [(ln[0], [(safe(t), st) for t, st in ln[1]], *ln[2:]) for ln in lines]
    if console is None:
        stream = sys.stdout if stream is None else stream
        if not _is_terminal(stream):
            stream.write("".join(" " * ln[0] + "".join(t for t, _ in ln[1]).rstrip() + "\n" if ln[1] else "\n" for ln in lines))
            return
        console = _console(file=stream)
    from rich.text import Text

    wrap = console.is_terminal
    width = max(20, console.width)
    for ind, segs, verbatim, *more in lines:
        hang = more[0] if more else 0
        text = Text()
        for t, style in segs:
            text.append(t, style=style or None)
        plain = text.plain.rstrip()
        if not plain:
            console.print()
            continue
        if verbatim or not wrap:
            spans = [(0, len(plain))]
        else:
            first = _wrap(plain, width - ind)
            spans = first[:1] + (_wrap(plain[first[0][1]:], width - ind - hang) if len(first) > 1 else [])
            spans = spans[:1] + [(a + first[0][1], b + first[0][1]) for a, b in spans[1:]]
        for i, (a, b) in enumerate(spans):
            console.print(Text(" " * (ind + (hang if i else 0))) + text[a:b], soft_wrap=True)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _console(stderr: bool = False, file: Any = None):
    """A rich console for rdmadoctor's output. A closed pipe raises BrokenPipeError to the
    command, which keeps its exit code (rich alone would exit 1: a PASS read by `head` is no FAIL)."""
    from rich.console import Console

    con = Console(stderr=stderr, file=file, highlight=False, soft_wrap=False, emoji=False)

    def on_broken_pipe() -> None:
        con.quiet = True
        raise BrokenPipeError

    con.on_broken_pipe = on_broken_pipe  # type: ignore[method-assign]  # rich's hook, replaced on this one console
    return con


console = _console


def render_report(rep: Report | dict[str, Any], verbose: bool = False, console: Any = None) -> None:
    rep = read(rep)
    write_lines(report_lines(rep, verbose), console=console)
    for err in rep.plugin_errors:
        sys.stderr.write(f"warning: {err}\n")


def render_topology(topo: dict[str, Any] | None, console: Any = None) -> None:
    """The GPU x NIC matrix, laid out like `nvidia-smi topo -m`.

    Device names come from sysfs or a bundle someone attached: each is shown through ``safe``
    (an escape sequence or a bidi override in a name is shown, never obeyed) and as plain text,
    never as rich markup (a name "[bold]" stays that)."""
    from rich.table import Table
    from rich.text import Text

    con = console or _console()
    nics = [safe(str(n)) for n in (topo or {}).get("nics") or []]
    if nics:
        # Like nvidia-smi, never fold the matrix: widen past the terminal rather than crop columns.
        need = 8 + sum(max(len(n), 4) + 2 for n in nics) + 6
        if con.width < need:
            con.width = need
    if not topo or not topo.get("gpus"):
        con.print("No GPU/NIC topology: no GPUs or no RDMA devices were found.")
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("")
    for nic in nics:
        table.add_column(Text(nic), no_wrap=True, min_width=len(nic))
    table.add_column("NUMA")
    for i, gpu in enumerate(topo["gpus"]):
        row = topo["gpu_nic"][i]
        numa = topo.get("gpu_numa", [None] * len(topo["gpus"]))[i]
        cells = []
        for rel in row:
            style = {"PIX": "green", "PXB": "green", "PHB": "yellow", "NODE": "yellow", "SYS": "red"}.get(rel or "", "")
            cells.append(Text(safe(str(rel or "?")), style=style))
        table.add_row(Text(safe(str(gpu))), *cells, "" if numa is None else Text(safe(str(numa))))
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
        con.print(Text(f"  source: {safe(str(src))}", style="dim"))
