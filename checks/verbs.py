"""verbs.userspace: libibverbs, a provider for every device's driver, the packages, /dev/infiniband.

How libibverbs (rdma-core, libibverbs/dynamic_driver.c) finds a provider: it reads every file in
/etc/libibverbs.d, keeps the ``driver <name>`` lines, and dlopen()s
``<provider dir>/lib<name>-rdmav<PABI>.so``, then ``lib<name>-rdmav<PABI>.so`` on the library
search path. PABI is compiled into libibverbs; a file with another suffix is never even tried.

The check is spread over private modules, one job each: ``_verbs_rules`` (the drivers and their
providers, the library folders and package names, the parsers of sonames and provider ABIs) and
``_verbs_probe`` (facts). This module keeps the codes, the judge and the check, and every name it
ever offered importable from here.
"""

from __future__ import annotations

import posixpath
import re

from rdmadoctor.checks._rdma import ignored
from rdmadoctor.checks._verbs_probe import (  # noqa: F401
    DevNode,
    ProviderFile,
    VerbsDevice,
    VerbsFacts,
    _has_devices_or_messages,
    _inventory,
    probe_verbs,
)

# Re-exported: other modules (checks/kernel.py), plugins and tests import these from rdmadoctor.checks.verbs.
from rdmadoctor.checks._verbs_rules import (  # noqa: F401
    CONFIG_DIR,
    DPKG_STATUS,
    LIB_DIRS,
    PACKAGES_OF_INTEREST,
    RDMA_CORE_DEB,
    RDMA_CORE_RPM,
    RDMA_DRIVERS,
    RPM_NAMES,
    _base_version,
    _message_provider,
    pabi_of_libibverbs,
    parse_driver_file,
    private_abi_of,
    provider_for,
    rdma_core_of,
    rdma_driver_entry,
)
from rdmadoctor.core.codes.ib import (
    DEV_INFINIBAND_UNKNOWN,
    DEV_RDMA_CM_MISSING,
    DEV_UVERBS_MISSING,
    VERBS_ABI_MISMATCH,
    VERBS_DRIVER_UNKNOWN,
    VERBS_KERNEL_ABI_MISMATCH,
    VERBS_LIB_MISSING,
    VERBS_LIB_UNKNOWN,
    VERBS_PKG_MISSING,
    VERBS_PKG_UNCHECKED,
    VERBS_PROVIDER_MISSING,
)
from rdmadoctor.core.expect import Expect
from rdmadoctor.core.facts import RdmaDevice
from rdmadoctor.core.model import CONFIG, ERROR, INFO, UNKNOWN, WARNING, Check, Finding, Need, Paste, PodChange
from rdmadoctor.core.words import count

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
            # What the knowledge base's verbs rows say beyond the codes above (the CODES of
            # rdmadoctor/logs/kb/verbs.py, named here so `check` does not import the kb; a test holds them equal).
            VERBS_KERNEL_ABI_MISMATCH,
        ),
        needs=(Need("rdma devices or libibverbs messages", _has_devices_or_messages),),
        inventory=_inventory,
        pastes=(Paste("dev_infiniband", judge_pasted_dev_nodes),),
        description="libibverbs.so.1, a provider of the right ABI for every device's kernel driver, "
        "the recommended packages, and /dev/infiniband/uverbs* + rdma_cm openable read-write.",
    ),
]
