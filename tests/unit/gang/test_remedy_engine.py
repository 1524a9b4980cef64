"""The gang's remedies speak the words of the engine that runs the job: a nodeAffinity on Kubernetes,
sbatch's --exclude and scontrol under Slurm, both (labelled) when it is not known."""

from __future__ import annotations

import yaml

from rdmadoctor.gang import compare as C
from rdmadoctor.gang.membership import engine_of


def _members() -> list[dict]:
    ib = {"transport": "rdma", "link_layer": "InfiniBand"}
    members = [{"rank": r, "host": f"gpu-node-{r}", "verdict": "go", "facts": dict(ib)} for r in range(4)]
    members[3]["facts"]["link_layer"] = "Ethernet"
    return members


def _remedy(engine: str) -> str:
    gang = C.judge(_members(), 4, engine=engine)
    (p,) = [p for p in gang["problems"] if p["code"] == "GANG_MISMATCH_HANG"]
    return p["remedy"]


def _affinity_values(text: str) -> list[str]:
    doc = yaml.safe_load(text)
    term = doc["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    (expr,) = term["matchExpressions"]
    assert expr["key"] == "kubernetes.io/hostname" and expr["operator"] == "NotIn"
    return expr["values"]


def test_the_engine_is_read_from_the_environment():
    assert engine_of({}) == "unknown"
    assert engine_of({"KUBERNETES_SERVICE_HOST": "10.96.0.1"}) == "kubernetes"
    for name in ("SLURM_JOB_ID", "SLURMD_NODENAME", "SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        assert engine_of({name: "7"}) == "slurm", name
    # slurmd in a pod (Slinky): Slurm places the job, so Slurm's words.
    assert engine_of({"SLURM_JOB_ID": "7", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}) == "slurm"
    assert engine_of({"SLURM_JOB_ID": " "}) == "unknown"


def test_kubernetes_gets_the_node_affinity_and_nothing_of_slurm():
    remedy = _remedy("kubernetes")
    assert "Slurm" not in remedy and "sbatch" not in remedy and "scontrol" not in remedy and "--exclude" not in remedy
    assert _affinity_values(remedy[remedy.index("affinity:"):]) == ["gpu-node-3"]
    assert remedy.startswith("run the job on one fabric")


def test_slurm_gets_sbatch_exclude_and_scontrol_and_no_yaml():
    remedy = _remedy("slurm")
    assert "affinity" not in remedy and "kubernetes" not in remedy.lower().replace("rdmadoctor.io", "")
    lines = remedy.splitlines()
    assert lines[1] == ("Exclude the node from the job: sbatch --exclude=gpu-node-3 (or `#SBATCH --exclude=gpu-node-3` "
                        "in the script; srun and salloc take it too)")
    # The drain reason is the reader's own (not rdmadoctor:), so rdmadoctor never resumes it.
    assert lines[2] == ('Keep every job off it until it is fixed: scontrol update nodename=gpu-node-3 state=drain '
                        'reason="GANG_MISMATCH_HANG gang: see the job log"; once fixed: '
                        'scontrol update nodename=gpu-node-3 state=resume')
    assert C.excluded(remedy) == ["gpu-node-3"]
    assert lines[0].startswith("run the job on one fabric: exclude the odd node, or select nodes by feature "
                               "(`sbatch --constraint=ib`")


def test_an_unknown_engine_gets_both_labelled():
    remedy = _remedy("unknown")
    assert "On Kubernetes, in the pod template:" in remedy and "\nUnder Slurm: sbatch --exclude=gpu-node-3 " in remedy
    assert _affinity_values(remedy[remedy.index("affinity:"):remedy.index("Under Slurm:")]) == ["gpu-node-3"]
    assert "scontrol update nodename=gpu-node-3 state=drain" in remedy
    # The default is the unknown engine: a caller that does not know says both.
    assert C.exclusion(["gpu-node-3"]) == C.exclusion(["gpu-node-3"], "unknown")


def test_every_gang_remedy_follows_the_engine():
    members = _members()
    members[1]["verdict"] = "no-go"
    slow = [{"rank": 2, "host": "gpu-node-2", "gbps": 40.0, "median_gbps": 380.0, "share": 0.7}]
    for engine, present, absent in (("slurm", "sbatch --exclude=", "nodeAffinity"),
                                    ("kubernetes", "nodeAffinity", "--exclude")):
        gang = C.judge(members, 4, slow=slow, engine=engine)
        remedies = {p["code"]: p["remedy"] for p in gang["problems"]}
        assert set(remedies) == {"GANG_MISMATCH_HANG", "GANG_MEMBER_NO_GO", "GANG_MEMBER_SLOW"}
        for code, remedy in remedies.items():
            assert present in remedy and absent not in remedy, (engine, code, remedy)


def test_names_a_shell_would_misread_stay_out_of_the_slurm_lines():
    remedy = C.exclusion(["gpu-node-3", "$(reboot)"], "slurm")
    assert "sbatch --exclude=gpu-node-3 " in remedy and "nodename=gpu-node-3 " in remedy
    assert "reboot" not in remedy and "1 name left out of the shell lines" in remedy
    assert "--exclude=NODE" in C.exclusion(["$(reboot)"], "slurm")


def test_the_drained_note_replaces_the_advice_to_drain():
    remedy = _remedy("slurm")
    reason = "rdmadoctor: GANG_MISMATCH_HANG link_layer Ethernet, the other 3 InfiniBand (job 12)"
    marked = C.drained_note(remedy, "gpu-node-3", reason)
    assert "Keep every job off it" not in marked
    assert f'rdmadoctor drained gpu-node-3 in its Prolog (reason "{reason}") and Slurm requeues the job' in marked
    assert "scontrol update nodename=gpu-node-3 state=resume" in marked
    assert "sbatch --exclude=gpu-node-3" in marked  # still how to keep a resubmitted job off it
    # A gang's drain is resumed by `slurm health` only where the node's own checks can vouch for it.
    assert "resumes it only where the node's own checks vouch for what the gang blamed" in marked
    # Two nodes in one remedy: the advice stays for the other, the note is added.
    both = C.exclusion(["a1", "b2"], "slurm", "GANG_MISMATCH_HANG")
    marked = C.drained_note(both, "a1", "rdmadoctor: X")
    assert "Keep every job off it until it is fixed: scontrol update nodename=a1,b2" in marked
    assert marked.endswith("the reason is rdmadoctor's)") and "rdmadoctor drained a1 in its Prolog" in marked
