"""nccl-tests (all_reduce_perf and the other *_perf binaries): how a test run says it failed.

Strings from NVIDIA/nccl-tests src/common.cu and src/common.h: ``%s: Test NCCL failure %s:%d '%s
/ %s'`` (NCCLCHECK, with the host name), `` .. %s pid %d: Test failure %s:%d`` and the summary lines
``# Out of bounds values : %d %s`` and ``# Avg bus bandwidth    : %g``.
"""

from __future__ import annotations

from rdmadoctor.core.model import CONFIG, ERROR, Code
from rdmadoctor.logs.kb import Pattern
from rdmadoctor.logs.kb.nccl import NCCL_CUDA_FAILED, _cuda

NCCL_TEST_FAILED = Code(
    "NCCL_TEST_FAILED",
    "An nccl-tests run stopped on an NCCL error",
    "nccl-tests (all_reduce_perf, ...) checks every NCCL call and stops the run at the first that fails, "
    "printing the host, the source line of the test and NCCL's error string. The error string is generic "
    "('internal error', 'unhandled system error', 'remote process exited'): the reason is in NCCL's WARN "
    "lines before it, which rdmadoctor reports as the cause when the log has them.",
    "Run the test again with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET (and NCCL_DEBUG_FILE=/tmp/nccl.%h.%p) and "
    "diagnose that log. NCCL 2.18 reported some aborts as 'internal error - please report this issue': update NCCL.",
    condition=CONFIG,
)
NCCL_TEST_WRONG_RESULTS = Code(
    "NCCL_TEST_WRONG_RESULTS",
    "nccl-tests found wrong results",
    "With validation on (-c 1, the default) nccl-tests compares every result buffer with the expected values; "
    "'Out of bounds values : N FAILED' counts the elements that differ. The collective completed but moved or "
    "reduced wrong data: corruption on a GPU, PCIe or NVLink path, broken GPUDirect RDMA (ACS or IOMMU "
    "redirecting peer traffic), or a bug in the NCCL version or a plugin.",
    "Find the pair that corrupts: rerun on each host alone (-g N on one node), then with NCCL_P2P_DISABLE=1, "
    "NCCL_SHM_DISABLE=1 or NCCL_NET_GDR_LEVEL=LOC to take one path out at a time; check ACS "
    "(`lspci -vvv | grep ACSCtl`) and the IOMMU; run the GPUs' own diagnostics (dcgmi diag -r 3).",
    condition=CONFIG,
)

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
