"""``rdma link`` (iproute2) output -> RdmaDevice facts, one port per line.

Forms (iproute2 rdma/link.c; the key-value pairs after the name are the netlink attributes the
port has)::

    link mlx5_0/1 subnet_prefix fe80:0000:0000:0000 lid 3 sm_lid 1 lmc 0 state ACTIVE physical_state LINK_UP
    link mlx5_4/1 state ACTIVE physical_state LINK_UP netdev enp97s0f0
    1/1: mlx5_0/1: subnet_prefix fe80:... lid 3 sm_lid 1 lmc 0 state ACTIVE physical_state LINK_UP   (iproute2 4.x)

It prints no rate and no link layer. An InfiniBand port has a LID and a subnet manager's LID
(only IB ports have them: the kernel fills them for IB link layers alone); a port with neither
and a netdev is Ethernet (RoCE or iWARP). Anything else is left unknown.
"""

from __future__ import annotations

import re

from rdmadoctor.core.facts import Parsed, Port, RdmaDevice
from rdmadoctor.parsers.common import add_warning, clean_lines, parse_int, phys_state, port_state

SOURCE = "rdma_link"

_LINE = re.compile(r"^\s*(?:\d{1,9}/\d{1,9}:\s+)?(?:link\s+)?([A-Za-z][\w.-]{0,63})/(\d{1,3}):?\s+(.*?)\s*$")
_PAIR = re.compile(r"(\w{1,32})\s+(\S{1,128})")
_KEYS = {"subnet_prefix", "lid", "sm_lid", "lmc", "state", "physical_state", "netdev", "netdev_index", "sm_sl"}
MAX_PORTS = 4096


def parse_rdma_link(text: str) -> Parsed[list[RdmaDevice]]:
    """Devices in the order their first port appears; ``ok`` is False when no line is a port."""
    warnings: list[str] = []
    order: list[str] = []
    ports: dict[str, list[Port]] = {}
    for line in clean_lines(text):
        m = _LINE.match(line)
        if m is None:
            if line.strip():
                add_warning(warnings, "a line that is not a port of `rdma link` was skipped")
            continue
        name, number, rest = m.group(1), int(m.group(2)), m.group(3)
        attrs = {k: v for k, v in _PAIR.findall(rest) if k in _KEYS}
        if "state" not in attrs:
            add_warning(warnings, f"{name}/{number}: no state")
            continue
        state = port_state(attrs["state"])
        if state is None:
            add_warning(warnings, f"{name}/{number}: unknown state {attrs['state']!r}")
        ib = "lid" in attrs or "sm_lid" in attrs or "subnet_prefix" in attrs
        layer = "InfiniBand" if ib else "Ethernet" if "netdev" in attrs else None
        port = Port(
            port=number,
            state=state,
            phys_state=phys_state(attrs.get("physical_state")),
            link_layer=layer,
            lid=parse_int(attrs.get("lid")),
            sm_lid=parse_int(attrs.get("sm_lid")),
            netdev=attrs.get("netdev"),
            subnet_prefix=attrs.get("subnet_prefix"),
        )
        if name not in ports:
            if len(order) >= MAX_PORTS:
                add_warning(warnings, f"more than {MAX_PORTS} devices: the rest were not read")
                break
            order.append(name)
            ports[name] = []
        if all(p.port != number for p in ports[name]):
            ports[name].append(port)
    devices = [RdmaDevice(name=n, ports=tuple(ports[n]), source=SOURCE) for n in order]
    return Parsed(devices, tuple(warnings), ok=bool(devices))
