"""logs.diagnose's pasted tool outputs: each goes to the checks that declare it (``Check.pastes``),
whose judges read it through their own probes (checks/_paste.py); here each finding gets the line
of the paste that shows it, and a ``show_gids`` that lists no GID beside a device list is judged.
checks/logs.py calls :func:`_pasted` and :func:`_judged` from its probe.
"""

from __future__ import annotations

import re

from rdmadoctor.checks import ib as ib_checks
from rdmadoctor.checks import roce
from rdmadoctor.checks._paste import PORT_FILES as _PORT_FILES
from rdmadoctor.checks._paste import port_list as _port_list
from rdmadoctor.checks.ib import IB_NO_DEVICES, IB_NO_SM
from rdmadoctor.checks.limits import MEMLOCK_LIMITED, SHM_NEARLY_FULL, SHM_TOO_SMALL
from rdmadoctor.checks.roce import ROCE_NO_V2_GID
from rdmadoctor.checks.verbs import DEV_UVERBS_MISSING
from rdmadoctor.core.model import ERROR, Finding, Paste
from rdmadoctor.core.record import replace
from rdmadoctor.parsers.outputs import ROWS_ONLY_KINDS, filtered

# What a pasted port list and GID table can show (the finding's line is quoted by them).
_PORT_CODES = ib_checks.PASTE_CODES
_ROCE_CODES = roce.PASTE_CODES


def _link_layers(diag) -> dict[str, str]:
    """Device -> link layer, from the ports a paste lists (ibstat, ibv_devinfo, rdma link) and NCCL's
    device list (`NET/IB : Using [0]mlx5_0:1/RoCE`)."""
    out: dict[str, str] = {}
    for d in (diag.nccl or {}).get("net_devices") or ():
        if isinstance(d, dict) and d.get("name") and d.get("link_layer") in ("InfiniBand", "Ethernet"):
            out[d["name"]] = d["link_layer"]
    for seg in diag.segments:
        if seg.kind in _PORT_FILES:
            out.update({d.name: p.link_layer for d in _port_list(seg.kind, seg.text) for p in d.ports
                        if p.link_layer in ("InfiniBand", "Ethernet")})
    return out


# Outputs whose judges read one row and say nothing of a missing one: `df -h | grep shm` and
# `ulimit -a | grep locked` show the /dev/shm size and the memlock limit as well as the whole output
# (a bundle's transcript reads them by the same rule).
_ROWS_ONLY = ROWS_ONLY_KINDS
# What to quote as the evidence of a finding from a paste: the line that shows it.
_QUOTE = {
    MEMLOCK_LIMITED.code: r"locked memory|^\s*(?:\d+|unlimited)\s*$",
    SHM_TOO_SMALL.code: r"/dev/shm",
    SHM_NEARLY_FULL.code: r"/dev/shm",
    IB_NO_DEVICES.code: r"No IB devices|no devices|wasn't found",
    IB_NO_SM.code: r"(?i)sm lid",
    DEV_UVERBS_MISSING.code: r"rdma_cm|umad\d|issm\d",
}


def _locate(seg, f: Finding) -> tuple[int, str]:
    """The line of the paste that shows ``f``: (line number in the log, its text)."""
    lines = seg.text.split("\n")
    at = None
    pattern = _QUOTE.get(f.code)
    if pattern is not None:
        at = next((i for i, x in enumerate(lines) if re.search(pattern, x, re.IGNORECASE)), None)
    elif f.code in _PORT_CODES | _ROCE_CODES and seg.kind in _PORT_FILES and f.subject not in ("host", "fabric"):
        dev, _, port = f.subject.partition("/")
        one = next((i for i, x in enumerate(lines) if re.search(rf"(?:^|\s){re.escape(dev)}/{re.escape(port or '1')}:?\s", x)), None)
        start = next((i for i, x in enumerate(lines) if re.search(rf"'{re.escape(dev)}'|hca_id:\s*{re.escape(dev)}\s*$", x)), None)
        if one is not None and start is None:  # `rdma link`: a line per port
            at = one
        elif start is not None:
            at = start
            # The port's block, then its state line: what the finding is about.
            block = next((i for i in range(start, len(lines)) if re.search(rf"(?i)^\s*port:?\s*{re.escape(port or '1')}:?\s*$|port {re.escape(port or '1')} status", lines[i])), start)
            at = next((i for i in range(block, min(block + 12, len(lines))) if re.search(r"(?i)^\s*state:", lines[i])), block)
    elif seg.kind == "show_gids" and "/" in f.subject:  # the port's row (its GID index when one is named)
        dev, _, port = f.subject.partition("/")
        index = rf"{f.data['gid_index']}\s" if isinstance(f.data.get("gid_index"), int) else ""
        at = next((i for i, x in enumerate(lines) if re.match(rf"\s*{re.escape(dev)}\s+{re.escape(port)}\s+{index}", x)), None)
    elif seg.kind == "nvidia-smi" and f.subject.startswith("GPU"):  # the GPU's row of the matrix
        at = next((i for i, x in enumerate(lines) if x.split()[:1] == [f.subject]), None)
    elif seg.kind == "ibdev2netdev" and "/" in f.subject:  # "mlx5_2 port 1 ==> enp27s0f1np1 (Down)"
        dev, _, port = f.subject.partition("/")
        at = next((i for i, x in enumerate(lines) if re.search(rf"(?:^|\s){re.escape(dev)}\s.*\bport\s+{re.escape(port)}\b", x)), None)
    if at is None:
        at = 0  # the output's first line (lsmod's header for a module it lacks)
    return seg.line + at, lines[at]


def _shown(seg) -> str:
    """How a pasted output is named to the user: its command, else what it was recognised as."""
    return seg.command or {"rdma_link": "rdma link", "dev_infiniband": "ls /dev/infiniband", "nvidia-smi": "nvidia-smi topo -m"}.get(seg.kind, seg.kind)


def _filtered(command: str) -> bool:
    """A command whose output was filtered (`ibstat | grep State`): what it lacks proves nothing missing."""
    return filtered(command)


def _judged(diag, judges: dict[str, tuple[Paste, ...]]) -> list[str]:
    """The pasted outputs that were judged (a filtered one only where its rows are what is judged)."""
    names: list[str] = []
    some_rows = any(p.rows is not None for seg in diag.segments for p in judges.get(seg.kind, ()))
    layers = _link_layers(diag) if some_rows else {}
    for seg in diag.segments:
        decl = judges.get(seg.kind, ())
        if seg.kind == "nccl-tests" or decl and (not _filtered(seg.command) or seg.kind in _ROWS_ONLY) and any(
                p.rows is None or p.rows(seg, layers) for p in decl):
            name = _shown(seg)
            if name not in names:
                names.append(name)
    return names


def _pasted(diag, expect: dict, node, judges: dict[str, tuple[Paste, ...]]) -> list[Finding]:
    out: dict[tuple[str, str], Finding] = {}
    # Device -> link layer, for the judges that tell a RoCE port from an InfiniBand one (show_gids, ibdev2netdev).
    layers = _link_layers(diag) if any(seg.kind in judges and seg.kind not in _PORT_FILES for seg in diag.segments) else {}
    for seg in diag.segments:
        decl = judges.get(seg.kind)
        if not decl or _filtered(seg.command) and seg.kind not in _ROWS_ONLY:
            continue  # `ibstat | grep State`: a filtered output proves nothing missing
        found: list[Finding] = []
        for paste in decl:
            try:
                found += paste.judge(seg, expect, node, layers)
            except Exception:  # noqa: BLE001 - an odd paste (or a plugin's broken judge) never breaks the log's diagnosis
                continue
        shown = _shown(seg)
        for f in found:
            n, text = _locate(seg, f)
            ev = {"file": seg.file, "line": n, "text": text[:400], "host": None, "rank": None, "time": None}
            have = out.get((f.code, f.subject))
            if have is not None:
                if len(have.data["evidence"]) < 3:
                    have.data["evidence"].append(ev)
                continue
            data = {**f.data, "evidence": [ev], "pasted": seg.kind, "command": seg.command}
            # The judges name their source ("not in cmd/lsmod.txt"): here that is the paste.
            message = re.sub(r"\bcmd/[\w.-]+\.txt\b", "the pasted output", f.message)
            out[(f.code, f.subject)] = replace(f, message=f"pasted `{shown}` output: {message}", data=data)
    for f in _gids_empty(diag):
        out.setdefault((f.code, f.subject), f)
    return list(out.values())


_IBV_DEVICES_ROW = re.compile(r"^\s{0,16}([A-Za-z][\w.-]{0,63})\s{1,40}([0-9a-fA-F]{16})\s*$", re.MULTILINE)


def _gids_empty(diag) -> list[Finding]:
    """A `show_gids` that lists no GID at all (`n_gids_found=0`) beside a device list (`ibv_devices`, ibstat,
    ibv_devinfo, `rdma link`) that shows RDMA devices (issue 30: a silent pass before): the devices are there
    and no port has an address a peer could reach (in a pod: no RDMA netdev in its network namespace, a CNI
    such as calico's that gives none; on a node: ports without an IP). Nothing can connect over RDMA."""
    tables = [seg for seg in diag.segments if seg.kind == "show_gids" and re.search(r"n_gids_found=0\b", seg.text)]
    if not tables:
        return []
    from rdmadoctor.parsers.netdev import parse_show_gids

    seg = tables[0]
    if parse_show_gids(seg.text).value:
        return []
    devices: list[str] = []
    for other in diag.segments:
        names = ([m.group(1) for m in _IBV_DEVICES_ROW.finditer(other.text)] if other.kind == "ibv_devices"
                 else [d.name for d in _port_list(other.kind, other.text)] if other.kind in _PORT_FILES else [])
        devices += [n for n in names if n not in devices and n != "device"]
    if not devices:
        return []
    lines = seg.text.split("\n")
    at = next((i for i, x in enumerate(lines) if "n_gids_found" in x), 0)
    ev = {"file": seg.file, "line": seg.line + at, "text": lines[at][:400], "host": None, "rank": None, "time": None}
    shown = ", ".join(devices[:8]) + (", ..." if len(devices) > 8 else "")
    return [Finding(ROCE_NO_V2_GID.code, ERROR, shown,
                    f"pasted `show_gids` output lists no GID at all (n_gids_found=0) while the pasted device list shows "
                    f"{shown}: no port has an address a peer can reach, so RDMA cannot connect (NCCL falls back to "
                    "sockets or fails in ibv_modify_qp). Expected: a RoCE v2 GID with an IPv4 address on each port NCCL uses.",
                    "Give each RDMA port's netdev an IP address (on a node: `ip addr add <ip>/<prefix> dev <netdev>`); in a "
                    "Kubernetes pod, attach the RDMA NIC's netdev to the pod (an SR-IOV or macvlan network from Multus, or "
                    "hostNetwork) rather than the cluster CNI's veth alone; then `show_gids` in the pod lists v2 GIDs.",
                    data={"devices": devices, "evidence": [ev], "pasted": "show_gids", "command": seg.command})]
