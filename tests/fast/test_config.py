"""Typed configs: sources, precedence, parsing by annotation, errors, round-trips."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import pytest

from alignflow.errors import ConfigError, ConfigProblems
from alignflow.flows.config import (
    ConfigField,
    config_fields,
    dump_yaml,
    format_config_help,
    from_dict,
    invalid,
    load_config,
    resolve_config,
    to_dict,
)


@dataclass(frozen=True, kw_only=True)
class KLConfig:
    """KL penalty against the reference policy.

    coef: weight of the KL term
    """

    coef: float = 0.01
    estimator: Literal["k1", "k2", "k3"] = "k1"

    def __post_init__(self) -> None:
        if self.coef < 0:
            raise invalid("coef", f"must be >= 0, got {self.coef}")


@dataclass(frozen=True, kw_only=True)
class AlgoConfig:
    advantage_estimator: Literal["gae", "group_norm", "rloo"] = "group_norm"
    n_samples_per_prompt: int = field(default=4, metadata={"help": "responses per prompt"})
    use_kl_loss: bool = False
    kl: KLConfig = field(default_factory=lambda: KLConfig(coef=0.05))
    clip: tuple[float, float] = (0.2, 0.2)


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    path: str
    revision: str | None = None


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    stop: list[str] = field(default_factory=lambda: ["</s>"])
    weights: dict[str, float] = field(default_factory=dict)
    max_len: int | None = None


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    lr: float = 1e-6
    batch_size: int = 8
    micro_batch_size: int = 2

    def __post_init__(self) -> None:
        if self.batch_size % self.micro_batch_size:
            raise ValueError(f"batch_size {self.batch_size} is not a multiple of "
                             f"micro_batch_size {self.micro_batch_size}")

    @property
    def grad_accum(self) -> int:
        return self.batch_size // self.micro_batch_size


@dataclass(frozen=True, kw_only=True)
class CriticConfig:
    lr: float = 1e-5
    layers: int = 2


@dataclass(frozen=True, kw_only=True)
class FlowCfg:
    ALIASES: ClassVar[dict[str, str]] = {
        "advantage_estimator": "algo.advantage_estimator",
        "n_samples_per_prompt": "algo.n_samples_per_prompt",
        "init_kl_coef": "algo.kl.coef",
        "use_kl_loss": "algo.use_kl_loss",
        "stop": "data.stop",
        "actor_learning_rate": "train.lr",
    }
    model: ModelConfig = field(default_factory=lambda: ModelConfig(path="tiny"))
    data: DataConfig = field(default_factory=DataConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    critic: CriticConfig | None = None
    seed: int = 42


@dataclass(frozen=True, kw_only=True)
class NeedsPath:
    model: ModelConfig
    seed: int = 1


def _load(*sets: str, flags: list[str] | None = None, **kw) -> FlowCfg:
    return load_config(FlowCfg, sets=list(sets), flags=flags, **kw)


def _error(*sets: str, flags: list[str] | None = None, **kw) -> str:
    with pytest.raises(ConfigError) as info:
        _load(*sets, flags=flags, **kw)
    return str(info.value)


def test_defaults_equal_the_class_defaults():
    cfg = _load()
    assert cfg == FlowCfg()
    assert cfg.algo.kl == KLConfig(coef=0.05, estimator="k1")  # default_factory instance kept
    assert cfg.train.grad_accum == 4


def test_yaml_overrides_only_the_keys_it_names(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("algo:\n  kl:\n    estimator: k3\n  n_samples_per_prompt: 8\nseed: 7\n")
    cfg = _load(config_file=path)
    assert cfg.algo.kl == KLConfig(coef=0.05, estimator="k3")
    assert (cfg.algo.n_samples_per_prompt, cfg.seed) == (8, 7)
    assert cfg.train == TrainConfig() and cfg.model == ModelConfig(path="tiny")


def test_precedence_yaml_then_set_then_flags(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("algo: {kl: {coef: 0.1}}\n")
    assert _load(config_file=path).algo.kl.coef == 0.1
    assert _load("algo.kl.coef=0.2", config_file=path).algo.kl.coef == 0.2
    cfg = _load("algo.kl.coef=0.2", config_file=path, flags=["--init_kl_coef", "0.3"])
    assert cfg.algo.kl.coef == 0.3
    assert _load("seed=1", "seed=2").seed == 2  # later --set wins


def test_openrlhf_flags_map_through_aliases():
    cfg = _load(flags=["--advantage_estimator", "rloo", "--n_samples_per_prompt=16",
                       "--actor_learning_rate", "5e-7", "--use_kl_loss", "--train.batch_size", "4"])
    assert cfg.algo.advantage_estimator == "rloo"
    assert cfg.algo.n_samples_per_prompt == 16
    assert cfg.train.lr == 5e-7 and cfg.train.batch_size == 4
    assert cfg.algo.use_kl_loss is True
    custom = load_config(FlowCfg, flags=["--seed_value", "3"], aliases={"seed_value": "seed"})
    assert custom.seed == 3


def test_literal_error_lists_the_choices():
    assert _error("algo.advantage_estimator=foo") == (
        "config key 'algo.advantage_estimator' = 'foo' (from --set algo.advantage_estimator): "
        "expected one of 'gae', 'group_norm', 'rloo'")


def test_unknown_keys_suggest_the_closest(tmp_path):
    assert _error("algo.kl.coeff=1") == (
        "unknown config key 'algo.kl.coeff' in --set (did you mean 'algo.kl.coef'?)")
    assert "(did you mean 'algo.kl.coef'?)" in _error("coef=1")  # matched on the last part
    assert _error(flags=["--init_kl_coeff", "1"]) == (
        "unknown flag '--init_kl_coeff' (did you mean '--init_kl_coef'?)")
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  lrate: 1\n")
    assert _error(config_file=path) == (
        f"unknown config key 'train.lrate' in config file '{path}' (did you mean 'train.lr'?)")
    assert _error("nothing_like_it=1") == "unknown config key 'nothing_like_it' in --set"


@pytest.mark.parametrize(("text", "expected"), [
    ("true", True), ("True", True), ("1", True), ("yes", True), ("on", True),
    ("false", False), ("0", False), ("NO", False), ("off", False),
])
def test_bool_words(text, expected):
    assert _load(f"algo.use_kl_loss={text}").algo.use_kl_loss is expected


def test_bool_flags_and_errors():
    on = ["--use_kl_loss"]
    assert _load(flags=on).algo.use_kl_loss is True
    assert _load(flags=[*on, "false"]).algo.use_kl_loss is False
    assert _load(flags=[*on, "--no-use_kl_loss"]).algo.use_kl_loss is False
    assert _load(flags=["--use_kl_loss=0"]).algo.use_kl_loss is False
    assert _error("algo.use_kl_loss=maybe") == (
        "config key 'algo.use_kl_loss' = 'maybe' (from --set algo.use_kl_loss): "
        "expected a bool (true/false/1/0/yes/no)")
    assert _error(flags=["--no-seed"]).startswith("unknown flag '--no-seed'")


def test_optional_values_and_sections(tmp_path):
    assert _load("model.revision=main").model.revision == "main"
    assert _load("model.revision=main", "model.revision=null").model.revision is None
    assert _load("data.max_len=128").data.max_len == 128
    assert _load("data.max_len=None").data.max_len is None
    assert _load("critic.layers=3").critic == CriticConfig(layers=3)
    assert _load("critic.layers=3", "critic=null").critic is None
    path = tmp_path / "c.yaml"
    path.write_text("critic: {lr: 0.001}\n")
    assert _load(config_file=path).critic == CriticConfig(lr=0.001)
    assert "expected int | None" in _error("data.max_len=lots")


def test_lists_tuples_and_dicts(tmp_path):
    assert _load("data.stop=a,b").data.stop == ["a", "b"]
    assert _load('data.stop=[x, "y,z"]').data.stop == ["x", "y,z"]
    assert _load("data.stop=").data.stop == []
    assert _load(flags=["--stop", "a", "b,c", "--seed", "1"]).data.stop == ["a", "b", "c"]
    assert _load("algo.clip=0.1,0.3").algo.clip == (0.1, 0.3)
    assert "expected 2 items" in _error("algo.clip=0.1,0.2,0.3")
    assert _load("data.weights=gsm8k=0.5,math=2").data.weights == {"gsm8k": 0.5, "math": 2.0}
    assert _load("data.weights={a: 1}").data.weights == {"a": 1.0}
    assert "expected a mapping" in _error("data.weights=gsm8k")
    path = tmp_path / "c.yaml"
    path.write_text("data:\n  stop: [q, r]\n  weights: {a: 3}\nalgo: {clip: [1, 2]}\n")
    cfg = _load(config_file=path)
    assert (cfg.data.stop, cfg.data.weights, cfg.algo.clip) == (["q", "r"], {"a": 3.0}, (1.0, 2.0))


def test_wrong_types_name_key_value_and_type(tmp_path):
    assert _error("train.batch_size=abc") == (
        "config key 'train.batch_size' = 'abc' (from --set train.batch_size): expected int")
    assert "expected int" in _error("train.batch_size=1.5")
    assert "expected float" in _error(flags=["--actor_learning_rate", "fast"])
    path = tmp_path / "c.yaml"
    path.write_text("model: {path: 123}\n")
    assert _error(config_file=path) == (
        f"config key 'model.path' = 123 (from config file '{path}'): expected str (quote it in YAML)")
    assert "a AlgoConfig section" in _error("algo=3")
    assert "needs a value" in _error(flags=["--seed"])
    assert "expected KEY=VALUE" in _error("seed")
    assert "unexpected argument 'x'" in _error(flags=["x"])


def test_configs_are_frozen():
    cfg = _load()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.train.lr = 1.0  # type: ignore[misc]


def test_post_init_failures_become_located_config_errors():
    assert _error("algo.kl.coef=-1") == "config key 'algo.kl.coef': must be >= 0, got -1.0"
    assert _error("train.micro_batch_size=3") == (
        "invalid TrainConfig at 'train': batch_size 8 is not a multiple of micro_batch_size 3")
    with pytest.raises(ConfigError, match="missing required config key 'model.path'"):
        load_config(NeedsPath)
    assert load_config(NeedsPath, sets=["model.path=m"]).model == ModelConfig(path="m")


def test_to_dict_from_dict_round_trip():
    cfg = _load("data.stop=a,b", "data.weights=x=1.5", "critic.lr=0.5", "algo.clip=0.1,0.2",
                "model.revision=r1")
    data = json.loads(json.dumps(to_dict(cfg)))
    assert data["algo"] == {"advantage_estimator": "group_norm", "n_samples_per_prompt": 4,
                            "use_kl_loss": False, "kl": {"coef": 0.05, "estimator": "k1"},
                            "clip": [0.1, 0.2]}
    assert data["critic"] == {"lr": 0.5, "layers": 2}
    assert from_dict(FlowCfg, data) == cfg
    with pytest.raises(ConfigError, match=r"unknown config key 'algo.kll' in dict \(did you mean 'algo.kl'\?\)"):
        from_dict(FlowCfg, {"algo": {"kll": {}}})
    with pytest.raises(ConfigError, match="expected int"):
        from_dict(FlowCfg, {"seed": "x"})


def test_dump_yaml_reads_back_equal(tmp_path):
    cfg = _load("train.lr=3e-5", "data.stop=[a, '1']", "critic.layers=1")
    path = tmp_path / "dump.yaml"
    path.write_text(dump_yaml(cfg))
    assert _load(config_file=path) == cfg
    assert dump_yaml(cfg).startswith("model:\n  path: tiny\n  revision: null\n")


def test_file_errors(tmp_path):
    missing = tmp_path / "nope.yaml"
    assert _error(config_file=missing) == f"config file '{missing}' not found"
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: 1\nalgo: [1, 2\ntrain: {}\n")
    message = _error(config_file=bad)
    assert message.startswith(f"config file '{bad}' line 3: malformed YAML")
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    assert _error(config_file=listed) == (
        f"config file '{listed}': expected a mapping of config keys at the top level, got a list")
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert _load(config_file=empty) == FlowCfg()


def test_config_fields_and_help_text():
    found = {f.path: f for f in config_fields(FlowCfg)}
    assert list(found)[:4] == ["model.path", "model.revision", "data.stop", "data.weights"]
    assert found["algo.kl.coef"] == ConfigField("algo.kl.coef", "float", 0.05, False,
                                                "weight of the KL term")
    assert found["algo.n_samples_per_prompt"].help == "responses per prompt"
    assert found["algo.kl.estimator"].type == "one of 'k1', 'k2', 'k3'"
    assert found["critic"] == ConfigField("critic", "CriticConfig | None", None, False, "")
    assert found["critic.lr"].default == 1e-5 and found["data.stop"].default == ["</s>"]
    assert len(found) == 18
    assert config_fields(NeedsPath)[0].required is True
    text = format_config_help(FlowCfg)
    assert "float = 0.05  -- weight of the KL term  (also --init_kl_coef)" in text
    assert "  algo.kl.coef  " in text


def test_non_frozen_class_is_refused():
    @dataclass
    class Loose:
        x: int = 1

    with pytest.raises(TypeError, match="frozen=True"):
        load_config(Loose)


def test_every_problem_is_reported_at_once(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("algo: {klx: 1}\n")
    with pytest.raises(ConfigProblems) as info:
        _load("algo.kl.coef=-1", "train.batch_size=abc", "nope=1", config_file=path,
              flags=["--init_kl_coeff", "1", "2", "--seed", "x", "--stop", "a"])
    assert [str(p) for p in info.value.problems] == [
        f"unknown config key 'algo.klx' in config file '{path}' (did you mean 'algo.kl'?)",
        "unknown config key 'nope' in --set",
        "unknown flag '--init_kl_coeff' (did you mean '--init_kl_coef'?)",
        "config key 'algo.kl.coef': must be >= 0, got -1.0",
        "config key 'train.batch_size' = 'abc' (from --set train.batch_size): expected int",
        "config key 'seed' = 'x' (from --seed): expected int",
    ]
    assert str(info.value).startswith("6 problems in the config:\n  unknown config key")


def test_resolve_config_says_where_each_value_came_from():
    resolved = resolve_config(FlowCfg, sets=["seed=3"], flags=["--init_kl_coef", "0.2"],
                              base={"train.lr": (0.5, "a base"), "seed": (1, "a base")})
    assert resolved.config.train.lr == 0.5 and resolved.config.seed == 3
    assert resolved.origins == {"train.lr": "a base", "seed": "--set seed",
                                "algo.kl.coef": "--init_kl_coef"}
