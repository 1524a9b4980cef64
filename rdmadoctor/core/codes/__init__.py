"""The code registry: every finding code rdmadoctor knows, by its string.

A code (:class:`~rdmadoctor.core.model.Code`) is defined once, as ``NAME = Code("NAME", ...)`` in
the module of its family beside this one (``nccl.py``, ``ib.py``, ``gang.py``, ...); the checks,
the knowledge base's rows, the log scan and the gang import it from there. What a part of
rdmadoctor does with a code (one finding per subject, a slow job's symptom, a counter that
quarantine waits on) is an attribute of the code, read here by its string:

    from rdmadoctor.core import codes
    code = codes.get("JOB_KILLED")          # the Code, or None for a string no one registered
    codes.all_codes()                       # every built-in code, then every registered one

A third-party check (a plugin) registers its own codes when its module loads, so that they are
known by their string too (their roles read like the built-in ones)::

    SITE_OLD_HCA = codes.register(Code("SITE_OLD_HCA", ...))

A second, different Code of one string is refused (:class:`CodeConflict`): alerts, dashboards
and tickets key on the string, so it has one meaning.

The family modules are imported when a code is first looked up here, not before: ``check`` loads
the families its checks import, and only a lookup of a string loads the others.
"""

from __future__ import annotations

import os

from rdmadoctor.core.model import Code

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from types import ModuleType


class CodeConflict(ValueError):
    """A second, different Code of one string."""


def _families() -> list[str]:
    """The built-in family modules beside this one, by name: a new family needs no list."""
    names: set[str] = set()
    for folder in __path__:
        try:
            names.update(f[:-3] for f in os.listdir(folder) if f.endswith(".py") and not f.startswith(("_", ".")))
        except OSError:
            continue
    return sorted(names)


class Registry:
    """Codes by their string: the built-in families, loaded on the first lookup, and the codes
    registered by plugins."""

    def __init__(self, package: str | None = __name__) -> None:
        self._package = package  # where the built-in families are; None: none (a test's registry)
        self._codes: dict[str, Code] = {}
        self._where: dict[str, str] = {}  # string -> the module that defined or registered it
        self._loaded = package is None

    def get(self, name: str) -> Code | None:
        code = self._codes.get(name)
        if code is None and not self._loaded:
            self._load()
            code = self._codes.get(name)
        return code

    def all_codes(self) -> tuple[Code, ...]:
        """Every code: the built-in ones family by family (in each, as defined), then the registered."""
        self._load()
        return tuple(self._codes.values())

    def register(self, code: Code, where: str = "?") -> Code:
        """Add a plugin's code (``where``: its module, for messages); returns it. The same code again
        (an equal Code) is no change; a different Code of a string already known raises CodeConflict."""
        if not isinstance(code, Code):
            raise TypeError(f"register() takes a rdmadoctor.core.model.Code, not {type(code).__name__}")
        self._load()
        self._add(code, where)
        return code

    def _add(self, code: Code, where: str) -> None:
        have = self._codes.get(code.code)
        if have is None:
            self._codes[code.code] = code
            self._where[code.code] = where
        elif have != code:
            raise CodeConflict(
                f"code {code.code} from {where} is already defined by {self._where[code.code]} with another meaning "
                f"({have.title!r}): a code's string has one meaning (alerts and dashboards key on it). Give the new "
                f"code a name of its own (a plugin prefixes its codes, e.g. SITE_{code.code}), or reuse the existing "
                "Code object."
            )

    def _load(self) -> None:
        if self._loaded:
            return
        import importlib

        mods: list[ModuleType] = [importlib.import_module(f"{self._package}.{name}") for name in _families()]
        for mod in mods:
            for value in vars(mod).values():
                if isinstance(value, Code):
                    self._add(value, mod.__name__)
        self._loaded = True


REGISTRY = Registry()


def get(name: str) -> Code | None:
    """The Code of this string, or None when no family defines it and no plugin registered it."""
    return REGISTRY.get(name)


def all_codes() -> tuple[Code, ...]:
    """Every known code: the built-in ones family by family, then those plugins registered."""
    return REGISTRY.all_codes()


def register(code: Code) -> Code:
    """Register a plugin's own code (at its module's import); returns it. CodeConflict when another
    Code has its string."""
    import sys

    return REGISTRY.register(code, str(sys._getframe(1).f_globals.get("__name__", "?")))
