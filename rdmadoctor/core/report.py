"""The typed read model of an ``rdmadoctor.report/v1`` document: :meth:`Report.from_json`.

rdmadoctor.engine.report builds the report as a dict (that is what ``--json`` prints and what a
fleet, a gang or a ticket carries around). Everything that *reads* one (the text renderer, the
NodeConditions, the NPD line, the preflight gate, the gang's facts, the fleet) reads it through
this one model instead of re-reading the dict with string literals, so a key is spelled once.

The reader is tolerant, because reports come from other versions and from other hands (a report
file a person edited, one cut short, one from before a field existed): a field that is missing
takes its default, and a field of the wrong type is read as missing and *noted*
(``Report.notes``: "checks[2].findings[0].severity is a number, expected a string"), never a
traceback. Sections it does not know are kept, raw, in ``Report.extra``; each typed part keeps the
dict it was read from (``raw``), so a consumer that passes a finding on (the gate's JSON) passes
the report's own bytes.

Import-cheap on purpose (``check`` renders through it): records, not dataclasses; no typing.
"""

from __future__ import annotations

from rdmadoctor.core.record import field, record

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any

SCHEMA = "rdmadoctor.report/v1"

# The keys read into typed fields; any other top-level key is kept in Report.extra.
_KNOWN = frozenset((
    "schema", "version", "time", "status", "exit_code", "host", "profile", "scope", "summary", "checks", "inventory",
    "labels", "nccl", "fingerprint", "plugin_errors", "gang", "quarantine", "hangs", "pool",
))
_COUNTS = ("checks", "pass", "warn", "fail", "unknown", "skip", "errors", "warnings")


def kind_of(v: Any) -> str:
    """What a JSON value is, in words ("an object", "a list", "a number", "null")."""
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null", int: "a number",
            float: "a number"}.get(type(v), f"a {type(v).__name__}")


class _Reader:
    """Reads fields out of one dict, noting each one of the wrong type."""

    __slots__ = ("notes",)

    def __init__(self) -> None:
        self.notes: list[str] = []

    def bad(self, path: str, v: Any, expected: str) -> None:
        self.notes.append(f"{path} is {kind_of(v)}, expected {expected}")

    def text(self, d: dict, key: str, path: str, default: Any = "") -> Any:
        v = d.get(key)
        if isinstance(v, str):
            return v
        if v is not None:
            self.bad(f"{path}.{key}" if path else key, v, "a string")
        return default

    def number(self, d: dict, key: str, path: str, default: int = 0) -> int:
        v = d.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        if v is not None:
            self.bad(f"{path}.{key}" if path else key, v, "a whole number")
        return default

    def obj(self, d: dict, key: str, path: str, nullable: bool = False) -> Any:
        v = d.get(key)
        if isinstance(v, dict):
            return v
        if v is not None:
            self.bad(f"{path}.{key}" if path else key, v, "an object")
        return None if nullable else {}

    def seq(self, d: dict, key: str, path: str) -> list:
        v = d.get(key)
        if isinstance(v, list):
            return v
        if v is not None:
            self.bad(f"{path}.{key}" if path else key, v, "a list")
        return []


@record
class Finding:
    """One finding as the report shows it (rdmadoctor.core.model.Finding, plus what its check
    declares: ``kind``, ``condition``). ``data`` and ``pod`` stay JSON, as their keys vary by code."""

    code: str = ""
    severity: str = ""
    subject: str = ""
    message: str = ""
    remedy: str = ""
    cause: str | None = None
    kind: str | None = None
    condition: str | None = None
    data: dict = field(default_factory=dict, compare=False)
    pod: dict | None = field(default=None, compare=False)
    raw: dict = field(default_factory=dict, compare=False)

    @classmethod
    def read(cls, d: dict, path: str, r: _Reader) -> Finding:
        text = r.text
        # Positional, in field order: every `check` reads its findings here, and keywords cost twice as much.
        return cls(
            text(d, "code", path), text(d, "severity", path), text(d, "subject", path), text(d, "message", path),
            text(d, "remedy", path), text(d, "cause", path, None) or None, text(d, "kind", path, None),
            text(d, "condition", path, None), r.obj(d, "data", path), r.obj(d, "pod", path, nullable=True), d,
        )


@record
class Check:
    """One check's result. ``declares_condition``: the report carries ``condition`` (a report
    from before it did is read with the installed checks' declarations, output.conditions)."""

    id: str = ""
    title: str = ""
    status: str = ""
    reason: str | None = None
    condition: str | None = None
    declares_condition: bool = False
    findings: tuple[Finding, ...] = ()
    raw: dict = field(default_factory=dict, compare=False)

    @classmethod
    def read(cls, d: dict, path: str, r: _Reader) -> Check:
        findings = []
        for i, f in enumerate(r.seq(d, "findings", path)):
            if isinstance(f, dict):
                findings.append(Finding.read(f, f"{path}.findings[{i}]", r))
            else:
                r.bad(f"{path}.findings[{i}]", f, "an object")
        text = r.text
        return cls(  # positional, in field order
            text(d, "id", path), text(d, "title", path), text(d, "status", path), text(d, "reason", path, None),
            text(d, "condition", path, None), "condition" in d, tuple(findings), d,
        )


@record
class Host:
    """What was judged: ``kind`` live | root | bundle | logs; ``notes``: what its reader left out."""

    label: str = ""
    kind: str = ""
    hostname: str | None = None
    notes: tuple[str, ...] = ()

    @classmethod
    def read(cls, d: dict, r: _Reader) -> Host:
        notes = []
        for i, n in enumerate(r.seq(d, "notes", "host")):
            if isinstance(n, str):
                notes.append(n)
            else:
                r.bad(f"host.notes[{i}]", n, "a string")
        return cls(label=r.text(d, "label", "host"), kind=r.text(d, "kind", "host"),
                   hostname=r.text(d, "hostname", "host", None), notes=tuple(notes))


@record
class Summary:
    """How many checks ended in each status, and how many error and warning findings."""

    checks: int = 0
    passed: int = 0
    warn: int = 0
    fail: int = 0
    unknown: int = 0
    skip: int = 0
    errors: int = 0
    warnings: int = 0

    def count(self, status: str) -> int:
        """The checks that ended in ``status`` (pass, warn, fail, unknown, skip)."""
        if status == "pass":
            return self.passed
        return getattr(self, status) if status in ("warn", "fail", "unknown", "skip") else 0

    @classmethod
    def read(cls, d: dict, r: _Reader) -> Summary:
        n = {k: r.number(d, k, "summary") for k in _COUNTS}
        n["passed"] = n.pop("pass")
        return cls(**n)


@record
class Pool:
    """The ``[pools.NAME]`` table of --config the node was judged with, and why: ``chosen_by``
    "--pool" (given) or "match" (the first pool whose match fits the node's facts; ``name`` None:
    none fit); ``why`` says so in words."""

    name: str | None = None
    chosen_by: str = ""
    why: str = ""

    @classmethod
    def read(cls, d: dict | None, r: _Reader) -> Pool | None:
        if d is None:
            return None
        return cls(name=r.text(d, "name", "pool", None), chosen_by=r.text(d, "chosen_by", "pool"), why=r.text(d, "why", "pool"))


@record
class Report:
    """An ``rdmadoctor.report/v1`` document, read (see the module's doc). ``inventory``,
    ``fingerprint``, ``nccl`` and the optional sections are JSON objects (their keys are the
    checks' own), but ``pool`` (:class:`Pool`, None when no pool applies); ``labels`` keeps only string values; ``extra`` holds the sections this reader
    does not know; ``notes`` says what was of the wrong type and read as missing."""

    schema: str | None = None
    version: str | None = None
    time: str | None = None
    status: str = "unknown"
    exit_code: int = 2
    host: Host = field(default_factory=Host)
    profile: str = ""
    scope: str | None = None
    summary: Summary = field(default_factory=Summary)
    checks: tuple[Check, ...] = ()
    inventory: dict = field(default_factory=dict, compare=False)
    labels: dict = field(default_factory=dict, compare=False)
    nccl: dict | None = field(default=None, compare=False)
    fingerprint: dict | None = field(default=None, compare=False)
    plugin_errors: tuple[str, ...] = ()
    gang: dict | None = field(default=None, compare=False)
    quarantine: dict | None = field(default=None, compare=False)
    hangs: dict | None = field(default=None, compare=False)
    pool: Pool | None = None
    extra: dict = field(default_factory=dict, compare=False)
    notes: tuple[str, ...] = ()
    raw: dict = field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, d: Any, *, checks: bool = True) -> Report:
        """Read a report dict (``json.load`` of ``check --json``). Never raises: anything but an
        object reads as an empty report with one note.

        ``checks=False`` leaves ``checks`` empty and unread: the fleet reads thousands of reports
        for their fingerprints and host, and the checks are most of a report's objects."""
        r = _Reader()
        if not isinstance(d, dict):
            return cls(notes=(f"the report is {kind_of(d)}, expected an object",))
        read_checks = []
        for i, c in enumerate(r.seq(d, "checks", "") if checks else ()):
            if isinstance(c, dict):
                read_checks.append(Check.read(c, f"checks[{i}]", r))
            else:
                r.bad(f"checks[{i}]", c, "an object")
        labels = {}
        for k, v in r.obj(d, "labels", "").items():
            if isinstance(v, str):
                labels[k] = v
            else:
                r.bad(f"labels[{k!r}]", v, "a string")
        plugin_errors = []
        for i, e in enumerate(r.seq(d, "plugin_errors", "")):
            if isinstance(e, str):
                plugin_errors.append(e)
            else:
                r.bad(f"plugin_errors[{i}]", e, "a string")
        exit_code = d.get("exit_code")
        if not isinstance(exit_code, int) or isinstance(exit_code, bool):
            if exit_code is not None:
                r.bad("exit_code", exit_code, "a whole number")
            exit_code = 2
        return cls(
            schema=r.text(d, "schema", "", None), version=r.text(d, "version", "", None), time=r.text(d, "time", "", None),
            status=r.text(d, "status", "", "unknown"), exit_code=exit_code, host=Host.read(r.obj(d, "host", ""), r),
            profile=r.text(d, "profile", ""), scope=r.text(d, "scope", "", None), summary=Summary.read(r.obj(d, "summary", ""), r),
            checks=tuple(read_checks), inventory=r.obj(d, "inventory", ""), labels=labels, nccl=r.obj(d, "nccl", "", nullable=True),
            fingerprint=r.obj(d, "fingerprint", "", nullable=True), plugin_errors=tuple(plugin_errors),
            gang=r.obj(d, "gang", "", nullable=True), quarantine=r.obj(d, "quarantine", "", nullable=True),
            hangs=r.obj(d, "hangs", "", nullable=True), pool=Pool.read(r.obj(d, "pool", "", nullable=True), r), extra={k: v for k, v in d.items() if k not in _KNOWN},
            notes=tuple(r.notes), raw=d,
        )

    def findings(self) -> list[Finding]:
        """Every finding, in report order (check by check)."""
        return [f for c in self.checks for f in c.findings]


def read(report: Any) -> Report:
    """``report`` as a :class:`Report`: one already read is returned as it is."""
    return report if isinstance(report, Report) else Report.from_json(report)
