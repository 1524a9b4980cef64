"""The index's tables: the knowledge base compiled once into the scan over a block's bytes.

What the scan looks for is every row's ``needle``, the NCCL INFO lines that carry facts, the
starts of pasted tool outputs (:mod:`.pastes`) and the lines that carry an error whatever their
words (:mod:`.errors`). Each is looked for through its anchor (its tail from a rare character,
``_anchors``), all anchors in one trie-shaped pattern; NCCL's commonest capitals are read in small
letters where no anchor loses a letter by it (``_QUIETER``, ``_survives``). A reduced scan without
the anchors of saturated needles is made once per set (``_Tables.scan_for``). :mod:`.index` runs it.
"""

from __future__ import annotations

import functools
import re

from rdmadoctor.logs import kb
from rdmadoctor.logs.rx import trie as _trie
from rdmadoctor.logs.scan.errors import _CONTEXT_NEEDLES
from rdmadoctor.logs.scan.index import _DIGITS
from rdmadoctor.logs.scan.pastes import _HEADER_NEEDLES, _HEADERS, _prompt_with_command

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
# The settings the knowledge base reads, as code or a config file writes them (`os.environ["NCCL_NET"] =
# "Socket"`, `NCCL_IB_DISABLE: "1"`): prefix.settings_said reads each as `export NAME=value`.
# (each with what follows the name there, so that no needle that overlaps it is lost: "NCCL_NET set by
# environment" is found through "NET set by environment")
# A name in single quotes is looked for with what follows the quote ("']", "', "): a tail of capitals
# and quotes alone would be searched as it is, a pass over every block.
_SETTING_NEEDLES = ('NCCL_IB_DISABLE"', "NCCL_IB_DISABLE']", "NCCL_IB_DISABLE', ", "NCCL_IB_DISABLE:", "NCCL_IB_DISABLE ",
                    'NCCL_NET"', "NCCL_NET']", "NCCL_NET', ", "NCCL_NET:",
                    # ... and those joined to the failure they explain (scan.joins._LAUNCHED), as a launch writes
                    # them too
                    *(f"{n}{tail}" for n in ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX")
                      for tail in ('"', "']", "', ", ":", "=")),
                    # DeepSpeed's launcher's log of them ("[launch.py:71:main] 0 NCCL_SOCKET_IFNAME lo"; prefix.settings_said)
                    "main] ")
# NCCL's topology lines ("+ NET[25.0] - NET/3 (3/0/25.000000)"), printed when a communicator is made: no
# tail of them can be scanned for, so they are searched as they are in the first PASTE_WINDOW only.
_HEAD_FACT_NEEDLES = ("] - NET/",
                      # A ticket's fences and its "Expected:" label (what the writer hoped to see; see _line).
                      "```", "xpected",
                      # A pod spec's env entry on two lines ("- name: NCCL_IB_HCA", its value next; see
                      # Diagnoser._yaml_setting), pasted in a ticket, not printed megabytes into a job's log.
                      "name: NCCL_", 'name: "NCCL_', "name: 'NCCL_")
_CHANNEL_WORDS = ("Channel ", "Ring ")  # counted in bulk (NcclFacts.count_channels): never scanned for
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


# Characters that are rare in what a training loop prints (it prints lower case, digits, spaces,
# brackets and colons): the scan's first-character set is made of these only.
_RARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ_'$#!")
_PROMPT_ANCHORS = ("$ ", "# ")


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
                    | set(_HEAD_FACT_NEEDLES) | set(_SETTING_NEEDLES))
        self.literals = tuple(sorted(literals))
        self._line_rx: dict[tuple[str, ...], re.Pattern[str]] = {}
        self._keys(literals)
        # A trie-shaped pattern: a position tries one branch per character, not every needle.
        self.verify = re.compile(_trie(sorted(literals)).encode())
        # The scan over the bytes: each needle is found through its anchor, the part of it that
        # starts at a rare character (see _anchor), all anchors in one trie-shaped pattern whose
        # first-character set the regex engine checks in C; needles without a rare character are
        # found with bytes.find. A candidate line is then checked for the whole needle.
        # A needle without a rare character is not scanned for: it is found on the lines the
        # context needles make candidates (tests/unit/logs/test_kb.py feeds every row's examples through
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
        # Every literal's shape in one trie: at a position it matches the longest shape there, and
        # the shorter ones that start there are its prefixes (see _Scan.wants).
        full.wanted = self.wanted = re.compile(_trie(sorted(originals)).encode())
        # Starts of tool outputs without a rare character ("/dev/shm", "locked memory") and NCCL's
        # topology lines are searched as they are, in the first PASTE_WINDOW bytes of an input only:
        # each such search costs about as much as the whole scan of a block, and outputs pasted
        # without a header or prompt come in tickets and pastes, the topology with the first
        # communicator, not megabytes into a job's log.
        head = {_shape(x) for x in _HEADER_NEEDLES if choice.get(_shape(x)) is None} | {_shape(x) for x in _HEAD_FACT_NEEDLES}
        self.paste_plain = tuple(sorted(x.encode() for x in head if x.encode() not in self.plain))
        self.prompt = re.compile(_prompt_with_command())
        self.headers = [(re.compile(h), kind) for h, kind in _HEADERS]

    @functools.cached_property
    def line_needles(self) -> re.Pattern[str]:
        """The needles of a line, longest first at a position: what needles_in finds, in one pattern
        of all of them (made when asked for: needles_in does without it)."""
        return re.compile("|".join(re.escape(n) for n in sorted(self.literals, key=len, reverse=True)))

    def _keys(self, literals: set[str]) -> None:
        """What ``_present`` looks for: each needle's key, its tail from its first character that is
        not a small letter, a digit or a blank (a line of prose is passed over in C, where a pattern
        of whole needles tries one at nearly every character), in one trie-shaped pattern; needles
        made only of those characters are looked for as they are (``in``)."""
        self._key_needles: dict[str, list[str]] = {}
        plain = []
        for n in sorted(literals):
            at = next((i for i, ch in enumerate(n) if not (ch.islower() or ch.isdigit() or ch == " ")), None)
            if at is None:
                plain.append(n)
            else:
                self._key_needles.setdefault(n[at:], []).append(n)
        self._plain_needles = tuple(plain)
        # Whether a line holds any of them at all, in one search (most lines the scan reads hold none).
        self._plain_rx = re.compile(_trie(sorted(plain))) if plain else None
        keys = sorted(self._key_needles)
        self._key_rx = re.compile(_trie(keys))
        # The keys that are a start of a key (and so are found wherever it is): at one place the
        # pattern finds the longest key only.
        known = set(keys)
        self._key_starts = {k: [k[:i] for i in range(1, len(k) + 1) if k[:i] in known] for k in keys}

    def _present(self, text: str) -> tuple[str, ...]:
        """The needles ``text`` holds, in the order of ``sorted``."""
        found = [n for n in self._plain_needles if n in text] if self._plain_rx is not None and self._plain_rx.search(text) else []
        search, starts = self._key_rx.search, self._key_starts
        keys: set[str] = set()
        m = search(text)
        while m is not None:
            keys.update(starts[m.group()])
            m = search(text, m.start() + 1)
        for k in keys:
            found += [n for n in self._key_needles[k] if len(n) == len(k) or n in text]
        return tuple(sorted(found))

    def has_needle(self, text: str) -> bool:
        """Does ``text`` hold any needle (``line_needles.search(text)``)?"""
        return bool(self._present(text))

    def needles_in(self, text: str) -> list[str]:
        """The needles ``line_needles.finditer(text)`` finds, each once, in the order it first finds them.

        Searched for with the needles the line holds only (``_present``): a needle the line does not
        hold matches nowhere in it, so leaving it out changes no match, and a pattern of a few needles
        skips to their first characters where the one of all ~260 tries a branch at nearly every
        character (a WARN line of 2,000 characters cost a millisecond)."""
        present = self._present(text)
        if len(present) <= 1:
            return list(present)
        rx = self._line_rx.get(present)
        if rx is None:
            if len(self._line_rx) >= 1024:
                self._line_rx.clear()
            rx = self._line_rx[present] = re.compile("|".join(re.escape(n) for n in sorted(present, key=len, reverse=True)))
        return list(dict.fromkeys(m.group() for m in rx.finditer(text)))

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
            # The shapes whose literals are all done, and every shape that is a start of them too:
            # where the trie of all shapes stops at one of these, no literal still wanted starts
            # there (the same answer as a trie of the wanted shapes alone, without making one).
            over = {shape.encode() for shape, lits in self._originals.items() if lits <= done}
            shapes = {shape.encode() for shape in self._originals}
            sc.wanted = self.wanted
            sc.stale = frozenset(s for s in over if all(s[:k] in over for k in range(1, len(s)) if s[:k] in shapes))
        return sc


class _Scan:
    """What the scan over a block's bytes is made of, for a set of anchors: the translation table
    (each anchor's first character -> \x01, the prompt characters -> \x02), the one pattern of all
    anchors, and the small-letter replacements no anchor loses a letter by (_QUIETER)."""

    __slots__ = ("table", "fast", "quiet", "quiet_plain", "plain", "wanted", "stale")

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
        # (``wanted`` is the trie of every literal's shape; ``stale``, the shapes it may stop at where
        # no literal still wanted starts: see wants.)
        self.wanted: re.Pattern[bytes] | None = None
        self.stale: frozenset[bytes] = frozenset()

    def wants(self, text: bytes, start: int, end: int) -> bool:
        """Does ``text[start:end]`` (a line without its digits) hold a literal still wanted? The trie
        of all shapes finds the longest shape at each place it stops; a stale one is passed by."""
        search, stale = self.wanted.search, self.stale  # type: ignore[union-attr]
        m = search(text, start, end)
        while m is not None and m.group() in stale:
            m = search(text, m.start() + 1, end)
        return m is not None


_TABLES: _Tables | None = None


def tables() -> _Tables:
    global _TABLES
    if _TABLES is None:
        _TABLES = _Tables(kb.patterns())
    return _TABLES
