"""slurmd itself runs `rdmadoctor slurm health` as its HealthCheckProgram (tests/slurm_cluster.py:
Debian's slurmctld and two slurmd on this machine, their own munged, started and stopped here).

The other Slurm tests (test_slurm_real.py) call the HealthCheckProgram directly, so that five
nodes do not start Python every few seconds; this one leaves the call to Slurm: a small
HealthCheckInterval, HealthCheckNodeState=ANY (so that a node rdmadoctor drained is checked again
and resumed), and the test only changes a node's facts and waits, polling with a generous
deadline, for slurmd's own call to drain it with rdmadoctor's reason, then to resume it. Marked
real: skipped, saying why, when not root or Slurm is not installed (scripts/test.sh installs it)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from slurm_cluster import SlurmCluster, unavailable, wait_for

pytestmark = [pytest.mark.real]

# Seconds between slurmctld's health-check rounds: small, so that the test waits little; two nodes
# each start one Python per round.
INTERVAL = 5


def test_slurmd_runs_the_health_check_and_drains_then_resumes_the_broken_node(tmp_path_factory):
    why = unavailable()
    if why:
        pytest.skip(why)
    base = tmp_path_factory.mktemp("slurm-hc")
    base.chmod(0o755)
    c = SlurmCluster(base, nodes=("n1", "n2"), health_interval=INTERVAL, health_node_state="ANY")
    # slurmd gives HealthCheckProgram SLURMD_NODENAME (both slurmd run on this host) and not its own
    # environment (SLURM_CONF: scontrol's way to this cluster); each node's facts are a shipped
    # example named in facts/<node>. One bad run drains, one good run resumes.
    health = f"""#!/bin/sh
export PATH=/usr/bin:/usr/sbin:/bin SLURM_CONF={base}/slurm.conf
echo "called by slurmd for $SLURMD_NODENAME" >> {base}/log/health.$SLURMD_NODENAME.log
exec {sys.executable} -m rdmadoctor slurm health --example "$(cat {base}/facts/$SLURMD_NODENAME)" \\
    --state-dir {base}/state-health --set quarantine_after=1 --set release_after=1 --set storm_share=1 \\
    >> {base}/log/health.$SLURMD_NODENAME.log 2>&1
"""
    c.write("#!/bin/sh\nexit 0\n", health)
    try:
        c.start()
        calls = base / "log" / "health.n1.log"
        # slurmd has run it on its own (at its start, or a round since): healthy, nothing drained.
        try:
            wait_for(lambda: calls.exists() and "slurm: node n1" in calls.read_text(), 120, 1,
                     "slurmd's first health call")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{c.logs()}") from None
        assert not c.drained("n1") and not c.drained("n2"), (c.node("n1"), c.node("n2"))
        seen = calls.read_text().count("called by slurmd")

        c.set_facts("n1", "broken-pod")  # a port goes down; nobody but slurmd runs the check
        try:
            wait_for(lambda: c.drained("n1") and c.reason("n1").startswith("rdmadoctor: IB_PORT_DOWN "),
                     180, 1, "slurmd's health call to drain n1")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{c.logs()}") from None
        assert calls.read_text().count("called by slurmd") > seen
        assert "slurm: drained: rdmadoctor: IB_PORT_DOWN" in calls.read_text()
        assert not c.drained("n2"), c.node("n2")

        c.set_facts("n1", "hgx-h100-ib")  # repaired: checked although drained (ANY), resumed
        try:
            wait_for(lambda: not c.drained("n1"), 180, 1, "slurmd's health call to resume n1")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{c.logs()}") from None
        assert "resumed (its reason was rdmadoctor's" in calls.read_text()
    finally:
        c.stop()
