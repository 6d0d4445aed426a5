"""What the KubeRay manifests say, read as a test needs it: the run command of each (the
RayJob's entrypoint, the RayCluster file's Job), the pods with their containers, the GPU
cluster the worker groups make, and the environment a container gets."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
KUBERAY = ROOT / "infra/kuberay"
MANIFESTS = ("rayjob.yaml", "raycluster.yaml")
IMAGE_VAR = "${ALIGNFLOW_IMAGE}"


def documents(name: str) -> list[dict]:
    return list(yaml.safe_load_all((KUBERAY / name).read_text()))


def cluster_spec(name: str) -> dict:
    """The RayCluster spec of a manifest (a RayJob's `rayClusterSpec`)."""
    first = documents(name)[0]
    return first["spec"]["rayClusterSpec"] if first["kind"] == "RayJob" else first["spec"]


def run_pod(name: str) -> tuple[dict, list[str]]:
    """(the object that runs the command, its argv): the RayJob itself with its
    entrypoint, or the RayCluster file's Job with its container's command."""
    for doc in documents(name):
        if doc["kind"] == "RayJob":
            return doc, shlex.split(doc["spec"]["entrypoint"])
        if doc["kind"] == "Job":
            (container,) = doc["spec"]["template"]["spec"]["containers"]
            return doc, list(container["command"])
    raise AssertionError(f"{name}: no RayJob and no Job: nothing runs a command")


def pod_specs(name: str) -> list[dict]:
    """Every pod template of a manifest: the head, the worker groups, a Job's."""
    spec = cluster_spec(name)
    pods = [spec["headGroupSpec"]["template"]["spec"]]
    pods += [g["template"]["spec"] for g in spec["workerGroupSpecs"]]
    pods += [d["spec"]["template"]["spec"] for d in documents(name) if d["kind"] == "Job"]
    return pods


@dataclass(frozen=True)
class GpuShape:
    """The GPU nodes a manifest's worker groups ask for."""

    nodes: int
    gpus_per_node: int
    cpus_per_node: float


def gpu_shape(name: str) -> GpuShape:
    groups = [g for g in cluster_spec(name)["workerGroupSpecs"]
              if g["template"]["spec"]["containers"][0]["resources"]["limits"].get(
                  "nvidia.com/gpu")]
    limits = [g["template"]["spec"]["containers"][0]["resources"]["limits"] for g in groups]
    assert len({lim["nvidia.com/gpu"] for lim in limits}) == 1, f"{name}: mixed GPU pods"
    return GpuShape(sum(g["replicas"] for g in groups), int(limits[0]["nvidia.com/gpu"]),
                    float(limits[0]["cpu"]))


def container_env(container: dict, secrets: dict[str, str]) -> dict[str, str]:
    """A container's environment: plain values as written, secret references from
    `secrets` (what the Kubernetes Secret would hold)."""
    env = {}
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = str(item["value"])
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = secrets[ref["key"]]
    return env


def flags_and_sets(argv: list[str]) -> tuple[list[str], list[str]]:
    """`alignflow run FLOW ...`'s flags (without --address/--run-id/--set and their
    values) and its `--set` values, as the config loader takes them."""
    rest, named = argv[3:], ("--address", "--run-id", "--set")
    flags = [t for i, t in enumerate(rest) if t not in named and rest[i - 1] not in named]
    return flags, [rest[i + 1] for i, t in enumerate(rest) if t == "--set"]


def upload_manifest_sources(endpoint: str, model_dir: Path) -> None:
    """The tiny model and GSM8K prompts put where the manifests' commands name them."""
    from tests.fixtures.sources import upload_sources

    for name in MANIFESTS:
        argv = run_pod(name)[1]
        upload_sources(endpoint, model_dir, argv[argv.index("--pretrain") + 1],
                       argv[argv.index("--prompt_data") + 1])
