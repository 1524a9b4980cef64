"""ibtools: rows to come from ../shared/research/log-patterns.md (see rdmadoctor.logs.kb)."""

from __future__ import annotations

from rdmadoctor.logs.kb import Pattern

CODES: tuple = ()
PATTERNS: tuple[Pattern, ...] = ()
