"""Where rank 0 listens, and waiting until it accepts a TCP connection (``--wait-for-master``).

The address is read from the live process environment (also when the checks read a bundle):
the job's rank 0 is a fact of this pod's life, not of the node. DNS alone proves nothing, so
the wait ends on a real TCP connect. socket and threading are imported only when it runs.
"""

from __future__ import annotations

from rdmadoctor.preflight.errors import PreflightError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

# torchrun's and torch.distributed's default --master-port.
TORCH_MASTER_PORT = 29500
# Volcano's pytorch job plugin (pkg/controllers/job/plugins/distributed-framework/pytorch) opens
# and exports port 23456 unless given --port, but sets MASTER_PORT only on the pod's regular
# containers: an init container sees the svc plugin's VC_<TASK>_HOSTS and no MASTER_PORT.
VOLCANO_PYTORCH_PORT = 23456

def master_codes() -> tuple:
    """The codes only preflight raises (the master wait), for `rdmadoctor explain`."""
    from rdmadoctor.core.codes.preflight import MASTER_UNREACHABLE, MASTER_UNRESOLVED

    return (MASTER_UNRESOLVED, MASTER_UNREACHABLE)


class Master:
    """Where to wait: ``host:port``, where each came from, and why not to wait (rank 0)."""

    def __init__(self, host: str | None, port: int, host_source: str, port_source: str, self_reason: str | None = None):
        self.host = host
        self.port = port
        self.host_source = host_source
        self.port_source = port_source
        self.self_reason = self_reason

    @property
    def endpoint(self) -> str:
        if not self.host:  # rank 0 with no address given: it is the master
            return f"this pod, port {self.port}"
        from rdmadoctor.output.text import safe

        host = safe(self.host)  # a name typed with an escape sequence is shown, never obeyed
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"


def _is_ip(text: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def host_name_error(host: str) -> str | None:
    """Why no resolver can look ``host`` up (None: an IP address, or a name that may resolve).

    The rules getaddrinfo's idna encoding enforces before any DNS query (RFC 1035: labels of
    1 to 63 characters, 253 in all without the final dot); Python raises UnicodeError for them,
    and waiting cannot make such a name valid.
    """
    if _is_ip(host):
        return None
    name = host[:-1] if host.endswith(".") else host
    if not name:
        return "it is empty"
    if len(name) > 253:
        return f"it is {len(name)} characters long; a DNS name has at most 253"
    for label in name.split("."):
        if not label:
            return "it has an empty label (two dots in a row, or a dot at the start)"
        if len(label) > 63:
            return f"its label '{label[:16]}...' is {len(label)} characters long; a DNS label has at most 63"
    return None


def _volcano_hosts(env: dict[str, str]) -> dict[str, str]:
    """VC_<TASK>_HOSTS of Volcano's svc plugin: task name upper-cased, '-' as '_', hosts joined by ','."""
    return {k: v for k, v in env.items() if k.startswith("VC_") and k.endswith("_HOSTS") and len(k) > 9 and v.strip()}


def find_master(
    env: dict[str, str],
    master_addr: str | None = None,
    master_port: int | None = None,
    hostname: str | None = None,
) -> Master:
    """Rank 0's address and port, from flags, then MASTER_ADDR/PORT, then Volcano's hosts lists.

    ``env`` is the live process environment: the job's rank-0 address is a fact of this pod's
    life, not of the node, so a ``--bundle`` never supplies it.
    """
    vc_task_list = None
    if master_addr is not None:
        host, host_source = master_addr, "--master-addr"
    elif env.get("MASTER_ADDR", "").strip():
        host, host_source = env["MASTER_ADDR"], "MASTER_ADDR"
    elif env.get("PET_MASTER_ADDR", "").strip():  # torchrun reads its options from PET_* too
        host, host_source = env["PET_MASTER_ADDR"], "PET_MASTER_ADDR"
    else:
        lists = _volcano_hosts(env)
        # The pytorch plugin's master task is "master"; a job of one task (torchrun with
        # --node-rank $VC_TASK_INDEX) has its rank 0 first in its only list.
        key = "VC_MASTER_HOSTS" if "VC_MASTER_HOSTS" in lists else (next(iter(lists)) if len(lists) == 1 else None)
        if key is None:
            # Rank 0 is the master: it needs no address to wait for nobody (the help says rank 0
            # does not wait), so a missing MASTER_ADDR is no error there.
            rank0 = _rank0_reason(env, "", "", None)
            if rank0 is not None:
                port, port_source = _port(env, master_port, None)
                return Master(None, port, f"no master address needed: this pod is rank 0 ({rank0})", port_source, rank0)
            if lists:
                raise PreflightError(
                    f"--wait-for-master: no MASTER_ADDR, and Volcano hosts lists of several tasks "
                    f"({', '.join(sorted(lists))}) without VC_MASTER_HOSTS: which one holds rank 0 is not known",
                    "give --master-addr HOST (in the pod spec: --master-addr=$(VC_<TASK>_HOSTS) takes its first host)",
                )
            raise PreflightError(
                "--wait-for-master: no MASTER_ADDR in the environment and no Volcano VC_<TASK>_HOSTS: "
                "the address of rank 0 is not known",
                "set MASTER_ADDR (PyTorchJob and Volcano's pytorch plugin set it in the main container, not in "
                "init containers: add it to the init container's env), or give --master-addr HOST",
            )
        host, host_source, vc_task_list = lists[key], f"first host of {key}", key
    # A list (VC_*_HOSTS, or --master-addr=$(VC_MASTER_HOSTS) in the pod spec): rank 0 is first.
    host = host.split(",")[0].strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host:
        raise PreflightError(f"--wait-for-master: {host_source} is empty")
    _refuse_port_in_host(host, host_source, master_port)
    port, port_source = _port(env, master_port, vc_task_list)
    return Master(host, port, host_source, port_source, _rank0_reason(env, host, hostname, vc_task_list))


def _refuse_port_in_host(host: str, source: str, master_port: int | None) -> None:
    """``127.0.0.1:80``, ``name:80`` or ``[fd00::5]:80`` is a host with a port: refused, not
    taken for an IPv6 address (``[127.0.0.1:80]:29500``). torch.distributed takes the two apart
    too (MASTER_ADDR and MASTER_PORT), so the same value would fail the job. A URL
    (``tcp://10.0.0.1:29500``, what torch's init_method takes) is refused the same way."""
    scheme, sep, rest = host.partition("://")
    if sep:
        name = rest.split("/", 1)[0]
        name, _, port_text = name.rpartition(":") if name.count(":") == 1 or name.startswith("[") else (name, "", "")
        name = name.strip("[]") or "HOST"
        port = port_text if port_text.isdigit() else "PORT"
        raise PreflightError(
            f"--wait-for-master: {source} {host!r} is a URL ({scheme}://); it takes the host alone",
            f"give the host and the port apart: --master-addr {name} --master-port {port}"
            + ("" if source == "--master-addr" else f" (or set {source}={name} and MASTER_PORT={port})"),
        )
    if host.startswith("["):
        inner, sep, rest = host[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise PreflightError(
                f"--wait-for-master: {source} {host!r} is not a host: an IPv6 address in brackets is [ADDRESS]",
                "e.g. --master-addr fd00::5 (or [fd00::5]) --master-port 29500",
            )
        name, port_text = inner, rest[1:]
    elif host.count(":") == 1:
        name, _, port_text = host.partition(":")
    else:
        return  # a name, an IPv4 address, or an IPv6 address (two colons or more)
    name = name or "HOST"
    port = port_text if port_text.isdigit() else "PORT"
    if source == "--master-addr":
        hint = f"give the host and the port apart: --master-addr {name} --master-port {port}"
    else:
        hint = f"set {source}={name} and MASTER_PORT={port}, or give --master-addr {name} --master-port {port}"
    raise PreflightError(f"--wait-for-master: {source} {host!r} holds a port ({port_text!r}); it takes the host alone", hint)


def _port(env: dict[str, str], master_port: int | None, vc_task_list: str | None) -> tuple[int, str]:
    """Rank 0's port and where it came from: --master-port, MASTER_PORT, PET_MASTER_PORT, else
    the default of the launcher (Volcano's pytorch plugin, torchrun)."""
    if master_port is not None:
        port, port_source = master_port, "--master-port"
    else:
        raw, port_source = None, ""
        for name in ("MASTER_PORT", "PET_MASTER_PORT"):
            if env.get(name, "").strip():
                raw, port_source = env[name].strip(), name
                break
        if raw is None:
            if vc_task_list:
                port, port_source = VOLCANO_PYTORCH_PORT, "Volcano pytorch plugin's default port (no MASTER_PORT)"
            else:
                port, port_source = TORCH_MASTER_PORT, "torchrun's default port (no MASTER_PORT)"
        else:
            try:
                port = int(raw)
            except ValueError:
                port = -1
            if not 1 <= port <= 65535:
                raise PreflightError(f"--wait-for-master: {port_source}={raw!r} is not a port number (1-65535)")
    if not 1 <= port <= 65535:
        raise PreflightError(f"--master-port {port} is not a port number (1-65535)")
    return port, port_source


def _rank0_reason(env: dict[str, str], host: str, hostname: str | None, vc_task_list: str | None) -> str | None:
    """Why this pod is rank 0 (it would wait for itself), or None.

    PyTorchJob and Volcano's pytorch plugin set RANK (the pod's rank, 0 on the master) in the
    main containers only; in an init container the hostname tells: both name the master after
    its pod (PyTorchJob's MASTER_ADDR ``<job>-master-0``, Volcano's ``<job>-master-0.<job>``,
    and both set the pod's hostname to the pod's name).
    """
    for name in ("RANK", "NODE_RANK", "PET_NODE_RANK", "GROUP_RANK"):
        if env.get(name, "").strip() == "0":
            return f"{name}=0"
    if env.get("WORLD_SIZE", "").strip() == "1":
        return "WORLD_SIZE=1"
    if hostname is None:
        import socket

        hostname = socket.gethostname()
    if hostname and not _is_ip(host):
        mine = hostname.split(".")[0].lower()
        if host.rstrip(".").split(".")[0].lower() == mine:
            return f"the master {host} is this pod (hostname {hostname})"
    if vc_task_list and env.get("VC_TASK_INDEX", "").strip() == "0" and len(_volcano_hosts(env)) == 1:
        return f"VC_TASK_INDEX=0 in the job's only task ({vc_task_list})"
    return None


def own_addresses() -> set[str]:
    """This pod's non-loopback IP addresses (rank 0 when the master resolves to one of them)."""
    try:
        import psutil

        addrs = psutil.net_if_addrs()
    except Exception:  # noqa: BLE001 - only an optimisation: without it the pod just waits
        return set()
    import ipaddress
    import socket

    out = set()
    for entries in addrs.values():
        for a in entries:
            if a.family not in (socket.AF_INET, socket.AF_INET6):
                continue
            ip = a.address.split("%")[0]
            try:
                if ipaddress.ip_address(ip).is_loopback:
                    continue
            except ValueError:
                continue
            out.add(ip)
    return out


class WaitResult:
    def __init__(self) -> None:
        self.ok = False
        self.is_self = False  # the master turned out to be this pod
        self.attempts = 0
        self.seconds = 0.0
        self.resolved: list[str] = []
        self.last_error = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "attempts": self.attempts,
            "seconds": round(self.seconds, 3),
            "resolved": list(self.resolved),
            "last_error": self.last_error or None,
        }


def _resolve(host: str, port: int, limit: float) -> list[tuple]:
    """getaddrinfo in a helper thread: a lookup that hangs in the resolver (retries, ndots:5
    search lists) cannot be interrupted, but the main thread's wait can, by SIGTERM or Ctrl-C."""
    import socket
    import threading

    box: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            box["infos"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except Exception as e:  # noqa: BLE001 - reported as the attempt's error
            box["error"] = e
        finally:
            done.set()

    threading.Thread(target=work, name="rdmadoctor-dns", daemon=True).start()
    if not done.wait(max(limit, 0.01)):
        raise TimeoutError(f"DNS lookup of {host} still unanswered after {limit:.1f} s")
    if "error" in box:
        raise box["error"]
    return box["infos"]


def _describe_error(e: BaseException) -> str:
    import socket

    if isinstance(e, socket.gaierror):
        return f"DNS: {e.strerror or e}"
    if isinstance(e, (socket.timeout, TimeoutError)):
        return str(e) or "timed out"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return f"{type(e).__name__}: {e}"


def wait_for_master(
    master: Master,
    timeout: float,
    *,
    log: Callable[[str], None] | None = None,
    own: Callable[[], set[str]] = own_addresses,
    connect_timeout: float = 3.0,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], None] | None = None,
) -> WaitResult:
    """Retry DNS and a TCP connect to ``master`` until one connect succeeds or ``timeout`` passes.

    DNS alone proves nothing: a headless service's record appears once the pod is scheduled,
    long before its training process listens (the training operator's own init container
    stops at nslookup). Backoff with jitter: a thousand workers start together.

    ``clock``/``sleep`` (default: time.monotonic/time.sleep) let a test see the backoff without
    waiting it out.
    """
    import random
    import socket
    import time

    clock = clock or time.monotonic
    sleep = sleep or time.sleep
    res = WaitResult()
    start = clock()
    deadline = start + max(timeout, 0.0)
    delay, last_log = 0.25, start
    checked_self = False
    host = master.host
    if host is None:  # rank 0's Master: its callers never wait for themselves (self_reason)
        raise ValueError("wait_for_master: this pod is rank 0, there is no master to wait for")
    bad = host_name_error(host)
    if bad:
        res.attempts = 1
        res.last_error = f"{master.host_source} {master.host!r} is not a valid host name: {bad}"
        return res
    while True:
        res.attempts += 1
        try:
            infos = _resolve(host, master.port, deadline - clock())
            addrs: list[tuple] = []
            for family, kind, proto, _, sockaddr in infos:
                if (family, sockaddr) not in [(f, s) for f, _, _, s in addrs]:
                    addrs.append((family, kind, proto, sockaddr))
            res.resolved = [s[0] for _, _, _, s in addrs]
            if not checked_self:
                checked_self = True
                if set(res.resolved) & own():
                    res.is_self = True
                    res.ok = True
                    break
            errors = []
            for family, kind, proto, sockaddr in addrs:
                left = deadline - clock()
                s = socket.socket(family, kind, proto)
                try:
                    s.settimeout(min(connect_timeout, max(left, 0.05)))
                    s.connect(sockaddr)
                    res.ok = True
                    break
                except OSError as e:
                    errors.append(f"connect {sockaddr[0]} port {master.port}: {_describe_error(e)}")
                finally:
                    s.close()
            if res.ok:
                break
            res.last_error = "; ".join(errors) or "no address to connect to"
        except (OSError, TimeoutError) as e:
            res.last_error = _describe_error(e)
        except ValueError as e:
            # The name itself is refused before any query (the idna codec's UnicodeError, a NUL
            # in it): no retry can change that.
            res.last_error = f"{master.host_source} {master.host!r} is not a valid host name: {e}"
            break
        now = clock()
        if now >= deadline:
            break
        if log is not None and res.attempts == 1:
            log(f"{master.endpoint} not reachable yet ({res.last_error}); retrying with backoff")
        elif log is not None and now - last_log >= 10:
            last_log = now
            log(f"still waiting for {master.endpoint} ({now - start:.0f} s, attempt {res.attempts}): {res.last_error}")
        sleep(min(delay * random.uniform(0.8, 1.2), max(deadline - now, 0)))
        delay = min(delay * 2, 5.0)
    res.seconds = clock() - start
    return res
