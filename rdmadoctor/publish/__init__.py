"""Publishing a report's node labels: an NFD feature file, the Node object, or stdout.

Shared by ``rdmadoctor label`` (one shot) and ``rdmadoctor agent`` (every interval)::

    pub = make_publisher("nfd", features_dir=..., expiry=600, node=None, kubeconfig=None,
                         prefix="rdmadoctor.io/", conditions=False, dry_run=False)
    written = pub.publish(report)   # [] when nothing changed, ["nfd"], ["node", "node-status"]...
    pub.close()

``publish`` writes only on change and raises :class:`PublishError` when a write failed after
the publisher's own short retries; ``transient`` says whether trying again later may help (an
API outage) or a person must act (RBAC, a missing hostPath mount). :class:`PublishConfigError`,
raised by :func:`make_publisher`, is a usage problem (exit code 2).

What they share (errors, the base class, the label sanitiser, defaults) is in
:mod:`rdmadoctor.publish.base`; ``nfd`` and ``kube`` import only that, this module imports them
(on first use: nothing here imports lightkube until ``--publish node`` or ``--conditions``).
"""

from __future__ import annotations

import sys
import time
from typing import IO, Callable

from rdmadoctor.core import labels as L
from rdmadoctor.core.words import count
from rdmadoctor.publish.base import (
    DEFAULT_EXPIRY,
    DEFAULT_FEATURES_DIR,
    DEFAULT_HEARTBEAT,
    FEATURE_FILE,
    MODES,
    PublishConfigError,
    Publisher,
    PublishError,
    in_domain,
    node_labels,
    normalize_prefix,
    owned_annotation,
    parse_rfc3339,
    rfc3339,
    sanitize_key,
    sanitize_value,
)

__all__ = [
    "DEFAULT_EXPIRY", "DEFAULT_FEATURES_DIR", "DEFAULT_HEARTBEAT", "FEATURE_FILE", "MODES", "Publisher",
    "PublishConfigError", "PublishError", "StdoutPublisher", "in_domain", "make_publisher", "node_labels",
    "normalize_prefix", "owned_annotation", "parse_rfc3339", "rfc3339", "sanitize_key", "sanitize_value",
]


# -- stdout ------------------------------------------------------------------------------------


class StdoutPublisher(Publisher):
    """``key=value`` lines; with ``conditions``, the NodeConditions as ``# condition`` lines after
    them, comments in NFD's feature-file syntax, so the output stays a valid features.d file."""

    def __init__(self, prefix: str, out: IO[str], conditions: bool = False):
        self.prefix = prefix
        self.out = out
        self.conditions = conditions

    def publish(self, report: dict) -> list[str]:
        wanted, _ = node_labels(report, self.prefix)
        for k in sorted(wanted):
            self.out.write(f"{k}={wanted[k]}\n")
        self.summary = f"printed {count(len(wanted), 'label')}"
        if self.conditions:
            from rdmadoctor.output import conditions as C

            conds = C.compute(report)
            for c in conds:
                self.out.write(f"# condition {c['type']}={c['status']} reason={c['reason']}: {c['message']}\n")
            self.summary += f" and {count(len(conds), 'condition')}"
        self.out.flush()
        return ["stdout"]


class _Composite(Publisher):
    """The NFD file for the labels, plus NodeConditions through the API (``nfd --conditions``)."""

    def __init__(self, parts: list[Publisher]):
        self.parts = parts

    def publish(self, report: dict) -> list[str]:
        written: list[str] = []
        summaries: list[str] = []
        errors: list[PublishError] = []
        for p in self.parts:
            # One failing target must not starve the other (a down API server and the file).
            try:
                written += p.publish(report)
            except PublishError as e:
                errors.append(e)
            summaries.append(p.summary)
        self.summary = "; ".join(s for s in summaries if s)
        if errors:
            raise PublishError(
                "; ".join(e.message for e in errors), transient=all(e.transient for e in errors)
            )
        return written

    def close(self) -> None:
        for p in self.parts:
            p.close()


def make_publisher(
    mode: str,
    *,
    features_dir: str | None = DEFAULT_FEATURES_DIR,
    expiry: float = DEFAULT_EXPIRY,
    node: str | None = None,
    kubeconfig: str | None = None,
    prefix: str | None = L.PREFIX,
    conditions: bool = False,
    dry_run: bool = False,
    out: IO[str] | None = None,
    heartbeat: float = DEFAULT_HEARTBEAT,
    retries: int = 3,
    backoff: float = 0.5,
    timeout: float = 5.0,
    clock: Callable[[], float] = time.time,
    cancel=None,
) -> Publisher:
    """A publisher for ``mode`` (nfd, node or stdout); raises PublishConfigError on bad options.

    ``node`` defaults to $NODE_NAME. ``heartbeat``: seconds between NodeCondition heartbeats.
    ``retries``/``backoff``/``timeout``: the node publisher's short retries. ``cancel``: a
    ``threading.Event`` that cuts a retry's sleep short (the agent's SIGTERM)."""
    out = out if out is not None else sys.stdout
    if mode not in MODES:
        raise PublishConfigError(f"unknown --publish {mode!r}", f"choose one of: {', '.join(MODES)}")
    # An empty value (`--node "$UNSET"`) is a mistake: taken as "not given" it would publish to
    # $NODE_NAME's node, the default features.d or the in-cluster credentials, and say nothing.
    for option, value, hint in (
        ("--features-dir", features_dir, f"the folder nfd-worker reads (default {DEFAULT_FEATURES_DIR}); leave it out for the default"),
        ("--node", node, "the Node's name (in a pod: env NODE_NAME from fieldRef spec.nodeName); leave it out to use $NODE_NAME"),
        ("--kubeconfig", kubeconfig, "a kubeconfig file; leave it out for the in-cluster ServiceAccount, then $KUBECONFIG, then ~/.kube/config"),
    ):
        if value is not None and not value.strip():
            raise PublishConfigError(f"{option} is empty" + (f" ({value!r})" if value else ""), hint)
    prefix = normalize_prefix(prefix)
    if mode == "stdout":
        return StdoutPublisher(prefix, out, conditions=conditions)
    if mode == "nfd":
        from rdmadoctor.publish.nfd import NfdPublisher

        if expiry is None or expiry <= 0:
            raise PublishConfigError(f"--expiry must be a positive number of seconds, not {expiry!r}")
        nfd = NfdPublisher(features_dir or DEFAULT_FEATURES_DIR, expiry=expiry, prefix=prefix, dry_run=dry_run, out=out, clock=clock)
        if not conditions:
            return nfd
        from rdmadoctor.publish.kube import NodePublisher

        status = NodePublisher(
            node=node, kubeconfig=kubeconfig, prefix=prefix, labels=False, conditions=True,
            dry_run=dry_run, out=out, heartbeat=heartbeat, retries=retries, backoff=backoff,
            timeout=timeout, clock=clock, cancel=cancel,
        )
        return _Composite([nfd, status])
    from rdmadoctor.publish.kube import NodePublisher

    return NodePublisher(
        node=node, kubeconfig=kubeconfig, prefix=prefix, labels=True, conditions=conditions,
        dry_run=dry_run, out=out, heartbeat=heartbeat, retries=retries, backoff=backoff,
        timeout=timeout, clock=clock, cancel=cancel,
    )
