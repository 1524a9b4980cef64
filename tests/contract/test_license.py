"""The licence and the security policy ship (issue 32 item 2): LICENSE is the Apache-2.0 text that
pyproject.toml and the image's label name, and it is in the sdist, the wheel and the image.

The sdist and the wheel are built here for real with the installed setuptools (no network: the
wheel with ``pip wheel --no-build-isolation``, the sdist with setuptools' PEP 517 backend). The
image is checked from its Dockerfile and .dockerignore (tests/system/test_image.py builds the image itself
with podman, as root, and is heavy).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from contract.test_deploy import _dockerignore_included

ROOT = Path(__file__).resolve().parents[2]


def _setuptools_77() -> None:
    st = pytest.importorskip("setuptools")
    if tuple(int(x) for x in st.__version__.split(".")[:2]) < (77, 0):
        pytest.skip(f"setuptools {st.__version__} is older than pyproject.toml's build requirement (77): "
                    "pip install -e '.[test]' installs it")


def _tree(tmp_path: Path) -> Path:
    """What the build reads, copied (setuptools leaves build/ and *.egg-info beside the sources)."""
    src = tmp_path / "src"
    for rel in _dockerignore_included(ROOT):
        dst = src / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dst)
    return src


def test_license_is_the_apache_text_pyproject_and_the_image_name():
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text and "END OF TERMS AND CONDITIONS" in text
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^license = "Apache-2\.0"$', pyproject, re.M)
    assert re.search(r'^license-files = \["LICENSE"\]$', pyproject, re.M)
    assert 'org.opencontainers.image.licenses="Apache-2.0"' in (ROOT / "Dockerfile").read_text()


def test_security_policy_says_how_to_report_and_what_is_supported():
    text = (ROOT / "SECURITY.md").read_text()
    assert "## Reporting a vulnerability" in text and "security/advisories/new" in text
    assert "## What is supported" in text


def test_the_image_carries_the_license():
    """The build context lets LICENSE in, and the runtime stage (the last FROM) copies it where
    Debian keeps every package's licence."""
    assert "LICENSE" in _dockerignore_included(ROOT)
    dockerfile = (ROOT / "Dockerfile").read_text()
    runtime = dockerfile[dockerfile.rindex("\nFROM "):]
    assert re.search(r"^COPY LICENSE /usr/share/doc/rdmadoctor/LICENSE$", runtime, re.M)


def test_the_wheel_carries_the_license(tmp_path):
    _setuptools_77()
    pytest.importorskip("wheel", reason="the `wheel` package is needed to build a wheel without network access")
    out = tmp_path / "wheels"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(out),
         str(_tree(tmp_path))], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (whl,) = out.glob("rdmadoctor-*.whl")
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        (lic,) = [n for n in names if re.fullmatch(r"rdmadoctor-[^/]+\.dist-info/licenses/LICENSE", n)]
        assert z.read(lic) == (ROOT / "LICENSE").read_bytes()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in meta and "License-File: LICENSE" in meta


def test_the_sdist_carries_the_license(tmp_path):
    _setuptools_77()
    src = _tree(tmp_path)
    out = tmp_path / "sdist"
    code = f"from setuptools import build_meta; print(build_meta.build_sdist({str(out)!r}))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=src, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (sdist,) = out.glob("rdmadoctor-*.tar.gz")
    with tarfile.open(sdist) as tar:
        (lic,) = [m for m in tar.getmembers() if re.fullmatch(r"rdmadoctor-[^/]+/LICENSE", m.name)]
        assert tar.extractfile(lic).read() == (ROOT / "LICENSE").read_bytes()
