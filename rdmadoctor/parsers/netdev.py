"""``ibdev2netdev`` (MLNX_OFED / mlnx-tools) and ``show_gids`` output."""

from __future__ import annotations

import re

from rdmadoctor.core.facts import GidRow, NetLink, Parsed
from rdmadoctor.parsers.common import clean_lines

# "mlx5_0 port 1 ==> enp25s0np0 (Up)"; "-v" puts the PCI address first and the HCA model,
# firmware and port state between name and port:
# "0000:3b:00.0 mlx5_0 (MT4119 - MCX516A-CCAT) CX516A - ConnectX-5 fw 16.26.1040 port 1 (ACTIVE)
#  ==> ens1f0 (Up)"
_PCI = r"^(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$"
_ARROW = r"(?<![=<])<?=+>"  # starts a run of "=" (never rescans a long run from each of its characters)
_PORT = r".*\bport\s+(\d{1,9})\b"
_TARGET = r"^\s*(\S+)(?:\s*\(([^)]*)\))?"

# DEV PORT INDEX GID [IPv4] VER DEV; the IPv4 column is empty for link-local GIDs.
_GID_ROW = (r"^(\S+)\s+(\d{1,9})\s+(\d{1,9})\s+([0-9A-Fa-f:]+)\s+"
            r"(?:(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})\s+)?(v\d)(?:\s+(\S+))?\s*$")


def parse_ibdev2netdev(text: str) -> Parsed[list[NetLink]]:
    links: list[NetLink] = []
    warnings: list[str] = []
    for line in clean_lines(text):
        parts = re.split(_ARROW, line, maxsplit=1)
        if len(parts) != 2:
            continue
        left, right = parts
        words = left.split()
        if words and re.match(_PCI, words[0]):
            words = words[1:]
        port = re.match(_PORT, left)
        target = re.match(_TARGET, right)
        if not words or port is None or target is None:
            warnings.append(f"unreadable ibdev2netdev line: {line.strip()!r}")
            continue
        state = (target.group(2) or "").strip().lower()
        links.append(NetLink(
            device=words[0],
            port=int(port.group(1)),
            netdev=target.group(1),
            up=True if state == "up" else False if state == "down" else None,
        ))
    if not links:
        warnings.append("no 'device port N ==> netdev' line found in the input")
        return Parsed(links, tuple(warnings), ok=False)
    return Parsed(links, tuple(warnings), ok=True)


def parse_show_gids(text: str) -> Parsed[list[GidRow]]:
    rows: list[GidRow] = []
    for line in clean_lines(text):
        m = re.match(_GID_ROW, line.strip())
        if m is None:
            continue
        rows.append(GidRow(
            device=m.group(1),
            port=int(m.group(2)),
            index=int(m.group(3)),
            gid=m.group(4),
            ipv4=m.group(5),
            version=m.group(6),
            netdev=m.group(7),
        ))
    if not rows:
        return Parsed(rows, ("no show_gids row (DEV PORT INDEX GID IPv4 VER DEV) found",), ok=False)
    return Parsed(rows, (), ok=True)
