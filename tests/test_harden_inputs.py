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
