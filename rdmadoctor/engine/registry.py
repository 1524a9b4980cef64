"""Load checks from the ``rdmadoctor.checks`` entry-point group: built-in and third-party alike.

Each entry point names a module or an object that is a list of :class:`~rdmadoctor.core.model.Check`
(a module is read for its ``CHECKS``). ``RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD=1`` keeps only the
checks shipped with rdmadoctor, for tests and for a node where a broken plugin must be ruled out.

``importlib.metadata`` costs ~25 ms to import, a quarter of the time budget of a ``check`` run
in an init container, so the entry points are read straight from the ``*.dist-info`` folders
on ``sys.path``, the same files importlib.metadata reads.
"""

from __future__ import annotations

import importlib
import os
import sys

from rdmadoctor.core.model import Check
from rdmadoctor.core.record import record

GROUP = "rdmadoctor.checks"
AUTOLOAD_ENV = "RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD"
# The built-in entry points, in report order: pyproject.toml's [project.entry-points."rdmadoctor.checks"]
# table, read here only when rdmadoctor runs from a source tree that was never installed (no
# dist-info to read). tests/test_contract.py keeps the two equal.
BUILTIN = {
    "ib": "rdmadoctor.checks.ib:CHECKS",
    "roce": "rdmadoctor.checks.roce:CHECKS",
    "iwarp": "rdmadoctor.checks.iwarp:CHECKS",
    "verbs": "rdmadoctor.checks.verbs:CHECKS",
    "limits": "rdmadoctor.checks.limits:CHECKS",
    "kernel": "rdmadoctor.checks.kernel:CHECKS",
    "gpu": "rdmadoctor.checks.gpu:CHECKS",
    "pci": "rdmadoctor.checks.pci:CHECKS",
    "nccl": "rdmadoctor.checks.nccl:CHECKS",
    "counters": "rdmadoctor.checks.counters:CHECKS",
    # logs.diagnose and node.labels both run after every other check, in this order: the labels
    # node.labels compares are then those of the whole report, the logs' verdict included.
    "logs": "rdmadoctor.checks.logs:CHECKS",
    "node": "rdmadoctor.checks.node:CHECKS",
}


@record
class EntryPoint:
    name: str
    value: str  # "module:attr" or "module"
    dist: str


class PluginError(Exception):
    pass


def _parse_entry_points(text: str, dist: str) -> list[EntryPoint]:
    out, section = [], None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        if section == GROUP and "=" in line:
            name, _, value = line.partition("=")
            out.append(EntryPoint(name.strip(), value.strip(), dist))
    return out


def entry_points() -> list[EntryPoint]:
    seen: set[str] = set()
    out: list[EntryPoint] = []
    for base in sys.path:
        try:
            names = os.listdir(base or ".")
        except OSError:
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            dist = name.rsplit(".", 1)[0].split("-", 1)[0].lower().replace("_", "-")
            if dist in seen:  # the first on sys.path wins, as with importlib.metadata
                continue
            try:
                with open(os.path.join(base or ".", name, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError):
                continue
            seen.add(dist)
            out.extend(_parse_entry_points(text, dist))
    return out


def _load_value(value: str) -> list[Check]:
    mod_name, _, attr = value.partition(":")
    obj = importlib.import_module(mod_name.strip())
    for part in (attr.strip() or "CHECKS").split("."):
        obj = getattr(obj, part)
    if isinstance(obj, Check):
        return [obj]
    checks = list(obj)
    for c in checks:
        if not isinstance(c, Check):
            raise PluginError(f"{value} holds {type(c).__name__}, not a rdmadoctor Check")
    return checks


def load_checks(autoload: bool | None = None) -> tuple[list[Check], list[str]]:
    """All checks, in order, and the errors of plugins that failed to load (never fatal)."""
    if autoload is None:
        autoload = os.environ.get(AUTOLOAD_ENV, "") in ("", "0", "false", "no")
    eps = [ep for ep in entry_points() if autoload or ep.dist == "rdmadoctor"]
    if not any(ep.dist == "rdmadoctor" for ep in eps):
        eps = [EntryPoint(name, value, "rdmadoctor") for name, value in BUILTIN.items()] + eps
    order = {m: i for i, m in enumerate(BUILTIN)}
    eps.sort(key=lambda ep: (ep.dist != "rdmadoctor", order.get(ep.name, 99), ep.name))
    checks: list[Check] = []
    errors: list[str] = []
    ids: dict[str, str] = {}
    for ep in eps:
        try:
            loaded = _load_value(ep.value)
        except Exception as e:  # a broken plugin must not take the built-in checks down with it
            errors.append(f"plugin {ep.name} ({ep.dist}: {ep.value}) failed to load: {type(e).__name__}: {e}")
            continue
        for c in loaded:
            if c.id in ids:
                # Like NFD's source registry: a duplicate id is refused, loudly.
                errors.append(f"check id {c.id!r} from {ep.dist} is already defined by {ids[c.id]}; ignored")
                continue
            ids[c.id] = ep.dist
            checks.append(c)
    return checks, errors
