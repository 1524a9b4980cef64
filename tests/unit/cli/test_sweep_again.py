"""The second adversarial sweep of the command line (after the first one's fixes): what it still
found, each case run as a person would, in a real process."""

from __future__ import annotations

import gzip
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE_LOG = Path(__file__).parents[2] / "fixtures" / "logs" / "nccl-1052-roce-hca-2.18.5.log"


def cli(*args: str, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    e = {**os.environ, "RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "rdmadoctor", *args], capture_output=True, text=True, env=e, timeout=120, **kw)


def test_run_shows_a_command_with_an_escape_sequence_escaped(tmp_path):
    script = tmp_path / "s\x1b[31mX.sh"
    script.write_text("#!/bin/sh\nexit 3\n")
    script.chmod(0o755)
    p = cli("run", "--example", "hgx-h100-ib", "--", str(script))
    assert p.returncode == 3, p.stderr
    assert "\x1b" not in p.stderr and "\\x1b[31mX.sh" in p.stderr  # "running ..." and "... exited with status 3"


def test_preflight_exec_of_a_missing_interpreter_with_an_escape_sequence_is_escaped(tmp_path):
    script = tmp_path / "m.sh"
    script.write_text("#!/nonexistent/\x1b[31minterp\n")
    script.chmod(0o755)
    p = cli("preflight", "--example", "hgx-h100-ib", "--exec", "--", str(script))
    assert p.returncode == 127, p.stderr
    assert "\x1b" not in p.stderr + p.stdout and "\\x1b[31minterp" in p.stderr


def test_the_master_address_is_shown_escaped_while_waiting():
    p = cli("preflight", "--example", "hgx-h100-ib", "--wait-for-master", "--master-timeout", "1",
            "--master-addr", "h\x1b]0;T\x07.invalid")
    assert p.returncode == 1, p.stderr  # never resolved: NO-GO
    assert "\x1b" not in p.stderr + p.stdout and "\x07" not in p.stderr and "\\x1b]0;T\\x07" in p.stderr


@pytest.mark.parametrize("value, name, port", [
    ("tcp://127.0.0.1:29511", "127.0.0.1", "29511"),
    ("tcp://[::1]:80", "::1", "80"),
    ("env://node0", "node0", "PORT"),
])
def test_a_master_address_given_as_a_url_is_a_usage_error(value, name, port):
    # torch's init_method takes tcp://HOST:PORT; MASTER_ADDR takes the host alone. It was taken
    # for an IPv6 host and waited for until the timeout (NO-GO, exit 1).
    p = cli("preflight", "--example", "hgx-h100-ib", "--wait-for-master", "--master-timeout", "60", "--master-addr", value)
    assert p.returncode == 2 and "is a URL" in p.stderr and f"--master-addr {name} --master-port {port}" in p.stderr, p.stderr
    p = cli("preflight", "--example", "hgx-h100-ib", "--wait-for-master", "--master-timeout", "60", env={"MASTER_ADDR": value})
    assert p.returncode == 2 and f"MASTER_ADDR {value!r} is a URL" in p.stderr, p.stderr


def test_diagnose_with_an_empty_root_is_a_usage_error():
    p = cli("diagnose", str(FIXTURE_LOG), "--root", "")
    assert p.returncode == 2 and "--root is empty" in p.stderr, p.stderr
    p = cli("diagnose", str(FIXTURE_LOG), "--root", "", "--live")
    assert p.returncode == 2 and "--root is empty" in p.stderr, p.stderr


@pytest.mark.parametrize("args, said", [
    (["label", "--example", "hgx-h100-ib", "--publish", "nfd", "--features-dir", ""], "--features-dir is empty"),
    (["label", "--example", "hgx-h100-ib", "--publish", "node", "--node", "n1", "--kubeconfig", ""], "--kubeconfig is empty"),
    (["label", "--example", "hgx-h100-ib", "--publish", "node", "--node", ""], "--node is empty"),
    (["agent", "--once", "--metrics-port", "0", "--example", "hgx-h100-ib", "--publish", "nfd", "--features-dir", ""], "--features-dir is empty"),
    (["agent", "--once", "--metrics-port", "0", "--example", "hgx-h100-ib", "--publish", "node", "--node", ""], "--node is empty"),
    (["preflight", "--example", "hgx-h100-ib", "--wait-for-master", "--master-timeout", "60", "--master-addr", ""], "--master-addr is empty"),
])
def test_empty_publish_and_master_options_are_usage_errors(args, said):
    # Each fell back to a default or the environment: the default features.d, $NODE_NAME's node,
    # the in-cluster credentials, $MASTER_ADDR.
    p = cli(*args, env={"NODE_NAME": "from-env", "MASTER_ADDR": "10.0.0.9"})
    assert p.returncode == 2 and said in p.stderr, p.stderr
    assert "from-env" not in p.stderr + p.stdout and "10.0.0.9" not in p.stderr


def test_agent_once_whose_stdout_reader_left_exits_2():
    # The publish to stdout failed (logged): --once says so in its exit status, as its help does.
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([sys.executable, "-m", "rdmadoctor", "agent", "--once", "--metrics-port", "0", "--example", "hgx-h100-ib",
                            "--publish", "stdout"], stdout=w, stderr=subprocess.PIPE, text=True, timeout=120,
                           env={**os.environ, "RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"})
    finally:
        os.close(w)
    assert p.returncode == 2 and "publish failed" in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_agent_once_whose_report_file_cannot_be_written_exits_2(tmp_path):
    # RLIMIT_FSIZE: writing the report fails with EFBIG (Python ignores SIGXFSZ); stdout is a pipe.
    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (16, 16))

    report = tmp_path / "r.json"
    p = cli("agent", "--once", "--metrics-port", "0", "--example", "hgx-h100-ib", "--publish", "stdout",
            "--report-file", str(report), preexec_fn=small_files)
    assert p.returncode == 2 and "cannot write the report file" in p.stderr, p.stderr
    p = cli("agent", "--once", "--metrics-port", "0", "--example", "hgx-h100-ib", "--publish", "stdout", "--report-file", str(report))
    assert p.returncode == 0 and report.stat().st_size > 16, p.stderr


def test_collect_of_a_gzip_cut_before_any_byte_stops(tmp_path):
    whole = gzip.compress(FIXTURE_LOG.read_bytes())
    (tmp_path / "t.gz").write_bytes(whole[:12])  # the gzip header: no byte of the log
    out = tmp_path / "b.tar.gz"
    p = cli("collect", "-o", str(out), "--log", str(tmp_path / "t.gz"), cwd=tmp_path)
    assert p.returncode == 2 and "nothing before it could be read" in p.stderr, p.stderr
    assert not out.exists()  # nothing the user asked for would have been in it
