"""rdmadoctor preflight: the verdict on the example bundles, exec in the same process, and
--wait-for-master against real sockets on loopback (real processes: what an init container runs)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading

import pytest
from conftest import run_cli

from rdmadoctor import preflight as pf

# What the job's environment may carry that changes where (or whether) preflight waits.
JOB_ENV = ("MASTER_ADDR", "MASTER_PORT", "PET_MASTER_ADDR", "PET_MASTER_PORT", "RANK", "NODE_RANK",
           "PET_NODE_RANK", "GROUP_RANK", "WORLD_SIZE", "VC_TASK_INDEX", "VK_TASK_INDEX", "NO_COLOR")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in JOB_ENV and not (k.startswith("VC_") and k.endswith("_HOSTS"))}
    env["RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env.update(extra)
    return env


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rdmadoctor", "preflight", *args],
        env=env if env is not None else clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class Listener:
    """A TCP listener on 127.0.0.1 that accepts in the background and records who connected."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted: list[str] = []
        self.got = threading.Event()  # set at the first accepted connection
        self.stop = threading.Event()

    def start(self, delay: float = 0.0) -> None:
        """Listen now, or after ``delay`` seconds (until then a connect is refused)."""

        def serve() -> None:
            if self.stop.wait(delay):
                return
            self.sock.listen(16)
            self.sock.settimeout(0.1)
            while not self.stop.is_set():
                try:
                    conn, peer = self.sock.accept()
                except OSError:
                    continue
                self.accepted.append(peer[0])
                self.got.set()
                conn.close()

        threading.Thread(target=serve, daemon=True).start()


@pytest.fixture
def listener():
    srv = Listener()
    yield srv
    srv.stop.set()
    srv.sock.close()


@pytest.fixture
def closed_port():
    """A port on 127.0.0.1 that is bound (so nobody else takes it) but never listens: refused."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    yield s.getsockname()[1]
    s.close()


# --- the verdict on the example bundles -------------------------------------------------------


def test_go_on_healthy_hgx_with_its_profile():
    r = cli("--example", "hgx-h100-ib", "--profile", "hgx-8gpu-ndr")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "rdmadoctor preflight: GO"
    assert "hgx-h100-017" in lines[1] and "profile hgx-8gpu-ndr" in lines[1]
    # The IB node has no RoCE and no iWARP port: roce.config and iwarp.config are skipped, the other eight pass.
    assert "10 checks (8 passed, 2 skipped); 0 problems, 0 warnings" in lines[1]
    assert "problem" not in r.stdout.split("\n", 2)[2]
    assert "\x1b[" not in r.stdout  # no colour when not a terminal
    assert r.stderr == ""


def test_json_verdict_runs_the_pod_checks_only():
    r = cli("--example", "hgx-h100-ib", "--profile", "hgx-8gpu-ndr", "--json")
    assert r.returncode == 0
    doc = json.loads(r.stdout)
    assert doc["schema"] == "rdmadoctor.preflight/v1"
    assert doc["verdict"] == "go" and doc["exit_code"] == 0
    from rdmadoctor.engine.registry import load_checks

    # The checks that declare gate=True, and only those: no list of ids to keep in step.
    checks, _ = load_checks()
    assert doc["checks"] == [c.id for c in checks if c.gate]
    assert len(doc["checks"]) == 10
    assert "node.labels" not in doc["checks"] and "pci.link" not in doc["checks"]
    assert doc["problems"] == [] and doc["pod_spec_yaml"] is None and doc["master"] is None
    assert doc["report"]["schema"] == "rdmadoctor.report/v1"
    assert doc["report"]["profile"] == "hgx-8gpu-ndr"


BROKEN_CODES = {"IB_PORT_DOWN", "MEMLOCK_LIMITED", "CAP_IPC_LOCK_MISSING", "SHM_TOO_SMALL"}


def test_no_go_on_broken_pod_with_the_yaml_to_add():
    r = cli("--example", "broken-pod")
    assert r.returncode == 1
    out = r.stdout
    assert out.splitlines()[0] == "rdmadoctor preflight: NO-GO"
    for code in BROKEN_CODES:
        assert f": {code} " in out, code
    # What was seen and what was expected, from the findings.
    assert "memlock soft limit 64 KiB (hard 64 KiB); expected unlimited" in out
    assert "/dev/shm is 64 MiB" in out and "expected at least 1 GiB" in out
    assert "state DOWN, phys Polling" in out
    # The exact YAML for the pod spec, once, merged.
    assert 'add: ["IPC_LOCK"]' in out
    assert "emptyDir: {medium: Memory, sizeLimit: 16Gi}" in out
    assert "- {name: dshm, mountPath: /dev/shm}" in out
    assert out.count('add: ["IPC_LOCK"]') == 1  # MEMLOCK_LIMITED and CAP_IPC_LOCK_MISSING share it
    # The port is a node repair: its remedy is printed, nothing goes into the pod spec for it.
    assert "reseat the cable" in out
    assert "rdma/hca" not in out
    assert "\x1b[" not in out


def test_no_go_yaml_block_is_valid_yaml_of_a_pod_spec():
    yaml = pytest.importorskip("yaml")
    r = cli("--example", "broken-pod", "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "no-go"
    assert {p["code"] for p in doc["problems"]} == BROKEN_CODES
    assert doc["pod_spec"] == {"ipc_lock": True, "rdma_device": False, "shm_size_limit": "16Gi", "env": {}}
    spec = yaml.safe_load(doc["pod_spec_yaml"])["spec"]
    c = spec["containers"][0]
    assert c["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    assert c["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
    assert spec["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}]
    # The text output prints the same YAML.
    text = cli("--example", "broken-pod").stdout
    assert "\n".join("  " + line for line in doc["pod_spec_yaml"].rstrip("\n").splitlines()) in text


def test_shm_size_limit_follows_a_larger_expectation():
    r = cli("--example", "broken-pod", "--set", f"shm_min_bytes={40 * 1024**3}", "--json")
    doc = json.loads(r.stdout)
    assert doc["pod_spec"]["shm_size_limit"] == "40Gi"


def test_expect_hcas_and_min_rate_override_the_profile():
    # hgx-h100-ib has 10 HCAs (8 compute at 400 Gb/s, a storage NIC pair at 400).
    r = cli("--example", "hgx-h100-ib", "--profile", "hgx-8gpu-ndr", "--expect-hcas", "12", "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    nodev = [p for p in doc["problems"] if p["code"] == "IB_DEVICE_COUNT_LOW"]
    assert len(nodev) == 1 and "expects 12" in nodev[0]["message"]
    # Fewer HCAs than expected is a node repair: no rdma/hca request in the YAML.
    assert doc["pod_spec_yaml"] is None
    assert cli("--example", "hgx-h100-ib", "--expect-hcas", "10").returncode == 0

    r = cli("--example", "hgx-h100-ib", "--min-rate", "800", "--json")
    assert r.returncode == 1
    low = {p["subject"] for p in json.loads(r.stdout)["problems"] if p["code"] == "IB_PORT_RATE_LOW"}
    assert "mlx5_0/1" in low
    # The flag wins over a --set of the same expectation.
    assert cli("--example", "hgx-h100-ib", "--set", "min_rate_gbps=800", "--min-rate", "400").returncode == 0


def test_usage_errors_exit_2():
    for args in (["--example", "no-such"], ["--example", "hgx-h100-ib", "--master-timeout", "-1"],
                 ["--example", "hgx-h100-ib", "--timeout", "0"], ["--example", "hgx-h100-ib", "--job-uid", "-5"],
                 ["--example", "hgx-h100-ib", "--only", "no.such"], ["--example", "hgx-h100-ib", "--only", "pci.link"],
                 ["--example", "hgx-h100-ib", "--only", "ib", "--skip", "ib"],
                 ["--example", "hgx-h100-ib", "--expect-hcas", "0"], ["--example", "hgx-h100-ib", "stray"],
                 ["--example", "hgx-h100-ib", "--exec"]):
        code, out, err = run_cli(["preflight", *args])
        assert code == 2, args
        assert "rdmadoctor: error:" in err, args


def test_strict_turns_warnings_into_problems():
    report = {
        "exit_code": 0,
        "checks": [{"id": "shm.size", "status": "warn", "findings": [
            {"code": "SHM_TOO_SMALL", "severity": "warning", "subject": "/dev/shm", "message": "m",
             "remedy": "mount an emptyDir on /dev/shm", "pod": {"shm_min_bytes": 1 << 30, "whole": False}}]}],
    }
    lenient = pf.Gate(report, {}, strict=False)
    assert lenient.verdict == "go" and lenient.problems == [] and len(lenient.warnings) == 1
    assert not lenient.fix  # a warning's fix stays out of the YAML of a GO
    strict = pf.Gate(dict(report, exit_code=1), {}, strict=True)
    assert strict.verdict == "no-go" and [p["code"] for p in strict.problems] == ["SHM_TOO_SMALL"]
    assert strict.fix.shm_gib == 16


def test_unknown_check_without_findings_is_listed():
    report = {"exit_code": 2, "checks": [{"id": "ib.devices", "status": "unknown", "reason": "no /sys", "findings": []}]}
    g = pf.Gate(report, {}, strict=False)
    assert g.verdict == "unknown"
    assert g.unknown[0]["message"] == "no /sys"
    assert "rdmadoctor preflight: UNKNOWN" in pf.render_text(g, g.verdict)
    # Colour only for a terminal (the caller decides): the verdict word, nothing else.
    assert pf.render_text(g, g.verdict, colour=True).startswith("rdmadoctor preflight: \x1b[1;33mUNKNOWN\x1b[0m\n")


def test_nccl_env_pod_change_goes_into_the_yaml():
    """The YAML comes from the finding's structured pod change, never from its remedy's prose."""
    from rdmadoctor.core.model import Finding, PodChange
    from rdmadoctor.output.podspec import PodFix

    f = Finding("NCCL_IB_HCA_NO_MATCH", "error", "NCCL_IB_HCA", "selects no ACTIVE port", "prose that is not YAML",
                pod=PodChange(env=(("NCCL_IB_HCA", "=mlx5_0", "the ACTIVE devices"),))).to_json()
    fix = PodFix()
    assert fix.add(f.get("pod")) == "full"
    assert fix.add({"whole": True}) is None  # a pod change that changes nothing is no fix
    assert PodFix().add(None) is None
    yaml = pytest.importorskip("yaml")
    c = yaml.safe_load(fix.yaml())["spec"]["containers"][0]
    assert c["env"] == [{"name": "NCCL_IB_HCA", "value": "=mlx5_0"}]


# --- --exec -------------------------------------------------------------------------------------


def test_exec_on_go_replaces_the_process(tmp_path):
    script = "import os, sys; print('pid', os.getpid(), 'argv', sys.argv[1:])"
    p = subprocess.Popen(
        [sys.executable, "-m", "rdmadoctor", "preflight", "--example", "hgx-h100-ib", "--exec", "--",
         sys.executable, "-c", script, "--nproc_per_node=8", "-h", "--", "--json"],
        env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert out.startswith("rdmadoctor preflight: GO\n")  # flushed before exec
    line = [x for x in out.splitlines() if x.startswith("pid ")][0]
    # Same PID: preflight became the command; everything after `--` reached it untouched.
    assert line == f"pid {p.pid} argv ['--nproc_per_node=8', '-h', '--', '--json']"


def test_exec_on_go_restores_sigpipe_for_the_job():
    # Python ignores SIGPIPE; the job must get the default back (ignored signals survive exec).
    r = cli("--example", "hgx-h100-ib", "--exec", "--", "sh", "-c", "grep SigIgn /proc/self/status")
    assert r.returncode == 0
    ign = int(r.stdout.strip().splitlines()[-1].split()[1], 16)
    assert not ign & (1 << (signal.SIGPIPE - 1))


def test_exec_on_no_go_does_not_run_the_command(tmp_path):
    marker = tmp_path / "ran"
    r = cli("--example", "broken-pod", "--exec", "--", "touch", str(marker))
    assert r.returncode == 1
    assert not marker.exists()
    assert f"not running touch {marker}" in r.stderr


def test_exec_command_not_found_exits_127():
    r = cli("--example", "hgx-h100-ib", "--exec", "--", "rdmadoctor-no-such-command", "--x")
    assert r.returncode == 127
    assert "cannot run 'rdmadoctor-no-such-command': command not found" in r.stderr


# --- --wait-for-master --------------------------------------------------------------------------


def test_waits_for_a_real_listener(listener):
    listener.start()
    port = listener.port
    r = cli("--example", "hgx-h100-ib", "--wait-for-master", "--master-timeout", "20",
            env=clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rdmadoctor preflight: GO" in r.stdout
    assert f"master: 127.0.0.1:{port} (MASTER_ADDR; port from MASTER_PORT)" in r.stdout
    assert "accepted a TCP connection" in r.stdout
    assert listener.got.wait(60)  # the accept thread may run after the child exited
    assert listener.accepted == ["127.0.0.1"]  # a real connect, not a DNS answer


def test_waits_for_a_listener_that_starts_late(listener):
    """Rank 0 starts listening only after the waiter's first attempt was refused: it retries and
    then connects. The order is observed through the waiter's own log, not a clock."""
    port = listener.port  # bound, not listening: a connect is refused
    p = subprocess.Popen(
        [sys.executable, "-m", "rdmadoctor", "preflight", "--example", "hgx-h100-ib", "--wait-for-master",
         "--master-timeout", "120", "--json"],
        env=clean_env(MASTER_ADDR="localhost", MASTER_PORT=str(port)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert "waiting up to 120 s" in p.stderr.readline()
        refused = p.stderr.readline()
        assert "not reachable yet" in refused and "Connection refused" in refused, refused
        listener.start()  # only now
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    wait = json.loads(out)["master"]["wait"]
    assert wait["ok"] and wait["attempts"] >= 2
    assert "127.0.0.1" in wait["resolved"]
    assert listener.got.wait(60)  # a real connect reached the listener


def test_closed_port_times_out_no_go(closed_port):
    r = cli("--example", "hgx-h100-ib", "--wait-for-master", "--master-timeout", "1.5",
            env=clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(closed_port)))
    assert r.returncode == 1
    out = r.stdout
    assert out.splitlines()[0] == "rdmadoctor preflight: NO-GO"
    # What was tried: address, resolved IPs, last error.
    assert f"MASTER_UNREACHABLE 127.0.0.1:{closed_port}" in out
    assert "within 1.5 s" in out and "resolved to: 127.0.0.1" in out
    assert "Connection refused" in out


def test_name_that_does_not_resolve_times_out_no_go():
    r = cli("--example", "hgx-h100-ib", "--wait-for-master", "--master-timeout", "1", "--json",
            env=clean_env(MASTER_ADDR="job-master-0.rdmadoctor-test.invalid", MASTER_PORT="29500"))
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "no-go"
    p = doc["problems"][-1]
    assert p["code"] == "MASTER_UNRESOLVED" and p["subject"] == "job-master-0.rdmadoctor-test.invalid:29500"
    assert "DNS" in p["message"] and "resolved to: nothing" in p["message"]
    assert doc["master"]["wait"]["resolved"] == [] and doc["master"]["wait"]["attempts"] >= 2


def test_no_go_checks_do_not_wait(closed_port):
    r = cli("--example", "broken-pod", "--wait-for-master", "--master-timeout", "30", "--json",
            env=clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(closed_port)))
    assert r.returncode == 1
    master = json.loads(r.stdout)["master"]
    assert master["note"] == "not waited for: the checks did not pass" and master["wait"] is None
    assert "waiting up to" not in r.stderr


@pytest.mark.parametrize(
    "extra",
    [{"RANK": "0"}, {"PET_NODE_RANK": "0"}, {"WORLD_SIZE": "1"},
     {"MASTER_ADDR": socket.gethostname().split(".")[0] + ".myjob"}],
    ids=["RANK", "PET_NODE_RANK", "WORLD_SIZE", "hostname"],
)
def test_rank0_does_not_wait_for_itself(closed_port, extra):
    env = clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(closed_port))
    env.update(extra)
    r = cli("--example", "hgx-h100-ib", "--wait-for-master", "--master-timeout", "30", env=env)
    assert r.returncode == 0, r.stdout  # a wait would have ended NO-GO: the port is closed
    assert "this pod is rank 0" in r.stdout and "not waiting for itself" in r.stdout
    assert "waiting up to" not in r.stderr
    doc = json.loads(cli("--example", "hgx-h100-ib", "--wait-for-master", "--json", env=env).stdout)
    assert doc["master"]["rank0"] and doc["master"]["wait"] is None


def test_worker_rank_waits(closed_port):
    r = cli("--example", "hgx-h100-ib", "--wait-for-master", "--master-timeout", "0.5",
            env=clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(closed_port), RANK="3"))
    assert r.returncode == 1


def test_volcano_hosts_fallback(listener):
    listener.start()
    port = listener.port
    # The svc plugin's list: rank 0 is the first host of the master task.
    env = clean_env(VC_MASTER_HOSTS="localhost", VC_WORKER_HOSTS="job-worker-0.job,job-worker-1.job",
                    MASTER_PORT=str(port))
    r = cli("--example", "hgx-h100-ib", "--wait-for-master", "--master-timeout", "20", "--json", env=env)
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)["master"]
    assert (m["host"], m["port"], m["host_source"]) == ("localhost", port, "first host of VC_MASTER_HOSTS")
    assert m["wait"]["ok"]


def test_volcano_default_port_and_single_task_rank0():
    m = pf.find_master({"VC_MASTER_HOSTS": "job-master-0.job", "VC_WORKER_HOSTS": "job-worker-0.job"}, hostname="job-worker-0")
    assert (m.host, m.port, m.self_reason) == ("job-master-0.job", pf.VOLCANO_PYTORCH_PORT, None)
    # The master pod itself: Volcano sets its hostname to the pod name.
    m = pf.find_master({"VC_MASTER_HOSTS": "job-master-0.job"}, hostname="job-master-0")
    assert m.self_reason and "job-master-0" in m.self_reason
    # A job of one task: its first host is rank 0, VC_TASK_INDEX=0 is that pod.
    m = pf.find_master({"VC_TRAINER_HOSTS": "t-trainer-0.t,t-trainer-1.t", "VC_TASK_INDEX": "0"}, hostname="x")
    assert (m.host, m.self_reason) == ("t-trainer-0.t", "VC_TASK_INDEX=0 in the job's only task (VC_TRAINER_HOSTS)")
    m = pf.find_master({"VC_TRAINER_HOSTS": "t-trainer-0.t,t-trainer-1.t", "VC_TASK_INDEX": "1"}, hostname="x")
    assert m.self_reason is None
    # Several tasks, none named master: which is rank 0 is not guessed.
    with pytest.raises(pf.PreflightError, match="VC_PS_HOSTS, VC_WORKER_HOSTS"):
        pf.find_master({"VC_PS_HOSTS": "a", "VC_WORKER_HOSTS": "b"}, hostname="x")


def test_master_precedence_and_bad_values():
    env = {"MASTER_ADDR": "env-host", "MASTER_PORT": "1234", "VC_MASTER_HOSTS": "vc-host"}
    m = pf.find_master(env, hostname="x")
    assert (m.host, m.port, m.host_source, m.port_source) == ("env-host", 1234, "MASTER_ADDR", "MASTER_PORT")
    m = pf.find_master(env, master_addr="flag-a,flag-b", master_port=4321, hostname="x")
    assert (m.host, m.port, m.host_source) == ("flag-a", 4321, "--master-addr")
    m = pf.find_master({"MASTER_ADDR": "h"}, hostname="x")
    assert (m.port, m.port_source) == (pf.TORCH_MASTER_PORT, "torchrun's default port (no MASTER_PORT)")
    m = pf.find_master({"MASTER_ADDR": "[fd00::5]", "MASTER_PORT": "9"}, hostname="x")
    assert m.host == "fd00::5" and m.endpoint == "[fd00::5]:9"
    with pytest.raises(pf.PreflightError, match="not a port number"):
        pf.find_master({"MASTER_ADDR": "h", "MASTER_PORT": "http"}, hostname="x")
    with pytest.raises(pf.PreflightError, match="no MASTER_ADDR"):
        pf.find_master({}, hostname="x")
    code, _, err = run_cli(["preflight", "--example", "hgx-h100-ib", "--wait-for-master", "--master-addr", "h",
                            "--master-port", "70000"])
    assert code == 2 and "not a port number" in err


def test_master_env_is_live_while_checks_read_the_example(listener, tmp_path):
    # The bundle's recorded environment has NCCL settings but no MASTER_*: nccl.env judges the
    # bundle's, the wait uses this process' own.
    listener.start()
    port = listener.port
    r = cli("--example", "hgx-h100-ib", "--wait-for-master", "--master-timeout", "20", "--json",
            env=clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_IB_HCA="=no_such_hca"))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["master"]["host"] == "127.0.0.1" and doc["master"]["port"] == port
    nccl = doc["report"]["inventory"]["nccl_env"]
    assert nccl["NCCL_IB_HCA"].startswith("=mlx5_0")  # from the bundle, not our NCCL_IB_HCA
    assert "MASTER_ADDR" not in nccl


def test_sigterm_while_waiting_exits_promptly(closed_port):
    p = subprocess.Popen(
        [sys.executable, "-m", "rdmadoctor", "preflight", "--example", "hgx-h100-ib", "--wait-for-master",
         "--master-timeout", "600"],
        env=clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(closed_port)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert "waiting up to 600 s" in p.stderr.readline()  # the checks ran; it is waiting now
    assert "not reachable yet" in p.stderr.readline()  # in the backoff between attempts
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    # The signal's code, not the wait's (1 after 600 s): the handler cut the wait short.
    assert p.returncode == 128 + signal.SIGTERM
    assert "stopped by signal" in err


def _sigint_default() -> None:
    # A command started in the background by a non-interactive shell (CI's runner, nohup ... &)
    # inherits SIGINT ignored, and Python then keeps it ignored: give the child the disposition a
    # person's terminal gives it, which is what this test is about.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_while_waiting_exits_promptly(closed_port):
    p = subprocess.Popen(
        [sys.executable, "-m", "rdmadoctor", "preflight", "--example", "hgx-h100-ib", "--wait-for-master",
         "--master-timeout", "600", "--master-addr", "127.0.0.1", "--master-port", str(closed_port)],
        env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_sigint_default,
    )
    assert "waiting up to 600 s" in p.stderr.readline()
    assert "not reachable yet" in p.stderr.readline()
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130 and "interrupted" in err


class FakeTime:
    """A clock that only moves when the waiter sleeps: the backoff is seen, not waited out."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_wait_for_master_unit_counts_attempts_and_backs_off(closed_port):
    m = pf.Master("127.0.0.1", closed_port, "test", "test")
    logged: list[str] = []
    t = FakeTime()
    res = pf.wait_for_master(m, 20, log=logged.append, own=set, clock=t.clock, sleep=t.sleep)
    assert not res.ok and res.resolved == ["127.0.0.1"] and "Connection refused" in res.last_error
    # Backoff with +-20% jitter: 0.25, 0.5, 1, 2, 4, then 5 s each; the last sleep ends at the deadline.
    for got, base in zip(t.sleeps, (0.25, 0.5, 1, 2, 4, 5, 5)):
        assert 0.8 * base <= got <= 1.2 * base, t.sleeps
    # Jitter decides how many 5 s sleeps fit: 7.75 s (+-20%) of growing sleeps leave 10.7-13.8 s for
    # sleeps of 4-6 s, the last cut at the deadline: 2 to 4 of them, so 7 to 9 sleeps, 8 to 10 attempts.
    assert res.attempts == len(t.sleeps) + 1 and 8 <= res.attempts <= 10
    assert res.seconds == pytest.approx(20) and t.now == pytest.approx(1020)
    # One line after the first refusal, then one every 10 s: not a line per attempt.
    assert "not reachable yet" in logged[0] and 1 <= len(logged) <= 3


def test_master_resolving_to_own_address_is_rank0():
    m = pf.Master("127.0.0.1", 9, "test", "test")
    res = pf.wait_for_master(m, 5, own=lambda: {"127.0.0.1"})
    assert res.ok and res.is_self and res.attempts == 1


# --- the typer-free parser agrees with typer ------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--example", "hgx-h100-ib"],
        ["--root", "/host", "--profile", "hgx-8gpu-ndr", "--config", "c.toml", "--pool", "p", "--set", "a=1",
         "--set=b=2", "--skip", "gpu.topology", "--expect-hcas", "8", "--min-rate", "400", "--strict"],
        ["--bundle", "b.tar.gz", "--wait-for-master", "--master-addr", "m", "--master-port", "23456",
         "--master-timeout", "5", "--timeout", "2.5", "--json"],
        ["--example", "x", "--only", "ib", "--only=limits.memlock", "--skip", "ib.ports", "--verbose",
         "--job-uid", "1000"],
        ["--example", "x", "--exec", "--", "torchrun", "--nproc_per_node=8", "--", "-h"],
        ["--example", "x", "--exec"],
    ],
)
def test_fast_parser_matches_typer(args, monkeypatch):
    from typer.testing import CliRunner

    from rdmadoctor.cli import preflight as cli_pf
    from rdmadoctor.cli.app import app

    seen: list[dict] = []
    monkeypatch.setattr(cli_pf, "preflight_command", lambda args: seen.append(args) or 0)
    # Straight to typer, so this holds whether or not rdmadoctor.cli.main takes the fast path.
    result = CliRunner().invoke(app, ["preflight", *args])
    assert result.exit_code == 0, result.output
    assert cli_pf.parse_argv(args) == seen[0]


def test_fast_parser_leaves_the_odd_lines_to_typer():
    from rdmadoctor.cli.preflight import parse_argv as cli_parse_argv

    for args in (["--help"], ["--exampel", "x"], ["--example"], ["--expect-hcas", "eight"], ["stray"],
                 ["--json=1"], ["--", "cmd"]):
        assert cli_parse_argv(args) is None, args


def test_explain_knows_the_master_wait_codes():
    for code in ("MASTER_UNRESOLVED", "MASTER_UNREACHABLE"):
        r = subprocess.run([sys.executable, "-m", "rdmadoctor", "explain", code], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert code in r.stdout and "preflight --wait-for-master" in r.stdout and "How to fix it" in r.stdout


# --- one voice: flags as in `check`, errors raised by the library and printed by the CLI ------------


def test_only_skip_and_verbose_as_in_check():
    doc = json.loads(cli("--example", "hgx-h100-ib", "--only", "ib", "--json").stdout)
    assert doc["checks"] == ["ib.devices", "ib.ports"] and doc["verdict"] == "go"
    doc = json.loads(cli("--example", "hgx-h100-ib", "--skip", "gpu.topology,nccl.env", "--json").stdout)
    assert "gpu.topology" not in doc["checks"] and "nccl.env" not in doc["checks"] and "ib.ports" in doc["checks"]
    # --only narrows the gating checks; a check that does not gate a pod is refused by name.
    code, out, err = run_cli(["preflight", "--example", "hgx-h100-ib", "--only", "pci.link"])
    assert code == 2 and out == "" and "--only pci.link: not a check preflight gates a pod on" in err
    assert "rdmadoctor check --only pci.link" in err
    code, _, err = run_cli(["preflight", "--example", "hgx-h100-ib", "--only", "ib", "--skip", "ib"])
    assert code == 2 and "leave no check to run" in err
    plain = cli("--example", "hgx-h100-ib").stdout
    verbose = cli("--example", "hgx-h100-ib", "--verbose").stdout
    assert "info:" not in plain and "checks:" not in plain
    assert "  pass    ib.ports" in verbose and "  skip    roce.config (" in verbose
    assert "  info: NCCL_ENV_INFO NCCL_IB_HCA (nccl.env)" in verbose


def test_timeout_is_the_tool_timeout_and_master_timeout_the_wait(closed_port):
    # --timeout 60 no longer stretches the wait: --master-timeout 0.5 ends it.
    r = cli("--example", "hgx-h100-ib", "--timeout", "60", "--wait-for-master", "--master-timeout", "0.5", "--json",
            env=clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(closed_port)))
    assert r.returncode == 1
    problem = json.loads(r.stdout)["problems"][-1]
    assert problem["code"] == "MASTER_UNREACHABLE" and "within 0.5 s" in problem["message"]
    assert "note:" not in r.stderr
    # A pod spec written for the old meaning is told what its --timeout now does.
    r = cli("--example", "hgx-h100-ib", "--timeout", "600", "--wait-for-master",
            env=clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(closed_port), RANK="0"))
    assert r.returncode == 0
    assert "note: --timeout 600 bounds each tool the checks run; the wait for rank 0 is --master-timeout (now 300 s)" in r.stderr


def test_timeout_reaches_the_host(monkeypatch):
    import rdmadoctor.runner as runner

    seen = []
    real = runner.diagnose
    monkeypatch.setattr(runner, "diagnose", lambda opts, host=None: seen.append(opts) or real(opts, host))
    g = pf.gate(example="hgx-h100-ib", timeout=2.5, sets=["shm_min_bytes=1"], only=["ib", "limits"], job_uid=None)
    assert g.verdict == "go"
    opts = seen[0]
    assert opts.timeout == 2.5 and opts.only == ["ib.devices", "ib.ports", "limits.memlock"] and opts.scope == "all"


def test_job_uid_is_passed_as_an_expectation():
    # Only the plumbing: the job_uid expectation itself belongs to limits.memlock.
    from rdmadoctor.cli.preflight import parse_argv

    assert parse_argv(["--example", "x", "--job-uid", "1000"]).job_uid == 1000
    assert parse_argv(["--job-uid", "root"]) is None  # typer explains a uid that is not a number


def test_library_raises_usage_errors_and_prints_nothing(capsys):
    from rdmadoctor.runner import UsageError

    for kw in ({"example": "no-such"}, {"example": "hgx-h100-ib", "master_timeout": -1},
               {"example": "hgx-h100-ib", "exec_argv": []}, {"example": "hgx-h100-ib", "only": ["pci.link"]}):
        with pytest.raises(UsageError) as e:
            pf.run_preflight(**kw)
        assert str(e.value), kw
    with pytest.raises(pf.PreflightError) as e:
        pf.run_preflight(example="hgx-h100-ib", wait=True, env={})
    assert "no MASTER_ADDR" in str(e.value) and "--master-addr" in e.value.hint
    assert capsys.readouterr() == ("", "")  # the CLI prints, not the library


def test_fast_path_runs_without_typer():
    code = (
        "import sys\n"
        "from rdmadoctor.cli.preflight import parse_argv, preflight_command\n"
        "rc = preflight_command(parse_argv(['--example', 'hgx-h100-ib', '--only', 'ib']))\n"
        "print('typer' in sys.modules, rc)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "False 0"
    code = "from rdmadoctor.cli.preflight import parse_argv, preflight_command; raise SystemExit(preflight_command(parse_argv(['--example', 'no-such'])))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), timeout=60)
    assert r.returncode == 2 and r.stderr.startswith("rdmadoctor: error: ") and "Traceback" not in r.stderr


def _imports(path) -> list[str]:
    """Every module a file imports, at any depth (function-level imports included)."""
    import ast

    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append(node.module)
    return out


def test_preflight_and_agent_never_import_the_cli():
    from pathlib import Path

    pkg = Path(pf.__file__).parents[1]
    files = sorted((pkg / "preflight").glob("*.py")) + sorted((pkg / "agent").glob("*.py")) + [pkg / "output" / "metrics.py"]
    assert len(files) >= 11
    for f in files:
        bad = [m for m in _imports(f) if m == "rdmadoctor.cli" or m.startswith("rdmadoctor.cli.")]
        assert bad == [], f"{f}: {bad}"
    # The HTTP server is the agent's; output.metrics renders only.
    assert not any(m.startswith("http") for m in _imports(pkg / "output" / "metrics.py"))

