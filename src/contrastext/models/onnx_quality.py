"""The check an int8 export passes before it is used: its embeddings against the fp32 graph's on fixed texts."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from contrastext.vectors import unit_rows

MIN_MEAN_COSINE = 0.99
SAMPLE_SIZE = 256

_SUBJECTS = ("The central bank", "A local football club", "The new smartphone", "Scientists in Geneva",
             "The prime minister", "An online retailer", "The hospital", "A small startup")
_PREDICATES = ("raised interest rates again on Tuesday.", "won the championship after extra time.",
               "reported record quarterly profits.", "announced a breakthrough in battery chemistry.",
               "met foreign leaders to discuss the ceasefire.", "recalled thousands of faulty devices.",
               "opened a new research laboratory downtown.", "was criticised for its handling of the crisis.")


def sample_texts(size: int = SAMPLE_SIZE) -> list[str]:
    """``size`` fixed texts: the demo label set's 40, then generic news-like sentences (short and long)."""
    from contrastext.data.demo import load_demo_labels

    texts = [item["text"] for item in load_demo_labels()["texts"]]
    generated = [f"{s} {p}" for s in _SUBJECTS for p in _PREDICATES]
    generated += [f"{a} {p} Meanwhile, {b.lower()} {q}" for a, b, p, q in
                  zip(_SUBJECTS * 8, reversed(_SUBJECTS * 8), _PREDICATES * 8, reversed(_PREDICATES * 8))]
    i = 0
    while len(texts) < size:
        texts.append(generated[i % len(generated)] + ("" if i < len(generated) else f" ({i // len(generated)})"))
        i += 1
    return texts[:size]


def compare(fp32: np.ndarray, int8: np.ndarray) -> dict[str, float]:
    a, b = unit_rows(fp32), unit_rows(int8)
    cosine = (a * b).sum(axis=1)
    return {"mean_cosine": float(cosine.mean()), "min_cosine": float(cosine.min()), "texts": int(len(cosine))}


def int8_check(encode_with) -> "callable":
    """A ``quality_check(folder)`` for ``onnx_export.export``: ``encode_with(graph_path, texts)`` embeds
    the sample with a graph; the result records both cosines and the threshold."""

    reference: dict[Path, np.ndarray] = {}  # the fp32 graph's embeddings, once per folder (an export may try
    # several int8 graphs)

    def check(folder: Path) -> dict[str, float]:
        from contrastext.models.onnx_export import FP32_FILE, INT8_FILE

        texts = sample_texts()
        if folder not in reference:
            reference[folder] = encode_with(folder / FP32_FILE, texts)
        result = compare(reference[folder], encode_with(folder / INT8_FILE, texts))
        return result | {"threshold": MIN_MEAN_COSINE}

    return check
