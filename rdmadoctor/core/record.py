"""Frozen records for facts and results, without the start-up cost of ``dataclasses``.

``rdmadoctor check`` runs in every init container and every minute on every node, so its cost
is mostly interpreter start plus imports. ``@dataclass`` compiles an ``__init__``, ``__eq__``,
``__repr__`` and ``__hash__`` per class with ``exec`` at import time (about 0.3 ms a class, and
``import dataclasses`` pulls in ``inspect``): with ~50 classes on the check path that was a
third of a cold run. ``@record`` gives the part of the dataclass contract rdmadoctor uses
(keyword or positional construction, defaults and default factories, frozen instances,
value equality and hashing, a readable repr, ``replace`` and ``fields``) with shared,
precompiled methods: decorating a class costs a few microseconds.

Third-party checks may keep using ``dataclasses``; the engine only needs plain objects.
"""

from __future__ import annotations

__all__ = ["record", "field", "replace", "fields", "asdict", "FrozenRecordError"]

TYPE_CHECKING = False  # typing costs ~3 ms to import; type checkers read the branch near record()

_MISSING = object()


class FrozenRecordError(AttributeError):
    """Raised when code assigns to a field of a frozen record (facts never change once probed)."""


class _Field:
    __slots__ = ("default", "factory", "compare")

    def __init__(self, default, factory, compare):
        self.default = default
        self.factory = factory
        self.compare = compare


def field(*, default=_MISSING, default_factory=None, compare: bool = True):
    """Like ``dataclasses.field``: a default, a default factory, or leave the field out of ==."""
    if default is not _MISSING and default_factory is not None:
        raise ValueError("field(): give default or default_factory, not both")
    return _Field(default, default_factory, compare)


def _init(self, *args, **kw):
    cls = type(self)
    names = cls.__record_fields__
    if len(args) > len(names):
        raise TypeError(f"{cls.__name__}() takes {len(names)} arguments, {len(args)} given")
    put = object.__setattr__
    for name, value in zip(names, args):
        if name in kw:
            raise TypeError(f"{cls.__name__}() got multiple values for {name!r}")
        put(self, name, value)
    defaults = cls.__record_defaults__
    for name in names[len(args):]:
        if name in kw:
            put(self, name, kw.pop(name))
            continue
        d = defaults.get(name, _MISSING)
        if d is _MISSING:
            raise TypeError(f"{cls.__name__}() missing required argument {name!r}")
        put(self, name, d.factory() if type(d) is _Field else d)
    if kw:
        raise TypeError(f"{cls.__name__}() got unexpected {'argument' if len(kw) == 1 else 'arguments'} {', '.join(map(repr, kw))}")
    post = getattr(self, "__post_init__", None)
    if post is not None:
        post()


def _key(self):
    return tuple(getattr(self, n) for n in type(self).__record_compare__)


def _eq(self, other):
    if type(other) is not type(self):
        return NotImplemented
    return _key(self) == _key(other)


def _hash(self):
    return hash(_key(self))


def _repr(self):
    inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in type(self).__record_fields__)
    return f"{type(self).__qualname__}({inner})"


def _frozen_setattr(self, name, value):
    raise FrozenRecordError(f"cannot assign to field {name!r}: {type(self).__name__} is frozen")


def _frozen_delattr(self, name):
    raise FrozenRecordError(f"cannot delete field {name!r}: {type(self).__name__} is frozen")


if TYPE_CHECKING:
    # What type checkers see (PEP 681): @record is @dataclass(frozen=True) and record.field is
    # dataclasses.field, so a wrong-typed or missing constructor argument and an assignment to a
    # frozen field are reported as they would be for a dataclass. No runtime cost: never executed.
    from typing import Any, Callable, TypeVar, overload

    from typing_extensions import dataclass_transform

    _T = TypeVar("_T")

    @overload
    def record(cls: type[_T], /) -> type[_T]: ...

    @overload
    def record(*, frozen: bool = True) -> Callable[[type[_T]], type[_T]]: ...

    @dataclass_transform(frozen_default=True, field_specifiers=(field,))
    def record(cls: Any = None, /, *, frozen: bool = True) -> Any: ...

else:

    def record(cls=None, *, frozen: bool = True):
        """Class decorator: ``@record`` (frozen) or ``@record(frozen=False)``."""

        def wrap(cls):
            names: list[str] = []
            defaults: dict = {}
            compare: list[str] = []
            for klass in reversed(cls.__mro__[:-1]):
                own = klass.__dict__.get("__annotations__", {})
                for name, ann in own.items():
                    if isinstance(ann, str) and ann.startswith(("ClassVar", "typing.ClassVar")):
                        continue
                    if name not in names:
                        names.append(name)
                    if klass is not cls:
                        continue
                    value = klass.__dict__.get(name, _MISSING)
                    if type(value) is _Field:
                        if value.factory is not None:
                            defaults[name] = value
                        elif value.default is not _MISSING:
                            defaults[name] = value.default
                        if value.default is _MISSING:
                            delattr(cls, name)
                        else:
                            setattr(cls, name, value.default)
                        if not value.compare:
                            continue
                    elif value is not _MISSING:
                        defaults[name] = value
                    compare.append(name)
            for base in cls.__mro__[1:-1]:
                for name, value in base.__dict__.get("__record_defaults__", {}).items():
                    defaults.setdefault(name, value)
                for name in base.__dict__.get("__record_compare__", ()):
                    if name not in compare:
                        compare.append(name)
            seen_default = False
            for name in names:
                if name in defaults:
                    seen_default = True
                elif seen_default:
                    raise TypeError(f"{cls.__name__}: field {name!r} without a default follows one with a default")
            cls.__record_fields__ = tuple(names)
            cls.__record_defaults__ = defaults
            cls.__record_compare__ = tuple(n for n in names if n in compare)
            cls.__match_args__ = tuple(names)
            cls.__init__ = _init
            if "__repr__" not in cls.__dict__:
                cls.__repr__ = _repr
            if "__eq__" not in cls.__dict__:
                cls.__eq__ = _eq
            if frozen:
                cls.__setattr__ = _frozen_setattr
                cls.__delattr__ = _frozen_delattr
                if "__hash__" not in cls.__dict__ or cls.__dict__["__hash__"] is None:
                    cls.__hash__ = _hash
            elif "__eq__" not in cls.__dict__ or cls.__eq__ is _eq:
                cls.__hash__ = None  # mutable and compared by value: unhashable, as with dataclasses
            return cls

        return wrap if cls is None else wrap(cls)


def fields(obj) -> tuple[str, ...]:
    """The field names of a record class or instance, in order."""
    return obj.__record_fields__


def replace(obj, **changes):
    """A copy of ``obj`` with some fields changed (``dataclasses.replace``)."""
    names = obj.__record_fields__
    unknown = [k for k in changes if k not in names]
    if unknown:
        raise TypeError(f"{type(obj).__name__} has no {'field' if len(unknown) == 1 else 'fields'} {', '.join(map(repr, unknown))}")
    values = {n: changes[n] if n in changes else getattr(obj, n) for n in names}
    return type(obj)(**values)


def asdict(obj) -> dict:
    """The fields of a record as a dict (not recursive)."""
    return {n: getattr(obj, n) for n in obj.__record_fields__}
