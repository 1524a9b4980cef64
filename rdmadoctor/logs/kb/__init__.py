"""The knowledge base: what rdmadoctor knows about the messages a training job prints.

Knowledge is data. Each source has one module holding a ``PATTERNS`` tuple of :class:`Pattern`
rows and a ``CODES`` tuple of the :class:`~rdmadoctor.core.model.Code` objects it introduces (each
defined in its family's module of the code registry, :mod:`rdmadoctor.core.codes`, and imported):

- ``nccl``: NCCL WARN / INFO lines (2.5 .. 2.30), its work-completion, shared-memory and verbs
  wrappers (``src/transport/net_ib*``, ``src/misc/ibvwrap.cc``, ``src/misc/shmutils.cc``, ...)
- ``verbs``: libibverbs / librdmacm messages (rdma-core ``libibverbs/init.c``, ``dynamic_driver.c``)
- ``ibtools``: what ibstat, ibstatus, ibv_devinfo, ``rdma`` print when they fail
- ``pytorch``: the c10d ProcessGroupNCCL watchdog and ``NCCL error in:`` exceptions
- ``kernel``: dmesg / ``journalctl -k`` lines of mlx5_core, nvidia_peermem, the PCIe AER driver
- ``ucx``: UCX's verbs failures (Open MPI, UCC, RAPIDS) and its SIGBUS report
- ``nvshmem``: NVSHMEM's transports (DeepEP): a missing peer-memory module
- ``ofi``: aws-ofi-nccl, the libfabric (EFA) net plugin
- ``nccltests``: nccl-tests' failure and wrong-result lines

A row is matched against one log line with its prefixes removed (timestamps, ``kubectl logs
--prefix``, NCCL's ``host:pid:tid [dev]``): see :mod:`rdmadoctor.logs.scan`. ``rdmadoctor
explain`` knows every code; ``rdmadoctor list-patterns`` lists every row.

Adding a row: give it a unique ``id`` (``<source>.<what>``), a ``needle`` (a literal the line
must contain: the scanner looks for needles only, in C, so a log of a gigabyte stays fast), the
``regex`` (searched, not matched, in the cleaned line; named groups fill ``subject`` and
``message``), at least one real line in ``examples`` and where the string comes from in ``ref``.
tests/unit/logs/test_kb.py matches every example against its row and checks every field.

Order: the modules in ``SOURCES`` order, each module's rows in their order; the first row whose
needle is in a line and whose regex matches it wins. Rows are written to be disjoint (a general
row excludes what a specific one takes: ``nccl.ib_async_event`` leaves ``port error`` to
``nccl.ib_async_port_error``, ``pytorch.nccl_error`` leaves ``unhandled system error`` to
``nccl.system_error``), and tests/unit/logs/test_kb.py checks that no example matches a second row, so the
order decides nothing today; keep it that way, or list the overlap in the test.

``subject`` and ``message`` are templates; ``meaning`` and ``fix`` are plain text (they may hold
YAML braces) and are never formatted.

Templates (``subject``, ``message``) are ``str.format`` templates over :func:`groups_of`: the
regex's named groups, where a group that did not take part in the match is the empty string
(never ``None``, never ``'?'``), plus what the row's ``derive`` adds. ``derive`` adds new names
(``status_name``, ``where``) and leaves the regex's groups alone; templates that would read
badly with an empty group use a derived name that is worded for both cases.
"""

from __future__ import annotations

from rdmadoctor.core.record import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from typing import Any, Callable

    from rdmadoctor.core.model import Code

# The modules, in the order their rows are tried (the first row that matches a line wins).
SOURCES = ("nccl", "verbs", "ibtools", "pytorch", "kernel", "ucx", "nvshmem", "ofi", "nccltests", "gloo", "mpi", "k8s")


@record
class Pattern:
    """One message rdmadoctor recognises, what it means, and the fix."""

    id: str  # unique, "<source>.<what>": "nccl.wc_error", "verbs.provider_missing"
    code: str  # the finding code it produces (an existing code when the meaning is the same)
    severity: str  # error | warning | info | unknown: must be allowed by the code's kind
    needle: str  # a literal every matching line contains, case-sensitive ("Got completion")
    regex: str  # re.search'ed in the cleaned line; named groups feed subject/message/derive
    subject: str  # str.format template over the groups: "{hca}", "status {status}", "NCCL"
    message: str  # what was seen and what was expected; a template over the groups
    meaning: str  # what it means for the training job
    fix: str  # the exact fix: commands, env, YAML
    ref: str  # where the string comes from: "NVIDIA/nccl src/transport/net_ib.cc (2.7-2.30)", an issue URL
    examples: tuple[str, ...] = ()  # real lines (prefix included or not) the row must match
    # A symptom follows from an earlier root error (a flushed work request after a retry-exceeded
    # one, "unhandled system error" after the WARN that explains it): it is linked to that cause
    # and never the headline while a cause is present.
    symptom: bool = False
    # Named-group values that make a match a symptom: (("status", "5"),) for IBV_WC_WR_FLUSH_ERR.
    symptom_when: tuple[tuple[str, str], ...] = ()
    # Codes (or pattern ids) this row's findings follow from when they were seen earlier; empty:
    # any earlier non-symptom problem is a cause (see rdmadoctor.logs.scan).
    follows: tuple[str, ...] = ()
    # Codes that, seen before this row's line, make it a symptom of them (and only then): "No IB
    # devices found" after libibverbs said it has no provider for a device is that problem's
    # consequence, not a host without devices. Listed in ``follows`` too, so it links to them.
    symptom_after: tuple[str, ...] = ()
    # groups -> more groups (a status number -> its ibv_wc_status name); pure, never raises.
    derive: Callable[[dict[str, str]], dict[str, str]] | None = field(default=None, compare=False)
    versions: str = ""  # the versions that print it, when that matters: "NCCL 2.13+"
    # The message says why NCCL cannot use its IB transport (verbs, the device, NCCL_IB_DISABLE, a
    # net plugin): when the same log shows NCCL on sockets, NCCL_SOCKET_FALLBACK names this line
    # as the reason (rdmadoctor.logs.scan).
    explains_fallback: bool = False


def modules() -> list[Any]:
    import importlib

    return [importlib.import_module(f"rdmadoctor.logs.kb.{name}") for name in SOURCES]


def patterns() -> tuple[Pattern, ...]:
    """Every row of every source, in matching order."""
    out: list[Pattern] = []
    for mod in modules():
        out.extend(mod.PATTERNS)
    return tuple(out)


def codes() -> tuple[Code, ...]:
    """The codes the knowledge base introduces (reused codes live with their checks)."""
    out: list[Code] = []
    for mod in modules():
        out.extend(mod.CODES)
    return tuple(out)


def groups_of(pattern: Pattern, match: re.Match[str], loc: str | None = None) -> dict[str, str]:
    """A match's named groups (one that did not take part: ``""``) and what ``derive`` adds.
    ``loc``: where NCCL says the line comes from ("transport/nvls.cc:598"), given to ``derive`` as
    ``_loc`` (the row's regex reads the message without it).

    Never raises: a ``derive`` that fails (it should not) adds nothing.
    """
    groups = {k: (v if v is not None else "") for k, v in match.groupdict().items()}
    if pattern.derive is not None:
        try:
            extra = pattern.derive({**groups, "_loc": loc or ""})
        except Exception:  # noqa: BLE001 - a table row must never turn a log line into a traceback
            extra = {}
        for k, v in (extra or {}).items():
            groups.setdefault(k, "" if v is None else str(v))
    return groups


class _Blank(dict):
    def __missing__(self, key: str) -> str:
        return ""


def render(template: str, groups: dict[str, str]) -> str:
    """``template`` formatted with ``groups``; an unknown name is ``""``. Never raises."""
    try:
        return template.format_map(_Blank(groups))
    except (ValueError, IndexError, AttributeError, KeyError):
        return template


def is_symptom(pattern: Pattern, groups: dict[str, str]) -> bool:
    """Does this match only follow from an earlier error (the row, or one of its ``symptom_when``)?"""
    return pattern.symptom or any(groups.get(k) == v for k, v in pattern.symptom_when)
