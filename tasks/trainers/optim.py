"""The optimiser keys every training flow shares, under OpenRLHF 0.11's names.

`adam.*` (AdamW: lr, betas, eps, weight_decay), the schedule and clipping
(`lr_warmup_ratio`, `min_lr_ratio`, `max_norm`), and `train.*`: how examples become
optimizer steps (`batch_size` examples per step, cut into `micro_batch_size` micro-batches,
`max_epochs` passes). RL flows have the optimiser per trained role (`actor.adam.lr`,
`critic.adam.lr`, as OpenRLHF's train_ppo_ray); the offline flows and the loops have it at
the top level (`adam.lr`, `lr_warmup_ratio`, as train_sft / train_dpo). `trainer_config`
turns them into the `TrainerConfig` the trainers take.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, get_args

from alignflow.errors import require
from alignflow.tasks.trainers.config import OptimName, TrainerConfig
from alignflow.tasks.trainers.deepspeed.section import DSConfig

LossNormalizer = Literal["step", "micro_batch"]


@dataclass(frozen=True, kw_only=True)
class AdamConfig:
    """AdamW (no weight decay on 1-D parameters).

    lr: the peak learning rate
    betas: Adam's β1, β2
    eps: Adam's ε
    weight_decay: decoupled weight decay
    """

    lr: float = 1e-6
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "betas", tuple(self.betas))
        require(math.isfinite(self.lr) and self.lr > 0, "lr", "a finite float > 0", self.lr)
        require(all(0.0 <= b < 1.0 for b in self.betas), "betas", "two floats in [0, 1)",
                self.betas)
        require(math.isfinite(self.eps) and self.eps > 0, "eps", "a finite float > 0", self.eps)
        require(math.isfinite(self.weight_decay) and self.weight_decay >= 0, "weight_decay",
                "a finite float >= 0", self.weight_decay)


@dataclass(frozen=True, kw_only=True)
class MuonConfig:
    """Muon, for the hidden 2-D matrices when optim is muon (the rest stays on adam.*).

    lr: the Muon group's peak learning rate (the schedule scales it as it scales adam.lr)
    momentum: Muon's momentum
    nesterov: Nesterov momentum (OpenRLHF: --muon.no_nesterov turns it off)
    ns_steps: Newton-Schulz iterations that orthogonalise each update
    """

    lr: float = 0.02
    momentum: float = 0.95
    nesterov: bool = True
    ns_steps: int = 5

    def __post_init__(self) -> None:
        require(math.isfinite(self.lr) and self.lr > 0, "lr", "a finite float > 0", self.lr)
        require(0.0 <= self.momentum < 1.0, "momentum", "a float in [0, 1)", self.momentum)
        require(1 <= self.ns_steps < 100, "ns_steps", "an integer in [1, 100)", self.ns_steps)


@dataclass(frozen=True, kw_only=True)
class Optimizer:
    """AdamW (or Muon for the hidden matrices), a linear warmup then a half cosine down to
    `min_lr_ratio`·lr, and gradient clipping.

    optim: adam (AdamW everywhere), or muon (torch's Muon on the hidden 2-D matrices with muon.*, AdamW with adam.* on embeddings, heads, norms and biases, as OpenRLHF 0.11); with muon set max_norm 0, as OpenRLHF advises
    lr_warmup_ratio: share of the run's optimizer steps spent warming up
    min_lr_ratio: the LR the cosine ends at, as a share of adam.lr
    max_norm: clip the gradient norm to this (<= 0: no clipping)
    """

    adam: AdamConfig = field(default_factory=AdamConfig)
    optim: OptimName = "adam"
    muon: MuonConfig = field(default_factory=MuonConfig)
    lr_warmup_ratio: float = 0.03
    min_lr_ratio: float = 0.1
    max_norm: float = 1.0

    def __post_init__(self) -> None:
        for name in ("lr_warmup_ratio", "min_lr_ratio"):
            value = getattr(self, name)
            require(0.0 <= value <= 1.0, name, "a float in [0, 1]", value)
        require(math.isfinite(self.max_norm), "max_norm", "a finite float", self.max_norm)
        require(self.optim in get_args(OptimName), "optim", f"one of {get_args(OptimName)}",
                self.optim)

    def trainer_config(self, total_steps: int, train: TrainConfig, ds: DSConfig, *,
                       gradient_checkpointing: bool = False) -> TrainerConfig:
        """The trainer's config for a schedule of `total_steps` optimizer steps."""
        return TrainerConfig(lr=self.adam.lr, betas=self.adam.betas, eps=self.adam.eps,
                             weight_decay=self.adam.weight_decay,
                             lr_warmup_ratio=self.lr_warmup_ratio, min_lr_ratio=self.min_lr_ratio,
                             total_steps=max(total_steps, 1), train_batch_size=train.batch_size,
                             micro_train_batch_size=train.micro_batch_size,
                             max_norm=self.max_norm, dtype=ds.param_dtype,
                             gradient_checkpointing=gradient_checkpointing, optim=self.optim,
                             muon_lr=self.muon.lr, muon_momentum=self.muon.momentum,
                             muon_nesterov=self.muon.nesterov, muon_ns_steps=self.muon.ns_steps)


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """How examples become optimizer steps.

    batch_size: examples (RL: samples) per optimizer step
    micro_batch_size: examples per forward/backward; a step accumulates batch_size / micro_batch_size of them
    max_epochs: passes over the data (RL: over each iteration's samples)
    loss_normalizer: step: token losses are divided by the whole step's tokens, so however a step is cut into micro-batches its loss is one mean (OpenRLHF >= v0.10.3); micro_batch: each micro-batch's own mean, weighted by its share of the step's examples (OpenRLHF <= v0.10.2: a command line of flat flags gets it)
    """

    batch_size: int = 128
    micro_batch_size: int = 1
    max_epochs: int = 1
    loss_normalizer: LossNormalizer = "step"

    def __post_init__(self) -> None:
        for name in ("batch_size", "micro_batch_size", "max_epochs"):
            require(getattr(self, name) >= 1, name, "an integer >= 1", getattr(self, name))
        require(self.loss_normalizer in get_args(LossNormalizer), "loss_normalizer",
                f"one of {get_args(LossNormalizer)}", self.loss_normalizer)
        require(self.micro_batch_size < 1 or self.batch_size % self.micro_batch_size == 0,
                "batch_size",
                f"a multiple of micro_batch_size={self.micro_batch_size}", self.batch_size)
