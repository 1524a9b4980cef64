"""--publish nfd: the exact feature file, atomic replacement (also under SIGKILL), expiry, validity."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rdmadoctor.core import labels as L
from rdmadoctor.publish import PublishConfigError, PublishError, make_publisher, nfd, node_labels, sanitize_key, sanitize_value

T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z

REPORT = {
    "labels": {
        "feature.node.kubernetes.io/network-rdma.capable": "true",
        "rdmadoctor.io/ready": "false",
        "rdmadoctor.io/link-layer": "infiniband",
        "rdmadoctor.io/active-ports": "9",
        "rdmadoctor.io/min-rate-gbps": "400",
        "rdmadoctor.io/gpudirect": "true",
        "rdmadoctor.io/gpu-nic": "PIX",
    }
}

EXPECTED = (
    "# +expiry-time=2023-11-14T22:23:20Z\n"
    "feature.node.kubernetes.io/network-rdma.capable=true\n"
    "rdmadoctor.io/active-ports=9\n"
    "rdmadoctor.io/gpu-nic=PIX\n"
    "rdmadoctor.io/gpudirect=true\n"
    "rdmadoctor.io/link-layer=infiniband\n"
    "rdmadoctor.io/min-rate-gbps=400\n"
    "rdmadoctor.io/ready=false\n"
)


class Clock:
    def __init__(self, t: float = T0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def publisher(tmp_path: Path, clock: Clock, **kw):
    return make_publisher("nfd", features_dir=str(tmp_path), expiry=kw.pop("expiry", 600), clock=clock, **kw)


def test_exact_file_content(tmp_path):
    pub = publisher(tmp_path, Clock())
    assert pub.publish(REPORT) == ["nfd"]
    assert (tmp_path / "rdmadoctor").read_text() == EXPECTED
    assert oct((tmp_path / "rdmadoctor").stat().st_mode & 0o777) == "0o644"
    # Nothing else is left in features.d: no temp file for NFD to trip over.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rdmadoctor"]


def test_prefix_moves_rdmadoctor_labels_but_not_the_nfd_key(tmp_path):
    pub = publisher(tmp_path, Clock(), prefix="rdmadoctor.feature.node.kubernetes.io")
    pub.publish(REPORT)
    lines = (tmp_path / "rdmadoctor").read_text().splitlines()
    assert lines[1] == "feature.node.kubernetes.io/network-rdma.capable=true"
    assert lines[-1] == "rdmadoctor.feature.node.kubernetes.io/ready=false"
    assert not any(line.startswith("rdmadoctor.io/") for line in lines)


@pytest.mark.parametrize("bad", ["kubernetes.io/", "node.kubernetes.io", "Foo Bar/", "a/b/"])
def test_bad_prefix_is_a_usage_error(tmp_path, bad):
    with pytest.raises(PublishConfigError):
        publisher(tmp_path, Clock(), prefix=bad)


def test_expiry_is_ahead_and_refreshed_only_when_half_the_window_is_left(tmp_path):
    clock = Clock()
    pub = publisher(tmp_path, clock)
    path = tmp_path / "rdmadoctor"
    assert pub.publish(REPORT) == ["nfd"]
    expires, _ = nfd.split_file(path.read_text())
    assert expires == T0 + 600
    mtime = path.stat().st_mtime_ns

    # Steady state inside the first half of the window: no write at all (no fsnotify churn).
    for dt in (60, 120, 240, 299):
        clock.t = T0 + dt
        assert pub.publish(REPORT) == []
    assert path.stat().st_mtime_ns == mtime
    assert nfd.split_file(path.read_text())[0] == T0 + 600

    # Less than half left: the expiry moves forward, the labels stay.
    clock.t = T0 + 301
    assert pub.publish(REPORT) == ["nfd"]
    assert nfd.split_file(path.read_text())[0] == T0 + 301 + 600
    assert path.read_text().splitlines()[1:] == EXPECTED.splitlines()[1:]

    # A changed label is written at once, whatever the expiry.
    clock.t = T0 + 310
    changed = {"labels": dict(REPORT["labels"], **{"rdmadoctor.io/ready": "true"})}
    assert pub.publish(changed) == ["nfd"]
    assert "rdmadoctor.io/ready=true\n" in path.read_text()

    # The clock stepped back (or --expiry was lowered): an expiry too far out is rewritten.
    clock.t = T0 - 3600
    assert pub.publish(changed) == ["nfd"]
    assert nfd.split_file(path.read_text())[0] == T0 - 3600 + 600


def test_expiry_is_rfc3339_utc_and_parses_back():
    assert nfd.rfc3339(T0) == "2023-11-14T22:13:20Z"
    assert nfd.parse_rfc3339("2023-11-14T22:13:20Z") == T0
    assert nfd.parse_rfc3339("2023-11-14T23:13:20+01:00") == T0
    assert nfd.parse_rfc3339("2023-11-14T22:13:20") is None  # Go's RFC3339 needs the offset
    assert nfd.parse_rfc3339("yesterday") is None


def test_a_file_not_written_by_us_is_replaced(tmp_path):
    (tmp_path / "rdmadoctor").write_text("garbage=1\n")
    pub = publisher(tmp_path, Clock())
    assert pub.publish(REPORT) == ["nfd"]
    assert (tmp_path / "rdmadoctor").read_text() == EXPECTED


def test_dry_run_prints_and_writes_nothing(tmp_path):
    import io

    out = io.StringIO()
    pub = publisher(tmp_path, Clock(), dry_run=True, out=out)
    assert pub.publish(REPORT) == []
    assert list(tmp_path.iterdir()) == []
    assert out.getvalue() == f"# would write {tmp_path}/rdmadoctor\n" + EXPECTED


def test_missing_features_dir_names_the_dir_and_the_mount(tmp_path):
    missing = tmp_path / "features.d"
    pub = make_publisher("nfd", features_dir=str(missing), expiry=600)
    with pytest.raises(PublishError) as e:
        pub.publish(REPORT)
    assert e.value.transient is False
    assert str(missing) in e.value.message and "hostPath" in e.value.message
    assert not missing.exists()  # never created: without the mount it would be invisible to NFD


def test_features_dir_that_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(PublishError) as e:
        make_publisher("nfd", features_dir=str(f), expiry=600).publish(REPORT)
    assert "is not a directory" in e.value.message and e.value.transient is False


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through mode 0555")
def test_unwritable_features_dir(tmp_path):
    d = tmp_path / "ro"
    d.mkdir(mode=0o555)
    with pytest.raises(PublishError) as e:
        make_publisher("nfd", features_dir=str(d), expiry=600).publish(REPORT)
    assert e.value.transient is False and "readOnly" in e.value.message


def test_64k_limit_keeps_the_core_labels(tmp_path):
    big = dict(REPORT["labels"])
    for i in range(700):
        big[f"rdmadoctor.io/extra-{i:04d}-" + "x" * 40] = "v" * 63
    pub = publisher(tmp_path, Clock())
    pub.publish({"labels": big})
    data = (tmp_path / "rdmadoctor").read_bytes()
    assert len(data) < nfd.MAX_FILE_BYTES
    text = data.decode()
    for key, value in REPORT["labels"].items():
        assert f"{key}={value}\n" in text
    assert any("64 KiB" in p for p in pub.problems)
    lines = text.splitlines()
    assert lines[1:] == sorted(lines[1:])


def test_sanitising_firmware_like_strings():
    assert sanitize_value("20.39.1002 (MT_0000000838)") == "20.39.1002_MT_0000000838"
    assert sanitize_value("-_.x y.-_") == "x_y"
    assert sanitize_value(True) == "true"
    assert sanitize_value(400) == "400"
    assert len(sanitize_value("a" * 200)) == 63
    assert sanitize_value("a" * 62 + "-b") == "a" * 62  # cut at 63, then trimmed to end alphanumeric
    assert sanitize_key("RDMAdoctor.IO/fw version") == "rdmadoctor.io/fw_version"
    assert sanitize_key("rdmadoctor.io/") is None
    assert sanitize_key("!!!/x") is None


def _file_lines_are_valid(text: str) -> None:
    lines = text.splitlines()
    assert lines[0].startswith(nfd.EXPIRY_DIRECTIVE)
    assert nfd.parse_rfc3339(lines[0][len(nfd.EXPIRY_DIRECTIVE):]) is not None
    for line in lines[1:]:
        key, sep, value = line.partition("=")
        assert sep, line
        assert L.key_error(key) is None, line
        assert L.value_error(value) is None, line
        assert key.startswith("rdmadoctor.io/") or key == L.RDMA_CAPABLE
    assert len(text.encode()) < nfd.MAX_FILE_BYTES


labelish = st.text(min_size=0, max_size=120)
values = st.one_of(st.text(max_size=120), st.integers(), st.booleans(), st.floats(allow_nan=True), st.none())
keys = st.one_of(labelish, labelish.map(lambda s: "rdmadoctor.io/" + s), st.just(L.RDMA_CAPABLE))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(keys, values, max_size=40))
def test_property_every_emitted_line_is_a_valid_label(labels):
    wanted, _ = node_labels({"labels": labels})
    for k, v in wanted.items():
        assert L.key_error(k) is None and L.value_error(v) is None
    kept, _ = nfd.fit(wanted)
    _file_lines_are_valid(nfd.render(kept, T0))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=200), min_size=150, max_size=400))
def test_property_many_long_labels_stay_under_64k(names):
    labels = {"rdmadoctor.io/" + n: n for n in names}
    labels[L.RDMA_CAPABLE] = "true"
    wanted, _ = node_labels({"labels": labels})
    kept, _ = nfd.fit(wanted)
    text = nfd.render(kept, T0)
    _file_lines_are_valid(text)
    assert f"{L.RDMA_CAPABLE}=true\n" in text


# -- atomic replacement ---------------------------------------------------------------------

WRITER = r"""
import sys, time
from rdmadoctor.publish import nfd
d = sys.argv[1]
a = ("# +expiry-time=2030-01-01T00:00:00Z\n" + "rdmadoctor.io/a=" + "a" * 60 + "\n") * 900
b = ("# +expiry-time=2030-01-01T00:00:00Z\n" + "rdmadoctor.io/b=" + "b" * 60 + "\n") * 900
sys.stdout.write("go\n"); sys.stdout.flush()
i = 0
while True:
    nfd.write_feature_file(d, "rdmadoctor", (a if i % 2 else b).encode())
    i += 1
"""


def _complete(data: bytes) -> bool:
    unit_a = b"# +expiry-time=2030-01-01T00:00:00Z\nrdmadoctor.io/a=" + b"a" * 60 + b"\n"
    unit_b = b"# +expiry-time=2030-01-01T00:00:00Z\nrdmadoctor.io/b=" + b"b" * 60 + b"\n"
    return data in (unit_a * 900, unit_b * 900, b"old\n")


def _spawn(code: str, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "go"
    return proc


def test_reader_never_sees_a_partial_file_while_a_writer_rewrites(tmp_path):
    (tmp_path / "rdmadoctor").write_bytes(b"old\n")
    proc = _spawn(WRITER, str(tmp_path))
    seen = set()
    try:
        # Read until the file was seen replaced under the reader 20 times (a counted behaviour; the
        # deadline is for a loaded machine, never a duration: 1.5 s of reading could see too few).
        deadline = time.monotonic() + 120
        reads, replaced, last = 0, 0, b""  # b"": the "old\n" the test starts from
        while replaced < 20 or reads <= 50:
            assert time.monotonic() < deadline, f"{reads} reads saw the file replaced {replaced} times"
            data = (tmp_path / "rdmadoctor").read_bytes()
            assert _complete(data), f"partial read of {len(data)} bytes"
            replaced += data[52:53] != last
            last = data[52:53]
            seen.add(last)
            reads += 1
    finally:
        proc.kill()
        proc.wait()
    assert {b"a", b"b"} <= seen  # the writer really was replacing the file under the reader


def test_writer_killed_repeatedly_leaves_a_complete_file(tmp_path):
    (tmp_path / "rdmadoctor").write_bytes(b"old\n")
    for i in range(8):
        proc = _spawn(WRITER, str(tmp_path))
        time.sleep(0.02 + 0.03 * i)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert _complete((tmp_path / "rdmadoctor").read_bytes())
    # Whatever temp files a kill left behind are dot-files, which NFD ignores.
    assert all(p.name.startswith(".") for p in tmp_path.iterdir() if p.name != "rdmadoctor")


# The writer stops half-way through its temp file, tells us, and waits to be killed.
STALLED = r"""
import os, sys, time
from rdmadoctor.publish import nfd
real_write = os.write
def half_then_hang(fd, data):
    n = real_write(fd, bytes(data[: len(data) // 2]))
    sys.stdout.write("go\n"); sys.stdout.flush()
    time.sleep(60)
    return n
os.write = half_then_hang
nfd.write_feature_file(sys.argv[1], "rdmadoctor", b"# +expiry-time=2030-01-01T00:00:00Z\nrdmadoctor.io/ready=true\n" * 50)
"""


def test_writer_killed_mid_write_leaves_the_old_file_intact(tmp_path):
    pub = publisher(tmp_path, Clock(time.time()))
    pub.publish(REPORT)
    old = (tmp_path / "rdmadoctor").read_bytes()
    proc = _spawn(STALLED, str(tmp_path))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (tmp_path / "rdmadoctor").read_bytes() == old
    temps = [p for p in tmp_path.iterdir() if p.name != "rdmadoctor"]
    assert len(temps) == 1 and temps[0].name.startswith(".rdmadoctor.")
    assert 0 < temps[0].stat().st_size < len(b"# +expiry-time=2030-01-01T00:00:00Z\nrdmadoctor.io/ready=true\n" * 50)

    # The next write cleans up a temp file older than a minute, and only that.
    later = publisher(tmp_path, Clock(time.time() + 120))
    assert later.publish({"labels": {L.READY: "true"}}) == ["nfd"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rdmadoctor"]


def test_publishers_import_only_the_base_no_cycle():
    """nfd and kube import rdmadoctor.publish.base (and fsutil; kube its own nodeapi and kubeconfig),
    never the package that builds them: publish -> nfd/kube -> base, no way back. Function-level
    imports count too."""
    import ast

    pkg = Path(nfd.__file__).parent
    kube_parts = {"rdmadoctor.publish.nodeapi", "rdmadoctor.publish.kubeconfig"}
    for name in ("nfd.py", "kube.py", "nodeapi.py", "kubeconfig.py", "base.py", "fsutil.py"):
        mods = []
        for node in ast.walk(ast.parse((pkg / name).read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                mods.append(node.module)
            elif isinstance(node, ast.Import):
                mods += [a.name for a in node.names]
        ours = [m for m in mods if m == "rdmadoctor.publish" or m.startswith("rdmadoctor.publish.")]
        allowed = {"rdmadoctor.publish.base", "rdmadoctor.publish.fsutil"} | (kube_parts if name in ("kube.py", "nodeapi.py") else set())
        assert set(ours) <= allowed, (name, ours)
        assert not [m for m in mods if m.startswith("rdmadoctor.cli")], name
    # One features-dir default, used by both commands' --features-dir.
    from rdmadoctor.cli import agent as cli_agent
    from rdmadoctor.cli import label as cli_label
    from rdmadoctor.publish.base import DEFAULT_FEATURES_DIR

    assert cli_agent.DEFAULT_FEATURES_DIR is DEFAULT_FEATURES_DIR and cli_label.DEFAULT_FEATURES_DIR is DEFAULT_FEATURES_DIR
