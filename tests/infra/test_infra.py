"""infra/ is checked, not just shipped: manifests parse, use only fields KubeRay's CRDs
define, name the image the Dockerfile builds and a command the CLI and config accept."""

from __future__ import annotations

import re
import shlex
import tomllib
from datetime import datetime
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"

# Fields of KubeRay's ray.io/v1 CRDs (ray-operator/apis/ray/v1/*_types.go) that a manifest
# may set; anything else is a typo the API server would drop or refuse.
RAYCLUSTER_SPEC = {"headGroupSpec", "workerGroupSpecs", "rayVersion", "enableInTreeAutoscaling",
                   "autoscalerOptions", "headServiceAnnotations", "suspend"}
HEAD_GROUP = {"serviceType", "headService", "enableIngress", "rayStartParams", "template"}
WORKER_GROUP = {"groupName", "replicas", "minReplicas", "maxReplicas", "numOfHosts",
                "rayStartParams", "template", "scaleStrategy", "idleTimeoutSeconds", "suspend"}
RAYJOB_SPEC = {"activeDeadlineSeconds", "backoffLimit", "rayClusterSpec", "submitterPodTemplate",
               "metadata", "clusterSelector", "submitterConfig", "managedBy", "deletionStrategy",
               "entrypoint", "runtimeEnvYAML", "jobId", "submissionMode", "entrypointResources",
               "entrypointNumCpus", "entrypointNumGpus", "ttlSecondsAfterFinished",
               "shutdownAfterJobFinishes", "suspend"}
# the part of core/v1 PodSpec and Container these manifests use
POD_SPEC = {"containers", "volumes", "tolerations", "nodeSelector", "affinity",
            "serviceAccountName", "imagePullSecrets"}
CONTAINER = {"name", "image", "imagePullPolicy", "command", "args", "env", "envFrom", "ports",
             "resources", "volumeMounts", "lifecycle"}
STORE_VARS = {"ALIGNFLOW_STORE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"}


def _load(rel: str) -> dict:
    return yaml.safe_load((INFRA / rel).read_text())


def _image() -> str:
    """`title:version` from the Dockerfile's labels; the version must be the package's."""
    text = (INFRA / "docker/gpu.Dockerfile").read_text()
    title = re.search(r'image\.title="([^"]+)"', text).group(1)
    version = re.search(r'image\.version="([^"]+)"', text).group(1)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert version == project["version"]
    return f"{title}:{version}"


def _check_keys(obj: dict, allowed: set[str], where: str) -> None:
    unknown = set(obj) - allowed
    assert not unknown, f"{where}: fields KubeRay/Kubernetes do not define: {sorted(unknown)}"


def _check_cluster_spec(spec: dict, where: str) -> list[dict]:
    _check_keys(spec, RAYCLUSTER_SPEC, where)
    _check_keys(spec["headGroupSpec"], HEAD_GROUP, f"{where}.headGroupSpec")
    groups = [spec["headGroupSpec"]]
    for i, group in enumerate(spec["workerGroupSpecs"]):
        _check_keys(group, WORKER_GROUP, f"{where}.workerGroupSpecs[{i}]")
        assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
        groups.append(group)
    containers = []
    for group in groups:
        pod = group["template"]["spec"]
        _check_keys(pod, POD_SPEC, f"{where} pod spec")
        assert all(isinstance(v, str) for v in group["rayStartParams"].values())
        for c in pod["containers"]:
            _check_keys(c, CONTAINER, f"{where} container {c['name']}")
            containers.append(c)
    gpus = [c["resources"]["limits"].get("nvidia.com/gpu") for c in containers]
    assert any(gpus), f"{where}: no worker group asks for GPUs"
    return containers


@pytest.mark.parametrize("rel", ["kuberay/raycluster.yaml", "kuberay/rayjob.yaml"])
def test_kuberay_manifests_use_crd_fields_the_image_and_the_s3_store(rel):
    doc = next(yaml.safe_load_all((INFRA / rel).read_text()))
    assert doc["apiVersion"] == "ray.io/v1" and doc["metadata"]["name"]
    if doc["kind"] == "RayJob":
        _check_keys(doc["spec"], RAYJOB_SPEC, "RayJob.spec")
        spec = doc["spec"]["rayClusterSpec"]
    else:
        assert doc["kind"] == "RayCluster"
        spec = doc["spec"]
    for container in _check_cluster_spec(spec, rel):
        assert container["image"] == "${ALIGNFLOW_IMAGE}"  # built and pushed: infra/README.md
        names = {e["name"] for e in container["env"]}
        assert names >= STORE_VARS, f"{rel}: {container['name']} lacks {STORE_VARS - names}"
        store = next(e["value"] for e in container["env"] if e["name"] == "ALIGNFLOW_STORE")
        assert store.startswith("s3://")


def test_rayjob_entrypoint_is_a_command_the_cli_and_the_config_accept():
    from alignflow.flows import registry
    from alignflow.flows.cli.run_config import build_config

    argv = shlex.split(_load("kuberay/rayjob.yaml")["spec"]["entrypoint"])
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert argv[0] in scripts and argv[1] == "run" and argv[2] in registry.names()
    rest = argv[3:]
    assert rest[rest.index("--address") + 1] == "auto"
    named = ("--address", "--run-id", "--set")
    flags = [t for i, t in enumerate(rest) if t not in named and rest[i - 1] not in named
             and t != "--supervise"]
    assert "--supervise" in rest  # a dead driver restarts inside the pod (flows/cli/supervise.py)
    sets = [rest[i + 1] for i, t in enumerate(rest) if t == "--set"]
    config = build_config(argv[2], None, sets, flags)
    assert config.train.max_iterations == 20
    assert config.reward.specs == ("rule:gsm8k",) and config.data.label_key == "label"


def test_cluster_launcher_config_parses_and_runs_the_image():
    doc = _load("ray-cluster.yaml")
    assert doc["head_node_type"] in doc["available_node_types"]
    assert doc["docker"]["image"] == _image() and doc["provider"]["type"] == "aws"
    for node in doc["available_node_types"].values():
        assert "InstanceType" in node["node_config"]
        assert node.get("min_workers", 0) <= node.get("max_workers", doc["max_workers"])
    assert any("ray start --head" in c for c in doc["head_start_ray_commands"])
    assert any("ray start --address" in c for c in doc["worker_start_ray_commands"])


def test_cluster_launcher_head_gives_up_on_a_lost_node_as_alignflow_chose():
    from alignflow.tasks.simulate import node_health

    (start,) = [c for c in _load("ray-cluster.yaml")["head_start_ray_commands"]
                if "ray start --head" in c]
    words = shlex.split(start)
    env = dict(w.split("=", 1) for w in words[:words.index("ray")])  # NAME=VALUE ray start
    assert env == dict(node_health.ENV)


def test_dockerfile_pins_versions_that_install_together():
    text = (INFRA / "docker/gpu.Dockerfile").read_text()
    pins = dict(re.findall(r"\b(torch|vllm|deepspeed)==([\d.]+)", text))
    assert set(pins) == {"torch", "vllm", "deepspeed"}
    assert pins["deepspeed"].startswith("0.19.")
    assert "COPY . /opt/alignflow" in text and "ENTRYPOINT [" not in text


def test_local_cluster_script_is_executable_and_never_runs_ray_stop():
    script = INFRA / "local_cluster.sh"
    assert script.stat().st_mode & 0o111
    code = "\n".join(line for line in script.read_text().splitlines()
                     if not line.lstrip().startswith("#"))
    assert "ray stop" not in code and "pkill" not in code and "killall" not in code
    assert "worker_node" in code and "auth_token" in code


# batch/v1 CronJobSpec / JobSpec / PodSpec fields the campaign CronJob may set
CRONJOB_SPEC = {"schedule", "timeZone", "concurrencyPolicy", "startingDeadlineSeconds",
                "successfulJobsHistoryLimit", "failedJobsHistoryLimit", "suspend", "jobTemplate"}
JOB_SPEC = {"backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished", "template"}
JOB_POD_SPEC = POD_SPEC | {"restartPolicy"}


def _check_tick(argv: list[str], config_text: str, tmp_path: Path) -> None:
    """`alignflow campaign tick CONFIG [...]`, with a campaign config the loader accepts."""
    from alignflow.flows.campaign.rounds import check_round_flow
    from alignflow.flows.cli.campaign import load_campaign

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert Path(argv[0]).name in scripts and argv[1:3] == ["campaign", "tick"]
    path = tmp_path / "campaign.yaml"
    path.write_text(config_text)
    cfg = load_campaign(str(path), [])
    check_round_flow(cfg)
    assert cfg.inputs.source.startswith("s3://") and cfg.schedule.cron


def test_campaign_cronjob_ticks_the_campaign_with_the_image_and_store(tmp_path):
    from cronsim import CronSim

    job, configmap = yaml.safe_load_all((INFRA / "campaign/cronjob.yaml").read_text())
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "CronJob")
    _check_keys(job["spec"], CRONJOB_SPEC, "CronJob.spec")
    assert job["spec"]["concurrencyPolicy"] == "Forbid"
    CronSim(job["spec"]["schedule"], datetime.now())
    _check_keys(job["spec"]["jobTemplate"]["spec"], JOB_SPEC, "CronJob job spec")
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    _check_keys(pod, JOB_POD_SPEC, "CronJob pod spec")
    (container,) = pod["containers"]
    _check_keys(container, CONTAINER, "CronJob container")
    assert container["image"] == _image()
    assert {e["name"] for e in container["env"]} >= STORE_VARS
    mount = container["volumeMounts"][0]["mountPath"]
    argv = container["command"]
    assert argv[3] == f"{mount}/campaign.yaml" and configmap["kind"] == "ConfigMap"
    assert pod["volumes"][0]["configMap"]["name"] == configmap["metadata"]["name"]
    _check_tick(argv, configmap["data"]["campaign.yaml"], tmp_path)
    assert yaml.safe_load(configmap["data"]["campaign.yaml"]) == _load("campaign/campaign.yaml")


def test_campaign_crontab_line_is_five_fields_and_a_tick(tmp_path):
    from cronsim import CronSim

    lines = [line for line in (INFRA / "campaign/crontab").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert len(lines) == 1
    fields = lines[0].split()
    CronSim(" ".join(fields[:5]), datetime.now())
    command = shlex.split(" ".join(fields[5:]).split("&&", 1)[1].split(">>")[0])
    command = [t for t in command if "=" not in t]  # drop VAR=value prefixes
    config = ROOT / command[3]
    _check_tick(command, config.read_text(), tmp_path)
