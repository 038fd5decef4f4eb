"""Label ids are identities (same id: same positive or class), so two different labels must never share one."""

from __future__ import annotations

import zlib

import numpy as np
import torch

from contrastext.losses import SupervisedNTXentLoss
from contrastext.train.batches import label_id

# found by enumerating "label 0", "label 1", ...: the first pair whose crc32 is the same
CRC32_COLLISION = ("label 29685295", "label 32060020")


def test_the_pair_really_collides_under_crc32():
    first, second = CRC32_COLLISION
    assert zlib.crc32(first.encode("utf-8")) == zlib.crc32(second.encode("utf-8"))


def test_labels_whose_crc32_collide_get_different_ids():
    first, second = CRC32_COLLISION
    assert label_id(first) != label_id(second)
    assert label_id(first) == label_id(np.str_(first))  # a numpy string from a Ray batch is the same label


def test_ids_fit_a_torch_long_and_integers_stay_themselves():
    ids = [label_id(f"topic {i}") for i in range(1000)]
    assert len(set(ids)) == 1000
    assert all(-2**63 <= i < 2**63 for i in ids)
    torch.tensor(ids, dtype=torch.long)  # no overflow
    assert label_id(7) == 7 and label_id(np.int64(-3)) == -3
    assert label_id(True) != 1  # a bool is not the class id 1


def test_colliding_labels_are_not_each_others_positives():
    first, second = CRC32_COLLISION
    labels = torch.tensor([label_id(first), label_id(second)])
    z = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    # two rows of different labels: no anchor has a positive, so nothing pulls them together
    assert SupervisedNTXentLoss().sum_and_count(z, labels).count == 0
