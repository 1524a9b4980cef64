"""Checks, findings and results: the data every part of rdmadoctor shares."""

from __future__ import annotations

from rdmadoctor.core.record import field, record
TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any, Callable

# Severity of a finding, and the status of a check or of the whole report.
PASS, WARN, FAIL, UNKNOWN, SKIP = "pass", "warn", "fail", "unknown", "skip"
INFO, WARNING, ERROR = "info", "warning", "error"
# A finding's severity decides its check's status; "unknown" means the check could not decide.
SEVERITY_STATUS = {INFO: PASS, WARNING: WARN, ERROR: FAIL, UNKNOWN: UNKNOWN}
# Worst first. An unknown does not hide a failure: a report with both is "fail".
STATUS_ORDER = (FAIL, UNKNOWN, WARN, PASS, SKIP)


def worst(statuses: list[str] | tuple[str, ...]) -> str:
    for s in STATUS_ORDER:
        if s in statuses:
            return s
    return PASS


@record
class Code:
    """A stable finding code and what `rdmadoctor explain CODE` says about it."""

    code: str
    title: str
    meaning: str  # why it matters for a training job
    fix: str  # how to fix it, with commands or YAML


@record
class Finding:
    code: str
    severity: str  # info | warning | error | unknown
    subject: str  # mlx5_1/1, GPU3, /dev/shm, NCCL_IB_HCA, ...
    message: str  # what was seen, and what was expected
    remedy: str = ""  # the exact fix
    data: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        out = {
            "code": self.code,
            "severity": self.severity,
            "subject": self.subject,
            "message": self.message,
            "remedy": self.remedy,
        }
        if self.data:
            out["data"] = self.data
        return out


@record
class Need:
    """A precondition of a check. ``test(ctx)`` returns None when met, else the reason it is not."""

    name: str
    test: Callable[[Any], str | None]


@record
class Check:
    id: str  # family.name, e.g. "ib.ports"
    title: str
    probe: Callable[[Any], Any]  # Context -> facts (a frozen dataclass)
    judge: Callable[[Any, Any], list[Finding]]  # (facts, Expectations) -> findings
    codes: tuple[Code, ...] = ()
    needs: tuple[Need, ...] = ()
    # Expectations this check reads, with their defaults (merged into the profile).
    defaults: dict[str, Any] = field(default_factory=dict)
    # Checks that must run before this one (node.labels reads every other result).
    after: tuple[str, ...] = ()
    # Facts that go into the report's "inventory": (facts) -> {key: json value}.
    inventory: Callable[[Any], dict[str, Any]] | None = None
    description: str = ""
    # "node": judges the machine (ports, modules, PCIe); "pod": judges the process that runs it
    # (its memlock, capabilities, /dev/shm, image userspace, job env). The agent and `label`
    # judge the node only: the agent pod's own limits say nothing about a training pod's.
    scope: str = "node"


@record(frozen=False)
class CheckResult:
    id: str
    title: str
    status: str
    findings: list[Finding] = field(default_factory=list)
    reason: str | None = None  # why it was skipped, or why it is unknown
    facts: Any = None
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "findings": [f.to_json() for f in self.findings],
        }
        if self.reason:
            out["reason"] = self.reason
        return out
