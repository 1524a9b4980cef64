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
