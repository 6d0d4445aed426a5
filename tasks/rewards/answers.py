"""What the rule rewards read from a response (its final number, its answer marker) and
which `rule:` specs exist: plain Python, apart from the rule sources that score batches
into tensors (`rules.py`), so that checking a config imports no torch."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from alignflow.errors import ConfigError

# A number as GSM8K writes it: optional sign and $, thousands commas, optional decimals.
_NUM = r"-?(?:\$\s?)?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_HASH = re.compile(rf"####\s*({_NUM})")
_BOXED = re.compile(rf"\\boxed\s*\{{\s*(?:\\text\{{\s*)?({_NUM})")
_ANSWER_IS = re.compile(rf"answer\s+is\s*[:=]?\s*(?:\\?\(|\*\*)?\s*({_NUM})", re.IGNORECASE)
_ANY_NUM = re.compile(_NUM)
FORMATS: dict[str, re.Pattern[str]] = {"hash": _HASH, "boxed": _BOXED}


def parse_number(text: str) -> Decimal | None:
    """'$1,234.50' → Decimal('1234.50'); None when it is not a number."""
    clean = text.replace(",", "").replace("$", "").replace(" ", "")
    try:
        value = Decimal(clean)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def extract_answer(response: str) -> Decimal | None:
    """The model's final number: `#### N`, else `\\boxed{N}`, else "answer is N", else the
    last number in the text (the last match of the first pattern that matches)."""
    for pattern in (_HASH, _BOXED, _ANSWER_IS, _ANY_NUM):
        found = pattern.findall(response)
        if found:
            return parse_number(found[-1])
    return None


def extract_label(label: str | None) -> Decimal | None:
    """A label is either a bare number ('1,000') or a full GSM8K solution ending '#### N'."""
    if label is None:
        return None
    found = _HASH.findall(label)
    return parse_number(found[-1] if found else label.strip())


def is_correct(response: str, label: str | None) -> bool:
    """Numeric equality of the extracted answer and the label (18 == 18.0 == 18.00)."""
    got, want = extract_answer(response), extract_label(label)
    return got is not None and want is not None and got == want


def has_format(response: str, style: str = "hash") -> bool:
    """True when the response holds a final-answer marker of `style` with a number."""
    return FORMATS[style].search(response) is not None


def target_fraction(response: str, target: str) -> float:
    """Share of the response's characters covered by non-overlapping copies of `target`."""
    if not response or not target:
        return 0.0
    return min(1.0, response.count(target) * len(target) / len(response))


# rule name -> (the score keys, the log keys) its source returns (`rules.py` reads them)
RULE_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "gsm8k": (("format", "correct"), ("answer_found",)),
    "correct": (("correct",), ()),
    "format": (("format",), ()),
    "target": (("target", "present"), ()),
    "countdown": (("correct",), ()),
}
RULE_NAMES = tuple(sorted(RULE_KEYS))
LABELLED = frozenset({"gsm8k", "correct", "countdown"})  # rules that compare the answer with the label


def compares_label(spec: str) -> bool:
    """Whether `rule:<name>...` scores by comparing with each prompt's label: without labels
    such a rule scores every answer 0 for correctness."""
    return spec.startswith("rule:") and spec.split(":")[1] in LABELLED


def check_rule(spec: str) -> tuple[str, str | None]:
    """(name, argument) of `rule:<name>[:<arg>]`; ConfigError naming what is wrong."""
    from alignflow.tasks.rewards.spec_forms import foreign_hint

    hint = foreign_hint(spec)
    if hint is not None:
        raise ConfigError(hint)
    _, _, rest = spec.partition(":")
    name, _, arg = rest.partition(":")
    if name not in RULE_NAMES:
        raise ConfigError(f"unknown reward rule {name!r} in {spec!r}; expected one of "
                          f"{', '.join('rule:' + n for n in sorted(RULE_NAMES))}")
    style = arg or "hash"
    if name in ("gsm8k", "format") and style not in FORMATS:
        raise ConfigError(f"unknown format style {style!r} in 'rule:format:{style}'; "
                          f"expected one of {sorted(FORMATS)}")
    if name == "target" and not arg:
        raise ConfigError("'rule:target' needs a target string, e.g. 'rule:target:cat'")
    return name, arg or None
