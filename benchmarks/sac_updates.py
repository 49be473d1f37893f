"""SAC throughput on HalfCheetah-v5: env steps/s and gradient updates/s, three ways, same process.

* ``lightning_rl``: :class:`~lightning_rl.algos.SAC` under ``pl.Trainer`` (serial sampler,
  replay, ReplayDataset, Lightning's manual optimization, logging and callbacks);
* ``sb3``: Stable-Baselines3's SAC with the same schedule (``train_freq=T``,
  ``gradient_steps=T``) and, with ``--sb3-defaults``, also with its defaults (1 and 1);
* ``plain``: a plain PyTorch loop over the same networks (``PiMlpModel``, twin
  ``QofMuMlpModel``), the same loss and optimizer settings, a tensor ring buffer and a raw
  gymnasium env: the ceiling without any framework.

All use 256x256 MLPs, batch 256, Adam 3e-4, learned alpha, one update per env step after
``--random-steps`` uniformly random steps, and collect ``T`` env steps then run ``T`` updates.
Reported: env steps/s while acting at random (collection alone), and updates/s (with the
``T`` env steps between every ``T`` updates) in the learning phase. Targets: updates/s at least
1.5x SB3 and within 15% of the plain loop.

Usage::

    python benchmarks/sac_updates.py                      # defaults: 2000 random steps, 3000 updates
    python benchmarks/sac_updates.py --updates 1000 --random-steps 1000 --repeats 1
"""

from __future__ import annotations

import argparse
import copy
import functools
import math
import time

import numpy as np
import torch

ENV_ID = "HalfCheetah-v5"
HIDDEN = [256, 256]


def run_lightning_rl(
    random_steps: int, updates: int, T: int, seed: int, fast_paths: bool = True
) -> tuple[float, float]:
    import pytorch_lightning as pl

    from lightning_rl.agents import SacAgent
    from lightning_rl.algos import SAC, private_fast_paths
    from lightning_rl.samplers import SerialSampler

    private_fast_paths.enabled = fast_paths  # False: public APIs only, the same updates

    marks: list[tuple[float, int, int]] = []

    class Clock(pl.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            marks.append((time.perf_counter(), pl_module.train_state.env_steps, pl_module.train_state.updates))

    pl.seed_everything(seed, verbose=False)
    module = SAC(
        SacAgent(hidden_sizes=HIDDEN, q_hidden_sizes=HIDDEN),
        SerialSampler(env_id=ENV_ID, batch_T=T, batch_B=1),
        batch_size=256, replay_ratio=256, min_steps_learn=random_steps, learning_rate=3e-4,
        total_env_steps=random_steps + updates, log_interval_steps=50 * T, checkpoint_replay=False,
    )
    trainer = pl.Trainer(
        max_epochs=-1, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, callbacks=[Clock()],
    )
    trainer.fit(module)
    pre = [m for m in marks if m[2] == 0]
    learn_start = pre[-1]
    env_rate = (pre[-1][1] - pre[0][1]) / (pre[-1][0] - pre[0][0])
    update_rate = (marks[-1][2] - learn_start[2]) / (marks[-1][0] - learn_start[0])
    return env_rate, update_rate


def run_sb3(random_steps: int, updates: int, T: int, seed: int) -> tuple[float, float]:
    from stable_baselines3 import SAC as SB3SAC
    from stable_baselines3.common.callbacks import BaseCallback

    marks: dict[str, float] = {}

    class Clock(BaseCallback):
        def _on_step(self) -> bool:
            n = self.model.num_timesteps
            if n == 1:
                marks["first"] = time.perf_counter()
            elif n == random_steps:
                marks["learn"] = time.perf_counter()
            return True

    import gymnasium as gym

    model = SB3SAC(
        "MlpPolicy", gym.make(ENV_ID), learning_starts=random_steps, batch_size=256, learning_rate=3e-4,
        train_freq=T, gradient_steps=T, buffer_size=random_steps + updates + T, seed=seed, device="cpu",
        policy_kwargs={"net_arch": list(HIDDEN)}, verbose=0,
    )
    model.learn(total_timesteps=random_steps + updates, callback=Clock())
    end = time.perf_counter()
    env_rate = (random_steps - 1) / (marks["learn"] - marks["first"])
    return env_rate, model._n_updates / (end - marks["learn"])


def run_plain(random_steps: int, updates: int, T: int, seed: int) -> tuple[float, float]:
    import gymnasium as gym

    from lightning_rl.distributions import DistInfoStd, Gaussian
    from lightning_rl.models import PiMlpModel, QofMuMlpModel

    torch.manual_seed(seed)
    env = gym.make(ENV_ID)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    assert np.all(env.action_space.high == 1.0) and np.all(env.action_space.low == -1.0)
    pi = PiMlpModel((obs_dim,), act_dim, HIDDEN)
    q1, q2 = QofMuMlpModel((obs_dim,), act_dim, HIDDEN), QofMuMlpModel((obs_dim,), act_dim, HIDDEN)
    tq1, tq2 = copy.deepcopy(q1).requires_grad_(False), copy.deepcopy(q2).requires_grad_(False)
    q_params = list(q1.parameters()) + list(q2.parameters())
    target_params = list(tq1.parameters()) + list(tq2.parameters())
    dist = Gaussian(dim=act_dim, squash=1.0, min_std=math.exp(-20), max_std=math.exp(2))
    log_alpha = torch.zeros((), requires_grad=True)
    optimizers = [
        torch.optim.Adam(pi.parameters(), lr=3e-4, fused=True),
        torch.optim.Adam(q_params, lr=3e-4, fused=True),
        torch.optim.Adam([log_alpha], lr=3e-4, fused=True),
    ]
    target_entropy, gamma, tau = -float(act_dim), 0.99, 0.005
    size = random_steps + updates + T
    buf_obs = torch.zeros(size, obs_dim)
    buf_next = torch.zeros(size, obs_dim)
    buf_act = torch.zeros(size, act_dim)
    buf_rew = torch.zeros(size)
    buf_term = torch.zeros(size)

    def update() -> None:
        idx = torch.randint(0, n_stored, (256,))
        obs, act, rew, nxt, term = buf_obs[idx], buf_act[idx], buf_rew[idx], buf_next[idx], buf_term[idx]
        alpha = log_alpha.detach().exp()
        with torch.no_grad():
            mean, log_std = pi(nxt, None, None)
            next_a, next_lp = dist.sample_loglikelihood(DistInfoStd(mean, log_std))
            next_q = torch.minimum(tq1(nxt, None, None, next_a), tq2(nxt, None, None, next_a))
            y = rew + gamma * (1.0 - term) * (next_q - alpha * next_lp)
        qv1, qv2 = q1(obs, None, None, act), q2(obs, None, None, act)
        q_loss = 0.5 * ((y - qv1) ** 2).mean() + 0.5 * ((y - qv2) ** 2).mean()
        mean, log_std = pi(obs, None, None)
        a, lp = dist.sample_loglikelihood(DistInfoStd(mean, log_std))
        for p in q_params:
            p.requires_grad_(False)
        q_pi = torch.minimum(q1(obs, None, None, a), q2(obs, None, None, a))
        for p in q_params:
            p.requires_grad_(True)
        pi_loss = (alpha * lp - q_pi).mean()
        alpha_loss = log_alpha * (-lp.detach().mean() - target_entropy)
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        (q_loss + pi_loss + alpha_loss).backward()
        for opt in optimizers:
            opt.step()
        with torch.no_grad():
            torch._foreach_lerp_(target_params, q_params, tau)

    observation, _ = env.reset(seed=seed)
    n_stored, n_updates = 0, 0
    t_first = time.perf_counter()
    t_learn = t_first
    for step in range(random_steps + updates):
        if step < random_steps:
            action = env.action_space.sample()
        else:
            with torch.no_grad():
                mean, log_std = pi(torch.as_tensor(observation, dtype=torch.float32)[None], None, None)
                action = dist.sample(DistInfoStd(mean, log_std))[0].numpy()
        next_observation, reward, terminated, truncated, _ = env.step(action)
        buf_obs[n_stored] = torch.as_tensor(observation)
        buf_act[n_stored] = torch.as_tensor(action)
        buf_rew[n_stored] = float(reward)
        buf_next[n_stored] = torch.as_tensor(next_observation)
        buf_term[n_stored] = float(terminated)
        n_stored += 1
        observation = next_observation
        if terminated or truncated:
            observation, _ = env.reset()
        if step + 1 == random_steps:
            t_learn = time.perf_counter()
        if step + 1 > random_steps and (step + 1 - random_steps) % T == 0:
            for _ in range(T):
                update()
                n_updates += 1
    end = time.perf_counter()
    return (random_steps - 1) / (t_learn - t_first), n_updates / (end - t_learn)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random-steps", type=int, default=2000, help="uniformly random env steps first")
    parser.add_argument("--updates", type=int, default=3000, help="learning-phase env steps (= updates)")
    parser.add_argument("--T", type=int, default=64, help="env steps collected between blocks of T updates")
    parser.add_argument("--repeats", type=int, default=2, help="rounds, alternating the three")
    parser.add_argument("--sb3-defaults", action="store_true", help="also run SB3 with train_freq=1, gradient_steps=1")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--fast-paths-off", action="store_true",
                        help="also run lightning_rl with its private fast paths off (public APIs only)")
    parser.add_argument("--only", nargs="+", help="run only these (lightning_rl, 'lightning_rl public', sb3, plain)")
    parser.add_argument("--hidden", type=int, nargs="+", default=HIDDEN,
                        help="hidden sizes of all networks (small ones show the per-update overhead)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    HIDDEN[:] = args.hidden
    runs = [("lightning_rl", run_lightning_rl, args.T), ("sb3", run_sb3, args.T), ("plain", run_plain, args.T)]
    if args.sb3_defaults:
        runs.append(("sb3 (T=1)", run_sb3, 1))
    if args.fast_paths_off:
        runs.insert(1, ("lightning_rl public", functools.partial(run_lightning_rl, fast_paths=False), args.T))
    if args.only:
        runs = [run for run in runs if run[0] in args.only]
    results: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in runs}
    for r in range(args.repeats):
        for name, fn, T in runs:
            env_rate, update_rate = fn(args.random_steps, args.updates, T, seed=r)
            results[name].append((env_rate, update_rate))
            print(f"round {r} {name:13s} env steps/s {env_rate:8.0f}   updates/s {update_rate:7.1f}", flush=True)
    sizes = "x".join(map(str, HIDDEN))
    print(f"\n{ENV_ID}, SAC {sizes}, batch 256, T={args.T}, {args.updates} updates, median of {args.repeats}")
    print(f"{'':13s} {'env steps/s (random)':>21s} {'updates/s':>10s}")
    med = {name: np.median(np.array(v), axis=0) for name, v in results.items()}
    for name, (env_rate, update_rate) in med.items():
        print(f"{name:13s} {env_rate:21.0f} {update_rate:10.1f}")
    ours = med["lightning_rl"][1] if "lightning_rl" in med else None
    if ours is not None and "sb3" in med:
        print(f"\nupdates/s lightning_rl / sb3   = {ours / med['sb3'][1]:.2f} (target >= 1.5)")
    if ours is not None and "plain" in med:
        print(f"updates/s lightning_rl / plain = {ours / med['plain'][1]:.2f} (target >= 0.85)")
    if ours is not None and "lightning_rl public" in med:
        gain = ours / med["lightning_rl public"][1] - 1.0
        print(f"private fast paths: {100 * gain:+.1f}% updates/s over the public-API path (keep only from +3%)")


if __name__ == "__main__":
    main()
