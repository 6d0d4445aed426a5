"""Reading an OpenRLHF launch script: its `openrlhf.cli.train_*` calls with their flags, the
shell filled in as far as it can be without running anything — variables from the
environment, else the script's own assignments (`NAME=${NAME:-default}`, arrays, heredoc
command strings `read -r -d '' CMD <<EOF`), `$((...))` arithmetic on known numbers, a call
inside a quoted `bash -c "..."` — and the built-in flow each call stands for. `$(...)` and
variables the script never sets are left as written, for the shell that runs the result.
A command's words are the shell's: `$(...)` and `${...}` stay whole, a pipe, `;` or `&&`
ends the command, and redirections (`> log`, `2>&1`) are left out, each said."""

from __future__ import annotations

import ast
import operator
import os
import re
import shlex
from dataclasses import dataclass

from alignflow.errors import ConfigError

CALL = re.compile(r"openrlhf\.cli\.(train_\w+)")
VAR = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}|\$(\w+)")
ARITH = re.compile(r"\$\(\(([^()]*)\)\)")
ASSIGN = re.compile(r"^\s*(?:export\s+|readonly\s+|local\s+)?(\w+)=(.*)$", re.S)
ARRAY = re.compile(r"\"?\$\{(\w+)\[@\]\}\"?")  # "${A[@]}": its words, each one token
ANSI_C = re.compile(r"\$'((?:[^'\\]|\\.)*)'")
HEREDOC = re.compile(r"^[^\n]*?\bread\b[^\n]*?\s(\w+)\s*<<-?\s*['\"]?(\w+)['\"]?[^\n]*\n(.*?)\n\s*\2\s*$",
                     re.S | re.M)
ESTIMATOR_FLOW = {"gae": "ppo", "group_norm": "grpo", "dr_grpo": "dr_grpo", "rloo": "rloo",
                  "reinforce": "reinforce_pp", "reinforce_baseline": "reinforce_pp_baseline",
                  "flash_reinforce": "flash_reinforce"}
SCRIPT_FLOW = {"train_sft": "sft", "train_dpo": "dpo", "train_rm": "rm", "train_kto": "kto",
               "train_prm": "prm", "train_kd": "distill"}
RL_SCRIPTS = ("train_ppo_ray", "train_ppo")
SUBST = re.compile(r"\$[({]")  # a command substitution or a parameter expansion: one word
MARK = re.compile("\x00(\\d+)\x00")
REDIRECT = frozenset({">", ">>", "<", ">&", "<&", "&>", "&>>", ">|", "<<<"})
ENDS = frozenset({"|", "||", "&&", ";", "&", "|&"})
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.floordiv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


@dataclass(frozen=True)
class Launch:
    script: str  # train_ppo_ray, train_sft, ...
    flags: list[str]  # the argv tokens after the module
    dropped: tuple[str, ...] = ()  # the command's redirections, left out

    @property
    def flow(self) -> str:
        """The built-in flow: by script, and for the PPO scripts by the advantage estimator."""
        if self.script not in RL_SCRIPTS:
            if self.script not in SCRIPT_FLOW:
                raise ConfigError(f"openrlhf.cli.{self.script} has no alignflow flow; expected "
                                  f"train_ppo_ray or one of {sorted(SCRIPT_FLOW)}")
            return SCRIPT_FLOW[self.script]
        estimator = "gae"
        for i, token in enumerate(self.flags[:-1]):
            if token in ("--advantage_estimator", "--algo.advantage.estimator"):
                estimator = self.flags[i + 1]
        if estimator not in ESTIMATOR_FLOW:
            raise ConfigError(f"advantage estimator {estimator!r}: expected one of "
                              f"{sorted(ESTIMATOR_FLOW)}")
        return ESTIMATOR_FLOW[estimator]


def _arith(text: str, values: dict[str, str]) -> str:
    """`$((expr))` over integers and known variables; left as written otherwise."""
    def one(match: re.Match) -> str:
        expr = re.sub(r"\$?\b([A-Za-z_]\w*)\b", lambda m: values.get(m.group(1), m.group(0)),
                      match.group(1))
        try:
            return str(_evaluate(ast.parse(expr.strip(), mode="eval").body))
        except (ValueError, SyntaxError, KeyError, ZeroDivisionError):
            return match.group(0)
    return ARITH.sub(one, text)


def _evaluate(node: ast.AST) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand)
    raise ValueError("not integer arithmetic")


def _expand(text: str, values: dict[str, str]) -> str:
    def one(match: re.Match) -> str:
        name = match.group(1) or match.group(3)
        if name in values:
            return values[name]
        return match.group(2) if match.group(2) is not None else match.group(0)
    text = ARRAY.sub(lambda m: values.get(m.group(1) + "[@]", ""), _arith(text, values))
    return VAR.sub(one, text)


def _ansi_c(text: str) -> str:
    """bash's $'...' quoting as a plain shell-quoted string (escapes decoded)."""
    def one(match: re.Match) -> str:
        decoded = match.group(1).encode().decode("unicode_escape")
        return shlex.quote(decoded)
    return ANSI_C.sub(one, text)


def _heredocs(text: str) -> str:
    """`read -r -d '' NAME <<EOF ... EOF` as the assignment `NAME='...'` (one line)."""
    def one(match: re.Match) -> str:
        body = " ".join(re.sub(r"\\\n", " ", match.group(3)).split())
        return f"{match.group(1)}={shlex.quote(body)}"
    return HEREDOC.sub(one, text)


def _logical_lines(text: str) -> list[str]:
    """Lines with continuations joined, comments dropped and array bodies kept together."""
    lines, buffer = [], ""
    for raw in re.sub(r"\\\n", " ", _heredocs(text)).splitlines():
        line = _ansi_c(raw.strip())  # after the split: a decoded \n is no line break
        if not buffer and (not line or line.startswith("#")):
            continue
        buffer = f"{buffer}\n{_ansi_c(raw)}" if buffer else line
        if buffer.count("(") <= buffer.count(")") and _quotes_closed(buffer):
            lines.append(buffer)
            buffer = ""
    return lines + ([buffer] if buffer else [])


def _quotes_closed(text: str) -> bool:
    """Whether `text` ends outside any quotes (a quoted value may span lines)."""
    try:
        shlex.split(text, comments=True)
    except ValueError:
        return False
    return True


def _assign(line: str, values: dict[str, str], fixed: set[str]) -> bool:
    """Record `NAME=value` (an array: `NAME[@]`); False when `line` is no assignment."""
    match = ASSIGN.match(line)
    if not match:
        return False
    name, value = match.group(1), match.group(2).strip()
    if value.startswith("(") and not value.startswith("(("):  # an array: NAME=( ... )
        tokens = shlex.split(_expand(value[1:value.rindex(")")], values), comments=True)
        if name not in fixed:
            values[name + "[@]"] = " ".join(shlex.quote(t) for t in tokens)
        return True
    try:
        parts = shlex.split(value, comments=True)
    except ValueError:
        parts = [value]
    if len(parts) > 1:
        return False  # `NAME=value command ...`: a command with its environment
    if name not in fixed:
        values[name] = _expand(parts[0] if parts else "", values)
    return True


def _protect(text: str) -> tuple[str, list[str]]:
    """`text` with each `$(...)` / `${...}` replaced by a marker the word reader keeps whole."""
    out, kept, i = [], [], 0
    while (found := SUBST.search(text, i)) is not None:
        depth, end = 0, -1
        for j in range(found.start() + 1, len(text)):
            depth += (text[j] in "({") - (text[j] in ")}")
            if depth == 0:
                end = j
                break
        if end < 0:  # unbalanced: left to the reader as written
            break
        kept.append(text[found.start():end + 1])
        out += [text[i:found.start()], f"\x00{len(kept) - 1}\x00"]
        i = end + 1
    return "".join(out) + text[i:], kept


def shell_words(text: str) -> tuple[list[str], list[str]]:
    """(the words of the command in `text` that calls `openrlhf.cli.train_*`, else of its
    last, with its redirections left out) as the shell reads them; `ValueError` for
    unbalanced quotes."""
    marked, kept = _protect(text)
    lexer = shlex.shlex(marked, posix=True, punctuation_chars="<>&|;")
    lexer.whitespace_split, lexer.commenters = True, "#"
    words: list[str] = []
    dropped: list[str] = []
    target = False
    for raw in lexer:
        word = MARK.sub(lambda m: kept[int(m.group(1))], raw)
        if target:
            gap = "" if dropped[-1].endswith("&") else " "  # 2>&1 as written
            dropped[-1], target = f"{dropped[-1]}{gap}{word}", False
        elif word in ENDS:  # the command with the call, else the next one
            if any(CALL.search(w) for w in words):
                break
            words, dropped = [], []
        elif word in REDIRECT:
            fd = words.pop() if words and words[-1].isdigit() and re.search(
                rf"(?<![\w.-]){words[-1]}{re.escape(word)}", marked) else ""
            dropped.append(fd + word)
            target = True
        else:
            words.append(word)
    return words, dropped


def _calls(tokens: list[str], dropped: tuple[str, ...] = ()) -> list[Launch]:
    """The train_* calls in a command's tokens, also inside a quoted `bash -c "..."` (an
    `echo` of the command is no call)."""
    if tokens[:1] in (["echo"], ["printf"]):
        return []
    for i, token in enumerate(tokens):
        found = CALL.search(token)
        if not found:
            continue
        if any(c.isspace() for c in token):
            inner, more = shell_words(token)
            return _calls(inner, (*dropped, *more))
        return [Launch(found.group(1), tokens[i + 1:], dropped)]
    return []


def read_launches(text: str, env: dict[str, str] | None = None) -> list[Launch]:
    """Every `openrlhf.cli.train_*` call of a launch script, in order."""
    values = dict(os.environ if env is None else env)
    fixed, out = set(values), []
    for line in _logical_lines(text):
        if _assign(line, values, fixed) or not CALL.search(_expand(line, values)):
            continue
        try:
            tokens, dropped = shell_words(_expand(line, values))
        except ValueError:
            continue
        out += _calls(tokens, tuple(dropped))
    return out


def read_launch(text: str, env: dict[str, str] | None = None) -> Launch:
    """The first `openrlhf.cli.train_*` call of a launch script."""
    found = read_launches(text, env)
    if not found:
        raise ConfigError("no `openrlhf.cli.train_*` call found in the script; expected a launch "
                          "command such as `python3 -m openrlhf.cli.train_ppo_ray --pretrain ...`")
    return found[0]
