"""What every publisher shares: the error types, the base class, the label sanitiser, defaults.

:mod:`rdmadoctor.publish.nfd` and :mod:`rdmadoctor.publish.kube` import only this module, and
:mod:`rdmadoctor.publish` (``make_publisher``) imports them: no cycle.

Every key and value is sanitised here, whatever computed it: the report's labels are already
validated (rdmadoctor/core/labels.py), but a publisher that could emit an invalid label would make
NFD or the API server drop the whole update, so this is the last gate, as NFD's own is.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from rdmadoctor.core import labels as L

MODES = ("nfd", "node", "stdout")
DEFAULT_FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"
DEFAULT_EXPIRY = 600
DEFAULT_HEARTBEAT = 300
# The file rdmadoctor owns inside features.d (NFD reads every non-dot file there).
FEATURE_FILE = "rdmadoctor"


class PublishError(Exception):
    """A write failed. ``transient``: an outage that may pass (retry next cycle); otherwise a
    person must fix something (RBAC, a mount, a flag) and retrying the same way will not help."""

    def __init__(self, message: str, transient: bool = False):
        super().__init__(message)
        self.message = message
        self.transient = transient


class PublishConfigError(PublishError):
    """The publisher cannot be built from these options (a usage error: exit code 2)."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message, transient=False)
        self.hint = hint


class Publisher:
    """Base class: ``publish(report) -> list[str]`` of the targets written this time."""

    #: One line saying what the last ``publish`` did (for the CLI summary and the agent's log).
    summary: str = ""

    def publish(self, report: dict) -> list[str]:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- time stamps (the NFD expiry and the NodeCondition heartbeats) --------------------------


def rfc3339(ts: float) -> str:
    """UTC, whole seconds, 'Z': what Go's time.Parse(time.RFC3339, ...) reads."""
    return datetime.fromtimestamp(int(ts), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> float | None:
    text = text.strip()
    try:
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    if dt.tzinfo is None:  # RFC 3339 requires an offset; Go would refuse it too
        return None
    return dt.timestamp()



# -- label sanitising --------------------------------------------------------------------------

_BAD_VALUE_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
_EDGE = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")
_BAD_DNS_CHARS = re.compile(r"[^a-z0-9-]+")


def sanitize_value(value: object) -> str | None:
    """A valid label value made from ``value``, or None when there is nothing to publish.

    Firmware versions, board ids and the like can hold spaces, parentheses or be longer than 63
    characters: each run of forbidden characters becomes '_', the edges are trimmed to
    alphanumerics and the result cut to 63 characters (then trimmed again)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return L.bool_value(value)
    text = _BAD_VALUE_CHARS.sub("_", str(value))
    text = _EDGE.sub("", text)[: L.MAX_VALUE]
    return _EDGE.sub("", text)


def _sanitize_name(name: str) -> str:
    text = _BAD_VALUE_CHARS.sub("_", name)
    text = _EDGE.sub("", text)[: L.MAX_NAME]
    return _EDGE.sub("", text)


def _sanitize_prefix(prefix: str) -> str:
    parts = []
    for part in prefix.lower().split("."):
        part = _BAD_DNS_CHARS.sub("-", part).strip("-")[:63].strip("-")
        if part:
            parts.append(part)
    return ".".join(parts)[: L.MAX_PREFIX].strip(".-")


def sanitize_key(key: object) -> str | None:
    """A valid label key made from ``key``, or None when nothing valid is left of it."""
    if not isinstance(key, str):
        key = str(key)
    prefix, sep, name = key.rpartition("/")
    name = _sanitize_name(name)
    if not name:
        return None
    if not sep:
        return name
    prefix = _sanitize_prefix(prefix)
    # A key whose prefix vanished would silently land in someone else's namespace: drop it.
    if not prefix or L.key_error(prefix + "/" + name):
        return None
    return prefix + "/" + name


def normalize_prefix(prefix: str | None) -> str:
    """``--prefix`` as 'domain/'; refuses what the API server or NFD would refuse.

    nfd-master (>= v0.13) drops labels under kubernetes.io and *.kubernetes.io except
    feature.node.kubernetes.io, profile.node.kubernetes.io and their sub-domains (and everything
    listed in its ``-deny-label-ns``); older nfd-master (<= v0.12) allowed only
    feature.node.kubernetes.io unless ``-extra-label-ns`` listed the namespace."""
    p = (prefix or L.PREFIX).strip()
    if not p.endswith("/"):
        p += "/"
    domain = p[:-1]
    if "/" in domain or L.key_error(p + "x"):
        raise PublishConfigError(
            f"--prefix {prefix!r} is not a label prefix (a lowercase DNS subdomain followed by '/')",
            "e.g. --prefix rdmadoctor.io/ or --prefix rdmadoctor.feature.node.kubernetes.io/",
        )
    reserved = domain in ("kubernetes.io", "k8s.io") or domain.endswith((".kubernetes.io", ".k8s.io"))
    allowed = any(
        domain == ns or domain.endswith("." + ns) for ns in ("feature.node.kubernetes.io", "profile.node.kubernetes.io")
    )
    if reserved and not allowed:
        raise PublishConfigError(
            f"--prefix {p!r} is in the reserved kubernetes.io namespace: NFD drops such labels and "
            "they belong to Kubernetes itself",
            "use rdmadoctor.io/ (the default) or a sub-domain of feature.node.kubernetes.io, "
            "e.g. rdmadoctor.feature.node.kubernetes.io/",
        )
    return p


def owned_annotation(prefix: str) -> str:
    """The annotation listing the labels rdmadoctor set on a Node (``--publish node``)."""
    return normalize_prefix(prefix)[:-1] + "/owned-labels"


def in_domain(key: str, prefix: str) -> bool:
    """Whether rdmadoctor may ever touch this label key under ``prefix``."""
    return key.startswith(prefix) or key == L.RDMA_CAPABLE


def node_labels(report: dict, prefix: str = L.PREFIX) -> tuple[dict[str, str], tuple[str, ...]]:
    """The labels to publish for ``report`` under ``prefix``, all valid; and why any was dropped.

    The report names its labels under rdmadoctor.io/ (labels.PREFIX); they move under
    ``prefix``. ``feature.node.kubernetes.io/network-rdma.capable`` keeps its name: the seeds'
    nodeAffinity and the NVIDIA network operator read exactly that key."""
    prefix = normalize_prefix(prefix)
    out: dict[str, str] = {}
    problems: list[str] = []
    raw = report.get("labels") if isinstance(report, dict) else None
    if not isinstance(raw, dict):
        return out, ("the report has no labels (a report from rdmadoctor older than 0.1, or written by hand)",)
    for key in sorted(raw, key=str):
        value = raw[key]
        k = str(key)
        if k.startswith(L.PREFIX):
            k = prefix + k[len(L.PREFIX):]
        skey, svalue = sanitize_key(k), sanitize_value(value)
        if skey is None or svalue is None:
            problems.append(f"label {key!r}={value!r}: nothing valid is left of it; not published")
            continue
        if not in_domain(skey, prefix):
            problems.append(f"label {skey!r} is outside {prefix!r}: not published")
            continue
        if skey in out:
            problems.append(f"labels {key!r} and another both became {skey!r}; kept the first")
            continue
        if (skey, svalue) != (k, str(value) if not isinstance(value, bool) else L.bool_value(value)):
            problems.append(f"label {key!r}={value!r} published as {skey}={svalue}")
        out[skey] = svalue
    return out, tuple(problems)
