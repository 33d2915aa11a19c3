"""Paper 003's summarization set-up: XSum examples and generated summaries (summaries.py), silver trees
(silver.py), data preparation (preparation.py) and fine-tuning (finetuning.py)."""
