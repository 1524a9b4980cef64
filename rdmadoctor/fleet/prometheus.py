"""`fleet --prometheus`: one instant query of the info metrics, authenticated and bounded.

Authentication: managed and proxied Prometheus servers want a bearer token, basic
auth, their own CA or a client certificate. ``--http-config FILE`` takes them in the format of
promtool's ``--http.config.file`` (Prometheus' own HTTP client configuration)::

    authorization:            # or the older bearer_token / bearer_token_file
      type: Bearer            # the default
      credentials_file: /var/run/secrets/prometheus/token   # or credentials: TOKEN
    basic_auth:
      username: reader
      password_file: /etc/prometheus/password               # or password: PASSWORD
    tls_config:
      ca_file: /etc/prometheus/ca.crt
      cert_file: /etc/prometheus/client.crt
      key_file: /etc/prometheus/client.key
      insecure_skip_verify: false

and ``--bearer-token-file FILE`` alone says the commonest. A key the format has that this client
does not do (oauth2, proxy_url, http_headers, server_name, ...) is refused by name, never
ignored: a request sent without the credentials it was configured with would be a surprise. The
credentials are sent only to the --prometheus address: never on a redirect.

Bounds: the whole request (connect, TLS, headers, every byte of the body) has one
deadline; the answer is read a chunk at a time up to MAX_ANSWER_BYTES; a server that drips its
answer, or streams series for ever, is cut off and named.
"""

from __future__ import annotations

import json
import os
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The most an answer may hold: 2,000 nodes with 10 HCAs are 13 MB of series, 66 MB once parsed (5x).
MAX_ANSWER_BYTES = 64 << 20
# A credentials or config file is a few hundred bytes.
MAX_CONFIG_BYTES = 1 << 20
_KNOWN = {
    "authorization": {"type", "credentials", "credentials_file"},
    "basic_auth": {"username", "username_file", "password", "password_file"},
    "tls_config": {"ca_file", "cert_file", "key_file", "insecure_skip_verify", "min_version"},
    "bearer_token": None,
    "bearer_token_file": None,
    "follow_redirects": None,
    "enable_http2": None,
}


class PrometheusError(Exception):
    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message = message
        self.hint = hint


def _read_small(path: str, what: str) -> str:
    import stat

    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise PrometheusError(f"{what} {path}: not a regular file")
        with open(path, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise PrometheusError(f"{what} {path}: {e.strerror or e}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise PrometheusError(f"{what} {path}: more than {MAX_CONFIG_BYTES >> 20} MiB, not a {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PrometheusError(f"{what} {path}: not UTF-8 text") from None


def _scalar(text: str, where: str) -> Any:
    t = text.strip()
    if t[:1] in ("'", '"'):
        q = t[0]
        end = t.find(q, 1)
        while q == '"' and end > 0 and t[end - 1] == "\\":
            end = t.find(q, end + 1)
        if end < 0 or t[end + 1:].strip():
            raise PrometheusError(f"{where}: an unterminated quoted value")
        inner = t[1:end]
        return inner.replace('\\"', '"').replace("\\\\", "\\") if q == '"' else inner.replace("''", "'")
    if t in ("true", "True", "TRUE"):
        return True
    if t in ("false", "False", "FALSE"):
        return False
    if t in ("", "~", "null", "Null", "NULL"):
        return None
    return t


def _strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def parse_http_config(text: str, where: str) -> dict:
    """The block mappings of scalars the HTTP client configuration is made of (YAML's subset that
    promtool's examples use), or a JSON object."""
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError) as e:
            raise PrometheusError(f"{where}: not JSON ({e})") from None
        if not isinstance(doc, dict):
            raise PrometheusError(f"{where}: not an object")
        return doc
    root: dict = {}
    stack: list[tuple[int, dict]] = [(-1, root)]
    pending: tuple[int, dict, str] | None = None  # a "key:" with no value: its mapping follows, indented
    for n, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw).rstrip()
        if not line.strip() or line.strip() in ("---", "..."):
            continue
        if "\t" in line[: len(line) - len(line.lstrip())]:
            raise PrometheusError(f"{where}:{n}: a tab in the indentation (YAML takes spaces)")
        indent = len(line) - len(line.lstrip())
        body = line.strip()
        if body.startswith("- ") or body == "-":
            raise PrometheusError(f"{where}:{n}: a list: no key this client reads takes one")
        key, colon, value = body.partition(":")
        if not colon or not key.strip() or (value and not value.startswith((" ", "\t"))):
            raise PrometheusError(f"{where}:{n}: expected `key: value`, got {body[:60]!r}")
        key = key.strip()
        if pending is not None:
            p_indent, p_parent, p_key = pending
            pending = None
            if indent > p_indent:
                child: dict = {}
                p_parent[p_key] = child
                stack.append((p_indent, child))
            else:
                p_parent[p_key] = None
        while stack and indent <= stack[-1][0]:
            stack.pop()
        if not stack:
            raise PrometheusError(f"{where}:{n}: indentation does not match any mapping above")
        parent = stack[-1][1]
        if key in parent:
            raise PrometheusError(f"{where}:{n}: {key} given twice")
        if value.strip():
            if value.strip()[:1] in "[{|>&*!":
                raise PrometheusError(f"{where}:{n}: {key}: flow, block and tagged values are not read here; give a plain value")
            parent[key] = _scalar(value, f"{where}:{n}")
        else:
            pending = (indent, parent, key)
    if pending is not None:
        pending[1][pending[2]] = None
    return root


class Auth:
    """What a request to Prometheus carries: an Authorization header and an SSL context."""

    def __init__(self, header: str | None = None, context: Any = None, what: str = ""):
        self.header = header
        self.context = context
        self.what = what  # "a bearer token", "basic auth" ... for messages; never the secret


def _str(v: Any, where: str) -> str:
    if not isinstance(v, str) or not v:
        raise PrometheusError(f"{where} must be a string, got {type(v).__name__}")
    return v


def auth_from(http_config: str | None = None, bearer_token_file: str | None = None) -> Auth:
    """The Auth of --http-config FILE and/or --bearer-token-file FILE."""
    import base64

    cfg: dict = {}
    where = ""
    if http_config is not None:
        where = f"--http-config {http_config}"
        cfg = parse_http_config(_read_small(http_config, "HTTP config"), where)
        for key, value in cfg.items():
            if key not in _KNOWN:
                raise PrometheusError(f"{where}: {key} is not supported by rdmadoctor fleet",
                                      "supported: authorization, basic_auth, bearer_token(_file), tls_config (ca_file, cert_file, key_file, insecure_skip_verify)")
            sub = _KNOWN[key]
            if sub is not None:
                if not isinstance(value, dict):
                    raise PrometheusError(f"{where}: {key} must be a mapping")
                for k in value:
                    if k not in sub:
                        raise PrometheusError(f"{where}: {key}.{k} is not supported by rdmadoctor fleet",
                                              f"{key} takes {', '.join(sorted(sub))}")
    header = None
    what = []
    base = os.path.dirname(os.path.abspath(http_config)) if http_config else ""

    def path(p: Any, name: str) -> str:
        p = _str(p, f"{where}: {name}")
        return p if os.path.isabs(p) else os.path.join(base, p)  # relative to the config, as Prometheus reads it

    token = None
    authz = cfg.get("authorization")
    if isinstance(authz, dict):
        kind = authz.get("type", "Bearer") or "Bearer"
        kind = _str(kind, f"{where}: authorization.type")
        if "credentials" in authz and "credentials_file" in authz:
            raise PrometheusError(f"{where}: authorization has both credentials and credentials_file: give one")
        if "credentials_file" in authz:
            cred = _read_small(path(authz["credentials_file"], "authorization.credentials_file"), "credentials file").strip()
        else:
            cred = _str(authz.get("credentials"), f"{where}: authorization.credentials")
        header = f"{kind} {cred}"
        what.append(f"{kind} credentials")
    if cfg.get("bearer_token") is not None or cfg.get("bearer_token_file") is not None:
        token = (_read_small(path(cfg["bearer_token_file"], "bearer_token_file"), "bearer token file").strip()
                 if cfg.get("bearer_token_file") is not None else _str(cfg["bearer_token"], f"{where}: bearer_token"))
    if bearer_token_file is not None:
        token = _read_small(bearer_token_file, "bearer token file").strip()
        if not token:
            raise PrometheusError(f"--bearer-token-file {bearer_token_file}: the file is empty")
    if token is not None:
        if header is not None:
            raise PrometheusError("a bearer token and authorization are both given: give one")
        header = f"Bearer {token}"
        what.append("a bearer token")
    basic = cfg.get("basic_auth")
    if isinstance(basic, dict):
        if header is not None:
            raise PrometheusError(f"{where}: basic_auth and a token are both given: give one")
        user = (_read_small(path(basic["username_file"], "basic_auth.username_file"), "username file").strip()
                if "username_file" in basic else _str(basic.get("username"), f"{where}: basic_auth.username"))
        if "password_file" in basic:
            password = _read_small(path(basic["password_file"], "basic_auth.password_file"), "password file").strip()
        else:
            password = basic.get("password") or ""
            if not isinstance(password, str):
                raise PrometheusError(f"{where}: basic_auth.password must be a string")
        header = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        what.append("basic auth")
    if header is not None and any(c in header for c in "\r\n\x00"):
        raise PrometheusError(f"{where or '--bearer-token-file'}: the credentials hold a line break; a token is one line")
    context = None
    tls = cfg.get("tls_config")
    if isinstance(tls, dict) and tls:
        import ssl

        try:
            ca = path(tls["ca_file"], "tls_config.ca_file") if tls.get("ca_file") is not None else None
            context = ssl.create_default_context(cafile=ca)
            if tls.get("cert_file") is not None or tls.get("key_file") is not None:
                if tls.get("cert_file") is None or tls.get("key_file") is None:
                    raise PrometheusError(f"{where}: tls_config needs both cert_file and key_file for a client certificate")
                context.load_cert_chain(path(tls["cert_file"], "tls_config.cert_file"), path(tls["key_file"], "tls_config.key_file"))
                what.append("a client certificate")
            if tls.get("insecure_skip_verify") is True:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
                what.append("no server verification")
            elif ca:
                what.append("its CA")
        except (OSError, ssl.SSLError) as e:
            raise PrometheusError(f"{where}: tls_config: {getattr(e, 'strerror', None) or e}") from None
    return Auth(header, context, ", ".join(what))


def query(url: str, promql: str, auth: Auth | None, timeout: float, max_bytes: int | None = None) -> Any:
    """The ``data.result`` of one instant query, the whole request within ``timeout`` seconds and
    its answer within ``max_bytes``; PrometheusError naming what went wrong."""
    import urllib.parse

    full = url.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    cap = MAX_ANSWER_BYTES if max_bytes is None else max_bytes
    box: dict = {}
    done = threading.Event()
    stop = threading.Event()

    def work() -> None:
        try:
            box["body"] = _fetch(full, auth, timeout, cap, stop)
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = e
        finally:
            done.set()

    # The request runs in a thread of its own, so DNS, the TLS handshake and a server that drips
    # its headers are inside the deadline too (a socket timeout is per read).
    threading.Thread(target=work, name="rdmadoctor-prometheus", daemon=True).start()
    if not done.wait(timeout):
        stop.set()
        raise PrometheusError(f"Prometheus at {url}: no complete answer within {timeout:g} s (abandoned)",
                              "the server or a proxy in between is slow or stuck; try again")
    if "error" in box:
        e = box["error"]
        if isinstance(e, PrometheusError):
            raise e
        raise PrometheusError(f"Prometheus at {url}: {_why(e)}", "is the URL the server's (http://HOST:9090)?") from None
    body = box["body"]
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError) as e:
        raise PrometheusError(f"Prometheus at {url}: the answer is not JSON ({type(e).__name__})",
                              "is the URL the server's (http://HOST:9090), not a proxy's login page?") from None
    if not isinstance(doc, dict) or doc.get("status") != "success":
        from rdmadoctor.core.words import printable

        err = doc.get("error") if isinstance(doc, dict) else None
        raise PrometheusError(f"Prometheus at {url} answered {printable(err if isinstance(err, str) else body[:200], 200)}")
    data = doc.get("data")
    if not isinstance(data, dict):
        raise PrometheusError(f"Prometheus at {url}: the answer's data is not an object")
    return data.get("result") if data.get("result") is not None else []


def _why(e: BaseException) -> str:
    reason = getattr(e, "reason", None)
    return str(reason or getattr(e, "strerror", None) or e or type(e).__name__)


def _fetch(full: str, auth: Auth | None, timeout: float, max_bytes: int, stop: threading.Event) -> bytes:
    import urllib.error
    import urllib.request

    class Refuse(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, req, fp, code, msg, headers, newurl):
            raise PrometheusError(f"Prometheus at {full.split('/api/')[0]} answered HTTP {code}, a redirect to "
                                  f"{str(newurl)[:120]}; rdmadoctor does not follow redirects (they could carry the credentials elsewhere)",
                                  "give --prometheus the address the redirect names")

    handlers: list = [Refuse()]
    if auth is not None and auth.context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=auth.context))
    opener = urllib.request.build_opener(*handlers)
    req = urllib.request.Request(full, headers={"Accept": "application/json", "Accept-Encoding": "identity"})
    if auth is not None and auth.header is not None:
        req.add_unredirected_header("Authorization", auth.header)
    try:
        r = opener.open(req, timeout=timeout)
    except urllib.error.HTTPError as e:
        code = e.code
        e.close()
        if code in (401, 403):
            how = f" with {auth.what}" if auth is not None and auth.what else " without credentials"
            raise PrometheusError(f"Prometheus at {full.split('/api/')[0]} refused the query (HTTP {code}){how}",
                                  "give its credentials: --bearer-token-file FILE, or --http-config FILE (promtool's "
                                  "--http.config.file format: authorization, basic_auth, tls_config)") from None
        raise PrometheusError(f"Prometheus at {full.split('/api/')[0]} answered HTTP {code}") from None
    with r:
        length = r.headers.get("Content-Length", "")
        if length.strip().isdigit() and int(length) > max_bytes:
            raise PrometheusError(f"Prometheus' answer says it holds {int(length):,} bytes, more than {max_bytes >> 20} MiB; refused")
        if r.headers.get("Content-Encoding", "identity").strip().lower() not in ("", "identity"):
            raise PrometheusError("Prometheus' answer is compressed though none was asked for; refused")
        chunks = []
        seen = 0
        while not stop.is_set():
            chunk = r.read1(1 << 16) if hasattr(r, "read1") else r.read(1 << 16)
            if not chunk:
                break
            seen += len(chunk)
            if seen > max_bytes:
                raise PrometheusError(f"Prometheus' answer passed {max_bytes >> 20} MiB and is still coming; refused")
            chunks.append(chunk)
        return b"".join(chunks)
