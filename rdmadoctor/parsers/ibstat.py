"""``ibstat`` and ``ibstatus`` output -> RdmaDevice facts (``source="ibstat"``).

``ibstat`` (infiniband-diags, C)::

    CA 'mlx5_0'
            CA type: MT4129
            Number of ports: 1
            Firmware version: 28.39.1002
            ...
            Port 1:
                    State: Active
                    Physical state: LinkUp
                    Rate: 400
                    ...
                    Link layer: InfiniBand

``ibstatus`` (a shell script that cats sysfs)::

    Infiniband device 'mlx5_0' port 1 status:
            default gid:     fe80:0000:0000:0000:a088:c203:0063:5a20
            base lid:        0x1
            sm lid:          0x1
            state:           4: ACTIVE
            phys state:      5: LinkUp
            rate:            400 Gb/sec (4X NDR)
            link_layer:      InfiniBand
"""

from __future__ import annotations

import re

from rdmadoctor.core.facts import Gid, Parsed, Port, RdmaDevice
from rdmadoctor.parsers.common import (
    add_warning,
    clean_lines,
    guid,
    ipv4_of_gid,
    key_value,
    leading_number,
    link_layer,
    parse_int,
    phys_state,
    port_state,
)

SOURCE = "ibstat"

# "CA 'mlx5_0'": node type, then name ("-s" adds a colon); an RNIC is "iWARP RNIC 'cxgb4_0'".
_CA = r"^([A-Za-z]\w*(?: \w+)?):? '([^']*)'$"
_IBSTATUS = r"^Infiniband device '([^']*)' port (\d{1,9}) status:$"
_PORT = r"^Port (\d{1,9}):$"

_DEVICE_KEYS = {"number of ports", "firmware version", "node guid", "hardware version",
                "system image guid"}
_PORT_KEYS = {
    "state": "state",
    "physical state": "phys_state",
    "phys state": "phys_state",
    "rate": "rate_gbps",
    "base lid": "lid",
    "sm lid": "sm_lid",
    "link layer": "link_layer",
    "link_layer": "link_layer",
    "default gid": "gid",
    "lmc": None,
    "capability mask": None,
    "port guid": None,
}


def _new_device(name: str, node_type: str | None) -> dict:
    return {"name": name, "node_type": node_type, "hca_type": None, "fw_ver": None,
            "node_guid": None, "nports": None, "ports": {}}


def _port_value(field: str, raw: str, where: str, warnings: list[str]) -> object:
    if raw.lower() == "unknown":  # ibstatus echoes "unknown" for an unreadable sysfs file
        return None
    value: object
    if field == "state":
        value = port_state(raw)
    elif field == "phys_state":
        value = phys_state(raw)
    elif field == "rate_gbps":
        value = leading_number(raw)
    elif field in ("lid", "sm_lid"):
        value = parse_int(raw)
    elif field == "link_layer":
        return link_layer(raw)
    else:  # gid
        return raw or None
    if value is None and raw:
        add_warning(warnings, f"{where}: unrecognised {field} {raw!r}")
    return value


def parse_ibstat(text: str) -> Parsed[list[RdmaDevice]]:
    warnings: list[str] = []
    devices: dict[str, dict] = {}
    device: dict | None = None
    port: dict | None = None
    where = ""
    no_devices = aborted = False

    for line in clean_lines(text):
        s = line.strip()
        if not s:
            continue
        low = s.lower()
        if low.startswith(("ibwarn:", "libibverbs:", "libibumad:")):
            continue
        if low.startswith("ibpanic:"):
            # ibstat can print half its listing and then abort (gpud PR #752).
            last = f" after {where}" if where else ""
            add_warning(warnings, f"ibstat aborted{last}: output is cut off ({s})")
            aborted = True
            break
        if low.startswith("fatal error:"):  # ibstatus
            if "no devices" in low:
                no_devices = True
            else:
                add_warning(warnings, f"ibstatus failed: {s}")
            continue

        m = re.match(_IBSTATUS, s)
        if m is not None:
            name, number = m.group(1), int(m.group(2))
            device = devices.setdefault(name, _new_device(name, None))
            if number in device["ports"]:
                add_warning(warnings, f"{name} port {number} appears twice; the last one is kept")
            port = device["ports"][number] = {"port": number}
            where = f"{name} port {number}"
            continue
        m = re.match(_CA, s)
        if m is not None:
            node_type, name = m.group(1), m.group(2)
            if name in devices:
                add_warning(warnings, f"{name} appears twice; the last listing is kept")
            device = devices[name] = _new_device(name, node_type)
            devices[name] = devices.pop(name)  # keep the order of the kept listing
            port = None
            where = name
            continue
        m = re.match(_PORT, s)
        if m is not None:
            if device is None:
                add_warning(warnings, f"{s!r} without a device line before it: ignored")
                continue
            number = int(m.group(1))
            port = device["ports"][number] = {"port": number}
            where = f"{device['name']} port {number}"
            continue

        kv = key_value(s)
        if kv is None or device is None:
            continue
        key, value = kv[0].lower(), kv[1]
        if key in _PORT_KEYS:
            field = _PORT_KEYS[key]
            if field is not None and port is not None:
                port[field] = _port_value(field, value, where, warnings)
        elif key in _DEVICE_KEYS or key.endswith(" type"):
            if key.endswith(" type"):
                device["hca_type"] = value or None
            elif key == "number of ports":
                device["nports"] = parse_int(value)
            elif key == "firmware version":
                device["fw_ver"] = value or None
            elif key == "node guid":
                device["node_guid"] = guid(value)

    result = []
    for dev in devices.values():
        ports = []
        for number in sorted(dev["ports"]):
            p = dev["ports"][number]
            gid_text = p.get("gid")
            gids = (Gid(index=0, gid=gid_text, ipv4=ipv4_of_gid(gid_text)),) if gid_text else ()
            ports.append(Port(
                port=number,
                state=p.get("state"),
                phys_state=p.get("phys_state"),
                rate_gbps=p.get("rate_gbps"),
                link_layer=p.get("link_layer"),
                lid=p.get("lid"),
                sm_lid=p.get("sm_lid"),
                gids=gids,
            ))
        nports = dev["nports"]
        if nports is not None and nports <= 64:
            missing = [str(n) for n in range(1, nports + 1) if n not in dev["ports"]]
            if missing:
                add_warning(warnings, f"{dev['name']}: 'Number of ports: {nports}' but port "
                            f"{', '.join(missing)} is not in the output")
        result.append(RdmaDevice(
            name=dev["name"],
            fw_ver=dev["fw_ver"],
            node_type=dev["node_type"],
            node_guid=dev["node_guid"],
            hca_type=dev["hca_type"],
            ports=tuple(ports),
            source=SOURCE,
        ))

    if port is not None and "link_layer" not in port and not aborted:
        # "Link layer" is the last line of both formats' port blocks.
        add_warning(warnings, f"{where}: the port block ends before its 'Link layer' line "
                    "(output cut off?)")
    if not result and not no_devices and not aborted:
        warnings.append("no ibstat or ibstatus device listing found in the input")
        return Parsed(result, tuple(warnings), ok=False)
    return Parsed(result, tuple(warnings), ok=True)
