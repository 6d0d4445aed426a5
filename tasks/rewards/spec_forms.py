"""What a reward spec may be, said in the user's terms, and a fix for specs written in
another project's syntax (`rule:http://host/reward`, `remote:http://...`, `http:host:port`),
which alignflow would otherwise read as a rule named `http` or a model folder."""

from __future__ import annotations

import re

FORMS = ("a rule (rule:gsm8k, rule:correct, rule:format[:STYLE], rule:target:TEXT, rule:countdown), an "
         "http(s):// reward server URL, a .py file defining reward_func, or a reward model "
         "folder or name; any of them as NAME=SPEC")
_INNER_URL = re.compile(r"^(?P<prefix>[^/]+?):(?P<url>https?://.+)$")
_NO_SLASHES = re.compile(r"^(?P<scheme>https?):(?!//)(?P<rest>.+)$")


def foreign_hint(spec: str) -> str | None:
    """One line saying what to write instead, when `spec` is a URL in a foreign form."""
    inner = _INNER_URL.match(spec)
    if inner:
        return (f"reward source {spec!r} puts a URL after {inner['prefix'] + ':'!r}, a form "
                f"alignflow does not read; a reward server is its URL alone: write "
                f"{inner['url']!r} (or NAME={inner['url']} to name it; expected {FORMS})")
    bare = _NO_SLASHES.match(spec)
    if bare:
        url = f"{bare['scheme']}://{bare['rest']}"
        return (f"reward source {spec!r} is not a URL alignflow reads; a reward server is "
                f"written {url!r} (expected {FORMS})")
    return None
