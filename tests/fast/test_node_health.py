"""alignflow's Ray health-check settings (tasks/simulate/node_health.py): a crashed node is
declared dead within seconds, and the settings stay at or above the floor chosen for CI's
2 busy cores (a live raylet would have to stall ~16 s to be given up on)."""

from __future__ import annotations

from alignflow.tasks.simulate import node_health

FLOOR = {"health_check_period_ms": 500, "health_check_timeout_ms": 5000,
         "health_check_failure_threshold": 3}  # below this: measure false deaths first


def test_every_setting_is_a_ray_config_entry_named_for_the_environment():
    assert all(k.startswith("RAY_health_check_") for k in node_health.ENV)
    assert set(node_health.system_config()) == set(FLOOR)


def test_the_settings_keep_the_margin_against_false_deaths():
    cfg = node_health.system_config()
    assert all(cfg[k] >= floor for k, floor in FLOOR.items()), cfg


def test_the_detection_bounds_follow_rays_probe_loop():
    # a crashed raylet refuses at once: threshold × period; a vanished host: × (period + timeout)
    assert node_health.detection_bound_s() == 1.5
    assert node_health.detection_bound_s(refused=False) == 16.5
    assert node_health.detection_bound_s(node_health.RAY_DEFAULTS) == 15.0
    assert node_health.detection_bound_s(node_health.RAY_DEFAULTS, refused=False) == 65.0
