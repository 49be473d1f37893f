"""Indexing, assignment, helpers and pickling of namedarraytuples (class and schema forms)."""

from __future__ import annotations

import multiprocessing as mp
import pickle
from collections import namedtuple
from typing import Any

import numpy as np
import pytest
import torch

from lightning_rl.data import (
    AttrDict,
    NamedArrayTuple,
    NamedArrayTupleBase,
    NamedArrayTupleSchema,
    NamedArrayTupleSchema_like,
    NamedTupleSchema,
    is_namedarraytuple,
    is_namedarraytuple_class,
    is_namedtuple,
    is_namedtuple_class,
    namedarraytuple,
    namedarraytuple_like,
)

Pair = namedarraytuple("Pair", ["a", "b"])
Step = namedarraytuple("Step", "observation, reward, info")
PlainPoint = namedtuple("PlainPoint", ["x", "y"])


class Transition(NamedArrayTupleBase):
    """A class-syntax namedarraytuple, importable by a spawned child."""

    observation: Any
    reward: Any
    extra: Any


def make_step() -> Any:
    """Step with a numpy field, a torch field, and a nested Pair whose second field is None."""
    return Step(
        observation=np.arange(12.0).reshape(4, 3),
        reward=torch.arange(4, dtype=torch.float32),
        info=Pair(np.arange(4) * 10, None),
    )


def _spawn_echo(items: list, queue: Any) -> None:
    """Child side of the spawn test: use what arrived, then send results back."""
    cls_nat, schema_nat, like_nat = items
    cls_nat[1] = Transition(np.array([7.0, 8.0]), 9.0, None)
    queue.put([cls_nat, schema_nat[0], schema_nat.action.sum().item(), "obs" in schema_nat, like_nat[1:]])


# ----- indexing -----


def test_int_index_applies_to_every_field_and_keeps_none() -> None:
    s = make_step()
    row = s[2]
    assert type(row) is Step and type(row.info) is Pair
    np.testing.assert_array_equal(row.observation, [6.0, 7.0, 8.0])
    assert row.reward.item() == 2.0
    assert row.info.a == 20
    assert row.info.b is None


def test_slice_and_fancy_index_are_views_for_slices() -> None:
    s = make_step()
    part = s[1:3]
    np.testing.assert_array_equal(part.observation, [[3.0, 4.0, 5.0], [6.0, 7.0, 8.0]])
    np.testing.assert_array_equal(part.reward.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(part.info.a, [10, 20])
    part.observation[0, 0] = -1.0
    part.reward[1] = -2.0
    assert s.observation[1, 0] == -1.0 and s.reward[2].item() == -2.0

    picked = s[np.array([3, 0])]
    np.testing.assert_array_equal(picked.info.a, [30, 0])
    np.testing.assert_array_equal(picked.observation[:, 2], [11.0, 2.0])


def test_multi_dim_index() -> None:
    p = Pair(np.arange(24).reshape(2, 3, 4), torch.arange(6).reshape(2, 3))
    q = p[1, 2]
    np.testing.assert_array_equal(q.a, [20, 21, 22, 23])
    assert q.b.item() == 5
    r = p[:, 0]
    np.testing.assert_array_equal(r.a[:, 0], [0, 12])
    np.testing.assert_array_equal(r.b.numpy(), [0, 3])


def test_index_error_names_the_field() -> None:
    p = Pair(np.zeros(5), np.zeros(2))
    with pytest.raises(IndexError, match="'b'"):
        p[3]


# ----- assignment -----


def test_setitem_same_type_field_by_field_nested() -> None:
    s = make_step()
    s[1] = Step(np.array([-1.0, -2.0, -3.0]), 5.0, Pair(99, None))
    np.testing.assert_array_equal(s.observation[1], [-1.0, -2.0, -3.0])
    np.testing.assert_array_equal(s.observation[0], [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(s.reward.numpy(), [0.0, 5.0, 2.0, 3.0])
    np.testing.assert_array_equal(s.info.a, [0, 99, 20, 30])


def test_setitem_none_in_value_leaves_field_untouched() -> None:
    s = make_step()
    s[0] = Step(np.ones(3), None, None)
    np.testing.assert_array_equal(s.observation[0], [1.0, 1.0, 1.0])
    assert s.reward[0].item() == 0.0
    np.testing.assert_array_equal(s.info.a, [0, 10, 20, 30])


def test_setitem_scalar_broadcasts_to_all_fields_and_skips_none() -> None:
    s = make_step()
    s[2:] = 7
    np.testing.assert_array_equal(s.observation[2:], np.full((2, 3), 7.0))
    np.testing.assert_array_equal(s.reward.numpy(), [0.0, 1.0, 7.0, 7.0])
    np.testing.assert_array_equal(s.info.a, [0, 10, 7, 7])
    assert s.info.b is None


def test_setitem_array_broadcast() -> None:
    p = Pair(np.zeros((3, 2)), np.zeros((3, 2)))
    p[:] = np.array([1.0, 2.0])
    np.testing.assert_array_equal(p.a, [[1.0, 2.0]] * 3)
    np.testing.assert_array_equal(p.b, [[1.0, 2.0]] * 3)


def test_setitem_bad_shape_names_the_field() -> None:
    p = Pair(np.zeros((3, 2)), np.zeros(3))
    with pytest.raises(ValueError, match="'a'"):
        p[0] = Pair(np.zeros(5), 1.0)


# ----- tuple-like API -----


def test_contains_get_items_replace_asdict() -> None:
    s = make_step()
    assert "reward" in s and "info" in s
    assert "a" not in s and "rewards" not in s
    assert s.get(1) is s.reward
    assert s.get("observation") is s.observation
    assert [name for name, _ in s.items()] == ["observation", "reward", "info"]
    assert all(v is getattr(s, k) for k, v in s.items())
    r = s._replace(reward=None)
    assert type(r) is Step and r.reward is None and r.observation is s.observation
    d = s._asdict()
    assert list(d) == ["observation", "reward", "info"] and d["info"] is s.info
    assert Step._fields == ("observation", "reward", "info")


def test_reserved_and_invalid_field_names() -> None:
    with pytest.raises(ValueError, match="reserved"):
        namedarraytuple("Bad", ["get", "x"])
    with pytest.raises(ValueError, match="reserved"):
        namedarraytuple("Bad", ["_x"])
    with pytest.raises(ValueError, match="not a valid identifier"):
        namedarraytuple("Bad", ["a-b"])
    with pytest.raises(ValueError, match="duplicate"):
        namedarraytuple("Bad", ["a", "a"])


# ----- class syntax -----


def test_class_syntax_declares_fields_and_behaves_like_namedarraytuple() -> None:
    assert Transition._fields == ("observation", "reward", "extra")
    assert is_namedarraytuple_class(Transition)
    assert Transition.__module__ == __name__ and Transition.__qualname__ == "Transition"
    assert "class-syntax" in Transition.__doc__
    t = Transition(np.zeros((2, 3)), np.array([1.0, 2.0]), None)
    t[1] = 4.0
    np.testing.assert_array_equal(t.observation[1], [4.0, 4.0, 4.0])
    assert t[1].reward == 4.0 and t[1].extra is None


def test_class_syntax_keeps_methods_and_properties() -> None:
    class Span(NamedArrayTupleBase):
        start: Any
        stop: Any

        def length(self) -> Any:
            return self.stop - self.start

        @property
        def doubled(self) -> Any:
            return Span(2 * self.start, 2 * self.stop)

        def own_class(self) -> type:
            return __class__

    s = Span(np.array([0, 1, 5]), np.array([2, 4, 9]))
    np.testing.assert_array_equal(s.length(), [2, 3, 4])
    assert s[1:].length().tolist() == [3, 4]
    assert s[2].doubled == (10, 18)
    assert s.own_class() is Span


def test_class_syntax_field_default_raises() -> None:
    with pytest.raises(ValueError, match="field 'b' has a default"):

        class WithDefault(NamedArrayTupleBase):
            a: Any
            b: Any = None


def test_class_syntax_without_fields_raises() -> None:
    with pytest.raises(ValueError, match="annotated fields"):

        class Empty(NamedArrayTupleBase):
            pass


# ----- schema form -----


def test_schema_form_indexing_assignment_and_api() -> None:
    Obs = NamedArrayTupleSchema("Obs", ["pos", "vel"])
    Sample = NamedArrayTupleSchema("Sample", ["obs", "action", "none"])
    s = Sample(Obs(np.arange(6.0).reshape(3, 2), np.zeros(3)), torch.tensor([1, 2, 3]), None)
    assert isinstance(s, NamedArrayTuple) and s._typename == "Sample"
    row = s[1]
    np.testing.assert_array_equal(row.obs.pos, [2.0, 3.0])
    assert row.action.item() == 2 and row.none is None
    s[2] = Sample(Obs(np.array([-1.0, -1.0]), 5.0), 9, None)
    np.testing.assert_array_equal(s.obs.pos[2], [-1.0, -1.0])
    assert s.obs.vel[2] == 5.0 and s.action[2].item() == 9
    s[0] = 0
    np.testing.assert_array_equal(s.obs.pos[0], [0.0, 0.0])
    assert "obs" in s and "pos" not in s
    assert s.get("action") is s.action and s.get(0) is s.obs
    assert [k for k, _ in s.items()] == ["obs", "action", "none"]
    assert s._replace(none=1).none == 1
    assert s._asdict()["action"] is s.action
    with pytest.raises(AttributeError):
        s.action = 1
    with pytest.raises(AttributeError, match="no field"):
        s.missing  # noqa: B018 - the attribute access is what raises


def test_schema_constructor_errors_and_equality() -> None:
    S = NamedArrayTupleSchema("S", ["a", "b"])
    assert S(1, b=2) == (1, 2)
    with pytest.raises(TypeError, match="missing"):
        S(1)
    with pytest.raises(TypeError, match="unexpected"):
        S(1, c=2)
    assert S == NamedArrayTupleSchema("S", ["a", "b"])
    assert S != NamedArrayTupleSchema("S", ["a", "c"])
    assert NamedArrayTupleSchema_like(Pair) == NamedArrayTupleSchema("Pair", ["a", "b"])


# ----- helpers -----


def test_is_namedtuple_helpers() -> None:
    plain = PlainPoint(1, 2)
    schema_plain = NamedTupleSchema("SP", ["x"])(1)
    schema_nat = NamedArrayTupleSchema("SN", ["x"])(np.zeros(1))
    nat = Pair(np.zeros(1), None)
    assert is_namedtuple(plain) and is_namedtuple(schema_plain)
    assert not is_namedtuple(nat) and not is_namedtuple(schema_nat) and not is_namedtuple((1, 2))
    assert is_namedarraytuple(nat) and is_namedarraytuple(schema_nat)
    assert not is_namedarraytuple(plain) and not is_namedarraytuple(schema_plain)
    assert is_namedtuple_class(PlainPoint) and not is_namedtuple_class(Pair)
    assert is_namedarraytuple_class(Pair) and is_namedarraytuple_class(Transition)
    assert not is_namedarraytuple_class(PlainPoint) and not is_namedarraytuple_class(tuple)


def test_namedarraytuple_like() -> None:
    cls = namedarraytuple_like(PlainPoint)
    assert is_namedarraytuple_class(cls) and cls._fields == ("x", "y") and cls.__name__ == "PlainPoint"
    p = cls(np.arange(3), np.arange(3) * 2)
    assert p[2] == (2, 4)
    # One cached class per namedtuple, so buffers built from one example share their type.
    assert namedarraytuple_like(PlainPoint(1, 2)) is cls
    assert namedarraytuple_like(Pair) is Pair
    assert namedarraytuple_like(Pair(1, 2)) is Pair
    assert namedarraytuple_like(PlainPoint, classname_suffix=True).__name__ == "PlainPoint_nat"
    schema = namedarraytuple_like(NamedTupleSchema("T", ["u"]))
    assert schema == NamedArrayTupleSchema("T", ["u"])
    sn = NamedArrayTupleSchema("SN", ["x"])
    assert namedarraytuple_like(sn(1)) is sn
    with pytest.raises(TypeError, match="not a namedtuple"):
        namedarraytuple_like(int)


# ----- pickling -----


def test_pickle_class_form_schema_form_and_nested() -> None:
    s = make_step()
    s2 = pickle.loads(pickle.dumps(s))
    assert type(s2) is Step and type(s2.info) is Pair and s2.info.b is None
    np.testing.assert_array_equal(s2.observation, s.observation)
    assert torch.equal(s2.reward, s.reward)

    t = pickle.loads(pickle.dumps(Transition(np.ones(2), 3.0, None)))
    assert type(t) is Transition and t.reward == 3.0

    Sch = NamedArrayTupleSchema("Dyn", ["u", "v"])
    d = pickle.loads(pickle.dumps(Sch(np.arange(3), None)))
    assert isinstance(d, NamedArrayTuple) and d._schema == Sch and d.v is None
    np.testing.assert_array_equal(d[1:].u, [1, 2])

    # The class made from a namedtuple is not importable under its name; it pickles by structure.
    Local = namedtuple("Local", ["x", "y"])
    like = namedarraytuple_like(Local)
    e = pickle.loads(pickle.dumps(like(np.arange(2), None)))
    assert type(e) is like and e.y is None and e.x.tolist() == [0, 1]


def test_pickle_round_trip_through_spawned_process() -> None:
    # The schema and the namedtuple are built inside the test: the child has nothing to import.
    Dyn = NamedArrayTupleSchema("Dyn", ["obs", "action"])
    LocalInfo = namedtuple("LocalInfo", ["lives", "score"])
    like_nat = namedarraytuple_like(LocalInfo)(np.array([3, 2, 1]), None)
    cls_nat = Transition(np.zeros((3, 2)), np.zeros(3), None)
    schema_nat = Dyn(np.arange(6.0).reshape(3, 2), np.array([1, 2, 3]))
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_spawn_echo, args=([cls_nat, schema_nat, like_nat], queue))
    proc.start()
    try:
        back_cls, back_row, action_sum, has_obs, back_like = queue.get(timeout=120)
    finally:
        proc.join(timeout=60)
    assert proc.exitcode == 0
    assert type(back_cls) is Transition and back_cls.extra is None
    np.testing.assert_array_equal(back_cls.observation, [[0.0, 0.0], [7.0, 8.0], [0.0, 0.0]])
    np.testing.assert_array_equal(back_cls.reward, [0.0, 9.0, 0.0])
    assert isinstance(back_row, NamedArrayTuple) and back_row._schema == Dyn
    np.testing.assert_array_equal(back_row.obs, [0.0, 1.0])
    assert back_row.action == 1
    assert action_sum == 6 and has_obs
    assert type(back_like) is type(like_nat) and back_like.score is None
    assert back_like.lives.tolist() == [2, 1]


# ----- AttrDict -----


def test_attrdict_attribute_access_and_copy_semantics() -> None:
    d = AttrDict(lr=0.1, sub=AttrDict(gamma=0.99, arr=[1, 2]))
    assert d.lr == 0.1 and d["lr"] == 0.1
    d.new = 5
    assert d["new"] == 5
    d["other"] = 6
    assert d.other == 6
    assert d.sub.gamma == 0.99
    with pytest.raises(AttributeError):
        d.missing  # noqa: B018 - the attribute access is what raises

    c = d.copy()
    assert type(c) is AttrDict and type(c.sub) is AttrDict
    c.sub.gamma = 0.5
    c.lr = 1.0
    assert d.sub.gamma == 0.99 and d.lr == 0.1
    # Non-AttrDict values are shared, not deep-copied.
    assert c.sub.arr is d.sub.arr

    p = pickle.loads(pickle.dumps(d))
    assert type(p) is AttrDict and p.sub.gamma == 0.99 and p.lr == 0.1
