"""InfiniBand and the RDMA stack under it: devices and ports (ib.devices, ib.ports), their error
counters (ib.counters), libibverbs and /dev/infiniband (verbs.userspace), and what the IB tools
and libibverbs print in a job's log.

The built-in codes of this family; the registry (rdmadoctor.core.codes) finds them here. A
code keeps its string and its meaning for life (docs/architecture.md, "Codes are a contract").
"""

from __future__ import annotations

from rdmadoctor.core.model import CONFIG, COULD_NOT_DECIDE, INFORMATION, PROBLEM, Code

# ib.devices (checks/ib.py); other check modules name it as a finding's cause, or to order root
# causes (the registry lets each import it without importing another check module).
IB_NO_DEVICES = Code(
    "IB_NO_DEVICES",
    "No RDMA devices",
    "Nothing is listed in /sys/class/infiniband, so no RDMA transport can be used: NCCL falls back "
    "to TCP sockets (IPoIB or Ethernet), typically at a fraction of the bandwidth.",
    "On the node: check the HCA is seen (`lspci | grep -i -e mellanox -e infiniband`) and its driver is "
    "loaded (`modprobe mlx5_ib`, or install MLNX_OFED / DOCA-OFED). In a pod: request the device "
    "(resources.limits: {rdma/hca: 1} with the RDMA shared device plugin) or run with hostNetwork and "
    "the /dev/infiniband devices; /sys/class/infiniband is only filled when the host's drivers are loaded.",
    kind=PROBLEM,
)

# ib.devices, ib.ports (checks/ib.py).
RDMA_NOT_REQUIRED = Code(
    "RDMA_NOT_REQUIRED",
    "No RDMA devices, as the profile expects",
    "Information: the profile says this pool trains over TCP sockets on purpose (rdma_required = false, the tcp "
    "profile): NCCL finds no RDMA device and uses its socket transport, which is the design here. What matters "
    "then is the interface NCCL's sockets use: nccl.env judges NCCL_SOCKET_IFNAME (up, an address, its speed "
    "and MTU against socket_min_gbps and socket_min_mtu).",
    "Nothing to fix. If this node should have RDMA, use a profile that expects it (generic, hgx-8gpu-ndr, ...).",
    kind=INFORMATION,
)
IB_DEVICE_COUNT_LOW = Code(
    "IB_DEVICE_COUNT_LOW",
    "Fewer RDMA devices than expected",
    "The node has RDMA devices, but fewer than its profile expects (expected_hcas): an HCA fell off the "
    "bus, failed a firmware update, or is not bound to its driver. NCCL uses the ones it finds, so the "
    "job runs with less inter-node bandwidth, and ranks whose GPU lost its near HCA go through the CPU.",
    "Count them: `lspci -d 15b3:` (every ConnectX function) against `ls /sys/class/infiniband`. A function "
    "without its driver: `dmesg | grep mlx5` (firmware or PCIe errors), `mlxfwmanager --query`; try "
    "`echo 1 > /sys/bus/pci/devices/<bdf>/remove; echo 1 > /sys/bus/pci/rescan` or a cold boot; an HCA "
    "missing from lspci needs hardware service (drain the node). If the node really has fewer HCAs, set "
    "expected_hcas in the config.",
    kind=PROBLEM,
)
RDMA_INVENTORY_UNKNOWN = Code(
    "RDMA_INVENTORY_UNKNOWN",
    "RDMA devices could not be established",
    "The input has no /sys (or /sys/class/infiniband could not be listed: permission denied) and no "
    "recorded ibstat or ibv_devinfo output, so whether the node has RDMA devices, and what state their ports "
    "are in, cannot be decided. This is not a finding about the node: the evidence is missing.",
    "Collect a bundle on the node with `rdmadoctor collect` (it keeps /sys/class/infiniband), or add the "
    "output of `ibstat` as cmd/ibstat.txt (or `ibv_devinfo -v` as cmd/ibv_devinfo.txt) to the bundle. "
    "On a node or a mounted root: run as root with the host's /sys mounted readable.",
    kind=COULD_NOT_DECIDE,
)
IB_PORT_DOWN = Code(
    "IB_PORT_DOWN",
    "RDMA port down",
    "The port has no link (state DOWN, physical state Polling or Disabled). NCCL skips it, or hangs "
    "if NCCL_IB_HCA names it.",
    "Polling: no cable, a bad cable/transceiver, or the switch port is down; check `ibstat`, reseat the "
    "cable, look at the switch port. Disabled: the port was disabled by software "
    "(`ibportstate <lid> <port> enable`, or `mlxlink -d <dev> -a UP`). Or exclude the port with "
    "ignore_ports in the rdmadoctor config if it is unused.",
    kind=PROBLEM,
)
IB_PORT_INIT = Code(
    "IB_PORT_INIT",
    "InfiniBand port not configured by a subnet manager",
    "The link is physically up (LinkUp) but the port is INIT or ARMED: no subnet manager has assigned it "
    "a LID and moved it to ACTIVE. Traffic cannot flow until it does.",
    "Make sure a subnet manager runs on the fabric (`sminfo`; on a UFM-managed fabric check UFM; on a "
    "small fabric `systemctl start opensm` on one node). If the SM runs, check the port is not "
    "excluded by its partition or policy configuration.",
    kind=PROBLEM,
)
IB_PORT_RATE_LOW = Code(
    "IB_PORT_RATE_LOW",
    "Port rate below expectation",
    "The port trained at a lower rate than the node profile expects (a wrong cable, a link that fell "
    "back to fewer lanes or a lower speed, an HDR switch in an NDR fabric): bandwidth drops by the same factor.",
    "Check the cable and the switch port: `ibstat` (Rate), `mlxlink -d <dev> -m` (eye/BER), "
    "`mlxlink -d <dev> --show_module`. If the lower rate is intended, set min_rate_gbps in the config.",
    kind=PROBLEM,
)
IB_NO_SM = Code(
    "IB_NO_SM",
    "No subnet manager on the InfiniBand fabric",
    "Every InfiniBand port with a physical link is waiting for a subnet manager (sm_lid 0, state INIT).",
    "Start a subnet manager: the switches' embedded SM, UFM, or `opensm` on one host "
    "(`apt install opensm && systemctl enable --now opensm`). `sminfo` shows whether one answers.",
    kind=PROBLEM,
)

IB_LINK_LAYER_MISMATCH = Code(
    "IB_LINK_LAYER_MISMATCH",
    "Port link layer differs from the pool's",
    "The pool expects InfiniBand ports and this one runs Ethernet (RoCE), or the reverse. A port of the wrong "
    "link layer cannot reach the pool's other nodes over RDMA at all (an InfiniBand port talks to an InfiniBand "
    "fabric, a RoCE port to an Ethernet one), so NCCL either falls back to sockets on this node or, in a gang "
    "whose nodes disagree on the transport, hangs at connection setup.",
    "Set the port's type to the pool's with mlxconfig (LINK_TYPE_P<port>: 1 = InfiniBand, 2 = Ethernet), e.g. for "
    "a RoCE pool `mlxconfig -d <pci> set LINK_TYPE_P1=2`, then reboot (or `mlxfwreset`); the finding names the "
    "device's PCI address and the value. Or, if the node belongs to another pool, pick the profile or pool that "
    "matches its fabric (--profile, --pool).",
    kind=PROBLEM,
)
IB_PARSE_WARNING = Code(
    "IB_PARSE_WARNING",
    "Tool output incomplete or odd",
    "A recorded tool output (ibstat, ibv_devinfo, ...) was cut off or contained errors; what was read is "
    "reported, what was not is unknown.",
    "Re-run the tool and attach its full output, or better, a bundle from `rdmadoctor collect`.",
    kind=PROBLEM,
)
IB_PORT_STATE_UNKNOWN = Code(
    "IB_PORT_STATE_UNKNOWN",
    "RDMA port state could not be read",
    "The device lists no ports, or a port's state and physical state could not be read (sysfs files "
    "missing, a tool output without them): whether the port can carry traffic cannot be decided.",
    "On the node: `cat /sys/class/infiniband/<dev>/ports/*/state` and `ibstat <dev>`. In a bundle: collect "
    "it again with `rdmadoctor collect`, or add the full `ibstat` output as cmd/ibstat.txt.",
    kind=COULD_NOT_DECIDE,
)
IB_ACTIVE_PORTS_LOW = Code(
    "IB_ACTIVE_PORTS_LOW",
    "Fewer ACTIVE ports than expected",
    "The node has fewer ACTIVE RDMA ports than its profile expects (expected_active_ports): NCCL spreads "
    "the traffic over the ports it finds, so the job runs with a fraction of the node's network bandwidth, "
    "or hangs when NCCL_IB_HCA names a port that is not up. Usually the port findings beside it "
    "(IB_PORT_DOWN, IB_PORT_INIT) say which ports and why.",
    "Bring up the ports named in the port findings (`rdmadoctor explain IB_PORT_DOWN`). If the node has "
    "fewer cabled ports by design, lower expected_active_ports in the config.",
    kind=PROBLEM,
)

# The IB tools' own words in a job's log (rdmadoctor/logs/kb/ibtools.py).
VERBS_NO_DEVICES = Code(
    "VERBS_NO_DEVICES",
    "libibverbs lists no RDMA device",
    "A verbs tool (ibv_devinfo, ib_write_bw, the pingpong examples) asked libibverbs for the RDMA "
    "devices and got none. In a container that usually means the devices were not passed in (no "
    "/dev/infiniband/uverbs*), or the image lacks the provider for the HCA; on a host, that no RDMA "
    "driver is loaded. NCCL in the same environment falls back to sockets.",
    "Compare with the host: `ls /sys/class/infiniband` (the kernel's devices), `ls /dev/infiniband` (what the "
    "container got), `ls /etc/libibverbs.d` (the providers). Request the device in the pod spec "
    "(resources.limits: {rdma/hca: 1}) and install ibverbs-providers in the image; on the host load "
    "the driver (`modprobe mlx5_ib ib_uverbs`).",
    condition=CONFIG,
)
IB_DEVICE_NAME_UNKNOWN = Code(
    "IB_DEVICE_NAME_UNKNOWN",
    "A tool was given an RDMA device name this host does not have",
    "The device named with `-d`/`--ib-dev` (or ibstat's argument) is not among the devices libibverbs or "
    "libibumad list: a typo, a name from another node (mlx5_N numbering differs between hosts, and "
    "predictable names like ibp12s0 replace mlx5_N on some systems), or the device is not visible here.",
    "List the names this host has (`ibv_devices`, `ibstat -l`, `rdma link`) and use one of them; in "
    "scripts and NCCL_IB_HCA prefer names that are stable on every node.",
    condition=CONFIG,
)
IB_TOOL_FAILED = Code(
    "IB_TOOL_FAILED",
    "An InfiniBand diagnostic tool aborted",
    "ibstat, ibstatus, perfquery and the other infiniband-diags tools talk to the HCA through libibumad "
    "(/dev/infiniband/umad*, module ib_umad). The tool stopped with `ibpanic` or warned that one device "
    "could not be queried, so its output is missing or partial. NCCL itself does not need umad.",
    "In a pod, the RDMA device plugin often passes only uverbs: read the port state from sysfs instead "
    "(`cat /sys/class/infiniband/*/ports/*/state`) or run the tool on the host; there, `modprobe ib_umad`. "
    "A device that fails alone and is not an InfiniBand port (Azure's mlx5_an0 VF) can be ignored; "
    "rdma-core >= 54 keeps going after it.",
    condition=CONFIG,
)

IB_QP_CONNECT_FAILED = Code(
    "IB_QP_CONNECT_FAILED",
    "An RDMA test could not connect its queue pair to the peer",
    "perftest (ib_write_bw and the others) exchanged addresses with the peer over TCP and then could not "
    "move its queue pair to ready-to-receive: the address (LID, or on RoCE the GID at the index used) does "
    "not work from this port. On RoCE it is most often a GID index that is empty, link-local or IPv6 where the "
    "peer uses IPv4, or a pod whose RoCE netdev has no address.",
    "Run `show_gids` (or `ibv_devinfo -v`) on both hosts and pass the index of the RoCE v2 GID that holds "
    "each host's IPv4 address (`-x N`; NCCL_IB_GID_INDEX for NCCL); check that both ports are ACTIVE and "
    "that the MTUs match.",
    condition=CONFIG,
)

VERBS_RESOURCE_FAILED = Code(
    "VERBS_RESOURCE_FAILED",
    "An RDMA tool could not create its queue pair or other verbs resources",
    "perftest (and the other verbs tools) opened the device but could not create a queue pair, a "
    "completion queue or a memory registration. In a container the usual reason is the locked-memory "
    "limit (every queue pins memory): without IPC_LOCK or `ulimit -l unlimited` the calls fail.",
    "Run `ulimit -l` in the pod: it must say unlimited (add IPC_LOCK to the container's capabilities, "
    "or raise the runtime's memlock limit); then rerun the tool.",
    condition=CONFIG,
)

# ib.counters (checks/counters.py).
IB_LINK_FLAP = Code(
    "IB_LINK_FLAP",
    "The link went down and up",
    "The port's link_downed counter grew: the link dropped and retrained (a flap). Every NCCL connection "
    "over the port breaks when it happens (the job fails with IBV_WC_RETRY_EXC_ERR or hangs), and a link "
    "that flaps once usually flaps again: a marginal cable or transceiver, a switch port, dust on an optic.",
    "Look at the cable and the switch port: `mlxlink -d <dev> -m -c -e` (eye, BER, FEC and cable info), "
    "`ibdiagnet` or the switch's port log; reseat or replace the cable/transceiver. Drain the node if it "
    "flaps again. The finding clears after counter_recovery_seconds without a flap.",
    kind=PROBLEM,
    from_counters=True,
)
IB_SYMBOL_ERRORS = Code(
    "IB_SYMBOL_ERRORS",
    "Symbol errors on the link",
    "The port's symbol_error counter grows faster than symbol_errors_max_per_hour: bits arrive corrupted, "
    "packets are dropped and retransmitted, and the link slows every collective that crosses it. It "
    "often precedes a flap.",
    "`mlxlink -d <dev> -m -c -e` shows the raw and effective BER; clean or replace the optic or cable, "
    "check the switch side. Raise symbol_errors_max_per_hour only for a known-marginal link.",
    kind=PROBLEM,
    from_counters=True,
)
ROCE_ACK_TIMEOUTS = Code(
    "ROCE_ACK_TIMEOUTS",
    "Local ACK timeouts on a RoCE port",
    "The RoCE port's local_ack_timeout_err counter grows faster than ack_timeouts_max_per_hour: the peer "
    "did not acknowledge in time and the QP retransmitted (NCCL_IB_TIMEOUT), usually packet loss in the "
    "Ethernet fabric: PFC / ECN not set up end to end, a congested or misconfigured switch.",
    "Check lossless RoCE on the NIC (`mlnx_qos -i <netdev>`: PFC on the traffic class NCCL uses, "
    "NCCL_IB_TC) and on every switch hop; watch the CNP counters (np_cnp_sent, rp_cnp_handled) and the "
    "switch's drop counters.",
    kind=PROBLEM,
    from_counters=True,
)
PORT_COUNTERS_RESET = Code(
    "PORT_COUNTERS_RESET",
    "Port counters were reset",
    "Information: a counter went back to a lower value that is not a wrap (a 32-bit hw_counter near its top, or a 64-bit one): the driver was "
    "reloaded, the HCA reset or the node rebooted. Growth is counted again from the reset.",
    "Nothing to fix. If it was not planned, look at `dmesg` for an mlx5 reset or a firmware fatal error.",
    kind=INFORMATION,
)
PORT_COUNTERS_SATURATED = Code(
    "PORT_COUNTERS_SATURATED",
    "A port counter stopped at its top value",
    "Information: an InfiniBand error counter (link_downed and link_error_recovery are 8 bits wide, "
    "symbol_error and port_rcv_errors 16) reached the top of its field and, as the InfiniBand spec makes "
    "these counters do, stopped there: growth since is not seen, so this check cannot see new flaps or "
    "errors on the port until the counter is cleared.",
    "Clear the port's counters: `perfquery -R <lid> <port>` (infiniband-diags; `perfquery -R` alone for "
    "the local port), or reload the driver at the next maintenance. The check sees growth again from there.",
    kind=INFORMATION,
)
PORT_COUNTERS_UNREADABLE = Code(
    "PORT_COUNTERS_UNREADABLE",
    "Port counters could not be read",
    "The port has no readable error counters in sysfs (ports/N/counters/), so flaps and symbol errors "
    "cannot be judged on it. This is missing evidence, not a finding about the link.",
    "Mount the host's /sys (the DaemonSet mounts it read-only under /host/sys); some drivers (iWARP, "
    "rxe) have no PMA counters at all.",
    kind=COULD_NOT_DECIDE,
)

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
