"""Inputs from the adversarial sweep: a --config that is not a file (or too big), a kubeconfig of
the wrong shape, an unreadable sysfs, empty option values, a --bundle that is a device, a NaN
--set and a --master-addr holding a port. Each is a usage error or a finding that says what was
seen and what to do; none is a traceback, an OOM or a silent default.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import run_cli

from rdmadoctor.engine import expectations


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rdmadoctor", *args], stdin=subprocess.DEVNULL, capture_output=True,
        text=True, timeout=timeout, env={**os.environ, **(env or {})},
    )


# --- 1. --config: capped, a regular file only -------------------------------------------------

@pytest.mark.parametrize("command", [
    ["check", "--example", "broken-pod"],
    ["preflight", "--example", "broken-pod"],
    ["label", "--example", "broken-pod"],
    ["agent", "--example", "broken-pod", "--once", "--metrics-port", "0"],
    ["diagnose", "--example", "broken-pod"],
])
def test_config_dev_zero_is_a_usage_error_not_an_oom(command):
    # Before: read whole (OOM-killed after a minute; MemoryError under a ulimit).
    code, out, err = run_cli([*command, "--config", "/dev/zero"])
    assert code == 2, err
    assert "config /dev/zero is a character device, not a file" in err
    assert "Traceback" not in err


def test_config_run_dev_zero_in_a_process():
    p = cli("run", "--example", "broken-pod", "--config", "/dev/zero", "--", sys.executable, "-c", "pass")
    assert p.returncode == 2, p.stderr
    assert "character device" in p.stderr and "Traceback" not in p.stderr


def test_config_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "cfg.toml"
    os.mkfifo(fifo)
    p = cli("check", "--example", "broken-pod", "--config", str(fifo), timeout=60)
    assert p.returncode == 2
    assert f"config {fifo} is a FIFO (named pipe), not a file" in p.stderr


def test_config_directory_is_said(tmp_path):
    code, _, err = run_cli(["check", "--example", "broken-pod", "--config", str(tmp_path)])
    assert code == 2
    assert f"config {tmp_path} is a directory" in err


def test_config_over_the_cap_names_the_file_and_the_cap(tmp_path):
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * (expectations.CONFIG_MAX_BYTES + 1))
    code, _, err = run_cli(["check", "--example", "broken-pod", "--config", str(big)])
    assert code == 2
    assert f"config {big} is larger than 1 MiB" in err


def test_config_at_the_cap_is_read(tmp_path):
    cfg = tmp_path / "ok.toml"
    body = b"min_rate_gbps = 100\n"
    cfg.write_bytes(body + b"#" * (expectations.CONFIG_MAX_BYTES - len(body)))
    assert expectations.resolve({}, config=str(cfg))["min_rate_gbps"] == 100


# --- 2. a kubeconfig of the wrong shape --------------------------------------------------------

LABEL = ["label", "--example", "hgx-h100-ib", "--publish", "node", "--node", "n1"]


@pytest.mark.parametrize("body, said", [
    ("", "not a kubeconfig (the file is empty"),
    ("- 1\n", "not a kubeconfig (a YAML list at the top level"),
    ("clusters: 5\n", "not a kubeconfig (clusters: is a number, expected a list"),
    ("clusters: []\n", "not a kubeconfig (no contexts: list"),
    ("clusters: [5]\ncontexts: []\n", "not a kubeconfig (clusters[0] is a number"),
    ("clusters: [{name: c, cluster: x}]\ncontexts: []\n", "not a kubeconfig (clusters[0] ('c') has no cluster: mapping, its cluster: is a string)"),
    ("a: [\n", "not a kubeconfig (not valid YAML: "),
    ("clusters: [{name: c, cluster: {server: [1]}}]\ncontexts: []\n", "not a kubeconfig (ValidationError"),
])
def test_kubeconfig_of_the_wrong_shape_says_what_is_wrong(tmp_path, body, said):
    pytest.importorskip("lightkube")
    conf = tmp_path / "kc.yaml"
    conf.write_text(body)
    code, _, err = run_cli([*LABEL, "--kubeconfig", str(conf)])
    assert code == 2, err
    assert f"cannot load Kubernetes credentials from {conf}: {said}" in err, err
    assert "Traceback" not in err and "AttributeError" not in err and "TypeError" not in err


def test_kubeconfig_env_empty_file(tmp_path, monkeypatch):
    pytest.importorskip("lightkube")
    conf = tmp_path / "empty.yaml"
    conf.write_text("")
    monkeypatch.setenv("KUBECONFIG", str(conf))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    code, _, err = run_cli(LABEL)
    assert code == 2, err
    assert f"cannot load Kubernetes credentials from $KUBECONFIG={conf}: not a kubeconfig (the file is empty" in err


@pytest.mark.parametrize("path, said", [("/dev/null", "it is a character device, not a kubeconfig file"),
                                        (None, "it is a directory, not a kubeconfig file")])
def test_kubeconfig_that_is_no_file_says_what_it_is(tmp_path, path, said):
    pytest.importorskip("lightkube")
    path = path or str(tmp_path)
    code, _, err = run_cli([*LABEL, "--kubeconfig", path])
    assert code == 2, err
    assert f"cannot load Kubernetes credentials from {path}: {said}" in err
    assert "not found" not in err


def test_agent_with_an_empty_kubeconfig_logs_the_reason_not_an_internal_error(tmp_path):
    pytest.importorskip("lightkube")
    conf = tmp_path / "empty.yaml"
    conf.write_text("")
    p = cli("agent", "--example", "hgx-h100-ib", "--once", "--metrics-port", "0", "--publish", "node",
            "--node", "n1", "--kubeconfig", str(conf))
    assert p.returncode == 2, p.stderr
    logs = p.stdout + p.stderr
    assert "not a kubeconfig (the file is empty" in logs
    assert "internal error" not in logs


# --- 3. an unreadable /sys/class/infiniband is unknown, not "no devices" -----------------------

def _example_dir(tmp_path, name="hgx-h100-ib"):
    import tarfile

    from rdmadoctor.examples import example_path

    out = tmp_path / "b"
    out.mkdir()
    with tarfile.open(example_path(name)) as t:
        kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        t.extractall(out, **kw)  # our own example
    return out


def _findings(rep: dict, check_id: str) -> list[dict]:
    (c,) = [c for c in rep["checks"] if c["id"] == check_id]
    return c["findings"]


def test_unlistable_infiniband_class_is_unknown_with_the_reason(tmp_path):
    from rdmadoctor.host import open_host
    from rdmadoctor.runner import Options, diagnose

    host = open_host(bundle=str(_example_dir(tmp_path)))
    real = host._tree.listdir

    def listdir(path):
        if path == "/sys/class/infiniband":
            raise PermissionError(13, "Permission denied")
        return real(path)

    host._tree.listdir = listdir
    rep = diagnose(Options(), host=host).report
    codes = [(f["code"], f["severity"]) for f in _findings(rep, "ib.devices")]
    assert codes == [("RDMA_INVENTORY_UNKNOWN", "unknown")], codes
    (f,) = _findings(rep, "ib.devices")
    assert "sys/class/infiniband" in f["message"] and "Permission denied" in f["message"]
    assert host.unlisted == {"/sys/class/infiniband": "Permission denied"}
    assert "IB_NO_DEVICES" not in {f["code"] for c in rep["checks"] for f in c["findings"]}


def test_absent_infiniband_class_is_still_no_devices(tmp_path):
    import shutil

    from rdmadoctor.host import open_host
    from rdmadoctor.runner import Options, diagnose

    root = _example_dir(tmp_path)
    shutil.rmtree(root / "sys/class/infiniband")
    host = open_host(bundle=str(root))
    rep = diagnose(Options(), host=host).report
    assert "IB_NO_DEVICES" in {f["code"] for f in _findings(rep, "ib.devices")}
    assert host.unlisted == {}


def test_unreadable_infiniband_class_in_a_real_process(tmp_path):
    import shutil

    root = _example_dir(tmp_path)
    ib = root / "sys/class/infiniband"
    os.chmod(ib, 0)
    try:
        argv = [sys.executable, "-m", "rdmadoctor", "check", "--json", "--bundle", str(root)]
        if os.geteuid() == 0:
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                pytest.skip("root reads a mode-000 folder; setpriv is needed to drop CAP_DAC_OVERRIDE")
            argv = [setpriv, "--bounding-set", "-dac_override,-dac_read_search", *argv]
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    finally:
        os.chmod(ib, 0o755)
    import json

    rep = json.loads(p.stdout)
    codes = {f["code"] for f in _findings(rep, "ib.devices")}
    if codes != {"RDMA_INVENTORY_UNKNOWN"} and "IB_NO_DEVICES" not in codes:
        pytest.skip("this process could still list the folder")
    assert codes == {"RDMA_INVENTORY_UNKNOWN"}, p.stdout[:2000]
    assert "Permission denied" in _findings(rep, "ib.devices")[0]["message"]


def test_root_without_sys_says_mount_not_bundle(tmp_path):
    code, out, err = run_cli(["check", "--json", "--root", str(tmp_path)])
    import json

    rep = json.loads(out)
    (f,) = _findings(rep, "ib.devices")
    assert f["code"] == "RDMA_INVENTORY_UNKNOWN"
    assert f"no /sys under {tmp_path}" in f["message"] and "bundle" not in f["message"], f["message"]
    assert "mount the host's /sys" in f["message"]


# --- 5. an empty option value is a usage error, not "not given" --------------------------------

@pytest.mark.parametrize("option", ["--example", "--root", "--bundle", "--config", "--pool"])
def test_check_empty_value_is_a_usage_error(option):
    code, out, err = run_cli(["check", "--json", option, ""])
    assert code == 2, err
    assert f"rdmadoctor: error: {option} is empty" in err
    assert out == ""  # nothing was checked (before: the live machine, or the defaults)


@pytest.mark.parametrize("args, said", [
    (["check", "--example", "broken-pod", "--profile", ""], "--profile is empty"),
    (["check", "--example", "broken-pod", "--scope", ""], "--scope is empty"),
    (["check", "--example", "broken-pod", "--format", ""], "--format is empty"),
    (["preflight", "--example", "broken-pod", "--profile", ""], "--profile is empty"),
    (["preflight", "--example", "broken-pod", "--only", ""], "--only is empty"),
    (["label", "--example", "broken-pod", "--publish", "stdout", "--profile", ""], "--profile is empty"),
])
def test_an_empty_profile_scope_format_or_gate_selection_is_a_usage_error(args, said):
    # These fell back to their defaults (generic, all, text, every gated check) and said nothing.
    code, out, err = run_cli(args)
    assert code == 2 and said in err, err
    assert out == ""


@pytest.mark.parametrize("command", [
    ["preflight"], ["label"], ["agent", "--once", "--metrics-port", "0"],
])
def test_other_commands_refuse_an_empty_example(command):
    code, _, err = run_cli([*command, "--example", ""])
    assert code == 2, err
    assert "--example is empty" in err


def test_run_refuses_an_empty_example():
    p = cli("run", "--example", "", "--", sys.executable, "-c", "print('ran')")
    assert p.returncode == 2, p.stderr
    assert "--example is empty" in p.stderr and "ran" not in p.stdout


def test_diagnose_with_a_log_refuses_an_empty_config(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n")
    code, _, err = run_cli(["diagnose", str(log), "--example", "broken-pod", "--config", ""])
    assert code == 2, err
    assert "--config is empty" in err


@pytest.mark.parametrize("value", ["", ","])
def test_only_naming_nothing_is_a_usage_error(value):
    code, _, err = run_cli(["check", "--example", "broken-pod", "--only", value])
    assert code == 2, err
    assert "--only is empty: it names no check" in err


def test_empty_skip_skips_nothing():
    import json

    a = run_cli(["check", "--json", "--example", "broken-pod", "--skip", ""])
    b = run_cli(["check", "--json", "--example", "broken-pod"])
    assert a[0] == b[0] and a[2] == ""

    def without_time(out: str) -> dict:  # the two runs may straddle a second
        rep = json.loads(out)
        rep.pop("time")
        return rep

    assert without_time(a[1]) == without_time(b[1])


# --- 4. --bundle that is a device or a FIFO says so ----------------------------------------------

@pytest.mark.parametrize("path, said", [("/dev/null", "a character device"), ("/dev/zero", "a character device")])
def test_bundle_that_is_a_device_says_what_it_is(path, said):
    code, _, err = run_cli(["check", "--bundle", path])
    assert code == 2
    assert f"bundle {path} is {said}, not a bundle" in err
    assert "does not exist" not in err


def test_bundle_that_is_a_fifo_says_so(tmp_path):
    fifo = tmp_path / "b.tar.gz"
    os.mkfifo(fifo)
    p = cli("check", "--bundle", str(fifo), timeout=60)
    assert p.returncode == 2
    assert f"bundle {fifo} is a FIFO (named pipe), not a bundle" in p.stderr


def test_missing_bundle_still_does_not_exist(tmp_path):
    code, _, err = run_cli(["check", "--bundle", str(tmp_path / "nope.tar.gz")])
    assert code == 2 and "does not exist" in err


# --- 6. --set KEY=nan is a number that is not finite, not "a string in quotes" ------------------

@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "Infinity"])
def test_set_nan_or_inf_is_not_a_finite_number(value):
    with pytest.raises(expectations.ConfigError) as e:
        expectations.resolve({}, overrides=expectations.parse_set([f"min_rate_gbps={value}"]))
    # NaN and Infinity are read by Python's JSON (as nan, inf); nan and inf were kept as text.
    shown = {"NaN": "nan", "Infinity": "inf"}.get(value, value)
    assert f"--set min_rate_gbps: {shown} is not a finite number" in str(e.value)
    assert "in quotes" not in str(e.value)


def test_set_nan_on_the_command_line():
    code, _, err = run_cli(["check", "--example", "broken-pod", "--set", "min_rate_gbps=nan"])
    assert code == 2
    assert "--set min_rate_gbps: nan is not a finite number" in err and "in quotes" not in err


def test_set_quoted_nan_is_still_a_string_in_quotes():
    with pytest.raises(expectations.ConfigError) as e:
        expectations.resolve({}, overrides=expectations.parse_set(['min_rate_gbps="nan"']))
    assert "is a string (in quotes)" in str(e.value)


def test_set_bare_nan_for_a_text_key_is_still_text():
    # A list of names may hold any name; the finite-number wording is for number keys only.
    got = expectations.resolve({}, overrides=expectations.parse_set(["compute_hcas=inf"]))
    assert got["compute_hcas"] == ["inf"]


# --- 7. --master-addr with a port; rank 0 without MASTER_ADDR -----------------------------------

@pytest.mark.parametrize("addr, host, port", [("127.0.0.1:80", "127.0.0.1", "80"), ("[fd00::5]:80", "fd00::5", "80"),
                                              ("job-master-0:29500", "job-master-0", "29500")])
def test_master_addr_with_a_port_is_a_usage_error(addr, host, port):
    from rdmadoctor.preflight.errors import PreflightError
    from rdmadoctor.preflight.master import find_master

    with pytest.raises(PreflightError) as e:
        find_master({}, master_addr=addr, hostname="x")
    assert f"--master-addr {addr!r} holds a port" in str(e.value)
    assert f"--master-addr {host} --master-port {port}" in e.value.hint


def test_master_addr_env_with_a_port_is_refused_too():
    from rdmadoctor.preflight.errors import PreflightError
    from rdmadoctor.preflight.master import find_master

    with pytest.raises(PreflightError) as e:
        find_master({"MASTER_ADDR": "10.0.0.1:29500"}, hostname="x")
    assert "MASTER_ADDR '10.0.0.1:29500' holds a port" in str(e.value)
    assert "MASTER_PORT=29500" in e.value.hint


@pytest.mark.parametrize("addr, endpoint", [("fd00::5", "[fd00::5]:29500"), ("[fd00::5]", "[fd00::5]:29500"), ("h", "h:29500")])
def test_master_addr_without_a_port_is_unchanged(addr, endpoint):
    from rdmadoctor.preflight.master import find_master

    assert find_master({}, master_addr=addr, hostname="x").endpoint == endpoint


def test_master_addr_with_a_port_on_the_command_line():
    code, _, err = run_cli(["preflight", "--example", "hgx-h100-ib", "--wait-for-master", "--master-addr", "127.0.0.1:80",
                          "--master-timeout", "1"])
    assert code == 2
    assert "holds a port" in err and "[127.0.0.1:80]" not in err


def test_rank0_without_master_addr_passes():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTER_", "PET_", "VC_"))}
    env.update(RANK="0")
    p = subprocess.run(
        [sys.executable, "-m", "rdmadoctor", "preflight", "--example", "hgx-h100-ib", "--wait-for-master", "--json"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, env=env,
    )
    assert p.returncode == 0, p.stderr
    import json

    master = json.loads(p.stdout)["master"]
    assert master["rank0"] == "RANK=0" and master["host"] is None and master["wait"] is None


def test_not_rank0_without_master_addr_is_still_an_error():
    from rdmadoctor.preflight.errors import PreflightError
    from rdmadoctor.preflight.master import find_master

    with pytest.raises(PreflightError, match="no MASTER_ADDR"):
        find_master({"RANK": "1"}, hostname="x")
