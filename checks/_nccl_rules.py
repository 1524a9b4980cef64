"""NCCL's own rules, as its C code applies them (not as its docs summarise them), and torch's for
MASTER_ADDR / MASTER_PORT. Pure functions over strings and plain facts: no host, no finding.

- Numbers: NCCL reads numeric variables with ``strtoll(value, NULL, 0)`` (src/misc/param.cc
  ncclLoadParam, the value from ncclGetEnv): the longest numeric prefix, its base from the prefix
  (``0x``, ``0``), 0 when there is none, the default kept on ERANGE: ``NCCL_IB_DISABLE=true`` reads
  as 0. A port in ``dev:port`` is read with ``atoi``.
- Device and interface lists: NCCL_IB_HCA (src/transport/net_ib/init.cc) and NCCL_SOCKET_IFNAME
  (src/misc/socket.cc) both go through src/misc/utils.cc parseStringList / matchIfList:

  - the list is comma separated; a leading ``^`` excludes, then a leading ``=`` matches exactly; both
    apply to the whole list, in that order only (``^=mlx5_0`` works, ``=^mlx5_0`` names "^mlx5_0");
  - without ``=`` an entry is a prefix: ``mlx5_1`` also selects ``mlx5_10`` .. ``mlx5_17``;
  - ``dev:port`` limits an entry to one port, the port read with atoi (``mlx5_0:`` means port 0);
  - nothing is trimmed: ``mlx5_0, mlx5_1`` has an entry " mlx5_1" that matches no device;
  - only ACTIVE ports are candidates for NCCL_IB_HCA; NCCL_SOCKET_IFNAME only sees interfaces that are
    running (up with a carrier) and have an IPv4/IPv6 address, and is ignored when 1 character long;

- Interfaces NCCL picks by itself (src/misc/socket.cc ncclFindInterfaces): ``ib*``, else anything
  but ``docker*``, ``lo`` and ``virbr*``, else ``docker*``, else ``lo``; each only when running
  (IFF_UP and IFF_RUNNING) with an IPv4/IPv6 address.
"""

from __future__ import annotations

import re

from rdmadoctor.core.record import field, record

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Iterable, Sequence

    from rdmadoctor.checks._nccl_probe import HcaPort
    from rdmadoctor.host.net import NetIf


# ---- NCCL's list syntax ----------------------------------------------------------------------


@record
class IfEntry:
    prefix: str
    port: int = -1  # -1: any port
    port_text: str | None = field(default=None, compare=False)  # after ':', as written

    def port_misread(self) -> str | None:
        """How NCCL's atoi reads a port written as a number it cannot hold, or None."""
        m = re.match(r"[ \t\n\v\f\r]*[+-]?(\d+)", self.port_text or "")
        if m is None:
            return None
        written = m.group(1).lstrip("0") or "0"
        if len(written) <= 9 or (len(written) == 10 and written <= "2147483647"):
            return None  # it fits in an int: atoi reads what is written
        port = f"'{clip(self.port_text or '')}'"
        if self.port == -1:
            return f"port {port} is out of range: NCCL reads it with atoi as -1, which means any port of {self.prefix}"
        return f"port {port} is out of range: NCCL reads it with atoi as {self.port} (the low 32 bits)"

    def text(self) -> str:
        return self.prefix if self.port == -1 else f"{self.prefix}:{self.port}"


@record
class IfList:
    value: str
    exclude: bool
    exact: bool
    entries: tuple[IfEntry, ...]


# Python's int() refuses more than 4300 digits (CVE-2020-10735); a C long has at most 19 decimal,
# 16 hex or 22 octal digits, so a longer run of significant digits overflows whatever it says.
_LONG_DIGITS = {10: 19, 16: 16, 8: 22}
LLONG_MIN, LLONG_MAX = -(2**63), 2**63 - 1


def _c_long(sign: str, digits: str, base: int) -> int | None:
    """The value of ``digits`` in ``base``, or None when it overflows a 64-bit long (ERANGE)."""
    significant = digits.lstrip("0") or "0"
    if len(significant) > _LONG_DIGITS[base]:
        return None
    v = int(significant, base)
    v = -v if sign == "-" else v
    return v if LLONG_MIN <= v <= LLONG_MAX else None


def c_atoi(text: str) -> int:
    """glibc's atoi: ``(int) strtol(text, NULL, 10)``. strtol saturates at LONG_MAX/LONG_MIN and
    the cast keeps the low 32 bits, so ``4294967297`` reads as 1 and a huge number as -1."""
    m = re.match(r"[ \t\n\v\f\r]*([+-]?)(\d+)", text)
    if m is None:
        return 0
    v = _c_long(m.group(1), m.group(2), 10)
    if v is None:
        v = LLONG_MIN if m.group(1) == "-" else LLONG_MAX
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def c_strtoll(text: str) -> int | None:
    """strtoll(text, NULL, 0): the longest numeric prefix, 0 when there is none; None on overflow."""
    s = text.lstrip(" \t\n\v\f\r")
    m = re.match(r"([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", s)
    if m is None:
        return 0
    digits = m.group(2)
    if digits[:2].lower() == "0x":
        return _c_long(m.group(1), digits[2:], 16)
    if digits.startswith("0"):
        return _c_long(m.group(1), digits, 8)
    return _c_long(m.group(1), digits, 10)  # None: ERANGE, NCCL keeps the default


def clip(text: str, limit: int = 40) -> str:
    """A value as written, cut for a message: the 4301 digits someone pasted are not repeated."""
    if len(text) <= limit:
        return text
    what = f"{len(text)} digits" if text.isdigit() else f"{len(text)} characters"
    return f"{text[:limit]}... ({what})"


def numeric_exact(text: str) -> bool:
    """strtoll would consume the whole value (so it means what it says)."""
    return re.fullmatch(r"[ \t\n\v\f\r]*[+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", text) is not None


def parse_if_list(value: str) -> IfList:
    """NCCL_IB_HCA / NCCL_SOCKET_IFNAME as NCCL reads them."""
    s = value
    exclude = s.startswith("^")
    if exclude:
        s = s[1:]
    exact = s.startswith("=")
    if exact:
        s = s[1:]
    entries = []
    for part in s.split(","):
        name, sep, port = part.partition(":")
        if not name:  # ",," and ":1" add nothing
            continue
        entries.append(IfEntry(name, c_atoi(port) if sep else -1, port if sep else None))
    return IfList(value, exclude, exact, tuple(entries))


def entry_matches(entry: IfEntry, exact: bool, name: str, port: int = -1) -> bool:
    name_ok = name == entry.prefix if exact else name.startswith(entry.prefix)
    port_ok = entry.port == -1 or port == -1 or entry.port == port
    return name_ok and port_ok


def list_matches(lst: IfList, name: str, port: int = -1) -> bool:
    """matchIfList(...) ^ searchNot: would NCCL take this device/port (or interface)?"""
    # NCCL: an empty list matches everything, so "^" alone excludes everything.
    hit = True if not lst.entries else any(entry_matches(e, lst.exact, name, port) for e in lst.entries)
    return hit != lst.exclude


@record
class HcaEntryReport:
    entry: IfEntry
    devices: tuple[str, ...]  # existing devices the name matches
    ports: tuple[HcaPort, ...]  # their ports the entry matches (any state)
    others: tuple[str, ...] = ()  # devices matched only because the entry is a prefix of their name


@record
class HcaSelection:
    lst: IfList
    selected: tuple[HcaPort, ...]  # ACTIVE ports NCCL will use
    entries: tuple[HcaEntryReport, ...]


def select_hcas(value: str, ports: Sequence[HcaPort]) -> HcaSelection:
    lst = parse_if_list(value)
    selected = tuple(p for p in ports if p.active and list_matches(lst, p.device, p.port))
    devices = sorted({p.device for p in ports})
    reports = []
    for e in lst.entries:
        devs = tuple(d for d in devices if entry_matches(IfEntry(e.prefix), lst.exact, d))
        eports = tuple(p for p in ports if entry_matches(e, lst.exact, p.device, p.port))
        others = tuple(d for d in devs if d != e.prefix) if e.prefix in devs and not lst.exact else ()
        reports.append(HcaEntryReport(e, devs, eports, others))
    return HcaSelection(lst, selected, tuple(reports))


def select_interfaces(value: str, interfaces: Iterable[NetIf]) -> tuple[list[NetIf], list[NetIf]]:
    """(interfaces the list matches, of those the ones NCCL can use: running)."""
    lst = parse_if_list(value)
    matched = [i for i in interfaces if list_matches(lst, i.name)]
    return matched, [i for i in matched if i.up]


def master_addr_error(value: str) -> str | None:
    if not value.strip():
        return "is empty"
    if value != value.strip():
        return "has leading or trailing spaces"
    import ipaddress

    try:
        ipaddress.ip_address(value)
        return None
    except ValueError:
        pass
    host = value[:-1] if value.endswith(".") else value
    labels = host.split(".")
    if len(host) > 253 or not all(re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?", lb) for lb in labels):
        return "is neither an IP address nor a valid hostname"
    if all(lb.isdigit() for lb in labels):
        return "looks like an IPv4 address but is not a valid one"
    return None


def nccl_auto_interfaces(interfaces: Iterable[NetIf]) -> list[NetIf]:
    """What NCCL's socket transport takes with NCCL_SOCKET_IFNAME unset (src/misc/socket.cc
    ncclFindInterfaces): interfaces named ib*, else any but docker*, lo and virbr*, else docker*,
    else lo; each only when running with an address."""
    have = [i for i in interfaces if i.usable is not False]
    for pick in (lambda n: n.startswith("ib"), lambda n: not n.startswith(("docker", "lo", "virbr")), lambda n: n.startswith("docker"), lambda n: n.startswith("lo")):
        found = [i for i in have if pick(i.name)]
        if found:
            return found
    return []
