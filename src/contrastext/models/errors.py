"""Errors of model resolution, apart so that every way of finding a model can raise them."""

from __future__ import annotations


class ModelNotFoundError(FileNotFoundError):
    """No model was found for a spec; the message lists every place that was looked at."""
