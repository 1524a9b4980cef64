"""Package listings: ``dpkg -l``, ``rpm -qa``, ``ofed_info`` (MLNX_OFED / DOCA-OFED), and dpkg's database (/var/lib/dpkg/status)."""

from __future__ import annotations

import re

from rdmadoctor.core.facts import PackageDb, Parsed
from rdmadoctor.core.words import count
from rdmadoctor.parsers.common import add_warning, clean_lines

# "ii  libibverbs1:amd64  50mlnx1-1.50218  amd64  Library for ..."; the first letter is the
# desired action, the second the current status: only ii/hi are installed and configured.
_DPKG_ROW = r"^([uihrp])([ncUCHFWti])([ R]?)\s+(\S+)\s+(\S+)(?:\s+(\S+))?"
_RPM_ARCHES = ("x86_64", "aarch64", "noarch", "i686", "i386", "ppc64le", "ppc64", "s390x",
               "armv7hl", "src")
# "name-version-release[.arch]": the last two dash-separated fields are version and release,
# so names may hold dashes and digits (rdma-core-devel, mlnx-ofa_kernel, kmod-xpmem).
_RPM_NVR = r"^([A-Za-z0-9_.+]+(?:-[A-Za-z0-9_.+]+)*)-([^-\s]+)-([^-\s]+)$"
# "MLNX_OFED_LINUX-23.10-1.1.9.0 (OFED-23.10-1.1.9):" or, from "ofed_info -s", "...-23.07-0.5.1.2:"
_OFED_FIRST = r"^(\S+?-\d[\w.+-]*?)(?:\s+\([^)]*\))?:\s*$"


def _dpkg_row(line: str) -> tuple[str, str, str] | None:
    """(status, name without :arch, version) of a dpkg -l row, else None."""
    m = re.match(_DPKG_ROW, line)
    if m is None:
        return None
    name = m.group(4).split(":", 1)[0]
    if not name:
        return None
    return m.group(1) + m.group(2), name, m.group(5)


def _rpm_nvra(line: str) -> tuple[str, str] | None:
    """``libibverbs-48.0-1.el9.x86_64`` -> ("libibverbs", "48.0-1.el9")."""
    words = line.split()
    if len(words) != 1:
        return None
    word = words[0]
    for arch in _RPM_ARCHES:
        if word.endswith("." + arch):
            word = word[: -len(arch) - 1]
            break
    m = re.match(_RPM_NVR, word)
    if m is None or not any(c.isdigit() for c in m.group(2)):
        return None
    return m.group(1), f"{m.group(2)}-{m.group(3)}"


def _dpkg_rows(lines: list[str], packages: dict[str, str], warnings: list[str]) -> int:
    rows = 0
    for line in lines:
        row = _dpkg_row(line)
        if row is None:
            continue
        rows += 1
        status, name, version = row
        if status in ("ii", "hi"):
            packages[name] = version
        elif status[0] in "ih":
            add_warning(warnings, f"{name} {version} is in dpkg state {status!r}: "
                        "not fully installed")
    return rows


def parse_dpkg_l(text: str) -> Parsed[PackageDb]:
    packages: dict[str, str] = {}
    warnings: list[str] = []
    rows = _dpkg_rows(clean_lines(text), packages, warnings)
    if not rows:
        warnings.append("no dpkg -l row found in the input")
    return Parsed(PackageDb(packages=packages, source="dpkg"), tuple(warnings), ok=rows > 0)


def parse_rpm_qa(text: str) -> Parsed[PackageDb]:
    packages: dict[str, str] = {}
    warnings: list[str] = []
    unreadable: list[str] = []
    for line in clean_lines(text):
        if not line.strip():
            continue
        nvr = _rpm_nvra(line)
        if nvr is None:
            unreadable.append(line.strip()[:80])
            continue
        packages[nvr[0]] = nvr[1]
    if unreadable:
        warnings.append(f"{count(len(unreadable), 'line')} {'is' if len(unreadable) == 1 else 'are'} not name-version-release.arch, "
                        f"e.g. {unreadable[:3]}")
    if not packages:
        warnings.append("no rpm -qa line found in the input")
    return Parsed(PackageDb(packages=packages, source="rpm"), tuple(warnings), ok=bool(packages))


def parse_ofed_info(text: str) -> Parsed[PackageDb]:
    lines = clean_lines(text)
    warnings: list[str] = []
    version = None
    for line in lines:
        if line.strip():
            m = re.match(_OFED_FIRST, line.strip())
            if m is not None:
                version = m.group(1)
            break
    packages: dict[str, str] = {}
    section = None
    for i, line in enumerate(lines):
        if line.strip() == "Installed Packages:":
            section = lines[i + 1:]
            break
    if section is not None:
        if _dpkg_rows(section, packages, warnings) == 0:
            for line in section:
                s = line.strip()
                if s and not set(s) <= {"-"}:
                    nvr = _rpm_nvra(s)
                    if nvr is not None:
                        packages[nvr[0]] = nvr[1]
        if not packages:
            warnings.append("'Installed Packages:' section holds no package row")
    if version is None:
        warnings.append("no OFED version line (e.g. 'MLNX_OFED_LINUX-23.10-1.1.9.0 "
                        "(OFED-23.10-1.1.9):') at the start of the input")
    ok = version is not None or bool(packages)
    return Parsed(PackageDb(packages=packages, source="ofed_info", ofed_version=version),
                  tuple(warnings), ok=ok)


def parse_dpkg_status(text: str, only: frozenset[str] | set[str] | None = None) -> dict[str, tuple[str | None, str]]:
    """/var/lib/dpkg/status -> {package: (version, state)}; state is the Status line's last word
    ("installed", "half-installed", "unpacked", "config-files", "not-installed", ...).

    Multi-arch packages appear once per architecture: an installed one wins. ``only`` limits the
    work to some names (the file is megabytes on a big image and we run every minute).
    """
    out: dict[str, tuple[str | None, str]] = {}
    if not isinstance(text, str):
        return out
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    for stanza in text.split("\n\n"):
        stanza = stanza.lstrip("\n")  # the same object when nothing is stripped: no copy
        if not stanza.startswith("Package:"):
            continue
        eol = stanza.find("\n")
        name = stanza[8 : eol if eol >= 0 else None].strip().split(":", 1)[0]
        if not name or (only is not None and name not in only):
            continue
        version = None
        state = "unknown"
        for line in stanza[eol + 1 :].split("\n") if eol >= 0 else ():
            if line.startswith("Status:"):
                words = line[7:].split()
                state = words[-1] if len(words) == 3 else "unknown"
            elif line.startswith("Version:"):
                version = line[8:].strip() or None
        prev = out.get(name)
        if prev is None or prev[1] != "installed":
            out[name] = (version, state)
    return out
