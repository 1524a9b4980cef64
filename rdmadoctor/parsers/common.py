"""Helpers shared by the parsers: line cleaning, numbers, sizes, state spellings, GIDs.

Patterns are plain strings handed to ``re.match``/``re.search``: ``re`` compiles each on
first use and caches it, so importing a parser compiles nothing (21 patterns compiled at
import time cost about 2 ms, more than the whole budget of a parser import).
"""

from __future__ import annotations

import re

from rdmadoctor.core.facts import PHYS_STATES, PORT_STATES

# A shell prompt pasted along with the output: "$ ibstat", "user@host:~$ ibstat",
# "[u@h ~]$ df -h", "((venv) ) [u@h ~]$ ...", "root@h:/# ...", "u@h ~ % ..." (zsh), "~$ ...", and
# docs that write "$ " in front of a real prompt ("$ sonata@coyote2:~$ ibv_devinfo").
PROMPT = (
    r"^\s*(?!\s)(?:[$#%]\s+(?!\s))?"
    r"(?:\((?:[^()\n]|\([^()\n]*\))*\)\s*(?!\s))*"
    r"(?:\[[^\]\n]*\]"
    r"|[\w.-]+@[\w.-]+(?::\S*?)?(?:\s+[~/]\S*?)?"
    r"|[\w.-]*:[~/]\S*?"
    r"|~\S*?)?"  # a bare working directory: "~$ ibstat", "~/work$ df -h"
    r"\s*[$#%>](?:\s.*)?$"
)
# Markdown code fences around a paste in a ticket.
_FENCE = r"^\s*(?:```|~~~)[\w+-]*\s*$"

# Digit runs are bounded: int() refuses over 4300 digits, and a float can overflow.
_INT = r"^\s*(?:0[xX]([0-9a-fA-F]{1,16})|(\d{1,19}))\s*$"
_NUM = r"^\s*(\d{1,19}(?:\.\d{1,19})?)"
_SIZE = r"^\s*(\d{1,19}(?:[.,]\d{1,19})?)\s*([kKmMgGtTpPeE]?)(?:i?[bB])?\s*$"
_STATE_NUM_FIRST = r"^\s*(\d{1,9})\s*:\s*(.*?)\s*$"  # sysfs and ibstatus: "4: ACTIVE"
_STATE_NUM_LAST = r"^\s*(.*?)\s*\((\d{1,9})\)\s*$"  # ibv_devinfo: "PORT_ACTIVE (4)"
_GUID64 = r"^0[xX]([0-9a-fA-F]{16})$"

_UNITS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5, "e": 6}

_STATE_ALIASES = {"INITIALIZING": "INIT", "INITIALIZE": "INIT"}
_PHYS_BY_KEY = {name.lower(): name for name in PHYS_STATES.values()}
_LINK_LAYERS = {"infiniband": "InfiniBand", "ib": "InfiniBand", "ethernet": "Ethernet",
                "eth": "Ethernet"}


# A terminal escape: CSI (ESC [ ... final byte: colours, ESC[4m underline), OSC (ESC ] ... BEL or
# ESC \\: titles, hyperlinks), and ESC, intermediates, a final byte (ESC ( B, ESC =). Each part is
# one run of a class the next part cannot match, and an OSC stops at the next ESC: linear.
_ESCAPE = r"\x1b\[[0-9:;<=>?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[ -/]*[0-~]"


def strip_escapes(text: str) -> str:
    """``text`` without terminal escapes. A CUDA 13 `nvidia-smi topo -m` wraps its header row in
    ESC[4m ... ESC[0m even when written to a file; a tool's output is read through this once
    (rdmadoctor.host.Host.cmd, live and recorded alike), so no parser meets one."""
    return re.sub(_ESCAPE, "", text) if "\x1b" in text else text


def is_prompt(line: str) -> bool:
    return re.match(PROMPT, line) is not None


def split_lines(text: object, rstrip: bool = True) -> list[str]:
    """Lines of ``text`` with CRLF / CR line ends normalised (and trailing blanks removed)."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    if not isinstance(text, str):
        return []
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return [line.rstrip() for line in lines] if rstrip else lines


def is_noise(line: str) -> bool:
    """A shell prompt or a markdown code fence pasted around the output."""
    return re.match(PROMPT, line) is not None or re.match(_FENCE, line) is not None


def clean_lines(text: object) -> list[str]:
    """``split_lines`` without prompt lines and markdown fences (blank lines are kept)."""
    return [line for line in split_lines(text) if not is_noise(line)]


def key_value(line: str) -> tuple[str, str] | None:
    """``"  Key name:   value"`` -> ``("Key name", "value")``; None without a colon."""
    key, sep, value = line.partition(":")
    if not sep:
        return None
    return key.strip(), value.strip()


def parse_int(text: str | None) -> int | None:
    """Decimal or ``0x`` hex integer (ibstatus prints LIDs as ``0x1``), else None."""
    if text is None:
        return None
    m = re.match(_INT, text)
    if m is None:
        return None
    return int(m.group(1), 16) if m.group(1) is not None else int(m.group(2))


def leading_number(text: str | None) -> float | None:
    """``"400 Gb/sec (4X NDR)"`` -> 400.0; ``"40 (FDR10)"`` -> 40.0; no number -> None."""
    if text is None:
        return None
    m = re.match(_NUM, text)
    return float(m.group(1)) if m else None


def to_bytes(size: str | None, unit: int = 1) -> int | None:
    """``"1008G"`` -> 1008 GiB in bytes, ``"4.0M"``, ``"512K"``, ``"0"``; ``"-"`` -> None.

    Suffixes are powers of 1024, as ``df -h`` and ``free -h`` print them. A bare number is
    multiplied by ``unit`` (1024 for ``df``'s 1K-blocks).
    """
    if size is None:
        return None
    m = re.match(_SIZE, size)
    if m is None:
        return None
    number = float(m.group(1).replace(",", "."))
    suffix = m.group(2).lower()
    if suffix:
        return int(round(number * 1024 ** _UNITS[suffix]))
    return int(round(number * unit))


def _name_and_number(text: str) -> tuple[str, int | None]:
    value = text.strip()
    m = re.match(_STATE_NUM_FIRST, value)
    if m is not None:
        return m.group(2), int(m.group(1))
    m = re.match(_STATE_NUM_LAST, value)
    if m is not None:
        return m.group(1), int(m.group(2))
    return value, None


def port_state(text: str | None) -> str | None:
    """``Active`` (ibstat), ``4: ACTIVE`` (sysfs, ibstatus), ``PORT_ACTIVE (4)`` (ibv_devinfo)
    -> ``ACTIVE``."""
    if text is None:
        return None
    value, number = _name_and_number(text)
    key = value.upper().replace(" ", "_")
    if key.startswith("PORT_"):
        key = key[5:]
    key = _STATE_ALIASES.get(key, key)
    if key in PORT_STATES:
        return key
    if number is not None and 0 <= number < len(PORT_STATES):
        return PORT_STATES[number]
    return None


def phys_state(text: str | None) -> str | None:
    """``LinkUp``, ``5: LinkUp``, ``LINK_UP (5)`` -> ``LinkUp`` (the sysfs spelling)."""
    if text is None:
        return None
    value, number = _name_and_number(text)
    key = value.replace("_", "").replace(" ", "").lower()
    if key in _PHYS_BY_KEY:
        return _PHYS_BY_KEY[key]
    if number is not None and number in PHYS_STATES:
        return PHYS_STATES[number]
    return None


def link_layer(text: str | None) -> str | None:
    """``InfiniBand`` | ``Ethernet``; other words kept as printed; empty/unknown -> None."""
    if text is None:
        return None
    value = text.strip()
    if not value or value.lower() in ("unknown", "unspecified", "n/a"):
        return None
    return _LINK_LAYERS.get(value.lower(), value)


def guid(text: str | None) -> str | None:
    """``0x98039b03009fcfd6`` (ibstat) -> ``9803:9b03:009f:cfd6`` (sysfs, ibv_devinfo spelling)."""
    if text is None:
        return None
    value = text.strip()
    if not value:
        return None
    m = re.match(_GUID64, value)
    if m is None:
        return value.lower()
    h = m.group(1).lower()
    return ":".join((h[0:4], h[4:8], h[8:12], h[12:16]))


def _hex_groups(text: str, need: int) -> list[int] | None:
    if text.count("::") > 1:
        return None
    if "::" in text:
        left, _, right = text.partition("::")
        head = left.split(":") if left else []
        tail = right.split(":") if right else []
        fill = need - len(head) - len(tail)
        if fill < 0:
            return None
        parts = head + ["0"] * fill + tail
    else:
        parts = text.split(":") if text else []
    if len(parts) != need:
        return None
    groups = []
    for part in parts:
        if not 1 <= len(part) <= 4 or any(c not in "0123456789abcdef" for c in part):
            return None
        groups.append(int(part, 16))
    return groups


def _is_octet(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 3 and int(text) < 256


def ipv4_of_gid(gid_text: str | None) -> str | None:
    """The IPv4 address inside an IPv4-mapped GID (``::ffff:10.0.0.1`` or the full hex form)."""
    if not gid_text:
        return None
    text = gid_text.strip().lower()
    tail: list[int] = []
    if "." in text:
        head, _, dotted = text.rpartition(":")
        octets = dotted.split(".")
        if len(octets) != 4 or not all(_is_octet(o) for o in octets):
            return None
        if head.endswith(":"):
            head += ":"
        tail = [int(octets[0]) << 8 | int(octets[1]), int(octets[2]) << 8 | int(octets[3])]
        groups = _hex_groups(head, 6)
    else:
        groups = _hex_groups(text, 8)
    if groups is None:
        return None
    groups += tail
    if groups[:5] != [0, 0, 0, 0, 0] or groups[5] != 0xFFFF:
        return None
    return f"{groups[6] >> 8}.{groups[6] & 0xFF}.{groups[7] >> 8}.{groups[7] & 0xFF}"


def add_warning(warnings: list[str], message: str) -> None:
    if message not in warnings:
        warnings.append(message)
