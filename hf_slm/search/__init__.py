"""Scoring, parsing and generating with a trained model: the scorer interface (scorers.py), word-synchronous beam
search (beam.py, search_scorer.py), joint log-probabilities of given trees (scoring.py), sampling (sampling.py),
mixtures of models (ensemble.py)."""
