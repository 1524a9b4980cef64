"""A typed expectation: what values a key such as ``min_rate_gbps`` accepts, in which unit.

Checks declare these in ``Check.defaults`` (``{"roce_min_mtu": Expect(4096, "enum", ...)}``);
the engine checks every layer a value comes from (profile, config file, node pool, ``--set``)
against them, so a mistyped ``min_rate_gbps = "800"`` stops the run with exit 2 instead of
passing a node that was never judged: the checks skip a rate they cannot compare
(``isinstance(min_rate, (int, float))``), so unchecked, a typo would mean "no minimum".

Kept import-cheap (it sits on the ``check`` path): no typing, no re, no json.
"""

from __future__ import annotations

from rdmadoctor.core.record import record

_INF = float("inf")


def _finite(x: float) -> bool:
    """math.isfinite for floats, without importing math on the check path."""
    return x == x and x != _INF and x != -_INF  # NaN is the one value not equal to itself

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations here are strings
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Expect", "ExpectError", "TYPES", "GIB", "MAX_BYTES", "show", "infer", "fmt_bytes"]

GIB = 1024**3
# No node has an exbibyte of memory: a bigger size is a typo (or RLIM_INFINITY written out,
# which is memlock_min_bytes = "unlimited").
MAX_BYTES = 1 << 60

# "list" is a list of names (strings); "bytes" a non-negative integer, also written "16GiB";
# "any" is whatever a config can hold (null, true, 3, 2.5, "x", lists, tables).
TYPES = ("int", "number", "bool", "str", "enum", "list", "bytes", "any")

# Plugin authors may write Expect(5, int) instead of Expect(5, "int").
_PY_TYPES = {int: "int", float: "number", bool: "bool", str: "str", list: "list"}

# Binary and decimal size suffixes, as kubectl and `free -h` write them ("16Gi", "16GiB", "16G").
_SIZE_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5, "e": 6}


class ExpectError(ValueError):
    """A value an expectation does not accept. ``problem`` says what is wrong with the value,
    ``expected`` what the key takes; the engine adds where the value came from."""

    def __init__(self, key: str, value: Any, problem: str, expected: str):
        super().__init__(f"{key}: {problem}; expected {expected}")
        self.key = key
        self.value = value
        self.problem = problem
        self.expected = expected


def show(value: Any, limit: int = 60, _depth: int = 0) -> str:
    """A value as the user wrote it in TOML or JSON (null, true, 'abc', [1, 2]), kept short."""
    if _depth > 4:
        return "..."
    if value is None:
        text = "null"
    elif value is True or value is False:
        text = "true" if value else "false"
    elif isinstance(value, int) and value.bit_length() > 256:
        # repr() of an int over 4300 digits raises; 2**256 has 78.
        text = f"{'-' if value < 0 else ''}a number with more than 77 digits"
    elif isinstance(value, (int, float, str)):
        text = repr(value[:limit]) if isinstance(value, str) else repr(value)
    elif isinstance(value, (list, tuple)):
        text = "[" + ", ".join(show(v, limit, _depth + 1) for v in value[:8]) + (", ...]" if len(value) > 8 else "]")
    elif isinstance(value, dict):
        text = "a table {" + ", ".join(str(k) for k in list(value)[:8]) + "}"
    else:
        text = f"{repr(value)} ({type(value).__name__})"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fmt_bytes(n: int) -> str:
    """Exact binary units where they divide evenly (1 GiB), else the plain number."""
    for unit, size in (("EiB", 1 << 60), ("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n and n % size == 0:
            return f"{n // size} {unit}"
    return str(n)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _parse_size(text: str) -> int | None:
    """'16Gi', '16GiB', '1.5 GiB', '512M', '4096B' -> bytes; None if it is not a size."""
    s = text.strip()
    end = 0
    while end < len(s) and (s[end].isdigit() or s[end] == "."):
        end += 1
    number, suffix = s[:end], s[end:].strip().lower()
    whole, dot, frac = number.partition(".")
    # int() refuses more than 4300 digits (CVE-2020-10735); no size needs 30.
    if len(number) > 30:
        return None
    if not number or not (whole + frac).isdigit() or not whole.isascii() or not frac.isascii() or "." in frac:
        return None
    if suffix.endswith("b"):
        suffix = suffix[:-1]
    binary = suffix.endswith("i")
    if binary:
        suffix = suffix[:-1]
    if suffix not in _SIZE_POWERS or (binary and not suffix):
        return None
    # A bare number in quotes ("800") is a typo for 800, not a size: let the caller say so.
    if not suffix and not s[end:].strip():
        return None
    mult = (1024 if binary else 1000) ** _SIZE_POWERS[suffix]
    scale = 10 ** len(frac)
    total = int(whole or "0") * mult * scale + int(frac or "0") * mult
    if total % scale:
        return None  # '1.3B': not a whole number of bytes
    return total // scale


@record
class Expect:
    """One expectation's default, type, unit and range.

    ``above`` is an exclusive lower bound (a rate must be > 0), ``min``/``max`` inclusive ones.
    ``null_means`` says what null does for this key ("no minimum", "unlimited"); a string equal
    to it is read as null, so ``--set memlock_min_bytes=unlimited`` works.
    """

    default: Any = None
    type: str = "any"
    unit: str = ""
    min: Any = None
    max: Any = None
    choices: tuple | None = None
    nullable: bool = True
    doc: str = ""
    above: Any = None
    null_means: str = ""
    example: Any = None
    # Other spellings of an enum's choices, lower case: {"roce": "Ethernet"}.
    aliases: dict | None = None

    def __post_init__(self):
        kind = _PY_TYPES.get(self.type, self.type) if isinstance(self.type, type) else self.type
        if kind not in TYPES:
            raise ValueError(f"Expect: type {self.type!r} is not one of {', '.join(TYPES)}")
        object.__setattr__(self, "type", kind)
        if kind == "enum":
            if not self.choices:
                raise ValueError("Expect: an enum needs choices")
            object.__setattr__(self, "choices", tuple(self.choices))

    # ---- what it takes, in words ---------------------------------------------------------

    def _bound(self, v: Any) -> str:
        return fmt_bytes(v) if self.type == "bytes" else f"{v:g}" if isinstance(v, float) else str(v)

    def range_text(self) -> str:
        """'> 0', '>= 1', '1..1024', '> 0, <= 10000', or '' when unbounded."""
        lo = f"> {self._bound(self.above)}" if self.above is not None else None
        if self.min is not None and self.max is not None and lo is None:
            return f"{self._bound(self.min)}..{self._bound(self.max)}"
        parts = [lo] if lo else []
        if self.min is not None and lo is None:
            parts.append(f">= {self._bound(self.min)}")
        if self.max is not None:
            parts.append(f"<= {self._bound(self.max)}")
        return ", ".join(parts)

    def expected(self) -> str:
        """The whole contract in one phrase, for error messages."""
        kind = self.type
        if kind == "enum":
            text = "one of " + ", ".join(show(c) if not isinstance(c, str) else c for c in self.choices or ())
        else:
            text = {
                "int": "an integer",
                "number": "a number",
                "bool": "true or false",
                "str": "a string",
                "list": "a list of names",
                "bytes": "a size in bytes",
                "any": "a plain value (true/false, a number, a string, a list or a table)",
            }[kind]
        rng = self.range_text()
        if rng:
            text += f" {rng}"
        if kind == "bytes":
            text += ' (a number, or a string such as "16GiB")'
        elif self.unit:
            text += f" ({self.unit})"
        if self.nullable:
            text += f", or null ({self.null_means})" if self.null_means else ", or null"
        return text

    # ---- checking ------------------------------------------------------------------------

    def validate(self, key: str, value: Any) -> Any:
        """The value as the checks will read it (a size string as bytes, an enum in its
        canonical spelling, a list copied), or ExpectError."""
        if value is None or (self.null_means and isinstance(value, str) and value.strip().lower() == self.null_means.lower()):
            if self.nullable:
                return None
            raise ExpectError(key, value, "null is not allowed", self.expected())
        kind = self.type
        if kind == "any":
            return self._any(key, value)
        if kind == "bool":
            if value is True or value is False:
                return value
            return self._wrong(key, value, "true or false")
        if kind == "str":
            if isinstance(value, str):
                return self._ranged(key, value, value)
            return self._wrong(key, value, "a string")
        if kind == "list":
            return self._list(key, value)
        if kind == "enum":
            return self._enum(key, value)
        if kind == "bytes":
            if isinstance(value, str):
                size = _parse_size(value)
                if size is None:
                    return self._wrong(key, value, "a size")
                value = size
            elif not _is_num(value):
                return self._wrong(key, value, "a size")
            n = self._whole(key, value, "a whole number of bytes")
            if n < 0:
                raise ExpectError(key, value, f"{show(value)} is negative", self.expected())
            return self._ranged(key, value, n)
        if not _is_num(value):
            return self._wrong(key, value, "an integer" if kind == "int" else "a number")
        if isinstance(value, float) and not _finite(value):
            raise ExpectError(key, value, f"{show(value)} is not a finite number", self.expected())
        if kind == "int":
            return self._ranged(key, value, self._whole(key, value, "an integer"))
        return self._ranged(key, value, value)

    def _wrong(self, key: str, value: Any, what: str) -> Any:
        if value is True or value is False:
            problem = f"{show(value)} is a boolean, not {what}"  # True == 1 in Python; not here
        elif isinstance(value, str) and _numeric(value):
            problem = f"{show(value)} is a string (in quotes), not {what}"
        else:
            problem = f"{show(value)} is not {what}"
        raise ExpectError(key, value, problem, self.expected())

    def _whole(self, key: str, value: Any, what: str) -> int:
        if isinstance(value, float):
            if not _finite(value) or value != int(value):
                raise ExpectError(key, value, f"{show(value)} is not {what}", self.expected())
            return int(value)
        return value

    def _ranged(self, key: str, value: Any, v: Any) -> Any:
        if isinstance(v, str):
            return v
        if self.above is not None and not v > self.above:
            problem = f"{show(value)} is not > {self._bound(self.above)}"
        elif self.min is not None and v < self.min:
            problem = f"{show(value)} is below the minimum {self._bound(self.min)}"
        elif self.max is not None and v > self.max:
            problem = f"{show(value)} is above the maximum {self._bound(self.max)}"
        else:
            return v
        raise ExpectError(key, value, problem, self.expected())

    def _enum(self, key: str, value: Any) -> Any:
        for c in self.choices or ():
            if isinstance(c, str):
                # Case is not what the user meant to say: "infiniband" is InfiniBand.
                if isinstance(value, str) and value.strip().lower() == c.lower():
                    return c
            elif _is_num(c) and _is_num(value) and value == c:
                return c
        if self.aliases and isinstance(value, str) and value.strip().lower() in self.aliases:
            return self.aliases[value.strip().lower()]
        raise ExpectError(key, value, f"{show(value)} is not one of the choices", self.expected())

    def _list(self, key: str, value: Any) -> list:
        if isinstance(value, str):
            # --set ignore_ports=mlx5_8,mlx5_9 and ignore_ports = "mlx5_9" mean what they say.
            return [p.strip() for p in value.split(",") if p.strip()]
        if not isinstance(value, (list, tuple)):
            return self._wrong(key, value, "a list of names")
        out = []
        for item in value:
            if not isinstance(item, str) or not item.strip():
                what = "an empty name" if isinstance(item, str) else f"{show(item)}, not a name"
                raise ExpectError(key, value, f"{show(value)} holds {what}", self.expected())
            out.append(item.strip())
        return out

    def _any(self, key: str, value: Any, depth: int = 0) -> Any:
        # What TOML and JSON can hold, minus dates and NaN: checks compare these with ==.
        if value is None or isinstance(value, (bool, str, int)):
            return value
        if isinstance(value, float):
            if _finite(value):
                return value
            raise ExpectError(key, value, f"{show(value)} is not a finite number", self.expected())
        if depth < 32 and isinstance(value, (list, tuple)):
            return [self._any(key, v, depth + 1) for v in value]
        if depth < 32 and isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return {k: self._any(key, v, depth + 1) for k, v in value.items()}
        raise ExpectError(key, value, f"{show(value)} is not a plain value", "null, true/false, a number, a string, a list or a table")

    # ---- for `list-checks` and the docs --------------------------------------------------

    def describe(self, key: str) -> dict:
        return {
            "key": key,
            "type": self.type,
            "unit": self.unit,
            "default": self.default,
            "range": self.range_text(),
            "choices": list(self.choices) if self.choices else None,
            "nullable": self.nullable,
            "null_means": self.null_means,
            "doc": self.doc,
        }


def infer(default: Any) -> Expect:
    """The Expect of a plain default in Check.defaults: its type is the default's type."""
    if isinstance(default, Expect):
        return default
    if default is None:
        return Expect(None, "any")
    if isinstance(default, bool):
        kind = "bool"
    elif isinstance(default, int):
        kind = "int"
    elif isinstance(default, float):
        kind = "number"
    elif isinstance(default, str):
        kind = "str"
    elif isinstance(default, (list, tuple)) and all(isinstance(x, str) and x.strip() for x in default):
        kind = "list"
    else:
        kind = "any"
    return Expect(default, kind, nullable=False)
