"""The tool outputs rdmadoctor reads, declared once for both of their readers.

A tool's output reaches rdmadoctor two ways: recorded in a bundle as ``cmd/<name>.txt`` (read by
``check --bundle`` through :meth:`rdmadoctor.host.Host.cmd`, which splits a terminal transcript at
its prompts: :mod:`rdmadoctor.host.transcript`), or pasted into a log (read by ``diagnose``, which
cuts the paste into segments of a kind and hands each to the node checks' probes on an in-memory
bundle: ``checks/logs.py``). Both must read an output the same way, or a paste and a bundle of
one node disagree: which pipes leave it whole, which outputs are still judged when a pipe filtered them,
and which ``cmd/`` file a pasted kind stands for. They read it here.
"""

from __future__ import annotations

# Commands a pipe may pass an output through without dropping a row of it (`ibdev2netdev | column -t`,
# `ibstat | tee out.txt`); any other stage (`grep`, `head`, `awk`) filters it.
WHOLE_PIPES = frozenset({"column", "cat", "tee", "less", "more", "sort", "expand", "nl"})

# Outputs whose judge reads only the rows that are there and says nothing of a missing one, so a
# filtered one is still judged: `df -h | grep shm` shows the /dev/shm row, `ulimit -a | grep locked`
# the memlock limit, `lspci -vvv | grep ACSCtl` every ACS line it keeps (parsers/lspci.py reads loose
# ACSCtl lines). By cmd/ name.
ROWS_ONLY = frozenset({"df-shm", "ulimit", "lspci"})

# What diagnose recognises a pasted output as (rdmadoctor.logs.scan Segment.kind) -> the cmd/<name>.txt
# a bundle records it as, the file the node checks' probes read.
CMD_OF_KIND = {
    "ibstat": "ibstat",
    "ibstatus": "ibstat",  # the ibstat parser reads both formats
    "ibv_devinfo": "ibv_devinfo",
    "rdma_link": "rdma-link",
    "ulimit": "ulimit",
    "df": "df-shm",  # `df -h` lists /dev/shm among the rest; the shm check picks its row
    "lsmod": "lsmod",
    "show_gids": "show_gids",
    "ibdev2netdev": "ibdev2netdev",
    "nvidia-smi": "nvidia-smi-topo",
}
# Kinds read from a file that is no tool's output: /proc/<pid>/limits.
ROWS_ONLY_KINDS = frozenset({k for k, name in CMD_OF_KIND.items() if name in ROWS_ONLY} | {"limits"})


def filtered(command: str) -> bool:
    """Did a pipe in ``command`` drop rows of the first command's output (`ibstat | grep State`)?
    ``|&`` (bash's ``2>&1 |``) is a pipe like any other."""
    for stage in command.split("|")[1:]:
        words = stage.lstrip("&").split()
        if (words[0] if words else "") not in WHOLE_PIPES:
            return True
    return False


def judged_filtered(name: str) -> bool:
    """Is the output of cmd/``name`` judged even when a pipe filtered it?"""
    return name in ROWS_ONLY
