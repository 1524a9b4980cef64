"""`rdmadoctor fleet`: each node against its pool, from reports, bundles, folders and stdin."""

from __future__ import annotations

import copy
import io
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rdmadoctor.engine import fingerprint as F
from rdmadoctor.fleet import read_fleet
from rdmadoctor.fleet.compare import compare, exit_code, lines
from tests.conftest import check_json, run_cli

BASE = {
    "node.kernel": "5.15.0-91-generic",
    "node.rdma_core": "44.0-2",
    "port.mlx5_0/1.fw_ver": "28.41.1000",
    "port.mlx5_0/1.active_mtu": 4096,
    "port.mlx5_1/1.fw_ver": "28.41.1000",
}
_fields = st.sampled_from(sorted(BASE))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(size=st.integers(3, 40), data=st.data())
def test_a_single_mutated_field_is_always_named_and_the_majority_never(size, data):
    field = data.draw(_fields)
    odd = data.draw(st.integers(0, size - 1))
    nodes = [(f"n{i}", "pool-a", dict(BASE)) for i in range(size)]
    nodes[odd][2][field] = "other"
    res = compare(nodes)
    assert [(o["node"], o["field"], o["value"], o["majority"]) for o in res["outliers"]] == [(f"n{odd}", field, "other", BASE[field])]
    assert res["outliers"][0]["majority_count"] == size - 1 and res["outliers"][0]["total"] == size
    assert exit_code(res) == 1


@settings(max_examples=100, deadline=None)
@given(half=st.integers(1, 20), field=_fields)
def test_two_equal_halves_are_undecided_never_drift(half, field):
    nodes = [(f"n{i}", "p", {**BASE, field: "a" if i < half else "b"}) for i in range(2 * half)]
    res = compare(nodes)
    assert res["outliers"] == []
    assert res["pools"][0]["undecided"] == [{"field": field, "values": {"a": half, "b": half}, "total": 2 * half}]
    assert exit_code(res) == 2


@settings(max_examples=100, deadline=None)
@given(nodes=st.lists(st.fixed_dictionaries({k: st.sampled_from(["x", "y", "z"]) for k in BASE}), min_size=2, max_size=15))
def test_every_outlier_differs_from_a_strict_plurality_and_no_majority_holder_is_named(nodes):
    res = compare([(f"n{i}", "p", flat) for i, flat in enumerate(nodes)])
    for o in res["outliers"]:
        values = [n[o["field"]] for n in nodes]
        assert values.count(o["majority"]) == o["majority_count"]
        assert all(values.count(v) < o["majority_count"] for v in set(values) - {o["majority"]})
        assert nodes[int(o["node"][1:])][o["field"]] == o["value"] != o["majority"]


def test_unknown_is_never_a_difference_and_pools_are_compared_apart():
    a = [(f"a{i}", "A", dict(BASE)) for i in range(3)]
    b = [(f"b{i}", "B", {**BASE, "node.kernel": "6.8.0"}) for i in range(3)]
    unknown = dict(BASE)
    del unknown["port.mlx5_0/1.fw_ver"]
    unknown["node.rdma_core"] = None
    res = compare(a + b + [("a3", "A", unknown)])
    assert res["outliers"] == [] and exit_code(res) == 0
    assert [p["pool"] for p in res["pools"]] == ["A", "B"]


def test_a_pool_of_one_is_not_compared():
    res = compare([("solo", "gpu", dict(BASE))])
    assert res["outliers"] == [] and res["pools"][0]["compared"] is False
    assert exit_code(res) == 2  # nothing was compared: not "healthy"
    res = compare([("solo", "gpu", {**BASE, "node.kernel": "x"})] + [(f"n{i}", "other", dict(BASE)) for i in range(4)])
    assert res["outliers"] == [] and exit_code(res) == 0


def test_the_text_names_the_value_the_nodes_and_the_majority():
    nodes = [(f"gpu-{i:03d}", "hgx", dict(BASE)) for i in range(512)]
    for i in (17, 203, 388):
        nodes[i][2]["port.mlx5_0/1.fw_ver"] = "28.39.1002"
        nodes[i][2]["port.mlx5_1/1.fw_ver"] = "28.39.1002"
    text = "\n".join(lines(compare(nodes)))
    assert (
        "fw_ver 28.39.1002 on 3/512 nodes (gpu-017, gpu-203, gpu-388) at mlx5_0/1, mlx5_1/1; pool majority 28.41.1000 (509 nodes)"
        in text
    )


def _reports(tmp_path, n: int = 5, odd: int = 3) -> list[dict]:
    rep = check_json(["--example", "roce-node"])[1]
    out = []
    for i in range(n):
        r = copy.deepcopy(rep)
        r["fingerprint"]["identity"].update(hostname=f"roce-{i:02d}", node=f"roce-{i:02d}")
        r["fingerprint"]["pool"] = "roce"
        if i == odd:
            r["fingerprint"]["ports"][2]["netdev_mtu"] = 1500
            r["fingerprint"]["ports"][2]["active_mtu"] = 1024
        (tmp_path / f"r{i}.json").write_text(json.dumps(r))
        out.append(r)
    return out


def test_fleet_over_a_folder_of_reports_names_the_node_text_and_json(tmp_path):
    _reports(tmp_path)
    code, out, err = run_cli(["fleet", str(tmp_path)])
    assert code == 1 and err == ""
    assert "netdev_mtu 1500 on 1/5 nodes (roce-03) at mlx5_2/1; pool majority 9000 (4 nodes)" in out
    assert "active_mtu 1024 on 1/5 nodes (roce-03) at mlx5_2/1; pool majority 4096 (4 nodes)" in out
    code, out, err = run_cli(["fleet", "--json", str(tmp_path)])
    doc = json.loads(out)
    assert code == 1 and err == "" and doc["schema"] == "rdmadoctor.fleet/v1"
    assert {(o["node"], o["field"]) for o in doc["outliers"]} == {("roce-03", "port.mlx5_2/1.netdev_mtu"), ("roce-03", "port.mlx5_2/1.active_mtu")}
    assert doc["outliers"][0]["pool"] == "roce" and doc["outliers"][0]["total"] == 5


def test_stdin_takes_json_lines_and_an_array(tmp_path):
    reps = _reports(tmp_path, odd=-1)
    as_lines = "".join(json.dumps(r) + "\n" for r in reps)
    assert exit_code(read_fleet(paths=["-"], stdin=io.StringIO(as_lines))) == 0
    res = read_fleet(paths=["-"], stdin=io.StringIO(json.dumps(reps)))
    assert res["pools"][0]["nodes"] == 5 and res["outliers"] == []


def test_compact_fingerprints_and_reports_compare_alike(tmp_path):
    reps = _reports(tmp_path)
    docs = []
    for r in reps:
        c = F.compact(r["fingerprint"])
        c["node"] = r["fingerprint"]["identity"]["hostname"]
        docs.append(c)
    res = read_fleet(paths=["-"], stdin=io.StringIO(json.dumps(docs)))
    assert {(o["node"], o["field"]) for o in res["outliers"]} == {("roce-03", "port.mlx5_2/1.netdev_mtu"), ("roce-03", "port.mlx5_2/1.active_mtu")}


def test_bundles_are_checked_and_fingerprinted(tmp_path):
    from rdmadoctor.examples import example_path

    res = read_fleet(paths=[example_path("hgx-h100-ib"), example_path("roce-node"), example_path("roce-node")])
    assert res["errors"] == []
    # The same node twice is one node (issue 32): two nodes, every differing field a tie.
    assert res["pools"][0]["nodes"] == 2 and res["outliers"] == [] and res["pools"][0]["undecided"]
    assert [s["node"] for s in res["set_aside"]] == ["roce-node-03"]


def test_what_cannot_be_read_is_named_and_undecided(tmp_path):
    _reports(tmp_path, odd=-1)
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "other.json").write_text('{"schema": "something/v1"}')
    code, out, err = run_cli(["fleet", str(tmp_path)])
    assert code == 2 and err == ""
    assert "bad.json: not JSON" in out and "other.json: not an rdmadoctor report" in out
    code, out, err = run_cli(["fleet", str(tmp_path / "missing.json")])
    assert code == 2 and "no such file" in out


def test_usage_errors():
    assert run_cli(["fleet"])[0] == 2
    code, _, err = run_cli(["fleet", "--prometheus", "localhost:9090"])
    assert code == 2 and "http://" in err
    code, _, err = run_cli(["fleet", "x.json", "--kube"])
    assert code == 2 and "one source" in err


def test_group_by_takes_a_label_of_the_reports(tmp_path):
    reps = _reports(tmp_path, odd=-1)
    for i, r in enumerate(reps):
        r["labels"]["rdmadoctor.io/rack"] = "r1" if i < 3 else "r2"
    res = read_fleet(paths=["-"], group_by="rdmadoctor.io/rack", stdin=io.StringIO(json.dumps(reps)))
    assert [(p["pool"], p["nodes"]) for p in res["pools"]] == [("r1", 3), ("r2", 2)]


def test_the_json_validates_against_the_shipped_schema(tmp_path):
    from importlib.resources import files

    import jsonschema

    schema = json.loads(files("rdmadoctor.output").joinpath("schema.json").read_text(encoding="utf-8"))
    _reports(tmp_path)
    (tmp_path / "bad.json").write_text("[1]")
    doc = json.loads(run_cli(["fleet", "--json", str(tmp_path)])[1])
    assert doc["outliers"] and doc["errors"]
    jsonschema.validate(doc, {"$defs": schema["$defs"], "$ref": "#/$defs/fleet"})


def test_a_generated_pool_checked_from_its_roots_names_the_odd_node(tmp_path, monkeypatch):
    from rdmadoctor.fixturegen import main as fixturegen_main

    monkeypatch.delenv("NODE_NAME", raising=False)
    assert fixturegen_main(["--pool", "3", "--odd", "1", "-o", str(tmp_path / "pool")]) == 0
    for name in ("gpu-000", "gpu-001", "gpu-002"):
        rep = check_json(["--root", str(tmp_path / "pool" / name), "--scope", "node"])[1]
        assert rep["fingerprint"]["identity"]["node"] == name  # the root's /etc/hostname, not this machine's
        (tmp_path / f"{name}.json").write_text(json.dumps(rep))
    res = read_fleet(paths=[str(tmp_path / f"gpu-00{i}.json") for i in range(3)])
    assert {(o["node"], o["field"]) for o in res["outliers"]} == {("gpu-001", f"port.mlx5_{d}/1.fw_ver") for d in range(4)}
    # In the DaemonSet the pod's hostname is the pod's name: $NODE_NAME (spec.nodeName) wins.
    monkeypatch.setenv("NODE_NAME", "k8s-node-9")
    rep = check_json(["--root", str(tmp_path / "pool" / "gpu-000"), "--scope", "node"])[1]
    assert rep["fingerprint"]["identity"]["node"] == "k8s-node-9"
