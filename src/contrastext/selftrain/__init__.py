"""Self-training for zero-shot classification (WC-SBERT): pseudo-labels, pseudo-pairs, rounds."""
