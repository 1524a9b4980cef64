"""The fleet view: each node against its pool, from the engines the cluster already runs.

- :mod:`.compare`: the pool majorities and the outliers (pure).
- :mod:`.sources`: reports, bundles, folders, stdin, the Nodes' annotations, Prometheus.
- :func:`read_fleet`: one call from the command's options to the ``rdmadoctor.fleet/v1`` result.
"""

from __future__ import annotations

from rdmadoctor.fleet import sources
from rdmadoctor.fleet.compare import Fleet

# Nodes per page of the Node list (the API server's limit/continue); 2,000 Nodes are 4 pages.
KUBE_PAGE = 500
# Seconds one Prometheus query or one page of Nodes may take.
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


def read_fleet(*, paths: list[str], kube: bool = False, kubeconfig: str | None = None, prometheus: str | None = None,
               group_by: str | None = None, stdin=None) -> dict:
    fleet = Fleet()
    if kube:
        entries = sources.from_nodes(_list_nodes(kubeconfig), group_by)
    elif prometheus is not None:
        entries = sources.from_prometheus_series(_query_prometheus(prometheus), group_by)
    else:
        entries = sources.from_paths(paths, group_by, stdin=stdin)
    for e in entries:
        if isinstance(e, sources.SourceError):
            fleet.errors.append(str(e))
            continue
        node, pool, _labels, flat, signature = e
        fleet.add(node, pool, flat, signature)
    result = fleet.result()
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


def _query_prometheus(url: str) -> list[dict]:
    import json
    import urllib.error
    import urllib.parse
    import urllib.request

    from rdmadoctor.output.fleet_metrics import HCA_INFO, NODE_INFO

    query = f'{{__name__=~"{NODE_INFO}|{HCA_INFO}"}}'
    full = url.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode({"query": query})
    try:
        with urllib.request.urlopen(full, timeout=TIMEOUT) as r:  # noqa: S310 - the user's own URL
            body = json.loads(r.read(256 * 1024 * 1024))
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise FleetError(f"Prometheus at {url}: {getattr(e, 'reason', None) or e}", "is the URL the server's (http://HOST:9090)?") from None
    if not isinstance(body, dict) or body.get("status") != "success":
        raise FleetError(f"Prometheus at {url} answered {str(body)[:200]}")
    return list((body.get("data") or {}).get("result") or [])
