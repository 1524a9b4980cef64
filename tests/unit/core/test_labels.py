"""Labels, conditions and the report come from the report itself, for every check, third-party ones too."""

from __future__ import annotations

import calendar
import json
import os
import re
import subprocess
import sys
import time

import pytest
from conftest import ROOT, check_json, run_cli

from rdmadoctor.core import labels as L
from rdmadoctor.core.model import CONFIG, ERROR, INFORMATION, LINK, UNKNOWN, WARNING, Check, Code, Finding
from rdmadoctor.engine import execute as engine
from rdmadoctor.engine import registry
from rdmadoctor.engine import report as R
from rdmadoctor.host import mem_host
from rdmadoctor.output import conditions as C
from rdmadoctor.runner import Options, UsageError, diagnose

HGX = ["--example", "hgx-h100-ib", "--profile", "hgx-8gpu-ndr"]

# ---- a third-party check, installed the way pip installs one -----------------------------------

PLUGIN = '''
from rdmadoctor.core.model import Check, Code, Finding

SITE_FABRIC_BROKEN = Code(
    "SITE_FABRIC_BROKEN", "Site fabric rule broken", "The site's own fabric rule fails.", "Ask the fabric team.",
)
CHECKS = [
    Check(
        id="site.fabric",
        title="Site fabric rule",
        probe=lambda ctx: 1,
        judge=lambda facts, expect: [Finding("SITE_FABRIC_BROKEN", "error", "fabric", "seen broken, expected fine")],
        codes=(SITE_FABRIC_BROKEN,),
    ),
]
'''


@pytest.fixture
def plugin_path(tmp_path):
    """A directory holding a plugin module and its ``*.dist-info/entry_points.txt``, as pip leaves them."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitefabric.py").write_text(PLUGIN)
    dist = site / "sitefabric-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sitefabric\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[rdmadoctor.checks]\nfabric = sitefabric:CHECKS\n")
    return site


def _cli(args, pythonpath=None):
    env = {k: v for k, v in os.environ.items() if k not in ("RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD", "PYTHONPATH")}
    if pythonpath:
        env["PYTHONPATH"] = str(pythonpath)
    proc = subprocess.run(
        [sys.executable, "-m", "rdmadoctor", *args], capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=300
    )
    return proc.returncode, proc.stdout, proc.stderr


def _stdout_labels(out: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def test_a_failing_third_party_check_makes_the_node_not_ready(plugin_path):
    code, out, err = _cli(["check", *HGX, "--json"], plugin_path)
    rep = json.loads(out)
    checks = {c["id"]: c for c in rep["checks"]}
    assert checks["site.fabric"]["status"] == "fail", err
    assert rep["status"] == "fail" and code == 1
    assert rep["labels"][L.READY] == "false"
    # node.labels saw it too (it compares the same labels), and it still ran last.
    assert [c["id"] for c in rep["checks"]][-1] == "node.labels"
    assert "site.fabric" in checks["node.labels"]["findings"][0]["message"]

    code, out, err = _cli(["label", "--publish", "stdout", *HGX], plugin_path)
    assert code == 1, err  # the NPD contract: a problem exits 1, and ready=false is still published
    assert _stdout_labels(out)[L.READY] == "false"


def test_without_the_plugin_the_example_is_ready():
    code, out, err = _cli(["check", *HGX, "--json"])
    rep = json.loads(out)
    assert rep["status"] == "pass" and code == 0, err
    assert "site.fabric" not in {c["id"] for c in rep["checks"]}
    assert rep["labels"][L.READY] == "true"
    code, out, err = _cli(["label", "--publish", "stdout", *HGX])
    assert code == 0 and _stdout_labels(out)[L.READY] == "true", err


# ---- labels.compute: a pure function of the report dict ----------------------------------------


def port(n, state="ACTIVE", ll="InfiniBand", rate=400.0, **kw):
    return {"port": n, "state": state, "link_layer": ll, "rate_gbps": rate, **kw}


def dev(name, *ports, is_vf=False):
    return {"name": name, "is_vf": is_vf, "ports": list(ports)}


def report(devices=None, checks=(), source="sysfs", **inventory):
    inv = {"rdma_source": source, "rdma_devices": devices, **inventory}
    return {"checks": [{"id": i, "status": s, "findings": []} for i, s in checks], "inventory": inv}


def test_compute_from_a_report():
    rep = report(
        [dev("mlx5_0", port(1)), dev("mlx5_1", port(1, rate=200.0)), dev("mlx5_2", port(1, "DOWN", rate=None))],
        [("ib.ports", "warn"), ("limits.memlock", "pass"), ("roce.config", "skip")],
        gpudirect=True,
        topology={"gpus": ["GPU0", "GPU1", "GPU2"], "gpu_nic": [["PIX", "SYS"], ["SYS", "PXB"], ["PIX", "NODE"]]},
    )
    labels, notes, not_ready = L.compute(rep)
    assert labels == {
        L.RDMA_CAPABLE: "true",
        L.LINK_LAYER: "infiniband",
        L.ACTIVE_PORTS: "2",
        L.MIN_RATE_GBPS: "200",
        L.READY: "true",
        L.GPUDIRECT: "true",
        L.GPU_NIC: "PXB",
    }
    assert notes == [] and not_ready == []


def test_compute_not_ready_mixed_and_omissions():
    rep = report(
        [dev("mlx5_0", port(1, ll="Ethernet", rate=2.5)), dev("mlx5_1", port(1, "DOWN"))],
        [("ib.ports", "fail"), ("nccl.env", "unknown"), ("shm.size", "pass")],
        topology={"gpus": ["GPU0", "GPU1"], "gpu_nic": [["PIX"], ["weird"]]},
    )
    labels, notes, not_ready = L.compute(rep)
    assert labels[L.LINK_LAYER] == "mixed" and labels[L.MIN_RATE_GBPS] == "2"
    assert labels[L.READY] == "false" and not_ready == ["ib.ports", "nccl.env"]
    assert L.GPUDIRECT not in labels and L.GPU_NIC not in labels
    assert any("gpu-nic" in n for n in notes)
    none, notes, _ = L.compute(report([]))
    assert none == {L.RDMA_CAPABLE: "false", L.LINK_LAYER: "none", L.ACTIVE_PORTS: "0"}
    assert any("no ready label" in n for n in notes)
    unknown, _, _ = L.compute(report(None, [("x.y", "pass")]))
    assert unknown == {L.READY: "true"}
    assert L.compute(report([dev("mlx5_0", port(1))], source="none"))[0] == {}


def test_compute_leaves_out_vfs_ignored_ports_and_node_labels_itself():
    rep = report(
        [
            dev("mlx5_0", port(1), port(2, "DOWN", rate=None, ignored=True)),
            dev("mlx5_1", port(1, "DOWN", ll="Ethernet"), is_vf=True),
        ],
        [("ib.ports", "pass"), ("node.labels", "unknown"), ("site.fabric", "pass")],
    )
    labels, _, not_ready = L.compute(rep)
    assert labels[L.ACTIVE_PORTS] == "1" and labels[L.LINK_LAYER] == "infiniband" and labels[L.MIN_RATE_GBPS] == "400"
    # node.labels compares these very labels: its own status (an unreadable cmd/node.json) cannot flip them.
    assert labels[L.READY] == "true" and not_ready == []
    rep["checks"].append({"id": "site.fabric2", "status": "fail", "findings": []})
    assert L.compute(rep)[0][L.READY] == "false"


@pytest.mark.parametrize(
    "junk",
    [
        {},
        {"checks": None, "inventory": None},
        {"checks": [1, "x", {"id": "a"}], "inventory": {"rdma_devices": [1, {"ports": [3, {"state": 1}]}]}},
        {"inventory": {"rdma_devices": "mlx5_0", "topology": {"gpus": 3, "gpu_nic": "PIX"}, "gpudirect": "yes"}},
        {"inventory": {"topology": {"gpus": ["GPU0"], "gpu_nic": [[None, 5]]}, "rdma_devices": [{"ports": [{"rate_gbps": "fast", "state": "ACTIVE"}]}]}},
    ],
)
def test_compute_reads_odd_reports_without_crashing(junk):
    labels, notes, _ = L.compute(junk)
    good, refused = L.validate(labels)
    assert good == labels and refused == ()


def test_worst_nearest():
    assert L.worst_nearest(("PIX", "SYS", "PXB")) == "SYS"
    assert L.worst_nearest(("PIX", None)) is None
    assert L.worst_nearest(("PIX", "weird")) is None


# ---- the report ---------------------------------------------------------------------------------


def test_report_labels_are_computed_when_node_labels_does_not_run():
    code, rep = check_json([*HGX, "--skip", "node"])
    assert "node.labels" not in {c["id"] for c in rep["checks"]}
    assert rep["labels"][L.READY] == "true" and rep["labels"][L.ACTIVE_PORTS] == "10"


def test_node_labels_compares_the_labels_the_report_publishes():
    code, rep = check_json(["--example", "broken-pod"])
    (f,) = [c for c in rep["checks"] if c["id"] == "node.labels"][0]["findings"]
    shown = ", ".join(f"{k}={v}" for k, v in rep["labels"].items())
    assert shown in f["message"] and rep["labels"][L.READY] == "false"


def test_node_labels_compares_the_node_object_with_the_report_labels(tmp_path):
    import tarfile

    from rdmadoctor.examples import example_path

    with tarfile.open(example_path("hgx-h100-ib")) as tf:
        tf.extractall(tmp_path, **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))
    on_node = {"kubernetes.io/hostname": "gpu-node-7", L.RDMA_CAPABLE: "true", L.ACTIVE_PORTS: "8", L.GPU_NIC: "PIX"}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-node-7", "labels": on_node}}
    (tmp_path / "cmd/node.json").write_text(json.dumps(node))
    # Only the ib checks and node.labels: the labels follow what ran (no GPU facts: no gpu-nic).
    code, rep = check_json(["--bundle", str(tmp_path), "--profile", "hgx-8gpu-ndr", "--only", "ib,node"])
    (res,) = [c for c in rep["checks"] if c["id"] == "node.labels"]
    assert res["status"] == "warn"
    missing = {f["subject"]: f for f in res["findings"] if f["code"] == "NODE_LABEL_MISSING"}
    stale = {f["subject"]: f for f in res["findings"] if f["code"] == "NODE_LABEL_STALE"}
    assert set(missing) == {L.LINK_LAYER, L.MIN_RATE_GBPS, L.READY}
    assert missing[L.READY]["remedy"] == "kubectl label node gpu-node-7 rdmadoctor.io/ready=true --overwrite"
    assert set(stale) == {L.ACTIVE_PORTS, L.GPU_NIC}
    assert stale[L.ACTIVE_PORTS]["remedy"] == "kubectl label node gpu-node-7 rdmadoctor.io/active-ports=10 --overwrite"
    assert stale[L.GPU_NIC]["remedy"] == "kubectl label node gpu-node-7 rdmadoctor.io/gpu-nic-"
    # node.labels warns about the Node, not about this node's readiness.
    assert rep["labels"][L.READY] == "true" and rep["labels"][L.ACTIVE_PORTS] == "10"
    # In step: the node carries exactly the report's labels.
    node["metadata"]["labels"] = dict(rep["labels"])
    (tmp_path / "cmd/node.json").write_text(json.dumps(node))
    code, again = check_json(["--bundle", str(tmp_path), "--profile", "hgx-8gpu-ndr", "--only", "ib,node"])
    (res,) = [c for c in again["checks"] if c["id"] == "node.labels"]
    assert res["status"] == "pass" and "carries the report's 5 labels" in res["findings"][0]["message"]
    # An unreadable Node object makes node.labels unknown, and the labels it compares unchanged.
    (tmp_path / "cmd/node.json").write_text("{not json")
    code, bad = check_json(["--bundle", str(tmp_path), "--profile", "hgx-8gpu-ndr", "--only", "ib,node"])
    assert [c["status"] for c in bad["checks"] if c["id"] == "node.labels"] == ["unknown"]
    assert bad["labels"] == rep["labels"]


def test_ignored_ports_are_marked_and_not_counted():
    code, rep = check_json([*HGX, "--set", 'ignore_ports=["mlx5_0", "mlx5_1/1"]'])
    flags = {f"{d['name']}/{p['port']}": p["ignored"] for d in rep["inventory"]["rdma_devices"] for p in d["ports"]}
    assert flags["mlx5_0/1"] and flags["mlx5_1/1"] and not flags["mlx5_2/1"]
    assert rep["labels"][L.ACTIVE_PORTS] == "8"


def test_mark_ignored_rule():
    inv = {"rdma_devices": [dev("a", port(1), port(2)), dev("b", port(1), is_vf=True), dev("c", port(1, ignored=True))]}
    R.mark_ignored(inv, {"ignore_ports": ["a/2"], "ignore_vfs": True})
    assert [[p["ignored"] for p in d["ports"]] for d in inv["rdma_devices"]] == [[False, True], [True], [True]]
    inv = {"rdma_devices": [dev("b", port(1), is_vf=True)]}
    R.mark_ignored(inv, {"ignore_vfs": False})
    assert inv["rdma_devices"][0]["ports"][0]["ignored"] is False
    R.mark_ignored({"rdma_devices": None}, {})  # no devices known: nothing to mark


@pytest.mark.parametrize(
    "expect",
    [{}, {"ignore_vfs": False}, {"ignore_ports": ["a"]}, {"ignore_ports": ["a/2", "v/1"], "ignore_vfs": False}, {"ignore_ports": ["b/1"]}],
)
def test_mark_ignored_agrees_with_the_checks_rule(expect):
    # The report marks ports with the rule the checks judge by (checks/_rdma.ignored): one answer.
    from rdmadoctor.checks._rdma import ignored
    from rdmadoctor.core.facts import Port, RdmaDevice

    devices = [RdmaDevice("a", ports=(Port(1), Port(2))), RdmaDevice("b", ports=(Port(1),)), RdmaDevice("v", ports=(Port(1),), is_vf=True)]
    inv = {"rdma_devices": [dev(d.name, *(port(p.port) for p in d.ports), is_vf=d.is_vf) for d in devices]}
    R.mark_ignored(inv, expect)
    marked = [p["ignored"] for d in inv["rdma_devices"] for p in d["ports"]]
    assert marked == [ignored(d, p, expect) for d in devices for p in d.ports]


def test_report_has_an_rfc3339_utc_time():
    before = int(time.time())
    code, rep = check_json(HGX)
    after = time.time()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", rep["time"])
    stamp = calendar.timegm(time.strptime(rep["time"], "%Y-%m-%dT%H:%M:%SZ"))
    assert before <= stamp <= after
    assert R.rfc3339(0) == "1970-01-01T00:00:00Z"
    assert R.rfc3339(calendar.timegm((2026, 11, 23, 20, 31, 53, 0, 0, 0)) + 0.9) == "2026-11-23T20:31:53Z"
    assert rep["schema"] == "rdmadoctor.report/v1"


def _run(checks, expect=None):
    ctx = engine.Context(host=mem_host({}), expect=dict(expect or {}))
    results = engine.run(checks, ctx)
    return R.build(results, {c.id: c for c in checks}, ctx.host, ctx.expect)


KNOWN = Code("SITE_KNOWN", "t", "m", "f")
NOTE = Code("SITE_NOTE", "t", "m", "f", kind=INFORMATION)
GDR = Code("SITE_GDR", "t", "m", "f", condition="gpudirect")


def test_findings_carry_their_codes_kind_and_checks_their_condition():
    check = Check(
        id="site.x",
        title="x",
        probe=lambda ctx: 1,
        judge=lambda f, e: [
            Finding("SITE_KNOWN", ERROR, "s", "m"),
            Finding("SITE_NOTE", "info", "s", "m"),
            Finding("SITE_GDR", WARNING, "s", "m"),
            Finding("SITE_UNDECLARED", UNKNOWN, "s", "m"),
        ],
        codes=(KNOWN, NOTE, GDR),
        condition=CONFIG,
    )
    rep = _run([check])
    (c,) = rep["checks"]
    assert c["condition"] == "config"
    kinds = {f["code"]: f["kind"] for f in c["findings"]}
    assert kinds == {"SITE_KNOWN": "problem", "SITE_NOTE": "info", "SITE_GDR": "problem", "SITE_UNDECLARED": None}
    assert {f["code"]: f.get("condition") for f in c["findings"]} == {
        "SITE_KNOWN": None, "SITE_NOTE": None, "SITE_GDR": "gpudirect", "SITE_UNDECLARED": None,
    }
    conds = {x["type"]: x for x in C.compute(rep)}
    assert conds["RDMAConfigProblem"]["reason"] == "SiteKnown"
    assert conds["GPUDirectRDMAProblem"]["reason"] == "SiteGDR"
    assert conds["RDMALinkProblem"]["reason"] == "NotApplicable"


def test_a_third_party_check_that_declares_a_condition_feeds_it():
    down = Check(
        id="site.fabric", title="t", probe=lambda ctx: 1,
        judge=lambda f, e: [Finding("SITE_KNOWN", ERROR, "leaf7", "m")], codes=(KNOWN,), condition=LINK,
    )
    silent = Check(id="site.other", title="t", probe=lambda ctx: 1, judge=lambda f, e: [Finding("SITE_KNOWN", ERROR, "x", "m")], codes=(KNOWN,))
    conds = {x["type"]: x for x in C.compute(_run([down, silent]))}
    assert conds["RDMALinkProblem"]["status"] == "True" and "SITE_KNOWN (leaf7)" in conds["RDMALinkProblem"]["message"]
    # no condition declared: it feeds none
    assert conds["RDMAConfigProblem"]["reason"] == "NotApplicable"


def test_conditions_follow_the_report_not_the_check_id():
    # The report says which condition a check feeds: an id the old family lists would put in
    # "config" feeds "link" here, and a gpu.* id that declares none feeds nothing.
    rep = {"checks": [
        {"id": "limits.fabric", "status": "fail", "condition": "link", "findings": [{"code": "X_DOWN", "severity": "error", "subject": "a"}]},
        {"id": "gpu.extra", "status": "fail", "condition": None, "findings": [{"code": "Y_BAD", "severity": "error", "subject": "b"}]},
    ]}
    conds = {x["type"]: x for x in C.compute(rep)}
    assert conds["RDMALinkProblem"]["reason"] == "XDown"
    assert conds["RDMAConfigProblem"]["reason"] == "NotApplicable"
    assert conds["GPUDirectRDMAProblem"]["reason"] == "NotApplicable"


def test_conditions_of_the_examples_use_the_declarations():
    code, rep = check_json(["--example", "broken-pod"])
    conds = {x["type"]: x for x in C.compute(rep)}
    assert conds["RDMALinkProblem"]["status"] == "True" and conds["RDMAConfigProblem"]["status"] == "True"
    # the same report without checks[].condition is read with the installed checks' declarations
    bare = {"checks": [{k: v for k, v in c.items() if k != "condition"} for c in rep["checks"]]}
    for f in (f for c in bare["checks"] for f in c["findings"]):
        f.pop("condition", None)
    assert C.compute(bare) == C.compute(rep)


# ---- order: "*" is after every other check -----------------------------------------------------


def _check(cid, **kw):
    return Check(id=cid, title=cid, probe=lambda ctx: 1, judge=lambda f, e: [], **kw)


def test_star_runs_after_every_other_check_third_party_included():
    checks = [_check("node.labels", after=("*",)), _check("ib.ports"), _check("site.z", after=("ib.ports",)), _check("site.a")]
    assert [c.id for c in engine.order_checks(checks)] == ["ib.ports", "site.z", "site.a", "node.labels"]
    two = [_check("x.last", after=("*", "x.late")), _check("x.late", after=("*",)), _check("a.b")]
    assert [c.id for c in engine.order_checks(two)] == ["a.b", "x.late", "x.last"]


def test_node_labels_runs_last_among_the_installed_checks():
    checks, errors = registry.load_checks(autoload=False)
    node = next(c for c in checks if c.id == "node.labels")
    assert "*" in node.after  # and after logs.diagnose, the other check that runs after every other
    ordered = [c.id for c in engine.order_checks(list(reversed(checks)) + [_check("site.late")])]
    assert ordered[-1] == "node.labels"


def test_partial_report_is_the_report_of_what_ran_so_far():
    seen = []
    a = Check(id="a.a", title="a", probe=lambda ctx: 1, judge=lambda f, e: [Finding("A_BAD", ERROR, "s", "m")])
    b = Check(id="b.b", title="b", probe=lambda ctx: seen.append(ctx.partial_report()) or 1, judge=lambda f, e: [], after=("*",))
    ctx = engine.Context(host=mem_host({}), expect={})
    engine.run([b, a], ctx)
    (rep,) = seen
    assert [c["id"] for c in rep["checks"]] == ["a.a"] and rep["labels"][L.READY] == "false"


# ---- selection ----------------------------------------------------------------------------------


def test_selecting_no_check_is_a_usage_error():
    with pytest.raises(UsageError) as e:
        diagnose(Options(example="hgx-h100-ib", only=["ib"], skip=["ib"]))
    assert "no check left to run" in str(e.value) and "--only ib" in str(e.value) and e.value.hint
    code, out, err = run_cli(["check", "--example", "hgx-h100-ib", "--only", "ib", "--skip", "ib"])
    assert code == 2 and out == ""
    assert err.startswith("rdmadoctor: error: no check left to run") and "hint:" in err


def test_gate_only_selects_the_checks_that_declare_gate():
    checks, _ = registry.load_checks(autoload=False)
    gates = {c.id for c in checks if c.gate}
    diag = diagnose(Options(example="hgx-h100-ib", gate_only=True))
    assert {c["id"] for c in diag.report["checks"]} == gates
    assert "node.labels" not in gates and "pci.link" not in gates and "ib.ports" in gates
    diag = diagnose(Options(example="hgx-h100-ib", gate_only=True, skip=["ib"]))
    assert {c["id"] for c in diag.report["checks"]} == {g for g in gates if not g.startswith("ib.")}
    with pytest.raises(UsageError, match="the checks preflight gates on"):
        diagnose(Options(example="hgx-h100-ib", gate_only=True, only=["pci.link"]))


def test_runner_imports_nothing_from_cli():
    code = (
        "import sys; from rdmadoctor.runner import Options, diagnose; "
        "diagnose(Options(example='hgx-h100-ib')); "
        "print(sorted(m for m in sys.modules if m.startswith('rdmadoctor.cli')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT), timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
