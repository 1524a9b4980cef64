"""The fleet on the Kubernetes API: the agent's fingerprint annotation on its own Node (direct
mode: written with the labels, only when it changed, size-bounded, allowed by the admission
policy) and `rdmadoctor fleet --kube` over a paginated list of 2,000 Nodes."""

from __future__ import annotations

import copy
import json

from contract.test_deploy import _change, evaluate

from rdmadoctor.engine import fingerprint as F
from tests.conftest import check_json, run_cli
from tests.kubeapi import FakeKubeAPI

ANNOTATION = "rdmadoctor.io/fingerprint"


def test_direct_mode_writes_the_fingerprint_annotation_only_when_it_changes(tmp_path):
    with FakeKubeAPI() as api:
        api.add_node("gpu-7", labels={"team": "ml"})
        args = ["label", "--example", "roce-node", "--publish", "node", "--node", "gpu-7", "--kubeconfig", api.kubeconfig(tmp_path / "kc")]
        code, _, err = run_cli(args)
        assert code == 0, err
        text = api.annotations("gpu-7")[ANNOTATION]
        doc = json.loads(text)
        assert doc["s"] == F.COMPACT_SCHEMA and len(text) <= F.COMPACT_MAX_BYTES
        rep = check_json(["--example", "roce-node", "--scope", "node"])[1]
        assert F.flatten(doc) == F.flatten(rep["fingerprint"])
        api.clear()
        code, _, err = run_cli(args)  # nothing changed: no write at all
        assert code == 0 and api.writes() == [] and "unchanged" in err
        # A node whose annotation is stale (another firmware then) gets only the annotation.
        api.nodes["gpu-7"]["metadata"]["annotations"][ANNOTATION] = text.replace("28.39.2048", "28.35.1012")
        api.clear()
        code, _, err = run_cli(args)
        writes = api.writes()
        assert code == 0 and len(writes) == 1
        assert writes[0].body == {"metadata": {"annotations": {ANNOTATION: text}}}


def test_the_admission_policy_allows_the_fingerprint_and_no_other_new_annotation():
    text = F.compact_text(F.compact(check_json(["--example", "hgx-h100-ib"])[1]["fingerprint"]))
    assert evaluate(*_change(lambda n: n["metadata"]["annotations"].__setitem__(ANNOTATION, text))).allowed
    v = evaluate(*_change(lambda n: n["metadata"]["annotations"].__setitem__("rdmadoctor.io/anything", "x")))
    assert not v.allowed and any("only its annotations" in d for d in v.denied)
    v = evaluate(*_change(lambda n: n["metadata"]["annotations"].__setitem__(ANNOTATION, "x" * 20000)))
    assert not v.allowed and any("16 KiB" in d for d in v.denied)


def test_fleet_kube_reads_2000_nodes_over_several_pages(tmp_path):
    rep = check_json(["--example", "hgx-h100-ib", "--scope", "node"])[1]
    plain = F.compact(rep["fingerprint"])
    odd = copy.deepcopy(plain)
    odd["c"]["fw_ver"] = "28.41.1000"
    odd_nodes = {f"gpu-{i:04d}" for i in (17, 1203, 1999)}
    with FakeKubeAPI() as api:
        for i in range(2000):
            name = f"gpu-{i:04d}"
            pool = "hgx-a" if i < 1500 else "hgx-b"
            annotations = {} if i == 5 else {ANNOTATION: F.compact_text(odd if name in odd_nodes else plain)}
            api.add_node(name, labels={"kubernetes.io/hostname": name, "rdmadoctor.io/pool": pool}, annotations=annotations)
        kc = api.kubeconfig(tmp_path / "kc")
        code, out, err = run_cli(["fleet", "--kube", "--kubeconfig", kc, "--group-by", "rdmadoctor.io/pool", "--json"])
        assert code == 1, err
        res = json.loads(out)
        assert api.list_pages == 4  # 500 a page
        assert [(p["pool"], p["nodes"]) for p in res["pools"]] == [("hgx-a", 1499), ("hgx-b", 500)]
        assert {o["node"] for o in res["outliers"]} == odd_nodes
        assert {o["field"].rsplit(".", 1)[1] for o in res["outliers"]} == {"fw_ver"}
        o = next(o for o in res["outliers"] if o["node"] == "gpu-0017" and o["field"] == "port.mlx5_0/1.fw_ver")
        assert (o["value"], o["majority"], o["majority_count"], o["total"]) == ("28.41.1000", "28.39.2048", 1497, 1499)


def test_fleet_kube_without_any_annotation_cannot_decide(tmp_path):
    with FakeKubeAPI() as api:
        api.add_node("gpu-1")
        code, out, err = run_cli(["fleet", "--kube", "--kubeconfig", api.kubeconfig(tmp_path / "kc")])
        assert code == 2 and "direct mode" in out
        api.fail_next(10, 403)
        code, out, err = run_cli(["fleet", "--kube", "--kubeconfig", api.kubeconfig(tmp_path / "kc")])
        assert code == 2 and "listing the Nodes" in err


def _fleet_of(api, n: int) -> None:
    text = F.compact_text(F.compact(check_json(["--example", "hgx-h100-ib", "--scope", "node"])[1]["fingerprint"]))
    for i in range(n):
        api.add_node(f"gpu-{i:04d}", labels={"rdmadoctor.io/pool": "hgx"}, annotations={ANNOTATION: text})


def test_fleet_kube_starts_a_listing_cut_by_an_outage_again_and_reads_each_node_once(tmp_path, monkeypatch):
    """A 503 on the second page, then a 410 (the continue token expired) on a later one: the
    listing starts again after a backoff each time, and every Node is counted once."""
    import rdmadoctor.fleet as fleet

    waits: list[float] = []
    monkeypatch.setattr(fleet, "_sleep", waits.append)
    with FakeKubeAPI() as api:
        _fleet_of(api, 1200)
        kc = api.kubeconfig(tmp_path / "kc")
        api.slow_next(1, 0.0)  # the first page is answered
        api.fail_next(1, 503)  # the second is not
        api.slow_next(2, 0.0)  # started again: pages 1 and 2 answered,
        api.fail_next(1, 410)  # page 3 gone
        code, out, err = run_cli(["fleet", "--kube", "--kubeconfig", kc, "--group-by", "rdmadoctor.io/pool", "--json"])
        assert code == 0, (out, err)
        res = json.loads(out)
        assert [(p["pool"], p["nodes"]) for p in res["pools"]] == [("hgx", 1200)] and res["errors"] == []
        assert waits == [1.0, 2.0]
        assert api.list_pages == 1 + 2 + 3  # three starts: one page, two pages, the whole list


def test_fleet_kube_waits_what_retry_after_asks_and_gives_up_after_three_starts(tmp_path, monkeypatch):
    import rdmadoctor.fleet as fleet

    waits: list[float] = []
    monkeypatch.setattr(fleet, "_sleep", waits.append)
    with FakeKubeAPI() as api:
        _fleet_of(api, 3)
        kc = api.kubeconfig(tmp_path / "kc")
        api.respond_next(1, 429, b'{"kind":"Status","code":429,"message":"slow down"}',
                         {"Content-Type": "application/json", "Retry-After": "7"})
        code, out, err = run_cli(["fleet", "--kube", "--kubeconfig", kc, "--json"])
        assert code == 0, err
        assert waits == [7.0]
        waits.clear()
        api.fail_next(50, 503)
        code, out, err = run_cli(["fleet", "--kube", "--kubeconfig", kc])
        assert code == 2 and "listing the Nodes" in err and "3 attempts" in err and "0 Nodes were read" in err, err
        assert waits == [1.0, 2.0]
        waits.clear()
        api.clear_faults()
        api.fail_next(5, 403)  # a refusal is not an outage: no second start
        code, out, err = run_cli(["fleet", "--kube", "--kubeconfig", kc])
        assert code == 2 and "403" in err and waits == []


# ---- issue 33, item 3: real pages, and servers that page for ever -------------------------------
def _realistic_fleet(api, n: int) -> None:
    from tests.kubeapi import realistic_status

    text = F.compact_text(F.compact(check_json(["--example", "hgx-h100-ib", "--scope", "node"])[1]["fingerprint"]))
    for i in range(n):
        api.add_node(f"gpu-{i:04d}", labels={"rdmadoctor.io/pool": "hgx"}, annotations={ANNOTATION: text},
                     status=realistic_status(i))


def test_fleet_kube_reads_a_page_of_500_realistic_nodes_past_the_one_object_cap(tmp_path):
    from rdmadoctor.publish.kube import MAX_ANSWER_BYTES

    with FakeKubeAPI() as api:
        _realistic_fleet(api, 500)
        page = json.dumps({"items": list(api.nodes.values())})
        assert len(page) > MAX_ANSWER_BYTES  # what failed: one page over the 4 MiB meant for one Node
        code, out, err = run_cli(["fleet", "--kube", "--kubeconfig", api.kubeconfig(tmp_path / "kc"), "--json",
                                  "--group-by", "rdmadoctor.io/pool"])
        assert code == 0, err
        res = json.loads(out)
        assert [(p["pool"], p["nodes"]) for p in res["pools"]] == [("hgx", 500)] and res["errors"] == []
        assert api.list_limits == [500]


def test_fleet_kube_asks_smaller_pages_when_a_page_is_over_its_cap(tmp_path, monkeypatch):
    import rdmadoctor.publish.nodeapi as K

    monkeypatch.setattr(K, "MAX_PAGE_BYTES", 2 << 20)  # 500 realistic Nodes are ~6 MB: 125 fit
    with FakeKubeAPI() as api:
        _realistic_fleet(api, 600)
        code, out, err = run_cli(["fleet", "--kube", "--kubeconfig", api.kubeconfig(tmp_path / "kc"), "--json",
                                  "--group-by", "rdmadoctor.io/pool"])
        assert code == 0, err
        assert [(p["pool"], p["nodes"]) for p in json.loads(out)["pools"]] == [("hgx", 600)]
        assert api.list_limits[:3] == [500, 250, 125] and set(api.list_limits[3:]) == {125}
        # Each smaller page was asked at the same place: every Node once, none skipped.
        assert sum(1 for r in api.requests if r.method == "GET") == len(api.list_limits)


def test_fleet_kube_stops_at_a_continue_token_it_has_seen(tmp_path):
    with FakeKubeAPI() as api:
        _fleet_of(api, 30)
        api.list_fault = "repeat"
        code, out, err = run_cli(["fleet", "--kube", "--kubeconfig", api.kubeconfig(tmp_path / "kc")])
        assert code == 2 and "continue token it had already given" in err and "Traceback" not in err, err
        assert api.list_pages == 2  # the first page, and the one that repeated its token


def test_fleet_kube_bounds_the_pages_and_nodes_of_a_listing_that_never_ends(tmp_path, monkeypatch):
    import rdmadoctor.publish.nodeapi as K

    monkeypatch.setattr(K, "MAX_LIST_PAGES", 40)
    with FakeKubeAPI() as api:
        _fleet_of(api, 3)
        api.list_fault = "endless"  # a new token every page, the same Nodes again
        kc = api.kubeconfig(tmp_path / "kc")
        code, out, err = run_cli(["fleet", "--kube", "--kubeconfig", kc])
        assert code == 2 and "40 pages" in err and api.list_pages == 40, (err, api.list_pages)
        monkeypatch.setattr(K, "MAX_LIST_PAGES", 2000)
        monkeypatch.setattr(K, "MAX_LIST_NODES", 100)
        code, out, err = run_cli(["fleet", "--kube", "--kubeconfig", kc])
        assert code == 2 and "more than 100 Nodes" in err and api.list_pages <= 40 + 35, (err, api.list_pages)
