"""plugins.load: a check plugin that did not load is a check that did not run
(rdmadoctor/engine/registry.py).

The built-in codes of this family; the registry (rdmadoctor.core.codes) finds them here. A
code keeps its string and its meaning for life (docs/architecture.md, "Codes are a contract").
"""

from __future__ import annotations

from rdmadoctor.core.model import COULD_NOT_DECIDE, Code

PLUGIN_LOAD_FAILED = Code(
    "PLUGIN_LOAD_FAILED",
    "A check plugin failed to load: its checks did not run",
    "A distribution installed on this machine declares checks in the `rdmadoctor.checks` entry-point "
    "group, and loading them failed (an import error after an upgrade, a missing dependency, an entry "
    "point that holds no rdmadoctor Check, or a check id another distribution already defines). The "
    "site installed that plugin to gate its nodes; a report without its checks cannot say the node is "
    "ready, so it is unknown (exit 2) and `rdmadoctor.io/ready` is false until the plugin loads again.",
    "Read the error in the finding and fix the plugin's install (`pip install -U DIST` in rdmadoctor's "
    "environment; `python -c 'import MODULE'` shows the whole traceback). A plugin written for the API "
    "before the redesign imports from `rdmadoctor.model`, which still works; new code imports from "
    "`rdmadoctor.core.model`. If the site can do without the plugin, list it in the config so its failure "
    "is a warning:\n"
    "  optional_plugins = [\"DIST\"]   # the distribution, or the entry point's name\n"
    "To run the built-in checks alone: RDMADOCTOR_DISABLE_PLUGIN_AUTOLOAD=1.",
    kind=COULD_NOT_DECIDE,
)
PLUGIN_OPTIONAL_NOT_LOADED = Code(
    "PLUGIN_OPTIONAL_NOT_LOADED",
    "An optional check plugin failed to load: its checks did not run",
    "A plugin the config lists in `optional_plugins` failed to load. The site said it can do without "
    "it, so the verdict stands on the other checks; the plugin's own checks were not run.",
    "Fix the plugin's install (`pip install -U DIST` in rdmadoctor's environment), or uninstall it. "
    "Take it out of `optional_plugins` once it loads, so that a later failure blocks again.",
)
