"""Build host trees (sysfs, procfs, /etc, /dev, runtime.json, cmd/) from a compact node description.

The trees are what probes read: the shipped examples, the scenario fixtures under
``tests/fixtures/``, the robustness tests' starting point and the benchmark's big node are all
made here, so a fixture never drifts from the layout the kernel really has.

A tree is a dict ``{"/sys/...": bytes | Link(target)}``; :func:`write_dir` writes it with real
relative symlinks, :func:`write_tar` as a deterministic ``.tar.gz`` (same input, same bytes).

    python -m rdmadoctor.fixturegen --examples                # rdmadoctor/examples/*.tar.gz
    python -m rdmadoctor.fixturegen --scenarios tests/fixtures
    python -m rdmadoctor.fixturegen --sriov 512 -o /tmp/big  # 8 GPUs, 10 HCAs, 512 VFs
    python -m rdmadoctor.fixturegen --pool 20 --odd 7 -o /tmp/pool  # 20 node roots, gpu-007 on other firmware

HCAs are ConnectX (``cx7``, ``cx6``, ``cx3``: InfiniBand or RoCE ports) or a Chelsio T6 iWARP RNIC
(``t62100``, ports from ``iwarp_port``); a node without HCAs with ``NetIf`` speeds and addresses is a
socket-only pool (``record_interfaces`` keeps the netlink view in runtime.json, as ``collect`` does).

One module per job: ``model`` (the description: Node, Hca, Port, Pcie, ...), ``sysfs`` (the
tree builder), ``tools`` (ibstat, ibdev2netdev, show_gids, nvidia-smi topo text rendered from
it), ``write`` (directories and tarballs), ``nodes`` (the examples and scenarios). This module
re-exports their public names and holds the command line.

Standard library only, so the fixtures can be regenerated from a bare checkout.
"""

from __future__ import annotations

import os

from rdmadoctor.fixturegen.model import (
    BASE_PACKAGES,
    CAP_ALL,
    CAP_DEFAULT,
    CAP_DEFAULT_IPC_LOCK,
    GIB,
    GPU_MODELS,
    HCA_MODELS,
    KIB,
    MIB,
    RDMA_PACKAGES,
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
from rdmadoctor.fixturegen.nodes import (
    EXAMPLES,
    IBSTAT_2PORT,
    IBSTAT_TRUNCATED,
    NCCL_IB_HCA_8,
    SCENARIOS,
    broken_pod,
    example_tree,
    hgx_h100_ib,
    roce_node,
    scenario_tree,
)
from rdmadoctor.fixturegen.sysfs import (
    ACS_CAP_ID,
    ACS_CAPS,
    ACS_CMPLT_REDIR,
    ACS_REQ_REDIR,
    ACS_SRC_VALID,
    GPU_MODULES,
    IB_MODULES,
    LIBDIR,
    PCIE_SPEED,
    PCIE_TYPE,
    PHYS_STATE_NUM,
    PORT_STATE_NUM,
    build,
    pci_layout,
)
from rdmadoctor.fixturegen.tools import (
    NVLINKS,
    ibdev2netdev_text,
    ibstat_text,
    nvidia_smi_topo_text,
    show_gids_text,
    with_tool_outputs,
)
from rdmadoctor.fixturegen.write import MTIME, read_dir, read_tar, tar_bytes, write_dir, write_tar

__all__ = [
    # model
    "KIB", "MIB", "GIB", "CAP_DEFAULT", "CAP_DEFAULT_IPC_LOCK", "CAP_ALL", "HCA_MODELS", "GPU_MODELS",
    "RDMA_PACKAGES", "BASE_PACKAGES", "Port", "ib_port", "down_port", "roce_port", "iwarp_port", "Pcie", "Hca", "Gpu",
    "NetIf", "Node",
    # sysfs
    "PORT_STATE_NUM", "PHYS_STATE_NUM", "PCIE_SPEED", "IB_MODULES", "GPU_MODULES", "LIBDIR", "PCIE_TYPE",
    "ACS_CAP_ID", "ACS_CAPS", "ACS_REQ_REDIR", "ACS_CMPLT_REDIR", "ACS_SRC_VALID", "build", "pci_layout",
    # tools
    "ibstat_text", "ibdev2netdev_text", "show_gids_text", "NVLINKS", "nvidia_smi_topo_text", "with_tool_outputs",
    # write
    "MTIME", "write_dir", "tar_bytes", "write_tar", "read_dir", "read_tar",
    # nodes
    "NCCL_IB_HCA_8", "hgx_h100_ib", "roce_node", "broken_pod", "IBSTAT_2PORT", "IBSTAT_TRUNCATED",
    "EXAMPLES", "SCENARIOS", "example_tree", "scenario_tree",
    # command line
    "examples_dir", "main",
]


def examples_dir() -> str:
    """Where the shipped example bundles live: the rdmadoctor.examples package, not beside this one."""
    from rdmadoctor.examples import HERE

    return HERE


# ---- command line ----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m rdmadoctor.fixturegen", description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", action="store_true", help="regenerate rdmadoctor/examples/*.tar.gz")
    ap.add_argument("--scenarios", metavar="DIR", help="regenerate the scenario fixture dirs under DIR")
    ap.add_argument("--sriov", type=int, metavar="N", help="the HGX node with N SR-IOV VFs, written to -o")
    ap.add_argument("--pool", type=int, metavar="N", help="a pool of N RoCE nodes (gpu-000 ...), one root each under -o")
    ap.add_argument("--odd", type=int, default=None, metavar="I", help="with --pool: node I has other HCA firmware (28.41.1000)")
    ap.add_argument("-o", "--output", metavar="PATH", help="directory (or .tar.gz) for --sriov; the pool's folder for --pool")
    args = ap.parse_args(argv)
    if not (args.examples or args.scenarios or args.sriov is not None or args.pool is not None):
        ap.error("give --examples, --scenarios DIR, --sriov N -o PATH or --pool N -o DIR")
    if args.pool is not None:
        from rdmadoctor.fixturegen.fleet import other_firmware, pool

        if not args.output or not 1 <= args.pool <= 10000:
            ap.error("--pool takes 1 to 10000 nodes and -o DIR")
        odd = {args.odd: other_firmware("28.41.1000")} if args.odd is not None else None
        for node in pool(args.pool, roce_node, odd=odd):
            write_dir(build(node), os.path.join(args.output, node.hostname))
        print(f"{args.output}: {args.pool} node roots")
    if args.examples:
        for name in EXAMPLES:
            dest = os.path.join(examples_dir(), f"{name}.tar.gz")
            write_tar(example_tree(name), dest)
            print(f"{dest}: {os.path.getsize(dest)} bytes")
    if args.scenarios:
        os.makedirs(args.scenarios, exist_ok=True)
        for name in SCENARIOS:
            dest = os.path.join(args.scenarios, name)
            tree = scenario_tree(name)
            write_dir(tree, dest)
            print(f"{dest}: {len(tree)} entries")
    if args.sriov is not None:
        if not args.output:
            ap.error("--sriov needs -o PATH")
        if args.sriov < 0 or args.sriov > 8 * 250:
            ap.error("--sriov: 0 to 2000 VFs")
        tree = build(hgx_h100_ib(vfs_total=args.sriov))
        if args.output.endswith((".tar.gz", ".tgz")):
            write_tar(tree, args.output)
        else:
            write_dir(tree, args.output)
        print(f"{args.output}: {len(tree)} entries")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
