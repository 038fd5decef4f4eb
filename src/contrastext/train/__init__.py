"""Training: the shared Ray Train fit, its batches, samplers and checkpoints."""

from contrastext.train.fit import FitResult, fit, planned_steps

__all__ = ["FitResult", "fit", "planned_steps"]
