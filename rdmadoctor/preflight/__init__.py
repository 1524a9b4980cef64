"""``rdmadoctor preflight``: the pre-job gate of an init container or of a training command.

Three steps, each one a function with its own tests:

1. :func:`gate` runs the checks that decide whether *this pod* can train over RDMA and turns
   their findings into problems, warnings and the pod-spec YAML that fixes them.
2. :func:`find_master` / :func:`wait_for_master` (``--wait-for-master``): where rank 0 listens,
   read from the live process environment (also when the checks read a bundle), then DNS and a
   real TCP connect until it answers.
3. :func:`run_preflight` prints the verdict (short, plain text that reads well in
   ``kubectl logs``, or JSON) and, on GO, ``exec``s the training command in this same process.

No typer here: the CLI module imports this lazily, and the waiting path imports socket and
threading only when it runs.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

SCHEMA = "rdmadoctor.preflight/v1"

# What decides whether this pod can train over RDMA: devices visible, ports usable, userspace
# present, memlock and IPC_LOCK, /dev/shm, the NCCL settings, GPU-HCA affinity. Not node.labels
# (the agent's business) and not pci.link: a degraded PCIe link is a node repair, which the
# DaemonSet agent reports; it reads PCI config space of every bridge, too slow for every pod start.
PREFLIGHT_CHECKS = (
    "ib.devices",
    "ib.ports",
    "roce.config",
    "verbs.userspace",
    "limits.memlock",
    "shm.size",
    "kernel.modules",
    "gpu.topology",
    "nccl.env",
)

GO, NO_GO, UNKNOWN_VERDICT = "go", "no-go", "unknown"
VERDICT_TEXT = {GO: "GO", NO_GO: "NO-GO", UNKNOWN_VERDICT: "UNKNOWN"}
EXIT = {GO: 0, NO_GO: 1, UNKNOWN_VERDICT: 2}

# torchrun's and torch.distributed's default --master-port.
TORCH_MASTER_PORT = 29500
# Volcano's pytorch job plugin (pkg/controllers/job/plugins/distributed-framework/pytorch) opens
# and exports port 23456 unless given --port, but sets MASTER_PORT only on the pod's regular
# containers: an init container sees the svc plugin's VC_<TASK>_HOSTS and no MASTER_PORT.
VOLCANO_PYTORCH_PORT = 23456

GIB = 1024**3


def master_codes() -> tuple:
    """The codes only preflight raises (the master wait), for `rdmadoctor explain`."""
    from rdmadoctor.core.model import Code

    return (
        Code(
            "MASTER_UNRESOLVED",
            "Master address does not resolve",
            "`preflight --wait-for-master` never got a DNS answer for MASTER_ADDR (or the first host of "
            "VC_<TASK>_HOSTS) before --timeout. torch.distributed would hang in init_process_group and "
            "then fail with a rendezvous timeout, after the whole job had been scheduled.",
            "Check the name: PyTorchJob and Volcano's svc plugin create a headless Service named like the "
            "pods' subdomain; `kubectl get svc,pods -n <ns>` should show it and the master pod. "
            "Raise --timeout when the master pod starts slowly.",
        ),
        Code(
            "MASTER_UNREACHABLE",
            "Master port does not accept connections",
            "MASTER_ADDR resolves, but nothing accepted a TCP connection on MASTER_PORT before --timeout: "
            "rank 0 is not running, not listening on that port yet, or a NetworkPolicy drops the traffic.",
            "`kubectl logs` of rank 0; make MASTER_PORT the port rank 0 listens on (torchrun: 29500 unless "
            "--master-port is given; Volcano's pytorch plugin: 23456); allow pod-to-pod traffic on it; raise "
            "--timeout if rank 0 runs its own preflight or pulls a large image first.",
        ),
    )


class PreflightError(Exception):
    """A problem with the command line or the job's environment: exit 2 with a hint."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.hint = hint


# --------------------------------------------------------------------------------------------
# 1. The gate: checks -> problems, warnings, and the pod-spec YAML


class Gate:
    """The outcome of the checks: verdict, problems, warnings, what could not be established."""

    def __init__(self, report: dict[str, Any], expect: dict[str, Any], strict: bool):
        self.report = report
        self.strict = strict
        self.problems: list[dict[str, Any]] = []
        self.warnings: list[dict[str, Any]] = []
        self.unknown: list[dict[str, Any]] = []
        from rdmadoctor.output.podspec import PodFix

        self.fix = PodFix()
        for check in report.get("checks", []):
            listed = False
            for f in check.get("findings", []):
                item = dict(f, check=check["id"])
                sev = f.get("severity")
                if sev == "error" or (sev == "warning" and strict):
                    item["pod_fix"] = self.fix.add(f.get("pod"))
                    self.problems.append(item)
                elif sev == "warning":
                    # Warnings do not block, so their fixes stay out of the YAML of a GO.
                    item["pod_fix"] = None
                    self.warnings.append(item)
                elif sev == "unknown":
                    self.unknown.append(item)
                else:
                    continue
                listed = True
            if check.get("status") == "unknown" and not listed:
                # A probe that could not run at all: no finding, only the reason.
                self.unknown.append(
                    {"check": check["id"], "code": "UNKNOWN", "severity": "unknown", "subject": check["id"],
                     "message": check.get("reason") or "could not be established", "remedy": ""}
                )
        code = int(report.get("exit_code", 2))
        self.verdict = GO if code == 0 else NO_GO if code == 1 else UNKNOWN_VERDICT


def expectation_sets(sets: list[str], expect_hcas: int | None, min_rate: float | None) -> list[str]:
    """``--expect-hcas`` / ``--min-rate`` as ``--set`` items, after the user's so that they win."""
    out = list(sets)
    if expect_hcas is not None:
        out.append(f"expected_hcas={int(expect_hcas)}")
    if min_rate is not None:
        out.append(f"min_rate_gbps={min_rate:g}")
    return out


def gate(
    *,
    root: str | None = None,
    bundle: str | None = None,
    example: str | None = None,
    profile: str = "generic",
    config: str | None = None,
    pool: str | None = None,
    sets: list[str] | None = None,
    skip: list[str] | None = None,
    expect_hcas: int | None = None,
    min_rate: float | None = None,
    strict: bool = False,
) -> Gate:
    from rdmadoctor.runner import Options, UsageError, diagnose

    if expect_hcas is not None and expect_hcas < 1:
        raise PreflightError(f"--expect-hcas must be at least 1, got {expect_hcas}")
    if min_rate is not None and not min_rate > 0:
        raise PreflightError(f"--min-rate must be a positive rate in Gb/s, got {min_rate:g}")
    opts = Options(
        root=root,
        bundle=bundle,
        example=example,
        profile=profile or "generic",
        config=config,
        pool=pool,
        sets=expectation_sets(list(sets or []), expect_hcas, min_rate),
        only=list(PREFLIGHT_CHECKS),
        skip=list(skip or []),
        strict=strict,
    )
    try:
        diag = diagnose(opts)
    except UsageError as e:
        raise PreflightError(str(e), e.hint) from e
    return Gate(diag.report, diag.ctx.expect, strict)


# --------------------------------------------------------------------------------------------
# 2. The master: where rank 0 listens, and waiting until it accepts a TCP connection


class Master:
    """Where to wait: ``host:port``, where each came from, and why not to wait (rank 0)."""

    def __init__(self, host: str, port: int, host_source: str, port_source: str, self_reason: str | None = None):
        self.host = host
        self.port = port
        self.host_source = host_source
        self.port_source = port_source
        self.self_reason = self_reason

    @property
    def endpoint(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def _is_ip(text: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


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
    if master_addr:
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
    return Master(host, port, host_source, port_source, _rank0_reason(env, host, hostname, vc_task_list))


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


class Signalled(BaseException):
    """SIGTERM while waiting: leave at once (exit 128 + signum)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


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
) -> WaitResult:
    """Retry DNS and a TCP connect to ``master`` until one connect succeeds or ``timeout`` passes.

    DNS alone proves nothing: a headless service's record appears once the pod is scheduled,
    long before its training process listens (the training operator's own init container
    stops at nslookup). Backoff with jitter: a thousand workers start together.
    """
    import random
    import socket
    import time

    res = WaitResult()
    start = time.monotonic()
    deadline = start + max(timeout, 0.0)
    delay, last_log = 0.25, start
    checked_self = False
    while True:
        res.attempts += 1
        try:
            infos = _resolve(master.host, master.port, deadline - time.monotonic())
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
                left = deadline - time.monotonic()
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
        now = time.monotonic()
        if now >= deadline:
            break
        if log is not None and res.attempts == 1:
            log(f"{master.endpoint} not reachable yet ({res.last_error}); retrying with backoff")
        elif log is not None and now - last_log >= 10:
            last_log = now
            log(f"still waiting for {master.endpoint} ({now - start:.0f} s, attempt {res.attempts}): {res.last_error}")
        time.sleep(min(delay * random.uniform(0.8, 1.2), max(deadline - now, 0)))
        delay = min(delay * 2, 5.0)
    res.seconds = time.monotonic() - start
    return res


# --------------------------------------------------------------------------------------------
# 3. The verdict, and exec


def _indent(text: str, pad: str) -> str:
    return "\n".join(pad + line if line.strip() else line for line in text.splitlines())


def _tty_colour(stream: Any) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)()) and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def render_text(
    g: Gate | None,
    verdict: str,
    *,
    master: Master | None = None,
    master_note: str = "",
    colour: bool = False,
) -> str:
    word = VERDICT_TEXT[verdict]
    if colour:
        word = {GO: "\x1b[1;32m", NO_GO: "\x1b[1;31m"}.get(verdict, "\x1b[1;33m") + word + "\x1b[0m"
    out = [f"rdmadoctor preflight: {word}"]
    if g is not None:
        rep = g.report
        host = rep.get("host", {})
        s = rep.get("summary", {})
        name = host.get("hostname") or host.get("label") or "this host"
        counts = ", ".join(
            f"{s[k]} {done}" for k, done in (("pass", "passed"), ("warn", "warned"), ("fail", "failed"),
                                             ("unknown", "unknown"), ("skip", "skipped")) if s.get(k)
        )
        out.append(
            f"{name} ({host.get('kind', '?')}, profile {rep.get('profile', 'generic')}): "
            f"{s.get('checks', 0)} checks ({counts or 'none ran'}); "
            f"{len(g.problems)} problem(s), {len(g.warnings)} warning(s)"
            + (f", {len(g.unknown)} unknown" if g.unknown else "")
        )
        for i, p in enumerate(g.problems, 1):
            out.append("")
            out.append(f"problem {i}/{len(g.problems)}: {p['code']} {p['subject']} ({p['check']})")
            out.append(_indent(p.get("message", ""), "  "))
            how = p.get("pod_fix")
            remedy = p.get("remedy") or ""
            if how == "full":
                out.append("  fix: the pod-spec YAML below")
            elif how == "part":
                out.append("  fix: the pod-spec YAML below, or:")
                out.append(_indent(remedy, "    "))
            elif remedy:
                out.append("  fix:")
                out.append(_indent(remedy, "    "))
        for u in g.unknown:
            out.append("")
            out.append(f"unknown: {u['code']} {u['subject']} ({u['check']})")
            out.append(_indent(u.get("message", ""), "  "))
        if g.warnings:
            out.append("")
            out.append("warnings (do not block; --strict makes them problems):")
            for w in g.warnings:
                out.append(f"  {w['code']} {w['subject']}: {w.get('message', '')}")
        if g.fix and g.problems:
            out.append("")
            out.append(
                "Add to the pod spec (in the training container, and in the init container if "
                "rdmadoctor preflight runs in one: it judges the container it runs in):"
            )
            out.append(_indent(g.fix.yaml().rstrip("\n"), "  "))
    if master is not None:
        out.append("")
        out.append(f"master: {master.endpoint} ({master.host_source}; port from {master.port_source})")
        if master_note:
            out.append(f"  {master_note}")
    if g is not None and (g.problems or g.unknown):
        codes = sorted({p["code"] for p in g.problems + g.unknown if p["check"] != "master" and p["code"] != "UNKNOWN"})
        if codes:
            out.append("")
            out.append(f"`rdmadoctor explain {codes[0]}` (or any code above) tells more.")
    return "\n".join(out) + "\n"


def _exec(argv: list[str]) -> int:
    """Replace this process with ``argv`` (same PID: the pod's process tree does not change)."""
    import signal

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe must not keep the job from starting
            pass
    # Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec:
    # give the job the defaults it would have had without us (subprocess' restore_signals).
    for name in ("SIGPIPE", "SIGXFSZ"):
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvp(argv[0], argv)
    except FileNotFoundError:
        sys.stderr.write(
            f"rdmadoctor preflight: cannot run {argv[0]!r}: command not found "
            f"(PATH={os.environ.get('PATH', '')})\n"
        )
        return 127
    except PermissionError as e:
        sys.stderr.write(f"rdmadoctor preflight: cannot run {argv[0]!r}: {e.strerror or e}\n")
        return 126
    except OSError as e:
        sys.stderr.write(f"rdmadoctor preflight: cannot run {argv[0]!r}: {e.strerror or e}\n")
        return 126
    return 126  # not reached: execvp returns only by raising


def _shell_join(argv: list[str]) -> str:
    import shlex

    return " ".join(shlex.quote(a) for a in argv)


def run_preflight(
    *,
    root: str | None = None,
    bundle: str | None = None,
    example: str | None = None,
    profile: str = "generic",
    config: str | None = None,
    pool: str | None = None,
    sets: list[str] | None = None,
    skip: list[str] | None = None,
    expect_hcas: int | None = None,
    min_rate: float | None = None,
    strict: bool = False,
    wait: bool = False,
    master_addr: str | None = None,
    master_port: int | None = None,
    timeout: float = 300.0,
    as_json: bool = False,
    exec_argv: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> int:
    """The whole command; returns the exit code (or does not return: exec)."""
    import json
    import signal

    from rdmadoctor.cli.errors import fail_usage

    if timeout is None or timeout < 0:
        return fail_usage(f"--timeout must be zero or more seconds, got {timeout}")
    if exec_argv is not None and not exec_argv:
        return fail_usage("--exec needs a command after --", "rdmadoctor preflight --exec -- torchrun --nproc_per_node=8 train.py")
    env = dict(os.environ if env is None else env)
    out, err = sys.stdout, sys.stderr

    # As a container's PID 1 (an init container's command), the kernel ignores SIGTERM unless a
    # handler is installed: the kubelet would wait the whole grace period for us.
    def on_term(signum: int, frame: Any) -> None:
        raise Signalled(signum)

    old_term = None
    try:
        old_term = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread (an embedding caller): keep its handling
        pass
    try:
        try:
            master = find_master(env, master_addr, master_port) if wait else None
            g = gate(
                root=root, bundle=bundle, example=example, profile=profile, config=config, pool=pool,
                sets=sets, skip=skip, expect_hcas=expect_hcas, min_rate=min_rate, strict=strict,
            )
        except PreflightError as e:
            return fail_usage(str(e), e.hint)
        verdict = g.verdict
        result: WaitResult | None = None
        rank0 = master.self_reason if master is not None else None
        note = ""
        if master is not None:
            if verdict != GO:
                note = "not waited for: the checks did not pass"
            elif master.self_reason:
                note = f"this pod is rank 0 ({master.self_reason}): not waiting for itself"
            else:
                err.write(
                    f"rdmadoctor preflight: checks passed; waiting up to {timeout:g} s for the master "
                    f"{master.endpoint} to accept a TCP connection\n"
                )
                err.flush()

                def log(msg: str) -> None:
                    err.write(f"rdmadoctor preflight: {msg}\n")
                    err.flush()

                result = wait_for_master(master, timeout, log=log)
                ips = ", ".join(result.resolved) or "nothing"
                if result.is_self:
                    rank0 = f"the master resolves to this pod's own address ({ips})"
                    note = f"this pod is rank 0 (the master resolves to its own address {ips}): not waiting for itself"
                elif result.ok:
                    note = f"accepted a TCP connection after {result.seconds:.1f} s (resolved to {ips})"
                else:
                    verdict = NO_GO
                    unresolved = not result.resolved
                    g.problems.append(
                        {
                            "check": "master",
                            "code": "MASTER_UNRESOLVED" if unresolved else "MASTER_UNREACHABLE",
                            "severity": "error",
                            "subject": master.endpoint,
                            "message": (
                                f"no TCP connection to {master.endpoint} within {timeout:g} s "
                                f"({result.attempts} attempt(s)); resolved to: {ips}; last error: "
                                f"{result.last_error or 'none'}. Expected rank 0 to accept connections on "
                                "MASTER_PORT."
                            ),
                            "remedy": (
                                "DNS never answered: check the name (a headless Service named like the "
                                "pod's subdomain must exist; PyTorchJob and Volcano's svc plugin create one), "
                                "or that the master pod exists at all (kubectl get pods)."
                                if unresolved
                                else "Is the master pod running, and its training process started and listening "
                                "on this port (kubectl logs of rank 0)? A NetworkPolicy may drop the traffic; "
                                "MASTER_PORT must be the port rank 0 listens on. Raise --timeout if rank 0 "
                                "starts slowly (image pull, its own preflight)."
                            ),
                            "pod_fix": None,
                        }
                    )
                    note = "never accepted a connection"
        code = EXIT[verdict]
        if as_json:
            doc = {
                "schema": SCHEMA,
                "verdict": verdict,
                "exit_code": code,
                "checks": [c["id"] for c in g.report.get("checks", [])],
                "problems": g.problems,
                "warnings": g.warnings,
                "unknown": g.unknown,
                "pod_spec": g.fix.to_json() if g.fix and g.problems else None,
                "pod_spec_yaml": g.fix.yaml() if g.fix and g.problems else None,
                "master": None
                if master is None
                else {
                    "host": master.host,
                    "port": master.port,
                    "host_source": master.host_source,
                    "port_source": master.port_source,
                    "rank0": rank0,
                    "note": note,
                    "wait": result.to_json() if result else None,
                },
                "exec": list(exec_argv) if exec_argv else None,
                "report": g.report,
            }
            out.write(json.dumps(doc, indent=2) + "\n")
        else:
            out.write(render_text(g, verdict, master=master, master_note=note, colour=_tty_colour(out)))
        if exec_argv:
            if code != 0:
                err.write(f"rdmadoctor preflight: not running {_shell_join(exec_argv)}\n")
                return code
            if not as_json:
                out.write(f"exec: {_shell_join(exec_argv)}\n")
            if old_term is not None:
                signal.signal(signal.SIGTERM, old_term)
                old_term = None
            return _exec(list(exec_argv))
        return code
    except Signalled as e:
        err.write(f"rdmadoctor preflight: stopped by signal {e.signum} (SIGTERM)\n")
        return 128 + e.signum
    except KeyboardInterrupt:
        err.write("rdmadoctor preflight: interrupted\n")
        return 130
    finally:
        if old_term is not None:
            try:
                signal.signal(signal.SIGTERM, old_term)
            except ValueError:
                pass


# --------------------------------------------------------------------------------------------
# A typer-free parser, for the console entry point (see rdmadoctor.cli.main): typer and the
# pydantic it pulls in cost ~70 ms, in every init container of every job.

# option -> (keyword of run_preflight, kind): "str"/"int"/"float" take a value, "list" may repeat,
# "flag" takes none.
FAST_OPTIONS: dict[str, tuple[str, str]] = {
    "--root": ("root", "str"),
    "--bundle": ("bundle", "str"),
    "--example": ("example", "str"),
    "--profile": ("profile", "str"),
    "--config": ("config", "str"),
    "--pool": ("pool", "str"),
    "--set": ("sets", "list"),
    "--skip": ("skip", "list"),
    "--expect-hcas": ("expect_hcas", "int"),
    "--min-rate": ("min_rate", "float"),
    "--strict": ("strict", "flag"),
    "--wait-for-master": ("wait", "flag"),
    "--master-addr": ("master_addr", "str"),
    "--master-port": ("master_port", "int"),
    "--timeout": ("timeout", "float"),
    "--json": ("as_json", "flag"),
    "--exec": ("exec_", "flag"),
}


def parse_argv(args: list[str]) -> dict[str, Any] | None:
    """Keyword arguments for :func:`run_preflight`, or None to let typer handle (and explain) the line."""
    from rdmadoctor.cli.fast import parse

    out = parse(
        args,
        FAST_OPTIONS,
        {
            "root": None, "bundle": None, "example": None, "profile": "generic", "config": None, "pool": None,
            "sets": [], "skip": [], "expect_hcas": None, "min_rate": None, "strict": False, "wait": False,
            "master_addr": None, "master_port": None, "timeout": 300.0, "as_json": False, "exec_": False,
        },
        rest=True,
    )
    if out is None:
        return None
    command = out.pop("--", None)
    exec_ = out.pop("exec_")
    if command and not exec_:
        return None  # typer says what is wrong with a stray command
    out["exec_argv"] = command if exec_ else None
    if exec_ and command is None:
        out["exec_argv"] = []  # run_preflight explains: --exec needs a command after --
    return out
