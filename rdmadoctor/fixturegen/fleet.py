"""Generated fleets: a pool of like nodes with one that differs (firmware, MTU), and counters that
move between the cycles of a written tree (grow, wrap at 32 bits, reset).

    nodes = pool(20, roce_node, odd={7: other_firmware("28.41.1000")})
    set_counters(root, "mlx5_0", 1, {"link_downed": 1})   # a flap, before the agent's next cycle
"""

from __future__ import annotations

import os
from typing import Callable

from rdmadoctor.fixturegen.model import Node

WRAP = 2**32


def pool(size: int, base: Callable[[], Node], odd: dict[int, Callable[[Node], None]] | None = None,
         hostname: str = "gpu-{:03d}") -> list[Node]:
    """``size`` nodes made by ``base()``, each with its own hostname; ``odd[i](node)`` changes node i."""
    out = []
    for i in range(size):
        node = base()
        node.hostname = hostname.format(i)
        if odd and i in odd:
            odd[i](node)
        out.append(node)
    return out


def other_firmware(fw_ver: str, hcas: tuple[int, ...] | None = None) -> Callable[[Node], None]:
    def change(node: Node) -> None:
        for i, hca in enumerate(node.hcas):
            if hcas is None or i in hcas:
                hca.fw_ver = fw_ver
    return change


def with_counters(node: Node, **values: int) -> Node:
    """Every port of ``node`` with these counters (and so the full counter set in sysfs)."""
    for hca in node.hcas:
        for port in hca.ports:
            port.counters = {**port.counters, **values}
    return node


def counter_path(root: str, device: str, port: int, name: str) -> str:
    base = os.path.join(root, "sys", "class", "infiniband", device, "ports", str(port))
    folder = "counters" if os.path.exists(os.path.join(base, "counters", name)) else "hw_counters"
    return os.path.join(base, folder, name)


def set_counters(root: str, device: str, port: int, values: dict[str, int]) -> None:
    """Write counter values into a tree written by write_dir (one time step)."""
    for name, value in values.items():
        with open(counter_path(root, device, port, name), "w") as f:
            f.write(f"{value % WRAP}\n")


def counter_steps(kind: str, steps: int, per_step: int = 1, start: int = 0) -> list[int]:
    """A counter's values over ``steps`` cycles: "grow" (by ``per_step`` a cycle), "wrap" (the same
    growth across the 32-bit boundary: starts ``per_step * steps // 2`` below it), "reset" (grows,
    then back to 0 halfway: a driver reload or reboot)."""
    if kind == "grow":
        return [start + per_step * i for i in range(steps)]
    if kind == "wrap":
        first = WRAP - per_step * (steps // 2)
        return [(first + per_step * i) % WRAP for i in range(steps)]
    if kind == "reset":
        half = steps // 2
        return [start + per_step * i for i in range(half)] + [per_step * i for i in range(steps - half)]
    raise ValueError(f"counter_steps: kind {kind!r} is not grow, wrap or reset")
