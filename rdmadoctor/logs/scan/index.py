"""The index: which lines of a block are read one by one, and what is summed over the block in C.

A block (about a megabyte of whole lines) is read without its digits and split into lines; each
distinct line is scanned once with the scan of :mod:`.tables` (``_candidates``), and the lines it
stops at are found in the block again. Lines every rank prints for every communicator
(``_SATURATING``) are read one by one until each kind has been seen ``SATURATE_AFTER`` times; then
their anchors leave the scan and what they say (ranks, nodes, hosts on sockets, the hosts that
print) is summed per block (``_bulk``). Channel lines are always counted in bulk.
"""

from __future__ import annotations

import re
from itertools import accumulate, compress, count

from rdmadoctor.logs import prefix
from rdmadoctor.logs.rx import trie as _trie

TYPE_CHECKING = False
if TYPE_CHECKING:
    from rdmadoctor.logs.nccl import NcclFacts
    from rdmadoctor.logs.scan.needles import _Scan, _Tables

PASTE_WINDOW = 1 << 20  # tool outputs without header or prompt are looked for in this much of an input
# NCCL INFO lines every rank prints for every communicator: once each has been read this many times,
# the rest are not read one by one but summed up per block in C (Diagnoser._bulk): a job that builds
# hundreds of communicators prints them hundreds of thousands of times, and they say the same.
_SATURATING = frozenset({"INFO comm ", "nRanks", "INFO rank ", "Connected all rings", "Init COMPLETE", "Init START",
                         "via NET/Socket"})
SATURATE_AFTER = 512
# (no space before "rank": a pattern that starts with a blank is one the engine stops at everywhere,
# twice the time; nccl._RANK_OF, for the lines read one by one, reads "rank N nRanks M" the same way)
_BULK_RANKS = re.compile(rb"rank (\d{1,7}) n[Rr]anks (\d{1,7})(?: nNodes (\d{1,7}) localRanks (\d{1,7}))?")
_RANK_NEEDLES = frozenset({"INFO comm ", "nRanks", "INFO rank ", "Init COMPLETE", "Init START"})  # lines _BULK_RANKS reads
# A line that starts with NCCL's own prefix and level ("gpu-7:12:34 [3] NCCL INFO "), a host of
# letters, digits, "_" and "-" (no ".": a file name's; none first that a prefix.split wrapper could
# start with), in its first 200 characters: prefix.continues never takes it for the rest of the line
# before (tests/unit/logs/test_scan_bulk.py holds that), so the router does not ask.
NCCL_LINE_AT = re.compile(rb"[A-Za-z0-9][A-Za-z0-9_-]{0,99}:[0-9]{1,9}:[0-9]{1,9} \[(?:-?[0-9]{1,4}|[A-Za-z0-9_]{1,16})\] "
                          rb"NCCL (?:INFO|WARN|TRACE|ABORT)(?=[ \n])")
_RUN_HOSTS = 32  # socket hosts up to which their runs of lines are passed in one match (_known_run)
_HOST_AT = re.compile(rb"[\w.-]{1,255}:\d{1,9}:\d{1,9} \[-?\w{1,16}\] ")  # NCCL's prefix, at a line's start
# NCCL's prefix at the start of a line as the scan reads it (without digits: "gpu-:: [] NCCL INFO ").
_NCCL_SHAPE_AT = re.compile(rb"\n[\w.-]{1,255}:: \[-?\w{0,16}\] NCCL INFO ")
_DIGITS = b"0123456789"


class Index:
    """Owns the scan in use (``_scan``, without the anchors in ``_skip``), the saturation
    (``_sat_count``, ``_saturated``) and what it knows of the block being read (``_shapes``, its
    distinct lines without digits; ``_nlines``, ``_block_bytes``, ``_channels``)."""

    if TYPE_CHECKING:
        t: _Tables
        facts: NcclFacts
        _source: dict | None

    def _start_index(self) -> None:
        self._channels = False  # the block being read holds channel lines
        self._sat_count: dict[str, int] = {}  # _SATURATING needle -> lines read with it
        self._shapes = b""  # the block being read: its distinct lines without digits (_candidates)
        self._nlines = 0
        self._block_bytes = 0
        self._saturated: set[str] = set()
        self._skip: frozenset[bytes] = frozenset()  # anchors no longer scanned for (their needles saturated)
        self._rescan = False  # a needle saturated since the scan in use was made
        self._scan_in_use: _Scan = self.t.scan_for(self._skip)
        self._run_for: frozenset[bytes] = frozenset()  # the hosts of _run (_known_run)
        self._run: re.Pattern[bytes] | None = None

    @property
    def _scan(self) -> _Scan:
        """The scan in use. Needles that saturate together (a communicator's lines, in one block)
        make one reduced scan, when it is next needed (the next block), not one each."""
        if self._rescan:
            self._rescan = False
            self._skip = frozenset(a for a, lits in self.t.anchor_lits.items() if lits <= self._saturated)
            self._scan_in_use = self.t.scan_for(self._skip)
        return self._scan_in_use

    @_scan.setter
    def _scan(self, sc: _Scan) -> None:
        self._rescan = False
        self._scan_in_use = sc

    def _in_head(self) -> bool:
        """The block being read starts in the first PASTE_WINDOW bytes of its input (where tool outputs
        without a header or prompt, and NCCL's topology lines, are looked for)."""
        return self._source is not None and self._source["bytes"] - self._block_bytes < PASTE_WINDOW

    def _index(self, block: bytes) -> list[int]:
        """The index's share of a block: the starts of the lines to read one by one; what the block
        says in bulk (channels, and once saturated ranks, socket hosts, hosts) is counted here."""
        self._block_bytes = len(block)
        starts = self._candidates(block)
        if b" coll channels" in self._shapes:  # first: where it is known, the ring listings are not counted
            self.facts.count_coll_channels(block)
        if self._channels:  # the channel lines, counted in C (most of an INFO log)
            self.facts.count_channels(block, hosts=not self._saturated, shapes=self._shapes)
        if self._saturated:
            self._bulk(block)
        elif self._in_head():
            # A paste's hosts (in a job's log every host prints lines the scan reads: its network,
            # its communicators; a paste may hold only one host's WARN among the others' INFO).
            self._hosts(block)
        return starts

    def _counted(self, needle: str) -> None:
        """One more line read with a saturating needle: at SATURATE_AFTER, its anchors leave the scan
        (from the next block on: this block's lines to read are known already)."""
        c = self._sat_count[needle] = self._sat_count.get(needle, 0) + 1
        if c == SATURATE_AFTER:
            self._saturated.add(needle)
            self._rescan = True  # (the scan without their anchors: see _scan)

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
        at = list(compress(count(), map(wanted.__contains__, shapes)))  # (in C: no Python step a line)
        if not at:
            return []
        # The lengths of the lines before the last one wanted, summed in C; line i starts after i newlines.
        ends = list(accumulate(map(len, block.split(b"\n", at[-1]))))
        return [ends[i - 1] + i if i else 0 for i in at]

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
        # Each line is decided once, at the first place the scan stops in it: the search goes on from
        # its end (a line that repeats an anchor, `NCCL_ ` ten thousand times, is not searched again
        # from its start for each repeat).
        for rx, wants in ((sc.fast, sc.wants), (self.t.prompt_scan, None)):
            if rx is None:
                continue
            search = rx.search
            m = search(tb)
            while m is not None:
                ls = rfind(b"\n", 0, m.start()) + 1
                le = find(b"\n", ls)
                if ls not in starts and (wants is None or wants(block, ls, le)):
                    starts.add(ls)
                m = search(tb, le + 1) if le >= 0 else None
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
        if b"anks " in shapes and not sat.isdisjoint(_RANK_NEEDLES):
            found = set(_BULK_RANKS.findall(block))
            if found:
                # Column by column: (rank, nranks, nNodes, localRanks), the last two b"" where a line has none.
                rank, nranks, nodes, local = zip(*found)
                f.nranks = max(f.nranks or 0, *map(int, set(nranks)))
                if len(f.ranks_seen) + len(found) <= 4096:
                    f.ranks_seen.update(map(int, rank))
                else:
                    for r in rank:
                        if len(f.ranks_seen) < 4096:
                            f.ranks_seen.add(int(r))
                told = set(nodes) - {b""}
                if told:
                    f.nnodes = max(f.nnodes or 0, *map(int, told))
                    if any(map(bytes.__eq__, local, nranks)):  # (b"" is no count)
                        f.all_local = True
        if "via NET/Socket" in sat and b"via NET/Socket" in shapes and len(f.socket_channel_hosts) < f.MAX:
            self._socket_hosts(block)
        self._hosts(block)

    def _socket_hosts(self, block: bytes) -> None:
        """The hosts of the block's socket channel lines. A host prints them in runs, among its other
        lines: from a socket channel line whose host is already on sockets ("gpu-7:"), the run of
        lines that start with such a host is passed in one match in C (_known_run), then the next
        socket channel line is looked for; for another host, the host is what precedes the line's
        first ":" when NCCL's prefix starts the line."""
        f = self.facts
        known = tuple(h.encode("utf-8", "replace") + b":" for h in f.socket_channel_hosts if h)
        run = self._known_run(known)
        find, rfind = block.find, block.rfind
        j = find(b"via NET/Socket")
        while j >= 0:
            ls = rfind(b"\n", 0, j) + 1
            if known and block.startswith(known, ls):
                m = run.match(block, ls) if run is not None else None  # (it matches: empty at worst)
                j = find(b"via NET/Socket", max(m.end(), j + 14) if m is not None else j + 14)
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
                run = self._known_run(known)
            j = find(b"via NET/Socket", le) if le >= 0 else -1

    def _known_run(self, known: tuple[bytes, ...]) -> re.Pattern[bytes] | None:
        """A pattern that matches a run of whole lines that each start with one of ``known`` (made
        once per set of hosts; None past _RUN_HOSTS hosts, where each line is passed on its own)."""
        if not known or len(known) > _RUN_HOSTS:
            return None
        if self._run_for != set(known):
            words = sorted({k.decode("latin-1") for k in known})
            self._run_for = frozenset(known)
            self._run = re.compile(b"(?:(?:" + _trie(words).encode("latin-1") + rb")[^\n]*\n)*")
        return self._run

    def _hosts(self, block: bytes) -> None:
        """The hosts of every NCCL INFO line of the block, most of which no needle brings to be read
        (`Setting affinity`, `NVLS multicast ...`): a job's hosts are not only those that warned."""
        shapes = self._shapes
        # A line with NCCL's prefix after another (kubectl --prefix, mpirun --tag-output, pdsh, a quote):
        # the hosts of this block's lines are read wherever they stand.
        anywhere = shapes.count(b"] NCCL INFO ") > len(_NCCL_SHAPE_AT.findall(shapes))
        self.facts.count_hosts(block, anywhere=anywhere, shapes=shapes)
