"""Node label names, and the one place that validates every label before it leaves rdmadoctor.

Like NFD's worker, no source builds a label the API server would refuse: whatever computes a
value hands it to :func:`validate`, which drops (and says why) any key or value that breaks the
Kubernetes rules, so a `kubectl label` or a node patch built from our output never fails halfway.
"""

from __future__ import annotations

import re

PREFIX = "rdmadoctor.io/"

# Read by the NVIDIA network operator and by NFD-based selectors; we compute the same meaning.
RDMA_CAPABLE = "feature.node.kubernetes.io/network-rdma.capable"
READY = PREFIX + "ready"
LINK_LAYER = PREFIX + "link-layer"
ACTIVE_PORTS = PREFIX + "active-ports"
MIN_RATE_GBPS = PREFIX + "min-rate-gbps"
GPUDIRECT = PREFIX + "gpudirect"
GPU_NIC = PREFIX + "gpu-nic"

# Every label rdmadoctor may set: a node carrying one of these that we no longer compute is stale.
OWNED = (RDMA_CAPABLE, READY, LINK_LAYER, ACTIVE_PORTS, MIN_RATE_GBPS, GPUDIRECT, GPU_NIC)

# k8s.io/apimachinery/pkg/util/validation: qualifiedNameFmt and LabelValue, DNS1123Subdomain.
_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_VALUE = r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = _DNS_LABEL + r"(\." + _DNS_LABEL + r")*"
MAX_NAME = 63
MAX_VALUE = 63
MAX_PREFIX = 253


def is_dns_subdomain(name: str) -> bool:
    """A lowercase RFC 1123 subdomain (label key prefixes, Node names), at most 253 characters."""
    return len(name) <= MAX_PREFIX and re.fullmatch(_SUBDOMAIN, name) is not None


def key_error(key: object) -> str | None:
    """Why ``key`` is not a valid label key, or None when it is."""
    if not isinstance(key, str) or not key:
        return "a label key must be a non-empty string"
    prefix, sep, name = key.rpartition("/")
    if sep:
        if not prefix:
            return f"label key {key!r}: the prefix before '/' is empty"
        if len(prefix) > MAX_PREFIX:
            return f"label key {key!r}: the prefix is longer than {MAX_PREFIX} characters"
        if not is_dns_subdomain(prefix):
            return f"label key {key!r}: the prefix {prefix!r} is not a lowercase DNS subdomain"
    if not name:
        return f"label key {key!r}: the name is empty"
    if len(name) > MAX_NAME:
        return f"label key {key!r}: the name is longer than {MAX_NAME} characters"
    if not re.fullmatch(_NAME, name):
        return (
            f"label key {key!r}: the name must be alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric"
        )
    return None


def value_error(value: object) -> str | None:
    """Why ``value`` is not a valid label value, or None when it is."""
    if not isinstance(value, str):
        return f"label value {value!r} is not a string"
    if len(value) > MAX_VALUE:
        return f"label value {value[:20]!r}... is longer than {MAX_VALUE} characters"
    if not re.fullmatch(_VALUE, value):
        return (
            f"label value {value!r} must be empty or alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric"
        )
    return None


def validate(labels: dict) -> tuple[dict[str, str], tuple[str, ...]]:
    """The valid labels, and why each refused one was refused. Never raises."""
    good: dict[str, str] = {}
    problems: list[str] = []
    for key, value in labels.items():
        why = key_error(key) or value_error(value)
        if why:
            problems.append(why)
        else:
            good[key] = value
    return good, tuple(problems)


def bool_value(flag: bool) -> str:
    return "true" if flag else "false"


# ---- the labels of a report: one pure function, for every check, built-in or third-party ----

# The check that compares these labels with the Node object: its own status cannot feed them,
# or the labels it compares would depend on the comparison (a stale label would flip ready).
COMPARED_BY = "node.labels"

# nvidia-smi topo -m relations, nearest first, as NCCL ranks them (PATH_PIX < PATH_PXB < PATH_PHB <
# ... < PATH_SYS). NV# (NVLink) never appears between a GPU and a NIC. The one list: the PCI checks
# (checks/_pci.RELATION_ORDER) and the gpu_nic_max expectation use it.
RELATIONS = ("PIX", "PXB", "PHB", "NODE", "SYS")

_NOT_COUNTED = ("skip",)  # a skipped check decided nothing
_READY_STATUSES = ("pass", "warn")


def worst_nearest(nearest: tuple[str | None, ...] | list[str | None]) -> str | None:
    """The worst of the GPUs' nearest-NIC relations; None when any is unknown or not a relation."""
    if not nearest or any(r not in RELATIONS for r in nearest):
        return None
    return max(nearest, key=RELATIONS.index)


def _ports(inventory: dict) -> list[dict] | None:
    """The ports that count (physical functions, not ignored); None: the RDMA devices are unknown."""
    devices = inventory.get("rdma_devices")
    if not isinstance(devices, list) or inventory.get("rdma_source") == "none":
        return None
    out = []
    for d in devices:
        # A VF's port mirrors its PF's and is DOWN until a vport policy says otherwise: never counted.
        if not isinstance(d, dict) or d.get("is_vf"):
            continue
        for p in d.get("ports") or ():
            if isinstance(p, dict) and not p.get("ignored"):
                out.append(p)
    return out


def _rate(p: dict) -> float | None:
    r = p.get("rate_gbps")
    return float(r) if isinstance(r, (int, float)) and not isinstance(r, bool) else None


def _gpu_nearest(topology: object) -> tuple[str | None, ...] | None:
    """Nearest relation per GPU from the report's topology (gpus, gpu_nic[g][n]); None: no GPUs."""
    if not isinstance(topology, dict):
        return None
    gpus, matrix = topology.get("gpus"), topology.get("gpu_nic")
    if not isinstance(gpus, list) or not gpus:
        return None
    rows = matrix if isinstance(matrix, list) else []
    out: list[str | None] = []
    for g in range(len(gpus)):
        row = rows[g] if g < len(rows) and isinstance(rows[g], list) else []
        rels = [r for r in row if isinstance(r, str) and r in RELATIONS]
        out.append(min(rels, key=RELATIONS.index) if rels else None)
    return tuple(out)


def compute(report: dict) -> tuple[dict[str, str], list[str], list[str]]:
    """(labels, notes on labels left out, checks keeping ready false) of a report dict.

    Reads only the report: every check's status (third-party ones too: a failing plugin makes
    ready=false) and the inventory (rdma_devices with is_vf and ports[].ignored, gpudirect,
    topology). Values are not validated here; :func:`validate` does that.
    """
    out: dict[str, str] = {}
    notes: list[str] = []
    inventory = report.get("inventory")
    inventory = inventory if isinstance(inventory, dict) else {}
    ports = _ports(inventory)
    if ports is None:
        notes.append("RDMA devices unknown: no port labels")
    else:
        active = [p for p in ports if p.get("state") == "ACTIVE"]
        out[RDMA_CAPABLE] = bool_value(bool(active))
        lls = {p.get("link_layer") for p in ports}
        if not ports:
            out[LINK_LAYER] = "none"
        elif lls == {"InfiniBand"}:
            out[LINK_LAYER] = "infiniband"
        elif lls == {"Ethernet"}:
            out[LINK_LAYER] = "ethernet"
        elif lls <= {"InfiniBand", "Ethernet"}:
            out[LINK_LAYER] = "mixed"
        else:
            notes.append("a port's link layer is unknown: no link-layer label")
        out[ACTIVE_PORTS] = str(len(active))
        rates = [r for r in (_rate(p) for p in active) if r is not None]
        if active and len(rates) == len(active):
            out[MIN_RATE_GBPS] = str(int(min(rates)))
        elif active:
            notes.append("the rate of an ACTIVE port is unknown: no min-rate-gbps label")
    statuses: dict[str, str] = {}
    for c in report.get("checks") or ():
        if isinstance(c, dict) and c.get("id") != COMPARED_BY and c.get("status") not in _NOT_COUNTED:
            statuses[str(c.get("id"))] = str(c.get("status"))
    not_ready = sorted(cid for cid, st in statuses.items() if st not in _READY_STATUSES)
    if statuses:
        out[READY] = bool_value(not not_ready)
    else:
        notes.append("no check ran: no ready label")
    gpudirect = inventory.get("gpudirect")
    if isinstance(gpudirect, bool):
        out[GPUDIRECT] = bool_value(gpudirect)
    nearest = _gpu_nearest(inventory.get("topology"))
    if nearest:
        rel = worst_nearest(nearest)
        if rel is not None:
            out[GPU_NIC] = rel
        else:
            notes.append("a GPU's nearest RDMA device is unknown: no gpu-nic label")
    return out, notes, not_ready
