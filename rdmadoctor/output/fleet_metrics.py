"""The fingerprint as Prometheus info metrics, for the fleet view (deploy/monitoring/fleet-rules.yaml).

- ``rdmadoctor_node_info{pool, kernel, rdma_driver, rdma_driver_version, rdma_core, ofed,
  nvidia_driver, gpudirect, gpu_count, gpu_model, numa_nodes, ports} 1``: one series per node.
- ``rdmadoctor_hca_info{pool, device, port, hca_type, board_id, pci_id, fw_version,
  link_layer, rate_gbps, width, state, active_mtu, netdev, netdev_mtu, subnet_prefix, sm_lid,
  gid_index, pkey} 1``: one series per RDMA port (VFs are not fingerprinted).

Cardinality: 1 + (RDMA ports) series per node (11 on an 8-GPU node with 10 HCAs), each label a
fact of the node, so the count only moves when a fact changes (a firmware upgrade: the old
series goes stale, a new one starts). The rails and PCIe links stay out of the metrics (16 more
labels a node); `rdmadoctor fleet` over reports or the Node annotations compares them. A
label whose fact is unknown is left empty, as Prometheus treats a missing label.
"""

from __future__ import annotations

from rdmadoctor.engine import fingerprint as F

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterator

NODE_INFO = "rdmadoctor_node_info"
HCA_INFO = "rdmadoctor_hca_info"
# fingerprint field -> metric label; the rest keep their names.
LABEL_OF = {"fw_ver": "fw_version"}
FIELD_OF = {v: k for k, v in LABEL_OF.items()}
NODE_LABELS = (*F.NODE_FIELDS, "ports")
PORT_LABELS = tuple(LABEL_OF.get(f, f) for f in F.PORT_FIELDS)
HELP = {
    NODE_INFO: "Always 1: the node's fingerprint (kernel, RDMA driver, rdma-core, OFED, NVIDIA driver, GPUDirect, GPUs, "
    "NUMA nodes, its RDMA ports) as labels, with its pool. deploy/monitoring's RDMAFleetDrift compares each node with its pool.",
    HCA_INFO: "Always 1: one RDMA port's fingerprint (HCA model, firmware, link layer, rate, width, state, MTUs, subnet "
    "prefix, SM LID, RoCE v2 GID index, P_Key) as labels, with its pool.",
}


def _text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return str(v)


def series(fp: dict | None, pool: str | None = None) -> tuple[list[dict], list[dict]]:
    """(node_info label sets, hca_info label sets) of a fingerprint; none without one."""
    if not isinstance(fp, dict):
        return [], []
    pool = pool if pool is not None else fp.get("pool") or ""
    flat = F.flatten(fp)
    info = {"pool": pool, **{k: _text(flat.get(f"node.{k}")) for k in NODE_LABELS}}
    ports = []
    for p in fp.get("ports") or ():
        ports.append({"pool": pool, **{LABEL_OF.get(k, k): _text(p.get(k)) for k in F.PORT_FIELDS}})
    return [info], ports


def families(fp: dict | None, pool: str | None = None) -> Iterator[Any]:
    """prometheus-client metric families of :func:`series` (for a Collector's ``collect``)."""
    from prometheus_client.core import GaugeMetricFamily

    nodes, ports = series(fp, pool)
    for name, labels, rows in ((NODE_INFO, ("pool", *NODE_LABELS), nodes), (HCA_INFO, ("pool", *PORT_LABELS), ports)):
        fam = GaugeMetricFamily(name, HELP[name], labels=list(labels))
        for row in rows:
            fam.add_metric([row[k] for k in labels], 1)
        yield fam


def flat_of(node_info: dict | None, hca_infos: list[dict]) -> dict[str, Any]:
    """The flat fingerprint view (as rdmadoctor.engine.fingerprint.flatten) of one node's info series
    labels, as `rdmadoctor fleet --prometheus` reads them back; values are the labels' strings."""
    out: dict[str, Any] = {}
    for k in NODE_LABELS:
        v = (node_info or {}).get(k)
        if v:
            out[f"node.{k}"] = v
    for labels in hca_infos:
        subject = f"{labels.get('device')}/{labels.get('port')}"
        for label in PORT_LABELS:
            if label in ("device", "port"):
                continue
            v = labels.get(label)
            if v:
                out[f"port.{subject}.{FIELD_OF.get(label, label)}"] = v
    return out
