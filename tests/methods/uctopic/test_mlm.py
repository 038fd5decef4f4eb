"""The optional MLM loss of UCTopic pretraining: token masking, the tied head, the phrase objective with it."""

import pytest
import torch

from contrastext.config import EncoderConfig, LossConfig, TrainConfig
from contrastext.methods.uctopic.encoder import PhraseEncoder
from contrastext.methods.uctopic.mlm import IGNORE_INDEX, MLM_HEAD_WEIGHTS, MLMSettings, PhraseModelWithMLM, mask_tokens
from contrastext.methods.uctopic.objective import PhraseObjective

SENTENCE = "John Smith met officials from Reuters in Paris on Monday ."


@pytest.fixture()
def encoder(tiny_encoder_dir):
    return PhraseEncoder.from_pretrained(tiny_encoder_dir, max_length=32)


def _config(model, **params) -> TrainConfig:
    return TrainConfig(objective="phrase", batch_size=4, encoder=EncoderConfig(model=str(model), max_length=32),
                       loss=LossConfig(name="mnr", params={"temperature": 0.05, **params}))


def test_masking_chooses_only_real_tokens_and_follows_80_10_10(encoder):
    tokenizer = encoder.tokenizer
    features = tokenizer([SENTENCE] * 400 + ["short"] * 100, padding=True, return_tensors="pt")
    ids, mask = features["input_ids"], features["attention_mask"]
    masked, labels = mask_tokens(ids, mask, tokenizer, 0.15, torch.Generator().manual_seed(0))
    chosen = labels != IGNORE_INDEX
    special = torch.isin(ids, torch.tensor(tokenizer.all_special_ids))
    assert not (chosen & (special | ~mask.bool())).any()  # never [CLS], [SEP], padding
    assert torch.equal(labels[chosen], ids[chosen]) and torch.equal(masked[~chosen], ids[~chosen])
    real = (mask.bool() & ~special).sum().item()
    assert 0.13 < chosen.sum().item() / real < 0.17
    became_mask = (masked[chosen] == tokenizer.mask_token_id).float().mean().item()
    kept = (masked[chosen] == ids[chosen]).float().mean().item()
    assert 0.76 < became_mask < 0.84 and 0.07 < kept < 0.14


def test_tokens_already_masked_are_never_chosen(encoder):
    features = encoder.tokenize([(SENTENCE, 0, 10)] * 50, [True] * 50)
    _, labels = mask_tokens(features["input_ids"], features["attention_mask"], encoder.tokenizer, 0.9,
                            torch.Generator().manual_seed(1))
    assert (labels[features["span_mask"].bool()] == IGNORE_INDEX).all()


def test_masking_follows_its_generator_and_leaves_the_input_untouched(encoder):
    features = encoder.tokenize([(SENTENCE, 0, 10)] * 20, [True] * 20)
    ids, mask = features["input_ids"], features["attention_mask"]
    original = ids.clone()
    first = mask_tokens(ids, mask, encoder.tokenizer, 0.3, torch.Generator().manual_seed(3))
    again = mask_tokens(ids, mask, encoder.tokenizer, 0.3, torch.Generator().manual_seed(3))
    other = mask_tokens(ids, mask, encoder.tokenizer, 0.3, torch.Generator().manual_seed(4))
    assert torch.equal(ids, original)
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert not torch.equal(first[1], other[1])
    # the 10% random replacements: chosen tokens that are neither the mask token nor the original
    many = encoder.tokenizer([SENTENCE] * 400, return_tensors="pt")
    masked, labels = mask_tokens(many["input_ids"], many["attention_mask"], encoder.tokenizer, 0.5,
                                 torch.Generator().manual_seed(5))
    chosen = labels != IGNORE_INDEX
    replaced = (masked[chosen] != encoder.tokenizer.mask_token_id) & (masked[chosen] != labels[chosen])
    assert 0.07 < replaced.float().mean().item() < 0.12


def test_head_decodes_with_the_input_embeddings_and_round_trips(encoder, tmp_path):
    model = PhraseModelWithMLM.around(encoder)
    embeddings = encoder.transformer.get_input_embeddings().weight
    states = torch.randn(3, embeddings.shape[1])
    logits = model.head(states, embeddings)
    assert logits.shape == (3, embeddings.shape[0])
    assert not any(p is embeddings for p in model.head.parameters())  # tied, not copied
    with torch.no_grad():
        model.head.bias.add_(0.5)
    folder = model.save(tmp_path / "m")
    assert (folder / MLM_HEAD_WEIGHTS).is_file()
    restored = PhraseModelWithMLM.around(PhraseEncoder.from_pretrained(folder), folder)
    assert torch.allclose(restored.head.bias, model.head.bias)
    assert torch.allclose(restored.head(states, embeddings), logits + 0.5, atol=1e-5)
    # the folder still loads as a plain phrase encoder
    assert PhraseEncoder.from_pretrained(folder).encode([(SENTENCE, 0, 10)]).shape == (1, embeddings.shape[1])


def test_objective_adds_the_weighted_mlm_loss_and_trains_the_head(tiny_encoder_dir):
    rows = [((SENTENCE, 0, 10), False, (f"Yesterday {SENTENCE}", 10, 20), False, f"k{i}", -1) for i in range(4)]
    plain = PhraseObjective(_config(tiny_encoder_dir))
    plain_model = plain.build_model(str(tiny_encoder_dir), resuming=False)
    torch.manual_seed(0)
    contrastive = plain.loss(plain_model.eval(), rows, torch.device("cpu"), torch.autocast("cpu", enabled=False))

    objective = PhraseObjective(_config(tiny_encoder_dir, mlm_weight=0.5, mlm_probability=0.3, mlm_head_lr=1e-3))
    model = objective.build_model(str(tiny_encoder_dir), resuming=False).eval()
    assert isinstance(model, PhraseModelWithMLM)
    groups = objective.param_groups(model)
    assert [g["lr"] for g in groups] == [objective.config.optimizer.lr, 1e-3]
    total = objective.loss(model, rows, torch.device("cpu"), torch.autocast("cpu", enabled=False))
    # a random head over a 30k vocabulary: the MLM term is about ln(30522) ≈ 10.3
    assert total.item() - contrastive.item() == pytest.approx(0.5 * 10.3, abs=1.5)
    total.backward()
    assert model.head.dense.weight.grad is not None and model.head.dense.weight.grad.abs().sum() > 0
    assert model.phrase_encoder.transformer.get_input_embeddings().weight.grad.abs().sum() > 0


def test_bad_mlm_settings_are_refused(tiny_encoder_dir):
    with pytest.raises(ValueError, match="mlm_probability"):
        MLMSettings(weight=0.1, probability=1.5)
    with pytest.raises(ValueError, match="mlm_weight"):
        PhraseObjective(_config(tiny_encoder_dir, mlm_weight=-1))
    from contrastext.config import load_config
    from contrastext.methods.uctopic.config import UCTopicConfig

    with pytest.raises(ValueError, match="mlm_head_lr"):
        load_config(UCTopicConfig, None, ["train.loss.params.mlm_weight=0.1", "train.loss.params.mlm_head_lr=0"])
