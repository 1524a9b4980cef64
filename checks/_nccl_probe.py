"""nccl.env's probe: the job's NCCL settings as NCCL will see them (its environment, then
NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf), the node's RDMA ports, and, when a verdict
needs them, the network interfaces of the job's namespace. Facts only; checks/_nccl_judge.py judges.
"""

from __future__ import annotations

import re

from rdmadoctor.checks._rdma import IWARP, NET_CLASS, RdmaInventory, netdev_speed_mbps, parse_int, probe_inventory, transport_of
from rdmadoctor.core.facts import Gid
from rdmadoctor.core.model import Need
from rdmadoctor.core.record import field, record

IFF_UP = 0x1
IFF_RUNNING = 0x40  # what NCCL's findInterfaces tests: admin up and operationally up


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
class NetIf:
    name: str
    up: bool | None  # running: admin up and operationally up (IFF_RUNNING)
    mtu: int | None = None
    addresses: tuple[str, ...] | None = None  # None: unknown (sysfs does not show addresses)
    speed_mbps: int | None = None  # /sys/class/net/<if>/speed; None: unreadable or -1 (no speed reported)
    # The file says -1 (or 0): the driver reports no speed (virtio-net, a cloud ENI), which is not
    # the same as a speed that could not be read.
    speed_not_reported: bool = False

    @property
    def usable(self) -> bool | None:
        """Would NCCL take it: running with an address (None: the addresses are unknown)."""
        if not self.up:
            return False if self.up is False else None
        return None if self.addresses is None else bool(self.addresses)

    def shown(self) -> str:
        speed = f"{self.speed_mbps / 1000:g} Gb/s" if self.speed_mbps else "speed unknown"
        addr = f", {', '.join(self.addresses)}" if self.addresses else ""
        mtu = f", MTU {self.mtu}" if self.mtu is not None else ""
        return f"{self.name} ({speed}{mtu}{addr})"

    def to_json(self) -> dict:
        return {"name": self.name, "up": self.up, "mtu": self.mtu, "addresses": list(self.addresses) if self.addresses is not None else None}

    @classmethod
    def from_json(cls, d: object) -> "NetIf | None":
        """One interface as `collect` records it in runtime.json; None when it is not one."""
        if not isinstance(d, dict) or not isinstance(d.get("name"), str) or not d["name"]:
            return None
        up, mtu, addrs = d.get("up"), d.get("mtu"), d.get("addresses")
        return cls(
            d["name"],
            up if isinstance(up, bool) else None,
            mtu if isinstance(mtu, int) and not isinstance(mtu, bool) and mtu > 0 else None,
            tuple(a for a in addrs if isinstance(a, str)) if isinstance(addrs, list) else None,
        )


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


def _psutil_interfaces() -> tuple[NetIf, ...]:
    """This process's network namespace through psutil (a dependency already): the names from
    /proc/net/dev, flags and MTU by ioctl, the addresses from getifaddrs. pyroute2 takes several
    times longer only to import (bench/interfaces.py: a cold `check --profile tcp` 3.3x faster)."""
    import socket

    import psutil

    stats = psutil.net_if_stats()
    by_name: dict[str, list[str]] = {}
    for name, addrs in psutil.net_if_addrs().items():
        if name not in stats and ":" in name and name.split(":")[0] in stats:
            name = name.split(":")[0]  # getifaddrs names an IPv4 address by its label: eth0:1 is eth0's
        got = by_name.setdefault(name, [])
        # IPv4 first, as a netlink dump lists them; a link-local IPv6 address without its %scope.
        for family in (socket.AF_INET, socket.AF_INET6):
            for a in addrs:
                addr = a.address.split("%")[0] if a.family == family and a.address else ""
                if addr and addr != "::1":  # NCCL skips the IPv6 loopback
                    got.append(addr)
    out = []
    for name, st in stats.items():
        flags = set(st.flags.split(",")) if getattr(st, "flags", None) else None  # psutil >= 5.9.3
        up = ("up" in flags and "running" in flags) if flags is not None else bool(st.isup)
        out.append((_ifindex(name), NetIf(name, up, st.mtu or None, tuple(by_name.get(name, ())))))
    # In ifindex order, as netlink lists the links and NCCL's findInterfaces walks getifaddrs.
    return tuple(i for _, i in sorted(out, key=lambda t: t[0]))


def _ifindex(name: str) -> int:
    import socket

    try:
        return socket.if_nametoindex(name)
    except OSError:  # gone since /proc/net/dev was read
        return 1 << 30


def _live_interfaces() -> tuple[tuple[NetIf, ...], str]:
    """psutil where it answers, netlink (pyroute2) where it does not (no /proc/net/dev in this
    sandbox, psutil failing): the interfaces and which of the two read them."""
    try:
        got = _psutil_interfaces()
        if got:
            return got, "psutil"
        why = "psutil found no interface"
    except Exception as e:  # noqa: BLE001 - psutil's readers raise OSError, or worse on odd kernels
        why = f"psutil failed ({type(e).__name__}: {e})"
    try:
        return _netlink_interfaces(), "netlink"
    except Exception as e:  # noqa: BLE001
        raise OSError(f"{why}; netlink: {type(e).__name__}: {e}") from e


def _netlink_interfaces() -> tuple[NetIf, ...]:
    from pyroute2 import IPRoute  # ~80 ms: only where psutil cannot read the interfaces

    with IPRoute() as ipr:
        links = list(ipr.get_links())
        addrs = list(ipr.get_addr())
    by_index: dict[int, list[str]] = {}
    for a in addrs:
        addr = a.get_attr("IFA_ADDRESS") or a.get_attr("IFA_LOCAL")
        if addr and addr != "::1":  # NCCL skips the IPv6 loopback
            by_index.setdefault(a["index"], []).append(addr)
    out = []
    for link in links:
        name = link.get_attr("IFLA_IFNAME")
        if not name:
            continue
        flags = link["flags"]
        out.append(
            NetIf(
                name,
                bool(flags & IFF_UP and flags & IFF_RUNNING),
                link.get_attr("IFLA_MTU"),
                tuple(by_index.get(link["index"], ())),
            )
        )
    return tuple(out)


def _sysfs_interfaces(host) -> tuple[NetIf, ...] | None:
    names = host.listdir(NET_CLASS)
    if not names:
        return None
    out = []
    for name in names:
        oper = host.read_value(f"{NET_CLASS}/{name}/operstate")
        flags = parse_int(host.read_value(f"{NET_CLASS}/{name}/flags"), 16)
        if oper is None:
            up = None
        else:
            # IFF_RUNNING is netif_oper_up(): operstate up, or unknown for drivers that do not track it (lo, dummy).
            up = oper in ("up", "unknown") and (flags is None or bool(flags & IFF_UP))
        out.append(NetIf(name, up, parse_int(host.read_value(f"{NET_CLASS}/{name}/mtu"), 10), None))
    return tuple(out)


def _speed(host, name: str) -> int | None:
    return netdev_speed_mbps(host, name)


def _with_speeds(host, interfaces: tuple[NetIf, ...] | None) -> tuple[NetIf, ...] | None:
    if interfaces is None:
        return None
    from rdmadoctor.core.record import replace

    return tuple(
        replace(i, speed_mbps=_speed(host, i.name), speed_not_reported=_speed_not_reported(host, i.name)) for i in interfaces
    )


def _speed_not_reported(host, name: str) -> bool:
    """/sys/class/net/<if>/speed reads -1 or 0 (SPEED_UNKNOWN: the driver has no speed to give)."""
    v = parse_int(host.read_value(f"{NET_CLASS}/{name}/speed"), 10)
    return v is not None and v <= 0


def _recorded_interfaces(host) -> tuple[NetIf, ...] | None:
    """The netlink view `collect` kept in runtime.json (names, state, MTU, addresses)."""
    raw = getattr(host.runtime, "interfaces", None)
    if not isinstance(raw, list):
        return None
    got = [NetIf.from_json(d) for d in raw]
    return tuple(i for i in got if i is not None)


def _interfaces(host) -> tuple[tuple[NetIf, ...] | None, str]:
    """The network interfaces of the job's namespace, with their speeds, and where they came from.

    A live host asks the kernel for this process's namespace (psutil, else netlink: addresses are
    not in sysfs) and keeps what it read in the Host's runtime facts, so `collect` records it in
    runtime.json; a bundle reads that record back. Speeds always come from sysfs, where NCCL reads
    them (and where a bundle keeps them)."""
    tree = _sysfs_interfaces(host)
    if not host.live_process:
        recorded = _recorded_interfaces(host)
        if recorded is not None:
            return _with_speeds(host, recorded), "recorded by collect"
        return _with_speeds(host, tree), ("sysfs" if tree is not None else f"no {NET_CLASS} in {host.label}")
    try:
        live, reader = _live_interfaces()
    except OSError as e:  # neither psutil nor netlink answered: fall back to the tree
        why = f"interfaces unreadable ({e})"
        return _with_speeds(host, tree), (f"sysfs; {why}" if tree is not None else why)
    if host.kind == "root" and tree is not None and {i.name for i in tree} != {i.name for i in live}:
        # An agent without hostNetwork sees its pod's namespace over netlink; the mounted root's /sys is the host's.
        return _with_speeds(host, tree), f"sysfs of {host.label} (this process's network namespace differs from the host's)"
    try:
        host.runtime.interfaces = [i.to_json() for i in live]  # what `collect` writes to runtime.json
    except AttributeError:
        pass  # a Runtime without the field (an older host module): the bundle then has sysfs only
    return _with_speeds(host, live), reader


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
        interfaces, if_source = _interfaces(host)
    return NcclFacts(settings, origin, source, ports, interfaces, if_source, tuple(problems))
