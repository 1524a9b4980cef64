"""aws-ofi-nccl, NCCL's libfabric net plugin (EFA on AWS, other libfabric providers).

The plugin logs through NCCL with ``NET/OFI `` before its message (``NCCL WARN NET/OFI ...``; before
2020, its own ``WARN: Function: %s Line: %d: NET/OFI ...``). Strings checked against aws/aws-ofi-nccl
(v1.0 .. v1.14, src/nccl_ofi_net.c, nccl_ofi_rdma.c, nccl_ofi_sendrecv.c) and the issues named in each
``ref``. Memory registration failures are ``nccl.ofi_reg_mr_failed`` (kb/nccl.py).
"""

from __future__ import annotations

from rdmadoctor.core.model import CONFIG, ERROR, Code
from rdmadoctor.logs.kb import Pattern

OFI_NO_PROVIDER = Code(
    "OFI_NO_PROVIDER",
    "aws-ofi-nccl found no libfabric provider to use",
    "The libfabric plugin asked libfabric for a provider that can carry NCCL's traffic (EFA on AWS) and got "
    "none: the EFA device is not in the container, libfabric lacks the provider, or FI_PROVIDER names one that "
    "is not there. NCCL then skips the plugin and falls back to its own IB transport or to sockets.",
    "In the pod, request the EFA devices (vpc.amazonaws.com/efa: N in resources.limits) and check "
    "`fi_info -p efa`; use the libfabric of the EFA installer (/opt/amazon/efa) in LD_LIBRARY_PATH; unset a "
    "wrong FI_PROVIDER.",
    condition=CONFIG,
)
OFI_ERROR = Code(
    "OFI_ERROR",
    "aws-ofi-nccl (libfabric) failed",
    "The libfabric plugin reported a failure of a libfabric call (fi_* returning a negative errno: an "
    "endpoint, an address vector, a domain, a completion). The communicator that needed it fails or hangs.",
    "The message names the call and the errno. `Invalid argument` on an endpoint or AV usually means a "
    "libfabric / plugin / EFA driver version mismatch: use the EFA installer's libfabric and the plugin built "
    "for it; `Cannot allocate memory` is the locked-memory limit (IPC_LOCK, `ulimit -l unlimited`).",
    condition=CONFIG,
)

CODES = (OFI_NO_PROVIDER, OFI_ERROR)

PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        id="ofi.no_provider",
        code=OFI_NO_PROVIDER.code,
        explains_fallback=True,
        severity=ERROR,
        needle="find any optimal provider",
        regex=r"NET/OFI Could(?:n't| not) find any optimal provider",
        subject="NET/OFI",
        message="aws-ofi-nccl found no libfabric provider it can use (`Couldn't find any optimal provider`); NCCL "
                "skips the plugin and uses IB or sockets instead of EFA.",
        meaning="Inter-node traffic does not use EFA: a socket fallback at a fraction of the bandwidth, or a hang.",
        fix="Request the EFA devices in the pod (vpc.amazonaws.com/efa), check `fi_info -p efa`, use the EFA "
            "installer's libfabric (/opt/amazon/efa/lib) and unset a wrong FI_PROVIDER.",
        ref="aws/aws-ofi-nccl src/nccl_ofi_net.c find_ofi_provider (<= 1.5); https://github.com/NVIDIA/nccl/issues/229, "
            "https://github.com/aws/aws-ofi-nccl/issues/67",
        examples=(
            "get_ofi_provider:312 NCCL WARN NET/OFI Could not find any optimal provider",
            "10.3.35.83: WARN: Function: find_ofi_provider Line: 543: NET/OFI Couldn't find any optimal provider",
        ),
    ),
    Pattern(
        id="ofi.init_failed",
        code=OFI_ERROR.code,
        explains_fallback=True,
        severity=ERROR,
        needle="NET/OFI ",
        # The plugin's own start failed (no protocol it has works on this node): NCCL goes on without
        # it. The lines before say why (a protocol, the provider); each is this one finding.
        regex=r"NET/OFI (?P<what>aws-ofi-nccl initialization failed|Initializing plugin failed|Failed to initialize "
              r"\w{1,32} protocol|Unable to find a protocol that worked|Only EFA provider is supported)",
        subject="NET/OFI",
        message="aws-ofi-nccl could not start (`{what}`): NCCL goes on without the libfabric plugin, over its own "
                "IB transport or over sockets, not EFA.",
        meaning="Inter-node traffic does not use EFA: a socket fallback at a fraction of the bandwidth, or a hang "
                "where the other nodes use the plugin. On one node (or a Neuron run on one instance) it is harmless.",
        fix="Request the EFA devices in the pod (vpc.amazonaws.com/efa: N), check `fi_info -p efa` in it, and use "
            "the plugin built for the libfabric it loads (the EFA installer's /opt/amazon/efa); the NET/OFI lines "
            "before this one name the protocol or provider that failed.",
        ref="aws/aws-ofi-nccl src/nccl_ofi_net.c nccl_net_ofi_create_plugin (`aws-ofi-nccl initialization failed`, "
            "`Unable to find a protocol that worked`, `Failed to initialize %s protocol`), nccl_net_ofi_init "
            "(`Initializing plugin failed`); https://github.com/aws/aws-ofi-nccl/issues/715",
        examples=(
            "ip-10-0-1-7:3301:3360 [2] nccl_net_ofi_create_plugin:353 NCCL WARN NET/OFI aws-ofi-nccl initialization "
            "failed",
            "ip-10-0-1-7:3301:3360 [2] int nccl_net_ofi_create_plugin(nccl_net_ofi_plugin_t**):219 NCCL WARN NET/OFI "
            "Failed to initialize rdma protocol",
            "20:13:32 - NCCL WARN NET/OFI Only EFA provider is supported",
        ),
    ),
    Pattern(
        id="ofi.call_failed",
        code=OFI_ERROR.code,
        severity=ERROR,
        needle="NET/OFI ",
        # A plugin line that says something failed (INFO lines describe the setup); rows of their
        # own: no provider, memory registration, the plugin's start.
        # The first "NET/OFI " within 400 characters of the start (prefixes may be there): one place
        # tried, whatever the line holds.
        regex=r"\A(?:(?!NET/OFI )[^\n]){0,400}+NET/OFI (?!Could(?:n't| not) find any optimal provider|Unable to register memory"
              r"|aws-ofi-nccl initialization failed|Initializing plugin failed|Failed to initialize \w{1,32} protocol"
              r"|Unable to find a protocol that worked|Only EFA provider is supported)"
              r"(?=[^\n]{0,300}?(?:failed|[Cc]ouldn't|[Cc]ould not|Unable to|RC: -\d|ERROR|[Ee]rror))"
              r"(?P<what>[^\n]{1,300}?)\s*$",
        subject="NET/OFI",
        message="aws-ofi-nccl failed: {what}.",
        meaning="The communicator that needed it fails or hangs; the job does not use EFA from there on.",
        fix="`Invalid argument` from an endpoint or address vector: a libfabric / plugin / EFA driver mismatch "
            "(use the EFA installer's libfabric and the matching plugin); `Cannot allocate memory`: raise the "
            "locked-memory limit (IPC_LOCK).",
        ref="aws/aws-ofi-nccl src/nccl_ofi_net.c, src/nccl_ofi_rdma.c (NCCL_OFI_WARN); "
            "https://github.com/aws/aws-ofi-nccl/issues/24, https://github.com/aws/aws-ofi-nccl/issues/889",
        examples=(
            "ip-172-32-45-165:72593:73427 [7] create_nccl_ofi_component:459 NCCL WARN NET/OFI Couldn't open AV. RC: "
            "-22, ERROR: Invalid argument",
            "ip-10-36-29-253:79:79 [0] nccl_net_ofi_domain_get_ep:969 NCCL WARN NET/OFI Creating new endpoint for "
            "domain 0x7f9befa99380 failed: Invalid argument",
        ),
    ),
)
