"""Recorded tool outputs that hold a whole terminal session, split at their prompt lines.

A ticket's ``cmd/ibstat.txt`` is often a copied terminal rather than one tool's output::

    $ ibstat mlx5_an0
    ibpanic: [1234] main: stat of IB device 'mlx5_an0' failed: No such file or directory
    $ ibstat mlx5_ib0
    CA 'mlx5_ib0'
    ...
    root@pod:/# ulimit -a
    ...

Each command's output must reach its own parser (``ulimit -a`` the memlock check's, not the
ibstat parser), so :meth:`rdmadoctor.host.Host.cmd` asks :func:`split` for the parts of a
recorded file and hands out those of the command asked for, from whichever ``cmd/*.txt`` of the
bundle holds them. A file without a prompt line naming a tool rdmadoctor reads is not a
transcript and is read whole, as before.
"""

from __future__ import annotations

import re

from rdmadoctor.core.record import record

TYPE_CHECKING = False  # typing costs start-up time; only type checkers read the branch
if TYPE_CHECKING:
    from typing import Callable

# The command word after a prompt -> the cmd/<name>.txt it stands for. A callable looks at the
# arguments: `dpkg -l` is the package list, `dpkg -S x` is not.
_NAMES: dict[str, str | Callable[[str], str | None]] = {
    "ibstat": "ibstat",
    "ibstatus": "ibstat",  # the ibstat parser reads both formats
    "ibv_devinfo": "ibv_devinfo",
    "ibdev2netdev": "ibdev2netdev",
    "show_gids": "show_gids",
    "ofed_info": "ofed_info",
    "lspci": "lspci",
    "lsmod": "lsmod",
    "ulimit": "ulimit",
    "env": "env",
    "printenv": "env",
    "df": "df-shm",  # `df -h` lists /dev/shm among the rest; the shm check picks its row
    "nvidia-smi": lambda args: "nvidia-smi-topo" if "topo" in args else None,
    # `rdma link`, `rdma link show`, `rdma -d link` (not `rdma dev`, `rdma res`, `rdma link show mlx5_0/1` is one port)
    "rdma": lambda args: "rdma-link" if re.match(r"(?:-\S+\s+)*link(?:\s+show)?\s*(?:$|\|)", args.strip()) else None,
    "dpkg": lambda args: "dpkg-l" if re.search(r"(?:^|\s)(?:-l|--list)\b", args) else None,
    "rpm": lambda args: "rpm-qa" if re.search(r"(?:^|\s)-(?:qa|aq)\b", args) else None,
}
_WORDS = "|".join(re.escape(w) for w in sorted(_NAMES, key=len, reverse=True))
# A cheap test over the whole file first (a prompt character, blanks, a tool we read), then the
# line it is on must be a prompt: only such a file is split.
_TOOL_AFTER_PROMPT = re.compile(r"[$#%>][ \t]+(?:sudo[ \t]+(?:-\S+[ \t]+)*)?(?:" + _WORDS + r")(?![\w-])")
_AFTER_PROMPT = re.compile(r"[$#%>]\s+(?:sudo\s+(?:-\S+\s+)*)?([\w.-]+)(.*)$")
@record
class Part:
    """The output of one command of a transcript (or the text before its first prompt)."""

    name: str | None  # the cmd name it stands for ("ibstat"); None: a command no check reads
    command: str  # the command line after the prompt ("ibstat mlx5_0"); "" before the first prompt
    line: int  # 1-based line number of its first output line in the file
    text: str


def name_of(command: str) -> str | None:
    """``ibstat mlx5_0`` -> "ibstat"; ``lsmod | grep mlx`` -> None (filtered output)."""
    words = command.split(None, 1)
    if not words:
        return None
    word, args = words[0].rsplit("/", 1)[-1], words[1] if len(words) > 1 else ""
    target = _NAMES.get(word)
    if callable(target):
        target = target(args)
    if target is None:
        return None
    # A pipe that filters the output (`ibstat | grep State`, `lsmod | grep mlx`) leaves a part that would
    # read as missing ports or modules, except for outputs judged row by row (`df -h | grep shm`): the
    # rule diagnose applies to the same output pasted into a log (rdmadoctor.parsers.outputs).
    from rdmadoctor.parsers.outputs import filtered, judged_filtered

    if filtered(args) and not judged_filtered(target):
        return None
    return target


def _prompt_command(line: str) -> str | None:
    """The command of a prompt line (``root@pod:/# ulimit -a`` -> "ulimit -a"), "" for a prompt
    with a command no check reads, None when the line is not a prompt."""
    from rdmadoctor.parsers.common import is_prompt

    if not is_prompt(line):
        return None
    # The first prompt character followed by a tool we read: "$ sonata@coyote2:~$ ibv_devinfo"
    # (docs that put "$ " before a real prompt) and "$ ibstat > out.txt" both find their tool.
    for at in re.finditer(r"[$#%>]\s", line):
        m = _AFTER_PROMPT.match(line, at.start())
        if m is not None and m.group(1).rsplit("/", 1)[-1] in _NAMES:
            return (m.group(1) + m.group(2)).strip()
    return ""


def _has_prompt(text: str) -> bool:
    if not any(c in text for c in "$#%>"):  # one character: a memchr-speed first look
        return False
    for m in _TOOL_AFTER_PROMPT.finditer(text):
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.end())
        if _prompt_command(text[start : end if end >= 0 else len(text)]):
            return True
    return False


def split(text: str, own: str | None = None) -> list[Part] | None:
    """The parts of a transcript; None when ``text`` is not one (no prompt line naming a tool we
    read). The text before the first prompt belongs to ``own``, the name of the file it came from."""
    if not _has_prompt(text):
        return None
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    parts: list[Part] = []
    name, command, start = own, "", 1
    body: list[str] = []

    def close() -> None:
        lead = next((k for k, x in enumerate(body) if x.strip()), None)
        if lead is not None:  # blank lines before the output do not count, and do not shift its line
            parts.append(Part(name, command, start + lead, "\n".join(body[lead:]).rstrip() + "\n"))

    for i, line in enumerate(lines, 1):
        # Most lines are output: only one with a prompt character near its start can be a prompt.
        cmd = _prompt_command(line) if re.search(r"[$#%>]", line[:240]) else None
        if cmd is None:
            body.append(line)
            continue
        close()
        name, command, start, body = (name_of(cmd) if cmd else None), cmd, i + 1, []
    close()
    if not any(p.command for p in parts):
        return None
    return parts
