"""`check --format npd` and deploy/npd: the Node Problem Detector contract, tested as NPD runs it.

NPD's custom plugin monitor (pkg/custompluginmonitor in kubernetes/node-problem-detector) runs
a rule's ``path`` with its ``args``, with a timeout (the rule's, capped by the global one), reads
at most 4 KiB of stdout and of stderr (separately: stderr only goes to NPD's log), trims the
stdout of surrounding white space and cuts it at ``max_output_length`` bytes; exit status 0 is
OK, 1 NonOK, anything else Unknown. For a permanent rule the condition becomes False (OK, the
default reason and message), True (NonOK, the rule's reason, the output as message) or Unknown
(the default reason, the output as message). :func:`npd_run` and :func:`npd_condition` below do
the same, and the tests hold the real `rdmadoctor` to it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from rdmadoctor.output.npd import MAX_LEN, ascii_text, npd_error_line, npd_line

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
NPD = ROOT / "deploy" / "npd"
CONFIG = NPD / "rdmadoctor-plugin-monitor.json"
EXAMPLES = ROOT / "rdmadoctor" / "examples"
RDMADOCTOR = Path(sys.executable).with_name("rdmadoctor")
MAX_PLUGIN_BYTES = 4096  # NPD's maxCustomPluginBufferBytes


# ---- NPD, as it runs a plugin -----------------------------------------------------------------
_GO_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration(text: str) -> float:
    """Go's time.ParseDuration, for the forms NPD's configs use ("60s", "1m30s", "500ms")."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Go duration: {text!r}")
    return sum(float(n) * _GO_UNIT[u] for n, u in parts)


def npd_validate(cfg: dict) -> None:
    """What NPD checks when it loads a custom plugin monitor config (ApplyConfiguration, Validate)."""
    assert cfg["plugin"] == "custom"
    glob = cfg.get("pluginConfig", {})
    timeout = go_duration(glob.get("timeout", "5s"))
    go_duration(glob.get("invoke_interval", "30s"))
    defaults = {c["type"] for c in cfg["conditions"]}
    for rule in cfg["rules"]:
        assert rule["type"] in ("permanent", "temporary")
        if "timeout" in rule:
            assert go_duration(rule["timeout"]) <= timeout, "plugin timeout is greater than global timeout"
        if rule["type"] == "permanent":
            assert rule["condition"] in defaults, f"permanent problem {rule['condition']} has no default condition"


def npd_run(cfg: dict, rule: dict, path: str | None = None, args: list[str] | None = None) -> tuple[str, str]:
    """Run one rule as NPD's plugin.run does: (status OK|NonOK|Unknown, message)."""
    glob = cfg.get("pluginConfig", {})
    timeout = go_duration(glob.get("timeout", "5s"))
    if "timeout" in rule:
        timeout = min(timeout, go_duration(rule["timeout"]))
    argv = [path or rule["path"], *(rule.get("args") or [] if args is None else args)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return "Unknown", f"Timeout when running plugin {argv[0]!r}"
    output = out[:MAX_PLUGIN_BYTES].decode("utf-8", "replace").strip()
    output = output.encode()[: glob.get("max_output_length", 80)].decode("utf-8", "replace")
    status = {0: "OK", 1: "NonOK"}.get(proc.returncode, "Unknown")
    return status, output


def npd_condition(cfg: dict, rule: dict, current: dict, status: str, message: str) -> dict:
    """The NodeCondition after a result (customPluginMonitor.generateStatus, permanent rules)."""
    default = next(c for c in cfg["conditions"] if c["type"] == rule["condition"])
    new = {"False": "False", "OK": "False", "NonOK": "True"}.get(status, "Unknown")
    change = cfg.get("pluginConfig", {}).get("enable_message_change_based_condition_update", False)
    if current["status"] == "True" and new != "True":
        reason, msg = default["reason"], (default["message"] if new == "False" else message)
    elif current["status"] != "True" and new == "True":
        reason, msg = rule["reason"], message
    elif current["status"] != new:
        reason, msg = default["reason"], (default["message"] if new == "False" else message)
    elif new == "True" and (current["reason"] != rule["reason"] or (change and current["message"] != message)):
        reason, msg = rule["reason"], message
    else:
        return current
    return {"type": rule["condition"], "status": new, "reason": reason, "message": msg}


def _config() -> dict:
    return json.loads(CONFIG.read_text())


def _rule(cfg: dict) -> dict:
    (rule,) = [r for r in cfg["rules"] if r.get("condition") == "RDMAProblem"]
    return rule


def _host_args(rule: dict, root: Path, node_toml: Path) -> list[str]:
    """The rule's args with the DaemonSet's paths (/host, the ConfigMap's file) moved here."""
    args = list(rule["args"])
    args[args.index("--root") + 1] = str(root)
    args[args.index("--config") + 1] = str(node_toml)
    return args


@pytest.fixture(scope="module")
def node_toml(tmp_path_factory) -> Path:
    """The agent's ConfigMap (deploy/base), which the NPD DaemonSet mounts at /etc/rdmadoctor."""
    doc = yaml.safe_load((ROOT / "deploy" / "base" / "configmap.yaml").read_text())
    path = tmp_path_factory.mktemp("cfg") / "node.toml"
    path.write_text(doc["data"]["node.toml"])
    return path


@pytest.fixture(scope="module")
def hosts(tmp_path_factory) -> dict[str, Path]:
    """Example bundles unpacked as host roots (what /host is in the DaemonSet)."""
    out = {}
    for name in ("broken-pod", "hgx-h100-ib"):
        d = tmp_path_factory.mktemp(name)
        with tarfile.open(EXAMPLES / f"{name}.tar.gz") as tf:
            tf.extractall(d, filter="tar") if hasattr(tarfile, "data_filter") else tf.extractall(d)
        out[name] = d
    return out


# ---- the config, as NPD loads it -------------------------------------------------------------
def test_plugin_monitor_config_loads_as_npd_loads_it() -> None:
    cfg = _config()
    npd_validate(cfg)
    rule = _rule(cfg)
    assert rule["type"] == "permanent" and rule["reason"] == "RDMANotReady"
    assert cfg["pluginConfig"]["max_output_length"] == 80 and MAX_LEN < 80
    # The message follows the worst problem while the condition stays True.
    assert cfg["pluginConfig"]["enable_message_change_based_condition_update"] is True
    # The rule runs `check --format npd` on the node (not the NPD pod), through the image's venv.
    assert rule["path"] == "/opt/rdmadoctor/bin/rdmadoctor"
    from rdmadoctor.cli import fast

    assert rule["args"][0] == "check"
    parsed = fast.parse(rule["args"][1:])
    assert parsed is not None, "the rule's args are not all flags of `rdmadoctor check`"
    assert parsed.output_format == "npd" and parsed.scope == "node" and parsed.root == "/host"


def test_npd_validation_rejects_what_npd_rejects() -> None:
    """The validation above could fail: NPD refuses these configs."""
    cfg = _config()
    for broken in (
        {**cfg, "plugin": "other"},
        {**cfg, "conditions": []},
        {**cfg, "rules": [{**_rule(cfg), "timeout": "2m"}]},
        {**cfg, "pluginConfig": {**cfg["pluginConfig"], "timeout": "60"}},
    ):
        with pytest.raises((AssertionError, ValueError)):
            npd_validate(broken)


def test_npd_daemonset_runs_the_config_with_the_agents_host_view() -> None:
    """deploy/npd: NPD gets this config file, the ConfigMap the rule's --config names, and the
    agent's read-only host mounts under /host (the same hostPaths and mount paths)."""
    ds = yaml.safe_load((NPD / "daemonset.yaml").read_text())
    base = yaml.safe_load((ROOT / "deploy" / "base" / "daemonset.yaml").read_text())
    kust = yaml.safe_load((NPD / "kustomization.yaml").read_text())
    pod, bpod = ds["spec"]["template"]["spec"], base["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    agent = next(x for x in bpod["containers"] if x["name"] == "agent")
    assert c["image"] == agent["image"]

    def host_mounts(p: dict, container: dict) -> dict[str, tuple[str, str]]:
        vols = {v["name"]: v["hostPath"] for v in p["volumes"] if "hostPath" in v}
        return {
            m["mountPath"]: (vols[m["name"]]["path"], vols[m["name"]]["type"])
            for m in container["volumeMounts"]
            if m["name"] in vols and m["mountPath"].startswith("/host/") and m.get("readOnly")
        }

    assert host_mounts(pod, c) == host_mounts(bpod, agent) and len(host_mounts(pod, c)) >= 8
    assert not [m for m in c["volumeMounts"] if m["mountPath"].startswith("/host") and not m.get("readOnly")]
    assert c["securityContext"]["readOnlyRootFilesystem"] and c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    # The config file: generated into a ConfigMap, mounted at /config, named on the command line.
    (gen,) = kust["configMapGenerator"]
    assert gen["files"] == [CONFIG.name]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in pod["volumes"]}
    cm_vol = next(n for n, v in vols.items() if v.get("configMap", {}).get("name") == gen["name"])
    assert f"--config.custom-plugin-monitor={mounts[cm_vol]}/{CONFIG.name}" in c["command"]
    # The rule's --config is the agent's ConfigMap, mounted where the rule reads it.
    rule = _rule(_config())
    cfg_path = rule["args"][rule["args"].index("--config") + 1]
    agent_cm = next(n for n, v in vols.items() if v.get("configMap", {}).get("name") == "rdmadoctor-agent")
    assert cfg_path.startswith(mounts[agent_cm] + "/")
    # NPD's binary comes from NPD's image into an emptyDir, and is what the container runs.
    (init,) = pod["initContainers"]
    assert init["image"].startswith("registry.k8s.io/node-problem-detector/node-problem-detector:")
    assert init["command"][-1] == c["command"][0]
    assert any(e["name"] == "NODE_NAME" for e in c["env"])


def test_npd_kustomization_renders_and_validates() -> None:
    kubectl = shutil.which("kubectl")
    if not kubectl:
        pytest.skip("kubectl is not installed: the kustomization cannot be rendered")
    kv = pytest.importorskip("kubernetes_validate")
    proc = subprocess.run([kubectl, "kustomize", str(NPD)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    assert {d["kind"] for d in docs} == {"ServiceAccount", "ClusterRoleBinding", "ConfigMap", "DaemonSet"}
    for d in docs:
        kv.validate(d, kv.utils.latest_version(), strict=True)
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    assert json.loads(cm["data"][CONFIG.name]) == _config()
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    assert cm["metadata"]["name"] in {v.get("configMap", {}).get("name") for v in ds["spec"]["template"]["spec"]["volumes"]}


# ---- the contract, run as NPD runs it ----------------------------------------------------------
def test_contract_as_npd_runs_it(hosts: dict[str, Path], node_toml: Path) -> None:
    """The real rdmadoctor, run with the rule's own args, through a healthy node, a broken one,
    a node it cannot read, and back: the condition NPD would set at each step."""
    cfg = _config()
    rule = _rule(cfg)
    default = cfg["conditions"][0]
    cond = {"type": "RDMAProblem", "status": "False", "reason": default["reason"], "message": default["message"]}

    def step(root: Path) -> tuple[str, str]:
        nonlocal cond
        status, message = npd_run(cfg, rule, str(RDMADOCTOR), _host_args(rule, root, node_toml))
        cond = npd_condition(cfg, rule, cond, status, message)
        return status, message

    # Healthy: OK, the condition stays False with its default message.
    status, message = step(hosts["hgx-h100-ib"])
    assert status == "OK" and message.startswith("OK ready for RDMA")
    assert cond == {"type": "RDMAProblem", "status": "False", "reason": "RDMAReady", "message": default["message"]}
    # A port down: True, the rule's reason, rdmadoctor's line (whole: NPD did not have to cut it).
    status, message = step(hosts["broken-pod"])
    assert status == "NonOK" and message == "FAIL IB_PORT_DOWN mlx5_3/1"
    assert cond == {"type": "RDMAProblem", "status": "True", "reason": "RDMANotReady", "message": message}
    # Cannot read the node: Unknown, the message says why.
    status, message = step(Path("/no-such-root"))
    assert status == "Unknown" and message.startswith("UNKNOWN rdmadoctor: error: ") and "no-such-root" in message
    assert cond["status"] == "Unknown" and cond["reason"] == "RDMAReady" and cond["message"] == message
    # Fixed: back to False with the default message.
    step(hosts["hgx-h100-ib"])
    assert cond["status"] == "False" and cond["message"] == default["message"]


def test_contract_on_this_machine(node_toml: Path) -> None:
    """The live host, read through --root / as the DaemonSet reads /host: whatever this machine
    is, NPD gets a status it knows and one line under its limit."""
    cfg = _config()
    rule = _rule(cfg)
    proc = subprocess.run([str(RDMADOCTOR), *_host_args(rule, Path("/"), node_toml)], capture_output=True, timeout=120)
    assert proc.returncode in (0, 1, 2), proc.stderr
    out = proc.stdout.decode()
    assert out.endswith("\n") and out.count("\n") == 1 and len(out.strip().encode()) < 80
    word = {0: "OK", 1: "FAIL", 2: "UNKNOWN"}[proc.returncode]
    assert out.startswith(word + " ")
    if not Path("/sys/class/infiniband").is_dir() or not any(Path("/sys/class/infiniband").iterdir()):
        assert out.startswith("FAIL IB_NO_DEVICES ")


# ---- the line -----------------------------------------------------------------------------------
def _report(findings: list[dict], exit_code: int, **summary) -> dict:
    return {
        "status": {0: "pass", 1: "fail", 2: "unknown"}[exit_code],
        "exit_code": exit_code,
        "summary": {"pass": 5, "warn": 0, "fail": 0, "unknown": 0, "skip": 1, **summary},
        "checks": [{"id": "x", "findings": findings}],
    }


def _f(code: str, severity: str = "error", subject: str = "s", cause: str | None = None) -> dict:
    f = {"code": code, "severity": severity, "subject": subject, "message": "m"}
    if cause:
        f["cause"] = cause
    return f


def test_worst_first() -> None:
    rep = _report([_f("VERBS_PKG_MISSING", "warning"), _f("GPU_NIC_UNKNOWN", "unknown"), _f("IB_PORT_DOWN", subject="mlx5_3/1")], 1)
    assert npd_line(rep) == "FAIL IB_PORT_DOWN mlx5_3/1; also GPU_NIC_UNKNOWN"
    # A root cause before what follows from it, which is folded under it.
    rep = _report([_f("MOD_MISSING", subject="ib_uverbs", cause="IB_NO_DEVICES"), _f("IB_NO_DEVICES", subject="host")], 1)
    assert npd_line(rep) == "FAIL IB_NO_DEVICES host"
    # A follower whose cause is not in the report stays, after the root causes.
    rep = _report([_f("MOD_MISSING", subject="ib_uverbs", cause="OTHER"), _f("SHM_TOO_SMALL", subject="/dev/shm")], 1)
    assert npd_line(rep) == "FAIL SHM_TOO_SMALL /dev/shm; also MOD_MISSING"
    # Unknown: exit 2.
    rep = _report([_f("MEMLOCK_UNREADABLE", "unknown", "memlock"), _f("VERBS_PKG_MISSING", "warning")], 2)
    assert npd_line(rep) == "UNKNOWN MEMLOCK_UNREADABLE memlock"
    # --strict: a warning is what failed.
    rep = _report([_f("VERBS_PKG_MISSING", "warning", "perftest")], 1)
    assert npd_line(rep) == "FAIL VERBS_PKG_MISSING perftest"
    # The same code on several subjects is counted.
    rep = _report([_f("IB_PORT_DOWN", subject=f"mlx5_{i}/1") for i in range(3)], 1)
    assert npd_line(rep) == "FAIL IB_PORT_DOWN mlx5_0/1 (+2)"


def test_ok_lines() -> None:
    assert npd_line(_report([], 0)) == "OK ready for RDMA: 5 pass, 1 skipped"
    line = npd_line(_report([_f("VERBS_PKG_MISSING", "warning", "perftest")], 0, warn=1))
    assert line == "OK ready for RDMA: 6 pass, 1 skipped; warning VERBS_PKG_MISSING perftest"


def test_long_lists_are_cut_at_a_code_with_a_count() -> None:
    codes = [f"SOME_LONG_PROBLEM_CODE_{i}" for i in range(9)]
    line = npd_line(_report([_f(c, subject="x" * 10) for c in codes], 1))
    assert line == "FAIL SOME_LONG_PROBLEM_CODE_0 xxxxxxxxxx; also SOME_LONG_PROBLEM_CODE_1 +7"
    # A long subject is cut; when no other code fits, the count alone is left.
    line = npd_line(_report([_f(c, subject="x" * 60) for c in codes], 1))
    assert len(line) <= MAX_LEN
    assert line == "FAIL SOME_LONG_PROBLEM_CODE_0 " + "x" * 21 + "...; +8 more"


def test_names_from_the_node_are_made_ascii() -> None:
    rep = _report([_f("IB_PORT_DOWN", subject="m\x1b[31m\n\u00e9\u2603")], 1)
    line = npd_line(rep)
    assert line == "FAIL IB_PORT_DOWN m\\x1b[31m \\xe9\\u2603"
    assert line.isascii() and line.isprintable()
    assert ascii_text("a\tb  c") == "a b c"
    assert npd_error_line("root /x\ny is not a directory" + "z" * 100).startswith("UNKNOWN rdmadoctor: error: root /x y")


def test_line_is_always_one_short_ascii_line() -> None:
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies

    finding = st.fixed_dictionaries(
        {
            "code": st.text(min_size=1, max_size=40),
            "severity": st.sampled_from(["error", "unknown", "warning", "info"]),
            "subject": st.text(max_size=80),
        },
        optional={"cause": st.text(max_size=10)},
    )

    @hypothesis.given(st.lists(finding, max_size=12), st.sampled_from([0, 1, 2]))
    @hypothesis.settings(max_examples=300, deadline=None)
    def check(findings: list[dict], code: int) -> None:
        line = npd_line(_report(findings, code))
        assert 0 < len(line) <= MAX_LEN and line.isascii() and line.isprintable()
        assert line.split(" ", 1)[0] == {0: "OK", 1: "FAIL", 2: "UNKNOWN"}[code]

    check()


# ---- the command line ----------------------------------------------------------------------------
def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(RDMADOCTOR), *args], capture_output=True, text=True, timeout=120)


def test_format_npd_fast_path_and_typer_agree() -> None:
    from rdmadoctor.cli import fast as fastpath

    assert fastpath.parse(["--example", "broken-pod", "--format", "npd"]) is not None
    fast = _cli("check", "--example", "broken-pod", "--format", "npd")
    assert fast.returncode == 1 and fast.stdout == "FAIL IB_PORT_DOWN mlx5_3/1; also MEMLOCK_LIMITED CAP_IPC_LOCK_MISSING +1\n"
    from typer.testing import CliRunner

    from rdmadoctor.cli.app import app

    res = CliRunner().invoke(app, ["check", "--example", "broken-pod", "--format", "npd"])
    assert res.exit_code == 1 and res.stdout == fast.stdout


def test_format_errors() -> None:
    bad = _cli("check", "--example", "broken-pod", "--format", "yaml")
    assert bad.returncode == 2 and bad.stdout == "" and "--format yaml: expected one of text, json, npd" in bad.stderr
    both = _cli("check", "--example", "broken-pod", "--format", "npd", "--json")
    assert both.returncode == 2 and "--json and --format npd" in both.stderr
    js = _cli("check", "--example", "broken-pod", "--format", "json")
    assert js.returncode == 1 and json.loads(js.stdout)["exit_code"] == 1
    # A usage error in npd format: one stdout line for NPD's message, the usual lines on stderr.
    err = _cli("check", "--format", "npd", "--root", "/no/such/root")
    assert err.returncode == 2 and err.stdout.startswith("UNKNOWN rdmadoctor: error: ") and err.stdout.count("\n") == 1
    assert err.stderr.startswith("rdmadoctor: error: ")
