"""`check --format npd`: the report as one line, for Node Problem Detector's custom plugins.

NPD's custom plugin monitor runs a plugin and reads two things: its exit status (0 OK, 1 a
problem, anything else unknown) and its stdout, trimmed of surrounding blanks and cut at
``max_output_length`` bytes (80 by default), which becomes the NodeCondition's message. So the
line is plain ASCII (bytes and characters agree), at most :data:`MAX_LEN` long, one line, and
says the worst thing first: the first problem (a root cause before what follows from it), then
the codes of the others as far as they fit, then how many did not:

    FAIL IB_PORT_DOWN mlx5_3/1; also MEMLOCK_LIMITED CAP_IPC_LOCK_MISSING +1
    UNKNOWN MEMLOCK_UNREADABLE memlock
    OK ready for RDMA: 7 pass, 1 skipped

Exit codes are check's own (the report's ``exit_code``): 0, 1, 2, as NPD expects.
"""

from __future__ import annotations

from rdmadoctor.core.report import Finding, Report, read

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any

# NPD's default max_output_length is 80 bytes; the line stays under it.
MAX_LEN = 79
# Worst first: what blocks a job, then what could not be decided, then warnings.
_RANK = {"error": 0, "unknown": 1, "warning": 2}
_SUBJECT_MAX = 24


def ascii_text(text: str) -> str:
    """Printable ASCII only: runs of blanks become one space, anything else a \\xNN or \\uNNNN."""
    out = []
    for ch in " ".join(str(text).split()):
        o = ord(ch)
        if 32 <= o < 127:
            out.append(ch)
        elif o < 256:
            out.append(f"\\x{o:02x}")
        else:
            out.append(f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}")
    return "".join(out)


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: max(n - 3, 0)] + "..."


def ranked(report: Report | dict[str, Any], warnings: bool) -> list[Finding]:
    """The findings that make the verdict, worst first; within a severity a root cause comes
    before a finding that follows from another (``cause``), otherwise report order. Findings
    that follow from a cause found here are left out."""
    from rdmadoctor.output.text import folding

    report = read(report)
    # A finding that only follows from another one found here is folded under it, by the rule
    # the text report, preflight and the metrics use: the cause names the problem.
    folded = {id(f) for fs in folding(report, verbose=False).values() for f in fs}
    found = []
    for f in report.findings():
        sev = f.severity
        if sev in _RANK and (sev != "warning" or warnings) and id(f) not in folded:
            found.append(f)
    order = {id(f): i for i, f in enumerate(found)}
    return sorted(found, key=lambda f: (_RANK[f.severity], bool(f.cause), order[id(f)]))


def _problem_line(word: str, findings: list[Finding], max_len: int) -> str:
    codes: list[str] = []
    counts: dict[str, int] = {}
    for f in findings:
        code = ascii_text(f.code or "?")
        if code not in counts:
            codes.append(code)
        counts[code] = counts.get(code, 0) + 1
    first = findings[0]
    subject = _cut(ascii_text(first.subject or ""), _SUBJECT_MAX)
    head = f"{word} {codes[0]}" + (f" {subject}" if subject else "")
    if counts[codes[0]] > 1:
        head += f" (+{counts[codes[0]] - 1})"
    head = _cut(head, max_len)
    rest = codes[1:]
    if not rest:
        return head
    line = head + "; also"
    for i, code in enumerate(rest):
        left = len(rest) - i - 1
        tail = f" +{left}" if left else ""
        if len(line) + 1 + len(code) + len(tail) <= max_len:
            line += " " + code
            continue
        more = f" +{len(rest) - i}"
        if line.endswith("; also"):
            line = head
            more = f"; +{len(rest)} more"
        return _cut(line + more, max_len)
    return line


def npd_line(report: Report | dict[str, Any], max_len: int = MAX_LEN) -> str:
    """The report as NPD's condition message: one ASCII line of at most ``max_len`` characters."""
    report = read(report)
    code = report.exit_code
    summary = report.summary
    if code == 0:
        n_pass = summary.passed + summary.warn
        line = f"OK ready for RDMA: {n_pass} pass, {summary.skip} skipped"
        warned = ranked(report, warnings=True)
        if warned:
            f = warned[0]
            line += f"; warning {ascii_text(f.code or '?')} {ascii_text(f.subject or '')}".rstrip()
        return _cut(line, max_len)
    strict = code == 1 and not any(f.severity == "error" for f in ranked(report, warnings=False))
    findings = ranked(report, warnings=strict)
    word = "FAIL" if code == 1 else "UNKNOWN"
    if not findings:
        status = ascii_text(report.status or "unknown")
        return _cut(f"{word} status {status}: no finding names the cause; run rdmadoctor check", max_len)
    return _problem_line(word, findings, max_len)


def npd_error_line(message: str, max_len: int = MAX_LEN) -> str:
    """A usage error (bad --root, unreadable --config) as NPD's message, with exit code 2."""
    return _cut(f"UNKNOWN rdmadoctor: error: {ascii_text(message)}", max_len)
