"""Where the fleet's fingerprints come from: reports, bundles, folders of either, stdin, the Nodes'
annotations, Prometheus' info metrics. Each source yields :class:`Entry` records (or the
:class:`SourceError` of an input it could not read, or the :class:`Skipped` note of a document
that is not a node's report); ``signature`` is equal for nodes with equal facts (the
annotation's text), or None (the fleet then uses the flat view's items).

A report (``check --json``, the agent's report file) carries its fingerprint; a report from before
the fingerprint existed is fingerprinted from its inventory; a bundle is checked (``--scope
node``) and fingerprinted. ``-`` reads one or more JSON documents from stdin (a report, JSON lines,
a JSON array of reports).

Every input is read typed and bounded: regular files only (a symlink to ``/dev/zero``
or a FIFO is named, never read), each file and stdin size-capped, a field of the wrong type
(``"fingerprint": {"node": [1]}``) or a value that is not a string or a number makes that one
document a SourceError that names it, and the others go on. Names are kept as they are; the text
output escapes them (rdmadoctor.core.words.printable).
"""

from __future__ import annotations

import json
import math
import os
import stat

from rdmadoctor.core.report import Report
from rdmadoctor.core.words import printable
from rdmadoctor.engine import fingerprint as F

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any, Iterator

ANNOTATION = "rdmadoctor.io/fingerprint"
# The pool a node is in when its report names none (no --pool) and no --group-by label says.
NO_POOL = "-"
BUNDLE_SUFFIXES = (".tar.gz", ".tgz", ".tar")
PARSED_MAX = 1024
# A report is a few tens of KB; a file past this is not one (and is not read into memory).
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
# stdin may carry a whole fleet's reports as JSON lines: read a chunk at a time, at most this much.
MAX_STDIN_BYTES = 1024 * 1024 * 1024
_CHUNK = 1 << 20
# The longest name or value the fleet keeps (a Kubernetes name is at most 253 characters; a
# fingerprint value is a version or a model name).
MAX_VALUE_CHARS = 1024
# The most an annotation may hold (the admission policy of deploy/overlays/direct bounds it at 16 KiB).
MAX_ANNOTATION_CHARS = 64 * 1024
# host.kind of a report about a node; `diagnose --json` of a log says "logs": not a node.
NODE_KINDS = ("live", "root", "bundle")


class SourceError(Exception):
    """An input that could not be read; the fleet names it and cannot decide on it."""


class Skipped:
    """A document read whole that is not a node's report (a ``diagnose --json`` of a log, a
    fleet result): a note, not an error."""

    __slots__ = ("note",)

    def __init__(self, note: str):
        self.note = note


class Entry(tuple):
    """(node, pool, labels, flat, signature, time): ``time`` is the report's (seconds since the
    epoch) or None; ``where`` names the input."""

    where: str

    def __new__(cls, node: str, pool: str, labels: dict, flat: dict, signature: Any, time: float | None, where: str):
        self = super().__new__(cls, (node, pool, labels, flat, signature, time))
        self.where = where
        return self


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null", int: "a number",
            float: "a number"}.get(type(v), f"a {type(v).__name__}")


def _text(v: Any, what: str, where: str, *, required: bool = False) -> str | None:
    """A name (node, pool): a string of at most MAX_VALUE_CHARS, or None when absent."""
    if v is None or v == "":
        if required:
            raise SourceError(f"{where}: {what} is missing")
        return None
    if not isinstance(v, str):
        raise SourceError(f"{where}: {what} is {_kind(v)}, expected a string")
    if len(v) > MAX_VALUE_CHARS:
        raise SourceError(f"{where}: {what} is {len(v):,} characters long, expected a name")
    return v


def _obj(v: Any, what: str, where: str) -> dict:
    """An optional object: {} when absent, SourceError when of another type."""
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise SourceError(f"{where}: {what} is {_kind(v)}, expected an object")
    return v


def _refuse(rep: Report, field: str, where: str) -> None:
    """SourceError when the report's ``field`` was of the wrong type (what the fleet reads of a
    node must be there as it is written, not read as missing)."""
    for note in rep.notes:
        if note.startswith(field + " is "):
            raise SourceError(f"{where}: {note}")


def _host_name(rep: Report, where: str) -> str | None:
    """The report's host.hostname, else its host.label (the node's name when the fingerprint has none)."""
    _refuse(rep, "host.hostname", where)
    name = _text(rep.host.hostname, "host.hostname", where)
    if name:
        return name
    _refuse(rep, "host.label", where)
    return _text(rep.host.label, "host.label", where)


def _labels(v: Any) -> dict[str, str]:
    """The string labels of a labels object (others are not labels: dropped)."""
    if not isinstance(v, dict):
        return {}
    return {k: x for k, x in v.items() if isinstance(k, str) and isinstance(x, str) and len(x) <= MAX_VALUE_CHARS}


def _flat(fp: dict, where: str) -> dict[str, Any]:
    """The flat view of a fingerprint whose every value is a string, a whole number or a finite
    number; SourceError naming the first field that is not."""
    try:
        flat = F.flatten(fp)
    except (AttributeError, TypeError, ValueError, KeyError) as e:
        raise SourceError(f"{where}: the fingerprint has a field of the wrong type ({printable(e, 200)})") from None
    for key, v in flat.items():
        if isinstance(v, bool) or isinstance(v, int) and abs(v) < 2**63 or isinstance(v, str) and len(v) <= MAX_VALUE_CHARS:
            continue
        if isinstance(v, float) and math.isfinite(v):
            continue
        if isinstance(v, (int, float)):
            raise SourceError(f"{where}: fingerprint field {printable(key, 200)} is {printable(v, 40)}, not a number a node has")
        raise SourceError(f"{where}: fingerprint field {printable(key, 200)} is {_kind(v)}, expected a string or a number")
    return flat


def _time(t: str | None) -> float | None:
    if t is None or len(t) > 64:
        return None
    from rdmadoctor.publish.base import parse_rfc3339

    try:
        return parse_rfc3339(t)
    except (ValueError, OverflowError, TypeError):
        return None


def _entry(doc: Any, where: str, group_by: str | None) -> Entry | Skipped:
    """The node of one JSON document: a report, a fingerprint or a compact one."""
    if not isinstance(doc, dict):
        raise SourceError(f"{where}: {_kind(doc)}, not a JSON object (a report, or a fingerprint)")
    labels: dict = {}
    schema = doc.get("schema")
    when = None
    if schema == "rdmadoctor.report/v1" or schema is None and "inventory" in doc:
        rep = Report.from_json(doc, checks=False)
        _refuse(rep, "host", where)
        host = rep.host
        if host.kind and host.kind not in NODE_KINDS:
            return Skipped(f"{where}: a report about {printable(host.kind, 40)} (host {printable(host.label or '?', 120)}), "
                           "not a node's (`diagnose --json` of a log?): skipped")
        _refuse(rep, "fingerprint", where)
        fp = rep.fingerprint
        if fp is None:  # a report from before the fingerprint: made from its inventory, as `check` makes it
            _refuse(rep, "inventory", where)
            try:
                fp = F.build(rep)
            except Exception as e:  # noqa: BLE001 - an old report whose inventory has fields of the wrong type
                raise SourceError(f"{where}: its inventory cannot be fingerprinted ({type(e).__name__})") from None
            fp = _obj(fp, "fingerprint", where)
        labels = {k: v for k, v in rep.labels.items() if len(v) <= MAX_VALUE_CHARS}
        ident = _obj(fp.get(F.IDENTITY), "fingerprint.identity", where)
        name = (_text(ident.get("node"), "fingerprint.identity.node", where)
                or _text(ident.get("hostname"), "fingerprint.identity.hostname", where)
                or _host_name(rep, where) or where)
        pool = _text(fp.get("pool"), "fingerprint.pool", where)
        when = _time(rep.time)
    elif schema == F.SCHEMA or doc.get("s") == F.COMPACT_SCHEMA:
        fp = doc
        ident = _obj(fp.get(F.IDENTITY), "identity", where)
        name = (_text(ident.get("node"), "identity.node", where) or _text(ident.get("hostname"), "identity.hostname", where)
                or _text(doc.get("node"), "node", where) or where)
        pool = _text(fp.get("pool"), "pool", where)
    elif isinstance(schema, str) and schema.startswith("rdmadoctor."):
        return Skipped(f"{where}: a {printable(schema, 60)} document, not a node's report: skipped")
    else:
        raise SourceError(f"{where}: not an rdmadoctor report or fingerprint (no \"schema\": \"rdmadoctor.report/v1\")")
    if group_by is not None:
        pool = labels.get(group_by)
    return Entry(name, pool or NO_POOL, labels, _flat(fp, where), None, when, where)


def _decode_all(text: str, where: str) -> Iterator[Any]:
    """Every JSON document in ``text``: one, several one after another (JSON lines), or an array."""
    dec = json.JSONDecoder()
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i >= n:
            return
        try:
            doc, i = dec.raw_decode(text, i)
        except ValueError as e:
            raise SourceError(f"{where}: not JSON ({e})") from None
        except RecursionError:
            raise SourceError(f"{where}: JSON nested thousands of levels deep, not a report") from None
        if isinstance(doc, list):
            yield from doc
        else:
            yield doc


def stream_documents(stream: IO[str], where: str, max_document: int = MAX_DOCUMENT_BYTES,
                     max_total: int = MAX_STDIN_BYTES) -> Iterator[Any]:
    """The JSON documents of a stream read a chunk at a time: what is not JSON is named at its
    first character (``fleet - < /dev/zero`` reads one chunk), one document is at most
    ``max_document`` characters and the stream at most ``max_total``."""
    dec = json.JSONDecoder()
    buf = ""
    total = 0
    eof = False
    want = _CHUNK

    def more() -> bool:
        nonlocal buf, total, eof, want
        if eof:
            return False
        try:
            chunk = stream.read(want)
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise SourceError(f"{where}: {getattr(e, 'strerror', None) or e}") from None
        if not chunk:
            eof = True
            return False
        total += len(chunk)
        if total > max_total:
            raise SourceError(f"{where}: more than {max_total >> 20} MiB; stopped (a fleet's reports are far less)")
        buf += chunk
        want = max(_CHUNK, len(buf))  # geometric: each partial document is decoded O(log n) times
        return True

    while True:
        buf = buf.lstrip(" \t\r\n")
        if not buf:
            if not more():
                return
            continue
        if buf[0] not in "{[":
            raise SourceError(f"{where}: not JSON (a report starts with {{; found {printable(buf[:16])!s})")
        try:
            doc, end = dec.raw_decode(buf)
        except RecursionError:
            raise SourceError(f"{where}: JSON nested thousands of levels deep, not a report") from None
        except ValueError as e:
            if len(buf) > max_document:
                raise SourceError(f"{where}: a JSON document over {max_document >> 20} MiB, not a report (give a large "
                                  "fleet as JSON lines, one report a line)") from None
            if more():
                continue
            raise SourceError(f"{where}: not JSON ({e})") from None
        buf = buf[end:]
        if isinstance(doc, list):
            yield from doc
        else:
            yield doc


def _regular(path: str) -> os.stat_result:
    """The file's stat, when it is a regular file (through symlinks); SourceError otherwise."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise SourceError(f"{path}: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = ("a character device" if stat.S_ISCHR(st.st_mode) else "a block device" if stat.S_ISBLK(st.st_mode)
                else "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a file")
        raise SourceError(f"{path}: {kind}, not a regular file (never opened)")
    return st


def _read_file(path: str) -> str:
    st = _regular(path)
    if st.st_size > MAX_DOCUMENT_BYTES:
        raise SourceError(f"{path}: {st.st_size} bytes is not a report (at most {MAX_DOCUMENT_BYTES})")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as e:
        raise SourceError(f"{path}: {e.strerror or e}") from None
    if len(data) > MAX_DOCUMENT_BYTES:  # it grew since the stat (a file being written)
        raise SourceError(f"{path}: more than {MAX_DOCUMENT_BYTES} bytes, not a report")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SourceError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def _is_bundle_dir(path: str) -> bool:
    return any(os.path.exists(os.path.join(path, m)) for m in ("runtime.json", "sys", "cmd"))


def _bundle(path: str, group_by: str | None) -> Entry | Skipped:
    from rdmadoctor.runner import Options, UsageError, diagnose

    if not os.path.isdir(path):
        _regular(path)
    try:
        rep = diagnose(Options(bundle=path, scope="node")).report
    except UsageError as e:
        raise SourceError(f"{path}: {e}") from None
    return _entry(rep, path, group_by)


def _each(docs: Iterator[Any], where: str, group_by: str | None, numbered: bool) -> Iterator[Entry | Skipped | SourceError]:
    """Each document's entry; a document that cannot be read is its SourceError, the rest go on."""
    i = 0
    try:
        for doc in docs:
            i += 1
            name = f"{where} (document {i})" if numbered else where
            try:
                yield _entry(doc, name, group_by)
            except SourceError as e:
                yield e
    except SourceError as e:
        yield e


def from_paths(paths: list[str], group_by: str | None, stdin=None) -> Iterator[Entry | Skipped | SourceError]:
    """Each input's nodes; an input that cannot be read is yielded as its SourceError (the rest go on)."""
    for path in paths:
        if path == "-":
            import sys

            stream = stdin if stdin is not None else sys.stdin
            yield from _each(stream_documents(stream, "stdin"), "stdin", group_by, numbered=True)
            continue
        if os.path.isdir(path) and not _is_bundle_dir(path):
            for base, dirs, files in os.walk(path):
                dirs.sort()
                keep = []
                for d in dirs:
                    full = os.path.join(base, d)
                    if _is_bundle_dir(full):
                        yield from _one(full, group_by)
                    else:
                        keep.append(d)
                dirs[:] = keep
                for name in sorted(files):
                    if name.endswith(".json") or name.endswith(BUNDLE_SUFFIXES):
                        yield from _one(os.path.join(base, name), group_by)
            continue
        yield from _one(path, group_by)


def _one(path: str, group_by: str | None) -> Iterator[Entry | Skipped | SourceError]:
    try:
        if os.path.isdir(path) or path.endswith(BUNDLE_SUFFIXES):
            yield _bundle(path, group_by)
            return
        if not os.path.lexists(path):
            raise SourceError(f"{path}: no such file or directory")
        text = _read_file(path)
    except SourceError as e:
        yield e
        return
    yield from _each(_decode_all(text, path), path, group_by, numbered=False)


# ---- Kubernetes: the Nodes' annotations ---------------------------------------------------------


def from_nodes(nodes: Iterator[Any], group_by: str | None) -> Iterator[Entry | SourceError]:
    """Node objects (as the API lists them) -> entries; a Node without the annotation is skipped
    (counted by the caller), one whose annotation is not a fingerprint is a SourceError."""
    # Most Nodes of a pool carry the same bytes: each distinct annotation is parsed once (up to
    # PARSED_MAX kept, so a fleet of all-different nodes does not hold every parse).
    parsed: dict[str, tuple[dict, dict] | SourceError] = {}
    for i, node in enumerate(nodes):
        meta = node.get("metadata") if isinstance(node, dict) else None
        if not isinstance(meta, dict):
            yield SourceError(f"Node #{i + 1} of the list: no metadata object, not a Node")
            continue
        name = meta.get("name")
        if not isinstance(name, str) or not name or len(name) > MAX_VALUE_CHARS:
            yield SourceError(f"Node #{i + 1} of the list: metadata.name is {_kind(name)}, expected a name")
            continue
        annotations = meta.get("annotations")
        text = annotations.get(ANNOTATION) if isinstance(annotations, dict) else None
        if text is None:
            continue
        where = f"annotation {ANNOTATION}"  # the node is named when the error is yielded
        if not isinstance(text, str) or len(text) > MAX_ANNOTATION_CHARS:
            yield SourceError(f"node {name}: {where}: {_kind(text) if not isinstance(text, str) else f'{len(text):,} characters'}, "
                              "expected a compact fingerprint (JSON text)")
            continue
        labels = _labels(meta.get("labels"))
        got = parsed.get(text)
        if got is None:
            try:
                try:
                    doc = json.loads(text)
                except RecursionError:
                    raise SourceError(f"{where}: JSON nested thousands of levels deep") from None
                except ValueError as e:
                    raise SourceError(f"{where}: not JSON ({e})") from None
                if not isinstance(doc, dict) or doc.get("s") != F.COMPACT_SCHEMA:
                    raise SourceError(f"{where}: not a compact fingerprint (no \"s\": \"{F.COMPACT_SCHEMA}\")")
                _text(doc.get("pool"), "pool", where)
                got = (doc, _flat(doc, where))
            except SourceError as e:
                got = e
            if len(parsed) < PARSED_MAX:
                parsed[text] = got
        if isinstance(got, SourceError):
            yield SourceError(f"node {name}: {got}")
            continue
        doc, flat = got
        pool = labels.get(group_by) if group_by is not None else doc.get("pool")
        # The annotation's text is the same bytes for the same facts (compact_text): its signature.
        yield Entry(name, pool if isinstance(pool, str) and pool else NO_POOL, labels, flat, text, None, f"node {name}")


# ---- Prometheus: the info metrics ---------------------------------------------------------------


def from_prometheus_series(series: Any, group_by: str | None) -> Iterator[Entry | SourceError]:
    """The ``rdmadoctor_node_info`` and ``rdmadoctor_hca_info`` series of an instant query (the
    HTTP API's ``result``) -> one entry per node, gathered by its ``node`` label. A series that is
    not an object of string labels is named and left out."""
    from rdmadoctor.output.fleet_metrics import HCA_INFO, NODE_INFO, flat_of

    if not isinstance(series, list):
        yield SourceError(f"Prometheus: the result is {_kind(series)}, expected a list of series")
        return
    nodes: dict[str, dict] = {}
    ports: dict[str, list[dict]] = {}
    labels_of: dict[str, dict] = {}
    bad = 0
    for i, s in enumerate(series):
        m = s.get("metric") if isinstance(s, dict) else None
        if not isinstance(m, dict) or not all(isinstance(k, str) and isinstance(v, str) and len(v) <= MAX_VALUE_CHARS
                                              for k, v in m.items()):
            bad += 1
            if bad <= 3:
                yield SourceError(f"Prometheus: series #{i + 1} of the answer is not an object of string labels: left out")
            continue
        node = m.get("node") or m.get("instance")
        if not node:
            continue
        if m.get("__name__") == NODE_INFO:
            nodes[node] = m
            labels_of[node] = m
        elif m.get("__name__") == HCA_INFO:
            ports.setdefault(node, []).append(m)
            labels_of.setdefault(node, m)
    if bad > 3:
        yield SourceError(f"Prometheus: {bad - 3} more series were not objects of string labels: left out")
    for node in sorted(labels_of):
        m = labels_of[node]
        pool = m.get(group_by) if group_by is not None else m.get("pool")
        yield Entry(node, pool or NO_POOL, m, flat_of(nodes.get(node), ports.get(node, [])), None, None, f"Prometheus, node {node}")
