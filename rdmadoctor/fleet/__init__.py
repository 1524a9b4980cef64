"""The fleet view: each node against its pool, from the engines the cluster already runs.

- :mod:`.compare`: the pool majorities and the outliers (pure).
- :mod:`.sources`: reports, bundles, folders, stdin, the Nodes' annotations, Prometheus.
- :mod:`.prometheus`: the query of `fleet --prometheus`, its credentials and bounds.
- :func:`read_fleet`: one call from the command's options to the ``rdmadoctor.fleet/v1`` result.
"""

from __future__ import annotations

from rdmadoctor.fleet import sources
from rdmadoctor.fleet.compare import Fleet

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterator

# Nodes per page of the Node list (the API server's limit/continue); 2,000 Nodes are 4 pages.
KUBE_PAGE = 500
# Seconds one Prometheus query (all of it: connect, TLS, headers, body) or one page of Nodes may take.
TIMEOUT = 30.0
# A listing of the Nodes cut by an outage (refused, timed out, 5xx, 429, an expired continue token)
# is started again this many times in all, after KUBE_BACKOFF seconds, then twice that (or what the
# API server's Retry-After asks, up to KUBE_MAX_WAIT); a Node already read is not read twice.
KUBE_ATTEMPTS = 3
KUBE_BACKOFF = 1.0
KUBE_MAX_WAIT = 30.0


class FleetError(Exception):
    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message = message
        self.hint = hint


# The most "not read" lines a result names; the rest are counted in one more line.
MAX_ERRORS = 50


def read_fleet(*, paths: list[str], kube: bool = False, kubeconfig: str | None = None, prometheus: str | None = None,
               group_by: str | None = None, stdin=None, http_config: str | None = None,
               bearer_token_file: str | None = None) -> dict:
    """The ``rdmadoctor.fleet/v1`` result of one source. Each node is counted once: of several
    reports of one node the newest (by its ``time``) is compared and the others are set aside
    (named in ``notes`` and ``set_aside``); a document that is not a node's report is skipped with
    a note; an input that cannot be read is named in ``errors``."""
    fleet = Fleet()
    entries: Iterator[sources.Entry | sources.Skipped | sources.SourceError]
    if kube:
        entries = sources.from_nodes(_list_nodes(kubeconfig), group_by)
    elif prometheus is not None:
        entries = sources.from_prometheus_series(_query_prometheus(prometheus, http_config, bearer_token_file), group_by)
    else:
        entries = sources.from_paths(paths, group_by, stdin=stdin)
    kept: dict[str, sources.Entry] = {}
    notes: list[str] = []
    set_aside: list[dict] = []
    errors = 0
    for e in entries:
        if isinstance(e, sources.SourceError):
            errors += 1
            if errors <= MAX_ERRORS:
                fleet.errors.append(str(e))
            continue
        if isinstance(e, sources.Skipped):
            if len(notes) < MAX_ERRORS:
                notes.append(e.note)
            continue
        node = e[0]
        old = kept.get(node)
        if old is None:
            kept[node] = e
            continue
        newer = e[5] is not None and (old[5] is None or e[5] > old[5])
        keep, drop = (e, old) if newer else (old, e)
        if newer:
            kept.pop(node)  # the node keeps the place of its newest report
        kept[node] = keep
        set_aside.append({"node": node, "input": drop.where, "kept": keep.where})
    if errors > MAX_ERRORS:
        fleet.errors.append(f"... and {errors - MAX_ERRORS} more inputs could not be read")
    for node, e in kept.items():
        fleet.add(node, e[1], e[3], e[4])
    for s in set_aside[:MAX_ERRORS]:
        notes.append(f"{s['input']}: another report of node {s['node']}; {s['kept']} is newer (or came first) and is "
                     "the one compared: set aside")
    if len(set_aside) > MAX_ERRORS:
        notes.append(f"... and {len(set_aside) - MAX_ERRORS} more reports of nodes already read: set aside")
    result = fleet.result()
    if notes:
        result["notes"] = notes
    if set_aside:
        result["set_aside"] = set_aside
    if not fleet.pools and not fleet.errors:
        where = "the Nodes (none has the rdmadoctor.io/fingerprint annotation: is the agent in direct mode?)" if kube else (
            "Prometheus (no rdmadoctor_node_info series)" if prometheus is not None else "the inputs"
        )
        result["errors"].append(f"no fingerprint found in {where}")
    return result


def _sleep(seconds: float) -> None:
    import time

    time.sleep(seconds)


def _list_nodes(kubeconfig: str | None):
    """Every Node, a page of KUBE_PAGE at a time (limit/continue), through the same credentials
    rules as `label --publish node` (rdmadoctor.publish.kube.NodeAPI). An outage ends the listing
    only after KUBE_ATTEMPTS starts (see KUBE_ATTEMPTS); a refusal (403, 401, bad credentials)
    ends it at once."""
    from rdmadoctor.publish import PublishConfigError, PublishError
    from rdmadoctor.publish.kube import NodeAPI, _Refused, _Retry

    seen: set[str] = set()
    for attempt in range(1, KUBE_ATTEMPTS + 1):
        api = None
        try:
            api = NodeAPI(kubeconfig, TIMEOUT)
            for node in api.list_nodes(KUBE_PAGE):
                name = str((node.get("metadata") or {}).get("name"))
                if name in seen:  # read before the listing was started again
                    continue
                seen.add(name)
                yield node
            return
        except PublishConfigError as e:
            raise FleetError(e.message, e.hint) from None
        except (_Retry, _Refused, PublishError) as e:
            # 410 Gone: the continue token expired (the listing took longer than the API server keeps it).
            again = isinstance(e, _Retry) or (isinstance(e, _Refused) and e.code == 410) or (
                isinstance(e, PublishError) and not isinstance(e, _Refused) and e.transient)
            why = getattr(e, "why", None) or getattr(e, "message", None) or str(e)
            if not again:
                raise FleetError(f"listing the Nodes: {why}") from None
            if attempt == KUBE_ATTEMPTS:
                raise FleetError(
                    f"listing the Nodes: {why} ({KUBE_ATTEMPTS} attempts; {len(seen)} Nodes were read before the "
                    "last one stopped)",
                    "the API server or the way to it is failing: try again, or compare the agents' metrics with "
                    "`rdmadoctor fleet --prometheus URL`",
                ) from None
            wait = KUBE_BACKOFF * 2 ** (attempt - 1)
            asked = getattr(e, "after", None)
            if asked is not None:
                wait = max(wait, min(float(asked), KUBE_MAX_WAIT))
            _sleep(wait)
        except Exception as e:  # noqa: BLE001 - lightkube's own errors (_Unauthorized ...) end the listing
            raise FleetError(f"listing the Nodes: {getattr(e, 'why', None) or e}") from None
        finally:
            if api is not None:
                api.close()


def _query_prometheus(url: str, http_config: str | None = None, bearer_token_file: str | None = None) -> list[dict]:
    from rdmadoctor.fleet.prometheus import PrometheusError, auth_from, query
    from rdmadoctor.output.fleet_metrics import HCA_INFO, NODE_INFO

    try:
        auth = auth_from(http_config, bearer_token_file)
        return query(url, f'{{__name__=~"{NODE_INFO}|{HCA_INFO}"}}', auth, TIMEOUT)
    except PrometheusError as e:
        raise FleetError(e.message, e.hint) from None
