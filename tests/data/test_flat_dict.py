"""digideep trajectory-dict helpers against the seed's documented examples, and nat <-> flat dict views."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np
import pytest
import torch

from lightning_rl.data import (
    NamedArrayTuple,
    NamedArrayTupleSchema,
    buffer_from_example,
    complete_dict_of_list,
    convert_time_to_batch_major,
    dict_of_lists_to_list_of_dicts,
    extract_keywise,
    flat_dict_to_nat,
    flatten_dict,
    join_keys,
    list_of_dicts_to_flattened_dict_of_lists,
    namedarraytuple,
    nat_to_flat_dict,
    nonify,
    unflatten_dict,
    update_dict_of_lists,
)

Samples = namedarraytuple("Samples", ["agent", "env"])
AgentSamples = namedarraytuple("AgentSamples", ["action", "prev_action", "agent_info"])
AgentInfo = namedarraytuple("AgentInfo", ["value", "prev_rnn_state"])
EnvSamples = namedarraytuple("EnvSamples", ["observation", "reward", "env_info"])
EnvInfo = namedtuple("EnvInfo", ["truncated"])


def make_buffer(T: int = 3, B: int = 2) -> Any:
    """A [T, B] sample buffer with nested nats, a plain namedtuple leaf group and None fields."""
    example = Samples(
        agent=AgentSamples(np.int64(0), np.int64(0), AgentInfo(np.float32(0), None)),
        env=EnvSamples(np.zeros(4, np.float32), np.float32(0), EnvInfo(False)),
    )
    buf = buffer_from_example(example, (T, B))
    buf.env.observation[:] = np.arange(T * B * 4).reshape(T, B, 4)
    buf.agent.action[:] = np.arange(T * B).reshape(T, B)
    buf.env.reward[:] = 0.5
    return buf


# ----- the seed's examples (digideep.environment.data_helpers) -----


def test_flatten_dict_seed_example() -> None:
    nested = {"a": 1, "b": {"c": 1, "d": {"e": 2, "f": 3}}}
    assert flatten_dict(nested) == {"/a": 1, "/b/c": 1, "/b/d/e": 2, "/b/d/f": 3}


def test_unflatten_dict_seed_example_and_round_trip() -> None:
    flat = {"/a": 1, "/b/c": 1, "/b/d/e": 2, "/b/d/f": 3}
    assert unflatten_dict(flat) == {"a": 1, "b": {"c": 1, "d": {"e": 2, "f": 3}}}
    assert flatten_dict(unflatten_dict(flat)) == flat


def test_flatten_dict_agents_layout_sep_and_prefix() -> None:
    x = np.zeros(2)
    flat = flatten_dict({"agents": {"a": {"actions": x}}})
    assert list(flat) == ["/agents/a/actions"] and flat["/agents/a/actions"] is x
    assert unflatten_dict(flat)["agents"]["a"]["actions"] is x
    assert flatten_dict({"a": {"b": 1}}, sep=".", prefix="root") == {"root.a.b": 1}
    assert unflatten_dict({".a.b": 1}, sep=".") == {"a": {"b": 1}}


def test_unflatten_dict_errors() -> None:
    with pytest.raises(ValueError, match="must start with"):
        unflatten_dict({"a/b": 1})
    with pytest.raises(ValueError, match="runs through the leaf"):
        unflatten_dict({"/a": 1, "/a/b": 2})


def test_join_keys_seed_example() -> None:
    assert join_keys("/agent1", "artifcats") == "/agent1/artifcats"
    assert join_keys("/agent1/", "/artifacts") == "/agent1/artifacts"
    assert join_keys("", "a") == "/a"
    assert join_keys("a", "b", sep=".") == "a.b"


def test_nonify_seed_example() -> None:
    assert nonify([(1, 2, 3), (1, 2, 4, 5, [-1, -2])]) == [
        (None, None, None),
        (None, None, None, None, [None, None]),
    ]
    out = nonify([np.ones((2, 2), np.float32), np.ones(3, np.int64), 5])
    assert out[0].shape == (2, 2) and out[0].dtype == np.float32 and np.isnan(out[0]).all()
    assert out[1].dtype == np.float64 and np.isnan(out[1]).all()
    assert out[2] is None
    with pytest.raises(ValueError, match="must not contain dicts"):
        nonify([{"a": 1}])


def test_update_dict_of_lists_seed_example() -> None:
    dic = {"a": [1, 2, 3], "c": [[-1, -2], [-3, -4]]}
    out = update_dict_of_lists(dic, {"a": 4, "b": [1, 2, 3]}, index=3)
    assert out is dic
    assert dic == {
        "a": [1, 2, 3, 4],
        "b": [[None, None, None], [None, None, None], [None, None, None], [1, 2, 3]],
        "c": [[-1, -2], [-3, -4]],
    }
    # Placeholders are separate objects per step.
    assert dic["b"][0] is not dic["b"][1]
    with pytest.raises(ValueError, match="index must be >= 0, got -1"):
        update_dict_of_lists({}, {"a": 1}, index=-1)


def test_complete_dict_of_list_seed_example() -> None:
    dic = {
        "a": [1, 2, 3, 4],
        "b": [[None, None, None], [None, None, None], [None, None, None], [1, 2, 3]],
        "c": [[-1, -2], [-3, -4]],
    }
    assert complete_dict_of_list(dic, 4) is dic
    assert dic == {
        "a": [1, 2, 3, 4],
        "b": [[None, None, None], [None, None, None], [None, None, None], [1, 2, 3]],
        "c": [[-1, -2], [-3, -4], [None, None], [None, None]],
    }
    with pytest.raises(ValueError, match=r"dic\['x'\] must be a list"):
        complete_dict_of_list({"x": (1, 2)}, 3)
    with pytest.raises(ValueError, match="dic must be a dict"):
        complete_dict_of_list([1], 3)


def test_list_of_dicts_to_flattened_dict_of_lists_seed_example() -> None:
    steps = [
        {"a": {"f": [1, 2], "g": [7, 8]}, "b": [-1, -2], "info": [10, 20]},
        {"a": {"f": [3, 4], "g": [9, 8]}, "b": [-3, -4], "step": [80, 90]},
    ]
    assert list_of_dicts_to_flattened_dict_of_lists(steps, 2) == {
        "/a/f": [[1, 2], [3, 4]],
        "/a/g": [[7, 8], [9, 8]],
        "/b": [[-1, -2], [-3, -4]],
        "/info": [[10, 20], [None, None]],
        "/step": [[None, None], [80, 90]],
    }
    already = {"/x": [1]}
    assert list_of_dicts_to_flattened_dict_of_lists(already, 5) is already


def test_convert_time_to_batch_major_seed_example() -> None:
    episode = {
        "key1": [[[1], [2]], [[3], [4]], [[5], [6]], [[7], [8]], [[9], [10]]],
        "key2": [[[1, 2], [3, 4]], [[5, 6], [7, 8]], [[9, 10], [11, 12]], [[13, 14], [15, 16]], [[17, 18], [19, 20]]],
    }
    out = convert_time_to_batch_major(episode)
    expected1 = np.array([[[1.0], [3.0], [5.0], [7.0], [9.0]], [[2.0], [4.0], [6.0], [8.0], [10.0]]], dtype=np.float32)
    expected2 = np.array(
        [
            [[1.0, 2.0], [5.0, 6.0], [9.0, 10.0], [13.0, 14.0], [17.0, 18.0]],
            [[3.0, 4.0], [7.0, 8.0], [11.0, 12.0], [15.0, 16.0], [19.0, 20.0]],
        ],
        dtype=np.float32,
    )
    assert list(out) == ["key1", "key2"]
    assert out["key1"].dtype == np.float32 and out["key2"].dtype == np.float32
    np.testing.assert_array_equal(out["key1"], expected1)
    np.testing.assert_array_equal(out["key2"], expected2)


def test_convert_time_to_batch_major_copies_and_checks_ndim() -> None:
    src = np.zeros((3, 2), np.float32)
    out = convert_time_to_batch_major({"/r": src})
    out["/r"][0, 0] = 1.0
    assert src[0, 0] == 0.0 and out["/r"].shape == (2, 3)
    with pytest.raises(ValueError, match=r"episode\['/r'\] has shape \(3,\)"):
        convert_time_to_batch_major({"/r": [1, 2, 3]})


def test_extract_keywise_seed_example() -> None:
    dic = {"agent1": {"a": [1, 2], "b": {"c": 2, "d": 4}}, "agent2": {"a": [3, 4], "b": {"c": 9, "d": 7}}}
    assert extract_keywise(dic, "a") == {"agent1": [1, 2], "agent2": [3, 4]}
    assert extract_keywise(dic, "b") == {"agent1": {"c": 2, "d": 4}, "agent2": {"c": 9, "d": 7}}


def test_dict_of_lists_to_list_of_dicts_seed_example() -> None:
    dic = {"a1": ([1, 2], [3, 4], [5, 6]), "a2": ([9], [8], [7])}
    assert dict_of_lists_to_list_of_dicts(dic, 3) == [
        {"a1": [1, 2], "a2": [9]},
        {"a1": [3, 4], "a2": [8]},
        {"a1": [5, 6], "a2": [7]},
    ]
    with pytest.raises(ValueError, match=r"num=4 but dic\['a1'\] has 3"):
        dict_of_lists_to_list_of_dicts(dic, 4)
    with pytest.raises(ValueError, match="num must be >= 0, got -1"):
        dict_of_lists_to_list_of_dicts(dic, -1)


# ----- namedarraytuple <-> flat dict -----


def test_nat_to_flat_dict_keys_are_views() -> None:
    buf = make_buffer()
    flat = nat_to_flat_dict(buf)
    assert list(flat) == [
        "/agent/action",
        "/agent/prev_action",
        "/agent/agent_info/value",
        "/env/observation",
        "/env/reward",
        "/env/env_info/truncated",
    ]
    assert flat["/env/observation"] is buf.env.observation
    assert flat["/agent/agent_info/value"] is buf.agent.agent_info.value
    flat["/env/reward"][1, 1] = -3.0
    assert buf.env.reward[1, 1] == -3.0
    buf.env.env_info.truncated[2, 0] = True
    assert flat["/env/env_info/truncated"][2, 0]


def test_nat_flat_dict_round_trip_exact() -> None:
    buf = make_buffer()
    back = flat_dict_to_nat(nat_to_flat_dict(buf), like=buf)
    assert type(back) is Samples and type(back.agent.agent_info) is AgentInfo
    assert type(back.env.env_info) is type(buf.env.env_info)
    assert back.agent.agent_info.prev_rnn_state is None
    for (_, a), (_, b) in zip(nat_to_flat_dict(back).items(), nat_to_flat_dict(buf).items(), strict=False):
        assert a is b


def test_flat_dict_to_nat_rebuilds_from_new_leaves() -> None:
    buf = make_buffer(T=3, B=2)
    # Batch-major copies, as digideep stores them: [B, T, ...].
    batch_major = {k: np.swapaxes(v, 0, 1) for k, v in nat_to_flat_dict(buf).items()}
    bm = flat_dict_to_nat(batch_major, like=buf)
    np.testing.assert_array_equal(bm.env.observation[1, 2], buf.env.observation[2, 1])
    assert bm.agent.action[1].tolist() == [1, 3, 5]
    assert bm[0, 2].agent.action == buf[2, 0].agent.action


def test_nat_flat_dict_prefix_schema_form_and_torch() -> None:
    Step = NamedArrayTupleSchema("Step", ["actions", "hidden_state", "artifacts"])
    Artifacts = NamedArrayTupleSchema("Artifacts", ["value", "logp"])
    step = Step(torch.zeros(4, 2), None, Artifacts(torch.ones(4), torch.full((4,), -1.0)))
    flat = nat_to_flat_dict(step, prefix="/agents/a")
    assert list(flat) == ["/agents/a/actions", "/agents/a/artifacts/value", "/agents/a/artifacts/logp"]
    trajectory = {"/observations": np.zeros((4, 3)), **flat}
    nested = unflatten_dict(trajectory)
    assert nested["agents"]["a"]["artifacts"]["logp"] is step.artifacts.logp
    back = flat_dict_to_nat(trajectory, like=step, prefix="/agents/a")
    assert isinstance(back, NamedArrayTuple) and back._schema == Step and back.hidden_state is None
    assert back.artifacts._schema == Artifacts and back.artifacts.value is step.artifacts.value
    assert back[1:3].artifacts.logp.tolist() == [-1.0, -1.0]


def test_flat_dict_to_nat_errors() -> None:
    buf = make_buffer()
    flat = nat_to_flat_dict(buf)
    missing = {k: v for k, v in flat.items() if k != "/env/reward"}
    with pytest.raises(ValueError, match="no key '/env/reward' for field 'reward'"):
        flat_dict_to_nat(missing, like=buf)
    with pytest.raises(ValueError, match="/env/extra"):
        flat_dict_to_nat({**flat, "/env/extra": np.zeros(1)}, like=buf)
    with pytest.raises(ValueError, match="must be a namedtuple or namedarraytuple"):
        nat_to_flat_dict({"a": 1})
    with pytest.raises(ValueError, match="must be a namedtuple or namedarraytuple"):
        flat_dict_to_nat(flat, like=np.zeros(2))
