"""aws-ofi-nccl, NCCL's libfabric net plugin (EFA on AWS, other libfabric providers).

The plugin logs through NCCL with ``NET/OFI `` before its message (``NCCL WARN NET/OFI ...``; before
2020, its own ``WARN: Function: %s Line: %d: NET/OFI ...``). Strings checked against aws/aws-ofi-nccl
(v1.0 .. v1.14, src/nccl_ofi_net.c, nccl_ofi_rdma.c, nccl_ofi_sendrecv.c) and the issues named in each
``ref``. Memory registration failures are ``nccl.ofi_reg_mr_failed`` (kb/nccl.py).
"""

from __future__ import annotations

from rdmadoctor.core.codes.mpi import (
    OFI_ERROR,
    OFI_NO_PROVIDER,
)
from rdmadoctor.core.model import ERROR
from rdmadoctor.logs.kb import Pattern

CODES = (OFI_NO_PROVIDER, OFI_ERROR)

# Codes that live with their checks, named by string (the logs layer is below the checks).
DEV_UVERBS_MISSING = "DEV_UVERBS_MISSING"
MEMLOCK_LIMITED = "MEMLOCK_LIMITED"
# libfabric's own log line: `libfabric:PID:TIME:PROV:SUBSYS:FUNC():LINE<warn> MESSAGE` (src/log.c).
# (PID and time are there in real logs; a paste may have "..." for them.)
_LF = r"libfabric:[^<\n]{0,100}?:(?P<prov>[\w;]{1,32}):\w{0,32}:\w{1,96}\(\):\d{1,6}<warn> "

PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        id="ofi.efa_rx_buffers",
        code=MEMLOCK_LIMITED,
        severity=ERROR,
        needle="Failure to post internal receive buffers",
        regex=r"EFA internal error: \((?P<err>\d{1,6})\) Failure to post internal receive buffers",
        subject="memlock",
        message="libfabric's EFA provider could not post its internal receive buffers (EFA error {err}, `Cannot "
                "allocate memory`): the locked-memory limit of the process is too low for them.",
        meaning="The EFA provider aborts the process.",
        fix="Run the job with `ulimit -l unlimited`: IPC_LOCK for the container, `--ulimit memlock=-1:-1` with docker, "
            "LimitMEMLOCK=infinity for the runtime; check `ulimit -l` inside it.",
        ref="ofiwg/libfabric prov/efa/src/rdm/efa_rdm_ep_utils.c, prov/efa/src/efa_errno.h "
            "FI_EFA_ERR_INTERNAL_RX_BUF_POST (4112); https://github.com/awslabs/awsome-distributed-ai/issues/647",
        examples=("EFA internal error: (4112) Failure to post internal receive buffers",),
    ),
    Pattern(
        id="ofi.cxi_no_vni",
        code=OFI_ERROR.code,
        severity=ERROR,
        needle="Failed to find valid default rgroup and vni",
        regex=_LF + r"(?::\s{0,4})?Failed to find valid default rgroup and vni for (?P<dev>\w{1,32})",
        subject="libfabric cxi",
        message="libfabric's cxi provider (HPE Slingshot) found no VNI and CXI service for {dev}: the job was not "
                "given a Slingshot network (its VNI) by the launcher.",
        meaning="The provider cannot send on the fabric: aws-ofi-nccl fails and NCCL falls back or the job fails.",
        fix="Launch through Slurm with the Slingshot network (`srun --network=...`, the site's default VNI), or enable "
            "the CXI default service (`cxi_service list` shows it) for the job's user.",
        ref="ofiwg/libfabric prov/cxi/src/cxip_info.c cxip_nic_get_rgroup_vni `Failed to find valid default rgroup and "
            "vni for %s`; https://github.com/aws/aws-ofi-nccl/issues/801",
        examples=(" libfabric:507357:1741146011::cxi:fabric:cxip_nic_get_rgroup_vni():253<warn> : Failed to find valid "
                  "default rgroup and vni for cxi0 ",),
    ),
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
        # After libfabric's own failure (a CQ it could not create, a device it could not open), this
        # is what it became.
        follows=("ofi.libfabric_enomem", DEV_UVERBS_MISSING),
        symptom_after=("ofi.libfabric_enomem", DEV_UVERBS_MISSING),
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
        regex=r"\A(?:(?!NET/OFI )[^\n]){0,400}NET/OFI (?!Could(?:n't| not) find any optimal provider|Unable to register memory"
              r"|OFI fi_getinfo\(\) call failed ?: No data available"
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
        follows=("ofi.libfabric_enomem", DEV_UVERBS_MISSING),
        symptom_after=("ofi.libfabric_enomem", DEV_UVERBS_MISSING),
    ),
    Pattern(
        id="ofi.libfabric_open_device",
        code=DEV_UVERBS_MISSING,
        explains_fallback=True,
        severity=ERROR,
        needle="ibv_open_device failed!",
        regex=r"(?:" + _LF + r")?ibv_open_device failed! errno: (?P<errno>\d{1,4})",
        subject="ibv_open_device",
        message="libfabric's {prov_text} provider could not open an RDMA device this node lists (ibv_open_device "
                "failed, errno {errno}): the device is in sysfs but its /dev/infiniband/uverbs node was not given to "
                "the pod; the EFA provider then lists no device at all, and NCCL goes on without EFA.",
        meaning="No EFA in this pod: inter-node traffic falls back to sockets, or the job fails.",
        fix="Compare `ls /sys/class/infiniband` with `ls -l /dev/infiniband` in the pod: give it the devices it must "
            "open (the EFA device plugin's vpc.amazonaws.com/efa) and do not mount the host's /sys/class/infiniband or "
            "/dev/infiniband into it.",
        ref="ofiwg/libfabric prov/efa/src/efa_device.c efa_device_construct_gid `ibv_open_device failed! errno: %d`; "
            "https://github.com/ofiwg/libfabric/issues/12708",
        examples=("libfabric:7:1732779731::efa:ep_data:efa_device_construct_gid():47<warn> ibv_open_device failed! "
                  "errno: 2",),
        derive=lambda g: {"prov_text": g.get("prov") or "verbs"},
    ),
    Pattern(
        id="ofi.libfabric_enomem",
        code=OFI_ERROR.code,
        explains_fallback=True,  # through aws-ofi-nccl failing to start after it
        severity=ERROR,
        needle="<warn> ",
        regex=_LF + r"(?P<what>[^\n]{1,200}?): Cannot allocate memory",
        subject="libfabric {prov}",
        message="libfabric's {prov} provider could not {what_text}: `Cannot allocate memory`, almost always the "
                "locked-memory limit of the process (every queue pins memory).",
        meaning="The provider cannot be used: aws-ofi-nccl fails to start and NCCL falls back to sockets, or the job "
                "fails.",
        fix="Run the job with `ulimit -l unlimited`: IPC_LOCK for the container, `--ulimit memlock=-1:-1` with docker, "
            "LimitMEMLOCK=infinity for the runtime; check `ulimit -l` inside it.",
        ref="ofiwg/libfabric src/log.c (`libfabric:%d:%ld:%s:%s:%s():%d<%s> `), prov/efa/src/efa_cq.c `Unable to "
            "create extended CQ: %s`; https://github.com/aws/aws-ofi-nccl/issues/715",
        examples=("libfabric:17778:1732779731::efa:cq:efa_cq_ibv_cq_ex_open_with_ibv_create_cq_ex():92<warn> Unable to "
                  "create extended CQ: Cannot allocate memory",),
        derive=lambda g: {"what_text": g["what"][10:] if g.get("what", "").startswith("Unable to ")
                          else f"do what it needed ({g.get('what') or '?'})"},
    ),
    Pattern(
        id="ofi.getinfo_nodata",
        code=OFI_NO_PROVIDER.code,
        explains_fallback=True,
        severity=ERROR,
        needle="fi_getinfo: ",
        regex=r"fi_getinfo: (?:-61 \(No data available\)|provider (?P<prov>[\w;]{1,32}) output empty list)",
        subject="libfabric",
        message="libfabric found no provider{prov_note} that can be used here (fi_getinfo: no data): no device of it "
                "is usable in this environment.",
        meaning="aws-ofi-nccl cannot start on it; NCCL uses sockets (or its IB transport) instead of EFA.",
        fix="Request the EFA devices in the pod (vpc.amazonaws.com/efa: N), check `fi_info -p efa` in it, and use the "
            "EFA installer's libfabric (/opt/amazon/efa).",
        ref="ofiwg/libfabric src/fabric.c fi_getinfo_ (`fi_getinfo: provider %s output empty list`), util/info.c "
            "(`fi_getinfo: %d (%s)`, -FI_ENODATA); https://github.com/ofiwg/libfabric/issues/12708",
        examples=("fi_getinfo: -61 (No data available)",
                  "libfabric:7:1732779731::core:core:fi_getinfo_():1391<warn> fi_getinfo: provider efa output empty list"),
        derive=lambda g: {"prov_note": f" ({g['prov']})" if g.get("prov") else ""},
        follows=(DEV_UVERBS_MISSING,),
        symptom_after=(DEV_UVERBS_MISSING,),
    ),
    Pattern(
        id="ofi.getinfo_call_nodata",
        code=OFI_NO_PROVIDER.code,
        explains_fallback=True,
        severity=ERROR,
        needle="No data available",
        # aws-ofi-nccl 1.9+ says it itself; fabtests print libfabric's return code (-FI_ENODATA).
        regex=r"(?:NET/OFI OFI fi_getinfo\(\) call failed: No data available"
              r"|fi_getinfo\(\): [\w./-]{1,64}:\d{1,6}, ret=-61 \(No data available\))",
        subject="libfabric",
        message="libfabric found no provider that can be used here (fi_getinfo: No data available): no device of it is "
                "usable in this environment.",
        meaning="aws-ofi-nccl cannot start on it; NCCL uses sockets (or its IB transport) instead of EFA. A libfabric "
                "test (fabtests) with this error cannot run at all.",
        fix="Request the EFA devices in the pod (vpc.amazonaws.com/efa: N) or pass /dev/infiniband to the container, "
            "check `fi_info -p efa` in it, and use the EFA installer's libfabric (/opt/amazon/efa).",
        ref="aws/aws-ofi-nccl src/nccl_ofi_rdma.c `OFI fi_getinfo() call failed: %s`; ofiwg/libfabric "
            "fabtests/common/shared.c (FT_PRINTERR `%s(): %s:%d, ret=%d (%s)`); "
            "https://github.com/aws/aws-ofi-nccl/issues/1020, https://github.com/ofiwg/libfabric/issues/5689",
        examples=("[2025-10-16 22:16:08] ip-172-31-3-90:1929:1937 [0] nccl_net_ofi_rdma_init:7978 NCCL WARN NET/OFI OFI "
                  "fi_getinfo() call failed: No data available",
                  "fi_getinfo(): common/shared.c:729, ret=-61 (No data available)"),
        follows=(DEV_UVERBS_MISSING,),
        symptom_after=(DEV_UVERBS_MISSING,),
    ),
    Pattern(
        id="ofi.psm3_cq_failed",
        code=OFI_ERROR.code,
        severity=ERROR,
        needle="Unable to create send CQ",
        regex=r"Unable to create (?:send|recv) CQ of size (?P<size>\d{1,10}) on (?P<dev>[\w.-]{1,64}): (?P<error>[^\n]{1,80}?)\s*$",
        subject="PSM3 {dev}",
        message="PSM3 (libfabric's psm3 provider, Open MPI's PSM3 MTL) could not create a completion queue of {size} "
                "entries on {dev}: {error}.",
        meaning="PSM3 cannot use the NIC (`PSM3 can't open nic unit`): MPI falls back to a slower path or fails. "
                "`Cannot allocate memory` is the locked-memory limit almost every time.",
        fix="Run with `ulimit -l unlimited` (IPC_LOCK in a container, LimitMEMLOCK=infinity, `--ulimit memlock=-1:-1`); "
            "check `ulimit -l` inside the job.",
        ref="intel/eth-psm3-fi (libfabric prov/psm3) psm3/hal_verbs/verbs_ep.c `Unable to create send CQ of size %u "
            "on %s: %s`; https://github.com/ofiwg/libfabric/issues/7324",
        examples=("hostname.domain.edu:pid502724.hello_world: Unable to create send CQ of size 5080 on mlx5_0: Cannot "
                  "allocate memory",),
    ),
)
