"""`rdmadoctor slurm health` and `slurm prolog --gang` against a real Slurm (tests/slurm_cluster.py:
Debian's slurmctld and five slurmd on this machine, their own munged, started and stopped here).

Each fake node's facts are a shipped example: the tests pass `--example` to `slurm health`, and
the Prolog wrapper reads `facts/<node>` (hgx-h100-ib: InfiniBand, healthy; roce-node: Ethernet,
healthy on its own; broken-pod: a port down). Skipped, saying why, when not root or Slurm is not
installed (scripts/test.sh installs it as root)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from slurm_cluster import SlurmCluster, free_ports, unavailable, wait_for

pytestmark = [pytest.mark.real]

WHY = unavailable()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if WHY:
        pytest.skip(WHY)
    base = tmp_path_factory.mktemp("slurm")
    base.chmod(0o755)
    c = SlurmCluster(base)
    (gang_port,) = free_ports(1)
    prolog = f"""#!/bin/sh
# slurmd gives the Prolog no PATH; the facts of this fake node are a shipped example.
export PATH=/usr/bin:/usr/sbin:/bin
facts=$(cat {base}/facts/$SLURMD_NODENAME)
exec {sys.executable} -m rdmadoctor slurm prolog --gang --example "$facts" --gang-port {gang_port} \\
    --gang-timeout 60 --report-file {base}/prolog.$SLURMD_NODENAME.$SLURM_JOB_ID.json \\
    >> {base}/log/prolog.$SLURMD_NODENAME.log 2>&1
"""
    health = f"""#!/bin/sh
export PATH=/usr/bin:/usr/sbin:/bin
exec {sys.executable} -m rdmadoctor slurm health --example "$(cat {base}/facts/$SLURMD_NODENAME)" \\
    --state-dir {base}/state-health >> {base}/log/health.$SLURMD_NODENAME.log 2>&1
"""
    c.write(prolog, health)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def health(c: SlurmCluster, node: str, example: str, *more: str, state: str = "hs"):
    return c.rdmadoctor(["slurm", "health", "--example", example, "--state-dir", str(c.base / state),
                         "--set", "quarantine_after=1", "--set", "release_after=1", *more], node=node)


def test_health_drains_resumes_and_never_touches_another_drain(cluster):
    c = cluster
    c.reset()
    # A broken node: drained, the reason starts rdmadoctor: and names the root code first.
    r = health(c, "n1", "broken-pod")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "DRAIN" in c.state("n1"), c.node("n1")
    assert c.reason("n1").startswith("rdmadoctor: IB_PORT_DOWN "), c.reason("n1")
    # Healthy again: resumed.
    r = health(c, "n1", "hgx-h100-ib")
    assert r.returncode == 0, r.stdout + r.stderr
    assert not c.drained("n1") and "resumed" in r.stdout
    # An administrator's drain: a healthy run never resumes it, a broken one never rewrites it.
    c.run(["scontrol", "update", "nodename=n2", "state=drain", "reason=admin: DIMM B3 replaced, burn-in"])
    for example in ("hgx-h100-ib", "broken-pod"):
        r = health(c, "n2", example, state="admin")  # its own state dir: n2 failing is no storm for n1 below
        assert r.returncode in (0, 1), r.stdout + r.stderr
        assert c.drained("n2") and c.reason("n2") == "admin: DIMM B3 replaced, burn-in", (example, c.node("n2"))
    # A usage error changes nothing: n1 drained by rdmadoctor stays drained, n3 idle stays idle.
    assert health(c, "n1", "broken-pod").returncode == 1
    before = c.reason("n1")
    for node, args in (("n1", ["--set", "quarantine_budget=lots"]), ("n1", ["--unknown", "maybe"]),
                       ("n3", ["--set", "no_such_key=1"]), ("n3", ["--config", str(c.base / "missing.toml")])):
        r = health(c, node, "hgx-h100-ib" if node == "n1" else "broken-pod", *args)
        assert r.returncode == 2 and "error" in r.stderr, (args, r.stdout, r.stderr)
    assert c.reason("n1") == before and c.drained("n1")
    assert not c.drained("n3")
    c.reset()


def test_budget_and_storm_count_the_partition(cluster):
    c = cluster
    c.reset()
    # Budget 1: the first broken node is drained, the second waits for a place.
    args = ("--set", "quarantine_budget=1", "--set", "storm_share=1")
    assert health(c, "n4", "broken-pod", *args, state="budget").returncode == 1
    assert c.reason("n4").startswith("rdmadoctor: IB_PORT_DOWN")
    r = health(c, "n5", "broken-pod", *args, state="budget")
    assert "defer-budget" in r.stdout and "budget is spent: 1 of 5" in r.stdout, r.stdout
    assert not c.drained("n5")
    # A storm: with a shared state dir, 2 of 5 failing is more than 30%: no new drain.
    c.reset()
    args = ("--set", "quarantine_budget=5", "--set", "storm_share=0.3")
    assert health(c, "n4", "broken-pod", *args, state="storm").returncode == 1
    assert c.drained("n4")
    r = health(c, "n5", "broken-pod", *args, state="storm")
    assert "defer-storm" in r.stdout and "2 of 5" in r.stdout and "IB_PORT_DOWN" in r.stdout, r.stdout
    assert not c.drained("n5")
    c.reset()


def test_storm_counts_slurms_record_without_a_shared_state_dir(cluster):
    """Each node keeps its own --state-dir, as on nodes without a shared file system: n4's drain
    is seen in Slurm's record (its reason starts rdmadoctor:), so n5 failing too is a storm."""
    c = cluster
    c.reset()
    args = ("--set", "quarantine_budget=5", "--set", "storm_share=0.3")
    assert health(c, "n4", "broken-pod", *args, state="own-n4").returncode == 1
    assert c.drained("n4") and c.reason("n4").startswith("rdmadoctor: IB_PORT_DOWN")
    r = health(c, "n5", "broken-pod", *args, state="own-n5")
    assert "defer-storm" in r.stdout and "2 of 5" in r.stdout, r.stdout
    assert "failing: n4 (rdmadoctor's drain in Slurm), n5 (this run)" in r.stdout, r.stdout
    assert not c.drained("n5")
    # An administrator's drain is not rdmadoctor's record: with n4 resumed, n5 alone is no storm.
    c.run(["scontrol", "update", "nodename=n4", "state=resume"])
    c.run(["scontrol", "update", "nodename=n3", "state=drain", "reason=admin: burn-in"])
    r = health(c, "n5", "broken-pod", *args, state="own-n5")
    assert c.drained("n5") and c.reason("n5").startswith("rdmadoctor: IB_PORT_DOWN"), r.stdout
    c.reset()


def test_health_features_follow_the_checks(cluster):
    c = cluster
    c.reset("n1")
    assert health(c, "n1", "hgx-h100-ib", "--features", state="features").returncode == 0
    assert set(c.node("n1")["ActiveFeatures"].split(",")) == {"rdma", "ib", "rdma_ready"}, c.node("n1")
    health(c, "n1", "roce-node", "--features", state="features")
    assert set(c.node("n1")["ActiveFeatures"].split(",")) == {"rdma", "roce", "rdma_ready"}, c.node("n1")
    r = health(c, "n1", "broken-pod", "--features", "--set", "quarantine_budget=0", state="features")
    assert "rdma_ready" not in c.node("n1")["ActiveFeatures"] and not c.drained("n1"), r.stdout
    c.reset("n1")


def _job(c: SlurmCluster, name: str, *sbatch: str) -> tuple[str, Path]:
    """Submit a four-node batch job with --requeue whose step must reach all four nodes; the
    file it returns gets one line from the run that got that far."""
    result = c.base / f"{name}.out"
    script = c.base / f"{name}.sh"
    script.write_text(f"""#!/bin/sh
set -e
srun -N4 true
echo "$SLURM_JOB_NODELIST restarts=${{SLURM_RESTART_COUNT:-0}}" >> {result}
""")
    r = c.run(["sbatch", "--requeue", "-N4", *sbatch, "-o", str(c.base / f"{name}.%j.log"), str(script)])
    return r.stdout.split()[-1], result


def _wait_done(c: SlurmCluster, job: str, result: Path, timeout: float) -> None:
    def finished():
        text = c.run(["scontrol", "show", "job", job]).stdout
        return "JobState=COMPLETED" in text and result.exists() and result.read_text().strip()

    try:
        wait_for(finished, timeout=timeout, interval=1, what=f"job {job} to complete")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{c.run(['scontrol', 'show', 'job', job]).stdout}\n{c.logs()}") from None


def test_prolog_gang_split_two_two_drains_nobody(cluster):
    c = cluster
    c.reset()
    c.set_facts("n3", "roce-node")
    c.set_facts("n4", "roce-node")
    job, result = _job(c, "split", "--nodelist=n[1-4]")
    _wait_done(c, job, result, 120)
    assert [n for n in ("n1", "n2", "n3", "n4", "n5") if c.drained(n)] == []
    assert result.read_text().split() == ["n[1-4]", "restarts=0"]
    log = (c.base / "log" / "prolog.n1.log").read_text()
    assert "no member to blame" in log and "GANG_MISMATCH_HANG" in log, log[-2000:]
    c.reset()


def test_prolog_gang_drains_only_the_odd_node_and_the_job_runs_on_the_others(cluster):
    c = cluster
    c.reset()
    c.set_facts("n3", "roce-node")  # Ethernet among InfiniBand: the odd member
    job, result = _job(c, "gang-job")
    _wait_done(c, job, result, 240)
    assert c.reason("n3") == f"rdmadoctor: GANG_MISMATCH_HANG link_layer Ethernet, the other 3 InfiniBand (job {job})"
    assert c.drained("n3")
    for n in ("n1", "n2", "n4", "n5"):
        assert not c.drained(n), c.node(n)
    ran = result.read_text().split()
    assert ran[0] == "n[1-2,4-5]" and ran[1] != "restarts=0", ran
    # The remedy in Slurm's words: the drained node's log says rdmadoctor drained it; the others say
    # how to exclude it; no Kubernetes YAML anywhere.
    odd = (c.base / "log" / "prolog.n3.log").read_text()
    assert "sbatch --exclude=n3 " in odd and "rdmadoctor drained n3 in its Prolog" in odd, odd[-3000:]
    other = (c.base / "log" / "prolog.n1.log").read_text()
    assert "sbatch --exclude=n3 " in other and "scontrol update nodename=n3 state=drain" in other, other[-3000:]
    assert "nodeAffinity" not in odd + other
    assert "Restarts=0" not in c.run(["scontrol", "show", "job", job]).stdout
    # `slurm health` on n3: healthy on its own, but without an expectation of the link layer its
    # checks cannot vouch for what the gang blamed: kept, saying how to release it (resumed, the
    # next InfiniBand job would land on it and drain it again). Expecting InfiniBand, it fails.
    r = health(c, "n3", "roce-node")
    assert "but not resumed" in r.stdout and "scontrol update nodename=n3 state=resume" in r.stdout, r.stdout
    assert c.drained("n3") and c.reason("n3").startswith("rdmadoctor: GANG_MISMATCH_HANG link_layer"), c.node("n3")
    r = health(c, "n3", "roce-node", "--set", "link_layer=InfiniBand")
    assert "still failing" in r.stdout and c.drained("n3"), r.stdout
    c.reset()
