"""A reward spec in another project's syntax is answered with what alignflow expected and
what to write instead (issue 47, item 8: `rule:http://...` said "unknown reward rule
'http'"). alignflow's forms: `rule:NAME[:ARG]`, an http(s) URL, a `.py` file with
`reward_func`, a reward model folder or name, each optionally `NAME=SPEC`."""

from __future__ import annotations

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.cli.run_config import check_run

URL = "http://localhost:5000/get_reward"


@pytest.mark.parametrize(("spec", "fix"), [
    (f"rule:{URL}", f"after 'rule:', a form alignflow does not read; a reward server is its "
                    f"URL alone: write '{URL}'"),
    (f"remote:{URL}", f"after 'remote:'.*write '{URL}' \\(or NAME={URL} to name it"),
    ("http:localhost:5000", "is not a URL alignflow reads; a reward server is written "
                            "'http://localhost:5000'"),
    ("math:rule", r"expected a rule \(rule:gsm8k, .*an http\(s\):// reward server URL, a .py "
                  r"file defining reward_func, or a reward model folder or name"),
])
def test_foreign_reward_specs_say_what_to_write(spec, fix):
    with pytest.raises(ConfigError, match=fix) as info:
        check_run("grpo", None, [f"reward.sources=[{spec!r}]"], [])
    assert "unknown reward rule" not in str(info.value) and "\n" not in str(info.value)
