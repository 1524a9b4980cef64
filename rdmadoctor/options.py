"""The command line's options: one table, the single source for both parsers and the record.

Each row of :data:`OPTIONS` says once what one option is: its flag (and short aliases such as
``-o``, if any), the field of :class:`Args` it sets, its kind (how its value is parsed), its
default, its metavar and help text, what completes it (a function named in
rdmadoctor.cli.complete), which commands take it and, for an option that is a shorthand for one
expectation (``--min-rate``), the expectation it sets (``sets="min_rate_gbps"``). From it:

- the typer-free fast parser, :func:`parse` (so that the fast path of `check` and `preflight`
  in init containers imports this module and rdmadoctor.cli.options, no typer);
- the typer commands get their signatures in rdmadoctor.cli.options (:func:`~rdmadoctor.cli.options.command`
  for a command made of rows, :func:`~rdmadoctor.cli.options.with_rows` for one that declares
  its own options by hand besides them), which imports typer only when called;
- every command receives one :class:`Args` record, whichever parser read its line;
- the gate's expectation overrides, :func:`overrides` (`preflight` and `run` hand them to the
  gate with the record, as one rdmadoctor.preflight.request.Request: the gate's own
  parameters are the record's fields, read where they are used);
- the fields a library call may name (:func:`fields`): a Request refuses any other, with the
  closest field, so that ``run_preflight(exampel=...)`` is an error, not an option ignored.

It sits below the gate (a layer with the runner), not in rdmadoctor.cli: the gate's Request reads it.
It imports nothing at import time (no typer, no typing): the fast path imports it.

To add an option: add a row where the commands' --help should list it, naming in ``commands``
each command that takes it, and read ``args.<field>`` where it is used (``check_command``; for
`preflight` and `run`, ``req.<field>`` in rdmadoctor.preflight or rdmadoctor.supervise, which get
the whole record). An option that only sets an expectation says ``sets="KEY"`` and is read by
nobody: the gate applies it after the user's --set items. Both parsers, the help, the completion
and the record follow (tests/unit/preflight/test_request.py holds every row of `preflight` and
`run` to reaching the record, or the checks' expectations). A check option (what to read, what to
expect, which checks) names :data:`CHECKS` (or :data:`NODE` with `check`'s or the gate's wording)
so that `agent`, `label`, `slurm health` and `slurm prolog` take it too; they hand it to the
checks through rdmadoctor.runner.options_of, as `check` and the gate do (tests/unit/cli/test_check_options.py).
A flag whose help says something different in two commands gets one row per wording
(``--strict`` in `check`, in `preflight`): such rows agree on field, kind and default, and a
command takes a flag once (tests/unit/cli/test_cli.py keeps both, and that every row reaches
both parsers).

A new command: name it in the ``commands`` of the rows it takes (the shared ones too: ``SHARED``
is a tuple of command names) and register it as ``app.command("fleet", help=...)(
options.command("fleet", fleet_command))``; ``fleet_command(args)`` returns the exit code, and
a fast path is ``parse(argv, "fleet")`` (None: leave the line to typer).

Kinds: ``str``, ``int`` and ``float`` take one value; ``list`` takes one per use and may
repeat; ``flag`` takes none. Defaults: None, [] and False, unless the row says otherwise.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any, Callable

KINDS = ("str", "int", "float", "list", "flag")
CHECK = ("check",)
GATE = ("preflight", "run")  # `run` takes preflight's options but --exec (cli/run.py)
SHARED = CHECK + GATE
# The commands that run the checks on a node and declare their own options by hand besides the
# rows (rdmadoctor.cli.options.with_rows): they take the check options, what to read, what to
# expect and which checks, as `check` and the gate do.
NODE = ("agent", "label", "slurm health", "slurm prolog")
CHECKS = SHARED + NODE  # every command that runs the checks
# `run --drain-timeout`: its default (the copy of the pipes and the diagnosis both stop this long
# after the job's exit: rdmadoctor.supervise) and its highest (the CLI's check and the library's).
DRAIN_TIMEOUT_DEFAULT = 5.0
DRAIN_TIMEOUT_MAX = 3600.0


class Option:
    """One row: ``--flag`` -> ``Args.<field>``. ``help`` may be a function (called when typer
    builds the option, so that the fast path does not pay for what it computes)."""

    __slots__ = ("flag", "aliases", "field", "kind", "default", "metavar", "help", "complete", "commands", "sets")

    def __init__(self, flag: str, field: str, kind: str, help: str | Callable[[], str], *,
                 commands: tuple[str, ...], default: Any = None, metavar: str | None = None,
                 complete: str | None = None, aliases: tuple[str, ...] = (), sets: str | None = None):
        self.flag, self.aliases, self.field, self.kind, self.help = flag, aliases, field, kind, help
        self.commands, self.metavar, self.complete, self.sets = commands, metavar, complete, sets
        self.default = ([] if kind == "list" else False if kind == "flag" else None) if default is None else default

    def __repr__(self) -> str:
        return f"Option({self.flag!r} -> {self.field}, {self.kind}, {'/'.join(self.commands)})"

def _profile_help() -> str:
    # From the profiles themselves, so the help lists what --profile takes (~0.3 ms to import).
    from rdmadoctor.engine.expectations import PROFILES

    return f"Expectations to judge against: {', '.join(PROFILES)} (default generic)."


_WAIT_HELP = (
    "After GO, wait until rank 0 accepts a TCP connection on MASTER_ADDR:MASTER_PORT (from this "
    "process' environment, even with --bundle/--example). Without MASTER_ADDR: the first host of "
    "Volcano's VC_MASTER_HOSTS (or of the only VC_<TASK>_HOSTS), port MASTER_PORT, else 23456 "
    "(Volcano's pytorch plugin) for a Volcano host and 29500 (torchrun) otherwise. Rank 0 "
    "(RANK=0, or MASTER_ADDR names this pod) does not wait."
)

# In the order each command's --help lists them.
OPTIONS: tuple[Option, ...] = (
    # What to read and what to expect: every command that judges a node.
    Option("--root", "root", "str", "Read the host mounted at DIR (DIR/sys, DIR/proc, DIR/etc, ...). Default: /. The DaemonSet mounts the node at /host.",
           metavar="DIR", commands=CHECKS),
    Option("--bundle", "bundle", "str", "Analyse a bundle made by `rdmadoctor collect` (or a folder with cmd/ibstat.txt and other pasted outputs).",
           metavar="DIR|FILE.tar.gz", commands=CHECKS),
    Option("--example", "example", "str", "Analyse a bundle shipped with rdmadoctor; `rdmadoctor examples` lists them.",
           metavar="NAME", complete="examples", commands=CHECKS),
    Option("--profile", "profile", "str", _profile_help, default="generic", complete="profiles", commands=CHECKS),
    Option("--config", "config", "str", "TOML or JSON file overriding expectations (per node pool with \\[pools.NAME]).",
           metavar="FILE", commands=CHECKS),
    Option("--pool", "pool", "str", "Use the \\[pools.NAME] table of --config.", metavar="NAME", commands=CHECKS),
    # `rdmadoctor check`.
    # Which checks and how: `check` and the node's commands (the gate's own wordings are below).
    Option("--set", "sets", "list", "Override one expectation, e.g. --set min_rate_gbps=200 (repeatable).",
           metavar="KEY=VALUE", commands=CHECK + ("label",)),
    Option("--set", "sets", "list", "Override one expectation, e.g. --set quarantine_budget=2 (repeatable).",
           metavar="KEY=VALUE", commands=("agent",)),
    Option("--set", "sets", "list", "Override one expectation, e.g. --set quarantine_after=1 (repeatable).",
           metavar="KEY=VALUE", commands=("slurm health",)),
    Option("--set", "sets", "list", "Override one expectation, e.g. --set min_rate_gbps=400 (repeatable).",
           metavar="KEY=VALUE", commands=("slurm prolog",)),
    Option("--only", "only", "list", "Run only these checks (ids or families: ib, ib.ports; repeatable or comma-separated).",
           metavar="ID", complete="check_ids", commands=CHECK + ("agent", "label", "slurm health")),
    Option("--skip", "skip", "list", "Skip these checks (repeatable or comma-separated).",
           metavar="ID", complete="check_ids", commands=CHECK + ("agent", "label", "slurm health")),
    Option("--timeout", "timeout", "float", "Kill a tool that runs longer than this (default 5).", metavar="SECONDS",
           commands=CHECK + ("agent", "label", "slurm health")),
    Option("--json", "as_json", "flag", "Print the report as JSON instead of text (schema rdmadoctor.report/v1; `rdmadoctor schema` prints its JSON Schema).",
           commands=CHECK),
    Option("--strict", "strict", "flag", "Exit 1 on warnings too.", commands=CHECK),
    Option("--verbose", "verbose", "flag", "Also show informational findings.", commands=CHECK),
    Option("--scope", "scope", "str",
           "all: this container on this node (default). node: the machine only, as the agent judges it; the checks of the process "
           "itself (memlock, IPC_LOCK, /dev/shm, userspace, NCCL env) are skipped. Use node with --root /host from a debug pod.",
           default="all", metavar="all|node", commands=CHECK),
    Option("--format", "output_format", "str",
           "text (default), json (as --json), or npd: one ASCII line under 80 characters, the worst problem first, for Node "
           "Problem Detector's custom plugin monitor (deploy/npd/).",
           metavar="text|json|npd", commands=CHECK),
    Option("--sample", "sample", "float",
           "Read every RDMA port's error counters each second for SECONDS and judge the growth (ib.counters: flaps, "
           "symbol errors, RoCE ACK timeouts; wraps and resets told apart). Default: no sample, ib.counters is skipped.",
           metavar="SECONDS", commands=CHECK),
    # The pre-job gate: `rdmadoctor preflight` and `rdmadoctor run`.
    Option("--set", "sets", "list", "Override one expectation, e.g. --set shm_min_bytes=8589934592 (repeatable).",
           metavar="KEY=VALUE", commands=GATE),
    Option("--only", "only", "list", "Run only these of the gating checks (ids or families: ib, limits.memlock; repeatable or comma-separated).",
           metavar="ID", complete="check_ids", commands=GATE + ("slurm prolog",)),
    Option("--skip", "skip", "list", "Skip these checks (e.g. gpu.topology; repeatable or comma-separated).",
           metavar="ID", complete="check_ids", commands=GATE + ("slurm prolog",)),
    Option("--expect-hcas", "expect_hcas", "int", "Expect N RDMA devices (sets expected_hcas; wins over --set and --config).",
           metavar="N", commands=GATE, sets="expected_hcas"),
    Option("--min-rate", "min_rate", "float", "Minimum rate of every port in Gb/s, e.g. 400 for NDR (sets min_rate_gbps).",
           metavar="GBPS", commands=GATE, sets="min_rate_gbps"),
    Option("--job-uid", "job_uid", "int",
           "The uid the job runs as, when it is not this process' (an init container): sets job_uid, so the verdict holds for the job's user.",
           metavar="UID", commands=GATE, sets="job_uid"),
    Option("--strict", "strict", "flag", "Warnings block too (NO-GO).", commands=GATE),
    Option("--verbose", "verbose", "flag", "Also list each check's status and the informational findings.", commands=GATE),
    Option("--timeout", "timeout", "float", "Kill a tool that runs longer than this (default 5), as in `check`.",
           metavar="SECONDS", commands=GATE + ("slurm prolog",)),
    Option("--wait-for-master", "wait", "flag", _WAIT_HELP, commands=GATE),
    Option("--master-addr", "master_addr", "str", "Rank 0's address, instead of MASTER_ADDR (a comma-separated list: its first host).",
           metavar="HOST", commands=GATE),
    Option("--master-port", "master_port", "int", "Rank 0's port, instead of MASTER_PORT.", metavar="PORT", commands=GATE),
    Option("--master-timeout", "master_timeout", "float",
           "How long --wait-for-master waits (DNS retries and TCP connects, with backoff) before NO-GO (default 300).",
           metavar="SECONDS", commands=GATE),
    Option("--json", "as_json", "flag", "Print the verdict as JSON (schema rdmadoctor.preflight/v1, with the full report).",
           commands=("preflight",)),
    Option("--json", "as_json", "flag",
           "Print the gate's verdict as JSON (schema rdmadoctor.preflight/v1, as `preflight --json` prints it) on stderr, "
           "not as text, and at exit the run's document (schema rdmadoctor.run/v1, as --report-file writes it: how CMD "
           "ended, the findings, the live hangs) as the last line of stderr: stdout carries only CMD's output.",
           commands=("run",)),
    Option("--exec", "exec_", "flag",
           "On GO, exec the command given after `--` in this process (same PID); on NO-GO do not run it. A command not found exits 127.",
           commands=("preflight",)),
    # The gang (rdmadoctor.gang; docs/gang.md).
    Option("--gang", "gang", "flag",
           "After this pod's checks, meet the job's other members at rank 0 (docs/gang.md): rank 0 compares what NCCL "
           "needs alike (transport, link layer, rails and rates, MTU, RoCE GID, IB subnet, GPUDirect RDMA, NCCL_* protocol "
           "settings, NCCL version) and every member prints the same gang verdict. Rank and size from NODE_RANK/RANK, "
           "NNODES/WORLD_SIZE, OMPI_COMM_WORLD_*, PMI_*, SLURM_*; rank 0 from MASTER_ADDR.",
           commands=GATE),
    Option("--gang-rank", "gang_rank", "int", "This node's rank in the gang (0 listens), instead of the launcher's env.",
           metavar="N", commands=GATE),
    Option("--gang-size", "gang_size", "int", "The number of nodes in the gang, instead of the launcher's env.",
           metavar="N", commands=GATE),
    Option("--gang-master", "gang_master", "str", "Rank 0's address (and gang port), instead of MASTER_ADDR.",
           metavar="HOST[:PORT]", commands=GATE),
    Option("--gang-port", "gang_port", "int", "The port rank 0 listens on for the gang (default 9471; not the launcher's MASTER_PORT).",
           metavar="PORT", commands=GATE),
    Option("--gang-timeout", "gang_timeout", "float", "How long rank 0 waits for every member, and a member for rank 0 (default 120).",
           metavar="SECONDS", commands=GATE),
    Option("--gang-token", "gang_token", "str",
           "The job's token (default: RDMADOCTOR_GANG_TOKEN, SLURM_JOB_ID, PMIX_NAMESPACE, ...): a member with another is refused.",
           metavar="TOKEN", commands=GATE),
    Option("--bandwidth", "bandwidth", "flag",
           "With --gang: a short bandwidth test between members (a ring, then a shifted ring; ib_write_bw per rail on RDMA "
           "pools, a TCP stream on socket pools); a member under gang_slow_share (--set, default 0.7) of the median is "
           "GANG_MEMBER_SLOW.",
           commands=GATE),
    # `rdmadoctor run` only.
    Option("--no-gate", "no_gate", "flag", "Do not run the gate: start CMD at once (the output is still read).", commands=("run",)),
    Option("--nccl-debug", "nccl_debug", "flag",
           "Set NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,NET for CMD, each only when unset, so that NCCL says which "
           "transport it uses. Without it CMD's environment is exactly rdmadoctor's.",
           commands=("run",)),
    Option("--read-all", "read_all", "flag",
           "Read all of CMD's output for the diagnosis. By default rdmadoctor reads the first 16 MiB (NCCL's init, where it "
           "picks its transport), the last 16 MiB (where a job fails) and any NCCL line until the transport is known, and only "
           "counts the middle: reading all costs about 2% of a core more at 50k lines/s (passing through costs about 1.1%).",
           commands=("run",)),
    Option("--metrics-port", "metrics_port", "int",
           "Serve /metrics on this port while CMD runs (0: a free port, said on stderr): rdmadoctor_job_hang{blamed_node} is 1 "
           "while the job is hung (no output for hang_after_s, default 300, or PyTorch's watchdog), naming the node NCCL's "
           "RAS blames. Default: no server.",
           metavar="PORT", commands=("run",)),
    Option("--drain-timeout", "drain_timeout", "float",
           "After CMD exits, keep copying what its stdout and stderr still carry (a process it started may hold them open "
           "and keep writing) and reading the diagnosis of its output for at most this long, counted from the exit; then "
           f"exit with CMD's status (default {DRAIN_TIMEOUT_DEFAULT:g}: the job's last writes are in the pipes already, and a scheduler sees "
           "rdmadoctor end with the job, well inside Kubernetes' 30 s grace period or Slurm's KillWait). The copy also "
           "ends when the pipes close or stay quiet for 0.1 s. Raise it for a slow diagnosis of a huge failed log.",
           metavar="SECONDS", commands=("run",)),
    Option("--report-file", "report_file", "str",
           "At exit, write one JSON document there (schema rdmadoctor.run/v1): the gate's verdict, how CMD ended, what NCCL "
           "did (the `nccl` section) and the findings from its output. Written even when the gate stops CMD.",
           metavar="PATH", commands=("run",)),
)


def rows(command: str) -> list[Option]:
    """The rows ``command`` takes, in its --help order."""
    return [o for o in OPTIONS if command in o.commands]


def fast_table(command: str) -> dict[str, tuple[str, str]]:
    """``--flag`` (and each alias, e.g. ``-o``) -> (field, kind) for the fast parser."""
    return {flag: (o.field, o.kind) for o in rows(command) for flag in (*o.aliases, o.flag)}


def defaults(command: str) -> dict[str, Any]:
    """Each field ``command`` takes, at its default (a fresh list for a list)."""
    return {o.field: list(o.default) if isinstance(o.default, list) else o.default for o in rows(command)}


def overrides(args: Any, command: str) -> list[tuple[str, str, Any]]:
    """(flag, expectation, value) for each row of ``command`` that sets an expectation and was
    given, in the table's order: what the gate applies after the user's --set items."""
    return [(o.flag, o.sets, getattr(args, o.field)) for o in rows(command)
            if o.sets is not None and getattr(args, o.field) is not None]


class Args:
    """A command line as both parsers read it: one attribute per field of :data:`OPTIONS` (at its
    default where the command does not take it), and ``command``: the words after ``--`` (or
    the CMD argument), None when none were given. Compared by value, so a test can hold the
    two parsers' records side by side."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, **given: Any):
        # The fields from the table itself, at each construction (once a run): no second list.
        values: dict[str, Any] = {}
        for o in OPTIONS:
            if o.field not in values:
                values[o.field] = given.pop(o.field) if o.field in given else (
                    list(o.default) if isinstance(o.default, list) else o.default)
        values["command"] = given.pop("command", None)
        if given:
            raise TypeError(f"Args() got unexpected arguments {', '.join(map(repr, given))}: no row of OPTIONS sets them")
        self.__dict__.update(values)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(self) == vars(other)

    def __repr__(self) -> str:
        return "Args(" + ", ".join(f"{k}={v!r}" for k, v in vars(self).items()) + ")"


def parse(args: list[str], command: str = "check", rest: bool = False) -> Any:
    """The typer-free parser: the :class:`Args` of ``command``'s line, or None to let typer
    handle (and explain) it. With ``rest``, everything after a ``--`` is ``Args.command``."""
    # option -> (field of Args, kind): "str"/"int"/"float" take a value, "list" may repeat, "flag" none.
    options = fast_table(command)
    out: dict[str, Any] = defaults(command)
    i = 0
    while i < len(args):
        arg = args[i]
        if rest and arg == "--":
            out["command"] = list(args[i + 1 :])
            break
        opt, eq, inline = arg.partition("=")
        spec = options.get(opt)
        if spec is None:
            return None
        name, kind = spec
        if kind == "flag":
            if eq:
                return None
            out[name] = True
            i += 1
            continue
        if eq:
            value = inline
            i += 1
        else:
            if i + 1 >= len(args) or args[i + 1].startswith("--"):
                return None
            value = args[i + 1]
            i += 2
        try:
            if kind == "list":
                out[name].append(value)
            elif kind == "int":
                out[name] = int(value)
            elif kind == "float":
                out[name] = float(value)
            else:
                out[name] = value
        except ValueError:
            return None
    return Args(**out)


def row(flag: str, command: str) -> Option:
    """The row of ``flag`` as ``command`` takes it."""
    return next(o for o in OPTIONS if o.flag == flag and command in o.commands)


def fields() -> dict[str, Any]:
    """Each field of :class:`Args` (every command's), at its default: what a library call may name."""
    out: dict[str, Any] = {}
    for o in OPTIONS:
        out.setdefault(o.field, list(o.default) if isinstance(o.default, list) else o.default)
    out["command"] = None
    return out
