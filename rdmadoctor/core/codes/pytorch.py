"""PyTorch (c10d, torchrun, elastic) and Gloo in a job's log.

The built-in codes of this family; the registry (rdmadoctor.core.codes) finds them here. A
code keeps its string and its meaning for life (docs/architecture.md, "Codes are a contract").
"""

from __future__ import annotations

from rdmadoctor.core.model import CONFIG, INFORMATION, Code

# PyTorch (rdmadoctor/logs/kb/pytorch.py).
NCCL_TIMEOUT = Code(
    "NCCL_TIMEOUT",
    "A collective operation timed out (the c10d watchdog)",
    "A rank waited longer than the process group's timeout for a collective: another rank died, "
    "hangs, or the network between them stopped delivering. PyTorch tears the job down.",
    "Look for the first error on any rank before the timeout (this finding names it when the log "
    "shows one); with no error, find the rank that did not enter the collective (NCCL_DEBUG=INFO, "
    "TORCH_NCCL_DUMP_ON_TIMEOUT=1) and test the fabric between the hosts with nccl-tests.",
    slow_symptom=True,
)
NCCL_WATCHDOG_HUNG = Code(
    "NCCL_WATCHDOG_HUNG",
    "PyTorch's NCCL watchdog itself stopped making progress",
    "ProcessGroupNCCL's heartbeat monitor found the watchdog thread stuck (by default for 480 s, "
    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC) and kills the process. The watchdog blocks in a CUDA or NCCL "
    "call: a GPU that stopped responding, an NCCL abort that hangs after an earlier failure, or "
    "another thread holding the GIL inside a CUDA call.",
    "Find the error before it (a collective timeout, an NCCL WARN, a GPU Xid in `dmesg | grep -i xid`); "
    "with none, take stacks of the hung process (`py-spy dump --native --pid <pid>`) and check the GPU "
    "(`nvidia-smi -q -d ERRORS`). Raise TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC only when a long wait is legitimate.",
    slow_symptom=True,
)
NCCL_CALL_FAILED = Code(
    "NCCL_CALL_FAILED",
    "An NCCL call returned an error to PyTorch",
    "PyTorch raised `NCCL error in: <file>:<line>, <reason>, NCCL version ...` for an NCCL result other "
    "than a system or remote error: `unhandled cuda error` (a CUDA call inside NCCL failed: a GPU "
    "fault, out of memory, peer access), `internal error`, `invalid usage` or `invalid argument` "
    "(the program or the launch is wrong, e.g. two ranks on one GPU).",
    "Read the NCCL WARN line before it (rerun with NCCL_DEBUG=WARN or INFO if there is none): `Cuda "
    "failure` names the CUDA error; `Duplicate GPU detected` means CUDA_VISIBLE_DEVICES or the local "
    "rank mapping gives two ranks one GPU; `invalid usage` points at mismatched collectives between ranks.",
    one_per_subject=True,
)

PROCESS_CRASHED = Code(
    "PROCESS_CRASHED",
    "A process of the job crashed (SIGBUS, SIGSEGV, SIGABRT)",
    "A rank died of a signal of its own making, not of one sent from outside: SIGBUS (7), a memory "
    "mapping that could not be backed (in a container, NCCL's shared memory outgrowing a small "
    "/dev/shm); SIGSEGV (11), a bug or libraries that do not match one another (NCCL, UCX, MPI, a "
    "plugin built for another version); SIGABRT (6), the process stopping itself after an error it "
    "printed first.",
    "Read the crashing rank's output before the crash: its backtrace names the library. SIGBUS in a "
    "container: give the pod a bigger /dev/shm (an emptyDir with medium: Memory, or `--shm-size`); "
    "SIGSEGV in UCX or MPI: a matching build, or UCX_TLS=tcp to confirm; SIGABRT: the error before it.",
)
JOB_FAILED = Code(
    "JOB_FAILED",
    "A worker of the job exited with an error",
    "A launcher or operator reports that one of the job's processes exited with a non-zero code (torchrun's "
    "`failed (exitcode: 1)`, DeepSpeed's `exits with return code`, a pod that `exited with code 1` or "
    "restarts in CrashLoopBackOff, a Ray worker that died): the worker itself failed, and the launcher "
    "stops the others. Its reason is what that worker printed before it: a traceback, an NCCL error.",
    "Read the first error of the worker named (its rank's log, `kubectl logs --previous` for a restarting "
    "pod); the other workers' errors after it follow from it. With torchrun, the `error_file` / "
    "`@record` decorator on main() puts the worker's traceback in the failure summary.",
)
JOB_KILLED = Code(
    "JOB_KILLED",
    "The job was stopped by a signal (killed, timed out, cancelled)",
    "Something outside the training code ended it: `timeout` or the scheduler's time limit (SIGTERM), "
    "the OOM killer or a forced stop (SIGKILL), Ctrl-C (SIGINT), a pod deleted or evicted (SIGTERM). "
    "A job killed while it waited is never a clean run: how far NCCL got says where it waited (before "
    "NCCL started: the rendezvous or the store; during communicator setup: the bootstrap between ranks; "
    "after `Init COMPLETE`: a collective).",
    "Follow the next step the finding gives for the stage NCCL reached; when the kill was the OOM killer "
    "(`dmesg | grep -i oom`, exit code 137) give the pod more memory.",
    one_per_subject=True,
    kill=True,
    explained_by_errors_only=True,
)

PYTORCH_NOTICE = Code(
    "PYTORCH_NOTICE",
    "A PyTorch distributed notice, not a failure",
    "Information: ProcessGroupNCCL prints warnings that look alarming and are not failures: a process "
    "group not destroyed before exit (PyTorch 2.4+ says so on every rank), a deprecated environment "
    "variable, a barrier that guesses its GPU. They come from a job that ran; by themselves they do not "
    "explain a failure or a slow run.",
    "What each one says: call `torch.distributed.destroy_process_group()` at the end of the program; "
    "drop the deprecated variable; pass `device_id=torch.device('cuda', local_rank)` to "
    "`init_process_group` (or `device_ids=[local_rank]` to `barrier`).",
    kind=INFORMATION,
)

# Gloo (rdmadoctor/logs/kb/gloo.py).
GLOO_LOOPBACK = Code(
    "GLOO_LOOPBACK",
    "PyTorch's Gloo backend listens on the loopback address",
    "The host name resolves to no usable local address (a pod whose /etc/hosts maps it to 127.0.1.1, a "
    "name DNS does not know), so Gloo, PyTorch's CPU collectives (barriers, object gathers, the CPU groups "
    "of DeepSpeed, Lightning, vLLM), listens on 127.0.0.1: ranks on other hosts cannot connect to it and a "
    "multi-node job fails at its first Gloo call (`Gloo connectFullMesh failed`). On one host it is harmless.",
    "Set GLOO_SOCKET_IFNAME to the pod's interface in the pod spec (`eth0`, `net1` for a Multus network: the "
    "name NCCL_SOCKET_IFNAME selects, without its `=`), or make the host name resolve to the pod's address.",
    condition=CONFIG,
)
