"""Two gloo workers on CPU versus one process over the concatenated batch.

Each rank computes its loss as (sum, count) and combines it with ``mean_over_workers``, as the training
loop does. With L and dL/dx the single-process loss and gradient and W = 2, on every rank:
  (a) the combined value is L;
  (b) backpropagating what ``mean_over_workers`` returns gives every local row W * dL/dx of that row
      (DistributedDataParallel's average over the W ranks then gives the single-process parameter gradient).
This holds whatever each rank averages over: rows for MNR, 2 x rows for NT-Xent, the anchors that have a
positive for SupCon (which differ from rank to rank even with equal rows), the class weights for focal loss.
Weighting each rank's mean loss by its rows, as a loop that knows only the rows would, misses (a) for SupCon.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Optional

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from contrastext.losses import (FocalLoss, LossSum, MultipleNegativesRankingLoss, NTXentLoss,
                                SupervisedNTXentLoss, all_gather_with_grad, local_offset, mean_over_workers)
from contrastext.losses.focal_supcon import FocalSupConLoss

WORLD = 2
DIM = 6
CLASSES = 8  # logits of the focal cases; every label below is < CLASSES
TIMEOUT_S = 60
CLASS_WEIGHTS = torch.tensor([0.5, 2.0, 1.0, 3.0, 1.0, 1.0, 0.25, 1.5], dtype=torch.float64)

class _GroupedMNR(MultipleNegativesRankingLoss):
    """MNR whose labels are its ``groups`` (pairs of one label are not each other's negatives)."""

    def sum_and_count(self, anchors, positives, labels):
        return super().sum_and_count(anchors, positives, groups=labels)

    def forward(self, anchors, positives, labels):
        return self.sum_and_count(anchors, positives, labels).mean()


# name -> (loss factory, tensor inputs, whether the labels are passed: SupCon's labels, NT-Xent's groups)
CASES: dict[str, tuple[Callable[[], torch.nn.Module], tuple[str, ...], bool]] = {
    "mnr": (lambda: MultipleNegativesRankingLoss(scale=20.0), ("anchors", "positives"), False),
    "mnr_hard_negatives": (lambda: MultipleNegativesRankingLoss(scale=20.0),
                           ("anchors", "positives", "negatives"), False),
    "mnr_symmetric": (lambda: MultipleNegativesRankingLoss(scale=20.0, symmetric=True),
                      ("anchors", "positives", "negatives"), False),
    "mnr_groups": (lambda: _GroupedMNR(scale=20.0, symmetric=True), ("anchors", "positives"), True),
    "ntxent": (lambda: NTXentLoss(temperature=0.1), ("view_a", "view_b"), False),
    "ntxent_groups": (lambda: NTXentLoss(temperature=0.1), ("view_a", "view_b"), True),
    "supcon": (lambda: SupervisedNTXentLoss(temperature=0.1), ("embeddings",), True),
    "focal_weighted": (lambda: FocalLoss(gamma=2.0, weight=CLASS_WEIGHTS), ("logits",), True),
    "focal_supcon": (lambda: FocalSupConLoss(focal_weight=1.0, ntxent_weight=0.5, temperature=0.1),
                     ("logits", "embeddings"), True),
}

# (rows per rank, labels of the concatenated batch or None for random ones with a singleton first)
SCENARIOS = {
    "unequal_rows": ([5, 3], None),
    "equal_rows": ([4, 4], None),
    # equal rows, but SupCon averages over 2 anchors on rank 0 (two singletons) and 4 on rank 1
    "equal_rows_unequal_anchors": ([4, 4], [5, 4, 0, 1, 0, 1, 2, 2]),
    # rank 1 has no anchor with a positive at all: its count is 0 and its rows are only negatives
    "a_rank_without_anchors": ([3, 3], [0, 0, 1, 5, 6, 7]),
}


def _global_batch(n: int, labels: Optional[list[int]]) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1234)
    names = ("anchors", "positives", "negatives", "view_a", "view_b", "embeddings")
    batch = {k: torch.randn(n, DIM, generator=g, dtype=torch.float64) for k in names}
    batch["logits"] = torch.randn(n, CLASSES, generator=g, dtype=torch.float64)
    if labels is None:
        random_labels = torch.randint(0, 3, (n,), generator=g)
        random_labels[0] = 3  # a singleton: row 0 (on rank 0) has no positive and is left out of SupCon's mean
        batch["labels"] = random_labels
    else:
        batch["labels"] = torch.tensor(labels)
    return batch


def _leaves(name: str, batch: dict[str, torch.Tensor], rows: slice) -> tuple[list[torch.Tensor], list]:
    _, keys, with_labels = CASES[name]
    leaves = [batch[k][rows].clone().requires_grad_() for k in keys]
    return leaves, [batch["labels"][rows]] if with_labels else []


def _parts(name: str, leaves: list[torch.Tensor], extra: list) -> list[LossSum]:
    loss = CASES[name][0]()
    if isinstance(loss, FocalSupConLoss):
        return loss.parts(*leaves, *extra)
    return [loss.sum_and_count(*leaves, *extra)]


def _single_process(name: str, batch: dict[str, torch.Tensor]):
    leaves, extra = _leaves(name, batch, slice(None))
    loss = CASES[name][0]()(*leaves, *extra)
    loss.backward()
    return loss.detach(), [t.grad for t in leaves]


def _worker(rank: int, sizes: list[int], labels: Optional[list[int]], store: str, out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    try:
        n = sum(sizes)
        start = sum(sizes[:rank])
        rows = slice(start, start + sizes[rank])
        batch = _global_batch(n, labels)

        # The gather itself: rank order, offset, and a backward that sums every rank's gradient.
        x = torch.full((sizes[rank], 2), float(rank + 1), dtype=torch.float64, requires_grad=True)
        gathered = all_gather_with_grad(x)
        (gathered * (rank + 1) * torch.arange(1, n + 1, dtype=torch.float64)[:, None]).sum().backward()
        results: dict[str, object] = {"gathered": gathered.detach(), "offset": local_offset(sizes[rank]),
                                      "gather_grad": x.grad}

        for name in CASES:
            leaves, extra = _leaves(name, batch, rows)
            to_backward, value = mean_over_workers(_parts(name, leaves, extra))
            to_backward.backward()
            # what a loop that knows only the rows computes: each rank's mean loss weighted by its rows
            mean = sum(part.mean() for part in _parts(name, [t.detach() for t in leaves], extra))
            by_rows = torch.tensor([float(mean) * sizes[rank]], dtype=torch.float64)
            dist.all_reduce(by_rows)
            results[name] = {"value": value, "grads": [t.grad for t in leaves], "by_rows": float(by_rows) / n}
        torch.save(results, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def _spawn(sizes: list[int], labels: Optional[list[int]], tmp_path: Path) -> list[dict]:
    ctx = mp.start_processes(_worker, args=(sizes, labels, str(tmp_path / "store"), str(tmp_path)),
                             nprocs=WORLD, join=False, start_method="spawn")
    deadline = time.monotonic() + TIMEOUT_S
    while not ctx.join(timeout=1):  # raises if a worker raised or died
        if time.monotonic() > deadline:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
            pytest.fail(f"distributed workers did not finish within {TIMEOUT_S}s")
    return [torch.load(tmp_path / f"rank{r}.pt") for r in range(WORLD)]


def _supcon_anchors(sizes: list[int], labels: torch.Tensor) -> list[int]:
    has_positive = (labels[:, None] == labels[None, :]).sum(dim=1) > 1
    starts = [sum(sizes[:r]) for r in range(len(sizes))]
    return [int(has_positive[s:s + b].sum()) for s, b in zip(starts, sizes)]


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_gathered_losses_match_single_process(scenario: str, tmp_path: Path) -> None:
    sizes, labels = SCENARIOS[scenario]
    results = _spawn(sizes, labels, tmp_path)
    n = sum(sizes)
    starts = [sum(sizes[:r]) for r in range(WORLD)]
    batch = _global_batch(n, labels)

    expected_gathered = torch.cat([torch.full((b, 2), float(r + 1), dtype=torch.float64)
                                   for r, b in enumerate(sizes)])
    coef_sum = sum(r + 1 for r in range(WORLD)) * torch.arange(1, n + 1, dtype=torch.float64)[:, None]
    for r, res in enumerate(results):
        torch.testing.assert_close(res["gathered"], expected_gathered)
        assert res["offset"] == starts[r]
        rows = slice(starts[r], starts[r] + sizes[r])
        torch.testing.assert_close(res["gather_grad"], coef_sum[rows].expand(-1, 2))

    for name in CASES:
        single_loss, single_grads = _single_process(name, batch)
        # FocalSupConLoss computes in float32 (it casts what a bf16 forward gives it)
        rtol, atol = (1e-5, 1e-6) if name == "focal_supcon" else (1e-10, 1e-12)
        for r, res in enumerate(results):
            assert res[name]["value"] == pytest.approx(float(single_loss), rel=rtol, abs=atol), name  # (a)
            rows = slice(starts[r], starts[r] + sizes[r])
            torch.testing.assert_close(res[name]["grads"], [WORLD * g[rows] for g in single_grads],
                                       rtol=rtol, atol=atol, msg=name)  # (b)

    anchors = _supcon_anchors(sizes, batch["labels"])
    if anchors[0] * sizes[1] != anchors[1] * sizes[0]:  # the ranks' anchor shares differ from their row shares
        for name in ("supcon", "focal_supcon"):
            single_loss, _ = _single_process(name, batch)
            assert results[0][name]["by_rows"] != pytest.approx(float(single_loss), rel=1e-6), name
