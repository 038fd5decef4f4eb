"""Training precision: bf16 autocast where the hardware multiplies bf16 natively, float32 elsewhere."""

import platform
from pathlib import Path

import pytest
import torch

import contrastext.models.encoder as encoder_module
from contrastext.models.encoder import cpu_has_native_bf16
from contrastext.train.worker import training_autocast

CPU = torch.device("cpu")


def _product_dtype(context) -> torch.dtype:
    with context:
        return (torch.randn(4, 8) @ torch.randn(8, 4)).dtype


@pytest.mark.parametrize("native", [True, False])
def test_cpu_trains_in_bf16_only_where_it_multiplies_bf16_natively(monkeypatch, native):
    monkeypatch.setattr(encoder_module, "cpu_has_native_bf16", lambda: native)
    assert _product_dtype(training_autocast(CPU, bf16=True)) == (torch.bfloat16 if native else torch.float32)
    assert _product_dtype(training_autocast(CPU, bf16=False)) == torch.float32


@pytest.mark.skipif(platform.machine() != "x86_64" or not Path("/proc/cpuinfo").exists(), reason="x86 Linux flags")
def test_native_bf16_means_the_cpu_has_the_instructions_not_plain_avx512():
    flags = set(Path("/proc/cpuinfo").read_text().split())
    assert cpu_has_native_bf16() == bool({"avx512_bf16", "amx_bf16"} & flags)
