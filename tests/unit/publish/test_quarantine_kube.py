"""``agent --publish node --quarantine taint|dry-run`` (issue 28): ten agents, one API server.

No Kubernetes API server can run here, so the agents talk to tests/kubeapi.py's FakeKubeAPI, a
loopback stand-in that models what quarantine needs: taints written whole with a resourceVersion
(409 on a stale one), label-selector lists, Leases (create refuses an existing one, update needs
the current resourceVersion) and Events. Everything else is real: each agent is the real
rdmadoctor.agent.Agent loop with its own NodePublisher, lightkube client and KubeQuarantine,
running the real checks every second on a shipped example bundle (hgx-h100-ib: healthy;
broken-pod: a port down), switched per agent by the test. The agents run as threads of the test
process (ten processes would cost a loaded 2-core machine ten interpreters); every wait polls
for a condition with a generous deadline.
"""

from __future__ import annotations

import io
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("lightkube")
kubeapi = pytest.importorskip("kubeapi")

from rdmadoctor.agent import Agent, Log, Settings
from rdmadoctor.core import quarantine as Q
from rdmadoctor.output.metrics import AgentMetrics
from rdmadoctor.publish import make_publisher
from rdmadoctor.publish.quarantine import TAINT_KEY, KubeQuarantine, lease_name
from rdmadoctor.runner import Options

HEALTHY, BROKEN = "hgx-h100-ib", "broken-pod"
NAMESPACE = "rdmadoctor"
ADMIN_TAINT = {"key": "example.com/maintenance", "value": "bios", "effect": "NoSchedule"}
DEADLINE = 90.0


def until(what: str, cond, timeout: float = DEADLINE, every: float = 0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out waiting for: {what}")


class Fleet:
    """Ten agents (gpu-00 .. gpu-09) in one pool against one FakeKubeAPI."""

    def __init__(self, api, tmp: Path, n: int = 10, mode: str = "taint", sets: tuple[str, ...] = ()):
        self.api = api
        self.kubeconfig = api.kubeconfig(tmp / "kubeconfig")
        self.names = [f"gpu-{i:02d}" for i in range(n)]
        self.stop = threading.Event()
        self.agents: dict[str, Agent] = {}
        self.logs: dict[str, io.StringIO] = {}
        self.threads: list[threading.Thread] = []
        for name in self.names:
            api.add_node(name, labels={"kubernetes.io/hostname": name})
            pub = make_publisher("node", node=name, kubeconfig=self.kubeconfig, backoff=0.01, prefix="rdmadoctor.io/", cancel=self.stop)
            q = KubeQuarantine(api=pub.api, node=name, mode=mode, pool=None, prefix="rdmadoctor.io/", namespace=NAMESPACE)
            metrics = AgentMetrics("test", ("node",))
            metrics.enable_quarantine(dry_run=mode == "dry-run")
            self.logs[name] = io.StringIO()
            opts = Options(example=HEALTHY, scope="node", sets=list(sets))
            self.agents[name] = Agent(opts, pub, metrics, Log("text", self.logs[name]), Settings(interval=1.0), stop=self.stop, quarantine=q)
            q.log = self.agents[name].log

    def start(self) -> None:
        # Each client's first request made one at a time: lightkube 1.0.1 with msgspec 0.22
        # crashed the interpreter (SIGSEGV) about once in fifteen runs when ten clients in threads
        # of one process made their first requests at once; warmed, 0 in 30. The agent itself
        # has one client and makes one request at a time.
        for name, a in self.agents.items():
            a.publisher.api.get_node(name)
            list(a.quarantine._list_pool())
        for a in self.agents.values():
            t = threading.Thread(target=a.run, daemon=True)
            t.start()
            self.threads.append(t)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=10)
        for a in self.agents.values():
            a.publisher.close()

    def set(self, names, example: str) -> None:
        for n in names:
            self.agents[n].opts.example = example

    def tainted(self) -> set[str]:
        return {n for n in self.names if any(t.get("key") == TAINT_KEY for t in self.api.taints(n))}

    def events(self, reason: str) -> set[str]:
        return {e["involvedObject"]["name"] for e in self.api.events if e["reason"] == reason}

    def ready(self, name: str) -> str | None:
        return self.api.labels(name).get("rdmadoctor.io/ready")


@pytest.fixture
def api():
    with kubeapi.FakeKubeAPI() as a:
        a.allow_taints = True
        a.namespaces.add(NAMESPACE)
        yield a


def test_ten_agents_budget_release_storm_and_an_admins_taint(api, tmp_path: Path) -> None:
    sets = ("quarantine_after=4", "release_after=2", "quarantine_budget=2", "storm_share=0.3")
    fleet = Fleet(api, tmp_path, sets=sets)
    api.set_taints("gpu-00", [ADMIN_TAINT])
    # Once, an administrator writes the Node between the agent's read and its taint write: the
    # agent's write meets a 409 Conflict, reads again and keeps both administrator taints.
    second = {"key": "example.com/owner", "value": "infra", "effect": "PreferNoSchedule"}
    raced = threading.Event()
    real = api._handle

    def racing(method, raw_path, headers, body):
        if method == "PATCH" and raw_path.startswith("/api/v1/nodes/gpu-00") and b'"taints"' in body and not raced.is_set():
            raced.set()
            api.set_taints("gpu-00", api.taints("gpu-00") + [second])
        return real(method, raw_path, headers, body)

    api._handle = racing
    seen_over_budget: list[set[str]] = []
    watching = threading.Event()

    def watch() -> None:  # the budget, checked all along, not only at the end
        while not watching.is_set():
            t = fleet.tainted()
            if len(t) > 2:
                seen_over_budget.append(t)
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    fleet.start()
    watcher.start()
    try:
        until("every node published ready=true and the pool label",
              lambda: all(fleet.ready(n) == "true" and api.labels(n).get("rdmadoctor.io/pool") == "default" for n in fleet.names))
        broken = ["gpu-00", "gpu-01", "gpu-02"]
        fleet.set(broken, BROKEN)
        # Three broken nodes, a budget of 2: exactly two taints, the third deferred.
        until("two taints and the third deferred",
              lambda: len(fleet.tainted()) == 2 and set(broken) - fleet.tainted() <= fleet.events("RDMAQuarantineDeferred"))
        held = fleet.tainted()
        (third,) = set(broken) - held
        assert held <= set(broken)
        for n in held:
            (t,) = [t for t in api.taints(n) if t["key"] == TAINT_KEY]
            assert t == {"key": TAINT_KEY, "value": "IB_PORT_DOWN", "effect": "NoSchedule"}
            assert not api.nodes[n]["spec"].get("unschedulable")
        cond = until("the third's condition says why", lambda: [c for c in api.conditions(third) if c["type"] == "RDMAQuarantineDeferred"])
        assert cond[0]["status"] == "True" and cond[0]["reason"] == "BudgetSpent" and "budget" in cond[0]["message"]
        # The two held ones heal: both released, and the third takes a freed place.
        fleet.set(held, HEALTHY)
        until("the healed released and the third held", lambda: fleet.tainted() == {third} and third in fleet.events("RDMAQuarantined"))
        assert held <= fleet.events("RDMAReleased")
        assert fleet.events("RDMAQuarantined") >= set(broken)
        until("the third's condition cleared",
              lambda: [c["status"] for c in api.conditions(third) if c["type"] == "RDMAQuarantineDeferred"] == ["False"])
        fleet.set([third], HEALTHY)
        until("all released", lambda: not fleet.tainted() and third in fleet.events("RDMAReleased"))

        # A storm: five of ten fail at once. Nobody new is tainted; each says why, once.
        storm = ["gpu-03", "gpu-04", "gpu-05", "gpu-06", "gpu-07"]
        fleet.set(storm, BROKEN)
        until("every storm node deferred by the storm rule", lambda: set(storm) <= fleet.events("RDMAQuarantineStorm"))
        # Long enough for every storm node to pass its window a few times over.
        until("four more cycles of each storm node",
              lambda: all(fleet.agents[n].quarantine.history.problem_streak >= 8 for n in storm))
        assert not fleet.tainted()
        storm_events = [e for e in api.events if e["reason"] == "RDMAQuarantineStorm"]
        assert len(storm_events) == len(storm), "one Event per node and storm, not one per cycle"
        assert all("IB_PORT_DOWN" in e["message"] and "5 of 10" in e["message"] for e in storm_events)
        q = fleet.agents["gpu-03"].quarantine
        assert q.storm == ("default", "IB_PORT_DOWN") and q.state["action"] == Q.DEFER_STORM
        text = _metrics(fleet.agents["gpu-03"])
        assert 'rdmadoctor_quarantine_storm{code="IB_PORT_DOWN",pool="default"} 1.0' in text
        assert 'rdmadoctor_quarantine_actions_total{action="defer-storm"} 1.0' in text
        fleet.set(storm, HEALTHY)
        until("storm over", lambda: all(fleet.ready(n) == "true" for n in storm))
    finally:
        watching.set()
        fleet.close()
        watcher.join(timeout=5)
    assert not seen_over_budget, seen_over_budget
    # The administrator's taints were never lost, through holds, releases and a 409.
    assert raced.is_set() and any(r.method == "PATCH" for r in api.requests)
    assert api.taints("gpu-00") == [ADMIN_TAINT, second]
    # Never NoExecute, never a cordon, never another key: every taint write rdmadoctor sent.
    for r in api.requests:
        if r.method == "PATCH" and isinstance(r.body, dict) and "spec" in r.body:
            assert set(r.body["spec"]) == {"taints"} and r.body["metadata"]["resourceVersion"]
            for t in r.body["spec"]["taints"]:
                assert t["key"] != TAINT_KEY or t["effect"] == "NoSchedule"
    assert any(r.method == "PATCH" and r.path == "/api/v1/nodes/gpu-00" for r in api.requests)
    held_metrics = _metrics(fleet.agents[third])
    assert 'rdmadoctor_quarantine_actions_total{action="hold"} 1.0' in held_metrics
    assert 'rdmadoctor_quarantine_actions_total{action="release"} 1.0' in held_metrics
    assert "rdmadoctor_quarantined 0.0" in held_metrics
    # The pool's Lease was used, and is free.
    lease = api.lease(NAMESPACE, lease_name("default"))
    assert lease is not None and not lease["spec"].get("holderIdentity") and lease["spec"]["leaseDurationSeconds"] > 0
    # Every event was accepted by the fake's event validation (the agent counted no failure).
    assert all("event" not in line for a in fleet.logs.values() for line in a.getvalue().splitlines() if "failed" in line)


def _metrics(agent: Agent) -> str:
    pytest.importorskip("prometheus_client")
    from rdmadoctor.output.metrics import render

    return render(agent.metrics.registry()).decode()


def test_dry_run_changes_nothing_and_says_what_it_would_do(api, tmp_path: Path) -> None:
    fleet = Fleet(api, tmp_path, n=2, mode="dry-run", sets=("quarantine_after=2", "release_after=1"))
    try:
        fleet.set(["gpu-00"], BROKEN)
        fleet.start()
        until("a dry-run quarantine event", lambda: "gpu-00" in fleet.events("RDMAQuarantined"))
        fleet.set(["gpu-00"], HEALTHY)
        until("a dry-run release event", lambda: "gpu-00" in fleet.events("RDMAReleased"))
    finally:
        fleet.close()
    assert not fleet.tainted()
    assert all(e["message"].startswith("dry run: would") for e in api.events if e["reason"].startswith("RDMA"))
    # No taint write, no condition: labels (the would-hold one set, then removed), reads, the
    # pool's Lease (count-then-mark, as taint counts-then-taints) and Events.
    assert not [r for r in api.requests if r.path.endswith("/status")]
    assert not [r for r in api.requests if r.method == "PATCH" and "spec" in (r.body or {})]
    assert [r for r in api.requests if "leases" in r.path]
    marks = [r.body["metadata"]["labels"]["rdmadoctor.io/would-hold"] for r in api.requests
             if r.method == "PATCH" and "rdmadoctor.io/would-hold" in ((r.body or {}).get("metadata") or {}).get("labels", {})]
    assert marks[:1] == ["IB_PORT_DOWN"] and None in marks
    assert "rdmadoctor.io/would-hold" not in api.labels("gpu-00")
    assert fleet.agents["gpu-00"].last_report["quarantine"]["mode"] == "dry-run"
    assert 'action="would-hold"} 1.0' in _metrics(fleet.agents["gpu-00"])


def test_dry_run_holds_within_the_budget_as_taint_would(api, tmp_path: Path) -> None:
    """Three nodes of a pool of four fail, the budget is 2: the dry runs announce exactly two holds
    and defer the third, as taint mode would, though no taint is ever written (each dry run marks
    its would-be hold with the would-hold label, under the pool's Lease, and the count reads it)."""
    sets = ("quarantine_after=2", "release_after=1", "quarantine_budget=2", "storm_share=0.9")
    fleet = Fleet(api, tmp_path, n=4, mode="dry-run", sets=sets)
    broken = ["gpu-00", "gpu-01", "gpu-02"]
    try:
        fleet.start()
        until("every node published ready=true and the pool label",
              lambda: all(fleet.ready(n) == "true" and api.labels(n).get("rdmadoctor.io/pool") == "default" for n in fleet.names))
        fleet.set(broken, BROKEN)
        until("two would-be holds and the third deferred",
              lambda: len(fleet.events("RDMAQuarantined")) == 2 and set(broken) - fleet.events("RDMAQuarantined")
              <= fleet.events("RDMAQuarantineDeferred"))
        held = fleet.events("RDMAQuarantined")
        (third,) = set(broken) - held
        # Several cycles more of every broken node: still two, the third still waiting for a place.
        until("four more cycles of each broken node",
              lambda: all(fleet.agents[n].quarantine.history.problem_streak >= 6 for n in broken))
        assert fleet.events("RDMAQuarantined") == held
        assert [e["reason"] for e in api.events if e["reason"] == "RDMAQuarantined"] == ["RDMAQuarantined"] * 2
        assert {n for n in fleet.names if api.labels(n).get("rdmadoctor.io/would-hold") == "IB_PORT_DOWN"} == held
        said = fleet.agents[third].last_report["quarantine"]
        assert said["action"] == Q.DEFER_BUDGET and not said["held"] and "2 of 4 nodes held, at most 2" in said["reason"]
        (deferred,) = [e for e in api.events if e["reason"] == "RDMAQuarantineDeferred"]
        assert deferred["involvedObject"]["name"] == third and deferred["message"].startswith("dry run: no taint:")
        for n in held:
            assert fleet.agents[n].last_report["quarantine"]["held"]
        # A held one heals: its mark goes, and the third takes the place it freed.
        first = sorted(held)[0]
        fleet.set([first], HEALTHY)
        until("the healed released and the third would-held",
              lambda: first in fleet.events("RDMAReleased") and third in fleet.events("RDMAQuarantined"))
        until("the labels follow", lambda: {n for n in fleet.names if api.labels(n).get("rdmadoctor.io/would-hold")} == held - {first} | {third})
    finally:
        fleet.close()
    assert not fleet.tainted()
    assert not [r for r in api.requests if r.method == "PATCH" and "spec" in (r.body or {})]
    assert not [r for r in api.requests if r.path.endswith("/status")]
    assert all(e["message"].startswith("dry run: ") for e in api.events if e["reason"].startswith("RDMA"))


def _one(api, tmp_path: Path, **kw) -> KubeQuarantine:
    api.add_node("gpu-01", labels={"rdmadoctor.io/pool": "default"})
    pub = make_publisher("node", node="gpu-01", kubeconfig=api.kubeconfig(tmp_path / "kc"), backoff=0.01, prefix="rdmadoctor.io/")
    return KubeQuarantine(api=pub.api, node="gpu-01", mode="taint", pool=None, prefix="rdmadoctor.io/", namespace=NAMESPACE, **kw)


FAIL = {"status": "fail", "checks": [{"id": "ib.ports", "findings": [{"code": "IB_PORT_DOWN", "severity": "error"}]}]}
PASS = {"status": "pass", "checks": [{"id": "ib.ports", "findings": []}]}
UNKNOWN = {"status": "unknown", "checks": [{"id": "ib.ports", "findings": [{"code": "IB_TOOL_FAILED", "severity": "unknown"}]}]}
G1 = Q.Guardrails(quarantine_after=1, release_after=1, quarantine_budget=2, storm_share=0.5)


def test_a_live_lease_blocks_an_expired_one_is_taken_over(api, tmp_path: Path) -> None:
    now = [1_700_000_000.0]
    q = _one(api, tmp_path, clock=lambda: now[0])
    from rdmadoctor.publish.kube import _micro_time

    api.leases[(NAMESPACE, lease_name("default"))] = {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": lease_name("default"), "namespace": NAMESPACE, "resourceVersion": "5"},
        "spec": {"holderIdentity": "gpu-09", "leaseDurationSeconds": 15, "renewTime": _micro_time(now[0] - 5)},
    }
    state = q.cycle(FAIL, G1)
    assert state["action"] == Q.WAIT and "gpu-09" in state["reason"] and not api.taints("gpu-01")
    now[0] += 20  # gpu-09 died holding it: 15 s later anyone takes it over
    state = q.cycle(FAIL, G1)
    assert state["action"] == Q.HOLD and state["held"] and state["taint"] == f"{TAINT_KEY}=IB_PORT_DOWN:NoSchedule"
    lease = api.lease(NAMESPACE, lease_name("default"))
    assert not lease["spec"].get("holderIdentity") and lease["spec"]["leaseTransitions"] == 1
    # Unknown neither holds nor releases; healthy releases only rdmadoctor's own taint.
    api.set_taints("gpu-01", api.taints("gpu-01") + [ADMIN_TAINT])
    assert q.cycle(UNKNOWN, G1)["action"] == Q.NONE and len(api.taints("gpu-01")) == 2
    assert q.cycle(PASS, G1)["action"] == Q.RELEASE and api.taints("gpu-01") == [ADMIN_TAINT]


def test_an_agent_restarted_finds_its_taint_and_releases_it(api, tmp_path: Path) -> None:
    q = _one(api, tmp_path)
    api.set_taints("gpu-01", [{"key": TAINT_KEY, "value": "IB_PORT_DOWN", "effect": "NoSchedule"}])
    assert q.cycle(PASS, Q.Guardrails(release_after=2))["action"] == Q.WAIT
    assert q.cycle(PASS, Q.Guardrails(release_after=2))["action"] == Q.RELEASE and not api.taints("gpu-01")


def test_counters_inside_their_recovery_window_delay_the_release(api, tmp_path: Path) -> None:
    q = _one(api, tmp_path)
    assert q.cycle(FAIL, G1)["action"] == Q.HOLD
    noisy = {"status": "warn", "checks": [{"id": "ib.counters", "findings": [{"code": "IB_SYMBOL_ERRORS", "severity": "warning"}]}]}
    state = q.cycle(noisy, G1)
    assert state["action"] == Q.WAIT and "counters" in state["reason"] and api.taints("gpu-01")
    assert q.cycle(PASS, G1)["action"] == Q.RELEASE


def test_lease_refused_names_the_rbac(api, tmp_path: Path) -> None:
    q = _one(api, tmp_path)
    api.namespaces.discard(NAMESPACE)  # GET: 404, create: 404 (no such namespace): refused, no retry helps
    state = q.cycle(FAIL, G1)
    assert state["action"] == "error" and "leases" in state["reason"] and not api.taints("gpu-01")


def test_cli_refuses_quarantine_without_publish_node(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "rdmadoctor", "agent", "--example", HEALTHY, "--publish", "stdout", "--quarantine", "taint", "--once",
         "--metrics-port", "0"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2 and "needs --publish node" in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "rdmadoctor", "agent", "--example", HEALTHY, "--publish", "node", "--node", "gpu-01",
         "--quarantine", "sometimes", "--once", "--metrics-port", "0"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2 and "--quarantine must be one of off, dry-run, taint" in proc.stderr


def test_cli_agent_once_taints_with_a_window_of_one(api, tmp_path: Path) -> None:
    """The real command line: --publish node --quarantine taint --set quarantine_after=1, once."""
    api.add_node("gpu-01")
    kc = api.kubeconfig(tmp_path / "kc")
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "rdmadoctor", "agent", "--example", BROKEN, "--publish", "node", "--node", "gpu-01", "--kubeconfig", kc,
         "--quarantine", "taint", "--set", "quarantine_after=1", "--once", "--metrics-port", "0", "--report-file", str(report)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert api.taints("gpu-01") == [{"key": TAINT_KEY, "value": "IB_PORT_DOWN", "effect": "NoSchedule"}]
    import json

    rep = json.loads(report.read_text())
    assert rep["quarantine"]["held"] and rep["quarantine"]["action"] == "hold" and rep["quarantine"]["pool"] == "default"
    assert rep["labels"]["rdmadoctor.io/pool"] == "default" and rep["labels"]["rdmadoctor.io/problem"] == "IB_PORT_DOWN"
    assert api.labels("gpu-01")["rdmadoctor.io/problem"] == "IB_PORT_DOWN"


def test_a_refused_taint_names_the_policy_and_frees_the_lease(api, tmp_path: Path) -> None:
    q = _one(api, tmp_path)
    api.fail_next(1, 403, methods=("PATCH",))
    state = q.cycle(FAIL, G1)
    assert state["action"] == "error" and "admission policy" in state["reason"] and not state["held"]
    assert not api.taints("gpu-01")
    assert not api.lease(NAMESPACE, lease_name("default"))["spec"].get("holderIdentity")
    assert q.cycle(FAIL, G1)["action"] == Q.HOLD  # the next cycle, allowed, holds


def test_the_pool_a_match_chose_is_the_quarantine_pool(api, tmp_path: Path) -> None:
    """One DaemonSet for several pools: without --pool, the pool a [pools.NAME] table's `match`
    chose for the node is the pool whose budget, storm and Lease the node counts in."""
    q = _one(api, tmp_path)
    chosen = dict(FAIL, pool={"name": "h100", "chosen_by": "match", "why": "gpu_model H100"})
    # labels() only reads: the pool is followed by its own step, which the agent takes first.
    assert q.labels(chosen)["rdmadoctor.io/pool"] == "default" and q.pool == "default"
    assert q.follow_pool(chosen) == "h100" and q.pool == "h100"
    assert q.labels(chosen)["rdmadoctor.io/pool"] == "h100"
    assert lease_name(q.pool) == "rdmadoctor-quarantine-h100"
    # a name that is no label value keeps the pool; --pool given is never overridden by the report
    assert q.follow_pool(dict(FAIL, pool={"name": "bad name!"})) == "h100"
    pub = make_publisher("node", node="gpu-01", kubeconfig=api.kubeconfig(tmp_path / "kc2"), backoff=0.01, prefix="rdmadoctor.io/")
    fixed = KubeQuarantine(api=pub.api, node="gpu-01", mode="taint", pool="a100", prefix="rdmadoctor.io/", namespace=NAMESPACE)
    assert fixed.follow_pool(chosen) == "a100" and fixed.labels(chosen)["rdmadoctor.io/pool"] == "a100"


def test_the_agent_follows_the_pool_before_the_labels_and_the_decision(tmp_path: Path) -> None:
    """The agent's cycle: the pool a match chose is followed first, then the labels are read (they
    name that pool) and published, then the quarantine decides in that pool."""
    from types import SimpleNamespace

    calls: list[tuple[str, str]] = []

    class Recording(KubeQuarantine):
        def follow_pool(self, report):
            calls.append(("follow_pool", self.pool))
            return super().follow_pool(report)

        def labels(self, report):
            calls.append(("labels", self.pool))
            return super().labels(report)

        def cycle(self, report, guard):
            calls.append(("cycle", self.pool))
            return {"mode": self.mode, "pool": self.pool, "held": False, "action": Q.NONE, "reason": "test"}

    class Publisher:
        def __init__(self):
            self.published: list[dict] = []

        def publish(self, report):
            self.published.append(dict(report["labels"]))
            return []

        def close(self):
            pass

    q = Recording(api=SimpleNamespace(), node="gpu-01", mode="dry-run", pool=None, prefix="rdmadoctor.io/", namespace=NAMESPACE)
    report = {"schema": "rdmadoctor.report/v1", "status": "pass", "exit_code": 0, "summary": {}, "checks": [],
              "labels": {"rdmadoctor.io/ready": "true"}, "pool": {"name": "h100", "chosen_by": "match"}}
    pub = Publisher()
    agent = Agent(Options(example=HEALTHY), pub, AgentMetrics("test", ("node",)), Log("text", io.StringIO()), Settings(interval=60.0),
                  quarantine=q, diagnose_fn=lambda opts: SimpleNamespace(report=report, results=[]))
    assert agent.run_cycle() is report
    assert calls == [("follow_pool", "default"), ("labels", "h100"), ("cycle", "h100")]
    assert pub.published[0]["rdmadoctor.io/pool"] == "h100" and report["quarantine"]["pool"] == "h100"


def test_a_dry_runs_mark_is_its_own_label_and_goes_when_the_dry_run_stops(api, tmp_path: Path) -> None:
    """The would-hold label is written under the Lease with the owned-labels annotation naming it,
    so the first publish of the agent run without the dry run (off, or taint) removes it."""
    api.add_node("gpu-01", labels={"rdmadoctor.io/pool": "default"})
    pub = make_publisher("node", node="gpu-01", kubeconfig=api.kubeconfig(tmp_path / "kc"), backoff=0.01, prefix="rdmadoctor.io/")
    q = KubeQuarantine(api=pub.api, node="gpu-01", mode="dry-run", pool=None, prefix="rdmadoctor.io/", namespace=NAMESPACE)
    state = q.cycle(FAIL, G1)
    assert state["action"] == Q.HOLD and state["held"] and state["reason"].startswith("dry run: ") and not api.taints("gpu-01")
    assert api.labels("gpu-01")["rdmadoctor.io/would-hold"] == "IB_PORT_DOWN"
    owned = api.nodes["gpu-01"]["metadata"]["annotations"]["rdmadoctor.io/owned-labels"].split(",")
    assert "rdmadoctor.io/would-hold" in owned
    assert not api.lease(NAMESPACE, lease_name("default"))["spec"].get("holderIdentity")  # taken, and released
    # The next cycle keeps it (found on the Node), and the labels the agent publishes name it.
    assert q.cycle(FAIL, G1)["action"] == Q.KEEP and q.labels(FAIL)["rdmadoctor.io/would-hold"] == "IB_PORT_DOWN"
    # The agent restarted with --quarantine off: its first publish removes the label it no longer computes.
    pub.publish({"labels": {"rdmadoctor.io/ready": "false", "rdmadoctor.io/pool": "default"}})
    assert "rdmadoctor.io/would-hold" not in api.labels("gpu-01") and not api.taints("gpu-01")
    pub.close()
