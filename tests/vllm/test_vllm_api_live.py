"""The installed vLLM has the signatures alignflow's calls were checked against
(`tasks/engines/vllm/api.tsv`, recorded from vLLM 0.32's source; issue 21 §3.4): any
drift fails here, naming the callable, and the names the code imports resolve."""

from __future__ import annotations

import pytest

pytest.importorskip("vllm")

from alignflow.tasks.engines.vllm import api as vllm_api


def test_the_installed_vllm_matches_the_recorded_table():
    recorded, live = vllm_api.load_table(), vllm_api.live_table()
    drifted = {k: {"recorded": recorded.get(k), "installed": v} for k, v in live.items()
               if tuple(sorted(v)) != tuple(sorted(recorded.get(k, ())))}
    assert not drifted, drifted


def test_what_the_code_imports_is_what_the_table_describes():
    import vllm
    from vllm.entrypoints.llm import LLM
    from vllm.inputs import TokensPrompt
    from vllm.inputs.llm import TokensPrompt as Recorded
    from vllm.platforms import current_platform
    from vllm.sampling_params import SamplingParams

    assert vllm.LLM is LLM and vllm.SamplingParams is SamplingParams
    assert TokensPrompt is Recorded
    assert callable(current_platform.is_sleep_mode_available)
    assert vllm.__version__.startswith(vllm_api.VERSION + ".")
