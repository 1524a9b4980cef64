"""The one error preflight raises; the CLI prints it (``rdmadoctor: error: ...`` + hint, exit 2)."""

from __future__ import annotations

from rdmadoctor.runner import UsageError


class PreflightError(UsageError):
    """A problem with the command line or the job's environment: exit 2 with a hint.

    A :class:`~rdmadoctor.runner.UsageError`, so a caller handles preflight's and the runner's
    usage errors alike."""
