"""Training: the shared Ray Train fit, its objectives, batches, samplers and checkpoints."""

from contrastext.train.fit import FitResult, fit
from contrastext.train.objectives import OBJECTIVES, Objective, build_objective, planned_steps, register_objective

__all__ = [
    "OBJECTIVES", "FitResult", "Objective", "build_objective", "fit", "planned_steps", "register_objective",
]
