"""NVSHMEM (DeepEP and other expert-parallel kernels, PyTorch's symmetric memory): its transports.

NVSHMEM prints ``<file>:<function>:<line>: <message>`` from its transport modules
(src/modules/transport/ibrc, ibgda, ibdevx). Strings checked against NVIDIA/nvshmem 2.x .. 3.x and
the issues named in each ``ref``.
"""

from __future__ import annotations

from rdmadoctor.core.codes.mpi import (
    NVSHMEM_IBGDA_RESOURCE_FAILED,
    NVSHMEM_IBGDA_UNAVAILABLE,
)
from rdmadoctor.core.model import ERROR, WARNING
from rdmadoctor.logs.kb import Pattern

CODES = (NVSHMEM_IBGDA_UNAVAILABLE, NVSHMEM_IBGDA_RESOURCE_FAILED)
IB_QP_CONNECT_FAILED = "IB_QP_CONNECT_FAILED"

# The node check's code for the same fact (checks/kernel.py), named by string (the logs layer is below the checks).
GDR_PEERMEM_MISSING = "GDR_PEERMEM_MISSING"

PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        id="nvshmem.ibgda_rtr",
        code=IB_QP_CONNECT_FAILED,
        severity=ERROR,
        needle="mlx5dv_devx_obj_modify for INIT2RTR",
        regex=r"Error in mlx5dv_devx_obj_modify for INIT2RTR_QP with syndrome (?P<syndrome>[0-9a-fx]{1,10})",
        subject="IBGDA QP",
        message="NVSHMEM's IBGDA could not move a queue pair to ready-to-receive (syndrome {syndrome}): the address "
                "it uses for the peer does not work from this port; on RoCE, the GID index or traffic class.",
        meaning="NVSHMEM cannot connect its GPU-initiated queues: DeepEP's setup fails (`nvshmem setup connections "
                "failed`).",
        fix="On RoCE set NVSHMEM_IB_GID_INDEX to the RoCE v2 IPv4 GID `show_gids` lists (the same on every host) and "
            "NVSHMEM_IB_TRAFFIC_CLASS to the lossless class the switches use; check the ports are ACTIVE; in a pod with "
            "an SR-IOV VF, that the VF's netdev has its address.",
        ref="NVIDIA/nvshmem src/modules/transport/ibgda/ibgda.cpp ibgda_rc_init2rtr `Error in mlx5dv_devx_obj_modify "
            "for INIT2RTR_QP with syndrome %x`; https://github.com/deepseek-ai/DeepEP/issues/17",
        examples=("/root/nvshmem_src/src/modules/transport/ibgda/ibgda.cpp:1345: non-zero status: 121 Error in "
                  "mlx5dv_devx_obj_modify for INIT2RTR_QP with syndrome 29e0df",),
    ),
    Pattern(
        id="nvshmem.ibgda_uar",
        code=NVSHMEM_IBGDA_UNAVAILABLE.code,
        severity=WARNING,
        needle="GPU cannot map UAR of device",
        regex=r"GPU cannot map UAR of device (?P<dev>[\w-]{1,64})",
        subject="{dev}",
        message="The GPU could not map the doorbell pages (UAR) of {dev} (cudaHostRegister with IoMemory failed): "
                "the NVIDIA driver allows that only with PeerMappingOverride=1; IBGDA skips the device.",
        meaning="IBGDA falls back to the CPU path for that device, or has no device at all: DeepEP's low-latency "
                "kernels run slowly or fail.",
        fix="`options nvidia NVreg_RegistryDwords=\"PeerMappingOverride=1;\"` in /etc/modprobe.d, reload the driver "
            "(or reboot), and check with `grep RegistryDwords /proc/driver/nvidia/params`.",
        ref="NVIDIA/nvshmem src/modules/transport/ibgda/ibgda.cpp ibgda_alloc_and_map_qp_uar `GPU cannot map UAR of "
            "device %s. Skipping...`; https://github.com/deepseek-ai/DeepEP/issues/163",
        examples=("WARN: GPU cannot map UAR of device mlx5_0. Skipping...",),
    ),
    Pattern(
        id="nvshmem.ibgda_not_mlx5",
        code=NVSHMEM_IBGDA_UNAVAILABLE.code,
        severity=WARNING,
        needle="is not enumerated as an mlx5 device",
        regex=r"device (?P<dev>[\w.-]{1,64}) is not enumerated as an mlx5 device",
        subject="{dev}",
        message="{dev} is not an mlx5 (NVIDIA/Mellanox) device: IBGDA works only with mlx5 NICs and skips it.",
        meaning="With no mlx5 device IBGDA has nothing to use: DeepEP's low-latency mode cannot run on this NIC.",
        fix="Use NVSHMEM's IBRC or UCX transport (NVSHMEM_IB_ENABLE_IBGDA=0, DeepEP's normal kernels) on this NIC, or "
            "run on nodes with ConnectX NICs.",
        ref="NVIDIA/nvshmem src/modules/transport/ibgda/ibgda.cpp nvshmemt_init `device %s is not enumerated as an mlx5 "
            "device. Skipping...`; https://github.com/deepseek-ai/DeepEP/issues/202",
        examples=("WARN: device erdma_0 is not enumerated as an mlx5 device. Skipping...",),
    ),
    Pattern(
        id="nvshmem.ibgda_buffer",
        code=NVSHMEM_IBGDA_UNAVAILABLE.code,
        severity=WARNING,
        needle="cannot allocate buffer on the specified memory type",
        regex=r"device (?P<dev>[\w.-]{1,64}) cannot allocate buffer on the specified memory type",
        subject="{dev}",
        message="IBGDA could not place its buffers for {dev} in GPU memory registered with the HCA (no nvidia_peermem "
                "and no DMA-BUF for GPU memory): it skips the device.",
        meaning="With every device skipped IBGDA has no NIC: DeepEP's low-latency kernels fail or fall back.",
        fix="`modprobe nvidia-peermem` (or a driver and kernel with DMA-BUF, CUDA 12+); then rerun.",
        ref="NVIDIA/nvshmem src/modules/transport/ibgda/ibgda.cpp `device %s cannot allocate buffer on the specified "
            "memory type. Skipping...`; https://github.com/deepseek-ai/DeepEP/issues/128",
        examples=("WARN: device mlx5_0 cannot allocate buffer on the specified memory type. Skipping...",),
    ),
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
    Pattern(
        id="nvshmem.ibgda_devx_resource",
        code=NVSHMEM_IBGDA_RESOURCE_FAILED.code,
        severity=ERROR,
        needle="Unable to create ",
        # NVSHMEM prints `<file>:<line>: NULL value <msg>` for a call that returned no object (nvshmemx_error.h).
        regex=r"ibgda\.cpp:\d{1,6}: NULL value (?P<what>Unable to create (?:CQ|QP for EP|ah))\.",
        subject="IBGDA",
        message="NVSHMEM's IBGDA transport could not create a device-level resource on the NIC (`{what}`): its "
                "GPU-initiated queues are not set up.",
        meaning="NVSHMEM init fails (`nvshmem setup connections failed`): DeepEP's internode and low-latency kernels "
                "cannot run on this node.",
        fix="Raise memlock (`ulimit -l unlimited`), load nvidia_peermem or use DMA-BUF, run fewer PEs or QPs per NIC "
            "(NVSHMEM_IBGDA_NUM_RC_PER_PE); `Unable to create ah`: check the RoCE GID (NVSHMEM_IB_GID_INDEX).",
        ref="NVIDIA/nvshmem src/modules/transport/ibgda/ibgda.cpp (ibgda_create_cq "
            "`Unable to create CQ.`; ibgda_create_qp `Unable to create QP for EP.`; ibgda_create_dct_shared_objects "
            "`Unable to create ah.`); https://github.com/NVIDIA/nvshmem/issues/33 (B300 + CX8)",
        examples=(
            "/dvs/p4/build/sw/rel/gpgpu/toolkit/r12.9/main_nvshmem/src/modules/transport/ibgda/ibgda.cpp:2234: NULL value "
            "Unable to create ah.",
            "/root/nvshmem_src/src/modules/transport/ibgda/ibgda.cpp:2236: NULL value Unable to create QP for EP.",
        ),
    ),
    Pattern(
        id="nvshmem.devx_uar",
        code=NVSHMEM_IBGDA_RESOURCE_FAILED.code,
        severity=ERROR,
        needle="cannot allocate mlx5dv_devx_uar",
        # NVSHMEMI_NULL_ERROR_JMP: `<file>:<line>: NULL value <msg>` (ibgda.cpp, and ibdevx.cpp for its QPs).
        regex=r"(?P<transport>ibgda|ibdevx)\.cpp:\d{1,6}: NULL value cannot allocate mlx5dv_devx_uar",
        subject="{transport} UAR",
        message="NVSHMEM's {transport} transport could not allocate a doorbell page (UAR) through mlx5's DevX interface "
                "(mlx5dv_devx_alloc_uar returned nothing): its GPU-initiated queues cannot be made on this NIC.",
        meaning="NVSHMEM init fails for that transport: DeepEP's low-latency kernels (IBGDA) cannot run; a container "
                "that works only when run privileged is the usual case.",
        fix="Give the container what DevX needs (the RDMA devices with their uverbs nodes, IPC_LOCK and CAP_NET_RAW, or "
            "run it privileged to confirm) and `ulimit -l unlimited`; otherwise NVSHMEM_IB_ENABLE_IBGDA=0 uses IBRC.",
        ref="NVIDIA/nvshmem src/modules/transport/ibgda/ibgda.cpp ibgda_alloc_and_map_qp_uar, ibdevx.cpp "
            "(`cannot allocate mlx5dv_devx_uar`, NVSHMEMI_NULL_ERROR_JMP); https://github.com/sgl-project/sglang/issues/12533 "
            "(GB200 CI runner, fine with --privileged)",
        examples=("/opt/nvshmem/nvshmem/src/modules/transport/ibgda/ibgda.cpp:1889: NULL value cannot allocate "
                  "mlx5dv_devx_uar",),
    ),
)
