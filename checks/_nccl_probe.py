"""nccl.env's probe: the job's NCCL settings as NCCL will see them (its environment, then
NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf), the node's RDMA ports, and, when a verdict
needs them, the network interfaces of the job's namespace (the Host's: ``host.interfaces()``).
Facts only; checks/_nccl_judge.py judges.
"""

from __future__ import annotations

import re

from rdmadoctor.checks._rdma import IWARP, RdmaInventory, probe_inventory, transport_of
from rdmadoctor.core.facts import Gid
from rdmadoctor.core.model import Need
from rdmadoctor.core.record import field, record
from rdmadoctor.host.net import NetIf  # the Host's record of an interface (Host.interfaces)


@record
class HcaPort:
    device: str
    port: int
    state: str | None
    link_layer: str | None
    gids: tuple[Gid, ...] = ()
    gids_known: bool = False
    iwarp: bool = False  # an iWARP RNIC's port: NET/IB takes it for RoCE and cannot connect it

    @property
    def subject(self) -> str:
        return f"{self.device}/{self.port}"

    @property
    def active(self) -> bool:
        return self.state == "ACTIVE"  # NCCL skips every port that is not IBV_PORT_ACTIVE


@record
class NcclFacts:
    settings: dict[str, str]  # NCCL_* and MASTER_* as the job sees them
    origin: dict[str, str] = field(default_factory=dict)  # name -> "env" | "/etc/nccl.conf" | ...
    env_source: str = ""
    ports: tuple[HcaPort, ...] | None = None  # None: the RDMA devices are unknown
    interfaces: tuple[NetIf, ...] | None = None  # None: not read, or unknown
    interfaces_source: str = ""
    conf_problems: tuple[str, ...] = ()  # lines of nccl.conf that NCCL reads differently than meant


_RELEVANT = ("NCCL_", "MASTER_ADDR", "MASTER_PORT")


def _relevant(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(_RELEVANT)}


def _job_env(host) -> tuple[dict[str, str] | None, str]:
    env = host.runtime.env
    if env is not None:
        return dict(env), ("process environment" if host.live_process else "runtime.json")
    res = host.cmd("env")
    if res.text is not None:
        from rdmadoctor.parsers.system import parse_env

        parsed = parse_env(res.text)
        if parsed.ok:
            return dict(parsed.value), res.source or "cmd/env.txt"
    return None, "no runtime.json env and no cmd/env.txt"


def _env_known(ctx) -> str | None:
    env, why = _job_env(ctx.host)
    if env is None:
        return f"the job's environment is not known ({why}); record it with `rdmadoctor collect` inside the pod"
    return None


HAS_ENV = Need("job environment", _env_known)


def _conf_file(host, path: str) -> tuple[dict[str, str], list[str]]:
    """NCCL's setEnvFile: KEY=VALUE lines, '#' comments, nothing trimmed. (settings, problems)"""
    text = host.read_text(path, 1 << 20)
    out: dict[str, str] = {}
    problems: list[str] = []
    if not text:
        return out, problems
    for line in text.split("\n"):
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        if key.strip().startswith(_RELEVANT) and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            problems.append(f"{path}: {line.strip()!r} sets a variable named {key!r}, which NCCL never reads (no spaces around '=')")
            continue
        out.setdefault(key[:1023], value[:1023])
    return out, problems


def probe_nccl(ctx) -> NcclFacts:
    host = ctx.host
    env, source = _job_env(host)
    env = env or {}
    settings = _relevant(env)
    origin = {k: "env" for k in settings}
    # NCCL fills unset variables from NCCL_CONF_FILE (or ~/.nccl.conf), then /etc/nccl.conf.
    if env.get("NCCL_CONF_FILE"):
        confs = [env["NCCL_CONF_FILE"]]
    elif env.get("HOME", "").startswith("/"):
        confs = [env["HOME"].rstrip("/") + "/.nccl.conf"]  # the job user's; `collect` keeps HOME
    else:
        confs = []
    problems: list[str] = []
    for path in confs + ["/etc/nccl.conf"]:
        conf, bad = _conf_file(host, path)
        problems.extend(bad)
        for k, v in _relevant(conf).items():
            if k not in settings:
                settings[k], origin[k] = v, path

    inv: RdmaInventory = ctx.get(probe_inventory)
    ports = None
    if inv.source != "none":
        ports = tuple(
            HcaPort(
                d.name,
                p.port,
                p.state,
                p.link_layer,
                p.gids,
                inv.source == "sysfs" or bool(p.gids),
                transport_of(d, p) == IWARP,
            )
            for d in inv.devices
            for p in d.ports
        )
    interfaces, if_source = None, ""
    ifname = settings.get("NCCL_SOCKET_IFNAME")
    # Read the interfaces only when a verdict needs them (a named socket
    # interface, or a pool that trains over sockets, where NCCL's own choice is judged).
    if (ifname is not None and len(ifname) > 1) or ctx.expect.get("rdma_required") is False:
        interfaces, if_source = host.interfaces()
    return NcclFacts(settings, origin, source, ports, interfaces, if_source, tuple(problems))
