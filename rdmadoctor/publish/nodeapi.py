"""The Kubernetes API calls of ``--publish node``, ``fleet --kube`` and quarantine: :class:`NodeAPI`
(the Node's GET and PATCHes, the Node list, Event creation), through lightkube imported on first use.

Every request has an overall deadline (``timeout``, 5 s by default), not only httpx's per-read
timeout: a server that drips its answer a byte at a time is abandoned at the deadline, so
`label` ends and the agent's cycle goes on. An answer no API server should send is an API error
with its reason, never a traceback: a Retry-After that is negative, NaN or unparsable is ignored
(the caller's own backoff applies, capped at kube.MAX_BACKOFF), a body that is not the JSON
object asked for is retried like an outage, and a redirect (3xx) is refused: the client does not
follow redirects, which could carry the token to another host. An answer is read only up to MAX_ANSWER_BYTES (4 MiB,
more than any object etcd stores): a longer Content-Length, a body that keeps coming and a
compressed body (none is asked for) are refused while read and retried like an outage.

Its errors are what a caller retries or says: ``_Retry`` (an outage, a timeout, 409, 429, 5xx, an
answer that is not the object asked for), ``_Unauthorized`` (401: rebuild the client once) and
``_Refused`` (403, 404, other 4xx: not retried, the fix named). The publisher's retry loop is in
:mod:`rdmadoctor.publish.kube`; the kubeconfig is read by :mod:`rdmadoctor.publish.kubeconfig`.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Callable

from rdmadoctor.publish.base import PublishConfigError, PublishError
from rdmadoctor.publish.kubeconfig import CREDENTIALS_HINT, _NotKubeconfig, _short, load_kubeconfig

INSTALL_HINT = "pip install 'rdmadoctor[k8s]'"
FIELD_MANAGER = "rdmadoctor"
_RETRY_STATUS = {409, 429, 500, 502, 503, 504}
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


def _as_dict(obj) -> dict:
    """The Node lightkube decoded, as a dict; a JSON value that is no object is refused here."""
    out = obj.to_dict() if hasattr(obj, "to_dict") else obj
    if not isinstance(out, dict):
        raise TypeError(f"a JSON {type(out).__name__}, not an object")
    return out


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
