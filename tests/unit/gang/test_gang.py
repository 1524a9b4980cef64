"""The gang (`preflight --gang`, `run --gang`): members as real processes on loopback and in network
namespaces, the comparison and the bandwidth judgement as data, perftest's recorded outputs."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest

from rdmadoctor.gang import bandwidth as B
from rdmadoctor.gang import compare as C
from rdmadoctor.gang.facts import gang_facts
from rdmadoctor.gang.membership import find_membership, parse_endpoint
from rdmadoctor.runner import UsageError

HERE = Path(__file__).parents[2]  # tests/
ROOT = HERE.parent
GANG_FIXTURES = HERE / "fixtures" / "gang"
# Generous: the suite shares two cores with everything else; nothing here asserts a duration.
WAIT_S = 240


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env(**extra: str) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"),
           "RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": str(ROOT)}
    env.update(extra)
    return env


def rd(*args: str, env: dict[str, str], prefix: tuple[str, ...] = ()) -> subprocess.Popen:
    return subprocess.Popen([*prefix, sys.executable, "-m", "rdmadoctor", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=str(ROOT))


def finish(procs: list[subprocess.Popen]) -> list[tuple[int, str, str]]:
    out = []
    try:
        for p in procs:
            o, e = p.communicate(timeout=WAIT_S)
            out.append((p.returncode, o, e))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    return out


def gang_schema() -> dict:
    schema = json.loads((ROOT / "rdmadoctor" / "output" / "schema.json").read_text())
    return {"$ref": "#/$defs/gang", "$defs": schema["$defs"]}


def same_verdict(section: dict) -> dict:
    """What every member prints alike (its own role, rank and master address left out)."""
    return {k: section[k] for k in ("verdict", "size", "members", "mismatches", "slow", "missing")}


# ---- the exchange, end to end, through the CLI --------------------------------------------------


def test_four_members_one_roce_among_infiniband_all_say_no_go_and_name_it():
    port = free_port()
    common = ("--gang", "--gang-size", "4", "--gang-token", "job-a", "--gang-timeout", "120", "--json")
    procs = []
    for rank in range(4):
        example = "roce-node" if rank == 3 else "hgx-h100-ib"
        where = ("--gang-port", str(port)) if rank == 0 else ("--gang-master", f"127.0.0.1:{port}")
        procs.append(rd("preflight", "--example", example, "--gang-rank", str(rank), *where, *common,
                        env=base_env(NODE_NAME=f"gpu-node-{rank}")))
    results = finish(procs)
    sections = []
    for rank, (code, out, err) in enumerate(results):
        assert code == 1, (rank, err)
        doc = json.loads(out)
        assert doc["verdict"] == "no-go"
        gang = doc["gang"]
        jsonschema.validate(gang, gang_schema())
        sections.append(gang)
    first = same_verdict(sections[0])
    assert all(same_verdict(s) == first for s in sections)
    assert [m["rank"] for m in first["members"]] == [0, 1, 2, 3]
    assert first["missing"] == []
    by_field = {m["field"]: m for m in first["mismatches"]}
    ll = by_field["link_layer"]
    assert ll["majority"] == "InfiniBand"
    assert ll["members"] == [{"rank": 3, "host": "gpu-node-3", "value": "Ethernet"}]
    # Every mismatch names rank 3 and no other.
    assert {m["rank"] for mm in first["mismatches"] for m in mm["members"]} == {3}
    codes = [p["code"] for p in sections[1]["problems"] if p["severity"] == "error"]
    assert codes == ["GANG_MISMATCH_HANG"]
    remedy = sections[1]["problems"][0]["remedy"]
    assert "operator: NotIn, values: [gpu-node-3]" in remedy and "--exclude=gpu-node-3" in remedy
    # The three alike members share one fingerprint digest; the odd one has its own.
    digests = [m["fingerprint"] for m in first["members"]]
    assert len(set(digests[:3])) == 1 and digests[3] != digests[0]


def test_a_members_own_no_go_is_reported_by_rank_0_in_every_log():
    port = free_port()
    procs = []
    for rank in range(3):
        example = "broken-pod" if rank == 2 else "hgx-h100-ib"
        where = ("--gang-port", str(port)) if rank == 0 else ("--gang-master", f"127.0.0.1:{port}")
        procs.append(rd("preflight", "--example", example, "--gang", "--gang-rank", str(rank), "--gang-size", "3",
                        *where, "--json", env=base_env(NODE_NAME=f"n{rank}", RDMADOCTOR_GANG_TOKEN="t")))
    for code, out, err in finish(procs):
        assert code == 1, err
        gang = json.loads(out)["gang"]
        assert [m["verdict"] for m in gang["members"]] == ["go", "go", "no-go"]
        (p,) = [p for p in gang["problems"] if p["code"] == "GANG_MEMBER_NO_GO"]
        assert p["subject"] == "rank 2 on n2"
        assert "MEMLOCK_LIMITED" in p["message"] and "SHM_TOO_SMALL" in p["message"]
        assert "values: [n2]" in p["remedy"]


def test_the_gang_text_of_a_large_gang_lists_only_the_odd_members():
    from rdmadoctor.preflight.gang import gang_text

    members = [_m(r, NCCL_ALGO="Ring" if r == 7 else None) for r in range(20)]
    section = dict(C.judge(members, 21), role="rank0", rank=0, master="this pod, port 9471", refused=[], bandwidth=None)
    lines = gang_text(section)
    assert lines[0] == "gang: NO-GO - 20 of 21 members met (this pod is rank 0; rank 0: this pod, port 9471)"
    assert [ln.split()[1] for ln in lines if ln.startswith("  rank ")] == ["7"]
    assert "  (the other 19 members: GO, alike)" in lines
    assert "  differs: NCCL_ALGO: majority unset; rank 7 Ring" in lines
    assert "  missing: rank 20" in lines


def test_text_output_names_the_odd_member_in_every_log():
    port = free_port()
    procs = []
    for rank in range(2):
        example = "roce-node" if rank == 1 else "hgx-h100-ib"
        where = ("--gang-port", str(port)) if rank == 0 else ("--gang-master", f"127.0.0.1:{port}")
        procs.append(rd("preflight", "--example", example, "--gang", "--gang-rank", str(rank), "--gang-size", "2",
                        *where, env=base_env(NODE_NAME=f"n{rank}", RDMADOCTOR_GANG_TOKEN="t")))
    for code, out, err in finish(procs):
        assert code == 1, err
        assert out.startswith("rdmadoctor preflight: NO-GO")
        assert "gang: NO-GO - 2 of 2 members met" in out
        assert "GANG_MISMATCH_HANG link_layer" in out


def test_a_member_of_another_job_is_refused_and_the_gang_goes_on():
    port = free_port()
    rank0 = rd("preflight", "--example", "hgx-h100-ib", "--gang", "--gang-rank", "0", "--gang-size", "2",
               "--gang-port", str(port), "--gang-timeout", "120", "--json", env=base_env(RDMADOCTOR_GANG_TOKEN="job-a"))
    try:
        stranger = rd("preflight", "--example", "hgx-h100-ib", "--gang", "--gang-rank", "1", "--gang-size", "2",
                      "--gang-master", f"127.0.0.1:{port}", "--gang-timeout", "120", "--json",
                      env=base_env(RDMADOCTOR_GANG_TOKEN="job-b"))
        (code, out, err), = finish([stranger])
        assert code == 1, err
        gang = json.loads(out)["gang"]
        assert gang["verdict"] == "no-go"
        assert [p["code"] for p in gang["problems"]] == ["GANG_REFUSED"]
        assert "another job's token" in gang["problems"][0]["message"]
        member = rd("preflight", "--example", "hgx-h100-ib", "--gang", "--gang-rank", "1", "--gang-size", "2",
                    "--gang-master", f"127.0.0.1:{port}", "--gang-timeout", "120", "--json",
                    env=base_env(RDMADOCTOR_GANG_TOKEN="job-a"))
        results = finish([member, rank0])
    finally:
        if rank0.poll() is None:
            rank0.kill()
            rank0.communicate()
    for code, out, err in results:
        assert code == 0, err
        assert json.loads(out)["gang"]["verdict"] == "go"
    refused = json.loads(results[1][1])["gang"]["refused"]
    assert len(refused) == 1 and "another job's token" in refused[0]


# ---- many members and a missing one, through the session API in real processes -----------------

MEMBER = textwrap.dedent("""
    import json, sys
    from rdmadoctor.gang import session
    rank, size, port, timeout = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    odd = [int(x) for x in sys.argv[5].split(",") if x]
    facts = {"transport": "socket" if rank in odd else "rdma", "link_layer": "InfiniBand",
             "NCCL_IB_DISABLE": "1" if rank in odd else None}
    member = {"host": f"node-{rank}", "verdict": "go", "problems": [], "facts": facts, "digest": str(rank in odd)}
    if rank == 0:
        out = session.run_rank0(size=size, port=port, token="t", member=member, rails=[], timeout=timeout)
    else:
        out = session.run_member(rank=rank, size=size, host="127.0.0.1", port=port, token="t", member=member,
                                 rails=[], timeout=timeout)
    print(json.dumps(out))
""")


def members(ranks: list[int], size: int, port: int, timeout: float, odd: list[int]) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", MEMBER, str(r), str(size), str(port), str(timeout),
                              ",".join(map(str, odd))], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=base_env(), cwd=str(ROOT)) for r in ranks]


def test_sixty_four_members_all_get_the_same_verdict_naming_the_one_on_sockets():
    port = free_port()
    results = finish(members(list(range(64)), 64, port, 200, [17]))
    sections = []
    for code, out, err in results:
        assert code == 0, err
        sections.append(json.loads(out))
    first = same_verdict(sections[0])
    assert all(same_verdict(s) == first for s in sections)
    assert first["verdict"] == "no-go" and first["missing"] == []
    assert [m["rank"] for m in first["members"]] == list(range(64))
    fields = {mm["field"]: mm for mm in first["mismatches"]}
    assert set(fields) == {"transport", "NCCL_IB_DISABLE"}
    assert fields["transport"]["members"] == [{"rank": 17, "host": "node-17", "value": "socket"}]
    assert fields["transport"]["majority"] == "rdma"
    message = next(p["message"] for p in sections[5]["problems"] if "transport" in p["subject"])
    assert message.startswith("rank 17 on node-17: transport socket; the other 63 members have rdma")


def test_a_member_that_never_comes_is_named_with_the_hosts_that_did():
    port = free_port()
    results = finish(members([0, 1], 3, port, 4, []))
    for code, out, err in results:
        assert code == 0, err
        gang = json.loads(out)
        assert gang["verdict"] == "no-go"
        assert gang["missing"] == [2]
        (p,) = [p for p in gang["problems"] if p["code"] == "GANG_MEMBER_MISSING"]
        assert p["subject"] == "rank 2"
        assert "2 of 3 arrived" in p["message"] and "0 node-0, 1 node-1" in p["message"]


def test_a_member_whose_rank_0_never_listens_says_so():
    port = free_port()
    (code, out, err), = finish(members([1], 2, port, 2, []))
    assert code == 0, err
    gang = json.loads(out)
    assert gang["verdict"] == "no-go"
    assert [p["code"] for p in gang["problems"]] == ["GANG_UNREACHABLE"]


def test_rank_0_refuses_an_oversized_message_unread_and_another_version():
    import time

    from rdmadoctor.gang import protocol as P

    a, b = socket.socketpair()
    with a, b:
        b.sendall((P.MAX_TO_MASTER + 1).to_bytes(4, "big") + b"{")
        with pytest.raises(P.ProtocolError, match="over the cap"):
            P.recv(a, time.monotonic() + 5, P.MAX_TO_MASTER)
    a, b = socket.socketpair()
    with a, b:
        P.send(b, {"type": "x"}, P.MAX_TO_MASTER)
        body = b'{"v":1,"type":"join"}'
        b.sendall(len(body).to_bytes(4, "big") + body)
        assert P.recv(a, time.monotonic() + 5, P.MAX_TO_MASTER)["type"] == "x"
        with pytest.raises(P.ProtocolError, match="version 1"):
            P.recv(a, time.monotonic() + 5, P.MAX_TO_MASTER)
        with pytest.raises(P.ProtocolError, match="over the cap"):
            P.send(b, {"type": "x", "pad": "x" * P.MAX_TO_MASTER}, P.MAX_TO_MASTER)


# ---- the facts and the comparison, as data ------------------------------------------------------


def _report(example: str) -> dict:
    from rdmadoctor.preflight.gate import gate

    return gate(example=example).report


def test_facts_of_the_shipped_examples():
    ib = gang_facts(_report("hgx-h100-ib"))
    roce = gang_facts(_report("roce-node"))
    assert ib["transport"] == roce["transport"] == "rdma"
    assert (ib["link_layer"], roce["link_layer"]) == ("InfiniBand", "Ethernet")
    assert (ib["active_ports"], ib["rates_gbps"], ib["nccl_ib_hca_ports"]) == (10, "10x400", 8)
    assert (roce["roce_gid_index"], roce["roce_version"], roce["mtu"]) == ("3", "v2", "4096")
    assert ib["gpudirect"] is True and ib["roce_gid_index"] is None


def test_facts_prefer_the_fingerprint_when_the_report_has_one():
    rep = {"fingerprint": {"schema": "rdmadoctor.fingerprint/v1", "node": {"gpudirect": "none"},
                           "ports": [{"device": "mlx5_0", "port": 1, "state": "ACTIVE", "link_layer": "InfiniBand",
                                      "rate_gbps": 400, "active_mtu": 4096, "subnet_prefix": "fe80:0000:0000:0001"}]},
           "inventory": {"nccl_env": {"NCCL_IB_HCA": "mlx5_1"}}}
    f = gang_facts(rep)
    assert f["subnet_prefix"] == "fe80:0000:0000:0001" and f["gpudirect"] is False
    assert f["transport"] == "socket"  # NCCL_IB_HCA keeps no ACTIVE port: NCCL has no IB device to use


def _m(rank: int, **facts) -> dict:
    return {"rank": rank, "host": f"h{rank}", "verdict": "go", "facts": facts, "digest": None}


def test_majority_and_a_tie_goes_to_rank_0s_side():
    found = C.mismatches([_m(0, mtu="4096"), _m(1, mtu="1024"), _m(2, mtu="4096")])
    assert found[0]["majority"] == "4096" and [m["rank"] for m in found[0]["members"]] == [1]
    tie = C.mismatches([_m(0, NCCL_PROTO="Simple"), _m(1, NCCL_PROTO=None)])
    assert tie[0]["majority"] == "Simple" and tie[0]["members"][0]["value"] is None
    # A hardware fact that could not be read is no difference.
    assert C.mismatches([_m(0, subnet_prefix="fe80::"), _m(1, subnet_prefix=None)]) == []


def test_slow_mismatch_is_a_warning_unless_strict_and_own_no_go_is_reported():
    ms = [_m(0, mtu="4096"), _m(1, mtu="4096"), dict(_m(2, mtu="1024"), verdict="no-go", problems=["IB_PORT_DOWN"])]
    gang = C.judge(ms, 3)
    assert gang["verdict"] == "no-go"
    sev = {p["code"]: p["severity"] for p in gang["problems"]}
    assert sev == {"GANG_MISMATCH_SLOW": "warning", "GANG_MEMBER_NO_GO": "error"}
    assert "IB_PORT_DOWN" in next(p["message"] for p in gang["problems"] if p["code"] == "GANG_MEMBER_NO_GO")
    assert C.judge(ms[:2] + [_m(2, mtu="1024")], 3)["verdict"] == "go"
    assert C.judge(ms[:2] + [_m(2, mtu="1024")], 3, strict=True)["verdict"] == "no-go"


# ---- membership ---------------------------------------------------------------------------------


def test_membership_from_the_launchers():
    pytorchjob = {"RANK": "2", "WORLD_SIZE": "32", "PET_NNODES": "4", "PET_NODE_RANK": "2"}
    m = find_membership(pytorchjob)
    assert (m.rank, m.size, m.rank_source, m.size_source) == (2, 4, "PET_NODE_RANK", "PET_NNODES")
    torchrun_child = {"RANK": "13", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "8", "WORLD_SIZE": "32", "GROUP_RANK": "1"}
    assert (find_membership(torchrun_child).rank, find_membership(torchrun_child).size) == (1, 4)
    mpi = {"OMPI_COMM_WORLD_RANK": "16", "OMPI_COMM_WORLD_SIZE": "32", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "8", "PMIX_NAMESPACE": "prterun-x-1@1"}
    m = find_membership(mpi)
    assert (m.rank, m.size, m.token_source) == (2, 4, "PMIX_NAMESPACE")
    assert not find_membership(dict(mpi, OMPI_COMM_WORLD_LOCAL_RANK="3")).takes_part
    assert find_membership({}, rank=1, size=2, token="x").token == "x"
    volcano = {"VC_WORKER_HOSTS": "job-worker-0.job,job-worker-1.job,job-worker-2.job", "VC_MASTER_HOSTS": "job-master-0.job"}
    m = find_membership(volcano, hostname="job-worker-1")
    assert (m.rank, m.size) == (2, 4)
    assert find_membership(volcano, hostname="job-master-0").rank == 0
    with pytest.raises(UsageError, match="not known"):
        find_membership({})
    with pytest.raises(UsageError, match="elastic"):
        find_membership({"PET_NNODES": "2:4", "NODE_RANK": "0"})
    with pytest.raises(UsageError, match="not between 0 and 1"):
        find_membership({}, rank=2, size=2)


def test_gang_master_endpoint():
    assert parse_endpoint("m-0:9000", 9471) == ("m-0", 9000)
    assert parse_endpoint("m-0", 9471) == ("m-0", 9471)
    assert parse_endpoint("[fd00::5]:80", 9471) == ("fd00::5", 80)
    assert parse_endpoint("fd00::5", 9471) == ("fd00::5", 9471)
    for bad in ("", "tcp://x:1", "x:99999", "[fd00::5"):
        with pytest.raises(UsageError):
            parse_endpoint(bad, 9471)


def test_gang_options_need_gang_and_are_checked_before_the_checks(capsys):
    from conftest import run_cli

    code, out, err = run_cli(["preflight", "--example", "roce-node", "--gang-rank", "1"])
    assert code == 2 and "--gang-rank needs --gang" in err and out == ""
    code, out, err = run_cli(["preflight", "--example", "roce-node", "--gang", "--gang-timeout", "0",
                              "--gang-rank", "0", "--gang-size", "1"])
    assert code == 2 and "--gang-timeout" in err and out == ""
    code, out, err = run_cli(["preflight", "--example", "roce-node", "--gang", "--gang-rank", "0", "--gang-size", "1",
                              "--set", "gang_slow_share=2"])
    assert code == 2 and "gang_slow_share" in err


def test_a_local_rank_other_than_0_leaves_the_gang_to_its_node(capsys):
    from rdmadoctor.preflight.run import run_preflight

    code = run_preflight(example="roce-node", gang=True, as_json=True,
                         env={"LOCAL_RANK": "3", "RANK": "11", "WORLD_SIZE": "16", "MASTER_ADDR": "10.0.0.1"})
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["gang"]["role"] == "none"
    jsonschema.validate(doc["gang"], gang_schema())


def test_run_takes_the_gang_options_of_preflight():
    from rdmadoctor.cli.run import parse_argv

    kw = parse_argv(["--gang", "--gang-rank", "0", "--gang-size", "1", "--bandwidth", "--", "true"])
    assert kw.gang and kw.bandwidth and kw.gang_size == 1 and kw.command == ["true"]


def test_run_gang_prints_the_gang_verdict_on_stderr_and_runs_the_job():
    proc = rd("run", "--example", "roce-node", "--gang", "--gang-rank", "0", "--gang-size", "1", "--",
              sys.executable, "-c", "print('trained')", env=base_env())
    (code, out, err), = finish([proc])
    assert code == 0, err
    assert out == "trained\n"
    assert "gang: GO - 1 of 1 member met" in err


# ---- --bandwidth: the judgement, perftest ------------------------------------------------------


def _pairs(rounds: list[dict[tuple[int, int], float]]) -> list[dict]:
    return [{"round": i, "sender": s, "receiver": r, "rail": None, "gbps": g, "error": None}
            for i, ring in enumerate(rounds) for (s, r), g in ring.items()]


def test_ring_then_shifted_ring_names_the_slow_member_not_its_neighbours():
    assert B.schedule([0, 1, 2, 3]) == [[(0, 1), (1, 2), (2, 3), (3, 0)], [(0, 2), (1, 3), (2, 0), (3, 1)]]
    assert B.schedule([0, 1]) == [[(0, 1), (1, 0)]]
    hosts = {r: f"h{r}" for r in range(4)}
    # Member 2's sending side is shaped: 2->3 in the ring, 2->0 in the shifted ring.
    pairs = _pairs([{(0, 1): 9.0, (1, 2): 9.5, (2, 3): 0.1, (3, 0): 9.2},
                    {(0, 2): 9.1, (1, 3): 9.4, (2, 0): 0.1, (3, 1): 9.3}])
    slow, unmeasured, median = B.judge(pairs, 2, hosts, 0.7)
    assert [(s["rank"], s["direction"]) for s in slow] == [(2, "send")] and unmeasured == []
    assert slow[0]["gbps"] == 0.1 and slow[0]["median_gbps"] == pytest.approx(9.2)
    # A link slow both ways, three members (most pairs touch it), healthy ones noisy: that member only.
    sym = _pairs([{(0, 1): 5.0, (1, 2): 0.2, (2, 0): 0.2}, {(0, 2): 0.2, (1, 0): 9.0, (2, 1): 0.2}])
    assert [s["rank"] for s in B.judge(sym, 2, hosts, 0.7)[0]] == [2]
    # Slow with one peer only: a pair, not a member.
    once = _pairs([{(0, 1): 9.0, (1, 2): 9.5, (2, 3): 0.1, (3, 0): 9.2},
                   {(0, 2): 9.1, (1, 3): 9.4, (2, 0): 9.0, (3, 1): 9.3}])
    assert B.judge(once, 2, hosts, 0.7)[0] == []
    failed = [{"round": 0, "sender": 0, "receiver": 1, "rail": None, "gbps": None, "error": "refused"}]
    assert B.judge(failed, 1, hosts, 0.7)[1] == [{"pair": "rank 0 -> rank 1", "error": "refused"}]


def test_ib_write_bw_recorded_outputs():
    gbits = (GANG_FIXTURES / "dgxspark_ib_write_bw_run_infinitely_92_57Gbps.txt").read_text()
    assert B.parse_ib_write_bw(gbits) == 92.57
    mbytes = (GANG_FIXTURES / "dgxspark_ib_write_bw_roce_11032MBps_mtu1024.txt").read_text()
    assert B.parse_ib_write_bw(mbytes) == pytest.approx(92.55, abs=0.01)
    assert B.parse_ib_write_bw("Couldn't connect to 10.0.0.2:18516\n") is None
    assert B.ib_command("mlx5_3", 18519, 1, "10.0.0.2") == [
        "ib_write_bw", "-d", "mlx5_3", "-i", "1", "-p", "18519", "--report_gbits", "-F", "-D", "1", "10.0.0.2"]


def test_ib_round_drives_a_fake_ib_write_bw_per_rail(tmp_path):
    fake = tmp_path / "ib_write_bw"
    sample = GANG_FIXTURES / "dgxspark_ib_write_bw_run_infinitely_92_57Gbps.txt"
    log = tmp_path / "calls"
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\nsed -n '/^ *#bytes/,$p' {sample}\n")
    fake.chmod(0o755)
    instr = {"seconds": 1, "send_to": {"rank": 1, "addr": "127.0.0.1", "rails": ["mlx5_0", "mlx5_1"]},
             "recv_from": {"rank": 1, "rails": ["mlx5_0", "mlx5_1"]}}
    pairs = B.ib_round(0, instr, ["mlx5_0", "mlx5_1", "mlx5_9"], tool=str(fake))
    assert [(p["rail"], p["gbps"]) for p in pairs] == [("mlx5_0", 92.57), ("mlx5_1", 92.57)]
    calls = log.read_text().splitlines()
    assert sorted(calls) == sorted([
        "-d mlx5_0 -i 1 -p 18516 --report_gbits -F -D 1", "-d mlx5_1 -i 1 -p 18517 --report_gbits -F -D 1",
        "-d mlx5_0 -i 1 -p 18516 --report_gbits -F -D 1 127.0.0.1",
        "-d mlx5_1 -i 1 -p 18517 --report_gbits -F -D 1 127.0.0.1"])


def test_tcp_stream_between_two_members_on_loopback():
    port = free_port()
    procs = [subprocess.Popen([sys.executable, "-c", BW_MEMBER, str(r), str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=base_env(), cwd=str(ROOT)) for r in (0, 1)]
    for code, out, err in finish(procs):
        assert code == 0, err
        bw = json.loads(out)["bandwidth"]
        assert bw["tool"] == "tcp" and bw["rounds"] == 1
        assert len(bw["pairs"]) == 2 and all(p["gbps"] and p["gbps"] > 0 for p in bw["pairs"]), bw


BW_MEMBER = textwrap.dedent("""
    import json, sys
    from rdmadoctor.gang import session
    rank, port = int(sys.argv[1]), int(sys.argv[2])
    member = {"host": f"node-{rank}", "verdict": "go", "problems": [], "facts": {"transport": "socket"}}
    if rank == 0:
        out = session.run_rank0(size=2, port=port, token="t", member=member, rails=[], timeout=60, bandwidth=True,
                                seconds=0.3)
    else:
        out = session.run_member(rank=1, size=2, host="127.0.0.1", port=port, token="t", member=member, rails=[],
                                 timeout=60, bandwidth=True)
    print(json.dumps(out))
""")


# ---- --bandwidth in network namespaces, one member's link shaped --------------------------------

IP, TC = shutil.which("ip"), shutil.which("tc")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([IP, *args], capture_output=True, text=True, check=check, timeout=30)


@pytest.fixture
def gang_netns():
    """A bridge in a hub namespace and four member namespaces on it (198.18.0.1-4/24, the
    benchmarking range), member 2's link shaped to 100 Mbit/s. Removed whole afterwards."""
    if IP is None or TC is None:
        pytest.skip("iproute2 (`ip`, `tc`) is not installed")
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    tag = f"rdg{os.getpid() % 100000}"
    hub = f"{tag}-hub"
    names = [f"{tag}-m{i}" for i in range(4)]
    if _ip("netns", "add", hub, check=False).returncode != 0:
        pytest.skip("cannot create a network namespace")
    made = [hub]
    try:
        _ip("-n", hub, "link", "add", "br0", "type", "bridge")
        _ip("-n", hub, "link", "set", "br0", "up")
        for i, ns in enumerate(names):
            _ip("netns", "add", ns)
            made.append(ns)
            _ip("-n", hub, "link", "add", f"p{i}", "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("-n", hub, "link", "set", f"p{i}", "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"198.18.0.{i + 1}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        # Both ends of member 2's link: its sends (eth0) and what the bridge sends it (p2).
        for ns, dev in ((names[2], "eth0"), (hub, "p2")):
            subprocess.run([IP, "netns", "exec", ns, TC, "qdisc", "add", "dev", dev, "root", "tbf",
                            "rate", "100mbit", "burst", "64kb", "latency", "50ms"], check=True, capture_output=True,
                           timeout=30)
        yield names
    finally:
        for ns in made:
            _ip("netns", "del", ns, check=False)
    left = _ip("netns", "list").stdout
    assert not any(ns in left for ns in made)


@pytest.mark.real
def test_bandwidth_names_the_shaped_member_and_no_other(gang_netns):
    procs = []
    for rank, ns in enumerate(gang_netns):
        where = ("--gang-port", "9471") if rank == 0 else ("--gang-master", "198.18.0.1")
        procs.append(rd("preflight", "--profile", "tcp", "--gang", "--bandwidth", "--gang-rank", str(rank),
                        "--gang-size", "4", *where, "--gang-token", "ns-job", "--json",
                        # The unshaped veths are CPU-bound on a shared machine (2x apart between runs): the
                        # shaped member is 1/20 of them, a noisy healthy one never under 0.3.
                        "--set", "gang_slow_share=0.3",
                        env=base_env(NODE_NAME=f"member-{rank}"), prefix=(IP, "netns", "exec", ns)))
    sections = []
    for code, out, err in finish(procs):
        assert out, err
        sections.append(json.loads(out)["gang"])
    for gang in sections:
        assert gang["missing"] == [], gang
        assert gang["bandwidth"]["tool"] == "tcp" and gang["bandwidth"]["rounds"] == 2
        assert [(s["rank"], s["host"]) for s in gang["slow"]] == [(2, "member-2")], [(p["round"], p["sender"], p["receiver"], p["gbps"]) for p in gang["bandwidth"]["pairs"]]
        assert gang["verdict"] == "no-go"
        assert any(p["code"] == "GANG_MEMBER_SLOW" and p["subject"] == "rank 2 on member-2" for p in gang["problems"])
