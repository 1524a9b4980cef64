"""``ibv_devinfo`` / ``ibv_devinfo -v`` (rdma-core) output -> RdmaDevice facts.

Plain ``ibv_devinfo`` prints neither ``phys_state`` nor the link width and speed: only the
``-v`` form gives a rate. ``hca_type`` is the decimal ``vendor_part_id`` (4129 = ConnectX-7),
where ``ibstat`` would say ``MT4129``.
"""

from __future__ import annotations

import re

from rdmadoctor.core.facts import Gid, Parsed, Port, RdmaDevice
from rdmadoctor.parsers.common import (
    add_warning,
    clean_lines,
    ipv4_of_gid,
    key_value,
    link_layer,
    parse_int,
    phys_state,
    port_state,
)

SOURCE = "ibv_devinfo"

_HCA = r"^hca_id:\s*(\S+)\s*$"
_PORT = r"^port:\s*(\d{1,9})\s*$"
_GID = r"^GID\[\s*(\d{1,9})\]:\s*([0-9A-Fa-f:.]+)\s*(?:,\s*(.*?)\s*)?$"
_LIST_HEAD = r"^\d{1,9}\s+HCAs?\s+found:?$"  # "ibv_devinfo -l": "4 HCAs found:"
_LIST_NAME = r"^[A-Za-z][\w.-]*$"
_DRIVER_WARNING = r"^libibverbs: Warning: couldn't load driver '([^']*)'(?::\s*(.*))?$"
_WIDTH = r"^\s*(\d{1,2})X\b"
_SPEED = r"^\s*(\d{1,4}(?:\.\d{1,6})?)\s*Gbps"
_SPEED_CODE = r"\((\d{1,4})\)\s*$"

# Nominal per-lane Gb/s, the numbers ibstat and sysfs "rate" multiply by the width: NDR is
# printed as 100.0 Gbps by ibv_devinfo but its signalling rate is 106.25 (PAM4), FDR 14.0625,
# EDR 25.78125; 4X NDR is sold and reported as 400.
_NOMINAL_LANE_GBPS = (2.5, 5.0, 10.0, 14.0, 25.0, 50.0, 100.0, 200.0)
# ibv_port_attr.active_speed codes, for output that prints only "invalid speed (N)"-like text.
_SPEED_BY_CODE = {1: 2.5, 2: 5.0, 4: 10.0, 8: 10.0, 16: 14.0, 32: 25.0, 64: 50.0, 128: 100.0,
                  256: 200.0}
_GID_TYPES = {"roce v2": "RoCE v2", "roce v1": "IB/RoCE v1", "ib/roce v1": "IB/RoCE v1"}

_DEVICE_KEYS = {"fw_ver", "node_guid", "vendor_part_id", "board_id", "phys_port_cnt"}
_PORT_KEYS = {"state", "phys_state", "max_mtu", "active_mtu", "sm_lid", "port_lid", "link_layer",
              "active_width", "active_speed"}


def _lane_gbps(speed: str) -> float | None:
    m = re.match(_SPEED, speed)
    if m is not None:
        printed = float(m.group(1))
        for nominal in _NOMINAL_LANE_GBPS:
            # 10.3125 (FDR10), 14.0625, 25.78125, 53.125, 106.25, 212.5 -> nominal lane rates
            if nominal <= printed <= nominal * 1.07:
                return nominal
        return printed if printed > 0 else None
    m = re.search(_SPEED_CODE, speed)
    if m is not None:
        return _SPEED_BY_CODE.get(int(m.group(1)))
    return None


def _rate(width: str | None, speed: str | None) -> float | None:
    if not width or not speed:
        return None
    m = re.match(_WIDTH, width)
    lane = _lane_gbps(speed)
    if m is None or lane is None:
        return None
    rate = int(m.group(1)) * lane
    return float(round(rate, 3))


def _mtu(value: str) -> int | None:
    return parse_int(value.split("(")[0])


def parse_ibv_devinfo(text: str) -> Parsed[list[RdmaDevice]]:
    warnings: list[str] = []
    devices: list[dict] = []
    device: dict | None = None
    port: dict | None = None
    listed: list[str] = []
    in_list = no_devices = False

    for line in clean_lines(text):
        s = line.strip()
        if not s:
            in_list = False
            continue
        if s.startswith("libibverbs:"):
            m = re.match(_DRIVER_WARNING, s)
            if m is not None:
                reason = f": {m.group(2)}" if m.group(2) else ""
                add_warning(warnings, f"libibverbs could not load provider {m.group(1)}{reason} "
                            "(its devices are invisible to verbs)")
            else:
                add_warning(warnings, s)
            continue
        if s == "No IB devices found":
            no_devices = True
            continue
        if s.startswith("Failed to get IB devices list") or s.endswith("wasn't found"):
            add_warning(warnings, f"ibv_devinfo: {s}")
            no_devices = True
            continue
        if re.match(_LIST_HEAD, s):
            in_list = True
            continue
        if in_list and re.match(_LIST_NAME, s):
            listed.append(s)
            continue
        in_list = False

        m = re.match(_HCA, s)
        if m is not None:
            device = {"name": m.group(1), "ports": {}}
            devices.append(device)
            port = None
            continue
        if device is None:
            continue
        m = re.match(_PORT, s)
        if m is not None:
            number = int(m.group(1))
            port = device["ports"][number] = {"port": number, "gids": []}
            continue
        m = re.match(_GID, s)
        if m is not None:
            if port is not None:
                gid_type = m.group(3)
                port["gids"].append(Gid(
                    index=int(m.group(1)),
                    gid=m.group(2),
                    type=_GID_TYPES.get(gid_type.lower(), gid_type) if gid_type else None,
                    ipv4=ipv4_of_gid(m.group(2)),
                ))
            continue
        kv = key_value(s)
        if kv is None:
            continue
        key, value = kv
        if port is not None and key in _PORT_KEYS:
            port[key] = value
        elif key in _DEVICE_KEYS:
            device[key] = value

    result = []
    for dev in devices:
        name = dev["name"]
        ports = []
        for number in sorted(dev["ports"]):
            p = dev["ports"][number]
            state = port_state(p["state"]) if "state" in p else None
            phys = phys_state(p["phys_state"]) if "phys_state" in p else None
            for field, raw, known in (("state", p.get("state"), state),
                                      ("phys_state", p.get("phys_state"), phys)):
                if raw and known is None:
                    add_warning(warnings, f"{name} port {number}: unrecognised {field} {raw!r}")
            ports.append(Port(
                port=number,
                state=state,
                phys_state=phys,
                rate_gbps=_rate(p.get("active_width"), p.get("active_speed")),
                link_layer=link_layer(p.get("link_layer")),
                lid=parse_int(p.get("port_lid")),
                sm_lid=parse_int(p.get("sm_lid")),
                active_mtu=_mtu(p["active_mtu"]) if "active_mtu" in p else None,
                max_mtu=_mtu(p["max_mtu"]) if "max_mtu" in p else None,
                gids=tuple(p["gids"]),
            ))
        count = parse_int(dev.get("phys_port_cnt"))
        if count is not None and count <= 64:
            missing = [str(n) for n in range(1, count + 1) if n not in dev["ports"]]
            if missing:
                add_warning(warnings, f"{name}: phys_port_cnt is {count} but port "
                            f"{', '.join(missing)} is not in the output")
        result.append(RdmaDevice(
            name=name,
            fw_ver=dev.get("fw_ver") or None,
            board_id=dev.get("board_id") or None,
            node_guid=(dev.get("node_guid") or "").lower() or None,
            hca_type=dev.get("vendor_part_id") or None,
            ports=tuple(ports),
            source=SOURCE,
        ))

    if port is not None and "link_layer" not in port:
        add_warning(warnings, f"{devices[-1]['name']} port {port['port']}: the output ends before "
                    "its link_layer line (cut off?)")
    described = {dev["name"] for dev in devices}
    if devices:
        not_shown = [name for name in listed if name not in described]
        if not_shown:
            add_warning(warnings, f"'ibv_devinfo -l' lists {', '.join(not_shown)} but the output "
                        "has no details for them")
    elif listed:
        add_warning(warnings, "only device names are listed ('ibv_devinfo -l'): no port details")
        result = [RdmaDevice(name=name, source=SOURCE) for name in listed]
    elif not no_devices:
        warnings.append("no ibv_devinfo 'hca_id:' block found in the input")
        return Parsed(result, tuple(warnings), ok=False)
    return Parsed(result, tuple(warnings), ok=True)
