"""On-policy data: one fresh ``[T, B]`` rollout per item, returns and advantages computed once.

The dataset is the only place that knows the on-policy schedule: every ``next()``
syncs the agent's weights to the sampler, collects one batch with them, computes GAE targets
(bootstrapping through time-limit truncations) and yields an :class:`OnPolicyBatch`. The
algorithm's ``training_step`` then runs its epochs over :func:`iterate_minibatches` of that
batch, so a rollout is never collected with stale weights: the dataset has a ``__len__``, so
Lightning does not fetch an item ahead (without a length it prefetches one to find the last, which
would collect the next rollout before this one's ``training_step`` has updated the weights).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from lightning_rl.agents.base import AgentInputs, BaseAgent
from lightning_rl.data.arrays import iterate_mb_idxs
from lightning_rl.data.buffers import buffer_func, torchify_buffer
from lightning_rl.data.namedarraytuple import NamedArrayTupleBase
from lightning_rl.datasets.base import SamplerDataset
from lightning_rl.datasets.state import TrainState
from lightning_rl.returns import generalized_advantage_estimation_tl, valid_from_done


class OnPolicyBatch(NamedArrayTupleBase):
    """One rollout ready for policy-gradient losses; every field has leading dims ``[T, B]``.

    ``init_rnn_state`` has leading ``[N, B]`` (layers, envs) and is ``None`` for feed-forward
    agents; ``valid`` (float 0/1) masks time-limit truncation steps and, for recurrent agents,
    the padding after a done.
    """

    agent_inputs: Any
    action: Any
    return_: Any
    advantage: Any
    valid: Any
    old_dist_info: Any
    old_value: Any
    init_rnn_state: Any


class OnPolicyDataset(SamplerDataset):
    """Collects rollouts with the current agent and yields them as :class:`OnPolicyBatch` es.

    Args:
        sampler: An initialized sampler (``obtain_samples(itr)``).
        agent: The agent the sampler acts with; its shared weights are synced before collecting.
        state: Counters shared with the LightningModule (``env_steps``, ``itr``), checkpointed there.
        iterations_per_epoch: Rollouts per Lightning epoch (the dataset's ``__len__``).
        discount: Discount factor gamma.
        gae_lambda: GAE lambda (1 gives Monte-Carlo returns with bootstrap).
        normalize_advantage: Standardize advantages over the whole rollout.
        recurrent: The agent keeps an RNN state; minibatches are then whole env sequences.
    """

    def __init__(
        self,
        sampler: Any,
        agent: BaseAgent,
        state: TrainState,
        iterations_per_epoch: int,
        discount: float,
        gae_lambda: float,
        normalize_advantage: bool,
        recurrent: bool = False,
    ) -> None:
        super().__init__(sampler, agent, state, iterations_per_epoch)
        self.discount = discount
        self.gae_lambda = gae_lambda
        self.normalize_advantage = normalize_advantage
        self.recurrent = recurrent

    def collect(self) -> OnPolicyBatch:
        """Collect one rollout with the newest weights and compute its training targets."""
        with self.profiler.profile("sampler"):
            self.agent.sync_shared_memory()
            samples = self.obtain()
            with self.profiler.profile("sampler/targets"):
                return self.process_samples(samples)

    def process_samples(self, samples: Any) -> OnPolicyBatch:
        """GAE advantages and returns (timeout-aware), then the batch as CPU tensors."""
        s = samples
        reward = np.asarray(s.env.reward, dtype=np.float32)
        done = np.asarray(s.env.done, dtype=bool)
        truncated = np.asarray(s.env.truncated, dtype=bool)
        value = np.asarray(s.agent.agent_info.value, dtype=np.float32)
        bootstrap_value = np.asarray(s.agent.bootstrap_value, dtype=np.float32)
        check_finite("reward", reward)
        # Truncated episodes bootstrap; only true terminations end the return at zero.
        advantage, return_ = generalized_advantage_estimation_tl(
            reward, value, done, bootstrap_value, self.discount, self.gae_lambda, truncated
        )
        # A truncated step has no next value in the buffer: the approximate timeout form gives it
        # zero advantage, so it is left out of the loss instead of pulling values toward V(s_t).
        valid = (~truncated).astype(np.float32)
        if self.recurrent:
            # Wait-reset collection: steps after an env's done are padding, not data.
            valid *= valid_from_done(done.astype(np.float32))
        if self.normalize_advantage:
            adv = advantage[valid > 0]
            if adv.size:  # a rollout without a valid step (all truncated) keeps its zero advantages
                advantage = (advantage - adv.mean()) / (adv.std() + 1e-8)
        agent_info = s.agent.agent_info
        init_rnn_state = None
        if self.recurrent:
            # [N, B, H] per RNN state leaf, taken at the first step of the rollout.
            init_rnn_state = buffer_func(agent_info.prev_rnn_state, lambda x: np.ascontiguousarray(x[0].swapaxes(0, 1)))
        batch = OnPolicyBatch(
            agent_inputs=AgentInputs(s.env.observation, s.agent.prev_action, s.env.prev_reward),
            action=s.agent.action,
            return_=return_.astype(np.float32),
            advantage=advantage.astype(np.float32),
            valid=valid,
            old_dist_info=agent_info.dist_info,
            old_value=value,
            init_rnn_state=init_rnn_state,
        )
        # Copy out of the sampler's buffer: it is overwritten by the next collection.
        return torchify_buffer(buffer_func(batch, np.array))


def iterate_minibatches(
    batch: OnPolicyBatch, n_minibatches: int, recurrent: bool, generator: np.random.Generator
) -> Iterator[OnPolicyBatch]:
    """Shuffled minibatches of a rollout, as ``[T*B/n]`` samples or ``[T, B/n]`` sequences.

    With one minibatch the whole rollout comes back unshuffled (flattened unless recurrent).

    Args:
        batch: ``[T, B]`` rollout.
        n_minibatches: Number of minibatches per pass; must divide the sample (or env) count.
        recurrent: Split over envs and keep whole sequences with their initial RNN state.
        generator: Source of the shuffle (checkpointed by the module for exact resume).
    """
    T, B = batch.advantage.shape[:2]
    if n_minibatches == 1 and recurrent:
        # One minibatch is the whole rollout, and a mean over it does not depend on the order:
        # no shuffle (and no gather of every field) on each of the epochs.
        yield batch
        return
    if recurrent:
        if B % n_minibatches:
            raise ValueError(f"minibatches={n_minibatches} must divide the number of envs B={B} for recurrent agents")
        for b_idxs in iterate_mb_idxs(B, B // n_minibatches, shuffle=True, generator=generator):
            # Indexing [:, b] also picks the envs of init_rnn_state, whose leading dims are [N, B].
            yield batch[:, torch.from_numpy(b_idxs)]
        return
    n = T * B
    if n % n_minibatches:
        raise ValueError(f"minibatches={n_minibatches} must divide the batch size T*B={n}")
    flat = buffer_func(batch._replace(init_rnn_state=None), lambda x: x.reshape((n,) + tuple(x.shape[2:])))
    if n_minibatches == 1:
        yield flat
        return
    for idxs in iterate_mb_idxs(n, n // n_minibatches, shuffle=True, generator=generator):
        yield flat[torch.from_numpy(idxs)]


def check_finite(name: str, array: np.ndarray) -> None:
    """Raise ``ValueError`` naming ``name`` if ``array`` holds NaN or infinity."""
    if not np.isfinite(array).all():
        bad = np.argwhere(~np.isfinite(array))[0].tolist()
        raise ValueError(f"non-finite {name} in the collected batch at index {bad}: {array[tuple(bad)]}")
