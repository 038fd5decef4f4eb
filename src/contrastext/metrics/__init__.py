"""Evaluation metrics: clustering (ACC by Hungarian matching, NMI, AMI, silhouette) and classification."""
