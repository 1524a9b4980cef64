"""Stacks and releases read (issue 30, item 3): MPI libraries' own transports (Open MPI's MTL/BTL/PML,
MVAPICH2, Intel MPI), NVSHMEM's device-level failures, NCCL's sockets and its 2.29/2.30 messages, GCP's
socket plugins as the designed transport, and PyTorch's store client retrying (not failing).

Each text is an excerpt of output posted in a public issue or forum (its URL above it), fed to the diagnosis
the way `rdmadoctor diagnose FILE` feeds it (the logs.diagnose check on a logs-only host). Lines made from a
source's format string (where no public text was found) say so and name the file:line.
"""

from __future__ import annotations

import pytest

from rdmadoctor.host import logs_only_host
from rdmadoctor.logs import Diagnoser
from rdmadoctor.runner import Options, diagnose

PROBLEM = ("error", "warning")


def report(text: str, name: str = "paste.txt") -> dict:
    reader = Diagnoser()
    reader.feed(text.encode(), source=name)
    reader.end_source()
    return diagnose(Options(only=["logs"], logs=[name], log_diagnosis=reader), host=logs_only_host(name)).report


def findings(rep: dict) -> list[dict]:
    return [f for c in rep["checks"] for f in c["findings"]]


def problems(rep: dict) -> list[dict]:
    return [f for f in findings(rep) if f["severity"] in PROBLEM]


def pattern(f: dict) -> str:
    return (f.get("data") or {}).get("pattern", "")


def only_problem(text: str, code: str, subject: str | None = None) -> dict:
    """The one problem the text shows (every other finding is information): its code and subject."""
    rep = report(text)
    shown = problems(rep)
    assert [f["code"] for f in shown] == [code], [(f["code"], f["subject"], f["message"]) for f in shown]
    if subject is not None:
        assert shown[0]["subject"] == subject, shown[0]["subject"]
    return shown[0]


def nothing_alarms(text: str) -> dict:
    rep = report(text)
    assert not problems(rep), [(f["code"], f["subject"], f["message"]) for f in problems(rep)]
    return rep


# ---- PyTorch's c10d store client: retries are not failures, the timeout is ---------------------------------

# https://github.com/gensyn-ai/rl-swarm/issues/197 (a [W] retry line, posted alone)
STORE_RETRY_W = ("[W427 01:04:16.149509694 socket.cpp:752] [c10d] The client socket has failed to connect to "
                 "[::ffff:198.18.0.1]:3254 (errno: 110 - Connection timed out).\n")
# https://github.com/hpcaitech/Open-Sora/issues/667 (PyTorch 2.2: a [W] line per address, an [E] line per round)
STORE_RETRY_ROUNDS = (
    "[W socket.cpp:697] [c10d] The client socket has failed to connect to [::ffff:0.104.99.143]:47389 (errno: 110 - "
    "Connection timed out).\n"
    "[W socket.cpp:697] [c10d] The client socket has failed to connect to 0.104.99.143:47389 (errno: 110 - Connection "
    "timed out).\n"
    "[E socket.cpp:753] [c10d] The client socket has failed to connect to any network address of (6841231, 47389).\n"
)
# https://github.com/TheTom/vllm-swift/issues/9 (PyTorch 2.7's TCPStore client retrying)
STORE_RETRY_TCPSTORE = ("[W426 16:56:01.831041000 TCPStore.cpp:347] [c10d] TCP client failed to connect/validate to "
                        "host 100.64.0.1:59782 - retrying (try=6, timeout=1800000ms, delay=5241ms): Connection reset by "
                        "peer\n")
# https://github.com/lzhxmu/CPPO/issues/6 (the end of the retries: the timeout, twice)
STORE_TIMEOUT = (
    "[E521 15:43:02.707733876 socket.cpp:1023] [c10d] The client socket has timed out after 600000ms while trying to "
    "connect to (172.18.21.4, 37907).\n"
    "[E521 15:43:02.707888867 TCPStore.cpp:318] [c10d] TCP client failed to connect/validate to host 172.18.21.4:37907 "
    "- timed out (try=1, timeout=600000ms): The client socket has timed out after 600000ms while trying to connect to "
    "(172.18.21.4, 37907).\n"
    "Exception raised from throwTimeoutError at /pytorch/torch/csrc/distributed/c10d/socket.cpp:1025 (most recent call "
    "first):\n"
)


@pytest.mark.parametrize("text", [STORE_RETRY_W, STORE_RETRY_ROUNDS, STORE_RETRY_TCPSTORE],
                         ids=["rl-swarm-197", "open-sora-667", "vllm-swift-9"])
def test_the_store_clients_retries_are_information(text: str) -> None:
    rep = nothing_alarms(text)
    notes = [f for f in findings(rep) if f["code"] == "PYTORCH_NOTICE"]
    assert notes and {pattern(f) for f in notes} == {"pytorch.store_connect_retry"}
    assert notes[0]["subject"] == "c10d store" and "retries until its timeout" in notes[0]["message"]


def test_the_store_clients_timeout_is_the_failure() -> None:
    f = only_problem(STORE_RETRY_TCPSTORE + STORE_TIMEOUT, "NCCL_BOOTSTRAP_FAILED", "c10d store")
    assert pattern(f) == "pytorch.store_connect_failed"
    assert "timed out after 600000ms while trying to connect to (172.18.21.4, 37907)" in f["message"]
