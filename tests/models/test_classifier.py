"""TextClassifier on the tiny random encoder: pooling, head, freezing, save/load and its errors."""

import numpy as np
import pytest
import torch

from contrastext.models import TextEncoder
from contrastext.models.classifier import ClassifierLayoutError, TextClassifier

TEXTS = ["the rocket reached orbit", "the goalkeeper saved a penalty", "an orbit around mars", "a late goal"]


def test_forward_gives_pooled_embeddings_and_logits(tiny_encoder_dir):
    model = TextClassifier.from_pretrained(tiny_encoder_dir, num_labels=3)
    embeddings, logits = model(model.tokenize(TEXTS))
    assert embeddings.shape == (4, 32) and logits.shape == (4, 3)
    encoder = TextEncoder.from_pretrained(tiny_encoder_dir)
    np.testing.assert_allclose(embeddings.detach().numpy(), encoder.encode(TEXTS), atol=1e-5)


def test_cls_and_mean_pooling_differ(tiny_encoder_dir):
    mean = TextClassifier.from_pretrained(tiny_encoder_dir, num_labels=2, pooling="mean")
    cls = TextClassifier.from_pretrained(tiny_encoder_dir, num_labels=2, pooling="cls")
    features = mean.tokenize(TEXTS)
    token_states = cls.encoder.transformer(**{k: v for k, v in features.items()}).last_hidden_state
    cls_embeddings = cls(features)[0].detach()
    torch.testing.assert_close(cls_embeddings, token_states[:, 0].detach())
    assert not torch.allclose(mean(features)[0].detach(), cls_embeddings)


def test_save_and_load_restore_the_head_and_label_names(tiny_encoder_dir, tmp_path):
    torch.manual_seed(1)
    model = TextClassifier.from_pretrained(tiny_encoder_dir, num_labels=3, labels=["space", "sport", "other"])
    before = model.predict(TEXTS)
    folder = model.save(tmp_path / "clf")
    loaded = TextClassifier.load(folder)
    after = loaded.predict(TEXTS)
    assert loaded.labels == ["space", "sport", "other"] and loaded.num_labels == 3
    np.testing.assert_allclose(after.probabilities, before.probabilities, atol=1e-6)
    np.testing.assert_allclose(after.probabilities.sum(axis=1), 1.0, atol=1e-5)
    assert after.labels.shape == (4,)
    # the folder is still a plain encoder folder for everything that only embeds
    np.testing.assert_allclose(TextEncoder.load(folder).encode(TEXTS), after.embeddings, atol=1e-5)
    assert TextClassifier.has_head(folder) and not TextClassifier.has_head(tiny_encoder_dir)


def test_reset_head_starts_a_new_head(tiny_encoder_dir, tmp_path):
    torch.manual_seed(1)
    folder = TextClassifier.from_pretrained(tiny_encoder_dir, num_labels=3).save(tmp_path / "clf")
    torch.manual_seed(2)
    fresh = TextClassifier.from_pretrained(folder, num_labels=4, reset_head=True)
    assert fresh.num_labels == 4


def test_head_errors_are_clear(tiny_encoder_dir, tmp_path):
    with pytest.raises(ClassifierLayoutError, match="num_labels"):
        TextClassifier.from_pretrained(tiny_encoder_dir)
    folder = TextClassifier.from_pretrained(tiny_encoder_dir, num_labels=3).save(tmp_path / "clf")
    with pytest.raises(ClassifierLayoutError, match="3 labels, not 5"):
        TextClassifier.from_pretrained(folder, num_labels=5)
    (folder / "classifier_head.safetensors").unlink()
    with pytest.raises(ClassifierLayoutError, match="incomplete"):
        TextClassifier.from_pretrained(folder)
    with pytest.raises(ValueError, match="label names"):
        TextClassifier(TextEncoder.load(tiny_encoder_dir), 2, labels=["a", "b", "c"])


def test_frozen_encoder_only_trains_the_head(tiny_encoder_dir):
    model = TextClassifier.from_pretrained(tiny_encoder_dir, num_labels=2, dropout=0.5)
    model.freeze_encoder()
    model.train()
    assert not model.encoder.training and model.dropout.training
    _, logits = model(model.tokenize(TEXTS))
    torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1, 0, 1])).backward()
    assert model.head.weight.grad is not None and model.head.weight.grad.abs().sum() > 0
    assert all(p.grad is None and not p.requires_grad for p in model.encoder.parameters())
