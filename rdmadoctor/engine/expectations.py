"""What a node is expected to be: built-in profiles, a config file, and ``--set`` overrides.

A config file is TOML or JSON::

    profile = "hgx-8gpu-ndr"          # start from a built-in profile (optional)
    min_rate_gbps = 200                # then override any expectation
    ignore_ports = ["mlx5_9/1"]

    [pools.storage-gw]                 # per node pool, chosen with --pool storage-gw
    gpudirect_required = false
    shm_min_bytes = "8GiB"             # sizes: bytes, or "16Gi"/"16GiB" (binary), "16G" (decimal)

    [pools.h100-ib]                    # or by the node's own facts, without --pool: the first
    match = { gpu_model = "10de:2330", hca_count = 8, link_layer = "InfiniBand" }   # pool that fits
    min_rate_gbps = 400

    [pools.a100-roce]                  # or, in direct mode (agent --publish node), by its Node's labels
    match = { labels = { "nvidia.com/gpu.product" = "NVIDIA-A100-SXM4-80GB" } }

Every key has a type, unit and range, declared once by the check that reads it (``Check.defaults``;
SPEC is built from the built-in checks', ``describe()`` lists them). Each layer is checked
as it is merged, and a value of the wrong type or out of range is a ConfigError (exit 2) that
names the key, the value, the layer and what the key takes: a check cannot compare
``min_rate_gbps = "800"`` with a port's rate, so before it silently judged nothing.
"""

from __future__ import annotations

import json
import sys

from rdmadoctor.core.expect import Expect, ExpectError, infer, show
from rdmadoctor.core.labels import RELATIONS

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any

# Nearest first: the one list (core.labels.RELATIONS) the PCI checks and the labels rank by.
GPU_NIC_RELATIONS = RELATIONS


def __getattr__(name: str) -> Any:
    """``SPEC`` (every built-in expectation's Expect) and ``BASE`` (their defaults), built on first
    use from the built-in checks' own ``defaults``: a check declares each expectation once."""
    if name == "SPEC":
        return _builtin_spec()
    if name == "BASE":
        return {k: s.default for k, s in _builtin_spec().items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_SPEC: dict[str, Expect] | None = None


def _builtin_spec() -> dict[str, Expect]:
    global _SPEC
    if _SPEC is None:
        from rdmadoctor.engine import registry

        # The built-in modules straight from the package (no entry-point scan).
        # plugins.load's optional_plugins is read in every run, whether or not a plugin failed.
        _SPEC = declared([registry.plugins_check(), *(c for _, mod in registry.builtin_modules() for c in mod.CHECKS)])
    return _SPEC


def declared(checks: Any) -> dict[str, Expect]:
    """Every key the checks declare in ``Check.defaults``, as an Expect (a plain default's type
    is its value's type), in check order. A key is declared by the first check that names it;
    another check may name it again only with an equal Expect (or a plain value it accepts),
    never with another type, range or default: that would be one fact written twice."""
    out: dict[str, Expect] = {}
    owner: dict[str, str] = {}
    for c in checks:
        for key, d in (getattr(c, "defaults", None) or {}).items():
            spec = infer(d)
            first = out.get(key)
            if first is None:
                _own_default_ok(key, spec, d)
                out[key] = spec
                owner[key] = c.id
            elif spec != first and not (not isinstance(d, Expect) and _accepts(first, key, d) and d == first.default):
                raise ConfigError(
                    f"{key} is declared by {owner[key]} and again, differently, by {c.id}",
                    "a check declares an expectation once; others read it (report this to the check's author)",
                    key=key, value=d, where="check defaults",
                )
    return out


def _accepts(spec: Expect, key: str, value: Any) -> bool:
    try:
        spec.validate(key, value)
    except ExpectError:
        return False
    return True


def _own_default_ok(key: str, spec: Expect, d: Any) -> None:
    try:
        spec.validate(key, spec.default)
    except ExpectError as e:
        raise ConfigError(
            f"{key}, an expectation declared by a check, has a default its own type refuses: {e.problem}; "
            f"expected {e.expected}",
            "this is a bug in the check (see `rdmadoctor list-checks`); report it to its author",
            key=key, value=d, expected=e.expected, where="check defaults",
        ) from e


PROFILES: dict[str, dict[str, Any]] = {
    "generic": {
        "_description": "Any RDMA node: at least one ACTIVE port, no rate or GPU expectations.",
    },
    "hgx-8gpu-ndr": {
        "_description": "8-GPU HGX/DGX H100-class node with 8 compute InfiniBand ports at >= 400 Gb/s (NDR), GPUDirect RDMA required.",
        "expected_gpus": 8,
        "expected_active_ports": 8,
        "min_rate_gbps": 400,
        "link_layer": "InfiniBand",
        "gpudirect_required": True,
        "gpu_nic_max": "PXB",
    },
    "hgx-8gpu-roce-400g": {
        "_description": "8-GPU node with 8 compute RoCE v2 ports at >= 400 Gb/s, GPUDirect RDMA required, MTU 4096.",
        "expected_gpus": 8,
        "expected_active_ports": 8,
        "min_rate_gbps": 400,
        "link_layer": "Ethernet",
        "rdma_transport": "RoCE",
        "gpudirect_required": True,
        "gpu_nic_max": "PXB",
    },
    # A pool that trains over TCP on purpose: a cloud's elastic NICs given to pods by the CNI
    # (Terway ENI), or any cluster without RDMA. No RDMA device is the design; what matters is the
    # interface NCCL's sockets use. memlock and IPC_LOCK only matter to RDMA registration (ibv_reg_mr).
    "tcp": {
        "_description": "Trains over TCP sockets on purpose (no RDMA needed): NCCL_SOCKET_IFNAME must name an "
        "interface that is up, has an address and runs at >= 25 Gb/s.",
        "rdma_required": False,
        "required_modules": [],
        "recommended_packages": [],
        "memlock_min_bytes": 0,
        "require_ipc_lock": False,
        "socket_min_gbps": 25,
    },
    # iWARP (RDMA over TCP: Chelsio cxgb4, Intel irdma in iWARP mode, soft iWARP siw): MPI jobs
    # use it through libfabric's verbs;ofi_rxm (rdma_cm); NCCL's IB transport cannot (IWARP_NCCL_IB).
    # iwarp.config judges iw_cm and rdma_cm itself (IWARP_CM_MISSING), so they are not listed here.
    "iwarp": {
        "_description": "iWARP RNICs (cxgb4, irdma in iWARP mode, siw): at least one ACTIVE iWARP port, iw_cm and "
        "rdma_cm loaded; NCCL jobs must keep NCCL's IB transport off these ports.",
        "link_layer": "Ethernet",
        "rdma_transport": "iWARP",
    },
}



class ConfigError(Exception):
    """A bad profile, config file, pool or --set; the CLI prints it with ``hint`` and exits 2.

    For a bad value, ``key``, ``value``, ``expected`` (what the key takes) and ``where`` (the
    layer: "--set", "in pool.toml [pools.gw]") say which and why.
    """

    def __init__(self, message: str, hint: str = "", *, key: str | None = None, value: Any = None,
                 expected: str | None = None, where: str | None = None):
        super().__init__(message)
        self.hint = hint
        self.key = key
        self.value = value
        self.expected = expected
        self.where = where


# A config is a few dozen keys and some pools: a kilobyte or two. More than this is not a config
# (/dev/zero, a log or an image given by mistake) and reading it whole would exhaust memory.
CONFIG_MAX_BYTES = 1 << 20
CONFIG_HINT = "--config takes a TOML or JSON file of expectations (see `rdmadoctor list-checks`)"


def _read_config(path: str) -> bytes:
    """At most CONFIG_MAX_BYTES of a regular file (rdmadoctor.core.files.read_regular)."""
    from rdmadoctor.core.files import NotRegular, read_regular

    try:
        raw = read_regular(path, CONFIG_MAX_BYTES)
    except IsADirectoryError as e:
        raise ConfigError(f"config {path} is a directory, not a file", CONFIG_HINT) from e
    except NotRegular as e:
        raise ConfigError(f"config {path} is {e.kind}, not a file", CONFIG_HINT) from e
    except OSError as e:
        raise ConfigError(f"cannot read config {path}: {e.strerror or e}", CONFIG_HINT) from e
    if len(raw) > CONFIG_MAX_BYTES:
        raise ConfigError(
            f"config {path} is larger than {CONFIG_MAX_BYTES // (1 << 20)} MiB, the most a config may be",
            "a config holds a few expectations and [pools.NAME] tables; is it the right file? " + CONFIG_HINT,
        )
    return raw


def _load_file(path: str) -> dict[str, Any]:
    raw = _read_config(path)
    if path.endswith(".json"):
        try:
            data = json.loads(raw)
        except RecursionError as e:
            raise _too_deep(f"config {path} is not valid JSON:") from e
        except ValueError as e:
            raise ConfigError(f"config {path} is not valid JSON: {e}") from e
    else:
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # Python 3.10: the backport
            import tomli as tomllib
        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except RecursionError as e:
            raise _too_deep(f"config {path} is not valid TOML:") from e
        except (ValueError, UnicodeDecodeError) as e:
            raise ConfigError(f"config {path} is not valid TOML: {e}") from e
    if not isinstance(data, dict):
        raise ConfigError(f"config {path}: expected a table of expectations at the top level")
    return data


def _too_deep(what: str) -> ConfigError:
    """JSON's and TOML's readers recurse once a level: a value nested thousands deep exhausts
    Python's stack (RecursionError). No expectation is more than a list of names."""
    return ConfigError(
        f"{what} nested too deeply to read (arrays or tables thousands of levels deep)",
        "an expectation is a number, a string, true/false or a list of names; `rdmadoctor list-checks` lists them",
    )


def _json_value(text: str) -> Any:
    """``--set`` values are JSON when they parse (400, true, null, ["a"]), else the string."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


class SetValues(dict):
    """``--set`` values by key; ``bare``: the keys whose value was not JSON and is kept as the
    text typed (no quotes around it): ``--set min_rate_gbps=nan`` is not a quoted string."""

    bare: frozenset = frozenset()


def _non_finite(text: str) -> bool:
    """nan, inf, -Infinity, 1e999: what Python's float() reads as a number that is not finite."""
    try:
        f = float(text)
    except ValueError:
        return False
    return f != f or f in (float("inf"), float("-inf"))


def parse_set(items: list[str]) -> dict[str, Any]:
    """``--set key=value``: the value is read as JSON when it parses, else kept as a string.

    Its type is judged later, against the key's Expect, so that ``--set min_rate_gbps=abc``
    is an error and not a string the rate check cannot compare (and silently skips).
    """
    out = SetValues()
    bare: set[str] = set()
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                f"--set {item!r}: expected KEY=VALUE", "e.g. --set min_rate_gbps=200; `rdmadoctor list-checks` lists the keys"
            )
        try:
            out[key.strip()] = json.loads(value)
            bare.discard(key.strip())
        except RecursionError as e:
            # Not "a string that is not JSON": [[[[... was meant as JSON, and taken as a name
            # it would be a list of one odd name.
            raise _too_deep(f"--set {key.strip()}: the value is") from e
        except ValueError:
            out[key.strip()] = value
            bare.add(key.strip())
    out.bare = frozenset(bare)
    return out


def specs(defaults: dict[str, Any] | None = None) -> dict[str, Expect]:
    """Every known key's Expect: the built-in checks' (SPEC), then the keys other checks (plugins)
    add in Check.defaults. A plugin cannot retype a built-in key: the built-in declaration stands."""
    out = dict(_builtin_spec())
    for key, d in (defaults or {}).items():
        if key in out:
            continue
        spec = infer(d)
        _own_default_ok(key, spec, d)
        out[key] = spec
    return out


def describe(defaults: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every expectation for `list-checks`: key, type, unit, default, range, choices, doc."""
    return [s.describe(k) for k, s in specs(defaults).items()]


def _toml(value: Any) -> str:
    # JSON and TOML agree on numbers, booleans, lists and simple strings; TOML has no null.
    return json.dumps(value)


def _unquoted(spec: Expect, key: str, value: Any) -> Any:
    """The value a quoted string would have had without its quotes, if the key takes that."""
    if not isinstance(value, str):
        return None
    for text in (value.strip(), value.strip().lower()):
        parsed = _json_value(text)
        if parsed is not text and not isinstance(parsed, str):
            try:
                spec.validate(key, parsed)
                return parsed
            except ExpectError:
                pass
    return None


def _bad_value(e: ExpectError, spec: Expect, where: str) -> ConfigError:
    key, value = e.key, e.value
    on_cli = where == "--set"
    subject = f"--set {key}" if on_cli else f"{key} {where}"
    fixed = _unquoted(spec, key, value)
    if fixed is not None:
        hint = f"write it without quotes: {key} = {_toml(fixed)}" if not on_cli else f"write --set {key}={_toml(fixed)}"
    else:
        example = spec.example if spec.example is not None else spec.default
        if example is None:
            hint = ""
        elif on_cli:
            shown = example if isinstance(example, str) else json.dumps(example)
            hint = f"for example: --set {key}={shown}"
        else:
            hint = f"for example: {key} = {_toml(example)}"
    doc = f"{key}: {spec.doc}" if spec.doc else ""
    hint = "; ".join(h for h in (hint, doc) if h)
    return ConfigError(
        f"{subject}: {e.problem}; expected {e.expected}", hint,
        key=key, value=value, expected=e.expected, where=where,
    )


def _unknown(key: str, where: str, known: dict[str, Expect]) -> ConfigError:
    import difflib  # only on this error path

    near = difflib.get_close_matches(key, list(known), n=1)
    hint = f"did you mean {near[0]!r}? " if near else ""
    return ConfigError(
        f"unknown expectation {show(key)} ({where}); known: {', '.join(sorted(known))}",
        hint + "`rdmadoctor list-checks` lists the checks; a plugin check adds its own keys",
        key=key, value=None, where=where,
    )


_NUMBER_TYPES = ("int", "number", "bytes")


def _merge(out: dict[str, Any], layer: Any, where: str, known: dict[str, Expect]) -> None:
    if not isinstance(layer, dict):
        raise ConfigError(f"{where}: expected a table of expectations, got {show(layer)}", where=where)
    bare: frozenset[str] = getattr(layer, "bare", frozenset())
    for k, v in layer.items():
        spec = known.get(k)
        if spec is None:
            raise _unknown(str(k), where, known)
        try:
            out[k] = spec.validate(k, v)
        except ExpectError as e:
            if k in bare and spec.type in _NUMBER_TYPES and isinstance(v, str) and _non_finite(v):
                # `--set min_rate_gbps=nan` typed no quotes: it is a number that is not finite
                # (JSON has no nan/inf, so it was kept as text), not "a string in quotes".
                e = ExpectError(k, v, f"{v.strip()} is not a finite number", e.expected)
            raise _bad_value(e, spec, where) from e


# What a pool's `match` table may name: facts the agent reads from the node itself, so a pool is
# chosen with no API access (NFD mode too). gpu_model: the GPUs' PCI vendor:device ("10de:2330",
# as the fingerprint names it), one or a list; hca_count: RDMA devices without VFs; link_layer:
# "InfiniBand" or "Ethernet", held by at least one RDMA port. And labels: the Node's labels, each
# named key equal to its value (or one of a list), which only `agent --publish node` reads (it has
# the Node at hand); elsewhere a labels match fits no node and the report says why.
MATCH_KEYS = ("gpu_model", "hca_count", "link_layer", "labels")
_LINK_LAYERS = ("InfiniBand", "Ethernet")
# rdmadoctor's own labels (rdmadoctor.io/ready, /pool ...) follow from the pool a node is judged
# as: matching on them would choose a pool from the last verdict, which then chooses the next.
_OWN_LABELS = "rdmadoctor.io/"
_NO_LABELS = "the Node's labels are not read here (only `agent --publish node` reads its Node)"


def _pool_table(table: Any) -> dict[str, Any]:
    """A pool's expectations, without its `match` (checked by _check_match)."""
    return {k: v for k, v in table.items() if k != "match"} if isinstance(table, dict) else table


def _check_match(match: Any, where: str) -> dict[str, Any]:
    example = ('match = { gpu_model = "10de:2330", hca_count = 8, link_layer = "InfiniBand" }, or in direct mode '
               'match = { labels = { "nvidia.com/gpu.product" = "NVIDIA-H100-80GB-HBM3" } }')
    if not isinstance(match, dict) or not match:
        raise ConfigError(f"match {where}: {show(match)} is not a table of node facts", example, key="match",
                          value=match, where=where)
    for k, v in match.items():
        if k == "gpu_model":
            ok = isinstance(v, str) and v or (isinstance(v, list) and v and all(isinstance(x, str) and x for x in v))
            expected = 'a GPU PCI ID "vendor:device" ("10de:2330") or a list of them'
        elif k == "hca_count":
            ok = isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 4096
            expected = "a whole number of RDMA devices (VFs not counted), 0 to 4096"
        elif k == "link_layer":
            ok = v in _LINK_LAYERS
            expected = '"InfiniBand" or "Ethernet"'
        elif k == "labels":
            ok = isinstance(v, dict) and bool(v) and all(
                isinstance(key, str) and key.strip() and not key.startswith(_OWN_LABELS)
                and (isinstance(val, str) or isinstance(val, list) and val and all(isinstance(x, str) for x in val))
                for key, val in v.items())
            expected = ('a table of Node label keys, each with the value it must have or a list of them '
                        '({ "nvidia.com/gpu.product" = "NVIDIA-H100-80GB-HBM3" }), none of rdmadoctor.io/ '
                        '(rdmadoctor writes those from the pool it chose)')
        else:
            raise ConfigError(f"match {where}: unknown node fact {k!r}; a match names {', '.join(MATCH_KEYS)}",
                              example, key=f"match.{k}", value=v, where=where)
        if not ok:
            raise ConfigError(f"match.{k} {where}: {show(v)} is not {expected}", example, key=f"match.{k}", value=v,
                              expected=expected, where=where)
    return match


def pool_rules(config: str) -> list[tuple[str, dict[str, Any]]]:
    """(pool, match) for each pool of ``config`` that says which nodes it is for, in the file's order."""
    pools = _load_file(config).get("pools", {})
    if not isinstance(pools, dict):
        return []
    return [(name, _check_match(table["match"], f"in {config} [pools.{name}]"))
            for name, table in pools.items() if isinstance(table, dict) and "match" in table]


def _fits(key: str, want: Any, facts: dict[str, Any]) -> tuple[bool, str]:
    have = facts.get(key)
    if key == "gpu_model":
        models = [m.lower() for m in have or ()]
        wanted = [want] if isinstance(want, str) else list(want)
        ok = bool(models) and all(m in {w.lower() for w in wanted} for m in models)
        return ok, f"GPUs {', '.join(sorted(set(models))) or 'none'}"
    if key == "hca_count":
        return have == want, f"{have} RDMA devices"
    if key == "labels":
        if have is None:
            return False, _NO_LABELS
        said = []
        for name, value in want.items():
            wanted = [value] if isinstance(value, str) else value
            got = have.get(name)
            said.append((got in wanted, f"label {name}={got}" if got is not None else f"no label {name}"))
        return all(ok for ok, _ in said), "; ".join(w for ok, w in said if not ok) or "; ".join(w for _, w in said)
    return want in (have or ()), f"link layer {' and '.join(have or ()) or 'none'}"


def match_pool(rules: list[tuple[str, dict[str, Any]]], facts: dict[str, Any]) -> tuple[str | None, str]:
    """The first pool whose every `match` fact fits the node's ``facts`` (gpu_model: the GPUs' PCI
    IDs; hca_count; link_layer: the ports' layers; labels: the Node's labels, None where they are
    not read), and why; (None, why) when none does."""
    tried = []
    for name, match in rules:
        said = [_fits(k, v, facts) for k, v in match.items()]
        if all(ok for ok, _ in said):
            return name, f"[pools.{name}] is the first pool whose match fits: " + "; ".join(w for _, w in said)
        tried.append(f"{name} ({'; '.join(w for ok, w in said if not ok)})")
    return None, "no pool's match fits this node: " + ", ".join(tried)


def _check_pools(file_data: dict[str, Any], config: str, known: dict[str, Expect]) -> None:
    """Every pool of the config, not only the one selected: one ConfigMap serves every node pool
    of a DaemonSet, and a typo in another pool's table must fail here, on every node, not when
    that pool's nodes read it."""
    pools = file_data.get("pools", {})
    if not isinstance(pools, dict):
        raise ConfigError(
            f"pools in {config}: {show(pools)} is not a table of node pools",
            'a pool is a table of expectations under pools, e.g. [pools.gw] then min_rate_gbps = 200 on the next line',
            key="pools", value=pools, where=f"in {config}",
        )
    for name, table in pools.items():
        # Each pool merged onto a scratch copy: it is checked as it would be merged for its nodes.
        if isinstance(table, dict) and "match" in table:
            _check_match(table["match"], f"in {config} [pools.{name}]")
        _merge({}, _pool_table(table), f"in {config} [pools.{name}]", known)


def resolve(
    defaults: dict[str, Any],
    profile: str = "generic",
    config: str | None = None,
    pool: str | None = None,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Merge: check defaults < base < profile < config file < config pool < --set.

    Every layer is checked against the keys' Expect as it is merged, so the result holds only
    values the checks can read (a bad one raises ConfigError naming key, value and layer).
    """
    known = specs(defaults)
    out: dict[str, Any] = {}
    for k, spec in known.items():
        # Copies, so that no run can change a default list in place for the next.
        out[k] = spec.validate(k, spec.default)
    file_data: dict[str, Any] = {}
    if config:
        file_data = _load_file(config)
        if "profile" in file_data:
            named = file_data["profile"]
            if not isinstance(named, str):
                raise ConfigError(
                    f"profile in {config}: {show(named)} is not a profile name; expected one of {', '.join(PROFILES)}",
                    f'for example: profile = "{next(iter(PROFILES))}"', key="profile", value=named, where=f"in {config}",
                )
            if profile == "generic":
                profile = named
    if profile not in PROFILES:
        raise ConfigError(
            f"unknown profile {profile!r}; built-in profiles: {', '.join(PROFILES)}",
            "; ".join(f"{name}: {p['_description']}" for name, p in PROFILES.items()),
        )
    _merge(out, {k: v for k, v in PROFILES[profile].items() if not k.startswith("_")}, f"in profile {profile!r}", known)
    if config:
        _merge(out, {k: v for k, v in file_data.items() if k not in ("profile", "pools")}, f"in {config}", known)
        _check_pools(file_data, config, known)
    if pool:
        pools = file_data.get("pools", {})
        if pool not in pools:
            have = ", ".join(sorted(pools)) if pools else "none"
            raise ConfigError(
                f"node pool {pool!r} is not in {config or 'the config (no --config given)'}",
                f"pools in the config: {have}; a pool is a [pools.NAME] table",
            )
        _merge(out, _pool_table(pools[pool]), f"in {config} [pools.{pool}]", known)
    _merge(out, overrides or {}, "--set", known)
    out["_profile"] = profile
    return out
