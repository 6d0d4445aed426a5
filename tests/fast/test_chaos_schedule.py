"""The chaos bench's faults come from the seed alone: runs under different settings (Ray's
node-health defaults or alignflow's) must meet the same kinds at the same times, whatever
targets the cluster offers at each (bench/chaos_inject.py)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from chaos_inject import KINDS, Injector, schedule


def _replay(offer: dict[str, int]) -> Injector:
    """Fire a seed-0 schedule against a stand-in cluster offering `offer[kind]` targets."""
    hits: list[str] = []
    inj = Injector(sim=None, run_id="r", supervisor=None, interval=5.0, seed=0, horizon=300)
    inj._targets = lambda kind: {f"{kind} {i}": (lambda n=f"{kind} {i}": hits.append(n))
                                 for i in range(offer.get(kind, 0))}
    for at, kind in inj.plan:
        inj._fire(kind, at)
    assert hits == [f.target for f in inj.faults]
    return inj


def test_schedule_is_the_seeds_alone():
    one = schedule(0, 5.0, KINDS, 300)
    assert one == schedule(0, 5.0, KINDS, 300) and one != schedule(1, 5.0, KINDS, 300)
    assert 40 < len(one) < 80 and {k for _, k in one} == set(KINDS)
    assert all(2.5 <= b - a <= 7.5 for (a, _), (b, _) in zip(one, one[1:], strict=False))
    assert schedule(0, 0, KINDS, 300) == []  # an undisturbed run: no faults
    slower = schedule(0, 7.0, KINDS, 300)  # another undisturbed time: same kinds, in order
    assert [k for _, k in slower] == [k for _, k in one][:len(slower)]


def test_same_kinds_whatever_the_targets():
    full = _replay({"actor": 4, "engine": 2, "node": 1, "driver": 1})
    sparse = _replay({"actor": 1, "node": 3})  # no engine, no driver at any time
    kinds = [k for _, k in full.plan]
    assert sparse.plan == full.plan and not full.skipped
    assert sorted((f.at, f.kind) for f in sparse.faults + sparse.skipped) == full.plan
    assert {f.kind for f in sparse.skipped} == {"engine", "driver"}
    assert len(sparse.skipped) == kinds.count("engine") + kinds.count("driver")


def test_a_node_is_not_hit_while_its_replacement_joins():
    inj = Injector(sim=None, run_id="r", supervisor=None, interval=5.0, seed=0)
    inj._targets = lambda kind: {"worker node 1": lambda: None}
    inj.replacing.set()
    inj._fire("node", 1.0)
    assert not inj.faults and inj.skipped[0].target.endswith("being replaced")


def test_a_bracketed_ettr_is_against_the_mean_of_both_undisturbed_runs():
    from chaos import bracket

    base, after = {"wall_s": 500.0, "weights": "w"}, {"wall_s": 540.0, "weights": "w"}
    disturbed = [{"wall_s": 560.0, "ettr": round(500 / 560, 3)}]
    assert bracket(base, after, disturbed) is after and after["bitwise"]
    assert disturbed[0]["ettr"] == round(520 / 560, 3)
    assert disturbed[0]["ettr_first_base"] == round(500 / 560, 3)
    assert disturbed[0]["undisturbed_s"] == [500.0, 540.0]
