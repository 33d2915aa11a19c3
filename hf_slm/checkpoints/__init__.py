"""Checkpoints: loading one for the command line (loading.py), checking that a tokenizer and a model were made for
each other (checks.py), and training checkpoints written whole, the last whole one being what --resume continues
(whole.py)."""
