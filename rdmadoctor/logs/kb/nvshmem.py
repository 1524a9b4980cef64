"""NVSHMEM (DeepEP and other expert-parallel kernels, PyTorch's symmetric memory): its transports.

NVSHMEM prints ``<file>:<function>:<line>: <message>`` from its transport modules
(src/modules/transport/ibrc, ibgda, ibdevx). Strings checked against NVIDIA/nvshmem 2.x .. 3.x and
the issues named in each ``ref``.
"""

from __future__ import annotations

from rdmadoctor.core.model import ERROR
from rdmadoctor.logs.kb import Pattern

CODES = ()

# The node check's code for the same fact (checks/kernel.py), named by string (the logs layer is below the checks).
GDR_PEERMEM_MISSING = "GDR_PEERMEM_MISSING"

PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        id="nvshmem.no_peermem",
        code=GDR_PEERMEM_MISSING,
        severity=ERROR,
        needle="nvidia_peermem detected",
        regex=r"neither nv_peer_mem, or nvidia_peermem detected(?:\. Skipping transport)?",
        subject="nvidia_peermem",
        message="NVSHMEM found no GPUDirect RDMA peer-memory module (neither nv_peer_mem nor nvidia_peermem) and skipped "
                "its InfiniBand transport (ibrc); GPU memory cannot be registered with the HCA.",
        meaning="NVSHMEM has no inter-node transport: DeepEP's internode and low-latency kernels fail to initialise.",
        fix="`modprobe nvidia-peermem` on the host (it ships with the NVIDIA driver >= 470) and persist it; with the GPU "
            "Operator set driver.rdma.enabled=true. NVSHMEM looks for /sys/kernel/mm/memory_peers/nv_mem/version (older "
            "NVSHMEM misses a loaded nvidia_peermem that does not create it: upgrade NVSHMEM, or use IBGDA).",
        ref="NVIDIA/nvshmem src/modules/transport/ibrc/ibrc.cpp nvshmemt_init; "
            "https://github.com/deepseek-ai/DeepEP/issues/55, https://github.com/deepseek-ai/DeepEP/pull/151",
        examples=(
            "/home/nvshmem_src/src/modules/transport/ibrc/ibrc.cpp:nvshmemt_init:1851: neither nv_peer_mem, or "
            "nvidia_peermem detected. Skipping transport.",
        ),
    ),
)
