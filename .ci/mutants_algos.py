"""Mutants of the algorithms' losses (``lightning_rl/algos/``), for ``.ci/mutation_check.py``.

Each entry is a plain dict (no import of ``mutation_check``, so this file loads on its own):

* ``name``: human-readable, unique, e.g. ``"PPO clip min -> max"``.
* ``path``: file relative to the repository root, e.g. ``"lightning_rl/algos/ppo.py"``.
* ``original``: an exact substring of that file that occurs exactly once (the check fails,
  naming the mutant, when it occurs 0 or 2+ times). It may span a few lines to be unique,
  but the mutation itself should change one line.
* ``replacement``: what ``original`` becomes.
* ``tests``: pytest node ids or files (relative to the repository root) that must kill the
  mutant: fast (seconds) and not marked ``slow``. Prefer tests with hand-worked expected values.

The tests named here live in ``tests/algos/test_losses_pg.py`` (PPO, A2C),
``tests/algos/test_losses_dqn.py`` (DQN, C51, R2D1, the soft target update) and
``tests/algos/test_losses_qpg.py`` (DDPG, TD3, SAC, ``qpg_common``); every expected value there
is worked out by hand in the test.

Mutants left out because no test can tell them apart from the original (equivalent mutants):

* ``dqn_loss``'s ``td_abs`` as ``(q_taken - y).abs()`` (and R2D1's ``delta.detach().abs()`` with
  ``q_taken - y``): the absolute value is symmetric, so the priorities are identical, and the
  losses use the Huber/squared error of the same difference.
"""

from __future__ import annotations

from typing import Any

PPO = "lightning_rl/algos/ppo.py"
A2C = "lightning_rl/algos/a2c.py"
DQN = "lightning_rl/algos/dqn.py"
C51 = "lightning_rl/algos/categorical_dqn.py"
R2D1 = "lightning_rl/algos/r2d1.py"
DDPG = "lightning_rl/algos/ddpg.py"
QPG = "lightning_rl/algos/qpg_common.py"
SAC = "lightning_rl/algos/sac.py"
OFF_POLICY = "lightning_rl/algos/off_policy.py"

T_PG = "tests/algos/test_losses_pg.py"
T_DQN = "tests/algos/test_losses_dqn.py"
T_QPG = "tests/algos/test_losses_qpg.py"


def _m(name: str, path: str, original: str, replacement: str, *tests: str) -> dict[str, Any]:
    return dict(name=name, path=path, original=original, replacement=replacement, tests=list(tests))


ALGO_MUTANTS: list[dict[str, Any]] = [
    # --- PPO ---
    _m("PPO clip min -> max", PPO,
       "torch.min(surrogate, clipped)", "torch.max(surrogate, clipped)",
       f"{T_PG}::test_ppo_clipped_surrogate_both_sides_value_half_and_entropy_by_hand",
       f"{T_PG}::test_ppo_clip_zeroes_the_gradient_only_where_it_binds"),
    _m("PPO entropy bonus sign", PPO,
       "loss = loss - entropy_loss_coeff * mean_entropy", "loss = loss + entropy_loss_coeff * mean_entropy",
       f"{T_PG}::test_ppo_clipped_surrogate_both_sides_value_half_and_entropy_by_hand",
       f"{T_PG}::test_ppo_positive_entropy_coefficient_raises_entropy"),
    _m("A2C entropy bonus sign", A2C,
       "loss = pi_loss + value_loss - entropy_loss_coeff * mean_entropy",
       "loss = pi_loss + value_loss + entropy_loss_coeff * mean_entropy",
       f"{T_PG}::test_a2c_loss_by_hand", f"{T_PG}::test_a2c_positive_entropy_coefficient_raises_entropy"),
    _m("PPO value loss drops 0.5", PPO,
       "value_loss = value_loss_coeff * 0.5 * valid_mean(value_error, valid)",
       "value_loss = value_loss_coeff * valid_mean(value_error, valid)",
       f"{T_PG}::test_ppo_clipped_surrogate_both_sides_value_half_and_entropy_by_hand"),
    _m("PPO clamp bounds swapped", PPO,
       "torch.clamp(ratio, 1.0 - ratio_clip, 1.0 + ratio_clip)",
       "torch.clamp(ratio, 1.0 + ratio_clip, 1.0 - ratio_clip)",
       f"{T_PG}::test_ppo_clipped_surrogate_both_sides_value_half_and_entropy_by_hand",
       f"{T_PG}::test_ppo_clip_zeroes_the_gradient_only_where_it_binds"),
    _m("PPO clip lower bound 1 + eps (epsilon sign)", PPO,
       "torch.clamp(ratio, 1.0 - ratio_clip,", "torch.clamp(ratio, 1.0 + ratio_clip,",
       f"{T_PG}::test_ppo_clipped_surrogate_both_sides_value_half_and_entropy_by_hand"),
    _m("PPO surrogate sign", PPO,
       "pi_loss = -valid_mean(torch.min(surrogate, clipped), valid)",
       "pi_loss = valid_mean(torch.min(surrogate, clipped), valid)",
       f"{T_PG}::test_ppo_step_raises_the_positive_advantage_action_and_lowers_the_negative_one",
       f"{T_PG}::test_ppo_clipped_surrogate_both_sides_value_half_and_entropy_by_hand"),
    _m("PPO valid mask dropped from the surrogate", PPO,
       "valid_mean(torch.min(surrogate, clipped), valid)", "valid_mean(torch.min(surrogate, clipped), None)",
       f"{T_PG}::test_ppo_valid_mask_by_hand"),
    _m("PPO value clip max -> min", PPO,
       "value_error = torch.max(value_error, (return_ - clipped_value) ** 2)",
       "value_error = torch.min(value_error, (return_ - clipped_value) ** 2)",
       f"{T_PG}::test_ppo_value_clip_by_hand"),
    _m("PPO clipped value moves the wrong way", PPO,
       "clipped_value = old_value + torch.clamp(", "clipped_value = old_value - torch.clamp(",
       f"{T_PG}::test_ppo_value_clip_by_hand"),
    _m("PPO.loss ratio inverted (old / new)", PPO,
       "dist.likelihood_ratio(batch.action, batch.old_dist_info, dist_info)",
       "dist.likelihood_ratio(batch.action, dist_info, batch.old_dist_info)",
       f"{T_PG}::test_ppo_module_loss_uses_new_over_old_and_the_new_entropy"),
    _m("PPO.loss entropy of the old policy", PPO,
       "entropy = dist.entropy(dist_info) if", "entropy = dist.entropy(batch.old_dist_info) if",
       f"{T_PG}::test_ppo_module_loss_uses_new_over_old_and_the_new_entropy"),
    # --- A2C ---
    _m("A2C policy-gradient sign", A2C,
       "pi_loss = -valid_mean(log_prob * advantage, valid)", "pi_loss = valid_mean(log_prob * advantage, valid)",
       f"{T_PG}::test_a2c_step_raises_the_positive_advantage_action_and_lowers_the_negative_one",
       f"{T_PG}::test_a2c_loss_by_hand"),
    _m("A2C value loss drops 0.5", A2C,
       "value_loss = value_loss_coeff * 0.5 * valid_mean(", "value_loss = value_loss_coeff * valid_mean(",
       f"{T_PG}::test_a2c_loss_by_hand"),
    _m("A2C valid mask dropped from the policy gradient", A2C,
       "valid_mean(log_prob * advantage, valid)", "valid_mean(log_prob * advantage, None)",
       f"{T_PG}::test_a2c_valid_mask_by_hand"),
    # --- DQN ---
    _m("DQN double DQN chooser ignored", DQN,
       "chooser = next_target_q if next_online_q is None else next_online_q", "chooser = next_target_q",
       f"{T_DQN}::test_dqn_double_target_by_hand"),
    _m("DQN double DQN values the choice with the online net", DQN,
       "next_q = next_target_q.gather(-1, next_action).squeeze(-1)",
       "next_q = chooser.gather(-1, next_action).squeeze(-1)",
       f"{T_DQN}::test_dqn_double_target_by_hand"),
    _m("DQN done mask dropped", DQN,
       "bootstrap = (~done_n).to(next_q.dtype) * discount_n", "bootstrap = torch.ones_like(next_q) * discount_n",
       f"{T_DQN}::test_dqn_plain_target_huber_loss_and_terms_by_hand"),
    _m("DQN discount_n ignored", DQN,
       "bootstrap = (~done_n).to(next_q.dtype) * discount_n", "bootstrap = (~done_n).to(next_q.dtype)",
       f"{T_DQN}::test_dqn_plain_target_huber_loss_and_terms_by_hand"),
    _m("DQN is_weights ignored", DQN,
       "loss = (losses * is_weights).mean() if is_weights is not None else losses.mean()", "loss = losses.mean()",
       f"{T_DQN}::test_dqn_importance_weights_by_hand"),
    _m("DQN Huber threshold (delta_clip) ignored", DQN,
       'F.huber_loss(q_taken, y, reduction="none", delta=delta_clip)', 'F.huber_loss(q_taken, y, reduction="none")',
       f"{T_DQN}::test_dqn_squared_and_huber_threshold_by_hand"),
    _m("DQN squared error without the 0.5", DQN,
       "losses = 0.5 * (y - q_taken).square()", "losses = (y - q_taken).square()",
       f"{T_DQN}::test_dqn_squared_and_huber_threshold_by_hand"),
    _m("DQN.loss online net used as target", DQN,
       "next_target_q = self.agent.target(*batch.target_inputs)", "next_target_q = self.agent(*batch.target_inputs)",
       f"{T_DQN}::test_dqn_module_takes_targets_from_the_target_network"),
    _m("DQN.loss importance weights without prioritized replay", DQN,
       "is_weights=batch.is_weights if self.prioritized_replay else None", "is_weights=batch.is_weights",
       f"{T_DQN}::test_dqn_module_weights_losses_only_with_prioritized_replay"),
    _m("target update interval ignored (every off-policy algorithm)", OFF_POLICY,
       "if self.train_state.updates % self.target_update_interval == 0:", "if True:",
       f"{T_DQN}::test_dqn_training_step_updates_the_target_every_interval_and_sends_priorities",
       f"{T_QPG}::test_td3_policy_every_policy_interval_and_targets_every_target_interval",
       f"{T_QPG}::test_sac_training_step_moves_targets_every_interval"),
    _m("DQN priorities without PRIORITY_EPS", DQN,
       "priorities = stacked[self.priority_term].reshape(-1) + PRIORITY_EPS",
       "priorities = stacked[self.priority_term].reshape(-1)",
       f"{T_DQN}::test_dqn_training_step_updates_the_target_every_interval_and_sends_priorities"),
    # --- the target-network update (all off-policy algorithms) ---
    _m("target update tau flipped (1 - tau)", OFF_POLICY,
       "dst.lerp_(src, tau)", "dst.lerp_(src, 1 - tau)",
       f"{T_DQN}::test_soft_target_update_moves_the_target_by_tau_towards_the_online_network"),
    # --- C51 ---
    _m("C51 projection weight sign", C51,
       "weight = (1.0 - (shifted", "weight = (1.0 + (shifted",
       f"{T_DQN}::test_c51_projection_by_hand_with_clipping_and_a_terminated_row"),
    _m("C51 projection not clipped to [V_min, V_max]", C51,
       "* z).clamp(v_min, v_max)  # Tz_j", "* z)  # Tz_j",
       f"{T_DQN}::test_c51_projection_by_hand_with_clipping_and_a_terminated_row"),
    _m("C51 projection ignores the atom spacing dz", C51,
       ".abs() / dz).clamp(min=0.0)", ".abs()).clamp(min=0.0)",
       f"{T_DQN}::test_c51_projection_on_wider_atoms_by_hand"),
    _m("C51 bootstrap mask dropped", C51,
       "bootstrap = (~done_n).to(p_next.dtype) * discount_n", "bootstrap = discount_n",
       f"{T_DQN}::test_c51_cross_entropy_kl_and_q_by_hand"),
    _m("C51 cross-entropy sign", C51,
       "cross_entropy = -(m * p_taken", "cross_entropy = (m * p_taken",
       f"{T_DQN}::test_c51_cross_entropy_kl_and_q_by_hand",
       f"{T_DQN}::test_c51_step_moves_the_predicted_distribution_towards_the_target"),
    _m("C51 double DQN chooser ignored", C51,
       "chooser = next_target_p if next_online_p is None else next_online_p", "chooser = next_target_p",
       f"{T_DQN}::test_c51_double_dqn_by_hand"),
    _m("C51.loss online net used as target", C51,
       "next_target_p = self.agent.target(*batch.target_inputs)", "next_target_p = self.agent(*batch.target_inputs)",
       f"{T_DQN}::test_c51_module_takes_the_bootstrap_distribution_from_the_target_network"),
    # --- R2D1 ---
    _m("R2D1 value_rescale eps sign", R2D1,
       "(torch.sqrt(x.abs() + 1.0) - 1.0) + eps * x", "(torch.sqrt(x.abs() + 1.0) - 1.0) - eps * x",
       f"{T_DQN}::test_value_rescale_and_its_inverse_at_hand_computed_points"),
    _m("R2D1 inverse rescale: eps sign in c", R2D1,
       "c = 1.0 + eps + x.abs()", "c = 1.0 - eps + x.abs()",
       f"{T_DQN}::test_value_rescale_and_its_inverse_at_hand_computed_points"),
    _m("R2D1 target without value rescaling", R2D1,
       "y = value_rescale(return_[:bT] + bootstrap * inv_value_rescale(next_value, eps), eps)",
       "y = return_[:bT] + bootstrap * next_value",
       f"{T_DQN}::test_r2d1_loss_mask_and_priorities_by_hand"),
    _m("R2D1 valid mask: rows after a done trained", R2D1,
       "valid = valid_from_done(done[:bT]) * (n_steps[:bT] > 0).to(q.dtype)",
       "valid = (n_steps[:bT] > 0).to(q.dtype)",
       f"{T_DQN}::test_r2d1_loss_mask_and_priorities_by_hand"),
    _m("R2D1 valid mask: truncated (n_steps 0) rows trained", R2D1,
       "valid = valid_from_done(done[:bT]) * (n_steps[:bT] > 0).to(q.dtype)",
       "valid = valid_from_done(done[:bT])",
       f"{T_DQN}::test_r2d1_loss_mask_and_priorities_by_hand"),
    _m("R2D1 done mask dropped", R2D1,
       "bootstrap = (~done_n[:bT]).to(q.dtype) * discount_n[:bT]", "bootstrap = discount_n[:bT]",
       f"{T_DQN}::test_r2d1_loss_mask_and_priorities_by_hand"),
    _m("R2D1 double DQN chooser ignored", R2D1,
       "next_q = q.detach().gather(0, rows) if double_dqn else next_target_q", "next_q = next_target_q",
       f"{T_DQN}::test_r2d1_double_dqn_by_hand"),
    _m("R2D1 priority eta swapped (eta * mean + (1 - eta) * max)", R2D1,
       "return eta * max_d + (1.0 - eta) * mean_d", "return eta * mean_d + (1.0 - eta) * max_d",
       f"{T_DQN}::test_sequence_priority_by_hand", f"{T_DQN}::test_r2d1_loss_mask_and_priorities_by_hand"),
    _m("R2D1 priority max over masked rows", R2D1,
       "max_d = (td_abs * valid).max(dim=0).values", "max_d = td_abs.max(dim=0).values",
       f"{T_DQN}::test_sequence_priority_by_hand"),
    _m("R2D1 is_weights ignored", R2D1,
       "losses = losses * is_weights[None, :]", "losses = losses",
       f"{T_DQN}::test_r2d1_huber_and_importance_weights_by_hand"),
    # --- DDPG / TD3 (and qpg_common, shared with SAC) ---
    _m("DDPG/TD3 min_over -> max", QPG,
       "out = torch.minimum(out, v)", "out = torch.maximum(out, v)",
       f"{T_QPG}::test_td3_critic_loss_takes_the_smaller_target_critic_by_hand"),
    _m("DDPG mu loss sign", DDPG,
       "return -q_at_mu.mean()", "return q_at_mu.mean()",
       f"{T_QPG}::test_ddpg_mu_loss_sign_and_direction"),
    _m("q_target_clip ignored", QPG,
       "y = y.clamp(-q_target_clip, q_target_clip)", "y = y",
       f"{T_QPG}::test_ddpg_critic_loss_by_hand"),
    _m("split_updates: truncation treated as termination", QPG,
       "no_bootstrap = batch.done_n if bootstrap_timelimit else batch.done_n | batch.truncated_n",
       "no_bootstrap = batch.done_n | batch.truncated_n",
       f"{T_QPG}::test_split_updates_bootstrap_factor_by_hand"),
    _m("split_updates: truncations never cut without bootstrap_timelimit", QPG,
       "no_bootstrap = batch.done_n if bootstrap_timelimit else batch.done_n | batch.truncated_n",
       "no_bootstrap = batch.done_n",
       f"{T_QPG}::test_split_updates_bootstrap_factor_by_hand"),
    _m("split_updates: reward_scale ignored", QPG,
       "return_ = return_ * reward_scale", "return_ = return_",
       f"{T_QPG}::test_split_updates_bootstrap_factor_by_hand"),
    _m("critic loss drops 0.5", QPG,
       "loss = 0.5 * torch.mean((y - q_values[0]) ** 2)", "loss = torch.mean((y - q_values[0]) ** 2)",
       f"{T_QPG}::test_ddpg_critic_loss_by_hand"),
    _m("critic loss ignores the second critic", QPG,
       "loss = loss + 0.5 * torch.mean((y - q) ** 2)", "loss = loss",
       f"{T_QPG}::test_td3_critic_loss_takes_the_smaller_target_critic_by_hand"),
    _m("n-step target: bootstrap value subtracted", QPG,
       "y = torch.addcmul(return_, bootstrap, next_value)",
       "y = torch.addcmul(return_, bootstrap, next_value, value=-1)",
       f"{T_QPG}::test_ddpg_critic_loss_by_hand"),
    _m("DDPG.q_loss bootstraps from the online critic", DDPG,
       "next_q = as_tuple(agent.target_q_at_mu(*batch.next_inputs))",
       "next_q = as_tuple(agent.q_at_mu(*batch.next_inputs))",
       f"{T_QPG}::test_ddpg_module_targets_come_from_the_target_critic"),
    _m("TD3 delayed actor interval ignored", DDPG,
       "if self.train_state.updates % self.policy_update_interval == 0:", "if True:",
       f"{T_QPG}::test_td3_policy_every_policy_interval_and_targets_every_target_interval"),
    # --- SAC ---
    _m("SAC entropy term sign in the target", SAC,
       "- alpha * next_log_pi", "+ alpha * next_log_pi",
       f"{T_QPG}::test_sac_losses_and_terms_by_hand"),
    _m("SAC target max over the target critics", SAC,
       "next_value = torch.minimum(next_target_q1, next_target_q2)",
       "next_value = torch.maximum(next_target_q1, next_target_q2)",
       f"{T_QPG}::test_sac_losses_and_terms_by_hand"),
    _m("SAC policy loss min -> max", SAC,
       "alpha * log_pi - torch.minimum(q1_pi, q2_pi)", "alpha * log_pi - torch.maximum(q1_pi, q2_pi)",
       f"{T_QPG}::test_sac_losses_and_terms_by_hand", f"{T_QPG}::test_sac_gradients_by_hand"),
    _m("SAC policy loss sign on Q", SAC,
       "alpha * log_pi - torch.minimum(q1_pi, q2_pi)", "alpha * log_pi + torch.minimum(q1_pi, q2_pi)",
       f"{T_QPG}::test_sac_policy_step_raises_the_smaller_critic_value"),
    _m("SAC alpha loss sign", SAC,
       "alpha_loss = log_alpha * (entropy - target_entropy)", "alpha_loss = log_alpha * (target_entropy - entropy)",
       f"{T_QPG}::test_sac_alpha_rises_below_the_target_entropy_and_falls_above",
       f"{T_QPG}::test_sac_losses_and_terms_by_hand"),
    _m("SAC alpha not detached in the critic and policy losses", SAC,
       "alpha = log_alpha.detach().exp()", "alpha = log_alpha.exp()",
       f"{T_QPG}::test_sac_gradients_by_hand"),
    _m("SAC alpha loss without learn_alpha", SAC,
       "if learn_alpha else torch.zeros((), device=y.device)", "if True else torch.zeros((), device=y.device)",
       f"{T_QPG}::test_sac_fixed_alpha_and_target_clip_by_hand"),
    _m("SAC.loss bootstraps from the online critics", SAC,
       "next_q1 = agent.target_q1_model(*batch.next_inputs, next_action)",
       "next_q1 = agent.q1_model(*batch.next_inputs, next_action)",
       f"{T_QPG}::test_sac_module_targets_come_from_the_target_critics"),
]
