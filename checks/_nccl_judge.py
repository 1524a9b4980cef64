"""nccl.env's judges: the facts of checks/_nccl_probe.py against the expectations, read with NCCL's
own rules (checks/_nccl_rules.py), into findings with the codes of rdmadoctor/core/codes/nccl.py."""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Iterable

from rdmadoctor.checks._nccl_probe import HcaPort, NcclFacts, NetIf
from rdmadoctor.checks._nccl_rules import (
    HcaEntryReport,
    c_strtoll,
    clip,
    master_addr_error,
    nccl_auto_interfaces,
    numeric_exact,
    parse_if_list,
    select_hcas,
    select_interfaces,
)
from rdmadoctor.checks._rdma import ROCE_V2
from rdmadoctor.core.codes.nccl import (
    IWARP_NCCL_IB,
    NCCL_ENV_INFO,
    NCCL_ENV_INVALID,
    NCCL_IB_DISABLED_BY_ENV,
    NCCL_IB_GID_INDEX_BAD,
    NCCL_IB_GID_INDEX_UNKNOWN,
    NCCL_IB_HCA_NO_MATCH,
    NCCL_IB_HCA_PREFIX,
    NCCL_IB_HCA_UNKNOWN,
    NCCL_MASTER_ADDR_BAD,
    NCCL_SOCKET_IFNAME_MTU_LOW,
    NCCL_SOCKET_IFNAME_NO_ADDR,
    NCCL_SOCKET_IFNAME_NO_MATCH,
    NCCL_SOCKET_IFNAME_SLOW,
    NCCL_SOCKET_IFNAME_UNKNOWN,
    NCCL_SOCKET_IFNAME_UNSET,
    NCCL_SOCKET_SPEED_NOT_REPORTED,
    NCCL_SOCKET_SPEED_UNKNOWN,
    NCCL_SOCKET_TRANSPORT,
)
from rdmadoctor.core.model import ERROR, INFO, UNKNOWN, WARNING, Finding, PodChange
from rdmadoctor.core.words import count


def _yaml_env(name: str, value: str) -> str:
    return f'env:\n- name: {name}\n  value: "{value}"'


def _shown(facts: NcclFacts, name: str) -> str:
    where = facts.origin.get(name, "env")
    return f"{name}={clip(facts.settings[name], 80)}" + ("" if where == "env" else f" (from {where})")


def _entry_problem(r: HcaEntryReport) -> str | None:
    e = r.entry
    hint = " (NCCL does not trim spaces)" if e.prefix != e.prefix.strip() else ""
    odd = next((c for c in e.prefix if not (c.isascii() and c.isprintable())), None)
    if odd is not None:
        # A no-break space from a copied web page, a byte that is not UTF-8, a control character:
        # no device name holds one, and NCCL compares bytes.
        if odd == "\ufffd":
            what = "a byte that is not UTF-8"
        elif 0xDC80 <= ord(odd) <= 0xDCFF:  # os.environ's surrogateescape: the raw byte
            what = f"the byte 0x{ord(odd) - 0xDC00:02X}, not UTF-8"
        else:
            import unicodedata

            called = unicodedata.name(odd, "").lower()
            what = f"the character U+{ord(odd):04X}" + (f" ({called})" if called else "")
        hint = f" (it holds {what}; no device name has one: retype the value)"
    if not r.devices:
        return f"'{e.text()}' matches no device{hint}"
    if not r.ports:
        return f"'{e.text()}': {', '.join(r.devices)} has no port {e.port}"
    if not any(p.active for p in r.ports):
        states = ", ".join(f"{p.subject} {p.state or 'state unknown'}" for p in r.ports)
        return f"'{e.text()}' names no ACTIVE port ({states})"
    return None


def _misread_ports(facts: NcclFacts, value: str) -> list[Finding]:
    """A port NCCL's atoi cannot hold (``mlx5_0:99999999999``) is read as something else."""
    out = []
    for e in parse_if_list(value).entries:
        why = e.port_misread()
        if why:
            out.append(
                Finding(
                    NCCL_ENV_INVALID.code,
                    WARNING,
                    "NCCL_IB_HCA",
                    f"{_shown(facts, 'NCCL_IB_HCA')}: entry '{clip(e.prefix)}': {why}; expected a port number "
                    "(1 for the first port).",
                    f"Write the port as a small number, e.g. NCCL_IB_HCA={clip(e.prefix)}:1, or leave the port out "
                    "to use every ACTIVE port of the device.",
                )
            )
    return out


def _judge_hca(facts: NcclFacts, value: str, compute_hcas: object = None) -> list[Finding]:
    return _misread_ports(facts, value) + _judge_hca_selection(facts, value, compute_hcas)


def _judge_hca_selection(facts: NcclFacts, value: str, compute_hcas: object = None) -> list[Finding]:
    subj = "NCCL_IB_HCA"
    shown = _shown(facts, subj)
    if facts.ports is None:
        return [Finding(NCCL_IB_HCA_UNKNOWN.code, UNKNOWN, subj, f"{shown}: the RDMA devices are unknown, so what it selects is unknown.")]
    sel = select_hcas(value, facts.ports)
    active = [p for p in facts.ports if p.active]
    active_txt = ", ".join(p.subject for p in active) or "none"
    # iWARP devices are never suggested: NET/IB cannot connect them (IWARP_NCCL_IB).
    active_devs = sorted({p.device for p in active if not p.iwarp})
    note = "the ACTIVE devices of this node; keep only the compute HCAs"
    if isinstance(compute_hcas, (list, tuple)) and compute_hcas:
        # The profile says which HCAs are for NCCL (storage and management NICs are not).
        meant = [d for d in active_devs if any(d.startswith(str(c)) for c in compute_hcas)]
        if meant:
            active_devs, note = meant, "the ACTIVE compute HCAs of this node (compute_hcas in the config)"
    fix_value = "=" + ",".join(active_devs) if active_devs else ""
    remedy = (
        _yaml_env(subj, fix_value) + f"   # {note}"
        if fix_value
        else "This node has no ACTIVE RDMA port: fix the ports first (see ib.ports)."
    )
    pod = PodChange(env=((subj, fix_value, note),)) if fix_value else None
    out: list[Finding] = []
    checked = [] if sel.lst.exclude else [(r, _entry_problem(r)) for r in sel.entries]
    problems = [(r, why) for r, why in checked if why]
    missing = [why for r, why in problems if not r.devices]
    if not sel.selected:
        if sel.lst.exclude:
            why = "the exclusion leaves no ACTIVE port"
        elif not sel.entries:
            why = "it names no device"
        else:
            why = "; ".join(w for _, w in problems) or "no entry matches an ACTIVE port"
        out.append(
            Finding(
                NCCL_IB_HCA_NO_MATCH.code,
                ERROR,
                subj,
                f"{shown} selects no ACTIVE port: {why}. ACTIVE ports: {active_txt}. Expected at least one; "
                "NCCL will fall back to TCP sockets.",
                remedy,
                data={"active_ports": [p.subject for p in active]},
                pod=pod,
            )
        )
    else:
        if missing:
            out.append(
                Finding(
                    NCCL_IB_HCA_NO_MATCH.code,
                    ERROR,
                    subj,
                    f"{shown}: {'; '.join(missing)}. ACTIVE ports: {active_txt}. Expected every entry to name a "
                    "device of this node.",
                    remedy,
                    pod=pod,
                )
            )
        down = [why for r, why in problems if r.devices]
        if down:
            out.append(
                Finding(
                    NCCL_IB_HCA_NO_MATCH.code,
                    WARNING,
                    subj,
                    f"{shown}: {'; '.join(down)}: NCCL skips it and runs on "
                    f"{count(len(sel.selected), 'port')} ({', '.join(p.subject for p in sel.selected)}).",
                    "Bring the port up (see ib.ports), or drop it from NCCL_IB_HCA.",
                )
            )
    if sel.lst.exclude:
        for r in sel.entries:
            if not r.devices:
                out.append(Finding(NCCL_ENV_INFO.code, INFO, subj, f"{shown}: the exclusion '{r.entry.text()}' matches no device and excludes nothing."))
    for r in sel.entries:
        if r.others:
            verb = "excludes" if sel.lst.exclude else "selects"
            exact = ("^=" if sel.lst.exclude else "=") + ",".join(x.entry.text() for x in sel.entries)
            out.append(
                Finding(
                    NCCL_IB_HCA_PREFIX.code,
                    INFO,
                    subj,
                    f"{shown}: NCCL prefix-matches, so '{r.entry.text()}' also {verb} {', '.join(r.others)}.",
                    f"For exact names: NCCL_IB_HCA={exact}",
                )
            )
    if sel.selected:
        out.append(Finding(NCCL_ENV_INFO.code, INFO, subj, f"{shown}: NCCL will use {', '.join(p.subject for p in sel.selected)}."))
    return out


def _used_ports(facts: NcclFacts) -> list[HcaPort]:
    if facts.ports is None:
        return []
    value = facts.settings.get("NCCL_IB_HCA")
    if value:
        return list(select_hcas(value, facts.ports).selected)
    return [p for p in facts.ports if p.active]


def _net_not_ib(facts: NcclFacts) -> bool:
    """NCCL_NET names another network than IB (Socket, or a plugin such as aws-ofi-nccl's "AWS Libfabric")."""
    net = facts.settings.get("NCCL_NET")
    return bool(net and net.lower() != "ib")


def _judge_disable(facts: NcclFacts, expect: dict | None = None) -> tuple[list[Finding], bool]:
    out: list[Finding] = []
    disabled_by = []
    raw = facts.settings.get("NCCL_IB_DISABLE")
    if raw:  # NCCL treats an empty value as unset
        v = c_strtoll(raw)
        if v:
            disabled_by.append(_shown(facts, "NCCL_IB_DISABLE"))
        if v is None:
            out.append(
                Finding(
                    NCCL_ENV_INVALID.code,
                    WARNING,
                    "NCCL_IB_DISABLE",
                    f"{_shown(facts, 'NCCL_IB_DISABLE')} is out of range for a 64-bit integer: NCCL ignores it and "
                    "keeps its default 0 (IB enabled); expected 0 or 1.",
                    "Write NCCL_IB_DISABLE=0 (or remove it) to use RDMA, 1 to turn it off.",
                )
            )
        elif not numeric_exact(raw):
            out.append(
                Finding(
                    NCCL_ENV_INVALID.code,
                    WARNING,
                    "NCCL_IB_DISABLE",
                    f"{_shown(facts, 'NCCL_IB_DISABLE')} is not a number; NCCL reads it as {v if v is not None else 'its default'}"
                    f"{' (IB disabled)' if v else ' (IB enabled)'}; expected 0 or 1.",
                    "Write NCCL_IB_DISABLE=0 (or remove it) to use RDMA.",
                )
            )
    net = facts.settings.get("NCCL_NET")
    if net and net.lower() == "socket":
        disabled_by.append(_shown(facts, "NCCL_NET"))
    if not disabled_by:
        return out, False
    active = [p for p in facts.ports or () if p.active and not p.iwarp]
    iwarp = [p for p in facts.ports or () if p.active and p.iwarp]
    what = " and ".join(disabled_by)
    if (expect or {}).get("rdma_required") is False:
        out.append(
            Finding(
                NCCL_ENV_INFO.code,
                INFO,
                disabled_by[0].split("=")[0],
                f"{what}: NCCL uses TCP sockets, as the profile expects (rdma_required = false)"
                + (f"; the ACTIVE RDMA {'port' if len(active) == 1 else 'ports'} {', '.join(p.subject for p in active)} {'stays' if len(active) == 1 else 'stay'} unused." if active else "."),
            )
        )
    elif active:
        out.append(
            Finding(
                NCCL_IB_DISABLED_BY_ENV.code,
                ERROR,
                disabled_by[0].split("=")[0],
                f"{what}: NCCL will use TCP sockets although {count(len(active), 'RDMA port')} {'is' if len(active) == 1 else 'are'} ACTIVE "
                f"({', '.join(p.subject for p in active)}); expected RDMA enabled.",
                "Remove NCCL_IB_DISABLE / NCCL_NET=Socket from the pod spec's env, the image's /etc/nccl.conf and "
                "the launch script.",
            )
        )
    elif iwarp:
        out.append(
            Finding(
                NCCL_ENV_INFO.code,
                INFO,
                disabled_by[0].split("=")[0],
                f"{what}: NCCL uses TCP sockets, which is right here: the ACTIVE RDMA {'port' if len(iwarp) == 1 else 'ports'} "
                f"{', '.join(p.subject for p in iwarp)} {'is' if len(iwarp) == 1 else 'are'} iWARP, which NCCL's IB transport cannot connect.",
            )
        )
    else:
        out.append(Finding(NCCL_ENV_INFO.code, INFO, disabled_by[0].split("=")[0], f"{what}: NCCL uses TCP sockets (no ACTIVE RDMA port here anyway)."))
    return out, True


def _judge_iwarp(facts: NcclFacts) -> list[Finding]:
    """NET/IB would take an iWARP port (init.cc keeps any ACTIVE InfiniBand or Ethernet port)."""
    taken = [p for p in _used_ports(facts) if p.iwarp]
    if not taken:
        return []
    names = ", ".join(p.subject for p in taken)
    hca = facts.settings.get("NCCL_IB_HCA")
    how = f"{_shown(facts, 'NCCL_IB_HCA')} selects" if hca else "NCCL_IB_HCA is unset, so NCCL's IB transport takes every ACTIVE port, including"
    others = sorted({p.device for p in facts.ports or () if p.active and not p.iwarp})
    if others:
        value = "=" + ",".join(others)
        remedy = _yaml_env("NCCL_IB_HCA", value) + "   # the ACTIVE InfiniBand / RoCE devices of this node, without the iWARP ones"
        pod = PodChange(env=(("NCCL_IB_HCA", value, "the ACTIVE InfiniBand / RoCE devices, without the iWARP RNIC"),))
    else:
        remedy = (
            'env:\n- name: NCCL_IB_DISABLE\n  value: "1"   # NCCL trains over TCP sockets on purpose; set NCCL_SOCKET_IFNAME to the '
            "RNIC's netdev to use its bandwidth. Or a libfabric net plugin (aws-ofi-nccl, FI_PROVIDER=verbs): `rdmadoctor explain IWARP_NCCL_IB`"
        )
        pod = PodChange(env=(("NCCL_IB_DISABLE", "1", "the node's only RDMA ports are iWARP, which NCCL's IB transport cannot connect"),), whole=False)
    return [
        Finding(
            IWARP_NCCL_IB.code,
            ERROR,
            "NCCL_IB_HCA",
            f"{how} {names}: iWARP, which NCCL lists as a RoCE device, and the job fails at its first inter-node "
            "connection ('Call to ibv_modify_qp failed with 22 Invalid argument', then 'unhandled system error'), "
            "because iWARP QPs are connected only through the iWARP connection manager. Expected NET/IB to use "
            "InfiniBand or RoCE ports only.",
            remedy,
            data={"iwarp_ports": [p.subject for p in taken], "other_devices": others},
            pod=pod,
        )
    ]


def gid_index_problem(subject: str, gids, idx: int) -> tuple[str | None, int | None]:
    """GID ``idx`` of a RoCE port (``subject``, its ``gids``) as NCCL_IB_GID_INDEX would use it: what is wrong
    with it (None: a routable RoCE v2 GID), and the index of the port's RoCE v2 IPv4 GID (None: it has none).
    The node check and a log's setting against a pasted GID table (checks/logs.py) judge it alike."""
    gid = next((g for g in gids if g.index == idx), None)
    v4 = [g.index for g in gids if g.type == ROCE_V2 and g.ipv4]
    hint = f"; its RoCE v2 IPv4 GID is index {v4[0]}" if v4 else "; it has no RoCE v2 IPv4 GID"
    if gid is None:
        problem: str | None = f"{subject} has no GID {idx}{hint}"
    elif gid.type != ROCE_V2:
        problem = f"GID {idx} of {subject} is {gid.type or 'of unknown type'} ({gid.gid}){hint}"
    elif gid.gid.lower().startswith("fe80"):
        problem = f"GID {idx} of {subject} is link-local ({gid.gid}), not routable{hint}"
    else:
        problem = None
    return problem, (v4[0] if v4 else None)


def _judge_gid_index(facts: NcclFacts) -> list[Finding]:
    subj = "NCCL_IB_GID_INDEX"
    raw = facts.settings.get(subj)
    if not raw:
        return []
    shown = _shown(facts, subj)
    idx = c_strtoll(raw)
    if idx is None:
        return [
            Finding(
                NCCL_ENV_INVALID.code,
                WARNING,
                subj,
                f"{shown} is out of range for a 64-bit integer: NCCL ignores it and keeps its default (NCCL 2.21+ "
                "picks the RoCE v2 GID of each port itself; older versions use GID 0, RoCE v1 or link-local); "
                "expected a GID index such as 3.",
                "Set the index of the RoCE v2 GID with the IPv4 address (`show_gids`), or remove NCCL_IB_GID_INDEX "
                "on NCCL 2.21+.",
            )
        ]
    if idx < 0:
        return [Finding(NCCL_ENV_INFO.code, INFO, subj, f"{shown}: NCCL picks the GID itself (NCCL 2.21+).")]
    roce = [p for p in _used_ports(facts) if p.link_layer == "Ethernet" and not p.iwarp]
    if facts.ports is None:
        return [Finding(NCCL_IB_GID_INDEX_UNKNOWN.code, UNKNOWN, subj, f"{shown}: the RDMA devices are unknown, so the GID cannot be checked.")]
    if not roce:
        return [Finding(NCCL_ENV_INFO.code, INFO, subj, f"{shown} has no effect here: NCCL uses no RoCE port on this node.")]
    read_as = "" if numeric_exact(raw) else f" (NCCL reads '{raw}' as {idx})"
    bad, unknown = [], []
    good_idx: set[int] = set()
    for p in roce:
        if not p.gids_known:
            unknown.append(p.subject)
            continue
        problem, v4 = gid_index_problem(p.subject, p.gids, idx)
        if v4 is not None:
            good_idx.add(v4)
        if problem is not None:
            bad.append(problem)
    out = []
    if bad:
        if len(good_idx) == 1:
            remedy = _yaml_env(subj, str(next(iter(good_idx))))
            pod = PodChange(env=((subj, str(next(iter(good_idx))), ""),))
        else:
            pod = None
            remedy = "Remove NCCL_IB_GID_INDEX (NCCL 2.21+ picks the RoCE v2 IPv4 GID of each port), or give every port's netdev an IPv4 address so the index is the same on all."
        out.append(
            Finding(
                NCCL_IB_GID_INDEX_BAD.code,
                ERROR,
                subj,
                f"{shown}{read_as}: {'; '.join(bad)}. Expected a RoCE v2 GID with an IPv4 address on every port NCCL uses.",
                remedy,
                pod=pod,
            )
        )
    if unknown:
        out.append(
            Finding(
                NCCL_IB_GID_INDEX_UNKNOWN.code,
                UNKNOWN,
                subj,
                f"{shown}: the GID tables of {', '.join(unknown)} were not recorded; whether GID {idx} is RoCE v2 is unknown.",
                "Record them: `show_gids > cmd/show_gids.txt`, or use `rdmadoctor collect`.",
            )
        )
    if not out:
        out.append(Finding(NCCL_ENV_INFO.code, INFO, subj, f"{shown}: RoCE v2 with IPv4 on {', '.join(p.subject for p in roce)}."))
    return out


def _judge_socket(facts: NcclFacts, expect: dict | None = None, sockets: bool = False) -> list[Finding]:
    """NCCL_SOCKET_IFNAME: up, with an address; when NCCL's data goes over sockets (``sockets``), also
    fast enough (socket_min_gbps) with the MTU the pool wants (socket_min_mtu)."""
    expect = expect or {}
    subj = "NCCL_SOCKET_IFNAME"
    value = facts.settings.get(subj)
    socket_pool = expect.get("rdma_required") is False
    if value is None or len(value) <= 1:
        out = []
        if value is not None:
            out.append(Finding(NCCL_ENV_INFO.code, INFO, subj, f"{_shown(facts, subj)} is ignored by NCCL (it needs more than 1 character); NCCL picks the interface itself."))
        if socket_pool and facts.interfaces is not None:
            out.extend(_judge_auto_interfaces(facts, expect))
        return out
    shown = _shown(facts, subj)
    if facts.interfaces is None:
        return [
            Finding(
                NCCL_SOCKET_IFNAME_UNKNOWN.code,
                UNKNOWN,
                subj,
                f"{shown}: the network interfaces are unknown ({facts.interfaces_source or 'not read'}).",
            )
        ]
    matched, running = select_interfaces(value, facts.interfaces)
    src = f" [{facts.interfaces_source}]" if facts.interfaces_source else ""
    if not running:
        undecided = [i for i in matched if i.up is None]
        up = [i for i in facts.interfaces if i.up]
        if undecided:
            return [
                Finding(
                    NCCL_SOCKET_IFNAME_UNKNOWN.code,
                    UNKNOWN,
                    subj,
                    f"{shown} matches {', '.join(i.name for i in undecided)}, whose state is unknown{src}.",
                )
            ]
        seen = (
            "matches only " + ", ".join(f"{i.name} (down)" for i in matched)
            if matched
            else "matches no interface"
        )
        candidates = [i.name for i in _fastest_first(up) if not i.name.startswith(("lo", "docker", "virbr"))]
        remedy = (
            _yaml_env(subj, "=" + candidates[0]) + f"   # an interface that is up here: {', '.join(candidates)}"
            if candidates
            else "No interface other than loopback is up here: check the pod's network (CNI, Multus) first."
        )
        pod = (
            PodChange(env=((subj, "=" + candidates[0], f"an interface that is up here: {', '.join(candidates)}"),))
            if candidates
            else None
        )
        return [
            Finding(
                NCCL_SOCKET_IFNAME_NO_MATCH.code,
                ERROR,
                subj,
                f"{shown} {seen}; expected at least one interface that is up. Up: "
                f"{', '.join(i.name for i in up) or 'none'}{src}.",
                remedy,
                pod=pod,
                data={"matched": [i.name for i in matched], "up": [i.name for i in up]},
            )
        ]
    if all(i.addresses is not None for i in running) and not any(i.addresses for i in running):
        return [
            Finding(
                NCCL_SOCKET_IFNAME_NO_ADDR.code,
                ERROR,
                subj,
                f"{shown} matches {', '.join(i.name for i in running)} (up) but none has an IP address; "
                "NCCL only uses interfaces with an IPv4/IPv6 address.",
                f"ip addr add <ip>/<prefix> dev {running[0].name}   # or fix the IPAM of the pod network",
            )
        ]
    usable = [i for i in running if i.addresses is None or i.addresses]
    if sockets or socket_pool:
        return _judge_socket_data(facts, expect, shown, usable, src)
    return [Finding(NCCL_ENV_INFO.code, INFO, subj, f"{shown}: NCCL will use {_addressed(usable)}{src}.")]


def _addressed(interfaces: Iterable[NetIf]) -> str:
    return ", ".join(i.name + (f" ({', '.join(i.addresses)})" if i.addresses else "") for i in interfaces)


def _speed_mtu(i: NetIf) -> str:
    speed = f"{i.speed_mbps / 1000:g} Gb/s" if i.speed_mbps else "speed unknown"
    return f"{i.name} at {speed}" + (f", MTU {i.mtu}" if i.mtu is not None else "")


def _fastest_first(interfaces: Iterable[NetIf]) -> list[NetIf]:
    return sorted(interfaces, key=lambda i: -(i.speed_mbps or 0))


def _judge_auto_interfaces(facts: NcclFacts, expect: dict) -> list[Finding]:
    """A socket pool without NCCL_SOCKET_IFNAME: judge what NCCL picks by itself."""
    subj = "NCCL_SOCKET_IFNAME"
    src = f" [{facts.interfaces_source}]" if facts.interfaces_source else ""
    picked = nccl_auto_interfaces(facts.interfaces or ())
    real = [i for i in picked if not i.name.startswith("lo")]
    if not real:
        return [
            Finding(
                NCCL_SOCKET_IFNAME_NO_MATCH.code,
                ERROR,
                subj,
                f"NCCL_SOCKET_IFNAME is unset and no interface but loopback is up with an address{src}: NCCL's sockets "
                "cannot reach another node; expected the pod network's interface.",
                "Check the pod's network (CNI, Multus): `ip -br addr` in the pod should list an interface with an address.",
            )
        ]
    if len(real) > 1:
        best = _fastest_first(real)[0]
        return [
            Finding(
                NCCL_SOCKET_IFNAME_UNSET.code,
                WARNING,
                subj,
                f"NCCL_SOCKET_IFNAME is unset in a socket pool: NCCL takes {', '.join(i.shown() for i in real)} and spreads "
                f"its traffic over all of them{src}; expected one named interface.",
                _yaml_env(subj, "=" + best.name) + "   # the fastest interface here",
                pod=PodChange(env=((subj, "=" + best.name, "the fastest interface here"),)),
                data={"interfaces": [i.name for i in real]},
            )
        ] + _judge_socket_data(facts, expect, "NCCL_SOCKET_IFNAME (unset)", real, src)
    return _judge_socket_data(facts, expect, "NCCL_SOCKET_IFNAME (unset)", real, src)


def _judge_socket_data(facts: NcclFacts, expect: dict, shown: str, used: list[NetIf], src: str) -> list[Finding]:
    """The interfaces NCCL's socket transport moves the job's data over: speed, MTU, the verdict."""
    subj = "NCCL_SOCKET_IFNAME"
    out: list[Finding] = []
    min_gbps = expect.get("socket_min_gbps")
    min_mtu = expect.get("socket_min_mtu")
    others = [i for i in _fastest_first(facts.interfaces or ()) if i.usable is not False and i not in used and not i.name.startswith(("lo", "docker", "virbr"))]
    if isinstance(min_gbps, (int, float)) and not isinstance(min_gbps, bool):
        slow = [i for i in used if i.speed_mbps is not None and i.speed_mbps < min_gbps * 1000]
        unknown = [i for i in used if i.speed_mbps is None]
        if slow:
            fast = [i for i in others if i.speed_mbps is not None and i.speed_mbps >= min_gbps * 1000]
            keep = [i for i in used if i not in slow and i not in unknown]
            target = (keep or fast)[:1]
            if target:
                remedy = _yaml_env(subj, "=" + target[0].name) + f"   # {target[0].shown()}"
                pod = PodChange(env=((subj, "=" + target[0].name, f"the interface at >= {min_gbps:g} Gb/s here"),))
            else:
                remedy = (
                    f"No interface here runs at {min_gbps:g} Gb/s: check the link (`ethtool {slow[0].name}`), the cable and "
                    "the switch port, or the instance type; if the pool is slower by design, lower socket_min_gbps."
                )
                pod = None
            out.append(
                Finding(
                    NCCL_SOCKET_IFNAME_SLOW.code,
                    ERROR,
                    subj,
                    f"{shown}: NCCL's sockets would carry the job's data over {', '.join(i.shown() for i in used)}"
                    + (", spread over all of them" if len(used) > 1 else "")
                    + ", and "
                    + ", ".join(f"{i.name} runs at {(i.speed_mbps or 0) / 1000:g} Gb/s" for i in slow)  # slow: a known speed
                    + f"; expected at least {min_gbps:g} Gb/s (socket_min_gbps) on every interface NCCL uses"
                    + (f". Faster here: {', '.join(i.shown() for i in fast)}" if fast else "")
                    + f"{src}.",
                    remedy,
                    pod=pod,
                    data={"slow": {i.name: i.speed_mbps for i in slow}, "min_gbps": min_gbps},
                )
            )
        silent = [i for i in unknown if i.speed_not_reported]
        unknown = [i for i in unknown if not i.speed_not_reported]
        if silent:
            names = ", ".join(i.name for i in silent)
            out.append(
                Finding(
                    NCCL_SOCKET_SPEED_NOT_REPORTED.code,
                    WARNING,
                    subj,
                    f"{shown}: {names} reports no speed (/sys/class/net/{silent[0].name}/speed is -1: a virtual NIC such as "
                    f"virtio-net or a cloud ENI; NCCL assumes 10 Gb/s), so the pool's {min_gbps:g} Gb/s (socket_min_gbps) "
                    f"cannot be checked here; expected a speed to compare, or a measurement{src}.",
                    NCCL_SOCKET_SPEED_NOT_REPORTED.fix.replace("eth0", silent[0].name),
                    data={"not_reported": [i.name for i in silent], "min_gbps": min_gbps},
                )
            )
        if unknown:
            out.append(
                Finding(
                    NCCL_SOCKET_SPEED_UNKNOWN.code,
                    UNKNOWN,
                    subj,
                    f"{shown}: the speed of {', '.join(i.name for i in unknown)} is unknown (/sys/class/net/<if>/speed "
                    f"unreadable or -1; NCCL assumes 10 Gb/s); the pool expects at least {min_gbps:g} Gb/s{src}.",
                    NCCL_SOCKET_SPEED_UNKNOWN.fix,
                )
            )
    if isinstance(min_mtu, int) and not isinstance(min_mtu, bool):
        low = [i for i in used if i.mtu is not None and i.mtu < min_mtu]
        if low:
            out.append(
                Finding(
                    NCCL_SOCKET_IFNAME_MTU_LOW.code,
                    WARNING,
                    subj,
                    f"{shown}: MTU " + ", ".join(f"{i.mtu} on {i.name}" for i in low) + f"; expected at least {min_mtu} "
                    f"(socket_min_mtu){src}.",
                    f"ip link set dev {low[0].name} mtu {min_mtu}   # persist it (netplan, NetworkManager or the CNI "
                    "config); every hop must allow it",
                    data={"mtu": {i.name: i.mtu for i in low}, "min_mtu": min_mtu},
                )
            )
    # A NIC that reports no speed leaves the pool ready (it is what socket pools are built on):
    # the verdict stands beside the warning that asks for a measurement.
    if not any(f.severity in (ERROR, WARNING, UNKNOWN) and f.code != NCCL_SOCKET_SPEED_NOT_REPORTED.code for f in out):
        verdict = "ready to train over sockets on " + ", ".join(
            i.name + (f" at {i.speed_mbps / 1000:g} Gb/s" if i.speed_mbps else " (speed not reported)" if i.speed_not_reported else "")
            for i in used
        )
        out.append(
            Finding(
                NCCL_SOCKET_TRANSPORT.code,
                INFO,
                subj,
                f"{shown}: NCCL will use {_addressed(used)}{src}, and the data between nodes goes over TCP there ("
                + ", ".join(_speed_mtu(i) for i in used)
                + f"): {verdict}.",
                data={"verdict": verdict, "interfaces": [{**i.to_json(), "speed_mbps": i.speed_mbps} for i in used]},
            )
        )
    return out


def _judge_master(facts: NcclFacts) -> list[Finding]:
    out = []
    addr = facts.settings.get("MASTER_ADDR")
    if addr is not None:
        why = master_addr_error(addr)
        if why:
            out.append(
                Finding(
                    NCCL_MASTER_ADDR_BAD.code,
                    ERROR,
                    "MASTER_ADDR",
                    f"MASTER_ADDR={addr!r} {why}; expected the hostname or IP of rank 0.",
                    NCCL_MASTER_ADDR_BAD.fix,
                )
            )
    port = facts.settings.get("MASTER_PORT")
    if port is not None and not (re.fullmatch(r"[0-9]{1,5}", port) and 1 <= int(port) <= 65535):
        out.append(
            Finding(
                NCCL_MASTER_ADDR_BAD.code,
                ERROR,
                "MASTER_PORT",
                f"MASTER_PORT={port!r} is not a port number; expected 1-65535.",
                NCCL_MASTER_ADDR_BAD.fix,
            )
        )
    return out


def _sockets_carry_data(facts: NcclFacts, ib_off: bool) -> bool:
    """Will NCCL move the job's data over TCP: IB off, or no ACTIVE port NET/IB can use."""
    if ib_off:
        return True
    if facts.ports is None:
        return False  # unknown: no speed verdict on a guess
    return not any(p.active and not p.iwarp for p in facts.ports)


def judge_nccl(facts: NcclFacts, expect: dict) -> list[Finding]:
    out: list[Finding] = []
    for why in facts.conf_problems:
        out.append(Finding(NCCL_ENV_INVALID.code, WARNING, "nccl.conf", why, "Write KEY=VALUE with nothing around '='."))
    nccl = {k: v for k, v in facts.settings.items() if k.startswith("NCCL_")}
    if not nccl:
        active = [p.subject for p in facts.ports or () if p.active]
        what = f" ({count(len(active), 'ACTIVE port')}: {', '.join(active)})" if active else ""
        out.append(Finding(NCCL_ENV_INFO.code, INFO, "env", f"no NCCL settings: NCCL picks all HCAs{what}."))
        out.extend(_judge_iwarp(facts))
        out.extend(_judge_socket(facts, expect, _sockets_carry_data(facts, False)))
    else:
        disable, ib_off = _judge_disable(facts, expect)
        out.extend(disable)
        hca = facts.settings.get("NCCL_IB_HCA")
        if hca and not ib_off:  # NCCL reads an empty value as unset
            out.extend(_judge_hca(facts, hca, expect.get("compute_hcas")))
        if not ib_off:
            if not _net_not_ib(facts):
                out.extend(_judge_iwarp(facts))
            out.extend(_judge_gid_index(facts))
        out.extend(_judge_socket(facts, expect, _sockets_carry_data(facts, ib_off)))
    out.extend(_judge_master(facts))
    return out
