"""`preflight --gang`: rank 0's verdict over the members (rdmadoctor/gang/compare.py).

The built-in codes of this family; the registry (rdmadoctor.core.codes) finds them here. A
code keeps its string and its meaning for life (docs/architecture.md, "Codes are a contract").
"""

from __future__ import annotations

from rdmadoctor.core.model import Code

GANG_MISMATCH_HANG = Code(
    "GANG_MISMATCH_HANG", "A gang member differs in what NCCL needs alike",
    "One member of the job differs from the majority in a fact that makes NCCL hang at init, fail, or fall back "
    "to TCP (transport, link layer, IB subnet, RoCE GID index or version, NCCL version, a protocol-changing "
    "NCCL_* setting). Every member of the gang is NO-GO: the job would not train.",
    "Fix the odd member (the message says which fact and how), or exclude its node: a nodeAffinity `NotIn` on "
    "kubernetes.io/hostname in the job's pod template, or `--exclude=NODE` for Slurm.")
GANG_MISMATCH_SLOW = Code(
    "GANG_MISMATCH_SLOW", "A gang member differs in what makes the job slow",
    "One member differs from the majority in a fact that does not stop NCCL but slows every step to its pace "
    "(fewer ACTIVE ports or slower rails, another MTU, no GPUDirect RDMA, a traffic class or service level).",
    "Fix the odd member or exclude its node (nodeAffinity `NotIn`, Slurm `--exclude`); --strict makes it NO-GO.")
GANG_MEMBER_NO_GO = Code(
    "GANG_MEMBER_NO_GO", "A gang member's own preflight said NO-GO",
    "The member's own checks failed: it cannot train, so the whole gang cannot. Rank 0 says so in every "
    "member's log, so whichever pod's log is opened names it.",
    "Read that member's own problems (they are listed in its log, and their codes here), fix them or exclude "
    "its node.", kind="problem")
GANG_MEMBER_UNKNOWN = Code(
    "GANG_MEMBER_UNKNOWN", "A gang member could not decide",
    "A member's own preflight said UNKNOWN: something it needs could not be read.",
    "Read that member's log; `rdmadoctor explain` the codes it names.", kind="unknown")
GANG_MEMBER_MISSING = Code(
    "GANG_MEMBER_MISSING", "A gang member never arrived",
    "Rank 0 waited --gang-timeout for every member; this one never connected, or it joined and its connection "
    "closed before the verdict (the pod died or was killed). NCCL would wait for it at init until its own "
    "timeout.",
    "Is that rank's pod running (`kubectl get pods -o wide`)? Does it run `rdmadoctor preflight --gang` with "
    "the same --gang-port? A NetworkPolicy may drop the gang port. Raise --gang-timeout if pods start slowly.")
GANG_MEMBER_SLOW = Code(
    "GANG_MEMBER_SLOW", "A gang member's link is slow against its peers",
    "In the --bandwidth test (a ring, then a shifted ring) this member's transfers, with two different peers, "
    "all ran under the expected share of the gang's median: every collective of the job runs at its pace.",
    "Look at that node's links (`ibstat`, `ethtool`, the cable and switch port, its NIC's PCIe link), or "
    "exclude it (nodeAffinity `NotIn`, Slurm `--exclude`).")
GANG_UNREACHABLE = Code(
    "GANG_UNREACHABLE", "Rank 0's gang port never answered",
    "This member could not reach rank 0 on --gang-port before --gang-timeout: rank 0 is not running "
    "`rdmadoctor preflight --gang` (or `run --gang`), listens on another port, or a NetworkPolicy drops it.",
    "Check rank 0's log and that every member uses the same --gang-port (default 9471); allow pod-to-pod "
    "traffic on it; raise --gang-timeout.")
GANG_REFUSED = Code(
    "GANG_REFUSED", "Rank 0 refused this member",
    "Rank 0 answered but refused this member: another job's token (a stale pod, or another job behind the same "
    "master address), another gang size, a rank out of range or taken, or another protocol version.",
    "Give every member of one job the same --gang-token (or job UID) and --gang-size; a stale pod of an "
    "earlier job should be deleted.")
GANG_PROTOCOL = Code(
    "GANG_PROTOCOL", "A gang message could not be read",
    "A peer sent something that is not a gang message (too big, nested too deep, not JSON, another protocol "
    "version), or closed the connection mid-message; or rank 0 sent an instruction this member does not act "
    "on: not signed with the job's token (another job's rank 0, or anyone answering on the master's address), "
    "or a bandwidth round it never agreed to (started without --bandwidth, a peer outside the gang, longer "
    "than its own settings allow). Nothing was decided or run from it.",
    "Is something else listening on --gang-port? Use the same rdmadoctor version, --gang-token and --bandwidth "
    "on every member.",
    kind="unknown")
GANG_BANDWIDTH_UNMEASURED = Code(
    "GANG_BANDWIDTH_UNMEASURED", "The --bandwidth test could not measure a pair",
    "A pair of members could not run the bandwidth test (no route, the tool missing or failing): its "
    "bandwidth is not known.",
    "Read the error given; install perftest (`ib_write_bw`) on RDMA pools; allow pod-to-pod TCP.", kind="unknown")
