"""Build host trees (sysfs, procfs, /etc, /dev, runtime.json, cmd/) from a compact node description.

The trees are what probes read: the shipped examples, the scenario fixtures under
``tests/fixtures/``, the robustness tests' starting point and the benchmark's big node are all
made here, so a fixture never drifts from the layout the kernel really has.

A tree is a dict ``{"/sys/...": bytes | Link(target)}``; :func:`write_dir` writes it with real
relative symlinks, :func:`write_tar` as a deterministic ``.tar.gz`` (same input, same bytes).

    python -m rdmadoctor.fixturegen --examples                # rdmadoctor/examples/*.tar.gz
    python -m rdmadoctor.fixturegen --scenarios tests/fixtures
    python -m rdmadoctor.fixturegen --sriov 512 -o /tmp/big  # 8 GPUs, 10 HCAs, 512 VFs

Standard library only, so the fixtures can be regenerated from a bare checkout.
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import io
import json
import os
import posixpath
import shutil
import tarfile
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from rdmadoctor.host import Link, Runtime

KIB, MIB, GIB = 1024, 1024**2, 1024**3

# CapEff of a container started with Docker's / containerd's default capability set, and the
# same plus CAP_IPC_LOCK (bit 14), which pods add with securityContext.capabilities.add.
CAP_DEFAULT = 0x00000000A80425FB
CAP_DEFAULT_IPC_LOCK = CAP_DEFAULT | (1 << 14)
CAP_ALL = 0x000001FFFFFFFFFF  # privileged / root on the host (kernel 5.9+: 41 capabilities)

PORT_STATE_NUM = {"NOP": 0, "DOWN": 1, "INIT": 2, "ARMED": 3, "ACTIVE": 4, "ACTIVE_DEFER": 5}
PHYS_STATE_NUM = {
    "Sleep": 1,
    "Polling": 2,
    "Disabled": 3,
    "PortConfigurationTraining": 4,
    "LinkUp": 5,
    "LinkErrorRecovery": 6,
    "PhyTest": 7,
}
# PCIe generation -> the kernel's current_link_speed / max_link_speed spelling (5.x and later).
PCIE_SPEED = {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe", 5: "32.0 GT/s PCIe"}
# Mellanox/NVIDIA HCAs (PCI vendor 0x15b3): PCI ids, what sysfs shows, the PCI and verbs drivers, PCIe generation.
HCA_MODELS: dict[str, dict[str, str]] = {
    "cx7": {"device": "0x1021", "subsystem_device": "0x0041", "hca_type": "MT4129", "board_id": "MT_0000000838",
            "fw_ver": "28.39.2048", "driver": "mlx5_core", "vf_device": "0x101e", "provider": "mlx5", "gen": "5"},
    "cx6": {"device": "0x101b", "subsystem_device": "0x0007", "hca_type": "MT4123", "board_id": "MT_0000000223",
            "fw_ver": "20.39.1002", "driver": "mlx5_core", "vf_device": "0x101c", "provider": "mlx5", "gen": "4"},
    "cx3": {"device": "0x1003", "subsystem_device": "0x0050", "hca_type": "MT4099", "board_id": "MT_1090120019",
            "fw_ver": "2.42.5000", "driver": "mlx4_core", "vf_device": "0x1004", "provider": "mlx4", "gen": "3"},
}
GPU_MODELS: dict[str, dict[str, str]] = {
    "h100": {"device": "0x2330", "subsystem_device": "0x16c1", "name": "NVIDIA H100 80GB HBM3", "gen": "5"},
    "a100": {"device": "0x20b2", "subsystem_device": "0x1463", "name": "NVIDIA A100-SXM4-80GB", "gen": "4"},
    "l40s": {"device": "0x26b9", "subsystem_device": "0x1851", "name": "NVIDIA L40S", "gen": "4"},
}
IB_MODULES = ["ib_core", "ib_uverbs", "ib_umad", "rdma_cm", "rdma_ucm", "ib_ipoib", "ib_cm", "iw_cm", "mlx5_core", "mlx5_ib", "mlxfw"]
GPU_MODULES = ["nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_peermem"]
RDMA_PACKAGES = {
    "libibverbs1": "44.0-2",
    "ibverbs-providers": "44.0-2",
    "librdmacm1": "44.0-2",
    "libibumad3": "44.0-2",
    "rdma-core": "44.0-2",
    "ibverbs-utils": "44.0-2",
    "infiniband-diags": "44.0-2",
    "perftest": "4.5+0.20-1",
}
BASE_PACKAGES = {"libc6": "2.35-0ubuntu3.6", "bash": "5.1-6ubuntu1", "python3": "3.10.6-1~22.04"}
LIBDIR = "/usr/lib/x86_64-linux-gnu"


# ---- the description -------------------------------------------------------------------------


@dataclass
class Port:
    """One port of an RDMA device, as its sysfs files show it."""

    state: str = "ACTIVE"
    phys_state: str = "LinkUp"
    rate: str = "400 Gb/sec (4X NDR)"
    link_layer: str = "InfiniBand"
    lid: int | None = None  # None: assigned (ACTIVE InfiniBand ports get one, others 0)
    sm_lid: int | None = None  # None: 0x1 once an SM configured the port, else 0
    netdev: str | None = ""  # "": a name from the PCI address; None: no netdev for this port
    netdev_mtu: int | None = None  # None: 4092 for IPoIB, 9000 for Ethernet
    operstate: str | None = None  # None: "up" when the port is ACTIVE, else "down"
    ipv4: str | None = None  # RoCE: adds the ::ffff:a.b.c.d GIDs (v1 and v2)
    gids: tuple[tuple[str, str], ...] | None = None  # (gid, type) by index; None: derived


def ib_port(rate: str = "400 Gb/sec (4X NDR)", **kw: Any) -> Port:
    return Port(rate=rate, **kw)


def down_port(phys_state: str = "Polling", link_layer: str = "InfiniBand", **kw: Any) -> Port:
    # A port without a link reports the lowest rate of its widest width, as mlx5 does.
    kw.setdefault("rate", "10 Gb/sec (4X SDR)" if link_layer == "InfiniBand" else "40 Gb/sec (4X QDR)")
    return Port(state="DOWN", phys_state=phys_state, link_layer=link_layer, **kw)


def roce_port(ipv4: str, rate: str = "200 Gb/sec (4X HDR)", mtu: int = 9000, **kw: Any) -> Port:
    return Port(rate=rate, link_layer="Ethernet", netdev_mtu=mtu, ipv4=ipv4, lid=0, sm_lid=0, **kw)


@dataclass
class Pcie:
    """Where a PCI function sits. Endpoints naming the same key share that element.

    Two endpoints with the same ``switch`` are behind one PCIe switch (nvidia-smi: PIX), the same
    ``root_port`` without a switch is impossible unless they are functions of one card (``slot``),
    the same ``host_bridge`` is PHB, the same ``numa`` NODE, else SYS.
    """

    numa: int = 0
    host_bridge: str = "hb0"
    root_port: str = "rp0"
    switch: str | None = None
    slot: str | None = None  # functions of one card share a slot (dual-port CX-7: .0 and .1)
    gen: int | None = None  # negotiated PCIe generation; None: the device's own maximum
    width: int = 16
    max_width: int = 16


@dataclass
class Hca:
    name: str
    at: Pcie
    ports: list[Port] = field(default_factory=lambda: [Port()])
    model: str = "cx7"
    vfs: int = 0
    vf_port: Port = field(default_factory=lambda: Port(state="DOWN", phys_state="LinkUp"))
    fw_ver: str | None = None


@dataclass
class Gpu:
    at: Pcie
    model: str = "h100"


@dataclass
class NetIf:
    """A netdev that is not an RDMA port (the pod's eth0, a management NIC, lo)."""

    name: str
    operstate: str = "up"
    mtu: int = 1500
    carrier: bool = True


@dataclass
class Node:
    hostname: str = "gpu-node-001"
    gpus: list[Gpu] = field(default_factory=list)
    hcas: list[Hca] = field(default_factory=list)
    numa_cpus: dict[int, str] = field(default_factory=lambda: {0: "0-55,112-167", 1: "56-111,168-223"})
    # Runtime facts (runtime.json). Limits in bytes, None = unlimited.
    memlock_soft: int | None = None
    memlock_hard: int | None = None
    cap_eff: int | None = CAP_ALL
    shm_size: int | None = 64 * GIB
    shm_free: int | None = 64 * GIB - 12 * MIB
    env: dict[str, str] = field(default_factory=dict)
    in_container: bool = False
    netifs: list[NetIf] = field(default_factory=lambda: [NetIf("eth0"), NetIf("lo", "unknown", 65536)])
    # Userspace: None derives the value from the HCAs (every driver's provider installed).
    packages: dict[str, str] | None = None
    verbs_drivers: list[str] | None = None  # /etc/libibverbs.d/<name>.driver
    providers: list[str] | None = None  # <libdir>/libibverbs/lib<name>-rdmav34.so
    dev_infiniband: list[str] | None = None  # /dev/infiniband entries
    modules: list[str] | None = None  # /proc/modules
    sys_modules: list[str] | None = None  # /sys/module/<name>; None: the same as modules
    osrelease: str = "5.15.0-91-generic"
    acs_ctrl: dict[str, int] = field(default_factory=dict)  # switch or root port key -> ACS control
    cmds: dict[str, str] = field(default_factory=dict)  # cmd/<name>.txt (cmd/<name> when it has a suffix)
    nvidia_driver: str = "535.129.03"
    proc_self: bool = True  # /proc/self/limits and /proc/self/status, consistent with the runtime facts
    sysfs: bool = True  # False: a bundle with no /sys, /proc, /etc, /dev (only cmd/ and runtime.json)
    runtime: bool = True


# ---- tree building ---------------------------------------------------------------------------


def _b(text: str) -> bytes:
    return (text + "\n").encode()


def _h(*parts: Any) -> int:
    """A stable number from a name, for GUIDs, MACs, sizes: fixtures must not change between runs."""
    return int.from_bytes(hashlib.sha256("/".join(map(str, parts)).encode()).digest()[:8], "big")


@dataclass
class _Fn:
    """A PCI function placed in the tree."""

    bdf: str
    path: str  # /sys/devices/pci0000:xx/.../<bdf>
    numa: int
    kind: str  # "gpu" | "hca" | "vf" | "rp" | "usp" | "dsp"
    obj: Any = None
    sec_bus: int | None = None
    sub_bus: int | None = None
    acs: int | None = None
    link_at: Any = None  # a bridge's downstream link trains with this slot's card (its Pcie)
    cur: tuple[int, int] = (5, 16)  # the trained (generation, width), once written


class _Builder:
    def __init__(self, node: Node):
        self.node = node
        self.files: dict[str, Any] = {}
        self.fns: list[_Fn] = []
        self.uverbs = 0
        self.umad = 0
        self.lid = 0x1A

    def put(self, path: str, data: Any) -> None:
        if isinstance(data, str):
            data = _b(data)
        self.files[path] = data

    def link(self, path: str, target_abs: str) -> None:
        """A relative symlink, as the kernel writes them.

        kernfs climbs from the link's directory to the first *strict* ancestor of the target,
        so a link to a parent reads ``../../../0000:18:00.0``, not ``../..``.
        """
        up = posixpath.relpath(posixpath.dirname(target_abs), posixpath.dirname(path))
        self.files[path] = Link(posixpath.normpath(posixpath.join(up, posixpath.basename(target_abs))))

    # -- PCI layout --
    def layout(self) -> dict[int, list[_Fn]]:
        """Place every endpoint; returns endpoint functions by id() of their description."""
        node = self.node
        endpoints: list[Any] = [*node.gpus, *node.hcas]
        # Host bridges per NUMA node, in the order they first appear.
        hbs: dict[str, int] = {}
        for ep in sorted(endpoints, key=lambda e: e.at.numa):
            hbs.setdefault(ep.at.host_bridge, ep.at.numa)
        # Each socket owns a slice of the 256 buses, as the firmware hands them out.
        span = 0x100 // max(2, max(hbs.values(), default=0) + 1)
        per_numa: dict[int, int] = {}
        hb_bus: dict[str, int] = {}
        for hb, numa in hbs.items():
            k = per_numa.get(numa, 0)
            per_numa[numa] = k + 1
            hb_bus[hb] = span * numa + (0x10 if span >= 0x80 else 0x02) + 0x18 * k
        starts = sorted(hb_bus.values()) + [0x100]
        placed: dict[int, list[_Fn]] = {}
        for hb, bus in hb_bus.items():
            limit = starts[starts.index(bus) + 1]
            root = f"/sys/devices/pci0000:{bus:02x}"
            next_bus = bus + 1
            rps: dict[str, list[Any]] = {}
            for ep in endpoints:
                if ep.at.host_bridge == hb:
                    rps.setdefault(ep.at.root_port, []).append(ep)
            for r, (rp_key, eps) in enumerate(rps.items()):
                numa = hbs[hb]
                rp = _Fn(f"0000:{bus:02x}:{r + 1:02x}.0", f"{root}/0000:{bus:02x}:{r + 1:02x}.0", numa, "rp",
                         obj=eps[0].at, acs=node.acs_ctrl.get(rp_key, 0))
                self.fns.append(rp)
                rp.sec_bus = next_bus
                next_bus += 1
                switches = {ep.at.switch for ep in eps}
                if len(switches) > 1 or (None in switches and len({_slot(ep) for ep in eps}) > 1):
                    raise ValueError(f"root port {rp_key}: one switch or one card per root port")
                sw = next(iter(switches))
                if sw is None:
                    rp.link_at = eps[0].at
                    self._slot(rp.sec_bus, rp.path, eps, numa, placed)
                    next_bus = max(next_bus, self._bus_after(rp.sec_bus, eps))
                else:
                    usp = _Fn(f"0000:{rp.sec_bus:02x}:00.0", f"{rp.path}/0000:{rp.sec_bus:02x}:00.0", numa, "usp",
                              obj=eps[0].at)
                    self.fns.append(usp)
                    usp.sec_bus = next_bus
                    next_bus += 1
                    slots: dict[str, list[Any]] = {}
                    for ep in eps:
                        slots.setdefault(_slot(ep), []).append(ep)
                    for d, members in enumerate(slots.values()):
                        dsp = _Fn(f"0000:{usp.sec_bus:02x}:{d:02x}.0", f"{usp.path}/0000:{usp.sec_bus:02x}:{d:02x}.0",
                                  numa, "dsp", obj=members[0].at, acs=node.acs_ctrl.get(sw, 0), link_at=members[0].at)
                        self.fns.append(dsp)
                        dsp.sec_bus = next_bus
                        self._slot(next_bus, dsp.path, members, numa, placed)
                        dsp.sub_bus = self._bus_after(next_bus, members) - 1
                        next_bus = dsp.sub_bus + 1
                    usp.sub_bus = next_bus - 1
                rp.sub_bus = next_bus - 1
            if next_bus > limit:
                raise ValueError(f"host bridge {hb}: PCI buses {bus:#x}-{next_bus - 1:#x} overlap the next one at {limit:#x}")
        return placed

    @staticmethod
    def _bus_after(bus: int, members: list[Any]) -> int:
        pfs = len(members)
        vfs = sum(getattr(m, "vfs", 0) for m in members)
        return bus + 1 + (pfs + vfs - 1) // 256

    def _slot(self, bus: int, parent: str, members: list[Any], numa: int, placed: dict[int, list[_Fn]]) -> None:
        if len(members) > 8:
            raise ValueError(f"{len(members)} functions in one slot; a PCI device has at most 8 (VFs aside)")
        for fn, ep in enumerate(members):
            bdf = f"0000:{bus:02x}:00.{fn}"
            f = _Fn(bdf, f"{parent}/{bdf}", numa, "gpu" if isinstance(ep, Gpu) else "hca", obj=ep)
            self.fns.append(f)
            placed.setdefault(id(ep), []).append(f)
        # SR-IOV: VFs follow the PFs' functions (ARI: 256 functions per bus, then the next bus).
        rid = len(members)
        for ep in members:
            for i in range(getattr(ep, "vfs", 0)):
                b, dev, func = bus + rid // 256, (rid % 256) >> 3, rid & 7
                bdf = f"0000:{b:02x}:{dev:02x}.{func}"
                vf = _Fn(bdf, f"{parent}/{bdf}", numa, "vf", obj=(ep, i))
                self.fns.append(vf)
                placed[id(ep)].append(vf)
                rid += 1

    # -- files --
    def pci_function(self, f: _Fn) -> None:
        node = self.node
        p = f.path
        at = f.obj[0].at if f.kind == "vf" else f.obj.at if f.kind in ("gpu", "hca") else f.obj
        if f.kind == "gpu":
            m = GPU_MODELS[f.obj.model]
            vendor, device, sub, cls, driver, gen = "0x10de", m["device"], m["subsystem_device"], "0x030200", "nvidia", int(m["gen"])
        elif f.kind in ("hca", "vf"):
            hca = f.obj[0] if f.kind == "vf" else f.obj
            m = HCA_MODELS[hca.model]
            eth = all(port.link_layer == "Ethernet" for port in hca.ports)
            vendor, sub, driver, gen = "0x15b3", m["subsystem_device"], m["driver"], int(m["gen"])
            device = m["vf_device"] if f.kind == "vf" else m["device"]
            cls = "0x020000" if eth else "0x020700"
        elif f.kind == "rp":
            vendor, device, sub, cls, driver, gen = "0x8086", "0x352a", "0x0000", "0x060400", "pcieport", 5
        else:  # PCIe switch ports (Broadcom PEX89000, as on HGX H100 baseboards)
            vendor, device, sub, cls, driver, gen = "0x1000", "0xc030", "0xa064", "0x060400", "pcieport", 5
        self.put(f"{p}/vendor", vendor)
        self.put(f"{p}/device", device)
        self.put(f"{p}/subsystem_vendor", vendor if f.kind in ("gpu", "hca", "vf") else "0x0000")
        self.put(f"{p}/subsystem_device", sub)
        self.put(f"{p}/class", cls)
        self.put(f"{p}/revision", "0x00" if f.kind != "gpu" else "0xa1")
        self.put(f"{p}/numa_node", str(f.numa))
        self.put(f"{p}/local_cpulist", node.numa_cpus.get(f.numa, "0-7"))
        self.put(f"{p}/enable", "1")
        if f.kind == "vf":
            # VFs have no link of their own: the kernel reports what their config space says.
            self.put(f"{p}/current_link_speed", "Unknown")
            self.put(f"{p}/current_link_width", "0")
            self.put(f"{p}/max_link_speed", "Unknown")
            self.put(f"{p}/max_link_width", "0")
        else:
            # Both ends of a link report what it trained at: a card's port above shows its speed too.
            link = at if f.kind in ("gpu", "hca") else f.link_at
            cur = min(gen, link.gen) if link is not None and link.gen else gen
            width = link.width if link is not None else 16
            max_width = at.max_width if f.kind in ("gpu", "hca") else 16
            f.cur = (cur, width)
            self.put(f"{p}/current_link_speed", PCIE_SPEED[cur])
            self.put(f"{p}/current_link_width", str(width))
            self.put(f"{p}/max_link_speed", PCIE_SPEED[gen])
            self.put(f"{p}/max_link_width", str(max_width))
        self.link(f"{p}/driver", f"/sys/bus/pci/drivers/{driver}")
        self.link(f"/sys/bus/pci/drivers/{driver}/{f.bdf}", p)
        self.link(f"/sys/bus/pci/devices/{f.bdf}", p)
        self.link(f"{p}/subsystem", "/sys/bus/pci")
        if f.kind in ("rp", "usp", "dsp"):
            self.put(f"{p}/secondary_bus_number", str(f.sec_bus))
            self.put(f"{p}/subordinate_bus_number", str(f.sub_bus))
            self.put(f"{p}/config", _bridge_config(vendor, device, f, gen, *f.cur))
        else:
            self.put(f"{p}/config", _endpoint_config(vendor, device, cls))

    def gpu(self, gpu: Gpu, f: _Fn, minor: int) -> None:
        m = GPU_MODELS[gpu.model]
        uuid = "%08x-%04x-%04x-%04x-%012x" % (
            _h(f.bdf, 1) & 0xFFFFFFFF, _h(f.bdf, 2) & 0xFFFF, _h(f.bdf, 3) & 0xFFFF, _h(f.bdf, 4) & 0xFFFF,
            _h(f.bdf, 5) & 0xFFFFFFFFFFFF,
        )
        self.put(
            f"/proc/driver/nvidia/gpus/{f.bdf}/information",
            f"Model: \t\t {m['name']}\nIRQ:   \t\t {200 + minor}\nGPU UUID: \t GPU-{uuid}\n"
            "Video BIOS: \t 96.00.74.00.1f\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n"
            f"Bus Location: \t {f.bdf}\nDevice Minor: \t {minor}\nGPU Firmware: \t {self.node.nvidia_driver}\n"
            "GPU Excluded:\t No",
        )
        self.put(f"/dev/nvidia{minor}", b"")

    def hca(self, hca: Hca, f: _Fn, name: str, ports: list[Port], vf: bool) -> None:
        m = HCA_MODELS[hca.model]
        ibdir = f"{f.path}/infiniband/{name}"
        guid = _h(f.bdf, "guid") & 0xFFFFFFFFFF
        node_guid = "a088:c203:00%02x:%04x" % ((guid >> 16) & 0xFF, guid & 0xFFFF)
        self.link(f"/sys/class/infiniband/{name}", ibdir)
        self.link(f"{ibdir}/device", f.path)
        self.put(f"{ibdir}/node_type", "1: CA")
        self.put(f"{ibdir}/node_guid", node_guid)
        self.put(f"{ibdir}/sys_image_guid", node_guid)
        self.put(f"{ibdir}/fw_ver", hca.fw_ver or m["fw_ver"])
        self.put(f"{ibdir}/board_id", m["board_id"])
        self.put(f"{ibdir}/hca_type", m["hca_type"])
        self.put(f"{ibdir}/hw_rev", "0x0")
        self.put(f"{ibdir}/node_desc", f"{self.node.hostname} {name}")
        uv = f"{f.path}/infiniband_verbs/uverbs{self.uverbs}"
        self.link(f"/sys/class/infiniband_verbs/uverbs{self.uverbs}", uv)
        self.link(f"{uv}/device", f.path)
        self.put(f"{uv}/ibdev", name)
        self.put(f"{uv}/abi_version", "1")
        self.put(f"{uv}/dev", f"231:{192 + self.uverbs}")
        self.dev_ib.append(f"uverbs{self.uverbs}")
        self.uverbs += 1
        bus = int(f.bdf.split(":")[1], 16)
        fn = int(f.bdf.rsplit(".", 1)[1])
        for num, port in enumerate(ports, start=1):
            self.port(f, ibdir, name, num, port, node_guid, bus, fn, vf)
            if not vf:
                umad = f"{f.path}/infiniband_mad/umad{self.umad}"
                self.link(f"/sys/class/infiniband_mad/umad{self.umad}", umad)
                self.put(f"{umad}/ibdev", name)
                self.put(f"{umad}/port", str(num))
                self.put(f"{umad}/dev", f"231:{self.umad}")
                self.dev_ib.extend([f"umad{self.umad}", f"issm{self.umad}"])
                self.umad += 1
        if not vf and hca.vfs:
            self.put(f"{f.path}/sriov_totalvfs", str(max(16, hca.vfs)))
            self.put(f"{f.path}/sriov_numvfs", str(hca.vfs))
            self.put(f"{f.path}/sriov_drivers_autoprobe", "1")

    def port(self, f: _Fn, ibdir: str, name: str, num: int, port: Port, node_guid: str, bus: int, fn: int, vf: bool) -> None:
        pdir = f"{ibdir}/ports/{num}"
        eth = port.link_layer == "Ethernet"
        configured = port.state in ("ACTIVE", "ARMED", "ACTIVE_DEFER")
        lid = port.lid
        if lid is None:
            lid = 0
            if configured and not eth:
                lid, self.lid = self.lid, self.lid + 1
        sm_lid = port.sm_lid if port.sm_lid is not None else (1 if configured and not eth else 0)
        self.put(f"{pdir}/state", f"{PORT_STATE_NUM[port.state]}: {port.state}")
        self.put(f"{pdir}/phys_state", f"{PHYS_STATE_NUM[port.phys_state]}: {port.phys_state}")
        self.put(f"{pdir}/rate", port.rate)
        self.put(f"{pdir}/link_layer", port.link_layer)
        self.put(f"{pdir}/lid", f"0x{lid:x}")
        self.put(f"{pdir}/sm_lid", f"0x{sm_lid:x}")
        self.put(f"{pdir}/lid_mask_count", "0")
        self.put(f"{pdir}/sm_sl", "0")
        self.put(f"{pdir}/cap_mask", "0x00010000" if eth else "0xa751e848")
        self.put(f"{pdir}/pkeys/0", "0xffff")
        for counter in ("symbol_error", "link_downed", "port_rcv_errors", "port_xmit_discards"):
            self.put(f"{pdir}/counters/{counter}", "0")
        netdev = None
        if port.netdev is not None and not vf:
            if port.netdev:
                netdev = port.netdev
            elif eth:
                netdev = f"enp{bus}s0f{fn}np{num - 1}"
            else:
                netdev = f"ibp{bus}s0" + (f"f{fn}" if fn else "") + (f"d{num - 1}" if num > 1 else "")
        mac = _h(f.bdf, num, "mac") & 0xFFFFFF
        mac_s = "0c:42:a1:%02x:%02x:%02x" % (mac >> 16, (mac >> 8) & 0xFF, mac & 0xFF)
        if port.gids is not None:
            gids = list(port.gids)
        elif eth:
            ll = "fe80:0000:0000:0000:0e42:a1ff:fe%02x:%04x" % (mac >> 16, mac & 0xFFFF)
            gids = [(ll, "IB/RoCE v1"), (ll, "RoCE v2")]
            if port.ipv4:
                a, b, c, d = (int(x) for x in port.ipv4.split("."))
                v4 = "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x" % (a, b, c, d)
                gids += [(v4, "IB/RoCE v1"), (v4, "RoCE v2")]
        else:
            g = node_guid.split(":")
            port_guid = f"{g[0]}:{g[1]}:{g[2]}:{int(g[3], 16) + num - 1:04x}"
            gids = [(f"fe80:0000:0000:0000:{port_guid}", "IB/RoCE v1")]
        for i, (gid, gtype) in enumerate(gids):
            self.put(f"{pdir}/gids/{i}", gid)
            self.put(f"{pdir}/gid_attrs/types/{i}", gtype)
            if eth and netdev:
                self.put(f"{pdir}/gid_attrs/ndevs/{i}", netdev)
        # Unused table entries read as the zero GID; their types/ndevs files give EINVAL (left out).
        for i in range(len(gids), len(gids) + 4):
            self.put(f"{pdir}/gids/{i}", "0000:0000:0000:0000:0000:0000:0000:0000")
        if netdev:
            up = port.state == "ACTIVE"
            oper = port.operstate or ("up" if up else "down")
            mtu = port.netdev_mtu or (9000 if eth else 4092)
            nd = f"{f.path}/net/{netdev}"
            self.link(f"/sys/class/net/{netdev}", nd)
            self.link(f"{nd}/device", f.path)
            self.put(f"{nd}/operstate", oper)
            self.put(f"{nd}/mtu", str(mtu))
            self.put(f"{nd}/carrier", "1" if oper == "up" else "0")
            self.put(f"{nd}/flags", "0x1003")  # IFF_UP|BROADCAST|MULTICAST: admin up, link or not
            self.put(f"{nd}/dev_port", str(num - 1))
            self.put(f"{nd}/dev_id", "0x0")
            self.put(f"{nd}/type", "1" if eth else "32")
            self.put(f"{nd}/address", mac_s if eth else _ipoib_hwaddr(gids[0][0], 0x1049 + num))
            self.put(f"{nd}/ifindex", str(self.ifindex))
            self.ifindex += 1

    def netif(self, nif: NetIf) -> None:
        d = f"/sys/devices/virtual/net/{nif.name}"
        self.link(f"/sys/class/net/{nif.name}", d)
        self.put(f"{d}/operstate", nif.operstate)
        self.put(f"{d}/mtu", str(nif.mtu))
        self.put(f"{d}/carrier", "1" if nif.carrier else "0")
        self.put(f"{d}/flags", "0x9" if nif.name == "lo" else "0x1003" if nif.operstate != "down" else "0x1002")
        self.put(f"{d}/type", "772" if nif.name == "lo" else "1")
        self.put(f"{d}/ifindex", str(1 if nif.name == "lo" else self.ifindex))
        if nif.name != "lo":
            self.ifindex += 1

    def build(self) -> dict[str, Any]:
        node = self.node
        self.dev_ib: list[str] = []
        self.ifindex = 2
        if node.sysfs:
            placed = self.layout()
            for f in self.fns:
                self.pci_function(f)
            for minor, gpu in enumerate(node.gpus):
                self.gpu(gpu, placed[id(gpu)][0], minor)
            vf_names: list[tuple[Hca, _Fn]] = []
            for hca in node.hcas:
                fns = placed[id(hca)]
                self.hca(hca, fns[0], hca.name, hca.ports, vf=False)
                for i, vf in enumerate(fns[1:]):
                    self.link(f"{fns[0].path}/virtfn{i}", vf.path)
                    self.link(f"{vf.path}/physfn", fns[0].path)
                    vf_names.append((hca, vf))
            # VFs get their IB names after every PF: the kernel probes them when sriov_numvfs is set.
            prefix_count: dict[str, int] = {}
            for hca in node.hcas:
                pre = hca.name.rstrip("0123456789")
                prefix_count[pre] = max(prefix_count.get(pre, 0), int(hca.name[len(pre):] or 0) + 1)
            for hca, vf in vf_names:
                pre = hca.name.rstrip("0123456789")
                name = f"{pre}{prefix_count[pre]}"
                prefix_count[pre] += 1
                self.hca(hca, vf, name, [hca.vf_port], vf=True)
            if node.hcas:
                self.put("/sys/class/infiniband_verbs/abi_version", "6")
            for nif in node.netifs:
                self.netif(nif)
            for n, cpus in sorted(node.numa_cpus.items()):
                self.put(f"/sys/devices/system/node/node{n}/cpulist", cpus)
            self.put("/sys/devices/system/node/online", _ranges(sorted(node.numa_cpus)))
            self.modules_files()
            self.userspace()
            self.put("/proc/sys/kernel/osrelease", node.osrelease)
            self.put("/proc/sys/kernel/hostname", node.hostname)
            self.put("/etc/hostname", node.hostname)
            shm_k = (node.shm_size or 64 * MIB) // KIB
            self.put(
                "/proc/mounts",
                "overlay / overlay rw,relatime 0 0\nproc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n"
                "sysfs /sys sysfs ro,nosuid,nodev,noexec,relatime 0 0\n"
                f"shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size={shm_k}k 0 0",
            )
            if node.proc_self:
                self.proc_self()
            if node.gpus:
                self.put(
                    "/proc/driver/nvidia/version",
                    f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {node.nvidia_driver}  Thu Oct 26 21:34:07 UTC 2023\n"
                    "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)",
                )
                self.put("/dev/nvidiactl", b"")
        if node.runtime:
            rt = Runtime(
                memlock_soft=node.memlock_soft,
                memlock_hard=node.memlock_hard,
                cap_eff=node.cap_eff,
                shm_size=node.shm_size,
                shm_free=node.shm_free,
                env=dict(node.env),
                hostname=node.hostname,
                in_container=node.in_container,
            )
            self.files["/runtime.json"] = (json.dumps(rt.to_json(), indent=2, sort_keys=True) + "\n").encode()
        for name, text in node.cmds.items():
            fname = name if "." in name else f"{name}.txt"  # cmd/node.json keeps its own suffix
            self.files[f"/cmd/{fname}"] = text.encode() if isinstance(text, str) else text
        return dict(sorted(self.files.items()))

    def proc_self(self) -> None:
        """/proc/self/limits and /proc/self/status of the collecting process (as `collect` keeps them)."""
        node = self.node

        def lim(v: int | None) -> str:
            return "unlimited" if v is None else str(v)

        rows = [
            ("Max cpu time", "unlimited", "unlimited", "seconds"),
            ("Max file size", "unlimited", "unlimited", "bytes"),
            ("Max data size", "unlimited", "unlimited", "bytes"),
            ("Max stack size", "8388608", "unlimited", "bytes"),
            ("Max core file size", "0", "unlimited", "bytes"),
            ("Max resident set", "unlimited", "unlimited", "bytes"),
            ("Max processes", "unlimited", "unlimited", "processes"),
            ("Max open files", "1048576", "1048576", "files"),
            ("Max locked memory", lim(node.memlock_soft), lim(node.memlock_hard), "bytes"),
            ("Max address space", "unlimited", "unlimited", "bytes"),
        ]
        text = f"{'Limit':<26}{'Soft Limit':<21}{'Hard Limit':<21}{'Units':<10}\n"
        text += "".join(f"{a:<26}{b:<21}{c:<21}{d:<10}\n" for a, b, c, d in rows)
        self.files["/proc/self/limits"] = text.encode()
        cap = "" if node.cap_eff is None else f"{node.cap_eff:016x}"
        self.put(
            "/proc/self/status",
            "Name:\trdmadoctor\nUmask:\t0022\nState:\tR (running)\nTgid:\t4711\nPid:\t4711\nPPid:\t1\n"
            f"CapInh:\t0000000000000000\nCapPrm:\t{cap}\nCapEff:\t{cap}\nCapBnd:\t{cap}\n"
            "CapAmb:\t0000000000000000\nNoNewPrivs:\t0\nSeccomp:\t2",
        )

    def modules_files(self) -> None:
        node = self.node
        mods = node.modules
        if mods is None:
            mods = []
            drivers = {HCA_MODELS[h.model]["driver"] for h in node.hcas}
            if node.hcas:
                mods += [m for m in IB_MODULES if not m.startswith("mlx5") or "mlx5_core" in drivers]
                if "mlx4_core" in drivers:
                    mods += ["mlx4_core", "mlx4_ib", "mlx4_en"]
            if node.gpus:
                mods += [m for m in GPU_MODULES if m != "nvidia_peermem" or node.hcas]
        lines = []
        for m in mods:
            size = 16384 + (_h(m) % 200) * 4096
            lines.append(f"{m} {size} 0 - Live 0x0000000000000000")
        self.files["/proc/modules"] = "".join(line + "\n" for line in lines).encode()
        for m in node.sys_modules if node.sys_modules is not None else mods:
            self.put(f"/sys/module/{m}/initstate", "live")
            self.put(f"/sys/module/{m}/refcnt", "0")
        drivers = {HCA_MODELS[h.model]["driver"] for h in node.hcas} | ({"nvidia"} if node.gpus else set())
        for drv in sorted(drivers):
            self.link(f"/sys/bus/pci/drivers/{drv}/module", f"/sys/module/{drv}")

    def userspace(self) -> None:
        node = self.node
        providers = sorted({HCA_MODELS[h.model]["provider"] for h in node.hcas})
        drivers = node.verbs_drivers if node.verbs_drivers is not None else providers
        libs = node.providers if node.providers is not None else providers
        pkgs = node.packages
        if pkgs is None:
            pkgs = dict(BASE_PACKAGES)
            if node.hcas:
                pkgs.update(RDMA_PACKAGES)
        for d in drivers:
            self.put(f"/etc/libibverbs.d/{d}.driver", f"driver {d}")
        # Stand-ins for the ELF files, holding the strings a reader looks for in the real ones:
        # the provider path format compiled into libibverbs and the private ABI symbol version.
        for lib in libs:
            self.put(f"{LIBDIR}/libibverbs/lib{lib}-rdmav34.so", b"\x7fELF\x02\x01\x01\x00IBVERBS_PRIVATE_34\x00")
        if "libibverbs1" in pkgs:
            self.link(f"{LIBDIR}/libibverbs.so.1", f"{LIBDIR}/libibverbs.so.1.14.44.0")
            self.put(
                f"{LIBDIR}/libibverbs.so.1.14.44.0",
                b"\x7fELF\x02\x01\x01\x00" + f"{LIBDIR}/libibverbs/lib%s-rdmav34.so\x00".encode()
                + b"IBVERBS_PRIVATE_34\x00IBVERBS_1.14\x00",
            )
        if "librdmacm1" in pkgs:
            self.link(f"{LIBDIR}/librdmacm.so.1", f"{LIBDIR}/librdmacm.so.1.3.44.0")
            self.put(f"{LIBDIR}/librdmacm.so.1.3.44.0", b"\x7fELF\x02\x01\x01\x00")
        stanzas = []
        for name, version in sorted(pkgs.items()):
            stanzas.append(
                f"Package: {name}\nStatus: install ok installed\nPriority: optional\nArchitecture: amd64\n"
                f"Version: {version}\nDescription: {name}\n"
            )
        self.put("/var/lib/dpkg/status", "\n".join(stanzas).rstrip("\n"))
        self.put(
            "/etc/os-release",
            'PRETTY_NAME="Ubuntu 22.04.3 LTS"\nNAME="Ubuntu"\nVERSION_ID="22.04"\nVERSION="22.04.3 LTS (Jammy Jellyfish)"\n'
            "ID=ubuntu\nID_LIKE=debian",
        )
        dev = node.dev_infiniband
        if dev is None:
            dev = sorted(self.dev_ib, key=_natural) + (["rdma_cm"] if node.hcas else [])
        for d in dev:
            self.put(f"/dev/infiniband/{d}", b"")


def _ipoib_hwaddr(gid: str, qpn: int) -> str:
    """IPoIB's 20-byte hardware address: flags + QPN (4 bytes), then the port GID (16 bytes)."""
    raw = qpn.to_bytes(4, "big") + bytes.fromhex(gid.replace(":", ""))
    return ":".join(f"{b:02x}" for b in raw)


def _slot(ep: Any) -> str:
    return ep.at.slot if ep.at.slot is not None else f"_{id(ep)}"


def _natural(s: str) -> tuple:
    head = s.rstrip("0123456789")
    return (head, int(s[len(head):] or 0))


def _ranges(nums: list[int]) -> str:
    if not nums:
        return ""
    return f"{nums[0]}-{nums[-1]}" if len(nums) > 1 else str(nums[0])


def _le16(buf: bytearray, off: int, v: int) -> None:
    buf[off : off + 2] = v.to_bytes(2, "little")


def _le32(buf: bytearray, off: int, v: int) -> None:
    buf[off : off + 4] = v.to_bytes(4, "little")


def _endpoint_config(vendor: str, device: str, cls: str) -> bytes:
    # What an unprivileged reader gets: the first 64 bytes (type 0 header).
    buf = bytearray(64)
    _le16(buf, 0, int(vendor, 16))
    _le16(buf, 2, int(device, 16))
    _le16(buf, 4, 0x0406)
    c = int(cls, 16)
    buf[0x09], buf[0x0A], buf[0x0B] = c & 0xFF, (c >> 8) & 0xFF, (c >> 16) & 0xFF
    return bytes(buf)


PCIE_TYPE = {"rp": 4, "usp": 5, "dsp": 6}
ACS_CAP_ID = 0x000D
# ACS capability bits: SrcValid, TransBlk, ReqRedir, CmpltRedir, UpstreamFwd, (no EgressCtrl), DirectTrans.
ACS_CAPS = 0x005F
ACS_REQ_REDIR = 1 << 2
ACS_CMPLT_REDIR = 1 << 3
ACS_SRC_VALID = 1 << 0


def _bridge_config(vendor: str, device: str, f: _Fn, gen: int, cur_gen: int, cur_width: int) -> bytes:
    """4096 bytes of a type 1 header with a PCIe capability and, on downstream-facing ports, ACS at 0x100."""
    buf = bytearray(4096)
    _le16(buf, 0x00, int(vendor, 16))
    _le16(buf, 0x02, int(device, 16))
    _le16(buf, 0x04, 0x0407)
    _le16(buf, 0x06, 0x0010)  # capabilities list present
    buf[0x0A], buf[0x0B] = 0x04, 0x06  # PCI-to-PCI bridge
    buf[0x0E] = 0x01
    bus = int(f.bdf.split(":")[1], 16)
    buf[0x18], buf[0x19], buf[0x1A] = bus, f.sec_bus or 0, f.sub_bus or 0
    buf[0x34] = 0x40
    buf[0x40], buf[0x41] = 0x10, 0x00  # PCI Express capability, last in the list
    _le16(buf, 0x42, 0x0002 | (PCIE_TYPE[f.kind] << 4))
    _le32(buf, 0x4C, gen | (16 << 4))  # Link Capabilities: max speed, max width
    _le16(buf, 0x52, cur_gen | (cur_width << 4))  # Link Status: current speed, width
    if f.kind in ("rp", "dsp"):
        _le32(buf, 0x100, ACS_CAP_ID | (1 << 16))  # version 1, next 0
        _le16(buf, 0x104, ACS_CAPS)
        _le16(buf, 0x106, f.acs or 0)
    return bytes(buf)


def build(node: Node) -> dict[str, Any]:
    """The host tree of ``node``: ``{"/sys/...": bytes | Link(target)}``, sorted by path."""
    return _Builder(node).build()


# ---- tool outputs, rendered from the same description -----------------------------------

_IBSTAT_STATE = {"DOWN": "Down", "INIT": "Initializing", "ARMED": "Armed", "ACTIVE": "Active", "ACTIVE_DEFER": "Active/Defer"}
_IBSTAT_PHYS = {"PhyTest": "Phy Test"}


def ibstat_text(tree: dict[str, Any]) -> str:
    """What `ibstat` prints for the RDMA devices of ``tree`` (it reads the same sysfs files)."""
    from rdmadoctor.host import mem_host

    host = mem_host(tree)
    out = []
    for name in host.listdir("/sys/class/infiniband"):
        base = f"/sys/class/infiniband/{name}"
        guid = "0x" + (host.read_value(f"{base}/node_guid") or "0").replace(":", "")
        ports = host.listdir(f"{base}/ports")
        out.append(f"CA '{name}'")
        out.append(f"\tCA type: {host.read_value(f'{base}/hca_type') or ''}")
        out.append(f"\tNumber of ports: {len(ports)}")
        out.append(f"\tFirmware version: {host.read_value(f'{base}/fw_ver') or ''}")
        out.append("\tHardware version: 0")
        out.append(f"\tNode GUID: {guid}")
        out.append(f"\tSystem image GUID: {guid}")
        for num in sorted(ports, key=int):
            pdir = f"{base}/ports/{num}"
            state = (host.read_value(f"{pdir}/state") or ": ").split(": ", 1)[1]
            phys = (host.read_value(f"{pdir}/phys_state") or ": ").split(": ", 1)[1]
            rate = (host.read_value(f"{pdir}/rate") or "0").split()[0]
            gid = (host.read_value(f"{pdir}/gids/0") or "").replace(":", "")
            out.append(f"\tPort {num}:")
            out.append(f"\t\tState: {_IBSTAT_STATE.get(state, state)}")
            out.append(f"\t\tPhysical state: {_IBSTAT_PHYS.get(phys, phys)}")
            out.append(f"\t\tRate: {rate}")
            out.append(f"\t\tBase lid: {int(host.read_value(f'{pdir}/lid') or '0', 16)}")
            out.append("\t\tLMC: 0")
            out.append(f"\t\tSM lid: {int(host.read_value(f'{pdir}/sm_lid') or '0', 16)}")
            out.append(f"\t\tCapability mask: {host.read_value(f'{pdir}/cap_mask')}")
            out.append(f"\t\tPort GUID: 0x{gid[16:] or '0'}")
            out.append(f"\t\tLink layer: {host.read_value(f'{pdir}/link_layer')}")
    return "\n".join(out) + "\n"


def ibdev2netdev_text(tree: dict[str, Any]) -> str:
    """mlnx-tools' `ibdev2netdev`: a shell script over the same sysfs files."""
    from rdmadoctor.host import mem_host

    host = mem_host(tree)
    out = []
    for name in host.listdir("/sys/class/infiniband"):
        base = f"/sys/class/infiniband/{name}"
        for nd in host.listdir(f"{base}/device/net"):
            port = int(host.read_value(f"{base}/device/net/{nd}/dev_port") or "0") + 1
            up = host.read_value(f"/sys/class/net/{nd}/operstate") == "up"
            out.append(f"{name} port {port} ==> {nd} ({'Up' if up else 'Down'})")
    return "\n".join(out) + "\n"


def show_gids_text(tree: dict[str, Any]) -> str:
    """mlnx-tools' `show_gids`: every valid GID of every port, with its type and netdev."""
    from rdmadoctor.host import mem_host

    host = mem_host(tree)
    out = ["DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV", "---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---"]
    n = 0
    for name in host.listdir("/sys/class/infiniband"):
        base = f"/sys/class/infiniband/{name}/ports"
        for port in host.listdir(base):
            for idx in sorted(host.listdir(f"{base}/{port}/gid_attrs/types"), key=int):
                gtype = host.read_value(f"{base}/{port}/gid_attrs/types/{idx}") or ""
                gid = host.read_value(f"{base}/{port}/gids/{idx}") or ""
                ndev = host.read_value(f"{base}/{port}/gid_attrs/ndevs/{idx}") or ""
                ver = "v2" if gtype == "RoCE v2" else "v1"
                ipv4 = ""
                if gid.startswith("0000:0000:0000:0000:0000:ffff:"):
                    h = gid.replace(":", "")[-8:]
                    ipv4 = ".".join(str(int(h[i : i + 2], 16)) for i in (0, 2, 4, 6))
                out.append(f"{name}\t{port}\t{idx}\t{gid}\t{ipv4}  \t{ver}\t{ndev}")
                n += 1
    out.append(f"n_gids_found={n}")
    return "\n".join(out) + "\n"


NVLINKS = {"h100": "NV18", "a100": "NV12"}


def nvidia_smi_topo_text(node: Node) -> str:
    """`nvidia-smi topo -m` for the layout of ``node``: its relations come from the description
    (the same switch is PIX, one card's functions PIX, the same host bridge PHB, the same NUMA
    node NODE, else SYS), not from the sysfs tree, so a test can hold one against the other."""
    b = _Builder(node)
    placed = b.layout()
    gpus = sorted(node.gpus, key=lambda g: _bdf_key(placed[id(g)][0].bdf))
    nics = sorted(node.hcas, key=lambda h: _bdf_key(placed[id(h)][0].bdf))

    def rel(x: Any, y: Any) -> str:
        a, c = x.at, y.at
        if a.switch is not None and a.switch == c.switch:
            return "PIX"
        if a.root_port == c.root_port and a.host_bridge == c.host_bridge:
            return "PIX"
        if a.host_bridge == c.host_bridge:
            return "PHB"
        return "NODE" if a.numa == c.numa else "SYS"

    cols = [f"GPU{i}" for i in range(len(gpus))] + [f"NIC{i}" for i in range(len(nics))]
    lines = ["\t" + "\t".join(cols) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
    everyone = [*gpus, *nics]
    for i, x in enumerate(everyone):
        cells = []
        for j, y in enumerate(everyone):
            if i == j:
                cells.append(" X ")
            elif isinstance(x, Gpu) and isinstance(y, Gpu):
                cells.append(NVLINKS.get(x.model, "SYS") if x.model in NVLINKS else rel(x, y))
            else:
                cells.append(rel(x, y))
        if isinstance(x, Gpu):
            tail = [node.numa_cpus.get(x.at.numa, ""), str(x.at.numa), "N/A"]
            lines.append(f"GPU{i}\t" + "\t".join(cells + tail))
        else:
            lines.append(f"NIC{i - len(gpus)}\t" + "\t".join(cells + ["", "", ""]))
    lines += [
        "",
        "Legend:",
        "",
        "  X    = Self",
        "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
        "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
        "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
        "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
        "  PIX  = Connection traversing at most a single PCIe bridge",
        "  NV#  = Connection traversing a bonded set of # NVLinks",
    ]
    if nics:
        lines += ["", "NIC Legend:", ""] + [f"  NIC{i}: {h.name}" for i, h in enumerate(nics)]
    return "\n".join(lines) + "\n"


def _bdf_key(bdf: str) -> tuple[int, ...]:
    dom, bus, rest = bdf.split(":")
    dev, fn = rest.split(".")
    return (int(dom, 16), int(bus, 16), int(dev, 16), int(fn))


def with_tool_outputs(node: Node) -> Node:
    """``node`` plus the outputs `rdmadoctor collect` records (ibstat, ibdev2netdev, show_gids, nvidia-smi topo -m)."""
    node = copy.deepcopy(node)
    if node.hcas:
        tree = build(replace(node, cmds={}))
        node.cmds.setdefault("ibstat", ibstat_text(tree))
        node.cmds.setdefault("ibdev2netdev", ibdev2netdev_text(tree))
        if any(p.link_layer == "Ethernet" for h in node.hcas for p in h.ports):
            node.cmds.setdefault("show_gids", show_gids_text(tree))
    if node.gpus:
        node.cmds.setdefault("nvidia-smi-topo", nvidia_smi_topo_text(node))
    return node


# ---- writing ----------------------------------------------------------------------------------

MTIME = 1700000000  # 2023-11-14: fixed, so a regenerated bundle has the same bytes


def write_dir(tree: dict[str, Any], dest: str) -> None:
    """Write ``tree`` under ``dest`` (replaced if it exists), with relative symlinks."""
    if os.path.lexists(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    for path, value in sorted(tree.items()):
        full = os.path.join(dest, path.lstrip("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if isinstance(value, Link):
            os.symlink(value.target, full)
        else:
            with open(full, "wb") as f:
                f.write(value)


def tar_bytes(tree: dict[str, Any]) -> bytes:
    """A ``.tar.gz`` of ``tree``: sorted members, fixed owner and mtime, gzip mtime 0."""
    dirs: set[str] = set()
    for path in tree:
        d = posixpath.dirname(path)
        while d not in ("/", ""):
            dirs.add(d)
            d = posixpath.dirname(d)
    entries = sorted([(d, None) for d in dirs] + list(tree.items()), key=lambda e: e[0])
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for path, value in entries:
            info = tarfile.TarInfo(path.lstrip("/"))
            info.mtime = MTIME
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if value is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tf.addfile(info)
            elif isinstance(value, Link):
                info.type, info.mode, info.linkname = tarfile.SYMTYPE, 0o777, value.target
                tf.addfile(info)
            else:
                info.mode, info.size = 0o644, len(value)
                tf.addfile(info, io.BytesIO(value))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def write_tar(tree: dict[str, Any], dest: str) -> None:
    data = tar_bytes(tree)
    with open(dest, "wb") as f:
        f.write(data)


def read_dir(root: str) -> dict[str, Any]:
    """A directory written by :func:`write_dir`, back as a tree (for comparing)."""
    out: dict[str, Any] = {}
    for base, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = os.path.join(base, name)
            rel = "/" + os.path.relpath(full, root).replace(os.sep, "/")
            if os.path.islink(full):
                out[rel] = Link(os.readlink(full))
            elif os.path.isfile(full):
                with open(full, "rb") as f:
                    out[rel] = f.read()
    return dict(sorted(out.items()))


def read_tar(path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tarfile.open(path, "r:*") as tf:
        for m in tf.getmembers():
            p = "/" + m.name.lstrip("./")
            if m.issym():
                out[p] = Link(m.linkname)
            elif m.isfile():
                f = tf.extractfile(m)
                out[p] = f.read() if f else b""
    return dict(sorted(out.items()))


# ---- the nodes -------------------------------------------------------------------------------

NCCL_IB_HCA_8 = "=" + ",".join(f"mlx5_{i}" for i in range(8))


def hgx_h100_ib(vfs_total: int = 0) -> Node:
    """DGX/HGX H100: 8 GPUs, each behind one PCIe switch with its CX-7 (PIX), 4 per socket,
    plus a dual-port CX-7 (two functions, one card) for storage on socket 1, last on the bus so
    the kernel names it mlx5_8 and mlx5_9 (names follow PCI probe order).
    ``vfs_total`` spreads SR-IOV VFs over the 8 compute PFs (the benchmark's big node)."""
    gpus, hcas = [], []
    for i in range(8):
        at = Pcie(numa=i // 4, host_bridge=f"hb{i}", root_port=f"rp{i}", switch=f"sw{i}")
        gpus.append(Gpu(at=at))
        vfs = vfs_total // 8 + (1 if i < vfs_total % 8 else 0)
        hcas.append(Hca(f"mlx5_{i}", at=replace(at), ports=[ib_port()], vfs=vfs))
    storage = Pcie(numa=1, host_bridge="hb-storage", root_port="rp-storage", slot="storage")
    hcas.append(Hca("mlx5_8", at=storage, ports=[ib_port()]))
    hcas.append(Hca("mlx5_9", at=replace(storage), ports=[ib_port()]))
    return Node(
        hostname="hgx-h100-017",
        gpus=gpus,
        hcas=hcas,
        env={
            "NCCL_IB_HCA": NCCL_IB_HCA_8,
            "NCCL_SOCKET_IFNAME": "eth0",
            "NCCL_DEBUG": "WARN",
            "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
        },
        in_container=True,
        cap_eff=CAP_DEFAULT_IPC_LOCK,
    )


def roce_node() -> Node:
    """4 GPUs, 4 single-port CX-7 in Ethernet mode (RoCE v2, 200G, MTU 9000), 2 per socket."""
    gpus, hcas = [], []
    for i in range(4):
        at = Pcie(numa=i // 2, host_bridge=f"hb{i}", root_port=f"rp{i}", switch=f"sw{i}")
        gpus.append(Gpu(at=at))
        hcas.append(Hca(f"mlx5_{i}", at=replace(at), ports=[roce_port(f"10.{i}.0.17")]))
    return Node(
        hostname="roce-node-03",
        gpus=gpus,
        hcas=hcas,
        env={
            "NCCL_IB_HCA": "=" + ",".join(f"mlx5_{i}" for i in range(4)),
            "NCCL_IB_GID_INDEX": "3",
            "NCCL_SOCKET_IFNAME": "eth0",
        },
        in_container=True,
        cap_eff=CAP_DEFAULT_IPC_LOCK,
    )


def broken_pod() -> Node:
    """A pod on an 8-GPU IB node, started without the settings RDMA needs; one cable out."""
    node = hgx_h100_ib()
    node.hostname = "trainer-7f9c4-0"
    node.hcas[3].ports = [down_port()]
    node.memlock_soft = node.memlock_hard = 64 * KIB
    node.cap_eff = CAP_DEFAULT
    node.shm_size, node.shm_free = 64 * MIB, 64 * MIB
    node.env = {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "INFO"}
    return node


def _small_ib(numa_split: bool = True) -> Node:
    """2 GPUs and 2 NDR HCAs, each pair behind one switch, one pair per socket."""
    gpus, hcas = [], []
    for i in range(2):
        at = Pcie(numa=i if numa_split else 0, host_bridge=f"hb{i}", root_port=f"rp{i}", switch=f"sw{i}")
        gpus.append(Gpu(at=at))
        hcas.append(Hca(f"mlx5_{i}", at=replace(at), ports=[ib_port()]))
    return Node(
        hostname="ib-node-01",
        gpus=gpus,
        hcas=hcas,
        env={"NCCL_IB_HCA": "=mlx5_0,mlx5_1", "NCCL_SOCKET_IFNAME": "eth0"},
        cap_eff=CAP_ALL,
    )


def _roce() -> Node:
    node = roce_node()
    node.gpus, node.hcas = node.gpus[:2], node.hcas[:2]
    node.gpus[1].at.numa = node.hcas[1].at.numa = 1
    node.env["NCCL_IB_HCA"] = "=mlx5_0,mlx5_1"
    node.hostname = "roce-node-01"
    return node


def _port_down() -> Node:
    node = _small_ib()
    node.hcas[1].ports = [down_port()]
    return node


def _port_init_no_sm() -> Node:
    node = _small_ib()
    for h in node.hcas:
        h.ports = [Port(state="INIT", phys_state="LinkUp", lid=0, sm_lid=0)]
    return node


def _no_provider() -> Node:
    # rdma-core's libibverbs1 alone: the kernel side works, but no userspace driver for mlx5.
    node = _small_ib()
    node.packages = {**BASE_PACKAGES, "libibverbs1": "44.0-2", "librdmacm1": "44.0-2"}
    node.verbs_drivers = []
    node.providers = []
    return node


def _memlock_64k() -> Node:
    node = _small_ib()
    node.memlock_soft = node.memlock_hard = 64 * KIB
    return node


def _shm_64m() -> Node:
    node = _small_ib()
    node.shm_size, node.shm_free = 64 * MIB, 64 * MIB
    return node


def _gpu_far() -> Node:
    # Both HCAs on socket 0, both GPUs on socket 1: every GPU <-> HCA path crosses the UPI link.
    node = _small_ib()
    for i, h in enumerate(node.hcas):
        h.at = Pcie(numa=0, host_bridge=f"hb-nic{i}", root_port=f"rp-nic{i}")
    for i, g in enumerate(node.gpus):
        g.at = Pcie(numa=1, host_bridge=f"hb-gpu{i}", root_port=f"rp-gpu{i}")
    return node


def _dual_port_port2_down() -> Node:
    # A ConnectX-3 VPI: one device, two ports (ports/1 and ports/2), only the first cabled.
    at = Pcie(numa=0, host_bridge="hb0", root_port="rp0", gen=3, width=8, max_width=8)
    return Node(
        hostname="ib-fdr-07",
        gpus=[],
        hcas=[Hca("mlx4_0", at=at, model="cx3", ports=[ib_port("56 Gb/sec (4X FDR)"), down_port()])],
        numa_cpus={0: "0-15"},
        env={"NCCL_IB_HCA": "mlx4_0:1", "NCCL_SOCKET_IFNAME": "eth0"},
        cap_eff=CAP_ALL,
    )


def _sriov() -> Node:
    node = _small_ib()
    node.hcas[0].vfs = 4
    return node


def _no_devices() -> Node:
    node = _small_ib()
    node.hcas = []
    node.env = {"NCCL_SOCKET_IFNAME": "eth0"}
    return node


def _acs_redirect() -> Node:
    # The kernel turns ACS redirect on when the IOMMU is on: GPU0 <-> mlx5_0 P2P goes up to the CPU.
    node = _small_ib()
    node.acs_ctrl = {"sw0": ACS_SRC_VALID | ACS_REQ_REDIR | ACS_CMPLT_REDIR}
    return node


def _pcie_degraded() -> Node:
    # mlx5_1 trained at Gen4 x8 in a Gen5 x16 slot: a quarter of the bandwidth a 400G port needs.
    node = _small_ib()
    node.hcas[1].at.gen, node.hcas[1].at.width = 4, 8
    return node


def _roce_mtu_1500() -> Node:
    # The netdevs kept the default MTU: RoCE runs with 1024-byte packets.
    node = _roce()
    for h in node.hcas:
        for p in h.ports:
            p.netdev_mtu = 1500
    return node


def _node_labels_stale() -> Node:
    # The port went down after the agent last labelled the node ready.
    node = _port_down()
    labels = {
        "feature.node.kubernetes.io/network-rdma.capable": "true",
        "rdmadoctor.io/link-layer": "infiniband",
        "rdmadoctor.io/active-ports": "2",
        "rdmadoctor.io/min-rate-gbps": "400",
        "rdmadoctor.io/ready": "true",
        "rdmadoctor.io/gpudirect": "true",
        "rdmadoctor.io/gpu-nic": "PIX",
        "kubernetes.io/hostname": node.hostname,
    }
    obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node.hostname, "labels": labels}}
    node.cmds["node.json"] = json.dumps(obj, indent=4, sort_keys=True) + "\n"
    return node


# `ibstat` of a ConnectX-3 VPI with ports 1 (FDR, active) and 2 (no cable), run in a container
# without /dev/infiniband/umad*: ibstat still reads sysfs but warns for every umad it cannot open.
IBSTAT_2PORT = """\
ibwarn: [412] umad_init: can't open UMAD port (mlx4_0:1)
CA 'mlx4_0'
	CA type: MT4099
	Number of ports: 2
	Firmware version: 2.42.5000
	Hardware version: 1
	Node GUID: 0x248a070300a1b2c0
	System image GUID: 0x248a070300a1b2c3
	Port 1:
		State: Active
		Physical state: LinkUp
		Rate: 56
		Base lid: 12
		LMC: 0
		SM lid: 1
		Capability mask: 0x02514868
		Port GUID: 0x248a070300a1b2c1
		Link layer: InfiniBand
ibwarn: [412] umad_get_port: can't open UMAD port (mlx4_0:2)
	Port 2:
		State: Down
		Physical state: Polling
		Rate: 10
		Base lid: 0
		LMC: 0
		SM lid: 0
		Capability mask: 0x02514868
		Port GUID: 0x248a070300a1b2c2
		Link layer: InfiniBand
"""

# ibstat printed two CAs and then aborted on the third (gpud PR #752 saw exactly this).
IBSTAT_TRUNCATED = """\
CA 'mlx5_0'
	CA type: MT4129
	Number of ports: 1
	Firmware version: 28.39.2048
	Hardware version: 0
	Node GUID: 0xa088c20300635a20
	System image GUID: 0xa088c20300635a20
	Port 1:
		State: Active
		Physical state: LinkUp
		Rate: 400
		Base lid: 26
		LMC: 0
		SM lid: 1
		Capability mask: 0xa751e848
		Port GUID: 0xa088c20300635a20
		Link layer: InfiniBand
CA 'mlx5_1'
	CA type: MT4129
	Number of ports: 1
	Firmware version: 28.39.2048
	Hardware version: 0
	Node GUID: 0xa088c20300635a38
	System image GUID: 0xa088c20300635a38
	Port 1:
		State: Active
		Physical state: LinkUp
		Rate: 400
		Base lid: 27
		LMC: 0
		SM lid: 1
		Capability mask: 0xa751e848
		Port GUID: 0xa088c20300635a38
		Link layer: InfiniBand
ibpanic: [2267] main: stat of IB device 'mlx5_2' failed: No such file or directory
"""


def _ibstat_only() -> Node:
    return Node(hostname="ticket-4711", sysfs=False, runtime=False, cmds={"ibstat": IBSTAT_2PORT})


def _truncated_ibstat() -> Node:
    return Node(hostname="ticket-4712", sysfs=False, runtime=False, cmds={"ibstat": IBSTAT_TRUNCATED})


EXAMPLES: dict[str, Callable[[], Node]] = {
    "hgx-h100-ib": hgx_h100_ib,
    "roce-node": roce_node,
    "broken-pod": broken_pod,
}

SCENARIOS: dict[str, Callable[[], Node]] = {
    "healthy-ib": _small_ib,
    "roce": _roce,
    "port-down": _port_down,
    "port-init-no-sm": _port_init_no_sm,
    "no-provider": _no_provider,
    "memlock-64k": _memlock_64k,
    "shm-64m": _shm_64m,
    "gpu-far": _gpu_far,
    "dual-port-port2-down": _dual_port_port2_down,
    "sriov": _sriov,
    "no-devices": _no_devices,
    "acs-redirect": _acs_redirect,
    "pcie-degraded": _pcie_degraded,
    "roce-mtu-1500": _roce_mtu_1500,
    "node-labels-stale": _node_labels_stale,
    "ibstat-only": _ibstat_only,
    "truncated-ibstat": _truncated_ibstat,
}


def example_tree(name: str) -> dict[str, Any]:
    # Shipped examples look like a `collect` bundle: sysfs plus the tools' own view of it.
    return build(with_tool_outputs(EXAMPLES[name]()))


def scenario_tree(name: str) -> dict[str, Any]:
    return build(SCENARIOS[name]())


# ---- command line ----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m rdmadoctor.fixturegen", description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", action="store_true", help="regenerate rdmadoctor/examples/*.tar.gz")
    ap.add_argument("--scenarios", metavar="DIR", help="regenerate the scenario fixture dirs under DIR")
    ap.add_argument("--sriov", type=int, metavar="N", help="the HGX node with N SR-IOV VFs, written to -o")
    ap.add_argument("-o", "--output", metavar="PATH", help="directory (or .tar.gz) for --sriov")
    args = ap.parse_args(argv)
    if not (args.examples or args.scenarios or args.sriov is not None):
        ap.error("give --examples, --scenarios DIR or --sriov N -o PATH")
    if args.examples:
        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "examples")
        for name in EXAMPLES:
            dest = os.path.join(here, f"{name}.tar.gz")
            write_tar(example_tree(name), dest)
            print(f"{dest}: {os.path.getsize(dest)} bytes")
    if args.scenarios:
        os.makedirs(args.scenarios, exist_ok=True)
        for name in SCENARIOS:
            dest = os.path.join(args.scenarios, name)
            tree = scenario_tree(name)
            write_dir(tree, dest)
            print(f"{dest}: {len(tree)} entries")
    if args.sriov is not None:
        if not args.output:
            ap.error("--sriov needs -o PATH")
        if args.sriov < 0 or args.sriov > 8 * 250:
            ap.error("--sriov: 0 to 2000 VFs")
        tree = build(hgx_h100_ib(vfs_total=args.sriov))
        if args.output.endswith((".tar.gz", ".tgz")):
            write_tar(tree, args.output)
        else:
            write_dir(tree, args.output)
        print(f"{args.output}: {len(tree)} entries")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
