"""Issue 10, items 11 and 12: API servers that misbehave, in direct mode (--publish node,
--conditions) and in the agent.

The server is tests/kubeapi.py's FakeKubeAPI: a loopback HTTP server speaking exactly the subset
of the Kubernetes API rdmadoctor uses (GET/PATCH a Node, PATCH its status, POST an Event), with
faults added for this issue: ``drip_next`` sends an answer one byte at a time (each byte well
within the client's per-read timeout, so only an overall deadline ends the request) and
``respond_next`` sends bytes no API server would (a negative Retry-After, a body that is not a
JSON object, a redirect without a Content-Type).

No test here asserts how long anything took. A thread that must end is joined with a generous
bound only so that a regression fails instead of hanging the suite (on main, these requests
never end); what is asserted is what the client did: it gave up mid-answer, said why, and the
agent's checks went on.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("lightkube")
from kubeapi import FakeKubeAPI

from rdmadoctor.publish import PublishError, make_publisher

NODE = "gpu-1"
LABELS = {"rdmadoctor.io/ready": "true", "feature.node.kubernetes.io/network-rdma.capable": "true"}
REPORT = {"labels": dict(LABELS), "checks": []}
HANG = 120.0  # seconds: a hang detector, not a measure (the requests here end in about a second)
FOREVER = 10**7  # pad bytes: at one byte per drip, longer than any test run


@pytest.fixture
def api():
    with FakeKubeAPI() as fake:
        fake.add_node(NODE, labels={"kubernetes.io/hostname": NODE})
        yield fake


@pytest.fixture
def kubeconfig(api, tmp_path):
    return api.kubeconfig(tmp_path / "kubeconfig")


def publish_in_thread(pub, report=REPORT) -> dict:
    """publish() in a thread, joined with the hang bound; {'written'} or {'error'}."""
    box: dict = {}

    def run():
        try:
            box["written"] = pub.publish(report)
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(HANG)
    assert not t.is_alive(), "publish() never returned: a request without an overall deadline"
    return box


def wait_until(cond, what: str) -> None:
    end = time.monotonic() + HANG
    while not cond():
        assert time.monotonic() < end, f"never happened: {what}"
        time.sleep(0.02)


# ---- item 11: an overall deadline per request ---------------------------------------------------


def test_a_dripping_server_cannot_hang_the_node_publisher(api, kubeconfig):
    # One byte every 0.1 s never trips a 0.5 s per-read timeout: only a deadline ends it.
    api.drip_next(1000, every=0.1, pad=FOREVER)
    pub = make_publisher("node", node=NODE, kubeconfig=kubeconfig, timeout=0.5, retries=1, backoff=0.01)
    box = publish_in_thread(pub)
    pub.close()
    err = box.get("error")
    assert isinstance(err, PublishError) and err.transient, box
    assert "no complete answer within 0.5 s" in err.message and "gave up after 2 attempts" in err.message
    assert f"GET /api/v1/nodes/{NODE}" in err.message
    # Both attempts were cut mid-answer by the client (the server saw it hang up), and no PATCH
    # was sent from a GET that never completed.
    wait_until(lambda: len(api.drips) == 2 and all(d["hung_up"] for d in api.drips), "the client hung up twice")
    assert all(0 < d["sent"] < d["total"] for d in api.drips)
    assert api.writes() == []


def test_a_slow_but_whole_answer_within_the_deadline_still_lands(api, kubeconfig):
    """The deadline is on the whole request, not a reason to give up on a server that answers."""
    api.drip_next(1, every=0.001)
    pub = make_publisher("node", node=NODE, kubeconfig=kubeconfig, timeout=30.0, retries=0)
    box = publish_in_thread(pub)
    pub.close()
    assert box == {"written": ["node"]}
    # The server's thread marks the answer finished after its last write, which the client may read first.
    wait_until(lambda: api.drips and api.drips[0]["finished"], "the server finished its slow answer")
    assert api.labels(NODE)["rdmadoctor.io/ready"] == "true"


def test_label_publish_node_ends_against_a_dripping_server(api, kubeconfig):
    """The issue's reproduction, the real command: `label --publish node` against a server that
    drips one byte every 2 s. The dripping GET is abandoned at the 5 s deadline and the retry
    lands the labels; before, the command never ended."""
    api.drip_next(1, every=2.0, pad=FOREVER)
    proc = subprocess.run(
        [sys.executable, "-m", "rdmadoctor", "label", "--example", "roce-node", "--publish", "node",
         "--node", NODE, "--kubeconfig", kubeconfig],
        capture_output=True, text=True, timeout=HANG * 2,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert api.labels(NODE)["rdmadoctor.io/ready"] == "true"
    wait_until(lambda: api.drips and api.drips[0]["hung_up"], "the client hung up on the dripping answer")
    assert api.drips[0]["sent"] < api.drips[0]["total"]


def test_the_agent_keeps_checking_while_the_api_server_drips(api, kubeconfig):
    """Cycles go on (checks run, metrics update, health stays ok) while every API request drips."""
    from rdmadoctor import agent as A
    from rdmadoctor.output.metrics import AgentMetrics
    from rdmadoctor.runner import Options

    pytest.importorskip("prometheus_client")
    api.drip_next(10**6, every=0.05, pad=FOREVER)
    stop = threading.Event()
    pub = make_publisher("node", node=NODE, kubeconfig=kubeconfig, timeout=0.3, retries=0, backoff=0.01, cancel=stop)
    metrics = AgentMetrics("test", ("node",))
    log = io.StringIO()
    agent = A.Agent(Options(example="roce-node", scope="node"), pub, metrics, A.Log("json", log),
                    A.Settings(interval=0.2), stop=stop)
    t = threading.Thread(target=agent.run, daemon=True)
    t.start()
    try:
        wait_until(lambda: agent.cycles >= 4, "4 cycles while the API server drips")
    finally:
        stop.set()
        t.join(HANG)
    pub.close()
    assert not t.is_alive()
    assert agent.health() == (True, "ok") and agent.last_report["status"] == "pass"
    assert agent.publish_failures >= 1 and "no complete answer within 0.3 s" in agent.last_publish_error
    failed = [json.loads(line) for line in log.getvalue().splitlines() if '"publish failed"' in line]
    assert failed and all(f["transient"] is True for f in failed)
    assert api.writes() == []


# ---- item 12: answers no API server should send ----------------------------------------------------

STATUS_503 = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "busy", "reason": "ServiceUnavailable", "code": 503}).encode()


@pytest.mark.parametrize("retry_after", ["-5", "NaN", "nan", "inf", "-inf", "1e999", "soon", "9" * 5000, ""])
def test_a_bad_retry_after_is_ignored_and_the_retry_happens(retry_after, api, kubeconfig):
    api.respond_next(1, 503, STATUS_503, {"Content-Type": "application/json", "Retry-After": retry_after})
    pub = make_publisher("node", node=NODE, kubeconfig=kubeconfig, timeout=5.0, retries=2, backoff=0.01)
    box = publish_in_thread(pub)  # without a cancel event: the retry sleeps with time.sleep
    pub.close()
    assert box == {"written": ["node"]}, box
    assert api.labels(NODE)["rdmadoctor.io/ready"] == "true"


def test_an_http_date_retry_after_is_honoured_and_capped(api, kubeconfig):
    from rdmadoctor.publish import kube

    assert kube.retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412480.0 - 2) == pytest.approx(2.0)
    assert kube.retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412480.0 + 60) == 0.0  # in the past
    assert kube.retry_after("3", now=0) == 3.0 and kube.retry_after("0", now=0) == 0.0
    for bad in ("-5", "NaN", "inf", "1e999", "", "soon", "9" * 5000, None):
        assert kube.retry_after(bad, now=0) is None, bad


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[]", b'"a string"', b"null", b"5", b'{"metadata": 5}', b"\xff\xfe", b""],
    ids=["malformed", "array", "string", "null", "number", "wrong-shape", "not-utf8", "empty"],
)
def test_a_body_that_is_not_a_node_is_an_api_error(body, api, kubeconfig):
    api.respond_next(100, 200, body, {"Content-Type": "application/json"}, methods=("GET",))
    pub = make_publisher("node", node=NODE, kubeconfig=kubeconfig, timeout=5.0, retries=1, backoff=0.01)
    box = publish_in_thread(pub)
    pub.close()
    err = box.get("error")
    assert isinstance(err, PublishError), box
    assert f"the answer to GET /api/v1/nodes/{NODE} is not a Node object" in err.message, err.message
    assert api.writes() == []


@pytest.mark.parametrize("status", [307, 302, 308])
def test_a_redirect_without_content_type_is_a_clear_error(status, api, kubeconfig):
    api.respond_next(100, status, b"", {"Location": "https://elsewhere.example/api/v1/nodes/gpu-1"})
    pub = make_publisher("node", node=NODE, kubeconfig=kubeconfig, timeout=5.0, retries=2, backoff=0.01)
    box = publish_in_thread(pub)
    pub.close()
    err = box.get("error")
    assert isinstance(err, PublishError) and not err.transient, box
    assert f"HTTP {status}" in err.message and "https://elsewhere.example" in err.message
    assert "does not follow redirects" in err.message
    assert len(api.requests) == 1  # not retried: the same request gets the same redirect


@pytest.mark.parametrize("headers, body", [
    ({}, b"upstream connect error"),  # a proxy's 503: no Content-Type at all
    ({"Content-Type": "application/json"}, b"<html>busy</html>"),  # says JSON, is not
    ({"Content-Type": "text/html"}, b"<html>busy</html>"),
])
def test_a_5xx_without_a_status_body_is_retried(headers, body, api, kubeconfig):
    api.respond_next(1, 503, body, headers)
    pub = make_publisher("node", node=NODE, kubeconfig=kubeconfig, timeout=5.0, retries=2, backoff=0.01)
    box = publish_in_thread(pub)
    pub.close()
    assert box == {"written": ["node"]}, box


def test_label_cli_says_a_redirect_in_one_line(api, kubeconfig):
    from conftest import run_cli

    api.respond_next(100, 307, b"", {"Location": "https://elsewhere.example/"})
    code, out, err = run_cli(["label", "--example", "roce-node", "--publish", "node", "--node", NODE, "--kubeconfig", kubeconfig])
    assert code == 2 and out == "" and "Traceback" not in err
    assert "rdmadoctor: label: publishing failed: " in err and "HTTP 307" in err


def test_an_empty_label_set_is_never_patched(api, kubeconfig):
    """A report with no labels would make the patch remove every rdmadoctor label of the node."""
    pub = make_publisher("node", node=NODE, kubeconfig=kubeconfig, timeout=5.0, retries=0)
    assert pub.publish(REPORT) == ["node"]
    box = publish_in_thread(pub, {"labels": {}, "checks": []})
    pub.close()
    err = box.get("error")
    assert isinstance(err, PublishError) and not err.transient and "no labels" in err.message
    assert api.labels(NODE)["rdmadoctor.io/ready"] == "true"
