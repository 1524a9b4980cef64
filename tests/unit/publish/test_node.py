"""--publish node and --conditions against FakeKubeAPI (tests/kubeapi.py): exact request bodies,
zero writes when steady, stale owned labels removed, foreign labels kept, retries, RBAC errors."""

from __future__ import annotations

import io
import sys
import threading

import pytest
from kubeapi import MERGE, STRATEGIC, FakeKubeAPI, merge_patch, strategic_merge_patch

from rdmadoctor.core import labels as L
from rdmadoctor.output import conditions as C
from rdmadoctor.publish import PublishConfigError, PublishError, make_publisher
from rdmadoctor.publish.kube import label_patch

NODE = "gpu-1"
OWNED = "rdmadoctor.io/owned-labels"
LABELS = {
    "feature.node.kubernetes.io/network-rdma.capable": "true",
    "rdmadoctor.io/active-ports": "9",
    "rdmadoctor.io/gpu-nic": "PIX",
    "rdmadoctor.io/gpudirect": "true",
    "rdmadoctor.io/link-layer": "infiniband",
    "rdmadoctor.io/min-rate-gbps": "400",
    "rdmadoctor.io/ready": "false",
}
ALL_OWNED = ",".join(sorted(LABELS))
FOREIGN = {"kubernetes.io/hostname": NODE, "team": "ml", "nvidia.com/gpu.present": "true"}
READY = {
    "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
    "lastHeartbeatTime": "2024-01-01T00:00:00Z", "lastTransitionTime": "2024-01-01T00:00:00Z",
}


def report(labels=None, checks=None) -> dict:
    return {"labels": dict(LABELS if labels is None else labels), "checks": checks or []}


class Clock:
    def __init__(self, t: float = 1_700_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def api():
    with FakeKubeAPI() as fake:
        fake.add_node(NODE, labels=FOREIGN, conditions=[READY])
        yield fake


@pytest.fixture
def kubeconfig(api, tmp_path):
    return api.kubeconfig(tmp_path / "kubeconfig")


def pub(kubeconfig, **kw):
    kw.setdefault("backoff", 0.01)
    return make_publisher("node", node=NODE, kubeconfig=kubeconfig, **kw)


def test_first_publish_sends_exactly_one_merge_patch(api, kubeconfig):
    p = pub(kubeconfig)
    assert p.publish(report()) == ["node"]
    reqs = api.requests
    assert [(r.method, r.path, r.content_type) for r in reqs] == [
        ("GET", f"/api/v1/nodes/{NODE}", None),
        ("PATCH", f"/api/v1/nodes/{NODE}", MERGE),
    ]
    assert reqs[1].body == {"metadata": {"labels": LABELS, "annotations": {OWNED: ALL_OWNED}}}
    assert reqs[1].query == {"fieldManager": ["rdmadoctor"]}
    assert reqs[1].auth == f"Bearer {api.token}"
    assert api.labels(NODE) == {**FOREIGN, **LABELS}


def test_100_steady_cycles_make_zero_writes(api, kubeconfig):
    p = pub(kubeconfig, conditions=True)
    rep = report(checks=[{"id": "ib.ports", "status": "pass", "findings": []}])
    assert p.publish(rep) == ["node", "node-status"]
    api.clear()
    for _ in range(100):
        assert p.publish(rep) == []
    assert api.writes() == []
    assert len(api.requests) == 100  # one GET a cycle, nothing else


def test_stale_owned_label_is_removed_and_foreign_labels_survive(api, kubeconfig):
    # Someone else's label under our prefix, never recorded as ours: never touched.
    api.nodes[NODE]["metadata"]["labels"]["rdmadoctor.io/set-by-hand"] = "yes"
    p = pub(kubeconfig)
    p.publish(report())
    api.clear()
    fewer = {k: v for k, v in LABELS.items() if k != "rdmadoctor.io/gpu-nic"}
    fewer["rdmadoctor.io/ready"] = "true"
    assert p.publish(report(fewer)) == ["node"]
    (patch,) = api.writes()
    assert patch.body == {
        "metadata": {
            "labels": {"rdmadoctor.io/ready": "true", "rdmadoctor.io/gpu-nic": None},
            "annotations": {OWNED: ",".join(sorted(fewer))},
        }
    }
    labels = api.labels(NODE)
    assert "rdmadoctor.io/gpu-nic" not in labels
    assert labels["rdmadoctor.io/set-by-hand"] == "yes"
    for k, v in FOREIGN.items():
        assert labels[k] == v


def test_an_edited_annotation_never_removes_a_foreign_label(api, kubeconfig):
    api.nodes[NODE]["metadata"]["annotations"][OWNED] = "team,kubernetes.io/hostname,rdmadoctor.io/old"
    api.nodes[NODE]["metadata"]["labels"]["rdmadoctor.io/old"] = "x"
    pub(kubeconfig).publish(report())
    (patch,) = api.writes()
    assert patch.body["metadata"]["labels"] == {**LABELS, "rdmadoctor.io/old": None}
    assert api.labels(NODE)["team"] == "ml"
    assert api.labels(NODE)["kubernetes.io/hostname"] == NODE


def test_label_patch_is_empty_when_nothing_changes():
    assert label_patch({**FOREIGN, **LABELS}, {OWNED: ALL_OWNED}, LABELS, "rdmadoctor.io/") == {}
    # Only the annotation is missing (labels set by an older rdmadoctor): only it is sent.
    assert label_patch({**LABELS}, {}, LABELS, "rdmadoctor.io/") == {"metadata": {"annotations": {OWNED: ALL_OWNED}}}


def test_prefix_changes_keys_and_annotation(api, kubeconfig):
    pub(kubeconfig, prefix="rdmadoctor.feature.node.kubernetes.io/").publish(report())
    (patch,) = api.writes()
    labels = patch.body["metadata"]["labels"]
    assert "rdmadoctor.feature.node.kubernetes.io/ready" in labels
    assert L.RDMA_CAPABLE in labels
    assert list(patch.body["metadata"]["annotations"]) == ["rdmadoctor.feature.node.kubernetes.io/owned-labels"]


class Waits:
    """Stands in for the agent's stop Event: records each backoff instead of sleeping it."""

    def __init__(self):
        self.waits: list[float] = []

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        return False  # not cancelled

    def is_set(self) -> bool:
        return False


@pytest.mark.parametrize("status", [500, 503, 409, 429])
def test_transient_errors_are_retried_then_succeed(api, kubeconfig, status):
    api.fail_next(2, status)
    waits = Waits()
    p = pub(kubeconfig, backoff=0.01, cancel=waits)
    assert p.publish(report()) == ["node"]
    assert api.labels(NODE)["rdmadoctor.io/ready"] == "false"
    # Two failed GETs, then the whole cycle again: GET + PATCH.
    assert [r.method for r in api.requests] == ["GET", "GET", "GET", "PATCH"]
    assert len(waits.waits) == 2
    if status == 429:  # Retry-After: 1 is honoured
        assert waits.waits == [1.0, 1.0]
    else:  # the publisher's own short backoff, with jitter
        assert all(w < 0.1 for w in waits.waits), waits.waits


def test_a_failed_patch_is_retried_from_a_fresh_get(api, kubeconfig):
    api.fail_next(1, 500, methods=("PATCH",))
    assert pub(kubeconfig).publish(report()) == ["node"]
    assert [r.method for r in api.requests] == ["GET", "PATCH", "GET", "PATCH"]
    assert api.requests[1].body == api.requests[3].body


def test_connection_refused_is_retried_until_the_server_is_back(api, kubeconfig):
    api.down()
    threading.Timer(0.4, api.up).start()
    p = pub(kubeconfig, retries=8, backoff=0.1)
    assert p.publish(report()) == ["node"]
    assert api.labels(NODE)["rdmadoctor.io/ready"] == "false"


def test_timeouts_are_retried(api, kubeconfig):
    # A 5 s answer against a 1 s timeout: the retry, answered at once, has all of 1 s (a deadline a
    # loaded machine meets; 0.3 s left a localhost round trip little room).
    api.slow_next(1, 5.0)
    p = pub(kubeconfig, timeout=1.0)
    assert p.publish(report()) == ["node"]


def test_outage_longer_than_the_retries_is_a_transient_error(api, kubeconfig):
    api.down()
    p = pub(kubeconfig, retries=2, backoff=0.01)
    with pytest.raises(PublishError) as e:
        p.publish(report())
    assert e.value.transient is True
    assert "gave up after 3 attempts" in e.value.message
    api.up()
    assert p.publish(report()) == ["node"]  # the same publisher recovers next cycle


def test_500_forever_gives_up(api, kubeconfig):
    api.fail_next(100, 500)
    with pytest.raises(PublishError) as e:
        pub(kubeconfig, retries=3).publish(report())
    assert e.value.transient is True and "HTTP 500" in e.value.message
    assert len(api.requests) == 4


def test_403_is_not_retried_and_names_rbac_and_the_policy(api, kubeconfig):
    api.fail_next(1, 403, methods=("PATCH",))
    with pytest.raises(PublishError) as e:
        pub(kubeconfig).publish(report())
    assert e.value.transient is False
    assert "ClusterRole" in e.value.message and "ValidatingAdmissionPolicy" in e.value.message
    assert [r.method for r in api.requests] == ["GET", "PATCH"]


def test_unknown_node_is_a_clear_error(api, kubeconfig):
    p = make_publisher("node", node="nope", kubeconfig=kubeconfig)
    with pytest.raises(PublishError) as e:
        p.publish(report())
    assert "spec.nodeName" in e.value.message and e.value.transient is False


def test_rotated_token_rebuilds_the_client_once(api, kubeconfig):
    p = pub(kubeconfig)
    p.publish(report())
    api.token = "rotated"
    api.kubeconfig(kubeconfig)  # the kubeconfig (or the projected token file) now holds the new one
    api.clear()
    assert p.publish(report(dict(LABELS, **{"rdmadoctor.io/ready": "true"}))) == ["node"]
    assert [(r.method, r.auth) for r in api.requests] == [
        ("GET", "Bearer rdmadoctor-test-token"),
        ("GET", "Bearer rotated"),
        ("PATCH", "Bearer rotated"),
    ]


def test_revoked_token_is_an_error(api, kubeconfig):
    api.token = "something-else"
    with pytest.raises(PublishError) as e:
        pub(kubeconfig).publish(report())
    assert "401" in e.value.message
    assert len(api.requests) == 2  # the first try and one after reloading the credentials


def test_in_cluster_token_file_is_reread(api, tmp_path, monkeypatch):
    # lightkube's in-cluster auth re-reads the token file on 401 by itself.
    token = tmp_path / "token"
    token.write_text(api.token)
    kc = tmp_path / "kc.json"
    import json

    kc.write_text(json.dumps({
        "clusters": [{"name": "c", "cluster": {"server": api.url}}],
        "users": [{"name": "u", "user": {"tokenFile": str(token)}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }))
    p = pub(str(kc))
    p.publish(report())
    api.token = "kubelet-rotated"
    token.write_text("kubelet-rotated")
    assert p.publish(report(dict(LABELS, **{"rdmadoctor.io/ready": "true"}))) == ["node"]


def test_dry_run_reads_but_never_writes(api, kubeconfig):
    out = io.StringIO()
    p = pub(kubeconfig, dry_run=True, out=out, conditions=True)
    assert p.publish(report()) == []
    assert api.writes() == []
    text = out.getvalue()
    assert f"# would send PATCH /api/v1/nodes/{NODE} (application/merge-patch+json)" in text
    assert f"/api/v1/nodes/{NODE}/status (application/strategic-merge-patch+json)" in text
    assert "rdmadoctor.io/ready=false\n" in text


def test_usage_errors(monkeypatch, kubeconfig):
    monkeypatch.delenv("NODE_NAME", raising=False)
    with pytest.raises(PublishConfigError, match="NODE_NAME"):
        make_publisher("node", kubeconfig=kubeconfig)
    with pytest.raises(PublishConfigError, match="not a valid Node name"):
        make_publisher("node", node="Bad Name", kubeconfig=kubeconfig)
    monkeypatch.setenv("NODE_NAME", NODE)
    assert make_publisher("node", kubeconfig=kubeconfig).node == NODE
    with pytest.raises(PublishConfigError, match="unknown --publish"):
        make_publisher("configmap")


def test_missing_lightkube_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "lightkube", None)
    with pytest.raises(PublishConfigError) as e:
        make_publisher("node", node=NODE)
    assert "rdmadoctor[k8s]" in e.value.hint


def test_publish_module_does_not_import_lightkube():
    import subprocess

    code = "import sys, rdmadoctor.publish, rdmadoctor.publish.nfd, rdmadoctor.publish.kube, rdmadoctor.cli.label; print('lightkube' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# -- NodeConditions ---------------------------------------------------------------------------

BROKEN_CHECKS = [
    {"id": "ib.devices", "status": "pass", "findings": []},
    {"id": "ib.ports", "status": "fail", "findings": [
        {"code": "IB_PORT_DOWN", "severity": "error", "subject": "mlx5_3/1", "message": "state DOWN"},
        {"code": "IB_PORT_RATE_LOW", "severity": "warning", "subject": "mlx5_2/1", "message": "100 Gb/s"},
    ]},
    {"id": "roce.config", "status": "skip", "findings": []},
    {"id": "limits.memlock", "status": "fail", "findings": [
        {"code": "MEMLOCK_LIMITED", "severity": "error", "subject": "memlock", "message": "64 KiB"},
    ]},
    {"id": "kernel.modules", "status": "fail", "findings": [
        {"code": "GDR_PEERMEM_MISSING", "severity": "error", "subject": "nvidia_peermem", "message": "not loaded"},
    ]},
    {"id": "gpu.topology", "status": "pass", "findings": [
        {"code": "GPU_NIC_PAIRS", "severity": "info", "subject": "GPU0", "message": "PIX"},
    ]},
    {"id": "node.labels", "status": "warn", "findings": [
        {"code": "NODE_LABEL_STALE", "severity": "warning", "subject": "rdmadoctor.io/ready", "message": "stale"},
    ]},
]


def test_conditions_from_a_broken_report():
    conds = {c["type"]: c for c in C.compute({"checks": BROKEN_CHECKS})}
    assert conds["RDMALinkProblem"] == {
        "type": "RDMALinkProblem", "status": "True", "reason": "IBPortDown",
        "message": "IB_PORT_DOWN (mlx5_3/1); IB_PORT_RATE_LOW (mlx5_2/1). Fix: rdmadoctor explain IB_PORT_DOWN",
    }
    # GDR_PEERMEM_MISSING comes from kernel.modules but is a GPUDirect problem, not a config one.
    assert conds["RDMAConfigProblem"]["reason"] == "MemlockLimited"
    assert "GDR_PEERMEM_MISSING" not in conds["RDMAConfigProblem"]["message"]
    assert conds["GPUDirectRDMAProblem"]["status"] == "True"
    assert conds["GPUDirectRDMAProblem"]["reason"] == "GDRPeermemMissing"


def test_conditions_healthy_unknown_and_not_applicable():
    healthy = [{"id": "ib.ports", "status": "pass", "findings": []}, {"id": "shm.size", "status": "pass", "findings": []}]
    conds = {c["type"]: c for c in C.compute({"checks": healthy})}
    assert conds["RDMALinkProblem"]["status"] == "False"
    assert conds["RDMALinkProblem"]["reason"] == "NoRDMALinkProblem"
    assert conds["GPUDirectRDMAProblem"] == {
        "type": "GPUDirectRDMAProblem", "status": "False", "reason": "NotApplicable",
        "message": "no rdmadoctor check of this kind ran on this node",
    }
    unknown = [{"id": "ib.ports", "status": "unknown", "findings": [{"code": "IB_PARSE_WARNING", "severity": "unknown", "subject": "ibstat"}]}]
    (link,) = [c for c in C.compute({"checks": unknown}) if c["type"] == "RDMALinkProblem"]
    assert link["status"] == "Unknown" and link["reason"] == "CheckUnknown"


def test_reasons_are_camel_case():
    assert C.reason_of("IB_PORT_DOWN") == "IBPortDown"
    assert C.reason_of("ROCE_NO_V2_GID") == "RoCENoV2GID"
    assert C.reason_of("PCIE_LINK_DEGRADED") == "PCIeLinkDegraded"
    assert C.reason_of("SHM_TOO_SMALL") == "ShmTooSmall"


def test_conditions_written_on_change_with_heartbeat_and_transition_times(api, kubeconfig):
    clock = Clock()
    p = pub(kubeconfig, conditions=True, clock=clock, heartbeat=300)
    rep = report(checks=BROKEN_CHECKS)
    assert p.publish(rep) == ["node", "node-status"]
    status = [r for r in api.writes() if r.path.endswith("/status")]
    assert len(status) == 1 and status[0].content_type == STRATEGIC
    sent = status[0].body["status"]["conditions"]
    assert [c["type"] for c in sent] == list(C.TYPES)
    assert all(c["lastHeartbeatTime"] == c["lastTransitionTime"] == "2023-11-14T22:13:20Z" for c in sent)
    # The kubelet's Ready condition is kept: the patch merged by type.
    conds = {c["type"]: c for c in api.conditions(NODE)}
    assert conds["Ready"] == READY
    assert conds["RDMALinkProblem"]["status"] == "True"

    # Unchanged and within the heartbeat: nothing at all.
    api.clear()
    clock.t += 299
    assert p.publish(rep) == []
    assert api.writes() == []

    # Heartbeat due: all three are refreshed, lastTransitionTime left alone.
    clock.t += 2
    assert p.publish(rep) == ["node-status"]
    (beat,) = api.writes()
    assert [set(c) for c in beat.body["status"]["conditions"]] == [{"type", "status", "reason", "message", "lastHeartbeatTime"}] * 3
    conds = {c["type"]: c for c in api.conditions(NODE)}
    assert conds["RDMALinkProblem"]["lastHeartbeatTime"] == "2023-11-14T22:18:21Z"
    assert conds["RDMALinkProblem"]["lastTransitionTime"] == "2023-11-14T22:13:20Z"

    # The link comes back: only that condition is sent, with a new transition time.
    api.clear()
    clock.t += 10
    fixed = [c for c in BROKEN_CHECKS if c["id"] != "ib.ports"] + [{"id": "ib.ports", "status": "pass", "findings": []}]
    assert p.publish(report(checks=fixed)) == ["node-status"]
    (change,) = api.writes()
    (only,) = change.body["status"]["conditions"]
    assert only["type"] == "RDMALinkProblem" and only["status"] == "False"
    assert only["lastTransitionTime"] == only["lastHeartbeatTime"] == "2023-11-14T22:18:31Z"
    assert {c["type"]: c for c in api.conditions(NODE)}["Ready"] == READY


def test_message_change_without_status_change_keeps_transition_time(api, kubeconfig):
    clock = Clock()
    p = pub(kubeconfig, conditions=True, clock=clock)
    p.publish(report(checks=BROKEN_CHECKS))
    api.clear()
    clock.t += 30
    other = [dict(c) for c in BROKEN_CHECKS]
    other[1] = {"id": "ib.ports", "status": "fail", "findings": [{"code": "IB_NO_SM", "severity": "error", "subject": "mlx5_0/1"}]}
    assert p.publish(report(checks=other)) == ["node-status"]
    (only,) = api.writes()[0].body["status"]["conditions"]
    assert only["reason"] == "IBNoSM" and "lastTransitionTime" not in only


def test_nfd_mode_with_conditions_writes_file_and_status(api, kubeconfig, tmp_path):
    d = tmp_path / "features.d"
    d.mkdir()
    p = make_publisher("nfd", features_dir=str(d), expiry=600, node=NODE, kubeconfig=kubeconfig, conditions=True)
    assert p.publish(report(checks=BROKEN_CHECKS)) == ["nfd", "node-status"]
    assert [r.path for r in api.writes()] == [f"/api/v1/nodes/{NODE}/status"]  # labels only via NFD
    # The API down does not stop the file from being written, but the error is reported.
    api.down()
    (d / "rdmadoctor").unlink()
    with pytest.raises(PublishError):
        make_publisher("nfd", features_dir=str(d), expiry=600, node=NODE, kubeconfig=kubeconfig, conditions=True, retries=0).publish(report())
    assert (d / "rdmadoctor").exists()


# -- the fake itself follows the RFCs it claims ------------------------------------------------


def test_merge_patch_rfc7386_examples():
    assert merge_patch({"a": "b"}, {"a": "c"}) == {"a": "c"}
    assert merge_patch({"a": "b"}, {"b": "c"}) == {"a": "b", "b": "c"}
    assert merge_patch({"a": "b"}, {"a": None}) == {}
    assert merge_patch({"a": "b", "b": "c"}, {"a": None}) == {"b": "c"}
    assert merge_patch({"a": ["b"]}, {"a": "c"}) == {"a": "c"}
    assert merge_patch({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}) == {"a": {"b": "d"}}
    assert merge_patch({"a": [{"b": "c"}]}, {"a": [1]}) == {"a": [1]}
    assert merge_patch({"e": None}, {"a": 1}) == {"e": None, "a": 1}
    assert merge_patch([1, 2], {"a": "b", "c": None}) == {"a": "b"}
    assert merge_patch({}, {"a": {"bb": {"ccc": None}}}) == {"a": {"bb": {}}}


def test_strategic_merge_keeps_other_conditions():
    node = {"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "X", "status": "False", "reason": "a"}]}}
    out = strategic_merge_patch(node, {"status": {"conditions": [{"type": "X", "status": "True"}, {"type": "Y", "status": "False"}]}})
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "True"}, {"type": "X", "status": "True", "reason": "a"}, {"type": "Y", "status": "False"},
    ]


def test_fake_is_strict_about_content_type_and_paths(api):
    import urllib.error
    import urllib.request

    def call(method, path, body=b"{}", ctype="application/json", auth=True):
        req = urllib.request.Request(api.url + path, data=body if method != "GET" else None, method=method)
        req.add_header("Content-Type", ctype)
        if auth:
            req.add_header("Authorization", f"Bearer {api.token}")
        try:
            with urllib.request.urlopen(req) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    assert call("PATCH", f"/api/v1/nodes/{NODE}", ctype="application/json") == 415
    assert call("PATCH", f"/api/v1/nodes/{NODE}", ctype="application/strategic-merge-patch+json") == 415
    assert call("PATCH", f"/api/v1/nodes/{NODE}/status", ctype="application/json-patch+json") == 415
    assert call("PUT", f"/api/v1/nodes/{NODE}") == 405
    assert call("GET", "/api/v1/namespaces/default/pods/x") == 404
    assert call("GET", f"/api/v1/nodes/{NODE}", auth=False) == 401
    assert call("PATCH", f"/api/v1/nodes/{NODE}", b'{"spec": {"taints": []}}', MERGE) == 422
    assert call("PATCH", f"/api/v1/nodes/{NODE}", b'{"metadata": {"resourceVersion": "1"}}', MERGE) == 409
    assert call("PATCH", f"/api/v1/nodes/{NODE}", b'{"metadata": {"labels": {"a": "b"}}}', MERGE) == 200
    assert api.labels(NODE)["a"] == "b"
