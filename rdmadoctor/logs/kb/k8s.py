"""Kubernetes around the job: the scheduler's events, the RDMA and SR-IOV device plugins, the pod's
secondary networks (Multus, SR-IOV CNI, macvlan, whereabouts), the driver containers of the network
and GPU operators.

What `kubectl describe pod`, `kubectl get events` and the plugins' own logs print when a training
pod cannot get its RDMA device, its network or its node. Strings checked against
Mellanox/k8s-rdma-shared-dev-plugin, k8snetworkplumbingwg/{sriov-network-device-plugin, sriov-cni,
multus-cni, whereabouts}, Mellanox/network-operator's OFED container, kubernetes/kubernetes's
scheduler messages, and the issues named in each ``ref``.
"""

from __future__ import annotations

from rdmadoctor.core.codes.node import (
    K8S_UNSCHEDULABLE,
    NODE_DRIVER_FAILED,
    POD_NETWORK_FAILED,
    RDMA_DEVICE_PLUGIN_EMPTY,
)
from rdmadoctor.core.model import ERROR, WARNING
from rdmadoctor.logs.kb import Pattern

CODES = (K8S_UNSCHEDULABLE, RDMA_DEVICE_PLUGIN_EMPTY, POD_NETWORK_FAILED, NODE_DRIVER_FAILED)

# Codes that live with their checks, named by string.
MOD_MISSING = "MOD_MISSING"


def _resources(groups: dict[str, str]) -> dict[str, str]:
    import re

    found = sorted(set(re.findall(r"Insufficient ([\w./-]{1,100})", groups.get("why") or "")))
    return {"resources": ", ".join(found) or "resources"}


PATTERNS: tuple[Pattern, ...] = (
    # -- the scheduler ---------------------------------------------------------------------------------
    Pattern(
        id="k8s.insufficient",
        code=K8S_UNSCHEDULABLE.code,
        severity=ERROR,
        needle="nodes are available: ",
        regex=r"(?P<avail>\d{1,6})/(?P<total>\d{1,6}) nodes are available: (?P<why>(?=[^\n]{0,500}Insufficient )[^\n]{1,500})",
        subject="{resources}",
        message="The scheduler found no node for the pod ({avail} of {total} available): Insufficient {resources}.",
        meaning="The pod stays Pending; a resource at 0 on every node is a device plugin that offers nothing.",
        fix="`kubectl describe node` (Allocatable, Allocated resources) on the nodes meant to run it; see "
            "RDMA_DEVICE_PLUGIN_EMPTY when an rdma/ resource is 0.",
        ref="kubernetes/kubernetes pkg/scheduler (`%d/%d nodes are available: %s`, noderesources `Insufficient %v`); "
            "https://github.com/NVIDIA/k8s-device-plugin/issues/119",
        examples=(" Warning FailedScheduling  40s (x2 over 40s)  default-scheduler  0/2 nodes are available: 2 Insufficient "
                  "nvidia.com/gpu.",
                  "0/4 nodes are available: 4 Insufficient rdma/hca_shared_devices_a."),
        derive=_resources,
    ),
    Pattern(
        id="k8s.volcano_quota",
        code=K8S_UNSCHEDULABLE.code,
        severity=ERROR,
        needle="queue resource quota insufficient",
        regex=r"queue resource quota insufficient",
        subject="Volcano queue",
        message="Volcano will not start the job: its queue's resource quota is smaller than what the job requests.",
        meaning="The job's pods are not created or stay Pending.",
        fix="Raise the queue's capability (or drop resources it does not list, such as an rdma/ or GPU resource, "
            "from it) so it covers the whole gang.",
        ref="volcano-sh/volcano pkg/scheduler/plugins/proportion (`queue resource quota insufficient`); "
            "https://github.com/volcano-sh/volcano/issues/3220",
        examples=("queue resource quota insufficient",),
    ),
    Pattern(
        id="k8s.gang_unschedulable",
        code=K8S_UNSCHEDULABLE.code,
        severity=ERROR,
        needle="gang unschedulable",
        regex=r"(?P<ready>\d{1,6})/(?P<total>\d{1,6}) tasks in gang unschedulable: (?P<why>[^\n]{1,300}?)\s*$",
        subject="Volcano gang",
        message="Volcano cannot place the job's gang ({ready}/{total} tasks): {why}.",
        meaning="No pod of the job starts until every one of them fits.",
        fix="Read the node reasons after it (`kubectl describe podgroup`); free or add the resources the tasks "
            "request, or lower minAvailable.",
        ref="volcano-sh/volcano pkg/scheduler/api/job_info.go (`%v/%v tasks in gang unschedulable: %v`); "
            "https://github.com/volcano-sh/volcano/issues/3220",
        examples=("0/0 tasks in gang unschedulable: pod group is not ready, 1 minAvailable",),
    ),
    # -- the device plugins ----------------------------------------------------------------------------
    Pattern(
        id="k8s.rdma_plugin_no_rdma_cm",
        code=MOD_MISSING,
        severity=ERROR,
        needle="RDMA device spec for device",
        regex=r"missing RDMA device spec for device (?P<dev>[0-9a-fA-F:.]{4,16}), RDMA device \\?\"(?P<char>rdma_cm|uverbs)\\?\" "
              r"not found",
        subject="rdma_ucm",
        message="The RDMA shared device plugin found no /dev/infiniband/{char} for {dev}: the node's RDMA character "
                "devices are not there (rdma_ucm / ib_uverbs not loaded), so it offers no device.",
        meaning="The node advertises 0 of the plugin's resource; RDMA pods stay Pending.",
        fix="On the node: `modprobe rdma_ucm ib_uverbs` (and persist them, /etc/modules-load.d), or install rdma-core; "
            "then restart the plugin's pod.",
        ref="Mellanox/k8s-rdma-shared-dev-plugin pkg/resources (`missing RDMA device spec for device %s, %v`); "
            "https://github.com/Mellanox/k8s-rdma-shared-dev-plugin/issues/192, /44",
        examples=('2025/07/26 20:29:31 error creating new device: "missing RDMA device spec for device 0000:16:00.0, RDMA '
                  'device \\"rdma_cm\\" not found"',),
    ),
    Pattern(
        id="k8s.rdma_plugin_issm",
        code=RDMA_DEVICE_PLUGIN_EMPTY.code,
        severity=WARNING,
        needle="RDMA device spec for device",
        regex=r"missing RDMA device spec for device (?P<dev>[0-9a-fA-F:.]{4,16}), RDMA device \\?\"issm\\?\" not found",
        subject="issm",
        message="The RDMA shared device plugin skipped {dev} for want of an issm device (what InfiniBand's subnet "
                "management uses): older plugin versions required it even on Ethernet (RoCE) ports.",
        meaning="On a RoCE node the resource can stay empty; for a device the selectors should not match (another "
                "vendor's NIC) it is harmless.",
        fix="Upgrade the plugin (issm is not required for Ethernet since k8s-rdma-shared-dev-plugin 1.4), and narrow "
            "the selectors (vendors, deviceIDs) to the RDMA devices.",
        ref="Mellanox/k8s-rdma-shared-dev-plugin#44, #116; https://github.com/Mellanox/k8s-rdma-shared-dev-plugin/issues/103",
        examples=('2023/09/02 06:23:37 error creating new device: "missing RDMA device spec for device 0000:2e:00.0, RDMA '
                  'device \\"issm\\" not found"',),
    ),
    Pattern(
        id="k8s.rdma_plugin_zero",
        code=RDMA_DEVICE_PLUGIN_EMPTY.code,
        severity=ERROR,
        needle="exposing \"0\" devices",
        regex=r"exposing \"0\" devices",
        subject="rdma device plugin",
        message="The RDMA shared device plugin exposes 0 devices for its resource: none matched its selectors with "
                "what it needs.",
        meaning="The node advertises 0 of the resource; RDMA pods stay Pending.",
        fix="The lines before it say why each device was skipped; check the selectors against `lspci -nn` and "
            "`ip link`, and /dev/infiniband on the node.",
        ref="Mellanox/k8s-rdma-shared-dev-plugin pkg/resources/server.go (`exposing \"%d\" devices`); "
            "https://github.com/Mellanox/k8s-rdma-shared-dev-plugin/issues/192",
        examples=('2025/07/26 20:29:31 exposing "0" devices',),
        symptom=True,
    ),
    Pattern(
        id="k8s.rdma_plugin_none_found",
        code=RDMA_DEVICE_PLUGIN_EMPTY.code,
        severity=ERROR,
        needle="no Rdma Devices were found for resource",
        regex=r"no Rdma Devices were found for resource (?P<res>[\w./-]{1,100})",
        subject="{res}",
        message="The RDMA shared device plugin found no device for resource {res}.",
        meaning="The node advertises 0 of it; pods that request it stay Pending.",
        fix="Check the resource's selectors (vendors, deviceIDs, ifNames) against the node's NICs.",
        ref="Mellanox/k8s-rdma-shared-dev-plugin pkg/resources (`Warning: no Rdma Devices were found for resource %s`); "
            "https://github.com/Mellanox/k8s-rdma-shared-dev-plugin/issues/44",
        examples=("2023/09/02 06:23:37 Warning: no Rdma Devices were found for resource hpc_shared_devices_b",),
    ),
    Pattern(
        id="k8s.sriov_plugin_empty",
        code=RDMA_DEVICE_PLUGIN_EMPTY.code,
        severity=ERROR,
        needle="ListAndWatchResponse{Devices:[]",
        regex=r"ListAndWatch\((?P<res>[\w./-]{1,100})\): send devices &ListAndWatchResponse\{Devices:\[\]\*Device\{\},?\}",
        subject="{res}",
        message="The SR-IOV device plugin advertises no device for resource {res}.",
        meaning="Pods that request it stay Pending (Insufficient).",
        fix="Check the resource's selectors (vendors, devices are PCI device IDs, drivers: a Mellanox VF binds to "
            "mlx5_core, isRdma) against `lspci -nn -k`, and that the VFs exist (sriov_numvfs).",
        ref="k8snetworkplumbingwg/sriov-network-device-plugin pkg/resources/server.go ListAndWatch; "
            "https://github.com/k8snetworkplumbingwg/sriov-network-device-plugin/issues/189",
        examples=("I1213 07:34:11.231124  110908 server.go:138] ListAndWatch(mlnx_sriov_rdma): send devices "
                  "&ListAndWatchResponse{Devices:[]*Device{},}",),
    ),
    Pattern(
        id="k8s.sriov_plugin_no_rdma",
        code=RDMA_DEVICE_PLUGIN_EMPTY.code,
        severity=WARNING,
        needle="Are RDMA modules loaded?",
        regex=r"RDMA resources for (?P<dev>[0-9a-fA-F:.]{4,16}) not found\. Are RDMA modules loaded\?",
        subject="{dev}",
        message="The SR-IOV device plugin found no RDMA device for {dev}: an isRdma resource will not include it.",
        meaning="If the resource needs RDMA, the node advertises fewer devices, or none.",
        fix="On the node: `modprobe mlx5_ib ib_uverbs`, and `rdma link` must list the device; then restart the plugin.",
        ref="k8snetworkplumbingwg/sriov-network-device-plugin pkg/netdevice/pciNetDevice.go (`RDMA resources for %s not "
            "found. Are RDMA modules loaded?`); https://github.com/k8snetworkplumbingwg/sriov-network-device-plugin/issues/424",
        examples=("W0506 16:33:56.937793       1 pciNetDevice.go:55] RDMA resources for 0000:c1:00.0 not found. Are RDMA "
                  "modules loaded?",),
    ),
    Pattern(
        id="k8s.node_resource_zero",
        code=RDMA_DEVICE_PLUGIN_EMPTY.code,
        severity=WARNING,
        needle="rdma/",
        # A Node's capacity or allocatable (`kubectl get node -o json`, `describe node`): an RDMA resource at 0.
        regex=r"\"?(?P<res>rdma/[\w.-]{1,100})\"?:[ \t]{1,20}\"?0\"?,?\s*(?!\s)$",
        subject="{res}",
        message="The node advertises {res} at 0: its device plugin offers no device for that resource.",
        meaning="Pods that request it cannot be scheduled on this node (Insufficient).",
        fix="Read the device plugin's log on that node (its selectors, /dev/infiniband, the RDMA modules): see "
            "RDMA_DEVICE_PLUGIN_EMPTY.",
        ref="kubernetes Node .status.capacity / .allocatable; https://github.com/Mellanox/network-operator/issues/438",
        examples=('  "rdma/rdma_shared_device_a": "0"', "  rdma/hca_shared_devices_a:  0"),
    ),
    # -- the pod's networks ------------------------------------------------------------------------------
    Pattern(
        id="k8s.sriov_cni_no_vf",
        code=POD_NETWORK_FAILED.code,
        severity=ERROR,
        needle="VF pci addr is required",
        regex=r"VF pci addr is required",
        subject="SR-IOV CNI",
        message="The SR-IOV CNI got no VF for the pod (`VF pci addr is required`): the pod did not request the SR-IOV "
                "resource its network uses, or the network's resourceName does not match one.",
        meaning="The pod's sandbox is not created; it stays ContainerCreating.",
        fix="Request the resource the NetworkAttachmentDefinition's k8s.v1.cni.cncf.io/resourceName names in the pod's "
            "resources.limits (the network-resources-injector does it for you).",
        ref="k8snetworkplumbingwg/sriov-cni pkg/config (`LoadConf(): VF pci addr is required`); "
            "https://github.com/k8snetworkplumbingwg/sriov-network-device-plugin/issues/310",
        examples=('error adding container to network "sriov-network": SRIOV-CNI failed to load netconf: LoadConf(): VF pci '
                  "addr is required",),
    ),
    Pattern(
        id="k8s.cni_binary_missing",
        code=POD_NETWORK_FAILED.code,
        severity=ERROR,
        needle="failed to find plugin",
        regex=r"failed to find plugin \\?\"(?P<plugin>[\w.-]{1,64})\\?\" in path",
        subject="{plugin}",
        message="The CNI plugin {plugin} is not installed on this node (not in the CNI binary path).",
        meaning="Pods with that network are not created on the node.",
        fix="Install the CNI plugins on every node (/opt/cni/bin: the containernetworking plugins, or the network "
            "operator's secondary-network components).",
        ref="containernetworking/cni libcni (`failed to find plugin %q in path %s`); "
            "https://github.com/k8snetworkplumbingwg/multus-cni/issues/386",
        examples=('failed to find plugin "macvlan" in path [/opt/cni/bin]',),
    ),
    Pattern(
        id="k8s.ipam_exhausted",
        code=POD_NETWORK_FAILED.code,
        severity=ERROR,
        needle="Could not allocate IP in range",
        regex=r"Could not allocate IP in range: (?P<range>[^\n\]\"]{1,120})",
        subject="whereabouts",
        message="The IP pool of the pod's secondary network has no address left ({range}).",
        meaning="New pods on that network are not created.",
        fix="Widen the range, or clear stale reservations (whereabouts' IPPool and OverlappingRangeIPReservation "
            "objects of pods that are gone).",
        ref="k8snetworkplumbingwg/whereabouts pkg/allocate (`Could not allocate IP in range: ip: %v / - %v / range: %v`); "
            "https://github.com/k8snetworkplumbingwg/multus-cni/issues/1010",
        examples=("error at storage engine: Could not allocate IP in range: ip: 100.76.215.210 / - 100.76.215.211 / range: "
                  "100.76.215.208/29",),
    ),
    Pattern(
        id="k8s.macvlan_ipoib",
        code=POD_NETWORK_FAILED.code,
        severity=ERROR,
        needle="failed to create macvlan",
        regex=r"failed to create macvlan: (?P<why>[^\n]{1,80}?)\s*$",
        subject="macvlan",
        message="The macvlan CNI could not create its interface ({why}): on an IPoIB master (ib0, ibsN) macvlan does "
                "not work.",
        meaning="The pod's sandbox is not created.",
        fix="Use ipoib-cni for an InfiniBand interface, or a macvlan master that is an Ethernet interface.",
        ref="containernetworking/plugins plugins/main/macvlan (`failed to create macvlan: %v`); "
            "https://github.com/Mellanox/k8s-rdma-shared-dev-plugin/issues/95",
        examples=('error adding container to network "macvlan-conf-1": failed to create macvlan: invalid argument',),
    ),
    Pattern(
        id="k8s.ib_sriov_not_configured",
        code=POD_NETWORK_FAILED.code,
        severity=ERROR,
        needle='is not "configured"',
        regex=r"InfiniBand status \\?\"mellanox\.infiniband\.app\\?\" is not \\?\"configured\\?\"",
        subject="ib-kubernetes",
        message="The InfiniBand SR-IOV CNI found the pod not configured by ib-kubernetes (no GUID and partition key "
                "set for its VF yet).",
        meaning="The pod's sandbox is not created until ib-kubernetes configures it.",
        fix="Check ib-kubernetes' log for this pod (its UFM or subnet-manager plugin, the network's pkey); it retries "
            "every pod it has not configured.",
        ref="Mellanox/ib-sriov-cni (`InfiniBand status %q is not %q please check mellanox ib-kubernetes`); "
            "https://github.com/Mellanox/ib-kubernetes/issues/160",
        examples=('infiniBand SRIOV-CNI failed, InfiniBand status "mellanox.infiniband.app" is not "configured" please check '
                  "mellanox ib-kubernetes",),
    ),
    # -- the driver containers ------------------------------------------------------------------------------
    Pattern(
        id="k8s.ofed_no_driver",
        code=NODE_DRIVER_FAILED.code,
        severity=ERROR,
        needle="No OFED driver found for kernel",
        regex=r"No OFED driver found for kernel (?P<kernel>\S{1,100})",
        subject="OFED driver",
        message="The network operator's OFED driver container has no driver for kernel {kernel} and must build one "
                "(it needs the kernel's headers and package repositories reachable from the container).",
        meaning="Until the build succeeds the node has no RDMA device.",
        fix="Make the distribution's repositories reachable from the container (proxy, entitlement on RHEL/OpenShift) "
            "or use a precompiled driver image for this kernel.",
        ref="Mellanox/network-operator mofed container entrypoint (`No OFED driver found for kernel %s`); "
            "https://github.com/Mellanox/network-operator/issues/830",
        examples=("No OFED driver found for kernel 5.14.0-284.40.1.el9_2.x86_64",),
    ),
    Pattern(
        id="k8s.ofed_load_failed",
        code=NODE_DRIVER_FAILED.code,
        severity=ERROR,
        needle="Failed loading kernel module",
        regex=r"Failed loading kernel module (?P<module>[\w-]{1,64})",
        subject="{module}",
        message="The OFED/DOCA driver container could not load {module}: an inbox module of the same name is loaded or "
                "depends on it.",
        meaning="The node has no (or the inbox) RDMA driver.",
        fix="Blacklist the inbox modules as the operator's docs say (OFED_BLACKLIST_MODULES_FILE in the driver "
            "container), then restart it.",
        ref="Mellanox/doca-driver-build openibd (`Failed loading kernel module %s`); "
            "https://github.com/Mellanox/doca-driver-build/issues/52",
        examples=("Failed loading kernel module mlx5_ib:[FAILED[]",),
    ),
    Pattern(
        id="k8s.container_cli_driver",
        code=NODE_DRIVER_FAILED.code,
        severity=ERROR,
        needle="nvidia-container-cli",
        regex=r"nvidia-container-cli(?:\.real)?: (?P<what>initialization error: (?:driver error|load library failed)[^\n]{0,120}?)"
              r"(?:\\n|\s*$|: unknown)",
        subject="nvidia-container-cli",
        message="The NVIDIA container runtime hook could not reach the node's driver ({what}): containers that need "
                "the GPU (the driver container itself, or the job) do not start.",
        meaning="No GPU pod starts on the node until the driver is loaded and the runtime sees it.",
        fix="On the node, `nvidia-smi` and `lsmod | grep nvidia`; with the GPU operator, a driver already installed on the "
            "host conflicts with its driver container (driver.enabled=false, or remove the host driver).",
        ref="NVIDIA/libnvidia-container (`nvidia-container-cli: initialization error: %s`); "
            "https://github.com/NVIDIA/gpu-operator/issues/130",
        examples=("stderr: nvidia-container-cli.real: initialization error: driver error: failed to process request\\n: "
                  "unknown",),
    ),
    Pattern(
        id="k8s.efa_plugin_none",
        code=RDMA_DEVICE_PLUGIN_EMPTY.code,
        severity=ERROR,
        needle="No valid EFA devices found",
        regex=r"No valid EFA devices found",
        subject="EFA device plugin",
        message="The EFA device plugin found no EFA device on this node: the instance type has none, or its EFA "
                "interfaces were not attached.",
        meaning="The node advertises no vpc.amazonaws.com/efa; EFA pods stay Pending there.",
        fix="Run the plugin only on instance types with EFA (a nodeSelector), and attach the EFA interfaces in the "
            "node group's launch template.",
        ref="aws/aws-efa-k8s-device-plugin (`No valid EFA devices found`); "
            "https://github.com/aws/sagemaker-hyperpod-cli/issues/367",
        examples=("2026/02/03 15:23:32 Error to get IB device: %v. No valid EFA devices found",),
    ),
)
