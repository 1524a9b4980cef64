"""Issue 33, items 2 and 5: the gang exchange against hostile peers, on loopback only.

A fake rank 0 here is a loopback stand-in for anyone who can answer on the master's address (no
real attacker can run in a test); rank 0 is the real one (``session.run_rank0``) in a thread of
the test, and its members are real ``session.run_member`` calls or raw sockets that speak the
protocol with a chosen flaw. Nothing here asserts a duration: every wait polls for a condition,
or is a deadline far beyond what the exchange needs.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from pathlib import Path

import pytest
import yaml

from rdmadoctor.gang import compare as C
from rdmadoctor.gang import protocol as P
from rdmadoctor.gang import session

ROOT = Path(__file__).parents[3]
TOKEN = "job-a"
WAIT_S = 120.0  # a deadline, never a duration: the exchange ends long before it


def good_member(host: str = "node-1", **facts) -> dict:
    return {"host": host, "verdict": "go", "problems": [], "facts": {"transport": "rdma", **facts},
            "digest": "0123456789abcdef"}


class Box(threading.Thread):
    """Run ``fn`` in a thread; ``result()`` waits for it (with a generous deadline)."""

    def __init__(self, fn, *args, **kwargs):
        super().__init__(daemon=True)
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.value = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.value = self.fn(*self.args, **self.kwargs)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            self.error = e

    def result(self):
        self.join(WAIT_S * 2)
        assert not self.is_alive(), "did not finish"
        if self.error is not None:
            raise self.error
        return self.value


def server() -> socket.socket:
    return socket.create_server(("127.0.0.1", 0), backlog=1024)


# ---- item 2: a fake rank 0, and a member that refuses ------------------------------------------


class Sink:
    """A loopback listener a fake rank 0 points a bandwidth round at: it counts who connects."""

    def __init__(self, host: str = "127.0.0.1"):
        self.sock = socket.create_server((host, 0))
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.sock.close()


class FakeRank0:
    """Answers one member: a challenge, then what ``script(join)`` returns (frames, as bytes),
    then records what the member sends back until it closes (or ``expect`` messages came)."""

    def __init__(self, script, expect: int = 100):
        self.srv = server()
        self.port = self.srv.getsockname()[1]
        self.script = script
        self.expect = expect
        self.after_join: list[dict] = []
        self.box = Box(self._run)

    def _run(self) -> None:
        self.srv.settimeout(WAIT_S)
        conn, _ = self.srv.accept()
        with conn:
            P.send(conn, {"type": "challenge", "nonce": "ab" * 16}, P.MAX_FROM_MASTER)
            join = P.recv(conn, time.monotonic() + WAIT_S, P.MAX_TO_MASTER)
            for data in self.script(join):
                conn.sendall(data)
            try:
                while len(self.after_join) < self.expect:
                    self.after_join.append(P.recv(conn, time.monotonic() + WAIT_S, P.MAX_TO_MASTER))
            except (P.ProtocolError, OSError):
                pass
        self.srv.close()  # one member, once: a member that joins again finds nobody

    def close(self) -> None:
        self.box.result()
        self.srv.close()


def raw(obj: dict | str) -> bytes:
    body = obj.encode() if isinstance(obj, str) else json.dumps(obj).encode()
    return struct.pack(">I", len(body)) + body


def bw_round(sink: Sink, *, rank: int = 0, addr: str = "127.0.0.1", seconds: float = 0.5, recv: bool = True) -> dict:
    """A round of a gang of two: this member sends to ``rank`` (rank 0) and receives from rank 0."""
    return {"type": "bw_round", "round": 0, "tool": "tcp", "seconds": seconds,
            "send_to": {"rank": rank, "addr": addr, "port": sink.port, "key": "cd" * 16, "rails": []},
            "recv_from": {"rank": 0, "key": "ef" * 16, "rails": []} if recv else None, "v": P.VERSION}


def signed(join: dict, msg: dict) -> bytes:
    body = {k: v for k, v in msg.items() if k != "v"}
    return raw(dict(P.sign(TOKEN, join["nonce"], body), v=P.VERSION))


SINK_CASES = {
    # name: (the member's --bandwidth, what the fake rank 0 sends, the reason the member gives)
    "unsigned round": (True, lambda j, s: [raw(bw_round(s))], "not signed with this job's token"),
    "signed round, member without --bandwidth": (
        False, lambda j, s: [signed(j, bw_round(s))], "started without --bandwidth"),
    "120 s round against the member's 1 s": (
        True, lambda j, s: [signed(j, bw_round(s, seconds=120))], "allow at most 1 s"),
    "a peer that is no member": (
        True, lambda j, s: [signed(j, bw_round(s, rank=7))], "names no other member of this gang of 2"),
    "rank 0 somewhere else": (
        True, lambda j, s: [signed(j, bw_round(s, addr="127.0.0.2"))], "but rank 0 is 127.0.0.1"),
    "a host name, not an address": (
        True, lambda j, s: [signed(j, dict(bw_round(s), send_to=dict(bw_round(s)["send_to"], rank=0,
                                                                        addr="-oProxyCommand=x")))],
        "is not a member's IP address"),
    "a forged GO verdict": (
        False, lambda j, s: [raw({"type": "verdict", "gang": {"verdict": "go"}, "mac": "0" * 64, "v": P.VERSION})],
        "not signed with this job's token"),
    "deeply nested challenge": (False, None, "nested deeper than 32 levels"),
    "deeply nested signed message": (
        True, lambda j, s: [signed(j, {"type": "verdict", "gang": {"x": json.loads("[" * 40 + "]" * 40)}})],
        "nested deeper than 32 levels"),
    "NaN in a message": (True, lambda j, s: [raw('{"type": "verdict", "gang": {"x": NaN}, "v": 2}')],
                         "NaN is not a JSON number"),
}


@pytest.mark.parametrize("case", list(SINK_CASES), ids=list(SINK_CASES))
def test_a_member_acts_on_nothing_a_fake_rank_0_sends(case, capfd):
    bandwidth, script, reason = SINK_CASES[case]
    sink = Sink()
    try:
        if script is None:  # the very first frame is the attack: no challenge, no join
            srv = server()
            port = srv.getsockname()[1]

            def attack() -> None:
                srv.settimeout(WAIT_S)
                conn, _ = srv.accept()
                with conn:
                    conn.sendall(raw("[" * 100_000 + "]" * 100_000))
                    conn.settimeout(WAIT_S)
                    while conn.recv(65536):
                        pass

            box = Box(attack)
            try:
                out = session.run_member(rank=1, size=2, host="127.0.0.1", port=port, token=TOKEN,
                                         member=good_member(), rails=[], timeout=30, bandwidth=bandwidth)
            finally:
                box.result()
                srv.close()
        else:
            fake = FakeRank0(lambda join: script(join, sink))
            try:
                out = session.run_member(rank=1, size=2, host="127.0.0.1", port=fake.port, token=TOKEN,
                                         member=good_member(), rails=[], timeout=30, bandwidth=bandwidth)
            finally:
                fake.close()
            assert fake.after_join == []  # no bw_done: nothing was run, nothing reported
    finally:
        sink.close()
    assert out["verdict"] == "unknown", out
    (problem,) = out["problems"]
    assert problem["code"] == "GANG_PROTOCOL" and reason in problem["message"], problem["message"]
    assert sink.connections == 0
    assert "Traceback" not in capfd.readouterr().err


def test_a_member_with_bandwidth_runs_a_signed_round_it_agreed_to():
    """The control case: the same fake rank 0, knowing the token, within the member's settings."""
    sink = Sink()
    fake = FakeRank0(lambda join: [signed(join, bw_round(sink, seconds=0.2, recv=False))], expect=1)
    try:
        # timeout: how long the member tries to join again once the fake has closed (no verdict).
        out = session.run_member(rank=1, size=2, host="127.0.0.1", port=fake.port, token=TOKEN,
                                 member=good_member(), rails=[], timeout=3, bandwidth=True)
    finally:
        fake.close()
        sink.close()
    assert [m["type"] for m in fake.after_join] == ["bw_done"]
    # It sent (the sink hangs up, so the send is reported failed) and received from nobody.
    assert [(p["sender"], p["receiver"]) for p in fake.after_join[0]["pairs"]] in ([], [(1, 0)])
    assert sink.connections == 1
    assert out["problems"][0]["code"] in ("GANG_PROTOCOL", "GANG_UNREACHABLE")  # no verdict came


# ---- item 5: rank 0 outlives its peers --------------------------------------------------------


def run_rank0(size: int, srv: socket.socket, lines: list[str], **kw) -> Box:
    return Box(session.run_rank0, size=size, port=srv.getsockname()[1], token=TOKEN,
               member=dict(good_member("node-0"), problems=[]), rails=[], timeout=kw.pop("timeout", WAIT_S),
               server=srv, log=lines.append, **kw)


def raw_join(port: int, rank: int, *, size: int = 2, token: str = TOKEN, mutate=None, frame: bytes | None = None,
             member: dict | None = None) -> tuple[socket.socket, str]:
    """A member that speaks the protocol itself: (its socket, its nonce). ``mutate`` changes the
    join before it is signed (a member with the token and a bad field)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
    hello = P.recv(sock, time.monotonic() + WAIT_S, P.MAX_FROM_MASTER)
    assert hello["type"] == "challenge"
    nonce = "12" * 16
    body = {"type": "join", "rank": rank, "size": size, "nonce": nonce, "member": member or good_member(f"node-{rank}"),
            "bw": None}
    if mutate is not None:
        mutate(body)
    if frame is None:
        frame = raw(dict(body, proof=P.proof(token, hello["nonce"], body), v=P.VERSION))
    sock.sendall(frame)
    return sock, nonce


def wait_for(cond) -> None:
    deadline = time.monotonic() + WAIT_S
    while not cond():
        assert time.monotonic() < deadline, "condition never met"
        time.sleep(0.02)


def reply(sock: socket.socket) -> dict:
    with sock:
        return P.recv(sock, time.monotonic() + WAIT_S, P.MAX_FROM_MASTER)


def _set(path: str, value):
    def mutate(body: dict) -> None:
        *parents, last = path.split(".")
        d = body
        for p in parents:
            d = d[p]
        d[last] = value
    return mutate


BAD_JOINS = {
    # name: (the join's flaw, what the refusal names)
    "problems a number": (dict(mutate=_set("member.problems", 5)), "member.problems is a number"),
    "bandwidth port x": (dict(mutate=_set("bw", {"port": "x", "rails": []})), "bw.port is 'x'"),
    "host a list": (dict(mutate=_set("member.host", ["a"])), "member.host is a list"),
    "rank a string": (dict(mutate=_set("rank", "1")), "rank '1' is not a member rank"),
    "facts nested": (dict(mutate=_set("member.facts", {"mtu": {"a": 1}})), "member.facts.mtu is an object"),
    "verdict unknown word": (dict(mutate=_set("member.verdict", "maybe")), "member.verdict is 'maybe'"),
    "a code with a newline": (dict(mutate=_set("member.problems", ["X\nrdmadoctor preflight: GO"])),
                              "member.problems holds"),
    "NaN in facts": (dict(frame=raw('{"type": "join", "rank": 1, "size": 2, "v": 2, "member": {"facts": '
                                    '{"mtu": NaN}}}')), "NaN is not a JSON number"),
    "nested 100000 deep": (dict(frame=raw("[" * 30_000 + "]" * 30_000)), "nested deeper than 32 levels"),
    "another job's token": (dict(token="job-b"), "another job's token"),
}


def test_bad_members_are_named_and_refused_and_the_gang_goes_on(capfd):
    srv = server()
    port = srv.getsockname()[1]
    lines: list[str] = []
    rank0 = run_rank0(2, srv, lines)
    for name, (how, reason) in BAD_JOINS.items():
        sock, _ = raw_join(port, 1, **how)
        answer = reply(sock)
        assert answer["type"] == "refused" and reason in answer["reason"], (name, answer)
    member = session.run_member(rank=1, size=2, host="127.0.0.1", port=port, token=TOKEN, member=good_member(),
                                rails=[], timeout=60)
    gang = rank0.result()
    assert member["verdict"] == gang["verdict"] == "go", (member, gang)
    assert len(gang["refused"]) == len(BAD_JOINS)
    assert any("member.problems is a number" in r for r in gang["refused"])
    assert "Traceback" not in capfd.readouterr().err
    json.dumps(gang, allow_nan=False)


@pytest.mark.parametrize("cap,idle", [(8, 40), (None, 300)], ids=["cap 8, 40 idle", "default cap, 300 idle"])
def test_idle_connections_cost_no_thread_and_cannot_lock_a_member_out(monkeypatch, cap, idle):
    """Connections that never join, more than rank 0 lets wait, reopened as they are closed, while
    a real member joins: rank 0 stays one thread, closes the oldest, and the member gets in
    (joining again if its own connection is the one closed)."""
    if cap is not None:
        monkeypatch.setattr(P, "MAX_PENDING", cap)
    srv = server()
    port = srv.getsockname()[1]
    lines: list[str] = []
    before = threading.active_count()
    rank0 = run_rank0(2, srv, lines)
    held: list[socket.socket] = []
    stop = threading.Event()
    threads_seen: list[int] = []

    def flood() -> None:
        while not stop.is_set() and len(held) < idle + 200:
            try:
                held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            except OSError:
                pass
            threads_seen.append(threading.active_count())
            if len(held) >= idle:  # then one more now and then, as rank 0 closes the oldest
                stop.wait(0.02)

    attacker = Box(flood)
    try:
        deadline = time.monotonic() + WAIT_S
        while len(held) < idle and time.monotonic() < deadline:  # over the cap before the member comes
            time.sleep(0.05)
        member = session.run_member(rank=1, size=2, host="127.0.0.1", port=port, token=TOKEN,
                                    member=good_member(), rails=[], timeout=WAIT_S)
    finally:
        stop.set()
        attacker.result()
        for s in held:
            s.close()
    gang = rank0.result()
    assert member["verdict"] == gang["verdict"] == "go", (member, lines[-5:])
    # rank 0's thread, the attacker's, this one: never one per connection.
    assert max(threads_seen) <= before + 2, max(threads_seen)
    assert any(f"at the cap of {cap or P.MAX_PENDING} connections" in ln for ln in lines)


def test_a_member_whose_connection_is_closed_before_the_challenge_joins_again():
    srv = server()
    port = srv.getsockname()[1]
    lines: list[str] = []

    def first_closed_then_rank0():
        srv.settimeout(WAIT_S)
        conn, _ = srv.accept()
        conn.close()
        return session.run_rank0(size=2, port=port, token=TOKEN, member=good_member("node-0"), rails=[],
                                 timeout=WAIT_S, server=srv, log=lines.append)

    rank0 = Box(first_closed_then_rank0)
    logs: list[str] = []
    member = session.run_member(rank=1, size=2, host="127.0.0.1", port=port, token=TOKEN, member=good_member(),
                                rails=[], timeout=WAIT_S, log=logs.append)
    assert rank0.result()["verdict"] == member["verdict"] == "go"
    assert any("joining again" in ln for ln in logs)


def test_a_second_join_does_not_displace_a_live_member():
    srv = server()
    port = srv.getsockname()[1]
    lines: list[str] = []
    rank0 = run_rank0(3, srv, lines)
    first, nonce = raw_join(port, 1, size=3)
    wait_for(lambda: any(ln.startswith("rank 1 joined") for ln in lines))
    impostor, impostor_nonce = raw_join(port, 1, size=3, member=good_member("stale-pod"))
    answer = reply(impostor)
    assert answer["type"] == "refused" and "rank 1 is already a member" in answer["reason"]
    assert P.signed(TOKEN, impostor_nonce, answer)  # it proved the token: the refusal is rank 0's word
    third, nonce3 = raw_join(port, 2, size=3)
    gang = rank0.result()
    assert gang["verdict"] == "go" and [m["host"] for m in gang["members"]] == ["node-0", "node-1", "node-2"]
    for sock, n in ((first, nonce), (third, nonce3)):
        verdict = reply(sock)
        assert verdict["type"] == "verdict" and P.signed(TOKEN, n, verdict)
        assert verdict["gang"]["verdict"] == "go"


def test_a_member_that_dies_after_joining_does_not_count():
    """A member's socket closed after its join (what the kernel does when the pod is killed):
    rank 0 drops it, the others are told NO-GO with it missing."""
    srv = server()
    port = srv.getsockname()[1]
    lines: list[str] = []
    rank0 = run_rank0(3, srv, lines, timeout=15)
    dead, _ = raw_join(port, 1, size=3)
    dead.close()
    alive, nonce = raw_join(port, 2, size=3)
    gang = rank0.result()
    assert gang["verdict"] == "no-go" and gang["missing"] == [1]
    assert any("rank 1 joined from 127.0.0.1, then closed its connection" in r for r in gang["refused"])
    verdict = reply(alive)
    assert P.signed(TOKEN, nonce, verdict) and verdict["gang"]["missing"] == [1]


def test_the_liveness_check_before_the_verdict_drops_a_closed_member():
    pairs = [socket.socketpair() for _ in range(3)]
    joined = {r: P.Joined(a, {"rank": r, "nonce": "ab" * 16, "member": good_member(f"n{r}")}, f"10.0.0.{r}", "10.0.0.9")
              for r, (a, _b) in enumerate(pairs, 1)}
    pairs[1][1].close()  # rank 2's pod was killed
    left = P.prune(joined)
    assert sorted(joined) == [1, 3] and list(left) == [2]
    assert "rank 2 joined from 10.0.0.2, then closed its connection before the verdict" == left[2]
    for a, b in pairs:
        a.close()
        b.close()
    gang = C.judge([dict(good_member("n0"), rank=0), dict(good_member("n1"), rank=1), dict(good_member("n3"), rank=3)],
                   4, left=left)
    (missing,) = [p for p in gang["problems"] if p["code"] == "GANG_MEMBER_MISSING"]
    assert gang["verdict"] == "no-go" and missing["message"].startswith(left[2])


def test_nan_in_rank_0s_own_facts_never_reaches_json():
    srv = server()
    port = srv.getsockname()[1]
    rank0 = Box(session.run_rank0, size=2, port=port, token=TOKEN,
                member=dict(good_member("node-0"), facts={"mtu": float("nan"), "NCCL_ALGO": float("inf")}),
                rails=[], timeout=WAIT_S, server=srv)
    session.run_member(rank=1, size=2, host="127.0.0.1", port=port, token=TOKEN,
                       member=good_member(NCCL_ALGO="Ring"), rails=[], timeout=WAIT_S)
    gang = rank0.result()
    json.dumps(gang, allow_nan=False)
    assert gang["mismatches"][0]["field"] == "NCCL_ALGO"


# ---- host names that try to write lines, YAML or shell -----------------------------------------

FORGE = "evil\nrdmadoctor preflight: GO"
YAML_BREAK = "evil]}, {key: x, operator: Exists"


def test_a_host_name_cannot_forge_a_line_or_rewrite_the_node_affinity_fix():
    from rdmadoctor.preflight.render import render_text

    members = [dict(good_member("node-0"), rank=0), dict(good_member(FORGE), rank=1, verdict="no-go"),
               dict(good_member(YAML_BREAK), rank=2, verdict="no-go"), dict(good_member("$(reboot)"), rank=3,
                                                                            verdict="no-go")]
    section = dict(C.judge(members, 4), role="rank0", rank=0, master="this pod, port 9471", bandwidth=None,
                   refused=[f"10.0.0.7: rank 1: {FORGE}"])
    text = render_text(None, "no-go", gang=section)
    assert "rdmadoctor preflight: GO" not in text.splitlines()
    assert '"evil\\nrdmadoctor preflight: GO"' in text
    for p in section["problems"]:
        assert "\n" not in p["message"]
        remedy = p["remedy"]
        affinity = yaml.safe_load(remedy[remedy.index("affinity:"):remedy.index("Under Slurm:")])
        (term,) = affinity["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"]
        (expr,) = term["matchExpressions"]
        assert expr["operator"] == "NotIn" and expr["key"] == "kubernetes.io/hostname"
        slurm = remedy[remedy.index("Under Slurm:"):]
        assert "$(" not in slurm and "]" not in slurm.split(";")[0] and "reboot" not in slurm and "evil" not in slurm
    no_go = [p for p in section["problems"] if p["code"] == "GANG_MEMBER_NO_GO"]
    values = [yaml.safe_load(p["remedy"][p["remedy"].index("affinity:"):p["remedy"].index("Under Slurm:")])["affinity"]
              ["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
              ["matchExpressions"][0]["values"] for p in no_go]
    assert values == [[FORGE], [YAML_BREAK], ["$(reboot)"]]


def test_plain_node_names_stay_plain_and_yaml_words_are_quoted():
    fix = C.exclusion(["gpu-node-3"])
    assert "values: [gpu-node-3]" in fix and "--exclude=gpu-node-3" in fix
    fix = C.exclusion(["true", "1e3"])
    values = yaml.safe_load(fix[fix.index("affinity:"):fix.index("Under Slurm:")])
    expr = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert expr["matchExpressions"][0]["values"] == ["1e3", "true"]


# ---- the shipped examples' token is per run ----------------------------------------------------


def _containers(doc: dict):
    if doc["kind"] == "PyTorchJob":
        specs = [s["template"] for s in doc["spec"]["pytorchReplicaSpecs"].values()]
    else:
        specs = [t["template"] for t in doc["spec"]["tasks"]]
    for tpl in specs:
        yield from tpl["spec"]["containers"]


@pytest.mark.parametrize("example", ["pytorchjob.yaml", "volcano-job.yaml"])
def test_the_examples_gang_token_names_the_run_not_only_the_job(example):
    doc = yaml.safe_load((ROOT / "deploy" / "examples" / example).read_text())
    tokens = []
    for c in _containers(doc):
        env = {e["name"]: e for e in c.get("env", [])}
        if "RDMADOCTOR_GANG_TOKEN" not in env:
            continue
        tokens.append(env["RDMADOCTOR_GANG_TOKEN"])
        if doc["kind"] == "PyTorchJob":
            # A name generated per submission: an earlier run of the same job never shares it.
            assert "name" not in doc["metadata"] and doc["metadata"]["generateName"]
            assert env["RDMADOCTOR_GANG_TOKEN"]["valueFrom"]["fieldRef"]["fieldPath"] == \
                "metadata.labels['training.kubeflow.org/job-name']"
        else:
            # Volcano's PodGroup is <job>-<job UID>; its version counts the job's restarts.
            names = [e["name"] for e in c["env"]]
            value = env["RDMADOCTOR_GANG_TOKEN"]["value"]
            for ref in ("scheduling.k8s.io/group-name", "volcano.sh/job-version"):
                (var,) = [e["name"] for e in c["env"] if ref in e.get("valueFrom", {}).get("fieldRef", {})
                          .get("fieldPath", "")]
                assert f"$({var})" in value and names.index(var) < names.index("RDMADOCTOR_GANG_TOKEN")
    assert len(tokens) == 2


def test_rank_0_with_bandwidth_never_asks_a_member_that_did_not_agree():
    srv = server()
    port = srv.getsockname()[1]
    lines: list[str] = []
    rank0 = run_rank0(2, srv, lines, bandwidth=True, seconds=0.2)
    member = session.run_member(rank=1, size=2, host="127.0.0.1", port=port, token=TOKEN, member=good_member(),
                                rails=[], timeout=WAIT_S)
    gang = rank0.result()
    assert member["verdict"] == gang["verdict"] == "unknown" and gang["bandwidth"] is None
    (p,) = gang["problems"]
    assert p["code"] == "GANG_BANDWIDTH_UNMEASURED" and "started without --bandwidth" in p["message"]
