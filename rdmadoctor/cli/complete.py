"""Shell completion of the names rdmadoctor knows, from the registries that define them.

typer calls these (``autocompletion=``) only when the shell asks (``_RDMADOCTOR_COMPLETE`` set,
`rdmadoctor --install-completion`); each imports its registry then, so no command line pays for
them. Each returns (value, description) pairs; shells that show descriptions (zsh, fish) do.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable


def _starting(items: Iterable[tuple[str, str]], incomplete: str) -> list[tuple[str, str]]:
    return [(value, help) for value, help in items if value.startswith(incomplete)]


def _first_line(text: str) -> str:
    return " ".join(text.split())


def profiles(incomplete: str) -> list[tuple[str, str]]:
    """--profile: rdmadoctor.engine.expectations.PROFILES."""
    from rdmadoctor.engine.expectations import PROFILES

    return _starting(((name, _first_line(p.get("_description", ""))) for name, p in PROFILES.items()), incomplete)


def examples(incomplete: str) -> list[tuple[str, str]]:
    """--example: the bundles shipped in rdmadoctor.examples."""
    from rdmadoctor.examples import EXAMPLES

    return _starting(((name, _first_line(text)) for name, text in EXAMPLES.items()), incomplete)


def _checks(listing: bool = False) -> list[tuple[str, str]]:
    """The checks a run has (listing: also plugins.load, which `explain` knows though only a
    failed plugin makes it run)."""
    from rdmadoctor.engine.registry import load_checks

    checks, _ = load_checks(listing=listing)
    families: dict[str, list[str]] = {}
    for c in checks:
        families.setdefault(c.id.split(".")[0], []).append(c.id)
    out = [(fam, "the checks " + ", ".join(ids)) for fam, ids in families.items() if ids != [fam]]
    return out + [(c.id, _first_line(c.title)) for c in checks]


def check_ids(incomplete: str) -> list[tuple[str, str]]:
    """--only/--skip: check ids and families from the loaded checks (built-in and plugins). The
    value may be a comma-separated list: the last item is completed, the ones before kept."""
    head, _, last = incomplete.rpartition(",")
    prefix = head + "," if head else ""
    taken = set(head.split(",")) if head else set()
    return [(prefix + value, help) for value, help in _starting(_checks(), last) if value not in taken]


def _codes() -> dict:
    from rdmadoctor.cli.info import _all_codes, _load

    checks, _ = _load()
    return _all_codes(checks)


def codes(incomplete: str) -> list[tuple[str, str]]:
    """A finding code, as `explain` and `list-patterns --code` take it (upper case)."""
    return _starting(((name, _first_line(code.title)) for name, (code, _) in sorted(_codes().items())), incomplete.upper())


def pattern_codes(incomplete: str) -> list[tuple[str, str]]:
    """list-patterns --code: the codes some log pattern gives."""
    from rdmadoctor.logs import kb

    have = {p.code for p in kb.patterns()}
    return [item for item in codes(incomplete) if item[0] in have]


def codes_and_checks(incomplete: str) -> list[tuple[str, str]]:
    """explain CODE|CHECK: check ids in lower case, codes in upper case."""
    return _starting(((c, h) for c, h in _checks(listing=True) if "." in c), incomplete.lower()) + codes(incomplete)
