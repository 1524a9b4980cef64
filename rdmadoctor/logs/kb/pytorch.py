"""PyTorch's c10d ProcessGroupNCCL: watchdog timeouts and `NCCL error in:` exceptions."""

from __future__ import annotations

from rdmadoctor.core.model import ERROR, Code
from rdmadoctor.logs.kb import Pattern

NCCL_TIMEOUT = Code(
    "NCCL_TIMEOUT",
    "A collective operation timed out (the c10d watchdog)",
    "A rank waited longer than the process group's timeout for a collective: another rank died, "
    "hangs, or the network between them stopped delivering. PyTorch tears the job down.",
    "Look for the first error on any rank before the timeout (this finding names it when the log "
    "shows one); with no error, find the rank that did not enter the collective (NCCL_DEBUG=INFO, "
    "TORCH_NCCL_DUMP_ON_TIMEOUT=1) and test the fabric between the hosts with nccl-tests.",
)

CODES = (NCCL_TIMEOUT,)

PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        id="pytorch.watchdog_timeout",
        code=NCCL_TIMEOUT.code,
        severity=ERROR,
        needle="Watchdog caught collective operation timeout",
        regex=r"\[Rank (?P<rank>\d+)\] Watchdog caught collective operation timeout: WorkNCCL\((?P<work>[^)]*)\)"
              r"(?: ran for (?P<ms>\d+) milliseconds before timing out)?",
        subject="rank {rank}",
        message="rank {rank}: the c10d watchdog caught a collective timeout ({work})",
        meaning="A collective did not finish within the process group's timeout; the job is torn down.",
        fix="Find the first error on any rank before the timeout; without one, find the rank that never entered the "
            "collective (TORCH_NCCL_DUMP_ON_TIMEOUT=1) and test the fabric with nccl-tests.",
        ref="pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp",
        examples=("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, "
                  "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600017 milliseconds before timing out.",),
    ),
)
