"""FakeKubeAPI: a loopback HTTP server standing in for the Kubernetes API server.

No Kubernetes API server (nor kind, nor envtest) can run on the machines these tests run on,
so this server implements exactly, and only, the calls rdmadoctor's node publisher makes:

- ``GET   /api/v1/nodes/NAME``
- ``GET   /api/v1/nodes?limit=N&continue=TOKEN`` (the paginated list `rdmadoctor fleet --kube` reads)
- ``PATCH /api/v1/nodes/NAME``         Content-Type ``application/merge-patch+json`` (RFC 7386)
- ``PATCH /api/v1/nodes/NAME/status``  Content-Type ``application/strategic-merge-patch+json``
  (what the kubelet and Node Problem Detector send: ``status.conditions`` is merged by its
  ``type`` key, so other writers' conditions are kept) or ``application/merge-patch+json``
- ``POST  /api/v1/namespaces/NAMESPACE/events``  Content-Type ``application/json``: a core/v1
  Event, checked as the apiserver's legacyValidateEvent does (pkg/apis/core/validation/events.go:
  with ``eventTime`` set, ``reportingComponent``, ``reportingInstance``, ``action`` and ``reason``
  are required and a cluster-scoped involvedObject only goes to ``default`` or ``kube-system``;
  without it, only ``default`` or no namespace), times parsed as Go parses them (``eventTime``
  a MicroTime with exactly six fraction digits), ``metadata.generateName`` honoured. Stricter
  than the server, because a client that omits them is broken: ``type`` must be Normal or
  Warning, ``involvedObject`` needs kind and name. Created events are kept in ``.events``.

With ``allow_taints = True`` (agent --quarantine, issue 28), also: a node merge patch touching
``spec.taints`` (only that in spec, with ``metadata.resourceVersion``: the list is replaced whole;
taints validated, 409 on a stale version); ``GET /api/v1/nodes?labelSelector=k=v,...`` (equality
terms); ``GET``/``PUT /apis/coordination.k8s.io/v1/namespaces/NS/leases/NAME`` and ``POST
.../leases`` (409 AlreadyExists, 409 Conflict on a stale resourceVersion; MicroTime checked),
kept in ``.leases``. ``set_taints()`` is an administrator's write.

It is strict where the real server would be, and stricter where a silent success would hide a
client bug: another method gives 405, another path 404, another Content-Type 415, a body that is
not a JSON object 400, a missing or wrong bearer token 401, a ``metadata.resourceVersion`` in a
patch that is not the current one 409, a status patch touching anything but ``status`` (or a
node patch touching ``status``) 422. Errors are ``Status`` objects served as
``application/json``, as the real server does (lightkube only turns those into ``ApiError``).

Every request is recorded in ``.requests`` as ``(method, path, content_type, body)`` (``body``
is the parsed JSON or None; each entry also has ``.query`` and ``.auth``). Faults:
``fail_next(n, status)`` answers the next n requests with that status, ``slow_next(n, seconds)``
delays them (client timeouts), ``down()`` closes the listening socket (connection refused) and
``up()`` listens again on the same port, ``token = "..."`` rotates the accepted bearer token.
Misbehaving servers (issue 10): ``drip_next(n, every, pad)`` sends the next n answers one byte
every ``every`` seconds (status line, headers and body; ``pad`` spaces after the JSON make the body
as long as wanted, so the answer is still valid once whole) and records in ``.drips`` how far each
got and whether the client hung up first; ``respond_next(n, status, body, headers)`` answers with
exactly those bytes and headers (no Content-Type unless given), for answers no API server sends;
``endless_next(n, framing, gzip=...)`` answers with a body that never ends (a 1 TB Content-Length,
or chunks for ever; gzip-compressed if asked) and records in ``.endless`` how much was sent.
The Node list (issue 33): ``add_node(..., status=...)`` adds fields to a Node's status (a real
Node's images and addresses make it ~12 KB: ``realistic_status(i)``); ``list_fault = "repeat"``
answers every page with the same continue token, ``"endless"`` with a new one for ever (the Nodes
again and again); ``.list_limits`` records the ``limit`` of each page asked.

    with FakeKubeAPI() as api:
        api.add_node("gpu-1", labels={"team": "ml"})
        kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
"""

from __future__ import annotations

import copy
import json
import random
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


class Request(tuple):
    """One recorded request; unpacks as (method, path, content_type, body)."""

    def __new__(cls, method: str, path: str, content_type: str | None, body: Any, query: dict, auth: str | None):
        self = super().__new__(cls, (method, path, content_type, body))
        self.query = query
        self.auth = auth
        return self

    method = property(lambda self: self[0])
    path = property(lambda self: self[1])
    content_type = property(lambda self: self[2])
    body = property(lambda self: self[3])


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


EVENTS_JSON = "application/json"
# Go's time.Parse with time.RFC3339 (metav1.Time: a fraction is accepted though not in the layout)
# and with RFC3339Micro "2006-01-02T15:04:05.000000Z07:00" (metav1.MicroTime: exactly six digits).
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")
_RFC3339_MICRO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
# names.SimpleNameGenerator: 5 characters from this alphabet, the base cut to 253 - 5.
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def validate_event(ev: dict, namespace: str) -> list[str]:
    """The apiserver's checks of a core/v1 Event create (legacyValidateEvent; core/v1 skips the
    strict events.k8s.io ones), plus the stricter ones named in the module docstring. [] = valid."""
    errs: list[str] = []
    ref = ev.get("involvedObject") or {}
    if not isinstance(ref, dict):
        return ["involvedObject: must be an object"]
    ref_ns = ref.get("namespace") or ""
    if not ev.get("eventTime"):
        if not ref_ns:
            if namespace not in ("", "default"):
                errs.append("involvedObject.namespace: does not match event.namespace")
        elif namespace != ref_ns:
            errs.append("involvedObject.namespace: does not match event.namespace")
    else:
        if not ref_ns and namespace not in ("default", "kube-system"):
            errs.append("involvedObject.namespace: does not match event.namespace")
        ctrl = ev.get("reportingComponent") or ""
        if not ctrl:
            errs.append("reportingComponent: Required value")
        elif not _QUALIFIED_NAME.fullmatch(ctrl):
            errs.append(f"reportingComponent: Invalid value: {ctrl!r}")
        inst = ev.get("reportingInstance") or ""
        if not inst:
            errs.append("reportingInstance: Required value")
        elif len(inst) > 128:
            errs.append("reportingInstance: can have at most 128 characters")
        action = ev.get("action") or ""
        if not action:
            errs.append("action: Required value")
        elif len(action) > 128:
            errs.append("action: can have at most 128 characters")
        reason = ev.get("reason") or ""
        if not reason:
            errs.append("reason: Required value")
        elif len(reason) > 128:
            errs.append("reason: can have at most 128 characters")
        if len(ev.get("message") or "") > 1024:
            errs.append("message: can have at most 1024 characters")
    if len(namespace) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(namespace):
        errs.append(f"namespace: Invalid value: {namespace!r}")
    # Stricter than the server (see the module docstring).
    if ev.get("type") not in ("Normal", "Warning"):
        errs.append(f"type: Unsupported value: {ev.get('type')!r} (FakeKubeAPI: Normal or Warning)")
    if not ref.get("kind") or not ref.get("name"):
        errs.append("involvedObject: kind and name are required (FakeKubeAPI)")
    return errs


def _decode_event_errors(ev: dict) -> list[str]:
    """What the apiserver's JSON decoder refuses (a 400, before validation)."""
    errs = []
    for field in ("firstTimestamp", "lastTimestamp"):
        v = ev.get(field)
        if v is not None and not (isinstance(v, str) and _RFC3339.fullmatch(v)):
            errs.append(f"{field}: {v!r} is not an RFC 3339 time")
    v = ev.get("eventTime")
    if v is not None and not (isinstance(v, str) and _RFC3339_MICRO.fullmatch(v)):
        errs.append(f'eventTime: parsing time {v!r} as "2006-01-02T15:04:05.000000Z07:00"')
    if ev.get("count") is not None and (not isinstance(ev["count"], int) or isinstance(ev["count"], bool)):
        errs.append("count: must be an integer")
    for field in ("metadata", "involvedObject", "source"):
        if ev.get(field) is not None and not isinstance(ev[field], dict):
            errs.append(f"{field}: must be an object")
    return errs


# The only list rdmadoctor patches strategically; its patchMergeKey in the Kubernetes API types.
_MERGE_KEYS = {("status", "conditions"): "type"}


def strategic_merge_patch(target: Any, patch: Any, path: tuple = ()) -> Any:
    """The subset of a strategic merge patch the kubelet and NPD use on nodes/status: maps merge
    like RFC 7386, lists with a patchMergeKey merge item by item on that key, other lists replace.
    Directives (``$patch``, ``$retainKeys``, ``$setElementOrder``...) are refused, not guessed."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            raise ValueError(f"strategic merge directive {key!r} is not implemented by FakeKubeAPI")
        sub = path + (key,)
        if value is None:
            result.pop(key, None)
        elif sub in _MERGE_KEYS and isinstance(value, list):
            mkey = _MERGE_KEYS[sub]
            items = [copy.deepcopy(i) for i in (result.get(key) or [])]
            for item in value:
                if not isinstance(item, dict) or mkey not in item:
                    raise ValueError(f"{'.'.join(sub)}: every item needs its merge key {mkey!r}")
                for i, old in enumerate(items):
                    if old.get(mkey) == item[mkey]:
                        items[i] = strategic_merge_patch(old, item, sub)
                        break
                else:
                    items.append(strategic_merge_patch({}, item, sub))
            result[key] = items
        else:
            result[key] = strategic_merge_patch(result.get(key), value, sub)
    return result


class _Fault:
    def __init__(self, count: int, status: int | None = None, delay: float = 0.0, methods: tuple[str, ...] | None = None,
                 drip: float = 0.0, pad: int = 0, raw: tuple[int, bytes, dict] | None = None, endless: str = "",
                 gzip: bool = False):
        self.count = count
        self.status = status
        self.delay = delay
        self.methods = methods
        self.drip = drip  # seconds between the bytes of the answer (0: sent at once)
        self.pad = pad  # spaces after the JSON body
        self.raw = raw  # (status, body, headers) sent as they are
        self.endless = endless  # "length" or "chunked": a body that never ends (see endless_next)
        self.gzip = gzip


# The fault taken by the request a handler thread is serving (ThreadingHTTPServer: one thread each).
_current = threading.local()


class FakeKubeAPI:
    """A context manager serving the Node API on 127.0.0.1 (a free port) from a thread."""

    def __init__(self, token: str = "rdmadoctor-test-token"):
        self.token = token
        self.nodes: dict[str, dict] = {}
        self.events: list[dict] = []  # the Event objects created, as the server stored them
        self.namespaces = {"default", "kube-system", "kube-public", "kube-node-lease"}
        self.requests: list[Request] = []
        self._faults: list[_Fault] = []
        self._lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._port = 0
        self._rv = 1000
        self.list_pages = 0  # pages of GET /api/v1/nodes served (rdmadoctor fleet --kube)
        self.list_limits: list[int] = []  # the limit each page asked for
        self.list_fault: str | None = None  # None, "repeat" or "endless" (see the module docstring)
        self.drips: list[dict] = []  # per dripped answer: sent, total, hung_up, finished
        self.endless: list[dict] = []  # per endless answer: sent (body bytes), hung_up
        self._stopping = threading.Event()  # down(): dripping handlers stop
        # Quarantine (issue 28): taints on Nodes, Leases, label-selector lists (see the section
        # "quarantine" below). Off, a node patch touching spec is refused as before.
        self.allow_taints = False
        self.leases: dict[tuple[str, str], dict] = {}  # (namespace, name) -> the stored Lease

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> "FakeKubeAPI":
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    def up(self) -> None:
        """Listen (again, on the same port after ``down()``)."""
        if self._server is not None:
            return
        self._stopping.clear()
        api = self

        class Handler(_Handler):
            fake = api

        server = _Server(("127.0.0.1", self._port), Handler)
        server.daemon_threads = True
        self._port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def down(self) -> None:
        """Stop listening: clients now get 'connection refused'."""
        server, self._server = self._server, None
        self._stopping.set()
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def kubeconfig(self, path: str | Path, token: str | None = None) -> str:
        """Write a kubeconfig (JSON, which is YAML) pointing at this server; returns its path."""
        conf = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "rdmadoctor", "user": {"token": token if token is not None else self.token}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "rdmadoctor"}}],
            "current-context": "fake",
        }
        Path(path).write_text(json.dumps(conf, indent=1))
        return str(path)

    # -- state -----------------------------------------------------------------------------
    def add_node(self, name: str, labels: dict | None = None, annotations: dict | None = None, conditions: list | None = None,
                 status: dict | None = None) -> dict:
        with self._lock:
            self._rv += 1
            node = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "uid": str(uuid.uuid4()),
                    "resourceVersion": str(self._rv),
                    "creationTimestamp": "2024-01-01T00:00:00Z",
                    "labels": dict(labels or {"kubernetes.io/hostname": name}),
                    "annotations": dict(annotations or {}),
                },
                "spec": {},
                "status": {"conditions": copy.deepcopy(conditions or []), **copy.deepcopy(status or {})},
            }
            self.nodes[name] = node
            return node

    def labels(self, name: str) -> dict:
        with self._lock:
            return dict(self.nodes[name]["metadata"].get("labels") or {})

    def annotations(self, name: str) -> dict:
        with self._lock:
            return dict(self.nodes[name]["metadata"].get("annotations") or {})

    def conditions(self, name: str) -> list[dict]:
        with self._lock:
            return copy.deepcopy(self.nodes[name].get("status", {}).get("conditions") or [])

    def writes(self) -> list[Request]:
        """The requests that could have changed a Node (every PATCH, answered or not); event
        POSTs are in :meth:`event_posts`."""
        with self._lock:
            return [r for r in self.requests if r.method != "GET" and not _is_events_path(r.path)]

    def event_posts(self) -> list[Request]:
        """Every request to an events path (answered or not)."""
        with self._lock:
            return [r for r in self.requests if _is_events_path(r.path)]

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    # -- faults ----------------------------------------------------------------------------
    def fail_next(self, n: int, status: int = 500, methods: tuple[str, ...] | None = None) -> None:
        """Answer the next ``n`` requests (of ``methods``, default any) with ``status``."""
        with self._lock:
            self._faults.append(_Fault(n, status=status, methods=methods))

    def clear_faults(self) -> None:
        """Forget the faults not taken yet."""
        with self._lock:
            self._faults.clear()

    def slow_next(self, n: int, seconds: float, methods: tuple[str, ...] | None = None) -> None:
        """Delay the next ``n`` requests by ``seconds`` before answering them normally."""
        with self._lock:
            self._faults.append(_Fault(n, delay=seconds, methods=methods))

    def drip_next(self, n: int, every: float, pad: int = 0, methods: tuple[str, ...] | None = None) -> None:
        """Send the next ``n`` answers one byte every ``every`` seconds, with ``pad`` spaces after
        the JSON body (valid JSON still; a large pad makes the answer take as long as wanted)."""
        with self._lock:
            self._faults.append(_Fault(n, drip=every, pad=pad, methods=methods))

    def endless_next(self, n: int, framing: str = "length", methods: tuple[str, ...] | None = None, gzip: bool = False) -> None:
        """Answer the next ``n`` requests with 200 and a JSON body that never ends, as fast as the
        client reads it: ``framing`` "length" announces a 1 TB Content-Length, "chunked" sends
        chunks for ever. ``gzip``: the body is gzip-compressed (Content-Encoding: gzip), a run of
        spaces that expands a thousandfold. Each answer records in ``.endless`` how many body
        bytes were sent before the client hung up (``hung_up``) or down() stopped it."""
        assert framing in ("length", "chunked")
        with self._lock:
            self._faults.append(_Fault(n, methods=methods, endless=framing, gzip=gzip))

    def respond_next(self, n: int, status: int, body: bytes = b"", headers: dict | None = None,
                     methods: tuple[str, ...] | None = None) -> None:
        """Answer the next ``n`` requests with exactly this status, body and headers (plus
        Content-Length): what a proxy, a load balancer or a broken server may send."""
        with self._lock:
            self._faults.append(_Fault(n, methods=methods, raw=(status, body, dict(headers or {}))))

    def _take_fault(self, method: str) -> _Fault | None:
        with self._lock:
            for f in self._faults:
                if f.count > 0 and (f.methods is None or method in f.methods):
                    f.count -= 1
                    if f.count == 0:
                        self._faults.remove(f)
                    return f
        return None

    # -- quarantine (issue 28): taints, Leases ----------------------------------------------
    def taints(self, name: str) -> list[dict]:
        with self._lock:
            return copy.deepcopy((self.nodes[name].get("spec") or {}).get("taints") or [])

    def set_taints(self, name: str, taints: list[dict]) -> None:
        """An administrator's write of the whole taint list (a new resourceVersion, as any write)."""
        with self._lock:
            self._rv += 1
            self.nodes[name].setdefault("spec", {})["taints"] = copy.deepcopy(taints)
            self.nodes[name]["metadata"]["resourceVersion"] = str(self._rv)

    def lease(self, namespace: str, name: str) -> dict | None:
        with self._lock:
            got = self.leases.get((namespace, name))
            return copy.deepcopy(got) if got is not None else None

    def _lease(self, method: str, parts: list[str], ctype: str | None, body: Any, bad_json: bool) -> tuple[int, dict]:
        """``GET``/``PUT /apis/coordination.k8s.io/v1/namespaces/NS/leases/NAME`` and ``POST
        .../leases``: create refuses an existing name (409 AlreadyExists), update needs the
        current ``metadata.resourceVersion`` (409 Conflict otherwise; stricter than the server,
        which takes an update without one unconditionally: a lock taken that way is no lock)."""
        if len(parts) not in (6, 7) or parts[3] != "namespaces" or parts[5] != "leases":
            return _status(404, "the server could not find the requested resource", "NotFound")
        namespace, name = parts[4], (parts[6] if len(parts) == 7 else None)
        allowed = ("GET", "PUT") if name else ("POST",)
        if method not in allowed:
            return _status(405, f"method {method} not allowed here (FakeKubeAPI: leases get, create, update)", "MethodNotAllowed")
        with self._lock:
            if namespace not in self.namespaces:
                return _status(404, f'namespaces "{namespace}" not found', "NotFound")
            if method == "GET":
                got = self.leases.get((namespace, name or ""))
                if got is None:
                    return _status(404, f'leases.coordination.k8s.io "{name}" not found', "NotFound")
                return 200, copy.deepcopy(got)
            if ctype != "application/json":
                return _status(415, "the body of the request was in an unknown format - accepted media types include: application/json", "UnsupportedMediaType")
            if bad_json or not isinstance(body, dict):
                return _status(400, "the body is not a JSON object", "BadRequest")
            meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
            errs = _lease_errors(body)
            if errs:
                return _status(422, "Lease is invalid: " + "; ".join(errs), "Invalid")
            key = (namespace, meta.get("name") or "")
            if method == "POST":
                if key in self.leases:
                    return _status(409, f'leases.coordination.k8s.io "{key[1]}" already exists', "AlreadyExists")
            else:
                if meta.get("name") != name:
                    return _status(400, "the name of the object does not match the name on the URL", "BadRequest")
                old = self.leases.get(key)
                if old is None:
                    return _status(404, f'leases.coordination.k8s.io "{name}" not found', "NotFound")
                if meta.get("resourceVersion") != old["metadata"]["resourceVersion"]:
                    return _status(409, f'Operation cannot be fulfilled on leases.coordination.k8s.io "{name}": the object has been modified; please apply your changes to the latest version and try again', "Conflict")
            self._rv += 1
            stored = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": copy.deepcopy(body.get("spec") or {}),
                      "metadata": {"name": key[1], "namespace": namespace, "resourceVersion": str(self._rv),
                                   "uid": (self.leases.get(key) or {}).get("metadata", {}).get("uid") or str(uuid.uuid4())}}
            self.leases[key] = stored
            return (201 if method == "POST" else 200), copy.deepcopy(stored)

    # -- the API ---------------------------------------------------------------------------
    def _handle(self, method: str, raw_path: str, headers, body: bytes) -> tuple[int, dict]:
        split = urlsplit(raw_path)
        path, query = split.path, parse_qs(split.query)
        ctype = headers.get("Content-Type")
        ctype_base = ctype.split(";")[0].strip() if ctype else None
        parsed: Any = None
        bad_json = False
        if body:
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed, bad_json = body.decode("utf-8", "replace"), True
        auth = headers.get("Authorization")
        with self._lock:
            self.requests.append(Request(method, path, ctype_base, parsed, query, auth))
        fault = self._take_fault(method)
        _current.fault = fault
        if fault is not None:
            if fault.delay:
                time.sleep(fault.delay)
            if fault.status is not None:
                return _status(fault.status, "injected by FakeKubeAPI.fail_next")
        if auth != f"Bearer {self.token}":
            return _status(401, "Unauthorized")

        parts = path.strip("/").split("/")
        if parts[:3] == ["apis", "coordination.k8s.io", "v1"]:
            return self._lease(method, parts, ctype_base, parsed, bad_json)
        if parts == ["api", "v1", "nodes"] and method == "GET":
            return self._list_nodes(query)
        if _is_events_path(path):
            return self._create_event(method, parts[3], ctype_base, parsed, bad_json)
        if parts[:3] != ["api", "v1", "nodes"] or len(parts) not in (4, 5) or (len(parts) == 5 and parts[4] != "status"):
            return _status(404, f"the server could not find the requested resource ({path})", "NotFound")
        name, sub = parts[3], (parts[4] if len(parts) == 5 else None)
        allowed = ("PATCH",) if sub else ("GET", "PATCH")
        if method not in allowed:
            return _status(405, f"method {method} not allowed on {path}", "MethodNotAllowed")
        with self._lock:
            node = self.nodes.get(name)
            if node is None:
                return _status(404, f'nodes "{name}" not found', "NotFound")
            if method == "GET":
                return 200, copy.deepcopy(node)
            ok_types = (MERGE, STRATEGIC) if sub else (MERGE,)
            if ctype_base not in ok_types:
                return _status(415, f"the body of the request was in an unknown format - accepted media types include: {', '.join(ok_types)}", "UnsupportedMediaType")
            if bad_json or not isinstance(parsed, dict):
                return _status(400, "the patch body is not a JSON object", "BadRequest")
            if sub:
                extra = set(parsed) - {"status"}
            else:
                extra = set(parsed) & {"status", "spec"}
                if extra == {"spec"} and self.allow_taints:
                    bad = _taint_patch_errors(parsed)
                    if bad:
                        return _status(422, f"{path}: {bad}", "Invalid")
                    extra = set()
            if extra:
                return _status(422, f"{path}: this patch may not touch {sorted(extra)}", "Invalid")
            want_rv = (parsed.get("metadata") or {}).get("resourceVersion") if isinstance(parsed.get("metadata"), dict) else None
            if want_rv is not None and want_rv != node["metadata"]["resourceVersion"]:
                return _status(409, f'Operation cannot be fulfilled on nodes "{name}": the object has been modified; please apply your changes to the latest version and try again', "Conflict")
            try:
                if ctype_base == STRATEGIC:
                    new = strategic_merge_patch(node, parsed)
                else:
                    new = merge_patch(node, parsed)
            except ValueError as e:
                return _status(400, str(e), "BadRequest")
            new["metadata"]["name"] = name  # the name is immutable
            for field in ("labels", "annotations"):
                for k, v in (new["metadata"].get(field) or {}).items():
                    if not isinstance(v, str):
                        return _status(422, f"metadata.{field}[{k}]: must be a string", "Invalid")
            if new != node:
                self._rv += 1
                new["metadata"]["resourceVersion"] = str(self._rv)
                self.nodes[name] = new
            return 200, copy.deepcopy(self.nodes[name])


    def _list_nodes(self, query: dict) -> tuple[int, dict]:
        """``GET /api/v1/nodes?limit=N&continue=TOKEN``: Nodes in name order, a page at a time; the
        continue token is opaque to the client (here: the next index)."""
        try:
            limit = int((query.get("limit") or ["0"])[0])
            start = int((query.get("continue") or ["0"])[0].split(".")[0].replace("c2FtZQ", "0"))
        except ValueError:
            return _status(400, "bad limit or continue", "BadRequest")
        with self._lock:
            names = sorted(self.nodes)
            selector = (query.get("labelSelector") or [""])[0]
            if selector:  # quarantine: the pool's nodes
                try:
                    names = [n for n in names if _selects(selector, self.nodes[n]["metadata"].get("labels") or {})]
                except ValueError as e:
                    return _status(400, f"unable to parse requirement: {e}", "BadRequest")
            fault = self.list_fault
            if fault == "endless":
                start %= max(len(names), 1)
            end = len(names) if limit <= 0 else min(len(names), start + limit)
            items = [copy.deepcopy(self.nodes[n]) for n in names[start:end]]
            self.list_pages += 1
            self.list_limits.append(limit)
            pages = self.list_pages
        meta = {"resourceVersion": str(self._rv)}
        if fault == "repeat":
            meta["continue"] = "c2FtZQ"  # the same token, whatever was asked
        elif fault == "endless":
            meta["continue"] = f"{end}.{pages}"  # new each time; int() of it fails: see below
        elif end < len(names):
            meta["continue"] = str(end)
        return 200, {"kind": "NodeList", "apiVersion": "v1", "metadata": meta, "items": items}

    def _create_event(self, method: str, namespace: str, ctype: str | None, ev: Any, bad_json: bool) -> tuple[int, dict]:
        if method != "POST":
            return _status(405, f"method {method} not allowed on events (FakeKubeAPI: create only)", "MethodNotAllowed")
        if ctype != EVENTS_JSON:
            return _status(415, f"the body of the request was in an unknown format - accepted media types include: {EVENTS_JSON}", "UnsupportedMediaType")
        if bad_json or not isinstance(ev, dict):
            return _status(400, "the body is not a JSON object", "BadRequest")
        with self._lock:
            if namespace not in self.namespaces:
                return _status(404, f'namespaces "{namespace}" not found', "NotFound")
            if ev.get("kind", "Event") != "Event" or ev.get("apiVersion", "v1") != "v1":
                return _status(400, f"the API version in the data ({ev.get('apiVersion')}) does not match the expected API version (v1) or kind ({ev.get('kind')}) is not Event", "BadRequest")
            errs = _decode_event_errors(ev)
            if errs:
                return _status(400, "; ".join(errs), "BadRequest")
            meta = dict(ev.get("metadata") or {})
            if meta.get("namespace") not in (None, "", namespace):
                return _status(400, "the namespace of the provided object does not match the namespace sent on the request", "BadRequest")
            if not meta.get("name"):
                base = meta.get("generateName") or ""
                if not base:
                    return _status(422, "metadata.name: Required value: name or generateName is required", "Invalid")
                meta["name"] = base[: 253 - 5] + "".join(random.choice(_NAME_ALPHABET) for _ in range(5))
            errs = validate_event(ev, namespace)
            if errs:
                return _status(422, f'Event "{meta["name"]}" is invalid: ' + "; ".join(errs), "Invalid")
            if any(e["metadata"]["name"] == meta["name"] and e["metadata"]["namespace"] == namespace for e in self.events):
                return _status(409, f'events "{meta["name"]}" already exists', "AlreadyExists")
            self._rv += 1
            meta.update(namespace=namespace, uid=str(uuid.uuid4()), resourceVersion=str(self._rv), creationTimestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            stored = {**copy.deepcopy(ev), "apiVersion": "v1", "kind": "Event", "metadata": meta}
            self.events.append(stored)
            return 201, copy.deepcopy(stored)


# ---- quarantine (issue 28) -----------------------------------------------------------------------
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _taint_patch_errors(patch: dict) -> str:
    """Why a node patch touching spec is refused ('' when it is a taint write FakeKubeAPI
    takes): only ``spec.taints``, a list of valid taints (unique key and effect, as the server
    checks), sent with ``metadata.resourceVersion`` (stricter: the taint list is replaced whole,
    so a write without that precondition can drop another writer's taint)."""
    spec = patch.get("spec")
    if not isinstance(spec, dict) or set(spec) != {"taints"}:
        return "FakeKubeAPI takes only spec.taints in spec"
    meta = patch.get("metadata")
    if not isinstance(meta, dict) or not meta.get("resourceVersion"):
        return "a write of spec.taints without metadata.resourceVersion (FakeKubeAPI: the list is replaced whole)"
    taints = spec["taints"]
    if taints is None:
        return ""
    if not isinstance(taints, list):
        return "spec.taints: must be a list"
    seen = set()
    for t in taints:
        if not isinstance(t, dict) or not isinstance(t.get("key"), str) or not _QUALIFIED_NAME.fullmatch(t["key"]):
            return f"spec.taints: invalid taint {t!r}"
        if t.get("effect") not in _EFFECTS:
            return f"spec.taints[{t['key']}].effect: Unsupported value: {t.get('effect')!r}"
        if not isinstance(t.get("value", ""), str):
            return f"spec.taints[{t['key']}].value: must be a string"
        if (t["key"], t["effect"]) in seen:
            return f"spec.taints: Duplicate value: {t['key']}:{t['effect']}"
        seen.add((t["key"], t["effect"]))
    return ""


def _selects(selector: str, labels: dict) -> bool:
    """A label selector of equality terms (``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``), ANDed."""
    for term in (t.strip() for t in selector.split(",")):
        if not term:
            raise ValueError("an empty term")
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k.strip()) != v.strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def _lease_errors(body: dict) -> list[str]:
    errs = []
    if body.get("kind", "Lease") != "Lease" or body.get("apiVersion", "coordination.k8s.io/v1") != "coordination.k8s.io/v1":
        errs.append("kind/apiVersion: expected Lease, coordination.k8s.io/v1")
    meta = body.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not _DNS1123_SUBDOMAIN.fullmatch(meta["name"]):
        errs.append("metadata.name: a DNS subdomain is required")
    spec = body.get("spec")
    if not isinstance(spec, dict):
        return errs + ["spec: must be an object"]
    holder = spec.get("holderIdentity")
    if holder is not None and not isinstance(holder, str):
        errs.append("spec.holderIdentity: must be a string")
    secs = spec.get("leaseDurationSeconds")
    if secs is not None and (not isinstance(secs, int) or isinstance(secs, bool) or secs <= 0):
        errs.append("spec.leaseDurationSeconds: must be greater than 0")
    for field in ("acquireTime", "renewTime"):
        v = spec.get(field)
        if v is not None and not (isinstance(v, str) and _RFC3339_MICRO.fullmatch(v)):
            errs.append(f'spec.{field}: parsing time {v!r} as "2006-01-02T15:04:05.000000Z07:00"')
    n = spec.get("leaseTransitions")
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 0):
        errs.append("spec.leaseTransitions: must be greater than or equal to 0")
    return errs


def _is_events_path(path: str) -> bool:
    parts = path.strip("/").split("/")
    return len(parts) == 5 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "events"


def _status(code: int, message: str, reason: str = "") -> tuple[int, dict]:
    reasons = {401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}
    return code, {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason or reasons.get(code, ""),
        "code": code,
    }


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        # A client that gave up (a killed agent, a client timeout) makes the late answer of a
        # slowed request fail with a broken pipe, possibly long after its test ended. The default
        # prints a traceback to whatever sys.stderr is then, which once landed in another test's
        # captured stderr; a fake server keeps quiet.
        pass


class _Handler(BaseHTTPRequestHandler):
    fake: FakeKubeAPI
    # HTTP/1.0: one request a connection, so down() really refuses the next request.
    protocol_version = "HTTP/1.0"

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        _current.fault = None
        code, obj = self.fake._handle(self.command, self.path, self.headers, body)
        fault, _current.fault = _current.fault, None
        if fault is not None and fault.endless:
            self._send_endless(fault)
            return
        if fault is not None and (fault.raw or fault.drip):
            self._send_bytes(self._answer(code, obj, fault), fault.drip)
            return
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if code == 429:
            self.send_header("Retry-After", "1")
        self.end_headers()
        self.wfile.write(data)

    def _answer(self, code: int, obj: dict, fault: _Fault) -> bytes:
        """The whole answer as bytes: the fault's raw one, or the normal one padded."""
        if fault.raw:
            code, data, headers = fault.raw
        else:
            data = json.dumps(obj).encode() + b" " * fault.pad
            headers = {"Content-Type": "application/json"}
        lines = [f"HTTP/1.0 {code} {self.responses.get(code, ('Unknown',))[0]}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        lines.append(f"Content-Length: {len(data)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + data

    def _send_bytes(self, data: bytes, every: float) -> None:
        if not every:
            self.wfile.write(data)
            return
        record = {"sent": 0, "total": len(data), "hung_up": False, "finished": False}
        with self.fake._lock:
            self.fake.drips.append(record)
        try:
            for i in range(len(data)):
                if self.fake._stopping.wait(every):
                    return
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
                record["sent"] = i + 1
            record["finished"] = True
        except OSError:  # BrokenPipeError, ConnectionResetError: the client gave up
            record["hung_up"] = True

    def _send_endless(self, fault: _Fault) -> None:
        record = {"sent": 0, "hung_up": False}
        with self.fake._lock:
            self.fake.endless.append(record)
        chunk = b'{"kind": "Node", "apiVersion": "v1", "metadata": {"name": "' + b"a" * 65536
        if fault.gzip:
            import zlib

            z = zlib.compressobj(9, zlib.DEFLATED, 31)  # a gzip member
            head = z.compress(chunk)
            more = z.compress(b" " * (1 << 20)) + z.flush(zlib.Z_SYNC_FLUSH)  # 1 MiB of spaces in ~1 KiB
            chunk, pieces = head + z.flush(zlib.Z_SYNC_FLUSH), more
        else:
            pieces = b"a" * 65536
        lines = ["HTTP/1.1 200 OK", "Content-Type: application/json"]
        lines.append("Transfer-Encoding: chunked" if fault.endless == "chunked" else f"Content-Length: {10**12}")
        if fault.gzip:
            lines.append("Content-Encoding: gzip")
        frame = (lambda b: b"%x\r\n%s\r\n" % (len(b), b)) if fault.endless == "chunked" else (lambda b: b)
        try:
            self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode())
            data = chunk
            while not self.fake._stopping.is_set():
                self.wfile.write(frame(data))
                record["sent"] += len(data)
                data = pieces
        except OSError:  # the client hung up
            record["hung_up"] = True
        self.close_connection = True

    do_GET = do_PATCH = do_PUT = do_POST = do_DELETE = _serve

    def log_message(self, format: str, *args) -> None:  # quiet
        pass


def realistic_status(i: int) -> dict:
    """What a real GPU Node's status holds besides its conditions (~12 KB: the kubelet lists up to
    50 images, each with its digest and tag): a page of 500 of them is about 6 MB."""
    images = [
        {"names": [f"nvcr.io/nvidia/pytorch@sha256:{(i * 50 + k):064x}", f"nvcr.io/nvidia/pytorch:24.{k % 12 + 1:02d}-py3"],
         "sizeBytes": 9_000_000_000 + k}
        for k in range(50)
    ]
    return {
        "addresses": [{"type": "InternalIP", "address": f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}"},
                      {"type": "Hostname", "address": f"gpu-{i:04d}"}],
        "capacity": {"cpu": "224", "memory": "2113389860Ki", "nvidia.com/gpu": "8", "rdma/ib": "8", "pods": "110"},
        "allocatable": {"cpu": "223", "memory": "2100000000Ki", "nvidia.com/gpu": "8", "rdma/ib": "8", "pods": "110"},
        "nodeInfo": {"kernelVersion": "5.15.0-1063-nvidia", "osImage": "Ubuntu 22.04.4 LTS", "containerRuntimeVersion": "containerd://1.7.12",
                     "kubeletVersion": "v1.29.4", "kubeProxyVersion": "v1.29.4", "operatingSystem": "linux", "architecture": "amd64",
                     "machineID": f"{i:032x}", "systemUUID": f"{i:08x}-0000-0000-0000-000000000000", "bootID": f"{i:036x}"},
        "images": images,
    }
