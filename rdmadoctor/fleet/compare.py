"""Each node against its pool: the majority of every field, and the nodes that differ from it.

No golden file: a pool's expectation is what most of its nodes have. For every field of the flat
fingerprint view (rdmadoctor.engine.fingerprint.flatten) and every pool, the values are counted;
the value held by more nodes than any other is the majority and every node with another value is
an outlier. When two or more values share the top count the field is undecided (no majority to
differ from); a pool of one node is not compared. A field a node could not read (null, missing)
is unknown on that node, never a difference.

Linear in the input: nodes with equal facts form one group, whose fields are counted once, when
its first node arrives; only node indices are kept (per group) and group indices (per pool, field
and value), never the nodes' documents.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable

from rdmadoctor.core.words import count, printable

SCHEMA = "rdmadoctor.fleet/v1"
# How many node names a text line lists before "and N more".
SHOW_NODES = 8


class _Pool:
    __slots__ = ("name", "nodes", "groups", "members", "fields")

    def __init__(self, name: str):
        self.name = name
        self.nodes: list[str] = []
        # Nodes with the same facts are counted once, as a group (most of a pool is alike: that is
        # what a pool is): {signature: group}, each group's node indices, and per field and value
        # the groups that hold it. No node's flat view is kept.
        self.groups: dict[Any, int] = {}
        self.members: list[list[int]] = []
        self.fields: dict[str, dict[Any, list[int]]] = {}

    def holders(self, groups: list[int]) -> list[int]:
        return sorted(i for g in groups for i in self.members[g])


def signature_of(flat: dict[str, Any]) -> tuple[int, int]:
    """Equal for equal flat views (made by the same code, so in the same order): two 64-bit hashes
    of the items, in opposite orders, so two different nodes would have to collide in both (one
    hash alone: about 1 in 10**11 for 10,000 different nodes). 0.05 ms a report; a repr and a
    BLAKE2b of it took 0.27 ms, more than reading the fingerprint."""
    items = tuple(flat.items())
    return hash(items), hash(items[::-1])


class Fleet:
    """Add nodes one by one (``add``), then ``result()``."""

    def __init__(self) -> None:
        self.pools: dict[str, _Pool] = {}
        self.errors: list[str] = []

    def add(self, node: str, pool: str, flat: dict[str, Any], signature: Any = None) -> None:
        """``signature``: anything hashable that is equal for nodes with equal ``flat`` (the compact
        fingerprint's text); by default :func:`signature_of` the flat view."""
        p = self.pools.get(pool)
        if p is None:
            p = self.pools[pool] = _Pool(pool)
        i = len(p.nodes)
        p.nodes.append(node)
        key = signature_of(flat) if signature is None else signature
        g = p.groups.get(key)
        if g is not None:
            p.members[g].append(i)
            return
        g = p.groups[key] = len(p.members)
        p.members.append([i])
        fields = p.fields
        for field, value in flat.items():
            if value is None:
                continue
            by_value = fields.get(field)
            if by_value is None:
                fields[field] = {value: [g]}
                continue
            holders = by_value.get(value)
            if holders is None:
                by_value[value] = [g]
            else:
                holders.append(g)

    def result(self) -> dict:
        pools = []
        outliers = []
        for p in sorted(self.pools.values(), key=lambda p: p.name):
            entry: dict[str, Any] = {
                "pool": p.name, "nodes": len(p.nodes), "compared": len(p.nodes) > 1, "fields": len(p.fields),
                "drifted_fields": 0, "outlier_nodes": 0, "undecided": [],
            }
            pools.append(entry)
            if len(p.nodes) < 2:
                continue
            odd: set[int] = set()
            for key in sorted(p.fields):
                by_value = p.fields[key]
                if len(by_value) == 1:
                    continue
                counts = sorted(((sum(len(p.members[g]) for g in gs), v) for v, gs in by_value.items()), key=lambda c: -c[0])
                total = sum(c for c, _ in counts)
                if counts[0][0] == counts[1][0]:
                    top = counts[0][0]
                    entry["undecided"].append(
                        {"field": key, "values": {str(v): c for c, v in counts if c == top}, "total": total}
                    )
                    continue
                majority_count, majority = counts[0]
                entry["drifted_fields"] += 1
                for value, groups in by_value.items():
                    if value == majority:
                        continue
                    for i in p.holders(groups):
                        odd.add(i)
                        outliers.append(
                            {"pool": p.name, "node": p.nodes[i], "field": key, "value": value, "majority": majority,
                             "majority_count": majority_count, "total": total}
                        )
            entry["outlier_nodes"] = len(odd)
        return {"schema": SCHEMA, "pools": pools, "outliers": outliers, "errors": list(self.errors)}


def compare(nodes: Iterable[tuple[str, str, dict]]) -> dict:
    """(node, pool, flat view) for each node -> the ``rdmadoctor.fleet/v1`` result."""
    fleet = Fleet()
    for node, pool, flat in nodes:
        fleet.add(node, pool, flat)
    return fleet.result()


def exit_code(result: dict) -> int:
    """0 no drift, 1 drift (an outlier anywhere), 2 could not decide: a tied field, an input that
    could not be read, or no pool with two nodes to compare."""
    if result["outliers"]:
        return 1
    if result["errors"] or any(p["undecided"] for p in result["pools"]) or not any(p["compared"] for p in result["pools"]):
        return 2
    return 0


def _names(nodes: list[str]) -> str:
    shown = ", ".join(printable(n, 253) for n in nodes[:SHOW_NODES])
    return shown + (f" and {len(nodes) - SHOW_NODES} more" if len(nodes) > SHOW_NODES else "")


def _split(field: str) -> tuple[str, str]:
    """("fw_ver", "mlx5_0/1") for "port.mlx5_0/1.fw_ver"; ("kernel", "") for "node.kernel"."""
    if field.startswith("port."):
        subject, _, name = field[5:].rpartition(".")
        return name, subject
    return field[5:] if field.startswith("node.") else field, ""


def lines(result: dict) -> list[str]:
    """The text: one block per pool, one line per (field, value, nodes), ports that drift together
    on one line ("fw_ver 28.39.1002 on 3/512 nodes (...) at mlx5_0/1, mlx5_1/1; pool majority ...").
    Every name and value from the inputs is escaped (rdmadoctor.core.words.printable): a newline
    in a value cannot forge a line, an escape sequence or a bidi control is shown, not obeyed."""
    out: list[str] = []
    by_pool: dict[str, list[dict]] = {}
    for o in result["outliers"]:
        by_pool.setdefault(o["pool"], []).append(o)
    for p in result["pools"]:
        name = printable(p["pool"], 253)
        if not p["compared"]:
            out.append(f"pool {name}: 1 node, nothing to compare it with (a pool of one is never drift)")
            continue
        rows = by_pool.get(p["pool"], [])
        head = f"pool {name}: {p['nodes']} nodes, {p['fields']} fields compared"
        if rows:
            differ = "differs" if p["drifted_fields"] == 1 else "differ"
            head += f": {count(p['drifted_fields'], 'field')} {differ} on {count(p['outlier_nodes'], 'node')}"
        elif not p["undecided"]:
            head += ": every node agrees"
        out.append(head)
        # (field name, value, majority, majority_count, total) -> {nodes tuple -> subjects}
        groups: dict[tuple, dict[str, list[str]]] = {}
        nodes_of: dict[tuple, list[str]] = {}
        for o in rows:
            field, subject = _split(o["field"])
            key = (field, subject, str(o["value"]), str(o["majority"]), o["majority_count"], o["total"])
            nodes_of.setdefault(key, []).append(o["node"])
        for key, nodes in nodes_of.items():
            field, subject, value, majority, mcount, total = key
            gkey = (field, value, majority, mcount, total, tuple(nodes))
            groups.setdefault(gkey, {}).setdefault("subjects", []).append(subject)
        for (field, value, majority, mcount, total, nodes), g in groups.items():
            subjects = [printable(s, 253) for s in g["subjects"] if s]
            at = f" at {', '.join(subjects)}" if subjects else ""
            out.append(
                f"  {printable(field, 253)} {printable(value)} on {len(nodes)}/{total} nodes ({_names(list(nodes))}){at}; "
                f"pool majority {printable(majority)} ({mcount} nodes)"
            )
        for u in p["undecided"]:
            values = ", ".join(f"{printable(v)} on {c}" for v, c in u["values"].items())
            out.append(f"  {printable(u['field'], 253)}: no majority ({values} of {u['total']} nodes): undecided")
    for note in result.get("notes") or ():
        out.append(f"note: {printable(note, 2000)}")
    for e in result["errors"]:
        out.append(f"not read: {printable(e, 2000)}")
    return out
