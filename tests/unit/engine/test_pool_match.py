"""One DaemonSet for every pool (issue 32 item 3): a `[pools.NAME]` table may say which nodes it is
for with a `match` table of the node's own facts (GPU PCI IDs, RDMA device count, link layer);
without --pool the first pool that fits is used, and the report says which and why. Tested on
generated nodes of two pools (an InfiniBand node, a RoCE node) checked with one config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import check_json, run_cli

from rdmadoctor.engine import expectations as E
from rdmadoctor.fixturegen import write_dir
from rdmadoctor.fixturegen.nodes import _roce, _small_ib
from rdmadoctor.fixturegen.sysfs import build
from rdmadoctor.output import fleet_metrics

CONFIG = """\
min_rate_gbps = 100

[pools.h100-ib]
match = { gpu_model = ["10de:2330", "10de:2324"], link_layer = "InfiniBand" }
min_rate_gbps = 800

[pools.roce]
match = { link_layer = "Ethernet", hca_count = 2 }
min_rate_gbps = 100

[pools.storage]
min_rate_gbps = 25
"""


@pytest.fixture(scope="module")
def nodes(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("pools")
    out = {}
    for name, make in (("ib", _small_ib), ("roce", _roce)):
        write_dir(build(make()), str(base / name))
        out[name] = base / name
    (base / "pools.toml").write_text(CONFIG)
    out["config"] = base / "pools.toml"
    return out


def _codes(rep: dict) -> set[str]:
    return {f["code"] for c in rep["checks"] for f in c["findings"] if f["severity"] in ("error", "warning", "unknown")}


def test_two_nodes_of_two_pools_with_one_config(nodes):
    _, ib = check_json(["--root", str(nodes["ib"]), "--config", str(nodes["config"]), "--scope", "node"])
    assert ib["pool"]["name"] == "h100-ib" and ib["pool"]["chosen_by"] == "match"
    assert ib["pool"]["why"].startswith("[pools.h100-ib] is the first pool whose match fits: GPUs 10de:")
    assert ib["fingerprint"]["pool"] == "h100-ib"
    # Its table applies: 400 Gb/s ports against the pool's 800.
    assert "IB_PORT_RATE_LOW" in _codes(ib)

    _, roce = check_json(["--root", str(nodes["roce"]), "--config", str(nodes["config"]), "--scope", "node"])
    assert roce["pool"] == {"name": "roce", "chosen_by": "match",
                            "why": "[pools.roce] is the first pool whose match fits: link layer Ethernet; 2 RDMA devices"}
    assert "IB_PORT_RATE_LOW" not in _codes(roce)
    # The metrics carry the pool the node was judged as (the fleet view groups by it).
    node_series, port_series = fleet_metrics.series(roce["fingerprint"])
    assert node_series[0]["pool"] == "roce" and {p["pool"] for p in port_series} == {"roce"}


def test_the_text_headline_names_the_pool(nodes):
    code, out, err = run_cli(["check", "--root", str(nodes["roce"]), "--config", str(nodes["config"]), "--scope", "node"])
    assert "profile generic, pool roce)" in out.splitlines()[0], out


def test_pool_given_wins_and_says_so(nodes):
    _, rep = check_json(["--root", str(nodes["ib"]), "--config", str(nodes["config"]), "--pool", "storage", "--scope", "node"])
    assert rep["pool"] == {"name": "storage", "chosen_by": "--pool", "why": "given with --pool"}
    assert rep["fingerprint"]["pool"] == "storage" and "IB_PORT_RATE_LOW" not in _codes(rep)


def test_no_pool_fits_the_report_says_why(nodes, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[pools.big]\nmatch = { hca_count = 8 }\n[pools.eth]\nmatch = { link_layer = "Ethernet" }\n')
    _, rep = check_json(["--root", str(nodes["ib"]), "--config", str(cfg), "--scope", "node"])
    assert rep["pool"] == {"name": None, "chosen_by": "match",
                           "why": "no pool's match fits this node: big (2 RDMA devices), eth (link layer InfiniBand)"}
    assert rep["fingerprint"]["pool"] is None


def test_a_config_without_matches_behaves_as_before(nodes, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[pools.a]\nmin_rate_gbps = 100\n")
    _, rep = check_json(["--root", str(nodes["ib"]), "--config", str(cfg), "--scope", "node"])
    assert "pool" not in rep and rep["fingerprint"]["pool"] is None


def test_first_match_wins_in_the_files_order():
    rules = [("a", {"link_layer": "InfiniBand"}), ("b", {"link_layer": "InfiniBand", "hca_count": 2})]
    facts = {"gpu_model": ["10de:2330"], "hca_count": 2, "link_layer": ["InfiniBand"]}
    assert E.match_pool(rules, facts)[0] == "a"
    assert E.match_pool(rules[::-1], facts)[0] == "b"
    # Every GPU must be one of the models named; a node without GPUs fits no gpu_model.
    assert E.match_pool([("g", {"gpu_model": "10de:2330"})], {**facts, "gpu_model": ["10de:2330", "10de:20b5"]})[0] is None
    assert E.match_pool([("g", {"gpu_model": "10DE:2330"})], facts)[0] == "g"
    assert E.match_pool([("g", {"gpu_model": "10de:2330"})], {**facts, "gpu_model": []})[0] is None


@pytest.mark.parametrize(("match", "said"), [
    ('{ gpu = "H100" }', "unknown node fact 'gpu'"),
    ('{ hca_count = "8" }', "match.hca_count"),
    ('{ link_layer = "IB" }', 'is not "InfiniBand" or "Ethernet"'),
    ('{ gpu_model = [] }', "match.gpu_model"),
    ('"yes"', "is not a table of node facts"),
])
def test_a_bad_match_is_a_clear_error_on_every_node(nodes, tmp_path, match, said):
    """Checked on every node, whichever pool it would use (a typo fails everywhere, at once)."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(f"[pools.a]\nmin_rate_gbps = 100\n[pools.b]\nmatch = {match}\n")
    code, out, err = run_cli(["check", "--root", str(nodes["ib"]), "--config", str(cfg), "--pool", "a", "--json"])
    assert code == 2 and said in err and "Traceback" not in err, err
    assert out == "" or json.loads(out)


# ---- by the Node's labels, in direct mode (agent --publish node) -----------------------------------
LABEL_CONFIG = """\
min_rate_gbps = 100

[pools.h100]
match = { labels = { "nvidia.com/gpu.product" = "NVIDIA-H100-80GB-HBM3" } }
min_rate_gbps = 800

[pools.a100]
match = { labels = { "nvidia.com/gpu.product" = ["NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-SXM4-40GB"], "nvidia.com/gpu.count" = "8" } }
min_rate_gbps = 100
"""


def test_labels_match_first_fit_and_why():
    rules = [("h100", {"labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}),
             ("ib", {"link_layer": "InfiniBand"})]
    facts = {"gpu_model": [], "hca_count": 2, "link_layer": ["InfiniBand"]}
    h100 = {**facts, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "team": "ml"}}
    assert E.match_pool(rules, h100) == (
        "h100", "[pools.h100] is the first pool whose match fits: label nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3")
    # Another product: the next pool that fits, and the why says what the first one wanted.
    a100 = {**facts, "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}}
    assert E.match_pool(rules, a100)[0] == "ib"
    assert E.match_pool(rules[:1], a100) == (
        None, "no pool's match fits this node: h100 (label nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB)")
    assert E.match_pool(rules[:1], {**facts, "labels": {}})[1].endswith("h100 (no label nvidia.com/gpu.product)")
    # Labels and node facts together: every one must fit.
    both = [("x", {"labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "hca_count": 8})]
    assert E.match_pool(both, h100) == (None, "no pool's match fits this node: x (2 RDMA devices)")
    # Where nobody read the Node (check, NFD mode), a labels match fits no node, and says why.
    assert E.match_pool(rules[:1], {**facts, "labels": None}) == (
        None, "no pool's match fits this node: h100 (the Node's labels are not read here "
              "(only `agent --publish node` reads its Node))")


@pytest.mark.parametrize(("match", "said"), [
    ("{ labels = {} }", "match.labels"),
    ('{ labels = "nvidia.com/gpu.product" }', "match.labels"),
    ('{ labels = { "nvidia.com/gpu.product" = 8 } }', "match.labels"),
    ('{ labels = { "nvidia.com/gpu.product" = [] } }', "match.labels"),
    ('{ labels = { "rdmadoctor.io/pool" = "h100" } }', "none of rdmadoctor.io/"),
])
def test_a_bad_labels_match_is_a_clear_error(nodes, tmp_path, match, said):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f"[pools.b]\nmatch = {match}\n")
    code, out, err = run_cli(["check", "--root", str(nodes["ib"]), "--config", str(cfg), "--json"])
    assert code == 2 and said in err and "Traceback" not in err, err


def test_check_without_the_node_says_a_labels_pool_cannot_be_chosen(nodes, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(LABEL_CONFIG)
    _, rep = check_json(["--root", str(nodes["ib"]), "--config", str(cfg), "--scope", "node"])
    assert rep["pool"]["name"] is None and "only `agent --publish node` reads its Node" in rep["pool"]["why"]


def test_one_daemonset_two_pools_by_node_labels(nodes, tmp_path):
    """Two Nodes with the same hardware (the generated InfiniBand node: facts cannot tell them
    apart), labelled by GPU Feature Discovery as two products, on the loopback fake API server
    (tests/kubeapi.py; no Kubernetes API server runs here). One config; `agent --once --publish
    node` on each reads its own Node's labels and is judged as its pool: the H100 node against
    800 Gb/s (its 400 Gb/s ports are too slow), the A100 node against 100."""
    import kubeapi

    cfg = tmp_path / "pools.toml"
    cfg.write_text(LABEL_CONFIG)
    with kubeapi.FakeKubeAPI() as api:
        api.add_node("gpu-h", labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"})
        api.add_node("gpu-a", labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "nvidia.com/gpu.count": "8"})
        kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
        reports = {}
        for node in ("gpu-h", "gpu-a"):
            out = tmp_path / f"{node}.json"
            code, _, err = run_cli(["agent", "--once", "--root", str(nodes["ib"]), "--config", str(cfg), "--publish", "node",
                                    "--node", node, "--kubeconfig", kubeconfig, "--metrics-port", "0", "--report-file", str(out),
                                    "--log-format", "json"])
            assert "Traceback" not in err, err
            reports[node] = (code, json.loads(out.read_text()))
        gets = [r for r in api.requests if r.method == "GET"]
        ready = {n: api.labels(n)["rdmadoctor.io/ready"] for n in ("gpu-h", "gpu-a")}
    (h_code, h), (a_code, a) = reports["gpu-h"], reports["gpu-a"]
    assert h["pool"] == {"name": "h100", "chosen_by": "match",
                         "why": "[pools.h100] is the first pool whose match fits: label nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"}
    assert a["pool"] == {"name": "a100", "chosen_by": "match",
                         "why": "[pools.a100] is the first pool whose match fits: "
                                "label nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB; label nvidia.com/gpu.count=8"}
    assert h["fingerprint"]["pool"] == "h100" and a["fingerprint"]["pool"] == "a100"
    assert "IB_PORT_RATE_LOW" in _codes(h) and "IB_PORT_RATE_LOW" not in _codes(a)
    assert (h_code, a_code) == (1, 0) and ready == {"gpu-h": "false", "gpu-a": "true"}
    assert {r.path for r in gets} == {"/api/v1/nodes/gpu-h", "/api/v1/nodes/gpu-a"}


class _Labels:
    """Node labels as the agent's reader returns them, or an error, one answer per call."""

    def __init__(self, *answers):
        self.answers, self.calls = list(answers), 0

    def __call__(self):
        self.calls += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer


def _agent(tmp_path, reader, clock):
    import io
    from types import SimpleNamespace

    from rdmadoctor import agent as A
    from rdmadoctor.output.metrics import AgentMetrics
    from rdmadoctor.runner import Options

    cfg = tmp_path / "pools.toml"
    cfg.write_text(LABEL_CONFIG)
    seen = []

    def diagnose(opts):
        seen.append(opts.node_labels)
        report = {"schema": "rdmadoctor.report/v1", "status": "pass", "exit_code": 0, "summary": {}, "checks": [],
                  "labels": {"rdmadoctor.io/ready": "true"}}
        return SimpleNamespace(report=report, results=[])

    log = io.StringIO()
    ag = A.Agent(Options(example="broken-pod", config=str(cfg)), type("P", (), {"publish": lambda self, r: []})(),
                 AgentMetrics("9.9.9", ()), A.Log("json", log), A.Settings(interval=60, resync=300), clock=clock,
                 diagnose_fn=diagnose, node_labels=reader)
    return ag, seen, log


def test_the_agent_reads_the_labels_at_resync_pace_and_keeps_them_through_an_outage(tmp_path):
    now = [1000.0]
    h100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    reader = _Labels(h100, RuntimeError("connection refused"), h100)
    ag, seen, log = _agent(tmp_path, reader, lambda: now[0])
    assert ag.run_cycle() is not None and seen == [h100] and reader.calls == 1
    now[0] += 60
    ag.run_cycle()
    assert reader.calls == 1  # within the resync window: no GET
    now[0] += 300
    ag.run_cycle()  # the read fails: the labels read before still choose the pool
    assert reader.calls == 2 and seen[-1] == h100 and ag.last_error is None
    assert "could not read the Node's labels" in log.getvalue()
    now[0] += 60
    ag.run_cycle()  # a failed read is tried again the next cycle
    assert reader.calls == 3 and "read again" in log.getvalue()


def test_the_agent_cannot_choose_a_labels_pool_before_it_read_the_labels(tmp_path):
    reader = _Labels(RuntimeError("the API server refused (403 Forbidden)"))
    ag, seen, log = _agent(tmp_path, reader, lambda: 1000.0)
    assert ag.run_cycle() is None and seen == []
    assert ag.last_error == "a pool's match names Node labels, and reading this Node's failed: the API server refused (403 Forbidden)"
    assert ag.health()[0] is False
    # A config whose pools name no labels never reads the Node.
    (tmp_path / "pools.toml").write_text('[pools.ib]\nmatch = { link_layer = "InfiniBand" }\n')
    assert ag.run_cycle() is not None and reader.calls == 1
