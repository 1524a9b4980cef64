"""Bundles shipped with rdmadoctor, so a newcomer sees a full report on a laptop.

Each is a ``<name>.tar.gz`` beside this file, made by ``python -m rdmadoctor.fixturegen
--examples`` (a test checks the shipped files match what the generator makes).
"""

from __future__ import annotations

import os

HERE = os.path.dirname(os.path.abspath(__file__))

EXAMPLES: dict[str, str] = {
    "hgx-h100-ib": "Healthy 8-GPU H100-class node, 8x 400 Gb/s NDR InfiniBand (one HCA per GPU behind the same PCIe switch) plus a storage NIC. Use --profile hgx-8gpu-ndr.",
    "roce-node": "4-GPU node with ConnectX-7 RoCE v2 ports at 200 Gb/s, MTU 9000.",
    "broken-pod": "A pod on an IB node that cannot train well: 64 MiB /dev/shm, memlock 64 KiB, no IPC_LOCK, one port down.",
}


class UnknownExample(Exception):
    pass


def example_path(name: str) -> str:
    path = os.path.join(HERE, f"{name}.tar.gz")
    if name not in EXAMPLES or not os.path.isfile(path):
        raise UnknownExample(f"no example named {name!r}; `rdmadoctor examples` lists them: {', '.join(EXAMPLES)}")
    return path
