"""What the RDMA tools print when they fail: ibv_devinfo, ibstat, the perftest tools.

The tools' normal output (ports, states, rates) goes to the parsers that ``check --bundle`` uses;
these rows are the error lines around it. Strings checked against linux-rdma/rdma-core
(libibverbs/examples/devinfo.c, infiniband-diags/ibstat.c, libibmad/mad.h) and linux-rdma/perftest
(src/perftest_parameters.c, src/perftest_resources.c), HEAD of both.
"""

from __future__ import annotations

from rdmadoctor.core.codes.ib import (
    IB_DEVICE_NAME_UNKNOWN,
    IB_QP_CONNECT_FAILED,
    IB_TOOL_FAILED,
    VERBS_NO_DEVICES,
    VERBS_RESOURCE_FAILED,
)
from rdmadoctor.core.model import ERROR, WARNING
from rdmadoctor.logs.kb import Pattern

CODES = (VERBS_NO_DEVICES, IB_DEVICE_NAME_UNKNOWN, IB_TOOL_FAILED, IB_QP_CONNECT_FAILED, VERBS_RESOURCE_FAILED)

# Codes that live with their checks, named by string (the logs layer is below the checks).
DEV_UVERBS_MISSING = "DEV_UVERBS_MISSING"
MOD_MISSING = "MOD_MISSING"
IB_PORT_DOWN = "IB_PORT_DOWN"
IB_PORT_INIT = "IB_PORT_INIT"
IB_NO_DEVICES = "IB_NO_DEVICES"
ROCE_NO_V2_GID = "ROCE_NO_V2_GID"
# libibverbs skipped the kernel's devices (no provider for them, a provider or libibverbs of the wrong
# ABI): an empty device list after such a warning is that problem, the kernel has the devices.
_NO_USERSPACE = ("VERBS_PROVIDER_MISSING", "VERBS_ABI_MISMATCH", "VERBS_KERNEL_ABI_MISMATCH")


# checks/pci.py's codes: a pasted `lspci -vvv | grep ...` says what the check reads from the node.
PCIE_ACS_ENABLED = "PCIE_ACS_ENABLED"
PCIE_LINK_DEGRADED = "PCIE_LINK_DEGRADED"

PATTERNS: tuple[Pattern, ...] = (
    # `lspci -vvv | grep ACSCtl` (issue 30): the capability lines without the device lines above them,
    # so which bridge is not known; one line with a redirect on is enough to look further.
    Pattern(
        id="ibtools.lspci_acs_redirect",
        code=PCIE_ACS_ENABLED,
        severity=WARNING,
        needle="ACSCtl:",
        regex=r"ACSCtl:\s{0,8}SrcValid[+-]\s{1,8}TransBlk[+-]\s{1,8}(?:ReqRedir\+\s{1,8}CmpltRedir[+-]|ReqRedir-\s{1,8}CmpltRedir\+)",
        subject="lspci ACSCtl",
        message="lspci shows ACS request/completion redirect on (ReqRedir+ or CmpltRedir+) for a PCIe bridge; expected "
                "ReqRedir- CmpltRedir- on every bridge between a GPU and an HCA. The lines were pasted without their "
                "device lines, so which bridge is not shown.",
        meaning="With ACS redirect on a bridge between a GPU and an HCA, GPUDirect RDMA and GPU peer traffic go up to "
                "the root complex: NCCL hangs, fails with completion errors, or runs at a fraction of its bandwidth.",
        fix="Find the bridges: `lspci -vvv | grep -e '^[0-9a-f]' -e ACSCtl` (as root); turn ACS off for those above "
            "GPUs and HCAs (`setpci -s <bdf> ECAP_ACS+0x6.w=0000`, or in the BIOS), then `rdmadoctor check` on the node.",
        ref="pciutils lib/header.h, ls-ecaps.c cap_acs (`ACSCtl:\tSrcValid%c TransBlk%c ReqRedir%c CmpltRedir%c ...`); "
            "https://github.com/NVIDIA/nccl/issues/523",
        examples=("                ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-",
                  "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"),
    ),
    # `lspci -vvv | grep LnkSta`: a link that trained with fewer lanes than it can (a lower speed alone is
    # what an idle GPU does, checks/pci.py PCIE_GPU_LINK_IDLE: not read here).
    Pattern(
        id="ibtools.lspci_width_downgraded",
        code=PCIE_LINK_DEGRADED,
        severity=WARNING,
        needle="LnkSta:",
        regex=r"LnkSta:\s{0,8}Speed (?P<speed>[\d.]{1,8})GT/s(?: \([^)]{0,20}\))?,\s{0,8}Width x(?P<width>\d{1,2}) \(downgraded\)",
        subject="lspci LnkSta",
        message="lspci shows a PCIe link at width x{width} marked (downgraded): it trained with fewer lanes than both "
                "of its ends support. The lines were pasted without their device lines, so which device is not shown.",
        meaning="Fewer lanes divide the bandwidth between the device and the node: an HCA or GPU behind it cannot "
                "reach line rate.",
        fix="Find the device: `lspci -vvv | grep -e '^[0-9a-f]' -e LnkSta` (as root); reseat the card or riser, check "
            "the slot's bifurcation in the BIOS, then `rdmadoctor check` on the node.",
        ref="pciutils ls-caps.c cap_express_link (`LnkSta:\tSpeed %s%s, Width x%d%s`, ` (downgraded)`)",
        examples=("\t\tLnkSta:\tSpeed 16GT/s (ok), Width x8 (downgraded)",
                  "                LnkSta: Speed 8GT/s (downgraded), Width x4 (downgraded)"),
    ),
    Pattern(
        id="ibtools.list_zero",
        code=VERBS_NO_DEVICES.code,
        explains_fallback=True,
        severity=ERROR,
        needle="HCAs found:",
        regex=r"(?:^|\s|:)0 HCAs found:",
        subject="libibverbs",
        message="`ibv_devinfo -l` lists 0 HCAs: libibverbs sees no RDMA device in this host or container.",
        meaning="Nothing in this environment can use RDMA; NCCL falls back to TCP sockets.",
        fix="Check `ls /dev/infiniband` and `ls /etc/libibverbs.d` in the container; request the device (rdma/hca) and "
            "install ibverbs-providers; on the host `modprobe mlx5_ib ib_uverbs`.",
        ref="linux-rdma/rdma-core libibverbs/examples/devinfo.c (`%d HCA%s found:` of `ibv_devinfo -l`)",
        examples=("0 HCAs found:",),
        follows=_NO_USERSPACE,
        symptom_after=_NO_USERSPACE,
    ),
    Pattern(
        id="ibtools.ibstatus_no_sysfs",
        code=IB_NO_DEVICES,
        explains_fallback=True,
        severity=ERROR,
        needle="sys files not found",
        regex=r"Fatal error: +device '(?P<device>[^']{0,256})': sys files not found(?: \((?P<path>[^)]{0,4096})\))?",
        subject="/sys/class/infiniband",
        message="ibstatus found no RDMA device in sysfs ({path}): the kernel lists no HCA here.",
        meaning="No RDMA driver is bound to any device in this host or container; nothing can use RDMA and NCCL falls "
                "back to TCP sockets.",
        fix="On the node: `lspci | grep -i mellanox`, then load the driver (`modprobe mlx5_ib`, or mlx4_ib for "
            "ConnectX-3) or install MLNX_OFED / DOCA-OFED; in a pod, /sys/class/infiniband is filled only when the "
            "host's driver is loaded.",
        ref="linux-rdma/rdma-core infiniband-diags/scripts/ibstatus (`Fatal error:  device '$dev': sys files not found`)",
        examples=("Fatal error:  device '*': sys files not found (/sys/class/infiniband/*/ports)",),
    ),
    Pattern(
        id="ibtools.no_devices",
        code=VERBS_NO_DEVICES.code,
        explains_fallback=True,
        severity=ERROR,
        needle="No IB devices found",
        regex=r"No IB devices found",
        subject="libibverbs",
        message="The verbs tool found no RDMA device (`No IB devices found`); this host or container should list its "
                "HCAs.",
        meaning="Nothing in this environment can use RDMA; NCCL falls back to TCP sockets.",
        fix="Check `ls /dev/infiniband` and `ls /etc/libibverbs.d` in the container; request the device (rdma/hca) and "
            "install ibverbs-providers; on the host `modprobe mlx5_ib ib_uverbs`.",
        ref="linux-rdma/rdma-core libibverbs/examples/devinfo.c and the *_pingpong examples; linux-rdma/perftest "
            "src/perftest_resources.c",
        examples=("No IB devices found", "[pod/trainer-0/main] No IB devices found"),
        follows=_NO_USERSPACE,
        symptom_after=_NO_USERSPACE,
    ),
    Pattern(
        id="ibtools.device_list_enosys",
        code=MOD_MISSING,
        severity=ERROR,
        needle="Failed to get IB devices list",
        # ENOSYS: /sys/class/infiniband_verbs/abi_version is missing, i.e. ib_uverbs is not loaded
        # (libibverbs/init.c check_abi_version).
        regex=r"Failed to get IB devices list: ?Function not implemented",
        subject="ib_uverbs",
        message="libibverbs found no uverbs ABI in sysfs (`Function not implemented`): the ib_uverbs kernel module is "
                "not loaded on the host.",
        meaning="No process on this node can use RDMA until it is loaded.",
        fix="On the host: `modprobe ib_uverbs` (and mlx5_ib), persisted in /etc/modules-load.d/rdma.conf; with MLNX_OFED "
            "`/etc/init.d/openibd restart`.",
        ref="linux-rdma/rdma-core libibverbs/examples/devinfo.c perror(\"Failed to get IB devices list\"); "
            "libibverbs/init.c check_abi_version returns ENOSYS",
        examples=("Failed to get IB devices list: Function not implemented",
                  # https://github.com/WukLab/LITE/issues/5, as pasted
                  "Failed to get IB devices list:Function not implemented"),
    ),
    Pattern(
        id="ibtools.device_list_failed",
        code=VERBS_NO_DEVICES.code,
        explains_fallback=True,
        severity=ERROR,
        needle="Failed to get IB devices list",
        regex=r"Failed to get IB devices list(?!: ?Function not implemented)(?:: ?(?P<error>.*?\S))?\s*$",
        subject="libibverbs",
        message="libibverbs could not list the RDMA devices{error_note}.",
        meaning="Nothing in this environment can use RDMA; NCCL falls back to TCP sockets.",
        fix="Check the kernel side (`ls /sys/class/infiniband_verbs`, `lsmod | grep ib_uverbs`) and the container's "
            "/dev/infiniband; load the modules on the host and request the device in the pod.",
        ref="linux-rdma/rdma-core libibverbs/examples/devinfo.c; linux-rdma/perftest src/dm_memory.c",
        examples=("Failed to get IB devices list: No such file or directory", "Failed to get IB devices list"),
        derive=lambda g: {"error_note": f" ({g['error']})" if g.get("error") else ""},
    ),
    Pattern(
        id="ibtools.open_device_failed",
        code=DEV_UVERBS_MISSING,
        explains_fallback=True,
        severity=ERROR,
        needle="Failed to open device",
        regex=r"Failed to open device\s*$",
        subject="ibv_open_device",
        message="ibv_devinfo lists the device but cannot open it (ibv_open_device failed): in a container its "
                "/dev/infiniband/uverbs node is missing or not accessible; on a host or VM the driver refused to open it.",
        meaning="RDMA cannot be used from here with that device although the kernel has it. In a pod given one VF, the "
                "other devices of the host fail this way and only the pod's own opens: that one is what matters.",
        fix="Request the device in the pod spec (resources.limits: {rdma/hca: 1} or the SR-IOV VF resource) instead of "
            "only mounting /sys; check `ls -l /dev/infiniband` and its permissions.",
        ref="linux-rdma/rdma-core libibverbs/examples/devinfo.c print_hca_cap",
        examples=("Failed to open device",),
    ),
    Pattern(
        id="ibtools.perftest_no_context",
        code=DEV_UVERBS_MISSING,
        explains_fallback=True,
        severity=ERROR,
        needle="Couldn't get context for the device",
        regex=r"Couldn't get context for the device",
        subject="ibv_open_device",
        message="perftest could not open the RDMA device (`Couldn't get context for the device`): in a container its "
                "uverbs node is missing or not accessible; on a host or VM the driver refused to open it.",
        meaning="RDMA cannot be used from here although the kernel has the device.",
        fix="Request the device in the pod spec (resources.limits: {rdma/hca: 1}) and check `ls -l /dev/infiniband`.",
        ref="linux-rdma/perftest src/perftest_resources.c, src/*_bw.c, src/*_lat.c",
        examples=(" Couldn't get context for the device",),
        # After ` Port number 1 state is Down` perftest gives up on the device (openshift/sriov-network-operator#635).
        follows=(IB_PORT_DOWN,),
        symptom_after=(IB_PORT_DOWN,),
    ),
    Pattern(
        id="ibtools.device_name_unknown",
        code=IB_DEVICE_NAME_UNKNOWN.code,
        severity=ERROR,
        needle="IB device ",
        regex=r"IB device '(?P<dev>[^']{0,256})' wasn't found|'(?P<dev2>[^']{0,256})' IB device can't be found"
              r"|IB device (?P<dev3>[\w.-]{1,64}) not found",
        subject="{device}",
        message="The tool was asked for RDMA device '{device}', which this host does not list.",
        meaning="The command tested nothing; a script or NCCL_IB_HCA with this name is wrong on this node.",
        fix="Use a name from `ibv_devices` / `ibstat -l` on this node.",
        ref="linux-rdma/rdma-core libibverbs/examples/devinfo.c `IB device '%s' wasn't found`; "
            "infiniband-diags/ibstat.c IBPANIC(\"'%s' IB device can't be found\")",
        examples=(
            "IB device 'mlx5_9' wasn't found",
            "ibpanic: [2231] main: 'mlx5_9' IB device can't be found: No such file or directory",
            "IB device mlx5_9 not found",
        ),
        derive=lambda g: {"device": g.get("dev") or g.get("dev2") or g.get("dev3") or "?"},
        # "IB device 'rxe0' wasn't found" right after libibverbs skipped rxe0 for its ABI (rxe-dev#74).
        follows=_NO_USERSPACE,
        symptom_after=_NO_USERSPACE,
    ),
    Pattern(
        id="ibtools.perftest_no_device",
        code=IB_DEVICE_NAME_UNKNOWN.code,
        severity=ERROR,
        needle="Unable to find the Infiniband/RoCE device",
        regex=r"Unable to find the Infiniband/RoCE device",
        subject="perftest -d",
        message="perftest could not find the RDMA device it was given with -d (or any device), so it tested nothing.",
        meaning="The fabric was not tested; the device name is wrong here or no device is visible.",
        fix="Pass a name from `ibv_devices` (`ib_write_bw -d mlx5_0 ...`); if the list is empty see VERBS_NO_DEVICES.",
        ref="linux-rdma/perftest src/*_bw.c, src/*_lat.c, src/raw_ethernet_*.c",
        examples=(" Unable to find the Infiniband/RoCE device",),
        # perftest says why just before: no device at all, or not the one named.
        follows=("ibtools.perftest_no_devices", IB_DEVICE_NAME_UNKNOWN.code, *_NO_USERSPACE),
        symptom_after=("ibtools.perftest_no_devices", IB_DEVICE_NAME_UNKNOWN.code, *_NO_USERSPACE),
    ),
    Pattern(
        id="ibtools.perftest_no_devices",
        code=VERBS_NO_DEVICES.code,
        explains_fallback=True,
        severity=ERROR,
        needle="Did not detect devices",
        regex=r"Did not detect devices",
        subject="libibverbs",
        message="perftest found no RDMA device at all (`Did not detect devices`): libibverbs lists none here.",
        meaning="Nothing in this environment can use RDMA. In a container whose node has devices, the image's "
                "rdma-core is too old or too new for the node's kernel, or lacks the provider, or the device was not "
                "passed in.",
        fix="Compare `ls /sys/class/infiniband` (the kernel's devices) with `ibv_devices` in the container; use an image "
            "whose rdma-core matches the node (a current one: `apt-get install -y rdma-core ibverbs-providers "
            "perftest`) and request the device in the pod.",
        ref="linux-rdma/perftest src/perftest_resources.c ctx_find_dev (` Did not detect devices `, ` If device exists, "
            "check if driver is up`); https://github.com/Mellanox/k8s-rdma-shared-dev-plugin/issues/106 (an Ubuntu 18.04 "
            "image on a 22.04 node)",
        examples=("Did not detect devices ",),
        follows=_NO_USERSPACE,
        symptom_after=_NO_USERSPACE,
    ),
    Pattern(
        id="ibtools.perftest_zero_gid",
        code=ROCE_NO_V2_GID,
        severity=ERROR,
        needle="GID: 00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00",
        regex=r"GID: 00(?::00){15}\b",
        subject="perftest GID",
        message="perftest's GID at the index it used is all zeros: the RoCE device has no address there, so the "
                "queue pair cannot be connected. In a pod, the device's netdev is not in the pod's network namespace or "
                "has no IP address (a device given without a network for it).",
        meaning="RDMA between these hosts cannot work until the port has a RoCE v2 GID with an IP address.",
        fix="Give the pod a network on the RDMA device's netdev (a macvlan, host-device or SR-IOV network with an IP "
            "address, as the RDMA shared device plugin needs), check `show_gids` / `ibv_devinfo -v` in the pod, and pass "
            "that GID's index (`-x N`, NCCL_IB_GID_INDEX).",
        ref="linux-rdma/perftest src/perftest_communication.c ctx_print_pingpong_data (` GID: %02d:...`); "
            "https://github.com/Mellanox/k8s-rdma-shared-dev-plugin/issues/72 (\"your GIDs are zero\")",
        examples=(" GID: 00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00",),
    ),
    Pattern(
        id="ibtools.perftest_create_qp",
        code=VERBS_RESOURCE_FAILED.code,
        severity=ERROR,
        needle="Couldn't create IB resource",
        regex=r"Couldn't create IB resource",
        subject="perftest",
        message="perftest could not create its RDMA resources (`Couldn't create IB resource`; `Unable to create QP` "
                "before it): in a container, most often the locked-memory limit (no IPC_LOCK).",
        meaning="The test measured nothing; NCCL in the same pod fails the same way (ibv_create_qp, ibv_reg_mr).",
        fix="`ulimit -l` in the pod must say unlimited: add IPC_LOCK to the container's securityContext capabilities.",
        ref="linux-rdma/perftest src/perftest_resources.c ctx_init (`Couldn't create IB resource`, `Unable to create "
            "QP.`); https://github.com/Mellanox/k8s-rdma-sriov-dev-plugin/issues/29 (IPC_LOCK)",
        examples=("Couldn't create IB resource.",),
    ),
    Pattern(
        id="ibtools.perftest_rtr",
        code=IB_QP_CONNECT_FAILED.code,
        severity=ERROR,
        needle="to RTR",
        regex=r"Failed to modify QP (?:(?P<qp>\d{1,10}) )?to RTR",
        subject="perftest",
        message="perftest could not connect its queue pair to the peer (`Failed to modify QP to RTR`): the address it "
                "has for the peer does not work on this port.",
        meaning="The test measured nothing; RDMA between the two hosts does not work as configured.",
        fix="RoCE: use a GID index whose GID has the IPv4 address on both hosts (`-x N` from `show_gids`; a zero or "
            "link-local GID fails), the same MTU on both sides, and a route between them; InfiniBand: both ports ACTIVE "
            "on one subnet.",
        ref="linux-rdma/perftest src/perftest_resources.c ctx_modify_qp_to_rtr (`Failed to modify QP %d to RTR`)",
        examples=("Failed to modify QP 59 to RTR",),
        follows=(ROCE_NO_V2_GID,),
        symptom_after=(ROCE_NO_V2_GID,),
    ),
    Pattern(
        id="ibtools.perftest_connect",
        code=IB_QP_CONNECT_FAILED.code,
        severity=ERROR,
        needle="Unable to Connect the HCA",
        regex=r"Unable to Connect the HCA's through the link",
        subject="perftest",
        message="perftest could not connect the two hosts' HCAs (`Unable to Connect the HCA's through the link`).",
        meaning="The test measured nothing; the line before it says why (a QP that did not reach RTR, a GID).",
        fix="Read the error before it; check both ports ACTIVE and, on RoCE, the GID index (`-x`).",
        ref="linux-rdma/perftest src/*_bw.c, src/*_lat.c",
        examples=(" Unable to Connect the HCA's through the link",),
        symptom=True,
    ),
    Pattern(
        id="ibtools.umad_init",
        code=IB_TOOL_FAILED.code,
        severity=WARNING,
        needle="can't init UMAD library",
        regex=r"ibpanic: \[\d{1,10}\] (?P<func>\w{1,64}): can't init UMAD library(?:: (?P<error>.*?\S))?\s*$",
        subject="libibumad",
        message="An infiniband-diags tool could not initialise libibumad{error_note}: /dev/infiniband/umad* or the "
                "ib_umad module is missing, so ibstat-style tools cannot run here.",
        meaning="The tool's output is missing; this says nothing about NCCL, which does not use umad.",
        fix="Read port states from sysfs (`cat /sys/class/infiniband/*/ports/*/state`) or run the tool on the host; "
            "there `modprobe ib_umad`.",
        ref="linux-rdma/rdma-core infiniband-diags/ibstat.c, smpdump.c, libibmad/rpc.c IBPANIC; libibmad/mad.h "
            "`ibpanic: [%d] %s: fmt: %m`",
        examples=("ibpanic: [1283] main: can't init UMAD library: No such file or directory",),
        derive=lambda g: {"error_note": f" ({g['error']})" if g.get("error") else ""},
    ),
    Pattern(
        id="ibtools.stat_failed",
        code=IB_TOOL_FAILED.code,
        severity=WARNING,
        needle="stat of IB device",
        regex=r"ib(?:panic|warn): \[\d{1,10}\] \w{1,64}: stat of IB device '(?P<dev>[^']{0,256})' failed(?:: (?P<error>.*?\S))?\s*$",
        subject="{dev}",
        message="ibstat could not query {dev}; older ibstat (rdma-core < 54) stops there and prints nothing for the "
                "devices after it.",
        meaning="ibstat's output is partial; a device that is not an InfiniBand port (Azure's mlx5_an0) fails this way "
                "harmlessly.",
        fix="Run `ibstat <dev>` for each other device, or read /sys/class/infiniband/*/ports/*/state; upgrade "
            "infiniband-diags to rdma-core >= 54.",
        ref="linux-rdma/rdma-core infiniband-diags/ibstat.c: IBPANIC (before v54), IBWARN (v54+, commit 703b52c6e)",
        examples=(
            "ibpanic: [2112] main: stat of IB device 'mlx5_an0' failed: No such file or directory",
            "ibwarn: [2112] main: stat of IB device 'mlx5_an0' failed",
        ),
    ),
    Pattern(
        id="ibtools.ibpanic",
        code=IB_TOOL_FAILED.code,
        severity=WARNING,
        needle="ibpanic: ",
        regex=r"ibpanic: \[\d{1,10}\] (?P<func>\w{1,64}): (?!can't init UMAD library|stat of IB device|'[^']{0,256}' IB device can't be "
              r"found)(?P<what>.*?\S)\s*$",
        subject="{func}",
        message="An infiniband-diags tool aborted in {func}: {what}.",
        meaning="The tool's output is missing or partial; the reason is in the message.",
        fix="`can't open UMAD port`: the port's umad device is not in this container or ib_umad is not loaded; run the "
            "tool on the host or read sysfs instead.",
        ref="linux-rdma/rdma-core libibmad/mad.h IBPANIC (all infiniband-diags tools)",
        examples=(
            "ibpanic: [3310] mad_rpc_open_port: can't open UMAD port ((null):0): No such file or directory",
            "ibpanic: [3310] main: can't list IB device names: No such file or directory",
        ),
    ),
    Pattern(
        id="ibtools.perftest_port_down",
        code=IB_PORT_DOWN,
        explains_fallback=True,
        severity=ERROR,
        needle="state is Down",
        regex=r"Port number (?P<port>\d+) state is Down",
        subject="port {port}",
        message="perftest found port {port} of the device DOWN; it must be ACTIVE to carry traffic.",
        meaning="No RDMA traffic can use this port: no cable, a bad cable or transceiver, or the switch port is down.",
        fix="Check `ibstat` (Physical state Polling: cable/switch; Disabled: `ibportstate` or `mlxlink -d <dev> -a UP`), "
            "reseat the cable, look at the switch port.",
        ref="linux-rdma/perftest src/perftest_parameters.c set_link_layer (portStates[] = Nop, Down, Init, Armed, "
            "Active Defer)",
        examples=(" Port number 1 state is Down",),
    ),
    Pattern(
        id="ibtools.perftest_port_init",
        code=IB_PORT_INIT,
        explains_fallback=True,
        severity=ERROR,
        needle="Port number ",
        regex=r"Port number (?P<port>\d+) state is (?P<state>Init|Armed)\b",
        subject="port {port}",
        message="perftest found port {port} in state {state}: the link is up but no subnet manager has made it ACTIVE.",
        meaning="Traffic cannot flow until a subnet manager configures the port.",
        fix="Make sure a subnet manager runs on the fabric (`sminfo`; UFM, the switch's SM, or `systemctl start opensm` "
            "on one host).",
        ref="linux-rdma/perftest src/perftest_parameters.c set_link_layer",
        examples=(" Port number 1 state is Init", " Port number 2 state is Armed"),
    ),
)
