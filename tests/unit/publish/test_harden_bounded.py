"""Issue 21 "Bounded on every input", items 5-8 and 10: an API answer of any size, an
owned-labels annotation of the wrong type, a FIFO where the NFD file was, device names with
escape sequences and bidi controls in `topo`, and every pool of --config validated on load.

Each test states the behaviour; none measures time. tests/unit/agent/test_metrics_server.py has item 4.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from io import StringIO
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"


def _env() -> dict:
    env = {**os.environ, "RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("NODE_NAME", None)
    return env


def rd(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rdmadoctor", *args], capture_output=True, text=True,
                          errors="surrogateescape", env=_env(), timeout=kw.pop("timeout", 120), **kw)


# ---- item 8: topo escapes names; bidi controls are escaped everywhere ---------------------------------
EVIL = "mlx5_1\x1b[2J\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4=\x07\u202eevil"
CONTROLS = ("\x1b", "\x07", "\u202e")


def _evil_bundle(tmp_path: Path) -> Path:
    bundle = tmp_path / "b"
    shutil.copytree(FIXTURES / "gpu-far", bundle, symlinks=True)
    cls = bundle / "sys" / "class" / "infiniband"
    target = os.readlink(cls / "mlx5_1")
    os.unlink(cls / "mlx5_1")
    os.symlink(target, cls / EVIL)
    return bundle


def test_topo_shows_device_names_escaped_never_obeyed(tmp_path):
    bundle = _evil_bundle(tmp_path)
    out = rd("topo", "--bundle", str(bundle))
    assert out.returncode == 0, out.stderr
    assert not [c for c in CONTROLS if c in out.stdout]
    assert "mlx5_1\\x1b[2J\\x1b]0;pwned\\x07\\x1b]52;c;cm0gLXJmIH4=\\x07\\u202eevil" in out.stdout
    # JSON escapes them its own way (\u001b), as every --json does.
    js = rd("topo", "--bundle", str(bundle), "--json")
    assert not [c for c in CONTROLS if c in js.stdout] and "\\u202e" in js.stdout


def test_topo_on_a_terminal_neither_obeys_a_name_nor_reads_it_as_markup():
    from rich.console import Console

    from rdmadoctor.output.text import render_topology

    buf = StringIO()
    topo = {"gpus": ["GPU0", "[bold]GPU1\u202e"], "nics": [EVIL, "[red]x[/red]"], "gpu_nic": [["SYS", "PIX"], ["NODE", None]],
            "gpu_numa": [0, 1], "source": "sysfs \x1b]0;t\x07"}
    render_topology(topo, console=Console(file=buf, force_terminal=True, width=300))
    text = buf.getvalue()
    assert "\x1b[2J" not in text and "\x07" not in text and "\u202e" not in text and "\x1b]" not in text
    assert "[red]x[/red]" in text and "[bold]GPU1\\u202e" in text and "\\x1b]0;t\\x07" in text


@pytest.mark.parametrize("ch", ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069",
                                "\u200e", "\u200f", "\u061c"])
def test_every_bidi_control_is_escaped(ch):
    from rdmadoctor.output.text import safe

    assert safe(f"mlx5_0{ch}1") == f"mlx5_0\\u{ord(ch):04x}1"
    assert safe("é ü 日本 tab\there\nline") == "é ü 日本 tab\there\nline"  # other text untouched


def test_bidi_controls_in_a_bundle_name_are_escaped_by_check_too(tmp_path):
    out = rd("check", "--bundle", str(_evil_bundle(tmp_path)))
    assert "\u202e" not in out.stdout and "\\u202eevil" in out.stdout


def test_the_agents_text_log_escapes_what_it_quotes():
    import json

    from rdmadoctor.agent.log import Log

    buf = StringIO()
    Log("text", buf).error("publish failed", error=f"device {EVIL} gone", problems=[EVIL])
    line = buf.getvalue()
    assert not [c for c in CONTROLS if c in line] and "\\u202eevil" in line
    buf = StringIO()
    Log("json", buf).error("publish failed", error=f"device {EVIL} gone")
    assert not [c for c in CONTROLS if c in buf.getvalue()]
    assert json.loads(buf.getvalue())["error"] == f"device {EVIL} gone"


# ---- item 10: every pool of --config is validated on load -----------------------------------------------
@pytest.mark.parametrize("text,pool,said", [
    ("pools = 5\n", None, "pools in {cfg}: 5 is not a table of node pools"),
    ("pools = 5\n", "gw", "pools in {cfg}: 5 is not a table of node pools"),
    ("[pools.gw]\nmin_rate_gbps = 200\n[pools.old]\nmin_rate_gpbs = 100\n", "gw",
     "unknown expectation 'min_rate_gpbs' (in {cfg} [pools.old])"),
    ("[pools.gw]\nmin_rate_gbps = 200\n[pools.old]\nmin_rate_gbps = \"fast\"\n", None,
     "min_rate_gbps in {cfg} [pools.old]: 'fast' is not a number"),
    ("[pools]\nold = 3\n", None, "in {cfg} [pools.old]: expected a table of expectations, got 3"),
    ('{"pools": {"gw": {}, "old": {"expected_hcas": -1}}}', "gw", "expected_hcas in {cfg} [pools.old]"),
])
def test_every_pool_is_validated_on_load(tmp_path, text, pool, said):
    cfg = tmp_path / ("c.json" if text.startswith("{") else "c.toml")
    cfg.write_text(text)
    out = rd("check", "--example", "hgx-h100-ib", "--config", str(cfg), *(["--pool", pool] if pool else []))
    assert out.returncode == 2 and out.stdout == ""
    first = out.stderr.splitlines()[0]
    assert first.startswith("rdmadoctor: error: ") and said.format(cfg=cfg) in first, out.stderr
    assert "Traceback" not in out.stderr


def test_valid_pools_still_resolve_each_to_its_own():
    import tempfile

    from rdmadoctor.engine import expectations as E

    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write("min_rate_gbps = 400\n[pools.gw]\nmin_rate_gbps = 200\n[pools.old]\nmin_rate_gbps = 100\n")
    try:
        assert E.resolve({}, config=f.name, pool="old")["min_rate_gbps"] == 100
        assert E.resolve({}, config=f.name)["min_rate_gbps"] == 400
    finally:
        os.unlink(f.name)


# ---- item 7: a FIFO where the NFD file was blocks nothing ---------------------------------------------------
@pytest.mark.parametrize("cmd", [["label"], ["agent", "--once", "--metrics-port", "0"]])
def test_a_fifo_at_the_nfd_file_is_replaced_not_waited_on(tmp_path, cmd):
    features = tmp_path / "features.d"
    features.mkdir()
    os.mkfifo(features / "rdmadoctor")
    # The timeout only ends a hung test (before the fix, open() waited for a writer for ever).
    out = rd(*cmd, "--example", "hgx-h100-ib", "--profile", "hgx-8gpu-ndr", "--publish", "nfd", "--features-dir", str(features), timeout=120)
    assert out.returncode == 0, out.stderr
    path = features / "rdmadoctor"
    assert path.is_file() and not path.is_symlink()
    assert path.read_text().startswith("# +expiry-time=") and "rdmadoctor.io/ready=true" in path.read_text()
    if cmd == ["label"]:  # its summary says so; the agent logs that the labels were published
        assert "it replaced a FIFO (named pipe) that was there" in out.stderr
    assert sorted(os.listdir(features)) == ["rdmadoctor"]


def test_a_fifo_with_a_writer_is_not_read_either(tmp_path):
    """A writer holding the FIFO open: open(2) would succeed and read(2) wait for data."""
    from rdmadoctor.publish.nfd import NfdPublisher

    fifo = tmp_path / "rdmadoctor"
    os.mkfifo(fifo)
    r = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    w = os.open(fifo, os.O_WRONLY)
    try:
        pub = NfdPublisher(str(tmp_path), expiry=600)
        got: list = []
        t = threading.Thread(target=lambda: got.append(pub._read_old()), daemon=True)
        t.start()
        t.join(60)  # bounded in the test: a blocking read would hold the thread for ever
        assert got == [None] and pub._found == "a FIFO (named pipe)"
    finally:
        os.close(w)
        os.close(r)


# ---- item 6: an owned-labels annotation that is not a string -----------------------------------------------
OWNED = "rdmadoctor.io/owned-labels"


@pytest.fixture
def kube(tmp_path):
    pytest.importorskip("lightkube")
    sys.path.insert(0, str(ROOT / "tests"))
    from kubeapi import FakeKubeAPI

    with FakeKubeAPI() as api:
        yield api, api.kubeconfig(tmp_path / "kubeconfig")


@pytest.mark.parametrize("value,kind", [(5, "a number"), (["rdmadoctor.io/ready"], "a list"),
                                        ({"rdmadoctor.io/ready": "x"}, "an object"), (True, "a boolean")])
def test_an_owned_labels_annotation_that_is_no_string_is_treated_as_absent(kube, value, kind):
    api, kubeconfig = kube
    api.add_node("gpu-1", labels={"team": "ml", "rdmadoctor.io/stale": "1"}, annotations={OWNED: value})
    out = rd("label", "--example", "hgx-h100-ib", "--profile", "hgx-8gpu-ndr", "--publish", "node", "--node", "gpu-1", "--kubeconfig", kubeconfig)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    (line,) = [x for x in out.stderr.splitlines() if OWNED in x]
    assert f"the {OWNED} annotation on node gpu-1 is {kind}" in line and "treated as absent" in line
    labels = api.labels("gpu-1")
    assert labels["rdmadoctor.io/ready"] == "true" and labels["team"] == "ml"
    assert labels["rdmadoctor.io/stale"] == "1"  # absent: no label is removed on its word
    owned = api.annotations("gpu-1")[OWNED]
    assert isinstance(owned, str) and "rdmadoctor.io/ready" in owned.split(",")
    # The next run reads the annotation it wrote: nothing to say, nothing to change.
    again = rd("label", "--example", "hgx-h100-ib", "--profile", "hgx-8gpu-ndr", "--publish", "node", "--node", "gpu-1", "--kubeconfig", kubeconfig)
    assert again.returncode == 0 and OWNED not in again.stderr and "labels unchanged" in again.stderr


def test_the_agent_keeps_publishing_past_a_malformed_annotation(kube):
    import json

    api, kubeconfig = kube
    api.add_node("gpu-1", annotations={OWNED: {"a": [1, 2]}})
    out = rd("agent", "--once", "--metrics-port", "0", "--log-format", "json", "--example", "hgx-h100-ib", "--profile", "hgx-8gpu-ndr",
             "--publish", "node", "--node", "gpu-1", "--kubeconfig", kubeconfig)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(x) for x in out.stderr.splitlines()]
    (warn,) = [x for x in lines if x["level"] == "warn"]
    assert warn["msg"] == "node metadata malformed" and "is an object" in warn["note"]
    assert "labels published" in [x["msg"] for x in lines]
    assert api.labels("gpu-1")["rdmadoctor.io/ready"] == "true"


# ---- item 5: an API answer of any size ---------------------------------------------------------------------
def _cap_1g() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


@pytest.mark.parametrize("framing,gz", [("length", False), ("chunked", False), ("chunked", True)])
def test_an_endless_api_answer_is_refused_while_read_and_memory_stays_bounded(kube, framing, gz):
    """A server streaming a body that never ends (a 1 TB Content-Length, chunks for ever, or a
    gzip bomb) is refused at MAX_ANSWER_BYTES while it is read; `label` runs under a 1 GiB
    address-space cap (reading on to the deadline reached GBs) and says why it gave up."""
    from rdmadoctor.publish.kube import MAX_ANSWER_BYTES

    api, kubeconfig = kube
    api.add_node("gpu-1")
    api.endless_next(100, framing, gzip=gz)
    out = rd("label", "--example", "hgx-h100-ib", "--publish", "node", "--node", "gpu-1", "--kubeconfig", kubeconfig,
             preexec_fn=_cap_1g)
    assert out.returncode != 0 and "Traceback" not in out.stderr and "MemoryError" not in out.stderr, out.stderr
    said = {"length": "the answer says it holds 1,000,000,000,000 bytes (Content-Length), more than the 4 MiB",
            "chunked": "the answer passed 4 MiB and is still coming; refused"}[framing]
    if gz:
        said = "the answer is compressed (Content-Encoding: gzip) though none was asked for; refused"
    assert f"GET /api/v1/nodes/gpu-1: {said}" in out.stderr and "gave up after" in out.stderr
    # Each answer was cut off near the cap: what was sent is the cap plus the sockets' buffers.
    assert api.endless and all(a["sent"] < MAX_ANSWER_BYTES + (32 << 20) for a in api.endless), api.endless
    assert api.writes() == []


def test_a_large_but_real_node_still_passes(kube):
    """A Node with many labels and images (a few hundred KiB) is read as before."""
    api, kubeconfig = kube
    api.add_node("gpu-1", labels={f"example.com/l{i}": "v" * 60 for i in range(3000)})
    out = rd("label", "--example", "hgx-h100-ib", "--profile", "hgx-8gpu-ndr", "--publish", "node", "--node", "gpu-1", "--kubeconfig", kubeconfig)
    assert out.returncode == 0, out.stderr
    assert api.labels("gpu-1")["rdmadoctor.io/ready"] == "true"


def test_the_answer_cap_is_installed_on_the_client_lightkube_builds(kube):
    """The cap sits on lightkube's httpx client (lightkube has no hook of its own): a new
    lightkube that moves it must fail here, not silently read answers of any size again."""
    from rdmadoctor.publish.kube import NodeAPI

    _, kubeconfig = kube
    api = NodeAPI(kubeconfig, timeout=5)
    try:
        inner = api.client()._client._client
        assert [h.__name__ for h in inner.event_hooks["response"]] == ["on_response"]
    finally:
        api.close()
