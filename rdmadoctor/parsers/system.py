"""Host basics: ``lsmod``, ``ulimit``, ``/proc/<pid>/limits`` and ``status``, ``df``, ``env``."""

from __future__ import annotations

import re

from rdmadoctor.core.facts import DfRow, Limits, Parsed
from rdmadoctor.core.words import count
from rdmadoctor.parsers.common import add_warning, clean_lines, is_noise, split_lines, to_bytes

_LSMOD_ROW = r"^(\w+)\s+\d{1,19}\s+(?:\d{1,9}|-)"
# bash "max locked memory (kbytes, -l) 64", dash "locked memory(kbytes) 64",
# zsh "-l: locked-in-memory size (kbytes) 64", busybox "-l: max locked memory (kb) 64"
_ULIMIT_MEMLOCK = r"locked(?:-in)?[- ]?memory|memlock|-l\)|^\s*-l:"
_ULIMIT_VALUE = r"(\d{1,19}|unlimited)\s*$"
_PROC_MEMLOCK = r"^Max locked memory\s+(\S+)\s+(\S+)"
_CAPEFF = r"^CapEff:\s*([0-9a-fA-F]{1,32})\s*$"
_DF_BLOCKS = r"^(\d{1,9})([KMGTPE]?)(?:i?B)?-blocks$"
_DF_PCT = r"^(?:\d{1,3}%|-)$"
_ENV = r"^([A-Za-z_][A-Za-z0-9_]*(?:%%)?)=(.*)$"  # bash exports functions as BASH_FUNC_name%%


def parse_lsmod(text: str) -> Parsed[set[str]]:
    modules: set[str] = set()
    header = False
    for line in clean_lines(text):
        if line.startswith("Module") and "Size" in line:
            header = True
            continue
        m = re.match(_LSMOD_ROW, line)
        if m is not None:
            modules.add(m.group(1))
    if not modules and not header:
        return Parsed(modules, ("no lsmod row (module size used-by) found",), ok=False)
    return Parsed(modules, (), ok=True)


def _memlock_bytes(value: str, unit: int) -> int | None:
    return None if value == "unlimited" else int(value) * unit


def parse_ulimit(text: str) -> Parsed[Limits | None]:
    """``ulimit -a`` or ``ulimit -l``. ulimit shows one limit (the soft one unless ``-H``), so
    soft and hard both get it."""
    lines = [line.strip() for line in clean_lines(text) if line.strip()]
    if len(lines) == 1 and re.match(r"^(?:\d{1,19}|unlimited)$", lines[0]):
        value = _memlock_bytes(lines[0], 1024)  # "ulimit -l" counts KiB in every shell
        return Parsed(Limits(memlock_soft=value, memlock_hard=value))
    for line in lines:
        if not re.search(_ULIMIT_MEMLOCK, line, re.IGNORECASE):
            continue
        m = re.search(_ULIMIT_VALUE, line)
        if m is None:
            return Parsed(None, (f"unreadable locked-memory line: {line!r}",), ok=False)
        lowered = line.lower()
        unit = 1 if "bytes" in lowered and "kbytes" not in lowered else 1024
        value = _memlock_bytes(m.group(1), unit)
        return Parsed(Limits(memlock_soft=value, memlock_hard=value))
    return Parsed(None, ("no locked-memory (-l) line in the ulimit output",), ok=False)


def parse_proc_limits(text: str) -> Parsed[Limits | None]:
    for line in clean_lines(text):
        m = re.match(_PROC_MEMLOCK, line.strip())
        if m is None:
            continue
        values: list[int | None] = []
        for raw in m.group(1), m.group(2):
            if raw == "unlimited":
                values.append(None)
            elif raw.isascii() and raw.isdigit() and len(raw) < 20:
                values.append(int(raw))
            else:
                return Parsed(None, (f"unreadable 'Max locked memory' line: {line.strip()!r}",),
                              ok=False)
        return Parsed(Limits(memlock_soft=values[0], memlock_hard=values[1]))
    return Parsed(None, ("no 'Max locked memory' line in the limits file",), ok=False)


def parse_proc_status_capeff(text: str) -> Parsed[int | None]:
    for line in clean_lines(text):
        m = re.match(_CAPEFF, line.strip())
        if m is not None:
            return Parsed(int(m.group(1), 16))
    return Parsed(None, ("no CapEff line in the status file",), ok=False)


def _status_field(text: str | None, key: str) -> str | None:
    """The value of one ``Key:`` line of /proc/<pid>/status."""
    for line in (text or "").splitlines():
        if line.startswith(key + ":"):
            return line[len(key) + 1 :].strip()
    return None


def parse_status_uid(text: str | None) -> int | None:
    """The effective uid (second field of ``Uid:``): the one capabilities follow."""
    words = (_status_field(text, "Uid") or "").split()
    return int(words[1]) if len(words) >= 2 and words[1].isdigit() else None


def parse_status_caps(text: str | None, key: str) -> int | None:
    value = _status_field(text, key)
    try:
        return int(value, 16) if value else None
    except ValueError:
        return None


def _df_row(line: str, unit: int, has_type: bool) -> DfRow | None:
    spans = [m.span() for m in re.finditer(r"\S+", line)]
    words = [line[a:b] for a, b in spans]
    first_size = 2 if has_type else 1  # at least one word of file system name comes first
    for k in range(first_size + 3, len(words) - 1):
        if re.match(_DF_PCT, words[k]):
            break
    else:
        return None
    size, used, avail = words[k - 3:k]
    return DfRow(
        filesystem=" ".join(words[: k - 3 - (1 if has_type else 0)]),
        size_bytes=to_bytes(size, unit),
        used_bytes=to_bytes(used, unit),
        avail_bytes=to_bytes(avail, unit),
        mountpoint=line[spans[k + 1][0]:].strip(),
    )


def parse_df(text: str) -> Parsed[list[DfRow]]:
    """``df``, ``df -h``, ``df -P``, ``df -T``. Sizes of ``-h`` are powers of 1024 (``-H``
    output looks the same and would be read 2-7 % too large)."""
    warnings: list[str] = []
    rows: list[DfRow] = []
    unit: int | None = None
    has_type = False
    pending = ""
    unreadable: list[str] = []
    for line in clean_lines(text):
        if not line.strip():
            continue
        words = line.split()
        if words[0] == "Filesystem":
            has_type = len(words) > 1 and words[1] == "Type"
            size_word = words[2 if has_type else 1] if len(words) > (2 if has_type else 1) else ""
            m = re.match(_DF_BLOCKS, size_word)
            if size_word == "Size":
                unit = 1
            elif m is not None:
                unit = int(m.group(1)) * 1024 ** "_KMGTPE".index(m.group(2) or "_")
            else:
                add_warning(warnings, f"df header column {size_word!r} is not a size: "
                            "rows not read")
                unit = 0
            pending = ""
            continue
        if unit == 0:
            continue
        if pending:
            line = f"{pending} {line.strip()}"
            pending = ""
        if unit is None:
            # No header: df's default is 1K-blocks, and -h sizes carry a suffix.
            unit = 1 if re.search(r"\d[KMGTPE]\b", line) else 1024
            add_warning(warnings, "no df header line: size unit guessed from the values")
        row = _df_row(line, unit, has_type)
        if row is not None:
            rows.append(row)
        elif len(line.split()) == 1:
            # POSIX df puts a long file system name alone on a line and the numbers below it.
            pending = line.strip()
        else:
            unreadable.append(line.strip()[:100])
    if unreadable:
        warnings.append(f"{count(len(unreadable), 'unreadable df line')}, e.g. {unreadable[:3]}")
    if pending:
        warnings.append(f"df output ends after the file system name {pending!r}")
    return Parsed(rows, tuple(warnings), ok=bool(rows))


def parse_env(text: str) -> Parsed[dict[str, str]]:
    env: dict[str, str] = {}
    key = None
    skipped = 0
    for line in split_lines(text, rstrip=False):
        m = re.match(_ENV, line)
        if m is not None:
            key = m.group(1)
            env[key] = m.group(2)
        elif is_noise(line):
            continue
        elif key is not None:
            env[key] += "\n" + line  # a multi-line value (exported functions, certificates)
        elif line.strip():
            skipped += 1
    for name, value in env.items():
        env[name] = value.rstrip("\n")
    warnings = (f"{count(skipped, 'line')} before the first KEY=VALUE line ignored",) if skipped else ()
    if not env:
        return Parsed(env, warnings + ("no KEY=VALUE line found",), ok=False)
    return Parsed(env, warnings, ok=True)
