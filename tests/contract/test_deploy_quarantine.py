"""deploy/ for ``agent --quarantine taint`` (issue 28): the Node policy admits exactly rdmadoctor's
own NoSchedule taint, added or removed, and nothing else in spec (evaluated with cel-python as
tests/contract/test_deploy.py does); the direct-quarantine overlay grants exactly what a real quarantining
agent sends (against tests/kubeapi.py's FakeKubeAPI, the loopback stand-in for the API server),
and every write it makes passes the policies.
"""

from __future__ import annotations

import copy
import shutil
import tempfile
from pathlib import Path

import pytest

from contract import test_deploy as D  # tests/ is on sys.path (pytest's prepend import mode)
from contract import test_deploy_harden as H

OWN = {"key": "rdmadoctor.io/unhealthy", "value": "IB_PORT_DOWN", "effect": "NoSchedule"}


def _taints(n: dict) -> list:
    return n["spec"].setdefault("taints", [])


def test_policy_admits_its_own_taint_added_and_removed() -> None:
    old, new = D._change(lambda n: _taints(n).append(dict(OWN)))
    v = D.evaluate(old, new)
    assert v.applies and v.allowed, v.denied
    v = D.evaluate(new, old)  # removed
    assert v.applies and v.allowed, v.denied
    # Labels changed in the same write as the taint: still only its own.
    def both(n: dict) -> None:
        _taints(n).append(dict(OWN))
        n["metadata"]["labels"]["rdmadoctor.io/ready"] = "false"

    assert D.evaluate(*D._change(both)).allowed
    # A Node with no taints at all, before and after.
    bare = D._node()
    del bare["spec"]["taints"]
    tainted = copy.deepcopy(bare)
    tainted["spec"]["taints"] = [dict(OWN)]
    assert D.evaluate(bare, tainted).allowed and D.evaluate(tainted, bare).allowed
    # Its own taint, changed to NoExecute by an administrator, may still be removed by the agent,
    # and stays untouched by the agent's label writes.
    admin = copy.deepcopy(tainted)
    admin["spec"]["taints"][0]["effect"] = "NoExecute"
    assert D.evaluate(admin, bare).allowed
    relabelled = copy.deepcopy(admin)
    relabelled["metadata"]["labels"]["rdmadoctor.io/ready"] = "true"
    assert D.evaluate(admin, relabelled).allowed


@pytest.mark.parametrize(
    "what,change",
    [
        ("another key", lambda n: _taints(n).append({"key": "rdmadoctor.io/other", "value": "X", "effect": "NoSchedule"})),
        ("a foreign key", lambda n: _taints(n).append({"key": "example.com/maintenance", "effect": "NoSchedule"})),
        ("NoExecute", lambda n: _taints(n).append({**OWN, "effect": "NoExecute"})),
        ("PreferNoSchedule", lambda n: _taints(n).append({**OWN, "effect": "PreferNoSchedule"})),
        ("twice", lambda n: _taints(n).extend([dict(OWN), {**OWN, "value": "IB_NO_SM"}])),
        ("a value that is no code", lambda n: _taints(n).append({**OWN, "value": "please-evict"})),
        ("an admin taint removed", lambda n: n["spec"].__setitem__("taints", [dict(OWN)])),
        ("an admin taint changed", lambda n: _taints(n)[0].__setitem__("effect", "NoExecute")),
        ("a cordon", lambda n: n["spec"].__setitem__("unschedulable", True)),
        ("a cordon with its own taint", lambda n: (_taints(n).append(dict(OWN)), n["spec"].__setitem__("unschedulable", True))),
        ("podCIDR", lambda n: n["spec"].__setitem__("podCIDR", "10.9.9.0/24")),
        ("providerID", lambda n: n["spec"].__setitem__("providerID", "aws:///x")),
    ],
)
def test_policy_refuses_every_other_spec_change(what: str, change) -> None:
    v = D.evaluate(*D._change(change))
    assert v.applies and not v.allowed, what
    assert not [d for d in v.denied if d.startswith("error:")], v.denied


def test_policy_refuses_its_own_taint_on_another_node() -> None:
    old, new = D._change(lambda n: _taints(n).append(dict(OWN)))
    v = D.evaluate(old, new, node="gpu-08")
    assert not v.allowed and "(gpu-08), not Node gpu-07" in v.denied[0]
    # Changing the value of a taint already there is not "added or removed".
    held = D._node()
    _taints(held).append(dict(OWN))
    other = copy.deepcopy(held)
    other["spec"]["taints"][-1]["value"] = "IB_NO_SM"
    assert not D.evaluate(held, other).allowed


def test_the_quarantining_agents_traffic_is_what_rbac_grants_and_the_policies_admit() -> None:
    """One agent (--conditions, --quarantine taint, quarantine_after=1, budget 1) beside a held
    node of its pool: deferred (the condition and an Event), then held, then released."""
    kubeapi = pytest.importorskip("kubeapi")
    from urllib.parse import urlsplit

    from rdmadoctor.core import quarantine as Q
    from rdmadoctor.publish import make_publisher
    from rdmadoctor.publish.quarantine import KubeQuarantine

    writes: list[tuple[str, dict, dict]] = []

    class Recording(kubeapi.FakeKubeAPI):
        def _handle(self, method, raw_path, headers, body):
            parts = urlsplit(raw_path).path.strip("/").split("/")
            name = parts[3] if parts[:3] == ["api", "v1", "nodes"] and len(parts) > 3 else None
            before = copy.deepcopy(self.nodes.get(name)) if name else None
            code, answer = super()._handle(method, raw_path, headers, body)
            if method == "PATCH" and code == 200 and name:
                writes.append(("status" if len(parts) == 5 else "", before, copy.deepcopy(self.nodes[name])))
            return code, answer

    ok = {"id": "ib.ports", "status": "pass", "findings": []}
    down = {"id": "ib.ports", "status": "fail", "findings": [{"code": "IB_PORT_DOWN", "severity": "error", "subject": "mlx5_3/1", "message": "DOWN"}]}
    base = {"feature.node.kubernetes.io/network-rdma.capable": "true", "rdmadoctor.io/pool": "default"}
    tmp = Path(tempfile.mkdtemp(prefix="rdmadoctor-kube-"))
    try:
        with Recording() as api:
            api.allow_taints = True
            api.namespaces.add("rdmadoctor")
            node = api.add_node("gpu-07", labels=dict(H.full_node()["metadata"]["labels"]))
            node["status"] = {k: v for k, v in H.full_node()["status"].items() if k != "conditions"}
            node["status"]["conditions"] = [H.full_node()["status"]["conditions"][0]]
            node["spec"] = copy.deepcopy(H.full_node()["spec"])
            api.add_node("gpu-08", labels={"rdmadoctor.io/pool": "default", "rdmadoctor.io/ready": "false"})
            api.set_taints("gpu-08", [{"key": "rdmadoctor.io/unhealthy", "value": "IB_NO_SM", "effect": "NoSchedule"}])
            clock = [1_700_000_000.0]
            pub = make_publisher("node", node="gpu-07", kubeconfig=api.kubeconfig(tmp / "kubeconfig"), conditions=True,
                                 backoff=0.01, clock=lambda: clock[0], prefix="rdmadoctor.io/")
            q = KubeQuarantine(api=pub.api, node="gpu-07", mode="taint", pool=None, prefix="rdmadoctor.io/", namespace="rdmadoctor",
                               clock=lambda: clock[0])
            guard = Q.Guardrails(quarantine_after=1, release_after=1, quarantine_budget=1, storm_share=1.0)
            actions = []
            for checks, ready, freed in (([down], "false", False), ([down], "false", True), ([ok], "true", False)):
                if freed:
                    api.set_taints("gpu-08", [])
                report = {"status": "fail" if ready == "false" else "pass", "checks": checks,
                          "labels": {**base, "rdmadoctor.io/ready": ready}}
                report["labels"].update(q.labels(report))
                pub.publish(report)
                actions.append(q.cycle(report, guard)["action"])
                assert not q.errors, q.errors
                clock[0] += 60
            assert actions == [Q.DEFER_BUDGET, Q.HOLD, Q.RELEASE]
            requests = set()
            for r in api.requests:
                parts = r.path.strip("/").split("/")
                if parts[0] == "apis":
                    requests.add((parts[4], parts[1], parts[5], {"GET": "get", "POST": "create", "PUT": "update"}[r.method]))
                elif parts[2] == "namespaces":
                    requests.add((parts[3], "", parts[4], {"POST": "create"}[r.method]))
                elif len(parts) == 3:
                    requests.add(("*", "", "nodes", "list"))
                else:
                    requests.add(("*", "", "nodes/status" if len(parts) == 5 else "nodes", {"GET": "get", "PATCH": "patch"}[r.method]))
            events = list(api.events)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # Every grant is used, and nothing is used that is not granted.
    assert requests == H._rbac_grants(D.rendered("direct-quarantine"))
    assert {("rdmadoctor", "coordination.k8s.io", "leases", v) for v in ("get", "create", "update")} <= requests
    assert ("*", "", "nodes", "list") in requests
    assert {sub for sub, _, _ in writes} == {"", "status"}
    assert any(b["spec"] != a["spec"] for _, b, a in writes)
    for sub, before, after in writes:
        v = D.evaluate(before, after, sub=sub)
        assert v.applies and v.allowed, (sub, v.denied)
    assert {e["reason"] for e in events} >= {"RDMAQuarantineDeferred", "RDMAQuarantined", "RDMAReleased"}
    for ev in events:
        v = D.evaluate(None, ev, policy=H._event_policy(), operation="CREATE")
        assert v.applies and v.allowed, v.denied


def test_quarantine_overlay_runs_the_agent_with_taint_and_grants_no_more() -> None:
    docs = D.rendered("direct-quarantine")
    args = D.agent(D.daemonset("direct-quarantine")["spec"]["template"]["spec"])["args"]
    assert args[args.index("--quarantine") + 1] == "taint" and "--conditions" in args and args[args.index("--publish") + 1] == "node"
    for build in ("direct", "direct-conditions"):
        assert "--quarantine" not in D.agent(D.daemonset(build)["spec"]["template"]["spec"])["args"]
        grants = H._rbac_grants(D.rendered(build))
        assert not [g for g in grants if g[2] == "leases" or g[3] == "list"], grants
    (role,) = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "rdmadoctor-quarantine-lease"]
    assert role["metadata"]["namespace"] == D.one(docs, "ServiceAccount", "rdmadoctor")["metadata"]["namespace"]
    assert role["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}]


@pytest.mark.parametrize("build", sorted(D.BUILDS))
def test_the_agent_tolerates_its_own_taint(build: str) -> None:
    """A held node keeps its agent, through restarts and rollouts: otherwise nothing releases it."""
    pod = D.daemonset(build)["spec"]["template"]["spec"]
    assert {"key": "rdmadoctor.io/unhealthy", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    # ... and only its NoSchedule: never a toleration that would keep it through an eviction it did not make.
    assert not [t for t in pod["tolerations"] if t.get("key") == "rdmadoctor.io/unhealthy" and t.get("effect") != "NoSchedule"]
