"""From options to a report in one call (:func:`diagnose`): every command that judges a node
goes through it (check, label, diagnose, topo, the agent's loop, preflight's gate, collect's
recording), and it raises :class:`UsageError` for the CLI to print."""

from __future__ import annotations

from rdmadoctor.core.record import field, record

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any

from rdmadoctor.engine import execute as engine
from rdmadoctor.engine import expectations, registry, report
from rdmadoctor.host import Host


@record(frozen=False)
class Options:
    """What one run of the checks needs; how a command line spelled it is
    rdmadoctor.options.Args."""

    root: str | None = None
    bundle: str | None = None
    example: str | None = None
    profile: str = "generic"
    config: str | None = None
    pool: str | None = None
    sets: list[str] = field(default_factory=list)
    only: list[str] = field(default_factory=list)
    skip: list[str] = field(default_factory=list)
    strict: bool = False
    timeout: float | None = None
    # "all" (check, preflight: this container on this node) or "node" (agent, label: the
    # machine only; pod-scope checks are skipped with the reason).
    scope: str = "all"
    # Only the checks that declare gate=True (what `rdmadoctor preflight` gates a job on),
    # before only/skip apply.
    gate_only: bool = False
    # Logs to diagnose with the checks (`rdmadoctor diagnose LOG ...`): paths, "-" for stdin.
    # The logs.diagnose check reads them (and a bundle's logs/); empty: only a bundle's logs.
    logs: list[str] = field(default_factory=list)
    # The logs already read (rdmadoctor.logs.Diagnosis): `diagnose` reads them first, with a
    # progress bar and one error per file, and stdin can be read only once.
    log_diagnosis: Any = None
    # The ports' counter history (rdmadoctor.core.counters.CounterHistory): the agent keeps one
    # across its cycles; None and no sample: ib.counters has nothing to judge and is skipped.
    counters: Any = None
    # check --sample SECONDS: read the counters, wait, and let ib.counters judge the second read.
    sample: float | None = None
    # The Node's labels, for a pool's `match = { labels = ... }`: `agent --publish node` reads them
    # from its Node; None where nobody did (a labels match then fits no node, saying so).
    node_labels: dict[str, str] | None = None


def options_of(record: Any, scope: str = "all", *, sets: list[str] | None = None, only: list[str] | None = None) -> Options:
    """The checks' options of a command's option record (an :class:`rdmadoctor.options.Args`, or the
    gate's Request, which has its fields): what to read (--root, --bundle, --example), what to
    expect (--profile, --config, --pool, --set), which checks (--only, --skip, --timeout), --strict
    and --sample, as `check`, `agent`, `label`, `slurm health`, `slurm prolog` and the gate take them:
    a field the checks read is added here once. ``scope``: "all" (this container on this node) or
    "node" (the machine only). The gate gives ``sets`` (the user's --set, then its flags'
    expectations: Request.set_items) and ``only`` (--only resolved to the checks it gates on)."""
    return Options(
        root=record.root,
        bundle=record.bundle,
        example=record.example,
        profile="generic" if record.profile is None else record.profile,
        config=record.config,
        pool=record.pool,
        sets=list(record.sets or []) if sets is None else sets,
        only=list(record.only or []) if only is None else only,
        skip=list(record.skip or []),
        strict=bool(record.strict),
        timeout=record.timeout,
        sample=record.sample,
        scope=scope,
    )


class UsageError(Exception):
    """A problem with the command line or its inputs; exit code 2."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.hint = hint


def split_ids(values: list[str]) -> list[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


# An option given an empty value (`--example ""`, `--config "$UNSET"`) is a mistake, most often a
# shell variable that was never set: treated as absent it would check the live machine instead
# of the example, or run with the defaults instead of the config, and say nothing.
_EMPTY_HINTS = {
    "root": "--root takes the folder where the host's / is mounted, e.g. --root /host; leave it out to check this machine",
    "bundle": "--bundle takes a bundle folder or .tar.gz from `rdmadoctor collect`",
    "example": "--example takes a shipped example's name: `rdmadoctor examples` lists them",
    "profile": "--profile takes a built-in profile's name (generic, hgx-8gpu-ndr, ...); leave it out for generic",
    "config": "--config takes a TOML or JSON file of expectations; leave it out to use the profile alone",
    "pool": "--pool takes the NAME of a [pools.NAME] table of --config; leave it out to use none",
    "scope": "--scope takes all or node; leave it out for all",
}


def check_empty(opts: Options) -> None:
    """UsageError for an option given as an empty string (None is "not given")."""
    for name, hint in _EMPTY_HINTS.items():
        value = getattr(opts, name)
        if isinstance(value, str) and not value.strip():
            raise UsageError(f"--{name} is empty" + (f" ({value!r})" if value else ""), hint)
    if opts.only and not split_ids(opts.only):
        # `--only ""` (or ","): a selection of nothing is not "every check". An empty --skip
        # skips nothing, which is what it says, and stays allowed (`--skip "$SKIP"`).
        raise UsageError("--only is empty: it names no check", "give check ids or prefixes, e.g. --only ib,limits; leave it out to run every check")


def open_target(opts: Options) -> Host:
    from rdmadoctor.host import HostError, open_host

    check_empty(opts)
    given = [x for x in (opts.root, opts.bundle, opts.example) if x]
    if len(given) > 1:
        raise UsageError("--root, --bundle and --example are exclusive: give one")
    try:
        if opts.example:
            from rdmadoctor.examples import UnknownExample, example_path

            try:
                return open_host(bundle=example_path(opts.example))
            except UnknownExample as e:
                raise UsageError(str(e)) from e
        return open_host(root=opts.root, bundle=opts.bundle)
    except HostError as e:
        raise UsageError(str(e)) from e


@record(frozen=False)
class Outcome:
    """One run of the checks: its report, the checks' results, and the context they read through
    (not to be confused with rdmadoctor.logs.Diagnosis, the diagnosis of a job's log)."""

    report: dict[str, Any]
    results: list
    ctx: engine.Context


SCOPES = ("all", "node")


def diagnose(opts: Options, host: Host | None = None) -> Outcome:
    check_empty(opts)
    if opts.scope not in SCOPES:
        raise UsageError(f"--scope must be one of {', '.join(SCOPES)}, got {opts.scope!r}")
    checks, plugin_errors = registry.load_checks()
    known = {c.id for c in checks}
    only, skip = split_ids(opts.only), split_ids(opts.skip)
    for pat in only + skip:
        if not any(cid == pat or cid.startswith(pat + ".") for cid in known):
            raise UsageError(f"no check matches {pat!r}", "list them with `rdmadoctor list-checks`")
    if not [c for c in engine.select(checks, only, skip, opts.gate_only) if c.id != registry.PLUGINS_ID]:
        raise UsageError(_nothing_selected(only, skip, opts.gate_only), _NOTHING_SELECTED_HINT)
    defaults: dict[str, Any] = dict(registry.PLUGINS_DEFAULTS)  # optional_plugins, whether or not one failed
    for c in checks:
        defaults.update(c.defaults)
    pool, pool_why = opts.pool, ("given with --pool" if opts.pool else None)
    try:
        sets = expectations.parse_set(opts.sets)
        rules = expectations.pool_rules(opts.config) if opts.config and not opts.pool else []
        if rules:
            # One DaemonSet for every pool: the node's own facts pick its table.
            base = expectations.resolve(defaults, opts.profile, opts.config, None, sets)
            if host is None:
                host = open_target(opts)
            facts = pool_facts(host, base)
            facts["labels"] = opts.node_labels
            pool, pool_why = expectations.match_pool(rules, facts)
        expect = expectations.resolve(defaults, opts.profile, opts.config, pool, sets)
    except expectations.ConfigError as e:
        raise UsageError(str(e), e.hint) from e
    if host is None:
        host = open_target(opts)
    if opts.timeout is not None:
        host.timeout = opts.timeout
    counters = opts.counters
    if opts.sample is not None:
        counters = _first_sample(host, expect, opts.sample)
    ctx = engine.Context(host=host, expect=expect, logs=tuple(opts.logs), log_diagnosis=opts.log_diagnosis, counters=counters)
    results = engine.run(checks, ctx, only=only, skip=skip, scope=opts.scope, gate_only=opts.gate_only)
    rep = report.build(
        results, {c.id: c for c in checks}, host, expect, strict=opts.strict, plugin_errors=plugin_errors
    )
    rep["scope"] = opts.scope
    rep["fingerprint"]["pool"] = pool  # the fleet groups reports by the pool they were judged as
    if pool_why is not None:
        rep["pool"] = {"name": pool, "chosen_by": "--pool" if opts.pool else "match", "why": pool_why}
    rep["fingerprint"]["identity"]["node"] = node_name(host)
    return Outcome(rep, results, ctx)


def pool_facts(host: Host, expect: dict) -> dict[str, Any]:
    """The node facts a pool's `match` names, read as the checks read them (the RDMA inventory,
    the GPU topology): GPU PCI IDs, RDMA devices without VFs, their ports' link layers."""
    from rdmadoctor.checks._rdma import probe_inventory
    from rdmadoctor.checks.gpu import probe_topology

    ctx = engine.Context(host=host, expect=expect)
    devices = [d for d in ctx.get(probe_inventory).devices if not d.is_vf]
    layers = sorted({p.link_layer for d in devices for p in d.ports if p.link_layer})
    gpus = [g.pci_id for g in ctx.get(probe_topology).gpus if g.pci_id]
    return {"gpu_model": gpus, "hca_count": len(devices), "link_layer": layers}


def node_name(host: Host) -> str | None:
    """The name the fleet knows this node by: $NODE_NAME (the DaemonSet sets it from spec.nodeName;
    the pod's own hostname is the pod's name), else the checked root's /etc/hostname (a --root of
    another machine), else the hostname the report names (live: this machine; bundle: recorded)."""
    import os

    kind = getattr(host, "kind", None)
    if kind != "bundle" and os.environ.get("NODE_NAME"):
        return os.environ["NODE_NAME"]
    if kind == "root":
        for path in ("/etc/hostname", "/proc/sys/kernel/hostname"):
            name = (host.read_value(path) or "").strip()
            if name:
                return name[:253]
    try:
        return host.runtime.hostname
    except Exception:  # noqa: BLE001 - a bundle without runtime.json
        return None


# `check --sample`'s reads: one every SAMPLE_EVERY seconds (or fewer, for a long sample, within
# the history's MAX_SAMPLES), so a reset and the flaps after it, or a counter that wraps more than
# once, are each seen between two reads.
SAMPLE_EVERY = 1.0


def _first_sample(host: Host, expect: dict, seconds: float, sleep=None):
    """A counter history of the ports' counters read every SAMPLE_EVERY seconds over ``seconds``
    (each read fresh from the host, never the run's cached files): ib.counters adds the last read
    (`check --sample SECONDS`)."""
    import time

    from rdmadoctor.checks._rdma import probe_inventory
    from rdmadoctor.checks.counters import read_counters
    from rdmadoctor.core.counters import MAX_SAMPLES, CounterHistory

    sleep = sleep or time.sleep
    history = CounterHistory()
    ctx = engine.Context(host=host, expect=expect)
    inv = ctx.get(probe_inventory)
    every = max(SAMPLE_EVERY, seconds / (MAX_SAMPLES - 2))
    end = time.monotonic() + seconds
    while True:
        history.add(read_counters(host, inv, expect)[0])
        left = end - time.monotonic()
        if left <= 0:
            return history
        sleep(min(every, left))
        if time.monotonic() >= end:
            return history  # the last read is ib.counters' own


_NOTHING_SELECTED_HINT = "--skip wins over --only; `rdmadoctor list-checks` lists the checks"


def _nothing_selected(only: list[str], skip: list[str], gate_only: bool) -> str:
    given = []
    if gate_only:
        given.append("the checks preflight gates on")
    if only:
        given.append("--only " + ",".join(only))
    if skip:
        given.append("--skip " + ",".join(skip))
    return f"no check left to run ({', '.join(given) or 'no checks installed'})"
