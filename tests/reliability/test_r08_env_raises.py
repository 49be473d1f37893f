"""Row 8: an env that raises in ``step``/``reset`` surfaces as its own exception type, naming the
worker and the env and carrying the worker's traceback; the sampler is then closed, not half-closed.

No restart policy exists: the first failure stops the sampler.
"""

from __future__ import annotations

import pickle
import time

import pytest

from lightning_rl.samplers import (
    AlternatingSampler,
    CpuSampler,
    GpuSampler,
    SamplerClosedError,
    SamplerWorkerError,
)
from lightning_rl.samplers.errors import remote_exception
from tests.samplers.helpers import ObsAgent, TwoArgError, alive, leak_check, make_counter_env

PARALLEL = [CpuSampler, GpuSampler, AlternatingSampler]


@pytest.fixture
def no_leaks():
    """No child process and no /dev/shm entry outlives the test."""
    with leak_check():
        yield


def make(sampler_cls, **env_kwargs):
    sampler = sampler_cls(
        make_counter_env, env_kwargs=env_kwargs, batch_T=5, batch_B=4, n_workers=2, eval_n_envs=2, eval_max_steps=5
    )
    sampler.initialize(ObsAgent(alternating=sampler_cls is AlternatingSampler), seed=10)
    return sampler


@pytest.mark.parametrize("sampler_cls", PARALLEL)
def test_value_error_in_step_is_raised_as_value_error_naming_worker_env_and_traceback(sampler_cls, no_leaks):
    # Env 3 (seed 13) belongs to worker 1 and raises at its 7th step, in the second batch.
    sampler = make(sampler_cls, fail_at=7, fail_seed=13)
    sampler.obtain_samples(0)
    pids = sampler.worker_pids
    start = time.monotonic()
    with pytest.raises(ValueError, match=r"sampler worker 1 .* stepping training env 3 failed with ValueError") as info:
        sampler.obtain_samples(1)
    assert time.monotonic() - start < 5
    error = info.value
    assert isinstance(error, SamplerWorkerError) and isinstance(error, RuntimeError)
    assert (error.worker, error.pid, error.env, error.env_kind, error.env_call) == (1, pids[1], 3, "training", "step()")
    assert error.remote_type == "builtins.ValueError"
    assert "boom at step 7" in str(error)
    assert 'raise make_error(self.fail_type, f"boom at step' in error.remote_traceback
    assert "Worker traceback" in str(error) and "ValueError: boom at step 7" in error.remote_traceback
    assert alive(pids) == []
    # Closed, not half-closed: every later call says so, and shutdown may be called again.
    with pytest.raises(SamplerClosedError, match=r"the sampler is closed \(worker 1 failed with ValueError: boom"):
        sampler.obtain_samples(2)
    with pytest.raises(SamplerClosedError, match="the sampler is closed"):
        sampler.evaluate_agent(2)
    sampler.shutdown()
    sampler.shutdown()
    assert sampler.closed


def test_value_error_in_reset_names_the_reset(no_leaks):
    # Env 2 (seed 12, worker 1) raises in its second reset: after its first 3-step episode.
    sampler = make(CpuSampler, fail_reset_at=2, fail_seed=12)
    with pytest.raises(ValueError, match=r"sampler worker 1 .* resetting training env 2 failed with ValueError"):
        sampler.obtain_samples(0)
    assert sampler.closed


def test_value_error_in_an_eval_env_names_the_eval_env(no_leaks):
    # Eval env 1 (seed 10 + 4 + 1 = 15) belongs to worker 1.
    sampler = make(GpuSampler, fail_at=3, fail_seed=15)
    with pytest.raises(ValueError, match=r"sampler worker 1 .* stepping eval env 1 failed with ValueError") as info:
        sampler.evaluate_agent(0)
    assert (info.value.env, info.value.env_kind) == (1, "eval")


@pytest.mark.parametrize(
    "fail_type, message, remote_type",
    [
        # Needs two constructor arguments.
        ("TwoArgError", r"\(7, 'boom at step 2'\)", "tests.samplers.helpers.TwoArgError"),
        # Defined in a function: cannot be found by name in the main process.
        ("LocalError", "boom at step 2", "tests.samplers.helpers.make_error.<locals>.LocalError"),
    ],
)
def test_exception_that_cannot_be_rebuilt_keeps_its_name(fail_type, message, remote_type, no_leaks):
    sampler = make(CpuSampler, fail_at=2, fail_seed=13, fail_type=fail_type)
    with pytest.raises(SamplerWorkerError, match=rf"failed with {fail_type}: {message}") as info:
        sampler.obtain_samples(0)
    assert type(info.value).__name__ == fail_type and not isinstance(info.value, TwoArgError)
    assert info.value.remote_type == remote_type


@pytest.mark.parametrize(
    "cls",
    [ValueError, KeyError, OSError, TimeoutError, TwoArgError, KeyboardInterrupt, SystemExit, StopIteration],
)
def test_remote_exception_type(cls):
    error = remote_exception(f"{cls.__module__}.{cls.__qualname__}", pickle.dumps(cls), "worker 1 failed")
    assert isinstance(error, SamplerWorkerError)
    if cls in (ValueError, KeyError, OSError, TimeoutError):
        assert isinstance(error, cls) and type(error).__name__ == cls.__name__
        assert type(error) is type(remote_exception(cls.__qualname__, pickle.dumps(cls), "again"))
        # Pickles as the plain original exception (e.g. to send it to another process).
        assert type(pickle.loads(pickle.dumps(error))) is cls
    else:
        # Not built from one message (TwoArgError), or would change the main process's control
        # flow (KeyboardInterrupt, SystemExit, StopIteration): a SamplerWorkerError of that name.
        assert not isinstance(error, cls) and type(error).__name__ == cls.__name__
        assert type(pickle.loads(pickle.dumps(error))) is SamplerWorkerError


def test_remote_exception_of_an_unpicklable_class_keeps_its_name():
    error = remote_exception("tests.samplers.helpers.make_error.<locals>.LocalError", None, "worker 0 failed")
    assert type(error).__name__ == "LocalError" and isinstance(error, SamplerWorkerError)
