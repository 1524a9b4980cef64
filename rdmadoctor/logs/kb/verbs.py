"""libibverbs' own warnings: providers, kernel ABI, the memlock limit.

libibverbs prefixes everything with ``libibverbs: `` (``PFX`` in libibverbs/ibverbs.h) and writes
to stderr of whatever process loads it: NCCL, ibv_devinfo, perftest, MPI. Strings checked against
linux-rdma/rdma-core (HEAD, v64; the history named in each ``ref``).
"""

from __future__ import annotations

from rdmadoctor.core.codes.ib import (
    VERBS_KERNEL_ABI_MISMATCH,
)
from rdmadoctor.core.model import ERROR, WARNING
from rdmadoctor.logs.kb import Pattern

CODES = (VERBS_KERNEL_ABI_MISMATCH,)

# Codes that live with their checks, named by string (the logs layer is below the checks).
VERBS_PROVIDER_MISSING = "VERBS_PROVIDER_MISSING"
VERBS_ABI_MISMATCH = "VERBS_ABI_MISMATCH"
MEMLOCK_LIMITED = "MEMLOCK_LIMITED"
MOD_MISSING = "MOD_MISSING"
NCCL_IB_COMPLETION_ERROR = "NCCL_IB_COMPLETION_ERROR"


def _kib(groups: dict[str, str]) -> dict[str, str]:
    try:
        n = int(groups.get("bytes") or "")
    except ValueError:
        return {"limit_text": "a small value"}
    return {"limit_text": f"{n} bytes ({n // 1024} KiB)"}


PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        id="verbs.no_config_dir",
        code=VERBS_PROVIDER_MISSING,
        explains_fallback=True,
        severity=ERROR,
        needle="couldn't open config directory",
        regex=r"libibverbs: Warning: couldn't open config directory '(?P<dir>[^']*)'",
        subject="{dir}",
        message="libibverbs found no provider configuration ({dir} is missing), so it can load no device driver and "
                "no RDMA device is usable; the image needs the providers.",
        meaning="Userspace sees no RDMA device: NCCL uses sockets, ibv_devinfo lists nothing.",
        fix="Install the providers in the image: `apt-get install -y ibverbs-providers` (Debian/Ubuntu) or `dnf "
            "install -y libibverbs` (RHEL); with MLNX_OFED/DOCA userspace, its ibverbs-providers.",
        ref="linux-rdma/rdma-core libibverbs/dynamic_driver.c read_config (all releases); only libibverbs builds "
            "that load providers dynamically print it",
        examples=("libibverbs: Warning: couldn't open config directory '/etc/libibverbs.d'.",),
    ),
    Pattern(
        id="verbs.no_provider",
        code=VERBS_PROVIDER_MISSING,
        explains_fallback=True,
        severity=ERROR,
        needle="no userspace device-specific driver found for",
        regex=r"libibverbs: Warning: no userspace device-specific driver found for (?P<dev>\S+)",
        subject="{dev}",
        message="libibverbs has no provider library for {dev}, so the device is invisible to userspace; it needs the "
                "provider for its kernel driver (libmlx5 for mlx5_core).",
        meaning="The device cannot be used for RDMA by NCCL, perftest or MPI in this container.",
        fix="Install the provider: `apt-get install -y ibverbs-providers` (Debian/Ubuntu) or `dnf install -y "
            "libibverbs` (RHEL); with MLNX_OFED/DOCA userspace, its ibverbs-providers.",
        ref="linux-rdma/rdma-core libibverbs/init.c ibverbs_get_device_list (printed only with IBV_SHOW_WARNINGS set "
            "since 2015; the sysfs path until 2019, the device name after)",
        examples=(
            "libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs0",
            "libibverbs: Warning: no userspace device-specific driver found for mlx5_0",
        ),
    ),
    Pattern(
        id="verbs.private_symbol",
        code=VERBS_ABI_MISMATCH,
        explains_fallback=True,
        severity=ERROR,
        needle="couldn't load driver",
        # From the needle's first place in the line only (the run before it cannot cross one): a line
        # that repeats it is not read to its end again from each repeat.
        regex=r"^(?:(?!libibverbs: Warning: couldn't load driver ').)*"
              r"libibverbs: Warning: couldn't load driver '(?P<driver>[^']*)': (?P<error>.*IBVERBS_PRIVATE_(?P<abi>\d{1,9})(?:.*\S)?)\s*$",
        subject="{driver}",
        message="libibverbs could not load provider {driver} because it was built for another libibverbs "
                "(IBVERBS_PRIVATE_{abi}): {error}.",
        meaning="The provider and libibverbs come from different rdma-core builds (distro vs MLNX_OFED); the device "
                "stays invisible to userspace and NCCL uses sockets.",
        fix="Install libibverbs and the providers from one source (`apt-get install -y --reinstall libibverbs1 "
            "ibverbs-providers`, or all MLNX_OFED/DOCA packages) and remove the other set.",
        ref="linux-rdma/rdma-core libibverbs/dynamic_driver.c load_driver `couldn't load driver '%s': %s` (dlerror); "
            "providers link against libibverbs' private symbol version IBVERBS_PRIVATE_<N> (libibverbs/libibverbs.map.in)",
        examples=(
            "libibverbs: Warning: couldn't load driver 'libmlx5-rdmav34.so': /lib/x86_64-linux-gnu/libibverbs.so.1: "
            "version `IBVERBS_PRIVATE_34' not found (required by /usr/lib/x86_64-linux-gnu/libibverbs/"
            "libmlx5-rdmav34.so)",
        ),
    ),
    Pattern(
        id="verbs.load_driver",
        code=VERBS_PROVIDER_MISSING,
        explains_fallback=True,
        severity=WARNING,
        needle="couldn't load driver",
        # Often harmless: /etc/libibverbs.d lists every provider rdma-core knows, and a missing
        # library for hardware the node does not have changes nothing. The private-symbol form is
        # the row above.
        # (from the needle's first place only, as verbs.private_symbol)
        regex=r"^(?:(?!libibverbs: Warning: couldn't load driver ').)*"
              r"libibverbs: Warning: couldn't load driver '(?P<driver>[^']*)'(?!.*IBVERBS_PRIVATE_)(?:: (?P<error>.*?\S))?\.?\s*$",
        subject="{driver}",
        message="libibverbs could not load provider {driver}{error_note}; this only matters if the node's RDMA device "
                "needs that provider.",
        meaning="If the provider is the one for this node's HCA (mlx5 for ConnectX), its devices are invisible to "
                "userspace and NCCL uses sockets; for other hardware it is noise.",
        fix="If `ibv_devices` lists nothing, install the provider package (`ibverbs-providers` / `libibverbs`); if it "
            "lists the HCAs, nothing needs fixing.",
        ref="linux-rdma/rdma-core libibverbs/dynamic_driver.c load_driver `couldn't load driver '%s'.` and "
            "`couldn't load driver '%s': %s`",
        examples=(
            "libibverbs: Warning: couldn't load driver 'libvmw_pvrdma-rdmav34.so': libvmw_pvrdma-rdmav34.so: cannot "
            "open shared object file: No such file or directory",
            "libibverbs: Warning: couldn't load driver 'mlx5'.",
        ),
        derive=lambda g: {"error_note": f" ({g['error']})" if g.get("error") else ""},
    ),
    Pattern(
        id="verbs.kernel_abi_driver",
        code=VERBS_KERNEL_ABI_MISMATCH.code,
        explains_fallback=True,
        severity=ERROR,
        needle="does not support the kernel ABI of",
        regex=r"Warning: Driver (?P<driver>\S+) does not support the kernel ABI of (?P<abi>\d+) \(supports "
              r"(?P<min>\d+) to (?P<max>\d+)\) for device (?P<dev>\S+)",
        subject="{dev}",
        message="Provider {driver} supports kernel ABI {min} to {max}, but the kernel driver of {dev} speaks ABI "
                "{abi}, so libibverbs skips the device.",
        meaning="The device is invisible to userspace; NCCL falls back to sockets.",
        fix="Make the image's rdma-core match the host's RDMA kernel stack (MLNX_OFED/DOCA userspace with MLNX_OFED "
            "kernel modules, a current rdma-core with the inbox driver).",
        ref="linux-rdma/rdma-core libibverbs/init.c match_driver_id (since 2017, commit 36c8b58dd)",
        examples=("libibverbs: Warning: Driver mlx5 does not support the kernel ABI of 2 (supports 1 to 1) for device "
                  "/sys/class/infiniband/mlx5_0",),
    ),
    Pattern(
        id="verbs.kernel_abi_fatal",
        code=VERBS_KERNEL_ABI_MISMATCH.code,
        explains_fallback=True,
        severity=ERROR,
        needle="doesn't match library version",
        regex=r"libibverbs: Fatal: kernel ABI version (?P<abi>\d+) doesn't match library version (?P<lib>\d+)",
        subject="uverbs ABI",
        message="The kernel's uverbs ABI is version {abi}, but this libibverbs supports up to {lib}, so no RDMA device "
                "can be used from this userspace.",
        meaning="RDMA is unusable in this container; NCCL falls back to sockets.",
        fix="Use an rdma-core in the image that supports the host kernel's uverbs ABI (a newer rdma-core, or "
            "MLNX_OFED/DOCA userspace matching the host's kernel modules).",
        ref="linux-rdma/rdma-core libibverbs/init.c check_abi_version",
        examples=("libibverbs: Fatal: kernel ABI version 7 doesn't match library version 6.",),
    ),
    Pattern(
        id="verbs.memlock",
        code=MEMLOCK_LIMITED,
        severity=WARNING,
        needle="RLIMIT_MEMLOCK is",
        regex=r"libibverbs: Warning: RLIMIT_MEMLOCK is (?P<bytes>\d+) bytes\.",
        subject="memlock",
        message="libibverbs warns that the locked-memory limit is {limit_text}, which severely limits memory "
                "registration; RDMA needs it unlimited (or the process to hold CAP_IPC_LOCK).",
        meaning="ibv_reg_mr fails with `Cannot allocate memory` as soon as NCCL registers its buffers.",
        fix="Add IPC_LOCK to the container (securityContext.capabilities.add: [IPC_LOCK]), or raise the limit: "
            "`ulimit -l unlimited` in the entrypoint, LimitMEMLOCK=infinity for the container runtime.",
        ref="linux-rdma/rdma-core libibverbs/init.c check_memlock_limit (printed for non-root when the soft limit is "
            "<= 32768 bytes)",
        examples=("libibverbs: Warning: RLIMIT_MEMLOCK is 32768 bytes.",),
        derive=_kib,
    ),
    Pattern(
        id="verbs.uverbs_abi_unreadable",
        code=MOD_MISSING,
        severity=ERROR,
        needle="couldn't read uverbs ABI version",
        regex=r"libibverbs: Fatal: couldn't read uverbs ABI version",
        subject="ib_uverbs",
        message="libibverbs could not read the kernel's uverbs ABI version (/sys/class/infiniband_verbs/abi_version is "
                "missing): the ib_uverbs kernel module is not loaded, so no RDMA device can be used. This is not an ABI "
                "mismatch: the kernel side is absent.",
        meaning="No process on this node can use RDMA until ib_uverbs is loaded; NCCL falls back to sockets.",
        fix="On the host: `modprobe ib_uverbs` (and the HCA's driver, mlx5_ib), persisted in "
            "/etc/modules-load.d/rdma.conf; with MLNX_OFED `/etc/init.d/openibd restart`.",
        ref="linux-rdma/rdma-core libibverbs/init.c check_abi_version (libibverbs 1.1, `Fatal: couldn't read uverbs ABI "
            "version.`); quoted in Open MPI users' reports with librdmacm's twin warning",
        examples=("libibverbs: Fatal: couldn't read uverbs ABI version.",),
    ),
    Pattern(
        id="verbs.rdmacm_abi_unreadable",
        code=MOD_MISSING,
        severity=WARNING,
        needle="librdmacm: ",
        regex=r"librdmacm: (?:Warning: )?couldn't read ABI version",
        subject="rdma_ucm",
        message="librdmacm could not read the kernel's RDMA CM ABI version (/sys/class/infiniband_cm/abi_version): the "
                "rdma_ucm kernel module is not loaded; librdmacm assumes ABI 4 and rdma_cm connections fail.",
        meaning="MPI and tools that connect with RDMA CM (rping, perftest -R, UCX's rdmacm) cannot; NCCL itself does not "
                "use RDMA CM. Often the whole RDMA stack is missing on this host.",
        fix="On the host: `modprobe rdma_ucm` (with ib_uverbs and the HCA's driver); check `ls "
            "/sys/class/infiniband_verbs`.",
        ref="linux-rdma/rdma-core librdmacm/cma.c check_abi_version (`couldn't read ABI version.`, then `assuming: %d`)",
        examples=("librdmacm: couldn't read ABI version.", "librdmacm: Warning: couldn't read ABI version."),
    ),
    Pattern(
        id="verbs.mlx5_bad_completion",
        code=NCCL_IB_COMPLETION_ERROR,
        severity=ERROR,
        needle="got completion with error",
        regex=r"mlx5: (?P<host>[\w.-]{1,255}): got completion with error",
        subject="mlx5",
        message="The mlx5 provider on {host} got a work completion with an error (its hex dump follows the line): a "
                "transfer over the HCA failed, most often because the peer went away.",
        meaning="The connection it belongs to fails; NCCL reports a remote or completion error next.",
        fix="Find what the peer did first (a worker that died, a killed rank); if nothing, the completion's syndrome in "
            "the dump and the port's counters (`perfquery -x`) say whether the fabric dropped it.",
        ref="linux-rdma/rdma-core providers/mlx5/cq.c mlx5_dump_error_cqe `mlx5: %s: got completion with error:`; "
            "https://github.com/OpenRLHF/OpenRLHF/issues/621",
        examples=("(RayWorkerWrapper pid=92234, ip=172.19.24.110) mlx5: host_unknown: got completion with error:",),
        symptom=True,
    ),
)
