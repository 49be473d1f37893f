"""Row 9: an env whose ``step`` never returns raises ``TimeoutError`` naming the worker once the
sampler's ``step_timeout`` has passed, and every worker is gone within 5 s of the raise."""

from __future__ import annotations

import math
import time

import pytest

from lightning_rl.samplers import CpuSampler, GpuSampler, SamplerClosedError, SamplerStepTimeout
from tests.samplers.helpers import ObsAgent, alive, make_counter_env, make_hanging_env, wait_gone


@pytest.mark.parametrize("value", [0, -1.0, math.nan, math.inf, "2", True])
def test_step_timeout_must_be_a_positive_number(value):
    with pytest.raises(ValueError, match="step_timeout must be"):
        CpuSampler(make_counter_env, batch_T=2, batch_B=2, step_timeout=value)
    sampler = CpuSampler(make_counter_env, batch_T=2, batch_B=2, step_timeout=5)
    assert sampler.step_timeout == 5.0
    with pytest.raises(ValueError, match="step_timeout must be"):
        sampler.step_timeout = value
    sampler.step_timeout = 2
    assert sampler.step_timeout == 2.0
    sampler.step_timeout = None
    assert sampler.step_timeout is None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sampler_cls", [CpuSampler, GpuSampler])
def test_env_step_that_never_returns_raises_timeout_error_naming_the_worker(sampler_cls):
    # Env 3 (seed 13) lives in worker 1 and hangs in its second step.
    sampler = sampler_cls(make_hanging_env, env_kwargs={"hang_seed": 13}, batch_T=4, batch_B=4, n_workers=2,
                          step_timeout=2.0)
    sampler.initialize(ObsAgent(), seed=10)
    pids = sampler.worker_pids
    start = time.monotonic()
    message = (
        r"sampler worker 1 \(\w+-worker-1, pid \d+\): "
        r"step\(\) of training env 3 did not return within step_timeout=2.0 s"
    )
    with pytest.raises(TimeoutError, match=message) as info:
        sampler.obtain_samples(0)
    raised_at = time.monotonic()
    assert raised_at - start >= 2.0
    error = info.value
    assert isinstance(error, SamplerStepTimeout) and isinstance(error, RuntimeError)
    assert (error.worker, error.pid, error.env, error.env_call, error.timeout) == (1, pids[1], 3, "step()", 2.0)
    wait_gone(pids, timeout=5 - (time.monotonic() - raised_at))
    closed = r"the sampler is closed \(worker 1 timed out in step\(\) of training env 3\)"
    with pytest.raises(SamplerClosedError, match=closed):
        sampler.obtain_samples(1)
    sampler.shutdown()
    assert alive(pids) == []
