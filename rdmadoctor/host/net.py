"""The network interfaces of the host's network namespace: name, running, MTU, addresses, and the
speed sysfs reports. A fact that is not (only) in files: sysfs has no addresses, and a process
sees the interfaces of its own network namespace, which a pod's NCCL uses. Checks ask
:meth:`Host.interfaces`, which reads them once per run through :func:`read_interfaces`.

psutil reads them (names from /proc/net/dev, flags and MTU by ioctl, addresses from getifaddrs);
pyroute2's netlink only where psutil cannot answer. Both are imported on first use only: `check`
runs in init containers, and pyroute2 alone takes several times longer to import than psutil
takes to import and read (bench/interfaces.py).
"""

from __future__ import annotations

from rdmadoctor.core.record import record

NET_CLASS = "/sys/class/net"
IFF_UP = 0x1
IFF_RUNNING = 0x40  # what NCCL's findInterfaces tests: admin up and operationally up


def sysfs_int(text: str | None, base: int = 0) -> int | None:
    """A sysfs integer (``int(text, base)``, base 0: ``0x`` hex too), else None."""
    if text is None:
        return None
    try:
        return int(text.strip(), base)
    except ValueError:
        return None


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
    except Exception as e:
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
        flags = sysfs_int(host.read_value(f"{NET_CLASS}/{name}/flags"), 16)
        if oper is None:
            up = None
        else:
            # IFF_RUNNING is netif_oper_up(): operstate up, or unknown for drivers that do not track it (lo, dummy).
            up = oper in ("up", "unknown") and (flags is None or bool(flags & IFF_UP))
        out.append(NetIf(name, up, sysfs_int(host.read_value(f"{NET_CLASS}/{name}/mtu"), 10), None))
    return tuple(out)


def speed_mbps(host, name: str) -> int | None:
    """/sys/class/net/<name>/speed in Mb/s, as NCCL reads it (net_socket.cc: strtol; <= 0, i.e.
    SPEED_UNKNOWN -1, means unknown); None when absent or not a number."""
    v = sysfs_int(host.read_value(f"{NET_CLASS}/{name}/speed"), 10)
    return v if v is not None and v > 0 else None


def _with_speeds(host, interfaces: tuple[NetIf, ...] | None) -> tuple[NetIf, ...] | None:
    if interfaces is None:
        return None
    from rdmadoctor.core.record import replace

    return tuple(
        replace(i, speed_mbps=speed_mbps(host, i.name), speed_not_reported=_speed_not_reported(host, i.name)) for i in interfaces
    )


def _speed_not_reported(host, name: str) -> bool:
    """/sys/class/net/<if>/speed reads -1 or 0 (SPEED_UNKNOWN: the driver has no speed to give)."""
    v = sysfs_int(host.read_value(f"{NET_CLASS}/{name}/speed"), 10)
    return v is not None and v <= 0


def _recorded_interfaces(host) -> tuple[NetIf, ...] | None:
    """The netlink view `collect` kept in runtime.json (names, state, MTU, addresses)."""
    raw = getattr(host.runtime, "interfaces", None)
    if not isinstance(raw, list):
        return None
    got = [NetIf.from_json(d) for d in raw]
    return tuple(i for i in got if i is not None)


def read_interfaces(host) -> tuple[tuple[NetIf, ...] | None, str]:
    """What :meth:`Host.interfaces` answers: the network interfaces, with their speeds, and where
    they came from. Per kind of host:

    - live (``/``): this process's network namespace, from psutil, else netlink; when neither
      answers, /sys/class/net (no addresses: a socket verdict that needs them is then unknown);
    - a mounted root (``--root /host``): the same reading of this process's namespace while it is
      the root's (the same interface names as the root's /sys/class/net: hostNetwork, or the
      collector inside the job's pod); when the names differ (an agent without hostNetwork sees
      its own pod's namespace), the root's /sys/class/net, and the source says so;
    - a bundle: what ``collect`` recorded in runtime.json (``interfaces``), else its
      /sys/class/net; None when it has neither.

    What a live host or a root read from the kernel is kept in the Host's runtime facts, so
    `collect` records it in runtime.json and a bundle reads the same view back. Speeds always
    come from sysfs, where NCCL reads them (and where a bundle keeps them)."""
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
        # An agent without hostNetwork sees its pod's namespace; the mounted root's /sys is the host's.
        return _with_speeds(host, tree), f"sysfs of {host.label} (this process's network namespace differs from the host's)"
    host.runtime.interfaces = [i.to_json() for i in live]  # what `collect` writes to runtime.json
    return _with_speeds(host, live), reader
