"""FitResult's numbers, read from a fit's history records (see contrastext.train.history for their shape)."""

from __future__ import annotations

import pytest

from contrastext.train import FitResult


def _window(step: int, loss: float, rows_per_s: float, resumed_from: int = 0) -> dict:
    return {"loss": loss, "rows_per_s": rows_per_s, "step": step, "epoch": 0, "lr": 1e-3, "rows_skipped": 0,
            "resumed_from_step": resumed_from}


def _epoch_end(step: int, loss: float | None, rows_trained: int, rows_skipped: int = 0, resumed_from: int = 0,
               checkpoint: bool = True) -> dict:
    """``loss`` None: the epoch closed right after a window, with no step left to report."""
    record = {"rows_trained": rows_trained, "skipped_reasons": {}, "step": step, "epoch": 1,
              "lr": 0.0, "rows_skipped": rows_skipped, "resumed_from_step": resumed_from}
    if loss is not None:
        record["loss"] = loss
    if checkpoint:
        record["checkpoint"] = f"/runs/x/checkpoint_step{step:09d}"
    return record


def _result(history: list[dict]) -> FitResult:
    return FitResult(model_path=None, steps=history[-1]["step"] if history else 0,
                     metrics=history[-1] if history else {}, history=history)


def test_windows_leave_out_the_epoch_end_report():
    # the epoch ends right after a logged window: its own report covers no step and has no loss
    result = _result([_window(2, 3.0, 100.0), _window(4, 2.0, 300.0), _window(6, 1.0, 200.0),
                      _epoch_end(6, None, rows_trained=48, rows_skipped=3)])
    assert result.window_losses == [3.0, 2.0, 1.0]
    assert result.window_rows_per_s == [100.0, 300.0, 200.0]
    assert result.mean_loss == pytest.approx(2.0)
    assert result.last_loss == 1.0
    assert result.steady_rows_per_s == pytest.approx(200.0)
    assert result.rows_trained == 48 and result.rows_skipped == 3
    assert len(result.history) == 4  # the records stay available as they were


def test_a_fit_too_short_to_log_a_window_has_its_last_reports_loss():
    result = _result([_epoch_end(1, 2.5, rows_trained=8)])
    assert result.window_losses == [] and result.steady_rows_per_s is None
    assert result.mean_loss == 2.5 and result.last_loss == 2.5
    assert result.rows_trained == 8
    # a later epoch that closed with no step left does not hide the loss reported before it
    two_epochs = _result([_epoch_end(1, 2.5, rows_trained=8, checkpoint=False), _epoch_end(1, None, rows_trained=8)])
    assert two_epochs.mean_loss == 2.5 and two_epochs.last_loss == 2.5
    empty = _result([])
    assert empty.mean_loss is None and empty.last_loss is None and empty.rows_trained == 0


def test_rows_of_a_resumed_fit_add_up_over_its_runs():
    # epoch 0 checkpointed at step 4 (32 rows), the run died during epoch 1 after reporting 48 rows at step 6;
    # the resumed run starts again from step 4 and trains 32 rows to the end (step 8)
    first = [_window(2, 3.0, 10.0), _window(4, 2.5, 10.0), _epoch_end(4, None, rows_trained=32, rows_skipped=1),
             _window(6, 2.0, 10.0), _epoch_end(6, 1.9, rows_trained=48, rows_skipped=1, checkpoint=False)]
    resumed = [_window(6, 1.8, 20.0, resumed_from=4), _window(8, 1.5, 20.0, resumed_from=4),
               _epoch_end(8, None, rows_trained=32, rows_skipped=2, resumed_from=4)]
    result = _result(first + resumed)
    assert result.rows_trained == 48 + 32 and result.rows_skipped == 1 + 2
    assert result.window_losses == [3.0, 2.5, 2.0, 1.8, 1.5]
    assert result.last_loss == 1.5
    # the same resume point twice (a run that died again before its first checkpoint) is still two runs
    again = [_window(6, 1.7, 20.0, resumed_from=4), _epoch_end(6, 1.7, rows_trained=16, resumed_from=4,
                                                               checkpoint=False)]
    assert _result(first + again + resumed).rows_trained == 48 + 16 + 32
