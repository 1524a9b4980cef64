"""Load checks: the built-in ones from the ``rdmadoctor.checks`` package, third-party ones from the
``rdmadoctor.checks`` entry-point group.

Each entry point names a module or an object that is a list of :class:`~rdmadoctor.core.model.Check`
(a module is read for its ``CHECKS``). ``RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD=1`` keeps only the
checks shipped with rdmadoctor, for tests and for a node where a broken plugin must be ruled out.

Built-in checks are not entry points: they are found by scanning ``rdmadoctor/checks/``
(:func:`builtin_modules`), in the order each module's ``ORDER`` gives.

``importlib.metadata`` costs ~25 ms to import, a quarter of the time budget of a ``check`` run
in an init container, so the entry points are read straight from the ``*.dist-info`` folders
on ``sys.path``, the same files importlib.metadata reads.
"""

from __future__ import annotations

import importlib
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from rdmadoctor.core.model import Check
from rdmadoctor.core.record import record

GROUP = "rdmadoctor.checks"
AUTOLOAD_ENV = "RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD"
# Where a built-in module runs in the report when it does not say (its module-level ORDER):
# between the node checks and logs.diagnose / node.labels, which run after every other check.
DEFAULT_ORDER = 100


def __getattr__(name: str) -> Any:
    if name == "BUILTIN":  # name -> "module:CHECKS", in report order (tests and tools read it)
        return {n: f"{m.__name__}:CHECKS" for n, m in builtin_modules()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def builtin_modules(errors: list[str] | None = None) -> list[tuple[str, Any]]:
    """The built-in check modules, found by scanning the ``rdmadoctor.checks`` package (as sos
    finds its plugins): every ``*.py`` whose name does not start with ``_``, so a new module in
    checks/ loads with no list to edit and no reinstall of an editable install. Report order is
    each module's ``ORDER`` (DEFAULT_ORDER when it has none), then its name. A module that fails
    to import is left out and said in ``errors`` (never fatal: the others still run)."""
    import rdmadoctor.checks as pkg

    names: set[str] = set()
    for folder in pkg.__path__:
        try:
            names.update(f[:-3] for f in os.listdir(folder) if f.endswith(".py") and not f.startswith(("_", ".")))
        except OSError:
            continue
    mods = []
    for n in sorted(names):
        try:
            mods.append((n, importlib.import_module(f"{pkg.__name__}.{n}")))
        except Exception as e:  # noqa: BLE001 - one broken module must not take the others down
            if errors is not None:
                errors.append(f"built-in check module {pkg.__name__}.{n} failed to load: {type(e).__name__}: {e}")
    mods.sort(key=lambda nm: (getattr(nm[1], "ORDER", DEFAULT_ORDER), nm[0]))
    return mods


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
    # Built-in checks come from the package itself; an entry point the rdmadoctor distribution
    # still declares (an older install's dist-info) would only load them twice.
    errors: list[str] = []
    eps = [EntryPoint(name, f"{mod.__name__}:CHECKS", "rdmadoctor") for name, mod in builtin_modules(errors)]
    if autoload:
        eps += sorted((ep for ep in entry_points() if ep.dist != "rdmadoctor"), key=lambda ep: ep.name)
    checks: list[Check] = []
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
