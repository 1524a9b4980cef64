"""rdmadoctor.slurm without a Slurm: the hostlist reader, the parsing of `scontrol show node -o`, the
reasons, who the gang blames, and `slurm health` / `slurm prolog` against a stand-in scontrol.

The stand-in (a small Python script keeping its nodes in a JSON file) is for these unit tests
only; tests/system/test_slurm_real.py runs the same commands against a real slurmctld and slurmd."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from rdmadoctor.preflight.gang import gang_text
from rdmadoctor.slurm import reason as R
from rdmadoctor.slurm.hostlist import HostlistError, expand
from rdmadoctor.slurm.prolog import blame, blamed_ranks
from rdmadoctor.slurm.scontrol import Scontrol, SlurmError, is_drained, parse_node_line


@pytest.mark.parametrize("text, hosts", [
    ("n1", ["n1"]),
    ("n[1-2,4-5]", ["n1", "n2", "n4", "n5"]),
    ("a[01-03]b", ["a01b", "a02b", "a03b"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("gpu7,n[3-4],login", ["gpu7", "n3", "n4", "login"]),
    ("node[008-010]", ["node008", "node009", "node010"]),
    ("x[9-11]", ["x9", "x10", "x11"]),
    ("dgx-a[1,3]-ib", ["dgx-a1-ib", "dgx-a3-ib"]),
])
def test_hostlist_expands_like_slurm(text, hosts):
    assert expand(text) == hosts


@pytest.mark.parametrize("text", ["", "n[1-2", "n1-2]", "n[2-1]", "n[a-b]", "n[1-2]]", "n[[1]]", "a,,b", "n[1-99999999]", "n[1 -2]"])
def test_hostlist_refuses_what_slurm_would_not_write(text):
    with pytest.raises(HostlistError):
        expand(text)


LINE = ("NodeName=n3 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 AvailableFeatures=gpu,rdma ActiveFeatures=gpu,rdma "
        "NodeAddr=10.0.0.3 NodeHostName=gpu3 Version=22.05.8 OS=Linux 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian "
        "RealMemory=1 State=IDLE+DRAIN ThreadsPerCore=1 Partitions=debug,gpu BootTime=2026-11-28T19:50:56 "
        "CfgTRES=cpu=1,mem=1M,billing=1 AllocTRES= CapWatts=n/a "
        "Reason=rdmadoctor: IB_PORT_DOWN mlx5_3/1 (+2 more) [root@2026-11-28T19:55:42] Comment=(null)")


def test_scontrol_show_node_line():
    n = parse_node_line(LINE)
    assert n["NodeName"] == "n3" and n["NodeAddr"] == "10.0.0.3" and n["State"] == "IDLE+DRAIN"
    assert n["OS"].startswith("Linux 6.1.0-18-amd64 #1 SMP") and n["Partitions"] == "debug,gpu"
    assert n["Reason"] == "rdmadoctor: IB_PORT_DOWN mlx5_3/1 (+2 more)" and n["ReasonUser"] == "root"
    assert n["CfgTRES"] == "cpu=1,mem=1M,billing=1" and n["AllocTRES"] == ""
    assert is_drained(n) and not is_drained({"State": "IDLE"}) and is_drained({"State": "ALLOCATED+DRAIN"})
    # A reason that holds `Key=value` text stays whole.
    n = parse_node_line("NodeName=n1 State=DOWN+DRAIN Reason=admin: set Foo=bar by hand [alice@2026-01-02T03:04:05]")
    assert n["Reason"] == "admin: set Foo=bar by hand" and "Foo" not in n


def test_reasons_name_the_root_first_and_stay_short():
    rep = {"checks": [{"id": "ib.ports", "findings": [
        {"code": "IB_PORT_DOWN", "severity": "error", "subject": "mlx5_3/1"},
        {"code": "IB_PORT_DOWN", "severity": "error", "subject": "mlx5_4/1"},
        {"code": "IB_RATE_LOW", "severity": "warning", "subject": "mlx5_0/1"},
        {"code": "FOLLOWS", "severity": "error", "subject": "x", "cause": "IB_PORT_DOWN"}]}]}
    assert R.node_reason(rep, "IB_PORT_DOWN") == "rdmadoctor: IB_PORT_DOWN mlx5_3/1 (+1 more)"
    assert R.node_reason(rep, "IB_PORT_DOWN", strict=True) == "rdmadoctor: IB_PORT_DOWN mlx5_3/1 (+2 more)"
    long = {"checks": [{"id": "x", "findings": [{"code": "X", "severity": "error", "subject": "s'\n" * 200}]}]}
    text = R.node_reason(long, "X")
    assert len(text) <= R.MAX_REASON and text.endswith("...") and "'" not in text and "\n" not in text
    assert R.is_ours("rdmadoctor: X") and not R.is_ours("admin: rdmadoctor: X") and not R.is_ours(None)
    assert R.code_of("rdmadoctor: GANG_MISMATCH_HANG link_layer") == "GANG_MISMATCH_HANG" and R.code_of("Prolog error") == ""


def _section(values, missing=(), slow=(), verdicts=None):
    """A gang section as rank 0 sends it: ``values`` the link layer of each rank."""
    from rdmadoctor.gang.compare import judge

    members = [{"rank": r, "host": f"n{r + 1}", "verdict": (verdicts or {}).get(r, "go"),
                "facts": {"transport": "rdma", "link_layer": v}} for r, v in enumerate(values) if r not in missing]
    return judge(members, len(values), slow=list(slow))


def test_the_gang_blames_only_the_odd_one_out_of_a_clear_majority():
    three_one = _section(["InfiniBand", "InfiniBand", "Ethernet", "InfiniBand"])
    assert blame(three_one, 2, False, "") == "GANG_MISMATCH_HANG link_layer Ethernet, the other 3 InfiniBand"
    assert [blame(three_one, r, False, "") for r in (0, 1, 3)] == ["", "", ""]
    assert blamed_ranks(three_one) == {2}
    # A two-two split, a pair, a member missing: nobody.
    for s in (_section(["InfiniBand", "InfiniBand", "Ethernet", "Ethernet"]), _section(["InfiniBand", "Ethernet"]),
              _section(["InfiniBand", "InfiniBand", "Ethernet", "InfiniBand", "InfiniBand"], missing=(4,))):
        assert s["verdict"] == "no-go" and blamed_ranks(s) == set()
    # Its own NO-GO is always its own, even with a member missing.
    s = _section(["InfiniBand"] * 3, missing=(2,), verdicts={1: "no-go"})
    assert blame(s, 1, True, "IB_PORT_DOWN mlx5_0/1") == "IB_PORT_DOWN mlx5_0/1" and blamed_ranks(s) == {1}
    # A slow member (with --bandwidth).
    s = _section(["InfiniBand"] * 3, slow=[{"rank": 1, "host": "n2", "gbps": 40.0, "median_gbps": 380.0, "share": 0.7}])
    assert blame(s, 1, False, "") == "GANG_MEMBER_SLOW 40 Gb/s, gang median 380 Gb/s"


def test_gang_text_says_this_node_off_kubernetes():
    from rdmadoctor.preflight.gang import member_word

    section = dict(_section(["InfiniBand"] * 2), role="rank0", rank=0, master="this pod, port 9471")
    assert "this node is rank 0; rank 0: this node, port 9471" in gang_text(section, "this node")[0]
    assert member_word({}) == "this node" and member_word({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}) == "this pod"


# -- a stand-in scontrol -------------------------------------------------------------------------

STANDIN = textwrap.dedent('''\
    #!{python}
    """A stand-in scontrol for unit tests: nodes in $FAKE_SLURM (JSON); every call logged."""
    import json, os, sys, time
    path = os.environ["FAKE_SLURM"]
    db = json.load(open(path))
    args = sys.argv[1:]
    db.setdefault("calls", []).append(args)
    if db.get("sleep"):
        time.sleep(db["sleep"])
    def line(n):
        words = [f"{{k}}={{v}}" for k, v in n.items() if k != "Reason"]
        if n.get("Reason"):
            words.append(f"Reason={{n['Reason']}} [root@2026-11-28T19:55:42]")
        return " ".join(words)
    out = 0
    if args[:3] == ["show", "node", "-o"]:
        names = args[3:] or list(db["nodes"])
        for name in names:
            if name not in db["nodes"]:
                print(f"Node {{name}} not found", file=sys.stderr); out = 1
            else:
                print(line(db["nodes"][name]))
    elif args[:1] == ["update"]:
        kv = dict(a.split("=", 1) for a in args[1:])
        n = db["nodes"][kv["nodename"]]
        if kv.get("state") == "drain":
            n["State"] = n["State"].split("+")[0] + "+DRAIN"; n["Reason"] = kv["reason"]
            for other, why in db.pop("on_drain", {{}}).items():  # another node drains at the same moment
                db["nodes"][other]["State"] += "+DRAIN"; db["nodes"][other]["Reason"] = why
        elif kv.get("state") == "resume":
            n["State"] = n["State"].split("+")[0]; n.pop("Reason", None)
        if "availablefeatures" in kv:
            n["AvailableFeatures"] = kv["availablefeatures"] or "(null)"
            n["ActiveFeatures"] = kv["activefeatures"] or "(null)"
    elif args[:1] == ["requeue"]:
        db["requeued"] = args[1]
    json.dump(db, open(path, "w"))
    sys.exit(out)
''')


@pytest.fixture
def fake(tmp_path):
    script = tmp_path / "scontrol"
    script.write_text(STANDIN.format(python=sys.executable))
    script.chmod(0o755)
    db = tmp_path / "slurm.json"
    nodes = {f"n{i}": {"NodeName": f"n{i}", "NodeAddr": "127.0.0.1", "State": "IDLE", "Partitions": "gpu",
                       "AvailableFeatures": "gpu", "ActiveFeatures": "gpu"} for i in range(1, 5)}
    db.write_text(json.dumps({"nodes": nodes}))

    class Fake:
        path = script
        state = tmp_path / "state"

        def db(self):
            return json.loads(db.read_text())

        def node(self, name):
            return self.db()["nodes"][name]

        def set(self, name, **fields):
            data = self.db()
            data["nodes"][name].update(fields)
            db.write_text(json.dumps(data))

        def run(self, *args, node="n1", env=None):
            e = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
            e.update(FAKE_SLURM=str(db), SLURMD_NODENAME=node, **(env or {}))
            return subprocess.run([sys.executable, "-m", "rdmadoctor", "slurm", *args, "--scontrol", str(script)],
                                  capture_output=True, text=True, env=e, timeout=120)

        def health(self, example, *more, node="n1"):
            return self.run("health", "--example", example, "--state-dir", str(self.state),
                            "--set", "quarantine_after=1", "--set", "release_after=1", *more, node=node)

    return Fake()


def test_health_dry_run_prints_the_drain_and_changes_nothing(fake, tmp_path):
    r = fake.health("broken-pod", "--dry-run", "--report-file", str(tmp_path / "h.json"))
    assert r.returncode == 1, r.stderr
    assert "dry-run, would run: scontrol update nodename=n1 state=drain 'reason=rdmadoctor: IB_PORT_DOWN" in r.stdout
    assert fake.node("n1")["State"] == "IDLE"
    assert not [c for c in fake.db().get("calls", []) if c[0] == "update"]
    doc = json.loads((tmp_path / "h.json").read_text())
    assert doc["schema"] == "rdmadoctor.slurm-health/v1" and doc["action"] == "hold" and doc["dry_run"]
    assert doc["report"]["status"] == "fail" and doc["pool"]["size"] == 4


def test_health_waits_for_its_window_by_default(fake):
    for i in (1, 2):
        r = fake.run("health", "--example", "broken-pod", "--state-dir", str(fake.state))
        assert f"problem {i} of 3 consecutive cycles" in r.stdout and fake.node("n1")["State"] == "IDLE"
    r = fake.run("health", "--example", "broken-pod", "--state-dir", str(fake.state))
    assert fake.node("n1")["Reason"].startswith("rdmadoctor: IB_PORT_DOWN"), r.stdout


def test_health_unknown_changes_nothing_unless_asked(fake, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = fake.run("health", "--bundle", str(empty), "--state-dir", str(fake.state), "--set", "quarantine_after=1")
    assert r.returncode == 2 and "could not decide" in r.stdout and "--unknown drain" in r.stdout, r.stdout
    assert fake.node("n1")["State"] == "IDLE"
    r = fake.run("health", "--bundle", str(empty), "--state-dir", str(fake.state), "--set", "quarantine_after=1",
                 "--unknown", "drain")
    assert fake.node("n1")["Reason"].startswith("rdmadoctor: "), r.stdout
    assert fake.node("n1")["State"] == "IDLE+DRAIN"


def test_health_resumes_only_its_own_drain(fake):
    fake.set("n2", State="IDLE+DRAIN", Reason="NHC: check_fs_mount /scratch")
    r = fake.health("hgx-h100-ib", node="n2")
    assert r.returncode == 0 and "drained by another" in r.stdout
    assert fake.node("n2")["Reason"] == "NHC: check_fs_mount /scratch"
    fake.set("n3", State="IDLE+DRAIN", Reason="rdmadoctor: IB_PORT_DOWN mlx5_0/1")
    fake.health("hgx-h100-ib", node="n3")
    assert fake.node("n3")["State"] == "IDLE" and "Reason" not in fake.node("n3")


def test_health_stands_back_when_others_drained_at_the_same_moment(fake, tmp_path):
    data = fake.db()
    data["on_drain"] = {"n1": "rdmadoctor: IB_PORT_DOWN mlx5_0/1"}
    (tmp_path / "slurm.json").write_text(json.dumps(data))
    r = fake.health("broken-pod", "--set", "quarantine_budget=1", node="n3")
    assert "drained, then resumed" in r.stdout and "at most 1" in r.stdout, r.stdout
    assert fake.node("n3")["State"] == "IDLE" and fake.node("n1")["State"] == "IDLE+DRAIN"
    # With room in the budget both stay.
    data = fake.db()
    data["on_drain"] = {"n2": "rdmadoctor: IB_PORT_DOWN mlx5_0/1"}
    (tmp_path / "slurm.json").write_text(json.dumps(data))
    fake.health("broken-pod", "--set", "quarantine_budget=3", "--set", "storm_share=1", node="n4")
    assert fake.node("n4")["State"] == "IDLE+DRAIN"


def test_health_features_follow_the_labels_and_keep_the_others(fake):
    assert fake.health("hgx-h100-ib", "--features").returncode == 0
    assert fake.node("n1")["ActiveFeatures"].split(",") == ["gpu", "rdma", "ib", "rdma_ready"]
    assert fake.node("n1")["AvailableFeatures"].split(",") == ["gpu", "rdma", "ib", "rdma_ready"]
    fake.health("roce-node", "--features")
    assert fake.node("n1")["ActiveFeatures"].split(",") == ["gpu", "rdma", "roce", "rdma_ready"]
    fake.health("broken-pod", "--features")
    assert "rdma_ready" not in fake.node("n1")["ActiveFeatures"] and "gpu" in fake.node("n1")["ActiveFeatures"]


def test_scontrol_gets_a_deadline(fake, tmp_path):
    data = fake.db()
    data["sleep"] = 30
    (tmp_path / "slurm.json").write_text(json.dumps(data))
    r = fake.health("broken-pod", "--scontrol-timeout", "0.5")
    assert r.returncode == 2 and "did not answer within 0.5 s" in r.stderr, r.stderr


def test_usage_errors_change_nothing(fake, tmp_path):
    for args in (("--unknown", "maybe"), ("--set", "quarantine_budget=-3"), ("--example", "nope"), ("--only", "no.such")):
        r = fake.health("broken-pod", *args)
        assert r.returncode == 2 and r.stderr.startswith("rdmadoctor: error:"), (args, r.stderr)
    r = fake.run("health", "--example", "broken-pod", "--node", "n1", "--scontrol-timeout", "0")
    assert r.returncode == 2
    r = fake.run("health", "--example", "broken-pod", "--state-dir", str(fake.state), node="n9")
    assert r.returncode == 2 and "knows no node 'n9'" in r.stderr
    assert not [c for c in fake.db().get("calls", []) if c[0] == "update"]


def test_prolog_without_gang_drains_its_own_node_with_the_job(fake):
    r = fake.run("prolog", "--example", "broken-pod", node="n2", env={"SLURM_JOB_ID": "77"})
    assert r.returncode == 1, r.stdout + r.stderr
    assert fake.node("n2")["Reason"].startswith("rdmadoctor: IB_PORT_DOWN ") and fake.node("n2")["Reason"].endswith("(job 77)")
    r = fake.run("prolog", "--example", "hgx-h100-ib", node="n3", env={"SLURM_JOB_ID": "77"})
    assert r.returncode == 0 and fake.node("n3")["State"] == "IDLE"
    # Another's drain is kept even when the Prolog fails the job.
    fake.set("n4", State="ALLOCATED+DRAIN", Reason="admin: going away")
    assert fake.run("prolog", "--example", "broken-pod", node="n4").returncode == 1
    assert fake.node("n4")["Reason"] == "admin: going away"
    assert fake.run("prolog", "--bandwidth", "--example", "broken-pod", node="n4").returncode == 2


def test_prolog_gang_of_one_in_process(fake):
    """A one-node gang needs no peer: the gang section is judged in place, nobody is blamed."""
    r = fake.run("prolog", "--gang", "--example", "hgx-h100-ib", node="n1",
                 env={"SLURM_NODELIST": "n1", "SLURM_JOB_ID": "5", "SLURM_CLUSTER_NAME": "c"})
    assert r.returncode == 0 and "gang: GO - 1 of 1 member met (this node is rank 0" in r.stdout, r.stdout + r.stderr
    r = fake.run("prolog", "--gang", "--example", "hgx-h100-ib", node="n4", env={"SLURM_NODELIST": "n[1-3]"})
    assert r.returncode == 2 and "not in the job's node list" in r.stderr


def test_scontrol_errors_are_said_not_raised(tmp_path):
    bad = tmp_path / "scontrol"
    bad.write_text("#!/bin/sh\necho 'slurm_load_node error: Unable to contact slurm controller' >&2\nexit 1\n")
    bad.chmod(0o755)
    sc = Scontrol(str(bad), timeout=5)
    with pytest.raises(SlurmError, match="Unable to contact slurm controller"):
        sc.nodes()
    echoed = []
    dry = Scontrol(str(bad), dry_run=True, echo=echoed.append)
    dry.drain("n1", "rdmadoctor: X y")
    assert echoed == ["scontrol update nodename=n1 state=drain 'reason=rdmadoctor: X y'"]


def test_prolog_gang_port_held_by_another_job_drains_nobody(fake):
    """Nodes shared between jobs: another job's Prolog holds the gang port. No fault of this node."""
    import socket

    held = socket.create_server(("", 0))
    try:
        port = held.getsockname()[1]
        r = fake.run("prolog", "--gang", "--gang-port", str(port), "--gang-timeout", "5", "--example", "hgx-h100-ib",
                     node="n1", env={"SLURM_NODELIST": "n[1-2]", "SLURM_JOB_ID": "9"})
    finally:
        held.close()
    assert r.returncode == 0 and "gang: not run" in r.stdout and "cannot listen" in r.stdout, r.stdout + r.stderr
    assert r.stdout.startswith("rdmadoctor slurm prolog: GO")
    assert not [c for c in fake.db().get("calls", []) if c[0] == "update"]


def test_prolog_strict_requeues_a_gang_nobody_can_be_blamed_for(fake, tmp_path, monkeypatch):
    """The exchange itself is preflight's (tests/unit/gang/test_gang.py); here rank 0 gets a two-two split."""
    from rdmadoctor.preflight import gang as G
    from rdmadoctor.slurm.prolog import run_prolog

    split = dict(_section(["InfiniBand", "InfiniBand", "Ethernet", "Ethernet"]), role="rank0", rank=0, master="this pod, port 1")

    class Plan:
        def close(self):
            pass

    monkeypatch.setattr(G, "prepare", lambda env, **kw: Plan())
    monkeypatch.setattr(G, "meet", lambda plan, g, env, **kw: (setattr(g, "verdict", "no-go"), split)[1])
    env = {"SLURM_NODELIST": "n[1-4]", "SLURM_JOB_ID": "42", "SLURM_CLUSTER_NAME": "c"}
    lines: list[str] = []
    sc_env = dict(os.environ, FAKE_SLURM=str(tmp_path / "slurm.json"))
    for strict, requeued in ((False, None), (True, "42")):
        sc = Scontrol(str(fake.path), env=sc_env)
        gate_args = dict(root=None, bundle=None, example="hgx-h100-ib", profile="generic", config=None, pool=None,
                         sets=[], only=[], skip=[], timeout=None)
        code = run_prolog(gate_args=gate_args, name="n1", sc=sc, env=env, gang=True, strict=strict, say=lines.append)
        assert code == 0 and fake.db().get("requeued") == requeued, lines
        assert not [c for c in fake.db().get("calls", []) if c[0] == "update"]
    assert any("no node drained, the job starts (--strict requeues it)" in x for x in lines)
    assert any("--strict: job 42 requeued, no node drained" in x for x in lines)


def test_prolog_gang_remedy_speaks_slurm_and_says_what_it_drained(fake):
    """A one-node gang whose member is broken: blamed, drained; the remedy says so in Slurm's words."""
    env = {"SLURM_NODELIST": "n2", "SLURM_JOB_ID": "77", "SLURM_CLUSTER_NAME": "c"}
    r = fake.run("prolog", "--gang", "--example", "broken-pod", node="n2", env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    reason = fake.node("n2")["Reason"]
    assert reason.startswith("rdmadoctor: IB_PORT_DOWN ") and reason.endswith("(job 77)")
    assert "GANG_MEMBER_NO_GO" in r.stdout and "sbatch --exclude=n2 " in r.stdout, r.stdout
    assert f'rdmadoctor drained n2 in its Prolog (reason "{reason}")' in r.stdout
    assert "nodeAffinity" not in r.stdout and "Keep every job off it" not in r.stdout
    # Drained by an administrator first: nothing drained by rdmadoctor, so the remedy still says how.
    fake.set("n3", State="IDLE+DRAIN", Reason="admin: going away")
    r = fake.run("prolog", "--gang", "--example", "broken-pod", node="n3", env=dict(env, SLURM_NODELIST="n3"))
    assert r.returncode == 1 and fake.node("n3")["Reason"] == "admin: going away"
    assert "Keep every job off it until it is fixed: scontrol update nodename=n3 state=drain" in r.stdout, r.stdout
    assert "rdmadoctor drained" not in r.stdout


def test_storm_counts_slurms_own_record_without_a_shared_state_dir(fake, tmp_path):
    """Each node its own --state-dir (no shared file system): the failing nodes are read from
    `scontrol show node -o`, the drains whose reason starts rdmadoctor: (a health check's or a
    Prolog's); another's drain is not counted."""
    fake.set("n1", State="IDLE+DRAIN", Reason="rdmadoctor: IB_PORT_DOWN mlx5_0/1")
    fake.set("n2", State="ALLOCATED+DRAIN", Reason="NHC: check_fs_mount /scratch")
    own = ("--set", "quarantine_budget=4", "--set", "storm_share=0.3")
    r = fake.run("health", "--example", "broken-pod", "--state-dir", str(tmp_path / "only-n3"),
                 "--set", "quarantine_after=1", *own, "--report-file", str(tmp_path / "h.json"), node="n3")
    assert "defer-storm" in r.stdout and "2 of 4 nodes" in r.stdout, r.stdout
    assert "failing: n1 (rdmadoctor's drain in Slurm), n3 (this run)" in r.stdout, r.stdout
    assert fake.node("n3")["State"] == "IDLE"
    doc = json.loads((tmp_path / "h.json").read_text())
    assert doc["pool"]["failing_nodes"] == {"n1": "rdmadoctor's drain in Slurm", "n3": "this run"}
    assert doc["pool"]["held"] == 1 and doc["pool"]["failing"] == 2
    # A Prolog's gang drain is rdmadoctor's too; with it, 3 of 4.
    fake.set("n4", State="IDLE+DRAIN", Reason="rdmadoctor: GANG_MISMATCH_HANG link_layer Ethernet, the other 3 InfiniBand (job 9)")
    r = fake.run("health", "--example", "broken-pod", "--state-dir", str(tmp_path / "only-n3"),
                 "--set", "quarantine_after=1", *own, node="n3")
    assert "3 of 4 nodes" in r.stdout and "n4 (rdmadoctor's drain in Slurm)" in r.stdout, r.stdout
    # Below the share (only n3 failing once n1 and n4 are resumed): drained.
    fake.set("n1", State="IDLE")
    fake.set("n4", State="IDLE")
    r = fake.run("health", "--example", "broken-pod", "--state-dir", str(tmp_path / "only-n3"),
                 "--set", "quarantine_after=1", *own, node="n3")
    assert fake.node("n3")["Reason"].startswith("rdmadoctor: IB_PORT_DOWN"), r.stdout


GANG_HANG = "rdmadoctor: GANG_MISMATCH_HANG link_layer Ethernet, the other 3 InfiniBand (job 9)"


def test_a_gang_drain_is_resumed_only_where_the_nodes_own_checks_vouch_for_what_the_gang_blamed():
    from rdmadoctor.slurm.health import gang_release

    assert gang_release("rdmadoctor: IB_PORT_DOWN mlx5_0/1 (job 9)", {}, "n1") == (True, "")  # its own code
    may, said = gang_release(GANG_HANG, {"link_layer": None, "rdma_transport": None}, "n1")
    assert not may and "neither link_layer nor rdma_transport is set" in said
    assert said.endswith("or resume it yourself: scontrol update nodename=n1 state=resume")
    may, said = gang_release(GANG_HANG, {"link_layer": "InfiniBand"}, "n1")
    assert may and "link_layer=InfiniBand" in said
    may, said = gang_release(GANG_HANG, {"rdma_transport": "RoCE"}, "n1")  # the pool's own transport: RoCE
    assert may and "rdma_transport=RoCE" in said
    # What no expectation judges (the measured bandwidth, NCCL's version): a person decides.
    for reason in ("rdmadoctor: GANG_MEMBER_SLOW 40 Gb/s, gang median 380 Gb/s (job 9)",
                   "rdmadoctor: GANG_MISMATCH_HANG nccl_version 2.18.1, the other 3 2.21.5 (job 9)",
                   "rdmadoctor: GANG_SOMETHING_NEW (job 9)"):
        may, said = gang_release(reason, {"link_layer": "InfiniBand"}, "n2")
        assert not may and "cannot judge" in said and "resumes it: scontrol update nodename=n2 state=resume" in said, reason


def test_health_keeps_a_gang_drain_it_cannot_vouch_for_and_says_so_every_run(fake, tmp_path):
    """The Prolog's gang drained n1, an Ethernet member of an InfiniBand job; its own checks pass
    (hgx-h100-ib), so without an expectation of the link layer a release would put it back under
    the next job, drained again: it is kept, saying how to release it, run after run; once the
    partition's pool expects InfiniBand, the next healthy run resumes it."""
    fake.set("n1", State="IDLE+DRAIN", Reason=GANG_HANG)
    report = tmp_path / "h.json"
    for _ in range(2):
        r = fake.health("hgx-h100-ib", "--report-file", str(report))
        assert r.returncode == 0, r.stderr
        assert "slurm: keep: healthy for" in r.stdout and "but not resumed" in r.stdout, r.stdout
        assert "scontrol update nodename=n1 state=resume" in r.stdout, r.stdout
        assert fake.node("n1")["Reason"] == GANG_HANG and fake.node("n1")["State"] == "IDLE+DRAIN"
        doc = json.loads(report.read_text())
        assert doc["action"] == "keep" and doc["history"]["held"] and doc["history"]["held_code"] == "GANG_MISMATCH_HANG"
        assert not [c for c in fake.db()["calls"] if c[0] == "update"]
    r = fake.health("hgx-h100-ib", "--set", "link_layer=InfiniBand", "--report-file", str(report))
    assert "resumed" in r.stdout and "link_layer=InfiniBand, and pass" in r.stdout, r.stdout
    assert fake.node("n1")["State"] == "IDLE" and "Reason" not in fake.node("n1")
    assert json.loads(report.read_text())["action"] == "release"


def test_health_keeps_a_gang_drain_while_the_node_fails_the_pools_link_layer(fake):
    # The pool expects InfiniBand and n1 has Ethernet (RoCE) ports: its own checks fail, still held.
    fake.set("n1", State="IDLE+DRAIN", Reason=GANG_HANG)
    r = fake.health("roce-node", "--set", "link_layer=InfiniBand")
    assert r.returncode == 1 and "slurm: keep: still failing" in r.stdout, r.stdout
    assert fake.node("n1")["Reason"] == GANG_HANG
