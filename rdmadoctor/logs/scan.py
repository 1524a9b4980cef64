"""The Diagnoser: log text in (any chunking, any size), root causes and NCCL's facts out.

How it stays fast and small on a gigabyte from 64 ranks:

- A job prints the same lines again and again with other numbers in them (every rank, every
  communicator, every step). Each block (about a megabyte of whole lines) is read without its
  digits and split into lines, and each distinct line is scanned once (:meth:`Diagnoser._candidates`):
  a dense NCCL log's megabyte is some twenty distinct lines. The scan's literals are read without
  their digits too, so a line that holds a literal always holds what is looked for; the lines it
  stops at are found in the block again and checked against the literals themselves.
- That scan is one compiled alternation of every knowledge-base row's ``needle`` (plus the NCCL INFO
  lines that carry facts and the starts of pasted tool outputs), searched in C; only the lines that
  contain a needle are decoded, unwrapped and matched against their rows.
- Lines every rank prints for every communicator (``comm ... nRanks``, ``Init COMPLETE``,
  ``Connected all rings``, socket channel lines) are read one by one until each kind has been seen
  ``SATURATE_AFTER`` times; after that they leave the scan and what they say (ranks, nodes, hosts)
  is summed per block in C (:meth:`Diagnoser._bulk`), with the same result. Leaving the scan is
  literal: the scan is rebuilt without their anchors (:meth:`_Tables.scan_for`, once per set). Of
  the facts summed in bulk, only what can change is looked for: the hosts by a pattern that passes
  over every line of a host already known (nccl._NewHosts), the socket channel lines of a host
  already on sockets in three calls each; whether a block holds a kind of line at all is asked of
  its distinct lines, not of the block.
- Each capital letter the scan reads is a place it must try; NCCL's INFO prefix and its channel
  lines (``Channel 02/0 : 3[3] -> 4[4] via P2P/CUMEM/read``) are read in small letters, in a copy
  of the block of the same length, wherever no anchor loses a letter by it (``_QUIETER``: it pays
  where the distinct lines are many, in a log's first blocks and in text that never repeats).
  tests/test_logs_fastpath.py holds all of this to a reference that reads line by line.
- Memory is bounded by constants: a line is cut at ``MAX_LINE`` bytes, each finding keeps
  ``MAX_EVIDENCE`` quoted lines and counts the rest, at most ``MAX_FINDINGS`` distinct findings
  and ``MAX_SEGMENTS`` tool outputs are kept (the overflow is counted and said).

An error line no row knows (an NCCL WARN, the line PyTorch quotes after ``Last error:``, an NCCL
result name, a traceback's last line) is a finding of its own, LOG_ERROR_UNKNOWN; a kill is led
by how far NCCL got (JOB_KILLED); a job on one host turns its network lines into information
(NCCL_SINGLE_HOST); a setting before the failure it explains is joined to it (_SETTING_JOINS).

Root cause first: findings are ordered by when they were first seen (the log's timestamps when
every finding has one, else the order of the input). A row marked ``symptom`` (a flushed work
request, ``unhandled system error``, a connection closed by the peer) is linked to the earliest
non-symptom error seen before it (a warning only when no error came first): ``cause`` names that
problem's code and ``data["follows"]`` says where it was.
"""

from __future__ import annotations

import functools
import re
from itertools import accumulate

from rdmadoctor.core.model import ERROR, INFO, WARNING, Finding
from rdmadoctor.core.record import field, record
from rdmadoctor.core.words import count
from rdmadoctor.logs import kb, prefix
from rdmadoctor.logs.nccl import NcclFacts, is_socket, tcp_fabric, transport_line
from rdmadoctor.logs.rx import trie as _trie

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

MAX_LINE = 64 * 1024
MAX_EVIDENCE = 3
MAX_FINDINGS = 512
MAX_SEGMENTS = 64
MAX_SEGMENT_BYTES = 1 << 20
MAX_SEGMENT_LINES = 20000
PASTE_WINDOW = 1 << 20  # tool outputs without header or prompt are looked for in this much of an input

# NCCL INFO lines that carry facts (see rdmadoctor.logs.nccl), as needles.
_FACT_NEEDLES = (
    "NCCL version", "RCCL version", "Using network", ": Using [", "NET/Plugin", "NET plugin",
    "via NET/Socket", "nRanks", "Channel ", "Ring ", "GPU Direct RDMA", "GPUDirect RDMA", "Init COMPLETE", "Init START",
    "Using internal Network", "INFO comm ", "INFO rank ", "Using interface", "NET/OFI Selected",
    "Connected all rings", "Plugin Path",
    # Settings that explain a failure after them (joined in Diagnoser.finish, see _SETTING_JOINS).
    # (not their "NCCL_" start: "_" begins anchors that every "grad_norm" of a training log tries)
    "IFNAME set by environment", "HCA set to", "NET set by environment",
    # ... and one a pasted GID table judges (checks/logs.py).
    "GID_INDEX set by environment",
)
# NCCL's topology lines ("+ NET[25.0] - NET/3 (3/0/25.000000)"), printed when a communicator is made: no
# tail of them can be scanned for, so they are searched as they are in the first PASTE_WINDOW only.
_HEAD_FACT_NEEDLES = ("] - NET/",
                      # A ticket's fences and its "Expected:" label (what the writer hoped to see; see _line).
                      "```", "xpected")
_HYPOTHETICAL_LINES = 200  # the most lines an "Expected:" block hides
# "Expected:", "### Expected behavior", "**Expected output**": a label alone on its line.
_EXPECTED_LABEL = re.compile(r"(?i)^(?:#{1,6}\s*+)?[*_]{0,2}(?:expected|what (?:i|we) expected|should (?:see|be|look like))"
                             r"(?: (?:behaviou?r|output|result|log|lines?))?[*_]{0,2}:?[*_]{0,2}\s*+:?\s*+$")
# Commands whose pasted output rdmadoctor reads, after a prompt: "$ ibstat", "root@pod:/# ulimit -a".
_COMMANDS = {
    "ibstat": "ibstat", "ibstatus": "ibstatus", "ibv_devinfo": "ibv_devinfo", "rdma": "rdma_link",
    "ulimit": "ulimit", "df": "df", "lsmod": "lsmod", "dmesg": "dmesg", "journalctl": "dmesg",
    "ibdev2netdev": "ibdev2netdev", "show_gids": "show_gids", "nvidia-smi": "nvidia-smi",
    "cat": "cat", "ibv_devices": "ibv_devices", "ls": "ls",
    "ncclras": "ncclras",  # NCCL's RAS report (checks/logs.py _ras_reports)
}
# The outputs judged whole (checks/logs.py _JUDGES, nccl-tests' table): a paste that holds only
# others (a command rdmadoctor does not read) has nothing in it that was judged.
_JUDGED_OUTPUTS = frozenset({"ibstat", "ibstatus", "ibv_devinfo", "rdma_link", "ulimit", "limits", "df", "lsmod", "show_gids",
                             "nccl-tests", "dev_infiniband"})
# Tool output pasted without its prompt, recognised by its first line.
_HEADERS = (
    (r"^\s*CA '[^']*'\s*$", "ibstat"),
    (r"^\s*Infiniband device '[^']*' port \d+ status:", "ibstatus"),
    (r"^\s*hca_id:\s*\S", "ibv_devinfo"),
    # `rdma link` (an InfiniBand port's line holds its subnet prefix and LIDs before its state;
    # iproute2 4.x wrote "1/1: mlx5_0/1: state ...").
    (r"^\s*(?:\d+/)?(?:\d+: )?(?:link )?\S+/\d+:? (?:subnet_prefix \S+ lid \d+ sm_lid \d+ lmc \d+ )?state \w+ physical_state", "rdma_link"),
    (r"^\s*Filesystem\s+(?:Size|1K-blocks|1M-blocks|Type)\b", "df"),
    (r"^\s*Module\s+Size\s+Used by", "lsmod"),
    (r"^\s*Limit\s+Soft Limit\s+Hard Limit", "limits"),
    (r"^\s*Max locked memory\s", "limits"),
    # Without a header or a prompt (issue 16): `df -h | grep shm` rows, `ulimit -a` and its lines.
    (r"^\s*\S+\s+(?:\S+\s+)?\d[\d.,]{0,12}[KMGTPE]?\s+\d[\d.,]{0,12}[KMGTPE]?\s+\d[\d.,]{0,12}[KMGTPE]?\s+\d{1,3}%\s+/dev/shm\s*$", "df"),
    (r"^\s*(?:sudo\s+)?ulimit\s+-[aHSl]{1,3}\s*$", "ulimit"),
    (r"^\s*(?:core file size|real-time non-blocking time|max locked memory)\s+\(", "ulimit"),
    # `ls /dev/infiniband /sys/...`: the heading ls gives each directory (a pod's device nodes).
    (r"^[\s│|]*/dev/infiniband/?:[\s│|]*$", "dev_infiniband"),
    # mlnx-tools' `show_gids`: its column heading.
    (r"^\s*DEV\s+PORT\s+INDEX\s+GID\s+IPv4\s+VER\s+DEV\s*$", "show_gids"),
    # `nvidia-smi topo -m` without its prompt: the matrix's column heading.
    (r"^\s*GPU0\s+(?:GPU1|NIC0|mlx\w+)\s", "nvidia-smi"),
    # `ibdev2netdev` without its prompt: its first row ("mlx5_0 port 1 ==> ens1f0np0 (Up)"; -v puts the
    # PCI address and the card's name first).
    (r"^\s*\S+\s+(?:[^=]{0,200}?\s)?port\s+\d{1,3}\s+(?:\([A-Z_]+\)\s+)?==>\s+\S+\s+\((?:Up|Down)\)", "ibdev2netdev"),
    # NCCL's RAS report without its prompt: the text's first line, the JSON's first key (src/ras/client_support.cc).
    (r"^\s*NCCL version \S{1,40} compiled with CUDA \S{1,20}\s*$", "ncclras"),
    (r'^\s*\{?\s*"nccl_version":\s*"', "ncclras"),
)
# Lines that carry an error whatever its words: a needle with no rare character to anchor it
# ("async", "onnect to ") is found on these (NCCL prints every error as a WARN line, modprobe
# says ERROR, PyTorch quotes NCCL's last error on the lines after "Last error:").
_CONTEXT_NEEDLES = ("NCCL WARN", "Error", "Last error", "Warning", "NCCL failure",
                    "Failed to open", "Count not open", "ProcessGroupNCCL",
                    # Error lines read even when no row knows them (see _ERROR_LINE).
                    # A traceback is found by its first frame (`  File "train.py", line 9`): "Traceback"
                    # would add a first character to the scan that crowds other needles out of it.
                    'File "', "ncclInternalError", "ncclInvalidUsage",
                    "ncclUnhandledCudaError", "ncclSystemError", "ncclRemoteError",
                    # NCCL's error trace (`misc/socket.cc:505 -> 2`, see _NCCL_TRACE): its source files
                    # (a trace line in a header, `include/net.h:21 -> 2`, is always between two of these).
                    ".cc:", ".c:", ".cu:")
LAST_ERROR_LINES = 4  # lines after "Last error:" read as candidates: the quoted NCCL message
# Settings a pasted launch command makes that rows read (kb nccl.ib_disabled_command): a prompt line
# is otherwise the start of a command's output, not a line to match.
_LAUNCH_NEEDLES = ("NCCL_IB_DISABLE=", "NCCL_NET=")
_CHANNEL_WORDS = ("Channel ", "Ring ")  # counted in bulk (NcclFacts.count_channels): never scanned for
# NCCL INFO lines every rank prints for every communicator: once each has been read this many times,
# the rest are not read one by one but summed up per block in C (Diagnoser._bulk): a job that builds
# hundreds of communicators prints them hundreds of thousands of times, and they say the same.
_SATURATING = frozenset({"INFO comm ", "nRanks", "INFO rank ", "Connected all rings", "Init COMPLETE", "Init START",
                         "via NET/Socket"})
SATURATE_AFTER = 512
# (no space before "rank": a pattern that starts with a blank is one the engine stops at everywhere,
# twice the time; nccl._RANK_OF, for the lines read one by one, reads "rank N nRanks M" the same way)
_BULK_RANKS = re.compile(rb"rank (\d{1,7}) n[Rr]anks (\d{1,7})(?: nNodes (\d{1,7}) localRanks (\d{1,7}))?")
# "] NCCL INFO " (after the [dev] of its prefix) starts most lines of an INFO log and is all capitals, each a place the scan must try:
# the copy the scan reads has it in small letters (same length, so every position stays), unless an
# anchor would lose a letter by it (_survives).
_QUIET = (b"] NCCL INFO ", b"] nccl infO ")
# What NCCL's INFO lines repeat by the hundred thousand (channel lines and their transports), read
# in small letters the same way, each only where no anchor of the scan loses a letter by it: every
# capital left in them is a place the scan must try (a tenth of a microsecond each), every
# replacement a pass over the block (as long as about 3000 such tries: only these pay). The first
# pair of each row that survives is used (the second keeps the O of "INFO" for "INFO comm "). Rows
# marked True are of channel lines: tried only on a block that holds some (a log of training output
# with a few NCCL lines pays one pass, as before).
_QUIETER = (
    (True, ((b"] NCCL INFO Channel ", b"] nccl info channel "),)),
    (False, ((b"] NCCL INFO ", b"] nccl info "), _QUIET)),
    (True, ((b" via P2P/CUMEM/", b" via p2p/cumem/"),)),
    (True, ((b" via NET/IB/", b" via net/ib/"),)),
)


_DIGITS = b"0123456789"


def _shape(text: str) -> str:
    """``text`` as the scan reads it: without its digits (see Diagnoser._candidates)."""
    return text.translate(_NO_DIGITS)


_NO_DIGITS = {ord(d): None for d in "0123456789"}


@functools.lru_cache(maxsize=None)
def _survives(anchor: bytes, old: bytes, new: bytes) -> bool:
    """No overlap of ``old`` with ``anchor`` changes a letter of the anchor when ``old`` becomes ``new``."""
    la, lo = len(anchor), len(old)
    for k in range(-(lo - 1), la):  # old placed at offset k of the anchor: its overlap, compared whole
        a0, a1 = max(0, k), min(la, k + lo)
        if anchor[a0:a1] == old[a0 - k:a1 - k] and old[a0 - k:a1 - k] != new[a0 - k:a1 - k]:
            return False
    return True


_HOST_AT = re.compile(rb"[\w.-]{1,255}:\d{1,9}:\d{1,9} \[-?\w{1,16}\] ")  # NCCL's prefix, at a line's start
# NCCL's prefix at the start of a line as the scan reads it (without digits: "gpu-:: [] NCCL INFO ").
_NCCL_SHAPE_AT = re.compile(rb"\n[\w.-]{1,255}+:: \[-?\w{0,16}+\] NCCL INFO ")
_HEADER_NEEDLES = ("CA '", "Infiniband device '", "hca_id:", "physical_state", "Filesystem", "Used by", "Max locked memory", "Soft Limit",
                   "/dev/shm", "ulimit -", "core file size", "non-blocking time", "locked memory", "/dev/infiniband:",
                   "PORT    INDEX", "PORT\tINDEX", " ==> ",
                   "GPU0    GPU1", "GPU0\tGPU1", "GPU0    NIC0", "GPU0\tNIC0", "compiled with CUDA", '"nccl_version"')
# Characters that are rare in what a training loop prints (it prints lower case, digits, spaces,
# brackets and colons): the scan's first-character set is made of these only.
_RARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ_'$#!")
_PROMPT_ANCHORS = ("$ ", "# ")


# Commands that run another on a pod, a container or a host (`kubectl exec POD -- ibstat`,
# `docker exec -it ctr ibv_devinfo`, `ssh node-3 ibstat`): the output is the inner command's.
_EXEC_VIA = re.compile(r"^(?:(?:kubectl|oc)\s+(?:-\S+\s+(?!exec\b)\S+\s+|-\S+\s+)*+exec\s+[^\n]*?\s--\s+"
                       r"|(?:docker|podman|nerdctl|crictl)\s+exec\s+"
                       r"(?:(?:-u|--user|-e|--env|-w|--workdir|--env-file)[= ]\S+\s+|-{1,2}[\w-]+\s+)*+[\w.:][\w.:-]*\s+"
                       r"|ssh\s+(?:-[bcDEeFIiJLlmOopQRSWw]\s+\S+\s+|-\w+\s+)*+[\w.@-]+\s+(?=\w)"
                       r"|(?:ba|z)?sh\s+-l?c\s+(?=[\"']))")
_QUOTED = re.compile(r"^([\"'])(.*)\1$")
_SUDO = re.compile(r"^sudo +(?:-\S+ +)*")


def _inner_command(command: str) -> str:
    """The command a prompt line runs, without ``sudo`` and the wrappers that run it elsewhere."""
    if len(command) > 4096:  # (a command line that long is not a wrapper's)
        return command
    for _ in range(3):  # `sudo kubectl exec pod -- sudo ibstat`
        inner = _EXEC_VIA.sub("", _SUDO.sub("", command), count=1)
        inner = _QUOTED.sub(r"\2", inner) if inner != command else inner  # `bash -c "ulimit -a"`
        if inner == command:
            break
        command = inner
    return command


def _prompt_with_command() -> str:
    """parsers.common.PROMPT with the command after the prompt character captured as ``cmd``."""
    from rdmadoctor.parsers.common import PROMPT

    tail = r"\s*[$#%>](?:\s.*)?$"
    assert PROMPT.endswith(tail), "parsers.common.PROMPT changed shape"
    return PROMPT[: -len(tail)] + r"\s*[$#%>](?:\s+(?P<cmd>.*))?$"


# Rare characters by preference as the start of an anchor: the ones least seen in NCCL's own
# INFO lines first ("NCCL INFO", "NET/IB", "RDMA" are full of N, C, I, L, A, R, D, M, E, S, T).
_PREFERRED = "_'!QZXJKYVWUGPHB$#DMESTRAOLFICN"  # last: the letters of "NCCL INFO"


def _anchors(literal: str) -> list[str]:
    """The tails of ``literal`` the scan may look for (each at least 3 long, starting at a rare
    character), best first; [] for a literal with none."""
    if not literal.isascii():
        return []
    shortest = min(3, len(literal))
    starts = [i for i, ch in enumerate(literal) if ch in _RARE and len(literal) - i >= shortest]
    starts.sort(key=lambda i: (_PREFERRED.find(literal[i]) % len(_PREFERRED), i))
    return [literal[i:] for i in starts]


def _kept(tail: str, firsts: set[str]) -> bool:
    """Does ``tail`` keep enough of its letters as they are once translated (each first character of
    an anchor becomes the same byte)? Two, or one in a tail of six or more ("_INET(": five rare
    characters then a parenthesis is no run of NCCL's capitals)."""
    kept = sum(ch not in firsts for ch in tail[1:])
    return kept >= 2 or (kept >= 1 and len(tail) >= 6)


def _anchor(literal: str) -> str | None:
    tails = _anchors(literal)
    return tails[0] if tails else None


# The error lines read even when no row knows them (issue 15: an error the knowledge base does not
# know is still an error): NCCL's results as PyTorch names them, and the last line of a traceback.
_NCCL_RESULT = re.compile(r"\b(nccl(?:InternalError|InvalidUsage|InvalidArgument|UnhandledCudaError|SystemError"
                          r"|RemoteError))\b")
_RESULT_AT = re.compile(r"(?:^\W{0,8}|:\s{0,4}|\b(?:[Ee]rror|returned|result)\W{0,4})n\Z")
_EXC_LINE = re.compile(r"([A-Za-z_][\w.]{0,200})(?::[ \t]|:$|$)")
# NCCL's error trace: every NCCLCHECK that sees a call fail prints `%s:%d -> %d` (2.19+: `-> %d (%s)`
# with the errno's text) as an INFO line, from the call that failed up to the API (src/include/
# checks.h). A log may hold only these (NCCL_DEBUG=INFO cut before the WARN, a WARN NCCL never
# printed): they are an error all the same. 7 (ncclInProgress) is not one.
_NCCL_TRACE = re.compile(r"(?P<file>[\w./+-]{1,200}\.(?:cc|c|cu|cpp|h)):(?P<line>\d{1,6}) -> (?P<rc>[1-6])\b"
                         r"(?: \((?P<why>[^()\n]{1,200})\))?")
# A trace is an error when it reaches the API (the caller gets the result): NCCL also traces failures it
# steps over, a net plugin that is disabled (`net.cc:79 -> 3` after NCCL_IBEXT_DISABLE=1) among them.
_API_FILES = frozenset({"init.cc", "init.cu", "group.cc", "enqueue.cc", "enqueue.cu", "collectives.cc"})
TRACE_GAP = 64  # lines: a thread's trace lines further apart than this are two traces
_TRACE_AFTER_WARN = 3  # lines: a trace this close after a process's explained WARN passes that error up
_NCCL_RESULTS = {"1": "ncclUnhandledCudaError", "2": "ncclSystemError", "3": "ncclInternalError",
                 "4": "ncclInvalidArgument", "5": "ncclInvalidUsage", "6": "ncclRemoteError"}
# Exceptions that only wrap a failure reported after them (torchrun's summary names the real one).
_WRAPPER_EXCEPTIONS = frozenset({"ChildFailedError"})
# Words of the stacks rdmadoctor reads: a line holding one was recognised, even when no row knows it.
_SOURCE_MARKERS = ("libibverbs", "librdmacm", "mlx5_core", "mlx5_ib", "nvidia_peermem", "nvidia-peermem", "ib_core")
MAX_TRACEBACK_LINES = 400  # a traceback longer than this is not followed to its end
_NORMAL = re.compile(r"0x[0-9a-fA-F]+|\d+")  # numbers vary from rank to rank: one finding for all
# NCCL settings that explain a failure after them: `NCCL_SOCKET_IFNAME set by environment to eth2`
# (src/misc/socket.cc), `NCCL_IB_HCA set to mlx5_0` (src/transport/net_ib.cc), `NCCL_NET set by
# environment to IB` (src/misc/param.cc ncclGetEnv).
_SETTING = re.compile(r"\b(?P<name>NCCL_SOCKET_IFNAME|NCCL_IB_HCA|NCCL_NET|NCCL_IB_GID_INDEX) set (?:by environment )?to (?P<value>\S{1,200})")
# (setting, the codes of the failures it explains, what it means, the fix): one row per join.
_SETTING_JOINS = (
    ("NCCL_NET", ("NCCL_NET_INIT_FAILED",),
     "NCCL_NET is set to {value} ({where}), which forces that network and allows no other: it is the cause when this "
     "node cannot initialise it",
     "Unset NCCL_NET (NCCL takes IB when it works and sockets otherwise), or set it to a network this node has "
     "(`Socket` on a node without RDMA devices)."),
    ("NCCL_SOCKET_IFNAME", ("NCCL_NO_SOCKET_INTERFACE", "NCCL_BOOTSTRAP_FAILED", "NCCL_SOCKET_ERROR", "NCCL_NET_INIT_FAILED"),
     "NCCL_SOCKET_IFNAME is set to {value} ({where}), so NCCL uses only that interface for its sockets: it is the "
     "likely cause (it does not exist in the pod, is down, has no address, or is not one the other hosts reach)",
     "List the pod's interfaces with `ip -br addr` and set NCCL_SOCKET_IFNAME to one that is UP with an address the "
     "other hosts reach (`=eth0` for an exact name, `net1` for a Multus network), or unset it."),
    ("NCCL_SOCKET_IFNAME", ("NCCL_LOOPBACK",),
     "NCCL_SOCKET_IFNAME is set to {value} ({where}) and left NCCL no interface but the loopback",
     ""),  # (the row's own fix says what to set)
    ("NCCL_IB_HCA", ("NCCL_IB_NO_DEVICE",),
     "NCCL_IB_HCA is set to {value} ({where}), so NCCL only looks at those HCAs: the list is the likely cause (it names "
     "no device this pod sees with an ACTIVE port)",
     "Set NCCL_IB_HCA to devices that `ibv_devinfo` in the pod lists with an ACTIVE port (`=mlx5_0,mlx5_1`; "
     "`^mlx5_4` excludes one), or unset it so NCCL takes every ACTIVE port."),
)


def _unknown_row(symptom: bool) -> kb.Pattern:
    from rdmadoctor.logs.kb.nccl import LOG_ERROR_UNKNOWN

    return kb.Pattern(
        id="log.unknown_error_symptom" if symptom else "log.unknown_error", code=LOG_ERROR_UNKNOWN.code, severity=ERROR,
        needle="", regex="", subject="{label}",
        message='{what}, and no row of the knowledge base explains it: "{quoted}"',
        meaning=LOG_ERROR_UNKNOWN.meaning, fix=LOG_ERROR_UNKNOWN.fix,
        ref="rdmadoctor.logs.scan: an NCCL WARN, a `Last error:` quote, an NCCL result or a traceback's last line "
            "that no row matched", symptom=symptom)


# An NCCL WARN or the error PyTorch quotes is a root candidate; an NCCL result name and a
# traceback's last line are what the failure became (linked to the error before them, if any).
_UNKNOWN = _unknown_row(False)
_UNKNOWN_SYMPTOM = _unknown_row(True)


def _run_killed_row() -> kb.Pattern:
    from rdmadoctor.logs.kb.pytorch import JOB_KILLED

    return kb.Pattern(id="run.killed", code=JOB_KILLED.code, severity=ERROR, needle="", regex="",
                      subject="{signal_text}", message="{how}.", meaning=JOB_KILLED.meaning, fix=JOB_KILLED.fix,
                      ref="rdmadoctor run: the child's wait status", symptom=True)


_RUN_KILLED = _run_killed_row()
# Codes whose rows say one thing of a subject: one finding per subject, whichever row saw it.
_ONE_FINDING = frozenset({"JOB_KILLED"})
# The same: an NCCL result as `NCCL error in: ...` quotes it and as PyTorch explains it on the next
# line (kb/pytorch _DETAILS) are one failure.
_SAME_FINDING = _ONE_FINDING | {"NCCL_SYSTEM_ERROR", "NCCL_REMOTE_ERROR", "NCCL_CALL_FAILED"}
# Symptoms that only an error explains: a job killed after a warning (IB not found, say) was not
# killed because of it; the kill leads unless an error came before it.
_ERROR_CAUSES_ONLY = frozenset({"JOB_KILLED"})
# What a job on sockets instead of RDMA can end in: a collective too slow for the timeout.
_SLOW_SYMPTOMS = frozenset({"NCCL_TIMEOUT", "NCCL_WATCHDOG_HUNG"})

# A line of nccl-tests' result table: a row (size, count, type ...), its units line, a blank.
# (and "..." where a ticket left rows out)
_TABLE_LINE = re.compile(r"(?<!\s)\s*+(?:#\s+\(B\)|\d{1,19}\s+\d{1,19}\s+\w|\.{3}\s*$|$)")  # from a run's start: linear
_ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_TS_SORTABLE = re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?")


@record
class Segment:
    """A tool's output found in the text (after a prompt line, or recognised by its header)."""

    kind: str  # ibstat | ibstatus | ibv_devinfo | rdma_link | ulimit | df | lsmod | dmesg | nccl-tests | other ...
    command: str  # the command line after the prompt ("ibstat mlx5_0"), "" when recognised by header
    text: str
    file: str
    line: int  # the first line of the output (1-based)
    cut: bool = False  # longer than MAX_SEGMENT_BYTES / MAX_SEGMENT_LINES: the rest was not kept


@record(frozen=False)
class Diagnosis:
    findings: list[Finding] = field(default_factory=list)
    nccl: dict | None = None
    segments: list[Segment] = field(default_factory=list)
    sources: list[dict] = field(default_factory=list)  # {name, bytes, lines, error}
    notes: list[str] = field(default_factory=list)  # limits reached, lines cut
    # Something in the text was recognised (an NCCL line, a known message, an error line, a
    # traceback, a tool's output): without it there is nothing to judge, and no "no known problem".
    recognised: bool = True
    # NCCL's settings as its log says them ("NCCL_IB_HCA set by environment to mlx5_0"), the first of each:
    # name -> {"value", "evidence"} (the line).
    settings: dict = field(default_factory=dict)

    @property
    def read_any(self) -> bool:
        return any(s.get("bytes") for s in self.sources)


class _Agg:
    """One finding in the making: the first match, a few quoted lines, counts."""

    __slots__ = ("pattern", "groups", "subject", "seq", "time", "evidence", "count", "hosts", "ranks", "symptom", "nccl_host")

    def __init__(self, pattern: kb.Pattern, groups: dict, subject: str, seq: tuple, time: str | None, symptom: bool,
                 nccl_host: str | None = None):
        self.pattern, self.groups, self.subject, self.seq, self.time = pattern, groups, subject, seq, time
        self.nccl_host = nccl_host  # first seen on a line NCCL printed itself, on this host ("" unnamed)
        self.evidence: list[dict] = []
        self.count = 0
        self.hosts: set[str] = set()
        self.ranks: set[int] = set()
        self.symptom = symptom


class _Compiled(dict):
    """Pattern id -> its compiled regex, compiled when a line first needs it: a row's regex runs
    only on a line that holds its needle, and most logs touch a few of the 75 rows. Compiling all
    of them was half of building the tables, which every `run` and `diagnose` pays at start."""

    def __init__(self, sources: dict[str, str]):
        super().__init__()
        self.sources = sources

    def __missing__(self, key: str) -> re.Pattern:
        compiled = self[key] = re.compile(self.sources[key])
        return compiled


class _Tables:
    """The knowledge base compiled once: needle -> rows, and the one alternation of all needles."""

    def __init__(self, patterns: tuple[kb.Pattern, ...]):
        self.patterns = patterns
        self.by_needle: dict[str, list[kb.Pattern]] = {}
        for p in patterns:
            self.by_needle.setdefault(p.needle, []).append(p)
        self.regex = _Compiled({p.id: p.regex for p in patterns})
        literals = (set(self.by_needle) | set(_FACT_NEEDLES) | set(_HEADER_NEEDLES) | set(_CONTEXT_NEEDLES)
                    | set(_HEAD_FACT_NEEDLES))
        alts = [re.escape(n) for n in sorted(literals, key=len, reverse=True)]
        self.line_needles = re.compile("|".join(alts))
        # A trie-shaped pattern: a position tries one branch per character, not every needle.
        self.verify = re.compile(_trie(sorted(literals)).encode())
        # The scan over the bytes: each needle is found through its anchor, the part of it that
        # starts at a rare character (see _anchor), all anchors in one trie-shaped pattern whose
        # first-character set the regex engine checks in C; needles without a rare character are
        # found with bytes.find. A candidate line is then checked for the whole needle.
        # A needle without a rare character is not scanned for: it is found on the lines the
        # context needles make candidates (tests/test_kb.py feeds every row's examples through
        # the scan to keep that true). self.plain lists them, for that test and for --json.
        # Translated, a tail made of rare characters matches any run of them ("WARN" matches
        # "NCCL", "GDRD"): such false candidates cost a check of the line against every needle
        # (self.verify, a few microseconds) before anything else is done with it.
        # Each anchor's first (rare) character is translated to \x01 before the scan, so the
        # pattern starts with one literal byte: the engine looks for that byte alone, two to three
        # times faster than testing every byte against a set of first characters. The prompt
        # characters get \x02 and a pattern of their own: "$ " as an anchor of the trie would be
        # "\x01 ", any rare character before a space. Translated, a tail of rare characters only
        # matches any run of them ("WARN" would match "NCCL", "INFO", "GDRD" on every NCCL line):
        # each literal takes its first tail (by _PREFERRED) with two characters left as they are,
        # or is searched for as it is (bytes.find).
        # The scan reads each block's lines without their digits, each distinct line once (see
        # Diagnoser._candidates): it looks for each literal's shape ("Caught signal 7" -> "Caught
        # signal "), and a line it stops at is checked for the literal itself (self.verify).
        originals: dict[str, set[str]] = {}
        for lit in literals - set(_CHANNEL_WORDS):
            originals.setdefault(_shape(lit), set()).add(lit)
        scanned = set(originals)
        self.scanned = frozenset(scanned)
        choice = {lit: _anchor(lit) for lit in scanned}
        for _ in range(3):
            firsts = {a[0] for a in choice.values() if a}
            choice = {lit: next((t for t in _anchors(lit) if _kept(t, firsts)), None)
                      for lit in scanned}
        firsts = {a[0] for a in choice.values() if a}
        choice = {lit: (a if a and _kept(a, firsts) else None) for lit, a in choice.items()}
        anchors = {a for a in choice.values() if a}
        # anchor -> the literals found through it: an anchor is skipped once all of them are saturated.
        self.anchor_lits: dict[bytes, set[str]] = {}
        for lit, a in choice.items():
            if a:
                self.anchor_lits.setdefault(a.encode(), set()).update(originals[lit])
        plain = {lit for lit, a in choice.items() if a is None}
        searched = {lit for lit in plain if _anchors(lit)}  # had a rare character, but only crowded tails
        self.prompt_scan = re.compile(b"\x02 ")
        self.quiet = _QUIET if all(_survives(a.encode(), *_QUIET) for a in anchors) else None
        self.scans: dict[frozenset[bytes], _Scan] = {}
        self.anchors = frozenset(a.encode() for a in anchors)
        full = _Scan(self.anchors, ())
        self.table, self.fast = full.table, full.fast
        # A needle with no anchor of its own whose rows' examples all carry another anchor or a
        # searched literal (a WARN, an ERROR) is found through that; the rest are searched too.
        fast_text = self.fast
        uncovered = set(searched)
        self._originals = originals
        context = self._context = {_shape(x) for x in _CONTEXT_NEEDLES}
        for lit in plain:
            rows = self._rows_of(lit)
            if not rows and lit in context:  # a context needle of no row (".cc:"): nothing else finds its lines
                uncovered.add(lit)
            for p in rows:
                for ex in p.examples or ("",):
                    ex = _shape(ex)
                    hit = fast_text is not None and fast_text.search(ex.encode().translate(self.table)) is not None
                    if not hit and not any(x in ex for x in searched):
                        uncovered.add(lit)
        self.plain = tuple(sorted(x.encode() for x in uncovered - {_shape(x) for x in _HEAD_FACT_NEEDLES}))
        self._searched, self._plain_lits = searched, plain
        self.scans[frozenset()] = full
        full.plain = self.plain + self._uncovered(full)
        full.wanted = re.compile(_trie(sorted(originals)).encode())
        # Starts of tool outputs without a rare character ("/dev/shm", "locked memory") and NCCL's
        # topology lines are searched as they are, in the first PASTE_WINDOW bytes of an input only:
        # each such search costs about as much as the whole scan of a block, and outputs pasted
        # without a header or prompt come in tickets and pastes, the topology with the first
        # communicator, not megabytes into a job's log.
        head = {_shape(x) for x in _HEADER_NEEDLES if choice.get(_shape(x)) is None} | {_shape(x) for x in _HEAD_FACT_NEEDLES}
        self.paste_plain = tuple(sorted(x.encode() for x in head if x.encode() not in self.plain))
        self.prompt = re.compile(_prompt_with_command())
        self.headers = [(re.compile(h), kind) for h, kind in _HEADERS]

    def _rows_of(self, shape: str) -> list[kb.Pattern]:
        """The rows of every literal whose shape (without digits) is ``shape``."""
        return [p for o in self._originals[shape] for p in self.by_needle.get(o, ())]

    def _uncovered(self, sc: _Scan) -> tuple[bytes, ...]:
        """Needles without an anchor that ``sc`` no longer finds through another row's anchor (in
        their rows' examples, read as the scan reads them) and self.plain does not search for."""
        out = set()
        for lit in self._plain_lits:
            rows = self._rows_of(lit)
            if not rows and lit in self._context:
                out.add(lit.encode())
            for p in rows:
                for ex in p.examples or ("",):
                    ex = _shape(ex)
                    hit = sc.fast is not None
                    for quiet in (sc.quiet, sc.quiet_plain):  # a block with channel lines, one without
                        b = ex.encode()
                        for pair in quiet:
                            b = b.replace(*pair)
                        hit = hit and sc.fast.search(b.translate(sc.table)) is not None  # type: ignore[union-attr]
                    if not hit and not any(x in ex for x in self._searched):
                        out.add(lit.encode())
        return tuple(sorted(out - set(self.plain) - {_shape(x).encode() for x in _HEAD_FACT_NEEDLES}))

    def scan_for(self, skip: frozenset[bytes]) -> _Scan:
        """The scan without the anchors in ``skip`` (those whose needles are all saturated, summed
        in bulk): fewer first characters to try, and more of NCCL's lines in small letters."""
        sc = self.scans.get(skip)
        if sc is None:
            sc = self.scans[skip] = _Scan(self.anchors - skip, ())
            sc.plain = self.plain + self._uncovered(sc)
            done = {lit for a in skip for lit in self.anchor_lits.get(a, ())}
            sc.wanted = re.compile(_trie(sorted(
                shape for shape, lits in self._originals.items() if not lits <= done)).encode())
        return sc


class _Scan:
    """What the scan over a block's bytes is made of, for a set of anchors: the translation table
    (each anchor's first character -> \x01, the prompt characters -> \x02), the one pattern of all
    anchors, and the small-letter replacements no anchor loses a letter by (_QUIETER)."""

    __slots__ = ("table", "fast", "quiet", "quiet_plain", "plain", "wanted")

    def __init__(self, anchors: frozenset[bytes], plain: tuple[bytes, ...]):
        table = bytearray(range(256))
        for a in anchors:
            table[a[0]] = 1
        for ch in _PROMPT_ANCHORS:
            table[ord(ch[0])] = 2
        self.table = bytes(table)
        rests = sorted({a.translate(self.table)[1:].decode("latin-1") for a in anchors})
        self.fast = re.compile(b"\x01" + _trie(rests).encode("latin-1")) if anchors else None
        quieter = [(channels, [(o.translate(None, _DIGITS), n.translate(None, _DIGITS)) for o, n in row]) for channels, row in _QUIETER]
        rows = [(channels, next((pair for pair in row if all(_survives(a, *pair) for a in anchors)), None))
                for channels, row in quieter]
        self.quiet = tuple(pair for _, pair in rows if pair is not None)  # for a block with channel lines
        self.quiet_plain = tuple(pair for channels, pair in rows if pair is not None and not channels)  # without
        self.plain = plain  # literals searched as they are (bytes.find) with this scan
        # The literals (their shapes) a line the anchors stop at must hold to be read: translated, an
        # anchor also matches other words ("Init START" matches "Init COMPLETE" once C, O, M, P and L
        # all start some anchor), and a saturated needle's lines are summed in bulk, not read.
        self.wanted: re.Pattern[bytes] | None = None


_TABLES: _Tables | None = None


def tables() -> _Tables:
    global _TABLES
    if _TABLES is None:
        _TABLES = _Tables(kb.patterns())
    return _TABLES


class Diagnoser:
    """Feed it bytes; ask it for the diagnosis. See the module docstring."""

    def __init__(self, *, on_transport: Callable[[dict], None] | None = None, patterns: tuple[kb.Pattern, ...] | None = None):
        self.t = tables() if patterns is None else _Tables(patterns)
        self.on_transport = on_transport
        self._fired = False
        self.facts = NcclFacts()
        self.aggs: dict[tuple[str, str], _Agg] = {}
        self.dropped_findings = 0
        self.segments: list[Segment] = []
        self.dropped_segments = 0
        self.sources: list[dict] = []
        self.notes: list[str] = []
        self._source: dict | None = None
        self._src_index = -1
        self._tail = b""
        self._skipping = False  # inside a line longer than MAX_LINE: drop until its newline
        self._cr = False  # the last chunk ended with a CR (made a line end): a LF first in the next is its CRLF
        self._lineno = 0  # lines completed in this source
        self._seg: dict | None = None  # the tool output being collected
        self._cut_lines = 0
        self._socket_seen: tuple | None = None
        self._follow = 0  # lines still to read after a "Last error:" line
        # Markdown fences in a ticket, and the label that makes the next one hypothetical (_line).
        self._fence = False
        self._hypothetical = 0  # the last line an "Expected:" block may hide (0: none open)
        self._expected_at: int | None = None
        self._channels = False  # the block being read holds channel lines
        self._socket_explicit = False  # (seq, evidence) of the first line showing NCCL on sockets
        self._tb: dict | None = None  # the Python traceback being read: whose it is, lines left
        self._traceback_seen = False
        self._quote_next = False  # the line after "Last error:" quotes NCCL's error
        self._pod_host: dict[str, str] = {}  # kubectl --prefix pod -> the host NCCL's prefix names
        self._plugin_seen: dict[str | None, dict] = {}  # host -> the line that says which net plugin it uses
        self._ports_seen: dict | None = None  # NCCL's first device list with InfiniBand and RoCE ports
        self._settings: dict[str, dict] = {}  # NCCL_SOCKET_IFNAME ... -> {value, seq, evidence}
        self._nccl_first: dict | None = None  # evidence of NCCL's first line of its own
        self._nccl_complete: dict | None = None  # evidence of the first "Init COMPLETE"
        self._known_text = False  # a line of a source rdmadoctor reads (a row's needle, libibverbs, mlx5 ...)
        self._sat_count: dict[str, int] = {}  # _SATURATING needle -> lines read with it
        self._trace_start: dict[tuple, dict] = {}  # (host, pid) -> the first line of its NCCL error trace
        self._known_warn: dict[tuple, tuple] = {}  # (host, pid) -> (line, finding) of its last WARN a row explained
        self._trace_origin: dict = {}
        self._shapes = b""  # the block being read: its distinct lines without digits (_candidates)
        self._nlines = 0
        self._block_bytes = 0
        self._saturated: set[str] = set()
        self._skip: frozenset[bytes] = frozenset()  # anchors no longer scanned for (their needles saturated)
        self._scan = self.t.scan_for(self._skip)

    # -- input ----------------------------------------------------------------------------
    def _ensure_source(self, name: str) -> dict:
        if self._source is None or self._source["name"] != name:
            self.end_source()
            self._src_index += 1
            self._source = {"name": name, "bytes": 0, "lines": 0, "error": None}
            self.sources.append(self._source)
            self._lineno = 0
            self._cr = False
        return self._source

    def feed(self, data: bytes, source: str = "-") -> None:
        src = self._ensure_source(source)
        if not data:
            return
        src["bytes"] += len(data)
        if self._cr:
            self._cr = False
            if data[:1] == b"\n":  # the LF of a CRLF cut between two chunks
                data = data[1:]
                if not data:
                    return
        if b"\r" in data:
            # A lone CR ends a line as a LF does (old Mac files, a progress bar that rewrites its
            # line, a log of CRs only), here before the MAX_LINE cut: else a log with CR endings
            # only would be one long line, read for its first MAX_LINE bytes. CRLF is one end.
            self._cr = data.endswith(b"\r")
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if self._skipping:
            nl = data.find(b"\n")
            if nl < 0:
                return
            data = data[nl + 1:]
            self._skipping = False
            self._lineno += 1
        last = data.rfind(b"\n")
        if last < 0:
            self._tail += data
        else:
            if self._tail:
                # The line the previous chunk left open, completed: a small block of its own,
                # so the big chunk is never copied just to glue a few bytes in front.
                first = data.find(b"\n") + 1
                self._block(self._tail + data[:first])
                self._tail = b""
                if first <= last:
                    self._block(data[first:last + 1])
            else:
                self._block(data if last + 1 == len(data) else data[:last + 1])
            self._tail = data[last + 1:]
        if len(self._tail) > MAX_LINE:
            # A line longer than any message: keep its start for matching, drop the rest.
            self._block(self._tail[:MAX_LINE] + b"\n")
            self._lineno -= 1  # the cut line continues: it is counted once, at its newline
            self._cut_lines += 1
            self._tail = b""
            self._skipping = True

    def read(self, path: str, *, stdin=None, progress: Callable[[int], None] | None = None) -> None:  # noqa: ANN001
        """Read one file (plain or gzip; ``-``: stdin) to its end; what stops it is that source's error."""
        from rdmadoctor.logs import reader

        self._ensure_source(path)
        try:
            stream = reader.open_source(path, stdin=stdin)
        except reader.SourceError as e:
            self.error(str(e), path)
            self.end_source()
            return
        try:
            self.read_stream(path, stream, progress=progress)
        finally:
            if path != "-":
                stream.close()

    def read_stream(self, name: str, stream, *, progress: Callable[[int], None] | None = None) -> None:  # noqa: ANN001
        """Read a binary stream (plain, gzip, bzip2 or xz) to its end as the source ``name``."""
        from rdmadoctor.logs import reader

        src = self._ensure_source(name)
        text = reader.Text()  # NUL runs and binary parts skipped, a gzip member after text inflated
        try:
            for chunk in reader.chunks(stream):
                for part in text.parts(chunk):
                    self.feed(part, source=name)
                if text.error is not None:
                    self.error(f"{name}: {text.error}; nothing was read")
                    break
                if progress is not None:
                    progress(len(chunk))
        except reader.SourceError as e:
            self.error(f"{name}: {e}")
        except reader.TruncatedInput as e:
            got = src["bytes"]
            before = f"the {got} bytes before it were diagnosed" if got else "nothing before it could be read"
            self.error(f"{name}: {e}; {before}")
        self.notes.extend(text.notes(name))
        self.end_source()

    def skip(self, lines: int, nbytes: int, source: str = "-") -> None:
        """Count ``lines`` whole lines (``nbytes``) of ``source`` as passed over unread: the
        lines after them keep their true numbers (`rdmadoctor run` reads a job's first and last
        megabytes, not the middle)."""
        src = self._ensure_source(source)
        if lines <= 0:
            return
        self._close_segment()
        self._lineno += lines
        src["bytes"] += nbytes
        src["skipped_lines"] = src.get("skipped_lines", 0) + lines

    @property
    def transport_shown(self) -> bool:
        """NCCL's transport is known (on_transport has fired, or would have)."""
        return self._fired or bool(self.facts.connected and self.facts.network())

    def error(self, message: str, source: str | None = None) -> None:
        """Record why a source could not be read (wholly or from some point on)."""
        if source is not None:
            self._ensure_source(source)
        if self._source is not None:
            self._source["error"] = message

    def end_source(self) -> None:
        if self._source is None:
            return
        if self._tail:
            self._block(self._tail + b"\n")
            self._tail = b""
        if self._skipping:
            self._lineno += 1
            self._skipping = False
        self._close_segment()
        self._source["lines"] = self._lineno

    # -- scanning -------------------------------------------------------------------------
    def _block(self, block: bytes) -> None:
        """Complete lines (ending in a newline)."""
        if b"\r" in block:
            block = block.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\x1b" in block:
            block = _ANSI.sub(b"", block)
        n = len(block)
        self._block_bytes = n
        base = self._lineno
        starts = self._candidates(block)
        if b" coll channels" in self._shapes:  # first: where it is known, the ring listings are not counted
            self.facts.count_coll_channels(block)
        if self._channels:  # the channel lines, counted in C (most of an INFO log)
            self.facts.count_channels(block, hosts=not self._saturated, shapes=self._shapes)
        if self._saturated:
            self._bulk(block)
        elif self._source is not None and self._source["bytes"] - self._block_bytes < PASTE_WINDOW:
            # A paste's hosts (in a job's log every host prints lines the scan reads: its network,
            # its communicators; a paste may hold only one host's WARN among the others' INFO).
            self._hosts(block)
        if not self._fired and self.on_transport is not None and self.facts.connected and self.facts.network():
            self._fire()
        pos, i = 0, 0
        while pos < n:
            if self._seg is not None:
                pos = self._segment_lines(block, pos)
                continue
            while i < len(starts) and starts[i] < pos:
                i += 1
            forced = self._follow > 0 or self._tb is not None
            if forced:  # a line after "Last error:", or of a traceback: read whatever it holds
                if self._follow > 0:
                    self._follow -= 1
                ls = pos
            elif i == len(starts):
                self._lineno = base + self._nlines  # every line of the block, counted once
                return
            else:
                ls = starts[i]
                i += 1
            self._lineno += block.count(b"\n", pos, ls) + 1
            le = block.find(b"\n", ls)
            raw = block[ls:le]
            if forced or self.t.verify.search(raw) or b"$ " in raw or b"# " in raw:
                # The next line, when this block holds it: the rest of this one if a terminal broke it.
                nle = -1 if forced or len(raw) < prefix.WRAP_MIN else block.find(b"\n", le + 1)
                if self._line(raw, self._lineno, block[le + 1:nle] if nle >= 0 else None):
                    self._lineno += 1
                    le = nle
            pos = le + 1

    def _candidates(self, block: bytes) -> list[int]:
        """Starts of the lines of ``block`` that may hold a needle, in order.

        A job prints the same lines again and again with other numbers in them (every rank, every
        communicator, every step): the block is read without its digits, split into lines, and each
        distinct line is scanned once (the scan's literals are read without their digits too, so a
        line that holds a literal always holds what is looked for). The lines of the shapes the scan
        stops at are then found in the block. Also sets ``self._shapes`` (the distinct lines, joined:
        the block's other questions, "any channel line?", are asked of it) and ``self._nlines``."""
        shapes = block.translate(None, _DIGITS).split(b"\n")
        self._nlines = len(shapes) - 1  # the block ends with its last line's newline
        distinct = set(shapes)
        joined = self._shapes = b"\n" + b"\n".join(distinct) + b"\n"
        found = self._scan_text(joined)
        if not found:
            return []
        wanted = {joined[j:joined.find(b"\n", j)] for j in found}
        at = [i for i, x in enumerate(shapes) if x in wanted]
        if not at:
            return []
        ends = list(accumulate(len(x) + 1 for x in block.split(b"\n")))
        return [ends[i - 1] if i else 0 for i in at]

    def _scan_text(self, block: bytes) -> set[int]:
        """Starts of the lines of ``block`` (lines without digits) where the scan stops."""
        starts: set[int] = set()
        rfind, find = block.rfind, block.find
        sc = self._scan  # without the anchors of saturated needles (see _bulk)
        # Channel lines are counted in bulk (NcclFacts.count_channels), not read one by one.
        self._channels = b"Channel " in block or b"Ring " in block
        tb = block
        for old, new in sc.quiet if self._channels else sc.quiet_plain:  # same length: every position stays
            tb = tb.replace(old, new)
        tb = tb.translate(sc.table)
        if sc.fast is not None:
            wanted = sc.wanted
            for m in sc.fast.finditer(tb):
                ls = rfind(b"\n", 0, m.start()) + 1
                if ls not in starts and (wanted is None or wanted.search(block, ls, find(b"\n", ls)) is not None):
                    starts.add(ls)
        for m in self.t.prompt_scan.finditer(tb):
            starts.add(rfind(b"\n", 0, m.start()) + 1)
        plain = sc.plain
        if self._source is not None and self._source["bytes"] - self._block_bytes < PASTE_WINDOW:
            plain += self.t.paste_plain
        for lit in plain:
            j = find(lit)
            while j >= 0:
                starts.add(rfind(b"\n", 0, j) + 1)
                nl = find(b"\n", j)
                j = find(lit, nl + 1) if nl >= 0 else -1
        return starts

    def _bulk(self, block: bytes) -> None:
        """What the lines of saturated needles say, summed up over a block of whole lines in C: the
        ranks and nodes of each communicator line, the hosts on sockets, the hosts that print."""
        f = self.facts
        sat = self._saturated
        shapes = self._shapes  # the block's distinct lines without digits: "is there any ...?" costs nothing
        if b"anks " in shapes and sat & {"INFO comm ", "nRanks", "INFO rank ", "Init COMPLETE", "Init START"}:
            for rank, nranks, nodes, local in set(_BULK_RANKS.findall(block)):
                n = int(nranks)
                f.nranks = max(f.nranks or 0, n)
                if len(f.ranks_seen) < 4096:
                    f.ranks_seen.add(int(rank))
                if nodes:
                    f.nnodes = max(f.nnodes or 0, int(nodes))
                    if local == nranks:
                        f.all_local = True
        if "via NET/Socket" in sat and b"via NET/Socket" in shapes and len(f.socket_channel_hosts) < f.MAX:
            # From one socket channel line to the next (a host prints them in runs): a line that starts
            # with a host already on sockets ("gpu-7:") is passed in three calls in C; for another,
            # the host is what precedes the line's first ":" when NCCL's prefix starts the line.
            known = tuple(h.encode("utf-8", "replace") + b":" for h in f.socket_channel_hosts if h)
            find, rfind, starts = block.find, block.rfind, block.startswith
            j = find(b"via NET/Socket")
            while j >= 0:
                ls = rfind(b"\n", 0, j) + 1
                if known and starts(known, ls):
                    j = find(b"via NET/Socket", j + 14)
                    continue
                le = find(b"\n", j)
                head = block[ls:find(b":", ls, j)]
                if _HOST_AT.match(block, ls) is not None:
                    host: str | None = head.decode("utf-8", "replace")
                else:  # a prefix before NCCL's (kubectl --prefix, mpirun --tag-output)
                    host = prefix.split(block[ls:le].decode("utf-8", "replace"))[1].host
                if host and len(f.socket_channel_hosts) < f.MAX:
                    f.socket_channel_hosts.add(host)
                    known += (host.encode("utf-8", "replace") + b":",)
                j = find(b"via NET/Socket", le) if le >= 0 else -1
        self._hosts(block)

    def _hosts(self, block: bytes) -> None:
        """The hosts of every NCCL INFO line of the block, most of which no needle brings to be read
        (`Setting affinity`, `NVLS multicast ...`): a job's hosts are not only those that warned."""
        shapes = self._shapes
        # A line with NCCL's prefix after another (kubectl --prefix, mpirun --tag-output, pdsh, a quote):
        # the hosts of this block's lines are read wherever they stand.
        anywhere = shapes.count(b"] NCCL INFO ") > len(_NCCL_SHAPE_AT.findall(shapes))
        self.facts.count_hosts(block, anywhere=anywhere, shapes=shapes)

    def _segment_lines(self, block: bytes, pos: int) -> int:
        """Collect the lines of the tool output being read, until a line that ends it."""
        seg = self._seg
        assert seg is not None
        n = len(block)
        while pos < n:
            le = block.find(b"\n", pos)
            raw = block[pos:le]
            text = prefix.unwrap(raw.decode("utf-8", "replace").rstrip())[0]
            if self._ends_segment(text, seg):
                self._close_segment()
                return pos  # the line is scanned again, as a line of its own
            self._lineno += 1
            pos = le + 1
            seg["blank"] = seg["blank"] + 1 if not text.strip() else 0
            if seg["size"] < MAX_SEGMENT_BYTES and len(seg["lines"]) < MAX_SEGMENT_LINES:
                seg["lines"].append(text)
                seg["size"] += len(text) + 1
            else:
                seg["cut"] = True
            if self.t.line_needles.search(text):
                self._match(text, self._lineno, quick=True)
        return pos

    def _ends_segment(self, text: str, seg: dict) -> bool:
        from rdmadoctor.parsers.common import is_prompt

        if seg["kind"] == "nccl-tests":  # the table runs while its lines are rows (or the units line)
            return _TABLE_LINE.match(text) is None
        if seg["kind"] == "dev_infiniband" and not seg["prompted"]:
            # One directory of `ls DIR DIR...`: up to a blank line or the next directory's heading.
            return not text.strip(" │|") or text.rstrip(" │|").endswith(":")
        if is_prompt(text) and not (seg["kind"] == "ncclras" and text.lstrip().startswith("#  in group")):  # RAS's table head
            return True
        if seg["blank"] >= 2 and text.strip():
            return True
        if seg["prompted"]:
            # Another command's output (`kubectl logs POD`, `cat notes.txt`) that holds a tool's output
            # this scanner reads (a pod that ran `ls /dev/infiniband`): that output starts here.
            return seg["kind"] == "other" and self._starts_output(text)
        # Output recognised by its header ends where the log resumes.
        return " NCCL " in text or text.startswith("Traceback")

    def _close_segment(self) -> None:
        seg, self._seg = self._seg, None
        if seg is None:
            return
        while seg["lines"] and not seg["lines"][-1].strip():
            seg["lines"].pop()
        if len(self.segments) >= MAX_SEGMENTS:
            self.dropped_segments += 1
            return
        self.segments.append(Segment(kind=seg["kind"], command=seg["command"], text="\n".join(seg["lines"]) + "\n",
                                     file=seg["file"], line=seg["line"], cut=seg["cut"]))

    def _open_segment(self, kind: str, command: str, first_line: int, header: str | None) -> None:
        self._close_segment()
        src = self._source["name"] if self._source else "-"
        lines = [header] if header is not None else []
        self._seg = {"kind": kind, "command": command, "lines": lines, "size": sum(len(x) + 1 for x in lines),
                     "file": src, "line": first_line, "cut": False, "blank": 0, "prompted": header is None}

    def _line(self, raw: bytes, lineno: int, nxt: bytes | None = None) -> bool:
        """Read one candidate line; True when it also took ``nxt`` (the next line) as its rest."""
        if b"``" in raw or b"xpected" in raw or self._fence:
            bare = raw.decode("utf-8", "replace").strip().lstrip("> \t")
            if bare.startswith("```"):
                # A fenced block of a ticket: the one right after an "Expected:" label shows what the
                # writer hoped to see, not what ran (nothing in it is evidence), for at most
                # _HYPOTHETICAL_LINES lines: a fence never closed does not hide the rest of the input.
                self._fence = not self._fence
                hoped = self._fence and self._expected_at is not None and 0 < lineno - self._expected_at <= 3
                self._hypothetical = lineno + _HYPOTHETICAL_LINES if hoped else 0
                return False
            if lineno <= self._hypothetical:
                return False
            if _EXPECTED_LABEL.match(bare) is not None:
                self._expected_at = lineno
        text, spans = prefix.unwrap(raw.decode("utf-8", "replace").rstrip())
        if "Last error" in text:
            self._follow = LAST_ERROR_LINES
        # A prompt with a command: its output follows, up to the next prompt.
        if ("$ " in text or "# " in text or "% " in text or "> " in text) and self.t.prompt.match(text):
            command = (self.t.prompt.match(text).group("cmd") or "").strip()  # type: ignore[union-attr]
            command = _inner_command(command)
            word = command.split()[0] if command.split() else ""
            kind = _COMMANDS.get(word, "other")
            if kind == "rdma_link" and " link" not in f" {command}":
                kind = "other"
            if kind == "ls":  # `ls -l /dev/infiniband`: the pod's RDMA device nodes
                kind = "dev_infiniband" if "/dev/infiniband" in command and "/sys" not in command else "other"
            if kind == "other" and text.lstrip().startswith("#"):
                # Not a root prompt running a tool: nccl-tests' comment lines ("# nThread 1 ...",
                # "# Out of bounds values : 2 FAILED") and a ticket's headings. Its result table is
                # an output of its own.
                from rdmadoctor.parsers.nccltests import is_header

                if is_header(text):
                    self._open_segment("nccl-tests", "", lineno, text)
                else:
                    self.facts.feed_test_line(text)
                    self._match(text, lineno)
                return False
            self._open_segment(kind, command, lineno + 1, None)
            if any(n in command for n in _LAUNCH_NEEDLES):
                self._match(text, lineno)  # what the launch sets (`mpirun -x NCCL_IB_DISABLE=1 ...`)
            elif kind == "other" and word[:1].isupper():
                # Not a command (commands are not capitalised): a background job's output printed
                # after the prompt (`root@pod:/#  Port number 1 state is Down`).
                self._match(command, lineno)
            return False
        if any(h in text for h in _HEADER_NEEDLES):
            for rx, kind in self.t.headers:
                if rx.search(text):
                    self._open_segment(kind, "", lineno, text)
                    return False
        took = False
        if nxt is not None:
            rest = prefix.unwrap(nxt.decode("utf-8", "replace").rstrip())[0]
            whole = self._rejoin(text, rest) if prefix.continues(text, rest) and not self._starts_output(rest) else None
            if whole is not None:
                text, took = whole, True
                if "Last error" in rest:
                    self._follow = LAST_ERROR_LINES
        hit: set[tuple[str, str]] = set()
        self._match(text, lineno, hit=hit)
        for span in spans:  # messages quoted in backticks inside a sentence, each a line of its own
            self._match(span, lineno, hit=hit)
        return took

    def _rejoin(self, first: str, rest: str) -> str | None:
        """A broken line glued back (with or without a space where it broke, whichever lets more
        knowledge-base rows match, else prefix.joined's guess), or None: the two lines are two.

        Glued only where that explains more than the two lines do apart (a message whose needle or
        ending the break cut), or, where neither says anything to the knowledge base (NCCL's INFO
        lines), where the break cut a token ("[3]ml" + "x5_3:1/IB")."""
        likely, other = prefix.joined(first, rest)
        n_likely, n_other = self._rows(likely), self._rows(other)
        apart = self._rows(first) + self._rows(rest)
        if max(n_likely, n_other) > apart:
            return other if n_other > n_likely else likely
        if apart == 0 and prefix.cut_token(first, rest) and prefix.split(first[:400])[1].level == "INFO":
            return likely
        return None

    def _starts_output(self, text: str) -> bool:
        """Is ``text`` the first line of a tool's output (a header this scanner knows)?"""
        return any(h in text for h in _HEADER_NEEDLES) and any(rx.search(text) for rx, _ in self.t.headers)

    def _rows(self, text: str) -> int:
        body = prefix.split(text)[0]
        return sum(1 for needle in set(self.t.line_needles.findall(text)) for p in self.t.by_needle.get(needle, ())
                   if self.t.regex[p.id].search(body) or self.t.regex[p.id].search(text))

    def _match(self, text: str, lineno: int, quick: bool = False, hit: set | None = None) -> None:
        body, meta = prefix.split(text)
        if meta.level is not None:  # a line NCCL printed itself (its host:pid:tid prefix)
            if meta.pod and meta.host and meta.host != meta.pod and len(self._pod_host) < 1024:
                # `kubectl logs --prefix` names the pod, NCCL the host it runs on: one host.
                self._pod_host.setdefault(meta.pod, meta.host)
            if self._nccl_first is None:
                self._nccl_first = self._evidence(text, lineno, meta)
                self.facts.init_started = True
        if meta.level is not None or "NCCL" in text or "RCCL version" in text:
            complete = self.facts.init_complete
            self.facts.feed(body, meta.host)
            if meta.host in self.facts.host_plugins and meta.host not in self._plugin_seen and len(self._plugin_seen) < 64:
                self._plugin_seen[meta.host] = self._evidence(text, lineno, meta)
            if self._ports_seen is None and "/RoCE" in body and "/IB" in body and ": Using [" in body:
                self._ports_seen = self._evidence(text, lineno, meta)  # a device list with both link layers
            if not complete and self.facts.init_complete and self._nccl_complete is None:
                self._nccl_complete = self._evidence(text, lineno, meta)
            if " set " in body:
                s = _SETTING.search(body)
                if s is not None and s.group("name") not in self._settings:
                    self._settings[s.group("name")] = {"value": s.group("value").rstrip("."), "seq": (self._src_index, lineno),
                                                       "evidence": self._evidence(text, lineno, meta)}
            # The line that shows NCCL on sockets: "Using network Socket" (or a NET/Socket channel),
            # else, for NCCL <= 2.5, the "NET/Socket : Using" after "No device found".
            if ("Using " in body or "via NET/" in body) and (self._socket_seen is None or not self._socket_explicit):
                # (once an explicit line is held, nothing here changes: the check over every host's
                # network is not paid again on every later NCCL line)
                explicit = any(is_socket(n, None) for n in self.facts.networks.values()) or bool(self.facts.socket_channel_hosts)
                if explicit or self._socket_seen is None and self.facts._implied():
                    self._socket_explicit = explicit
                    self._socket_seen = ((self._src_index, lineno), self._evidence(text, lineno, meta))
            if self._socket_seen is None and "NET/OFI Selected" in body and tcp_fabric(self.facts.fabric):
                # aws-ofi-nccl on libfabric's tcp provider: the line that shows NCCL's traffic on TCP.
                self._socket_seen = ((self._src_index, lineno), self._evidence(text, lineno, meta))
            if not self._fired and self.on_transport is not None and self.facts.connected and self.facts.network():
                self._fire()
        error = self._error_line(text, body, meta, lineno)
        if not self._known_text and any(m in text for m in _SOURCE_MARKERS):
            self._known_text = True
        # Each needle in the line gets its first matching row: a traceback pasted on one line
        # holds the exception and its "Last error:" cause, two findings.
        seen: set[str] = set()
        hit = set() if hit is None else hit
        for m in self.t.line_needles.finditer(text):
            needle = m.group()
            if needle in seen:
                continue
            seen.add(needle)
            if needle in _SATURATING:
                c = self._sat_count[needle] = self._sat_count.get(needle, 0) + 1
                if c == SATURATE_AFTER:
                    self._saturated.add(needle)
                    self._skip = frozenset(a for a, lits in self.t.anchor_lits.items() if lits <= self._saturated)
                    self._scan = self.t.scan_for(self._skip)
            rows = self.t.by_needle.get(needle, ())
            if rows:
                self._known_text = True
            for p in rows:
                g = self.t.regex[p.id].search(body) or self.t.regex[p.id].search(text)
                if g is None:
                    continue
                self._hit(p, kb.groups_of(p, g, meta.loc), text, lineno, meta, hit)
                break
        if error is not None and not hit:
            label, quoted, symptom = error
            pattern = _UNKNOWN_SYMPTOM if symptom else _UNKNOWN
            key = ("unknown", _NORMAL.sub("N", quoted[:300]))
            if label == "trace":
                # One finding per result for all of NCCL's traces, quoted from where one began (_trace).
                o = self._trace_origin
                label, api, began = o["result"], o["api"], o["began"]
                what = (f"NCCL returned {label} to its caller from {api}" if began == api else
                        f"NCCL returned {label} to its caller ({api}), passed up from {began}{o['why']}")
                groups = {"label": label, "quoted": o["body"][:300], "what": what}
                self._hit(pattern, groups, o["text"], o["line"], o["meta"], hit, key=("trace", label))
                return
            else:
                what = {"NCCL WARN": "NCCL warned", "Last error": "PyTorch quoted NCCL's last error"}.get(
                    label, f"The traceback ends with {label}" if not label.startswith("nccl") else f"NCCL returned {label}")
            groups = {"label": label, "quoted": quoted[:300], "what": what}
            self._hit(pattern, groups, text, lineno, meta, hit, key=key)

    def _error_line(self, text: str, body: str, meta: prefix.Meta, lineno: int = 0) -> tuple[str, str, bool] | None:
        """(label, the quoted error, symptom?) when ``text`` is an error line, whatever its words:
        an NCCL WARN, the line PyTorch quotes after "Last error:", an NCCL result name, the last line
        of a traceback. Also follows the traceback being read."""
        found = None
        if self._tb is not None:
            exc = self._traceback_line(text, body, meta)
            if exc is not None:
                found = (exc.rsplit(".", 1)[-1], body, True)
        if self._tb is None and (body.startswith('File "') and ", line " in body
                                 or "Traceback (most recent call last)" in body):
            # From its header when that line was read, else from its first frame.
            self._tb = {"who": (meta.pod, meta.rank), "left": MAX_TRACEBACK_LINES}
            self._traceback_seen = True
            return None
        if self._quote_next:
            # The line right after "Last error:" holds NCCL's last error; blank, NCCL had none to give
            # (then C++'s "Exception raised from ..." follows, which is not the error).
            self._quote_next = False
            if body and not body.startswith("Exception raised from"):
                return found or ("Last error", body, False)
            return found
        if "Last error" in body:
            tail = body.split("Last error", 1)[1].lstrip(": \t")
            if not tail:
                self._quote_next = True
                return found
            return found or ("Last error", tail, False)
        if found is not None:
            return found
        if meta.level == "WARN":
            return ("NCCL WARN", body, False)
        if meta.level == "INFO" and " -> " in body:
            t = _NCCL_TRACE.match(body)
            if t is not None:
                return self._trace(t, text, meta, lineno)
        if "nccl" in body:
            m = _NCCL_RESULT.search(body)
            # As a program prints it: the line's first word, or after a colon or "error" / "returned"
            # ("NCCL error: ncclSystemError"), not late in a sentence someone wrote about it.
            if m is not None and _RESULT_AT.search(body, 0, m.start() + 1) is not None:
                return (m.group(1), body, True)
        return found

    def _trace(self, t: re.Match, text: str, meta: prefix.Meta, lineno: int) -> tuple[str, str, bool] | None:
        """One line of NCCL's error trace (_NCCL_TRACE): an error once the trace reaches the API,
        quoted from the line where it began (the same thread's first trace line, TRACE_GAP)."""
        who = (meta.host, meta.pid)
        start = self._trace_start.get(who)
        if start is None or lineno - start["last"] > TRACE_GAP:
            # Where the trace began, read once: the file and line that failed, and errno's text. A trace
            # that begins right after a WARN a row explained (the same process) passes that error up: the
            # result it reaches the API with is that finding's, not an unknown one.
            why = f" ({t.group('why')})" if t.group("why") else ""
            warned = self._known_warn.get(who)
            start = {"text": text, "line": lineno, "meta": meta, "last": lineno, "body": t.string,
                     "began": f"{t.group('file')}:{t.group('line')}", "why": why,
                     "explains": warned[1] if warned is not None and 0 < lineno - warned[0] <= _TRACE_AFTER_WARN else None}
            if len(self._trace_start) < 1024:
                self._trace_start[who] = start
        start["last"] = lineno
        if start.get("said") or t.group("file").rsplit("/", 1)[-1] not in _API_FILES:
            return None  # said once per trace (init.cc, then group.cc, pass the same result up)
        start["said"] = True
        agg = start["explains"]
        if agg is not None:  # the explained WARN's error, returned: its finding quotes where it surfaced
            if len(agg.evidence) < MAX_EVIDENCE:
                agg.evidence.append(self._evidence(text, lineno, meta))
            return None
        self._trace_origin = {**start, "result": _NCCL_RESULTS[t.group("rc")], "api": f"{t.group('file')}:{t.group('line')}"}
        return ("trace", text, True)

    def _traceback_line(self, text: str, body: str, meta: prefix.Meta) -> str | None:
        """Follow a traceback: its exception's name when ``text`` is its last line (the first line
        of its stream that is not indented), else None."""
        tb = self._tb
        assert tb is not None
        tb["left"] -= 1
        if tb["left"] <= 0:
            self._tb = None
            return None
        if meta.level is not None or (meta.pod, meta.rank) != tb["who"] or not body:
            return None  # NCCL's own line, or another rank's, printed in between
        head = text[: len(text) - len(body)] if text.endswith(body) else ""
        if head.endswith(("  ", "\t")) or (head and not head.strip()):
            return None  # a frame: `  File "train.py", line 9` and the code under it
        if body.startswith(("Traceback", "During handling", "The above exception")):
            return None
        self._tb = None
        m = _EXC_LINE.match(body)
        if m is None or m.group(1).rsplit(".", 1)[-1] in _WRAPPER_EXCEPTIONS:
            return None
        return m.group(1)

    def _evidence(self, text: str, lineno: int, meta: prefix.Meta) -> dict:
        return {"file": self._source["name"] if self._source else "-", "line": lineno, "text": text[:400],
                "host": meta.host, "rank": meta.rank, "time": meta.time}

    def _hit(self, p: kb.Pattern, groups: dict, text: str, lineno: int, meta: prefix.Meta, hit: set,
             key: tuple | None = None) -> None:
        subject = kb.render(p.subject, groups).strip() or p.code
        if (p.code, subject) in hit:  # two rows saying the same thing of one line count once
            return
        hit.add((p.code, subject))
        if key is None:
            # Rows of one code that say the same of a subject (a kill, seen in torchrun's warning and
            # in its SignalException; an NCCL result and PyTorch's words for it) are one finding;
            # other rows keep one finding each.
            key = (p.code, subject) if p.code in _SAME_FINDING else (p.id, subject)
        agg = self.aggs.get(key)
        if agg is None:
            if len(self.aggs) >= MAX_FINDINGS:
                self.dropped_findings += 1
                return
            symptom = kb.is_symptom(p, groups) or bool(
                p.symptom_after and any(a.pattern.code in p.symptom_after or a.pattern.id in p.symptom_after
                                        for a in self.aggs.values()))
            nccl_host = (meta.host or "") if meta.level is not None else None
            agg = self.aggs[key] = _Agg(p, groups, subject, (self._src_index, lineno), meta.time, symptom, nccl_host)
        agg.count += 1
        if meta.host and len(agg.hosts) < 64:
            agg.hosts.add(meta.host)
        if meta.rank is not None and len(agg.ranks) < 1024:
            agg.ranks.add(meta.rank)
        if len(agg.evidence) < MAX_EVIDENCE:
            agg.evidence.append(self._evidence(text, lineno, meta))
        if meta.level == "WARN" and p is not _UNKNOWN and p is not _UNKNOWN_SYMPTOM and len(self._known_warn) < 1024:
            self._known_warn[(meta.host, meta.pid)] = (lineno, agg)

    def _fire(self) -> None:
        self._fired = True
        try:
            assert self.on_transport is not None
            self.on_transport(self.facts.to_json() or {})
        except Exception:  # noqa: BLE001 - a callback's failure never stops the reading
            pass

    # -- the verdict ----------------------------------------------------------------------
    def fallback_reason(self) -> str | None:
        """The earliest problem seen so far that explains a fall back to sockets, worded as the
        NCCL_SOCKET_FALLBACK finding words it ("... (NCCL_IB_DISABLED_BY_ENV)"); None: none yet."""
        for a in sorted(self.aggs.values(), key=lambda a: a.seq):
            if _explains_fallback(a):
                return f"{kb.render(a.pattern.message, a.groups).rstrip('. ')} ({a.pattern.code})"
        return None

    def job_ended(self, signal: int | None = None, status: int | None = None, command: str = "the job") -> None:
        """What `rdmadoctor run` saw of its child: a kill (signal N, a status 124 from `timeout`, a
        status 128+N from a shell whose child signal N killed) is a finding at the end of its output."""
        if signal is None and status is not None and 128 < status <= 128 + 64:
            signal = status - 128
            how = f"exited with status {status} (128+{signal}: a shell's way of saying its command was killed by a signal)"
        elif signal is None and status == 124:
            signal = 15
            how = "exited with status 124, which `timeout` returns when it stopped its command (with SIGTERM by default)"
        elif signal is not None:
            how = "was killed by"
        else:
            return
        from rdmadoctor.logs.kb.pytorch import _signal

        groups = _signal({"sig": str(signal)})
        text = f"rdmadoctor run: {command} {how}" + (f" {groups['signal_text']}" if how == "was killed by" else "")
        lineno = self._lineno + 1 if self._source is not None else 1
        if self._source is None:
            self._ensure_source("-")
        self._hit(_RUN_KILLED, {**groups, "how": text}, text, lineno, prefix.Meta(), set())

    def _single_host(self, aggs: list[_Agg]) -> tuple[list[_Agg], Finding | None]:
        """On a job whose ranks are all on one host, `NET/IB : No device found` and NCCL on sockets
        are information: (the findings without them, the NCCL_SINGLE_HOST finding or None)."""
        from rdmadoctor.logs.kb.gloo import GLOO_LOOPBACK
        from rdmadoctor.logs.kb.nccl import NCCL_IB_NO_DEVICE, NCCL_LOOPBACK, NCCL_SINGLE_HOST

        # (An image without libibverbs stays a finding: the next job with it on two nodes runs on TCP.)
        quiet = [a for a in aggs if a.pattern.code in (NCCL_IB_NO_DEVICE.code, GLOO_LOOPBACK.code, NCCL_LOOPBACK.code)]
        on_sockets = self._socket_seen is not None or bool(self.facts.socket_channel_hosts)
        if not quiet and not on_sockets:
            return aggs, None
        evidence = [ev for a in quiet for ev in a.evidence]
        if self._socket_seen is not None:
            evidence.append(self._socket_seen[1])
        nodes = "nNodes 1" if self.facts.nnodes == 1 else "every rank on one host"
        codes = {a.pattern.code for a in quiet}
        said = " and ".join(x for x in ("`NET/IB : No device found`" if NCCL_IB_NO_DEVICE.code in codes else "",
                                         "Gloo on the loopback address" if GLOO_LOOPBACK.code in codes else "",
                                         "NCCL's sockets on the loopback" if NCCL_LOOPBACK.code in codes else "",
                                         f"NCCL on {self.facts.network() or 'sockets'}" if on_sockets else "") if x)
        f = Finding(NCCL_SINGLE_HOST.code, INFO, "NCCL", f"The job runs on one host ({nodes}): NCCL sends nothing over the "
                    f"network, so {said} {'are' if ' and ' in said else 'is'} information here, not an error.", NCCL_SINGLE_HOST.fix,
                    data={"evidence": evidence[:MAX_EVIDENCE], "nodes": 1})
        return [a for a in aggs if a not in quiet], f

    def _mixed_link_layers(self) -> Finding | None:
        """NCCL_MIXED_LINK_LAYERS: NCCL's IB device list holds InfiniBand and RoCE ports."""
        from rdmadoctor.logs.kb.nccl import NCCL_MIXED_LINK_LAYERS

        devs = self.facts.net_devices
        layers = {d.get("link_layer") for d in devs}
        if not {"InfiniBand", "RoCE"} <= layers:
            return None
        roce = sorted({d["name"] for d in devs if d.get("link_layer") == "RoCE"})
        ib = sorted({d["name"] for d in devs if d.get("link_layer") == "InfiniBand"})
        return Finding(NCCL_MIXED_LINK_LAYERS.code, WARNING, "NCCL_IB_HCA",
                       f"NCCL's IB transport uses InfiniBand ports ({', '.join(ib[:8])}) and RoCE ports "
                       f"({', '.join(roce[:8])}) together: channels through the RoCE ones cannot reach InfiniBand peers.",
                       f"Keep NCCL on one fabric: NCCL_IB_HCA=^{','.join(roce[:8])} (or list the InfiniBand ports).",
                       data={"roce": roce, "infiniband": ib, "evidence": [self._ports_seen] if self._ports_seen else []})

    def _plugins_differ(self) -> Finding | None:
        """NCCL_PLUGIN_MISMATCH: the hosts of one job do not load the same net plugin (one the SHARP or
        OFI plugin, another NCCL's own transports): their ranks cannot connect, or hang."""
        from rdmadoctor.logs.kb.nccl import NCCL_PLUGIN_MISMATCH

        by: dict[str, list[str]] = {}
        for host, plugin in self.facts.host_plugins.items():
            if host:
                by.setdefault(plugin, []).append(host)
        named = [p for p in by if p and "/" not in p]
        # Hosts with a plugin against hosts without; or two plugins named differently (a path and a
        # name are the same plugin seen at two moments, not a difference).
        if not (("" in by and len(by) > 1) or len(named) > 1):
            return None
        said = "; ".join(f"{', '.join(sorted(hosts)[:4])}{' ...' if len(hosts) > 4 else ''}: "
                         f"{plugin or 'no net plugin (NCCL internal)'}" for plugin, hosts in sorted(by.items()))
        evidence = [ev for h, ev in self._plugin_seen.items() if h][:MAX_EVIDENCE]
        return Finding(NCCL_PLUGIN_MISMATCH.code, ERROR, "NCCL net plugin",
                       f"The job's hosts do not use the same NCCL net plugin ({said}): ranks on different transports "
                       "cannot connect to each other, and the job hangs or fails where they meet.",
                       NCCL_PLUGIN_MISMATCH.fix, data={"evidence": evidence, "plugins": {k or "": v for k, v in by.items()}})

    def _alias_pods(self) -> None:
        """Hosts named by a kubectl --prefix pod, renamed to the host NCCL's prefix gave that pod."""
        alias = self._pod_host
        if not alias:
            return
        f = self.facts
        f.hosts = {alias.get(h, h) for h in f.hosts}
        f.networks = {alias.get(h, h) if h else h: n for h, n in f.networks.items()}
        for name in ("socket_channel_hosts", "no_ib_hosts", "socket_iface_hosts"):
            setattr(f, name, {alias.get(h, h) if h else h for h in getattr(f, name)})
        for a in self.aggs.values():
            a.hosts = {alias.get(h, h) for h in a.hosts}

    def _stage(self, f: Finding) -> Finding:
        """A kill, with how far NCCL got before it and the next step for that stage."""
        from rdmadoctor.core.record import replace
        from rdmadoctor.logs.kb.pytorch import KILLED_STAGES

        def where(ev: dict | None) -> str:
            return f"line {ev['line']} of {ev['file']}" if ev else "?"

        if self._nccl_complete is not None or self.facts.init_complete:
            stage = "collective"
        elif self.facts.init_started:
            stage = "init"
        else:
            stage = "before_nccl"
        what, step = KILLED_STAGES[stage]
        what = what.format(first=where(self._nccl_first), complete=where(self._nccl_complete))
        ev = (f.data.get("evidence") or [{}])[0]
        # `run` saw the kill itself, after the last line: there is no line to point at.
        at = f" (line {ev['line']} of {ev['file']})" if ev.get("line") and f.data.get("pattern") != _RUN_KILLED.id else ""
        data = {**f.data, "nccl_stage": stage}
        if "SIGKILL" in f.subject or "(Killed)" in f.subject or f.subject.startswith("signal 9"):
            # SIGKILL is the OOM killer's signal before it is a stop after a hang: that is checked first.
            step = ("first whether the kernel's OOM killer sent it (`dmesg | grep -i oom` on the node, the pod's last "
                    f"state OOMKilled, exit code 137) and give the pod more memory; if not, {step}")
        return replace(f, message=f"{f.message.rstrip('.')}{at}. {what}.", remedy=f"Next: {step}.", data=data)

    def _joined(self, f: Finding) -> Finding:
        """A failure after the NCCL setting that explains it: both lines as evidence (_SETTING_JOINS)."""
        if f.cause:
            return f
        ev = (f.data.get("evidence") or [{}])[0]
        for name, codes, why, fix in _SETTING_JOINS:
            setting = self._settings.get(name)
            if setting is None or f.code not in codes:
                continue
            src = next((i for i, s in enumerate(self.sources) if s["name"] == ev.get("file")), None)
            if src is None or (src, ev.get("line") or 0) < setting["seq"]:
                continue  # the setting came after the failure: it did not shape it
            from rdmadoctor.core.record import replace

            sev = setting["evidence"]
            text = why.format(value=setting["value"], where=f"line {sev['line']} of {sev['file']}")
            data = {**f.data, "setting": {"name": name, "value": setting["value"], "file": sev["file"], "line": sev["line"]},
                    "evidence": [sev] + list(f.data.get("evidence") or [])[: MAX_EVIDENCE - 1]}
            return replace(f, message=f"{text}. {f.message}", remedy=f"{fix} {f.remedy}".strip(), data=data)
        return f

    def finish(self) -> Diagnosis:
        self.end_source()
        self._alias_pods()
        nccl = self.facts.to_json()
        if not self._fired and self.on_transport is not None and nccl and nccl.get("network"):
            self._fire()
        # (a tool's output counts when it is one rdmadoctor judges: `kubectl get node` read as text is not)
        judged = any(seg.kind in _JUDGED_OUTPUTS for seg in self.segments)
        # NCCL's facts count when they say something: a line NCCL printed itself, or a fact in the `nccl`
        # block (a ticket's prose "NCCL version is: 2.11.4" sets none, and judges nothing).
        said = self._nccl_first is not None or any(v is not None and v != [] for v in (nccl or {}).values())
        recognised = bool(self.aggs or self.facts.seen and said or judged or self._traceback_seen or self._known_text)
        aggs = sorted(self.aggs.values(), key=_order_key(list(self.aggs.values())))
        single = None
        if self.facts.single_host():
            aggs, single = self._single_host(aggs)
        aggs = _ib_off(aggs)
        aggs = _others_unopened(aggs, self.segments)
        linked, cause = _link(aggs)
        findings = [self._stage(f) if f.code in _ONE_FINDING else self._joined(f) for f in linked]
        ids = list(range(len(findings)))  # each finding's agg; -1 the socket fallback, -2 the one-host note
        fallback = None if self.facts.single_host() else _socket_fallback(self.facts, nccl, aggs)
        reason = None
        if fallback is not None:
            at = len(findings)
            if self._socket_seen is not None:
                seq, ev = self._socket_seen
                fallback.data["evidence"] = [ev]
                at = next((i for i, a in enumerate(aggs) if a.seq > seq), len(aggs))
            findings.insert(at, fallback)
            ids.insert(at, -1)
            if fallback.cause:
                reason = next((i for i, a in enumerate(aggs) if _explains_fallback(a)), None)
        for extra in (None if self.facts.single_host() else self._plugins_differ(), self._mixed_link_layers()):
            if extra is not None:
                findings.append(extra)
                ids.append(-3)
        if single is not None:
            findings.append(single)
            ids.append(-2)
        rank = _rank_key(aggs, cause, fallback=fallback is not None, reason=reason)
        findings = [f for _, f in sorted(zip(ids, findings), key=lambda x: rank(x[0]))]
        notes = list(self.notes)
        if self.dropped_findings:
            notes.append(f"{self.dropped_findings} more distinct messages were not kept (limit {MAX_FINDINGS})")
        if self.dropped_segments:
            notes.append(f"{self.dropped_segments} more pasted tool outputs were not kept (limit {MAX_SEGMENTS})")
        if self._cut_lines:
            notes.append(f"{count(self._cut_lines, 'line')} longer than {MAX_LINE // 1024} KiB were cut for matching")
        settings = {name: {"value": v["value"], "evidence": v["evidence"]} for name, v in self._settings.items()}
        return Diagnosis(findings=findings, nccl=nccl, segments=list(self.segments), sources=list(self.sources), notes=notes,
                         recognised=recognised, settings=settings)


def _ib_off(aggs: list[_Agg]) -> list[_Agg]:
    """With NCCL_IB_DISABLE (or NCCL_NET=Socket) set, NCCL's `Failed to open libibverbs` is information:
    NCCL was told not to use IB, and the setting (its own finding) is what keeps the job off RDMA."""
    from rdmadoctor.logs.kb.nccl import NCCL_IB_DISABLED_BY_ENV, VERBS_LIB_MISSING

    if not any(a.pattern.code == NCCL_IB_DISABLED_BY_ENV for a in aggs):
        return aggs
    for a in aggs:
        if a.pattern.code == VERBS_LIB_MISSING:
            _as_information(a, a.pattern.message.rstrip(".") + "; NCCL was also told not to use IB (NCCL_IB_DISABLE, "
                            "NCCL_NET=Socket), so it would not have: information here.")
    return aggs


def _others_unopened(aggs: list[_Agg], segments: list[Segment]) -> list[_Agg]:
    """ibv_devinfo lists every RDMA device of the node and opens each: in a pod given one VF, the
    others fail (`Failed to open device`) and the pod's own opens. With an ACTIVE port opened in the
    same paste, those failures are information (hustcat/k8s-rdma-device-plugin#8)."""
    opened = [re.search(r"hca_id:\s*(\S+)", seg.text) for seg in segments
              if seg.kind == "ibv_devinfo" and "PORT_ACTIVE" in seg.text]
    names = sorted({m.group(1) for m in opened if m is not None})
    if not names:
        return aggs
    for a in aggs:
        if a.pattern.id == "ibtools.open_device_failed":
            _as_information(a, f"ibv_devinfo could not open some of the node's RDMA devices, and opened "
                               f"{', '.join(names[:4])} with an ACTIVE port: it lists every device the kernel has, and "
                               "a pod can open only those it was given. Information; use the one it opened "
                               "(NCCL_IB_HCA, perftest -d).")
    return aggs


def _as_information(a: _Agg, message: str) -> None:
    """A problem its row calls one, made information by what else the input shows (its message says why)."""
    from rdmadoctor.core.record import replace

    if a.pattern.severity != INFO:
        a.pattern = replace(a.pattern, severity=INFO, explains_fallback=False, message=message)


def _order_key(aggs: list[_Agg]) -> Callable[[_Agg], Any]:
    """By time when every finding has a sortable timestamp, else by position in the input."""
    if aggs and all(a.time and _TS_SORTABLE.match(a.time) for a in aggs):
        return lambda a: (a.time.replace("T", " ")[:26], a.seq)  # type: ignore[union-attr]
    return lambda a: a.seq


def _finding(a: _Agg) -> Finding:
    p = a.pattern
    data: dict[str, Any] = {
        "pattern": p.id,
        "count": a.count,
        "evidence": a.evidence,
        "meaning": p.meaning,
        "ref": p.ref,
    }
    if a.hosts:
        data["hosts"] = sorted(a.hosts)
    if a.ranks:
        data["ranks"] = sorted(a.ranks)
    if a.symptom:
        data["symptom"] = True
    return Finding(p.code, p.severity, a.subject, kb.render(p.message, a.groups), p.fix, data=data)


# PyTorch raises `NCCL error in: ..., unhandled system error` and prints the NCCL WARN that
# explains it on the lines after ("Last error:"): a symptom with no cause before it takes one
# from this many lines after it, in the same input.
LOOKAHEAD_LINES = 8


def _link(aggs: list[_Agg]) -> tuple[list[Finding], dict[int, int]]:
    """Findings in order, each symptom linked to its cause.

    A symptom's cause is the earliest problem seen before it (one its row ``follows`` first), else
    the first one in the next LOOKAHEAD_LINES lines of the same input. Two passes: a symptom that
    finds no cause among the root problems (``Error while creating shared memory segment`` quoted
    alone under PyTorch's ``Last error:``) is a root itself, and the symptoms left over link to it.
    """
    found = [_finding(a) for a in aggs]
    problem = [a.pattern.severity in (ERROR, WARNING) for a in aggs]
    cause: dict[int, int] = {}
    roots = [i for i, a in enumerate(aggs) if problem[i] and not a.symptom]
    # An NCCL WARN no row knows, right before a known error NCCL printed on the same host, is part of
    # that error's cascade (`Call to open failed` then `Error while attaching to shared memory
    # segment`): it folds under the known one. After a known error, it follows from that error.
    for i in [i for i in roots if aggs[i].pattern is _UNKNOWN]:
        a = aggs[i]
        c = next((j for j in roots if j < i and aggs[j].pattern is not _UNKNOWN and aggs[j].pattern.severity == ERROR), None)
        if c is None and a.nccl_host is not None:
            c = next((j for j, b in enumerate(aggs) if j > i and problem[j] and b.pattern is not _UNKNOWN
                      and b.pattern is not _UNKNOWN_SYMPTOM and b.nccl_host == a.nccl_host and b.seq[0] == a.seq[0]
                      and a.seq[1] < b.seq[1] <= a.seq[1] + LOOKAHEAD_LINES), None)
        if c is not None:
            cause[i] = c
    roots = [i for i in roots if i not in cause]
    for i, a in enumerate(aggs):
        if a.symptom:
            c = _cause_for(aggs, i, roots)
            if c is not None:
                cause[i] = c
    # What a failure became (an NCCL result name, a traceback's last line, unknown) explains nothing.
    more = sorted(roots + [i for i, a in enumerate(aggs) if a.symptom and problem[i] and i not in cause
                           and a.pattern is not _UNKNOWN_SYMPTOM])
    # A victim's line that names what it follows (its row's `follows`) takes the first such line before
    # it first: NCCL's proxy failing after the socket error that broke its connection.
    for i, a in enumerate(aggs):
        if a.symptom and i not in cause and a.pattern.follows:
            wanted = set(a.pattern.follows)
            c = next((j for j in more if j < i and (aggs[j].pattern.code in wanted or aggs[j].pattern.id in wanted)), None)
            if c is not None and cause.get(c) != i:
                cause[i] = c
    for i, a in enumerate(aggs):
        if a.symptom and i not in cause:
            c = _cause_for(aggs, i, [j for j in more if j != i])
            if c is not None and cause.get(c) != i:
                cause[i] = c
    out: list[Finding] = []
    for i, f in enumerate(found):
        if i in cause:
            ca, cf = aggs[cause[i]], found[cause[i]]
            ev = ca.evidence[0] if ca.evidence else {}
            f.data["follows"] = {"code": cf.code, "subject": cf.subject, "file": ev.get("file"), "line": ev.get("line")}
            f = Finding(f.code, f.severity, f.subject, f.message, f.remedy, data=f.data, cause=cf.code)
        out.append(f)
    return out, cause


def _explains_fallback(a: _Agg) -> bool:
    """A problem that says why NCCL went to sockets (the first one is the NCCL_SOCKET_FALLBACK's cause)."""
    return not a.symptom and a.pattern.severity in (ERROR, WARNING) and a.pattern.explains_fallback


def _rank_key(aggs: list[_Agg], cause: dict[int, int], fallback: bool = False,
              reason: int | None = None) -> Callable[[int], int]:
    """Root causes first among the roots, each with what follows from it (a stable sort: the order
    seen stays within a rank): 0, a problem that came first and led to an error (itself or what
    follows from it); 1, a victim's line (a symptom) nothing before or right after explains, the
    job's own account of a failure that started elsewhere; 2, a warning nothing failed after (the
    IB transport off in a job that then died of a full GPU is not why it died); 3, information."""
    def root(i: int) -> int:
        seen = set()
        while i in cause and i not in seen:
            seen.add(i)
            i = cause[i]
        return i

    roots = {i: root(i) for i in range(len(aggs))}
    failed = {roots[i] for i, a in enumerate(aggs) if a.pattern.severity == ERROR}
    rank = {}
    for r in set(roots.values()):
        a = aggs[r]
        if a.pattern.severity not in (ERROR, WARNING):
            rank[r] = 3
        elif r in failed:
            rank[r] = 1 if a.symptom else 0
        else:
            rank[r] = 2
    # The socket fallback (an error) follows from its reason, or is a root of its own; the one-host
    # note is information.
    if fallback:
        roots[-1] = reason if reason is not None else -1
        rank[roots[-1]] = 0
    roots[-2], rank[-2] = -2, 3
    roots[-3], rank[-3] = -3, 0  # hosts on different net plugins: an error of its own
    return lambda i: rank[roots[i]]


def _cause_for(aggs: list[_Agg], i: int, candidates: list[int]) -> int | None:
    a = aggs[i]
    before = [j for j in candidates if j < i]
    wanted = set(a.pattern.follows)
    if wanted:
        for j in before:
            if aggs[j].pattern.code in wanted or aggs[j].pattern.id in wanted:
                return j
    # An error is explained by the first error before it; a warning (IB not found, a fallback) is
    # its cause only when no error came before: an unknown NCCL WARN outranks a known benign line.
    errors = [j for j in before if aggs[j].pattern.severity == ERROR]
    if errors:
        return errors[0]
    if before and a.pattern.code not in _ERROR_CAUSES_ONLY:
        # A warning that only says why NCCL is on sockets (IB off, not found) explains a slow job and
        # its timeouts, not a connection a peer closed or refused.
        warnings = [j for j in before if not aggs[j].pattern.explains_fallback or a.pattern.code in _SLOW_SYMPTOMS]
        if warnings:
            return warnings[0]
    # Right after it (a summary line pasted above the log that explains it): the first error there,
    # else the first problem.
    after = [j for j in candidates if j > i and aggs[j].seq[0] == a.seq[0]
             and a.seq[1] <= aggs[j].seq[1] <= a.seq[1] + LOOKAHEAD_LINES
             and (aggs[j].pattern.severity == ERROR or not aggs[j].pattern.explains_fallback
                  or a.pattern.code in _SLOW_SYMPTOMS)]
    return next((j for j in after if aggs[j].pattern.severity == ERROR), after[0] if after else None)


def _socket_fallback(facts: NcclFacts, nccl: dict | None, aggs: list[_Agg]) -> Finding | None:
    """NCCL_SOCKET_FALLBACK from what NCCL said it uses, with the reason the log gives."""
    if not nccl:
        return None
    hosts = nccl.get("socket_hosts")
    socket_net = [n for n in {**facts._implied(), **facts.networks}.values() if is_socket(n, None)]
    ofi_tcp = tcp_fabric(facts.fabric)
    if not (socket_net or facts.socket_channel_hosts or is_socket(None, nccl.get("plugin")) or ofi_tcp):
        return None
    name = (socket_net[0] if socket_net else f"libfabric's {facts.fabric} provider" if ofi_tcp and not facts.socket_channel_hosts
            else (nccl.get("plugin") or "Socket"))
    ifaces = ", ".join(nccl.get("socket_ifaces") or []) or "the interface NCCL picked"
    where = ""
    all_hosts = nccl.get("hosts") or []
    if hosts and all_hosts and len(hosts) < len(all_hosts):
        others = sorted({n for h, n in facts.networks.items() if h not in hosts and not is_socket(n, None)})
        rest = f"while the others use {' and '.join(others)}" if others else "(the others' transport is not in the log)"
        where = f" on {len(hosts)} of {len(all_hosts)} hosts ({', '.join(hosts[:8])}{', ...' if len(hosts) > 8 else ''}) {rest}"
    elif hosts:
        where = f" on {', '.join(hosts[:8])}{', ...' if len(hosts) > 8 else ''}"
    reasons = [a for a in aggs if _explains_fallback(a)]
    why = ""
    cause = None
    follows = None
    if reasons:
        r = reasons[0]
        cause = r.pattern.code
        why = f", because: {kb.render(r.pattern.message, r.groups).rstrip('.')}"
        ev = r.evidence[0] if r.evidence else {}
        follows = {"code": cause, "subject": r.subject, "file": ev.get("file"), "line": ev.get("line")}
    # One host in the log and nothing saying how many the job has: whether TCP carries anything between
    # hosts is not known (a job on one machine sends nothing over it), so it is not an error yet.
    # (a NET channel line is traffic between nodes: NCCL keeps ranks of one node on P2P or SHM)
    one = len(all_hosts) <= 1 and facts.nodes() is None and not facts.socket_channel_hosts and not facts.net_channels
    message = (f"NCCL uses {name} (TCP) for inter-node traffic{where}, over {ifaces}{why}. "
               "Expected: NET/IB (InfiniBand or RoCE) with GPUDirect RDMA on an RDMA pool"
               + ("; the log shows one host and not how many the job spans: this matters only if it spans several"
                  if one else ""))
    data: dict[str, Any] = {"network": name, "socket_hosts": hosts, "socket_ifaces": nccl.get("socket_ifaces")}
    if follows:
        data["follows"] = follows
    from rdmadoctor.logs.kb.nccl import NCCL_SOCKET_FALLBACK

    fix = NCCL_SOCKET_FALLBACK.fix
    if ofi_tcp and not socket_net:
        fix = ("aws-ofi-nccl took libfabric's tcp provider because it found no EFA device: give the pod the EFA "
               "devices (the `vpc.amazonaws.com/efa` resource of the EFA device plugin, /dev/infiniband/uverbs* in the "
               "container) and unset FI_PROVIDER if it says tcp; `fi_info -p efa` in the pod must list them.")
    return Finding(NCCL_SOCKET_FALLBACK.code, WARNING if one else ERROR, ", ".join(hosts[:8]) if hosts else "NCCL", message,
                   fix, data=data, cause=cause)


# Codes that explain a fallback to sockets when the log shows them (rows of the knowledge base
# and the node's own findings use the same codes).
def diagnose_bytes(data: bytes, name: str = "-", **kw: Any) -> Diagnosis:
    d = Diagnoser(**kw)
    d.feed(data, source=name)
    return d.finish()


def diagnose_paths(paths: list[str], *, stdin=None, progress: Callable[[int], None] | None = None, **kw: Any) -> Diagnosis:  # noqa: ANN001
    """Every path (``-``: stdin) read in chunks; a path that cannot be read is an error of its own."""
    d = Diagnoser(**kw)
    for path in paths:
        d.read(path, stdin=stdin, progress=progress)
    return d.finish()


__all__ = ["Diagnoser", "Diagnosis", "Segment", "diagnose_bytes", "diagnose_paths", "transport_line", "INFO"]
