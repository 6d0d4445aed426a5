"""The KubeRay manifests as a cluster needs them (issue 26 §2): each runs a command that
trains from S3 with a rule reward on GSM8K's labels and uses every GPU its worker groups
ask for (its plan for that cluster); every pod has a /dev/shm in memory and an ephemeral
volume for the model caches; GPU pods select GPU nodes; the S3 credentials come from a
Secret; the image is a variable the README says how to build and push; a retry
(`backoffLimit`) re-runs a command that continues its run; the head gives up on a lost
node as fast as tasks/simulate/node_health.py says. That the commands run as
written: tests/infra/test_manifests_run.py."""

from __future__ import annotations

import pytest

from alignflow.flows import registry
from alignflow.flows.cli.run_config import build_config
from alignflow.tasks.plan.cluster import Cluster
from alignflow.tasks.simulate import node_health
from tests.infra.manifests import (
    IMAGE_VAR,
    MANIFESTS,
    ROOT,
    cluster_spec,
    flags_and_sets,
    gpu_shape,
    pod_specs,
    run_pod,
)


def _config(name: str):
    argv = run_pod(name)[1]
    assert argv[:2] == ["alignflow", "run"] and argv[2] in registry.names()
    flags, sets = flags_and_sets(argv)
    return build_config(argv[2], None, sets, flags)


@pytest.mark.parametrize("name", MANIFESTS)
def test_the_command_trains_from_s3_with_a_labelled_rule_reward(name):
    config = _config(name)
    assert config.actor.model_name_or_path.startswith("s3://")
    assert config.data.prompt_dataset.startswith("s3://") and config.data.label_key == "label"
    assert config.reward.specs == ("rule:gsm8k",)


@pytest.mark.parametrize("name", MANIFESTS)
def test_the_plan_uses_every_gpu_the_worker_groups_ask_for(name):
    shape = gpu_shape(name)
    plan = _config(name).run_plan(Cluster(nodes=shape.nodes, gpus_per_node=shape.gpus_per_node,
                                          cpus_per_node=shape.cpus_per_node))
    plan.check_fits()
    assert plan.gpus == shape.nodes * shape.gpus_per_node, plan


@pytest.mark.parametrize("name", MANIFESTS)
def test_a_retry_continues_the_same_run(name):
    obj, argv = run_pod(name)
    assert obj["spec"]["backoffLimit"] >= 1
    assert argv[argv.index("--run-id") + 1]  # a fixed run id ...
    assert _config(name).ckpt.load_enable  # ... continued when it exists (--load_checkpoint)


@pytest.mark.parametrize("name", MANIFESTS)
def test_every_pod_has_shm_in_memory_a_cache_volume_and_the_image_variable(name):
    for pod in pod_specs(name):
        volumes = {v["name"]: v for v in pod["volumes"]}
        for c in pod["containers"]:
            assert c["image"] == IMAGE_VAR
            mounts = {m["mountPath"]: volumes[m["name"]] for m in c["volumeMounts"]}
            env = {e["name"]: e for e in c["env"]}
            cache = mounts[env["XDG_CACHE_HOME"]["value"]]  # models and data are fetched here
            assert "emptyDir" in cache and c["resources"]["requests"]["ephemeral-storage"]
            for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
                assert env[key]["valueFrom"]["secretKeyRef"]["name"] == "alignflow-s3"
            if pod.get("restartPolicy"):  # the Job's driver pod: no NCCL, no vLLM
                continue
            assert mounts["/dev/shm"]["emptyDir"]["medium"] == "Memory"


@pytest.mark.parametrize("name", MANIFESTS)
def test_gpu_pods_select_gpu_nodes_and_tolerate_their_taint(name):
    for pod in pod_specs(name):
        limits = pod["containers"][0]["resources"]["limits"]
        if not limits.get("nvidia.com/gpu"):
            continue
        assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in \
            pod["tolerations"]


def test_the_readme_says_how_to_build_push_and_name_the_image():
    text = (ROOT / "infra/README.md").read_text()
    for step in ("docker build -f infra/docker/gpu.Dockerfile -t \"$ALIGNFLOW_IMAGE\" .",
                 "docker push \"$ALIGNFLOW_IMAGE\"",
                 "envsubst '$ALIGNFLOW_IMAGE' < infra/kuberay/rayjob.yaml | kubectl apply -f -"):
        assert step in text, step


@pytest.mark.parametrize("name", MANIFESTS)
def test_the_head_gives_up_on_a_lost_node_as_alignflow_chose(name):
    head = cluster_spec(name)["headGroupSpec"]["template"]["spec"]["containers"][0]
    plain = {e["name"]: e["value"] for e in head["env"] if "value" in e}
    assert {k: plain.get(k) for k in node_health.ENV} == dict(node_health.ENV)
