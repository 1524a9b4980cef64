"""libibverbs, its providers and /dev/infiniband: verbs.userspace, and libibverbs' own
warnings in a log.

The built-in codes of this family; the registry (rdmadoctor.core.codes) finds them here. A
code keeps its string and its meaning for life (docs/architecture.md, "Codes are a contract").
"""

from __future__ import annotations

from rdmadoctor.core.model import CONFIG, Code

# verbs.userspace (checks/verbs.py).
VERBS_LIB_MISSING = Code(
    "VERBS_LIB_MISSING",
    "libibverbs not installed",
    "libibverbs.so.1 is the userspace half of RDMA: without it NCCL cannot load its IB transport "
    "('NET/IB : No device found' or 'Failed to open libibverbs.so') and falls back to TCP sockets.",
    "In the image: `apt-get install -y libibverbs1 ibverbs-providers` (Debian/Ubuntu) or "
    "`dnf install -y rdma-core libibverbs` (RHEL/Fedora). NVIDIA's NGC images (nvcr.io/nvidia/pytorch) "
    "ship them.",
    kind="problem",
)
VERBS_PROVIDER_MISSING = Code(
    "VERBS_PROVIDER_MISSING",
    "No libibverbs provider for the device's driver",
    "libibverbs needs a provider library per kernel driver (libmlx5 for mlx5_core, ...), named in "
    "/etc/libibverbs.d/<name>.driver. Without it the device is invisible to userspace: "
    "'libibverbs: Warning: couldn't load driver ...' or 'no userspace device-specific driver found', "
    "ibv_devices lists nothing and NCCL uses sockets.",
    "In the image: `apt-get install -y ibverbs-providers` (Debian/Ubuntu) or `dnf install -y libibverbs` "
    "(RHEL/Fedora); with MLNX_OFED / DOCA-OFED userspace, install its ibverbs-providers (or mlnx-ofed-all).",
    kind="problem",
)
VERBS_ABI_MISMATCH = Code(
    "VERBS_ABI_MISMATCH",
    "Provider and libibverbs from different rdma-core builds",
    "Providers are tied to one libibverbs build: libibverbs only loads lib<name>-rdmav<N>.so with its "
    "own provider ABI N, and the provider needs libibverbs' private symbols IBVERBS_PRIVATE_<N>. A "
    "provider from MLNX_OFED next to a distro libibverbs (or the reverse) is skipped ('couldn't load "
    "driver') or fails with \"version `IBVERBS_PRIVATE_<N>' not found\".",
    "Install libibverbs and the providers from one source: all distro packages (`apt-get install -y "
    "--reinstall libibverbs1 ibverbs-providers`) or all MLNX_OFED/DOCA packages; remove the other set "
    "(`dpkg -l | grep -e mlnx -e rdma`, `rpm -qa | grep -e mlnx -e rdma`). Never rename or symlink a "
    "provider to another -rdmavN suffix.",
    kind="problem",
)
VERBS_PKG_MISSING = Code(
    "VERBS_PKG_MISSING",
    "Recommended RDMA package not installed",
    "Packages an RDMA job or its debugging needs: librdmacm (UCX, MPI), libibumad and infiniband-diags "
    "(ibstat, ibv_devinfo's neighbours), perftest (ib_write_bw to prove the fabric).",
    "Debian/Ubuntu: `apt-get install -y libibverbs1 ibverbs-providers librdmacm1 libibumad3 "
    "infiniband-diags perftest`; RHEL/Fedora: `dnf install -y rdma-core libibverbs librdmacm libibumad "
    "infiniband-diags perftest`.",
    kind="problem",
)
DEV_UVERBS_MISSING = Code(
    "DEV_UVERBS_MISSING",
    "/dev/infiniband/uverbs* device nodes missing or not usable",
    "Userspace reaches an RDMA device only through /dev/infiniband/uverbsN (rdma_cm is DEV_RDMA_CM_MISSING). "
    "A pod without them sees the HCAs in /sys but ibv_open_device fails: NCCL reports "
    "'NET/IB : No device found' and uses sockets.",
    "Request the device in the pod spec. With the RDMA shared device plugin "
    "(k8s-rdma-shared-dev-plugin / NVIDIA network operator):\n"
    "resources:\n"
    "  limits:\n"
    "    rdma/hca: 1   # the resourceName in the plugin's config\n"
    "With the SR-IOV network device plugin: request the VF resource (e.g. nvidia.com/sriov_rdma_vf: 1) "
    "and attach the network with the k8s.v1.cni.cncf.io/networks annotation. Without a plugin: "
    "privileged: true and a hostPath volume of /dev/infiniband.",
    kind="problem",
)

VERBS_LIB_UNKNOWN = Code(
    "VERBS_LIB_UNKNOWN",
    "RDMA userspace not recorded",
    "Could not decide: the bundle holds no library folder (/usr/lib, /lib, ...), e.g. a pasted ibstat or a "
    "/sys snapshot, so whether libibverbs and its providers are installed is unknown.",
    "Record the bundle inside the training container with `rdmadoctor collect`, which keeps the library "
    "folders' listings, or run `rdmadoctor check` there.",
    kind="unknown",
)
VERBS_DRIVER_UNKNOWN = Code(
    "VERBS_DRIVER_UNKNOWN",
    "Kernel driver without a known libibverbs provider",
    "Could not decide: the device's kernel driver is not in rdmadoctor's table of drivers and their "
    "libibverbs providers, so which provider library it needs cannot be told.",
    "Check by hand that `ibv_devices` lists the device inside the container; if it does not, install the "
    "vendor's libibverbs provider. Report the driver name to rdmadoctor so the table learns it.",
    kind="unknown",
)
VERBS_PKG_UNCHECKED = Code(
    "VERBS_PKG_UNCHECKED",
    "Installed packages not listed",
    "Information: no package database (/var/lib/dpkg/status) and no recorded `dpkg -l`, `rpm -qa` or "
    "`ofed_info` package list, so the recommended RDMA packages were not checked. The libraries themselves "
    "are judged from the files.",
    "Nothing to fix for the job. To have the packages checked, record `dpkg -l > cmd/dpkg-l.txt` or "
    "`rpm -qa > cmd/rpm-qa.txt` in the bundle, or use `rdmadoctor collect`.",
    kind="info",
)
DEV_INFINIBAND_UNKNOWN = Code(
    "DEV_INFINIBAND_UNKNOWN",
    "/dev/infiniband not recorded",
    "Could not decide: the bundle has no /dev, so whether the container has /dev/infiniband/uverbs* "
    "(without which ibv_open_device fails) is unknown.",
    "Record the bundle inside the training container with `rdmadoctor collect`, or run `rdmadoctor check` "
    "there.",
    kind="unknown",
)
DEV_RDMA_CM_MISSING = Code(
    "DEV_RDMA_CM_MISSING",
    "/dev/infiniband/rdma_cm missing or not usable",
    "librdmacm (UCX, MPI, `ib_write_bw -R`) opens /dev/infiniband/rdma_cm to set up connections; without it "
    "they fail with 'rdma_create_event_channel: No such device'. NCCL's own IB transport exchanges QP numbers "
    "over sockets and does not need it, so this is a warning.",
    "On the node: `modprobe rdma_ucm`. In the pod: the RDMA device plugins add rdma_cm with the uverbs "
    "nodes; with a hostPath mount, mount all of /dev/infiniband.",
    kind="problem",
)

# libibverbs' own words in a job's log (rdmadoctor/logs/kb/verbs.py).
VERBS_KERNEL_ABI_MISMATCH = Code(
    "VERBS_KERNEL_ABI_MISMATCH",
    "The verbs provider does not match the kernel driver's ABI",
    "Each libibverbs provider supports a range of the kernel uverbs ABI; the kernel's RDMA driver "
    "(inbox, or MLNX_OFED/DOCA-OFED's) reports another, so libibverbs skips the device and userspace "
    "sees no RDMA device: NCCL falls back to sockets. Typical after installing MLNX_OFED kernel modules "
    "on the host while the image keeps distro userspace that is far older, or the reverse.",
    "Use userspace that matches the host's RDMA kernel stack: with MLNX_OFED/DOCA-OFED on the host, "
    "install its user-space packages in the image (or use NVIDIA's images built for it); with the "
    "inbox kernel driver, install a current rdma-core (`apt-get install -y rdma-core ibverbs-providers`). "
    "`cat /sys/class/infiniband_verbs/abi_version` shows the kernel's side.",
    condition=CONFIG,
)
