"""Two gloo workers on CPU versus one process over the concatenated batch.

With n_r the anchors rank r averages over (B_r for MNR, 2 B_r for NT-Xent, the local anchors that have
a positive in the global batch for SupCon), L_r the rank losses, L and dL/dx the single-process loss and
gradient, W = 2:
  (a) sum_r n_r L_r / sum_r n_r == L (with equal n_r: the plain mean of the rank losses);
  (b) backpropagating L_r * W n_r / sum n on each rank gives every local row W * dL/dx of that row;
  (c) with equal n_r that factor is 1, so plain L_r.backward() gives W * dL/dx; with unequal n_r the
      plain backward does not (the reweighting in (b) is needed).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from contrastext.losses import (MultipleNegativesRankingLoss, NTXentLoss, SupervisedNTXentLoss,
                                all_gather_with_grad, local_offset)

WORLD = 2
DIM = 6
TIMEOUT_S = 60

# name -> (loss factory, tensor inputs, whether labels are passed: SupCon's labels, NT-Xent's groups)
CASES: dict[str, tuple[Callable[[], nn.Module], tuple[str, ...], bool]] = {
    "mnr": (lambda: MultipleNegativesRankingLoss(scale=20.0), ("anchors", "positives"), False),
    "mnr_hard_negatives": (lambda: MultipleNegativesRankingLoss(scale=20.0),
                           ("anchors", "positives", "negatives"), False),
    "mnr_symmetric": (lambda: MultipleNegativesRankingLoss(scale=20.0, symmetric=True),
                      ("anchors", "positives", "negatives"), False),
    "ntxent": (lambda: NTXentLoss(temperature=0.1), ("view_a", "view_b"), False),
    "ntxent_groups": (lambda: NTXentLoss(temperature=0.1), ("view_a", "view_b"), True),
    "supcon": (lambda: SupervisedNTXentLoss(temperature=0.1), ("embeddings",), True),
}


def _global_batch(n: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1234)
    names = ("anchors", "positives", "negatives", "view_a", "view_b", "embeddings")
    batch = {k: torch.randn(n, DIM, generator=g, dtype=torch.float64) for k in names}
    labels = torch.randint(0, 3, (n,), generator=g)
    labels[0] = 99  # a singleton: row 0 (on rank 0) has no positive and is left out of SupCon's mean
    batch["labels"] = labels
    return batch


def _anchor_counts(name: str, sizes: list[int], labels: torch.Tensor) -> list[int]:
    if name.startswith("ntxent"):
        return [2 * s for s in sizes]
    if name != "supcon":
        return list(sizes)
    has_positive = (labels[:, None] == labels[None, :]).sum(dim=1) > 1
    starts = [sum(sizes[:r]) for r in range(len(sizes))]
    return [int(has_positive[s:s + b].sum()) for s, b in zip(starts, sizes)]


def _run_loss(name: str, batch: dict[str, torch.Tensor], rows: slice, scale: float = 1.0):
    make, keys, with_labels = CASES[name]
    leaves = [batch[k][rows].clone().requires_grad_() for k in keys]
    extra = [batch["labels"][rows]] if with_labels else []
    loss = make()(*leaves, *extra)
    (loss * scale).backward()
    return loss.detach(), [t.grad for t in leaves]


def _worker(rank: int, sizes: list[int], store: str, out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    try:
        n = sum(sizes)
        start = sum(sizes[:rank])
        rows = slice(start, start + sizes[rank])
        batch = _global_batch(n)

        # The gather itself: rank order, offset, and a backward that sums every rank's gradient.
        x = torch.full((sizes[rank], 2), float(rank + 1), dtype=torch.float64, requires_grad=True)
        gathered = all_gather_with_grad(x)
        (gathered * (rank + 1) * torch.arange(1, n + 1, dtype=torch.float64)[:, None]).sum().backward()
        results: dict[str, object] = {"gathered": gathered.detach(), "offset": local_offset(sizes[rank]),
                                      "gather_grad": x.grad}

        for name in CASES:
            counts = _anchor_counts(name, sizes, batch["labels"])
            loss, plain = _run_loss(name, batch, rows)
            _, weighted = _run_loss(name, batch, rows, scale=WORLD * counts[rank] / sum(counts))
            results[name] = {"loss": loss, "plain": plain, "weighted": weighted}
        torch.save(results, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def _spawn(sizes: list[int], tmp_path: Path) -> list[dict]:
    ctx = mp.start_processes(_worker, args=(sizes, str(tmp_path / "store"), str(tmp_path)), nprocs=WORLD,
                             join=False, start_method="spawn")
    deadline = time.monotonic() + TIMEOUT_S
    while not ctx.join(timeout=1):  # raises if a worker raised or died
        if time.monotonic() > deadline:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
            pytest.fail(f"distributed workers did not finish within {TIMEOUT_S}s")
    return [torch.load(tmp_path / f"rank{r}.pt") for r in range(WORLD)]


@pytest.mark.parametrize("sizes", [[5, 3], [4, 4]], ids=["unequal", "equal"])
def test_gathered_losses_match_single_process(sizes: list[int], tmp_path: Path) -> None:
    results = _spawn(sizes, tmp_path)
    n = sum(sizes)
    starts = [sum(sizes[:r]) for r in range(WORLD)]
    batch = _global_batch(n)

    expected_gathered = torch.cat([torch.full((b, 2), float(r + 1), dtype=torch.float64)
                                   for r, b in enumerate(sizes)])
    coef_sum = sum(r + 1 for r in range(WORLD)) * torch.arange(1, n + 1, dtype=torch.float64)[:, None]
    for r, res in enumerate(results):
        torch.testing.assert_close(res["gathered"], expected_gathered)
        assert res["offset"] == starts[r]
        rows = slice(starts[r], starts[r] + sizes[r])
        torch.testing.assert_close(res["gather_grad"], coef_sum[rows].expand(-1, 2))

    for name in CASES:
        counts = _anchor_counts(name, sizes, batch["labels"])
        single_loss, single_grads = _run_loss(name, batch, slice(None))
        losses = torch.stack([res[name]["loss"] for res in results])
        weights = torch.tensor(counts, dtype=torch.float64)
        torch.testing.assert_close((weights * losses).sum() / weights.sum(), single_loss, msg=name)  # (a)
        if len(set(counts)) == 1:
            torch.testing.assert_close(losses.mean(), single_loss, msg=name)

        for r, res in enumerate(results):
            rows = slice(starts[r], starts[r] + sizes[r])
            expected = [WORLD * g[rows] for g in single_grads]
            torch.testing.assert_close(res[name]["weighted"], expected, msg=name)  # (b)
            if len(set(counts)) == 1:
                torch.testing.assert_close(res[name]["plain"], expected, msg=name)  # (c)
            else:
                assert not all(torch.allclose(p, e) for p, e in zip(res[name]["plain"], expected)), name
