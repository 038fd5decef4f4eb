import pytest

from contrastext.train.worker import lr_factor


def test_linear_schedule_warms_up_then_decays_to_zero():
    f = lr_factor(total_steps=10, warmup_steps=2, schedule="linear")
    assert [f(0), f(1)] == [0.5, 1.0]
    assert f(2) == pytest.approx(1.0) and f(6) == pytest.approx(0.5) and f(10) == 0.0


def test_constant_schedule_holds_after_warmup():
    f = lr_factor(total_steps=10, warmup_steps=2, schedule="constant")
    assert f(0) == 0.5 and all(f(s) == 1.0 for s in range(2, 50))
    assert lr_factor(10, 0, "constant")(0) == 1.0
