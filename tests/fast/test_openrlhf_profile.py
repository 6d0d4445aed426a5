"""OpenRLHF's defaults (chosen when its flags are given) keep alignflow's places — and the
split and column names of alignflow's default dataset, which describe that dataset."""

from __future__ import annotations

from alignflow.flows.cli.run_config import check_run


def _data(flags: list[str], sets: list[str] = ()) -> object:
    return check_run("grpo", None, list(sets), ["--n_samples_per_prompt", "4", *flags],
                    check=False).config.data


def test_a_logger_flag_alone_keeps_the_default_datasets_split_and_columns():
    data = _data(["--use_tensorboard", "/tmp/tb"])
    assert data.prompt_dataset == "alignflow:gsm8k"
    assert (data.prompt_split, data.input_key, data.label_key) == (None, "question", "label")


def test_a_dataset_the_user_names_takes_openrlhfs_split_and_columns():
    data = _data(["--prompt_data", "some/dataset"])
    assert (data.prompt_split, data.input_key) == ("train", "input")
    data = _data(["--use_tensorboard", "/tmp/tb"], ["data.prompt_dataset=some/dataset"])
    assert data.prompt_split == "train"


def test_alignflows_defaults_are_untouched_without_openrlhf_flags():
    data = check_run("grpo", None, [], [], check=False).config.data
    assert (data.prompt_split, data.input_key) == (None, "question")
