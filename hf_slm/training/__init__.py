"""Training with transformers.Trainer: every family with grammars (train.py), Transformer-XL segment recurrence
(segment_training.py)."""
