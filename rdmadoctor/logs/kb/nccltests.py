"""nccl-tests (all_reduce_perf and the other *_perf binaries): how a test run says it failed.

Strings from NVIDIA/nccl-tests src/common.cu and src/common.h: ``%s: Test NCCL failure %s:%d '%s
/ %s'`` (NCCLCHECK, with the host name), `` .. %s pid %d: Test failure %s:%d`` and the summary lines
``# Out of bounds values : %d %s`` and ``# Avg bus bandwidth    : %g``.
"""

from __future__ import annotations

from rdmadoctor.core.codes.nccl import (
    NCCL_CUDA_FAILED,
    NCCL_TEST_FAILED,
    NCCL_TEST_WRONG_RESULTS,
)
from rdmadoctor.core.model import ERROR
from rdmadoctor.logs.kb import Pattern
from rdmadoctor.logs.kb.nccl import _cuda

CODES = (NCCL_TEST_FAILED, NCCL_TEST_WRONG_RESULTS)

PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        id="nccltests.nccl_failure",
        code=NCCL_TEST_FAILED.code,
        severity=ERROR,
        needle="Test NCCL failure",
        regex=r"(?:(?<![\w.-])(?P<host>[\w.-]{1,255}): )?Test NCCL failure (?P<loc>[\w./-]{1,200}:\d{1,6}) '"
              r"(?!unhandled system error|remote process exited)(?P<error>[^'\n]{0,300}?)"
              r"(?: / (?P<last>[^'\n]{0,300}))?'",
        subject="{where}",
        message="nccl-tests stopped{on}: an NCCL call at {loc} failed with '{error}'{last_note}.",
        meaning="The test measured nothing from there on; the NCCL error before it in the log (if any) is the reason.",
        fix="Read the NCCL WARN lines before it (rerun with NCCL_DEBUG=INFO if there are none): they name the cause.",
        ref="NVIDIA/nccl-tests src/common.h NCCLCHECK `%s: Test NCCL failure %s:%d '%s / %s'`; "
            "https://github.com/NVIDIA/nccl-tests/issues/219, https://github.com/NVIDIA/nccl-tests/issues/275",
        examples=(
            "fengyun: Test NCCL failure common.cu:959 'internal error - please report this issue to the NCCL "
            "developers / '",
            "Test NCCL failure common.cu:1012 'internal error - please report this issue to the NCCL developers / '",
        ),
        # 'unhandled system error' and 'remote process exited' have rows of their own (kb/nccl.py).
        # A symptom: the NCCL WARN that explains it comes before it, or right after it when ranks' output
        # interleaves (kubernetes-sigs/dra-driver-nvidia-gpu#957); alone, it leads.
        symptom=True,
        derive=lambda g: {
            "where": g.get("host") or "nccl-tests",
            "on": f" on {g['host']}" if g.get("host") else "",
            "last_note": f" (last NCCL error: {g['last'].strip()})" if (g.get("last") or "").strip() else "",
        },
    ),
    Pattern(
        id="nccltests.cuda_failure",
        code=NCCL_CUDA_FAILED.code,
        severity=ERROR,
        needle="Test CUDA failure",
        regex=r"(?:(?<![\w.-])(?P<host>[\w.-]{1,255}): )?Test CUDA failure (?P<loc>[\w./-]{1,200}:\d{1,6}) '(?P<what>[^'\n]{1,200})'",
        subject="CUDA",
        message="nccl-tests' call to CUDA failed{on} at {loc}: {what}. {cuda_fix}",
        meaning="The test stopped before NCCL ran; the fabric was not tested. `invalid device ordinal` with nccl-tests is "
                "most often its launch: each process opens -g GPUs, so ranks per host times -g must not exceed the "
                "host's GPUs (`mpirun --host a:8 ... -g 1`, or `--host a:1 ... -g 8`).",
        fix="Follow what the message says for this CUDA error; for nccl-tests launched by mpirun, one process per GPU "
            "with `-g 1`.",
        ref="NVIDIA/nccl-tests src/common.h CUDACHECK `%s: Test CUDA failure %s:%d '%s'`; "
            "https://github.com/NVIDIA/nccl-tests/issues/263",
        examples=("g0010: Test CUDA failure common.cu:941 'invalid device ordinal'",),
        derive=lambda g: {**_cuda(g), "on": f" on {g['host']}" if g.get("host") else ""},
    ),
    Pattern(
        id="nccltests.out_of_bounds",
        code=NCCL_TEST_WRONG_RESULTS.code,
        severity=ERROR,
        needle="Out of bounds values",
        regex=r"Out of bounds values ?: ?(?P<count>[1-9]\d{0,18}) FAILED",
        subject="nccl-tests",
        message="nccl-tests found {count} wrong values in the results (`Out of bounds values : {count} FAILED`): the "
                "collectives completed but the data is corrupt.",
        meaning="Training on these GPUs and links would silently compute with wrong gradients.",
        fix="Isolate the path that corrupts (one host alone, then NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1, "
            "NCCL_NET_GDR_LEVEL=LOC), check ACS and the IOMMU, run dcgmi diag -r 3; update NCCL and the net plugin.",
        ref="NVIDIA/nccl-tests src/common.cu `# Out of bounds values : %d %s`; "
            "https://github.com/NVIDIA/nccl-tests/issues/7, https://github.com/NVIDIA/nccl-tests/issues/131",
        examples=("# Out of bounds values : 248 FAILED", " Out of bounds values : 2 FAILED"),
    ),
)
