"""The tools a bundle records (``cmd/<name>.txt``): run all at once, each bounded, and what
happened to each (``cmd/errors.json``, the summary line)."""

from __future__ import annotations

import time
from typing import Any

from rdmadoctor.host import COMMANDS, CmdResult, Host, run_tool
from rdmadoctor.host.tools import MAX_OUTPUT, cut_message

# Tools recorded besides host.COMMANDS (which the checks may run themselves).
EXTRA_COMMANDS: dict[str, tuple[str, ...]] = {
    "dpkg-l": ("dpkg", "-l"),
    "rpm-qa": ("rpm", "-qa"),
    "lsmod": ("lsmod",),
    "ulimit": ("sh", "-c", "ulimit -a"),
    "df-shm": ("df", "-h", "/dev/shm"),
}

MAX_CMD_OUTPUT = MAX_OUTPUT  # run_tool stops a tool there; `lspci -vvv` of a 512-VF node is ~2 MiB


def run_commands(host: Host, timeout: float) -> dict[str, tuple[tuple[str, ...], CmdResult, float]]:
    """Every tool at once: a hung tool costs one timeout, not one per tool."""
    from concurrent.futures import ThreadPoolExecutor

    jobs: dict[str, tuple[str, ...]] = {**COMMANDS, **EXTRA_COMMANDS}

    def one(name: str) -> tuple[str, tuple[str, ...], CmdResult, float]:
        start = time.monotonic()
        # host.cmd caches: the checks run right after reuse these outputs instead of running again.
        res = host.cmd(name) if name in COMMANDS else run_tool(jobs[name], timeout, name)
        return name, jobs[name], res, time.monotonic() - start

    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        done = list(pool.map(one, jobs))
    return {name: (argv, res, took) for name, argv, res, took in done}


def _missing(res: CmdResult) -> bool:
    return res.text is None and not res.timed_out and res.error is not None and res.error.endswith("not installed")


def record_outputs(
    cmds: dict[str, tuple[tuple[str, ...], CmdResult, float]],
) -> tuple[dict[str, bytes], list[str], dict[str, dict[str, Any]], list[str]]:
    """The tools' outputs as bundle members (``cmd/<name>.txt``), the names recorded, why each
    other one failed or is incomplete (``cmd/errors.json``), and the tools not installed."""
    extra: dict[str, bytes] = {}
    recorded, failed, missing = [], {}, []
    for name, (argv, res, took) in sorted(cmds.items()):
        if _missing(res):
            missing.append(name)
            continue
        if res.text is None:
            failed[name] = {"argv": list(argv), "error": res.error, "timed_out": res.timed_out, "seconds": round(took, 2)}
            continue
        data = res.text.encode("utf-8")
        if res.truncated or len(data) > MAX_CMD_OUTPUT:
            # Kept, and said cut: the checks read its beginning, cmd/errors.json says the rest is unknown.
            data = data[:MAX_CMD_OUTPUT]
            error = res.error if res.truncated and res.error else f"{' '.join(argv)}: {cut_message(MAX_CMD_OUTPUT)}"
            failed[name] = {"argv": list(argv), "error": error, "timed_out": False, "truncated": True, "output_recorded": True,
                            "seconds": round(took, 2)}
        elif res.error:
            # Recorded all the same: `ibstat` and `ibv_devinfo` exit non-zero with no devices.
            failed[name] = {"argv": list(argv), "error": res.error, "timed_out": False, "output_recorded": True}
        extra[f"cmd/{name}.txt"] = data
        recorded.append(name)
    return extra, recorded, failed, missing


def by_reason(failed: dict[str, dict[str, Any]]) -> str:
    """"a, b: timed out; c: see cmd/errors.json": the names grouped by why."""
    groups: dict[str, list[str]] = {}
    for name, why in sorted(failed.items()):
        groups.setdefault(_why_failed(why), []).append(name)
    return "; ".join(f"{', '.join(names)}: {why}" for why, names in groups.items())


def _why_failed(why: dict[str, Any]) -> str:
    if why.get("timed_out"):
        return "timed out"
    if why.get("truncated"):
        return f"output cut at {MAX_CMD_OUTPUT} bytes, its beginning kept"
    if why.get("output_recorded") and "deadline" in (why.get("error") or ""):
        return "stopped at the deadline, its output so far kept"
    if why.get("output_recorded"):
        return "exited with an error, its output kept"
    return "see cmd/errors.json"
