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
