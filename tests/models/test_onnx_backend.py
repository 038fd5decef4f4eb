"""The ONNX backend: fp32 equal to torch, int8 close, the fallback line, exports cached, a round re-exported."""

import logging

import numpy as np
import pytest

from contrastext.models import TextEncoder, onnx_backend, onnx_export, onnx_quality

TEXTS = ["a short one", "a somewhat longer sentence about the markets and the weather today",
         "sports", "science and technology news from the lab, with many more words than the others"] * 5


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CONTRASTEXT_CACHE", str(tmp_path / "cache"))


def _cosines(a, b):
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(axis=1)


@pytest.mark.parametrize("pooling", ["mean", "cls", "max"])
def test_onnx_fp32_equals_torch_on_the_tiny_model(tiny_encoder_dir, pooling):
    torch_enc = TextEncoder.from_pretrained(tiny_encoder_dir, pooling=pooling, normalize=True)
    onnx_enc = TextEncoder.from_pretrained(tiny_encoder_dir, pooling=pooling, normalize=True, backend="onnx")
    onnx_enc.pad_to_multiple_of = torch_enc.pad_to_multiple_of = 8
    expected, got = torch_enc.encode(TEXTS, batch_size=3), onnx_enc.encode(TEXTS, batch_size=3)
    assert onnx_enc.backend == "onnx" and got.dtype == np.float32 and got.shape == expected.shape
    assert np.abs(got - expected).max() <= 1e-4


def test_a_second_load_does_not_export_again(tiny_encoder_dir):
    before = onnx_export.EXPORTS_MADE
    first = TextEncoder.from_pretrained(tiny_encoder_dir, backend="onnx")
    assert first.prepare_backend() > 0 and onnx_export.EXPORTS_MADE == before + 1
    second = TextEncoder.from_pretrained(tiny_encoder_dir, backend="onnx")
    second.encode(TEXTS[:4])
    assert onnx_export.EXPORTS_MADE == before + 1


def test_trained_weights_are_exported_again(tiny_encoder_dir):
    import torch

    encoder = TextEncoder.from_pretrained(tiny_encoder_dir, backend="onnx")
    before = encoder.encode(TEXTS[:4])
    encoder.train()
    with torch.no_grad():
        encoder.transformer.embeddings.word_embeddings.weight.mul_(1.5)
    encoder.eval()
    made = onnx_export.EXPORTS_MADE
    after = encoder.encode(TEXTS[:4])
    assert onnx_export.EXPORTS_MADE == made + 1 and not np.allclose(before, after)
    encoder.backend_requested = "torch"
    np.testing.assert_allclose(after, TextEncoder.encode(encoder.set_backend("torch"), TEXTS[:4]), atol=1e-4)


def test_int8_falls_back_to_fp32_with_one_line_when_the_check_fails(tiny_encoder_dir, monkeypatch, caplog):
    monkeypatch.setattr(onnx_quality, "MIN_MEAN_COSINE", 1.01)
    monkeypatch.setattr(onnx_backend, "int8_cpu_reason", lambda: None)
    encoder = TextEncoder.from_pretrained(tiny_encoder_dir, backend="onnx-int8")
    with caplog.at_level(logging.WARNING, logger="contrastext.models.onnx_backend"):
        encoder.encode(TEXTS[:4])
        encoder.encode(TEXTS[:4])
    lines = [r.getMessage() for r in caplog.records if r.name == "contrastext.models.onnx_backend"]
    assert len(lines) == 1 and "fp32 ONNX is used" in lines[0] and "mean cosine" in lines[0]
    assert "with the feed-forward layers in fp32" in lines[0] and encoder.backend == "onnx"
    quality = onnx_export.read_meta(encoder.onnx_folder)["int8"]  # every step tried, the last graph kept
    assert quality["kept_fp32"] == "the feed-forward layers" and len(quality["tries"]) == 4


@pytest.mark.parametrize("asked, used", [("onnx-int8", "onnx"), ("auto", "torch")])
def test_int8_falls_back_on_a_cpu_without_vnni(tiny_encoder_dir, monkeypatch, caplog, asked, used):
    monkeypatch.setattr(onnx_backend, "cpu_flags", lambda: {"sse4_2"})
    encoder = TextEncoder.from_pretrained(tiny_encoder_dir, backend=asked, device="cpu")
    made = onnx_export.EXPORTS_MADE
    with caplog.at_level(logging.WARNING, logger="contrastext.models.onnx_backend"):
        encoder.encode(TEXTS[:4])
    lines = [r.getMessage() for r in caplog.records if r.name == "contrastext.models.onnx_backend"]
    assert len(lines) == 1 and "avx512_vnni" in lines[0] and encoder.backend == used
    assert onnx_export.EXPORTS_MADE == made + (used == "onnx")  # auto falls back to torch without exporting


def test_auto_falls_back_to_torch_when_the_int8_check_fails(tiny_encoder_dir, monkeypatch, caplog):
    # fp32 ONNX measured slower than torch on CPU, so auto's fallback is torch (onnx-int8's is fp32 ONNX)
    monkeypatch.setattr(onnx_quality, "MIN_MEAN_COSINE", 1.01)
    monkeypatch.setattr(onnx_backend, "int8_cpu_reason", lambda: None)
    encoder = TextEncoder.from_pretrained(tiny_encoder_dir, backend="auto", device="cpu")
    with caplog.at_level(logging.WARNING, logger="contrastext.models.onnx_backend"):
        got = encoder.encode(TEXTS)
    lines = [r.getMessage() for r in caplog.records if r.name == "contrastext.models.onnx_backend"]
    assert len(lines) == 1 and lines[0].startswith("backend auto: torch is used") and encoder.backend == "torch"
    np.testing.assert_array_equal(got, TextEncoder.from_pretrained(tiny_encoder_dir).encode(TEXTS))


def test_numpy_pooling_matches_torch_pooling():
    import torch

    from contrastext.models.encoder import pool

    rng = np.random.default_rng(0)
    states = rng.normal(size=(3, 5, 4)).astype(np.float32)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    for mode in ("mean", "cls", "max"):
        expected = pool(torch.from_numpy(states), torch.from_numpy(mask), mode).numpy()
        np.testing.assert_allclose(onnx_backend.pool_numpy(states, mask, mode), expected, atol=1e-6)


def test_the_job_exports_a_rounds_model_before_it_encodes(tiny_encoder_dir):
    from contrastext.config import EncoderConfig
    from contrastext.methods.wcsbert.stored_rounds import export_for_inference

    config = EncoderConfig(model=str(tiny_encoder_dir), backend="onnx")
    assert export_for_inference(config, str(tiny_encoder_dir)) > 0
    made = onnx_export.EXPORTS_MADE
    export_for_inference(config, str(tiny_encoder_dir))  # the encode actors' load finds it cached
    assert onnx_export.EXPORTS_MADE == made
    assert export_for_inference(config.model_copy(update={"backend": "torch"}), str(tiny_encoder_dir)) == 0.0


@pytest.mark.slow
@pytest.mark.integration
def test_minilm_onnx_and_int8_against_torch():
    texts = onnx_quality.sample_texts(96)
    expected = TextEncoder.from_pretrained("bundled:minilm", max_length=128).encode(texts)
    fp32 = TextEncoder.from_pretrained("bundled:minilm", max_length=128, backend="onnx").encode(texts)
    assert np.abs(fp32 - expected).max() <= 1e-4 and _cosines(fp32, expected).min() >= 0.9999
    int8_encoder = TextEncoder.from_pretrained("bundled:minilm", max_length=128, backend="onnx-int8")
    int8 = int8_encoder.encode(texts)
    if int8_encoder.backend == "onnx-int8":  # a CPU with VNNI
        assert _cosines(int8, expected).mean() >= 0.99


@pytest.mark.parametrize("mask", [False, True])
def test_phrase_spans_pool_the_onnx_sessions_token_states_as_torch(tiny_encoder_dir, mask, monkeypatch):
    from contrastext.methods.uctopic.encoder import PhraseEncoder

    sentence = "The central bank in Frankfurt raised interest rates on Tuesday."
    spans = [(sentence, 4, 16), (sentence, 25, 34), (sentence, 42, 56), ("Apple sells phones.", 0, 5)]
    expected = PhraseEncoder.from_pretrained(tiny_encoder_dir).encode(spans, mask=mask)
    onnx = PhraseEncoder.from_pretrained(tiny_encoder_dir, backend="onnx")
    calls = []
    real = onnx_backend.OnnxSession.token_states
    monkeypatch.setattr(onnx_backend.OnnxSession, "token_states", lambda self, f: calls.append(1) or real(self, f))
    onnx.prepare_backend()  # the export traces the module; from here on it must not run
    monkeypatch.setattr(onnx.encoder.transformer, "forward", None)
    got = onnx.encode(spans, mask=mask)
    assert onnx.backend == "onnx" and got.shape == expected.shape and calls
    assert np.abs(got - expected).max() <= 1e-4
    assert not np.allclose(got[0], got[1])  # the spans pooled, not one sentence vector


def _wide_range_tiny_encoder(folder):
    """The tiny BERT with feed-forward activations of a wide range, as a trained model's are (random weights keep
    every int8 graph within 1e-6 of fp32): larger feed-forward weights, two channels of them 30 times larger,
    and two channels of each attention block's output norm 100 times larger."""
    import torch

    from conftest import tiny_bert_config

    encoder = TextEncoder.from_config(tiny_bert_config(), pooling="mean", normalize=False, max_length=64)
    with torch.no_grad():
        for layer in encoder.transformer.encoder.layer:
            layer.intermediate.dense.weight.mul_(10)
            layer.intermediate.dense.weight[:2].mul_(30)
            layer.output.dense.weight.mul_(10)
            layer.attention.output.LayerNorm.weight[:2].mul_(100)
    return encoder.save(folder)


def test_an_int8_graph_that_fails_its_check_keeps_the_feed_forward_layers_in_fp32(monkeypatch, caplog, tmp_path):
    """The export quantizes every MatMul, then, while the check fails, keeps the feed-forward output projections,
    then also the later layers' feed-forward input projections, then the whole feed-forward block, in fp32. The
    threshold is set between what the graphs score (measured here with the same quantizer and check), so that
    only the last step passes."""
    monkeypatch.setattr(onnx_backend, "int8_cpu_reason", lambda: None)
    model_dir = _wide_range_tiny_encoder(tmp_path / "wide")
    encoder = TextEncoder.from_pretrained(model_dir, backend="onnx")
    encoder.prepare_backend()
    fp32 = encoder.onnx_folder / onnx_export.FP32_FILE

    def embed(graph, texts):
        return onnx_backend.encode_graph(graph, texts, encoder.tokenizer, pooling=encoder.pooling,
                                         max_length=encoder.max_length)

    check = onnx_quality.int8_check(embed)
    names = onnx_export.matmul_names(fp32)
    cosines = []
    for _, select in (("nothing", None), *onnx_export.INT8_FP32_STEPS):
        kept = select(names) if select else []
        folder = tmp_path / f"kept{len(kept)}"
        folder.mkdir()
        (folder / onnx_export.FP32_FILE).symlink_to(fp32)
        onnx_export.quantize_int8(fp32, folder / onnx_export.INT8_FILE, nodes_to_exclude=kept)
        cosines.append(check(folder)["mean_cosine"])
    # 2 layers: their output projections, then also layer 1's input projection, then all four
    assert [len(select(names)) for _, select in onnx_export.INT8_FP32_STEPS] == [2, 3, 4]
    assert cosines[0] < cosines[1] - 1e-4 and max(cosines[:-1]) < cosines[-1] - 1e-4, cosines

    # a threshold the first step passes: the export stops there
    monkeypatch.setattr(onnx_quality, "MIN_MEAN_COSINE", (cosines[0] + cosines[1]) / 2)
    first_step = tmp_path / "first_step"
    first_step.mkdir()
    (first_step / onnx_export.FP32_FILE).symlink_to(fp32)
    stopped = onnx_export.quantize_checked(first_step, onnx_quality.int8_check(embed))
    assert stopped["kept_fp32"] == "the feed-forward output projections" and len(stopped["tries"]) == 2

    # one only the last step passes: every step is tried
    monkeypatch.setattr(onnx_quality, "MIN_MEAN_COSINE", (max(cosines[:-1]) + cosines[-1]) / 2)

    int8_encoder = TextEncoder.from_pretrained(model_dir, backend="onnx-int8")
    with caplog.at_level(logging.INFO, logger="contrastext.models.onnx_backend"):
        got = int8_encoder.encode(TEXTS)
    assert int8_encoder.backend == "onnx-int8"
    quality = onnx_export.read_meta(int8_encoder.onnx_folder)["int8"]
    assert quality["kept_fp32"] == "the feed-forward layers" and quality["matmuls_kept_fp32"] == 4
    assert [t["mean_cosine"] for t in quality["tries"]] == pytest.approx(cosines, abs=1e-6)  # every step tried
    lines = [r.getMessage() for r in caplog.records if r.name == "contrastext.models.onnx_backend"]
    assert len(lines) == 1 and "int8 ONNX is used with the feed-forward layers in fp32" in lines[0]
    assert caplog.records[-1].levelno == logging.INFO  # not a fallback: no warning
    assert _cosines(got, encoder.encode(TEXTS)).mean() >= onnx_quality.MIN_MEAN_COSINE - 0.01
