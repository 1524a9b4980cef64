"""The nodes: the shipped examples (an HGX H100, a RoCE node, a misconfigured pod) and the
scenario fixtures, each one fault away from a small healthy node."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Callable

from rdmadoctor.fixturegen.model import (
    BASE_PACKAGES,
    CAP_ALL,
    CAP_DEFAULT,
    CAP_DEFAULT_IPC_LOCK,
    KIB,
    MIB,
    Gpu,
    Hca,
    NetIf,
    Node,
    Pcie,
    Port,
    down_port,
    ib_port,
    iwarp_port,
    roce_port,
)
from rdmadoctor.fixturegen.sysfs import ACS_CMPLT_REDIR, ACS_REQ_REDIR, ACS_SRC_VALID, build
from rdmadoctor.fixturegen.tools import with_tool_outputs

NCCL_IB_HCA_8 = "=" + ",".join(f"mlx5_{i}" for i in range(8))


def hgx_h100_ib(vfs_total: int = 0) -> Node:
    """DGX/HGX H100: 8 GPUs, each behind one PCIe switch with its CX-7 (PIX), 4 per socket,
    plus a dual-port CX-7 (two functions, one card) for storage on socket 1, last on the bus so
    the kernel names it mlx5_8 and mlx5_9 (names follow PCI probe order).
    ``vfs_total`` spreads SR-IOV VFs over the 8 compute PFs (the benchmark's big node)."""
    gpus, hcas = [], []
    for i in range(8):
        at = Pcie(numa=i // 4, host_bridge=f"hb{i}", root_port=f"rp{i}", switch=f"sw{i}")
        gpus.append(Gpu(at=at))
        vfs = vfs_total // 8 + (1 if i < vfs_total % 8 else 0)
        hcas.append(Hca(f"mlx5_{i}", at=replace(at), ports=[ib_port()], vfs=vfs))
    storage = Pcie(numa=1, host_bridge="hb-storage", root_port="rp-storage", slot="storage")
    hcas.append(Hca("mlx5_8", at=storage, ports=[ib_port()]))
    hcas.append(Hca("mlx5_9", at=replace(storage), ports=[ib_port()]))
    return Node(
        hostname="hgx-h100-017",
        gpus=gpus,
        hcas=hcas,
        env={
            "NCCL_IB_HCA": NCCL_IB_HCA_8,
            "NCCL_SOCKET_IFNAME": "eth0",
            "NCCL_DEBUG": "WARN",
            "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
        },
        in_container=True,
        cap_eff=CAP_DEFAULT_IPC_LOCK,
    )


def roce_node() -> Node:
    """4 GPUs, 4 single-port CX-7 in Ethernet mode (RoCE v2, 200G, MTU 9000), 2 per socket."""
    gpus, hcas = [], []
    for i in range(4):
        at = Pcie(numa=i // 2, host_bridge=f"hb{i}", root_port=f"rp{i}", switch=f"sw{i}")
        gpus.append(Gpu(at=at))
        hcas.append(Hca(f"mlx5_{i}", at=replace(at), ports=[roce_port(f"10.{i}.0.17")]))
    return Node(
        hostname="roce-node-03",
        gpus=gpus,
        hcas=hcas,
        env={
            "NCCL_IB_HCA": "=" + ",".join(f"mlx5_{i}" for i in range(4)),
            "NCCL_IB_GID_INDEX": "3",
            "NCCL_SOCKET_IFNAME": "eth0",
        },
        in_container=True,
        cap_eff=CAP_DEFAULT_IPC_LOCK,
    )


def broken_pod() -> Node:
    """A pod on an 8-GPU IB node, started without the settings RDMA needs; one cable out."""
    node = hgx_h100_ib()
    node.hostname = "trainer-7f9c4-0"
    node.hcas[3].ports = [down_port()]
    node.memlock_soft = node.memlock_hard = 64 * KIB
    node.cap_eff = CAP_DEFAULT
    node.shm_size, node.shm_free = 64 * MIB, 64 * MIB
    node.env = {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "INFO"}
    return node


def _small_ib(numa_split: bool = True) -> Node:
    """2 GPUs and 2 NDR HCAs, each pair behind one switch, one pair per socket."""
    gpus, hcas = [], []
    for i in range(2):
        at = Pcie(numa=i if numa_split else 0, host_bridge=f"hb{i}", root_port=f"rp{i}", switch=f"sw{i}")
        gpus.append(Gpu(at=at))
        hcas.append(Hca(f"mlx5_{i}", at=replace(at), ports=[ib_port()]))
    return Node(
        hostname="ib-node-01",
        gpus=gpus,
        hcas=hcas,
        env={"NCCL_IB_HCA": "=mlx5_0,mlx5_1", "NCCL_SOCKET_IFNAME": "eth0"},
        cap_eff=CAP_ALL,
    )


def _roce() -> Node:
    node = roce_node()
    node.gpus, node.hcas = node.gpus[:2], node.hcas[:2]
    node.gpus[1].at.numa = node.hcas[1].at.numa = 1
    node.env["NCCL_IB_HCA"] = "=mlx5_0,mlx5_1"
    node.hostname = "roce-node-01"
    return node


def _port_down() -> Node:
    node = _small_ib()
    node.hcas[1].ports = [down_port()]
    return node


def _port_init_no_sm() -> Node:
    node = _small_ib()
    for h in node.hcas:
        h.ports = [Port(state="INIT", phys_state="LinkUp", lid=0, sm_lid=0)]
    return node


def _no_provider() -> Node:
    # rdma-core's libibverbs1 alone: the kernel side works, but no userspace driver for mlx5.
    node = _small_ib()
    node.packages = {**BASE_PACKAGES, "libibverbs1": "44.0-2", "librdmacm1": "44.0-2"}
    node.verbs_drivers = []
    node.providers = []
    return node


def _memlock_64k() -> Node:
    # A container with the runtime's default capabilities (no IPC_LOCK) and a 64 KiB memlock
    # limit, as on many nodes: RDMA registrations fail.
    node = _small_ib()
    node.memlock_soft = node.memlock_hard = 64 * KIB
    node.cap_eff = CAP_DEFAULT
    return node


def _memlock_64k_ipc_lock() -> Node:
    # The recipe users follow: the same limit (Kubernetes has no ulimit field), IPC_LOCK added to
    # the container. The kernel does not apply RLIMIT_MEMLOCK to its RDMA registrations.
    node = _memlock_64k()
    node.cap_eff = CAP_DEFAULT_IPC_LOCK
    return node


def _shm_64m() -> Node:
    node = _small_ib()
    node.shm_size, node.shm_free = 64 * MIB, 64 * MIB
    return node


def _gpu_far() -> Node:
    # Both HCAs on socket 0, both GPUs on socket 1: every GPU <-> HCA path crosses the UPI link.
    node = _small_ib()
    for i, h in enumerate(node.hcas):
        h.at = Pcie(numa=0, host_bridge=f"hb-nic{i}", root_port=f"rp-nic{i}")
    for i, g in enumerate(node.gpus):
        g.at = Pcie(numa=1, host_bridge=f"hb-gpu{i}", root_port=f"rp-gpu{i}")
    return node


def _dual_port_port2_down() -> Node:
    # A ConnectX-3 VPI: one device, two ports (ports/1 and ports/2), only the first cabled.
    at = Pcie(numa=0, host_bridge="hb0", root_port="rp0", gen=3, width=8, max_width=8)
    return Node(
        hostname="ib-fdr-07",
        gpus=[],
        hcas=[Hca("mlx4_0", at=at, model="cx3", ports=[ib_port("56 Gb/sec (4X FDR)"), down_port()])],
        numa_cpus={0: "0-15"},
        env={"NCCL_IB_HCA": "mlx4_0:1", "NCCL_SOCKET_IFNAME": "eth0"},
        cap_eff=CAP_ALL,
    )


def _sriov() -> Node:
    node = _small_ib()
    node.hcas[0].vfs = 4
    return node


def _no_devices() -> Node:
    node = _small_ib()
    node.hcas = []
    node.env = {"NCCL_SOCKET_IFNAME": "eth0"}
    return node


def _acs_redirect() -> Node:
    # The kernel turns ACS redirect on when the IOMMU is on: GPU0 <-> mlx5_0 P2P goes up to the CPU.
    node = _small_ib()
    node.acs_ctrl = {"sw0": ACS_SRC_VALID | ACS_REQ_REDIR | ACS_CMPLT_REDIR}
    return node


def _pcie_degraded() -> Node:
    # mlx5_1 trained at Gen4 x8 in a Gen5 x16 slot: a quarter of the bandwidth a 400G port needs.
    node = _small_ib()
    node.hcas[1].at.gen, node.hcas[1].at.width = 4, 8
    return node


def _roce_mtu_1500() -> Node:
    # The netdevs kept the default MTU: RoCE runs with 1024-byte packets.
    node = _roce()
    for h in node.hcas:
        for p in h.ports:
            p.netdev_mtu = 1500
    return node


def _node_labels_stale() -> Node:
    # The port went down after the agent last labelled the node ready.
    node = _port_down()
    labels = {
        "feature.node.kubernetes.io/network-rdma.capable": "true",
        "rdmadoctor.io/link-layer": "infiniband",
        "rdmadoctor.io/active-ports": "2",
        "rdmadoctor.io/min-rate-gbps": "400",
        "rdmadoctor.io/ready": "true",
        "rdmadoctor.io/gpudirect": "true",
        "rdmadoctor.io/gpu-nic": "PIX",
        "kubernetes.io/hostname": node.hostname,
    }
    obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node.hostname, "labels": labels}}
    node.cmds["node.json"] = json.dumps(obj, indent=4, sort_keys=True) + "\n"
    return node


def _iwarp_cxgb4() -> Node:
    """2 GPUs and a Chelsio T62100-CR (2x100G iWARP, cxgb4_0) behind one PCIe switch, each
    port's netdev with an address; the job trains over TCP sockets on purpose on the RNIC's first
    netdev (NCCL_IB_DISABLE=1), which is right for iWARP: NCCL's IB transport cannot connect it."""
    at = Pcie(numa=0, host_bridge="hb0", root_port="rp0", switch="sw0")
    gpus = [Gpu(at=replace(at), model="a100") for _ in range(2)]
    rnic = Hca(
        "cxgb4_0",
        at=replace(at),
        model="t62100",
        ports=[iwarp_port("enp129s0f4", "10.40.0.21"), iwarp_port("enp129s0f4d1", "10.40.1.21")],
    )
    return Node(
        hostname="iwarp-node-01",
        gpus=gpus,
        hcas=[rnic],
        env={"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "=enp129s0f4", "NCCL_DEBUG": "INFO"},
        in_container=True,
        cap_eff=CAP_DEFAULT_IPC_LOCK,
        netifs=[NetIf("eth0", speed=10000, ipv4="172.16.3.21"), NetIf("lo", "unknown", 65536)],
        record_interfaces=True,
    )


def _iwarp_nccl_ib() -> Node:
    # The same node, with the NCCL settings of a RoCE cluster: NET/IB would take cxgb4_0.
    node = _iwarp_cxgb4()
    node.env = {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_GID_INDEX": "3", "NCCL_DEBUG": "INFO"}
    return node


def _iwarp_no_ipv4() -> Node:
    # The second port's netdev has a carrier and no IPv4 address: the kernel keeps the port in INIT.
    node = _iwarp_cxgb4()
    node.hcas[0].ports[1] = iwarp_port("enp129s0f4d1", None)
    return node


def _tcp_pool() -> Node:
    """A pool that trains over TCP by design: 2 GPUs, no RDMA device, the pod's eth0 an elastic NIC
    given by the CNI (Terway ENI style) at 25 Gb/s with jumbo frames."""
    gpus = [Gpu(at=Pcie(numa=i, host_bridge=f"hb{i}", root_port=f"rp{i}", switch=f"sw{i}")) for i in range(2)]
    return Node(
        hostname="eni-node-04",
        gpus=gpus,
        hcas=[],
        env={"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "=eth0", "NCCL_DEBUG": "INFO"},
        in_container=True,
        cap_eff=CAP_DEFAULT,
        netifs=[NetIf("eth0", mtu=9000, speed=25000, ipv4="10.20.0.7"), NetIf("lo", "unknown", 65536)],
        record_interfaces=True,
    )


def _tcp_pool_slow() -> Node:
    # NCCL_SOCKET_IFNAME=eth is a prefix: it also takes the 1 Gb/s management NIC eth1, and NCCL
    # spreads its traffic over both.
    node = _tcp_pool()
    node.netifs.insert(1, NetIf("eth1", speed=1000, ipv4="192.168.10.7"))
    node.env["NCCL_SOCKET_IFNAME"] = "eth"
    return node


# `ibstat` of a ConnectX-3 VPI with ports 1 (FDR, active) and 2 (no cable), run in a container
# without /dev/infiniband/umad*: ibstat still reads sysfs but warns for every umad it cannot open.
IBSTAT_2PORT = """\
ibwarn: [412] umad_init: can't open UMAD port (mlx4_0:1)
CA 'mlx4_0'
	CA type: MT4099
	Number of ports: 2
	Firmware version: 2.42.5000
	Hardware version: 1
	Node GUID: 0x248a070300a1b2c0
	System image GUID: 0x248a070300a1b2c3
	Port 1:
		State: Active
		Physical state: LinkUp
		Rate: 56
		Base lid: 12
		LMC: 0
		SM lid: 1
		Capability mask: 0x02514868
		Port GUID: 0x248a070300a1b2c1
		Link layer: InfiniBand
ibwarn: [412] umad_get_port: can't open UMAD port (mlx4_0:2)
	Port 2:
		State: Down
		Physical state: Polling
		Rate: 10
		Base lid: 0
		LMC: 0
		SM lid: 0
		Capability mask: 0x02514868
		Port GUID: 0x248a070300a1b2c2
		Link layer: InfiniBand
"""

# ibstat printed two CAs and then aborted on the third (gpud PR #752 saw exactly this).
IBSTAT_TRUNCATED = """\
CA 'mlx5_0'
	CA type: MT4129
	Number of ports: 1
	Firmware version: 28.39.2048
	Hardware version: 0
	Node GUID: 0xa088c20300635a20
	System image GUID: 0xa088c20300635a20
	Port 1:
		State: Active
		Physical state: LinkUp
		Rate: 400
		Base lid: 26
		LMC: 0
		SM lid: 1
		Capability mask: 0xa751e848
		Port GUID: 0xa088c20300635a20
		Link layer: InfiniBand
CA 'mlx5_1'
	CA type: MT4129
	Number of ports: 1
	Firmware version: 28.39.2048
	Hardware version: 0
	Node GUID: 0xa088c20300635a38
	System image GUID: 0xa088c20300635a38
	Port 1:
		State: Active
		Physical state: LinkUp
		Rate: 400
		Base lid: 27
		LMC: 0
		SM lid: 1
		Capability mask: 0xa751e848
		Port GUID: 0xa088c20300635a38
		Link layer: InfiniBand
ibpanic: [2267] main: stat of IB device 'mlx5_2' failed: No such file or directory
"""


def _ibstat_only() -> Node:
    return Node(hostname="ticket-4711", sysfs=False, runtime=False, cmds={"ibstat": IBSTAT_2PORT})


def _truncated_ibstat() -> Node:
    return Node(hostname="ticket-4712", sysfs=False, runtime=False, cmds={"ibstat": IBSTAT_TRUNCATED})


EXAMPLES: dict[str, Callable[[], Node]] = {
    "hgx-h100-ib": hgx_h100_ib,
    "roce-node": roce_node,
    "broken-pod": broken_pod,
}

SCENARIOS: dict[str, Callable[[], Node]] = {
    "healthy-ib": _small_ib,
    "roce": _roce,
    "port-down": _port_down,
    "port-init-no-sm": _port_init_no_sm,
    "no-provider": _no_provider,
    "memlock-64k": _memlock_64k,
    "memlock-64k-ipc-lock": _memlock_64k_ipc_lock,
    "shm-64m": _shm_64m,
    "gpu-far": _gpu_far,
    "dual-port-port2-down": _dual_port_port2_down,
    "sriov": _sriov,
    "no-devices": _no_devices,
    "acs-redirect": _acs_redirect,
    "pcie-degraded": _pcie_degraded,
    "roce-mtu-1500": _roce_mtu_1500,
    "node-labels-stale": _node_labels_stale,
    "ibstat-only": _ibstat_only,
    "truncated-ibstat": _truncated_ibstat,
    "iwarp-cxgb4": _iwarp_cxgb4,
    "iwarp-nccl-ib": _iwarp_nccl_ib,
    "iwarp-no-ipv4": _iwarp_no_ipv4,
    "tcp-pool": _tcp_pool,
    "tcp-pool-slow": _tcp_pool_slow,
}


def example_tree(name: str) -> dict[str, Any]:
    # Shipped examples look like a `collect` bundle: sysfs plus the tools' own view of it.
    return build(with_tool_outputs(EXAMPLES[name]()))


def scenario_tree(name: str) -> dict[str, Any]:
    return build(SCENARIOS[name]())
