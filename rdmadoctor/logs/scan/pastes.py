"""Pastes: the tool outputs a ticket or a transcript holds, and what a ticket wraps around lines.

A prompt with a command (``$ ibstat``, ``root@pod:/# kubectl exec POD -- ulimit -a``) starts that
command's output, up to the next prompt; an output pasted without its prompt is recognised by its
first line (``_HEADERS``); nccl-tests' result table runs while its lines are rows. Each becomes a
:class:`Segment` that ``checks/logs.py`` judges whole. A ticket's markdown fences are followed: the
block right after an "Expected:" label shows what the writer hoped to see, and is not read.
"""

from __future__ import annotations

import re

from rdmadoctor.core.record import record
from rdmadoctor.logs import prefix
from rdmadoctor.logs.scan.linking import _as_information

TYPE_CHECKING = False
if TYPE_CHECKING:
    from rdmadoctor.logs.nccl import NcclFacts
    from rdmadoctor.logs.scan.matching import _Agg
    from rdmadoctor.logs.scan.needles import _Tables

MAX_SEGMENTS = 64
MAX_SEGMENT_BYTES = 1 << 20
MAX_SEGMENT_LINES = 20000
_HYPOTHETICAL_LINES = 200  # the most lines an "Expected:" block hides
# "Expected:", "### Expected behavior", "**Expected output**": a label alone on its line.
_EXPECTED_LABEL = re.compile(r"(?i)^(?:#{1,6}\s*)?[*_]{0,2}(?:expected|what (?:i|we) expected|should (?:see|be|look like))"
                             r"(?: (?:behaviou?r|output|result|log|lines?))?[*_]{0,2}:?[*_]{0,2}\s*(?!\s):?\s*(?!\s)$")
# Commands whose pasted output rdmadoctor reads, after a prompt: "$ ibstat", "root@pod:/# ulimit -a".
_COMMANDS = {
    "ibstat": "ibstat", "ibstatus": "ibstatus", "ibv_devinfo": "ibv_devinfo", "rdma": "rdma_link",
    "ulimit": "ulimit", "df": "df", "lsmod": "lsmod", "dmesg": "dmesg", "journalctl": "dmesg",
    "ibdev2netdev": "ibdev2netdev", "show_gids": "show_gids", "nvidia-smi": "nvidia-smi",
    "cat": "cat", "ibv_devices": "ibv_devices", "ls": "ls",
    "ncclras": "ncclras",  # NCCL's RAS report (checks/logs.py _ras_reports)
}
# The outputs judged whole (those a check declares in Check.pastes, nccl-tests' table): a paste that holds only
# others (a command rdmadoctor does not read) has nothing in it that was judged.
_JUDGED_OUTPUTS = frozenset({"ibstat", "ibstatus", "ibv_devinfo", "rdma_link", "ulimit", "limits", "df", "lsmod", "show_gids",
                             "nccl-tests", "dev_infiniband"})
_TEST_TYPES = "float|double|half|bfloat16|int8|uint8|int32|uint32|int64|uint64|fp8_e4m3|fp8_e5m2"
_TEST_ROW = (r"^\s*\d{1,19}\s+\d{1,19}\s+(?:" + _TEST_TYPES + r")\s+(?:(?:sum|prod|max|min|avg|none|mulsum)\s+)?"
             r"(?:-?\d{1,6}\s+)?\d{1,12}(?:\.\d{1,6})?\s+\d{1,12}(?:\.\d{1,6})?\s+\d{1,12}(?:\.\d{1,6})?\s")
# The column headings nccl-tests printed, by the number of columns of a row (src/common.cu): 2.x with
# #wrong (root -1 for the reductions), the 2.0 era's with `error`, and the oldest without redop.
_TEST_HEADINGS = {
    13: "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
    12: "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error",
    11: "#       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error",
}
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
    # Without a header or a prompt: `df -h | grep shm` rows, `ulimit -a` and its lines.
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
    # nccl-tests' result table without its column heading (issue 30): its units line, or a row
    # (size, count, type, [redop], [root], then times and bandwidths). _close_segment gives it the heading.
    (r"^\s*#\s+\(B\)\s+\(elements\)", "nccl-tests"),
    (_TEST_ROW, "nccl-tests"),
)
# Settings a pasted launch command makes that rows read (kb nccl.ib_disabled_command) or that are joined
# to the failure they explain (scan.joins._LAUNCHED): a prompt line
# is otherwise the start of a command's output, not a line to match.
_LAUNCH_NEEDLES = ("NCCL_IB_DISABLE=", "NCCL_NET=", "NCCL_SOCKET_IFNAME=", "NCCL_IB_HCA=", "NCCL_IB_GID_INDEX=")
_HEADER_NEEDLES = ("CA '", "Infiniband device '", "hca_id:", "physical_state", "Filesystem", "Used by", "Max locked memory", "Soft Limit",
                   "/dev/shm", "ulimit -", "core file size", "non-blocking time", "locked memory", "/dev/infiniband:",
                   "PORT    INDEX", "PORT\tINDEX", " ==> ",
                   "GPU0    GPU1", "GPU0\tGPU1", "GPU0    NIC0", "GPU0\tNIC0", "compiled with CUDA", '"nccl_version"',
                   "(elements)", " float ", " bfloat16 ", " half ", " double ")
_HEADER_ANY = re.compile("|".join(re.escape(h) for h in _HEADER_NEEDLES))  # one search, not one `in` per needle

# Commands that run another on a pod, a container or a host (`kubectl exec POD -- ibstat`,
# `docker exec -it ctr ibv_devinfo`, `ssh node-3 ibstat`): the output is the inner command's.
_EXEC_VIA = re.compile(r"^(?:(?:kubectl|oc)\s+(?=((?:-\S+\s+(?!exec\b)\S+\s+|-\S+\s+)*))\1exec\s+[^\n]*?\s--\s+"
                       r"|(?:docker|podman|nerdctl|crictl)\s+exec\s+"
                       r"(?=((?:(?:-u|--user|-e|--env|-w|--workdir|--env-file)[= ]\S+\s+|-{1,2}[\w-]+\s+)*))\2[\w.:][\w.:-]*\s+"
                       r"|ssh\s+(?=((?:-[bcDEeFIiJLlmOopQRSWw]\s+\S+\s+|-\w+\s+)*))\3[\w.@-]+\s+(?=\w)"
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

# A line of nccl-tests' result table: a row (size, count, type ...), its units line, a blank.
# (and "..." where a ticket left rows out)
_TABLE_LINE = re.compile(r"(?<!\s)\s*(?!\s)(?:#\s+\(B\)|\d{1,19}\s+\d{1,19}\s+\w|\.{3}\s*$|$)")  # from a run's start: linear


@record
class Segment:
    """A tool's output found in the text (after a prompt line, or recognised by its header)."""

    kind: str  # ibstat | ibstatus | ibv_devinfo | rdma_link | ulimit | df | lsmod | dmesg | nccl-tests | other ...
    command: str  # the command line after the prompt ("ibstat mlx5_0"), "" when recognised by header
    text: str
    file: str
    line: int  # the first line of the output (1-based)
    cut: bool = False  # longer than MAX_SEGMENT_BYTES / MAX_SEGMENT_LINES: the rest was not kept



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


def _test_heading(line: str) -> bool:
    from rdmadoctor.parsers.nccltests import is_header

    return is_header(line)


class Pastes:
    """Owns the tool outputs found (``segments``, ``dropped_segments``), the one being collected
    (``_seg``) and a ticket's fences (``_fence``, ``_expected_at``, ``_hypothetical``)."""

    if TYPE_CHECKING:
        t: _Tables
        facts: NcclFacts
        _source: dict | None
        _lineno: int

        def _match(self, text: str, lineno: int, quick: bool = False, hit: set | None = None) -> None: ...

    def _start_pastes(self) -> None:
        self.segments: list[Segment] = []
        self.dropped_segments = 0
        self._seg: dict | None = None  # the tool output being collected
        # Markdown fences in a ticket, and the label that makes the next one hypothetical (_hoped).
        self._fence = False
        self._hypothetical = 0  # the last line an "Expected:" block may hide (0: none open)
        self._expected_at: int | None = None

    def _hoped(self, raw: bytes, lineno: int) -> bool:
        """A line of a ticket's fences: True when it is a fence, or inside the block an "Expected:"
        label opens (what the writer hoped to see): such a line is not read."""
        bare = raw.decode("utf-8", "replace").strip().lstrip("> \t")
        if bare.startswith("```"):
            # A fenced block of a ticket: the one right after an "Expected:" label shows what the
            # writer hoped to see, not what ran (nothing in it is evidence), for at most
            # _HYPOTHETICAL_LINES lines: a fence never closed does not hide the rest of the input.
            self._fence = not self._fence
            hoped = self._fence and self._expected_at is not None and 0 < lineno - self._expected_at <= 3
            self._hypothetical = lineno + _HYPOTHETICAL_LINES if hoped else 0
            return True
        if lineno <= self._hypothetical:
            return True
        if _EXPECTED_LABEL.match(bare) is not None:
            self._expected_at = lineno
        return False

    def _prompted(self, text: str, lineno: int) -> None:
        """A prompt with a command: its output follows, up to the next prompt."""
        command = (self.t.prompt.match(text).group("cmd") or "").strip()  # type: ignore[union-attr]
        command = _inner_command(command)
        word = command.split()[0] if command.split() else ""
        kind = _COMMANDS.get(word, "other")
        if kind == "rdma_link" and " link" not in f" {command}":
            kind = "other"
        if kind == "ls":  # `ls -l /dev/infiniband`: the pod's RDMA device nodes
            kind = "dev_infiniband" if "/dev/infiniband" in command and "/sys" not in command else "other"
        if kind == "other" and word == "size" and not text.lstrip().startswith("#") and _test_heading(command):
            # nccl-tests' heading behind a launcher's tag ending in brackets ("[gpu-7:0] #  size  count ..."), read as a
            # root prompt: the table, without that tag on each of its lines
            tag = text[:text.index("#")].strip()
            if prefix.launcher_tag(tag + " ") == len(tag) + 1:
                self._open_segment("nccl-tests", "", lineno, "#" + text[text.index("#") + 1:])
                self._seg["tag"] = tag  # type: ignore[index]
                return
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
            return
        self._open_segment(kind, command, lineno + 1, None)
        if any(n in command for n in _LAUNCH_NEEDLES):
            self._match(text, lineno)  # what the launch sets (`mpirun -x NCCL_IB_DISABLE=1 ...`)
        elif kind == "other" and word[:1].isupper():
            # Not a command (commands are not capitalised): a background job's output printed
            # after the prompt (`root@pod:/#  Port number 1 state is Down`).
            self._match(command, lineno)

    def _opens_output(self, text: str, lineno: int) -> bool:
        """Is ``text`` the first line of a tool's output pasted without its prompt? Then it is opened.

        Behind a launcher's tag too (``[1,0]<stdout>:`` before nccl-tests' table, prefix.launcher_tag): the
        output is collected without it, from each of its lines that carries the same tag."""
        hit = _HEADER_ANY.search(text) is not None
        if hit:
            for rx, kind in self.t.headers:
                if rx.search(text):
                    self._open_segment(kind, "", lineno, text)
                    return True
        if hit or "busbw" in text:
            n = prefix.launcher_tag(text)
            if n:
                bare = text[n:]
                tagged = "nccl-tests" if _test_heading(bare) else next((k for rx, k in self.t.headers if rx.search(bare)), None)
                if tagged is not None:
                    self._open_segment(tagged, "", lineno, bare)
                    self._seg["tag"] = text[:n].strip()  # type: ignore[index]
                    return True
        return False

    def _segment_lines(self, block: bytes, pos: int) -> int:
        """Collect the lines of the tool output being read, until a line that ends it."""
        seg = self._seg
        assert seg is not None
        n = len(block)
        while pos < n:
            le = block.find(b"\n", pos)
            raw = block[pos:le]
            text = prefix.unwrap(raw.decode("utf-8", "replace").rstrip())[0]
            if seg["tag"] and text.lstrip().startswith(seg["tag"]):  # the launcher's tag the output's first line had
                text = text.lstrip()[len(seg["tag"]):]
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
            if self.t.has_needle(text):
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
        if seg["kind"] == "nccl-tests" and not seg["prompted"] and not _test_heading(seg["lines"][0]):
            # Rows without their heading: the heading of a row with as many columns, one line above them
            # (so each row keeps its line number).
            row: list[str] = next((x.split() for x in seg["lines"] if x.strip() and not x.lstrip().startswith("#")), [])
            heading = _TEST_HEADINGS.get(len(row))
            if heading is None:
                return  # not a table of a shape nccl-tests prints: nothing of it is judged
            seg["lines"].insert(0, heading)
            seg["line"] -= 1
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
                     "file": src, "line": first_line, "cut": False, "blank": 0, "prompted": header is None, "tag": ""}

    def _starts_output(self, text: str) -> bool:
        """Is ``text`` the first line of a tool's output (a header this scanner knows)?"""
        return _HEADER_ANY.search(text) is not None and any(rx.search(text) for rx, _ in self.t.headers)

    def _judged(self) -> bool:
        """A tool's output rdmadoctor judges was read (`kubectl get node` read as text is not one)."""
        return any(seg.kind in _JUDGED_OUTPUTS for seg in self.segments)

    def _pastes_notes(self) -> list[str]:
        """Pastes' share of the finish: the outputs not kept."""
        if self.dropped_segments:
            return [f"{self.dropped_segments} more pasted tool outputs were not kept (limit {MAX_SEGMENTS})"]
        return []
