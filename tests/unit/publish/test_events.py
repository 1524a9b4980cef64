"""--conditions also creates core/v1 Events on condition transitions (Warning when a problem
appears, Normal when it clears), against FakeKubeAPI's POST /api/v1/namespaces/NS/events, which
validates them as the apiserver does. Events are best effort: their failures never change what
publish() returns or raises."""

from __future__ import annotations

import io
import time

import pytest
from kubeapi import FakeKubeAPI, validate_event

from rdmadoctor.output import conditions as C
from rdmadoctor.publish import PublishError, make_publisher
from rdmadoctor.publish.kube import event_body

NODE = "gpu-1"
EVENTS = "/api/v1/namespaces/default/events"
LABELS = {
    "feature.node.kubernetes.io/network-rdma.capable": "true",
    "rdmadoctor.io/ready": "false",
}
T0 = 1_700_000_000.25  # 2023-11-14T22:13:20.25Z

PORTS_OK = {"id": "ib.ports", "status": "pass", "findings": []}
PORT_DOWN = {"id": "ib.ports", "status": "fail", "findings": [
    {"code": "IB_PORT_DOWN", "severity": "error", "subject": "mlx5_3/1", "message": "state DOWN"},
]}
NO_SM = {"id": "ib.ports", "status": "fail", "findings": [
    {"code": "IB_NO_SM", "severity": "error", "subject": "mlx5_0/1", "message": "no SM"},
]}
PORTS_UNKNOWN = {"id": "ib.ports", "status": "unknown", "findings": [
    {"code": "IB_PARSE_WARNING", "severity": "unknown", "subject": "ibstat"},
]}
MEMLOCK_OK = {"id": "limits.memlock", "status": "pass", "findings": []}
MEMLOCK = {"id": "limits.memlock", "status": "fail", "findings": [
    {"code": "MEMLOCK_LIMITED", "severity": "error", "subject": "memlock", "message": "64 KiB"},
]}
PEERMEM = {"id": "kernel.modules", "status": "fail", "findings": [
    {"code": "GDR_PEERMEM_MISSING", "severity": "error", "subject": "nvidia_peermem", "message": "not loaded"},
]}
GPU_OK = {"id": "gpu.topology", "status": "pass", "findings": []}

LINK_DOWN_MSG = "IB_PORT_DOWN (mlx5_3/1). Fix: rdmadoctor explain IB_PORT_DOWN"


def report(*checks) -> dict:
    return {"labels": dict(LABELS), "checks": list(checks)}


class Clock:
    def __init__(self, t: float = T0):
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def api():
    with FakeKubeAPI() as fake:
        fake.add_node(NODE, labels={"kubernetes.io/hostname": NODE})
        yield fake


@pytest.fixture
def kubeconfig(api, tmp_path):
    return api.kubeconfig(tmp_path / "kubeconfig")


def pub(kubeconfig, **kw):
    kw.setdefault("backoff", 0.01)
    kw.setdefault("conditions", True)
    kw.setdefault("clock", Clock())
    return make_publisher("node", node=NODE, kubeconfig=kubeconfig, **kw)


def posted(api) -> list[tuple[str, str, str]]:
    """(type, reason, message) of every event POST body, in order."""
    return [(r.body["type"], r.body["reason"], r.body["message"]) for r in api.event_posts()]


def expected_body(api, etype: str, reason: str, message: str, t: float = T0) -> dict:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(t)))
    micro = stamp[:-1] + f".{round(t % 1 * 1e6):06d}Z"
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{NODE}.", "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": api.nodes[NODE]["metadata"]["uid"]},
        "type": etype,
        "reason": reason,
        "message": message,
        "source": {"component": "rdmadoctor", "host": NODE},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "eventTime": micro,
        "reportingComponent": "rdmadoctor",
        "reportingInstance": NODE,
        "action": "ConditionChanged",
    }


# -- end to end against the fake ----------------------------------------------------------------


def test_first_publish_of_a_healthy_node_creates_no_event(api, kubeconfig):
    assert pub(kubeconfig).publish(report(PORTS_OK, MEMLOCK_OK, GPU_OK)) == ["node", "node-status"]
    assert {c["type"]: c["status"] for c in api.conditions(NODE)} == dict.fromkeys(C.TYPES, "False")
    assert api.event_posts() == [] and api.events == []


def test_first_publish_with_problems_creates_one_warning_per_problem(api, kubeconfig):
    p = pub(kubeconfig)
    assert p.publish(report(PORT_DOWN, MEMLOCK, PEERMEM, GPU_OK)) == ["node", "node-status"]
    reqs = api.event_posts()
    assert [(r.method, r.path, r.content_type, r.query) for r in reqs] == [("POST", EVENTS, "application/json", {"fieldManager": ["rdmadoctor"]})] * 3
    assert [r.body for r in reqs] == [
        expected_body(api, "Warning", "IBPortDown", LINK_DOWN_MSG),
        expected_body(api, "Warning", "MemlockLimited", "MEMLOCK_LIMITED (memlock). Fix: rdmadoctor explain MEMLOCK_LIMITED"),
        expected_body(api, "Warning", "GDRPeermemMissing", "GDR_PEERMEM_MISSING (nvidia_peermem). Fix: rdmadoctor explain GDR_PEERMEM_MISSING"),
    ]
    # The server accepted and named them; the event for a condition matches the condition.
    assert [e["metadata"]["name"][: len(NODE) + 1] for e in api.events] == [f"{NODE}."] * 3
    assert all(len(e["metadata"]["name"]) == len(NODE) + 6 for e in api.events)
    conds = {c["type"]: c for c in api.conditions(NODE)}
    assert [e["reason"] for e in api.events] == [conds[t]["reason"] for t in C.TYPES]
    # Events are sent after the status patch that records the change.
    methods = [(r.method, r.path.rsplit("/", 1)[-1]) for r in api.requests]
    assert methods == [("GET", NODE), ("PATCH", NODE), ("PATCH", "status"), ("POST", "events"), ("POST", "events"), ("POST", "events")]
    assert p.events_created == 3 and p.events_failed == 0 and p.event_errors == []
    assert p.summary.endswith("3 events created")


def test_steady_cycles_and_heartbeats_create_no_event(api, kubeconfig):
    clock = Clock()
    p = pub(kubeconfig, clock=clock, heartbeat=300)
    rep = report(PORT_DOWN, MEMLOCK_OK)
    p.publish(rep)
    assert len(api.event_posts()) == 1
    api.clear()
    for _ in range(100):
        clock.t += 1
        assert p.publish(rep) == []
    assert [r.method for r in api.requests] == ["GET"] * 100
    clock.t += 300  # heartbeat due: the conditions are rewritten, nothing changed status
    assert p.publish(rep) == ["node-status"]
    assert api.event_posts() == [] and len(api.writes()) == 1
    assert p.events_created == 1


def test_problem_clears_gives_one_normal_event(api, kubeconfig):
    clock = Clock()
    p = pub(kubeconfig, clock=clock)
    p.publish(report(PORT_DOWN, MEMLOCK_OK))
    api.clear()
    clock.t += 60
    assert p.publish(report(PORTS_OK, MEMLOCK_OK)) == ["node-status"]
    (req,) = api.event_posts()
    assert req.body == expected_body(api, "Normal", "RDMALinkOK", "rdmadoctor found no problem", clock.t)
    # And the problem coming back is a Warning again.
    api.clear()
    clock.t += 60
    p.publish(report(PORT_DOWN, MEMLOCK_OK))
    assert posted(api) == [("Warning", "IBPortDown", LINK_DOWN_MSG)]


def test_a_different_problem_is_a_new_warning_a_second_subject_is_not(api, kubeconfig):
    p = pub(kubeconfig)
    p.publish(report(PORT_DOWN))
    api.clear()
    assert p.publish(report(NO_SM)) == ["node-status"]
    assert posted(api) == [("Warning", "IBNoSM", "IB_NO_SM (mlx5_0/1). Fix: rdmadoctor explain IB_NO_SM")]
    api.clear()
    two = {"id": "ib.ports", "status": "fail", "findings": NO_SM["findings"] + [
        {"code": "IB_NO_SM", "severity": "error", "subject": "mlx5_1/1", "message": "no SM"}]}
    assert p.publish(report(two)) == ["node-status"]  # the condition's message changed
    assert api.event_posts() == []


def test_unknown_is_announced_and_so_is_the_way_back(api, kubeconfig):
    p = pub(kubeconfig)
    p.publish(report(PORTS_OK))
    api.clear()
    p.publish(report(PORTS_UNKNOWN))
    assert posted(api) == [("Warning", "CheckUnknown", "rdmadoctor could not establish: IB_PARSE_WARNING, ib.ports")]
    api.clear()
    p.publish(report(PORTS_OK))
    assert posted(api) == [("Normal", "RDMALinkOK", "rdmadoctor found no problem")]


def test_a_restarted_publisher_does_not_repeat_events(api, kubeconfig):
    pub(kubeconfig).publish(report(PORT_DOWN))
    api.clear()
    assert pub(kubeconfig).publish(report(PORT_DOWN)) == []  # the node's conditions are the memory
    assert api.event_posts() == []


# -- best effort ------------------------------------------------------------------------------------


def test_events_403_leaves_labels_and_conditions_published(api, kubeconfig):
    api.fail_next(100, 403, methods=("POST",))
    p = pub(kubeconfig)
    assert p.publish(report(PORT_DOWN, MEMLOCK, PEERMEM)) == ["node", "node-status"]
    assert api.labels(NODE)["rdmadoctor.io/ready"] == "false"
    assert {c["type"]: c["status"] for c in api.conditions(NODE)} == dict.fromkeys(C.TYPES, "True")
    # One try, not retried, and the two others are not tried against the same RBAC.
    assert len(api.event_posts()) == 1 and api.events == []
    assert p.events_created == 0 and p.events_failed == 3
    (why,) = p.event_errors
    assert "403" in why and "events create" in why and "'default'" in why
    assert "0 of 3 events created" in p.summary and "403" in p.summary
    # The lost events are not resent: the conditions say it, and the next cycle is steady.
    api.clear()
    assert p.publish(report(PORT_DOWN, MEMLOCK, PEERMEM)) == []
    assert [r.method for r in api.requests] == ["GET"] and p.event_errors == []


def test_same_publish_result_with_and_without_event_rbac(api, kubeconfig, tmp_path):
    rep = report(PORT_DOWN, MEMLOCK)
    ok = pub(kubeconfig).publish(rep)
    with FakeKubeAPI() as other:
        other.add_node(NODE, labels={"kubernetes.io/hostname": NODE})
        other.fail_next(100, 403, methods=("POST",))
        denied = pub(other.kubeconfig(tmp_path / "kc2")).publish(rep)
        assert other.labels(NODE) == api.labels(NODE)
        strip = lambda cs: [{k: v for k, v in c.items() if "Time" not in k} for c in cs]  # noqa: E731
        assert strip(other.conditions(NODE)) == strip(api.conditions(NODE))
    assert ok == denied == ["node", "node-status"]


def test_a_5xx_is_retried_once(api, kubeconfig):
    api.fail_next(1, 503, methods=("POST",))
    p = pub(kubeconfig)
    p.publish(report(PORT_DOWN, MEMLOCK))
    assert len(api.event_posts()) == 3  # the failed one, its retry, the second event
    assert [e["reason"] for e in api.events] == ["IBPortDown", "MemlockLimited"]
    assert p.events_created == 2 and p.events_failed == 0


def test_a_lasting_5xx_gives_up_after_one_retry(api, kubeconfig):
    api.fail_next(100, 500, methods=("POST",))
    p = pub(kubeconfig)
    assert p.publish(report(PORT_DOWN, MEMLOCK, PEERMEM)) == ["node", "node-status"]
    # One retry of the first event, then the others are not tried at all.
    assert len(api.event_posts()) == 2
    assert p.events_failed == 3 and "HTTP 500" in p.event_errors[0] and "not retried further" in p.event_errors[0]


def test_event_timeouts_are_bounded(api, kubeconfig):
    api.slow_next(100, 5.0, methods=("POST",))
    p = pub(kubeconfig, timeout=1.0)  # the node's own requests, answered at once, have all of 1 s
    assert p.publish(report(PORT_DOWN, MEMLOCK)) == ["node", "node-status"]
    # Two timed-out tries of the first event (a 5 s answer would have succeeded without the
    # 1 s timeout), then no more: both events count as failed.
    assert len(api.event_posts()) == 2 and p.events_failed == 2


def test_a_retried_status_patch_announces_the_change_once(api, kubeconfig):
    api.fail_next(1, 500, methods=("PATCH",))
    p = pub(kubeconfig)
    assert p.publish(report(PORT_DOWN)) == ["node", "node-status"]
    assert posted(api) == [("Warning", "IBPortDown", LINK_DOWN_MSG)]


def test_a_failed_status_patch_sends_no_event(api, kubeconfig):
    api.fail_next(100, 500, methods=("PATCH",))
    with pytest.raises(PublishError):
        pub(kubeconfig, retries=1).publish(report(PORT_DOWN))
    assert api.event_posts() == []


def test_dry_run_shows_the_events_and_posts_nothing(api, kubeconfig):
    out = io.StringIO()
    p = pub(kubeconfig, dry_run=True, out=out)
    assert p.publish(report(PORT_DOWN)) == []
    assert api.writes() == [] and api.event_posts() == []
    assert f"# would send POST {EVENTS} (application/json): " in out.getvalue()
    assert '"reason": "IBPortDown"' in out.getvalue()


def test_nfd_mode_with_conditions_creates_events_too(api, kubeconfig, tmp_path):
    p = make_publisher("nfd", features_dir=str(tmp_path), expiry=600, node=NODE, kubeconfig=kubeconfig, conditions=True)
    assert p.publish(report(PORT_DOWN)) == ["nfd", "node-status"]
    assert posted(api) == [("Warning", "IBPortDown", LINK_DOWN_MSG)]


def test_without_conditions_there_are_no_events(api, kubeconfig):
    p = pub(kubeconfig, conditions=False)
    p.publish(report(PORT_DOWN))
    assert api.event_posts() == []


def test_cli_label_with_conditions_creates_the_events(tmp_path):
    from conftest import run_cli

    with FakeKubeAPI() as api:
        api.add_node("gpu-7")
        kc = api.kubeconfig(tmp_path / "kc")
        args = ["label", "--example", "broken-pod", "--publish", "node", "--node", "gpu-7", "--kubeconfig", kc, "--conditions"]
        code, _, err = run_cli(args)
        assert code == 1, err  # published; the node has a problem (exit codes as `check`)
        # `label` judges the node (scope node): the port is a node problem, the example pod's memlock is not.
        assert [(e["type"], e["reason"]) for e in api.events] == [("Warning", "IBPortDown")]
        assert "1 event created" in err
        api.fail_next(100, 403, methods=("POST",))
        api.nodes["gpu-7"]["status"]["conditions"] = []  # as if new: the events are due again
        code, _, err = run_cli(args)
        assert code == 1 and "403" in err  # events are best effort: the labels and conditions landed


# -- the event body and the transitions, without a server -------------------------------------------


def test_event_body_passes_the_apiserver_validation():
    ev = event_body("n" * 200, "uid-1", {"type": "Warning", "reason": "IBPortDown", "message": "x" * 2000}, T0)
    assert validate_event(ev, "default") == []
    assert len(ev["reportingInstance"]) == 128 and len(ev["message"]) == 1024
    assert ev["eventTime"] == "2023-11-14T22:13:20.250000Z" and ev["firstTimestamp"] == "2023-11-14T22:13:20Z"
    # A whole second still has its six digits (Go's RFC3339Micro layout needs them).
    assert event_body("n", None, {"type": "Normal", "reason": "R", "message": "m"}, 1_700_000_000.0)["eventTime"] == "2023-11-14T22:13:20.000000Z"
    assert "uid" not in event_body("n", None, {"type": "Normal", "reason": "R", "message": "m"}, T0)["involvedObject"]


def test_transitions_table():
    def cond(t, status, reason="R", message="m"):
        return {"type": t, "status": status, "reason": reason, "message": message}

    L = C.LINK
    cases = [
        ([], [cond(L, "False")], []),
        ([], [cond(L, "True", "IBPortDown")], [("Warning", "IBPortDown")]),
        ([], [cond(L, "Unknown", "CheckUnknown")], [("Warning", "CheckUnknown")]),
        ([cond(L, "False")], [cond(L, "False", "NotApplicable")], []),
        ([cond(L, "False")], [cond(L, "True", "IBPortDown")], [("Warning", "IBPortDown")]),
        ([cond(L, "True", "IBPortDown")], [cond(L, "True", "IBPortDown", "other")], []),
        ([cond(L, "True", "IBPortDown")], [cond(L, "True", "IBNoSM")], [("Warning", "IBNoSM")]),
        ([cond(L, "True", "IBPortDown")], [cond(L, "False")], [("Normal", "RDMALinkOK")]),
        ([cond(L, "Unknown")], [cond(L, "False")], [("Normal", "RDMALinkOK")]),
        ([cond(L, "True")], [cond(L, "Unknown", "CheckUnknown")], [("Warning", "CheckUnknown")]),
        ([cond(L, "Unknown", "CheckUnknown")], [cond(L, "Unknown", "CheckUnknown", "other")], []),
        ([cond("Ready", "True")], [cond(C.GPUDIRECT, "False"), cond(C.CONFIG, "True", "ShmTooSmall")], [("Warning", "ShmTooSmall")]),
    ]
    for current, wanted, expected in cases:
        got = C.transitions(wanted, current)
        assert [(e["type"], e["reason"]) for e in got] == expected, (current, wanted)
    assert [C.ok_reason(t) for t in C.TYPES] == ["RDMALinkOK", "RDMAConfigOK", "GPUDirectRDMAOK"]


# -- the fake's events endpoint is as strict as the apiserver -----------------------------------------


def test_fake_events_endpoint_is_strict(api):
    import json
    import urllib.error
    import urllib.request

    good = event_body(NODE, "u", {"type": "Warning", "reason": "IBPortDown", "message": "m"}, T0)

    def call(body, ns="default", ctype="application/json", method="POST"):
        data = json.dumps(body).encode() if not isinstance(body, bytes) else body
        req = urllib.request.Request(f"{api.url}/api/v1/namespaces/{ns}/events", data=data if method != "GET" else None, method=method)
        req.add_header("Content-Type", ctype)
        req.add_header("Authorization", f"Bearer {api.token}")
        try:
            with urllib.request.urlopen(req) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    assert call(good) == 201
    assert call(good, ctype="application/merge-patch+json") == 415
    assert call(b"[1]") == 400
    assert call(good, method="GET") == 405
    assert call(good, ns="nope") == 404
    assert call({**good, "eventTime": "2023-11-14T22:13:20Z"}) == 400  # MicroTime needs .000000
    assert call({**good, "firstTimestamp": "yesterday"}) == 400
    assert call({**good, "metadata": {"generateName": "x.", "namespace": "kube-system"}}) == 400
    assert call({**good, "metadata": {"namespace": "default"}}) == 422
    for field in ("reportingComponent", "reportingInstance", "action", "reason"):
        assert call({k: v for k, v in good.items() if k != field}) == 422, field
    assert call({**good, "reportingInstance": "i" * 129}) == 422
    assert call({**good, "type": "Error"}) == 422
    # eventTime set: a cluster-scoped object's events go to default or kube-system only.
    assert call({**good, "metadata": {"generateName": "x."}}, ns="kube-public") == 422
    assert call({**good, "metadata": {"generateName": "x."}}, ns="kube-system") == 201
    # Legacy (no eventTime): the reporting fields are not needed, but only default fits a Node.
    legacy = {k: v for k, v in good.items() if k not in ("eventTime", "reportingComponent", "reportingInstance", "action")}
    assert call(legacy) == 201
    assert call({**legacy, "metadata": {"generateName": "x."}}, ns="kube-system") == 422
    assert len(api.events) == 3
    assert api.writes() == []  # events are not Node writes
