"""Load checks: the built-in ones from the ``rdmadoctor.checks`` package, third-party ones from the
``rdmadoctor.checks`` entry-point group.

Each entry point names a module or an object that is a list of :class:`~rdmadoctor.core.model.Check`
(a module is read for its ``CHECKS``). ``RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD=1`` keeps only the
checks shipped with rdmadoctor, for tests and for a node where a broken plugin must be ruled out.

Built-in checks are not entry points: they are found by scanning ``rdmadoctor/checks/``
(:func:`builtin_modules`), in the order each module's ``ORDER`` gives.

A plugin that fails to load (an import error after an upgrade, a missing dependency, an object
that is not a list of checks, a check id already taken) is not a plugin that passed: its checks
did not run. :func:`load_checks` then adds the check ``plugins.load``, whose finding
``PLUGIN_LOAD_FAILED`` (could not decide) names the plugin, its distribution and the error and
makes the report ``unknown`` (exit 2, ``rdmadoctor.io/ready=false``) whatever ``--only`` and
``--skip`` select. A site that can live without a plugin lists it in the config's
``optional_plugins``; its failure is then ``PLUGIN_OPTIONAL_NOT_LOADED``, a warning.

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

from rdmadoctor.core.codes.plugins import (
    PLUGIN_LOAD_FAILED,
    PLUGIN_OPTIONAL_NOT_LOADED,
)
from rdmadoctor.core.expect import Expect
from rdmadoctor.core.model import UNKNOWN, WARNING, Check, Finding
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


def builtin_modules(errors: list[str] | None = None, failures: list[tuple[str, str, str]] | None = None) -> list[tuple[str, Any]]:
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
            if failures is not None:  # (name, module, error): load_checks makes it PLUGIN_LOAD_FAILED
                failures.append((n, f"{pkg.__name__}.{n}", _error_text(e)))
    mods.sort(key=lambda nm: (getattr(nm[1], "ORDER", DEFAULT_ORDER), nm[0]))
    return mods


@record
class EntryPoint:
    name: str
    value: str  # "module:attr" or "module"
    dist: str


class PluginError(Exception):
    pass


@record
class PluginFailure:
    """A plugin whose checks did not load: what to name it by, and why."""

    name: str  # the entry point's name
    value: str  # what it points at, "module:attr"
    dist: str  # the distribution that declares it
    error: str  # "ModuleNotFoundError: No module named 'x'"

    def __str__(self) -> str:
        return f"plugin {self.name} ({self.dist}: {self.value}) failed to load: {self.error}"


# ---- plugins.load: a plugin that did not load is a check that did not run --------------------

PLUGINS_ID = "plugins.load"


# Declared here, where it is read; the runner adds it to every run's expectations, so a config may
# name optional plugins whether or not one failed.
PLUGINS_DEFAULTS = {
    "optional_plugins": Expect(
        [], "list", nullable=False, example=["site-checks"],
        doc="Check plugins (rdmadoctor.checks entry points, by distribution or entry-point name) the site can do "
        "without: one that fails to load is PLUGIN_OPTIONAL_NOT_LOADED, a warning, rather than PLUGIN_LOAD_FAILED, "
        "which makes the report unknown and the node not ready.",
    ),
}


def _optional(failure: PluginFailure, expect: dict) -> bool:
    names = expect.get("optional_plugins") or ()
    return failure.dist in names or failure.name in names


def judge_plugins(failures: tuple[PluginFailure, ...], expect: dict) -> list[Finding]:
    out = []
    for f in failures:
        data = {"plugin": f.name, "dist": f.dist, "entry_point": f.value, "error": f.error}
        if _optional(f, expect):
            out.append(Finding(
                PLUGIN_OPTIONAL_NOT_LOADED.code, WARNING, f"{f.dist}:{f.name}",
                f"plugin {f.name} of {f.dist} ({f.value}) failed to load: {f.error}; it is in optional_plugins, "
                "so its checks were left out and the verdict stands on the others.",
                f"pip install -U {f.dist}   # in rdmadoctor's environment; or uninstall it",
                data={**data, "optional": True},
            ))
            continue
        out.append(Finding(
            PLUGIN_LOAD_FAILED.code, UNKNOWN, f"{f.dist}:{f.name}",
            f"plugin {f.name} of {f.dist} ({f.value}) failed to load: {f.error}; its checks did not run, "
            "so this node's verdict is unknown; expected every installed rdmadoctor.checks plugin to load.",
            f"Fix the install: `pip install -U {f.dist}` in rdmadoctor's environment "
            f"(`python -c 'import {f.value.partition(':')[0].strip()}'` shows the whole error). "
            f"If the site can do without it, add to the config: optional_plugins = [\"{f.dist}\"]",
            data={**data, "optional": False},
        ))
    return out


def plugins_check(failures: tuple[PluginFailure, ...] = ()) -> Check:
    """The check that reports ``failures``; with none, the definition ``list-checks`` shows."""
    return Check(
        id=PLUGINS_ID,
        title="Check plugins (rdmadoctor.checks entry points)",
        probe=lambda ctx: failures,
        judge=judge_plugins,
        codes=(PLUGIN_LOAD_FAILED, PLUGIN_OPTIONAL_NOT_LOADED),
        description=(
            "Every plugin in the rdmadoctor.checks entry-point group loaded. Present in a report only when "
            "one did not: its checks did not run, so the report is unknown (or, for a plugin listed in "
            "optional_plugins, warns). --only and --skip do not leave it out."
        ),
        gate=True,
        defaults=PLUGINS_DEFAULTS,
    )


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


def load_checks(autoload: bool | None = None, listing: bool = False) -> tuple[list[Check], list[str]]:
    """All checks, in order, and the errors of plugins that failed to load (never fatal).

    When a plugin (or a built-in check module) failed, the first check is ``plugins.load``
    reporting it (``PLUGIN_LOAD_FAILED``); ``listing`` adds that check's definition even when
    everything loaded (``list-checks``, ``explain``)."""
    if autoload is None:
        autoload = os.environ.get(AUTOLOAD_ENV, "") in ("", "0", "false", "no")
    # Built-in checks come from the package itself; an entry point the rdmadoctor distribution
    # still declares (an older install's dist-info) would only load them twice.
    errors: list[str] = []
    failures: list[PluginFailure] = []
    builtin_failures: list[tuple[str, str, str]] = []
    eps = [EntryPoint(name, f"{mod.__name__}:CHECKS", "rdmadoctor") for name, mod in builtin_modules(errors, builtin_failures)]
    failures += [PluginFailure(n, v, "rdmadoctor", why) for n, v, why in builtin_failures]
    if autoload:
        eps += sorted((ep for ep in entry_points() if ep.dist != "rdmadoctor"), key=lambda ep: ep.name)
    checks: list[Check] = []
    ids: dict[str, str] = {PLUGINS_ID: "rdmadoctor"}
    for ep in eps:
        try:
            loaded = _load_value(ep.value)
        except Exception as e:  # noqa: BLE001 - a broken plugin must not take the built-in checks down with it
            failures.append(PluginFailure(ep.name, ep.value, ep.dist, _error_text(e)))
            errors.append(str(failures[-1]))
            continue
        for c in loaded:
            if c.id in ids:
                # Like NFD's source registry: a duplicate id is refused, loudly; the refused check
                # did not run, which is a plugin that did not load as far as the verdict goes.
                errors.append(f"check id {c.id!r} from {ep.dist} is already defined by {ids[c.id]}; ignored")
                failures.append(PluginFailure(ep.name, ep.value, ep.dist, f"its check id {c.id!r} is already defined by {ids[c.id]}"))
                continue
            ids[c.id] = ep.dist
            checks.append(c)
    if failures or listing:
        checks.insert(0, plugins_check(tuple(failures)))
    return checks, errors


def _error_text(e: BaseException) -> str:
    """The error as one line, at most 500 characters: it goes into a finding."""
    text = " ".join(f"{type(e).__name__}: {e}".split())
    return text if len(text) <= 500 else text[:497] + "..."
