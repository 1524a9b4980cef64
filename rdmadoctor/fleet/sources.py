"""Where the fleet's fingerprints come from: reports, bundles, folders of either, stdin, the Nodes'
annotations, Prometheus' info metrics. Each source yields ``(node, pool, labels, flat, signature)``: ``signature`` is equal for nodes
with equal facts (the annotation's text), or None (the fleet then uses the flat view's items).

A report (``check --json``, the agent's report file) carries its fingerprint; a report from before
the fingerprint existed is fingerprinted from its inventory; a bundle is checked (``--scope
node``) and fingerprinted. ``-`` reads one or more JSON documents from stdin (a report, JSON lines,
a JSON array of reports).
"""

from __future__ import annotations

import json
import os

from rdmadoctor.engine import fingerprint as F

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterator

ANNOTATION = "rdmadoctor.io/fingerprint"
# The pool a node is in when its report names none (no --pool) and no --group-by label says.
NO_POOL = "-"
BUNDLE_SUFFIXES = (".tar.gz", ".tgz", ".tar")
PARSED_MAX = 1024
# A report is a few tens of KB; a file past this is not one (and is not read into memory).
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024


class SourceError(Exception):
    """An input that could not be read; the fleet names it and cannot decide on it."""


def _entry(doc: Any, where: str, group_by: str | None) -> tuple[str, str, dict, dict, None]:
    """(node, pool, labels, flat) of one JSON document: a report, a fingerprint or a compact one."""
    if not isinstance(doc, dict):
        raise SourceError(f"{where}: not a JSON object (a report, or a fingerprint)")
    labels: dict = {}
    if doc.get("schema") == "rdmadoctor.report/v1" or "inventory" in doc:
        fp = doc.get("fingerprint")
        if not isinstance(fp, dict):
            fp = F.build(doc)
        got = doc.get("labels")
        labels = got if isinstance(got, dict) else {}
        host = doc.get("host")
        host = host if isinstance(host, dict) else {}
        ident = fp.get(F.IDENTITY) or {}
        name = ident.get("node") or ident.get("hostname") or host.get("hostname") or host.get("label") or where
        pool = fp.get("pool")
    elif doc.get("schema") == F.SCHEMA or doc.get("s") == F.COMPACT_SCHEMA:
        fp = doc
        ident = fp.get(F.IDENTITY) or {}
        name = ident.get("node") or ident.get("hostname") or doc.get("node") or where
        pool = fp.get("pool")
    else:
        raise SourceError(f"{where}: not an rdmadoctor report or fingerprint (no \"schema\": \"rdmadoctor.report/v1\")")
    if group_by is not None:
        pool = labels.get(group_by)
    return str(name), str(pool) if pool else NO_POOL, labels, F.flatten(fp), None


def documents(text: str, where: str) -> Iterator[Any]:
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
        if isinstance(doc, list):
            yield from doc
        else:
            yield doc


def _read_file(path: str) -> str:
    try:
        size = os.path.getsize(path)
        if size > MAX_DOCUMENT_BYTES:
            raise SourceError(f"{path}: {size} bytes is not a report (at most {MAX_DOCUMENT_BYTES})")
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise SourceError(f"{path}: {getattr(e, 'strerror', None) or e}") from None


def _is_bundle_dir(path: str) -> bool:
    return any(os.path.exists(os.path.join(path, m)) for m in ("runtime.json", "sys", "cmd"))


def _bundle(path: str, group_by: str | None) -> tuple[str, str, dict, dict, None]:
    from rdmadoctor.runner import Options, UsageError, diagnose

    try:
        rep = diagnose(Options(bundle=path, scope="node")).report
    except UsageError as e:
        raise SourceError(f"{path}: {e}") from None
    return _entry(rep, path, group_by)


def from_paths(paths: list[str], group_by: str | None, stdin=None) -> Iterator[tuple | SourceError]:
    """Each input's nodes; an input that cannot be read is yielded as its SourceError (the rest go on)."""
    for path in paths:
        if path == "-":
            import sys

            stream = stdin if stdin is not None else sys.stdin
            try:
                for doc in documents(stream.read(), "stdin"):
                    yield _entry(doc, "stdin", group_by)
            except SourceError as e:
                yield e
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


def _one(path: str, group_by: str | None) -> Iterator[tuple | SourceError]:
    try:
        if os.path.isdir(path) or path.endswith(BUNDLE_SUFFIXES):
            yield _bundle(path, group_by)
            return
        if not os.path.exists(path):
            raise SourceError(f"{path}: no such file or directory")
        for doc in documents(_read_file(path), path):
            yield _entry(doc, path, group_by)
    except SourceError as e:
        yield e


# ---- Kubernetes: the Nodes' annotations ---------------------------------------------------------


def from_nodes(nodes: Iterator[dict], group_by: str | None) -> Iterator[tuple | SourceError]:
    """Node objects (as the API lists them) -> entries; a Node without the annotation is skipped
    (counted by the caller), one whose annotation is not a fingerprint is a SourceError."""
    # Most Nodes of a pool carry the same bytes: each distinct annotation is parsed once (up to
    # PARSED_MAX kept, so a fleet of all-different nodes does not hold every parse).
    parsed: dict[str, tuple[dict, dict] | ValueError] = {}
    for node in nodes:
        meta = node.get("metadata") or {}
        name = str(meta.get("name"))
        text = (meta.get("annotations") or {}).get(ANNOTATION)
        if text is None:
            continue
        labels = meta.get("labels") or {}
        got = parsed.get(text)
        if got is None:
            try:
                doc = json.loads(text)
                if not isinstance(doc, dict) or doc.get("s") != F.COMPACT_SCHEMA:
                    raise ValueError("not a compact fingerprint")
                got = (doc, F.flatten(doc))
            except ValueError as e:
                got = e
            if len(parsed) < PARSED_MAX:
                parsed[text] = got
        if isinstance(got, ValueError):
            yield SourceError(f"node {name}: annotation {ANNOTATION}: {got}")
            continue
        doc, flat = got
        pool = labels.get(group_by) if group_by is not None else doc.get("pool")
        # The annotation's text is the same bytes for the same facts (compact_text): its signature.
        yield name, str(pool) if pool else NO_POOL, labels, flat, text


# ---- Prometheus: the info metrics ---------------------------------------------------------------


def from_prometheus_series(series: list[dict], group_by: str | None) -> Iterator[tuple]:
    """The ``rdmadoctor_node_info`` and ``rdmadoctor_hca_info`` series of an instant query (the
    HTTP API's ``result``) -> one entry per node, gathered by its ``node`` label."""
    from rdmadoctor.output.fleet_metrics import HCA_INFO, NODE_INFO, flat_of

    nodes: dict[str, dict] = {}
    ports: dict[str, list[dict]] = {}
    labels_of: dict[str, dict] = {}
    for s in series:
        m = s.get("metric") or {}
        node = m.get("node") or m.get("instance")
        if not node:
            continue
        if m.get("__name__") == NODE_INFO:
            nodes[node] = m
            labels_of[node] = m
        elif m.get("__name__") == HCA_INFO:
            ports.setdefault(node, []).append(m)
            labels_of.setdefault(node, m)
    for node in sorted(labels_of):
        m = labels_of[node]
        pool = m.get(group_by) if group_by is not None else m.get("pool")
        yield node, str(pool) if pool else NO_POOL, m, flat_of(nodes.get(node), ports.get(node, [])), None
