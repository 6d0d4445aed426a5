"""Offline datasets by name, local files and cached hub sets; prompt, pair and SFT prep."""

from alignflow.tasks.data.loading import load_dataset_spec, mix_datasets
from alignflow.tasks.data.named import NAMED, gsm8k_label
from alignflow.tasks.data.pairs import prepare_preferences, prepare_sft
from alignflow.tasks.data.prompts import Prepared, prepare_prompts

__all__ = [
    "NAMED",
    "Prepared",
    "gsm8k_label",
    "load_dataset_spec",
    "mix_datasets",
    "prepare_preferences",
    "prepare_prompts",
    "prepare_sft",
]
