"""A bench script runs with bench/ first on sys.path, so its file name must not be the name
of a module the code it measures imports (bench/deepspeed.py once hid DeepSpeed itself)."""
import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_no_bench_script_shadows_an_installed_module():
    shadowing = [p.name for p in BENCH.glob("*.py")
                 if (spec := importlib.util.find_spec(p.stem)) is not None
                 and Path(spec.origin or "").parent != BENCH]  # itself, when bench/ is on the path
    assert not shadowing, f"bench scripts named like installed modules: {shadowing}"
