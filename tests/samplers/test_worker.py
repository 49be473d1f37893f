"""Worker supervision: failures surface as clear errors, and nothing is left behind."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from lightning_rl.samplers import AlternatingSampler, CpuSampler, GpuSampler
from tests.samplers.helpers import ObsAgent, alive, make_counter_env
from tests.signals import sigint_default_in_child

PARALLEL = [CpuSampler, GpuSampler, AlternatingSampler]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def make(sampler_cls, **env_kwargs):
    sampler = sampler_cls(
        make_counter_env,
        env_kwargs=env_kwargs or None,
        batch_T=5,
        batch_B=4,
        n_workers=2,
        eval_n_envs=2,
        eval_max_steps=50,
    )
    sampler.initialize(ObsAgent(alternating=sampler_cls is AlternatingSampler), seed=10)
    return sampler


@pytest.mark.parametrize("sampler_cls", PARALLEL)
def test_killed_worker_raises_naming_it_and_cleans_up(sampler_cls, no_leaks):
    sampler = make(sampler_cls)
    sampler.obtain_samples(0)
    pids = sampler.worker_pids
    os.kill(pids[1], signal.SIGKILL)
    start = time.monotonic()
    message = r"sampler worker 1 \(\w+-worker-1, pid \d+\) died unexpectedly with exit code -9 \(killed by SIGKILL\)"
    with pytest.raises(RuntimeError, match=message):
        sampler.obtain_samples(1)
    assert time.monotonic() - start < 5
    assert alive(pids) == []
    with pytest.raises(RuntimeError, match=r"the sampler is closed \(worker 1 died with exit code -9"):
        sampler.obtain_samples(2)


@pytest.mark.parametrize("sampler_cls", PARALLEL)
def test_exception_in_env_step_names_the_worker_and_the_exception(sampler_cls, no_leaks):
    # Env 3 (seed 13) lives in worker 1 and raises at its 7th step, in the second batch.
    sampler = make(sampler_cls, fail_at=7, fail_seed=13)
    sampler.obtain_samples(0)
    pids = sampler.worker_pids
    with pytest.raises(RuntimeError, match=r"sampler worker 1 .* failed with ValueError: boom at step 7") as info:
        sampler.obtain_samples(1)
    message = str(info.value)
    assert "Worker traceback" in message and 'raise make_error(self.fail_type, f"boom at step' in message
    assert alive(pids) == []


def test_exception_while_building_envs_raises_at_initialize(no_leaks):
    def env_factory(**kwargs):
        if os.getpid() != main_pid:
            raise OSError("no emulator in this worker")
        return make_counter_env()

    main_pid = os.getpid()
    sampler = CpuSampler(env_factory, batch_T=2, batch_B=2, n_workers=2)
    with pytest.raises(RuntimeError, match=r"sampler worker \d .* failed with OSError: no emulator in this worker"):
        sampler.initialize(ObsAgent())
    sampler.shutdown()


@pytest.mark.parametrize("sampler_cls", PARALLEL)
def test_exception_during_evaluation(sampler_cls, no_leaks):
    # Eval env 1 (seed 10 + 4 + 1 = 15) belongs to worker 1 and raises at its 3rd step.
    sampler = make(sampler_cls, fail_at=3, fail_seed=15)
    with pytest.raises(RuntimeError, match=r"sampler worker 1 .* failed with ValueError: boom at step 3"):
        sampler.evaluate_agent(0)


@pytest.mark.parametrize("sampler_cls", PARALLEL)
def test_shutdown_and_garbage_collection_leave_no_processes(sampler_cls, no_leaks):
    sampler = make(sampler_cls)
    sampler.obtain_samples(0)
    pids = sampler.worker_pids
    assert len(alive(pids)) == 2
    sampler.shutdown()
    sampler.shutdown()
    assert alive(pids) == []

    sampler = make(sampler_cls)
    pids = sampler.worker_pids
    del sampler
    gc.collect()
    assert alive(pids) == []


def test_interrupted_batch_makes_the_sampler_refuse_to_continue(no_leaks):
    class InterruptingAgent(ObsAgent):
        def step(self, *args):
            self.n = getattr(self, "n", 0) + 1
            if self.n == 3:
                raise KeyboardInterrupt
            return super().step(*args)

    sampler = GpuSampler(make_counter_env, batch_T=5, batch_B=2, n_workers=2)
    sampler.initialize(InterruptingAgent(), seed=0)
    with pytest.raises(KeyboardInterrupt):
        sampler.obtain_samples(0)
    with pytest.raises(RuntimeError, match="interrupted mid-batch"):
        sampler.obtain_samples(1)
    sampler.shutdown()


SCRIPT = textwrap.dedent(
    """
    import sys, time
    from lightning_rl.samplers import CpuSampler
    from tests.samplers.helpers import ObsAgent, make_counter_env

    sampler = CpuSampler(make_counter_env, batch_T=5, batch_B=2, n_workers=2)
    sampler.initialize(ObsAgent(), seed=0)
    print(" ".join(str(p) for p in sampler.worker_pids), flush=True)
    itr = 0
    while True:
        sampler.obtain_samples(itr)
        itr += 1
        time.sleep(0.01)
    """
)


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL])
def test_ctrl_c_or_death_of_the_main_process_ends_the_workers(how):
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=sigint_default_in_child,  # Ctrl-C reaches it also when the test run ignores SIGINT
    )
    try:
        line = proc.stdout.readline()
        pids = [int(p) for p in line.split()]
        assert len(pids) == 2, proc.stderr.read()
        time.sleep(0.2)
        proc.send_signal(how)
        proc.wait(timeout=10)
        # Ctrl-C: shut down at exit; SIGKILL: orphaned workers notice within about a second.
        deadline = time.monotonic() + 5
        while alive(pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert alive(pids) == []
        if how == signal.SIGINT:
            assert "KeyboardInterrupt" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()


class _LateQueue:
    """A report queue whose timed ``get`` times out just before the report lands: the report is
    there for the next ``get_nowait`` (what ``WorkerPool.check`` reads), and no later one comes."""

    def __init__(self, report):
        self.report = report
        self.timed_gets = 0

    def get(self, timeout=None):
        import queue

        self.timed_gets += 1
        if self.timed_gets > 20:  # a pool that waits on the queue again would wait forever
            raise AssertionError("recv() kept waiting on the queue for a report it had already taken")
        raise queue.Empty

    def get_nowait(self):
        import queue

        if self.report is None:
            raise queue.Empty
        report, self.report = self.report, None
        return report


def test_a_report_that_lands_between_a_timeout_and_the_liveness_check_is_returned():
    # The race behind a hang seen in CI (PPO Pong's CpuSampler waiting for "ready" forever, its
    # workers idle): recv()'s get() timed out just before a report landed, and check() drained
    # it. Two faults lost it: check() extended the pending list that poll() had just replaced,
    # and recv() went back to waiting on the queue without looking at the pending list.
    import types

    from lightning_rl.samplers.worker import WorkerPool, WorkerSpec

    queue = _LateQueue(("ready", 0, None))
    sync = types.SimpleNamespace(queue=queue)
    proc = types.SimpleNamespace(exitcode=None, pid=1)
    spec = WorkerSpec(index=0, name="w0", env_slice=slice(0, 1), eval_slice=slice(0, 0), acts=True, seed=0,
                      cpu=None)
    pool = WorkerPool([proc], [spec], sync)
    assert pool.gather("ready") == [None]
    assert queue.timed_gets == 1
