"""``--publish node`` (and ``--conditions``): the Node object, through lightkube.

Only these calls, and only when something changed (a steady node costs one GET a cycle):

- ``GET /api/v1/nodes/NAME``
- ``PATCH /api/v1/nodes/NAME``, ``application/merge-patch+json`` (RFC 7386): the labels under
  ``--prefix`` plus ``feature.node.kubernetes.io/network-rdma.capable`` that differ, ``null`` for
  a label rdmadoctor set before (listed in the ``<prefix-domain>/owned-labels`` annotation) and
  no longer computes, and that annotation. Any other label is never in a patch, so nobody
  else's label can be changed or removed, whatever the annotation says.
- ``PATCH /api/v1/nodes/NAME/status``, ``application/strategic-merge-patch+json``: a JSON merge
  patch would replace the whole ``status.conditions`` list, kubelet's Ready included; a
  strategic merge patch merges the list item by item on ``type`` (its patchMergeKey), which is
  what the kubelet and Node Problem Detector send, so only rdmadoctor's conditions are touched.
- ``POST /api/v1/namespaces/default/events``, ``application/json`` (with ``--conditions``): one
  core/v1 Event each time a condition changes status (see :func:`conditions.transitions`),
  about the Node, in ``default`` where the kubelet and NPD put node events. Best effort: sent
  only after the status patch that records the change succeeded, at most one short retry, and a
  failure (403 without ``events: create``, an outage) is counted in ``events_failed`` and named
  in ``summary`` and ``event_errors``, never raised: the labels and conditions are what matter.

Errors: connection refused, timeouts, 5xx, 429 and 409 are retried a few times with backoff
(the whole GET-compute-PATCH cycle, so a retry never sends a stale patch); 401 rebuilds the
client once, which reads the kubeconfig or the projected ServiceAccount token again (lightkube
>= 1.0 already re-reads an in-cluster token file on a 401 by itself; older ones and static
kubeconfig tokens need the rebuild); 403 and other 4xx are not retried and name the fix.

Every request has an overall deadline (``timeout``, 5 s by default), not only httpx's per-read
timeout: a server that drips its answer a byte at a time is abandoned at the deadline, so
`label` ends and the agent's cycle goes on. An answer no API server should send is an API error
with its reason, never a traceback: a Retry-After that is negative, NaN or unparsable is ignored
(our own backoff applies, capped at MAX_BACKOFF), a body that is not the JSON object asked for is
retried like an outage, and a redirect (3xx) is refused: the client does not follow redirects,
which could carry the token to another host. An answer is read only up to MAX_ANSWER_BYTES (4 MiB,
more than any object etcd stores): a longer Content-Length, a body that keeps coming and a
compressed body (none is asked for) are refused while read and retried like an outage.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from typing import IO, Callable

from rdmadoctor.core import labels as L
from rdmadoctor.core.words import count
from rdmadoctor.output import conditions as C
from rdmadoctor.publish.base import (
    PublishConfigError,
    Publisher,
    PublishError,
    node_labels,
    normalize_prefix,
    owned_annotation,
    parse_rfc3339,
    rfc3339,
)

INSTALL_HINT = "pip install 'rdmadoctor[k8s]'"
FIELD_MANAGER = "rdmadoctor"
# Where the kubelet and Node Problem Detector put the events of a (cluster-scoped) Node.
EVENT_NAMESPACE = "default"
EVENT_COMPONENT = "rdmadoctor"
EVENT_ACTION = "ConditionChanged"
EVENT_RETRY_DELAY = 0.5
_MAX_INSTANCE = 128  # reportingInstance, apiserver's ReportingInstanceLengthLimit
_RETRY_STATUS = {409, 429, 500, 502, 503, 504}
MAX_BACKOFF = 8.0
# The most an answer may hold. A Node is stored in etcd, whose requests are at most 1.5 MiB; the
# Status, Event and patch answers are smaller. A server streaming more (by Content-Length or
# chunked) is refused while it is read: it drove the agent to GBs (its memory limit is 128 MiB).
MAX_ANSWER_BYTES = 4 << 20
# A page of the Node list (`fleet --kube`) holds many Nodes: 500 realistic ones are about 6 MB
# (their images and conditions), over the one-object cap. A page is capped at MAX_PAGE_BYTES, and
# a page over it is asked again, at the same continue token, for half as many Nodes (down to one:
# a Node is at most 1.5 MiB). A listing reads at most MAX_LIST_PAGES pages and MAX_LIST_NODES
# Nodes (Kubernetes supports 5,000 Nodes a cluster), and a continue token seen before ends it:
# a server or proxy that answers the same page for ever looped 90,000 requests in 90 s.
MAX_PAGE_BYTES = 32 << 20
MAX_LIST_PAGES = 2000
MAX_LIST_NODES = 100_000


# The node's compact fingerprint (rdmadoctor.engine.fingerprint), which `rdmadoctor fleet --kube`
# reads; written with the labels, only when it changed. The admission policy (deploy/overlays/direct)
# allows this annotation and owned-labels, no other new one, and bounds its size.
FINGERPRINT_ANNOTATION = "rdmadoctor.io/fingerprint"


def fingerprint_annotation(report: dict) -> str | None:
    from rdmadoctor.engine import fingerprint as F

    fp = report.get("fingerprint")
    return F.compact_text(F.compact(fp)) if isinstance(fp, dict) else None


def _parse_time(text: str) -> float | None:
    return parse_rfc3339(text) if text else None


class _Retry(Exception):
    def __init__(self, why: str, after: float | None = None):
        super().__init__(why)
        self.why = why
        self.after = after


class _Unauthorized(Exception):
    pass


class _Refused(PublishError):
    """An API answer no retry fixes (403, 404, other 4xx); ``code`` and the server's ``reason``
    let a caller other than the Node publish (events) say it in its own words."""

    def __init__(self, message: str, code: int, reason: str):
        super().__init__(message, transient=False)
        self.code = code
        self.reason = reason


def _httpx():
    """The HTTP library of the installed lightkube: httpx2 since lightkube 1.0, httpx before."""
    from lightkube.core import generic_client

    return generic_client.httpx


class _TooLarge(Exception):
    """An answer refused while it was read: larger than MAX_ANSWER_BYTES, or compressed."""


def _bound_answers(client, httpx, limit: Callable[[], int] = lambda: MAX_ANSWER_BYTES) -> None:
    """Refuse, while reading, an answer larger than MAX_ANSWER_BYTES (by its Content-Length, or
    as it streams), and any compressed answer (we ask for none: a gzip body a thousand times its
    size on the wire would pass a cap on the wire bytes). Through httpx's event hooks: the
    response hook runs before the body is read, and swaps its stream for a counting one.
    ``limit()`` is read at each answer: a page of the Node list may hold more than one object."""

    class Capped(httpx.SyncByteStream):
        def __init__(self, inner, cap: int):
            self.inner = inner
            self.cap = cap

        def __iter__(self):
            seen = 0
            for chunk in self.inner:
                seen += len(chunk)
                if seen > self.cap:
                    raise _TooLarge(f"the answer passed {self.cap >> 20} MiB and is still coming; refused")
                yield chunk

        def close(self) -> None:
            close = getattr(self.inner, "close", None)
            if close is not None:
                close()

    def on_request(request) -> None:
        request.headers["Accept-Encoding"] = "identity"

    def on_response(response) -> None:
        encoding = response.headers.get("Content-Encoding", "").strip().lower()
        if encoding not in ("", "identity"):
            raise _TooLarge(f"the answer is compressed (Content-Encoding: {_short(encoding, 40)}) though none was asked for; refused")
        cap = limit()
        length = response.headers.get("Content-Length", "").strip()
        if length.isdigit() and int(length) > cap:
            what = "a page of Nodes is asked to be" if cap > MAX_ANSWER_BYTES else "any Kubernetes object can be"
            raise _TooLarge(f"the answer says it holds {int(length):,} bytes (Content-Length), more than the "
                            f"{cap >> 20} MiB {what}; refused")
        response.stream = Capped(response.stream, cap)

    client.event_hooks = {"request": [on_request], "response": [on_response]}


def _micro_time(ts: float) -> str:
    """A metav1.MicroTime: the apiserver parses it with Go's RFC3339Micro layout, which needs
    exactly six fraction digits (a plain RFC3339 time is a 400)."""
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_body(node: str, uid: str | None, event: dict, now: float) -> dict:
    """The core/v1 Event for one condition transition (``conditions.transitions`` item).

    Both shapes a reader may look for: the legacy fields the kubelet and NPD fill
    (source, firstTimestamp, lastTimestamp, count: ``kubectl get events`` sorts on them) and the
    events.k8s.io ones (eventTime, reportingComponent, reportingInstance, action). On core/v1 the
    apiserver accepts both together, and once eventTime is set it requires the reporting fields
    and action, and a cluster-scoped involvedObject only in ``default`` or ``kube-system``
    (pkg/apis/core/validation/events.go, legacyValidateEvent). The uid is the Node's real one,
    which ``kubectl describe node`` (kubectl >= 1.24) searches besides the name."""
    ref = {"apiVersion": "v1", "kind": "Node", "name": node}
    if uid:
        ref["uid"] = uid
    stamp = rfc3339(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        # The server appends 5 characters; the kubelet names its node events "<node>.<hex>" too.
        "metadata": {"generateName": node + ".", "namespace": EVENT_NAMESPACE},
        "involvedObject": ref,
        "type": event["type"],
        "reason": event["reason"],
        "message": event["message"][: C.MAX_MESSAGE],
        "source": {"component": EVENT_COMPONENT, "host": node},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "eventTime": _micro_time(now),
        "reportingComponent": EVENT_COMPONENT,
        "reportingInstance": node[:_MAX_INSTANCE],
        "action": EVENT_ACTION,
    }


def label_patch(current_labels: dict, current_annotations: dict, wanted: dict[str, str], prefix: str) -> dict:
    """The merge patch taking the node's labels to ``wanted`` ({} when nothing changes)."""
    prefix = normalize_prefix(prefix)
    ann_key = owned_annotation(prefix)
    current_labels = current_labels if isinstance(current_labels, dict) else {}
    current_annotations = current_annotations if isinstance(current_annotations, dict) else {}
    said = current_annotations.get(ann_key)
    # Not a string (a number, a list, an object someone wrote): treated as absent, so no label is
    # removed on its word, and rewritten below (NodePublisher says so in one line).
    previously = {k.strip() for k in said.split(",") if k.strip()} if isinstance(said, str) else set()
    changes: dict[str, str | None] = {}
    for k, v in wanted.items():
        if current_labels.get(k) != v:
            changes[k] = v
    for k in sorted(previously - set(wanted)):
        # in_domain: an edited annotation must never make us delete someone else's label.
        if k in current_labels and (k.startswith(prefix) or k == L.RDMA_CAPABLE):
            changes[k] = None
    owned = ",".join(sorted(wanted))
    meta: dict = {}
    if changes:
        meta["labels"] = changes
    if current_annotations.get(ann_key) != owned:
        meta["annotations"] = {ann_key: owned}
    return {"metadata": meta} if meta else {}


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds a Retry-After header asks for (RFC 9110: delay-seconds or an HTTP-date), or None
    when it says nothing usable: negative, NaN, infinite, unparsable. The caller caps it."""
    if value is None:
        return None
    text = value.strip()
    if not text or len(text) > 64:
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = None
    if seconds is not None:
        # NaN compares false with everything; inf and 1e999 are not a delay either.
        return seconds if 0 <= seconds < 1e9 else None
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def _short(value: object, limit: int = 200) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _body_text(response) -> str:
    try:
        return _short(response.text) or "(no body)"
    except Exception:  # noqa: BLE001 - an undecodable body says nothing more
        return "(an unreadable body)"


def _causes(e: BaseException):
    """The exceptions ``e`` was raised from or during, nearest first (at most 8)."""
    cur = e.__cause__ or e.__context__
    for _ in range(8):
        if cur is None:
            return
        yield cur
        cur = cur.__cause__ or cur.__context__


def _json_kind(value: object) -> str:
    """What a JSON value is, in words: "a number", "a list", "an object", ..."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    kinds: dict[type, str] = {list: "a list", dict: "an object", str: "a string"}
    return kinds.get(type(value), type(value).__name__)


def _as_dict(obj) -> dict:
    """The Node lightkube decoded, as a dict; a JSON value that is no object is refused here."""
    out = obj.to_dict() if hasattr(obj, "to_dict") else obj
    if not isinstance(out, dict):
        raise TypeError(f"a JSON {type(out).__name__}, not an object")
    return out


# A kubeconfig is a few kilobytes (tens with embedded certificates and many clusters); more is
# not one (/dev/zero, a log given by mistake), and reading it whole could exhaust memory.
KUBECONFIG_MAX_BYTES = 16 << 20
CREDENTIALS_HINT = (
    "In a pod, mount a ServiceAccount token (the deploy/ direct-mode overlays mount a projected token that "
    "expires after an hour, in the agent container only); elsewhere pass --kubeconfig"
)
_KUBECONFIG_SHAPE = "a YAML mapping with clusters:, contexts: and users: lists, as `kubectl config view --raw` prints"


class _NotKubeconfig(Exception):
    """What is wrong with a kubeconfig file, said before lightkube reads it."""


def _read_kubeconfig(path: str) -> str:
    """The text of a regular file of at most KUBECONFIG_MAX_BYTES; _NotKubeconfig otherwise
    (rdmadoctor.core.files.read_regular: a FIFO with no writer is refused, not waited on)."""
    from rdmadoctor.core.files import NotRegular, read_regular

    try:
        raw = read_regular(path, KUBECONFIG_MAX_BYTES)
    except FileNotFoundError:
        raise _NotKubeconfig("no such file") from None
    except IsADirectoryError:
        raise _NotKubeconfig("it is a directory, not a kubeconfig file") from None
    except NotRegular as e:
        raise _NotKubeconfig(f"it is {e.kind}, not a kubeconfig file") from None
    except OSError as e:
        raise _NotKubeconfig(f"cannot read it: {e.strerror or e}") from None
    if len(raw) > KUBECONFIG_MAX_BYTES:
        raise _NotKubeconfig(f"not a kubeconfig (larger than {KUBECONFIG_MAX_BYTES >> 20} MiB)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _NotKubeconfig(f"not a kubeconfig (not UTF-8 text: byte {e.start})") from None


def _yaml_type(value: object) -> str:
    if value is None:
        return "null"
    return {dict: "mapping", list: "list", str: "string", bool: "boolean", int: "number",
            float: "number"}.get(type(value), type(value).__name__)


def check_kubeconfig_shape(data: object) -> None:
    """Raise _NotKubeconfig saying what is wrong unless ``data`` (the parsed YAML) has the shape
    lightkube's KubeConfig.from_dict reads: it indexes and iterates without checking, so an
    empty file or a list is an AttributeError or a TypeError there."""
    if data is None:
        raise _NotKubeconfig(f"not a kubeconfig (the file is empty; expected {_KUBECONFIG_SHAPE})")
    if not isinstance(data, dict):
        raise _NotKubeconfig(f"not a kubeconfig (a YAML {_yaml_type(data)} at the top level; expected {_KUBECONFIG_SHAPE})")
    current = data.get("current-context")
    if current is not None and not isinstance(current, str):
        raise _NotKubeconfig(f"not a kubeconfig (current-context is a {_yaml_type(current)}, not a context's name)")
    for key, item, required in (("clusters", "cluster", True), ("contexts", "context", True), ("users", "user", False)):
        if key not in data or data[key] is None:
            if required:
                raise _NotKubeconfig(f"not a kubeconfig (no {key}: list; expected {_KUBECONFIG_SHAPE})")
            continue
        entries = data[key]
        if not isinstance(entries, list):
            raise _NotKubeconfig(
                f"not a kubeconfig ({key}: is a {_yaml_type(entries)}, expected a list of "
                f"{{name: NAME, {item}: {{...}}}} entries)"
            )
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict):
                raise _NotKubeconfig(f"not a kubeconfig ({key}[{i}] is a {_yaml_type(entry)}, expected {{name: NAME, {item}: {{...}}}})")
            if not isinstance(entry.get("name"), str):
                raise _NotKubeconfig(f"not a kubeconfig ({key}[{i}] has no name: string)")
            if not isinstance(entry.get(item), dict):
                raise _NotKubeconfig(
                    f"not a kubeconfig ({key}[{i}] ({entry['name']!r}) has no {item}: mapping"
                    f"{'' if item not in entry else f', its {item}: is a {_yaml_type(entry[item])}'})"
                )


def load_kubeconfig(path: str):
    """lightkube's KubeConfig of the file at ``path``, its content checked first; _NotKubeconfig
    (what is wrong) for anything that is not one."""
    from pathlib import Path

    import yaml
    from lightkube import KubeConfig

    full = os.path.expanduser(path)
    text = _read_kubeconfig(full)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        what = getattr(e, "problem", None) or type(e).__name__
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise _NotKubeconfig(f"not a kubeconfig (not valid YAML: {what}{at})") from None
    except RecursionError:
        raise _NotKubeconfig("not a kubeconfig (YAML nested thousands of levels deep)") from None
    check_kubeconfig_shape(data)
    try:
        return KubeConfig.from_dict(data, fname=Path(full))
    except Exception as e:  # noqa: BLE001 - a field of the wrong type (msgspec's or the dataclass's error)
        raise _NotKubeconfig(f"not a kubeconfig ({type(e).__name__}: {_short(e)})") from None


class NodeAPI:
    """The three Node calls and event creation, with lightkube imported on first use."""

    def __init__(self, kubeconfig: str | None, timeout: float, cancel: threading.Event | None = None):
        self.kubeconfig = kubeconfig
        # Seconds one request may take in all (connect, send, every read): the deadline. httpx's
        # own timeout is per read, so a server dripping a byte now and then never trips it.
        self.timeout = timeout
        self.cancel = cancel
        self._client = None
        self.max_answer = MAX_ANSWER_BYTES  # what one answer may hold (list_nodes raises it for a page)
        try:
            import lightkube  # noqa: F401

            _httpx()
        except ImportError as e:
            raise PublishConfigError(
                f"--publish node and --conditions need lightkube, which is not installed ({e})",
                f"{INSTALL_HINT}, or use --publish nfd (no API access needed)",
            ) from e

    def client(self):
        if self._client is None:
            from lightkube import Client

            httpx = _httpx()
            config = self._config()
            try:
                self._client = Client(config, timeout=httpx.Timeout(self.timeout), field_manager=FIELD_MANAGER)
            except Exception as e:  # a broken kubeconfig surfaces here (CA file, exec plugin)
                raise PublishError(f"cannot build a Kubernetes client: {type(e).__name__}: {e}", transient=False) from e
            # lightkube.Client -> its GenericSyncClient -> the httpx Client (lightkube has no hook
            # of its own; tests/unit/publish/test_harden_bounded.py fails if a new lightkube moves it).
            inner = getattr(getattr(self._client, "_client", None), "_client", None)
            if isinstance(inner, httpx.Client):
                _bound_answers(inner, httpx, lambda: self.max_answer)
        return self._client

    def _config(self):
        """The credentials: --kubeconfig; else in a pod the ServiceAccount token (re-read on
        401) and the cluster CA; else $KUBECONFIG or ~/.kube/config (lightkube's from_env order)."""
        from lightkube import KubeConfig
        from lightkube.core.exceptions import ConfigError

        path = self.kubeconfig
        where = path
        try:
            if path is None:
                try:
                    return KubeConfig.from_service_account()
                except ConfigError:
                    pass
                env = os.environ.get("KUBECONFIG")
                path = env or "~/.kube/config"
                where = f"$KUBECONFIG={env}" if env else "~/.kube/config (no in-cluster ServiceAccount, no $KUBECONFIG)"
                if not env and not os.path.exists(os.path.expanduser(path)):
                    raise _NotKubeconfig("no such file")
            return load_kubeconfig(path)
        except (_NotKubeconfig, ConfigError, OSError, ValueError, KeyError) as e:
            where = where or "the in-cluster ServiceAccount"
            hint = (
                "Give --kubeconfig a kubeconfig file (`kubectl config view --raw --minify > FILE` writes one), "
                "or leave it out to use the in-cluster ServiceAccount"
                if self.kubeconfig else CREDENTIALS_HINT
            )
            raise PublishError(f"cannot load Kubernetes credentials from {where}: {e}. {hint}", transient=False) from e

    def reset(self) -> None:
        c, self._client = self._client, None
        if c is not None:
            try:
                c.close()
            except Exception:  # noqa: BLE001 - a client being dropped: its close error changes nothing
                pass

    def _call(self, fn, what: str, kind: str = "Node"):
        """``fn(client)`` under an overall deadline of ``timeout`` seconds; its answer, or the
        error the publisher understands (_Retry, _Unauthorized, _Refused, PublishError).

        The request runs in a thread of its own and this one waits for it: past the deadline (or
        on ``cancel``) the client is closed, which ends the abandoned request at its next read,
        and the next request builds a new one. DNS, a TLS handshake, an exec credential plugin
        and a server that drips its answer are all inside the deadline."""
        client = self.client()
        box: dict = {}
        done = threading.Event()

        def work() -> None:
            try:
                box["value"] = fn(client)
            except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
                box["error"] = e
            finally:
                done.set()

        threading.Thread(target=work, name="rdmadoctor-api", daemon=True).start()
        deadline = time.monotonic() + self.timeout
        while not done.is_set():
            left = deadline - time.monotonic()
            if left <= 0 or (self.cancel is not None and self.cancel.is_set()):
                self.reset()
                if left > 0:
                    raise _Retry(f"{what}: stopping")
                raise _Retry(
                    f"{what}: no complete answer within {self.timeout:g} s (the API server, or a proxy or load "
                    "balancer in between, is overloaded or stuck; the request was abandoned)"
                )
            done.wait(min(left, 0.1) if self.cancel is not None else left)
        if "error" in box:
            self._translate(box["error"], what, kind)
        return box["value"]

    def _translate(self, e: BaseException, what: str, kind: str):
        from lightkube import ApiError
        from lightkube.core.exceptions import ConfigError

        httpx = _httpx()
        if isinstance(e, (_Retry, _Unauthorized, PublishError)):
            raise e
        too_large = e if isinstance(e, _TooLarge) else next((c for c in _causes(e) if isinstance(c, _TooLarge)), None)
        if too_large is not None:
            # Not the Kubernetes API as it answers (a proxy, a broken or hostile server): retried
            # like an outage, and named if it lasts.
            raise _Retry(f"{what}: {too_large}") from None
        if isinstance(e, ApiError):
            status = getattr(e, "status", None)
            code = int(getattr(status, "code", 0) or e.response.status_code)
            msg = getattr(status, "message", None) or str(e)
            self._raise_for(code, msg, e.response.headers.get("Retry-After"), e.response.headers.get("Location"))
        if isinstance(e, httpx.TransportError):  # refused, reset, DNS, a per-read timeout
            raise _Retry(f"{what}: {type(e).__name__}: {e or 'no answer'}") from e
        if isinstance(e, ConfigError):  # e.g. the token file vanished
            raise PublishError(f"Kubernetes credentials: {e}", transient=False) from e
        # An error answer without a readable Status body (a proxy's 503 with no Content-Type or an
        # HTML page, a redirect): lightkube fails while making its ApiError of it, with the
        # HTTPStatusError as the cause or the context.
        cause: BaseException | None = e
        for _ in range(8):
            if cause is None:
                break
            if isinstance(cause, httpx.HTTPStatusError):
                r = cause.response
                self._raise_for(r.status_code, _body_text(r), r.headers.get("Retry-After"), r.headers.get("Location"))
            cause = cause.__cause__ or cause.__context__
        if isinstance(e, Exception):
            # A 2xx answer lightkube could not decode: not JSON, not an object, fields of the wrong
            # type. Not the Kubernetes API as it should answer (a proxy, a captive portal, a bug):
            # retried like an outage, and named if it lasts.
            raise _Retry(
                f"the answer to {what} is not a {kind} object ({type(e).__name__}: {_short(e)}): the server at the "
                "kubeconfig's address does not answer as the Kubernetes API does (a proxy or load balancer in between?)"
            ) from e
        raise e

    @staticmethod
    def _raise_for(code: int, msg: str, retry_after_header: str | None, location: str | None = None):
        if code == 401:
            raise _Unauthorized(msg)
        if code in _RETRY_STATUS:
            raise _Retry(f"HTTP {code}: {msg}", retry_after(retry_after_header))
        if 300 <= code < 400:
            to = f" to {_short(location, 120)}" if location else ""
            raise _Refused(
                f"the API server answered HTTP {code} (a redirect{to}) instead of the Node; rdmadoctor does not follow "
                "redirects, which could carry its token elsewhere. Point the kubeconfig's server (in a pod: "
                "KUBERNETES_SERVICE_HOST) at the API server itself", code, msg,
            )
        if code == 403:
            raise _Refused(
                f"the API server refused (403 Forbidden): {msg}. The agent's ServiceAccount needs "
                "get/patch on nodes (and patch on nodes/status with --conditions) — the ClusterRole "
                "of the deploy/ direct-mode overlay — and its ValidatingAdmissionPolicy lets it change "
                "only its own Node (spec.nodeName must match --node/NODE_NAME) and only labels under "
                "its --prefix", code, msg,
            )
        if code == 404:
            raise _Refused(
                f"node not found (404): {msg}. --node/NODE_NAME must be the Node's name: set "
                "NODE_NAME from the downward API (fieldRef: spec.nodeName)", code, msg,
            )
        raise _Refused(f"the API server refused the request (HTTP {code}): {msg}", code, msg)

    def get_node(self, name: str) -> dict:
        from lightkube.resources.core_v1 import Node

        return self._call(lambda c: _as_dict(c.get(Node, name=name)), f"GET /api/v1/nodes/{name}")

    def list_nodes(self, page: int = 500):
        """Every Node, ``page`` at a time (the API's limit/continue; `rdmadoctor fleet --kube`).
        Each page is one request under the deadline, capped at MAX_PAGE_BYTES: a page over it is
        asked again for half as many Nodes. A continue token seen before, more than MAX_LIST_PAGES
        pages or MAX_LIST_NODES Nodes end the listing (PublishError, not retried)."""
        import hashlib

        from lightkube.resources.core_v1 import Node

        seen_tokens: set[bytes] = set()
        token: str | None = None
        pages = nodes = 0
        limit = max(1, page)
        self.max_answer = MAX_PAGE_BYTES
        try:
            while True:
                if pages >= MAX_LIST_PAGES:
                    raise PublishError(
                        f"{MAX_LIST_PAGES} pages ({nodes:,} Nodes) and the API server still says there "
                        "are more; stopped (a server or proxy that pages for ever?)", transient=False)
                params: dict = {"limit": limit}
                if token is not None:
                    params["continue"] = token

                def one(c, params=params):
                    br = c._client.prepare_request("list", res=Node, params=params)
                    try:
                        resp = c._client.send(c._client.build_adapter_request(br))
                        c._client.raise_for_status(resp)
                        body = resp.content
                    except Exception as e:  # a page over the cap is asked again smaller
                        if isinstance(e, _TooLarge) or any(isinstance(x, _TooLarge) for x in _causes(e)):
                            return None
                        raise
                    # Plain JSON, not lightkube's typed Node: one Node the model refuses (a field
                    # missing) would fail the whole page; the fleet names what it cannot read.
                    doc = json.loads(body)
                    meta = doc.get("metadata") if isinstance(doc, dict) else None
                    items = doc.get("items") if isinstance(doc, dict) else None
                    if not isinstance(meta, dict) or not isinstance(items, list):
                        raise ValueError("not a NodeList (no metadata object and items list)")
                    cont = meta.get("continue")
                    return (cont if isinstance(cont, str) and cont else None), items

                what = "GET /api/v1/nodes" + (" (next page)" if token is not None else "")
                got = self._call(one, what)
                pages += 1
                if got is None:
                    if limit == 1:
                        raise PublishError(
                            f"one Node is over {MAX_PAGE_BYTES >> 20} MiB (a Node is at most 1.5 MiB); "
                            "the answer is not the Kubernetes API's", transient=False)
                    limit = max(1, limit // 2)  # the same continue token, fewer Nodes
                    continue
                nxt, items = got
                for item in items:
                    nodes += 1
                    if nodes > MAX_LIST_NODES:
                        raise PublishError(
                            f"more than {MAX_LIST_NODES:,} Nodes; stopped (Kubernetes supports 5,000 "
                            "a cluster: a server or proxy that pages for ever?)", transient=False)
                    yield item
                if not nxt:
                    return
                key = hashlib.sha256(str(nxt).encode("utf-8", "replace")).digest()
                if key in seen_tokens:
                    raise PublishError(
                        f"the API server answered a continue token it had already given "
                        f"(page {pages}, {nodes:,} Nodes read): the listing would never end; stopped", transient=False)
                seen_tokens.add(key)
                token = str(nxt)
        finally:
            self.max_answer = MAX_ANSWER_BYTES

    def patch_node(self, name: str, patch: dict) -> None:
        from lightkube.resources.core_v1 import Node
        from lightkube.types import PatchType

        self._call(lambda c: c.patch(Node, name, patch, patch_type=PatchType.MERGE), f"PATCH /api/v1/nodes/{name}")

    def patch_status(self, name: str, patch: dict) -> None:
        from lightkube.resources.core_v1 import Node
        from lightkube.types import PatchType

        self._call(lambda c: c.patch(Node.Status, name, patch, patch_type=PatchType.STRATEGIC), f"PATCH /api/v1/nodes/{name}/status")

    def create_event(self, namespace: str, body: dict) -> None:
        from lightkube.generic_resource import GenericNamespacedResource
        from lightkube.resources.core_v1 import Event

        # Through the typed Event model eventTime is a datetime, which lightkube 1.x (msgspec)
        # writes with no fraction at a whole second: a 400. A generic resource is sent as the
        # dict it is, to the same events endpoint.
        class RawEvent(GenericNamespacedResource):
            _api_info = Event._api_info

        # lightkube's signature for the generic resource lists keyword arguments only; it takes the dict.
        self._call(
            lambda c: c.create(RawEvent(body), namespace=namespace),  # type: ignore[call-overload]
            f"POST /api/v1/namespaces/{namespace}/events", "Event",
        )

    def close(self) -> None:
        self.reset()


class NodePublisher(Publisher):
    """Labels on the Node (``labels=True``) and/or NodeConditions on nodes/status."""

    def __init__(
        self,
        *,
        node: str | None,
        kubeconfig: str | None,
        prefix: str,
        labels: bool = True,
        conditions: bool = False,
        dry_run: bool = False,
        out: IO[str] | None = None,
        heartbeat: float = 300,
        retries: int = 3,
        backoff: float = 0.5,
        timeout: float = 5.0,
        clock: Callable[[], float] = time.time,
        cancel: threading.Event | None = None,
        api: NodeAPI | None = None,
    ):
        name = node or os.environ.get("NODE_NAME")
        if not name:
            raise PublishConfigError(
                "no node name: pass --node NAME or set NODE_NAME",
                "in a pod, set NODE_NAME from the downward API: env: [{name: NODE_NAME, "
                "valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]",
            )
        self.node: str = name
        if not L.is_dns_subdomain(self.node):
            raise PublishConfigError(f"--node {self.node!r} is not a valid Node name")
        self.prefix = normalize_prefix(prefix)
        self.do_labels = labels
        self.do_conditions = conditions
        self.dry_run = dry_run
        self.out = out if out is not None else sys.stdout
        self.heartbeat = float(heartbeat)
        self.retries = max(0, int(retries))
        self.backoff = float(backoff)
        self.clock = clock
        self.cancel = cancel
        self.api = api if api is not None else NodeAPI(kubeconfig, timeout, cancel)
        self.problems: tuple[str, ...] = ()
        self.path = f"/api/v1/nodes/{self.node}"
        # Events are best effort: counted here (the agent may export them), never raised.
        self.events_created = 0
        self.events_failed = 0
        self.event_errors: list[str] = []  # why events of the last publish were not created
        # What the last publish found odd on the Node and worked around (one line each): the
        # agent logs them as warnings, `label` prints them in its summary.
        self.notices: list[str] = []

    # -- one cycle -------------------------------------------------------------------------
    def _cycle(self, report: dict, written: list[str]) -> list[str]:
        node = self.api.get_node(self.node)
        meta = node.get("metadata") or {}
        if not isinstance(meta, dict):
            meta = {}
        notes: list[str] = []
        if self.do_labels:
            annotations = meta.get("annotations")
            said = (annotations if isinstance(annotations, dict) else {}).get(owned_annotation(self.prefix))
            if said is not None and not isinstance(said, str):
                self.notices.append(
                    f"the {owned_annotation(self.prefix)} annotation on node {self.node} is {_json_kind(said)} "
                    f"({_short(json.dumps(said, default=str), 80)}), not the comma-separated label keys rdmadoctor "
                    "writes: treated as absent (no label is removed on its word) and rewritten"
                )
            wanted, self.problems = node_labels(report, self.prefix)
            if not wanted:
                # Every report that judged anything has ready=true|false: none at all means something
                # upstream broke, and this patch would remove every label rdmadoctor set on the node.
                raise PublishError(
                    f"the report has no labels to publish ({'; '.join(self.problems) or 'none computed'}): not "
                    f"patching node {self.node}, which would remove every rdmadoctor label from it",
                    transient=False,
                )
            patch = label_patch(meta.get("labels") or {}, meta.get("annotations") or {}, wanted, self.prefix)
            fp = fingerprint_annotation(report)
            if fp is not None and (meta.get("annotations") or {}).get(FINGERPRINT_ANNOTATION) != fp:
                patch.setdefault("metadata", {}).setdefault("annotations", {})[FINGERPRINT_ANNOTATION] = fp
            if patch:
                if self.dry_run:
                    self._show("PATCH", self.path, "application/merge-patch+json", patch)
                else:
                    self.api.patch_node(self.node, patch)
                    if "node" not in written:
                        written.append("node")
                changed = patch["metadata"].get("labels") or {}
                notes.append(f"{count(len(changed), 'label')} changed on node {self.node}" if changed else f"annotations updated on node {self.node}")
            else:
                notes.append(f"node {self.node} labels unchanged ({count(len(wanted), 'label')})")
        if self.do_conditions:
            now = self.clock()
            wanted_c = C.compute(report)
            current = (node.get("status") or {}).get("conditions") or []
            send = C.plan(wanted_c, current, rfc3339(now), now, self.heartbeat, _parse_time)
            # Computed from this GET, sent only once the patch recording the change succeeded: a
            # retried cycle starts from a fresh GET, so a transition is never announced twice.
            events = C.transitions(wanted_c, current)
            if send:
                patch = {"status": {"conditions": send}}
                if self.dry_run:
                    self._show("PATCH", self.path + "/status", "application/strategic-merge-patch+json", patch)
                else:
                    self.api.patch_status(self.node, patch)
                    if "node-status" not in written:
                        written.append("node-status")
                notes.append(f"{count(len(send), 'condition')} written")
            else:
                notes.append("conditions unchanged")
            if events:
                notes.append(self._send_events(events, meta.get("uid"), now))
        if self.dry_run and self.do_labels:
            for k in sorted(wanted):
                self.out.write(f"{k}={wanted[k]}\n")
        self.summary = ("dry run: " if self.dry_run else "") + "; ".join(self.notices + notes)
        return written

    def _send_events(self, events: list[dict], uid: str | None, now: float) -> str:
        """Create one Event per transition; returns a note for the summary. Never raises."""
        path = f"/api/v1/namespaces/{EVENT_NAMESPACE}/events"
        bodies = [event_body(self.node, uid, e, now) for e in events]
        if self.dry_run:
            for body in bodies:
                self._show("POST", path, "application/json", body)
            return f"{count(len(bodies), 'event')} not sent"
        created = 0
        why = ""
        for i, body in enumerate(bodies):
            why = self._create_event(body)
            if why:
                # The next ones would meet the same RBAC or the same outage: one try is enough.
                self.events_failed += len(bodies) - i
                self.event_errors.append(why)
                break
            created += 1
        self.events_created += created
        if not why:
            return f"{count(created, 'event')} created"
        return f"{created} of {count(len(bodies), 'event')} created; not created: {why}"

    def _create_event(self, body: dict) -> str:
        """'' when created, else why not: at most one short retry, and only for what may pass."""
        for attempt in (1, 2):
            try:
                self.api.create_event(EVENT_NAMESPACE, body)
                return ""
            except _Retry as e:
                if attempt == 2:
                    return f"{e.why} (events are not retried further)"
                if self.cancel is not None:
                    if self.cancel.wait(EVENT_RETRY_DELAY):
                        return f"{e.why} (stopping)"
                else:
                    time.sleep(EVENT_RETRY_DELAY)
            except _Unauthorized as e:
                return f"401 Unauthorized: {e}"
            except _Refused as e:
                if e.code == 403:
                    return (
                        f"HTTP 403 Forbidden ({e.reason}): the ServiceAccount may not create events "
                        f"in namespace {EVENT_NAMESPACE!r}; grant it events create there (the deploy/ "
                        "direct-mode overlay's RBAC). The conditions were written all the same"
                    )
                return f"HTTP {e.code}: {e.reason}"
            except PublishError as e:  # credentials that could not be loaded
                return e.message
            except Exception as e:  # noqa: BLE001 - an event must never break the publish
                return f"{type(e).__name__}: {e}"
        return "not created"  # pragma: no cover - the loop always returns

    def _show(self, method: str, path: str, ctype: str, body: dict) -> None:
        self.out.write(f"# would send {method} {path} ({ctype}): {json.dumps(body, sort_keys=True)}\n")

    def publish(self, report: dict) -> list[str]:
        written: list[str] = []
        self.event_errors = []
        self.notices = []
        rebuilt = False
        attempt = 0
        delay = self.backoff
        while True:
            try:
                self._cycle(report, written)
                if self.dry_run:
                    self.out.flush()
                return written
            except _Unauthorized as e:
                if rebuilt:
                    raise PublishError(
                        f"the API server refused our credentials (401 Unauthorized: {e}) even after "
                        "reloading them: the ServiceAccount token or --kubeconfig is expired or revoked",
                        transient=True,
                    ) from None
                rebuilt = True
                self.api.reset()  # a rotated token: read the kubeconfig / token file again
                continue
            except _Retry as e:
                attempt += 1
                if attempt > self.retries:
                    raise PublishError(
                        f"Kubernetes API at node {self.node}: {e.why} (gave up after {count(attempt, 'attempt')})",
                        transient=True,
                    ) from None
                wait = e.after if e.after is not None else delay * (0.5 + random.random())
                wait = min(max(wait, 0.0), MAX_BACKOFF)
                delay = min(delay * 2, MAX_BACKOFF)
                if self.cancel is not None:
                    if self.cancel.wait(wait):
                        raise PublishError(f"stopped while retrying: {e.why}", transient=True) from None
                else:
                    time.sleep(wait)

    def close(self) -> None:
        self.api.close()
