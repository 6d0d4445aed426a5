"""The README's worked example of one's own data and reward function (issue 47, item 18):
its data file has the columns it names, its reward function answers as the README says, its
run line is one the README's dry-run test runs (`test_readme_runs.py`); and the README's
table of contents points at its headings."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

from tests.doc_commands import readme_runs

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def _reward_func():
    spec = importlib.util.spec_from_file_location(
        "exact_match", ROOT / "examples/reward_funcs/exact_match.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reward_func


def test_the_example_line_is_a_readme_run_line_naming_its_files():
    line = next(a for a in readme_runs() if "examples/reward_funcs/exact_match.py" in a)
    for key, value in (("--data.input_key", "question"), ("--data.label_key", "answer"),
                       ("--data.prompt_dataset", "examples/reward_funcs/sums.jsonl")):
        assert line[line.index(key) + 1] == value
    rows = [json.loads(x) for x in (ROOT / "examples/reward_funcs/sums.jsonl").open()]
    assert len(rows) >= 8 and all(set(r) == {"question", "answer"} for r in rows)


def test_the_example_reward_function_scores_the_last_number():
    prompts = ["What is 2 + 3? ", "What is 2 + 3? ", "What is 1 + 1? ", "Q "]
    responses = ["It is 4, no, 5", "5 or 6", "two", "7"]
    out = _reward_func()([p + r for p, r in zip(prompts, responses, strict=True)], prompts,
                         ["5", "5", "2", None])
    assert out["rewards"].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert out["extra_logs"]["answered"].tolist() == [1.0, 1.0, 0.0, 1.0]


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def test_the_table_of_contents_points_at_every_section():
    headings = re.findall(r"^## (.+)$", README, flags=re.M)
    anchors = {_slug(h) for h in headings}
    contents = README[:README.index("## ")]
    linked = re.findall(r"\]\(#([^)]+)\)", contents)
    assert set(linked) <= anchors  # no dead link
    assert len(linked) == len(headings)  # every section listed


def test_the_stores_text_is_short_paragraphs_by_topic():
    start = README.index("**Stores.**")
    block = README[start:README.index("From Python:", start)]
    paragraphs = [p for p in block.split("\n\n") if p.strip()]
    assert len(paragraphs) >= 6 and max(len(p.split()) for p in paragraphs) <= 120
