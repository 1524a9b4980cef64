"""One verdict from every command (issue 15, item 4).

- A finding that follows from another (MOD_MISSING ib_core under IB_NO_DEVICES on a node without
  an HCA) is folded under its cause the same way by `check`, preflight, `run`, the NPD line and
  the metrics (rdmadoctor.output.text.folding is the one rule).
- `collect` then `check --bundle` gives the verdict the live (root) run gave, on every example and
  fixture root, and terminal escapes in a tool's output (a CUDA 13 `nvidia-smi topo -m` underlines
  its header even into a file) change nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT, check_json, run_cli

from rdmadoctor.examples import EXAMPLES, example_path
from rdmadoctor.host import open_host
from rdmadoctor.output.metrics import snapshot_of
from rdmadoctor.output.npd import npd_line
from rdmadoctor.output.text import folding
from rdmadoctor.parsers.common import strip_escapes
from rdmadoctor.preflight.gate import Gate
from rdmadoctor.runner import Options, diagnose

NO_HCA = str(FIXTURES / "no-devices")
FOLLOW_ONS = {("MOD_MISSING", "ib_core"), ("MOD_MISSING", "ib_uverbs"), ("MOD_MISSING", "rdma_ucm")}


def _roots(rep: dict) -> set[str]:
    """The codes of the problems `check` shows as root causes (not folded under another)."""
    folded = {id(f) for fs in folding(rep, verbose=False).values() for f in fs}
    return {f["code"] for c in rep["checks"] for f in c["findings"] if f["severity"] in ("error", "warning") and id(f) not in folded}


def test_check_folds_the_modules_under_no_devices():
    _, rep = check_json(["--bundle", NO_HCA])
    folds = folding(rep, verbose=False)
    assert {(f["code"], f["subject"]) for f in folds["IB_NO_DEVICES"]} >= FOLLOW_ONS
    assert "MOD_MISSING" not in _roots(rep) and "IB_NO_DEVICES" in _roots(rep)


def test_preflight_folds_them_the_same_way():
    code, out, err = run_cli(["preflight", "--bundle", NO_HCA, "--json"])
    doc = json.loads(out)
    assert code == 1 and doc["verdict"] == "no-go", err
    assert [p["code"] for p in doc["problems"]] == ["IB_NO_DEVICES"]
    (cause,) = doc["problems"]
    assert {(f["code"], f["subject"]) for f in cause["follow_ons"]} >= FOLLOW_ONS
    # ...so no `modprobe` fix is offered for a module nothing would load without an HCA.
    assert "modprobe ib_core" not in json.dumps(doc["problems"])
    code, out, _ = run_cli(["preflight", "--bundle", NO_HCA])
    assert code == 1 and "problem 1/1: IB_NO_DEVICES" in out and "MOD_MISSING ib_core" in out
    assert "problem 2/" not in out and "modprobe ib_core" not in out


def test_preflight_names_the_same_root_causes_as_check_on_every_fixture():
    for fixture in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        diag = diagnose(Options(bundle=str(fixture), gate_only=True))
        g = Gate(diag.report, diag.ctx.expect, strict=False)
        assert {p["code"] for p in g.problems + g.warnings} == _roots(diag.report), fixture.name


def test_run_folds_them_too():
    """`rdmadoctor run`'s gate is preflight's: the same one problem, the command not started."""
    proc = subprocess.run(
        [sys.executable, "-m", "rdmadoctor", "run", "--bundle", NO_HCA, "--", sys.executable, "-c", "print('started')"],
        capture_output=True, text=True, cwd=str(ROOT), timeout=300,
    )
    assert proc.returncode == 1 and "started" not in proc.stdout
    assert "problem 1/1: IB_NO_DEVICES" in proc.stderr and "modprobe ib_core" not in proc.stderr


def test_the_npd_line_and_the_metrics_count_the_cause_only():
    diag = diagnose(Options(bundle=NO_HCA, scope="node"))
    assert npd_line(diag.report) == "FAIL IB_NO_DEVICES host"
    snap = snapshot_of(diag.results, 0.0, diag.report)
    assert snap.findings.get(("IB_NO_DEVICES", "error")) == 1
    assert ("MOD_MISSING", "error") not in snap.findings
    # Without the report (nothing to fold against) every finding is still counted.
    assert snapshot_of(diag.results, 0.0).findings[("MOD_MISSING", "error")] == 3


# ---- terminal escapes in recorded output -----------------------------------------------------------


def test_strip_escapes():
    assert strip_escapes("\x1b[4m\tGPU0\tNIC0\x1b[0m\n") == "\tGPU0\tNIC0\n"
    assert strip_escapes("a\x1b[1;31mb\x1b[0m \x1b]8;;http://x\x07c\x1b]8;;\x1b\\ \x1b(Bd\x1b=") == "ab c d"
    assert strip_escapes("plain text") == "plain text"
    # Escapes that never end (a cut recording, a hostile paste) go as far as they are escapes; each
    # pattern's runs stop at the next ESC, so a long line costs linear time (not asserted: timing).
    for bad in ("\x1b[" + "1;" * 200_000, "\x1b]" + "x" * 200_000, ("\x1b[" + "9" * 50) * 4000):
        assert "\x1b" not in strip_escapes(bad + "\x1b[0m")


def _extract(name: str, dest: Path) -> Path:
    dest.mkdir(parents=True)
    with tarfile.open(example_path(name)) as tf:
        # Debian 12's Python 3.11.2 predates extraction filters (3.11.4): our own archive, read as is there.
        tf.extractall(dest, filter="data") if hasattr(tarfile, "data_filter") else tf.extractall(dest)
    return dest


def _underline_header(text: str) -> str:
    """What a CUDA 13 driver writes: the header row of the matrix wrapped in ESC[4m ... ESC[0m."""
    lines = text.splitlines(keepends=True)
    i = next(n for n, line in enumerate(lines) if "GPU0" in line and not line.startswith("GPU0"))
    lines[i] = "\x1b[4m" + lines[i].rstrip("\n") + "\x1b[0m\n"
    return "".join(lines)


def test_an_underlined_topo_header_reads_like_a_plain_one(tmp_path):
    plain = _extract("hgx-h100-ib", tmp_path / "plain")
    escaped = _extract("hgx-h100-ib", tmp_path / "escaped")
    topo = escaped / "cmd" / "nvidia-smi-topo.txt"
    topo.write_text(_underline_header(topo.read_text()))
    _, a = check_json(["--bundle", str(plain), "--profile", "hgx-8gpu-ndr"])
    _, b = check_json(["--bundle", str(escaped), "--profile", "hgx-8gpu-ndr"])
    assert "TOPO_PARSE_ERROR" not in json.dumps(b)
    assert _verdict(a) == _verdict(b) and b["status"] == "pass"


def test_a_live_tool_is_read_without_its_escapes(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "nvidia-smi"
    tool.write_text("#!/bin/sh\nprintf '\\033[4m\\tGPU0\\tNIC0\\033[0m\\nGPU0\\t X \\tPIX\\n'\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    res = open_host().cmd("nvidia-smi-topo")
    assert res.text is not None and "\x1b" not in res.text and res.text.startswith("\tGPU0\tNIC0\n"), res


# ---- collect, then check --bundle: the verdict of the root ------------------------------------------


def _verdict(rep: dict) -> tuple:
    """Status, labels and every check's status and findings (code, severity, subject): not the
    messages, which name where a fact came from (a root's path, a bundle)."""
    return (
        rep["status"],
        rep["labels"],
        [(c["id"], c["status"], [(f["code"], f["severity"], f["subject"]) for f in c["findings"]]) for c in rep["checks"]],
    )


ROOTS = [("fixture", p.name) for p in sorted(FIXTURES.iterdir()) if p.is_dir()] + [("example", n) for n in sorted(EXAMPLES)]


@pytest.mark.parametrize("kind, name", ROOTS, ids=[f"{k}-{n}" for k, n in ROOTS])
def test_a_bundle_gives_the_verdict_of_the_root_it_was_collected_from(kind, name, tmp_path, monkeypatch):
    root = FIXTURES / name if kind == "fixture" else _extract(name, tmp_path / name)
    # No tool of this machine may stand in for the root's recorded ones; and one that prints its
    # matrix underlined, as a CUDA 13 driver does, must not change the verdict.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    recorded_topo = root / "cmd" / "nvidia-smi-topo.txt"
    if recorded_topo.is_file():
        (bindir / "topo.txt").write_text(_underline_header(recorded_topo.read_text()))
        (bindir / "nvidia-smi").write_text(f"#!/bin/sh\nexec /bin/cat '{bindir / 'topo.txt'}'\n")
        (bindir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir))
    out = tmp_path / "b.tar.gz"
    code, _, err = run_cli(["collect", "--root", str(root), "-o", str(out)])
    assert code == 0, err
    _, live = check_json(["--root", str(root)])
    _, bundle = check_json(["--bundle", str(out)])
    a, b = _verdict(live), _verdict(bundle)
    if (root / "cmd" / "node.json").exists():
        # The Node object comes from the API server, not the node: collect does not record it.
        a, b = (a[0], a[1], a[2][:-1]), (b[0], b[1], b[2][:-1])
    if not (root / "sys").is_dir():
        # Nothing to collect: a root without /sys is a pasted tool output, and the bundle of it says
        # so (RDMA_INVENTORY_UNKNOWN) as the root did; the message names the root or the bundle.
        assert live["status"] == bundle["status"]
        return
    assert a == b
