"""deploy/monitoring: the rules pass promtool (check and unit tests), the PrometheusRule carries
the same groups, every metric and label the rules and the dashboard use is one the agent really
exports, and a real Prometheus server scrapes a running agent on loopback, loads the rules and
answers queries about it (Debian's `prometheus` package; skipped where it is not installed).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
MON = ROOT / "deploy" / "monitoring"
RULES = MON / "rules.yaml"
DASHBOARD = MON / "grafana-dashboard.json"
RDMADOCTOR = Path(sys.executable).with_name("rdmadoctor")
# Labels the scrape adds (podmonitor.yaml: node and job by relabeling; the operator: namespace,
# pod, container, endpoint; Prometheus: instance, job).
SCRAPE_LABELS = {"job", "instance", "node", "namespace", "pod", "container", "endpoint"}
# PromQL names that are not metrics.
NOT_METRICS = {"up"}


def _tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        pytest.skip(f"{name} is not installed (Debian: apt-get install prometheus)")
    return path


def _groups() -> list[dict]:
    return yaml.safe_load(RULES.read_text())["groups"]


def _alerts() -> list[dict]:
    return [r for g in _groups() for r in g["rules"] if "alert" in r]


def _dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def _dashboard_exprs() -> list[str]:
    return [t["expr"] for p in _dashboard()["panels"] for t in p.get("targets", [])]


def _rule_texts() -> list[str]:
    """Every PromQL expression of the rules, the queries inside their annotations included."""
    out = []
    for r in _alerts():
        out.append(r["expr"])
        for text in r.get("annotations", {}).values():
            out += re.findall(r"query \(printf `([^`]*)`", text)
    return out


# ---- promtool ---------------------------------------------------------------------------------
def test_rules_pass_promtool_check() -> None:
    proc = subprocess.run([_tool("promtool"), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(_alerts())} rules found" in proc.stdout


def test_rules_unit_tests_fire_and_stay_quiet() -> None:
    """rules.test.yaml: each alert fires (with its summary rendered) and does not fire."""
    proc = subprocess.run([_tool("promtool"), "test", "rules", "rules.test.yaml"], cwd=MON, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tests = yaml.safe_load((MON / "rules.test.yaml").read_text())["tests"]
    checked = [(c["alertname"], bool(c["exp_alerts"])) for t in tests for c in t["alert_rule_test"]]
    for alert in _alerts():
        assert (alert["alert"], True) in checked, f"{alert['alert']}: no test where it fires"
        assert (alert["alert"], False) in checked, f"{alert['alert']}: no test where it stays quiet"


def test_promtool_unit_tests_can_fail(tmp_path: Path) -> None:
    """The unit tests above would catch a changed summary: promtool compares them exactly."""
    shutil.copy(RULES, tmp_path / "rules.yaml")
    text = (MON / "rules.test.yaml").read_text().replace("IB_PORT_DOWN on 1 RDMA port(s)", "IB_PORT_DOWN on 2 RDMA port(s)")
    (tmp_path / "rules.test.yaml").write_text(text)
    proc = subprocess.run([_tool("promtool"), "test", "rules", "rules.test.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "RDMAPortDown" in proc.stdout + proc.stderr


# ---- the objects --------------------------------------------------------------------------------
def test_prometheusrule_carries_the_same_groups() -> None:
    obj = yaml.safe_load((MON / "prometheusrule.yaml").read_text())
    assert (obj["apiVersion"], obj["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert obj["spec"]["groups"] == _groups(), (
        "prometheusrule.yaml's groups differ from rules.yaml's: regenerate them (the command is in prometheusrule.yaml's header)"
    )
    kust = yaml.safe_load((MON / "kustomization.yaml").read_text())
    assert "prometheusrule.yaml" in kust["resources"]


def test_kustomization_renders_the_same_rules_and_selects_the_agent() -> None:
    kubectl = shutil.which("kubectl")
    if not kubectl:
        pytest.skip("kubectl is not installed: the kustomization cannot be rendered")
    proc = subprocess.run([kubectl, "kustomize", str(MON)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    all_docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    # The fleet's rules are a PrometheusRule of their own (tests/system/test_fleet_monitoring.py).
    docs = {d["kind"]: d for d in all_docs if d["metadata"]["name"] != "rdmadoctor-fleet"}
    assert set(docs) == {"Service", "PodMonitor", "PrometheusRule", "ConfigMap"} and len(all_docs) == 5
    assert docs["PrometheusRule"]["spec"]["groups"] == _groups()
    for d in docs.values():
        assert d["metadata"]["namespace"] == "rdmadoctor"
    # The dashboard for Grafana's sidecar (kube-prometheus-stack): the JSON file itself, one source.
    cm = docs["ConfigMap"]
    assert cm["metadata"]["name"] == "rdmadoctor-grafana-dashboard"
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["data"] == {"grafana-dashboard.json": DASHBOARD.read_text()}
    kv = pytest.importorskip("kubernetes_validate")
    for kind in ("Service", "ConfigMap"):
        kv.validate(docs[kind], kv.utils.latest_version(), strict=True)
    # The dashboard fits in a ConfigMap with room to grow (1 MiB is the API server's limit, and
    # `kubectl apply` keeps a second copy in an annotation limited to 256 KiB).
    assert len(DASHBOARD.read_bytes()) < 128 * 1024


def test_networkpolicy_admits_only_the_scraper_on_the_metrics_port() -> None:
    """deploy/monitoring/networkpolicy (optional): renders, validates, selects the agent pods and
    lets in only Prometheus' pods, on the port the probes and the PodMonitor use."""
    kubectl = shutil.which("kubectl")
    if not kubectl:
        pytest.skip("kubectl is not installed: the kustomization cannot be rendered")
    proc = subprocess.run([kubectl, "kustomize", str(MON / "networkpolicy")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (np,) = [d for d in yaml.safe_load_all(proc.stdout) if d]
    assert (np["apiVersion"], np["kind"]) == ("networking.k8s.io/v1", "NetworkPolicy")
    assert np["metadata"]["namespace"] == "rdmadoctor"
    kv = pytest.importorskip("kubernetes_validate")
    kv.validate(np, kv.utils.latest_version(), strict=True)
    labels, agent = _agent_pod()
    spec = np["spec"]
    assert spec["podSelector"]["matchLabels"].items() <= labels.items()
    assert spec["policyTypes"] == ["Ingress"]  # the agent's own calls (the API server) are untouched
    (rule,) = spec["ingress"]
    assert rule["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    assert "metrics" in {p["name"] for p in agent["ports"]}
    (peer,) = rule["from"]
    assert peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}
    assert "kubernetes.io/metadata.name" in peer["namespaceSelector"]["matchLabels"]
    # Optional: not part of deploy/monitoring's own build.
    assert "networkpolicy" not in str(yaml.safe_load((MON / "kustomization.yaml").read_text()).get("resources"))


def _agent_pod() -> tuple[dict, dict]:
    ds = yaml.safe_load((ROOT / "deploy" / "base" / "daemonset.yaml").read_text())
    tpl = ds["spec"]["template"]
    return tpl["metadata"]["labels"], next(c for c in tpl["spec"]["containers"] if c["name"] == "agent")


def test_podmonitor_and_service_find_the_agents_metrics_port() -> None:
    labels, agent = _agent_pod()
    ports = {p["name"]: p["containerPort"] for p in agent["ports"]}
    args = agent["args"]
    assert int(args[args.index("--metrics-port") + 1]) == ports["metrics"]

    pm = yaml.safe_load((MON / "podmonitor.yaml").read_text())
    assert (pm["apiVersion"], pm["kind"]) == ("monitoring.coreos.com/v1", "PodMonitor")
    spec = pm["spec"]
    assert set(spec) <= {"selector", "namespaceSelector", "podMetricsEndpoints", "jobLabel", "podTargetLabels", "sampleLimit"}
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert spec["namespaceSelector"]["matchNames"] == ["rdmadoctor"]
    (ep,) = spec["podMetricsEndpoints"]
    assert ep["port"] == "metrics" and ep["path"] == "/metrics"
    assert set(ep) <= {"port", "path", "interval", "scrapeTimeout", "relabelings", "metricRelabelings", "honorLabels", "scheme"}
    # What the rules rely on: a node label from the pod's node, and job="rdmadoctor".
    rel = ep["relabelings"]
    assert {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"} in rel
    assert {"targetLabel": "job", "replacement": "rdmadoctor"} in rel
    assert any('up{job="rdmadoctor"}' in r["expr"] for r in _alerts())
    for r in rel:
        assert set(r) <= {"sourceLabels", "targetLabel", "replacement", "action", "regex", "separator"}

    svc = yaml.safe_load((MON / "service.yaml").read_text())
    assert svc["spec"]["selector"].items() <= labels.items() and svc["spec"]["clusterIP"] == "None"
    (port,) = svc["spec"]["ports"]
    assert port["targetPort"] == "metrics" and port["port"] == ports["metrics"]


CODES_DOC = ROOT / "docs" / "codes.md"
ALERTS_DOC = ROOT / "docs" / "alerts.md"
# Pinned to the release the rules ship with (scripts/bump-version.sh moves it): a page that the
# next release rewrote cannot mislead an alert of this one.
DOCS_URL = f"https://github.com/rdmadoctor/rdmadoctor/blob/v{__import__('rdmadoctor').__version__}/docs/"


def test_alerts_name_the_node_and_the_code_and_say_what_to_run() -> None:
    for r in _alerts():
        name = r["alert"]
        assert r["labels"]["severity"] in ("critical", "warning", "info"), name
        ann = r["annotations"]
        assert {"summary", "description", "runbook", "runbook_url"} <= set(ann), name
        if not r["expr"].startswith("absent("):  # the absence of every agent has no node to name
            assert "$labels.node" in ann["summary"], name
        assert re.fullmatch(r"\d+[mh]", r["for"]), name
        if r["expr"].lstrip().startswith("rdmadoctor_finding{"):
            # A finding alert (RDMANodeNotReady reads findings too, to say whether each of its
            # reasons has such an alert, but it is the node's): the summary names the code, the runbook explains it, the URL is
            # the code's page; follow-on findings (a cause found too) raise none of their own.
            assert "$labels.code" in ann["summary"] or ".Labels.code" in ann["summary"], name
            assert ann["runbook"].startswith("rdmadoctor explain"), name
            assert 'cause=""' in r["expr"], name
            assert ann["runbook_url"] == DOCS_URL + "codes.md#{{ $labels.code | toLower }}", name
        else:
            assert "rdmadoctor" in ann["runbook"] or "kubectl" in ann["runbook"], name
            assert ann["runbook_url"] == DOCS_URL + "alerts.md#" + name.lower(), name
    by_name = {r["alert"]: r for r in _alerts()}
    # The catch-all fires on errors only; warnings have their own alert.
    assert 'severity="error"' in by_name["RDMAProblem"]["expr"]
    assert 'severity="warning"' in by_name["RDMAWarning"]["expr"]
    # up == 0 cannot fire without a target: the agents' absence alerts too.
    assert by_name["RDMADoctorAbsent"]["expr"] == 'absent(up{job="rdmadoctor"})'


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a Markdown file's headings (lower case, spaces to dashes, most
    punctuation dropped; underscores kept)."""
    out = set()
    for m in re.finditer(r"^#+ (.+)$", markdown, re.M):
        out.add(re.sub(r"[^a-z0-9_ -]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


def test_runbook_urls_lead_to_a_section_of_the_docs() -> None:
    codes_anchors, alerts_anchors = _anchors(CODES_DOC.read_text()), _anchors(ALERTS_DOC.read_text())
    for r in _alerts():
        assert r["alert"].lower() in alerts_anchors, f"docs/alerts.md has no section for {r['alert']}"
    # Every code a finding alert can name has its section (the codes of the checks), and so has
    # every code the unit tests render into a runbook_url.
    from rdmadoctor.engine.registry import load_checks

    checks, _ = load_checks(autoload=False, listing=True)  # plugins.load's codes too
    kinds = {k.code: k.kind for c in checks for k in c.codes}
    assert "plugin_optional_not_loaded" in codes_anchors
    assert {c.lower() for c in kinds if kinds[c] in ("problem", "unknown")} <= codes_anchors
    tests = yaml.safe_load((MON / "rules.test.yaml").read_text())["tests"]
    urls = [a["exp_annotations"]["runbook_url"] for t in tests for c in t["alert_rule_test"] for a in c["exp_alerts"]]
    assert urls
    for url in urls:
        page, _, anchor = url.removeprefix(DOCS_URL).partition("#")
        assert anchor in {"codes.md": codes_anchors, "alerts.md": alerts_anchors}[page], url


def test_codes_doc_is_generated_from_the_checks() -> None:
    import runpy

    render = runpy.run_path(str(ROOT / "scripts" / "codes_doc.py"))["render"]
    assert CODES_DOC.read_text() == render(), "docs/codes.md is stale: .venv/bin/python scripts/codes_doc.py > docs/codes.md"


def _codes() -> dict[str, str]:
    from rdmadoctor.engine.registry import load_checks

    checks, _ = load_checks(autoload=False)
    return {k.code: k.kind for c in checks for k in c.codes}


def test_codes_in_the_rules_are_real_problem_codes() -> None:
    """Codes are a contract: a renamed or removed code must break this test, not the alert."""
    kinds = _codes()
    named = set()
    for text in _rule_texts() + [(MON / "rules.test.yaml").read_text()]:
        for m in re.finditer(r'code\s*(?:=~|!~|=|!=)\s*"([^"]+)"', text):
            named |= set(m.group(1).split("|"))
        named |= set(re.findall(r'code="([A-Z0-9_]+)"', text))
    named |= set(re.findall(r"\bcode: ([A-Z0-9_]+)", (MON / "rules.test.yaml").read_text()))
    assert {"IB_PORT_DOWN", "IB_PORT_RATE_LOW", "GDR_PEERMEM_MISSING"} <= named
    unknown = sorted(c for c in named if c not in kinds)
    assert not unknown, f"codes no check has: {unknown}"
    # Severity error: only problem codes can carry it (unknown codes are counted by NotReady).
    assert not [c for c in named if kinds[c] not in ("problem", "unknown")]


# ---- every metric used is exported ----------------------------------------------------------------
def _exposition() -> tuple[str, dict[str, set[str]]]:
    """What the agent serves after real runs (an example bundle, judged as a node), a label write
    and a publish error: the text, and each sample name with its label names."""
    from prometheus_client.parser import text_string_to_metric_families

    from rdmadoctor import __version__
    from rdmadoctor.output.metrics import AgentMetrics, render
    from rdmadoctor.runner import Options, diagnose

    m = AgentMetrics(__version__, targets=("nfd",))
    diag = diagnose(Options(example="broken-pod", scope="node"))
    m.update(diag.results, report=diag.report)
    m.record_updates(["nfd"])
    m.record_api_error()
    # agent --quarantine's series (issue 28): a node whose hold a storm deferred.
    from collections import Counter
    from types import SimpleNamespace

    m.enable_quarantine()
    m.record_quarantine(SimpleNamespace(actions=Counter({"defer-storm": 1}), history=SimpleNamespace(held=False),
                                        storm=("default", "IB_PORT_DOWN")))
    text = render(m.registry()).decode()
    names: dict[str, set[str]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            names.setdefault(s.name, set()).update(s.labels)
    return text, names


def _used(texts: list[str]) -> dict[str, set[str]]:
    """rdmadoctor_* names and the label names matched on them in PromQL texts."""
    out: dict[str, set[str]] = {}
    for text in texts:
        for m in re.finditer(r"\b(rdmadoctor_[a-z0-9_]+)\s*(\{[^}]*\})?", text):
            labels = set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", m.group(2) or ""))
            out.setdefault(m.group(1), set()).update(labels)
        for m in re.finditer(r"\b(?:by|without)\s*\(([^)]*)\)", text):
            out.setdefault("", set()).update(x.strip() for x in m.group(1).split(",") if x.strip())
    return out


def test_every_metric_in_rules_and_dashboard_is_exported() -> None:
    _, exported = _exposition()
    all_labels = set().union(*exported.values()) | SCRAPE_LABELS
    for where, texts in (("rules.yaml", _rule_texts()), ("grafana-dashboard.json", _dashboard_exprs())):
        used = _used(texts)
        grouped = used.pop("", set())
        assert used, where
        for name, labels in used.items():
            assert name in exported, f"{where}: {name} is not exported by the agent (it exports {sorted(exported)})"
            assert labels <= exported[name] | SCRAPE_LABELS, f"{where}: {name} has no label {labels - exported[name] - SCRAPE_LABELS}"
        assert grouped <= all_labels, f"{where}: grouping by labels no series has: {grouped - all_labels}"
    # The dashboard's node variable reads a label every agent series has after the scrape.
    var = next(v for v in _dashboard()["templating"]["list"] if v["name"] == "node")
    assert re.fullmatch(r"label_values\((rdmadoctor_[a-z_]+), node\)", var["definition"]).group(1) in exported


def test_the_check_catches_a_metric_the_agent_does_not_export() -> None:
    _, exported = _exposition()
    used = _used(['rdmadoctor_port_speed{device="x"} > 0', 'rdmadoctor_finding{kind="problem"}'])
    assert "rdmadoctor_port_speed" not in exported
    assert not used["rdmadoctor_finding"] <= exported["rdmadoctor_finding"] | SCRAPE_LABELS


def test_exposition_passes_promtool_check_metrics() -> None:
    text, _ = _exposition()
    proc = subprocess.run([_tool("promtool"), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---- the dashboard ---------------------------------------------------------------------------------
def test_dashboard_shape() -> None:
    d = _dashboard()
    assert d["uid"] == "rdmadoctor-fleet" and d["schemaVersion"] >= 36
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    titles = {p["title"] for p in d["panels"] if p["type"] == "row"}
    assert titles == {"Fleet readiness", "Problem codes", "Ports", "Agent health"}
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for p in d["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        if p["type"] == "row":
            continue
        assert p["targets"] and p["datasource"]["uid"] == "${datasource}", p["title"]
        for t in p["targets"]:
            assert t["expr"].strip() and t["datasource"]["uid"] == "${datasource}", p["title"]
            assert "$node" in t["expr"], f"{p['title']}: not filtered by the node variable"
    # What the issue asks the dashboard to show.
    exprs = " ".join(_dashboard_exprs())
    for name in ("rdmadoctor_check_ok", "rdmadoctor_finding", "rdmadoctor_port_rate_bytes_per_second", "rdmadoctor_last_run_timestamp_seconds", "up{"):
        assert name in exprs


# ---- a real Prometheus, scraping a real agent ------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=60) as r:  # a deadline for a loaded machine, never a measurement
        return json.loads(r.read())


def _query(base: str, q: str) -> list[dict]:
    out = _get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": q}))
    assert out["status"] == "success", (q, out)
    return out["data"]["result"]


def _until(what: str, fn, timeout: float = 90.0):
    """Poll fn until it returns something truthy; a deadline, not a measurement."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except OSError as e:  # not listening yet
            last = e
        else:
            if last:
                return last
        time.sleep(0.5)
    raise AssertionError(f"{what}: not seen within {timeout:.0f}s (last: {last!r})")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_real_prometheus_scrapes_the_agent(tmp_path: Path) -> None:
    """`rdmadoctor agent` on loopback (an example bundle with a port down, judged as a node),
    Debian's Prometheus scraping it with rules.yaml loaded: up is 1, the rdmadoctor_* series are
    queryable over the HTTP API, every dashboard query evaluates, every rule is healthy and
    RDMAPortDown is pending with its summary rendered."""
    prometheus = _tool("prometheus")
    promtool = _tool("promtool")
    agent_port, prom_port = _free_port(), _free_port()
    agent = subprocess.Popen(
        [str(RDMADOCTOR), "agent", "--example", "broken-pod", "--publish", "stdout", "--metrics-address", "127.0.0.1",
         "--metrics-port", str(agent_port), "--interval", "5", "--log-format", "json"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "agent.log", "wb"), env={**os.environ, "RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    prom = None
    try:
        metrics_url = f"http://127.0.0.1:{agent_port}/metrics"

        def exposition() -> str:
            with urllib.request.urlopen(metrics_url, timeout=60) as r:
                text = r.read().decode()
            return text if "rdmadoctor_last_run_timestamp_seconds " in text else ""

        text = _until("the agent's first run on /metrics", exposition)
        lint = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        assert lint.returncode == 0, lint.stdout + lint.stderr

        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(RULES)],
            "scrape_configs": [
                {
                    "job_name": "rdmadoctor",
                    "static_configs": [
                        {"targets": [f"127.0.0.1:{agent_port}"], "labels": {"node": "gpu-loopback", "namespace": "rdmadoctor", "pod": "rdmadoctor-test"}}
                    ],
                }
            ],
        }
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        check = subprocess.run([promtool, "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True, text=True, timeout=60)
        assert check.returncode == 0, check.stdout + check.stderr
        prom = subprocess.Popen(
            [prometheus, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "wb"),
        )
        base = f"http://127.0.0.1:{prom_port}"

        def up() -> list:
            if prom.poll() is not None:
                raise AssertionError("prometheus exited: " + (tmp_path / "prometheus.log").read_text()[-2000:])
            return [r for r in _query(base, 'up{job="rdmadoctor"}') if r["value"][1] == "1"]

        (series,) = _until("up == 1", up)
        assert series["metric"]["instance"] == f"127.0.0.1:{agent_port}"

        found = _until("rdmadoctor_finding", lambda: _query(base, 'rdmadoctor_finding{code="IB_PORT_DOWN"}'))
        assert found[0]["metric"]["node"] == "gpu-loopback" and float(found[0]["value"][1]) == 1
        rates = {r["metric"]["device"]: float(r["value"][1]) for r in _query(base, "rdmadoctor_port_rate_bytes_per_second")}
        assert rates["mlx5_0"] == 400e9 / 8 and rates["mlx5_3"] == 10e9 / 8  # 400 and 10 Gb/s
        # prometheus-client's exposition (tests/unit/agent/test_metrics_server.py: OpenMetrics by Accept, gzip).
        assert _query(base, 'process_resident_memory_bytes{job="rdmadoctor"}')
        down = _query(base, "rdmadoctor_port_active == 0")
        assert [r["metric"]["device"] for r in down] == ["mlx5_3"]
        assert _query(base, 'rdmadoctor_check_ok{check="ib.ports"}')[0]["value"][1] == "0"
        names = {r["metric"]["__name__"] for r in _query(base, '{__name__=~"rdmadoctor_.+"}')}
        assert names >= {"rdmadoctor_check_ok", "rdmadoctor_finding", "rdmadoctor_build_info", "rdmadoctor_api_errors_total"}

        # Every dashboard query is valid PromQL that the server evaluates.
        for expr in _dashboard_exprs():
            _query(base, expr.replace("$node", ".*"))
        assert _query(base, _dashboard_exprs()[1].replace("$node", ".*"))[0]["value"][1] == "1"  # one node, not ready

        # The rules loaded and evaluate; the port alert is pending (for: 5m) with its text.
        def evaluated() -> list:
            groups = _get(f"{base}/api/v1/rules")["data"]["groups"]
            rules = [r for g in groups for r in g["rules"]]
            return rules if len(rules) == len(_alerts()) and all(r.get("lastEvaluation", "").startswith("2") and not r["lastEvaluation"].startswith("0001") for r in rules) else []

        rules = _until("the rules evaluated", evaluated)
        assert all(r["health"] == "ok" for r in rules), [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]

        def pending() -> list:
            return [a for a in _get(f"{base}/api/v1/alerts")["data"]["alerts"] if a["labels"]["alertname"] == "RDMAPortDown"]

        (alert,) = _until("RDMAPortDown pending", pending)
        assert alert["state"] == "pending" and alert["labels"]["code"] == "IB_PORT_DOWN"
        assert alert["annotations"]["summary"].startswith("gpu-loopback: IB_PORT_DOWN on 1 RDMA port(s)")
        assert alert["annotations"]["description"].startswith("Ports not ACTIVE on this node: mlx5_3/1.")
        assert alert["annotations"]["runbook"] == "rdmadoctor explain IB_PORT_DOWN"
    finally:
        if prom is not None:
            _stop(prom)
        _stop(agent)
