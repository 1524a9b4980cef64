"""rdmadoctor.core.record: the part of the dataclass contract the facts rely on, without its start-up cost."""

from __future__ import annotations

import pytest

from rdmadoctor.core.record import FrozenRecordError, asdict, field, fields, record, replace


@record
class Port:
    name: str
    rate: float | None = None
    gids: tuple = ()
    extra: dict = field(default_factory=dict, compare=False)


@record(frozen=False)
class Mutable:
    items: list = field(default_factory=list)
    n: int = 0


def test_construction_defaults_and_factories():
    a = Port("mlx5_0/1")
    assert (a.name, a.rate, a.gids, a.extra) == ("mlx5_0/1", None, (), {})
    b = Port(name="mlx5_1/1", rate=400.0)
    assert b.rate == 400.0
    # a default factory gives each instance its own object
    assert Port("x").extra is not Port("x").extra
    assert fields(Port) == ("name", "rate", "gids", "extra")
    assert asdict(b) == {"name": "mlx5_1/1", "rate": 400.0, "gids": (), "extra": {}}


def test_bad_arguments_are_type_errors():
    with pytest.raises(TypeError, match="missing required argument 'name'"):
        Port()
    with pytest.raises(TypeError, match="unexpected"):
        Port("x", speed=1)
    with pytest.raises(TypeError, match="multiple values"):
        Port("x", name="y")
    with pytest.raises(TypeError, match="takes 4 arguments"):
        Port("a", 1.0, (), {}, 5)


def test_frozen_equality_hash_and_repr():
    a, b = Port("p", 100.0, extra={"k": 1}), Port("p", 100.0, extra={"k": 2})
    assert a == b and hash(a) == hash(b)  # extra is compare=False
    assert a != Port("p", 200.0)
    assert a != ("p", 100.0, (), {})
    assert len({a, b, Port("q")}) == 2
    with pytest.raises(FrozenRecordError):
        a.rate = 1.0
    with pytest.raises(AttributeError):
        del a.name
    assert repr(Port("p")) == "Port(name='p', rate=None, gids=(), extra={})"


def test_replace_copies_and_checks_names():
    a = Port("p", 100.0)
    b = replace(a, rate=200.0)
    assert (a.rate, b.rate, b.name) == (100.0, 200.0, "p")
    with pytest.raises(TypeError, match="no field"):
        replace(a, speed=1)


def test_mutable_records_are_unhashable_and_assignable():
    m = Mutable()
    m.items.append(1)
    m.n = 3
    assert m == Mutable([1], 3) and Mutable().items == []
    with pytest.raises(TypeError):
        hash(m)


def test_required_after_default_is_refused():
    with pytest.raises(TypeError, match="without a default"):

        @record
        class Bad:
            a: int = 0
            b: int


def test_inheritance_keeps_base_fields_first():
    @record
    class Base:
        a: int
        b: int = 2

    @record
    class Sub(Base):
        c: int = 3

    s = Sub(1)
    assert (s.a, s.b, s.c) == (1, 2, 3) and fields(Sub) == ("a", "b", "c")
