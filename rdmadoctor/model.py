"""The import path of the check API before the redesign: ``from rdmadoctor.model import Check, Code, Finding, ERROR``.

Plugins written against it keep loading: every name now lives in :mod:`rdmadoctor.core.model`,
and this module hands them over with a DeprecationWarning that says so. New code imports
``rdmadoctor.core.model``.
"""

from __future__ import annotations

import warnings

from rdmadoctor.core.model import *  # noqa: F403 - the whole old API, by its old name
from rdmadoctor.core.model import (  # noqa: F401 - named so that linters and readers see them
    ERROR,
    FAIL,
    INFO,
    PASS,
    SKIP,
    UNKNOWN,
    WARN,
    WARNING,
    Check,
    CheckResult,
    Code,
    Finding,
    Need,
    PodChange,
)

warnings.warn(
    "rdmadoctor.model moved to rdmadoctor.core.model (Check, Code, Finding, Need, ERROR, ...): "
    "import from there; the old path is kept for plugins written before the move",
    DeprecationWarning,
    stacklevel=2,
)
