"""Batch samplers for contrastive training (pure Python/numpy, deterministic per epoch)."""

from contrastext.train.samplers.class_balanced import ClassBalancedBatchSampler
from contrastext.train.samplers.no_duplicates import iter_no_duplicate_batches

__all__ = [
    "ClassBalancedBatchSampler",
    "iter_no_duplicate_batches",
]
