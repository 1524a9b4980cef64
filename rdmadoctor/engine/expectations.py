"""What a node is expected to be: built-in profiles, a config file, and ``--set`` overrides.

A config file is TOML or JSON::

    profile = "hgx-8gpu-ndr"          # start from a built-in profile (optional)
    min_rate_gbps = 200                # then override any expectation
    ignore_ports = ["mlx5_9/1"]

    [pools.storage-gw]                 # per node pool, chosen with --pool storage-gw
    gpudirect_required = false
"""

from __future__ import annotations

import json
TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any

GIB = 1024**3

# Expectations every profile starts from. A check may add its own defaults (Check.defaults).
BASE: dict[str, Any] = {
    "expected_hcas": None,  # number of RDMA devices (PFs) expected; None: any, at least one
    "expected_active_ports": None,  # ACTIVE ports expected; None: every judged port
    "min_rate_gbps": None,  # per port; None: no minimum
    "link_layer": None,  # "InfiniBand" | "Ethernet" | None (either)
    "ignore_ports": [],  # "mlx5_9/1" or "mlx5_9" (all its ports): not judged, not counted
    "ignore_vfs": True,  # SR-IOV virtual functions are the pods' business, not the node's
    "shm_min_bytes": 1 * GIB,
    "memlock_min_bytes": None,  # None: unlimited required
    "require_ipc_lock": True,
    "expected_gpus": None,
    "gpudirect_required": False,  # a missing nvidia_peermem is an error (else a warning)
    "gpu_nic_max": "PXB",  # the worst acceptable nearest-HCA relation for a GPU
    "roce_min_mtu": 4096,  # RoCE active MTU below this is a warning
    "pcie_check_bridges": True,
    "required_modules": ["ib_core", "ib_uverbs", "rdma_ucm"],
    "recommended_packages": [
        "libibverbs1",
        "ibverbs-providers",
        "librdmacm1",
        "libibumad3",
        "infiniband-diags",
        "perftest",
    ],
    "compute_hcas": None,  # names (or prefixes) of the HCAs meant for NCCL; None: all
}

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
        "gpudirect_required": True,
        "gpu_nic_max": "PXB",
    },
}


class ConfigError(Exception):
    pass


def _load_file(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ConfigError(f"cannot read config {path}: {e.strerror or e}") from e
    if path.endswith(".json"):
        try:
            data = json.loads(raw)
        except ValueError as e:
            raise ConfigError(f"config {path} is not valid JSON: {e}") from e
    else:
        try:
            import tomllib  # type: ignore[import-not-found]
        except ModuleNotFoundError:  # Python 3.10
            import tomli as tomllib  # type: ignore[no-redef]
        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise ConfigError(f"config {path} is not valid TOML: {e}") from e
    if not isinstance(data, dict):
        raise ConfigError(f"config {path}: expected a table of expectations at the top level")
    return data


def parse_set(items: list[str]) -> dict[str, Any]:
    """``--set key=value``: the value is read as JSON when it parses, else kept as a string."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set min_rate_gbps=200")
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value
    return out


def resolve(
    defaults: dict[str, Any],
    profile: str = "generic",
    config: str | None = None,
    pool: str | None = None,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Merge: check defaults < base < profile < config file < config pool < --set."""
    known = dict(BASE)
    known.update(defaults)
    file_data: dict[str, Any] = {}
    if config:
        file_data = _load_file(config)
        if "profile" in file_data and profile == "generic":
            profile = str(file_data["profile"])
    if profile not in PROFILES:
        raise ConfigError(f"unknown profile {profile!r}; built-in profiles: {', '.join(PROFILES)}")
    out = dict(known)
    out.update({k: v for k, v in PROFILES[profile].items() if not k.startswith("_")})
    layers = [{k: v for k, v in file_data.items() if k not in ("profile", "pools")}]
    if pool:
        pools = file_data.get("pools", {})
        if not isinstance(pools, dict) or pool not in pools:
            raise ConfigError(f"node pool {pool!r} is not in {config or 'the config (no --config given)'}")
        layers.append(pools[pool])
    layers.append(overrides or {})
    for layer in layers:
        if not isinstance(layer, dict):
            raise ConfigError("a config pool must be a table of expectations")
        for k, v in layer.items():
            if k not in known:
                raise ConfigError(f"unknown expectation {k!r}; known: {', '.join(sorted(known))}")
            out[k] = v
    out["_profile"] = profile
    return out
