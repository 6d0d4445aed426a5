#!/usr/bin/env python3
r"""Extract the command-line flags of OpenRLHF's CLIs from a git checkout, per tag.

Usage:
    python extract_openrlhf_flags.py GIT_DIR TAG [TAG ...] [--format json|tsv|matrix|summary]

Examples (list tags oldest first):
    # the nine generations compared in openrlhf-flags.md
    python extract_openrlhf_flags.py OpenRLHF.git v0.5.9.post1 v0.6.4 v0.7.5 v0.8.11 \
        v0.9.0 v0.9.10 v0.10.1.post2 v0.10.4 v0.11.0 --format summary
    # every release tag v0.5.0 .. v0.11.0 (how "first/last seen" there was found)
    python extract_openrlhf_flags.py OpenRLHF.git $(git -C OpenRLHF.git tag | sort -V |
        grep -E '^v0\.([5-9]|1[01])\.') > flags.json

GIT_DIR is a git directory (bare or not) of OpenRLHF's public repository.
For each TAG (any git revision: tag, branch or commit) every file
openrlhf/cli/*.py is read with `git show TAG:PATH` and parsed with the `ast`
module; nothing is imported or executed.

What counts as a flag: every call `<anything>.add_argument(...)`, so flags
added to argument groups, mutually exclusive groups or sub-parsers are found
too (sub-commands, if any, are not told apart: all flags of a file are listed
under the file's name).  Every positional string argument is an option string
(any prefix character: "-x", "--x", "+x"); a name without a prefix would be a
positional argument and is listed as is.  argparse's allow_abbrev (unambiguous
prefixes of long flags are accepted) is not expanded.

f-string option names (e.g. f"--{prefix}.adam.lr") are expanded when the
call sits inside a `for NAME in (<literal tuple/list>)` loop (or a nested set
of such loops); otherwise the pattern itself is listed, with `{...}` left in.

Defaults ("default" is the text shown, "default_value" the value used to
compare versions):
  * `default=<literal>`                -> the literal (ast.literal_eval); shown
    as written in the source (1e8 stays 1e8), strings shown double-quoted
  * `default=<constant expression>`    -> evaluated with a tiny evaluator that
    only knows literals, unary/binary arithmetic, int()/float()/str()/bool(),
    and conditional expressions over loop variables, e.g. int(1e8),
    float("inf"), 1e-6 if prefix == "actor" else 9e-6.  Marked "evaluated";
    shown as written unless it depends on a loop variable (then the value)
  * anything else                      -> "—" (non-literal, e.g. a timestamp)
  * no default, action="store_true"    -> False;  action="store_false" -> True
  * no default otherwise               -> None (argparse's own default)

Output records (one per tag x file x option string):
  tag, cli, flag, dest, default, default_value, default_kind, action, type,
  nargs, choices, required, help, pattern, line
"""

import argparse
import ast
import json
import subprocess
import sys

NON_LITERAL = "—"


def git(git_dir, *args):
    return subprocess.run(
        ["git", "-C", git_dir, *args], check=True, capture_output=True, text=True
    ).stdout


def cli_files(git_dir, rev):
    out = git(git_dir, "ls-tree", "--name-only", rev, "openrlhf/cli/")
    return sorted(p for p in out.split() if p.endswith(".py") and not p.endswith("__init__.py"))


class _Unknown(Exception):
    pass


_SAFE_CALLS = {"int": int, "float": float, "str": str, "bool": bool, "tuple": tuple, "list": list}


def const_eval(node, env):
    """Evaluate a constant expression; raise _Unknown when it is not one."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        vals = [const_eval(e, env) for e in node.elts]
        return tuple(vals) if isinstance(node, ast.Tuple) else (set(vals) if isinstance(node, ast.Set) else vals)
    if isinstance(node, ast.Dict):
        return {const_eval(k, env): const_eval(v, env) for k, v in zip(node.keys, node.values, strict=True)}
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise _Unknown(node.id)
    if isinstance(node, ast.UnaryOp):
        v = const_eval(node.operand, env)
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.UAdd):
            return +v
        if isinstance(node.op, ast.Not):
            return not v
        raise _Unknown("unaryop")
    if isinstance(node, ast.BinOp):
        a, b = const_eval(node.left, env), const_eval(node.right, env)
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
               ast.Div: lambda: a / b, ast.FloorDiv: lambda: a // b, ast.Pow: lambda: a ** b,
               ast.Mod: lambda: a % b}
        if type(node.op) in ops:
            return ops[type(node.op)]()
        raise _Unknown("binop")
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        a, b = const_eval(node.left, env), const_eval(node.comparators[0], env)
        op = node.ops[0]
        if isinstance(op, ast.Eq):
            return a == b
        if isinstance(op, ast.NotEq):
            return a != b
        if isinstance(op, ast.In):
            return a in b
        if isinstance(op, ast.NotIn):
            return a not in b
        raise _Unknown("compare")
    if isinstance(node, ast.IfExp):
        return const_eval(node.body if const_eval(node.test, env) else node.orelse, env)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _SAFE_CALLS:
        if node.keywords:
            raise _Unknown("call kwargs")
        return _SAFE_CALLS[node.func.id](*[const_eval(a, env) for a in node.args])
    if isinstance(node, ast.JoinedStr):
        return render_fstring(node, env, strict=True)
    raise _Unknown(type(node).__name__)


def render_fstring(node, env, strict=False):
    parts = []
    for v in node.values:
        if isinstance(v, ast.Constant):
            parts.append(str(v.value))
        elif isinstance(v, ast.FormattedValue):
            try:
                parts.append(str(const_eval(v.value, env)))
            except _Unknown:
                if strict:
                    raise
                parts.append("{" + ast.unparse(v.value) + "}")
        else:
            raise _Unknown("fstring part")
    return "".join(parts)


def fmt_value(v):
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, float):
        if v != v:
            return "nan"
        if v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, (tuple, list)):
        inner = ", ".join(fmt_value(x) for x in v)
        return f"({inner})" if isinstance(v, tuple) else f"[{inner}]"
    return repr(v)


class FlagVisitor(ast.NodeVisitor):
    def __init__(self, source=""):
        self.source = source
        self.loop_values = []  # list of (names, [values...]) for enclosing literal for-loops
        self.records = []

    # -- literal for-loops: for NAME in ("a", "b") / for A, B in (("a", 1), ...)
    def visit_For(self, node):
        try:
            seq = const_eval(node.iter, {})
            if not isinstance(seq, (tuple, list)):
                raise _Unknown("iter")
            if isinstance(node.target, ast.Name):
                names = [node.target.id]
                bindings = [(x,) for x in seq]
            elif isinstance(node.target, ast.Tuple) and all(isinstance(e, ast.Name) for e in node.target.elts):
                names = [e.id for e in node.target.elts]
                bindings = [tuple(x) for x in seq]
            else:
                raise _Unknown("target")
        except (_Unknown, TypeError):
            self.generic_visit(node)
            return
        self.loop_values.append((names, bindings))
        for stmt in node.body:
            self.visit(stmt)
        self.loop_values.pop()
        for stmt in node.orelse:
            self.visit(stmt)

    def segment(self, node):
        return ast.get_source_segment(self.source, node) or ast.unparse(node)

    def _envs(self):
        envs = [{}]
        for names, bindings in self.loop_values:
            envs = [dict(e, **dict(zip(names, b, strict=True))) for e in envs for b in bindings]
        return envs

    def visit_Call(self, node):
        self.generic_visit(node)
        if not (isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
            return
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        for env in self._envs():
            self._record(node, kw, env)

    def _record(self, node, kw, env):
        names, pattern = [], None
        for a in node.args:
            if isinstance(a, ast.Constant) and isinstance(a.value, str):
                names.append(a.value)
            elif isinstance(a, ast.JoinedStr):
                pattern = render_fstring(a, {}, strict=False)
                names.append(render_fstring(a, env, strict=False))
            else:
                names.append("<" + ast.unparse(a) + ">")

        def text(key):
            return ast.unparse(kw[key]) if key in kw else None

        def lit(key):
            if key not in kw:
                return None
            try:
                return const_eval(kw[key], env)
            except (_Unknown, TypeError, ValueError, ZeroDivisionError):
                return None

        action = lit("action") if "action" in kw else None
        if "action" in kw and action is None:
            action = text("action")
        value = None
        if "default" in kw:
            node_d = kw["default"]
            uses_loop_var = any(isinstance(n, ast.Name) and n.id in env for n in ast.walk(node_d))
            try:
                try:
                    value = ast.literal_eval(node_d)
                    kind = "literal"
                except (ValueError, TypeError, SyntaxError):
                    value = const_eval(node_d, env)
                    kind = "evaluated"
                if isinstance(value, str) or uses_loop_var:
                    default = fmt_value(value)
                else:  # keep the source spelling, e.g. 1e8, int(1e8), float("inf")
                    default = " ".join(self.segment(node_d).split())
            except (_Unknown, TypeError, ValueError, ZeroDivisionError):
                default, kind = NON_LITERAL, "non-literal: " + ast.unparse(node_d)
        elif action == "store_true":
            default, kind, value = "False", "implicit (store_true)", False
        elif action == "store_false":
            default, kind, value = "True", "implicit (store_false)", True
        else:
            default, kind = "None", "absent"
        dest = lit("dest")
        if dest is None:
            longs = [n for n in names if n.startswith("--")]
            first = longs[0] if longs else (names[0] if names else "")
            dest = first.lstrip("-+/").replace("-", "_")
        choices = lit("choices")
        help_text = lit("help")
        for n in names:
            self.records.append({
                "flag": n,
                "dest": dest,
                "default": default,
                "default_value": None if kind.startswith("non-literal") else fmt_value(value),
                "default_kind": kind,
                "action": action,
                "type": text("type"),
                "nargs": lit("nargs") if "nargs" in kw else None,
                "choices": list(choices) if isinstance(choices, (list, tuple, set)) else text("choices"),
                "required": bool(lit("required")),
                "help": help_text if isinstance(help_text, str) else text("help"),
                "pattern": pattern,
                "line": node.lineno,
            })


def extract(git_dir, tags):
    out = []
    for tag in tags:
        for path in cli_files(git_dir, tag):
            src = git(git_dir, "show", f"{tag}:{path}")
            v = FlagVisitor(src)
            v.visit(ast.parse(src, filename=path))
            cli = path.rsplit("/", 1)[-1][:-3]
            for r in v.records:
                out.append({"tag": tag, "cli": cli, **r})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("git_dir", help="git directory of OpenRLHF")
    ap.add_argument("tags", nargs="+", help="tags / revisions, oldest first")
    ap.add_argument("--format", choices=["json", "tsv", "matrix", "summary"], default="json")
    a = ap.parse_args(argv)
    recs = extract(a.git_dir, a.tags)
    if a.format == "json":
        json.dump(recs, sys.stdout, indent=1, ensure_ascii=False)
        print()
    elif a.format == "tsv":
        cols = ["tag", "cli", "flag", "default", "default_kind", "action", "type", "nargs", "required", "dest", "pattern", "line"]
        print("\t".join(cols))
        for r in recs:
            print("\t".join("" if r[c] is None else str(r[c]) for c in cols))
    elif a.format == "summary":  # per CLI: flag, first/last tag seen, newest default, default history
        print("cli\tflag\tfirst_seen\tlast_seen\tdefault_newest\tdefault_history")
        hist = {}
        for t in a.tags:  # tags in the order given (oldest first)
            for r in recs:
                if r["tag"] == t:
                    hist.setdefault((r["cli"], r["flag"]), []).append((t, r["default"], r["default_value"]))
        for (cli, flag), h in sorted(hist.items()):
            changes = [f"{t}: {d}" for i, (t, d, v) in enumerate(h) if i == 0 or v != h[i - 1][2]]
            print(f"{cli}\t{flag}\t{h[0][0]}\t{h[-1][0]}\t{h[-1][1]}\t{'; '.join(changes) if len(changes) > 1 else ''}")
    else:  # matrix: per CLI, flag x tag presence
        clis = sorted({r["cli"] for r in recs})
        for cli in clis:
            seen = {}
            for r in recs:
                if r["cli"] == cli:
                    seen.setdefault(r["flag"], set()).add(r["tag"])
            print(f"## {cli}")
            print("flag\t" + "\t".join(a.tags))
            for f in sorted(seen):
                print(f + "\t" + "\t".join("x" if t in seen[f] else "." for t in a.tags))
    return 0


if __name__ == "__main__":
    sys.exit(main())
