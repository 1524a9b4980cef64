"""verbs.userspace: libibverbs, a provider for every device's driver, the packages, /dev/infiniband.

How libibverbs (rdma-core, libibverbs/dynamic_driver.c) finds a provider: it reads every file in
/etc/libibverbs.d, keeps the ``driver <name>`` lines, and dlopen()s
``<provider dir>/lib<name>-rdmav<PABI>.so``, then ``lib<name>-rdmav<PABI>.so`` on the library
search path. PABI is compiled into libibverbs; a file with another suffix is never even tried.
"""

from __future__ import annotations

import posixpath
import re

from rdmadoctor.checks._rdma import RdmaInventory, ignored, probe_inventory
from rdmadoctor.checks.ib import HAS_DEVICES, probe_tool_messages
from rdmadoctor.core.codes.ib import (
    DEV_INFINIBAND_UNKNOWN,
    DEV_RDMA_CM_MISSING,
    DEV_UVERBS_MISSING,
    VERBS_ABI_MISMATCH,
    VERBS_DRIVER_UNKNOWN,
    VERBS_LIB_MISSING,
    VERBS_LIB_UNKNOWN,
    VERBS_PKG_MISSING,
    VERBS_PKG_UNCHECKED,
    VERBS_PROVIDER_MISSING,
)
from rdmadoctor.core.expect import Expect
from rdmadoctor.core.facts import RdmaDevice
from rdmadoctor.core.model import CONFIG, ERROR, INFO, UNKNOWN, WARNING, Check, Finding, Need, Paste, PodChange
from rdmadoctor.core.record import field, record
from rdmadoctor.core.words import count
from rdmadoctor.logs.kb import verbs as kb_verbs

# (kernel drivers, device-name prefixes, libibverbs provider, kernel IB module). The kernel
# driver is the one bound to the device behind /sys/class/infiniband/<dev>/device: the PCI
# driver (mlx5_core), or an auxiliary driver on newer kernels ("mlx5_ib.rdma", "irdma.gen_2").
RDMA_DRIVERS: tuple[tuple[tuple[str, ...], tuple[str, ...], str, str], ...] = (
    (("mlx5_core", "mlx5_ib"), ("mlx5_",), "mlx5", "mlx5_ib"),
    (("mlx4_core", "mlx4_ib"), ("mlx4_",), "mlx4", "mlx4_ib"),
    (("ib_mthca",), ("mthca",), "mthca", "ib_mthca"),
    # i40iw was folded into irdma in kernel 5.14 and rdma-core 36 dropped its provider.
    (("irdma", "ice", "i40e", "i40iw"), ("irdma", "i40iw"), "irdma", "irdma"),
    (("bnxt_en", "bnxt_re"), ("bnxt_re",), "bnxt_re", "bnxt_re"),
    (("efa",), ("efa_",), "efa", "efa"),
    (("ib_qib",), ("qib",), "ipathverbs", "ib_qib"),
    (("hfi1",), ("hfi1_",), "hfi1verbs", "hfi1"),
    (("rdma_rxe",), ("rxe",), "rxe", "rdma_rxe"),  # soft RoCE: no PCI device, named rxe*
    (("siw",), ("siw",), "siw", "siw"),
    (("qede", "qedr"), ("qedr",), "qedr", "qedr"),
    (("be2net", "ocrdma"), ("ocrdma",), "ocrdma", "ocrdma"),
    (("vmw_pvrdma",), ("vmw_pvrdma",), "vmw_pvrdma", "vmw_pvrdma"),
    (("erdma",), ("erdma_",), "erdma", "erdma"),
    (("mana", "mana_ib"), ("mana_",), "mana", "mana_ib"),
    (("hns3", "hns_roce", "hns_roce_hw_v2"), ("hns_",), "hns", "hns_roce_hw_v2"),
    (("cxgb4", "iw_cxgb4"), ("cxgb4_",), "cxgb4", "iw_cxgb4"),
)


def rdma_driver_entry(driver: str | None, name: str | None = None):
    """The RDMA_DRIVERS row of a device: by its kernel driver, else by its name's prefix."""
    if driver:
        base = driver.split(".", 1)[0]
        for row in RDMA_DRIVERS:
            if driver in row[0] or base in row[0]:
                return row
    if name:
        for row in RDMA_DRIVERS:
            if name.startswith(row[1]):
                return row
    return None


def provider_for(driver: str | None, name: str | None = None) -> str | None:
    row = rdma_driver_entry(driver, name)
    return row[2] if row else None


LIB_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib/powerpc64le-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/lib64",
    "/lib",
    "/usr/local/lib",
)
CONFIG_DIR = "/etc/libibverbs.d"
DPKG_STATUS = "/var/lib/dpkg/status"

# Debian package -> the RHEL/Fedora package that holds the same files (ibverbs-providers is
# part of libibverbs there).
RPM_NAMES = {
    "libibverbs1": "libibverbs",
    "ibverbs-providers": "libibverbs",
    "librdmacm1": "librdmacm",
    "libibumad3": "libibumad",
    "infiniband-diags": "infiniband-diags",
    "perftest": "perftest",
    "rdma-core": "rdma-core",
    "ibverbs-utils": "libibverbs-utils",
    "rdmacm-utils": "librdmacm-utils",
}
# Binary packages built from the rdma-core source: they must all come from one build.
RDMA_CORE_DEB = ("rdma-core", "libibverbs1", "ibverbs-providers", "librdmacm1", "libibumad3", "infiniband-diags", "ibverbs-utils")
RDMA_CORE_RPM = ("rdma-core", "libibverbs", "librdmacm", "libibumad", "infiniband-diags", "libibverbs-utils")
PACKAGES_OF_INTEREST = frozenset(RPM_NAMES) | frozenset(RPM_NAMES.values()) | frozenset(RDMA_CORE_DEB)

DEV_REMEDY = (
    "Request the RDMA device in the pod spec. With the RDMA shared device plugin "
    "(k8s-rdma-shared-dev-plugin, or the NVIDIA network operator's rdmaSharedDevicePlugin):\n"
    "resources:\n"
    "  limits:\n"
    "    rdma/hca: 1   # the resourceName in the plugin's config, e.g. rdma/rdma_shared_device_a\n"
    "With the SR-IOV network device plugin:\n"
    "metadata:\n"
    "  annotations:\n"
    "    k8s.v1.cni.cncf.io/networks: sriov-rdma-net\n"
    "spec:\n"
    "  containers:\n"
    "  - resources:\n"
    "      limits:\n"
    "        nvidia.com/sriov_rdma_vf: 1   # your SriovNetworkNodePolicy's resourceName\n"
    "Without a device plugin (privileged pod):\n"
    "spec:\n"
    "  containers:\n"
    "  - securityContext:\n"
    "      privileged: true\n"
    "    volumeMounts:\n"
    "    - {name: infiniband, mountPath: /dev/infiniband}\n"
    "  volumes:\n"
    "  - name: infiniband\n"
    "    hostPath: {path: /dev/infiniband}\n"
    "On the node itself: `modprobe ib_uverbs rdma_ucm` creates the nodes."
)


# ---- pure parsers -------------------------------------------------------------------------


_SONAME = r"^libibverbs\.so\.1\.(\d+)\.([0-9A-Za-z]+)\.(\d+)$"
_PROVIDER = r"^lib(.+)-rdmav(\d{1,4})\.so$"


def rdma_core_of(soname: str | None) -> int | None:
    """``libibverbs.so.1.14.44.0`` -> 44: rdma-core names the library 1.<abi>.<its release>.

    MLNX_OFED builds carry their own release words ("2307mlnx47"): no upstream number is guessed.
    """
    if not soname:
        return None
    m = re.match(_SONAME, soname)
    if m is None or not m.group(2).isdigit():
        return None
    return int(m.group(2))


def pabi_of_libibverbs(data: bytes | None) -> tuple[int | None, str | None]:
    """The provider ABI and provider dir compiled into libibverbs: its bytes hold the
    format string "<dir>/lib%s-rdmav34.so" and the symbol version IBVERBS_PRIVATE_34."""
    if not data:
        return None, None
    pdir = None
    m = re.search(rb"(/[\x21-\x7e]{1,200}?)/lib%s-rdmav(\d{1,4})\.so", data)
    if m:
        pdir = m.group(1).decode("ascii", "replace")
        return int(m.group(2)), pdir
    m = re.search(rb"lib%s-rdmav(\d{1,4})\.so", data) or re.search(rb"IBVERBS_PRIVATE_(\d{1,4})", data)
    if m:
        return int(m.group(1)), None
    # libibverbs before rdma-core (1.1.x, MLNX_OFED 4.x) built the name from "rdmav2".
    m = re.search(rb"rdmav(\d{1,4})\x00", data)
    return (int(m.group(1)), None) if m else (None, None)


def private_abi_of(data: bytes | None) -> int | None:
    if not data:
        return None
    m = re.search(rb"IBVERBS_PRIVATE_(\d{1,4})", data)
    return int(m.group(1)) if m else None


def parse_driver_file(text: str | None) -> tuple[str, ...]:
    """``driver mlx5`` lines of an /etc/libibverbs.d file (as libibverbs' read_config_file)."""
    out = []
    for line in (text or "").splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "driver":
            out.append(words[1])
    return tuple(out)


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


# ---- judge --------------------------------------------------------------------------------


def _configured(f: VerbsFacts, provider: str) -> bool:
    for name in f.driver_names:
        base = posixpath.basename(name)  # "driver /opt/x/libmlx5" names a path without suffix
        if name == provider or base in (provider, "lib" + provider):
            return True
    return False


def _judge_providers(f: VerbsFacts, expect: dict) -> list[Finding]:
    out: list[Finding] = []
    want_suffix = f"-rdmav{f.pabi}.so" if f.pabi is not None else "-rdmav<N>.so"
    lib_text = f.soname or "libibverbs.so.1"
    if f.rdma_core is not None:
        lib_text += f" (rdma-core {f.rdma_core})"
    done: set[str] = set()
    for dev in f.devices:
        if dev.provider is None:
            out.append(
                Finding(
                    VERBS_DRIVER_UNKNOWN.code,
                    UNKNOWN,
                    dev.name,
                    f"{dev.name}: kernel driver {dev.driver or 'unknown'} is not one rdmadoctor knows; which "
                    "libibverbs provider it needs cannot be told.",
                )
            )
            continue
        p = dev.provider
        if p in done:
            continue
        done.add(p)
        users = ", ".join(d.name for d in f.devices if d.provider == p)
        files = [x for x in f.providers if x.provider == p]
        so = f"lib{p}{want_suffix}"
        if not files:
            out.append(
                Finding(
                    VERBS_PROVIDER_MISSING.code,
                    ERROR,
                    users,
                    f"no lib{p}-rdmav*.so provider for {users} (kernel driver {dev.driver or 'unknown'}); "
                    f"expected {so} in {f.provider_dir or '<libdir>/libibverbs'}/: libibverbs prints \"libibverbs: Warning: couldn't "
                    f"load driver '{so}'\" and the device is invisible to NCCL.",
                    VERBS_PROVIDER_MISSING.fix,
                    data={"provider": p},
                )
            )
            continue
        if not _configured(f, p):
            out.append(
                Finding(
                    VERBS_PROVIDER_MISSING.code,
                    ERROR,
                    users,
                    f"{files[0].path} exists but no file in {CONFIG_DIR}/ says 'driver {p}'; expected "
                    f"{CONFIG_DIR}/{p}.driver: libibverbs never loads the provider (\"libibverbs: Warning: no "
                    "userspace device-specific driver found\").",
                    f"`echo 'driver {p}' > {CONFIG_DIR}/{p}.driver`, or reinstall the providers package "
                    "(`apt-get install -y --reinstall ibverbs-providers` / `dnf reinstall -y libibverbs`) which ships it.",
                    data={"provider": p},
                )
            )
        if f.libibverbs is None:
            continue  # VERBS_LIB_MISSING says it; the ABI cannot be judged without the library
        if f.pabi is not None:
            good = [x for x in files if x.pabi == f.pabi]
            if not good:
                found = ", ".join(sorted({posixpath.basename(x.path) for x in files}))
                out.append(
                    Finding(
                        VERBS_ABI_MISMATCH.code,
                        ERROR,
                        users,
                        f"found {found} but {lib_text} loads lib{p}-rdmav{f.pabi}.so (provider ABI {f.pabi}): "
                        "the provider comes from another rdma-core build (MLNX_OFED and distro packages mixed?) "
                        f"and is never loaded: \"libibverbs: Warning: couldn't load driver 'lib{p}-rdmav{f.pabi}.so'\".",
                        VERBS_ABI_MISMATCH.fix,
                        data={"provider": p, "libibverbs_pabi": f.pabi, "provider_pabi": sorted({x.pabi for x in files})},
                    )
                )
                continue
            bad = [x for x in good if x.private_abi is not None and x.private_abi != f.pabi]
            if bad and len(bad) == len(good):
                out.append(
                    Finding(
                        VERBS_ABI_MISMATCH.code,
                        ERROR,
                        users,
                        f"{bad[0].path} is named for provider ABI {f.pabi} but was built for {bad[0].private_abi} "
                        f"(it needs IBVERBS_PRIVATE_{bad[0].private_abi}); {lib_text} has IBVERBS_PRIVATE_{f.pabi}: "
                        f"loading fails with \"version `IBVERBS_PRIVATE_{bad[0].private_abi}' not found\".",
                        VERBS_ABI_MISMATCH.fix,
                        data={"provider": p, "libibverbs_pabi": f.pabi, "provider_pabi": bad[0].private_abi},
                    )
                )
        elif f.rdma_core is not None:
            # The library's bytes were not available (a bundle): its release number bounds the
            # ABI (rdma-core sets the provider ABI to the release that last changed it), so a
            # provider with a larger suffix is certainly from a newer build.
            if all(x.pabi > f.rdma_core for x in files):
                found = ", ".join(sorted({posixpath.basename(x.path) for x in files}))
                out.append(
                    Finding(
                        VERBS_ABI_MISMATCH.code,
                        ERROR,
                        users,
                        f"found {found}, newer than {lib_text} (its provider ABI is at most {f.rdma_core}): the "
                        "provider comes from another rdma-core build and is never loaded.",
                        VERBS_ABI_MISMATCH.fix,
                        data={"provider": p, "rdma_core": f.rdma_core, "provider_pabi": sorted({x.pabi for x in files})},
                    )
                )
    return out


def _base_version(v: str | None) -> str:
    return re.sub(r"\+b\d+$", "", v or "")


def _judge_packages(f: VerbsFacts, expect: dict) -> list[Finding]:
    if f.packages is None:
        if f.ofed_version:
            return [Finding(VERBS_PKG_UNCHECKED.code, INFO, "packages", f"{f.ofed_version} is installed; its packages were not listed.")]
        return [
            Finding(
                VERBS_PKG_UNCHECKED.code,
                INFO,
                "packages",
                "installed packages not checked: no /var/lib/dpkg/status and no recorded dpkg -l, rpm -qa or ofed_info output.",
            )
        ]
    out: list[Finding] = []
    pk = f.packages
    rpm = f.packages_flavor == "rpm"

    def lookup(name: str) -> tuple[str, tuple[str | None, str] | None]:
        for cand in (name, name + "t64"):
            if cand in pk:
                return cand, pk[cand]
        return name, None

    recommended = expect.get("recommended_packages") or []
    if isinstance(recommended, str):
        recommended = [recommended]
    missing, broken = [], []
    seen = set()
    for want in recommended:
        if not isinstance(want, str):
            continue
        name = RPM_NAMES.get(want, want) if rpm else want
        if name in seen:
            continue
        seen.add(name)
        found, entry = lookup(name)
        if entry is None:
            missing.append(name)
        elif entry[1] != "installed":
            broken.append((found, entry))
    for name in missing:
        out.append(
            Finding(
                VERBS_PKG_MISSING.code,
                WARNING,
                name,
                f"package {name} is not installed ({f.packages_source}); expected the recommended RDMA packages.",
                (f"`dnf install -y {' '.join(missing)}`" if rpm else f"`apt-get install -y {' '.join(missing)}`")
                + " in the image (or the node).",
            )
        )
    for name, (version, state) in broken:
        out.append(
            Finding(
                VERBS_PKG_MISSING.code,
                WARNING,
                name,
                f"package {name} {version or ''} is {state} in the dpkg database, not installed; expected a "
                "complete install (an interrupted apt run).",
                f"`dpkg --configure -a && apt-get install -y --reinstall {name}`",
            )
        )
    # MOFED/inbox mix: every package built from rdma-core must come from the same build.
    family = RDMA_CORE_RPM if rpm else RDMA_CORE_DEB
    versions = {}
    for name in family:
        found, entry = lookup(name)
        if entry is not None and entry[1] == "installed" and entry[0]:
            versions[found] = entry[0]
    if len({_base_version(v) for v in versions.values()}) > 1:
        listed = ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))
        mofed = any("mlnx" in v.lower() for v in versions.values())
        out.append(
            Finding(
                VERBS_ABI_MISMATCH.code,
                WARNING,
                "packages",
                f"rdma-core packages from different builds: {listed}; expected one version"
                + (" (MLNX_OFED and distro packages are mixed)" if mofed else "")
                + ": a provider and libibverbs from different builds fail to load.",
                VERBS_ABI_MISMATCH.fix,
                data={"versions": versions},
            )
        )
    return out


# The uverbs nodes come with the RDMA device plugin's resource; a node-side cause is the other way.
DEV_POD = PodChange(rdma_device=True, whole=False)


def _judge_dev(f: VerbsFacts, expect: dict) -> list[Finding]:
    if not f.dev_known:
        return [
            Finding(
                DEV_INFINIBAND_UNKNOWN.code,
                UNKNOWN,
                "/dev/infiniband",
                "the bundle has no /dev: whether /dev/infiniband/uverbs* exist is unknown.",
            )
        ]
    out: list[Finding] = []
    uverbs = [n for n in f.dev_nodes if posixpath.basename(n.path).startswith("uverbs") and n.exists]
    if not uverbs:
        out.append(
            Finding(
                DEV_UVERBS_MISSING.code,
                ERROR,
                "/dev/infiniband",
                "no /dev/infiniband/uverbs* device nodes; expected one per RDMA device: the HCAs are visible in "
                "/sys but cannot be opened (ibv_open_device fails, NCCL says 'NET/IB : No device found').",
                DEV_REMEDY,
                pod=DEV_POD,
            )
        )
    else:
        present = {posixpath.basename(n.path) for n in uverbs}
        lacking = [
            d.name for d in f.devices if d.uverbs is not None and d.uverbs not in present and not ignored(_as_dev(d), None, expect)
        ]
        if lacking:
            out.append(
                Finding(
                    DEV_UVERBS_MISSING.code,
                    WARNING,
                    ", ".join(lacking),
                    f"{count(len(uverbs), 'uverbs node')} in /dev/infiniband, none for {', '.join(lacking)}; expected one per "
                    "RDMA device: this container cannot use those (NCCL skips them).",
                    "If the pod should use every HCA, request them all from the device plugin (or mount all of "
                    "/dev/infiniband); if it should not, list them in ignore_ports.\n" + DEV_REMEDY,
                    pod=DEV_POD,
                )
            )
        for n in uverbs:
            if n.checked and n.open_error:
                out.append(
                    Finding(
                        DEV_UVERBS_MISSING.code,
                        ERROR,
                        n.path,
                        f"{n.path} exists but cannot be opened read-write ({n.open_error}); expected it to open: "
                        "the container's device cgroup does not allow it (mounted with hostPath but not granted "
                        "by a device plugin, or not privileged).",
                        DEV_REMEDY,
                        pod=DEV_POD,
                    )
                )
    cm = next((n for n in f.dev_nodes if n.path.endswith("/rdma_cm")), None)
    # NCCL's IB transport exchanges QP numbers over its own sockets and never opens rdma_cm;
    # UCX, MPI and `ib_write_bw -R` do: its absence is a warning, not a failed pod.
    if cm is not None and not cm.exists:
        out.append(
            Finding(
                DEV_RDMA_CM_MISSING.code,
                WARNING,
                "/dev/infiniband/rdma_cm",
                "/dev/infiniband/rdma_cm is absent; expected for librdmacm (UCX, MPI, perftest -R). NCCL does not need it.",
                DEV_RDMA_CM_MISSING.fix,
            )
        )
    elif cm is not None and cm.checked and cm.open_error:
        out.append(
            Finding(
                DEV_RDMA_CM_MISSING.code,
                WARNING,
                cm.path,
                f"{cm.path} exists but cannot be opened read-write ({cm.open_error}); librdmacm users (UCX, MPI) fail.",
                DEV_REMEDY,
                pod=DEV_POD,
            )
        )
    return out


def _as_dev(d: VerbsDevice) -> RdmaDevice:
    return RdmaDevice(name=d.name, driver=d.driver, is_vf=d.is_vf)


def _message_provider(m: Finding) -> str | None:
    """The provider a libibverbs message names ("couldn't load driver 'libmlx5-rdmav34.so'",
    "Driver mlx5 does not support the kernel ABI"), None when it names none."""
    for ev in m.data.get("evidence") or ():
        text = str(ev.get("text", ""))
        hit = re.search(r"couldn't load driver '([^']*)'", text) or re.search(r"Driver (\S+) does not support", text)
        if hit:
            name = posixpath.basename(hit.group(1))
            name = re.sub(r"-rdmav\d+\.so$", "", name)
            return name[3:] if name.startswith("lib") else name
    return None


def _judge_messages(f: VerbsFacts, own: list[Finding]) -> list[Finding]:
    """libibverbs' own words from the recorded tool outputs, as the knowledge base judges them."""
    if f.only_messages:
        return list(f.messages)
    needed = {d.provider for d in f.devices if d.provider}
    out: list[Finding] = []
    for m in f.messages:
        provider = _message_provider(m)
        if provider is not None and needed and provider not in needed:
            # libibverbs tries every driver named in /etc/libibverbs.d and complains about each one
            # it cannot load; a provider no device here needs changes nothing.
            continue
        same = next((x for x in own if x.code == m.code), None)
        if same is not None:
            # The files said it already: the tool's words become its evidence, one finding.
            same.data.setdefault("evidence", []).extend(m.data.get("evidence") or ())
            continue
        out.append(m)
    return out


def judge_verbs(f: VerbsFacts, expect: dict) -> list[Finding]:
    if f.only_messages:
        return _judge_messages(f, [])
    out: list[Finding] = []
    if not f.libs_known:
        out.append(
            Finding(
                VERBS_LIB_UNKNOWN.code,
                UNKNOWN,
                "libibverbs",
                "the bundle holds no library folder (/usr/lib, /lib, ...): whether libibverbs and the providers "
                "are installed is unknown (a bundle from `rdmadoctor collect` records them).",
            )
        )
    elif f.libibverbs is None:
        out.append(
            Finding(
                VERBS_LIB_MISSING.code,
                ERROR,
                "libibverbs",
                f"libibverbs.so.1 not found in {', '.join(LIB_DIRS[:5])}, ...; expected the RDMA userspace library: "
                "NCCL cannot use the RDMA devices and falls back to sockets.",
                VERBS_LIB_MISSING.fix,
            )
        )
    if f.libs_known:
        out += _judge_providers(f, expect)
    out += _judge_packages(f, expect)
    out += _judge_dev(f, expect)
    out += _judge_messages(f, out)
    return out


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


# The expectations this module's checks read: declared once, here, with type, unit and range
# (engine.expectations builds its table from every check's defaults).
EXPECT: dict[str, Expect] = {
    "recommended_packages": Expect(
        ["libibverbs1", "ibverbs-providers", "librdmacm1", "libibumad3", "infiniband-diags", "perftest"],
        "list", nullable=False,
        doc="Userspace packages the image should carry; a missing one is a warning.",
    ),
}


def judge_pasted_dev_nodes(seg, expect: dict, node, layers: dict[str, str]) -> list[Finding]:
    """`ls /dev/infiniband` pasted from a pod (logs.diagnose): RDMA needs a uverbsN node per device the
    pod was given."""
    names = set(re.findall(r"(?<![\w/])(uverbs\d{1,4}|rdma_cm|umad\d{1,4}|issm\d{1,4})\b", seg.text))
    if not names or any(n.startswith("uverbs") for n in names):
        return []
    return [Finding(DEV_UVERBS_MISSING.code, ERROR, "/dev/infiniband",
                    f"/dev/infiniband holds {', '.join(sorted(names))} and no uverbs* node: verbs cannot open any RDMA "
                    "device here (ibv_devices lists none), so NCCL uses sockets.",
                    DEV_UVERBS_MISSING.fix, data={"nodes": sorted(names)})]


# Where this module's checks stand in the report (engine.registry: built-ins are found by scanning checks/).
ORDER = 40

CHECKS = [
    Check(
        defaults=EXPECT,
        scope="pod",
        id="verbs.userspace",
        condition=CONFIG,
        gate=True,
        title="RDMA userspace (libibverbs, providers, /dev/infiniband)",
        probe=probe_verbs,
        judge=judge_verbs,
        codes=(
            VERBS_LIB_MISSING,
            VERBS_LIB_UNKNOWN,
            VERBS_PROVIDER_MISSING,
            VERBS_DRIVER_UNKNOWN,
            VERBS_ABI_MISMATCH,
            VERBS_PKG_MISSING,
            VERBS_PKG_UNCHECKED,
            DEV_UVERBS_MISSING,
            DEV_RDMA_CM_MISSING,
            DEV_INFINIBAND_UNKNOWN,
            # What the knowledge base's verbs rows may say beyond the codes above.
            *kb_verbs.CODES,
        ),
        needs=(Need("rdma devices or libibverbs messages", _has_devices_or_messages),),
        inventory=_inventory,
        pastes=(Paste("dev_infiniband", judge_pasted_dev_nodes),),
        description="libibverbs.so.1, a provider of the right ABI for every device's kernel driver, "
        "the recommended packages, and /dev/infiniband/uverbs* + rdma_cm openable read-write.",
    ),
]
