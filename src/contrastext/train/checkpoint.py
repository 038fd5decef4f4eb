"""Training checkpoints: the encoder in sentence-transformers format plus the optimiser state beside it."""

from __future__ import annotations

import json
import random
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

MODEL_SUBDIR = "model"
STATE_FILE = "trainer_state.pt"
PROGRESS_FILE = "progress.json"


@dataclass
class Progress:
    """Where training stands: the global step, and the epoch and batch within it that come next."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0


def checkpoint_dir_name(progress: Progress) -> str:
    return f"checkpoint_step{progress.step:09d}"


_CHECKPOINT_DIR = re.compile(r"checkpoint_step(\d+)$")


def checkpoint_step(location: str | None) -> int:
    """The step in a checkpoint folder's name, as :func:`checkpoint_dir_name` writes it
    (``…/checkpoint_step000000120`` → 120); -1 for none."""
    found = _CHECKPOINT_DIR.search(str(location or "").rstrip("/"))
    return int(found.group(1)) if found else -1


def save_checkpoint(directory: Path, encoder, optimizer: torch.optim.Optimizer, scheduler,
                    progress: Progress) -> None:
    encoder.save(directory / MODEL_SUBDIR)
    torch.save({
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "numpy_rng": np.random.get_state(),
        "python_rng": random.getstate(),
    }, directory / STATE_FILE)
    (directory / PROGRESS_FILE).write_text(json.dumps(asdict(progress)))


def load_progress(directory: Path) -> Progress:
    return Progress(**json.loads((directory / PROGRESS_FILE).read_text()))


def restore_state(directory: Path, optimizer: torch.optim.Optimizer, scheduler) -> None:
    state = torch.load(directory / STATE_FILE, map_location="cpu", weights_only=False)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["torch_rng"])
    np.random.set_state(state["numpy_rng"])
    random.setstate(state["python_rng"])
