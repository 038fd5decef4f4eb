import pytest
import torch

from contrastext.train.worker import lr_scheduler


def _rates(schedule: str, total_steps: int, warmup_steps: int, steps: int) -> list[float]:
    """The learning rate each of ``steps`` optimiser steps uses (base rate 1)."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = lr_scheduler(optimizer, total_steps, warmup_steps, schedule)
    rates = []
    for _ in range(steps):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return rates


def test_linear_schedule_warms_up_from_zero_then_decays_to_zero():
    rates = _rates("linear", total_steps=10, warmup_steps=2, steps=12)
    assert rates[:3] == [0.0, 0.5, 1.0]
    assert rates[6] == pytest.approx(0.5) and rates[9] == pytest.approx(1 / 8) and rates[10:] == [0.0, 0.0]


def test_constant_schedule_holds_after_warmup():
    rates = _rates("constant", total_steps=10, warmup_steps=2, steps=50)
    assert rates[:2] == [0.0, 0.5] and all(rate == 1.0 for rate in rates[2:])
    assert _rates("constant", 10, 0, 3) == [1.0, 1.0, 1.0]
    assert _rates("linear", 10, 0, 2) == [1.0, pytest.approx(0.9)]


def test_a_restored_scheduler_continues_where_it_stopped():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = lr_scheduler(optimizer, 10, 2)
    for _ in range(5):
        optimizer.step()
        scheduler.step()
    state = scheduler.state_dict()
    fresh_optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    fresh = lr_scheduler(fresh_optimizer, 10, 2)
    fresh.load_state_dict(state)
    assert fresh.get_last_lr() == scheduler.get_last_lr() == [pytest.approx(5 / 8)]
