"""deploy/monitoring's fleet rules (RDMAFleetDrift): promtool checks and unit tests, the
PrometheusRule carries the same groups, the rules read exactly the labels the agent exports."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rdmadoctor.output import fleet_metrics as M
from rdmadoctor.output.metrics import AgentMetrics, render
from tests.conftest import check_json

yaml = pytest.importorskip("yaml")

MON = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
RULES = MON / "fleet-rules.yaml"


def _tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        pytest.skip(f"{name} is not installed (Debian: apt-get install prometheus)")
    return path


def _rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def test_fleet_rules_pass_promtool_check() -> None:
    proc = subprocess.run([_tool("promtool"), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_fleet_unit_tests_one_outlier_halves_a_pool_of_one_a_node_that_stops() -> None:
    proc = subprocess.run([_tool("promtool"), "test", "rules", "fleet-rules.test.yaml"], cwd=MON, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = [t["name"] for t in yaml.safe_load((MON / "fleet-rules.test.yaml").read_text())["tests"]]
    assert names == ["one outlier in twenty", "two equal halves", "a pool of one", "a node that stops reporting",
                     "one port down, and one node on other firmware on both its HCAs"]


def test_fleet_unit_tests_can_fail(tmp_path: Path) -> None:
    """A rule that took a tie for a majority is caught: promtool fails."""
    text = RULES.read_text().replace("== 1)", ">= 1)")
    assert text != RULES.read_text()
    (tmp_path / "fleet-rules.yaml").write_text(text)
    shutil.copy(MON / "fleet-rules.test.yaml", tmp_path)
    proc = subprocess.run([_tool("promtool"), "test", "rules", "fleet-rules.test.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "FAILED" in proc.stdout + proc.stderr


def test_the_prometheusrule_carries_the_same_groups_and_is_in_the_kustomization() -> None:
    obj = yaml.safe_load((MON / "fleet-prometheusrule.yaml").read_text())
    assert obj["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]
    assert "fleet-prometheusrule.yaml" in yaml.safe_load((MON / "kustomization.yaml").read_text())["resources"]


def test_the_rules_record_every_fact_the_agent_exports_and_only_those() -> None:
    """One source: the labels of rdmadoctor_node_info / rdmadoctor_hca_info (fleet_metrics) and
    the facts the recording rules read cannot drift apart."""
    read = set()
    for r in _rules():
        m = re.fullmatch(r'group by \(.*\) \(label_replace\((\w+)\{(\w+)!=""\}, "value", "\$1", "(\w+)", "\(\.\*\)"\)\)', r.get("expr", "").strip())
        if r.get("record") == "rdmadoctor:fleet_field:info":
            assert m and m.group(2) == m.group(3), r
            assert r["labels"]["field"] == M.FIELD_OF.get(m.group(2), m.group(2))
            read.add((m.group(1), m.group(2)))
    want = {(M.NODE_INFO, k) for k in M.NODE_LABELS} | {(M.HCA_INFO, k) for k in M.PORT_LABELS if k not in ("device", "port")}
    assert read == want


def test_the_agent_exports_the_info_metrics_and_they_pass_promtool() -> None:
    rep = check_json(["--example", "hgx-h100-ib", "--scope", "node"])[1]
    rep["fingerprint"]["pool"] = "hgx"
    m = AgentMetrics("0.1.0")
    m.update([], 1.0, rep)
    text = render(m.registry()).decode()
    info = [line for line in text.splitlines() if line.startswith(M.HCA_INFO + "{")]
    assert len(info) == 10
    assert 'device="mlx5_0"' in info[0] and 'fw_version="28.39.2048"' in info[0] and 'pool="hgx"' in info[0]
    node = [line for line in text.splitlines() if line.startswith(M.NODE_INFO + "{")]
    assert len(node) == 1 and 'kernel="5.15.0-91-generic"' in node[0] and 'gpudirect="peermem"' in node[0]
    assert 'node="' not in "\n".join(info + node)  # the scrape names the node
    proc = subprocess.run([_tool("promtool"), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_info_labels_read_back_as_the_flat_view() -> None:
    from rdmadoctor.engine import fingerprint as F

    rep = check_json(["--example", "roce-node"])[1]
    nodes, ports = M.series(rep["fingerprint"])
    flat = F.flatten(rep["fingerprint"])
    back = M.flat_of(nodes[0], ports)
    # Every fact the metrics carry reads back as the report's value (as text); rails and PCIe stay out.
    assert {k: str(v) for k, v in flat.items() if not k.startswith(("node.rails.", "node.pcie."))} == back


def test_drift_is_configuration_one_alert_per_node_fact_and_value() -> None:
    """Issue 32 item 4: the alert compares configuration, not the states the port alerts cover,
    leaves out ports that are not ACTIVE, aggregates the ports away, and links its runbook page in
    the release's docs."""
    (alert,) = [r for r in _rules() if "alert" in r]
    fields = set(re.search(r'field=~"([^"]+)"', alert["expr"]).group(1).split("|"))
    assert {"fw_ver", "kernel", "rdma_driver", "active_mtu", "netdev_mtu", "gid_index"} <= fields
    assert not fields & {"state", "rate_gbps", "width", "sm_lid", "subnet_prefix", "netdev"}
    assert fields <= {M.FIELD_OF.get(k, k) for k in (*M.NODE_LABELS, *M.PORT_LABELS)}
    assert alert["expr"].startswith("count by (pool, node, instance, field, value, majority) (")
    assert 'unless on (pool, node, instance, device, port) rdmadoctor:fleet_field:info{field="state", value!="ACTIVE"}' in alert["expr"]
    import rdmadoctor

    assert alert["annotations"]["runbook_url"] == (
        f"https://github.com/rdmadoctor/rdmadoctor/blob/v{rdmadoctor.__version__}/docs/alerts.md#rdmafleetdrift")


def _for_seconds(text: str) -> int:
    """A rule's `for:` ("5m", "1h", "90s") in seconds; no `for:` is 0."""
    total = 0
    for n, unit in re.findall(r"(\d+)([smhd])", text or "0s"):
        total += int(n) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
    return total


def _node_rules() -> dict[str, dict]:
    return {r["alert"]: r for g in yaml.safe_load((MON / "rules.yaml").read_text())["groups"] for r in g["rules"] if "alert" in r}


def test_alertmanager_inhibit_rule_passes_amtool_and_the_specific_alert_speaks_for_the_node() -> None:
    """The port alert (the specific cause, critical) holds back the node's RDMANodeNotReady, not
    the other way round, and only where the node's alert carries causes="alerted"."""
    amtool = shutil.which("amtool")
    if not amtool:
        pytest.skip("amtool is not installed (Debian: apt-get install prometheus-alertmanager)")
    path = MON / "alertmanager.yaml"
    proc = subprocess.run([amtool, "check-config", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (rule,) = yaml.safe_load(path.read_text())["inhibit_rules"]
    assert rule == {"source_matchers": ['alertname=~"RDMAPortDown|RDMAPortRateLow|RDMAProblem"'],
                    "target_matchers": ['alertname="RDMANodeNotReady"', 'causes="alerted"'], "equal": ["instance"]}
    assert {"RDMANodeNotReady", "RDMAPortDown", "RDMAPortRateLow", "RDMAProblem"} <= set(_node_rules())


def test_one_alert_per_cause_holds_over_time() -> None:
    """Issue 32's follow-up: with RDMANodeNotReady inhibiting a port alert that waits 5 minutes
    against its 15, the port's page notified alone for 10 minutes and was then replaced by the
    node's ticket. An inhibit rule only holds over time when every source alert waits no longer
    than the targets it silences (it then fires first: both start waiting in the same scrape);
    the target's label that gates the rule is set by its own expression; and the sources, together,
    alert on every error code, so a node whose every reason is an error (causes="alerted") always
    has one of them."""
    from rdmadoctor.engine.registry import load_checks

    rules = _node_rules()
    for inhibit in yaml.safe_load((MON / "alertmanager.yaml").read_text())["inhibit_rules"]:
        def named(matchers: list[str]) -> list[str]:
            (m,) = [x for x in matchers if x.startswith("alertname")]
            pattern = m.split("=", 1)[1].lstrip("~").strip('"')
            return [a for a in rules if re.fullmatch(pattern, a)]

        sources, targets = named(inhibit["source_matchers"]), named(inhibit["target_matchers"])
        assert sources and targets, inhibit
        for s in sources:
            for t in targets:
                assert _for_seconds(rules[s].get("for")) <= _for_seconds(rules[t].get("for")), (
                    f"{s} waits {rules[s].get('for')}, longer than {t} ({rules[t].get('for')}) that it inhibits: "
                    f"{t} would notify alone in between, then be silenced")
        for m in inhibit["target_matchers"]:
            name, value = m.split("=", 1)
            if name != "alertname":
                for t in targets:
                    assert f'"{name}", {value}' in rules[t]["expr"], f"{t}'s expression never sets {m}"
    # The sources' code matchers cover every problem code (the kind that is found as an error).
    checks, _ = load_checks(autoload=False)
    problem_codes = {k.code for c in checks for k in c.codes if k.kind == "problem"}

    def alerted(code: str, expr: str) -> bool:
        m = re.search(r'code\s*(=~|!~|=)\s*"([^"]+)"', expr)
        if not m:
            return True
        hit = re.fullmatch(m.group(2), code) is not None
        return not hit if m.group(1) == "!~" else hit
    for code in sorted(problem_codes):
        assert any(alerted(code, rules[s]["expr"]) for s in sources), f"{code}: no inhibiting alert fires on it"
