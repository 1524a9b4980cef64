"""`rdmadoctor label`: the example bundles through each publisher, exit codes, summary, --help.

Exit codes as `check` once the labels are published (0 healthy, 1 a problem, 2 unknown): the
broken-pod node has a port down, so 1 although its labels (ready=false) were published. A
publish that failed is 2: whether the node's labels say what the report says is unknown."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli
from kubeapi import MERGE, FakeKubeAPI

# broken-pod fails (IB_PORT_DOWN on one of ten ports, MEMLOCK_LIMITED, CAP_IPC_LOCK_MISSING,
# SHM_TOO_SMALL): the node still has 9 active IB ports, so it IS RDMA-capable, but not ready.
BROKEN_POD = [
    "feature.node.kubernetes.io/network-rdma.capable=true",
    "rdmadoctor.io/active-ports=9",
    "rdmadoctor.io/gpu-nic=PIX",
    "rdmadoctor.io/gpudirect=true",
    "rdmadoctor.io/link-layer=infiniband",
    "rdmadoctor.io/min-rate-gbps=400",
    "rdmadoctor.io/ready=false",
]
ROCE_NODE = [
    "feature.node.kubernetes.io/network-rdma.capable=true",
    "rdmadoctor.io/active-ports=4",
    "rdmadoctor.io/gpu-nic=PIX",
    "rdmadoctor.io/gpudirect=true",
    "rdmadoctor.io/link-layer=ethernet",
    "rdmadoctor.io/min-rate-gbps=200",
    "rdmadoctor.io/ready=true",
]


def test_stdout_broken_pod():
    code, out, err = run_cli(["label", "--example", "broken-pod", "--publish", "stdout"])
    assert code == 1, err
    assert out.splitlines() == BROKEN_POD
    assert err == "rdmadoctor: label: printed 7 labels (node status: fail)\n"


def test_stdout_roce_node():
    code, out, _ = run_cli(["label", "--example", "roce-node", "--publish", "stdout"])
    assert code == 0
    assert out.splitlines() == ROCE_NODE


def test_nfd_file_from_the_example(tmp_path):
    code, out, err = run_cli(["label", "--example", "broken-pod", "--publish", "nfd", "--features-dir", str(tmp_path)])
    assert code == 1, err
    assert out == ""
    lines = (tmp_path / "rdmadoctor").read_text().splitlines()
    assert lines[0].startswith("# +expiry-time=") and lines[0].endswith("Z")
    assert lines[1:] == BROKEN_POD
    assert err.startswith(f"rdmadoctor: label: wrote 7 labels to {tmp_path}/rdmadoctor (expiry ")
    # NFD is the default, and a second run changes nothing.
    code, _, err = run_cli(["label", "--example", "broken-pod", "--features-dir", str(tmp_path)])
    assert code == 1
    assert "unchanged (7 labels)" in err


def test_nfd_missing_dir_exit_2(tmp_path):
    # roce-node is healthy: exit 1 here would say "a problem" about a node that has none.
    code, out, err = run_cli(["label", "--example", "roce-node", "--features-dir", str(tmp_path / "nope")])
    assert code == 2
    assert "publishing failed" in err and str(tmp_path / "nope") in err and "hostPath" in err


def test_dry_run_writes_nothing(tmp_path):
    code, out, err = run_cli(["label", "--example", "roce-node", "--features-dir", str(tmp_path), "--dry-run"])
    assert code == 0
    assert list(tmp_path.iterdir()) == []
    assert out.splitlines()[2:] == ROCE_NODE
    assert "dry run" in err


def test_node_mode_against_the_fake_api(tmp_path):
    with FakeKubeAPI() as api:
        api.add_node("gpu-7", labels={"team": "ml"})
        kc = api.kubeconfig(tmp_path / "kc")
        args = ["label", "--example", "broken-pod", "--publish", "node", "--node", "gpu-7", "--kubeconfig", kc]
        code, out, err = run_cli(args)
        assert code == 1, err
        patches = api.writes()
        assert len(patches) == 1 and patches[0].content_type == MERGE
        labels = api.labels("gpu-7")
        assert labels["team"] == "ml"
        assert [f"{k}={v}" for k, v in sorted(labels.items()) if k != "team"] == BROKEN_POD
        assert "7 labels changed on node gpu-7" in err
        code, _, err = run_cli(args + ["--conditions"])
        assert code == 1
        conds = {c["type"]: c for c in api.conditions("gpu-7")}
        assert conds["RDMALinkProblem"]["status"] == "True"
        assert conds["RDMALinkProblem"]["reason"] == "IBPortDown"
        # `label` judges the node (scope node): the example pod's memlock is not a node problem.
        assert conds["RDMAConfigProblem"]["status"] == "False"
        assert conds["GPUDirectRDMAProblem"]["status"] == "False"
        api.fail_next(100, 403)
        code, _, err = run_cli(args)
        assert code == 2 and "403" in err


def test_node_name_from_env(tmp_path, monkeypatch):
    with FakeKubeAPI() as api:
        api.add_node("from-env")
        monkeypatch.setenv("NODE_NAME", "from-env")
        code, _, err = run_cli(["label", "--example", "roce-node", "--publish", "node", "--kubeconfig", api.kubeconfig(tmp_path / "kc")])
        assert code == 0, err
        assert api.labels("from-env")["rdmadoctor.io/ready"] == "true"


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--publish", "configmap"], "unknown --publish"),
        (["--publish", "node"], "NODE_NAME"),
        (["--prefix", "kubernetes.io/"], "reserved"),
        (["--expiry", "0"], "--expiry"),
        (["--example", "no-such-example", "--publish", "stdout"], "no-such-example"),
    ],
)
def test_usage_errors_exit_2(args, needle, monkeypatch):
    monkeypatch.delenv("NODE_NAME", raising=False)
    full = ["label", *args] if "--example" in args else ["label", "--example", "roce-node", *args]
    code, out, err = run_cli(full)
    assert code == 2, err
    assert needle in err and out == ""


def test_help_documents_the_contract():
    code, out, _ = run_cli(["label", "--help"])
    assert code == 0
    flat = " ".join(out.replace("│", " ").split())
    for opt in ("--root", "--bundle", "--example", "--profile", "--config", "--pool", "--publish", "--features-dir",
                "--expiry", "--node", "--kubeconfig", "--prefix", "--conditions", "--dry-run"):
        assert opt in flat, opt
    assert "extra-label-ns" in flat and "NODE_NAME" in flat and "rdmadoctor[k8s]" in flat


def test_stdout_prints_the_conditions_when_asked():
    """--conditions with --publish stdout used to be ignored: the conditions are printed, as
    '# condition' comments that keep the output a valid NFD feature file."""
    code, out, err = run_cli(["label", "--example", "broken-pod", "--publish", "stdout", "--conditions"])
    assert code == 1, err
    lines = out.splitlines()
    assert lines[: len(BROKEN_POD)] == BROKEN_POD
    conds = lines[len(BROKEN_POD):]
    assert [c.split(" ", 3)[2] for c in conds] == [
        "RDMALinkProblem=True", "RDMAConfigProblem=False", "GPUDirectRDMAProblem=False",
    ]
    assert all(c.startswith("# condition ") for c in conds)
    assert "reason=IBPortDown" in conds[0] and "IB_PORT_DOWN" in conds[0]
    assert "printed 7 labels and 3 conditions" in err
    # Without --conditions: the labels only.
    assert run_cli(["label", "--example", "broken-pod", "--publish", "stdout"])[1].splitlines() == BROKEN_POD


def test_exit_codes_follow_the_node_status():
    assert run_cli(["label", "--example", "roce-node", "--publish", "stdout"])[0] == 0
    assert run_cli(["label", "--example", "broken-pod", "--publish", "stdout"])[0] == 1


def test_labels_match_the_check_report():
    code, out, _ = run_cli(["check", "--example", "hgx-h100-ib", "--profile", "hgx-8gpu-ndr", "--json"])
    report_labels = json.loads(out)["labels"]
    code, out, _ = run_cli(["label", "--example", "hgx-h100-ib", "--profile", "hgx-8gpu-ndr", "--publish", "stdout"])
    assert code == 0
    assert out.splitlines() == sorted(f"{k}={v}" for k, v in report_labels.items())
