import json

import numpy as np
import pytest
import torch

from contrastext.models import TextEncoder, UnsupportedModelLayoutError, pool
from contrastext.models.encoder import token_budget_batches

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Quantum mechanics describes nature at the smallest scales of energy.",
    "short",
    "A considerably longer passage about the history of the Roman Empire, its provinces, its roads "
    "and the administrative reforms of Diocletian that divided it into tetrarchies.",
    "Football is played by two teams of eleven players.",
]


@pytest.fixture(scope="module")
def tiny(tiny_encoder_dir):
    return TextEncoder.from_pretrained(tiny_encoder_dir)


def _reference_pool(states, mask, mode):
    out = []
    for s, m in zip(states, mask):
        kept = s[m.bool()]
        out.append({"mean": kept.mean(0), "max": kept.max(0).values, "cls": s[0]}[mode])
    return torch.stack(out)


@pytest.mark.parametrize("mode", ["mean", "max", "cls"])
def test_pooling_matches_a_row_by_row_reference(mode):
    torch.manual_seed(0)
    states = torch.randn(3, 7, 5)
    mask = torch.tensor([[1] * 7, [1] * 3 + [0] * 4, [1] * 5 + [0] * 2])
    torch.testing.assert_close(pool(states, mask, mode), _reference_pool(states, mask, mode))


def test_encode_returns_float32_in_input_order_whatever_the_batching(tiny):
    full = tiny.encode(TEXTS, batch_size=16)
    assert full.dtype == np.float32 and full.shape == (len(TEXTS), 32)
    one_by_one = np.stack([tiny.encode([t])[0] for t in TEXTS])
    np.testing.assert_allclose(tiny.encode(TEXTS, batch_size=2), one_by_one, atol=1e-5)
    np.testing.assert_allclose(full, one_by_one, atol=1e-5)


def test_long_texts_are_encoded_in_batches_of_bounded_tokens(tiny, monkeypatch):
    from contrastext.models import encoder as encoder_module

    lengths = [512, 500, 130, 128, 64, 64, 10, 3]
    batches = list(token_budget_batches(range(len(lengths)), lengths, batch_size=4, max_tokens=1024))
    assert [i for batch in batches for i in batch] == list(range(len(lengths)))  # every row once, in order
    assert batches == [[0, 1], [2, 3, 4, 5], [6, 7]]  # 2 × 512 tokens fit; 4 rows at most
    assert list(token_budget_batches([0, 1], [5000, 10], batch_size=8, max_tokens=1024)) == [[0], [1]]
    # the budget counts the padded width: 257 tokens padded to 320 leave room for 3 rows of 1024, not 3.98
    assert [len(b) for b in token_budget_batches(range(5), [257] * 5, 8, max_tokens=1024, pad_to_multiple_of=64)] \
        == [3, 2]
    # the batches a long text gets do not change what it is encoded to
    full = tiny.encode(TEXTS, batch_size=16)
    monkeypatch.setattr(encoder_module, "MAX_BATCH_TOKENS", 8)
    calls = []
    forward = type(tiny).forward
    monkeypatch.setattr(type(tiny), "forward", lambda self, features: calls.append(features["input_ids"].shape)
                        or forward(self, features))
    np.testing.assert_allclose(tiny.encode(TEXTS, batch_size=16), full, atol=1e-5)
    assert max(rows for rows, _ in calls) < len(TEXTS) and all(rows == 1 or rows * width <= 8 for rows, width in calls)


def test_encode_of_nothing_is_an_empty_matrix(tiny):
    assert tiny.encode([]).shape == (0, 32)


def test_encode_agrees_with_the_training_forward(tiny):
    with torch.no_grad():
        expected = tiny.embed(TEXTS).numpy()
    np.testing.assert_allclose(tiny.encode(TEXTS), expected, atol=1e-5)


def test_padding_to_a_multiple_changes_shapes_not_embeddings(tiny_encoder_dir):
    encoder = TextEncoder.from_pretrained(tiny_encoder_dir, device="cpu")
    plain = encoder.encode(TEXTS, batch_size=2)
    widths: list[int] = []
    hook = encoder.transformer.register_forward_pre_hook(
        lambda module, args, kwargs: widths.append(kwargs["input_ids"].shape[1]), with_kwargs=True)
    try:
        encoder.pad_to_multiple_of = 16
        padded = encoder.encode(TEXTS, batch_size=2)
    finally:
        hook.remove()
    assert widths and all(w % 16 == 0 or w == encoder.max_length for w in widths)
    np.testing.assert_allclose(padded, plain, atol=1e-5)


def test_bf16_weights_give_float32_embeddings_close_to_fp32(tiny_encoder_dir):
    encoder = TextEncoder.from_pretrained(tiny_encoder_dir, device="cpu")
    fp32 = encoder.encode(TEXTS)
    encoder.transformer.to(torch.bfloat16)
    bf16 = encoder.encode(TEXTS)
    assert bf16.dtype == np.float32
    cosine = (fp32 * bf16).sum(1) / np.linalg.norm(fp32, axis=1) / np.linalg.norm(bf16, axis=1)
    assert cosine.min() > 0.99 and not np.allclose(fp32, bf16, atol=1e-6)


def test_max_length_truncates(tiny):
    long_text = "word " * 500
    a = tiny.encode([long_text], max_length=16)
    b = tiny.encode(["word " * 14], max_length=16)  # [CLS] + 14 words + [SEP] = 16 tokens
    np.testing.assert_allclose(a, b, atol=1e-5)


def test_fit_positions_reads_what_a_shorter_model_can_and_nothing_else_changes(tiny_encoder_dir):
    from contrastext.config import EncoderConfig
    from contrastext.methods.training import load_text_encoder

    long_text = "word " * 400  # 402 tokens: past the tiny model's 128 positions
    as_asked = TextEncoder.from_pretrained(tiny_encoder_dir, max_length=512)
    assert as_asked.max_length == 512
    with pytest.raises((IndexError, RuntimeError)):
        as_asked.encode([long_text])
    fitted = TextEncoder.from_pretrained(tiny_encoder_dir, max_length=512, fit_positions=True)
    assert fitted.max_length == 128
    np.testing.assert_allclose(fitted.encode([long_text]), as_asked.encode([long_text], max_length=128), atol=1e-5)
    # the job's settings and the methods' loader read up to what the model can; a shorter ask is kept
    assert EncoderConfig(model=str(tiny_encoder_dir), max_length=512).load().max_length == 128
    assert EncoderConfig(model=str(tiny_encoder_dir), max_length=100).load().max_length == 100
    assert load_text_encoder(str(tiny_encoder_dir), 512).max_length == 128


def test_an_encoder_object_reads_the_length_asked_through_a_view_that_shares_its_weights(tiny):
    from contrastext.methods.training import load_text_encoder

    long_text = "word " * 400
    assert tiny.max_length == 64
    view = load_text_encoder(tiny, 16)
    assert view is not tiny and view.max_length == 16 and tiny.max_length == 64  # the caller's object is kept
    assert view.transformer is tiny.transformer and view.tokenizer is tiny.tokenizer
    np.testing.assert_allclose(view.encode([long_text]), tiny.encode([long_text], max_length=16), atol=1e-6)
    assert not np.allclose(view.encode([long_text]), tiny.encode([long_text]), atol=1e-3)
    # past the model's 128 positions it reads 128; the length it reads already, or none asked: the object itself
    assert load_text_encoder(tiny, 512).max_length == 128
    assert load_text_encoder(tiny, 64) is tiny and load_text_encoder(tiny, None) is tiny


def test_model_token_limit_takes_the_tokenizer_limit_where_it_is_lower(tiny):
    from types import SimpleNamespace

    from contrastext.models.encoder import model_token_limit

    roberta_like = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=514))
    assert model_token_limit(roberta_like, SimpleNamespace(model_max_length=512)) == 512
    # tokenizers without a limit say so with a huge number
    assert model_token_limit(roberta_like, SimpleNamespace(model_max_length=int(1e30))) == 514
    assert model_token_limit(SimpleNamespace(config=SimpleNamespace()), SimpleNamespace()) is None
    assert model_token_limit(tiny.transformer, tiny.tokenizer) == 128


def test_normalize_gives_unit_vectors(tiny_encoder_dir):
    encoder = TextEncoder.from_pretrained(tiny_encoder_dir, normalize=True)
    np.testing.assert_allclose(np.linalg.norm(encoder.encode(TEXTS), axis=1), 1.0, atol=1e-5)


def test_save_and_load_round_trip_keeps_settings_and_embeddings(tiny, tmp_path):
    tiny.pooling, tiny.normalize = "max", True
    try:
        tiny.save(tmp_path / "m")
        again = TextEncoder.load(tmp_path / "m")
        assert (again.pooling, again.normalize, again.max_length) == ("max", True, 64)
        np.testing.assert_allclose(again.encode(TEXTS), tiny.encode(TEXTS), atol=1e-6)
    finally:
        tiny.pooling, tiny.normalize = "mean", False


def test_plain_hugging_face_folder_gets_mean_pooling(tiny, tmp_path):
    tiny.transformer.save_pretrained(tmp_path)
    tiny.tokenizer.save_pretrained(tmp_path)
    plain = TextEncoder.load(tmp_path)
    assert (plain.pooling, plain.normalize) == ("mean", False)
    np.testing.assert_allclose(plain.encode(TEXTS, max_length=64), tiny.encode(TEXTS), atol=1e-6)


def test_unsupported_sentence_transformers_modules_are_refused(tiny, tmp_path):
    tiny.save(tmp_path)
    modules = json.loads((tmp_path / "modules.json").read_text())
    modules.append({"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(UnsupportedModelLayoutError, match="Dense"):
        TextEncoder.load(tmp_path)


def test_lower_case_models_lower_case_their_input(tiny, tmp_path):
    tiny.save(tmp_path)
    config = json.loads((tmp_path / "sentence_bert_config.json").read_text())
    (tmp_path / "sentence_bert_config.json").write_text(json.dumps({**config, "do_lower_case": True}))
    lowered = TextEncoder.load(tmp_path)
    np.testing.assert_allclose(lowered.encode(["HELLO World"]), lowered.encode(["hello world"]), atol=1e-6)


def _hand_padded(encoder, tokens):
    """The hand-written padding ``TextEncoder.pad`` replaced: right-padded ids and type ids, a 0/1 mask."""
    rows = tokens["input_ids"]
    width = max(len(row) for row in rows)
    if encoder.pad_to_multiple_of:
        width = max(width, min(-(-width // encoder.pad_to_multiple_of) * encoder.pad_to_multiple_of,
                               encoder.max_length))
    out = {}
    for key, value in (("input_ids", encoder.tokenizer.pad_token_id), ("token_type_ids", 0)):
        if key in tokens:
            padded = np.full((len(rows), width), value, dtype=np.int64)
            for i, row in enumerate(tokens[key]):
                padded[i, :len(row)] = row
            out[key] = torch.from_numpy(padded)
    lengths = torch.tensor([len(row) for row in rows])
    out["attention_mask"] = (torch.arange(width)[None, :] < lengths[:, None]).long()
    return out


@pytest.mark.parametrize("multiple", [None, 8, 16, 48])
def test_pad_gives_the_hand_padded_tensors(tiny_encoder_dir, multiple):
    encoder = TextEncoder.from_pretrained(tiny_encoder_dir, device="cpu")  # max_length 64: 48 rounds past it
    encoder.pad_to_multiple_of = multiple
    texts = TEXTS + ["word " * 40, "word " * 60 + "end", "a b"]
    tokens = encoder.tokenizer(texts, truncation=True, max_length=encoder.max_length, padding=False,
                               return_attention_mask=False)
    assert "token_type_ids" in tokens
    for batch in ([0], [0, 2], [3, 5, 6], list(range(len(texts)))):
        rows = {key: [tokens[key][i] for i in batch] for key in ("input_ids", "token_type_ids")}
        padded, want = encoder.pad(rows), _hand_padded(encoder, rows)
        assert padded.keys() == want.keys()
        for key in want:
            assert padded[key].dtype == torch.int64 and torch.equal(padded[key], want[key]), (key, batch)
        without_types = encoder.pad({"input_ids": rows["input_ids"]})
        assert set(without_types) == {"input_ids", "attention_mask"}


def test_encode_draws_a_progress_bar_on_a_terminal_only_when_asked(tiny, stderr_terminal):
    terminal_stderr = stderr_terminal()
    tiny.encode(TEXTS * 4, batch_size=4, show_progress=True)
    drawn = terminal_stderr.getvalue()
    assert "encoded" in drawn and "20/20" in drawn and "\r" in drawn
    terminal_stderr.truncate(0)
    tiny.encode(TEXTS, show_progress=False)
    assert terminal_stderr.getvalue() == ""


def test_encode_progress_stays_off_a_stream_that_is_no_terminal(tiny, capsys):
    tiny.encode(TEXTS, show_progress=True)
    assert capsys.readouterr().err == ""


def test_short_work_draws_no_progress_bar(tiny, stderr_terminal, monkeypatch):
    from contrastext import console

    terminal_stderr = stderr_terminal()
    monkeypatch.setattr(console, "PROGRESS_DELAY_S", 60.0)
    tiny.encode(TEXTS, show_progress=True)
    assert terminal_stderr.getvalue() == ""
