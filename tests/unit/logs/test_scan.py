"""The Diagnoser: any chunking, any wrapping, bounded memory, one clear error per bad input.

The knowledge-base rows used here are local (``ROWS``), so these tests pin the engine's
behaviour (ordering, linking, evidence, segments, facts) whatever rows the tables hold;
tests/unit/logs/test_kb.py tests the rows themselves.
"""

from __future__ import annotations

import gzip
import os
import random
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rdmadoctor.core.model import ERROR, WARNING
from rdmadoctor.logs import Diagnoser, diagnose_bytes, diagnose_paths, transport_line
from rdmadoctor.logs.kb import Pattern
from rdmadoctor.logs.kb.nccl import WC_STATUS


def _wc(groups: dict) -> dict:
    return {"status_name": WC_STATUS.get(int(groups["status"]), "?")}


ROWS = (
    Pattern(id="t.wc", code="NCCL_IB_COMPLETION_ERROR", severity=ERROR, needle="Got completion",
            regex=r"Got completion (?:from peer (?P<peer>\S+) )?with (?:error |status=)(?P<status>\d+)"
                  r"(?:.*?vendor[ _]err(?:or)?[ =]?(?P<vendor>\d+))?",
            subject="status {status} {status_name}", message="status {status} vendor {vendor}", meaning="m", fix="f",
            ref="r", symptom_when=(("status", "5"),), derive=_wc),
    Pattern(id="t.watchdog", code="NCCL_TIMEOUT", severity=ERROR, needle="Watchdog caught collective operation timeout",
            regex=r"\[Rank (?P<rank>\d+)\] Watchdog caught collective operation timeout", subject="rank {rank}",
            message="timeout", meaning="m", fix="f", ref="r"),

    Pattern(id="t.shm", code="NCCL_SHM_FAILED", severity=ERROR, needle="Error while creating shared memory segment",
            regex=r"Error while creating shared memory segment (?P<seg>\S+) \(size (?P<size>\d+)\)",
            subject="{seg}", message="shm {seg} size {size}", meaning="m", fix="f", ref="r"),
    Pattern(id="t.closed", code="NCCL_SOCKET_CLOSED", severity=ERROR, needle="Connection closed by remote peer",
            regex=r"socketProgress: Connection closed by remote peer (?P<peer>\S+)", subject="{peer}",
            message="closed by {peer}", meaning="m", fix="f", ref="r", symptom=True),
    Pattern(id="t.system", code="NCCL_SYSTEM_ERROR", severity=ERROR, needle="unhandled system error",
            regex=r"unhandled system error", subject="NCCL", message="unhandled system error", meaning="m", fix="f",
            ref="r", symptom=True),
    Pattern(id="t.ibdisable", code="NCCL_IB_DISABLED_BY_ENV", severity=WARNING, needle="NCCL_IB_DISABLE set by environment",
            regex=r"NCCL_IB_DISABLE set by environment to (?P<v>\d+)", subject="NCCL_IB_DISABLE", message="NCCL_IB_DISABLE={v}",
            meaning="m", fix="f", ref="r", explains_fallback=True),
)


def diag(text: str | bytes, **kw):
    d = Diagnoser(patterns=ROWS, **kw)
    d.feed(text.encode() if isinstance(text, str) else text, source="job.log")
    return d.finish()


def codes(d) -> list[tuple[str, str]]:
    return [(f.code, f.subject) for f in d.findings]


IB_INIT = [
    "NCCL INFO NCCL version 2.21.5+cuda12.4",
    "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.{h}<0>",
    "NCCL INFO Using network IB",
    "NCCL INFO comm 0x55d rank {r} nRanks 4 nNodes 2 localRanks 2 localRank {lr} MNNVL 0",
    "NCCL INFO Channel 00/0 : {r}[{lr}] -> {p}[{lr}] [send] via NET/IB/0/GDRDMA",
    "NCCL INFO comm 0x55d rank {r} nranks 4 cudaDev {lr} busId 1b000 commId 0x1 - Init COMPLETE",
]
FAILURE = [
    "transport/net_ib.cc:1703 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<4242> with status=12 opcode=0 len=0 vendor err 129 (Send) hca mlx5_0",
    "transport/net_ib.cc:1703 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<4242> with status=5 opcode=0 len=0 vendor err 249 (Send) hca mlx5_0",
    "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600011 milliseconds before timing out.",
]


def job_lines(rng: random.Random) -> list[tuple[int, str]]:
    """(rank, message) for 4 ranks on 2 hosts: init lines per rank, interleaved, then the failure on rank 1."""
    per_rank = []
    for r in range(4):
        h, lr = r // 2, r % 2
        per_rank.append([(r, t.format(h=h + 1, r=r, lr=lr, p=(r + 2) % 4)) for t in IB_INIT])
    out: list[tuple[int, str]] = []
    while any(per_rank):
        r = rng.choice([i for i, q in enumerate(per_rank) if q])
        out.append(per_rank[r].pop(0))
    out += [(1, FAILURE[0]), (1, FAILURE[1]), (1, FAILURE[2])]
    return out


WRAPS = ("none", "kubectl", "kubectl-ts", "mpirun", "torchrun", "nccl-ts")


def render(lines: list[tuple[int, str]], wrap: str, crlf: bool, colour: bool, rng: random.Random) -> bytes:
    out = []
    for i, (rank, msg) in enumerate(lines):
        host = f"gpu-{rank // 2}"
        if "NCCL" in msg and not msg.startswith("[Rank"):
            level = "NCCL WARN" if "NCCL WARN" in msg else "NCCL INFO"
            loc, _, rest = msg.partition(level)
            line = f"{host}:{100 + rank}:{200 + rank} [{rank % 2}] {loc}{level}{rest}"
            if wrap == "nccl-ts":
                line = f"[2026-11-23 10:00:{i % 60:02d}] " + line
        else:
            line = msg
        if colour and "WARN" in line:
            line = "\x1b[31m" + line + "\x1b[0m"
        if wrap == "kubectl":
            line = f"[pod/train-worker-{rank}/pytorch] " + line
        elif wrap == "kubectl-ts":
            line = f"2026-11-23T10:00:{i % 60:02d}.{rng.randint(0, 999999999):09d}Z " + line
        elif wrap == "mpirun":
            line = f"[1,{rank}]<stderr>:" + line
        elif wrap == "torchrun":
            line = f"[default{rank % 2}]:" + line
        out.append(line)
    eol = "\r\n" if crlf else "\n"
    return (eol.join(out) + eol).encode()


def verdict(d) -> tuple:
    n = d.nccl or {}
    return (
        tuple(sorted(codes(d))),
        tuple(sorted((f.code, f.subject, f.cause) for f in d.findings)),
        n.get("version"), n.get("cuda"), n.get("network"), n.get("gdr"), n.get("ranks"),
        tuple((x["name"], x["port"], x["link_layer"]) for x in n.get("net_devices") or ()),
    )


def test_a_job_reads_as_expected() -> None:
    d = diag(render(job_lines(random.Random(1)), "none", False, False, random.Random(1)))
    assert codes(d) == [
        ("NCCL_IB_COMPLETION_ERROR", "status 12 IBV_WC_RETRY_EXC_ERR"),
        ("NCCL_IB_COMPLETION_ERROR", "status 5 IBV_WC_WR_FLUSH_ERR"),
        ("NCCL_TIMEOUT", "rank 1"),
    ]
    flushed = d.findings[1]
    assert flushed.cause == "NCCL_IB_COMPLETION_ERROR"
    assert flushed.data["follows"]["subject"] == "status 12 IBV_WC_RETRY_EXC_ERR"
    assert d.findings[0].cause is None
    ev = d.findings[0].data["evidence"][0]
    assert ev["file"] == "job.log" and ev["line"] == 25 and ev["host"] == "gpu-0" and "status=12" in ev["text"]
    assert d.nccl == {
        "version": "2.21.5", "cuda": "12.4", "network": "IB", "plugin": None,
        "net_devices": [{"name": "mlx5_0", "port": 1, "link_layer": "InfiniBand"},
                        {"name": "mlx5_1", "port": 1, "link_layer": "InfiniBand"}],
        "socket_ifaces": None, "gdr": True, "channels": None, "ranks": 4, "hosts": ["gpu-0", "gpu-1"], "socket_hosts": [], "nodes": 2,
        "fabric": None, "fabric_nics": None, "net_bw_gbs": None,
    }
    assert transport_line(d.nccl) == "NCCL 2.21.5 uses NET/IB on mlx5_0, mlx5_1 (InfiniBand) with GPUDirect RDMA"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), wrap=st.sampled_from(WRAPS), crlf=st.booleans(), colour=st.booleans(),
       cuts=st.lists(st.integers(1, 4000), max_size=12))
def test_the_verdict_does_not_depend_on_formatting_or_chunking(seed, wrap, crlf, colour, cuts) -> None:
    rng = random.Random(seed)
    base = verdict(diag(render(job_lines(random.Random(0)), "none", False, False, rng)))
    data = render(job_lines(rng), wrap, crlf, colour, rng)
    d = Diagnoser(patterns=ROWS)
    pos = 0
    for c in sorted(cuts):
        d.feed(data[pos:c], "job.log")
        pos = max(pos, c)
    d.feed(data[pos:], "job.log")
    got = d.finish()
    assert verdict(got) == base
    assert got.sources[0]["lines"] == data.count(b"\n")


def test_symptoms_link_to_the_earliest_problem_before_them() -> None:
    text = "\n".join([
        "h1:1:1 [0] misc/shmutils.cc:87 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-abc (size 9637888)",
        "h2:2:2 [0] misc/socket.cc:540 NCCL WARN socketProgress: Connection closed by remote peer h1<51234>",
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.5",
    ])
    d = diag(text)
    assert [f.code for f in d.findings] == ["NCCL_SHM_FAILED", "NCCL_SOCKET_CLOSED", "NCCL_SYSTEM_ERROR"]
    assert [f.cause for f in d.findings] == [None, "NCCL_SHM_FAILED", "NCCL_SHM_FAILED"]
    assert d.findings[1].data["follows"]["line"] == 1


def test_a_symptom_alone_stays_the_headline() -> None:
    d = diag("RuntimeError: NCCL error in: x.cpp:1, unhandled system error (run with NCCL_DEBUG=INFO for details)\n")
    assert [(f.code, f.cause) for f in d.findings] == [("NCCL_SYSTEM_ERROR", None)]


def test_repeats_are_one_finding_with_counts_hosts_and_ranks() -> None:
    lines = [f"[1,{r}]<stderr>:gpu-{r // 8}:{r}:{r} [0] transport/net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer "
             f"10.0.0.9<1> with error 12, opcode 0, len 0, vendor err 129" for r in range(16)]
    d = diag("\n".join(lines))
    assert len(d.findings) == 1
    f = d.findings[0]
    assert f.data["count"] == 16 and f.data["hosts"] == ["gpu-0", "gpu-1"] and f.data["ranks"] == list(range(16))
    assert len(f.data["evidence"]) == 3  # quoted lines are capped; the count says the rest


def test_socket_fallback_names_the_hosts_and_the_reason() -> None:
    text = "\n".join([
        "a:1:1 [0] NCCL INFO NCCL version 2.18.5+cuda12.2",
        "a:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.",
        "a:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
        "a:1:1 [0] NCCL INFO Using network Socket",
        "b:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.0.0.2<0>",
        "b:1:1 [0] NCCL INFO Using network IB",
        "a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0",
    ])
    d = diag(text)
    assert [f.code for f in d.findings] == ["NCCL_IB_DISABLED_BY_ENV", "NCCL_SOCKET_FALLBACK"]
    fb = d.findings[1]
    assert fb.subject == "a" and fb.cause == "NCCL_IB_DISABLED_BY_ENV" and fb.severity == ERROR
    assert "1 of 2 hosts" in fb.message and "eth0" in fb.message and "NCCL_IB_DISABLE=1" in fb.message
    assert fb.data["evidence"][0]["line"] == 4
    assert d.nccl["socket_hosts"] == ["a"] and d.nccl["network"] in ("IB", "Socket")
    assert d.nccl["gdr"] is False  # the only NET channel line lacks /GDRDMA
    assert transport_line({**d.nccl, "network": "Socket"}).startswith("WARNING: NCCL 2.18.5 uses NET/Socket over eth0")


def test_no_socket_finding_when_ib_is_used_everywhere() -> None:
    d = diag("a:1:1 [0] NCCL INFO Using network IB\nb:2:2 [0] NCCL INFO Using network IB\n")
    assert codes(d) == [] and d.nccl["socket_hosts"] == [] and d.nccl["gdr"] is None


@pytest.mark.parametrize("line,facts", [
    ("host:1:1 [0] NCCL INFO NCCL version 2.5.6+cuda10.1", {"version": "2.5.6", "cuda": "10.1"}),
    ("[2026-11-23 10:00:00] host:1:1 [0] NCCL INFO NCCL version 2.30.7+cuda13.0", {"version": "2.30.7", "cuda": "13.0"}),
    ("host:1:1 [0] NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin (v7)", {"plugin": "NCCL RDMA Plugin"}),
    ("host:1:1 [0] NCCL INFO Initialized NET plugin IBext", {"plugin": "IBext"}),
    ("host:1:1 [0] NCCL INFO Using network AWS Libfabric", {"network": "AWS Libfabric"}),
    ("host:1:1 [0] NCCL INFO NET/IBext : Using [0]mlx5_0:1/IB [1]mlx5_3:1/IB ; OOB ib0:10.1.0.1<0>",
     {"net_devices": [{"name": "mlx5_0", "port": 1, "link_layer": "InfiniBand"}, {"name": "mlx5_3", "port": 1, "link_layer": "InfiniBand"}]}),
    # NCCL lists its socket interfaces only when it initialises its socket transport (2.5+): alone,
    # the line says NCCL runs on sockets (issue 16).
    ("host:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0> [1]eth1:10.0.1.1<0>",
     {"socket_ifaces": ["eth0", "eth1"], "network": "Socket"}),
    ("host:1:1 [0] NCCL INFO Channel 00/24 :    0   1   2   3", {"channels": 24}),
    ("host:1:1 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)", {"gdr": False}),
    # A NET channel names the network NCCL uses (issue 16: "via NET/IBext/1/GDRDMA" is IBext).
    ("host:1:1 [0] NCCL INFO Channel 01/0 : 1[1] -> 9[1] [receive] via NET/IB/1/GDRDMA/Shared", {"gdr": True, "network": "IB"}),
])
def test_nccl_facts_of_each_version(line: str, facts: dict) -> None:
    d = diag(line + "\n")
    for k, v in facts.items():
        assert d.nccl[k] == v, (k, d.nccl)
    unset = {"version", "cuda", "network", "plugin", "net_devices", "socket_ifaces", "channels"} - set(facts)
    for k in unset:
        assert d.nccl[k] is None, (k, d.nccl)  # never guessed


def test_no_nccl_line_means_no_nccl_section() -> None:
    assert diag("hello\nworld\n").nccl is None


def test_on_transport_fires_once_when_the_channels_connect() -> None:
    seen = []
    d = Diagnoser(patterns=ROWS, on_transport=lambda n: seen.append(transport_line(n)))
    lines = render(job_lines(random.Random(3)), "none", False, False, random.Random(3)).splitlines(keepends=True)
    fired_at = None
    for i, line in enumerate(lines):
        d.feed(line, "stdout")
        if seen and fired_at is None:
            fired_at = i
    d.finish()
    assert seen == ["NCCL 2.21.5 uses NET/IB on mlx5_0, mlx5_1 (InfiniBand) with GPUDirect RDMA"]
    assert b"via NET/IB" in lines[fired_at]  # the first channel line settles it, not the end


def test_transcript_outputs_become_segments() -> None:
    text = "\n".join([
        "root@train-0:/# ulimit -a",
        "core file size          (blocks, -c) unlimited",
        "max locked memory       (kbytes, -l) 64",
        "root@train-0:/# ibstat mlx5_0",
        "CA 'mlx5_0'",
        "\tPort 1:",
        "\t\tState: Initializing",
        "$ ls /dev/infiniband",
        "uverbs0",
        "Infiniband device 'mlx5_1' port 1 status:",
        "\tstate:\t\t 1: DOWN",
        "gpu-0:1:1 [0] NCCL INFO Using network IB",
    ])
    d = diag(text)
    got = [(s.kind, s.command, s.line, s.text.splitlines()[0]) for s in d.segments]
    assert got == [
        ("ulimit", "ulimit -a", 2, "core file size          (blocks, -c) unlimited"),
        ("ibstat", "ibstat mlx5_0", 5, "CA 'mlx5_0'"),
        ("dev_infiniband", "ls /dev/infiniband", 9, "uverbs0"),
    ]
    # A prompted output runs to the next prompt; the NCCL line inside it is still read.
    assert d.segments[2].text.splitlines()[:3] == ["uverbs0", "Infiniband device 'mlx5_1' port 1 status:", "\tstate:\t\t 1: DOWN"]
    assert d.nccl["network"] == "IB"


def test_output_recognised_by_its_header_ends_where_the_log_resumes() -> None:
    text = "Infiniband device 'mlx5_1' port 1 status:\n\tstate:\t\t 1: DOWN\ngpu-0:1:1 [0] NCCL INFO Using network IB\n"
    d = diag(text)
    assert [(s.kind, s.line, s.text) for s in d.segments] == [
        ("ibstatus", 1, "Infiniband device 'mlx5_1' port 1 status:\n\tstate:\t\t 1: DOWN\n")]
    assert d.nccl["network"] == "IB"


def test_a_header_without_a_prompt_starts_a_segment() -> None:
    text = "some text\nhca_id:\tmlx5_0\n\ttransport:\t\t\tInfiniBand (0)\n\n\tport:\t1\n\t\tstate:\t\t\tPORT_DOWN (1)\n"
    d = diag(text)
    assert [(s.kind, s.line) for s in d.segments] == [("ibv_devinfo", 2)]
    assert "PORT_DOWN" in d.segments[0].text


def test_a_line_longer_than_the_cap_is_cut_and_the_next_line_still_counts() -> None:
    d = Diagnoser(patterns=ROWS)
    d.feed(b"x" * (5 << 20), "big")  # 5 MiB, no newline yet
    d.feed(b"y" * (3 << 20) + b" Got completion from peer p with error 12\n", "big")  # past the cut: not matched
    d.feed(b"a:1:1 [0] NCCL WARN NET/IB : Got completion from peer p with error 12, opcode 0, len 0, vendor err 1\n", "big")
    got = d.finish()
    assert [(f.code, f.data["evidence"][0]["line"]) for f in got.findings] == [("NCCL_IB_COMPLETION_ERROR", 2)]
    assert got.sources[0]["lines"] == 2
    assert any("longer than" in n for n in got.notes)


def test_memory_stays_bounded_on_a_flood_without_newlines() -> None:
    d = Diagnoser(patterns=ROWS)
    chunk = b"z" * (1 << 20)
    tracemalloc.start()
    try:
        for _ in range(48):
            d.feed(chunk, "flood")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20  # 48 MiB fed; what is kept is a line's first 64 KiB and one chunk in flight
    assert d.finish().sources[0]["bytes"] == 48 << 20


def test_files_gzip_truncated_binary_directory_missing_empty(tmp_path) -> None:
    warn = b"a:1:1 [0] NCCL WARN NET/IB : Got completion from peer p with error 12, opcode 0, len 0, vendor err 1\n"
    plain = tmp_path / "rank0.log"
    plain.write_bytes(b"hello\r\n" + warn)
    gz = tmp_path / "rank1.log.gz"
    gz.write_bytes(gzip.compress(b"filler line\n" * 50000 + warn))
    cut = tmp_path / "rank2.log.gz"
    cut.write_bytes(gzip.compress(warn + os.urandom(200000).hex().encode())[:3000])
    binary = tmp_path / "core"
    binary.write_bytes(b"\x7fELF" + b"\x00" * 5000)
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    d = diagnose_paths([str(plain), str(gz), str(cut), str(binary), str(tmp_path), str(tmp_path / "nope.log"), str(empty)])
    by = {os.path.basename(s["name"]) or s["name"]: s for s in d.sources}
    assert by["rank0.log"]["error"] is None and by["rank0.log"]["lines"] == 2
    assert by["rank1.log.gz"]["error"] is None and by["rank1.log.gz"]["lines"] == 50001
    assert "cut short" in by["rank2.log.gz"]["error"]
    assert "binary" in by["core"]["error"] and by["core"]["bytes"] == 0
    assert "is a directory" in by[os.path.basename(str(tmp_path))]["error"]
    assert "no such file" in by["nope.log"]["error"]
    assert by["empty.log"]["bytes"] == 0 and by["empty.log"]["error"] is None
    f = d.findings[0]
    # rank0, rank1 (line 50001) and the part of rank2 read before the cut: one finding, three files.
    assert f.data["count"] == 3 and {e["file"] for e in f.data["evidence"]} == {str(plain), str(gz), str(cut)}
    assert d.read_any


def test_non_utf8_and_control_bytes_do_not_break_anything() -> None:
    d = diag(b"\xff\xfe garbage \x00\x1b]0;title\x07 a:1:1 [0] NCCL WARN NET/IB : Got completion from peer p with error 4, opcode 0, "
             b"len 0, vendor err 81\n\xc3\x28\n")
    assert [f.subject for f in d.findings] == ["status 4 IBV_WC_LOC_PROT_ERR"]


def test_diagnose_bytes_uses_the_real_tables() -> None:
    d = diagnose_bytes(b"gpu:1:1 [0] NCCL WARN NET/IB : Got completion from peer x<1> with error 12, opcode 0, len 0, vendor err 129\n")
    assert [f.code for f in d.findings] == ["NCCL_IB_COMPLETION_ERROR"]


def test_gzip_members_padding_and_a_bomb_stream_in_bounded_memory(tmp_path) -> None:
    warn = b"a:1:1 [0] NCCL WARN NET/IB : Got completion from peer p with error 12, opcode 0, len 0, vendor err 1\n"
    multi = tmp_path / "multi.gz"
    multi.write_bytes(gzip.compress(b"x\n") + gzip.compress(b"") * 1000 + gzip.compress(warn) + b"\x00" * 512)
    d = diagnose_paths([str(multi)])
    assert d.sources[0]["error"] is None and d.sources[0]["lines"] == 2
    assert [f.data["evidence"][0]["line"] for f in d.findings] == [2]
    bomb = tmp_path / "bomb.gz"
    bomb.write_bytes(gzip.compress(b"\0" * (64 << 20)))  # 64 MiB of NUL in about 64 KiB
    tracemalloc.start()
    try:
        from rdmadoctor.logs import reader

        total = 0
        with open(bomb, "rb") as f:
            for chunk in reader.chunks(f):
                total += len(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total == 64 << 20 and peak < 8 << 20


def test_the_needles_of_a_line_are_those_the_alternation_of_all_finds_in_its_order() -> None:
    """A line's needles are looked for with those it holds (scan.needles._Tables.needles_in: a pattern of
    all ~260 tried a branch at nearly every character of a long WARN line): the same needles, each
    once, in the order the alternation of all of them finds them, overlaps and repeats included."""
    from rdmadoctor.logs.scan import tables

    t = tables()
    needles = list(t.literals)
    assert len(needles) > 200 and all(t.line_needles.fullmatch(n) for n in needles)
    rnd = random.Random(33)
    alphabet = list("aNCL _WRE.c:'/(") + needles
    for _ in range(5000):
        text = "".join(rnd.choice(alphabet) if rnd.random() < 0.6 else rnd.choice(needles) for _ in range(rnd.randint(0, 14)))
        want = list(dict.fromkeys(m.group() for m in t.line_needles.finditer(text)))
        assert t.needles_in(text) == want, text
        assert t.has_needle(text) == (t.line_needles.search(text) is not None), text
