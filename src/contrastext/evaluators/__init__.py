"""Evaluators: callables that take an encoder and return named metrics."""

from contrastext.evaluators.pair_retrieval import PairRetrievalEvaluator

__all__ = ["PairRetrievalEvaluator"]
