"""The facts one member brings to the gang: what NCCL needs alike on every node of a job.

:func:`gang_facts` is the ONE place that reads them out of a report: the node fingerprint
(``Report.fingerprint``, rdmadoctor.engine.fingerprint, the facts the fleet view compares) and
the job's NCCL settings (``inventory.nccl_env``); nothing else in the gang reads the report. The
report is read as a :class:`rdmadoctor.core.report.Report` (a dict is read into one).
``NCCL_IB_HCA`` is resolved with NCCL's own list rules (rdmadoctor.checks._nccl_rules), the
ones the nccl.env check judges it by.
"""

from __future__ import annotations

import hashlib
import json

from rdmadoctor.checks._nccl_rules import list_matches, parse_if_list
from rdmadoctor.core.report import Report, read

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The NCCL_* settings that change the protocol NCCL speaks or the network it picks: a member that
# differs in one of them does not talk to the others the same way (NCCL does not check them across
# ranks). NCCL_IB_HCA is compared by the number of ports it resolves to (nccl_ib_hca_ports),
# NCCL_IB_GID_INDEX and NCCL_IB_ROCE_VERSION_NUM by their effect (roce_gid_index, roce_version).
PROTOCOL_ENV = (
    "NCCL_IB_DISABLE", "NCCL_NET", "NCCL_NET_PLUGIN", "NCCL_PROTO", "NCCL_ALGO", "NCCL_SOCKET_FAMILY", "NCCL_NET_GDR_LEVEL", "NCCL_IB_TC", "NCCL_IB_SL",
    "NCCL_CROSS_NIC", "NCCL_COLLNET_ENABLE", "NCCL_NVLS_ENABLE",
)


def _ib_hca_ports(value: str | None, ports: list[tuple[str, int]]) -> int:
    """How many of ``ports`` (device, port) NCCL_IB_HCA keeps, as NCCL reads it. Unset: all."""
    if not value or not value.strip():
        return len(ports)
    lst = parse_if_list(value.strip())
    return sum(1 for dev, port in ports if list_matches(lst, dev, port))


def gang_facts(report: Report | dict[str, Any], nccl_version: str | None = None) -> dict[str, Any]:
    """The compared facts of one member, from its report: a flat dict, JSON values only.

    ``nccl_version``: the version found beside the job (NCCL_VERSION, the libnccl beside torch)
    when the caller looked; else what the report says (a log NCCL wrote, the NCCL_VERSION env).
    A value that could not be read is None, never guessed.
    """
    report = read(report)
    env = {k: v for k, v in (report.inventory.get("nccl_env") or {}).items() if isinstance(v, str)}
    fp = report.fingerprint or {}
    active: list[dict[str, Any]] = []  # {device, port, link_layer, rate_gbps, mtu, subnet_prefix, gid_index}
    for p in fp.get("ports") or []:
        if str(p.get("state") or "").upper().endswith("ACTIVE"):
            active.append({"device": p.get("device"), "port": p.get("port"), "link_layer": p.get("link_layer"),
                           "rate_gbps": p.get("rate_gbps"), "mtu": p.get("active_mtu"),
                           "subnet_prefix": p.get("subnet_prefix"), "gid_index": p.get("gid_index"),
                           "v2_gids": p.get("v2_gid_indices")})
    gd = (fp.get("node") or {}).get("gpudirect")
    gpudirect = None if gd is None else gd != "none"

    ib_disabled = env.get("NCCL_IB_DISABLE", "").strip() == "1"
    plain_net = env.get("NCCL_NET", "").strip().lower()
    socket_net = plain_net == "socket"
    hca_ports = _ib_hca_ports(env.get("NCCL_IB_HCA"), [(str(a["device"]), int(a["port"] or 1)) for a in active])
    transport = "rdma" if active and not ib_disabled and not socket_net and hca_ports else "socket"

    def distinct(key: str) -> str | None:
        vals = sorted({str(a[key]) for a in active if a.get(key) is not None})
        return ",".join(vals) or None

    rates: dict[str, int] = {}
    for a in active:
        r = a.get("rate_gbps")
        key = "?" if r is None else f"{float(r):g}"
        rates[key] = rates.get(key, 0) + 1
    roce_ports = [a for a in active if a.get("link_layer") == "Ethernet"]
    gid = (env.get("NCCL_IB_GID_INDEX", "").strip() or distinct("gid_index")) if roce_ports else None
    version = None
    if roce_ports:
        forced = env.get("NCCL_IB_ROCE_VERSION_NUM", "").strip()
        if forced:
            version = f"v{forced}"
        else:
            known = [a for a in roce_ports if a.get("v2_gids") is not None and a.get("gid_index") is not None]
            if known:
                version = "v2" if all(a["gid_index"] in a["v2_gids"] for a in known) else "v1"
    nccl = nccl_version or env.get("NCCL_VERSION") or (report.nccl or {}).get("version")
    facts: dict[str, Any] = {
        "transport": transport,
        "link_layer": distinct("link_layer") if transport == "rdma" else None,
        "active_ports": len(active),
        "rates_gbps": ",".join(f"{n}x{r}" for r, n in sorted(rates.items())) or None,
        "mtu": distinct("mtu"),
        "roce_gid_index": gid,
        "roce_version": version,
        "subnet_prefix": distinct("subnet_prefix"),
        "gpudirect": gpudirect,
        "nccl_ib_hca_ports": hca_ports if transport == "rdma" else None,
        "nccl_version": nccl,
    }
    for name in PROTOCOL_ENV:
        facts[name] = env.get(name)
    return facts


def digest(facts: dict[str, Any]) -> str:
    """A short stable digest of the compared facts: equal digests, nothing to tell apart."""
    text = json.dumps(facts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def rails(report: Report | dict[str, Any]) -> list[str]:
    """The RDMA devices with an ACTIVE port, for ``--bandwidth``'s rail-matched pairs (mlx5_i to mlx5_i)."""
    fp = read(report).fingerprint or {}
    names = {p.get("device") for p in fp.get("ports") or [] if str(p.get("state") or "").upper().endswith("ACTIVE")}
    return sorted(str(n) for n in names if n)


def local_nccl_version(env: dict[str, str]) -> str | None:
    """The NCCL this process' job would load, where it says: NCCL_VERSION (NVIDIA's images set it),
    else the nvidia-nccl wheel beside torch (its version is the library's). None: not found."""
    if env.get("NCCL_VERSION", "").strip():
        return env["NCCL_VERSION"].strip()
    from importlib import metadata

    for dist in ("nvidia-nccl-cu12", "nvidia-nccl-cu11", "nvidia-nccl-cu13"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None
