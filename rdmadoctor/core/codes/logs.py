"""The logs.diagnose check's own codes: what was read, and what pasted test output says.

The built-in codes of this family; the registry (rdmadoctor.core.codes) finds them here. A
code keeps its string and its meaning for life (docs/architecture.md, "Codes are a contract").
"""

from __future__ import annotations

from rdmadoctor.core.model import CONFIG, COULD_NOT_DECIDE, INFORMATION, PROBLEM, Code

LOGS_READ = Code(
    "LOGS_READ",
    "Job logs read",
    "Information: which logs were read (files, bytes, lines) and what NCCL said it uses, so a report with no "
    "log finding still shows the logs were there and how far they were read.",
    "Nothing to fix. For NCCL's transport to show, run the job with NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,NET).",
    kind=INFORMATION,
)
LOG_UNREADABLE = Code(
    "LOG_UNREADABLE",
    "A job log could not be read",
    "Could not decide: a log given to rdmadoctor (a missing file, a directory, binary data, a compressed file cut "
    "short) could not be read, wholly or from some point on; what it would have shown is unknown.",
    "Give the log files themselves (`rdmadoctor diagnose rank0.log rank1.log.gz`, `kubectl logs POD | "
    "rdmadoctor diagnose -`), or record them in a bundle with `rdmadoctor collect --log FILE`.",
    kind=COULD_NOT_DECIDE,
)

LOGS_NOTHING_TO_JUDGE = Code(
    "LOGS_NOTHING_TO_JUDGE",
    "Nothing in the logs could be judged",
    "Could not decide: the text was read, but it holds nothing rdmadoctor recognises (no NCCL line, no "
    "known message, no error line, no traceback, no pasted tool output), so the absence of a finding "
    "says nothing about the job: it is not a pass.",
    "Give the failing rank's log with NCCL's own lines in it: run the job with NCCL_DEBUG=INFO "
    "(NCCL_DEBUG_SUBSYS=INIT,NET is enough for the transport), then `kubectl logs POD | rdmadoctor "
    "diagnose -` for the rank that failed first (or every rank's log). Pasted tool output needs its "
    "prompt line (`$ ibstat`).",
    kind=COULD_NOT_DECIDE,
)

NCCL_TEST_BUSBW_LOW = Code(
    "NCCL_TEST_BUSBW_LOW",
    "nccl-tests' bus bandwidth is far below what the fabric can carry",
    "nccl-tests reports busbw, a bandwidth normalised so that it compares with the hardware's: across nodes "
    "it approaches what each node's NICs carry together (8 ACTIVE 400 Gb/s ports: about 400 GB/s less "
    "protocol overhead, 80-95% of it in practice). A run across nodes that peaks at less than half of that "
    "is not using the fabric fully: NCCL on sockets, without GPUDirect RDMA, on fewer NICs than the node has "
    "(NCCL_IB_HCA), across rails, or a congested or misconfigured network (RoCE without PFC/ECN).",
    "Read the NCCL section of the same run (NCCL_DEBUG=INFO): the network (IB, not Socket), the devices, "
    "GDRDMA on the channel lines. Then test the fabric alone between the two hosts with ib_write_bw on each "
    "NIC pair; with RoCE check PFC/ECN on the switch and the NICs (mlnx_qos -i IFACE).",
    condition=CONFIG,
    kind=PROBLEM,
)

NCCL_NICS_UNUSED = Code(
    "NCCL_NICS_UNUSED",
    "NCCL uses fewer RDMA ports than the node has ACTIVE",
    "NCCL's device list (`NET/IB : Using [0]mlx5_0:1/IB ...`) names the ports its IB transport spreads "
    "channels over; a pasted port list of the same node shows more ACTIVE ports of the same link layer. "
    "Inter-node bandwidth is bounded by the ports NCCL uses: 1 of 4 rails is a quarter of the node's. "
    "NCCL_IB_HCA narrower than the rails, or a pod given only some devices (its rdma/hca resource, "
    "/dev/infiniband), leaves the others idle.",
    "Let NCCL use every rail: unset NCCL_IB_HCA, or list them all (NCCL_IB_HCA=mlx5_0,mlx5_1,...); in a pod "
    "request every device from the RDMA device plugin. If the other ports carry storage or another job on "
    "purpose, nothing to do.",
    condition=CONFIG,
    kind=PROBLEM,
)
