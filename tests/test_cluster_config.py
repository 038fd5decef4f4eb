"""cluster.yaml passes the check `ray up` runs; the cluster files say what the project relies on.

`ray up` (ray.autoscaler._private.commands._bootstrap_config) does, in order:
  1. ``prepare_config``: merge with the provider's defaults.yaml, merge setup commands, check the docker
     section, fill per-type min/max workers: no cloud credentials, no network;
  2. the provider's ``fillout_available_node_types_resources`` (AWS: asks the EC2 API for instance
     shapes; on failure it only warns and leaves ``resources`` as written);
  3. ``validate_config``: the JSON schema ray/autoscaler/ray-schema.json plus cross-field checks;
  4. the provider's ``bootstrap_config`` (IAM, key pairs, subnets: needs AWS).
We run 1 and 3 exactly as ray up does. Step 2 is why cluster.yaml spells out ``resources``: the schema
requires them, so without EC2 access (or permission) ray up would reject a config that leaves them out.
"""

from __future__ import annotations

import copy
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

ray = pytest.importorskip("ray")
jsonschema = pytest.importorskip("jsonschema")

from ray.autoscaler._private.util import prepare_config, validate_config  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CLUSTER_YAML = REPO / "cluster.yaml"
CLUSTER_DIR = REPO / "cluster"

# vCPUs and GPUs of common EC2 shapes (AWS instance type pages), what `ray up` would detect.
EC2_SHAPES = {
    "g5.xlarge": (4, 1), "g5.2xlarge": (8, 1), "g5.4xlarge": (16, 1), "g5.8xlarge": (32, 1),
    "g5.12xlarge": (48, 4), "g5.48xlarge": (192, 8),
    "g6.xlarge": (4, 1), "g6.2xlarge": (8, 1), "g6.4xlarge": (16, 1), "g6.12xlarge": (48, 4),
    "g6e.xlarge": (4, 1), "g6e.2xlarge": (8, 1), "g6e.12xlarge": (48, 4),
    "p4d.24xlarge": (96, 8), "p5.48xlarge": (192, 8),
    "m6i.xlarge": (4, 0), "m6i.2xlarge": (8, 0), "m6i.4xlarge": (16, 0), "m6i.8xlarge": (32, 0),
    "m5.large": (2, 0), "m5.xlarge": (4, 0), "m5.2xlarge": (8, 0), "c6i.4xlarge": (16, 0),
}


def load_raw() -> dict:
    return yaml.safe_load(CLUSTER_YAML.read_text())


def ray_up_check(config: dict) -> dict:
    """What `ray up` does to a config before it talks to the cloud: defaults, then validation."""
    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    return prepared


@pytest.fixture(scope="module")
def prepared() -> dict:
    return ray_up_check(load_raw())


def gpu_types(config: dict) -> dict:
    return {name: t for name, t in config["available_node_types"].items()
            if t.get("resources", {}).get("GPU", 0) > 0}


def setup_commands_of(config: dict, kind: str) -> list[str]:
    return config[f"{kind}_setup_commands"]


def docker_env(config: dict) -> dict[str, str]:
    env = {}
    for option in config.get("docker", {}).get("run_options", []):
        m = re.fullmatch(r"(?:--env|-e)[ =](\w+)=(\S*)", option.strip())
        if m:
            env[m.group(1)] = m.group(2)
    return env


# --- the check ray up runs -----------------------------------------------------------------------------

def test_cluster_yaml_passes_ray_up_validation(prepared):
    assert prepared["provider"]["type"] == "aws"
    assert prepared["head_node_type"] in prepared["available_node_types"]


@pytest.mark.parametrize("break_it, expected", [
    (lambda c: c.update(idle_timeout_minute=c.pop("idle_timeout_minutes")), "idle_timeout_minute"),
    (lambda c: c["available_node_types"]["gpu_worker"].update(
        min_worker=c["available_node_types"]["gpu_worker"].pop("min_workers")), "min_worker"),
    (lambda c: c["available_node_types"]["gpu_worker"]["resources"].update(GPU="1"), "'1' is not of type"),
    (lambda c: c["available_node_types"]["gpu_worker"].pop("resources"), "'resources' is a required property"),
    # caught before the schema, by prepare_config's docker check (an assert, as in ray up)
    (lambda c: c["docker"].update(imgae=c["docker"].pop("image")), "Must provide a container & image name"),
    (lambda c: c.update(head_node_type="no_such_type"), "head_node_type"),
], ids=["misspelled-top-level-key", "misspelled-node-type-key", "gpu-count-as-string",
        "resources-missing", "misspelled-docker-key", "unknown-head-type"])
def test_broken_copies_are_rejected_by_the_same_check(break_it, expected):
    broken = load_raw()
    break_it(broken)
    with pytest.raises((jsonschema.ValidationError, ValueError, AssertionError)) as err:
        ray_up_check(broken)
    assert expected in str(err.value)


# --- what matters to us ----------------------------------------------------------------------------------

def test_gpu_workers_scale_from_zero(prepared):
    gpus = gpu_types(prepared)
    assert gpus, "no node type declares GPU resources"
    for name, node_type in gpus.items():
        assert name != prepared["head_node_type"]
        assert node_type["min_workers"] == 0, f"{name}: GPU nodes must not idle at min_workers > 0"
        assert node_type["max_workers"] >= 1
        assert node_type["max_workers"] <= prepared["max_workers"]


def test_head_runs_no_tasks_and_has_no_gpu(prepared):
    head = prepared["available_node_types"][prepared["head_node_type"]]
    assert head["resources"].get("CPU") == 0
    assert head["resources"].get("GPU", 0) == 0
    assert head["max_workers"] == 0


def test_declared_resources_match_the_instance_type(prepared):
    """Explicit resources override what ray up detects (and go to `ray start` as RAY_OVERRIDE_RESOURCES):
    a g5.12xlarge declared as 1 GPU would waste 3. Ray reads the GPU count of an EC2 shape with the
    accelerator manager below; we give it the shapes' facts in the EC2 API's form."""
    from ray._private.accelerators.nvidia_gpu import NvidiaGPUAcceleratorManager

    for name, node_type in prepared["available_node_types"].items():
        instance_type = node_type["node_config"]["InstanceType"]
        assert instance_type in EC2_SHAPES, (
            f"{name}: add {instance_type} (vCPUs, GPUs) to EC2_SHAPES so its resources can be checked")
        vcpus, gpus = EC2_SHAPES[instance_type]
        api = {instance_type: {"GpuInfo": {"Gpus": [{"Count": gpus, "Name": "X"}]}} if gpus else {}}
        detected = NvidiaGPUAcceleratorManager.get_ec2_instance_num_accelerators(instance_type, api)
        assert node_type["resources"].get("GPU", 0) == (detected or 0), name
        if name != prepared["head_node_type"]:
            assert node_type["resources"].get("CPU") == vcpus, name


def test_autoscaling_settings(prepared):
    assert prepared["idle_timeout_minutes"] > 0
    assert prepared["upscaling_speed"] > 0
    assert prepared["max_workers"] >= sum(t["max_workers"] for n, t in prepared["available_node_types"].items()
                                          if n != prepared["head_node_type"]) > 0


@pytest.mark.parametrize("kind", ["head", "worker"])
def test_torch_is_installed_pinned_before_the_project(prepared, kind):
    commands = setup_commands_of(prepared, kind)
    torch_installs = [i for i, c in enumerate(commands) if re.search(r"pip install\b.*\btorch\b", c)]
    project_installs = [i for i, c in enumerate(commands) if "-e ~/contrastext" in c]
    assert torch_installs and project_installs, commands
    assert torch_installs[0] < project_installs[0], "torch must be installed before the project"
    for i in torch_installs:  # every command that installs torch pins it
        assert re.search(r"torch==\d+\.\d+(\.\d+)?\b", commands[i]), commands[i]
    pins = {m for c in commands for m in re.findall(r"torch==([\w.+]+)", c)}
    assert len(pins) == 1, f"one torch version everywhere, got {pins}"
    setup_sh = REPO / "scripts" / "setup.sh"
    if setup_sh.exists():
        m = re.search(r"TORCH_VERSION:-([\w.]+)\}", setup_sh.read_text())
        if m:
            assert pins == {m.group(1)}, "cluster.yaml and scripts/setup.sh pin different torch versions"


def test_project_is_synced_to_every_node(prepared):
    mounts = prepared["file_mounts"]
    assert "~/contrastext" in mounts
    assert (REPO / mounts["~/contrastext"]).resolve() == REPO  # relative to the repo root (run ray up there)
    assert (REPO / mounts["~/contrastext"] / "pyproject.toml").exists()
    assert ".gitignore" in prepared.get("rsync_filter", [])  # .venv, runs/ stay home


def test_image_python_and_ray_match(prepared):
    image = prepared["docker"]["image"]
    m = re.fullmatch(r"rayproject/ray:(?P<ray>[\d.]+)-py(?P<py>\d)(?P<minor>\d+)-gpu", image)
    assert m, f"expected a rayproject/ray GPU image, got {image}"
    assert (int(m["py"]), int(m["minor"])) >= (3, 10)
    assert m["ray"] == ray.__version__, "the cluster must run the Ray of the client (`ray up`, `ray job submit`)"
    assert prepared["docker"]["container_name"]


def test_token_auth_is_on_and_the_token_reaches_every_node(prepared):
    env = docker_env(prepared)
    assert env.get("RAY_AUTH_MODE") == "token"
    assert prepared["file_mounts"].get("~/.ray") == "~/.ray"  # ~/.ray/auth_token of the laptop


def test_the_api_token_entries_reach_every_node(prepared):
    assert prepared["file_mounts"].get("~/.contrastext") == "~/.contrastext"
    for commands in (prepared["head_start_ray_commands"], prepared["worker_start_ray_commands"]):
        line = " ".join(commands)
        assert 'export CONTRASTEXT_API_TOKENS="$(cat ~/.contrastext/api-tokens' in line
        assert line.index("CONTRASTEXT_API_TOKENS") < line.index("ray start")


def test_start_commands(prepared):
    head = " ".join(prepared["head_start_ray_commands"])
    worker = " ".join(prepared["worker_start_ray_commands"])
    assert "ray start --head" in head and "--autoscaling-config=~/ray_bootstrap_config.yaml" in head
    assert "--dashboard-host" in head
    assert "ray start --address=$RAY_HEAD_IP:" in worker


def test_user_edits_are_marked():
    marked = [line for line in CLUSTER_YAML.read_text().splitlines() if "# EDIT" in line]
    for key in ("cluster_name:", "region:", "ssh_user:", "ImageId:", "InstanceType:", "SubnetIds:",
                "image:", "resources:", "IamInstanceProfile"):
        assert any(key in line for line in marked), f"no '# EDIT' line mentions {key}"


# --- the rest of cluster/ -----------------------------------------------------------------------------------

def kuberay(name: str) -> dict:
    return yaml.safe_load((CLUSTER_DIR / "kuberay" / name).read_text())


def check_ray_cluster_spec(spec: dict) -> None:
    assert spec["enableInTreeAutoscaling"] is True
    assert spec["authOptions"]["mode"] == "token"
    assert spec["headGroupSpec"]["rayStartParams"].get("num-cpus") == "0"
    gpu_groups = [g for g in spec["workerGroupSpecs"]
                  if any("nvidia.com/gpu" in c.get("resources", {}).get("limits", {})
                         for c in g["template"]["spec"]["containers"])]
    assert gpu_groups, "no worker group requests nvidia.com/gpu"
    for group in gpu_groups:
        assert group["minReplicas"] == 0 and group["maxReplicas"] >= 1
        for container in group["template"]["spec"]["containers"]:
            resources = container["resources"]
            assert int(resources["limits"]["nvidia.com/gpu"]) >= 1
            assert resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"]


def test_kuberay_raycluster():
    doc = kuberay("raycluster.yaml")
    assert (doc["apiVersion"], doc["kind"]) == ("ray.io/v1", "RayCluster")
    assert doc["spec"]["rayVersion"] == ray.__version__
    check_ray_cluster_spec(doc["spec"])


def test_kuberay_rayjob():
    doc = kuberay("rayjob.yaml")
    assert (doc["apiVersion"], doc["kind"]) == ("ray.io/v1", "RayJob")
    assert "python jobs/wcsbert_selftrain.py" in doc["spec"]["entrypoint"]
    assert doc["spec"]["shutdownAfterJobFinishes"] is True
    assert doc["spec"]["rayClusterSpec"]["rayVersion"] == ray.__version__
    check_ray_cluster_spec(doc["spec"]["rayClusterSpec"])


def test_dockerfile_installs_pinned_torch_before_the_project():
    text = (CLUSTER_DIR / "image" / "Dockerfile").read_text()
    assert re.search(r"^ARG BASE_IMAGE=rayproject/ray:\$\{RAY_VERSION\}-py311-gpu$", text, re.M)
    assert re.search(rf"^ARG RAY_VERSION={re.escape(ray.__version__)}$", text, re.M)
    runs = [line for line in text.splitlines() if line.startswith("RUN ")]
    torch_run = next(i for i, r in enumerate(runs) if 'torch==${TORCH_VERSION}"' in r and "-e ." not in r)
    project_run = next(i for i, r in enumerate(runs) if "pip install -e ." in r)
    assert torch_run < project_run


@pytest.mark.parametrize("script", ["start.sh", "stop.sh"])
def test_local_scripts_are_executable_bash(script):
    path = CLUSTER_DIR / "local" / script
    assert path.stat().st_mode & stat.S_IXUSR
    subprocess.run(["bash", "-n", str(path)], check=True)


def test_local_start_keeps_auth_on_by_default():
    text = (CLUSTER_DIR / "local" / "start.sh").read_text()
    assert re.search(r"^auth_mode=token$", text, re.M)
    assert "ray get-auth-token --generate" in text
    assert 'export RAY_AUTH_MODE="$auth_mode"' in text
    assert "--dashboard-host=\"$host\"" in text and re.search(r"^host=127\.0\.0\.1\b", text, re.M)


def test_local_start_help_runs_without_ray():
    out = subprocess.run(["bash", str(CLUSTER_DIR / "local" / "start.sh"), "--help"], check=True,
                         capture_output=True, text=True, env={**os.environ, "PATH": "/usr/bin:/bin"})
    assert "--no-auth" in out.stdout and "RAY_AUTH_MODE" in out.stdout
