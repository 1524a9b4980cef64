"""ib.devices and ib.ports: the RDMA devices, and the state of every port."""

from __future__ import annotations

from rdmadoctor.checks._rdma import (
    IWARP,
    RdmaInventory,
    ignored,
    port_subject,
    probe_inventory,
    transport_of,
)
from rdmadoctor.core.codes.ib import (
    IB_ACTIVE_PORTS_LOW,
    IB_DEVICE_COUNT_LOW,
    IB_LINK_LAYER_MISMATCH,
    IB_NO_DEVICES,
    IB_NO_SM,
    IB_PARSE_WARNING,
    IB_PORT_DOWN,
    IB_PORT_INIT,
    IB_PORT_RATE_LOW,
    IB_PORT_STATE_UNKNOWN,
    IB_TOOL_FAILED,
    RDMA_INVENTORY_UNKNOWN,
    RDMA_NOT_REQUIRED,
    VERBS_NO_DEVICES,
)
from rdmadoctor.core.codes.roce import IWARP_NETDEV_DOWN, IWARP_NO_IPV4, ROCE_NETDEV_DOWN
from rdmadoctor.core.expect import Expect
from rdmadoctor.core.model import (
    ERROR,
    INFO,
    LINK,
    UNKNOWN,
    WARNING,
    Check,
    Finding,
    Need,
    Paste,
    PodChange,
)
from rdmadoctor.core.record import record, replace
from rdmadoctor.core.words import count

_NO_INVENTORY = (
    "no /sys in the bundle and no recorded ibstat or ibv_devinfo output: the RDMA devices cannot be "
    "established (add sys/ with `rdmadoctor collect`, or cmd/ibstat.txt)"
)
_UNREADABLE_FIX = (
    "Run rdmadoctor as root (in a pod: as root, or with the host's /sys mounted readable: hostPath /sys, "
    "readOnly is fine), or give its user read access to /sys/class/infiniband; a mount or LSM policy "
    "(AppArmor, SELinux) that hides sysfs must let it be listed. Then run the check again."
)
_ROOT_FIX = (
    "Mount the host's /sys under the root given to --root (hostPath /sys, readOnly is fine; the deploy/ "
    "DaemonSet mounts / at /host), or run `rdmadoctor check` on the node itself."
)


def no_inventory(inv: RdmaInventory) -> tuple[str, str]:
    """What an unknown inventory (source "none") says, and its fix, in the words of the host: a
    folder it could not list, a mounted root without /sys, a bundle without sys/."""
    if inv.unreadable:
        if inv.host_kind == "bundle":
            return (
                f"sys/class/infiniband in the bundle {inv.host_label} could not be listed ({inv.unreadable}): whether "
                "the node has RDMA devices cannot be established. This is not \"no devices\": the folder is there "
                "but this user may not read it.",
                f"Make the unpacked bundle readable (`chmod -R u+rX {inv.host_label or 'BUNDLE'}`), or check it as "
                "the user who unpacked it.",
            )
        where = "/sys/class/infiniband" if inv.host_kind == "live" else f"{inv.host_label.rstrip('/')}/sys/class/infiniband"
        return (
            f"{where} could not be listed ({inv.unreadable}): whether the node has RDMA devices cannot be "
            "established. This is not \"no devices\": rdmadoctor was not allowed to look.",
            _UNREADABLE_FIX,
        )
    if inv.host_kind in ("root", "live"):
        where = inv.host_label or "the root"
        return (
            f"no /sys under {where} and no ibstat or ibv_devinfo output: the RDMA devices cannot be established "
            f"(mount the host's /sys at {where.rstrip('/')}/sys)",
            _ROOT_FIX,
        )
    return _NO_INVENTORY, RDMA_INVENTORY_UNKNOWN.fix


def _has_devices(ctx) -> str | None:
    inv: RdmaInventory = ctx.get(probe_inventory)
    if inv.source == "none":
        return no_inventory(inv)[0]
    return None if inv.devices else "no RDMA devices: see ib.devices"


HAS_DEVICES = Need("rdma devices", _has_devices)


# ---- what libibverbs and the device tools said in the recorded tool outputs ------------------

# A line a tool printed that libibverbs (rdma-core libibverbs/init.c, dynamic_driver.c) wrote:
# "libibverbs: Warning: couldn't load driver ...", "... no userspace device-specific driver found
# for ...", "... Driver mlx5 does not support the kernel ABI of ...".
_VERBS_LINE = b"libibverbs:"  # its own prefix: "libibverbs: Warning: ..." (a package list only names it)
# What ibv_devinfo / ibv_devices say of the device list besides listing it (rdma-core
# libibverbs/examples/devinfo.c): the same knowledge-base rows read these lines in a pasted log.
# The list's own rows -> ib.devices (why it is empty); a device it could not open -> verbs.userspace.
# (ibstatus's "sys files not found" is its empty list: IB_NO_DEVICES, as diagnose reads it)
_LISTING_ROWS = frozenset({"ibtools.no_devices", "ibtools.list_zero", "ibtools.device_list_failed", "ibtools.ibstatus_no_sysfs"})
_OPEN_ROWS = frozenset({"ibtools.open_device_failed"})
# infiniband-diags aborting (ibpanic) or warning (ibwarn) on a device: IB_TOOL_FAILED -> ib.devices, as in diagnose.
_TOOL_ROWS = frozenset({"ibtools.stat_failed", "ibtools.ibpanic", "ibtools.umad_init"})
_TOOL_LINES = (b"No IB devices found", b"HCAs found:", b"Failed to get IB devices list", b"Failed to open device",
               b"ibpanic: ", b"ibwarn: ", b"sys files not found")
# Package lists name libibverbs in every other line; none of it is libibverbs speaking.
_PACKAGE_LISTS = ("dpkg-l.txt", "rpm-qa.txt", "ofed_info.txt")
MAX_MESSAGE_LINES = 64  # per file and row: a tool that repeats one warning per device says it 64 times at most


@record
class ToolMessages:
    """What libibverbs and the device tools printed into the bundle's recorded tool outputs
    (``cmd/*.txt``), read by the knowledge base over the whole output, as ``diagnose`` reads the same
    output pasted into a log (rdmadoctor.logs.kb.verbs, kb.ibtools): one reading for both.
    verbs.userspace reports ``findings``; ib.devices the lines no row knows and, for an empty device
    list, ``listing`` (why the tool listed nothing: "No IB devices found" after libibverbs skipped
    every device for want of a provider is that problem, not a node without devices)."""

    findings: tuple[Finding, ...] = ()
    unknown: tuple[tuple[str, int, str], ...] = ()  # (file, line, text) of libibverbs lines no row knows
    listing: tuple[Finding, ...] = ()  # the device list's own words (VERBS_NO_DEVICES), with their cause
    tool: tuple[Finding, ...] = ()  # a device tool that aborted or could not query a device (IB_TOOL_FAILED)


def _read_messages(file: str, data: bytes) -> tuple[list[Finding], list[Finding], list[tuple[str, int, str]], list[Finding]]:
    """(verbs.userspace's findings, the list's own, libibverbs lines no row knows, the tool's own failures)
    of one recorded output."""
    from rdmadoctor.logs import diagnose_bytes

    mine, listing, tool = [], [], []
    known: set[str] = set()  # the text of every line a row read (a row quotes 3 of its lines: the rest repeat them)
    for f in diagnose_bytes(data, name=file).findings:
        row = str(f.data.get("pattern", ""))
        if not (row.startswith("verbs.") or row in _LISTING_ROWS or row in _OPEN_ROWS or row in _TOOL_ROWS):
            continue
        ev = [{k: e.get(k) for k in ("file", "line", "text", "host", "rank")} for e in f.data.get("evidence") or ()]
        known.update(str(e.get("text") or "").strip() for e in ev)
        data_ = {**f.data, "evidence": ev[:3]}
        if row in _LISTING_ROWS:
            listing.append(replace(f, data=data_))
        elif row in _TOOL_ROWS:
            data_.pop("follows", None)
            tool.append(replace(f, data=data_, cause=None))
        else:
            # The node's own userspace problems: each is a root here, whatever line came before it.
            data_.pop("follows", None)
            data_.pop("symptom", None)
            mine.append(replace(f, data=data_, cause=None))
    unknown: list[tuple[str, int, str]] = []
    for n, raw in enumerate(data.split(b"\n"), 1):
        text = raw.decode("utf-8", "replace").strip() if _VERBS_LINE in raw else ""
        if text and text[:400] not in known and len(unknown) < MAX_MESSAGE_LINES:
            unknown.append((file, n, text))
    return mine, listing, unknown, tool


def probe_tool_messages(ctx) -> ToolMessages:
    host = ctx.host
    if host.live_process:
        # A live host's tools are not recorded; verbs.userspace judges its files themselves.
        return ToolMessages()
    merged: dict[tuple[str, str], Finding] = {}
    listing: list[Finding] = []
    tool: list[Finding] = []
    unknown: list[tuple[str, int, str]] = []
    for name in host.listdir("/cmd"):
        data = host.read_bytes(f"/cmd/{name}") if name.endswith(".txt") and name not in _PACKAGE_LISTS else None
        if not data or not (_VERBS_LINE in data or any(t in data for t in _TOOL_LINES)):
            continue
        mine, listed, odd, failed = _read_messages(f"cmd/{name}", data)
        listing += listed
        tool += failed
        unknown += odd
        for f in mine:
            have = merged.get((f.code, f.subject))
            if have is None:
                merged[(f.code, f.subject)] = f
            else:
                have.data["count"] = have.data.get("count", 1) + f.data.get("count", 1)
                have.data["evidence"] = (have.data["evidence"] + f.data["evidence"])[:3]
    return ToolMessages(tuple(merged.values()), tuple(unknown), tuple(listing), tuple(tool))


def _verbs_warning(w: str) -> bool:
    """A parse warning that echoes a libibverbs line (the parsers keep them as warnings)."""
    return w.split(": ", 1)[-1].startswith("libibverbs")


@record
class DeviceFacts:
    inv: RdmaInventory
    messages: ToolMessages = ToolMessages()


def probe_devices(ctx) -> DeviceFacts:
    return DeviceFacts(ctx.get(probe_inventory), ctx.get(probe_tool_messages))


def judge_devices(inv: RdmaInventory, expect: dict, messages: ToolMessages | None = None) -> list[Finding]:
    out: list[Finding] = []
    # A device tool that failed (ibstat's ibpanic on a device) as the knowledge base reads it, the reading
    # `diagnose` gives the same output pasted into a log: IB_TOOL_FAILED, not a parse problem of its output.
    tool = list(messages.tool) if messages is not None else []
    if inv.source == "none":
        empty = [f for f in (messages.listing if messages is not None else ()) if f.code == IB_NO_DEVICES.code]
        if empty:  # the tool's own words for an empty list (ibstatus: "sys files not found")
            return tool + empty[:1]
        message, fix = no_inventory(inv)
        return tool + [Finding(RDMA_INVENTORY_UNKNOWN.code, UNKNOWN, "host", message, fix)]
    out += tool
    for w in inv.warnings:
        # libibverbs' lines are judged by the knowledge base (verbs.userspace reports them), or
        # reported below when no row knows them: never as a parse problem of the tool.
        if messages is not None and _verbs_warning(w):
            continue
        if tool and ("ibpanic:" in w or "ibwarn:" in w):
            continue  # the tool's failure, told above
        out.append(Finding(IB_PARSE_WARNING.code, WARNING, inv.source, w, "Send the full, unedited tool output."))
    for file, n, text in messages.unknown if messages is not None else ():
        out.append(
            Finding(
                IB_PARSE_WARNING.code,
                WARNING,
                file,
                f"{file} line {n}: libibverbs printed {text!r}, a message rdmadoctor does not know yet.",
                "Run the tool again inside the training container and send its whole output with `rdmadoctor collect`.",
                data={"evidence": [{"file": file, "line": n, "text": text[:400], "host": None, "rank": None}]},
            )
        )
    pfs = inv.pfs()
    if not pfs and tool and inv.source != "sysfs":
        # The tool stopped before it listed a device (`ibstat mlx5_an0` on a name that is no device): it
        # says nothing of the devices the node has.
        return out + [Finding(RDMA_INVENTORY_UNKNOWN.code, UNKNOWN, "host",
                              f"{inv.source} failed before it listed a device: the RDMA devices cannot be established "
                              "from its output.", "Run it without a device name, or read /sys/class/infiniband.")]
    if not pfs:
        where = "/sys/class/infiniband is empty or absent" if inv.source == "sysfs" else f"{inv.source} lists no device"
        # A tool's empty list right after libibverbs failed to load a provider: the devices may
        # well exist, userspace cannot see them; the verbs finding is the root cause.
        verbs = [f for f in (messages.findings if messages is not None else ()) if f.severity in (ERROR, WARNING)]
        if expect.get("rdma_required") is False and not verbs:
            # A socket pool (the tcp profile): no RDMA is the design, not a fault.
            return out + [
                Finding(
                    RDMA_NOT_REQUIRED.code,
                    INFO,
                    "host",
                    f"no RDMA devices ({where}), as the profile expects (rdma_required = false): NCCL uses its socket "
                    "transport; nccl.env judges the interface.",
                )
            ]
        told = next((f for f in (messages.listing if messages is not None else ()) if f.cause), None)
        if told is not None and inv.source != "sysfs":
            # The tool said why its list is empty, after libibverbs skipped the devices it has (no
            # provider, a kernel ABI it does not speak): the devices exist and userspace cannot see
            # them. The knowledge base's reading, the one `diagnose` gives the same output pasted
            # into a log: VERBS_NO_DEVICES, following that problem; not a node without devices.
            return out + [told]
        cause = verbs[0].code if verbs and inv.source != "sysfs" else None
        if cause:
            where += f", after libibverbs said: {verbs[0].message}"
        return out + [
            Finding(
                IB_NO_DEVICES.code,
                ERROR,
                "host",
                f"no RDMA devices found ({where}); expected at least one HCA. Without one NCCL uses TCP sockets.",
                IB_NO_DEVICES.fix,
                pod=PodChange(rdma_device=True, whole=False),
                cause=cause,
            )
        ]
    want = expect.get("expected_hcas")
    if isinstance(want, int) and len(pfs) < want:
        names = ", ".join(d.name for d in pfs)
        out.append(
            Finding(
                IB_DEVICE_COUNT_LOW.code,
                ERROR,
                "host",
                f"{count(len(pfs), 'RDMA device')} found ({names}); the profile expects {want}.",
                "Check that every HCA is seen (`lspci -d 15b3:`) and bound to its driver; a missing one "
                "is often a failed firmware update or an HCA that fell off the bus (`dmesg | grep mlx5`).",
            )
        )
    return out


def judge_ports(inv: RdmaInventory, expect: dict) -> list[Finding]:
    out: list[Finding] = []
    min_rate = expect.get("min_rate_gbps")
    want_ll = expect.get("link_layer")
    ib_linkup, ib_waiting, active = 0, [], 0
    for dev in inv.devices:
        if not dev.ports and not dev.is_vf:
            out.append(
                Finding(
                    IB_PORT_STATE_UNKNOWN.code,
                    UNKNOWN,
                    dev.name,
                    f"{dev.name} lists no ports ({inv.source}); their state is unknown.",
                    IB_PORT_STATE_UNKNOWN.fix,
                )
            )
        for port in dev.ports:
            if ignored(dev, port, expect):
                continue
            subj = port_subject(dev, port)
            ll = port.link_layer
            ib = ll == "InfiniBand"
            state, phys = port.state, port.phys_state
            seen = f"state {state or 'unknown'}, phys {phys or 'unknown'}"
            if ll and want_ll and ll != want_ll:
                # mlxconfig's LINK_TYPE_P<n>: 1 InfiniBand, 2 Ethernet; the value the pool needs.
                value = {"InfiniBand": 1, "Ethernet": 2}.get(want_ll)
                setting = f"LINK_TYPE_P{port.port}={value}" if value and isinstance(port.port, int) else None
                out.append(
                    Finding(
                        IB_LINK_LAYER_MISMATCH.code,
                        ERROR,
                        subj,
                        f"link layer {ll}; the pool expects {want_ll} (link_layer): this port cannot reach the pool's "
                        f"{want_ll} peers over RDMA, and a job spanning both kinds of node hangs or falls back to sockets.",
                        (
                            f"mlxconfig -d {dev.pci or '<pci of ' + dev.name + '>'} set {setting}   "
                            f"# {value} = {want_ll}, as the pool needs; then reboot (or mlxfwreset)\n"
                            "Or, if this node belongs to another pool, check it with that pool's profile (--profile, --pool)."
                        )
                        if setting
                        else IB_LINK_LAYER_MISMATCH.fix,
                        data={"link_layer": ll, "expected": want_ll, "mlxconfig": setting},
                    )
                )
            if state is None and phys is None:
                out.append(
                    Finding(
                        IB_PORT_STATE_UNKNOWN.code,
                        UNKNOWN,
                        subj,
                        f"the state of {subj} could not be read ({inv.source}).",
                        IB_PORT_STATE_UNKNOWN.fix,
                    )
                )
                continue
            if state == "DOWN" or phys in ("Polling", "Disabled", "Sleep"):
                iwarp = transport_of(dev, port) == IWARP
                why = {
                    "Polling": "no cable or no peer: the port is looking for a link",
                    # An iWARP port is Disabled whenever its netdev has no carrier (core/device.c iw_query_port).
                    "Disabled": "its netdev has no carrier" if iwarp else "the port is disabled by software",
                    "Sleep": "the port is asleep",
                    # The cable and its peer are up; the port's logical state is not. A physical port
                    # passes through this for a moment while the link comes up; an SR-IOV virtual
                    # function stays there (sriov-network-device-plugin#269, network-operator#249).
                    "LinkUp": "the physical link is up but the port is logically down: on an SR-IOV virtual function "
                              "(a VF given to a pod) the VF has no GUID or its link policy keeps it down, or "
                              "the subnet manager does not virtualize (OpenSM `virt_enabled 2`); on a physical port it "
                              "lasts only while the link comes up",
                }.get(phys or "", "no link")
                # A RoCE (or iWARP) port follows its netdev: with the netdev down, roce.config's
                # ROCE_NETDEV_DOWN (iwarp.config's IWARP_NETDEV_DOWN) is the root cause and names the
                # command that brings it back.
                netdev_down = ll == "Ethernet" and port.netdev_up is False
                out.append(
                    Finding(
                        IB_PORT_DOWN.code,
                        ERROR,
                        subj,
                        f"{seen}: {why}; expected ACTIVE / LinkUp."
                        + (f" Its netdev {port.netdev} is down." if netdev_down else ""),
                        IB_PORT_DOWN.fix,
                        data={"state": state, "phys_state": phys},
                        cause=(IWARP_NETDEV_DOWN.code if iwarp else ROCE_NETDEV_DOWN.code) if netdev_down else None,
                    )
                )
                continue
            if ib and phys in ("LinkUp", None) and not (state in ("INIT", "ARMED") and port.sm_lid):
                ib_linkup += 1  # (a port that knows its SM is not waiting for one)
            if state in ("INIT", "ARMED") and ib:
                lid = f"LID {port.lid if port.lid is not None else 'unknown'}"
                if port.sm_lid:
                    # A subnet manager is there (the port knows its LID) and has not activated the
                    # port: the SM refuses it, most often an SR-IOV VF without a GUID (network-operator#1646).
                    guid = dev.node_guid or ""
                    zero_guid = bool(guid) and not guid.replace(":", "").strip("0")
                    why = (f"the link is up and a subnet manager (SM LID {port.sm_lid}) is on the fabric, but it has not "
                           "made the port ACTIVE" + (f": the device's GUID is {dev.node_guid}, and an SM does not activate "
                           "a port without one (an SR-IOV VF whose GUID was never assigned)" if zero_guid else
                           ": the SM's partition or policy configuration leaves it out, or, for an SR-IOV VF, the SM "
                           "does not virtualize (OpenSM `virt_enabled 2`)"))
                    fix = ("Assign the VF a GUID (`ip link set <pf> vf <n> node_guid <guid> port_guid <guid>`, or the "
                           "SR-IOV network operator's GUID settings) and rebind it; check the SM's log for the port."
                           if zero_guid else IB_PORT_INIT.fix)
                    out.append(Finding(IB_PORT_INIT.code, ERROR, subj, f"{seen}, {lid}: {why}; expected ACTIVE.", fix,
                                       data={"sm_lid": port.sm_lid}))
                    continue
                ib_waiting.append(subj)
                out.append(
                    Finding(
                        IB_PORT_INIT.code,
                        ERROR,
                        subj,
                        f"{seen}, {lid}: the link is up but no subnet manager has configured the port; expected ACTIVE.",
                        IB_PORT_INIT.fix,
                    )
                )
                continue
            if state == "ACTIVE":
                active += 1
            if isinstance(min_rate, (int, float)) and port.rate_gbps is not None and port.rate_gbps < min_rate:
                out.append(
                    Finding(
                        IB_PORT_RATE_LOW.code,
                        ERROR,
                        subj,
                        f"rate {port.rate_gbps:g} Gb/s; the profile expects at least {min_rate:g} Gb/s.",
                        IB_PORT_RATE_LOW.fix,
                        data={"rate_gbps": port.rate_gbps},
                    )
                )
    if ib_waiting and len(ib_waiting) == ib_linkup:
        # The ports wait because nobody configures them: one root cause, the ports fold under it.
        out = [replace(f, cause=IB_NO_SM.code) if f.code == IB_PORT_INIT.code else f for f in out]
        out.append(
            Finding(
                IB_NO_SM.code,
                ERROR,
                "fabric",
                f"{'the' if len(ib_waiting) == 1 else 'all'} {count(len(ib_waiting), 'InfiniBand port')} with a link {'is' if len(ib_waiting) == 1 else 'are'} waiting for a subnet manager "
                f"({', '.join(ib_waiting)}); expected an SM to have moved them to ACTIVE.",
                IB_NO_SM.fix,
            )
        )
    want_active = expect.get("expected_active_ports")
    if isinstance(want_active, int) and active < want_active:
        # The shortfall follows from the ports found down or waiting, or from missing HCAs.
        roots = {f.cause or f.code for f in out if f.severity == ERROR}
        want_hcas = expect.get("expected_hcas")
        if isinstance(want_hcas, int) and len(inv.pfs()) < want_hcas:
            roots.add(IB_DEVICE_COUNT_LOW.code)
        # An iWARP port in INIT has no IPv4 address on its netdev (iwarp.config's IWARP_NO_IPV4).
        if any(p.state == "INIT" and transport_of(d, p) == IWARP and not ignored(d, p, expect) for d in inv.devices for p in d.ports):
            roots.add(IWARP_NO_IPV4.code)
        order = tuple(c.code for c in (IB_PORT_DOWN, ROCE_NETDEV_DOWN, IWARP_NETDEV_DOWN, IB_NO_SM, IB_PORT_INIT, IWARP_NO_IPV4, IB_DEVICE_COUNT_LOW))
        cause = next((c for c in order if c in roots), None)
        out.append(
            Finding(
                IB_ACTIVE_PORTS_LOW.code,
                ERROR,
                "host",
                f"{count(active, 'ACTIVE port')}; the profile expects {want_active}.",
                "Bring up the missing ports (see the port findings above), or lower expected_active_ports in the config.",
                data={"active": active, "expected": want_active},
                cause=cause,
            )
        )
    return out


def _inventory_json(inv: RdmaInventory) -> dict:
    return {
        "rdma_source": inv.source,
        "rdma_devices": [
            {
                "name": d.name,
                "driver": d.driver,
                "pci": d.pci,
                "numa_node": d.numa_node,
                "fw_ver": d.fw_ver,
                "board_id": d.board_id,
                "node_type": d.node_type,
                "is_vf": d.is_vf,
                "hca_type": d.hca_type,
                "pci_id": d.pci_id,
                "driver_version": d.driver_version,
                "node_guid": d.node_guid,
                "ports": [
                    {
                        "port": p.port,
                        "state": p.state,
                        "phys_state": p.phys_state,
                        "rate_gbps": p.rate_gbps,
                        "link_layer": p.link_layer,
                        "lid": p.lid,
                        "sm_lid": p.sm_lid,
                        "netdev": p.netdev,
                        "active_mtu": p.active_mtu,
                        "width": p.width,
                        "netdev_mtu": p.netdev_mtu,
                        "subnet_prefix": p.subnet_prefix,
                        "pkey": p.pkey,
                    }
                    for p in d.ports
                ],
            }
            for d in inv.devices
        ],
    }


# The expectations this module's checks read: declared once, here, with type, unit and range
# (engine.expectations builds its table from every check's defaults).
EXPECT: dict[str, Expect] = {
    "expected_hcas": Expect(
        None, "int", "RDMA devices", min=1, max=1024, null_means="any number, at least one", example=8,
        doc="Number of RDMA devices (PFs) expected; fewer is IB_NO_DEVICES.",
    ),
    "expected_active_ports": Expect(
        None, "int", "ports", min=0, max=4096, null_means="every judged port", example=8,
        doc="Number of ACTIVE ports expected; fewer is IB_PORT_DOWN.",
    ),
    "min_rate_gbps": Expect(
        None, "number", "Gb/s", above=0, max=10000, null_means="no minimum", example=400,
        doc="Lowest acceptable rate of every judged port (400 for NDR, 200 for HDR).",
    ),
    "link_layer": Expect(
        None, "enum", choices=("InfiniBand", "Ethernet"), null_means="either", example="InfiniBand",
        # What people call them; ibv_devinfo and sysfs say InfiniBand and Ethernet.
        aliases={"ib": "InfiniBand", "roce": "Ethernet", "rocev2": "Ethernet", "eth": "Ethernet"},
        doc="Link layer every judged port must have (Ethernet: RoCE).",
    ),
    "ignore_ports": Expect(
        [], "list", nullable=False, example=["mlx5_9/1"],
        doc='Ports ("mlx5_9/1") or whole devices ("mlx5_9") that are not judged and not counted.',
    ),
    "ignore_vfs": Expect(
        True, "bool", nullable=False,
        doc="Leave SR-IOV virtual functions alone: they are the pods' business, not the node's.",
    ),
    "rdma_required": Expect(
        True, "bool", nullable=False,
        doc="false for a pool that trains over TCP sockets on purpose (the tcp profile): no RDMA device is "
        "information rather than IB_NO_DEVICES, and NCCL_IB_DISABLE is expected rather than an error.",
    ),
}


# ---- a port list pasted into a job's log (logs.diagnose) -----------------------------------------

# What a pasted port list can show: a port's state, rate and link layer (not how many the node has).
PASTE_CODES = frozenset(c.code for c in (IB_NO_DEVICES, IB_PORT_DOWN, IB_PORT_INIT, IB_NO_SM, IB_PORT_RATE_LOW,
                                         IB_LINK_LAYER_MISMATCH))


def judge_pasted_ports(seg, expect: dict, node, layers: dict[str, str]) -> list[Finding]:
    """A pasted `ibstat`, `ibstatus`, `ibv_devinfo` or `rdma link`: its devices and ports, as ib.devices
    and ib.ports judge the node's."""
    from rdmadoctor.checks._paste import port_inventory

    inv, wanted = port_inventory(seg, expect)
    if not inv.devices:
        # A paste that lists no device proves nothing about the node: the tool may have stopped
        # early (an ibpanic on one device), or been filtered. "No IB devices found" has its own row.
        return []
    found = [f for f in judge_devices(inv, wanted) + judge_ports(inv, wanted) if f.code in PASTE_CODES]
    if any(p.state == "ACTIVE" for d in inv.devices for p in d.ports):
        # Beside ACTIVE ports, a port disabled by software is often one the node does not use (the second
        # port of a dual-port card, a storage NIC): a warning in a paste, which does not say the node's plan.
        found = [replace(f, severity=WARNING, message=f"{f.message} Other ports in the paste are ACTIVE: if this one is "
                         "unused on purpose, nothing to do.")
                 if f.code == IB_PORT_DOWN.code and f.data.get("phys_state") == "Disabled" else f for f in found]
    return found


PASTES = tuple(Paste(kind, judge_pasted_ports) for kind in ("ibstat", "ibstatus", "ibv_devinfo", "rdma_link"))

# Where this module's checks stand in the report (engine.registry: built-ins are found by scanning checks/).
ORDER = 10

CHECKS = [
    Check(
        defaults=EXPECT,
        id="ib.devices",
        condition=LINK,
        gate=True,
        title="RDMA devices",
        probe=probe_devices,
        judge=lambda f, expect: judge_devices(f.inv, expect, f.messages),
        codes=(IB_NO_DEVICES, IB_DEVICE_COUNT_LOW, RDMA_INVENTORY_UNKNOWN, IB_PARSE_WARNING, RDMA_NOT_REQUIRED, VERBS_NO_DEVICES,
               IB_TOOL_FAILED),
        inventory=lambda f: _inventory_json(f.inv),
        description="RDMA devices in /sys/class/infiniband (any driver), with PCI address, NUMA node, firmware, board and node type.",
    ),
    Check(
        id="ib.ports",
        condition=LINK,
        gate=True,
        title="RDMA ports",
        probe=lambda ctx: ctx.get(probe_inventory),
        judge=judge_ports,
        codes=(
            IB_PORT_DOWN,
            IB_PORT_INIT,
            IB_PORT_RATE_LOW,
            IB_NO_SM,
            IB_LINK_LAYER_MISMATCH,
            IB_ACTIVE_PORTS_LOW,
            IB_PORT_STATE_UNKNOWN,
        ),
        needs=(HAS_DEVICES,),
        pastes=PASTES,
        description="Every port of every device: state, physical state, rate, link layer, LID / SM LID, netdev.",
    ),
]
