"""The agent's log: one line per event on stderr, as text or as one JSON object a line."""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any, TextIO


class Log:
    """One line per event on stderr: text, or one JSON object a line (``--log-format json``)."""

    def __init__(self, fmt: str = "text", stream: TextIO | None = None):
        self.fmt = fmt
        self.stream = stream if stream is not None else sys.stderr
        self._lock = threading.Lock()

    def _emit(self, level: str, msg: str, fields: dict[str, Any]) -> None:
        now = time.time()
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
        if self.fmt == "json":
            line = json.dumps({"ts": ts, "level": level, "msg": msg, **fields}, default=str, separators=(",", ":"))
        else:
            # Names in a message come from the host (device names, an API's answer): their escape
            # sequences and bidi controls are shown, never obeyed (JSON escapes its own).
            from rdmadoctor.output.text import safe

            parts = [ts, level.upper().ljust(5), safe(msg)]
            for k, v in fields.items():
                if isinstance(v, (list, tuple)):
                    v = ",".join(map(str, v)) or "-"
                elif isinstance(v, dict):
                    v = ",".join(f"{a}={b}" for a, b in v.items()) or "-"
                parts.append(f"{k}={_quote(safe(str(v)))}")
            line = " ".join(parts)
        with self._lock:
            try:
                self.stream.write(line + "\n")
                self.stream.flush()
            except (OSError, ValueError):  # stderr closed: nothing sensible left to do
                pass

    def info(self, msg: str, **fields: Any) -> None:
        self._emit("info", msg, fields)

    def warning(self, msg: str, **fields: Any) -> None:
        self._emit("warn", msg, fields)

    def error(self, msg: str, **fields: Any) -> None:
        self._emit("error", msg, fields)


def _quote(v: str) -> str:
    return json.dumps(v, ensure_ascii=False) if (not v or any(c in v for c in " =\"\n")) else v
