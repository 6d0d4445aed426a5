"""User reward_func files: return forms, validation errors naming the file, loading faults."""

import pickle

import pytest
import torch

from alignflow.errors import ConfigError
from alignflow.tasks.rewards.python_func import PythonRewardFunc
from alignflow.tasks.rewards.sandbox import RewardFuncError
from tests.fixtures.code import allow

QUERIES = ["p1 aa", "p2 b", "p3 ccc", "p4 "]
PROMPTS = ["p1 ", "p2 ", "p3 ", "p4 "]
LABELS = ["x", None, "y", "z"]


def _write(tmp_path, body, name="reward.py"):
    path = tmp_path / name
    path.write_text(("import torch\n\n" if "torch." in body else "") + body)
    allow(path)
    return path


def _run(path):
    return PythonRewardFunc(path).score(QUERIES, PROMPTS, LABELS)


def test_tensor_return(tmp_path):
    path = _write(tmp_path, "def reward_func(queries, prompts, labels):\n"
                            "    return torch.tensor([float(len(q) - len(p))"
                            " for q, p in zip(queries, prompts)])\n")
    out = _run(path)
    assert out.rewards.tolist() == [2.0, 1.0, 3.0, 0.0]
    assert out.rewards.dtype == torch.float32
    assert out.scores == {} and out.extra_logs == {}


def test_list_return_and_labels_passed(tmp_path):
    path = _write(tmp_path, "def reward_func(queries, prompts, labels):\n"
                            "    return [0.0 if lab is None else 1 for lab in labels]\n")
    assert _run(path).rewards.tolist() == [1.0, 0.0, 1.0, 1.0]


def test_dict_return_openrlhf_style(tmp_path):
    path = _write(tmp_path, "def reward_func(queries, prompts, labels, **kw):\n"
                            "    r = torch.tensor([0.5, 1.5, -1.0, 2.0], dtype=torch.float64)\n"
                            "    return {'rewards': r, 'scores': (r > 0).float(),\n"
                            "            'extra_logs': {'len': [len(q) for q in queries]}}\n")
    out = _run(path)
    assert out.rewards.tolist() == [0.5, 1.5, -1.0, 2.0]
    assert out.rewards.dtype == torch.float32
    assert out.scores["score"].tolist() == [1.0, 1.0, 0.0, 1.0]
    assert out.extra_logs["len"].tolist() == [5.0, 4.0, 6.0, 3.0]


def test_dict_scores_by_name(tmp_path):
    path = _write(tmp_path, "def reward_func(queries, prompts, labels):\n"
                            "    return {'rewards': [1, 2, 3, 4], 'scores': {'a': [0, 0, 1, 1]}}\n")
    assert _run(path).scores["a"].tolist() == [0.0, 0.0, 1.0, 1.0]


@pytest.mark.parametrize(("returned", "message"), [
    ("[1.0, 2.0, 3.0]", "reward_func in reward.py returned 3 rewards for 4 queries; expected 4"),
    ("torch.ones(4, 2)", r"reward_func in reward.py returned \(4, 2\) rewards for 4 queries"),
    ("[1.0, float('nan'), 0.0, 0.0]", "non-finite rewards value .*index 1"),
    ("['a', 'b', 'c', 'd']", "returned non-numeric rewards"),
    ("None", "returned non-numeric rewards .*NoneType"),
    ("{'reward': [1, 2, 3, 4]}", r"returned a dict without 'rewards' \(keys: \['reward'\]\)"),
    ("{'rewards': [1, 2, 3, 4], 'extra_logs': {'k': [1, 2]}}",
     r"returned 2 extra_logs\['k'\] for 4 queries"),
])
def test_bad_returns_name_file_and_fault(tmp_path, returned, message):
    path = _write(tmp_path, f"def reward_func(queries, prompts, labels):\n    return {returned}\n")
    with pytest.raises(ConfigError, match=message) as info:
        _run(path)
    assert "\n" not in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"reward function file .*nope\.py not found"):
        PythonRewardFunc(tmp_path / "nope.py")


def test_missing_function(tmp_path):
    path = _write(tmp_path, "def reward(queries, prompts, labels):\n    return []\n")
    with pytest.raises(ConfigError, match=r"reward\.py defines no function 'reward_func'"):
        PythonRewardFunc(path)


def test_import_error_names_file(tmp_path):
    path = _write(tmp_path, "raise RuntimeError('boom')\n")
    with pytest.raises(ConfigError, match=r"importing reward function file .*reward\.py "
                                          r"failed: RuntimeError: boom"):
        PythonRewardFunc(path)


def test_same_file_name_in_two_folders_do_not_clash(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    fa = _write(tmp_path / "a", "def reward_func(q, p, l):\n    return [1.0] * len(q)\n")
    fb = _write(tmp_path / "b", "def reward_func(q, p, l):\n    return [2.0] * len(q)\n")
    assert _run(fa).rewards.tolist() == [1.0] * 4
    assert _run(fb).rewards.tolist() == [2.0] * 4
    assert _run(fa).rewards.tolist() == [1.0] * 4


def test_pickles_by_path(tmp_path):
    path = _write(tmp_path, "def reward_func(q, p, l):\n    return [3.0] * len(q)\n")
    clone = pickle.loads(pickle.dumps(PythonRewardFunc(path)))
    assert clone.score(QUERIES, PROMPTS, LABELS).rewards.tolist() == [3.0] * 4


def test_example_gsm8k_reward_file():
    from pathlib import Path

    example = Path(__file__).parents[2] / "examples" / "reward_funcs" / "gsm8k_reward.py"
    allow(example)
    out = PythonRewardFunc(example).score(
        ["Q: 2+2? A: 2+2=4\n#### 4", "Q: 2+2? A: \\boxed{4}", "Q: 2+2? A: #### 5"],
        ["Q: 2+2? A: "] * 3, ["4", "4", "4"])
    assert torch.allclose(out.rewards, torch.tensor([1.1, 1.0, 0.1]))
    assert out.scores["score"].tolist() == [1.0, 1.0, 0.0]


def test_openrlhf_math_reward_shape_batch_scalars_are_batch_logs(tmp_path):
    """OpenRLHF's examples/python/math_reward_func.py returns a 0-dim tensor accuracy in
    extra_logs: a metric of the batch, not a reason to fail."""
    path = tmp_path / "math_reward.py"
    path.write_text(
        "import torch\n"
        "def reward_func(queries, prompts, labels):\n"
        "    r = torch.tensor([float(q.endswith(l)) for q, l in zip(queries, labels)])\n"
        "    return {'rewards': r, 'scores': r, 'extra_logs': {'math_accuracy': r.mean(),\n"
        "            'first': [r[0].item()], 'per': r}}\n")
    allow(path)
    out = PythonRewardFunc(path).score(["a 1", "b 2", "c 3"], ["a ", "b ", "c "],
                                       ["1", "x", "3"])
    assert out.rewards.tolist() == [1.0, 0.0, 1.0]
    assert out.batch_logs == {"math_accuracy": pytest.approx(2 / 3), "first": 1.0}
    assert out.extra_logs["per"].tolist() == [1.0, 0.0, 1.0]


def test_a_file_not_allowed_or_changed_since_is_refused(tmp_path):
    from alignflow.artifacts.usercode import UntrustedCode

    path = tmp_path / "reward.py"
    path.write_text("def reward_func(q, p, l):\n    return [1.0] * len(q)\n")
    with pytest.raises(UntrustedCode, match="is not allowed to run in this process"):
        PythonRewardFunc(path)
    allow(path)
    PythonRewardFunc(path)
    path.write_text("def reward_func(q, p, l):\n    return [2.0] * len(q)\n")
    with pytest.raises(UntrustedCode, match="changed after it was allowed"):
        PythonRewardFunc(path)


@pytest.mark.parametrize("body,match", [
    ("    import time\n    time.sleep(60)\n", r"did not return within 1 s \(scoring\); its "
     r"process was stopped \(reward.func_timeout\)"),
    ("    import os\n    os._exit(3)\n", r"its process exited with code 3 while scoring"),
    ("    raise KeyError('k')\n", r"reward_func in .*reward.py raised KeyError: 'k'"),
])
def test_a_hang_or_an_exit_fails_in_one_line_and_the_caller_goes_on(tmp_path, body, match):
    import time

    path = _write(tmp_path, f"def reward_func(q, p, l):\n{body}    return [1.0] * len(q)\n")
    func = PythonRewardFunc(path, timeout=1.0)
    start = time.time()
    with pytest.raises(RewardFuncError, match=match) as err:
        func.score(QUERIES, PROMPTS, LABELS)
    assert "\n" not in str(err.value) and time.time() - start < 10
    ok = _write(tmp_path, "def reward_func(q, p, l):\n    return [1.0] * len(q)\n", "ok.py")
    assert _run(ok).rewards.tolist() == [1.0] * 4  # this process is fine


def test_draws_follow_the_task_seed(tmp_path):
    import random

    path = _write(tmp_path, "import random\ndef reward_func(q, p, l):\n"
                            "    return [random.random() for _ in q]\n")
    func = PythonRewardFunc(path)
    random.seed(7)
    first = func.score(QUERIES, PROMPTS, LABELS).rewards.tolist()
    random.seed(7)
    assert func.score(QUERIES, PROMPTS, LABELS).rewards.tolist() == first
