"""The RL learn step's settings under OpenRLHF 0.11's names: `algo.*` (advantage estimator,
KL to the reference, dynamic filtering), the reward shaping keys of `reward.*`, and the one
record a learn step takes: `LearnSettings`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import get_args

from alignflow.errors import require
from alignflow.tasks.advantages.multi_reward import canonical
from alignflow.tasks.advantages.names import Estimator
from alignflow.tasks.losses.names import Aggregation, ISCorrection, ISGating, KLEstimator
from alignflow.tasks.plan.placement import Workers
from alignflow.tasks.plan.records import RunPlan
from alignflow.tasks.rewards.registry import RewardConfig
from alignflow.tasks.rl.roles import ActorConfig, CriticConfig
from alignflow.tasks.trainers.optim import TrainConfig


def check_is_correction(cfg) -> None:
    """Validate the `is_correction_*` keys of `algo.advantage` (called by its class). One
    threshold is an upper bound only, (0, high), as OpenRLHF 0.11.2 reads it."""
    require(cfg.is_correction_type in get_args(ISCorrection), "is_correction_type",
            f"one of {get_args(ISCorrection)}", cfg.is_correction_type)
    require(cfg.is_correction_gating in get_args(ISGating), "is_correction_gating",
            f"one of {get_args(ISGating)}", cfg.is_correction_gating)
    given = cfg.is_correction_threshold
    threshold = tuple(float(x) for x in (given if isinstance(given, tuple | list) else [given]))
    threshold = (0.0, *threshold) if len(threshold) == 1 else threshold
    require(len(threshold) == 2 and 0.0 <= threshold[0] < threshold[1],
            "is_correction_threshold", "HIGH or LOW HIGH with 0 <= low < high, e.g. [0.5, 5.0]",
            given)
    object.__setattr__(cfg, "is_correction_threshold", threshold)
    divergence = cfg.is_correction_gating != "ratio"
    require(not divergence or cfg.is_correction_type != "tis", "is_correction_gating",
            "ratio with is_correction_type tis (a divergence gate masks: icepop or "
            "seq-mask-tis)", cfg.is_correction_gating)
    require(not divergence or threshold[0] == 0.0, "is_correction_threshold",
            f"an upper bound only with gating {cfg.is_correction_gating} (one value, e.g. "
            "[0.003])", given)


def pi_old_notes(plan: RunPlan, dtype: str, staleness: int, advantage: EstimatorConfig
                 ) -> list[str]:
    """The plan's line when the learn step will skip the extra π_old pass (what
    `correction.engine_is_trainer` finds at run time, said before the run)."""
    engine, actor = plan.generation, plan.host(plan.host_of("actor"))
    if engine is None or engine.kind != "hf" or actor.gpus_per_worker > 0 or dtype != "fp32" \
            or staleness > 0 or advantage.is_correction_enable:
        return []
    return ["π_old: the HF engine's log-probs on the CPU in fp32 are the trainer's own (same "
            "weights and code; float32 rounding apart, ~1e-6), so the learn step skips the "
            "extra forward pass OpenRLHF's experience maker makes; with vLLM, a GPU, bf16, a "
            "stale batch or IS correction the trainer recomputes π_old"]


@dataclass(frozen=True, kw_only=True)
class PtxConfig:
    """OpenRLHF's `--pretrain_data` / `--ptx_coef`; off while `ptx_coef` is 0."""

    pretrain_data: str | None = None
    pretrain_key: str = "text"
    ptx_coef: float = 0.0
    max_len: int = 256
    batch_size: int = 4
    max_samples: int | None = 10000

    def __post_init__(self) -> None:
        require(math.isfinite(self.ptx_coef) and self.ptx_coef >= 0, "ptx_coef",
                "a finite float >= 0", self.ptx_coef)
        require(not self.enabled or bool(self.pretrain_data), "pretrain_data",
                "a dataset spec when ptx_coef > 0", self.pretrain_data)
        for name in ("max_len", "batch_size"):
            require(getattr(self, name) >= 1, name, "an integer >= 1", getattr(self, name))
        if self.max_samples is not None:
            require(self.max_samples >= 1, "max_samples", "an integer >= 1 or null",
                    self.max_samples)

    @property
    def enabled(self) -> bool:
        return math.isfinite(self.ptx_coef) and self.ptx_coef > 0


@dataclass(frozen=True, kw_only=True)
class KLConfig:
    """KL to the reference: in the per-token reward (init_coef), or as a loss term (use_loss).

    init_coef: β; 0 with no target: no KL and no reference model pass
    target: adaptive β (Ziegler et al.'s controller) aiming at this KL; null: fixed β
    horizon: the adaptive controller's horizon in samples
    estimator: k1 (log-ratio), k2 (½ log-ratio²) or k3 (e^-x - 1 + x)
    use_loss: add β·KL to the policy loss instead of the reward (GRPO)
    """

    init_coef: float = 0.01
    target: float | None = None
    horizon: int = 10000
    estimator: KLEstimator = "k1"
    use_loss: bool = False

    def __post_init__(self) -> None:
        require(math.isfinite(self.init_coef) and self.init_coef >= 0, "init_coef",
                "a finite float >= 0", self.init_coef)
        require(self.estimator in get_args(KLEstimator), "estimator",
                f"one of {get_args(KLEstimator)}", self.estimator)
        require(self.horizon >= 1, "horizon", "an integer >= 1", self.horizon)
        if self.target is not None:
            require(math.isfinite(self.target) and self.target > 0, "target",
                    "a float > 0 or null", self.target)

    @property
    def used(self) -> bool:
        """Whether any KL term needs reference log-probs (β > 0 now or adaptively later)."""
        return self.init_coef > 0 or self.target is not None


@dataclass(frozen=True, kw_only=True)
class EstimatorConfig:
    """How rewards become advantages.

    estimator: gae (critic), reinforce, reinforce_baseline, group_norm (GRPO), dr_grpo, rloo, flash_reinforce (FlashREINFORCE: r − the batch mean, no whitening), on_policy_distill (β·(log π_ref − log π_old) per token + the baselined reward: the reference is the teacher)
    gamma: discount of the returns (group estimators need 1.0)
    lambd: GAE's λ
    no_std_norm: the batch whitening of gae / reinforce / reinforce_baseline only centres (as OpenRLHF: group_norm always divides by its group std; dr_grpo never does)
    is_correction_enable: weight each token's loss by the truncated ratio of the learner's weights before the step to the behaviour policy that sampled it (stale generator, engine mismatch)
    is_correction_type: tis (clamp the ratio), icepop (drop tokens outside the band), seq-mask-tis (drop sequences whose geometric-mean ratio is outside it)
    is_correction_threshold: the band [low, high] of the gated statistic; one value HIGH: [0, HIGH] (OpenRLHF 0.11.2)
    is_correction_gating: what icepop / seq-mask-tis gate on: ratio (π_old/μ), or the sampled token's binary_kl or tv between μ and π_old (an upper bound only; seq-mask-tis: the sequence's mean)
    multi_reward_norm: with several reward.sources: sum (GRPO normalises the weighted sum in each group) or per_source (GDPO: each source normalised in its group, then the weighted sum whitened over the batch; group_norm only); aliases gdpo, normalize_then_sum, sum_then_normalize
    """

    estimator: Estimator = "group_norm"
    gamma: float = 1.0
    lambd: float = 1.0
    no_std_norm: bool = False
    is_correction_enable: bool = False
    is_correction_type: ISCorrection = "tis"
    is_correction_threshold: tuple[float, ...] | float = (0.5, 5.0)
    is_correction_gating: ISGating = "ratio"
    multi_reward_norm: str = "sum"

    def __post_init__(self) -> None:
        check_is_correction(self)
        object.__setattr__(self, "multi_reward_norm", canonical(self.multi_reward_norm))
        require(self.multi_reward_norm == "sum" or self.estimator == "group_norm",
                "multi_reward_norm", "sum unless estimator is group_norm (GDPO normalises "
                "like GRPO)", self.multi_reward_norm)
        require(self.estimator in get_args(Estimator), "estimator",
                f"one of {get_args(Estimator)}", self.estimator)
        for name in ("gamma", "lambd"):
            value = getattr(self, name)
            require(0.0 <= value <= 1.0, name, "a float in [0, 1]", value)


@dataclass(frozen=True, kw_only=True)
class AlgoConfig:
    """The algorithm: advantage estimation, the KL term, and the papers' tricks.

    dynamic_filtering_enable: DAPO's dynamic sampling: train only on groups whose mean score (the reward function's `scores`, else its reward) lies strictly inside dynamic_filtering_range; a synchronous run draws more prompts until rollout.batch_size groups pass (rollout.vllm_generate_batch_size per round)
    dynamic_filtering_range: (low, high) of that mean
    loss_agg: how token losses become one number (Dr.GRPO: seq-mean-token-sum-norm)
    """

    advantage: EstimatorConfig = field(default_factory=EstimatorConfig)
    kl: KLConfig = field(default_factory=KLConfig)
    dynamic_filtering_enable: bool = False
    dynamic_filtering_range: tuple[float, float] = (0.0, 1.0)
    loss_agg: Aggregation = "token-mean"
    ptx: PtxConfig = field(default_factory=PtxConfig)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dynamic_filtering_range", tuple(self.dynamic_filtering_range))
        low, high = self.dynamic_filtering_range
        require(math.isfinite(low) and math.isfinite(high) and low < high,
                "dynamic_filtering_range", "two finite floats low < high",
                self.dynamic_filtering_range)
        require(self.loss_agg in get_args(Aggregation), "loss_agg",
                f"one of {get_args(Aggregation)}", self.loss_agg)

    @property
    def needs_critic(self) -> bool:
        return self.advantage.estimator == "gae"


@dataclass(frozen=True, kw_only=True)
class RLRewardConfig(Workers, RewardConfig):
    """The reward sources, and how a reward is shaped before advantages.

    clip_range: rewards are clipped to [low, high] (one number c: [-c, c])
    overlong_buffer_len: DAPO length penalty: responses in the last N tokens before rollout.max_new_tokens lose up to overlong_penalty_factor of reward
    stop_properly_penalty_coef: ProRL's penalty on responses cut at the length limit (after the overlong one): in [0, 1] scales their reward, < 0 replaces it (null: off)
    normalize_running: standardise rewards with running mean/std over the run (alignflow; OpenRLHF has no such key)
    """

    clip_range: tuple[float, float] | float = (-10.0, 10.0)
    overlong_buffer_len: int | None = None
    overlong_penalty_factor: float = 1.0
    stop_properly_penalty_coef: float | None = None
    normalize_running: bool = False

    def __post_init__(self) -> None:
        self._no_reward_group()
        super().__post_init__()
        clip = self.clip_range
        clip = (-abs(clip), abs(clip)) if isinstance(clip, int | float) else tuple(clip)
        object.__setattr__(self, "clip_range", clip)
        require(clip[0] < clip[1], "clip_range", "two floats low < high", clip)
        require(math.isfinite(self.overlong_penalty_factor) and self.overlong_penalty_factor >= 0,
                "overlong_penalty_factor", "a finite float >= 0", self.overlong_penalty_factor)
        if self.overlong_buffer_len is not None:
            require(self.overlong_buffer_len >= 1, "overlong_buffer_len",
                    "an integer >= 1 or null", self.overlong_buffer_len)
        coef = self.stop_properly_penalty_coef
        if coef is not None:
            require(math.isfinite(coef) and coef <= 1, "stop_properly_penalty_coef",
                    "a float in [0, 1] (a scale), a negative one (a fixed reward) or null", coef)

    def _no_reward_group(self) -> None:
        """OpenRLHF's `--reward_num_nodes 0 --reward_num_gpus_per_node 0` beside a remote
        reward: it builds no reward model group. Rules and remote servers are scored here by
        one process without a GPU whatever the layout, so a 0 reads as that (1 × 1); with a
        reward model it stays refused."""
        zero = [k for k in ("num_nodes", "num_gpus_per_node") if getattr(self, k) == 0]
        if not zero:
            return
        require(not self.holds_model, zero[0], "an integer >= 1 where a reward model is "
                "scored (0, no reward group, goes with remote or rule rewards only)", 0)
        for key in zero:
            object.__setattr__(self, key, 1)


@dataclass(frozen=True, kw_only=True)
class LearnSettings:
    """Everything a learn step needs from the run's config, in one journal-able record:
    the algorithm, the trained roles' settings, reward shaping, batching, and the sampling
    facts the loss depends on."""

    algo: AlgoConfig
    actor: ActorConfig
    critic: CriticConfig
    reward: RLRewardConfig
    train: TrainConfig
    packing: bool  # pack each micro-batch into one row
    n_samples: int  # responses per prompt (groups are consecutive rows)
    temperature: float  # logits are scaled as when sampling
    max_len: int  # generation length (DAPO's overlong penalty, Dr.GRPO's constant)
    max_tokens: int | None = None  # token budget of a training micro-batch (dynamic batching)
    rollout_max_tokens: int | None = None  # of an inference micro-batch (dynamic batching)
    keep_groups: int | None = None  # refilled dynamic filtering: train on the first N passing
