#!/usr/bin/env python3
"""mypy over the whole package as it is installed: ``rdmadoctor`` with ``checks/`` as ``rdmadoctor.checks``.

The checkout does not have that shape (``[tool.setuptools.package-dir]`` maps the top-level
``checks/`` into the package, and the editable install does it with an import hook mypy never
runs), so mypy is pointed at a scratch tree of symbolic links laid out like the install:
``rdmadoctor/<each entry>`` and ``rdmadoctor/checks`` -> ``checks/``. Nothing is copied, so
the run costs no install; the paths in mypy's report are mapped back to the checkout's.
Settings are ``[tool.mypy]`` in pyproject.toml. scripts/test.sh runs this before pytest.
Extra arguments go to mypy.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _mypy() -> str:
    here = Path(sys.executable).parent / "mypy"
    return str(here) if here.exists() else "mypy"


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="rdmadoctor-mypy-") as work:
        pkg = Path(work) / "rdmadoctor"
        pkg.mkdir()
        for entry in (REPO / "rdmadoctor").iterdir():
            if entry.name != "__pycache__":
                (pkg / entry.name).symlink_to(entry)
        (pkg / "checks").symlink_to(REPO / "checks")
        # cwd: the scratch tree, so mypy finds the package there and not through the checkout or
        # the editable install; the cache stays in the checkout (ignored), so later runs are quick.
        result = subprocess.run(
            [_mypy(), "--config-file", str(REPO / "pyproject.toml"),
             "--cache-dir", str(REPO / ".mypy_cache"), *argv, "-p", "rdmadoctor"],
            cwd=work, capture_output=True, text=True,
        )
    out = result.stdout.replace("rdmadoctor/checks/", "checks/").replace(work + os.sep, "")
    sys.stdout.write(out)
    sys.stderr.write(result.stderr)
    return result.returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
