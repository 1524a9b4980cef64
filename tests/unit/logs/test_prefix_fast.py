"""prefix.split's fast path for NCCL's own prefix (``_own_nccl``) answers as its general path does.

Every line of the fixture logs and of ../shared/realworld, and random lines built around NCCL's
prefix (hosts with dots, digits first, ISO-like hosts, placeholders, wrappers before it, long
hosts, locations, levels, ranks), are split with and without the fast path: the same message and
the same Meta, and the fast path takes the lines it is for.
"""

from __future__ import annotations

import os
import random

import pytest

from rdmadoctor.logs import prefix

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _general(line: str):
    """split's answer without the fast path."""
    fast = prefix._own_nccl
    prefix._own_nccl = lambda _line: None
    try:
        return prefix.split(line)
    finally:
        prefix._own_nccl = fast


def _fixture_lines():
    roots = [os.path.join(ROOT, "tests", "fixtures", d) for d in ("logs", "frames", "silent", "heldout")]
    roots.append(os.path.join(ROOT, "..", "shared", "realworld"))
    for r in roots:
        for dp, _, files in os.walk(r):
            for f in sorted(files):
                path = os.path.join(dp, f)
                try:
                    with open(path, "rb") as fh:
                        data = fh.read(1 << 20)
                except OSError:
                    continue
                if data[:2] == b"\x1f\x8b":
                    import gzip

                    try:
                        data = gzip.decompress(data)[:1 << 20]
                    except (OSError, EOFError):
                        continue
                yield from data.decode("utf-8", "replace").splitlines()


def _random_lines(n: int):
    rnd = random.Random(30)
    hosts = ["gpu-node-007", "vm", "a", "node.example.com", "2024-05-01T12", "host_1", "H100-x", "é-node",
             "x" * 254, "x" * 255, "x" * 256, "INFO", "ERROR", "rank3", "default3", "log.txt", "[pod-name]", "<cluster>",
             "DEBUG 03-23", "(pid=12)", "1node", "-node", "_node"]
    pids = ["12", "XXXX", "1234567890", "", "abc"]
    devs = ["0", "-1", "12345", "dev", "x" * 17]
    locs = ["", "init.cc:42 ", "transport/net_ib.cc:1703 ", "misc/socket.cc:505 ", "a.b:1234567 "]
    levels = ["NCCL INFO", "NCCL WARN", "NCCL TRACE", "NCCL ABORT", "INFO", "WARN", "NCCL INFOX", "NCCL DEBUG"]
    msgs = ["", "NET/IB : Using [0]mlx5_0:1/IB", "comm 0x1 rank 3 nRanks 8 nNodes 1", "rank 5 nranks 8",
            "[Rank 3] Watchdog", "  spaced  ", "Cuda Alloc Size 1152 pointer 0x7fcc2c000000",
            "x" * 2000 + " rank 4"]
    befores = ["", "", "", "[rank3]:", "[1,3]<stderr>:", "2024-05-01T12:00:00Z ", "[pod/a/b] ", " ", "\t",
               "[2024-05-01 12:00:00] ", "(pid=5) "]
    for _ in range(n):
        tid = rnd.choice(["", ":" + rnd.choice(pids)])
        yield (f"{rnd.choice(befores)}{rnd.choice(hosts)}:{rnd.choice(pids)}{tid} [{rnd.choice(devs)}] "
               f"{rnd.choice(locs)}{rnd.choice(levels)}{rnd.choice([' ', '', '  '])}{rnd.choice(msgs)}")


def test_fast_path_answers_as_the_general_path():
    taken = 0
    lines = list(_fixture_lines()) + list(_random_lines(20000))
    for line in lines:
        got = prefix.split(line)
        assert got == _general(line), line
        taken += prefix._own_nccl(line) is not None
    assert taken > 500  # the fast path takes NCCL's own lines (~900 without ../shared)


@pytest.mark.parametrize("line", [
    "gpu-7:12:34 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB",
    "vm:438:438 [0] NCCL INFO channel.cc:42 Cuda Alloc Size 608 pointer 0x7fc142000000",
    "host-01:2870:2901 [5] transport/net_ib.cc:1703 NCCL WARN NET/IB : Got completion",
])
def test_fast_path_takes_nccls_own_lines(line):
    assert prefix._own_nccl(line) is not None
    assert prefix.split(line) == _general(line)


@pytest.mark.parametrize("line", [
    "node.example.com:12:34 [3] NCCL INFO x",  # a dot: a file name's (grep -r) may stand there
    "2024-05-01T12:00:00Z host:1:2 [0] NCCL INFO x",  # a wrapper first
    "[rank3]:host:1:2 [0] NCCL INFO x",
])
def test_other_lines_take_the_general_path(line):
    assert prefix._own_nccl(line) is None
