"""`rdmadoctor agent`: the DaemonSet loop. Check, publish on change, serve metrics, repeat.

- :mod:`~rdmadoctor.agent.loop`: one cycle (check, record, publish, retry with backoff) and the loop.
- :mod:`~rdmadoctor.agent.log`: one log line per event, text or JSON.
- :mod:`~rdmadoctor.agent.server`: /metrics and /healthz (what they render: rdmadoctor.output.metrics).
- :mod:`~rdmadoctor.agent.run`: the process (flags checked, threads, signals); raises UsageError
  for the CLI (rdmadoctor.cli.agent) to print.
"""

from __future__ import annotations

from rdmadoctor.agent.log import Log
from rdmadoctor.agent.loop import (
    RESYNC_SECONDS,
    Agent,
    Settings,
    backoff_delays,
    problems_of,
    resync_seconds,
    write_atomic,
)
from rdmadoctor.agent.run import LOG_FORMATS, run_agent

__all__ = [
    "LOG_FORMATS", "RESYNC_SECONDS", "Agent", "Log", "Settings", "backoff_delays", "problems_of",
    "resync_seconds", "run_agent", "write_atomic",
]
