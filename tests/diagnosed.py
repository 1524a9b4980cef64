"""A text through the diagnosis the way `rdmadoctor diagnose FILE` reads it, and the report's findings.

The log tests that hold real texts to what a correct diagnosis says (silent passes, stacks, the held-out
set, the whole corpus) share these: ``report(text)`` feeds the text to a Diagnoser, hands it to the
logs.diagnose check on a logs-only host, and returns the report as JSON; ``problems`` are its error and
warning findings; ``quoted`` the lines a finding quotes as its evidence.
"""

from __future__ import annotations

from rdmadoctor.host import logs_only_host
from rdmadoctor.logs import Diagnoser
from rdmadoctor.runner import Options, diagnose

PROBLEM = ("error", "warning")


def report(text: str | bytes, name: str = "paste.txt") -> dict:
    reader = Diagnoser()  # what `rdmadoctor diagnose FILE` hands the logs.diagnose check
    reader.feed(text.encode() if isinstance(text, str) else text, source=name)
    reader.end_source()
    return diagnose(Options(only=["logs"], logs=[name], log_diagnosis=reader), host=logs_only_host(name)).report


def findings(rep: dict) -> list[dict]:
    return [f for c in rep["checks"] for f in c["findings"]]


def problems(rep: dict) -> list[dict]:
    return [f for f in findings(rep) if f["severity"] in PROBLEM]


def quoted(f: dict) -> list[str]:
    return [e["text"] for e in (f.get("data") or {}).get("evidence") or ()]
