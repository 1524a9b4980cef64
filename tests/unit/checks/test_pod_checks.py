"""verbs.userspace, limits.memlock, shm.size, kernel.modules: judges on facts, probes on trees."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, sample_text

from rdmadoctor.checks import kernel, limits, nccl, verbs
from rdmadoctor.checks.kernel import KernelFacts, judge_kernel
from rdmadoctor.checks.limits import GIB, KIB, MIB, MemlockFacts, ShmFacts, fmt_bytes, judge_memlock, judge_shm
from rdmadoctor.checks.verbs import (
    DevNode,
    ProviderFile,
    VerbsDevice,
    VerbsFacts,
    judge_verbs,
    pabi_of_libibverbs,
    provider_for,
    rdma_core_of,
)
from rdmadoctor.engine.execute import Context, run_check
from rdmadoctor.engine.expectations import resolve
from rdmadoctor.host import Link, mem_host, open_host
from rdmadoctor.parsers.packages import parse_dpkg_status

DOCKER_CAPS = 0x00000000A80425FB  # docker's default CapEff: no CAP_IPC_LOCK
DOCKER_CAPS_IPC_LOCK = DOCKER_CAPS | 1 << 14  # after `--cap-add IPC_LOCK`


# The checks' own expectations (job_uid) join the base ones, as the runner merges them.
DEFAULTS = {k: v for mod in (verbs, limits, kernel) for c in mod.CHECKS for k, v in c.defaults.items()}


def expect(**over):
    return resolve(DEFAULTS, overrides=over)


def sev(findings, code):
    return sorted(f.severity for f in findings if f.code == code)


def run(check_id: str, host, **over):
    check = next(c for mod in (verbs, limits, kernel) for c in mod.CHECKS if c.id == check_id)
    return run_check(check, Context(host, expect(**over)))


def problems(result) -> set[str]:
    return {f.code for f in result.findings if f.severity in ("error", "warning", "unknown")}


# ---- limits.memlock: judge ----------------------------------------------------------------


def memlock(soft, hard, cap=DOCKER_CAPS_IPC_LOCK, known=True, **more):
    return MemlockFacts(soft, hard, known, known, "test", cap, "test", **more)


def test_memlock_64k_without_ipc_lock_is_an_error():
    out = judge_memlock(memlock(64 * KIB, 64 * KIB, DOCKER_CAPS), expect())
    assert sev(out, "MEMLOCK_LIMITED") == ["error"]
    assert sev(out, "CAP_IPC_LOCK_MISSING") == ["error"]
    f = next(f for f in out if f.code == "MEMLOCK_LIMITED")
    assert "memlock soft limit 64 KiB (hard 64 KiB); expected unlimited" in f.message
    assert "--ulimit memlock=-1:-1" in f.remedy and "LimitMEMLOCK=infinity" in f.remedy
    assert f.data["memlock_soft"] == 65536
    cap = next(f for f in out if f.code == "CAP_IPC_LOCK_MISSING")
    assert 'add: ["IPC_LOCK"]' in cap.remedy


def test_memlock_unlimited_with_ipc_lock_passes():
    assert judge_memlock(memlock(None, None), expect()) == []


def test_ipc_lock_held_means_the_limit_does_not_bind():
    # The recipe users follow: IPC_LOCK added to a root container, the runtime's 8 MiB default
    # kept. ib_umem_get() skips RLIMIT_MEMLOCK for a CAP_IPC_LOCK holder: ready, said as information.
    out = judge_memlock(memlock(8 * MIB, 8 * MIB, DOCKER_CAPS_IPC_LOCK, uid=0), expect())
    assert [(f.code, f.severity) for f in out] == [("MEMLOCK_BYPASSED_BY_IPC_LOCK", "info")]
    assert "8 MiB (hard 8 MiB)" in out[0].message and "this process (uid 0) holds CAP_IPC_LOCK" in out[0].message
    # Unreadable limits do not matter either when the capability is held.
    out = judge_memlock(MemlockFacts(None, None, False, False, None, DOCKER_CAPS_IPC_LOCK, "t"), expect())
    assert [(f.code, f.severity) for f in out] == [("MEMLOCK_BYPASSED_BY_IPC_LOCK", "info")]


def test_job_of_another_non_root_user_is_judged_without_the_capability():
    # An init container runs the check as root with IPC_LOCK; the job runs as uid 1000, which does
    # not keep capabilities across exec.
    facts = memlock(8 * MIB, 8 * MIB, DOCKER_CAPS_IPC_LOCK, uid=0)
    out = judge_memlock(facts, expect(job_uid=1000))
    (f,) = [f for f in out if f.code == "MEMLOCK_LIMITED"]
    assert f.severity == "error" and "the job (uid 1000)" in f.message and "this check runs as uid 0" in f.message
    assert f.data["uid"] == 1000
    # IPC_LOCK in the pod spec does not reach a non-root user's effective set: no YAML offered.
    assert f.pod is None and "uid 1000 is not root" in f.remedy and "LimitMEMLOCK=infinity" in f.remedy
    (cap,) = [c for c in out if c.code == "CAP_IPC_LOCK_MISSING"]
    assert cap.severity == "error" and "uid 1000" in cap.message and cap.pod is None
    # The same uid as the check: the verdict is this process's.
    assert [x.code for x in judge_memlock(facts, expect(job_uid=0))] == ["MEMLOCK_BYPASSED_BY_IPC_LOCK"]


def test_root_job_under_a_non_root_check_gets_the_bounding_set():
    low = dict(uid=1000, cap_bnd=DOCKER_CAPS_IPC_LOCK)
    out = judge_memlock(memlock(64 * KIB, 64 * KIB, 0, **low), expect(job_uid=0))
    assert [(f.code, f.severity) for f in out] == [("MEMLOCK_BYPASSED_BY_IPC_LOCK", "info")]
    assert "the job (uid 0)" in out[0].message
    out = judge_memlock(memlock(64 * KIB, 64 * KIB, 0, uid=1000, cap_bnd=DOCKER_CAPS), expect(job_uid=0))
    f = next(f for f in out if f.code == "MEMLOCK_LIMITED")
    assert "the job (uid 0)" in f.message and f.pod is not None and f.pod.ipc_lock
    out = judge_memlock(memlock(64 * KIB, 64 * KIB, 0, uid=1000), expect(job_uid=0))
    assert {(f.code, f.severity) for f in out} == {("CAPS_UNREADABLE", "unknown")}


def test_ipc_lock_in_a_user_namespace_does_not_count():
    # capable() asks the initial user namespace: a userns pod's CapEff bit lifts nothing.
    out = judge_memlock(memlock(64 * KIB, 64 * KIB, DOCKER_CAPS_IPC_LOCK, uid=0, userns=True), expect())
    f = next(f for f in out if f.code == "MEMLOCK_LIMITED")
    assert f.severity == "error" and "user namespace" in f.message
    assert limits.in_user_namespace("         0          0 4294967295\n") is False
    assert limits.in_user_namespace("0 100000 65536\n") is True
    assert limits.in_user_namespace(None) is None


def test_memlock_soft_low_hard_unlimited_suggests_ulimit_in_entrypoint():
    out = judge_memlock(memlock(8 * MIB, None, DOCKER_CAPS), expect())
    f = next(f for f in out if f.code == "MEMLOCK_LIMITED")
    assert f.severity == "error" and "(hard unlimited)" in f.message
    assert "ulimit -l unlimited" in f.remedy


def test_memlock_minimum_from_profile():
    assert judge_memlock(memlock(2 * GIB, 2 * GIB), expect(memlock_min_bytes=GIB)) == []
    out = judge_memlock(memlock(512 * MIB, 512 * MIB, DOCKER_CAPS), expect(memlock_min_bytes=GIB))
    assert "expected at least 1 GiB" in next(f.message for f in out if f.code == "MEMLOCK_LIMITED")


def test_ipc_lock_missing_with_unlimited_memlock_is_only_a_warning():
    out = judge_memlock(memlock(None, None, DOCKER_CAPS), expect())
    assert sev(out, "CAP_IPC_LOCK_MISSING") == ["warning"]
    assert judge_memlock(memlock(None, None, DOCKER_CAPS), expect(require_ipc_lock=False)) == []


def test_memlock_unknown_is_its_own_code_never_memlock_limited():
    out = judge_memlock(MemlockFacts(None, None, False, False, None, None, None), expect())
    assert {(f.code, f.severity) for f in out} == {("MEMLOCK_UNREADABLE", "unknown"), ("CAPS_UNREADABLE", "unknown")}
    # A low limit with unreadable capabilities: whether it binds is undecided, not a failure.
    out = judge_memlock(memlock(64 * KIB, 64 * KIB, None), expect())
    assert [(f.code, f.severity) for f in out] == [("CAPS_UNREADABLE", "unknown")]
    assert "64 KiB" in out[0].message
    # An unlimited limit with unreadable capabilities is decided: nothing to say.
    assert judge_memlock(memlock(None, None, None), expect()) == []


def test_cap_bit_14():
    assert memlock(None, None, DOCKER_CAPS).cap_ipc_lock is False
    assert memlock(None, None, DOCKER_CAPS_IPC_LOCK).cap_ipc_lock is True
    assert memlock(None, None, 1 << 14).cap_ipc_lock is True
    assert memlock(None, None, (1 << 14) - 1).cap_ipc_lock is False
    assert memlock(None, None, None).cap_ipc_lock is None


def test_fmt_bytes():
    assert fmt_bytes(65536) == "64 KiB"
    assert fmt_bytes(16 * GIB) == "16 GiB"
    assert fmt_bytes(1536 * MIB) == "1.5 GiB"
    assert fmt_bytes(100) == "100 bytes"
    assert fmt_bytes(None) == "unlimited"


# ---- shm.size: judge ----------------------------------------------------------------------


def test_shm_64m_is_the_container_default_error():
    out = judge_shm(ShmFacts(64 * MIB, 64 * MIB, "test"), expect())
    assert sev(out, "SHM_TOO_SMALL") == ["error"]
    assert "64 MiB (the container default); expected at least 1 GiB" in out[0].message
    assert "medium: Memory" in out[0].remedy and "mountPath: /dev/shm" in out[0].remedy


def test_shm_16g_passes_and_low_free_warns():
    assert judge_shm(ShmFacts(16 * GIB, 15 * GIB, "test"), expect()) == []
    out = judge_shm(ShmFacts(16 * GIB, 100 * MIB, "test"), expect())
    # Nearly full is its own problem: SHM_TOO_SMALL means the size, and only that.
    assert [(f.code, f.severity) for f in out] == [("SHM_NEARLY_FULL", "warning")]
    assert "100 MiB free of 16 GiB" in out[0].message and "rm /dev/shm/nccl-*" in out[0].remedy
    assert out[0].pod.shm_min_bytes == GIB and out[0].pod.whole is False


def test_shm_minimum_from_profile_and_unknown():
    assert sev(judge_shm(ShmFacts(2 * GIB, 2 * GIB, "t"), expect(shm_min_bytes=8 * GIB)), "SHM_TOO_SMALL") == ["error"]
    out = judge_shm(ShmFacts(None, None, None), expect())
    assert [(f.code, f.severity) for f in out] == [("SHM_UNREADABLE", "unknown")]


# ---- verbs.userspace: judge ---------------------------------------------------------------

LIB = "/usr/lib/x86_64-linux-gnu"


def verbs_facts(**over) -> VerbsFacts:
    base = dict(
        libibverbs=f"{LIB}/libibverbs.so.1",
        soname="libibverbs.so.1.14.44.0",
        rdma_core=44,
        pabi=34,
        provider_dir=f"{LIB}/libibverbs",
        driver_names=("mlx5", "irdma"),
        providers=(
            ProviderFile(f"{LIB}/libibverbs/libmlx5-rdmav34.so", "mlx5", 34, 34),
            ProviderFile(f"{LIB}/libibverbs/libirdma-rdmav34.so", "irdma", 34, 34),
        ),
        devices=(
            VerbsDevice("mlx5_0", "mlx5_core", "mlx5", "uverbs0"),
            VerbsDevice("irdma0", "irdma", "irdma", "uverbs1"),
        ),
        packages={p: ("44.0-2", "installed") for p in ("libibverbs1", "ibverbs-providers", "librdmacm1", "libibumad3", "infiniband-diags", "perftest")},
        packages_source="dpkg",
        packages_flavor="deb",
        dev_nodes=(
            DevNode("/dev/infiniband/uverbs0", True, None, True),
            DevNode("/dev/infiniband/uverbs1", True, None, True),
            DevNode("/dev/infiniband/rdma_cm", True, None, True),
        ),
    )
    base.update(over)
    return VerbsFacts(**base)


def problem_codes(findings):
    return {(f.code, f.severity, f.subject) for f in findings if f.severity != "info"}


def test_verbs_healthy():
    assert problem_codes(judge_verbs(verbs_facts(), expect())) == set()


def test_missing_provider_for_mlx5_with_irdma_present():
    f = verbs_facts(providers=(ProviderFile(f"{LIB}/libibverbs/libirdma-rdmav34.so", "irdma", 34, 34),))
    out = judge_verbs(f, expect())
    assert problem_codes(out) == {("VERBS_PROVIDER_MISSING", "error", "mlx5_0")}
    msg = next(x.message for x in out if x.code == "VERBS_PROVIDER_MISSING")
    assert "couldn't load driver 'libmlx5-rdmav34.so'" in msg
    assert "apt-get install -y ibverbs-providers" in next(x.remedy for x in out if x.code == "VERBS_PROVIDER_MISSING")


def test_missing_driver_config_file():
    out = judge_verbs(verbs_facts(driver_names=("irdma",)), expect())
    assert problem_codes(out) == {("VERBS_PROVIDER_MISSING", "error", "mlx5_0")}
    assert "/etc/libibverbs.d/mlx5.driver" in out[0].message


def test_mofed_provider_with_distro_libibverbs_is_an_abi_mismatch():
    f = verbs_facts(
        providers=(
            ProviderFile("/usr/lib64/libibverbs/libmlx5-rdmav25.so", "mlx5", 25),
            ProviderFile(f"{LIB}/libibverbs/libirdma-rdmav34.so", "irdma", 34, 34),
        )
    )
    out = judge_verbs(f, expect())
    assert problem_codes(out) == {("VERBS_ABI_MISMATCH", "error", "mlx5_0")}
    assert "libmlx5-rdmav25.so" in out[0].message and "rdmav34" in out[0].message


def test_provider_renamed_to_the_right_suffix_is_still_a_mismatch():
    f = verbs_facts(providers=(ProviderFile(f"{LIB}/libibverbs/libmlx5-rdmav34.so", "mlx5", 34, 25),) + verbs_facts().providers[1:])
    out = judge_verbs(f, expect())
    assert problem_codes(out) == {("VERBS_ABI_MISMATCH", "error", "mlx5_0")}
    assert "IBVERBS_PRIVATE_25" in out[0].message


def test_abi_bound_from_soname_when_library_bytes_unknown():
    newer = (ProviderFile(f"{LIB}/libibverbs/libmlx5-rdmav50.so", "mlx5", 50),) + verbs_facts().providers[1:]
    assert ("VERBS_ABI_MISMATCH", "error", "mlx5_0") in problem_codes(judge_verbs(verbs_facts(pabi=None, providers=newer), expect()))
    older = (ProviderFile(f"{LIB}/libibverbs/libmlx5-rdmav34.so", "mlx5", 34),) + verbs_facts().providers[1:]
    assert problem_codes(judge_verbs(verbs_facts(pabi=None, providers=older), expect())) == set()


def test_no_libibverbs():
    out = judge_verbs(verbs_facts(libibverbs=None, soname=None, rdma_core=None, pabi=None, providers=()), expect())
    codes = problem_codes(out)
    assert ("VERBS_LIB_MISSING", "error", "libibverbs") in codes
    assert ("VERBS_PROVIDER_MISSING", "error", "mlx5_0") in codes
    assert "apt-get install -y libibverbs1 ibverbs-providers" in next(x.remedy for x in out if x.code == "VERBS_LIB_MISSING")


def test_uverbs_missing_and_not_openable():
    out = judge_verbs(verbs_facts(dev_nodes=(DevNode("/dev/infiniband/rdma_cm", False),)), expect())
    assert ("DEV_UVERBS_MISSING", "error", "/dev/infiniband") in problem_codes(out)
    remedy = next(x.remedy for x in out if x.severity == "error")
    assert "rdma/hca: 1" in remedy and "hostPath: {path: /dev/infiniband}" in remedy
    assert ("DEV_RDMA_CM_MISSING", "warning", "/dev/infiniband/rdma_cm") in problem_codes(out)
    assert "DEV_UVERBS_MISSING" not in {x.code for x in out if x.severity == "warning"}
    nodes = (
        DevNode("/dev/infiniband/uverbs0", True, "Operation not permitted", True),
        DevNode("/dev/infiniband/rdma_cm", True, None, True),
    )
    codes = problem_codes(judge_verbs(verbs_facts(dev_nodes=nodes), expect()))
    assert ("DEV_UVERBS_MISSING", "error", "/dev/infiniband/uverbs0") in codes
    assert ("DEV_UVERBS_MISSING", "warning", "irdma0") in codes  # uverbs1 not in this container


def test_libraries_not_recorded_in_bundle_are_unknown():
    f = verbs_facts(libibverbs=None, soname=None, rdma_core=None, pabi=None, providers=(), driver_names=(), libs_known=False)
    assert problem_codes(judge_verbs(f, expect())) == {("VERBS_LIB_UNKNOWN", "unknown", "libibverbs")}


def test_unknown_driver_and_unlisted_packages_have_their_own_codes():
    f = verbs_facts(devices=verbs_facts().devices + (VerbsDevice("weird0", "weird_core", None),), packages=None)
    out = judge_verbs(f, expect())
    assert ("VERBS_DRIVER_UNKNOWN", "unknown", "weird0") in problem_codes(out)
    assert "VERBS_PROVIDER_MISSING" not in {x.code for x in out}
    assert [(x.code, x.severity) for x in out if x.subject == "packages"] == [("VERBS_PKG_UNCHECKED", "info")]


def test_dev_not_recorded_in_bundle_is_unknown():
    out = judge_verbs(verbs_facts(dev_known=False, dev_nodes=()), expect())
    assert problem_codes(out) == {("DEV_INFINIBAND_UNKNOWN", "unknown", "/dev/infiniband")}


DPKG_STATUS = """\
Package: libibverbs1
Status: install ok installed
Priority: optional
Architecture: amd64
Multi-Arch: same
Version: 44.0-2
Description: Library for direct userspace use of RDMA (InfiniBand/iWARP)
 libibverbs is a library that allows userspace processes to use RDMA
 .
 Status: not a field, a continuation line

Package: libibverbs1
Status: deinstall ok config-files
Architecture: i386
Version: 40.0-1

Package: librdmacm1
Status: install reinstreq half-installed
Architecture: amd64
Version: 44.0-2

Package: ibverbs-providers
Status: install ok unpacked
Architecture: amd64
Version: 44.0-2

Package: libibumad3
Status: install ok installed
Architecture: amd64
Version: 44.0-2+b1

Package: perftest
Status: install ok installed
Version: 4.5-0.20-1

Package: bash
Status: install ok installed
Version: 5.2.15-2+b2
"""


def test_parse_dpkg_status():
    pk = parse_dpkg_status(DPKG_STATUS)
    assert pk["libibverbs1"] == ("44.0-2", "installed")  # the amd64 one wins over i386's leftovers
    assert pk["librdmacm1"] == ("44.0-2", "half-installed")
    assert pk["ibverbs-providers"] == ("44.0-2", "unpacked")
    assert pk["bash"] == ("5.2.15-2+b2", "installed")
    assert set(parse_dpkg_status(DPKG_STATUS, only={"perftest"})) == {"perftest"}
    assert parse_dpkg_status("") == {} and parse_dpkg_status("\x00\xff garbage\n\nPackage:\n") == {}


def test_parse_dpkg_status_agrees_with_dpkg_query():
    status = Path("/var/lib/dpkg/status")
    if shutil.which("dpkg-query") is None or not status.exists():
        pytest.skip("no dpkg here")
    out = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package}\t${Version}\t${db:Status-Status}\n"], capture_output=True, text=True, check=True
    ).stdout
    want = {}
    for line in out.splitlines():
        name, version, state = line.split("\t")
        if state == "installed" or want.get(name, (None, ""))[1] != "installed":
            want[name] = (version, state)
    got = parse_dpkg_status(status.read_text(errors="replace"))
    installed = {k for k, v in got.items() if v[1] == "installed"}
    assert installed == {k for k, v in want.items() if v[1] == "installed"}
    assert all(got[k][0] == want[k][0] for k in installed)


def test_half_installed_and_missing_packages_warn():
    f = verbs_facts(packages=parse_dpkg_status(DPKG_STATUS))
    codes = problem_codes(judge_verbs(f, expect()))
    assert ("VERBS_PKG_MISSING", "warning", "librdmacm1") in codes
    assert ("VERBS_PKG_MISSING", "warning", "ibverbs-providers") in codes
    assert ("VERBS_PKG_MISSING", "warning", "infiniband-diags") in codes
    assert not any(c[2] in ("libibverbs1", "libibumad3", "perftest") for c in codes)
    # 44.0-2 and its binNMU 44.0-2+b1 are the same build: no mix reported.
    assert not any(c[0] == "VERBS_ABI_MISMATCH" for c in codes)


def test_rpm_names_and_mofed_mix():
    rpm = {n: ("48.0-1.el9", "installed") for n in ("rdma-core", "libibverbs", "librdmacm", "libibumad", "infiniband-diags")}
    out = judge_verbs(verbs_facts(packages=rpm, packages_source="rpm", packages_flavor="rpm"), expect())
    assert problem_codes(out) == {("VERBS_PKG_MISSING", "warning", "perftest")}
    assert "dnf install -y perftest" in next(x.remedy for x in out if x.subject == "perftest")
    mixed = dict(verbs_facts().packages, **{"ibverbs-providers": ("2307mlnx47-1.2310119", "installed")})
    out = judge_verbs(verbs_facts(packages=mixed), expect())
    mix = next(x for x in out if x.code == "VERBS_ABI_MISMATCH")
    assert mix.severity == "warning" and "MLNX_OFED and distro packages are mixed" in mix.message


def test_realworld_mofed_listing_is_consistent(realworld):
    from rdmadoctor.parsers.packages import parse_ofed_info

    db = parse_ofed_info(sample_text(realworld / "samples/dpkg/daocloud_ofed_info_mofed_23_10_installed_packages.txt")).value
    pk = {k: (v, "installed") for k, v in db.packages.items()}
    out = judge_verbs(verbs_facts(packages=pk, packages_source="ofed_info"), expect())
    # Every rdma-core package is 2307mlnx47-1.2310119: one build, no mix.
    assert not any(x.code == "VERBS_ABI_MISMATCH" for x in out)
    assert pk["libibverbs1"][0] == "2307mlnx47-1.2310119"


def test_provider_mapping():
    assert provider_for("mlx5_core", "mlx5_0") == "mlx5"
    assert provider_for(None, "mlx5_3") == "mlx5"
    assert provider_for(None, "rxe0") == "rxe"
    assert provider_for("ib_qib", "qib0") == "ipathverbs"
    assert provider_for("bnxt_en", "bnxt_re0") == "bnxt_re"
    assert provider_for("irdma.gen_2", "rocep23s0") == "irdma"
    assert provider_for("hfi1", "hfi1_0") == "hfi1verbs"
    assert provider_for("efa", "rdmap16s27") == "efa"
    assert provider_for("mana", None) == "mana"
    assert provider_for(None, "ibp23s0") is None


def test_soname_and_binary_abi():
    assert rdma_core_of("libibverbs.so.1.14.44.0") == 44
    assert rdma_core_of("libibverbs.so.1.14.2307mlnx47.0") is None
    assert rdma_core_of("libibverbs.so.1.0.0") is None
    blob = b"\x00/usr/lib/x86_64-linux-gnu/libibverbs/lib%s-rdmav34.so\x00IBVERBS_PRIVATE_34\x00"
    assert pabi_of_libibverbs(blob) == (34, "/usr/lib/x86_64-linux-gnu/libibverbs")
    assert pabi_of_libibverbs(b"\x7fELF garbage") == (None, None)
    assert pabi_of_libibverbs(None) == (None, None)


def test_real_libibverbs_binary():
    real = Path("/usr/lib/x86_64-linux-gnu/libibverbs.so.1")
    if not real.exists():
        pytest.skip("libibverbs1 not installed here")
    pabi, pdir = pabi_of_libibverbs(real.read_bytes())
    assert pabi is not None and pdir is not None
    # The distro's own providers carry the suffix its libibverbs asks for.
    assert (Path(pdir) / f"libmlx5-rdmav{pabi}.so").exists()


# ---- kernel.modules: judge ----------------------------------------------------------------


def kfacts(**over) -> KernelFacts:
    base = dict(
        modules=frozenset({"ib_core", "ib_uverbs", "mlx5_core", "mlx5_ib", "nvidia"}),
        builtin=frozenset({"rdma_ucm"}),
        source="/proc/modules",
        gpus_present=False,
        gpu_count=0,
        osrelease="6.1.0-18-amd64",
        nvidia_open=False,
    )
    base.update(over)
    return KernelFacts(**base)


def test_modules_builtin_counts_as_present():
    assert judge_kernel(kfacts(), expect()) == []
    out = judge_kernel(kfacts(builtin=frozenset()), expect())
    assert problem_codes(out) == {("MOD_MISSING", "error", "rdma_ucm")}
    assert "modprobe rdma_ucm" in out[0].remedy and "/etc/modules-load.d/rdma.conf" in out[0].remedy


def test_hca_ib_driver_missing():
    f = kfacts(hca_needs=(("mlx5_ib", "the IB driver of 0000:17:00.0 (bound to mlx5_core)"),), modules=frozenset({"ib_core", "ib_uverbs"}))
    out = judge_kernel(f, expect())
    assert problem_codes(out) == {("MOD_MISSING", "error", "mlx5_ib")}
    assert "0000:17:00.0" in out[0].message


def test_required_modules_from_profile_and_unknown():
    assert ("MOD_MISSING", "error", "ib_umad") in problem_codes(judge_kernel(kfacts(), expect(required_modules=["ib_umad"])))
    assert problem_codes(judge_kernel(kfacts(modules=None), expect())) == {("MODULES_UNKNOWN", "unknown", "kernel")}


def test_gpu_without_peermem():
    f = kfacts(gpus_present=True, gpu_count=8, gpudirect=False)
    out = judge_kernel(f, expect())
    assert problem_codes(out) == {("GDR_PEERMEM_MISSING", "warning", "GPUDirect RDMA")}
    assert "driver.rdma.enabled=true" in out[0].remedy and "modprobe nvidia-peermem" in out[0].remedy
    assert "8 NVIDIA GPUs" in out[0].message
    assert problem_codes(judge_kernel(f, expect(gpudirect_required=True))) == {("GDR_PEERMEM_MISSING", "error", "GPUDirect RDMA")}
    with_peermem = kfacts(gpus_present=True, gpu_count=8, modules=kfacts().modules | {"nvidia_peermem"})
    assert judge_kernel(with_peermem, expect(gpudirect_required=True)) == []
    dmabuf = kfacts(gpus_present=True, gpu_count=8, nvidia_open=True, dmabuf_possible=True)
    out = judge_kernel(dmabuf, expect(gpudirect_required=True))
    assert [(x.code, x.severity) for x in out] == [("GDR_DMABUF", "info")]


# ---- probes on bundle-style trees -----------------------------------------------------------

PROC_LIMITS_64K = """\
Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max locked memory         65536                65536                bytes
Max address space         unlimited            unlimited            bytes
"""
STATUS = "Name:\tpython3\nCapInh:\t0000000000000000\nCapPrm:\t00000000a80425fb\nCapEff:\t00000000a80425fb\n"
DF_SHM_64M = "Filesystem      Size  Used Avail Use% Mounted on\nshm              64M     0   64M   0% /dev/shm\n"


def test_memlock_probe_from_proc_self_files():
    host = mem_host({"/proc/self/limits": PROC_LIMITS_64K, "/proc/self/status": STATUS})
    r = run("limits.memlock", host)
    assert r.status == "fail"
    assert r.facts.soft == 65536 and r.facts.hard == 65536 and r.facts.cap_ipc_lock is False
    assert problems(r) == {"MEMLOCK_LIMITED", "CAP_IPC_LOCK_MISSING"}
    inv = limits.CHECKS[0].inventory(r.facts)
    assert inv == {"memlock_bytes": 65536, "memlock_hard_bytes": 65536, "memlock_known": True, "cap_ipc_lock": False}


def test_memlock_probe_sources_in_order():
    rt = json.dumps({"memlock_soft": None, "memlock_hard": None, "cap_eff": DOCKER_CAPS_IPC_LOCK})
    # runtime.json alone: unlimited and IPC_LOCK -> pass
    r = run("limits.memlock", mem_host({"/runtime.json": rt}))
    assert r.status == "pass" and r.facts.source == "runtime.json" and r.facts.cap_ipc_lock is True
    # a recorded `ulimit -l` (KiB) wins over runtime.json; the hard limit stays unknown
    r = run("limits.memlock", mem_host({"/runtime.json": rt, "/cmd/ulimit.txt": "64\n"}))
    assert r.facts.soft == 65536 and r.facts.source == "cmd/ulimit.txt" and not r.facts.hard_known
    assert problems(r) == set() and [f.code for f in r.findings] == ["MEMLOCK_BYPASSED_BY_IPC_LOCK"]
    no_cap = json.dumps({"memlock_soft": None, "memlock_hard": None, "cap_eff": DOCKER_CAPS})
    r = run("limits.memlock", mem_host({"/runtime.json": no_cap, "/cmd/ulimit.txt": "64\n"}))
    assert problems(r) == {"MEMLOCK_LIMITED", "CAP_IPC_LOCK_MISSING"}
    # /proc/self/limits wins over both
    r = run("limits.memlock", mem_host({"/runtime.json": rt, "/cmd/ulimit.txt": "64\n", "/proc/self/limits": PROC_LIMITS_64K.replace("65536                65536", "unlimited            unlimited")}))
    assert r.facts.soft is None and r.facts.known and r.facts.source == "proc/self/limits"
    assert r.status == "pass"
    # nothing at all: unknown, and said with the codes for "could not read"
    r = run("limits.memlock", mem_host({"/sys/class/infiniband": b""}))
    assert r.status == "unknown" and problems(r) == {"MEMLOCK_UNREADABLE", "CAPS_UNREADABLE"}


def test_memlock_probe_reads_the_uid_and_bounding_set():
    status = STATUS + "Uid:\t0\t1000\t1000\t1000\nCapBnd:\t00000000a80465fb\n"
    host = mem_host({"/proc/self/limits": PROC_LIMITS_64K, "/proc/self/status": status, "/proc/self/uid_map": "0 0 4294967295\n"})
    r = run("limits.memlock", host, job_uid=0)
    assert r.facts.uid == 1000 and r.facts.cap_bnd == DOCKER_CAPS_IPC_LOCK and r.facts.userns is False
    # The check runs as 1000 without the capability; a root job in this container gets it.
    assert r.status == "pass" and [f.code for f in r.findings] == ["MEMLOCK_BYPASSED_BY_IPC_LOCK"]
    # uid from runtime.json when the status file has none (a bundle written by a newer collect).
    host = mem_host({"/proc/self/limits": PROC_LIMITS_64K, "/runtime.json": json.dumps({"cap_eff": DOCKER_CAPS_IPC_LOCK, "uid": 0})})
    r = run("limits.memlock", host, job_uid=1000)
    if hasattr(host.runtime, "uid"):
        assert r.facts.uid == 0
    f = next(f for f in r.findings if f.code == "MEMLOCK_LIMITED")
    assert "the job (uid 1000)" in f.message


def test_shm_probe_from_runtime_json_and_df():
    r = run("shm.size", mem_host({"/runtime.json": json.dumps({"shm_size": 16 * GIB, "shm_free": 16 * GIB})}))
    assert r.status == "pass" and r.facts.source == "runtime.json"
    r = run("shm.size", mem_host({"/cmd/df-shm.txt": DF_SHM_64M}))
    assert r.status == "fail" and r.facts.size == 64 * MIB
    assert "(the container default)" in r.findings[0].message
    assert limits.CHECKS[1].inventory(r.facts) == {"shm_bytes": 64 * MIB, "shm_free_bytes": 64 * MIB}
    r = run("shm.size", mem_host({"/cmd/df-shm.txt": "Filesystem Size Used Avail Use% Mounted on\n/dev/sda1 10G 1G 9G 10% /\n"}))
    assert r.status == "unknown" and "no row mounted on /dev/shm" in r.reason
    assert [f.code for f in r.findings] == ["SHM_UNREADABLE"]
    # Big enough, but earlier jobs' leftovers fill it.
    r = run("shm.size", mem_host({"/runtime.json": json.dumps({"shm_size": 16 * GIB, "shm_free": 200 * MIB})}))
    assert r.status == "warn" and [f.code for f in r.findings] == ["SHM_NEARLY_FULL"]


def test_shm_probe_realworld_df(realworld):
    text = sample_text(realworld / "samples/shm/slurmv4_host_df_h_shm_1008G.txt")
    r = run("shm.size", mem_host({"/cmd/df-shm.txt": text}))
    assert r.status == "pass" and r.facts.size == 1008 * GIB


def _pci(bdf, vendor, cls, driver=None):
    out = {
        f"/sys/bus/pci/devices/{bdf}": Link(f"../../../devices/pci0000:00/{bdf}"),
        f"/sys/devices/pci0000:00/{bdf}/vendor": vendor + "\n",
        f"/sys/devices/pci0000:00/{bdf}/class": cls + "\n",
    }
    if driver:
        out[f"/sys/devices/pci0000:00/{bdf}/driver"] = Link(f"../../../bus/pci/drivers/{driver}")
    return out


def test_kernel_probe_proc_modules_sys_module_and_gpus():
    files = {
        "/proc/modules": "mlx5_ib 466944 0 - Live 0x0000000000000000\nib_uverbs 167936 1 mlx5_ib, Live 0x0\n"
        "mlx5_core 2031616 1 mlx5_ib, Live 0x0\nnvidia 56758272 1 - Live 0x0\n",
        "/sys/module/ib_core/parameters/send_queue_size": "128\n",  # built in: no initstate
        "/sys/module/mlx5_ib/initstate": "live\n",
        "/proc/sys/kernel/osrelease": "5.15.0-91-generic\n",
        "/proc/driver/nvidia/version": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n",
        **_pci("0000:17:00.0", "0x15b3", "0x020700", "mlx5_core"),
        **_pci("0000:18:00.0", "0x10de", "0x030200", "nvidia"),
        **_pci("0000:19:00.0", "0x10de", "0x068000", "nvidia-nvswitch"),  # NVSwitch: not a GPU
        **_pci("0000:1a:00.0", "0x8086", "0x020000", "ice"),  # a management NIC: irdma not needed
    }
    r = run("kernel.modules", mem_host(files))
    f = r.facts
    assert f.source == "/proc/modules" and "ib_core" in f.builtin and "mlx5_ib" not in f.builtin
    assert f.gpu_count == 1 and f.gpus_present and f.nvidia_open is False and not f.dmabuf_possible
    assert f.gpudirect is False
    assert problems(r) == {"MOD_MISSING", "GDR_PEERMEM_MISSING"}
    assert {x.subject for x in r.findings if x.code == "MOD_MISSING"} == {"rdma_ucm"}
    inv = kernel.CHECKS[0].inventory(f)
    assert inv["kernel_modules"] == ["ib_core", "ib_uverbs", "mlx5_core", "mlx5_ib", "nvidia"]
    assert inv["gpudirect"] is False
    # the HCA without its IB half: mlx5_ib needed
    files["/proc/modules"] = "ib_uverbs 1 0 - Live 0x0\nrdma_ucm 1 0 - Live 0x0\nmlx5_core 1 0 - Live 0x0\nnvidia_peermem 1 0 - Live 0x0\nnvidia 1 1 nvidia_peermem, Live 0x0\n"
    del files["/sys/module/mlx5_ib/initstate"]
    r = run("kernel.modules", mem_host(files))
    assert {(x.code, x.subject) for x in r.findings} == {("MOD_MISSING", "mlx5_ib")}
    # nvidia_peermem is loaded, but without mlx5_ib there is no RDMA device to read GPU memory:
    # GPUDirect RDMA is a GPU-HCA property (issue 15), so not gpudirect.
    assert r.facts.gpudirect is False


def test_kernel_probe_lsmod_and_dmabuf():
    lsmod = (
        "Module                  Size  Used by\nnvidia              56758272  1\nib_core 425984 3 ib_uverbs,rdma_ucm\n"
        "ib_uverbs 167936 1 rdma_ucm\nrdma_ucm 28672 0\n"
    )
    files = {
        "/cmd/lsmod.txt": lsmod,
        "/proc/version": "Linux version 6.5.0-1015-nvidia (buildd@bos03) (gcc 12.3.0) #15-Ubuntu SMP\n",
        "/proc/driver/nvidia/version": "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build\n",
    }
    r = run("kernel.modules", mem_host(files))
    assert r.facts.source == "cmd/lsmod.txt" and r.facts.osrelease == "6.5.0-1015-nvidia"
    # dma-buf is possible, but this host shows no RDMA devices at all (no /sys, no ibstat): whether
    # GPUDirect RDMA works is unknown, and no gpudirect label is published.
    assert r.facts.dmabuf_possible and r.facts.gpudirect is None and r.status == "pass"
    assert [x.code for x in r.findings] == ["GDR_DMABUF"]
    # no source at all
    assert run("kernel.modules", mem_host({"/etc/hostname": "x"})).status == "unknown"


def verbs_tree(**extra):
    files = {
        "/sys/class/infiniband/mlx5_0": Link("../../devices/pci0000:00/0000:17:00.0/infiniband/mlx5_0"),
        "/sys/devices/pci0000:00/0000:17:00.0/infiniband/mlx5_0/ports/1/state": "4: ACTIVE\n",
        "/sys/devices/pci0000:00/0000:17:00.0/infiniband/mlx5_0/device": Link("../../../0000:17:00.0"),
        "/sys/devices/pci0000:00/0000:17:00.0/driver": Link("../../../bus/pci/drivers/mlx5_core"),
        "/sys/class/infiniband_verbs/uverbs0/ibdev": "mlx5_0\n",
        f"{LIB}/libibverbs.so.1": Link("libibverbs.so.1.14.44.0"),
        f"{LIB}/libibverbs.so.1.14.44.0": b"\x7fELF\x00" + f"{LIB}/libibverbs/lib%s-rdmav34.so\x00".encode(),
        f"{LIB}/libibverbs/libmlx5-rdmav34.so": Link("../libmlx5.so.1.24.44.0"),
        f"{LIB}/libmlx5.so.1.24.44.0": b"\x7fELF\x00IBVERBS_PRIVATE_34\x00",
        "/etc/libibverbs.d/mlx5.driver": "driver mlx5\n",
        "/var/lib/dpkg/status": "".join(
            f"Package: {p}\nStatus: install ok installed\nVersion: 44.0-2\n\n"
            for p in ("libibverbs1", "ibverbs-providers", "librdmacm1", "libibumad3", "infiniband-diags", "perftest")
        ),
        "/dev/infiniband/uverbs0": b"",
        "/dev/infiniband/rdma_cm": b"",
    }
    files.update(extra)
    return {k: v for k, v in files.items() if v is not None}


def test_verbs_probe_healthy_bundle():
    r = run("verbs.userspace", mem_host(verbs_tree()))
    assert r.status == "pass", r.findings
    f = r.facts
    assert f.soname == "libibverbs.so.1.14.44.0" and f.rdma_core == 44 and f.pabi == 34
    assert f.devices[0].provider == "mlx5" and f.devices[0].uverbs == "uverbs0"
    assert f.providers[0].private_abi == 34
    inv = verbs.CHECKS[0].inventory(f)
    assert inv["libibverbs"] == "libibverbs.so.1.14.44.0" and inv["packages"]["perftest"] == "44.0-2"


def test_verbs_probe_problems():
    r = run("verbs.userspace", mem_host(verbs_tree(**{f"{LIB}/libibverbs/libmlx5-rdmav34.so": None})))
    assert problems(r) == {"VERBS_PROVIDER_MISSING"} and r.status == "fail"
    mofed = {f"{LIB}/libibverbs/libmlx5-rdmav34.so": None, "/usr/lib64/libibverbs/libmlx5-rdmav25.so": b"IBVERBS_PRIVATE_25"}
    r = run("verbs.userspace", mem_host(verbs_tree(**mofed)))
    assert problems(r) == {"VERBS_ABI_MISMATCH"}
    r = run("verbs.userspace", mem_host(verbs_tree(**{"/dev/infiniband/uverbs0": None})))
    assert problems(r) == {"DEV_UVERBS_MISSING"}
    r = run("verbs.userspace", mem_host(verbs_tree(**{f"{LIB}/libibverbs.so.1": None, f"{LIB}/libibverbs.so.1.14.44.0": None})))
    assert problems(r) == {"VERBS_LIB_MISSING"}
    # rpm -qa recorded instead of a dpkg database
    rpm = "rdma-core-48.0-1.el9.x86_64\nlibibverbs-48.0-1.el9.x86_64\nlibrdmacm-48.0-1.el9.x86_64\n"
    r = run("verbs.userspace", mem_host(verbs_tree(**{"/var/lib/dpkg/status": None, "/cmd/rpm-qa.txt": rpm})))
    assert r.facts.packages_source == "rpm"
    assert {x.subject for x in r.findings if x.code == "VERBS_PKG_MISSING"} == {"libibumad", "infiniband-diags", "perftest"}
    # no devices: the check is skipped, not failed
    r = run("verbs.userspace", mem_host({"/sys/class/net/eth0/mtu": "1500"}))
    assert r.status == "skip"


def test_verbs_realworld_qib_snapshot(realworld, tmp_path):
    subprocess.run(["tar", "xjf", str(realworld / "hwloc-sysfs/40intel64-2g2n4c+pcilocality.tar.bz2"), "-C", str(tmp_path)], check=True)
    (root,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    r = run("verbs.userspace", open_host(bundle=str(root)))
    # A /sys + /proc snapshot: no library folders, so the userspace is unknown, not missing.
    assert ("VERBS_LIB_UNKNOWN", "unknown") in {(x.code, x.severity) for x in r.findings}
    assert r.facts.devices[0].provider == "ipathverbs"  # qib0 on ib_qib
    assert r.facts.devices[0].uverbs == "uverbs0"  # from device/infiniband_verbs: no class dir here
    assert ("DEV_UVERBS_MISSING", "error") in {(x.code, x.severity) for x in r.findings}  # /dev has no infiniband
    # Give it a distro libibverbs with only the mlx5 provider: qib0's provider is missing.
    lib = root / LIB.lstrip("/")
    (lib / "libibverbs").mkdir(parents=True)
    (lib / "libibverbs.so.1.14.44.0").write_bytes(f"{LIB}/libibverbs/lib%s-rdmav34.so\x00".encode())
    os.symlink("libibverbs.so.1.14.44.0", lib / "libibverbs.so.1")
    (lib / "libibverbs/libmlx5-rdmav34.so").write_bytes(b"IBVERBS_PRIVATE_34")
    r = run("verbs.userspace", open_host(bundle=str(root)))
    missing = next(x for x in r.findings if x.code == "VERBS_PROVIDER_MISSING")
    assert missing.severity == "error" and missing.subject == "qib0"
    assert "couldn't load driver 'libipathverbs-rdmav34.so'" in missing.message
    r = run("kernel.modules", open_host(bundle=str(root)))
    assert r.status == "unknown" and r.facts.ib_present == frozenset({"ib_qib"})


def test_verbs_on_a_root_with_the_real_library(tmp_path):
    """A mounted root (live process): real libibverbs bytes, real device nodes opened read-write."""
    lib = Path(LIB)
    if not (lib / "libibverbs.so.1").exists():
        pytest.skip("libibverbs1 not installed here")
    real = (lib / "libibverbs.so.1").resolve()
    dst = tmp_path / LIB.lstrip("/")
    (dst / "libibverbs").mkdir(parents=True)
    shutil.copy(real, dst / real.name)
    os.symlink(real.name, dst / "libibverbs.so.1")
    pabi, _ = pabi_of_libibverbs(real.read_bytes())
    shutil.copy((lib / "libibverbs" / f"libmlx5-rdmav{pabi}.so").resolve(), dst / "libibverbs" / f"libmlx5-rdmav{pabi}.so")
    (tmp_path / "etc/libibverbs.d").mkdir(parents=True)
    (tmp_path / "etc/libibverbs.d/mlx5.driver").write_text("driver mlx5\n")
    dev = tmp_path / "sys/devices/pci0000:00/0000:17:00.0"
    (dev / "infiniband/mlx5_0/ports/1").mkdir(parents=True)
    (dev / "infiniband/mlx5_0/ports/1/state").write_text("4: ACTIVE\n")
    os.symlink("../../../0000:17:00.0", dev / "infiniband/mlx5_0/device")
    (tmp_path / "sys/bus/pci/drivers/mlx5_core").mkdir(parents=True)
    os.symlink("../../../bus/pci/drivers/mlx5_core", dev / "driver")
    (tmp_path / "sys/class/infiniband").mkdir(parents=True)
    os.symlink("../../devices/pci0000:00/0000:17:00.0/infiniband/mlx5_0", tmp_path / "sys/class/infiniband/mlx5_0")
    (tmp_path / "dev/infiniband/uverbs0").mkdir(parents=True)  # a directory: open(O_RDWR) fails
    (tmp_path / "dev/infiniband/rdma_cm").write_bytes(b"")
    r = run("verbs.userspace", open_host(root=str(tmp_path)))
    f = r.facts
    assert f.pabi == pabi and f.rdma_core == rdma_core_of(real.name)
    assert f.providers[0].private_abi == pabi  # read from the real provider
    # A mounted root's device nodes are the node's (the DaemonSet's /host/dev): whether a pod may
    # open them is the device plugin's grant, so they are seen, not opened.
    assert all(not n.checked for n in f.dev_nodes) and {n.path.rsplit("/", 1)[-1] for n in f.dev_nodes if n.exists} >= {"uverbs0", "rdma_cm"}
    assert not [x for x in r.findings if x.severity == "error"]
    # The live root ("/" in a pod) opens them for real: the same tree seen as the live root.
    from rdmadoctor.host import Host, _DirTree

    live = Host(_DirTree(str(tmp_path)), label="/", kind="live", live_process=True, root=str(tmp_path))
    r = run("verbs.userspace", live)
    f = r.facts
    uv = next(n for n in f.dev_nodes if n.path.endswith("uverbs0"))
    assert uv.checked and uv.open_error  # "Is a directory"
    cm = next(n for n in f.dev_nodes if n.path.endswith("rdma_cm"))
    assert cm.checked and cm.open_error is None
    assert {(x.code, x.subject) for x in r.findings if x.severity == "error"} == {("DEV_UVERBS_MISSING", "/dev/infiniband/uverbs0")}


GARBAGE = [b"", b"\x00\xff\xfe" * 50, b"Max locked memory abc def bytes\n", b"CapEff:\tzzzz\n", "ü" * 1000, b"9" * 5000 + b"\n"]


@pytest.mark.parametrize("junk", GARBAGE)
def test_garbage_never_raises(junk):
    files = {
        path: junk
        for path in (
            "/proc/self/limits",
            "/proc/self/status",
            "/runtime.json",
            "/cmd/ulimit.txt",
            "/cmd/df-shm.txt",
            "/cmd/lsmod.txt",
            "/cmd/dpkg-l.txt",
            "/cmd/rpm-qa.txt",
            "/cmd/ofed_info.txt",
            "/proc/modules",
            "/proc/sys/kernel/osrelease",
            "/proc/driver/nvidia/version",
            "/var/lib/dpkg/status",
            "/etc/libibverbs.d/mlx5.driver",
            f"{LIB}/libibverbs.so.1",
            f"{LIB}/libibverbs/libmlx5-rdmav34.so",
            "/sys/class/infiniband/mlx5_0/ports/1/state",
            "/sys/class/infiniband_verbs/uverbs0/ibdev",
            "/sys/bus/pci/devices/0000:17:00.0/vendor",
            "/sys/bus/pci/devices/0000:17:00.0/class",
        )
    }
    files["/sys/class/infiniband/mlx5_0/device"] = Link("/nonexistent/loop")
    files["/sys/module/ib_core/initstate"] = OSError("EIO")
    host = mem_host(files)
    for check_id in ("verbs.userspace", "limits.memlock", "shm.size", "kernel.modules"):
        r = run(check_id, host)
        assert r.status in ("pass", "warn", "fail", "unknown", "skip")
        assert "internal error" not in (r.reason or ""), r.reason


# ---- live: the real rlimit of a real process ------------------------------------------------


def _own_cap_ipc_lock() -> bool:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> 14 & 1)
    return False


def _live_limits(prefix: list[str]) -> tuple[subprocess.CompletedProcess, dict]:
    """`rdmadoctor check --only limits --json` as a real process started through ``prefix``."""
    _, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if hard != resource.RLIM_INFINITY and hard < 65536:
        pytest.skip("hard memlock limit below 64 KiB here")
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        pytest.skip("prlimit (util-linux) not installed")
    argv = [prlimit, "--memlock=65536:65536", *prefix, sys.executable, "-m", "rdmadoctor", "check", "--only", "limits", "--json"]
    env = dict(os.environ, RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD="1")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    if not proc.stdout.strip():
        pytest.skip(f"{' '.join(argv[:4])} did not run here: {proc.stderr.strip()[:200]}")
    return proc, json.loads(proc.stdout)


def test_live_memlock_64k_judged_by_the_process_capability():
    proc, report = _live_limits([])
    (check,) = report["checks"]
    assert check["id"] == "limits.memlock"
    assert report["inventory"]["memlock_bytes"] == 65536
    codes = {(f["code"], f["severity"]) for f in check["findings"]}
    if _own_cap_ipc_lock():
        # root with CAP_IPC_LOCK (this test run): the kernel skips the limit for RDMA, so it is ready.
        assert codes == {("MEMLOCK_BYPASSED_BY_IPC_LOCK", "info")}
        assert check["status"] == "pass" and proc.returncode == 0
    else:
        assert ("MEMLOCK_LIMITED", "error") in codes and proc.returncode == 1


def test_live_memlock_64k_without_ipc_lock_fails():
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) not installed")
    # A root exec keeps only the bounding set: drop IPC_LOCK from it (and the inheritable set).
    proc, report = _live_limits([setpriv, "--inh-caps=-all", "--bounding-set=-ipc_lock"])
    (check,) = report["checks"]
    f = next(f for f in check["findings"] if f["code"] == "MEMLOCK_LIMITED")
    assert f["severity"] == "error" and "memlock soft limit 64 KiB (hard 64 KiB)" in f["message"]
    assert f["data"]["memlock_soft"] == 65536 and f["data"]["memlock_hard"] == 65536
    assert check["status"] == "fail" and report["exit_code"] == 1 and proc.returncode == 1
    assert report["inventory"]["cap_ipc_lock"] is False


# ---- codes are a contract: one code, one kind ------------------------------------------------

MY_MODULES = (limits, verbs, nccl)


def test_every_code_states_its_kind_in_the_source():
    """`kind=` is written on every Code a check declares, where it is defined (its family module in
    rdmadoctor/core/codes/): the default (problem) is never taken by omission."""
    import ast

    from rdmadoctor.core import codes
    from rdmadoctor.logs import kb

    calls = {}  # NAME -> its Code(...) call, in the registry's family modules
    for path in sorted(Path(codes.__file__).parent.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and getattr(getattr(node.value, "func", None), "id", None) == "Code":
                calls[node.targets[0].id] = node.value
    for mod in MY_MODULES:
        # With the module's own private helpers (checks/_nccl_judge.py names nccl.py's codes too).
        own = Path(mod.__file__)
        imported = set()
        for path in [own, *sorted(own.parent.glob(f"_{own.stem}_*.py"))]:
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rdmadoctor.core.codes"):
                    imported |= {a.name for a in node.names if a.name in calls}
        # A check may also list codes of the knowledge base it reports (verbs.userspace reports
        # libibverbs' own warnings with the knowledge base's codes).
        from_kb = {c.code for c in kb.codes()}
        listed = {c.code for c in mod.CHECKS for c in c.codes} - from_kb
        imported -= from_kb  # (verbs.py imports libibverbs' kernel-ABI code from the registry, not through the kb)
        assert imported == listed and imported, f"{mod.__name__}: imported but not in a Check's codes: {imported ^ listed}"
        for name in sorted(listed):
            kind = next((k.value for k in calls[name].keywords if k.arg == "kind"), None)
            assert isinstance(kind, ast.Constant) and kind.value in ("problem", "unknown", "info"), (
                f"{mod.__name__}.{name} has no kind=")


def _bundles():
    from conftest import FIXTURES

    from rdmadoctor import examples

    out = [str(p) for p in sorted(FIXTURES.iterdir()) if p.is_dir()]
    return out + [str(Path(examples.__file__).parent / f"{name}.tar.gz") for name in ("broken-pod", "hgx-h100-ib", "roce-node")]


@pytest.mark.parametrize("bundle", _bundles(), ids=lambda p: Path(p).name)
def test_findings_match_their_codes_kind_on_every_bundle(bundle):
    from rdmadoctor.core.model import KIND_SEVERITIES

    host = open_host(bundle=bundle)
    for mod in MY_MODULES:
        for check in mod.CHECKS:
            r = run_check(check, Context(host, expect()))
            kinds = {c.code: c.kind for c in check.codes}
            for f in r.findings:
                assert f.code in kinds, (check.id, f.code)
                assert f.severity in KIND_SEVERITIES[kinds[f.code]], (check.id, f.code, f.severity, f.message)


def _pod_bundle(tmp_path, cap_eff: int) -> str:
    """A pod bundle: root, the runtime's 8 MiB memlock default, 16 GiB /dev/shm."""
    root = tmp_path / "pod"
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/limits").write_text(PROC_LIMITS_64K.replace("65536                65536", "8388608              8388608"))
    (root / "proc/self/status").write_text(f"Name:\tpython3\nUid:\t0\t0\t0\t0\nCapEff:\t{cap_eff:016x}\nCapBnd:\t{cap_eff:016x}\n")
    (root / "runtime.json").write_text(json.dumps({"shm_size": 16 * GIB, "shm_free": 16 * GIB}))
    return str(root)


def test_cli_ipc_lock_recipe_is_ready_and_job_uid_is_heard(tmp_path):
    from conftest import check_json

    bundle = _pod_bundle(tmp_path, DOCKER_CAPS_IPC_LOCK)
    code, rep = check_json(["--bundle", bundle, "--only", "limits", "--only", "shm"])
    assert code == 0 and rep["status"] == "pass"
    (ml,) = [c for c in rep["checks"] if c["id"] == "limits.memlock"]
    assert [f["code"] for f in ml["findings"]] == ["MEMLOCK_BYPASSED_BY_IPC_LOCK"]
    # preflight passes --job-uid as --set job_uid=N: the verdict is then uid 1000's.
    code, rep = check_json(["--bundle", bundle, "--only", "limits", "--set", "job_uid=1000"])
    (ml,) = rep["checks"]
    f = next(f for f in ml["findings"] if f["code"] == "MEMLOCK_LIMITED")
    assert code == 1 and "the job (uid 1000)" in f["message"] and f["data"]["uid"] == 1000
    # Without the capability, the same pod fails on its own.
    code, rep = check_json(["--bundle", _pod_bundle(tmp_path / "b", DOCKER_CAPS), "--only", "limits"])
    assert code == 1 and {"MEMLOCK_LIMITED", "CAP_IPC_LOCK_MISSING"} <= {f["code"] for f in rep["checks"][0]["findings"]}


def test_memlock_64k_fixture_holds_ipc_lock_so_the_limit_does_not_bind():
    from conftest import FIXTURES

    r = run("limits.memlock", open_host(bundle=str(FIXTURES / "memlock-64k-ipc-lock")))
    assert r.facts.soft == 65536 and r.facts.cap_ipc_lock is True
    assert r.status == "pass" and [(f.code, f.severity) for f in r.findings] == [("MEMLOCK_BYPASSED_BY_IPC_LOCK", "info")]
