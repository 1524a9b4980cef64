"""The host tree of a node description: sysfs, procfs, /etc, /dev and runtime.json, laid out as
the kernel does (PCI hierarchy, relative symlinks, IB names in probe order, config space)."""

from __future__ import annotations

import hashlib
import json
import posixpath
from dataclasses import dataclass
from typing import Any

from rdmadoctor.fixturegen.model import (
    BASE_PACKAGES,
    GPU_MODELS,
    HCA_MODELS,
    IWARP_CORE_MODULES,
    KIB,
    MIB,
    RDMA_PACKAGES,
    Gpu,
    Hca,
    NetIf,
    Node,
    Port,
    is_rnic,
)
from rdmadoctor.host import Link, Runtime

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
IB_MODULES = ["ib_core", "ib_uverbs", "ib_umad", "rdma_cm", "rdma_ucm", "ib_ipoib", "ib_cm", "iw_cm", "mlx5_core", "mlx5_ib", "mlxfw"]
GPU_MODULES = ["nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_peermem"]
LIBDIR = "/usr/lib/x86_64-linux-gnu"


def _b(text: str) -> bytes:
    return (text + "\n").encode()


# The IB PMA error counters in ports/N/counters/ and mlx5's firmware counters in hw_counters/.
PMA_COUNTERS = (
    "symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors", "port_xmit_discards",
    "excessive_buffer_overrun_errors", "local_link_integrity_errors",
)
HW_COUNTERS = ("out_of_sequence", "local_ack_timeout_err", "rnr_nak_retry_err", "roce_slow_restart", "np_cnp_sent", "rp_cnp_handled")


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
            if isinstance(ep, Hca) and "pci_fn" in HCA_MODELS[ep.model]:
                fn = int(HCA_MODELS[ep.model]["pci_fn"])  # cxgb4 binds PF4 of a Chelsio card
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
            vendor, sub, driver, gen = m.get("vendor", "0x15b3"), m["subsystem_device"], m["driver"], int(m["gen"])
            device = m["vf_device"] if f.kind == "vf" else m["device"]
            cls = m.get("class") or ("0x020000" if eth else "0x020700")
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
        if is_rnic(hca):
            # iw_cxgb4 copies the first port's MAC address into the node GUID (Chelsio OUI 00:07:43).
            mac = _h(f.bdf, 1, "mac") & 0xFFFFFF
            node_guid = "0007:43%02x:%04x:0000" % (mac >> 16, mac & 0xFFFF)
        self.link(f"/sys/class/infiniband/{name}", ibdir)
        self.link(f"{ibdir}/device", f.path)
        self.put(f"{ibdir}/node_type", m.get("node_type", "1: CA"))
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
        rnic = is_rnic(hca)
        for num, port in enumerate(ports, start=1):
            self.port(f, ibdir, name, num, port, node_guid, bus, fn, vf, rnic)
            if not vf and not rnic:  # ib_umad serves InfiniBand / RoCE MAD ports only, never iWARP
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

    def port(self, f: _Fn, ibdir: str, name: str, num: int, port: Port, node_guid: str, bus: int, fn: int, vf: bool,
             rnic: bool = False) -> None:
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
        if rnic:
            # iw_cxgb4's port_cap_flags; no P_Key table and no MAD counters (no process_mad).
            self.put(f"{pdir}/cap_mask", "0x08090000")
        else:
            self.put(f"{pdir}/cap_mask", "0x00010000" if eth else "0xa751e848")
            self.put(f"{pdir}/pkeys/0", "0xffff")
            # The shipped trees have four counters; a port given others (Port.counters) has them all.
            for counter in PMA_COUNTERS if port.counters else PMA_COUNTERS[:2] + PMA_COUNTERS[3:5]:
                self.put(f"{pdir}/counters/{counter}", str(port.counters.get(counter, 0)))
            if eth and not vf and any(c in port.counters for c in HW_COUNTERS):  # mlx5's firmware counters
                for counter in HW_COUNTERS:
                    self.put(f"{pdir}/hw_counters/{counter}", str(port.counters.get(counter, 0)))
        netdev = None
        if port.netdev is not None and not vf:
            if port.netdev:
                netdev = port.netdev
            elif eth:
                netdev = f"enp{bus}s0f{fn}np{num - 1}"
            else:
                netdev = f"ibp{bus}s0" + (f"f{fn}" if fn else "") + (f"d{num - 1}" if num > 1 else "")
        mac = _h(f.bdf, num, "mac") & 0xFFFFFF
        oui = "00:07:43" if rnic else "0c:42:a1"
        mac_s = oui + ":%02x:%02x:%02x" % (mac >> 16, (mac >> 8) & 0xFF, mac & 0xFF)
        if port.gids is not None:
            gids = list(port.gids)
        elif rnic:
            # One entry, the MAC address (c4iw_query_gid, irdma_query_gid, siw_query_gid); the GID
            # cache (cache.c config_non_roce_gid_cache) gives it the default type, "IB/RoCE v1".
            gids = [("0007:43%02x:%04x:0000:0000:0000:0000:0000" % (mac >> 16, mac & 0xFFFF), "IB/RoCE v1")]
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
            # iWARP GID entries have a netdev only since kernel 6.x; on 5.15 ndevs/<i> reads EINVAL.
            if eth and netdev and not rnic:
                self.put(f"{pdir}/gid_attrs/ndevs/{i}", netdev)
        # Unused table entries read as the zero GID; their types/ndevs files give EINVAL (left out).
        # (An iWARP port's table has one entry: gid_tbl_len 1 in c4iw_query_port.)
        for i in range(len(gids), len(gids) + (0 if rnic else 4)):
            self.put(f"{pdir}/gids/{i}", "0000:0000:0000:0000:0000:0000:0000:0000")
        if netdev:
            up = port.state == "ACTIVE"
            oper = port.operstate or ("up" if up else "down")
            if rnic and oper == "up":
                self.put(f"{f.path}/net/{netdev}/speed", str(_rate_mbps(port.rate)))
            self.netlink.append((netdev, oper == "up", port.netdev_mtu or (9000 if eth else 4092), port.ipv4))
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
        if nif.speed is not None:
            self.put(f"{d}/speed", str(nif.speed))
        addr = "127.0.0.1" if nif.name == "lo" else nif.ipv4
        self.netlink.append((nif.name, nif.operstate != "down" and nif.carrier, nif.mtu, addr))
        self.put(f"{d}/ifindex", str(1 if nif.name == "lo" else self.ifindex))
        if nif.name != "lo":
            self.ifindex += 1

    def build(self) -> dict[str, Any]:
        node = self.node
        self.dev_ib: list[str] = []
        self.ifindex = 2
        self.netlink: list[tuple[str, bool, int, str | None]] = []  # (name, up, mtu, ipv4) for runtime.json
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
            if node.record_interfaces:
                rt.interfaces = [
                    {"name": n, "up": up, "mtu": mtu, "addresses": [a] if a else []} for n, up, mtu, a in sorted(self.netlink)
                ]
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
            if node.hcas and all(is_rnic(h) for h in node.hcas):
                mods += IWARP_CORE_MODULES
                for h in node.hcas:
                    mods += [m for m in HCA_MODELS[h.model]["modules"].split() if m not in mods]
            elif node.hcas:
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


def _rate_mbps(rate: str) -> int:
    """"100 Gb/sec (4X EDR)" -> 100000, the netdev speed an iWARP port's rate was derived from."""
    return int(float(rate.split()[0]) * 1000)


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


def pci_layout(node: Node) -> dict[int, list[_Fn]]:
    """Where :func:`build` places each endpoint: its PCI functions (PF first, then VFs) by id()."""
    return _Builder(node).layout()
