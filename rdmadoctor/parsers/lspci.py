"""``lspci -vvv`` output, or only its ``ACSCtl:`` lines (``lspci -vvv | grep ACSCtl``)."""

from __future__ import annotations

import re

from rdmadoctor.core.facts import LspciDevice, Parsed
from rdmadoctor.core.words import count
from rdmadoctor.parsers.common import add_warning, clean_lines

# A device block starts at column 0: "21:00.0 Ethernet controller: ..." or "0000:21:00.0 ...".
_HEADER = r"^((?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(.*)$"
_NUMA = r"^NUMA node:\s*(\d{1,6})\s*$"
_SPEED = r"Speed\s+(\d{1,3}(?:\.\d{1,3})?)GT/s"
_WIDTH = r"Width\s+x(\d{1,3})\b"
_FLAG = r"([A-Za-z][\w/]*)([+-])(?=\s|,|$)"
_DRIVER = r"^Kernel driver in use:\s*(\S+)\s*$"


def _speed_width(text: str) -> tuple[float | None, int | None]:
    speed = re.search(_SPEED, text)
    width = re.search(_WIDTH, text)
    return (float(speed.group(1)) if speed else None, int(width.group(1)) if width else None)


def _flags(text: str) -> dict[str, bool]:
    return {name: sign == "+" for name, sign in re.findall(_FLAG, text)}


def parse_lspci_vvv(text: str) -> Parsed[list[LspciDevice]]:
    warnings: list[str] = []
    blocks: list[dict] = []
    loose_acs: list[dict[str, bool]] = []
    current: dict | None = None
    for line in clean_lines(text):
        if not line.strip():
            continue
        if not line[0].isspace():
            m = re.match(_HEADER, line)
            if m is not None:
                current = {"bdf": m.group(1), "description": m.group(2).strip()}
                blocks.append(current)
                continue
        s = line.strip()
        if "<access denied>" in s:
            add_warning(warnings, "lspci ran without root: capabilities (LnkSta, ACSCtl) "
                        "are hidden")
        if s.startswith("ACSCtl:"):
            flags = _flags(s[len("ACSCtl:"):])
            if current is None:
                loose_acs.append(flags)
            elif "acsctl" not in current:  # the device's own ACS capability comes first
                current["acsctl"] = flags
            continue
        if current is None:
            continue
        if s.startswith("LnkCap:"):
            current["lnkcap"] = _speed_width(s)
        elif s.startswith("LnkSta:"):
            current["lnksta"] = _speed_width(s)
        else:
            m = re.match(_NUMA, s) or re.match(_DRIVER, s)
            if m is not None:
                current["numa" if s.startswith("NUMA") else "driver"] = m.group(1)

    devices = []
    for b in blocks:
        cap_speed, cap_width = b.get("lnkcap", (None, None))
        sta_speed, sta_width = b.get("lnksta", (None, None))
        devices.append(LspciDevice(
            bdf=b["bdf"],
            description=b["description"],
            numa_node=int(b["numa"]) if "numa" in b else None,
            lnkcap_speed_gts=cap_speed,
            lnkcap_width=cap_width,
            lnksta_speed_gts=sta_speed,
            lnksta_width=sta_width,
            acsctl=b.get("acsctl"),
            driver=b.get("driver"),
        ))
    if loose_acs:
        add_warning(warnings, f"{count(len(loose_acs), 'ACSCtl line')} without a device line above them "
                    "(grep output?): device addresses unknown")
        devices.extend(LspciDevice(bdf="?", acsctl=flags) for flags in loose_acs)
    if not devices:
        warnings.append("no lspci device line (e.g. '21:00.0 Ethernet controller: ...') found")
        return Parsed(devices, tuple(warnings), ok=False)
    return Parsed(devices, tuple(warnings), ok=True)
