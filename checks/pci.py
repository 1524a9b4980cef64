"""pci.link: PCIe link speed and width of the GPUs, the HCAs and the bridges above them, and ACS.

Each physical link is judged once, from both of its ends: the expected speed and width are the
lower of the two ends' maxima (a Gen4 HCA in a Gen5 slot is not degraded). ACS is read from
config space for the bridges between a GPU and an HCA below the same root port.
"""

from __future__ import annotations

from rdmadoctor.checks._pci import (
    AMD,
    NVIDIA,
    PCI_DEVICES,
    PciTree,
    acs_from_config,
    acs_redirects,
    bdf_key,
    links_of,
    normalize_bdf,
    probe_pci,
)
from rdmadoctor.core.codes.gpu import (
    PCIE_ACS_ENABLED,
    PCIE_ACS_NO_PEERS,
    PCIE_GPU_LINK_IDLE,
    PCIE_LINK_DEGRADED,
)
from rdmadoctor.core.expect import Expect
from rdmadoctor.core.model import CONFIG, ERROR, INFO, WARNING, Check, Finding, Need
from rdmadoctor.core.record import field, record
from rdmadoctor.core.words import count


@record
class PciLink:
    parent: str | None  # the port above (root port or switch downstream port); None: unknown
    child: str  # the function below
    cur_speed_gts: float | None
    cur_width: int | None
    max_speed_gts: float | None  # the lower of the two ends' maxima
    max_width: int | None
    devices: tuple[str, ...]  # the GPUs / HCAs whose traffic crosses this link
    child_kind: str  # gpu | hca | bridge | device
    child_vendor: int | None = None
    source: str = "sysfs"  # sysfs | lspci


@record
class AcsState:
    bdf: str
    between: tuple[str, ...]  # "GPU0<->mlx5_0", ...; () when not known (no PCI tree)
    ctl: dict[str, bool] | None = field(default=None, compare=False)  # None: unknown; {}: no ACS capability
    source: str | None = None  # config | lspci
    why_unknown: str | None = None


@record
class PciLinkFacts:
    source: str  # sysfs | lspci | none
    links: tuple[PciLink, ...] = ()
    acs: tuple[AcsState, ...] = ()
    notes: tuple[str, ...] = ()
    has_gpus: bool = False
    has_hcas: bool = False
    listing: bool = True  # every device is known (False: a grep of lspci output, devices unknown)


def _lspci_devices(host) -> tuple[list, list[str]]:
    """A recorded ``lspci -vvv``; only in bundles (running it live costs more than the whole check)."""
    if host.live_process and host.kind != "bundle":
        return [], []
    res = host.cmd("lspci")
    if res.text is None:
        return [], []
    from rdmadoctor.parsers.lspci import parse_lspci_vvv

    parsed = parse_lspci_vvv(res.text)
    return (list(parsed.value) if parsed.ok else []), [f"lspci: {w}" for w in parsed.warnings]


def _from_sysfs(host, tree: PciTree) -> PciLinkFacts:
    notes = list(tree.warnings)
    endpoints: list[tuple[str, str, str]] = [(f"GPU{i}", bdf, "gpu") for i, bdf in enumerate(tree.gpus)]
    endpoints += [(name, bdf, "hca") for name, bdf in tree.hcas]
    kinds = {bdf: kind for _, bdf, kind in endpoints}
    users: dict[tuple[str | None, str], list[str]] = {}
    for name, bdf, _ in endpoints:
        fn = tree.get(bdf)
        if fn is None or not fn.detailed:
            notes.append(f"{name} ({bdf}): not in {PCI_DEVICES}, link unknown")
            continue
        if fn.host_bridge is None:
            notes.append(f"{name} ({bdf}): PCI path unknown, only its own link is judged")
        elif len(fn.bridges) % 2 == 0 and fn.bridges:
            notes.append(f"{name} ({bdf}): path {' > '.join(fn.bridges)} is not root port + switch port pairs; bridges above its own link not judged")
        for key in links_of(fn):
            users.setdefault(key, [])
            if name not in users[key]:
                users[key].append(name)
    links = []
    for (parent, child), names in users.items():
        c = tree.get(child)
        p = tree.get(parent)
        if c is None:
            continue
        cur_speed = c.cur_speed_gts if c.cur_speed_gts is not None else (p.cur_speed_gts if p else None)
        cur_width = c.cur_width if c.cur_width is not None else (p.cur_width if p else None)
        maxes_s = [x for x in (c.max_speed_gts, p.max_speed_gts if p else None) if x is not None]
        maxes_w = [x for x in (c.max_width, p.max_width if p else None) if x is not None]
        links.append(
            PciLink(
                parent,
                child,
                cur_speed,
                cur_width,
                min(maxes_s) if maxes_s else None,
                min(maxes_w) if maxes_w else None,
                tuple(names),
                kinds.get(child, "bridge"),
                c.vendor,
            )
        )
    links.sort(key=lambda lk: bdf_key(lk.child))
    for lk in links:
        missing = [n for n, v in (("current speed", lk.cur_speed_gts), ("current width", lk.cur_width),
                                  ("max speed", lk.max_speed_gts), ("max width", lk.max_width)) if v is None]
        if missing:
            notes.append(f"link {lk.parent or '?'} -> {lk.child} ({', '.join(lk.devices)}): {', '.join(missing)} "
                         "not reported by sysfs, not judged")

    # ACS: the bridges below the lowest common ancestor of a GPU and an HCA under one root port.
    between: dict[str, list[str]] = {}
    gpu_fns = [(f"GPU{i}", tree.get(b)) for i, b in enumerate(tree.gpus)]
    hca_fns = [(n, tree.get(b)) for n, b in tree.hcas]
    for gname, g in gpu_fns:
        for hname, h in hca_fns:
            if g is None or h is None or g.chain is None or h.chain is None:
                continue
            if g.host_bridge != h.host_bridge or g.root_port is None or g.root_port != h.root_port:
                continue
            ca, cb = g.chain, h.chain
            k = 0
            while k < min(len(ca), len(cb)) and ca[k] == cb[k]:
                k += 1
            for br in (*ca[k:-1], *cb[k:-1]):
                between.setdefault(br, []).append(f"{gname}<->{hname}")
    acs = []
    lspci = None
    for br in sorted(between, key=bdf_key):
        read = acs_from_config(host.read_bytes(f"{PCI_DEVICES}/{br}/config", 4096))
        state = AcsState(br, tuple(between[br]), read.ctl, "config" if read.ctl is not None else None, read.why_unknown)
        if read.ctl is None:
            if lspci is None:
                devs, warns = _lspci_devices(host)
                notes.extend(warns)
                lspci = {normalize_bdf(d.bdf): d for d in devs if d.bdf != "?"}
            d = lspci.get(br)
            if d is not None and d.acsctl is not None:
                state = AcsState(br, tuple(between[br]), dict(d.acsctl), "lspci")
            else:
                notes.append(f"ACS of {br} unknown: {read.why_unknown}")
        acs.append(state)
    return PciLinkFacts("sysfs", tuple(links), tuple(acs), tuple(notes), bool(tree.gpus), bool(tree.hcas))


def _lspci_kind(desc: str) -> str | None:
    d = desc.lower()
    if ("nvidia" in d or "amd" in d or "advanced micro devices" in d) and (
        "3d controller" in d or "vga compatible" in d or "display controller" in d or "processing accelerators" in d
    ):
        return "gpu"
    if "infiniband controller" in d or ("mellanox" in d and ("ethernet controller" in d or "network controller" in d)):
        return "hca"
    return None


def _from_lspci(devs: list, notes: list[str]) -> PciLinkFacts:
    links = []
    acs = []
    kinds = set()
    for d in devs:
        kind = _lspci_kind(d.description)
        if kind is not None:
            kinds.add(kind)
            vendor = NVIDIA if "nvidia" in d.description.lower() else (AMD if kind == "gpu" else None)
            links.append(
                PciLink(
                    None,
                    normalize_bdf(d.bdf),
                    d.lnksta_speed_gts,
                    d.lnksta_width,
                    d.lnkcap_speed_gts,
                    d.lnkcap_width,
                    (normalize_bdf(d.bdf),),
                    kind,
                    vendor,
                    "lspci",
                )
            )
        # Bridges only: ACS on a multi-function endpoint governs traffic between its own functions.
        if d.acsctl is not None and kind is None and d.bdf != "?" and "bridge" in d.description.lower():
            acs.append(AcsState(normalize_bdf(d.bdf), (), dict(d.acsctl), "lspci"))
    # `lspci -vvv | grep ACSCtl` pasted in a ticket: lines without addresses, one state stands for all.
    loose = [d.acsctl for d in devs if d.bdf == "?" and d.acsctl is not None]
    if loose:
        on = [c for c in loose if acs_redirects(c)]
        notes.append(f"{count(len(loose), 'ACSCtl line')} without a device address, {len(on)} with redirect on")
        acs.append(AcsState("?", (), dict(on[0] if on else loose[0]), "lspci"))
    notes.append("no PCI tree in /sys: links judged from the recorded lspci -vvv, bridges' places unknown")
    listing = any(d.bdf != "?" for d in devs)
    return PciLinkFacts("lspci", tuple(links), tuple(acs), tuple(notes), "gpu" in kinds, "hca" in kinds, listing)


def probe_links(ctx) -> PciLinkFacts:
    tree: PciTree = ctx.get(probe_pci)
    if tree.sysfs:
        return _from_sysfs(ctx.host, tree)
    devs, warns = _lspci_devices(ctx.host)
    if devs:
        return _from_lspci(devs, list(warns))
    return PciLinkFacts("none", notes=tuple(warns))


def _needs_devices(ctx) -> str | None:
    facts: PciLinkFacts = ctx.get(probe_links)
    if facts.source == "none":
        return "no PCI tree in /sys and no recorded lspci -vvv"
    if not facts.has_gpus and not facts.has_hcas and facts.listing:
        return "no GPU or RDMA device on the PCI bus"
    return None


HAS_PCI_DEVICES = Need("pci devices", _needs_devices)


def _link_text(speed: float | None, width: int | None) -> str:
    s = f"{speed:g} GT/s" if speed is not None else "unknown speed"
    w = f"x{width}" if width is not None else "x?"
    return f"{s} {w}"


def judge_links(facts: PciLinkFacts, expect: dict) -> list[Finding]:
    out: list[Finding] = []
    bridges = expect.get("pcie_check_bridges", True)
    for lk in facts.links:
        if lk.child_kind == "bridge" and not bridges:
            continue
        if lk.cur_speed_gts is None or lk.cur_width is None or lk.max_speed_gts is None or lk.max_width is None:
            continue  # "Unknown" or no link files: nothing to compare (kept in the facts)
        slow = lk.cur_speed_gts < lk.max_speed_gts
        narrow = lk.cur_width < lk.max_width
        if not slow and not narrow:
            continue
        seen = _link_text(lk.cur_speed_gts, lk.cur_width)
        want = _link_text(lk.max_speed_gts, lk.max_width)
        if lk.child_kind in ("gpu", "hca"):
            what = lk.devices[0] if lk.devices else lk.child
            where = f"{what}'s link ({lk.parent} -> {lk.child})" if lk.parent else f"{what}'s link ({lk.child})"
        else:
            where = f"link {lk.parent} -> {lk.child} (on the path of {', '.join(lk.devices)})"
        data = {
            "parent": lk.parent,
            "child": lk.child,
            "speed_gts": lk.cur_speed_gts,
            "width": lk.cur_width,
            "max_speed_gts": lk.max_speed_gts,
            "max_width": lk.max_width,
            "source": lk.source,
        }
        # GPUs lower their link speed when idle to save power (NVIDIA and AMD alike) and raise it
        # under load; the lane count does not change. A slow but full-width GPU link is normal.
        if lk.child_kind == "gpu" and lk.child_vendor in (NVIDIA, AMD) and not narrow:
            out.append(
                Finding(
                    PCIE_GPU_LINK_IDLE.code,
                    INFO,
                    lk.child,
                    f"{where}: seen {seen}, capable of {want}; a GPU lowers its link speed when idle "
                    "(it returns to full speed under load).",
                    data=data,
                )
            )
            continue
        severity = ERROR if lk.cur_width * 2 < lk.max_width else WARNING
        out.append(
            Finding(
                PCIE_LINK_DEGRADED.code,
                severity,
                lk.child,
                f"{where}: seen {seen}, expected {want}.",
                PCIE_LINK_DEGRADED.fix.replace("<bdf>", lk.child),
                data=data,
            )
        )
    for st in facts.acs:
        redirects = acs_redirects(st.ctl)
        if not redirects:
            continue
        flags = " ".join(f"{k}{'+' if (st.ctl or {}).get(k) else '-'}" for k in ("ReqRedir", "CmpltRedir"))
        if st.between:
            pairs = ", ".join(st.between[:4]) + (f" and {len(st.between) - 4} more" if len(st.between) > 4 else "")
            where = f"bridge {st.bdf} between {pairs}"
            severity = WARNING
        else:
            name = st.bdf if st.bdf != "?" else "(address not in the grep output)"
            where = f"bridge {name} (where it sits relative to the GPUs and HCAs is unknown: no /sys PCI tree)"
            # Unplaced: still a warning unless the listing shows there is no GPU-HCA pair to hurt.
            severity = WARNING if not facts.listing or (facts.has_gpus and facts.has_hcas) else INFO
        target = st.bdf if st.bdf != "?" else "<bdf>"
        if severity == INFO:
            out.append(
                Finding(
                    PCIE_ACS_NO_PEERS.code,
                    INFO,
                    st.bdf if st.bdf != "?" else "lspci",
                    f"ACS on {where}: {flags} (from {st.source}); the listing has no GPU and RDMA device pair "
                    "whose peer-to-peer traffic it could redirect.",
                    data={"bdf": st.bdf, "acsctl": st.ctl, "between": list(st.between)},
                )
            )
            continue
        out.append(
            Finding(
                PCIE_ACS_ENABLED.code,
                severity,
                st.bdf if st.bdf != "?" else "lspci",
                f"ACS on {where}: {flags} (from {st.source}); expected ReqRedir- CmpltRedir- so that peer-to-peer "
                "traffic stays in the switch instead of going up to the root complex.",
                f"setpci -s {target} ECAP_ACS+0x6.w=0000 (as root, until reboot); for good, turn ACS off in the BIOS "
                f"or boot with pci=disable_acs_redir={target}. See `rdmadoctor explain PCIE_ACS_ENABLED`.",
                data={"bdf": st.bdf, "acsctl": st.ctl, "between": list(st.between)},
            )
        )
    return out


def _inventory(facts: PciLinkFacts) -> dict:
    return {
        "pcie": {
            "source": facts.source,
            "links": [
                {
                    "parent": lk.parent,
                    "child": lk.child,
                    "kind": lk.child_kind,
                    "devices": list(lk.devices),
                    "speed_gts": lk.cur_speed_gts,
                    "width": lk.cur_width,
                    "max_speed_gts": lk.max_speed_gts,
                    "max_width": lk.max_width,
                }
                for lk in facts.links
            ],
            "acs": [
                {
                    "bdf": st.bdf,
                    "between": list(st.between),
                    "acsctl": st.ctl,
                    "source": st.source,
                    "unknown": st.why_unknown,
                }
                for st in facts.acs
            ],
            "notes": list(facts.notes),
        }
    }


# The expectations this module's checks read: declared once, here, with type, unit and range
# (engine.expectations builds its table from every check's defaults).
EXPECT: dict[str, Expect] = {
    "pcie_check_bridges": Expect(
        True, "bool", nullable=False,
        doc="Judge the PCIe links of the bridges above GPUs and HCAs too, not only the devices'.",
    ),
}


# Where this module's checks stand in the report (engine.registry: built-ins are found by scanning checks/).
ORDER = 80

CHECKS = [
    Check(
        id="pci.link",
        condition=CONFIG,
        gate=False,
        title="PCIe links and ACS",
        probe=lambda ctx: ctx.get(probe_links),
        judge=judge_links,
        codes=(PCIE_LINK_DEGRADED, PCIE_ACS_ENABLED, PCIE_GPU_LINK_IDLE, PCIE_ACS_NO_PEERS),
        needs=(HAS_PCI_DEVICES,),
        defaults=EXPECT,
        inventory=_inventory,
        description="Link speed and width of every GPU and HCA and of the switch links above them (current vs. what "
        "both ends support), and ACS redirect on the bridges between a GPU and an HCA.",
    ),
]
