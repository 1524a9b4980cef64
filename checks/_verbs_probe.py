"""verbs.userspace's probe: libibverbs, its providers, the package database and /dev/infiniband,
read through the Host (the rules of what to look for are checks/_verbs_rules.py). Facts only;
checks/verbs.py judges.
"""

from __future__ import annotations

import posixpath
import re

from rdmadoctor.checks._rdma import RdmaInventory, probe_inventory
from rdmadoctor.checks._verbs_rules import (
    _PROVIDER,
    CONFIG_DIR,
    DPKG_STATUS,
    LIB_DIRS,
    PACKAGES_OF_INTEREST,
    pabi_of_libibverbs,
    parse_driver_file,
    private_abi_of,
    provider_for,
    rdma_core_of,
)
from rdmadoctor.checks.ib import HAS_DEVICES, probe_tool_messages
from rdmadoctor.core.model import Finding
from rdmadoctor.core.record import field, record

# ---- facts --------------------------------------------------------------------------------


@record
class ProviderFile:
    path: str
    provider: str  # "mlx5"
    pabi: int  # the -rdmavNN suffix
    private_abi: int | None = None  # IBVERBS_PRIVATE_NN inside it; None when not read


@record
class DevNode:
    path: str
    exists: bool
    open_error: str | None = None  # None: opened read-write
    checked: bool = False  # an open was tried (live hosts only)


@record
class VerbsDevice:
    name: str
    driver: str | None
    provider: str | None
    uverbs: str | None = None  # uverbsN, from /sys/class/infiniband_verbs/*/ibdev
    is_vf: bool = False


@record
class VerbsFacts:
    libibverbs: str | None  # path of libibverbs.so.1, None when absent
    soname: str | None  # "libibverbs.so.1.14.44.0"
    rdma_core: int | None  # 44
    pabi: int | None  # provider ABI libibverbs loads (from its bytes)
    provider_dir: str | None
    driver_names: tuple[str, ...]  # from /etc/libibverbs.d/*.driver
    providers: tuple[ProviderFile, ...]
    devices: tuple[VerbsDevice, ...]
    packages: dict[str, tuple[str | None, str]] | None = None  # name -> (version, state); None: unknown
    packages_source: str | None = None  # "dpkg" | "rpm" | "ofed_info"
    packages_flavor: str | None = None  # "deb" | "rpm": which names to look for
    ofed_version: str | None = None
    dev_known: bool = True  # /dev could be looked at
    libs_known: bool = True  # the host has library folders to look in (a pasted-ibstat bundle has none)
    dev_nodes: tuple[DevNode, ...] = ()
    notes: tuple[str, ...] = field(default=())
    # What libibverbs printed into the recorded tool outputs, judged by the knowledge base.
    messages: tuple[Finding, ...] = ()
    # No RDMA device listed, only libibverbs' messages to judge (ib.devices says there is none).
    only_messages: bool = False


def _lib_dirs(host) -> list[str]:
    dirs = list(LIB_DIRS)
    # ld.so.conf.d adds dirs (MLNX_OFED's /usr/lib64/mlnx_ofed/..., /usr/local/lib, /opt/...).
    for conf in host.glob("/etc/ld.so.conf.d/*.conf"):
        for line in (host.read_text(conf, 65536) or "").splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("/") and line not in dirs:
                dirs.append(posixpath.normpath(line))
    seen, out = set(), []
    for d in dirs:
        real = host.realpath(d)
        if real is None or real in seen:
            continue
        seen.add(real)
        out.append(d)
    return out


def _find_libibverbs(host, dirs: list[str]) -> tuple[str | None, str | None]:
    for d in dirs:
        path = f"{d}/libibverbs.so.1"
        if host.exists(path):
            real = host.realpath(path)
            soname = posixpath.basename(real) if real else None
            if soname == "libibverbs.so.1":  # not a link: the version is in a sibling's name
                sibs = [posixpath.basename(p) for p in host.glob(f"{d}/libibverbs.so.1.*")]
                soname = sibs[0] if sibs else soname
            return path, soname
    return None, None


def _packages(host, wanted: frozenset[str], notes: list[str]):
    """(packages, source, flavor, ofed_version)."""
    pkgs: dict[str, tuple[str, str]] | None
    flavor: str | None
    from rdmadoctor.parsers.packages import parse_dpkg_l, parse_dpkg_status, parse_ofed_info, parse_rpm_qa

    data = host.read_bytes(DPKG_STATUS, 256 * 1024 * 1024)
    if data is not None:
        return parse_dpkg_status(data.decode("utf-8", "replace"), wanted), "dpkg", "deb", None

    for name, parser, flavor in (("dpkg-l", parse_dpkg_l, "deb"), ("rpm-qa", parse_rpm_qa, "rpm")):
        res = host.cmd(name)
        if res.text is None:
            continue
        parsed = parser(res.text)
        notes.extend(f"cmd/{name}.txt: {w}" for w in parsed.warnings[:5])
        if parsed.ok:
            pkgs = {k: (v, "installed") for k, v in parsed.value.packages.items()}
            return pkgs, parsed.value.source, flavor, None
    res = host.cmd("ofed_info")
    if res.text is not None:
        parsed = parse_ofed_info(res.text)
        if parsed.ok:
            db = parsed.value
            pkgs = {k: (v, "installed") for k, v in db.packages.items()} or None
            flavor = None
            if pkgs:
                flavor = "deb" if any(k in pkgs for k in ("libibverbs1", "ibverbs-providers", "librdmacm1")) else "rpm"
            return pkgs, "ofed_info", flavor, db.ofed_version
    return None, None, None, None


def probe_verbs(ctx) -> VerbsFacts:
    host = ctx.host
    notes: list[str] = []
    inv: RdmaInventory = ctx.get(probe_inventory)
    messages = ctx.get(probe_tool_messages).findings
    if not inv.devices:
        return VerbsFacts(None, None, None, None, None, (), (), (), messages=messages, only_messages=True)
    dirs = _lib_dirs(host)
    libs_known = host.live_process or bool(dirs)
    lib, soname = _find_libibverbs(host, dirs)
    pabi = pdir = None
    if lib is not None:
        pabi, pdir = pabi_of_libibverbs(host.read_bytes(lib))
    # Provider files: in <libdir>/libibverbs/ (VERBS_PROVIDER_DIR) or on the search path.
    search = ([pdir] if pdir else []) + [f"{d}/libibverbs" for d in dirs] + dirs
    providers: list[ProviderFile] = []
    seen: set[str] = set()
    for d in search:
        for path in host.glob(f"{d}/lib*-rdmav*.so"):
            m = re.match(_PROVIDER, posixpath.basename(path))
            real = host.realpath(path)
            if m is None or real is None or path in seen:
                continue
            seen.add(path)
            providers.append(ProviderFile(path, m.group(1), int(m.group(2))))
    driver_names: list[str] = []
    for conf in host.glob(f"{CONFIG_DIR}/*"):
        driver_names.extend(parse_driver_file(host.read_text(conf, 65536)))
    uverbs_of: dict[str, str] = {}
    for ud in host.listdir("/sys/class/infiniband_verbs"):
        ibdev = host.read_value(f"/sys/class/infiniband_verbs/{ud}/ibdev")
        if ibdev and ud.startswith("uverbs"):
            uverbs_of[ibdev] = ud
    for dev in inv.devices:
        if dev.name not in uverbs_of:  # older kernels and snapshots lack /sys/class/infiniband_verbs
            found = [u for u in host.listdir(f"/sys/class/infiniband/{dev.name}/device/infiniband_verbs") if u.startswith("uverbs")]
            if len(found) == 1:
                uverbs_of[dev.name] = found[0]
    devices = tuple(
        VerbsDevice(d.name, d.driver, provider_for(d.driver, d.name), uverbs_of.get(d.name), d.is_vf) for d in inv.devices
    )
    # Read the providers the devices need: a provider renamed or symlinked to libibverbs' suffix
    # still asks for its own IBVERBS_PRIVATE_<N> and fails to load.
    needed = {d.provider for d in devices if d.provider}
    providers = [
        ProviderFile(p.path, p.provider, p.pabi, private_abi_of(host.read_bytes(p.path)))
        if p.provider in needed and p.pabi == pabi
        else p
        for p in providers
    ]
    wanted = PACKAGES_OF_INTEREST | frozenset(str(x) for x in (ctx.expect.get("recommended_packages") or ()) if isinstance(x, str))
    wanted = wanted | frozenset(n + "t64" for n in wanted)  # Ubuntu 24.04's 64-bit time_t renames
    packages, psource, flavor, ofed = _packages(host, wanted, notes)
    dev_known = host.live_process or host.is_dir("/dev")
    nodes: list[DevNode] = []
    if dev_known:
        paths = host.glob("/dev/infiniband/uverbs*") + ["/dev/infiniband/rdma_cm"]
        for path in paths:
            exists = host.exists(path)
            err = host.open_rw(path) if exists else None
            checked = exists and not (err or "").startswith("not checked")
            nodes.append(DevNode(path, exists, err if checked else None, checked))
    return VerbsFacts(
        libibverbs=lib,
        soname=soname,
        rdma_core=rdma_core_of(soname),
        pabi=pabi,
        provider_dir=pdir,
        driver_names=tuple(driver_names),
        providers=tuple(providers),
        devices=devices,
        packages=packages,
        packages_source=psource,
        packages_flavor=flavor,
        ofed_version=ofed,
        dev_known=dev_known,
        libs_known=libs_known,
        dev_nodes=tuple(nodes),
        notes=tuple(notes),
        messages=messages,
    )


def _has_devices_or_messages(ctx) -> str | None:
    why = HAS_DEVICES.test(ctx)
    if why and ctx.get(probe_tool_messages).findings:
        return None  # no device listed, but libibverbs said why: that is this check's to report
    return why


def _inventory(f: VerbsFacts) -> dict:
    pk = f.packages or {}
    return {
        "libibverbs": f.soname,
        "rdma_core_version": f.rdma_core,
        "verbs_provider_abi": f.pabi,
        "verbs_providers": sorted({p.provider for p in f.providers}),
        "packages": {k: v for k, (v, state) in sorted(pk.items()) if state == "installed"} if f.packages is not None else None,
        "ofed_version": f.ofed_version,
    }
