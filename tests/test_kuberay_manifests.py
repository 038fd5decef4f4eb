"""The KubeRay manifests against KubeRay's own CRD schemas, and every shipped command line against its job.

1. ``cluster/kuberay/{raycluster,rayjob,rayjob-predict,rayservice}.yaml`` are validated with the OpenAPI v3 schemas of
   KubeRay's CustomResourceDefinitions (``../shared/kuberay``, see its README.md), made strict as
   ``kubectl apply --validate=strict`` is: an object with ``properties`` and no
   ``x-kubernetes-preserve-unknown-fields`` rejects unknown fields, ``x-kubernetes-int-or-string`` takes an
   integer or a string, ``x-kubernetes-list-type`` map/set lists reject duplicates. CEL rules
   (``x-kubernetes-validations``) need an API server; a manifest that sets such a field fails here, so
   nothing passes unchecked.
2. Every ``python jobs/<job>.py`` / ``contrastext <job>`` command the project ships (the RayJob entrypoint,
   ``cluster.yaml``, the ``ray job submit`` lines of README.md, docs/ and cluster/README.md, the manifests' usage
   comments) is parsed as a shell would, its config loaded as the CLI does, and the job's preflight
   storage checks run, with its s3:// buckets on the session's moto S3 server.
"""

from __future__ import annotations

import copy
import gzip
import importlib
import re
import shlex
from functools import lru_cache
from pathlib import Path

import pytest
import yaml
from conftest import REPO_ROOT

jsonschema = pytest.importorskip("jsonschema")

CRD_DIR = REPO_ROOT.parent / "shared" / "kuberay"
KUBERAY_DIR = REPO_ROOT / "cluster" / "kuberay"
MANIFESTS = {"raycluster.yaml": "RayCluster", "rayjob.yaml": "RayJob", "rayjob-predict.yaml": "RayJob",
             "rayservice.yaml": "RayService"}
CRD_FILES = {"RayCluster": "ray.io_rayclusters.yaml.gz", "RayJob": "ray.io_rayjobs.yaml.gz",
             "RayService": "ray.io_rayservices.yaml.gz"}


# ------------------------------------------------------------------------------- CRD schemas
def _crd_path(kind: str) -> Path:
    path = CRD_DIR / CRD_FILES[kind]
    if not path.exists():
        pytest.skip(f"KubeRay CRD {CRD_FILES[kind]} not found under {CRD_DIR}")
    return path


@lru_cache(maxsize=None)
def _crd(kind: str) -> dict:
    with gzip.open(_crd_path(kind), "rt", encoding="utf-8") as f:
        return yaml.safe_load(f)


def to_json_schema(node):
    """An OpenAPI v3 (Kubernetes structural) schema as a JSON Schema with the API server's strictness."""
    if isinstance(node, list):
        return [to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = to_json_schema(value)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [to_json_schema(sub) for sub in value]
        else:  # keywords whose values are data (enum, default, required, pattern, x-kubernetes-*)
            out[key] = value
    if node.get("x-kubernetes-int-or-string"):
        out.pop("anyOf", None)  # [{type: integer}, {type: string}]
        out["type"] = ["integer", "string"]
    if node.get("nullable") and "type" in out:
        types = out["type"] if isinstance(out["type"], list) else [out["type"]]
        out["type"] = [*types, "null"]
    if (out.get("type") == "object" and "properties" in node and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def _cel_rules(validator, rules, instance, schema):
    """A field guarded by CEL rules is set: they cannot be evaluated without an API server."""
    messages = "; ".join(rule.get("message") or rule.get("rule", "") for rule in rules)
    yield jsonschema.ValidationError(f"sets a field with CEL rules that are not checked here ({messages})")


def _list_type(validator, list_type, instance, schema):
    """``x-kubernetes-list-type``: ``set`` lists hold distinct items, ``map`` lists distinct keys."""
    if not isinstance(instance, list):
        return
    if list_type == "set":
        keys = [repr(item) for item in instance]
    elif list_type == "map":
        names = schema.get("x-kubernetes-list-map-keys", [])
        keys = [tuple((item or {}).get(name) for name in names) for item in instance]
    else:
        return
    duplicates = sorted({str(key) for key in keys if keys.count(key) > 1})
    if duplicates:
        yield jsonschema.ValidationError(f"duplicate entries in a list of type {list_type}: {duplicates}")


KubeValidator = jsonschema.validators.extend(jsonschema.Draft7Validator, {
    "x-kubernetes-validations": _cel_rules, "x-kubernetes-list-type": _list_type})


@lru_cache(maxsize=None)
def _validator(kind: str, version: str):
    """The validator of one served version of a CRD, or None when the CRD does not serve it."""
    crd = _crd(kind)
    assert crd["spec"]["names"]["kind"] == kind
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version and entry.get("served", False):
            schema = to_json_schema(entry["schema"]["openAPIV3Schema"])
            KubeValidator.check_schema(schema)
            return KubeValidator(schema)
    return None


def crd_errors(manifest: dict) -> list[str]:
    """Everything the API server (strict validation) would reject in ``manifest``, one line each."""
    kind = manifest.get("kind")
    if kind not in CRD_FILES:
        return [f"kind {kind!r} is not one of {sorted(CRD_FILES)}"]
    crd = _crd(kind)
    group, _, version = str(manifest.get("apiVersion", "")).partition("/")
    if group != crd["spec"]["group"]:
        return [f"apiVersion {manifest.get('apiVersion')!r}: the {kind} group is {crd['spec']['group']}"]
    validator = _validator(kind, version)
    if validator is None:
        return [f"apiVersion {manifest.get('apiVersion')!r}: the {kind} CRD serves no version {version!r}"]
    errors = [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
              for e in validator.iter_errors(manifest)]
    if not (manifest.get("metadata") or {}).get("name"):
        errors.append("metadata/name: required")
    return errors


def manifest(name: str) -> dict:
    return yaml.safe_load((KUBERAY_DIR / name).read_text(encoding="utf-8"))


def cluster_spec(doc: dict) -> dict:
    return {"RayCluster": lambda: doc["spec"], "RayJob": lambda: doc["spec"]["rayClusterSpec"],
            "RayService": lambda: doc["spec"]["rayClusterConfig"]}[doc["kind"]]()


# ------------------------------------------------------------------------------- 1. the manifests
@pytest.mark.parametrize("name", list(MANIFESTS))
def test_manifest_passes_the_crd_schema(name):
    doc = manifest(name)
    assert (doc["apiVersion"], doc["kind"]) == ("ray.io/v1", MANIFESTS[name])
    assert crd_errors(doc) == []


def _set(path: str, value):
    def change(doc):
        *parents, last = path.split("/")
        node = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[last] = value
    return change


def _rename(path: str, new: str):
    def change(doc):
        *parents, last = path.split("/")
        node = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[new] = node.pop(last)
    return change


HEAD = "spec/headGroupSpec"
CONTAINER = "spec/workerGroupSpecs/0/template/spec/containers/0"


@pytest.mark.parametrize("break_it, expected", [
    (_rename(f"{HEAD}/rayStartParams", "rayStartParam"), "'rayStartParam' was unexpected"),
    (_set(f"{HEAD}/serviceTyp", "ClusterIP"), "'serviceTyp' was unexpected"),
    (_rename(f"{CONTAINER}/resources", "resource"), "'resource' was unexpected"),
    (_set("spec/enableInTreeAutoScaling", True), "'enableInTreeAutoScaling' was unexpected"),
    (_set(f"{HEAD}/rayStartParams/num-cpus", 0), "0 is not of type 'string'"),
    (_set("spec/workerGroupSpecs/0/maxReplicas", "4"), "'4' is not of type 'integer'"),
    (_set(f"{CONTAINER}/resources/limits/memory", "14GB"), "does not match"),
    (_set("spec/authOptions/mode", "tokens"), "is not one of ['disabled', 'token']"),
    (lambda doc: doc["spec"].pop("headGroupSpec"), "'headGroupSpec' is a required property"),
    (lambda doc: doc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"].append(
        {"containerPort": 8265, "name": "dashboard-again"}), "duplicate entries"),
    (_set("spec/managedBy", "someone"), "CEL rules"),
    (_set("apiVersion", "ray.io/v2"), "serves no version 'v2'"),
], ids=["misspelled-headGroupSpec-field", "unknown-headGroupSpec-field", "misspelled-container-field",
        "misspelled-spec-field", "rayStartParams-value-not-a-string", "replica-count-as-string",
        "bad-quantity", "auth-mode-not-in-enum", "required-field-missing", "duplicate-container-port",
        "field-with-cel-rules", "unknown-api-version"])
def test_broken_manifests_are_rejected(break_it, expected):
    broken = copy.deepcopy(manifest("raycluster.yaml"))
    assert crd_errors(broken) == []
    break_it(broken)
    errors = crd_errors(broken)
    assert errors, "the validator accepted a broken manifest"
    assert any(expected in e for e in errors), errors


def test_unknown_fields_are_rejected_in_every_manifest():
    """The same typo under headGroupSpec, in all three kinds (the RayJob and RayService embed the spec)."""
    for name, kind in MANIFESTS.items():
        doc = manifest(name)
        cluster_spec(doc)["headGroupSpec"]["rayStartParam"] = {}
        errors = crd_errors(doc)
        assert any("'rayStartParam' was unexpected" in e for e in errors), (name, errors)


def test_open_objects_stay_open():
    """Maps and free-form objects take any key: rayStartParams, resources, labels, the root metadata."""
    doc = manifest("raycluster.yaml")
    doc["metadata"]["annotations"] = {"example.com/anything": "x"}
    doc["spec"]["headGroupSpec"]["rayStartParams"]["object-store-memory"] = "1000000000"
    doc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["limits"][
        "example.com/fpga"] = 1
    assert crd_errors(doc) == []


def test_the_three_manifests_agree():
    """One image, one Ray, one auth setup; the head runs no CPU work; GPU groups request what they limit."""
    import ray

    specs = {name: cluster_spec(manifest(name)) for name in MANIFESTS}
    images, secrets = set(), set()
    for name, spec in specs.items():
        assert spec["rayVersion"] == ray.__version__, name
        assert spec["enableInTreeAutoscaling"] is True, name
        assert spec["authOptions"]["mode"] == "token", name
        secrets.add(spec["authOptions"].get("secretName"))
        assert spec["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0", name
        groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
        images |= {c["image"] for g in groups for c in g["template"]["spec"]["containers"]}
        for group in spec["workerGroupSpecs"]:
            assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"], (name, group["groupName"])
            for container in group["template"]["spec"]["containers"]:
                resources = container["resources"]
                assert resources["requests"] == resources["limits"], (name, group["groupName"])
    assert len(images) == 1, images
    assert len(secrets) == 1, secrets


def test_user_edits_are_marked_in_the_rayservice():
    text = (KUBERAY_DIR / "rayservice.yaml").read_text(encoding="utf-8")
    marked = [line for line in text.splitlines() if "# EDIT" in line]
    for key in ("secretName:", "image:", "minReplicas:", "maxReplicas:", "serviceAccountName:", "limits:"):
        assert any(key in line for line in marked), f"no '# EDIT' line mentions {key}"


# ------------------------------------------------------------------------------- the RayService's Serve app
def test_rayservice_serves_cluster_serve_yaml():
    """serveConfigV2 is cluster/serve.yaml: one Serve config, deployed by `serve deploy` or by KubeRay."""
    doc = manifest("rayservice.yaml")
    serve_yaml = yaml.safe_load((REPO_ROOT / "cluster" / "serve.yaml").read_text(encoding="utf-8"))
    assert isinstance(doc["spec"]["serveConfigV2"], str)  # KubeRay takes the Serve config as a YAML string
    assert yaml.safe_load(doc["spec"]["serveConfigV2"]) == serve_yaml


def test_rayservice_serve_config_is_what_serve_deploy_accepts():
    from ray.serve.schema import ServeDeploySchema

    from contrastext.serve.config import ServeConfig

    schema = ServeDeploySchema.model_validate(yaml.safe_load(manifest("rayservice.yaml")["spec"]["serveConfigV2"]))
    (application,) = schema.applications
    assert application.import_path == "contrastext.serve.app:app_builder"
    ServeConfig.model_validate(application.args)


def test_rayservice_gives_every_ray_container_the_api_tokens_from_a_secret():
    """The application is built on any node, so each Ray container holds the entries the config names."""
    from contrastext.serve.config import ServeConfig

    doc = manifest("rayservice.yaml")
    (application,) = yaml.safe_load(doc["spec"]["serveConfigV2"])["applications"]
    config = ServeConfig.model_validate(application["args"])
    assert config.auth.mode == "auto" and config.auth.tokens_env and config.ingress_replicas == 2
    assert config.ingress_max_replicas_per_node == 1  # the two ingress replicas on two nodes
    spec = cluster_spec(doc)
    templates = [spec["headGroupSpec"]["template"], *(g["template"] for g in spec["workerGroupSpecs"])]
    for template in templates:
        for container in template["spec"]["containers"]:
            (entry,) = [e for e in container["env"] if e["name"] == config.auth.tokens_env]
            assert entry["valueFrom"]["secretKeyRef"] == {"name": "contrastext-api-tokens", "key": "entries"}


def _gpu_replicas(args: dict) -> tuple[int, int]:
    """(fewest, most) replicas holding a GPU that the Serve application runs."""
    from contrastext.serve.config import ServeConfig

    config = ServeConfig.model_validate(args)
    low = high = 0
    for served in config.models.values():
        if served.use_gpu:
            low += served.autoscaling.min_replicas if served.autoscaling else served.replicas
            high += served.autoscaling.max_replicas if served.autoscaling else served.replicas
    if config.topics.enabled and config.topics.use_gpu:
        low, high = low + config.topics.replicas, high + config.topics.replicas
    return low, high


def test_rayservice_gpu_workers_fit_the_serve_replicas():
    """Each GPU replica takes one GPU pod: the GPU group holds the fewest and can grow to the most."""
    doc = manifest("rayservice.yaml")
    (application,) = yaml.safe_load(doc["spec"]["serveConfigV2"])["applications"]
    low, high = _gpu_replicas(application["args"])
    assert low >= 1
    gpu_pods_min = gpu_pods_max = 0
    for group in cluster_spec(doc)["workerGroupSpecs"]:
        (container,) = group["template"]["spec"]["containers"]
        gpus = int(container["resources"]["limits"].get("nvidia.com/gpu", 0))
        gpu_pods_min += gpus * group["minReplicas"]
        gpu_pods_max += gpus * group["maxReplicas"]
    assert gpu_pods_min == low, "minReplicas of the GPU group should equal the GPU replicas always running"
    assert gpu_pods_max >= high, "maxReplicas of the GPU group must fit the most GPU replicas"


# ------------------------------------------------------------------------------- 2. shipped command lines
def _job_names() -> dict[str, str]:
    """jobs/<file>.py → the job (``contrastext.cli.JOBS`` key) it runs."""
    names = {}
    for path in sorted((REPO_ROOT / "jobs").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        m = re.search(r'job_main\("(\w+)"\)', text)
        if m:
            names[path.stem] = m.group(1)
        elif "from contrastext.pipelines.uctopic import main" in text:
            names[path.stem] = "uctopic"  # `jobs/uctopic.py STAGE ...`: the stage is a positional argument
    return names


JOB_FILES = _job_names()


def test_every_job_file_runs_a_known_job():
    from contrastext.cli import JOBS

    files = {p.stem for p in (REPO_ROOT / "jobs").glob("*.py")}
    assert set(JOB_FILES) == files, f"jobs/ files whose job is not found: {sorted(files - set(JOB_FILES))}"
    assert set(JOB_FILES.values()) <= set(JOBS)


def _logical_lines(lines: list[str]) -> list[str]:
    """Lines with their backslash continuations joined."""
    out, pending = [], ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
        else:
            out.append(pending + line)
            pending = ""
    if pending:
        out.append(pending)
    return out


def _markdown_commands(text: str) -> list[str]:
    """Shell lines of fenced code blocks, then inline code spans (which may wrap across lines)."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S)
    commands = [line for block in blocks for line in _logical_lines(block.splitlines())]
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.M | re.S)
    commands += [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose)]
    return commands


def _yaml_comment_commands(text: str) -> list[str]:
    comments = [re.sub(r"^\s*#", "", line) for line in text.splitlines() if line.lstrip().startswith("#")]
    return _logical_lines(comments)


def _cli_jobs() -> list[str]:
    from contrastext.cli import JOBS

    return list(JOBS)


JOB_COMMAND = re.compile(r"\bpython3? jobs/\w+\.py\b|(?:^|[\s;&|'\"])contrastext (?:%s)\b"
                         % "|".join(map(re.escape, _cli_jobs())))


# the documentation site's pages (mkdocs.yml), whose command lines are checked like the READMEs'
DOC_PAGES = sorted(str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "docs").rglob("*.md"))


def shipped_commands() -> list[tuple[str, str]]:
    """(where, command) for every job command line the project ships."""
    found: list[tuple[str, str]] = []
    # the RayJob's entrypoint
    for name in ("rayjob.yaml", "rayjob-predict.yaml"):
        found.append((f"{name}:entrypoint", manifest(name)["spec"]["entrypoint"]))
    # the manifests' usage comments
    for name in MANIFESTS:
        found += [(f"{name}:comment", c) for c in _yaml_comment_commands((KUBERAY_DIR / name).read_text())
                  if JOB_COMMAND.search(c)]
    # cluster.yaml: every command list `ray up` runs, and the usage in its header
    cluster_text = (REPO_ROOT / "cluster.yaml").read_text(encoding="utf-8")
    cluster = yaml.safe_load(cluster_text)
    for key in ("initialization_commands", "setup_commands", "head_setup_commands", "worker_setup_commands",
                "head_start_ray_commands", "worker_start_ray_commands"):
        found += [(f"cluster.yaml:{key}", c) for c in cluster.get(key) or [] if JOB_COMMAND.search(c)]
    found += [("cluster.yaml:comment", c) for c in _yaml_comment_commands(cluster_text) if JOB_COMMAND.search(c)]
    # the `ray job submit` lines of the READMEs and the documentation pages
    for doc in ["README.md", "cluster/README.md", *DOC_PAGES]:
        text = (REPO_ROOT / doc).read_text(encoding="utf-8")
        found += [(doc, c) for c in _markdown_commands(text)
                  if "ray job submit" in c and re.search(r"\bpython3? jobs/\w+\.py\b", c)]
    return found


SHIPPED = shipped_commands()


def job_invocations(command: str) -> list[tuple[str, list[str]]]:
    """(job, arguments) of each ``python jobs/<file>.py`` / ``contrastext <job>`` in a shell command."""
    tokens = shlex.split(command, comments=True)
    found = []
    for i, token in enumerate(tokens):
        if token == "-c" and i > 0 and tokens[i - 1] in ("bash", "sh") and i + 1 < len(tokens):
            found += job_invocations(tokens[i + 1])
            continue
        m = re.fullmatch(r"jobs/(\w+)\.py", token)
        if m and i > 0 and re.fullmatch(r"python3?", tokens[i - 1]):
            assert m.group(1) in JOB_FILES, f"{command!r}: there is no jobs/{m.group(1)}.py"
            job = JOB_FILES[m.group(1)]
        elif token == "contrastext" and i + 1 < len(tokens) and tokens[i + 1] in _cli_jobs():
            job = tokens[i + 1]
            i += 1
        else:
            continue
        arguments = []
        for argument in tokens[i + 1:]:
            if argument in ("&&", "||", ";", "|", "&"):
                break
            arguments.append(argument)
        found.append((job, arguments))
    return found


def test_the_shipped_command_lines_are_all_found():
    where = [w for w, _ in SHIPPED]
    assert where.count("rayjob.yaml:entrypoint") == 1
    documented = [command for w, command in SHIPPED if w == "README.md" or w in DOC_PAGES]
    for job in ("build_corpus", "encode_corpus", "wcsbert_selftrain", "contrastive_fit", "predict"):
        assert any(f"jobs/{job}.py" in command for command in documented), job
    assert where.count("cluster/README.md") >= 4
    assert where.count("cluster.yaml:comment") >= 1
    assert where.count("raycluster.yaml:comment") >= 1
    for w, command in SHIPPED:
        assert job_invocations(command), (w, command)


def _import(target: str):
    module, attribute = target.split(":")
    return getattr(importlib.import_module(module), attribute)


def load_shipped_config(job: str, arguments: list[str], tmp_path: Path):
    """The job's validated config, as ``jobs/<file>.py`` / ``contrastext <job>`` builds it.

    The command runs from the repository root (``--working-dir .``, or the image's copy of it), so a
    ``--config`` under configs/ is the repository's; any other config file is the user's own (``my.yaml``)
    and stands here as an empty one, i.e. the job's defaults. Absolute local paths (``/mnt/shared/runs``)
    are moved under ``tmp_path``, as relative ones are by running from there.
    """
    from contrastext.cli import JOBS, build_parser
    from contrastext.config import load_config

    arguments = list(arguments)
    stage = []
    if job == "uctopic" and arguments and not arguments[0].startswith("-"):
        stage = [f"stage={arguments.pop(0)}"]  # as contrastext.pipelines.uctopic.main does
    args = build_parser().parse_args([job, *arguments])
    assert not args.print_config
    config_path = None
    if args.config is not None:
        if (REPO_ROOT / args.config).exists():
            config_path = REPO_ROOT / args.config
        else:
            assert not args.config.startswith("configs/"), f"{args.config} is not in the repository"
            config_path = tmp_path / args.config
            config_path.write_text("{}\n", encoding="utf-8")
    overrides = []
    for override in [*args.overrides, *stage]:
        key, sep, value = override.partition("=")
        assert sep, f"--set {override!r}: expected KEY=VALUE"
        if value.startswith("/"):
            value = str(tmp_path / value.lstrip("/"))
        elif "…" in value and "://" not in value:  # (a placeholder URI is made on the bucket, below)
            # A placeholder for the user's own file (enwiki-…-multistream.xml.bz2): a dummy file of that
            # name stands in, so the check below passes whether or not preflight looks at local inputs,
            # and a real location mistake (a missing bucket, a wrong key) still fails.
            (tmp_path / value).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / value).write_bytes(b"")
        overrides.append(f"{key}={value}")
    return load_config(_import(JOBS[job].config), config_path, overrides)


def _create_buckets(config, s3_server) -> list[str]:
    """Create, on the moto server, the buckets of every s3:// location of the config (the exact names)."""
    import boto3

    from contrastext.preflight import input_locations, output_locations

    client = boto3.client("s3", endpoint_url=s3_server.endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    buckets = sorted({location[len("s3://"):].split("/", 1)[0]
                      for location in [*output_locations(config).values(), *input_locations(config).values()]
                      if location.startswith("s3://")})
    existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
    for bucket in buckets:
        if bucket not in existing:
            client.create_bucket(Bucket=bucket)
    return buckets


@pytest.mark.parametrize("where, command", SHIPPED, ids=[f"{w}:{i}" for i, (w, _) in enumerate(SHIPPED)])
def test_shipped_command_loads_and_passes_preflight(where, command, s3_server, tmp_path, monkeypatch):
    from contrastext.preflight import check_locations, output_locations

    monkeypatch.chdir(tmp_path)  # relative outputs (runs/) land in tmp_path
    for job, arguments in job_invocations(command):
        config = load_shipped_config(job, arguments, tmp_path)
        buckets = _create_buckets(config, s3_server)
        from contrastext import storage
        from contrastext.preflight import input_locations

        for location in input_locations(config).values():
            if "…" in location:  # the user's own input on the bucket (s3://YOUR-BUCKET/enwiki-…): an empty stand-in
                storage.write_bytes(location, b"")
            elif job == "predict" and not storage.exists(location):  # the user's model and texts: stand-ins
                storage.write_bytes(storage.join(location, "part-0.jsonl" if location.endswith("/") else "config.json"),
                                    b"{}")
        for bucket in buckets:
            assert f"s3://{bucket}" in command, f"{where}: bucket {bucket} does not come from the command"
        for location in output_locations(config).values():
            assert location.startswith("s3://") or str(tmp_path) in str(Path(location).resolve()), location
        check_locations(config)


def test_preflight_names_a_missing_bucket(s3_server, tmp_path, monkeypatch):
    from contrastext.preflight import check_locations
    from contrastext.storage import StorageError

    monkeypatch.chdir(tmp_path)
    uri = "s3://contrastext-no-such-bucket/runs"
    config = load_shipped_config("fit", ["--set", f"output.storage_path={uri}"], tmp_path)
    with pytest.raises(StorageError) as error:
        check_locations(config)
    message = str(error.value)
    assert uri in message and "output.storage_path" in message
    assert "'contrastext-no-such-bucket' does not exist" in message


def test_a_wrong_key_in_a_command_line_is_caught(tmp_path):
    """What the command-line test relies on: an unknown --set key is an error, not ignored."""
    from pydantic import ValidationError

    (job, arguments), = job_invocations("ray job submit -- python jobs/encode_corpus.py "
                                        "--set scaling.num_worker=8")
    with pytest.raises((ValidationError, ValueError)) as error:
        load_shipped_config(job, arguments, tmp_path)
    assert "num_worker" in str(error.value)


def test_parsing_follows_the_shell():
    invocations = job_invocations(
        "bash -c 'cd /home/ray/contrastext && python jobs/contrastive_fit.py --set a=\"b c\"' && echo done")
    assert invocations == [("fit", ["--set", "a=b c"])]
    assert job_invocations("python jobs/uctopic.py mine --set x=1 # a comment") == [
        ("uctopic", ["mine", "--set", "x=1"])]
    assert job_invocations("contrastext supcon_classify --set data.train_per_class=80") == [
        ("supcon_classify", ["--set", "data.train_per_class=80"])]
