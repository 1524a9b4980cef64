"""PyTorch's c10d ProcessGroupNCCL: watchdog timeouts, heartbeat aborts, ``NCCL error in:`` exceptions.

Strings from pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp and NCCLUtils.cpp
(read through the code index: the repository is too large to fetch whole). Since PyTorch 2.2 the
messages start with a log prefix that names the process group (``[PG 0 Rank 3]``, 2.4+ ``[PG ID 0
PG GUID 0(default_pg) Rank 3]``), and torchrun/PyTorch prepend ``[rank3]:`` to every line; both are
optional here. NCCL's own result strings inside these exceptions (``unhandled system error``,
``remote process exited ...``) are matched by the NCCL rows, which come first.
"""

from __future__ import annotations

from rdmadoctor.core.codes.nccl import NCCL_BOOTSTRAP_FAILED, NCCL_CUDA_FAILED, NCCL_REMOTE_ERROR, NCCL_SYSTEM_ERROR
from rdmadoctor.core.codes.pytorch import (
    JOB_FAILED,
    JOB_KILLED,
    NCCL_CALL_FAILED,
    NCCL_TIMEOUT,
    NCCL_WATCHDOG_HUNG,
    PROCESS_CRASHED,
    PYTORCH_NOTICE,
)
from rdmadoctor.core.model import ERROR, INFO, WARNING
from rdmadoctor.logs.kb import Pattern

CODES = (NCCL_TIMEOUT, NCCL_WATCHDOG_HUNG, NCCL_CALL_FAILED, JOB_KILLED, PROCESS_CRASHED, JOB_FAILED, PYTORCH_NOTICE)

# How far NCCL got when a job was killed: what it means, and the next step. Keys are what
# rdmadoctor.logs.scan finds: no NCCL line at all, NCCL started but no communicator was made,
# a communicator was made (`Init COMPLETE`).
KILLED_STAGES = {
    "before_nccl": (
        "NCCL printed nothing before it: the job waited before NCCL started, in the rendezvous (torchrun's "
        "c10d store at MASTER_ADDR:MASTER_PORT) or before init_process_group, unless NCCL_DEBUG was unset",
        "check that every rank started and reached the rendezvous (all pods Running, the same --nnodes and "
        "--rdzv_endpoint on each), that MASTER_ADDR resolves and its port is open from every pod (`rdmadoctor "
        "preflight --wait-for-master`); rerun with NCCL_DEBUG=INFO TORCH_DISTRIBUTED_DEBUG=DETAIL to see how far "
        "each rank gets",
    ),
    "init": (
        "NCCL had started (its first line is {first}) but never printed `Init COMPLETE`: the job waited while "
        "the ranks built their communicator (the bootstrap between ranks, or connecting the channels)",
        "find the rank whose log stops earliest and read its last lines; check that NCCL_SOCKET_IFNAME selects an "
        "interface whose address the other hosts reach (`ip -br addr` in each pod, `nc -vz <peer ip> <port>`), and "
        "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,NET",
    ),
    "collective": (
        "NCCL had made its communicator (`Init COMPLETE` at {complete}), so the job waited in a collective: a rank "
        "that never entered it, or a network path that stopped delivering",
        "find the rank that did not join the collective (TORCH_NCCL_DUMP_ON_TIMEOUT=1, `py-spy dump --pid` on each "
        "rank) and test the hosts' fabric with nccl-tests (`all_reduce_perf -b 8 -e 1G`); set the process group's "
        "timeout below the job's time limit so the watchdog names the collective",
    ),
}


# What to do when a rank cannot reach rank 0's store (the rendezvous rows).
_STORE_FIX = ("From this pod, check that rank 0's address resolves and its port answers (`rdmadoctor preflight "
              "--wait-for-master`, or `nc -zv HOST PORT`): MASTER_ADDR / --rdzv_endpoint must be an address the others "
              "reach (the master pod's Service or IP, never localhost), the master pod must be Running (a PyTorchJob's "
              "master Service has no endpoint before), and no NetworkPolicy or firewall may block the port.")


def _signal(groups: dict[str, str]) -> dict[str, str]:
    import signal

    raw = (groups.get("sig") or "").strip()
    num: int | None = None
    name = (groups.get("name") or "").strip()
    if raw.isdigit():
        num = int(raw)
    elif raw.startswith("SIG"):
        name = raw
        num = getattr(signal.Signals, raw, None) and int(getattr(signal.Signals, raw))
    if num is not None and not name:
        try:
            name = signal.Signals(num).name
        except ValueError:
            name = ""
    what = f"signal {num}" if num is not None else "a signal"
    return {"signum": "" if num is None else str(num), "signame": name,
            "signal_text": f"{what} ({name})" if name else what}

# Signals a process raises itself (a crash), not ones sent to it (a kill): what each usually means.
_CRASHES = {
    "7": ": a bus error, in a container most often NCCL's shared memory outgrowing /dev/shm (64 MiB by default)",
    "11": ": a segmentation fault, a bug or libraries that do not match (NCCL, UCX, MPI or a plugin of another "
          "version); the backtrace names the library",
    "6": ": an abort, the process stopping itself after an error it printed first",
    "4": ": an illegal instruction, a binary built for another CPU",
    "8": ": an arithmetic error (SIGFPE), a bug",
}


def _crash(groups: dict[str, str]) -> dict[str, str]:
    """The signal (``_signal``) and what a crash by it usually means."""
    return {**_signal(groups), "crash_note": _CRASHES.get((groups.get("sig") or "").strip(), "")}


# The PG log prefix, when present: [Rank 3], [PG 0 Rank 3], [PG 0 (default_pg) Rank 3],
# [PG ID 0 PG GUID 0(default_pg) Rank 3].
_RANK = r"(?:\[(?:PG [^\]]*? )?Rank (?P<rank>\d+)\] ?)?"


def _work(groups: dict[str, str]) -> dict[str, str]:
    import re

    out = _who(groups)
    work = groups.get("work") or ""
    op = re.search(r"OpType=(\w+)", work)
    seq = re.search(r"SeqNum=(\d+)", work)
    limit = re.search(r"Timeout\(ms\)=(\d+)", work)
    out["op_text"] = (f"collective {op.group(1)}" if op else "a collective") + (f" (SeqNum {seq.group(1)})" if seq else "")
    ms = groups.get("ms") or ""
    if ms.isdigit():
        out["waited"] = f"waited {int(ms) // 1000} s"
    elif limit:
        out["waited"] = f"waited its {int(limit.group(1)) // 1000} s timeout"
    else:
        out["waited"] = "waited past its timeout"
    return out


def _who(groups: dict[str, str]) -> dict[str, str]:
    rank = groups.get("rank") or ""
    return {"who": f"rank {rank}" if rank else "a rank", "rank_subject": f"rank {rank}" if rank else "c10d"}


# The line PyTorch prints under `NCCL error in: ...` to say what the NCCL result means
# (getNcclErrorDetailStr): the same failure in other words, so the same finding as the result's own
# row (Code.one_per_subject merges them); alone, it still says which result NCCL returned.
_DETAIL_REF = ("pytorch/pytorch torch/csrc/distributed/c10d/NCCLUtils.cpp getNcclErrorDetailStr (1.7-2.9; 1.x: "
               "`System call (socket, malloc, munmap, etc) failed.`, longer internal/usage/argument texts), "
               "printed after `NCCL error in: %s:%d, %s` and before `Last error:`")
_DETAILS = (
    # (result, PyTorch's words for it, the result's own string as `NCCL error in:` quotes it, 1.x's longer words)
    ("ncclInternalError", "Internal check failed", "internal error",
     "Internal check failed. This is either a bug in NCCL or due to memory corruption"),
    ("ncclInvalidUsage", "This usually reflects invalid usage of NCCL library", "invalid usage",
     "This usually reflects invalid usage of NCCL library (such as too many async ops, too many collectives at "
     "once, mixing streams in a group, etc)."),
    ("ncclUnhandledCudaError", "Call to CUDA function failed", "unhandled cuda error", None),
    ("ncclInvalidArgument", "Invalid value for an argument", "invalid argument",
     "Invalid value for an argument (such as invalid pointer, device count, ip:host pair, etc)."),
)


def _detail_row(result: str, words: str, error: str, old: str | None) -> Pattern:
    return Pattern(
        id=f"pytorch.detail_{error.replace(' ', '_')}",
        code=NCCL_CALL_FAILED.code,
        severity=ERROR,
        needle=f"{result}: {words}",
        regex=rf"{result}: {words}\.?",
        subject=error,
        message=f"An NCCL call returned `{error}` ({result}) to PyTorch.",
        meaning="The job aborts; the reason is in the NCCL WARN line before it, or on the line after `Last error:`.",
        fix="Read the NCCL WARN line before it (rerun with NCCL_DEBUG=WARN if there is none): `Cuda failure` names "
            "the CUDA error, `Duplicate GPU detected` means two ranks were given one GPU.",
        ref=_DETAIL_REF,
        examples=(f"{result}: {words}.", *((f"{result}: {old}",) if old else ())),
        symptom=True,
    )


_NOTICE_REF = "pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"
PATTERNS: tuple[Pattern, ...] = (
    # -- notices of a job that ran (harmless by themselves) ----------------------------------------
    Pattern(
        id="pytorch.pg_not_destroyed",
        code=PYTORCH_NOTICE.code,
        severity=INFO,
        needle="destroy_process_group() was not called",
        regex=r"destroy_process_group\(\) was not called before program exit",
        subject="destroy_process_group",
        message="The program exited without destroy_process_group(): PyTorch 2.4+ warns on every rank; harmless at exit.",
        meaning="Nothing failed; resources are freed when the process exits.",
        fix="Call `torch.distributed.destroy_process_group()` at the end of the program.",
        ref=f"{_NOTICE_REF} ~ProcessGroupNCCL (2.4-2.9); https://github.com/NVIDIA/Megatron-LM/issues/1541",
        examples=("[rank1]:[W326 09:37:44.752383442 ProcessGroupNCCL.cpp:1487] Warning: WARNING: destroy_process_group() was "
                  "not called before program exit, which can leak resources. For more info, please see "
                  "https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())",),
    ),
    Pattern(
        id="pytorch.pg_not_destroyed_24",
        code=PYTORCH_NOTICE.code,
        severity=INFO,
        needle="process group has NOT been destroyed",
        regex=r"process group has NOT been destroyed before it is being destructed",
        subject="destroy_process_group",
        message="The process group was destructed without destroy_process_group(): PyTorch 2.4 warns on every rank; "
                "harmless at a normal exit.",
        meaning="Nothing failed; in rare cases a rank exiting early can block another's last transfer.",
        fix="Call `torch.distributed.destroy_process_group()` at the end of the program.",
        ref=f"{_NOTICE_REF} ~ProcessGroupNCCL (2.4); https://github.com/pytorch/pytorch/issues/126275",
        examples=("[rank3]:[W515 07:06:42.915740178 ProcessGroupNCCL.cpp:1117] WARNING: process group has NOT been destroyed "
                  "before it is being destructed. On normal program exit, the application should call "
                  "destroy_process_group to ensure that any pending NCCL data transfers have finished in this process.",),
    ),
    Pattern(
        id="pytorch.record_streams_deprecated",
        code=PYTORCH_NOTICE.code,
        severity=INFO,
        needle="TORCH_NCCL_AVOID_RECORD_STREAMS is the default now",
        regex=r"TORCH_NCCL_AVOID_RECORD_STREAMS is the default now",
        subject="TORCH_NCCL_AVOID_RECORD_STREAMS",
        message="TORCH_NCCL_AVOID_RECORD_STREAMS is set and is the default now: the variable is deprecated, the job "
                "is unaffected.",
        meaning="Nothing failed.",
        fix="Drop TORCH_NCCL_AVOID_RECORD_STREAMS from the job's environment.",
        ref=f"{_NOTICE_REF} ProcessGroupNCCL::ProcessGroupNCCL (2.9); https://github.com/vllm-project/vllm/pull/25532",
        examples=("[W924 02:01:18.426673989 ProcessGroupNCCL.cpp:981] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS is the default "
                  "now, this environment variable is thus deprecated. (function operator())",),
    ),
    Pattern(
        id="pytorch.barrier_guesses_gpu",
        code=PYTORCH_NOTICE.code,
        severity=INFO,
        needle="perform barrier as devices used by this process are currently unknown",
        regex=r"using GPU (?P<gpu>\d{1,4}) to perform barrier as devices used by this process are currently unknown",
        subject="barrier",
        message="barrier() guessed GPU {gpu} for this rank (no device_id was given to init_process_group): harmless "
                "while each rank's GPU is its local rank; a hang at the barrier when it is not.",
        meaning="Nothing failed by itself; where the job hangs at a barrier, a wrong rank-to-GPU guess is a cause.",
        fix="Pass `device_id=torch.device('cuda', local_rank)` to `init_process_group` (PyTorch 2.3+), or "
            "`device_ids=[local_rank]` to `barrier()`.",
        ref=f"{_NOTICE_REF} ProcessGroupNCCL::barrier (2.2-2.9); https://github.com/deepspeedai/DeepSpeed/pull/7266",
        examples=("[W404 00:15:21.693690333 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank 0]  using GPU 0 to perform "
                  "barrier as devices used by this process are currently unknown. This can potentially cause a hang if "
                  "this rank to GPU mapping is incorrect.",),
    ),
    Pattern(
        id="pytorch.comm_aborted",
        code=NCCL_CALL_FAILED.code,
        severity=ERROR,
        needle="communicator was aborted",
        regex=r"NCCL communicator was aborted on rank (?P<rank>\d{1,7})(?:\.? ?Original reason for failure was: "
              r"(?P<why>[^\n]{1,300}))?",
        subject="aborted",
        message="PyTorch aborted the NCCL communicator on rank {rank}{why_note}: the watchdog caught a timeout or an "
                "NCCL error first, and every collective on it fails from then on.",
        meaning="A consequence: the reason is the timeout or error reported before it (on this rank or another).",
        fix="Find the first error or timeout before it (any rank); with none in the log, rerun with "
            "TORCH_NCCL_ASYNC_ERROR_HANDLING=1 and NCCL_DEBUG=WARN.",
        ref="pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp `NCCL communicator was aborted on rank %d. "
            "Original reason for failure was: %s` (1.9+); https://github.com/deepspeedai/DeepSpeed/issues/1834",
        examples=("[1,19]<stderr>:RuntimeError: NCCL communicator was aborted on rank 19.",),
        derive=lambda g: {"why_note": f" ({g['why'].strip()})" if (g.get("why") or "").strip() else ""},
        symptom=True,
    ),
    Pattern(
        id="pytorch.cuda_driver_insufficient",
        code=NCCL_CUDA_FAILED.code,
        severity=ERROR,
        needle="driver version is insufficient for CUDA runtime",
        regex=r"(?<!Cuda failure ')CUDA driver version is insufficient for CUDA runtime version",
        subject="CUDA",
        message="The node's NVIDIA driver is older than the CUDA runtime this program was built with (`CUDA driver "
                "version is insufficient for CUDA runtime version`): no GPU work can start.",
        meaning="Every CUDA call fails; NCCL never runs.",
        fix="Update the node's driver (GPU operator: its driver version) or use an image built for the driver's CUDA "
            "(`nvidia-smi` shows the highest CUDA it supports).",
        ref="NVIDIA CUDA runtime cudaErrorInsufficientDriver (35) `CUDA driver version is insufficient for CUDA runtime "
            "version`; https://github.com/NVIDIA/gpu-operator/issues/1947",
        examples=("Failed to allocate device vector A (error code CUDA driver version is insufficient for CUDA runtime "
                  "version)!",),
    ),
    Pattern(
        id="pytorch.peer_access_unsupported",
        code=NCCL_CUDA_FAILED.code,
        severity=ERROR,
        needle="peer access is not supported between",
        # (NCCL's own `Cuda failure '...'` is nccl.cuda_failure)
        regex=r"(?:CUDART error: |Cuda error \S{1,300} ')peer access is not supported between these two devices",
        subject="CUDA",
        message="Two GPUs of this host cannot map each other's memory (`peer access is not supported between these two "
                "devices`): a framework's own all-reduce (vLLM, SGLang, TensorRT-LLM custom all-reduce) needs it.",
        meaning="The job stops when it sets up its tensor-parallel group; GeForce cards and some VMs have no GPU "
                "peer-to-peer.",
        fix="Turn the custom all-reduce off (vLLM/SGLang `--disable-custom-all-reduce`); `nvidia-smi topo -p2p r` shows "
            "which GPU pairs can peer.",
        ref="vllm-project/vllm csrc/custom_all_reduce.cuh (CUDACHECK), https://github.com/sgl-project/sglang/issues/552, "
            "https://github.com/sgl-project/sglang/issues/4814",
        examples=("Failed: Cuda error /home/runner/work/vllm/vllm/csrc/custom_all_reduce.cuh:307 'peer access is not "
                  "supported between these two devices'",
                  "RuntimeError: CUDART error: peer access is not supported between these two devices"),
    ),
    Pattern(
        id="pytorch.detail_system_error",
        code=NCCL_SYSTEM_ERROR.code,
        severity=ERROR,
        needle="ncclSystemError: System call",
        # (PyTorch 1.x: "System call (socket, malloc, munmap, etc) failed.")
        regex=r"ncclSystemError: System call \((?:e\.g\. socket, malloc\) or external library call failed or device error"
              r"|socket, malloc, munmap, etc\) failed)\.?",
        subject="NCCL",
        message="An NCCL call failed with ncclSystemError (PyTorch: `System call (e.g. socket, malloc) or external "
                "library call failed or device error`): the WARN line before it, or NCCL's last error after it, "
                "names which.",
        meaning="The framework aborts the job; this line alone does not say why.",
        fix="Read the cause this finding is linked to; without one rerun with NCCL_DEBUG=INFO "
            "NCCL_DEBUG_SUBSYS=INIT,NET and diagnose that log.",
        ref=_DETAIL_REF,
        examples=(
            "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
            "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. It "
            "can be also caused by unexpected exit of a remote peer, you can check NCCL warnings for failure reason "
            "and see if there is connection closure by a peer.",
            "ncclSystemError: System call (socket, malloc, munmap, etc) failed.",
        ),
        symptom=True,
    ),
    Pattern(
        id="pytorch.detail_remote_error",
        code=NCCL_REMOTE_ERROR.code,
        severity=ERROR,
        needle="ncclRemoteError: A call failed",
        regex=r"ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely\.?",
        subject="NCCL",
        message="NCCL lost a peer (ncclRemoteError, PyTorch: `A call failed possibly due to a network error or a "
                "remote process exiting prematurely`); another rank died or the network between them failed.",
        meaning="This rank is a victim; the cause is on another rank or in the fabric.",
        fix="Find the rank that failed first and diagnose its log; if all ranks show only this, look for IB "
            "completion errors and port events at the same time.",
        ref=_DETAIL_REF,
        examples=("ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
                  "prematurely.",),
        symptom=True,
    ),
    *(_detail_row(*d) for d in _DETAILS),
    Pattern(
        id="pytorch.watchdog_timeout",
        code=NCCL_TIMEOUT.code,
        severity=ERROR,
        needle="Watchdog caught collective operation timeout",
        regex=_RANK + r"Watchdog caught collective operation timeout:?(?: WorkNCCL\((?P<work>(?:[^()]|\([^()]*\))*)\))?"
                      r"(?: ran for (?P<ms>\d+) (?:milliseconds|ms) before timing out)?",
        subject="{rank_subject}",
        message="On {who}, {op_text} {waited} without completing, so the c10d watchdog aborted it; the other ranks "
                "never finished their side.",
        meaning="A collective did not finish within the process group's timeout; the job is torn down.",
        fix="Find the first error on any rank before the timeout; without one, find the rank that never entered the "
            "collective (TORCH_NCCL_DUMP_ON_TIMEOUT=1) and test the fabric with nccl-tests.",
        ref="pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp WorkNCCL::checkTimeout (1.x-2.x; "
            "logPrefix `[PG ...]` 2.2+)",
        # A timeout follows from the first error any rank printed before it; alone, it is the headline.
        symptom=True,
        examples=(
            "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, "
            "NumelOut=1, Timeout(ms)=600000) ran for 600017 milliseconds before timing out.",
            "[rank0]:[E1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=131072000, NumelOut=131072000, Timeout(ms)=600000) "
            "ran for 600081 milliseconds before timing out.",
            "[PG ID 0 PG GUID 0(default_pg) Rank 12] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=41207, OpType=ALLREDUCE, NumelIn=3145728, NumelOut=3145728, Timeout(ms)=600000) ran for "
            "600041 milliseconds before timing out.",
            "RuntimeError: [Rank 0] Watchdog caught collective operation timeout",
        ),
        derive=_work,
    ),
    Pattern(
        id="pytorch.watchdog_stuck",
        code=NCCL_WATCHDOG_HUNG.code,
        severity=ERROR,
        needle="watchdog got stuck for",
        regex=_RANK + r"ProcessGroupNCCL's watchdog got stuck for (?P<secs>\d+) seconds",
        subject="{rank_subject}",
        message="PyTorch's NCCL watchdog on {who} made no progress for {secs} s (blocked in a CUDA or NCCL call), so "
                "the process is killed.",
        meaning="Usually follows an earlier failure whose NCCL abort or CUDA call hangs; alone it points at a hung GPU.",
        fix="Find the error before it; with none, `py-spy dump --native --pid <pid>` on the hung rank and check "
            "`dmesg | grep -i xid` on its node.",
        ref="pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp HeartbeatMonitor (2.2+)",
        examples=(
            "[rank1]:[E1111 17:10:53] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress",
            "[PG ID 0 PG GUID 0(default_pg) Rank 5] ProcessGroupNCCL's watchdog got stuck for 480 seconds without "
            "making progress in monitoring enqueued collectives. This typically indicates a NCCL/CUDA API (e.g., "
            "CudaEventDestroy) hang blocking the watchdog, and could be triggered by another thread holding the GIL "
            "inside a CUDA api (for example, CudaEventDestroy), or other deadlock-prone behaviors.",
        ),
        symptom=True,
        derive=_who,
    ),
    Pattern(
        id="pytorch.heartbeat_timeout",
        code=NCCL_WATCHDOG_HUNG.code,
        severity=ERROR,
        needle="Heartbeat monitor timed out!",
        regex=_RANK + r"Heartbeat monitor timed out! Process will be terminated",
        subject="{rank_subject}",
        message="PyTorch's heartbeat monitor on {who} found the NCCL watchdog stuck and terminates the process after "
                "dumping debug info.",
        meaning="Usually follows an earlier failure whose NCCL abort or CUDA call hangs; alone it points at a hung GPU.",
        fix="Find the error before it; with none, `py-spy dump --native --pid <pid>` on the hung rank and check "
            "`dmesg | grep -i xid` on its node.",
        ref="pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp HeartbeatMonitor (2.2+)",
        examples=("[rank25]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 25] Heartbeat monitor timed out! Process will be "
                  "terminated after dumping debug info. workMetaList_.size()=2",),
        symptom=True,
        derive=_who,
    ),
    Pattern(
        id="pytorch.unique_id_store",
        code=NCCL_BOOTSTRAP_FAILED.code,
        severity=ERROR,
        needle="ncclUniqueId from [0] via c10d key-value store",
        regex=r"\[(?P<rank>\d+)\] is setting up NCCL communicator and retr(?:ie|ei)ving ncclUniqueId from \[0\] via "
              r"c10d key-value store by key '(?P<key>[^']{0,1024})', but store->get\('[^']{0,1024}'\) got error: (?P<error>.*?\S)"
              r"(?:\. This may indicate.*)?\.?\s*$",
        subject="{rank_subject}",
        message="Rank {rank} could not fetch NCCL's unique id from rank 0 through the c10d store: {error}.",
        meaning="The communicator is never created; a reset or closed connection means rank 0 (or the store) died "
                "first, a timeout that rank 0 is slow, stuck or unreachable.",
        fix="Read rank 0's log first; check MASTER_ADDR/MASTER_PORT reach rank 0 (`rdmadoctor preflight "
            "--wait-for-master`); only if rank 0 is merely slow, raise the timeout of init_process_group.",
        ref="pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp broadcastUniqueNCCLID (`retreiving`, "
            "sic, in older releases)",
        examples=(
            "torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving ncclUniqueId from "
            "[0] via c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer",
            "RuntimeError: [1] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d key-value "
            "store by key '0', but store->get('0') got error: Socket Timeout",
            "[rank5]: torch.distributed.DistBackendError: [5] is setting up NCCL communicator and retrieving "
            "ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: wait timeout "
            "after 300000ms. This may indicate a possible application crash on rank 0 or a network set up issue.",
        ),
        symptom_when=(("error", "Connection reset by peer"), ("error", "Broken pipe"),
                      ("error", "failed to recv, got 0 bytes")),
        derive=_who,
    ),
    # -- the rendezvous: ranks reaching rank 0's store --------------------------------------------
    Pattern(
        id="pytorch.store_connect_failed",
        code=NCCL_BOOTSTRAP_FAILED.code,
        severity=ERROR,
        needle="client socket has ",
        # Only the end of the client's retries is a failure: `timed out after 60s` (1.10-2.2), `after 600000ms`
        # (2.3+), alone, inside TCPStore's `TCP client failed to connect/validate ... - timed out` line, or in
        # the DistNetworkError. Each `failed to connect` before it is a retry (pytorch.store_connect_retry).
        regex=r"The client socket has (?P<how>timed out after \d{1,9}m?s while trying to connect to) "
              r"(?P<addr>[^\n]{1,300}?)\.?\s*$",
        subject="c10d store",
        message="This rank could not reach the c10d store (rank 0's TCPStore: MASTER_ADDR:MASTER_PORT, or torchrun's "
                "--rdzv_endpoint): the client socket {how} {addr}.",
        meaning="The job cannot start: rank 0 does not listen where the others look, or the way to it is closed.",
        fix=_STORE_FIX,
        ref="pytorch/pytorch torch/csrc/distributed/c10d/socket.cpp SocketConnectOp::throwTimeoutError `The client "
            "socket has timed out after {} while trying to connect to ({}, {}).` (1.10+; ms from 2.3); "
            "https://github.com/pytorch/pytorch/issues/107021, https://github.com/lzhxmu/CPPO/issues/6",
        examples=(
            "[E socket.cpp:860] [c10d] The client socket has timed out after 60s while trying to connect to "
            "192.0.0.1:1234.",
            "[E521 15:43:02.707733876 socket.cpp:1023] [c10d] The client socket has timed out after 600000ms while "
            "trying to connect to (172.18.21.4, 37907).",
            "[E521 15:43:02.707888867 TCPStore.cpp:318] [c10d] TCP client failed to connect/validate to host "
            "172.18.21.4:37907 - timed out (try=1, timeout=600000ms): The client socket has timed out after 600000ms "
            "while trying to connect to (172.18.21.4, 37907).",
        ),
    ),
    Pattern(
        id="pytorch.store_connect_retry",
        code=PYTORCH_NOTICE.code,
        severity=INFO,
        needle="client socket has ",  # the timeout's needle too: that row is tried first
        # The client's retries while rank 0 starts (a [W] line per address, an [E] line per round in 1.10-2.2):
        # normal until the deadline; the timeout is the row above. TCPStore's `- retrying` (2.3+) is the next row.
        regex=r"The client socket has failed to connect to (?:any network address of )?(?P<addr>\[[^\]\n]{1,300}\]:\d{1,5}|"
              r"\([^()\n]{1,300}\)|\S{1,300}?)(?: \((?:errno|system error): (?P<errno>-?\d{1,6}) - (?P<why>[^()\n]{1,120})\))?"
              r"\.?\s*$",
        subject="c10d store",
        message="This rank tried to reach the c10d store at {addr} and will try again{why_note}: PyTorch retries until "
                "its timeout while rank 0's store starts, so this alone is no failure.",
        meaning="Nothing failed yet: only `The client socket has timed out` (or a DistNetworkError) after these lines "
                "means the ranks never met.",
        fix="Nothing to fix while the job starts; if it then times out, check that MASTER_ADDR:MASTER_PORT answers "
            "from this pod.",
        ref="pytorch/pytorch torch/csrc/distributed/c10d/socket.cpp SocketConnectOp::tryConnect (C10D_WARNING `The "
            "client socket has failed to connect to {} (errno: {} - {}).`, C10D_ERROR `... to any network address of "
            "({}, {}).`, then a retry until the deadline); https://github.com/gensyn-ai/rl-swarm/issues/197, "
            "https://github.com/hpcaitech/Open-Sora/issues/667",
        examples=(
            "[W427 01:04:16.149509694 socket.cpp:752] [c10d] The client socket has failed to connect to "
            "[::ffff:198.18.0.1]:3254 (errno: 110 - Connection timed out).",
            "[W socket.cpp:663] [c10d] The client socket has failed to connect to [trainer-master-0]:23456 (errno: 111 - "
            "Connection refused).",
            "[E socket.cpp:753] [c10d] The client socket has failed to connect to any network address of (6841231, "
            "47389).",
        ),
        derive=lambda g: {"why_note": f" ({g['why']})" if g.get("why") else ""},
    ),
    Pattern(
        id="pytorch.store_connect_retry_tcpstore",
        code=PYTORCH_NOTICE.code,
        severity=INFO,
        needle="TCP client failed to connect",
        regex=r"TCP client failed to connect/validate to host (?P<host>\S{1,300}) - retrying \(try=(?P<try>\d{1,6})",
        subject="c10d store",
        message="This rank tried to reach the c10d store at {host} and will try again (try {try}): PyTorch retries "
                "until its timeout while rank 0's store starts, so this alone is no failure.",
        meaning="Nothing failed yet: only `- timed out` (or a DistNetworkError) after these lines means the ranks never "
                "met.",
        fix="Nothing to fix while the job starts; if it then times out, check that MASTER_ADDR:MASTER_PORT answers "
            "from this pod.",
        ref="pytorch/pytorch torch/csrc/distributed/c10d/TCPStore.cpp TCPClient::connect (`TCP client failed to "
            "connect/validate to host {}:{} - retrying (try={}, timeout={}ms, delay={}ms): {}`, 2.3+); "
            "https://github.com/TheTom/vllm-swift/issues/9",
        examples=("[W426 16:56:01.831041000 TCPStore.cpp:347] [c10d] TCP client failed to connect/validate to host "
                  "100.64.0.1:59782 - retrying (try=6, timeout=1800000ms, delay=5241ms): Connection reset by peer",),
    ),
    Pattern(
        id="pytorch.store_host_unresolved",
        code=NCCL_BOOTSTRAP_FAILED.code,
        severity=ERROR,
        needle="Name or service not known",
        regex=r"host not found: Name or service not known|network addresses of \((?P<host>[^,()\n]{1,255}), "
              r"(?P<port>\d{1,5})\) cannot be retrieved \(gai error: -?\d{1,3} - Name or service not known\)",
        subject="c10d store",
        message="The address of rank 0's store {host_text}does not resolve from this pod (`Name or service not known`): "
                "the ranks cannot meet.",
        meaning="The job cannot start. In Kubernetes the master's name is a Service (or a pod's DNS name) that does not "
                "exist yet, or not in this namespace, or is misspelled in MASTER_ADDR.",
        fix="From the pod, `getent hosts $MASTER_ADDR`; use the master Service's full name "
            "(<job>-master-0.<namespace>.svc), start the workers after the master (a PyTorchJob does, with its init "
            "container), and check the pod's DNS (`cat /etc/resolv.conf`).",
        ref="pytorch/pytorch torch/lib/c10d/Utils.cpp `host not found: %s` (1.0-1.7, gai_strerror), "
            "torch/csrc/distributed/c10d/socket.cpp `The {} network addresses of ({}, {}) cannot be retrieved (gai "
            "error: {} - {}).` (1.8+); https://github.com/kubeflow/pytorch-operator/issues/125",
        examples=(
            "ValueError: host not found: Name or service not known",
            "[W socket.cpp:601] [c10d] The IPv6 network addresses of (trainer-master-0, 23456) cannot be retrieved (gai "
            "error: -2 - Name or service not known).",
        ),
        derive=lambda g: {"host_text": f"({g['host']}:{g['port']}) " if g.get("host") else ""},
    ),
    Pattern(
        id="pytorch.nslookup_failed",
        code=NCCL_BOOTSTRAP_FAILED.code,
        severity=WARNING,
        needle="nslookup: can't resolve",
        regex=r"nslookup: can't resolve '(?P<host>[^'\n]{1,255})'(?:: (?P<why>[^\n]{1,80}?))?\s*$",
        subject="{host}",
        message="{name_text} does not resolve from this pod (nslookup: {why_text}).",
        meaning="A script that waits for the master (a PyTorchJob's init container) prints this until its Service "
                "exists; if the job then fails to reach rank 0, this is why.",
        fix="Check that the master pod and its Service exist in this namespace (`kubectl get pods,svc`), that "
            "MASTER_ADDR spells it, and that the pod's DNS works (`cat /etc/resolv.conf`).",
        ref="BusyBox networking/nslookup.c `can't resolve '%s'`; https://github.com/modelscope/ms-swift/issues/6368",
        examples=("nslookup: can't resolve 'dlc1dwuhvtro4c27-master-0': Name does not resolve",),
        derive=lambda g: {"why_text": g.get("why") or "no answer",
                          "name_text": "An empty name (`(null)`: the variable meant to hold the master's name is unset)"
                          if g.get("host") == "(null)" else f"The name {g.get('host', '')}"},
    ),
    Pattern(
        id="pytorch.store_connect_timeout_1x",
        code=NCCL_BOOTSTRAP_FAILED.code,
        severity=ERROR,
        needle="connect() timed out",
        regex=r"connect\(\) timed out\. Original timeout was (?P<ms>\d{1,9}) ms",
        subject="c10d store",
        message="This rank could not reach the c10d store (rank 0's TCPStore, or torchrun's --rdzv_endpoint) within "
                "{ms} ms: connect() timed out.",
        meaning="The job cannot start: rank 0 does not listen where the others look, or the way to it is closed.",
        fix=_STORE_FIX,
        ref="pytorch/pytorch torch/csrc/distributed/c10d/socket.cpp `connect() timed out. Original timeout was {} ms.` "
            "(1.9-1.13); https://github.com/pytorch/pytorch/issues/69197",
        examples=("RuntimeError: connect() timed out. Original timeout was 60000 ms.",),
    ),
    Pattern(
        id="pytorch.rendezvous_connection",
        code=NCCL_BOOTSTRAP_FAILED.code,
        severity=ERROR,
        needle="RendezvousConnectionError",
        regex=r"RendezvousConnectionError: The connection to the C10d store has failed",
        subject="c10d store",
        message="torchrun could not use its rendezvous store (the C10d store at --rdzv_endpoint).",
        meaning="The node never joins the job: its agent cannot reach the store that gathers the nodes.",
        fix=_STORE_FIX,
        ref="pytorch/pytorch torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py `The connection to the "
            "C10d store has failed. See inner exception for details.` (1.10+)",
        examples=("torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store "
                  "has failed. See inner exception for details.",),
        symptom=True,  # the socket error before it says why
    ),
    Pattern(
        id="pytorch.rendezvous_timeout",
        code=NCCL_BOOTSTRAP_FAILED.code,
        severity=ERROR,
        needle="RendezvousTimeoutError",
        regex=r"RendezvousTimeoutError\b",
        subject="rendezvous",
        message="torchrun's rendezvous timed out: fewer nodes than --nnodes (its minimum) joined in time.",
        meaning="The job never starts: the other nodes' agents did not reach the same --rdzv_endpoint with the same "
                "--rdzv_id, or never started.",
        fix="Check that every node runs torchrun with the same --rdzv_id, --rdzv_endpoint and --nnodes, that their pods "
            "are Running, and that the endpoint's port answers from each (`rdmadoctor preflight --wait-for-master`).",
        ref="pytorch/pytorch torch/distributed/elastic/rendezvous/dynamic_rendezvous.py (raise RendezvousTimeoutError, "
            "1.10+); https://github.com/pytorch/tutorials/issues/2209",
        examples=("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",),
    ),
    Pattern(
        id="pytorch.store_clients_timeout",
        code=NCCL_BOOTSTRAP_FAILED.code,
        severity=ERROR,
        needle="waiting for clients",
        regex=r"Timed out after (?P<secs>\d{1,9}) seconds waiting for clients\. (?P<joined>\d{1,7})/(?P<total>\d{1,7}) "
              r"clients joined",
        subject="c10d store",
        message="Rank 0's store waited {secs} s and only {joined} of {total} ranks connected to it: the others never "
                "reached MASTER_ADDR:MASTER_PORT.",
        meaning="The job cannot start: the missing ranks never started (a Pending pod, a failed node), crashed "
                "first, or cannot reach rank 0's address and port.",
        fix="Check that every worker pod is Running and its log starts; from a worker, check MASTER_ADDR resolves to "
            "rank 0 and the port answers (`rdmadoctor preflight --wait-for-master`); a NetworkPolicy must allow it.",
        ref="pytorch/pytorch torch/csrc/distributed/c10d/TCPStore.cpp waitForWorkers `Timed out after {} seconds "
            "waiting for clients. {}/{} clients joined.` (2.0+)",
        examples=("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients "
                  "joined.",),
    ),
    Pattern(
        id="pytorch.nccl_error",
        code=NCCL_CALL_FAILED.code,
        severity=ERROR,
        needle="NCCL error",
        # `unhandled system error` and `remote process exited ...` are NCCL rows (they come first).
        regex=r"NCCL error(?: in: (?P<where>\S+?),|:) (?P<error>unhandled cuda error|internal error|invalid usage"
              r"|invalid argument|invalid device pointer|invalid device index|library wrapper load failed"
              r"|in progress)[^,\n]*(?:, NCCL version (?P<version>[\w.+-]+))?",
        subject="{error}",
        message="An NCCL call returned `{error}` to PyTorch{where_note}.",
        meaning="The job aborts; the reason is in the NCCL WARN line before it (a CUDA failure, two ranks on one GPU, "
                "mismatched collectives).",
        fix="Rerun with NCCL_DEBUG=WARN (or INFO) and read the WARN line: `Cuda failure` names the CUDA error, "
            "`Duplicate GPU detected` means the local-rank to GPU mapping is wrong (CUDA_VISIBLE_DEVICES).",
        ref="pytorch/pytorch torch/csrc/distributed/c10d/NCCLUtils.hpp C10D_NCCL_CHECK `NCCL error in: %s:%d, %s`; "
            "NVIDIA/nccl src/init.cc ncclGetErrorString (2.5-2.30)",
        # The exception PyTorch raises for an NCCL failure: the WARN before it says why.
        symptom=True,
        examples=(
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
            "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
            "RuntimeError: NCCL error in: /opt/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, invalid "
            "usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.18.1",
            "[Rank 2] NCCL watchdog thread terminated with exception: NCCL error: internal error - please report this "
            "issue to the NCCL developers, NCCL version 2.21.5",
        ),
        derive=lambda g: {"where_note": f" at {g['where']}" if g.get("where") else ""},
    ),
    # -- the job stopped from outside: torchrun's elastic agent ------------------------------------
    Pattern(
        id="pytorch.death_signal",
        code=JOB_KILLED.code,
        severity=ERROR,
        needle="Received ",  # "death signal, ..." has no capital letter for the scan to find it by
        regex=r"Received (?:Signals\.)?(?P<sig>SIG[A-Z0-9]{2,8}|\d{1,3}) death signal, shutting down workers",
        subject="{signal_text}",
        message="torchrun received {signal_text} and shut its workers down: the job was stopped from outside.",
        meaning="The job did not fail by itself: a timeout, the scheduler or a person stopped it while it ran or "
                "waited.",
        fix="See how far NCCL got (this finding says) and follow that step.",
        ref="pytorch/pytorch torch/distributed/elastic/agent/server/api.py `Received %s death signal, shutting down "
            "workers` (1.9+; `Signals.SIGTERM` before 2.0)",
        examples=(
            "[2025-01-10 10:00:00,000] torch.distributed.elastic.agent.server.api: [WARNING] Received 15 death signal, "
            "shutting down workers",
            "WARNING:torch.distributed.elastic.agent.server.api:Received Signals.SIGTERM death signal, shutting down "
            "workers",
        ),
        # A kill follows from an error before it (the job hung because of it); alone it leads.
        symptom=True,
        derive=_signal,
    ),
    Pattern(
        id="pytorch.signal_exception",
        code=JOB_KILLED.code,
        severity=ERROR,
        needle="SignalException: Process ",
        regex=r"SignalException: Process (?P<pid>\d{1,10}) got signal: (?P<sig>SIG[A-Z0-9]{2,8}|\d{1,3})",
        subject="{signal_text}",
        message="Process {pid} (torchrun's agent) got {signal_text} and raised SignalException: the job was stopped "
                "from outside.",
        meaning="The job did not fail by itself: a timeout, the scheduler or a person stopped it.",
        fix="See how far NCCL got (this finding says) and follow that step.",
        ref="pytorch/pytorch torch/distributed/elastic/multiprocessing/api.py _terminate_process_handler "
            "`Process {pid} got signal: {sigval}` (1.9+)",
        examples=(
            "torch.distributed.elastic.multiprocessing.api.SignalException: Process 3351 got signal: 15",
        ),
        symptom=True,
        derive=_signal,
    ),
    Pattern(
        id="pytorch.worker_exitcode_signal",
        code=JOB_KILLED.code,
        severity=ERROR,
        needle="exitcode: -",
        # A negative exit code is Python's way of saying "killed by that signal" (subprocess returncode).
        # (signals sent from outside; a crash, -7 or -11, is pytorch.worker_exitcode_crash)
        regex=r"failed \(exitcode: -(?P<sig>9|15|2|1)\) local_rank: (?P<local>\d{1,6}) \(pid: (?P<pid>\d{1,10})\)",
        subject="{signal_text}",
        message="Worker local_rank {local} (PID {pid}) was killed by {signal_text}, torchrun reports (exit code "
                "-{sig}).",
        meaning="SIGKILL (9) is most often the kernel's OOM killer or a forced pod stop; SIGTERM (15) a timeout, "
                "the scheduler, or torchrun stopping the other workers after one failed.",
        fix="SIGKILL: `dmesg | grep -i oom` on the node, give the pod more memory. Otherwise see how far NCCL got "
            "(this finding says) and follow that step.",
        ref="pytorch/pytorch torch/distributed/elastic/agent/server/local_elastic_agent.py / multiprocessing "
            "`failed (exitcode: %s) local_rank: %s (pid: %s) of binary: %s` (1.9+)",
        examples=("torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: 0 "
                  "(pid: 1234) of binary: /usr/bin/python",),
        symptom=True,
        derive=_signal,
    ),
    Pattern(
        id="pytorch.worker_signal",
        code=JOB_KILLED.code,
        severity=ERROR,
        needle="Signal ",
        regex=r"Signal (?P<sig>9|15|2|1) \((?P<name>SIG[A-Z0-9]{2,8})\) received by PID (?P<pid>\d{1,10})",
        subject="{signal_text}",
        message="A worker (PID {pid}) was killed by {signal_text}, as torchrun's failure summary reports.",
        meaning="SIGKILL (9) is most often the kernel's OOM killer or a forced pod stop; SIGTERM (15) a timeout, "
                "the scheduler, or torchrun stopping the other workers after one failed.",
        fix="SIGKILL: `dmesg | grep -i oom` on the node, give the pod more memory. Otherwise see how far NCCL got "
            "(this finding says) and follow that step.",
        ref="pytorch/pytorch torch/distributed/elastic/multiprocessing/errors/__init__.py ProcessFailure "
            "`Signal {sig} ({signame}) received by PID {pid}` (1.9+)",
        examples=("  traceback : Signal 9 (SIGKILL) received by PID 2411",),
        symptom=True,
        derive=_signal,
    ),
    Pattern(
        id="pytorch.worker_exitcode",
        code=JOB_FAILED.code,
        severity=ERROR,
        needle=") local_rank: ",  # (not "exitcode: ": needles are found without overlap, and "exitcode: -" is taken)
        regex=r"failed \(exitcode: (?P<rc>[1-9]\d{0,2})\) local_rank: (?P<local>\d{1,6}) \(pid: (?P<pid>\d{1,10})\)",
        subject="local_rank {local}",
        message="Worker local_rank {local} (PID {pid}) exited with code {rc}, torchrun reports: it failed by itself, and "
                "torchrun stopped the others.",
        meaning="The reason is that worker's own error before this line (a traceback, an NCCL error).",
        fix="Read the first error of that worker (its `[rankN]:` lines); decorate main() with torch's @record to get its "
            "traceback into torchrun's summary.",
        ref="pytorch/pytorch torch/distributed/elastic/multiprocessing/api.py `failed (exitcode: %s) local_rank: %s "
            "(pid: %s) of binary: %s` (1.9+); https://github.com/hiyouga/LLaMA-Factory/issues/163",
        examples=("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 7 (pid: 153932) of "
                  "binary: /home/user/miniconda3/bin/python",),
        symptom=True,
    ),
    Pattern(
        id="pytorch.deepspeed_return_code",
        code=JOB_FAILED.code,
        severity=ERROR,
        needle="exits with return code = ",
        regex=r"exits with return code = (?P<rc>-?\d{1,3})",
        subject="DeepSpeed worker",
        message="DeepSpeed's launcher saw a worker exit with return code {rc}{rc_note}.",
        meaning="The launcher kills the other workers of the node (`Killing subprocess`); the reason is the worker's "
                "own output before it.",
        fix="Read the first error of that worker; a negative code is a signal (-9 a kill, the OOM killer most often; -6 "
            "an abort after an error; -7 a bus error, a small /dev/shm in a container).",
        ref="deepspeedai/DeepSpeed deepspeed/launcher/launch.py sigkill_handler `{cmd} exits with return code = "
            "{returncode}`; https://github.com/deepspeedai/DeepSpeed/issues/4510",
        examples=("[2023-10-13 11:32:28,663] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', "
                  "'train.py', '--local_rank=7'] exits with return code = -6",),
        derive=lambda g: {"rc_note": {"-9": " (SIGKILL: killed, most often by the OOM killer)",
                                      "-6": " (SIGABRT: it aborted after an error)",
                                      "-7": " (SIGBUS: a bus error, in a container most often a small /dev/shm)",
                                      "-11": " (SIGSEGV: it crashed)", "-15": " (SIGTERM: it was stopped)"}.get(
                                          g.get("rc", ""), "")},
        symptom=True,
    ),
    Pattern(
        id="pytorch.deepspeed_killing",
        code=JOB_FAILED.code,
        severity=ERROR,
        needle="Killing subprocess",
        regex=r"sigkill_handler\] Killing subprocess (?P<pid>\d{1,10})",
        subject="DeepSpeed worker",
        message="DeepSpeed's launcher is killing the workers of this node (PID {pid} among them): one of them exited "
                "first, and it stops the rest.",
        meaning="A consequence: the worker that exited first, and its error, are the cause.",
        fix="Find the `exits with return code` line and that worker's first error (on this node or another).",
        ref="deepspeedai/DeepSpeed deepspeed/launcher/launch.py sigkill_handler `Killing subprocess {pid}`; "
            "https://github.com/deepspeedai/DeepSpeed/issues/4510",
        examples=("192.169.83.120: [2023-10-13 11:31:28,593] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 249",),
        symptom=True,
    ),
    Pattern(
        id="pytorch.ray_worker_died",
        code=JOB_FAILED.code,
        severity=ERROR,
        needle="A worker died or was killed",
        regex=r"A worker died or was killed while executing (?:a|the) task",
        subject="Ray worker",
        message="A Ray worker died while running its task (Ray lists the possible causes: the OOM killer, `ray stop "
                "--force`, a crash): the other workers' NCCL errors after it follow from it.",
        meaning="Its collective partners lose it: NCCL reports a remote error or a completion error on the others.",
        fix="Look at that worker's own log and the node's `dmesg | grep -i oom` at that time (Ray's "
            "`ray logs worker-<id>`); give it more memory if the OOM killer sent it.",
        ref="ray-project/ray python/ray/_private/worker.py / src/ray/core_worker `A worker died or was killed while "
            "executing a task by an unexpected system error`; https://github.com/OpenRLHF/OpenRLHF/issues/621",
        examples=("(raylet) A worker died or was killed while executing a task by an unexpected system error. To "
                  "troubleshoot the problem, check the logs for the dead worker.",),
    ),
    Pattern(
        id="pytorch.worker_exitcode_crash",
        code=PROCESS_CRASHED.code,
        severity=ERROR,
        needle="exitcode: -",
        regex=r"failed \(exitcode: -(?P<sig>(?!(?:9|15|2|1)\))\d{1,3})\) local_rank: (?P<local>\d{1,6}) \(pid: "
              r"(?P<pid>\d{1,10})\)",
        subject="{signal_text}",
        message="Worker local_rank {local} (PID {pid}) crashed with {signal_text}{crash_note}, torchrun reports (exit "
                "code -{sig}).",
        meaning="The worker died of its own fault, not of a kill; torchrun then stops the others.",
        fix="SIGBUS (-7) in a container: give the pod a bigger /dev/shm; SIGSEGV (-11): the worker's backtrace names "
            "the library.",
        ref="pytorch/pytorch torch/distributed/elastic/multiprocessing/api.py `failed (exitcode: %s) local_rank: %s "
            "(pid: %s)` (1.9+); https://github.com/NVIDIA/Megatron-LM/issues/516",
        examples=("torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -7) local_rank: 0 "
                  "(pid: 5275) of binary: /usr/bin/python",),
        symptom=True,
        derive=_crash,
    ),
    Pattern(
        id="pytorch.worker_signal_crash",
        code=PROCESS_CRASHED.code,
        severity=ERROR,
        needle="Signal ",
        regex=r"Signal (?P<sig>(?!(?:9|15|2|1) )\d{1,3}) \((?P<name>SIG[A-Z0-9]{2,8})\) received by PID (?P<pid>\d{1,10})",
        subject="{signal_text}",
        message="A worker (PID {pid}) crashed with {signal_text}{crash_note}, as torchrun's failure summary reports.",
        meaning="The worker died of its own fault, not of a kill; torchrun then stops the others.",
        fix="SIGBUS (7) in a container: give the pod a bigger /dev/shm; SIGSEGV (11): the worker's backtrace names "
            "the library.",
        ref="pytorch/pytorch torch/distributed/elastic/multiprocessing/errors/__init__.py ProcessFailure "
            "`Signal {sig} ({signame}) received by PID {pid}` (1.9+)",
        examples=("  traceback : Signal 7 (SIGBUS) received by PID 5275",),
        symptom=True,
        derive=_crash,
    ),
)
