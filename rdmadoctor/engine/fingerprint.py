"""The node's fingerprint: the facts a fleet compares, node against pool. Facts only, no judgement.

``build(report)`` reads the report's inventory (what the checks' probes read through the Host) and
returns ``rdmadoctor.fingerprint/v1``::

    {"schema": "rdmadoctor.fingerprint/v1", "pool": the --pool or null,
     "node": {kernel, rdma_driver, rdma_driver_version, rdma_core, ofed, nvidia_driver,
              gpudirect ("peermem" | "dmabuf" | "none" | null), gpu_count, gpu_model, numa_nodes,
              rails {"GPU0": "mlx5_0", ...}, pcie {"GPU0" | "mlx5_0": {gen, width}}},
     "ports": [{device, port, hca_type, board_id, pci_id, fw_ver, link_layer, rate_gbps, width,
                state, active_mtu, netdev, netdev_mtu, subnet_prefix, sm_lid, gid_index, pkey}],
     "identity": {hostname, node (the runner adds it: $NODE_NAME or the root's /etc/hostname),
                  node_guids, lids, addresses}}

A value the inventory does not have is null, never guessed. ``identity`` holds what differs between
nodes by nature (names, GUIDs, LIDs, addresses): carried, never compared.

What fleets and gangs compare is :func:`flatten`: ``{"node.kernel": ..., "port.mlx5_0/1.fw_ver":
...}``, identity left out, the same view whether it was made from a full fingerprint or from the
:func:`compact` one (the Node annotation, the metrics). A null or missing field is unknown: it is
never a difference. Which ports a node has is itself a field (``node.ports``), so a missing port is.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from rdmadoctor.core.labels import RELATIONS
from rdmadoctor.core.report import Report

SCHEMA = "rdmadoctor.fingerprint/v1"
# The compact form's version, "s" in the compact document.
COMPACT_SCHEMA = "fp1"
# The compact form's bound: the Node annotation and the agent's metrics carry it. A 10-HCA node is
# about 1 KB; a node with more ports than fit keeps its node fields and its port list ("t": true).
COMPACT_MAX_BYTES = 8192

NODE_FIELDS = (
    "kernel", "rdma_driver", "rdma_driver_version", "rdma_core", "ofed", "nvidia_driver", "gpudirect",
    "gpu_count", "gpu_model", "numa_nodes",
)
PORT_FIELDS = (
    "device", "port", "hca_type", "board_id", "pci_id", "fw_ver", "link_layer", "rate_gbps", "width", "state",
    "active_mtu", "netdev", "netdev_mtu", "subnet_prefix", "sm_lid", "gid_index", "pkey",
)
# Port fields that name the port (the flat key carries them) rather than describe it.
_PORT_KEYS = ("device", "port")
IDENTITY = "identity"

# PCIe generation by link speed in GT/s (the PCI-SIG's table).
_PCIE_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6, 128.0: 7}


def _one(values: list) -> Any:
    """The value when all known ones agree; several sorted and joined with ","; null when none is known."""
    known = sorted({str(v) for v in values if v is not None})
    if not known:
        return None
    return known[0] if len(known) == 1 else ",".join(known)


def _rails(topology: dict) -> dict[str, str | None] | None:
    gpus, nics, rows = topology.get("gpus"), topology.get("nics"), topology.get("gpu_nic")
    if not isinstance(gpus, list) or not isinstance(nics, list) or not isinstance(rows, list):
        return None
    out: dict[str, str | None] = {}
    for gpu, row in zip(gpus, rows):
        best = None
        for nic, rel in zip(nics, row if isinstance(row, list) else ()):
            rank = RELATIONS.index(rel) if rel in RELATIONS else None
            if rank is not None and (best is None or rank < best[0]):
                best = (rank, nic)
        out[str(gpu)] = best[1] if best else None
    return out


def _pcie(pcie: Any) -> dict[str, dict] | None:
    if not isinstance(pcie, dict) or not isinstance(pcie.get("links"), list):
        return None
    out: dict[str, dict] = {}
    for link in pcie["links"]:
        if not isinstance(link, dict) or link.get("kind") not in ("gpu", "hca"):
            continue
        speed = link.get("speed_gts")
        for name in link.get("devices") or ():
            out[str(name)] = {"gen": _PCIE_GEN.get(float(speed)) if isinstance(speed, (int, float)) else None, "width": link.get("width")}
    return out


def build(report: Report | dict, pool: str | None = None) -> dict:
    """The fingerprint of the node a report describes (its ``inventory`` and ``host``); ``pool``:
    the ``--pool`` it was judged with, which ``rdmadoctor fleet`` groups by (not compared).

    ``report``: the typed read model (:class:`rdmadoctor.core.report.Report`), or a report dict,
    read through it (without its checks): an older or partial report gives what it has, a field
    it lacks or holds of the wrong type is unknown (null), never a traceback here."""
    rep = report if isinstance(report, Report) else Report.from_json(report, checks=False)
    inv = rep.inventory
    devices = [d for d in inv.get("rdma_devices") or () if isinstance(d, dict) and not d.get("is_vf")]
    roce = inv.get("roce")
    roce = roce if isinstance(roce, dict) else {}
    gpus = inv.get("gpus")
    topology = inv.get("topology")
    topology = topology if isinstance(topology, dict) else {}
    packages = inv.get("packages")
    packages = packages if isinstance(packages, dict) else {}
    rdma_core = packages.get("rdma-core") or packages.get("libibverbs1") or packages.get("libibverbs")
    if rdma_core is None and inv.get("rdma_core_version") is not None:
        rdma_core = str(inv["rdma_core_version"])
    node = {
        "kernel": inv.get("kernel_release"),
        "rdma_driver": _one([d.get("driver") for d in devices]),
        "rdma_driver_version": _one([d.get("driver_version") for d in devices]),
        "rdma_core": rdma_core,
        "ofed": inv.get("ofed_version"),
        "nvidia_driver": inv.get("nvidia_driver"),
        "gpudirect": inv.get("gpudirect_path"),
        "gpu_count": len(gpus) if isinstance(gpus, list) else None,
        "gpu_model": _one([g.get("pci_id") for g in gpus if isinstance(g, dict)]) if isinstance(gpus, list) else None,
        "numa_nodes": topology.get("numa_nodes"),
        "rails": _rails(topology),
        "pcie": _pcie(inv.get("pcie")),
    }
    ports = []
    guids: dict[str, Any] = {}
    lids: dict[str, Any] = {}
    for d in devices:
        guids[str(d.get("name"))] = d.get("node_guid")
        for p in d.get("ports") or ():
            if not isinstance(p, dict):
                continue
            subject = f"{d.get('name')}/{p.get('port')}"
            r = roce.get(subject)
            r = r if isinstance(r, dict) else {}
            gid_index = r.get("ipv4_gid_index")
            if gid_index is None and r.get("v2_gid_indices"):
                gid_index = r["v2_gid_indices"][0]
            lids[subject] = p.get("lid")
            ports.append(
                {
                    "device": d.get("name"),
                    "port": p.get("port"),
                    "hca_type": d.get("hca_type"),
                    "board_id": d.get("board_id"),
                    "pci_id": d.get("pci_id"),
                    "fw_ver": d.get("fw_ver"),
                    "link_layer": p.get("link_layer"),
                    "rate_gbps": p.get("rate_gbps"),
                    "width": p.get("width"),
                    "state": p.get("state"),
                    "active_mtu": p.get("active_mtu"),
                    "netdev": p.get("netdev"),
                    "netdev_mtu": p.get("netdev_mtu", r.get("netdev_mtu")),
                    "subnet_prefix": p.get("subnet_prefix"),
                    "sm_lid": p.get("sm_lid"),
                    "gid_index": gid_index,
                    "pkey": p.get("pkey"),
                    # Carried for `preflight --gang` (is a forced NCCL_IB_GID_INDEX a v2 GID?), not
                    # compared: the table's layout follows the addresses, which are identity.
                    "v2_gid_indices": list(r["v2_gid_indices"]) if isinstance(r.get("v2_gid_indices"), list) else None,
                }
            )
    return {
        "schema": SCHEMA,
        "pool": pool,
        "node": node,
        "ports": ports,
        IDENTITY: {
            "hostname": rep.host.hostname,
            "node_guids": guids,
            "lids": lids,
            # Not in the inventory yet (GID IPv4s, netdev addresses): unknown, not empty.
            "addresses": None,
        },
    }


def _scalar(v: Any) -> Any:
    # 400.0 and 400 are one rate: integers compare and print as integers.
    return int(v) if isinstance(v, float) and v.is_integer() else v


def flatten(fp: dict) -> dict[str, Any]:
    """``{field_path: value}`` of what is compared between nodes; identity never is.

    Accepts a full fingerprint or its compact form; both give the same view (nulls left out:
    a field nobody could read is unknown, not a difference).
    """
    if fp.get("s") == COMPACT_SCHEMA:
        return _flatten_compact(fp)
    out: dict[str, Any] = {}
    node = fp.get("node") or {}
    for k in NODE_FIELDS:
        v = node.get(k)
        if v is not None:
            out[f"node.{k}"] = _scalar(v)
    for gpu, nic in (node.get("rails") or {}).items():
        if nic is not None:
            out[f"node.rails.{gpu}"] = nic
    for name, link in (node.get("pcie") or {}).items():
        for k in ("gen", "width"):
            if isinstance(link, dict) and link.get(k) is not None:
                out[f"node.pcie.{name}.{k}"] = link[k]
    subjects = []
    for p in fp.get("ports") or ():
        subject = f"{p.get('device')}/{p.get('port')}"
        subjects.append(subject)
        for k in PORT_FIELDS:
            v = p.get(k)
            if v is not None and k not in _PORT_KEYS:
                out[f"port.{subject}.{k}"] = _scalar(v)
    if fp.get("ports") is not None:
        out["node.ports"] = ",".join(sorted(subjects))
    return out


def compact(fp: dict, max_bytes: int = COMPACT_MAX_BYTES) -> dict:
    """The size-bounded form (Node annotation, metrics): nulls and identity left out, the port
    fields every port shares said once (``c``), each port's own in ``p``. ``flatten`` reads it."""
    flat = flatten(fp)
    node = {k[5:]: v for k, v in flat.items() if k.startswith("node.")}
    per: dict[str, dict] = {}
    for key, v in flat.items():
        if key.startswith("port."):
            subject, field = key[5:].rsplit(".", 1)
            per.setdefault(subject, {})[field] = v
    common: dict[str, Any] = {}
    if len(per) > 1:
        first = next(iter(per.values()))
        common = {k: v for k, v in first.items() if all(p.get(k, None) == v and k in p for p in per.values())}
    ports = {s: {k: v for k, v in f.items() if k not in common} for s, f in per.items()}
    out: dict[str, Any] = {"s": COMPACT_SCHEMA, "n": node, "c": common, "p": ports}
    if len(compact_text(out)) > max_bytes:
        out = {"s": COMPACT_SCHEMA, "n": node, "c": {}, "p": {}, "t": True}
    if fp.get("pool"):
        out["pool"] = fp["pool"]
    return out


def compact_text(doc: dict) -> str:
    """One canonical serialisation: the same facts give the same bytes (written only on change)."""
    return json.dumps(doc, separators=(",", ":"), sort_keys=True, ensure_ascii=True)


def _flatten_compact(doc: dict) -> dict[str, Any]:
    out = {f"node.{k}": v for k, v in (doc.get("n") or {}).items() if v is not None}
    common = doc.get("c") or {}
    for subject, fields in (doc.get("p") or {}).items():
        for k, v in {**common, **(fields or {})}.items():
            if v is not None:
                out[f"port.{subject}.{k}"] = v
    return out
