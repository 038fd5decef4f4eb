"""The self-training of a classifier asked for over HTTP, as a detached Ray actor (one per training).

The ingress writes the ``queued`` status and starts the actor; the actor runs ``WCSBert.fit`` (its rounds
train with Ray Train), writes the status after each round, publishes the model to the registry and exits.
Being detached, the training outlives the request and the replica that started it. Any error ends in
state ``failed`` with that error, and no version is published.
"""

from __future__ import annotations

import logging
import shutil
import time
import traceback
from typing import Any

import numpy as np
from pydantic import Field

from contrastext.config import ReadLength, Settings
from contrastext.serve.registry import ClassifierRegistry, now

log = logging.getLogger(__name__)

NAMESPACE = "contrastext-classifiers"
ACTOR_PREFIX = "train-"


class DevSet(Settings):
    texts: list[str]
    labels: list[str]


class TrainingSpec(Settings):
    """Everything the actor needs: checked by the ingress before it is started."""

    registry: str
    name: str
    labels: list[str]
    aliases: dict[str, list[str]] = Field(default_factory=dict)
    template: str
    texts: list[str] | None = None
    texts_uri: str | None = None
    max_texts: int
    min_texts_per_label: int
    dev: DevSet | None = None
    rounds: int = Field(..., ge=1)
    base_model: str  # the served model's name
    base_model_spec: str  # what it loads: bundled:minilm, a folder
    max_length: int  # a round's training
    read_max_length: ReadLength = "auto"  # labelling and classifying (``WCSBert(max_length=...)``)
    batch_size: int
    lr: float
    cpus_per_worker: float
    in_process: bool = True  # train in the actor (which then reserves cpus_per_worker), not on a worker group
    guard: bool = True


def read_texts(spec: TrainingSpec) -> list[str]:
    """The training texts: inline, or one per line of the file at ``texts_uri`` (blank lines skipped)."""
    if spec.texts is not None:
        return spec.texts
    from contrastext import storage

    texts = []
    with storage.open_input(spec.texts_uri) as f:
        for raw in f.read().decode("utf-8").splitlines():
            if raw.strip():
                texts.append(raw)
                if len(texts) > spec.max_texts:
                    raise ValueError(f"{spec.texts_uri} holds more than {spec.max_texts} texts; at most "
                                     f"{spec.max_texts} are accepted")
    needed = spec.min_texts_per_label * len(spec.labels)
    if len(texts) < needed:
        raise ValueError(f"{spec.texts_uri} holds {len(texts)} texts; {len(spec.labels)} labels need at least "
                         f"{needed} ({spec.min_texts_per_label} per label)")
    return texts


def dev_accuracy(encoder, spec: TrainingSpec) -> float:
    from contrastext.zeroshot import LabelSet, ZeroShotClassifier

    label_set = LabelSet.build(spec.labels, spec.aliases)
    scores = ZeroShotClassifier(encoder, template=spec.template).score_embeddings(
        encoder.encode(spec.dev.texts), label_set)
    truth = np.array([spec.labels.index(label) for label in spec.dev.labels])
    return float((scores.argmax(axis=1) == truth).mean())


def train(spec: TrainingSpec) -> dict[str, Any]:
    """Self-train, publish, and keep the status current; returns the published manifest."""
    from contrastext import WCSBert
    from contrastext.methods.training import load_text_encoder
    from contrastext.methods.wcsbert.config import READ_MAX_LENGTH, round_train
    from contrastext.methods.wcsbert.read_length import auto_read_length
    from contrastext.storage import scratch_dir

    registry = ClassifierRegistry(spec.registry)
    registry.update_status(spec.name, state="running", started=now(), round=0)
    work = scratch_dir("contrastext-classifier-")
    try:
        texts = read_texts(spec)
        base_train = round_train()
        rounds: list[dict[str, Any]] = []
        # the length settled here, as WCSBert would in fit, so that the untrained dev score reads what the rounds
        # read; the base model is let go before the rounds load their own
        base = load_text_encoder(spec.base_model_spec, READ_MAX_LENGTH)
        base = base.with_max_length(auto_read_length(texts, base, seed=base_train.seed)
                                    if spec.read_max_length == "auto" else spec.read_max_length)
        read_tokens = int(base.max_length)
        untrained_dev = dev_accuracy(base, spec) if spec.dev is not None else None
        del base
        registry.update_status(spec.name, texts=len(texts), read_tokens=read_tokens,
                               dev_accuracy_untrained=untrained_dev)
        round_started = time.monotonic()

        def on_round(entry: dict[str, Any], encoder) -> None:
            nonlocal round_started
            done = {k: entry[k] for k in ("round", "kept", "pairs", "text_pairs", "kept_per_label", "labels_changed",
                                          "steps")}
            done["guard"] = entry.get("guard")
            done["head"] = entry.get("head")
            done["seconds"] = round(time.monotonic() - round_started, 1)
            done["dev_accuracy"] = dev_accuracy(encoder, spec) if spec.dev is not None else None
            rounds.append(done)
            registry.update_status(spec.name, round=entry["round"], rounds_done=rounds)
            round_started = time.monotonic()

        train_config = base_train.model_copy(update={
            "batch_size": spec.batch_size, "optimizer": base_train.optimizer.model_copy(update={"lr": spec.lr}),
            "scaling": base_train.scaling.model_copy(update={"cpus_per_worker": spec.cpus_per_worker}),
            "in_process": spec.in_process,
            "encoder": base_train.encoder.model_copy(update={"max_length": spec.max_length})})
        model = WCSBert(spec.base_model_spec, rounds=spec.rounds, template=spec.template, train=train_config,
                        guard=spec.guard, max_length=read_tokens, work_dir=work / "rounds")
        model.fit(texts, spec.labels, spec.aliases, on_round=on_round)
        folder = model.save(work / "model")
        manifest = registry.publish(spec.name, folder, {
            "labels": spec.labels, "aliases": spec.aliases, "template": spec.template,
            "base_model": spec.base_model, "base_model_spec": spec.base_model_spec, "rounds": spec.rounds,
            "texts": len(texts), "read_tokens": read_tokens,
            "metrics": {"rounds": rounds, "dev_accuracy_untrained": untrained_dev,
                        "chosen_round": model.chosen_round_, "chosen_head": model.chosen_head_,
                        "stop_reason": model.stop_reason_}})
        registry.update_status(spec.name, state="ready", version=manifest["version"], finished=now(),
                               chosen_round=model.chosen_round_, chosen_head=model.chosen_head_,
                               stop_reason=model.stop_reason_,
                               guard_untrained=(model.guard_round_0_ or {}).get("guard"))
        return manifest
    except BaseException as error:
        log.error("training of classifier %s failed:\n%s", spec.name, traceback.format_exc())
        if registry.status(spec.name) is not None:  # not deleted meanwhile
            registry.update_status(spec.name, state="failed", reason=f"{type(error).__name__}: {error}"[:2000],
                                   finished=now())
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


class ClassifierTrainer:
    """One training; the actor ends itself once the status says how it went."""

    def run(self, spec: dict[str, Any]) -> None:
        import ray
        import torch

        try:
            spec = TrainingSpec.model_validate(spec)
            # the CPUs the training reserves (the actor's own, or its Ray Train worker's): its encoding passes
            # use as many threads
            torch.set_num_threads(max(1, int(spec.cpus_per_worker)))
            train(spec)
        except BaseException:  # noqa: BLE001 -- already recorded in the status by train()
            pass
        finally:
            ray.actor.exit_actor()


# ---------------------------------------------------------------- from the ingress
def actor_name(name: str) -> str:
    return ACTOR_PREFIX + name


def start(spec: TrainingSpec) -> None:
    import ray

    actor = ray.remote(ClassifierTrainer).options(
        name=actor_name(spec.name), namespace=NAMESPACE, lifetime="detached", max_restarts=0,
        # trained in the actor, the rounds need its CPUs; otherwise each round's worker group reserves them
        num_cpus=spec.cpus_per_worker if spec.in_process else 0,
    ).remote()
    actor.run.remote(spec.model_dump(mode="json"))


def active() -> list[str]:
    """Names of the classifiers whose training actor is alive (pending or running)."""
    import ray

    return sorted(entry["name"][len(ACTOR_PREFIX):] for entry in ray.util.list_named_actors(all_namespaces=True)
                  if entry["namespace"] == NAMESPACE and entry["name"].startswith(ACTOR_PREFIX))


def stop(name: str, wait_s: float = 30.0) -> bool:
    """Kill the training of ``name`` and wait until its actor is gone (so it writes nothing after); whether
    one was running."""
    import ray

    try:
        actor = ray.get_actor(actor_name(name), namespace=NAMESPACE)
    except ValueError:
        return False
    ray.kill(actor, no_restart=True)
    deadline = time.monotonic() + wait_s
    while name in active() and time.monotonic() < deadline:
        time.sleep(0.2)
    return True
