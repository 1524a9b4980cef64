"""The scan's fast path (issue 16 item 5) says what the line-by-line path says.

A dense NCCL log is read block by block in C: each distinct line without its digits is scanned once
(scan.Diagnoser._candidates), saturated needles leave the scan, NCCL's commonest capitals are read in
small letters (scan._QUIETER), the rest is summed in bulk (hosts, ranks, channels, socket hosts).
The reference here feeds the same bytes one line at a time, with no needle ever saturated and
nothing read in small letters: every line that holds a needle is read in Python. Findings (with
their evidence and line numbers) and the `nccl` section must be the same, whatever the chunking.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from rdmadoctor.logs import kb, scan

HERE = os.path.dirname(os.path.abspath(__file__))


def _bench():
    spec = importlib.util.spec_from_file_location("bench_diagnose", os.path.join(HERE, "..", "..", "..", "bench", "diagnose.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _said(d: scan.Diagnoser) -> tuple:
    out = d.finish()
    return [(f.code, f.severity, f.subject, f.message, f.remedy, f.cause, f.data) for f in out.findings], out.nccl


def _fast(data: bytes, chunk: int) -> tuple:
    d = scan.Diagnoser()
    for i in range(0, len(data), chunk):
        d.feed(data[i:i + chunk], source="job.log")
    return _said(d)


def _reference(data: bytes, monkeypatch) -> tuple:
    with monkeypatch.context() as m:
        m.setattr(scan, "SATURATE_AFTER", 10**9)
        m.setattr(scan, "_QUIETER", ())
        d = scan.Diagnoser(patterns=kb.patterns())  # tables of its own, built without the small letters
        assert not d._scan.quiet
        for line in data.splitlines(keepends=True):
            d.feed(line, source="job.log")
        said = _said(d)
        assert not d._saturated
    return said


@pytest.mark.parametrize("kind", ["dense", "training"])
def test_the_fast_path_says_what_the_line_by_line_path_says(tmp_path, monkeypatch, kind: str) -> None:
    bench = _bench()
    path = str(tmp_path / "job.log")
    if kind == "dense":
        bench.write_dense(path, 3)
    else:
        bench.write_log(path, 2, 64)
    data = open(path, "rb").read()
    if kind == "dense":
        # Every row's examples, one line each, among the channel lines after the saturation: each
        # must be found through the scan that is left, in the small-letter copy.
        at = data.index(b"\n", len(data) * 2 // 3) + 1
        rows = b"".join(ex.encode() + b"\n" for p in kb.patterns() for ex in p.examples if "\n" not in ex)
        data = data[:at] + rows + LATE_HOSTS + data[at:]
    reference = _reference(data, monkeypatch)
    whole = _fast(data, len(data))
    d = scan.Diagnoser()
    d.feed(data, source="job.log")
    if kind == "dense":
        assert d._saturated and d._scan is not scan.tables().scan_for(frozenset())  # the reduced scan ran
        assert d._scan.quiet  # and read NCCL's lines in small letters
    assert whole == reference
    assert _fast(data, 4099) == reference  # lines cut between chunks, blocks of a few lines
    findings, nccl = reference
    assert nccl is not None and set(nccl["hosts"]) >= {f"gpu-node-{i:03d}" for i in range(8)}
    if kind == "dense":
        assert {"late-host-1", "late-host-2", "late-host-3"} <= set(nccl["hosts"])
        assert nccl["socket_hosts"] == ["gpu-node-007", "late-host-3"]
        assert {c for c, *_ in findings} >= {"NCCL_SOCKET_FALLBACK", "NCCL_IB_NO_DEVICE", "NCCL_IB_COMPLETION_ERROR"}


# Hosts that print only lines summed in bulk, long after every needle saturated: one at a line's
# start, one after kubectl's --prefix, one on sockets (its channel lines only).
LATE_HOSTS = (b"late-host-1:9001:9001 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n" * 3
              + b"late-host-1:9001:9001 [0] NCCL INFO threadThresholds 8/8/64 | 512/8/64 | 512 | 512\n"
              + b"[pod/job-worker-9/pytorch] late-host-2:9002:9002 [1] NCCL INFO Channel 01/0 : 1[1] -> 2[2] via "
                b"P2P/CUMEM/read\n"
              + b"late-host-3:9003:9003 [2] NCCL INFO Channel 02/0 : 2[2] -> 3[3] [send] via NET/Socket/0\n")


def test_lines_that_differ_only_in_their_digits_are_scanned_once_and_each_counted() -> None:
    """The scan reads each distinct line without its digits once; the lines it stops at are found
    in the block again (with their true numbers), and a literal with digits in it ("Caught signal
    7") is told from its neighbours ("Caught signal 9") on the line itself."""
    d = scan.Diagnoser()
    line = b"gpu-a:%d:%d [%d] NCCL INFO Channel %02d/0 : %d[%d] -> %d[%d] via P2P/CUMEM/read\n"
    data = b"".join(line % (i, i, i % 8, i % 24, i, i % 8, i + 1, (i + 1) % 8) for i in range(3000))
    data += b"[rank1]: Caught signal 9 (Killed)\n" + data[:data.index(b"\n", 4000) + 1] + b"[rank2]: Caught signal 7 (Bus error: nonexistent physical address)\n"
    starts = d._candidates(data)
    assert len(set(data.translate(None, b"0123456789").split(b"\n"))) < 10  # a handful of shapes
    lines = [data[s:data.index(b"\n", s)] for s in starts]
    assert lines == [b"[rank1]: Caught signal 9 (Killed)", b"[rank2]: Caught signal 7 (Bus error: nonexistent physical address)"]
    assert d._nlines == data.count(b"\n")
    d.feed(data, source="x.log")
    out = d.finish()
    ev = [e for f in out.findings for e in f.data.get("evidence", []) if "signal" in e["text"]]
    assert [(e["line"], e["text"]) for e in ev] == [(data.count(b"\n"), "[rank2]: Caught signal 7 (Bus error: nonexistent physical address)")]


def test_new_hosts_are_found_in_linear_time_on_hostile_blocks() -> None:
    """count_hosts' pattern (the hosts known so far as a lookahead trie) on blocks made to make it
    work: 256 known hosts that share long starts, lines that stop one character short of a known
    host, a megabyte of one line."""
    from adversarial import cpu_budget

    from rdmadoctor.logs.nccl import NcclFacts

    f = NcclFacts()
    known = {f"node-{'x' * 200}-{i:03d}" for i in range(255)}
    f.hosts = set(known)
    near = b"".join(b"node-" + b"x" * 200 + b"-%03d9:1:1 [0] NCCL INFO Channel 00/0 : a\n" % i for i in range(255))
    blocks = [near * 20, b"node-" + b"x" * (1 << 20) + b"\n", b"\n" * (1 << 20), b"a:1:1 [" * 150000 + b"\n"]
    with cpu_budget(20.0):  # well under a second each
        for b in blocks:
            f.count_hosts(b)
    (new,) = f.hosts - known  # one more fits under MAX: a host one character longer than a known one
    assert new.startswith("node-x") and new.endswith("9") and len(f.hosts) == f.MAX


def test_every_reduced_scan_keeps_its_anchors_and_finds_what_the_full_scan_finds() -> None:
    """Each scan a saturation can make (some anchors left out) reads no anchor it keeps in small
    letters, and finds every row's examples the full scan finds (unless a left-out anchor did)."""
    t = scan.tables()
    saturating = [a for a, lits in t.anchor_lits.items() if lits <= scan._SATURATING]
    assert saturating
    examples = [ex.encode() + b"\n" for p in t.patterns for ex in p.examples]
    examples += [b"gpu-a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/IB/0/GDRDMA Error: failed to extend\n",
                 b"gpu-a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read NCCL WARN x\n"]
    full = scan.Diagnoser()
    for skip in [frozenset({a}) for a in saturating] + [frozenset(saturating)]:
        sc = t.scan_for(skip)
        assert sc is t.scan_for(skip)  # built once
        for anchor in t.anchors - skip:
            assert all(scan._survives(anchor, *pair) for pair in sc.quiet)
        d = scan.Diagnoser()
        d._scan = sc
        for ex in examples:
            if any(a in ex for a in skip):
                continue  # found through a saturated needle: summed in bulk instead
            assert d._candidates(ex) == full._candidates(ex), (skip, ex)
    # Once "INFO comm " and "INFO rank " leave the scan, "INFO" is read in small letters whole.
    if {b"O comm ", b"O rank "} <= set(saturating):
        assert (b"] NCCL INFO ", b"] nccl info ") in t.scan_for(frozenset(saturating)).quiet


def test_the_per_line_patterns_match_what_their_plain_spelling_matches() -> None:
    import random
    import re

    from rdmadoctor.logs import nccl

    plain = {
        "_NCCL_HOST_LINE": rb"\n([\w.-]{1,255}):\d{1,9}:\d{1,9} \[-?\w{1,16}\] NCCL INFO ",
        "_CHANNEL_HOST_LINE": rb"\n([\w.-]{1,255}):\d{1,9}:\d{1,9} \[-?\w{1,16}\] (?:NCCL )?INFO (?:Channel|Ring) ",
        "_CHANNEL_RING_BYTES": rb"Channel \d{1,4}/(\d{1,4}) :[ \t]+\d{1,7}(?![\d\[])",
    }
    rnd = random.Random(16)
    parts = [b"\n", b"gpu-a", b"h" * 300, b"x.y-z_0", b"\xc3\xa9", b":", b"1", b"1234567890", b" [", b"-", b"0", b"]",
             b" NCCL ", b"INFO ", b"Channel ", b"Ring ", b"00/24", b"/", b" :", b"  ", b"\t", b"12345678", b"[", b" "]
    texts = [b"".join(rnd.choice(parts) for _ in range(rnd.randint(1, 40))) for _ in range(3000)]
    texts.append(b"\ngpu-a:1:2 [3] NCCL INFO Channel 00/24 :    0   1\ngpu-b:1:2 [-1] INFO Ring 01 : 0[0] -> 1[1]\n")
    for name, source in plain.items():
        fast, slow = getattr(nccl, name), re.compile(source)
        for text in texts:
            assert fast.findall(text) == slow.findall(text), (name, text)


def test_lines_of_saturated_needles_are_not_read_one_by_one(monkeypatch) -> None:
    """After SATURATE_AFTER lines, a communicator's lines are summed per block, not read: no other
    anchor may bring them back. Translated, an anchor matches any word of as many rare letters
    ("Init START" matched every "Init COMPLETE" once enough capitals started some anchor, and a
    dense log was read at twice the cost); the scan's stops are checked against the literals that
    are still wanted."""
    n = scan.SATURATE_AFTER * 6
    lines = [f"node-{i % 8}:{100 + i % 64}:{200 + i} [{i % 8}] NCCL INFO comm 0x{i:x} rank {i % 64} nranks 64 cudaDev "
             f"{i % 8} nvmlDev {i % 8} busId {i % 8}b000 commId 0x{i:x} - Init COMPLETE" for i in range(n)]
    read = []
    orig = scan.Diagnoser._line
    monkeypatch.setattr(scan.Diagnoser, "_line", lambda self, raw, lineno, nxt=None: read.append(lineno) or orig(self, raw, lineno, nxt))
    d = scan.Diagnoser()
    # Small blocks, so that most of the log comes after saturation.
    data = ("\n".join(lines) + "\n").encode()
    for i in range(0, len(data), 1 << 14):
        d.feed(data[i:i + (1 << 14)])
    d.finish()
    assert "Init COMPLETE" in d._saturated
    # Each block's lines are read until the block in which the needle saturates, no further.
    per_block = (1 << 14) // len(lines[0]) + 2
    assert len(read) <= scan.SATURATE_AFTER + per_block, len(read)
    assert d.facts.nranks == 64 and len(d.facts.hosts) == 8


@pytest.mark.parametrize("coll", [True, False])
def test_the_channel_count_is_the_most_coll_channels_else_the_most_ring_channels(monkeypatch, coll: bool) -> None:
    """Where NCCL printed "N coll channels" (2.20+) that is the count and the ring listings are not
    read in bulk (a sixth of a dense log); where it did not, the ring listings' count, the most any
    block said, fast path and line by line alike."""
    def block(ring: int, colls: int) -> bytes:
        out = [f"gpu-{h}:1:2 [0] NCCL INFO Channel {c:02d}/{ring} :    0   1   2   3\n" for h in range(2) for c in range(3)]
        if coll:
            out.append(f"gpu-0:1:2 [0] NCCL INFO {colls} coll channels, 0 collnet channels, 0 nvls channels, 8 p2p channels\n")
        return "".join(out).encode()
    data = block(24, 16) + b"x\n" * 5000 + block(32, 20) + b"y\n" * 5000 + block(8, 4)
    fast, ref = _fast(data, 4096), _reference(data, monkeypatch)
    assert fast[1] == ref[1]
    assert fast[1]["channels"] == (20 if coll else 32)


def test_survives_says_what_the_letter_by_letter_comparison_says() -> None:
    """scan._survives compares each overlap of ``old`` with the anchor whole (it runs for every anchor
    and replacement when the tables are made, before any log is read): the same answers as comparing
    letter by letter, on every small case."""
    import itertools
    import random

    def reference(anchor: bytes, old: bytes, new: bytes) -> bool:
        for k in range(-(len(old) - 1), len(anchor)):
            span = [i for i in range(len(anchor)) if 0 <= i - k < len(old)]
            if span and all(anchor[i] == old[i - k] for i in span) and any(old[i - k] != new[i - k] for i in span):
                return False
        return True

    rnd = random.Random(16)
    words = [bytes(w) for n in range(1, 4) for w in itertools.product(b"aB ", repeat=n)]
    for _ in range(3000):
        anchor, old = rnd.choice(words) + rnd.choice(words), rnd.choice(words)
        new = bytes(c if rnd.random() < 0.6 else c ^ 32 for c in old)
        assert scan._survives.__wrapped__(anchor, old, new) == reference(anchor, old, new), (anchor, old, new)
    assert not scan._survives.__wrapped__(b"NCCL INFO", b"] NCCL INFO ", b"] nccl info ")
    assert scan._survives.__wrapped__(b"Init START", b"] NCCL INFO ", b"] nccl info ")
