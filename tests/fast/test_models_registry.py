"""Model name resolution and the `alignflow models` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alignflow.cli import main
from alignflow.errors import ConfigError
from alignflow.tasks.zoo.registry import known_models, models_dir, resolve_model


def test_short_name_maps_to_prepared_folder(tiny_model_dir):
    assert resolve_model("tiny-llama") == str(tiny_model_dir)
    assert resolve_model("tiny-llama", prepare=False) == str(tiny_model_dir)


def test_local_path_is_returned_as_is(tiny_model_dir):
    assert resolve_model(str(tiny_model_dir)) == str(tiny_model_dir)
    assert resolve_model(tiny_model_dir) == str(tiny_model_dir)


def test_missing_path_names_the_path(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(ConfigError, match="no-such-model.*does not exist"):
        resolve_model(str(missing))


def test_unprepared_name_tells_how_to_prepare(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNFLOW_MODELS_DIR", str(tmp_path))
    assert models_dir() == tmp_path
    with pytest.raises(ConfigError, match=r"alignflow models prepare smollm2-135m"):
        resolve_model("smollm2-135m", prepare=False)


def test_minilm_is_the_packaged_bert():
    folder = resolve_model("minilm-l6")
    config = json.loads((Path(folder) / "config.json").read_text())
    assert config["model_type"] == "bert" and config["hidden_size"] == 384
    assert config["num_hidden_layers"] == 6


def test_uncached_hub_name_is_a_clear_error():
    with pytest.raises(ConfigError, match=r"'nobody-here/not-a-model' .*local Hugging Face cache"):
        resolve_model("nobody-here/not-a-model")


def test_cli_list(tmp_path, monkeypatch, capsys, tiny_model_dir):
    monkeypatch.setenv("ALIGNFLOW_MODELS_DIR", str(tiny_model_dir.parent))
    assert main(["models", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["NAME", "PREPARED", "SIZE"]
    table = {line.split()[0]: line.split() for line in lines[1:]}
    assert set(table) == set(known_models())
    assert table["tiny-llama"][1] == "yes" and table["tiny-llama"][-1] == str(tiny_model_dir)
    assert table["minilm-l6"][1] == "yes"


def test_cli_prepare_tiny(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ALIGNFLOW_MODELS_DIR", str(tmp_path))
    assert main(["models", "prepare", "tiny-llama"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"tiny-llama: {tmp_path / 'tiny-llama'} (")
    assert (tmp_path / "tiny-llama" / "model.safetensors").is_file()


def test_cli_unknown_name_is_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["models", "prepare", "gpt-17"])
    assert exc.value.code == 2
    assert "invalid choice: 'gpt-17'" in capsys.readouterr().err


def test_short_names_are_the_registered_specs():
    from alignflow.tasks.zoo import registry

    assert sorted(registry.NAMES) == sorted(registry.known_models())
