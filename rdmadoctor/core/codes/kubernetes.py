"""The Kubernetes node and pod: node labels (the node.labels check) and the scheduler's,
the device plugins' and the CNI's words in a log.

The built-in codes of this family; the registry (rdmadoctor.core.codes) finds them here. A
code keeps its string and its meaning for life (docs/architecture.md, "Codes are a contract").
"""

from __future__ import annotations

from rdmadoctor.core.model import CONFIG, COULD_NOT_DECIDE, INFORMATION, PROBLEM, Code

# node.labels (checks/node.py).
NODE_LABEL_MISSING = Code(
    "NODE_LABEL_MISSING",
    "Node label missing",
    "The node does not carry a label rdmadoctor computes for it. Schedulers and nodeSelectors that "
    "rely on it (rdmadoctor.io/ready=true, feature.node.kubernetes.io/network-rdma.capable=true) skip "
    "the node, or a DaemonSet meant for RDMA nodes does not land on it.",
    "Run the rdmadoctor agent (it publishes the labels), or set it by hand: "
    "`kubectl label node <name> <key>=<value> --overwrite`.",
    kind=PROBLEM,
)
NODE_LABEL_STALE = Code(
    "NODE_LABEL_STALE",
    "Node label out of date",
    "The node carries an rdmadoctor (or NFD RDMA) label whose value no longer matches the node: jobs "
    "are scheduled on a node that lost a port or GPUDirect, or kept off one that was repaired.",
    "`kubectl label node <name> <key>=<value> --overwrite` (or `kubectl label node <name> <key>-` to "
    "remove it), or let the rdmadoctor agent publish the labels.",
    kind=PROBLEM,
)
NODE_OBJECT_UNREADABLE = Code(
    "NODE_OBJECT_UNREADABLE",
    "Node object unreadable",
    "cmd/node.json is not a Node object as `kubectl get node <name> -o json` prints it, so the labels "
    "it carries cannot be compared.",
    "Record it again: `kubectl get node <name> -o json > cmd/node.json`.",
    kind=COULD_NOT_DECIDE,
)
LABEL_INVALID = Code(
    "LABEL_INVALID",
    "Computed label refused",
    "A label value computed from this node's facts breaks the Kubernetes label rules (63 characters, "
    "alphanumerics, '-', '_', '.'); it is left out rather than published half-valid.",
    "Report it with `rdmadoctor collect`: a value from an odd tool output slipped through.",
    kind=PROBLEM,
)
NODE_LABELS = Code(
    "NODE_LABELS",
    "Node labels",
    "The labels rdmadoctor computes for this node.",
    "Nothing to fix.",
    kind=INFORMATION,
)

# Kubernetes' words in a log (rdmadoctor/logs/kb/k8s.py).
K8S_UNSCHEDULABLE = Code(
    "K8S_UNSCHEDULABLE",
    "The training pod cannot be scheduled: no node has what it requests free",
    "The scheduler found no node with the requested resources free (`Insufficient rdma/hca`, "
    "`Insufficient nvidia.com/gpu`), or a gang scheduler (Volcano) cannot place the whole gang or the "
    "queue's quota is smaller than the job. The pods stay Pending and the job never starts.",
    "`kubectl describe node <n>` shows each node's Allocatable and Allocated resources: a resource at 0 "
    "everywhere means its device plugin offers nothing (see RDMA_DEVICE_PLUGIN_EMPTY); otherwise other "
    "pods hold it, or the request is larger than one node. For Volcano, the queue's capability must "
    "include every resource the job requests.",
    condition=CONFIG,
)
RDMA_DEVICE_PLUGIN_EMPTY = Code(
    "RDMA_DEVICE_PLUGIN_EMPTY",
    "The RDMA (or SR-IOV) device plugin offers no device on this node",
    "The device plugin found no device matching its resource's selectors, or the devices it matched "
    "lack what it needs (the RDMA character devices under /dev/infiniband, RDMA modules not loaded): "
    "the node advertises 0 of the resource, and pods that request it stay Pending.",
    "Check the node side first: `ls /dev/infiniband` (uverbs*, rdma_cm), `lsmod | grep -e ib_uverbs "
    "-e rdma_ucm`; then the plugin's selectors (vendors, deviceIDs, ifNames, drivers) against `lspci "
    "-nn` and `ip link`: a VF binds to mlx5_core, an ifName must exist on the node.",
    condition=CONFIG,
)
POD_NETWORK_FAILED = Code(
    "POD_NETWORK_FAILED",
    "The pod's secondary network (Multus, SR-IOV, macvlan) could not be attached",
    "The pod's sandbox could not be created because a CNI plugin failed to attach the network the "
    "job's RDMA traffic uses: no VF was allocated to it, the CNI binary is missing on the node, the "
    "IP pool is exhausted, or the network type does not fit the interface (macvlan on IPoIB).",
    "Read the CNI's words in the event: request the SR-IOV resource the NetworkAttachmentDefinition "
    "names (its k8s.v1.cni.cncf.io/resourceName), install the CNI plugin binaries on every node "
    "(/opt/cni/bin), free or widen the whereabouts range, use ipoib-cni for IPoIB.",
    condition=CONFIG,
)
NODE_DRIVER_FAILED = Code(
    "NODE_DRIVER_FAILED",
    "The node's RDMA or GPU driver container could not install or load its driver",
    "The network operator's OFED/DOCA driver container (or the EFA, GPU operator equivalents) could not "
    "build, download or load the kernel modules for this node's kernel: the node has no RDMA device "
    "until it does.",
    "Read the driver container's log (`kubectl logs -n <operator-namespace> <driver-pod>`): a kernel with "
    "no prebuilt driver needs its headers and package repositories reachable from the container (or a "
    "precompiled image for this kernel); a module that fails to load conflicts with an inbox one "
    "(blacklist it, see the operator's docs).",
    condition=CONFIG,
)
