"""Checks, findings and results: the data every part of rdmadoctor shares."""

from __future__ import annotations

from rdmadoctor.core.record import field, record

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator

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


# What seeing a code means. A code has one kind for life: alerts and dashboards key on codes
# (rdmadoctor_finding{code=...}), so "could not read the memlock limit" is never MEMLOCK_LIMITED.
PROBLEM, COULD_NOT_DECIDE, INFORMATION = "problem", "unknown", "info"
KINDS = (PROBLEM, COULD_NOT_DECIDE, INFORMATION)
# The severities a finding of each kind may have.
KIND_SEVERITIES = {PROBLEM: ("error", "warning"), COULD_NOT_DECIDE: ("unknown",), INFORMATION: ("info",)}

# The NodeCondition a check's (or a code's) problems feed; None: no condition (third-party
# checks unless they declare one, node.labels).
LINK, CONFIG, GPUDIRECT = "link", "config", "gpudirect"
CONDITIONS = (LINK, CONFIG, GPUDIRECT)


@record
class Code:
    """A stable finding code and what `rdmadoctor explain CODE` says about it."""

    code: str
    title: str
    meaning: str  # why it matters for a training job
    fix: str  # how to fix it, with commands or YAML
    kind: str = PROBLEM  # problem | unknown | info (see KINDS)
    condition: str | None = None  # overrides the check's condition for this code (GDR_* -> gpudirect)
    # Roles: what other parts do with a finding of this code, read through the code registry
    # (rdmadoctor.core.codes.get(string)). Off unless the code's definition turns one on.
    # The log scan: the rows of this code that name one subject are one finding, whichever row saw it.
    one_per_subject: bool = False
    # The log scan: the job was stopped from outside (a signal); the finding says how far NCCL got.
    kill: bool = False
    # The log scan: only an earlier error is its cause; a warning before it is not (a job killed
    # after "IB not found" was not killed because of it).
    explained_by_errors_only: bool = False
    # The log scan: what a job on TCP sockets instead of RDMA can end in (a collective too slow for
    # its timeout): a warning that only says why NCCL is on sockets explains it.
    slow_symptom: bool = False
    # Raised from port error counters inside their recovery window: quarantine releases a node only
    # once no such finding is left.
    from_counters: bool = False


@record
class PodChange:
    """A change to the pod spec that fixes (``whole``) or helps fix a finding: data, not prose.

    Preflight merges the changes of every problem into one YAML block; nothing parses remedies.
    """

    ipc_lock: bool = False  # securityContext.capabilities.add IPC_LOCK
    rdma_device: bool = False  # resources.limits of the RDMA device plugin (rdma/hca)
    shm_min_bytes: int | None = None  # an emptyDir medium: Memory on /dev/shm at least this big
    env: tuple[tuple[str, str, str], ...] = ()  # (name, value, why)
    whole: bool = True  # True: this change is the whole fix; False: one way among others

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"whole": self.whole}
        if self.ipc_lock:
            out["capabilities_add"] = ["IPC_LOCK"]
        if self.rdma_device:
            out["rdma_device"] = True
        if self.shm_min_bytes:
            out["shm_min_bytes"] = self.shm_min_bytes
        if self.env:
            out["env"] = [{"name": n, "value": v, "why": w} for n, v, w in self.env]
        return out


@record
class Finding:
    code: str
    severity: str  # info | warning | error | unknown
    subject: str  # mlx5_1/1, GPU3, /dev/shm, NCCL_IB_HCA, ...
    message: str  # what was seen, and what was expected
    remedy: str = ""  # the exact fix
    data: dict[str, Any] = field(default_factory=dict, compare=False)
    pod: PodChange | None = field(default=None, compare=False)  # the pod-spec change it needs
    # The code of the finding this one follows from (IB_NO_DEVICES for a MOD_MISSING on a host
    # without RDMA): renderers fold it under its cause, one root cause, one headline.
    cause: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "severity": self.severity,
            "subject": self.subject,
            "message": self.message,
            "remedy": self.remedy,
        }
        if self.data:
            out["data"] = self.data
        if self.pod is not None:
            out["pod"] = self.pod.to_json()
        if self.cause:
            out["cause"] = self.cause
        return out


@record
class Need:
    """A precondition of a check. ``test(ctx)`` returns None when met, else the reason it is not."""

    name: str
    test: Callable[[Any], str | None]


@record
class Paste:
    """A tool's output pasted into a job's log that a check judges (``rdmadoctor diagnose``, the
    ``logs.diagnose`` check), as it judges the output recorded in a bundle.

    ``kind``: what the log scan recognises the paste as (its Segment.kind: ``ibstat``, ``lsmod``,
    ``show_gids``, ... ``ibv_devices``, ``cat``, ``ls``). ``judge(seg, expect, node, layers)`` ->
    findings: ``seg`` the paste (``.text``, ``.command``, ``.kind``), ``node`` what the node checks
    that ran before established (logs.diagnose's NodeView), ``layers`` device -> link layer as the
    log shows it. ``rows(seg, layers)``: for an output judged only by some of its rows (ibdev2netdev's
    RoCE netdevs), whether this one holds any; None: every paste of the kind is judged. Several
    checks may judge one kind: their findings join, in check order.
    """

    kind: str
    judge: Callable[[Any, dict[str, Any], Any, dict[str, str]], list[Finding]]
    rows: Callable[[Any, dict[str, str]], bool] | None = None


class LazyCodes:
    """A check's codes worked out when first read, not when its module loads: ``logs.diagnose``
    lists the knowledge base's codes, and ``check`` without logs should not import the knowledge
    base to skip it. Reads as the tuple ``make()`` returns (iterated, counted, compared)."""

    __slots__ = ("_make", "_codes")

    def __init__(self, make: Callable[[], tuple[Code, ...]]) -> None:
        self._make = make
        self._codes: tuple[Code, ...] | None = None

    def _get(self) -> tuple[Code, ...]:
        if self._codes is None:
            self._codes = tuple(self._make())
        return self._codes

    def __iter__(self) -> Iterator[Code]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())

    def __getitem__(self, i: int) -> Code:
        return self._get()[i]

    def __contains__(self, code: object) -> bool:
        return code in self._get()

    def __eq__(self, other: object) -> bool:
        return self._get() == (tuple(other) if isinstance(other, LazyCodes) else other)

    def __hash__(self) -> int:
        return hash(self._get())

    def __repr__(self) -> str:
        return repr(self._get()) if self._codes is not None else f"LazyCodes({getattr(self._make, '__name__', '?')})"


@record
class Check:
    id: str  # family.name, e.g. "ib.ports"
    title: str
    probe: Callable[[Any], Any]  # Context -> facts (a frozen dataclass)
    judge: Callable[[Any, Any], list[Finding]]  # (facts, Expectations) -> findings
    # Every code the check may emit; LazyCodes(make) when listing them costs an import.
    codes: tuple[Code, ...] | LazyCodes = ()
    needs: tuple[Need, ...] = ()
    # Expectations this check reads, with their defaults (merged into the profile).
    defaults: dict[str, Any] = field(default_factory=dict)
    # Checks that must run before this one; "*": every other check, third-party ones included.
    after: tuple[str, ...] = ()
    # Facts that go into the report's "inventory": (facts) -> {key: json value}.
    inventory: Callable[[Any], dict[str, Any]] | None = None
    description: str = ""
    # "node": judges the machine (ports, modules, PCIe); "pod": judges the process that runs it
    # (its memlock, capabilities, /dev/shm, image userspace, job env). The agent and `label`
    # judge the node only: the agent pod's own limits say nothing about a training pod's.
    scope: str = "node"
    # The NodeCondition its problems feed (LINK, CONFIG, GPUDIRECT; None: none).
    condition: str | None = None
    # Does `rdmadoctor preflight` (the pre-job gate) run it? Checks that judge node repairs only
    # the agent should chase (PCIe links) or that are slow on every pod start say False.
    gate: bool = False
    # The tool outputs pasted into a job's log this check judges (Paste), found by logs.diagnose.
    pastes: tuple[Paste, ...] = ()


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
