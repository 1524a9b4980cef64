"""verbs.userspace's rules: how libibverbs finds a provider, and where the RDMA userspace lives.

The table of kernel drivers and their libibverbs providers, the library folders and package
names looked in, and pure parsers of the names and bytes libibverbs is known by (its soname, the
provider ABI compiled into it, /etc/libibverbs.d's ``driver`` lines, the provider a message
names). No host, and no finding made here: checks/_verbs_probe.py reads the facts with them,
checks/verbs.py judges.
"""

from __future__ import annotations

import posixpath
import re

from rdmadoctor.core.model import Finding

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


def _base_version(v: str | None) -> str:
    return re.sub(r"\+b\d+$", "", v or "")


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
