"""Mask secrets in every text and config written anywhere a user or a bucket can see.

Configs, error messages and tracebacks end up in run.json, task logs, manifests, the
catalog's `runs` table, reports, TensorBoard and W&B, and from there in shared buckets. A
value can be a URL with a password, a command line with a token, or an exception that
printed an environment value. So every such text passes through `redact`, which replaces
- the value of each environment variable whose name looks secret (`*KEY*`, `*SECRET*`,
  `*TOKEN*`, `*PASSWORD*`, any case; values of 4+ characters that are not a number or a
  flag such as `false`), the password of each variable holding a URL with one
  (`DATABASE_URL`), and the value of each variable a config references as `${NAME}` or
  code registers (`register_secret`) whatever its name, with `<redacted $NAME>`;
- the userinfo of `scheme://user:pass@`, `scheme://:pass@` and `scheme://token@` URLs,
  query values named like credentials (`?token=`, `&api_key=`, `&X-Amz-Signature=`, ...),
  `Authorization` header values and Hugging Face tokens written out (`hf_...`, which
  `$HF_TOKEN` holds: masked by its name too), with `***`.
A config may hold `${NAME}` instead of a secret: the store keeps the reference, and the
run reads the value from its environment when it uses it (`expand`). Lives in `artifacts`
so every layer (the catalog too) may use it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import overload
from urllib.parse import unquote

SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|PASSWD", re.IGNORECASE)
MIN_SECRET_LEN = 4  # shorter values ("1", "on") would mask ordinary words and numbers
# flags and numbers are settings, not secrets (TOKENIZERS_PARALLELISM=false matches *TOKEN*)
_NOT_SECRET = re.compile(r"(true|false|yes|no|on|off|none|null|[-+]?\d+(\.\d+)?)",
                         re.IGNORECASE)
_URL_USERINFO = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^\s:/@]*)"
                           r"(?P<colon>:?)(?P<secret>[^\s@/]*)@")
_QUERY = re.compile(r"(?P<head>[?&;][\w.-]*?(?:token|key|secret|passw(?:or)?d|pwd|signature|"
                    r"sig|auth|credential)[\w.-]*=)(?!\*\*\*|<redacted|\$\{)[^&\s#'\"]+",
                    re.IGNORECASE)
_AUTH = re.compile(r"(?P<head>authorization['\"]?\s*[:=]\s*['\"]?(?:(?:bearer|basic|token)"
                   r"\s+)?)(?!\*\*\*|<redacted|\$\{)[^\s'\",}]+", re.IGNORECASE)
_HF_TOKEN = re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")  # a Hugging Face access token
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_REFERENCED: dict[str, str] = {}  # NAME -> value of variables a config referenced


def _userinfo(match: re.Match) -> str:
    if _REFERENCE.fullmatch(match["secret"] or match["user"]):
        return match.group(0)  # `${NAME}`: a reference to the environment, not a secret
    if match["colon"]:  # user:pass or :pass -> the user stays, the password goes
        return f"{match['head']}{match['user']}:***@"
    return f"{match['head']}***@"  # a token used as the user


def _is_secret(value: str) -> bool:
    return len(value.strip()) >= MIN_SECRET_LEN and not _NOT_SECRET.fullmatch(value.strip())


def _url_passwords(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """(name, password) of each variable holding a URL with a password, whatever its name
    (`DATABASE_URL=postgres://app:PASS@db/x`): code that prints the password alone, as
    written or %-decoded."""
    found = [(name, match["secret"]) for name, value in env.items() if "://" in value
             for match in _URL_USERINFO.finditer(value)
             if match["colon"] and _is_secret(match["secret"])
             and not _REFERENCE.fullmatch(match["secret"])]
    return found + [(name, unquote(pw)) for name, pw in found if unquote(pw) != pw]


def secret_values(environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(name, value) of each secret-looking variable and of each URL password a variable
    holds, longest value first (so a secret that contains another is masked whole)."""
    env = os.environ if environ is None else environ
    found = [(name, value) for name, value in env.items()
             if SECRET_NAME.search(name) and _is_secret(value)] + _url_passwords(env)
    if environ is None:  # this process: also what its configs referenced
        found += [(n, v) for n, v in _REFERENCED.items()
                  if len(v.strip()) >= MIN_SECRET_LEN and (n, v) not in found]
    return sorted(found, key=lambda nv: -len(nv[1]))


@overload
def redact(text: str, environ: Mapping[str, str] | None = None) -> str: ...
@overload
def redact(text: None, environ: Mapping[str, str] | None = None) -> None: ...
def redact(text: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """`text` with secret environment values and URL passwords masked (None stays None)."""
    if not text:
        return text
    for name, value in secret_values(environ):
        if value in text:
            text = text.replace(value, f"<redacted ${name}>")
    text = _URL_USERINFO.sub(_userinfo, text)
    text = _QUERY.sub(r"\g<head>***", text)
    text = _HF_TOKEN.sub("hf_***", text)
    return _AUTH.sub(r"\g<head>***", text)


def references(text: str) -> list[str]:
    """The `${NAME}` environment references in a config value."""
    return _REFERENCE.findall(text)


def expand(text: str, where: str) -> str:
    """`text` with each `${NAME}` replaced by the variable's value, which is masked from then
    on wherever this process writes (`where` names the key in the error for a variable that
    is not set)."""
    def value(match: re.Match) -> str:
        name = match.group(1)
        if name not in os.environ:
            from alignflow.errors import ConfigError

            raise ConfigError(f"{where}: ${{{name}}} is not set in this environment; expected "
                              f"the variable to hold the value (export {name}=...)")
        _REFERENCED[name] = os.environ[name]
        return os.environ[name]
    return _REFERENCE.sub(value, text)


def register_secret(name: str, value: str) -> None:
    """Mask `value` (as `<redacted $NAME>`) wherever this process writes from now on."""
    _REFERENCED[name] = value


def mask_referenced(value: object) -> None:
    """Mask from now on the variables every `${NAME}` inside `value` (a config) names."""
    if isinstance(value, str):
        for name in references(value):
            if name in os.environ:
                _REFERENCED[name] = os.environ[name]
    elif isinstance(value, Mapping):
        for item in value.values():
            mask_referenced(item)
    elif isinstance(value, list | tuple):
        for item in value:
            mask_referenced(item)


def redact_tree(value: object, environ: Mapping[str, str] | None = None) -> object:
    """`redact` applied to every string inside JSON-like data (dicts, lists)."""
    if isinstance(value, str):
        return redact(value, environ)
    if isinstance(value, Mapping):
        return {k: redact_tree(v, environ) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_tree(v, environ) for v in value]
    return value
