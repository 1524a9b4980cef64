"""The hosts of a block's channel lines found from their words (nccl._channel_line_hosts, for a block
with few of them) are those the pattern over every line finds (nccl._line_hosts), as many, and the
count of their words is bytes.count's: random blocks of NCCL channel lines among others, prefixed
ones, a line with both words, the first line."""

from __future__ import annotations

import random

from rdmadoctor.logs import nccl


def _block(rnd: random.Random) -> bytes:
    hosts = ["gpu-1", "gpu-2", "vm", "node.a", "x" * 255, "x" * 256, "h_1", ""]
    lines = []
    for _ in range(rnd.randint(0, 60)):
        h = rnd.choice(hosts)
        p = f"{h}:{rnd.randint(1, 99)}:{rnd.randint(1, 99)} [{rnd.choice(['0', '-1', 'dev', '12345'])}] "
        lines.append(rnd.choice([
            f"{p}NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
            f"{p}INFO Channel 00/24 :    0   1",
            f"{p}NCCL INFO Ring 00 : 0 1",
            f"{p}NCCL INFO Channel 01/0 : x INFO Ring 01 : y INFO Channel ",
            f"[pod/a/b] {p}NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/IB/0",
            f"{p}NCCL INFO Connected all rings INFO Channel ",
            f"{p}NCCL INFO Cuda Alloc Size 4 pointer 0x7f",
            "step 4 | loss 2.3 INFO Ring 4",
            "",
            f"{p}NCCL  INFO Channel 00",
        ]))
    text = "\n".join(lines)
    if rnd.random() < 0.8:
        text += "\n"
    if rnd.random() < 0.1:
        text = "\n" + text
    return text.encode()


def test_channel_line_hosts_match_the_line_pattern():
    rnd = random.Random(30)
    for _ in range(5000):
        b = _block(rnd)
        got = nccl._channel_line_hosts(b, 1 << 20)
        assert got is not None
        want = nccl._line_hosts(nccl._CHANNEL_HOST_LINE, b)
        assert sorted(got[0]) == sorted(want), b
        assert got[1] == b.count(b"INFO Channel ") + b.count(b"INFO Ring "), b
        lines = len({b.rfind(b"\n", 0, j) for j in range(len(b)) if b.startswith((b"INFO Channel ", b"INFO Ring "), j)})
        assert nccl._channel_line_hosts(b, lines) is not None
        if lines:
            assert nccl._channel_line_hosts(b, lines - 1) is None


def test_count_channels_same_hosts_either_way(monkeypatch):
    rnd = random.Random(7)
    for _ in range(2000):
        b = _block(rnd)
        few = nccl.NcclFacts()
        few.count_channels(b)
        monkeypatch.setattr(nccl, "_FEW_CHANNELS", 1 << 40)  # the pattern over every line
        many = nccl.NcclFacts()
        many.count_channels(b)
        monkeypatch.undo()
        assert few.hosts == many.hosts and few.seen == many.seen, b
