"""Checkpoints: loading one for the command line (loading.py), and checking that a tokenizer and a model were
made for each other (checks.py)."""
