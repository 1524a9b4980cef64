"""What the scan sums in bulk once its needles saturate (scan.index._bulk) says what reading each
line says: socket hosts passed run by run, ranks summed column by column, coll channels read from
the bytes before each count. The reference is test_fastpath's: the same bytes one line at a time,
nothing saturated."""

from __future__ import annotations

import pytest

from rdmadoctor.logs import scan
from rdmadoctor.logs.nccl import NcclFacts

from .test_fastpath import _fast, _reference


def _socket_log(hosts: int, runs: int) -> bytes:
    """``hosts`` hosts on sockets, each printing its channel lines in runs among IB hosts' lines; a
    host first seen late, in the middle of another's run; one behind kubectl's prefix."""
    out = []
    for r in range(runs):
        for h in range(hosts):
            p = f"sock-{h}:{100 + h}:{200 + r} [{h % 8}] NCCL INFO "
            out += [f"{p}comm 0x{r:x} rank {h} nRanks {hosts + 2} nNodes {hosts + 2} localRanks 1 localRank 0 MNNVL 0\n"]
            out += [f"{p}Channel {c:02d}/0 : {h}[0] -> {(h + 1) % hosts}[0] [send] via NET/Socket/{c % 4}\n" for c in range(6)]
            out += [f"{p}Connected all rings, use ring PXN 0 GDR 0\n"]
            if r == runs - 1 and h == hosts // 2:
                out += ["late-sock:1:1 [0] NCCL INFO Channel 00/0 : 1[0] -> 2[0] [send] via NET/Socket/0\n",
                        "[pod/w-1/c] kube-sock:2:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 2[0] [send] via NET/Socket/0\n"]
            q = f"ib-{h}:{300 + h}:{400 + r} [0] NCCL INFO "
            out += [f"{q}Channel {c:02d}/0 : {h}[0] -> {h + 1}[0] [send] via NET/IB/0/GDRDMA\n" for c in range(4)]
            out += [f"{q}{4 + r % 3} coll channels, 0 collnet channels, 0 nvls channels, 8 p2p channels\n"]
    return "".join(out).encode()


@pytest.mark.parametrize("hosts", [3, scan.index._RUN_HOSTS + 5])
def test_socket_hosts_ranks_and_channels_summed_in_bulk_are_those_read_line_by_line(monkeypatch, hosts: int) -> None:
    data = _socket_log(hosts, 40)
    monkeypatch.setattr(scan, "SATURATE_AFTER", 16)  # most of the log after saturation
    d = scan.Diagnoser()
    d.feed(data[: len(data) // 4], source="job.log")
    assert "via NET/Socket" in d._saturated and "nRanks" in d._saturated
    fast = _fast(data, 8192)
    monkeypatch.undo()
    ref = _reference(data, monkeypatch)
    assert fast == ref
    nccl = fast[1]
    assert {f"sock-{h}" for h in range(hosts)} | {"late-sock", "kube-sock"} <= set(nccl["socket_hosts"])
    assert nccl["channels"] == 6 and nccl["ranks"] == hosts + 2


def test_ranks_past_the_cap_are_kept_as_reading_them_one_by_one_keeps_them() -> None:
    """ranks_seen holds at most 4096 ranks: past that, ranks are added one at a time, as before."""
    f = NcclFacts()
    f.ranks_seen = set(range(100000, 104090))
    d = scan.Diagnoser()
    d.facts = f
    d._saturated = {"nRanks"}
    block = b"".join(b"h:1:1 [0] NCCL INFO comm 0x1 rank %d nRanks 9000 nNodes 2 localRanks 9000 localRank 0\n" % r
                     for r in range(20))
    d._candidates(block)
    d._bulk(block)
    assert len(f.ranks_seen) == 4096 and f.nranks == 9000 and f.nnodes == 2 and f.all_local


def test_coll_channels_are_the_digits_right_before_each_count() -> None:
    f = NcclFacts()
    f.count_coll_channels(b"12 coll channels\nx1234567890 coll channels\nno coll channels\n7 coll channels 99 coll channels\n")
    assert f.coll_channels == 234567890 and f.seen
    g = NcclFacts()
    g.count_coll_channels(b"no coll channels\n")
    assert g.coll_channels is None and not g.seen


def test_a_line_that_starts_with_nccls_prefix_is_never_the_rest_of_the_line_before() -> None:
    """The router does not offer such a line to prefix.continues (scan.index.NCCL_LINE_AT): it must
    be one that continues would refuse, unwrapped as the router unwraps it, whatever follows."""
    import random

    from rdmadoctor.logs import prefix
    from rdmadoctor.logs.scan.index import NCCL_LINE_AT

    rnd = random.Random(30)
    heads = ["gpu-7", "a", "node_01", "2024-05-01", "x" * 100, "ip-10-0-0-1", "INFO", "NCCL", "_x", "-"]
    tails = ["", " init.cc:12 x", " **bold** `code` &lt;0&gt;", "_", " \u2502", " (pid=3)", " [repeated 2x across cluster]",
             ' {"log":"x"}', " > quote", " [a](http://a)", "\u00e9", "`"]
    first = "y" * 80
    seen = 0
    for _ in range(5000):
        host = rnd.choice(heads) + rnd.choice(["", str(rnd.randint(0, 99)), "-b"])
        dev = rnd.choice(["0", "-1", "12", "x", "-x", "GPU0"])
        level = rnd.choice(["INFO", "WARN", "TRACE", "ABORT", "INFOx", "INF"])
        line = f"{host}:{rnd.randint(0, 10**9)}:{rnd.choice(['1', '22'])} [{dev}] NCCL {level}{rnd.choice([' ', ''])}{rnd.choice(tails)}"
        raw = line.encode()
        if NCCL_LINE_AT.match(raw + b"\n") is None:
            continue
        seen += 1
        rest = prefix.unwrap(raw.decode("utf-8", "replace").rstrip())[0]
        assert not prefix.continues(first, rest), line
    assert seen > 1000
