"""UCTopic: contrastive phrase representations (span pooling), cluster-assisted fine-tuning and topic mining."""

from contrastext.uctopic.phrases import PhraseInstance

__all__ = ["PhraseInstance"]
