"""Evaluators: callables that take an encoder and return named metrics."""

from contrastext.evaluators.category_retrieval import CategoryRetrievalEvaluator
from contrastext.evaluators.pair_retrieval import PairRetrievalEvaluator
from contrastext.evaluators.zeroshot_accuracy import LabelScheme, ZeroShotEvaluator

__all__ = ["CategoryRetrievalEvaluator", "LabelScheme", "PairRetrievalEvaluator", "ZeroShotEvaluator"]
