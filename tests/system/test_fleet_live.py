"""The fleet on a real Prometheus: twenty real agents on loopback ports, each on its own generated
root, one of them on other HCA firmware; Debian's Prometheus scrapes them with fleet-rules.yaml
loaded; RDMAFleetDrift fires for that node and no other, and `rdmadoctor fleet --prometheus`
names the same node. Then five agents, one with a port down, every shipped rule and a real
Alertmanager with the shipped inhibit rule: one alert. Skipped where Prometheus (or Alertmanager)
is not installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rdmadoctor.fixturegen import roce_node, write_dir
from rdmadoctor.fixturegen.fleet import other_firmware, pool
from rdmadoctor.fixturegen.sysfs import build
from system.test_monitoring import _free_port, _get, _query, _stop, _tool, _until
from tests.conftest import run_cli

yaml = pytest.importorskip("yaml")

MON = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
RDMADOCTOR = Path(sys.executable).with_name("rdmadoctor")
NODES = 20
ODD = 7
NEW_FW = "28.41.1000"


def test_twenty_agents_one_on_other_firmware_the_alert_fires_for_it_alone(tmp_path: Path) -> None:
    prometheus = _tool("prometheus")
    (tmp_path / "config.toml").write_text("[pools.roce-a]\n")
    agents = []
    ports = []
    prom = None
    try:
        for i, node in enumerate(pool(NODES, roce_node, odd={ODD: other_firmware(NEW_FW)})):
            root = tmp_path / node.hostname
            write_dir(build(node), str(root))
            port = _free_port()
            ports.append(port)
            # A long interval: the first cycle's metrics are all this needs, and twenty agents
            # checking every few seconds would load a small CI machine for nothing.
            agents.append(subprocess.Popen(
                [str(RDMADOCTOR), "agent", "--root", str(root), "--config", str(tmp_path / "config.toml"), "--pool", "roce-a",
                 "--publish", "stdout", "--metrics-address", "127.0.0.1", "--metrics-port", str(port), "--interval", "600"],
                stdout=subprocess.DEVNULL, stderr=open(tmp_path / f"agent-{i}.log", "wb"),
                env={**os.environ, "RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"},
            ))
        # The rules as shipped, with `for: 10m` made 0s so the alert fires within the test.
        rules = (MON / "fleet-rules.yaml").read_text()
        assert "for: 10m" in rules
        (tmp_path / "fleet-rules.yaml").write_text(rules.replace("for: 10m", "for: 0s"))
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(tmp_path / "fleet-rules.yaml")],
            "scrape_configs": [{
                "job_name": "rdmadoctor",
                "static_configs": [{"targets": [f"127.0.0.1:{p}"], "labels": {"node": f"gpu-{i:03d}"}} for i, p in enumerate(ports)],
            }],
        }
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        prom_port = _free_port()
        prom = subprocess.Popen(
            [prometheus, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "wb"),
        )
        base = f"http://127.0.0.1:{prom_port}"

        def all_reporting() -> bool:
            if prom.poll() is not None:
                raise AssertionError("prometheus exited: " + (tmp_path / "prometheus.log").read_text()[-2000:])
            return len(_query(base, "rdmadoctor_node_info")) == NODES

        _until("every agent's rdmadoctor_node_info", all_reporting, timeout=300)

        def firing() -> list:
            # Settled: the recording rules have counted every node (the description's count comes
            # from them, one evaluation behind the scrape).
            alerts = [a for a in _get(f"{base}/api/v1/alerts")["data"]["alerts"] if a["labels"]["alertname"] == "RDMAFleetDrift"]
            settled = all(a["state"] == "firing" and a["annotations"]["description"].startswith(f"{NODES - 1} of") for a in alerts)
            return alerts if alerts and settled else []

        alerts = _until("RDMAFleetDrift firing", firing, timeout=300)
        odd = f"gpu-{ODD:03d}"
        # Every HCA of the odd node has the other firmware: one alert for the node and the fact,
        # naming its four ports.
        (a,) = alerts
        assert (a["labels"]["node"], a["labels"]["field"], a["labels"]["value"], a["labels"]["majority"]) == (
            odd, "fw_ver", NEW_FW, "28.39.2048")
        assert "device" not in a["labels"] and "port" not in a["labels"]
        assert a["annotations"]["summary"] == f"{odd}: fw_ver is {NEW_FW}; pool roce-a majority 28.39.2048"
        assert a["annotations"]["description"].startswith(
            "19 of the pool's nodes have 28.39.2048 (ports: mlx5_0/1, mlx5_1/1, mlx5_2/1, mlx5_3/1).")
        rules = [r for g in _get(f"{base}/api/v1/rules")["data"]["groups"] for r in g["rules"]]
        assert all(r["health"] == "ok" for r in rules), [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]

        # The same answer from `rdmadoctor fleet --prometheus`.
        code, out, err = run_cli(["fleet", "--prometheus", base, "--json"])
        assert code == 1, err
        res = json.loads(out)
        assert [(p["pool"], p["nodes"]) for p in res["pools"]] == [("roce-a", NODES)]
        assert {o["node"] for o in res["outliers"]} == {odd}
        assert {o["field"] for o in res["outliers"]} == {f"port.mlx5_{d}/1.fw_ver" for d in range(4)}
    finally:
        if prom is not None:
            _stop(prom)
        for p in agents:
            _stop(p)


def test_one_port_down_on_one_of_five_agents_gives_one_alert(tmp_path: Path) -> None:
    """Issue 32 item 4: five real agents in one pool, one of them with a port down; Debian's
    Prometheus with rules.yaml and fleet-rules.yaml as shipped (every `for:` made 0s so the alerts
    fire within the test) sends to Debian's Alertmanager with alertmanager.yaml as shipped. The
    port's state, SM LID and rate are not fleet drift; Prometheus fires the port's alert and the
    node's (labelled causes="alerted": its only reason is the port), and Alertmanager lets the
    port's, the specific cause, through alone: one alert, the page. (The waits that keep this so
    over time, the port alert firing first, are checked in tests/system/test_fleet_monitoring.py.)"""
    import re

    from rdmadoctor.fixturegen.nodes import _port_down, _small_ib

    prometheus = _tool("prometheus")
    alertmanager = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    if not alertmanager:
        pytest.skip("Alertmanager is not installed (Debian: apt-get install prometheus-alertmanager)")
    (tmp_path / "config.toml").write_text("[pools.ib-a]\n")
    procs: list[subprocess.Popen] = []
    ports = []
    try:
        for node in pool(5, _small_ib, odd={4: lambda n: setattr(n, "hcas", _port_down().hcas)}, hostname="ib-{:d}"):
            root = tmp_path / node.hostname
            write_dir(build(node), str(root))
            port = _free_port()
            ports.append(port)
            procs.append(subprocess.Popen(
                [str(RDMADOCTOR), "agent", "--root", str(root), "--config", str(tmp_path / "config.toml"), "--pool", "ib-a",
                 "--publish", "stdout", "--metrics-address", "127.0.0.1", "--metrics-port", str(port), "--interval", "600"],
                stdout=subprocess.DEVNULL, stderr=open(tmp_path / f"agent-{node.hostname}.log", "wb"),
                env={**os.environ, "RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"},
            ))
        am_port = _free_port()
        procs.append(subprocess.Popen(
            [alertmanager, f"--config.file={MON / 'alertmanager.yaml'}", f"--storage.path={tmp_path / 'am'}",
             f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address="],
            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "alertmanager.log", "wb"),
        ))
        rule_files = []
        for name in ("rules.yaml", "fleet-rules.yaml"):
            text = re.sub(r"^(\s+for: )\d+[smh]$", r"\g<1>0s", (MON / name).read_text(), flags=re.M)
            (tmp_path / name).write_text(text)
            rule_files.append(str(tmp_path / name))
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": rule_files,
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
            "scrape_configs": [{
                "job_name": "rdmadoctor",
                "static_configs": [{"targets": [f"127.0.0.1:{p}"], "labels": {"node": f"ib-{i}", "namespace": "rdmadoctor", "pod": f"rdmadoctor-{i}"}}
                                   for i, p in enumerate(ports)],
            }],
        }
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        prom_port = _free_port()
        prom = subprocess.Popen(
            [prometheus, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "wb"),
        )
        procs.append(prom)
        base = f"http://127.0.0.1:{prom_port}"
        am = f"http://127.0.0.1:{am_port}/api/v2/alerts"

        def settled() -> list:
            if prom.poll() is not None:
                raise AssertionError("prometheus exited: " + (tmp_path / "prometheus.log").read_text()[-2000:])
            if len(_query(base, "rdmadoctor_node_info")) != 5 or len(_query(base, "rdmadoctor:fleet_value:nodes")) == 0:
                return []
            firing = [a for a in _get(f"{base}/api/v1/alerts")["data"]["alerts"] if a["state"] == "firing"]
            received = _get(am)
            names = {a["labels"]["alertname"] for a in received}
            return firing if {"RDMAPortDown", "RDMANodeNotReady"} <= names else []

        firing = _until("the port's and the node's alerts at Alertmanager", settled, timeout=300)
        # Prometheus: the port and the node, nothing on the port's state, SM LID or rate as drift.
        assert sorted((a["labels"]["alertname"], a["labels"]["node"]) for a in firing) == [
            ("RDMANodeNotReady", "ib-4"), ("RDMAPortDown", "ib-4")]
        rules = [r for g in _get(f"{base}/api/v1/rules")["data"]["groups"] for r in g["rules"]]
        assert all(r["health"] == "ok" for r in rules), [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
        assert not [r for r in rules if r.get("name") == "RDMAFleetDrift" and r.get("alerts")]
        (node_alert,) = [a for a in firing if a["labels"]["alertname"] == "RDMANodeNotReady"]
        assert node_alert["labels"].get("causes") == "alerted"
        # Alertmanager: one alert, the port's (critical); the node's is inhibited by it.
        (one,) = _get(am + "?inhibited=false&silenced=false")
        assert one["labels"]["alertname"] == "RDMAPortDown" and one["labels"]["node"] == "ib-4"
        assert one["labels"]["severity"] == "critical" and one["labels"]["code"] == "IB_PORT_DOWN"
        (node,) = _get(am + "?inhibited=true&active=false")
        assert node["labels"]["alertname"] == "RDMANodeNotReady" and node["status"]["inhibitedBy"]
        assert "IB_PORT_DOWN" in node["annotations"]["summary"]
    finally:
        for p in procs:
            _stop(p)
