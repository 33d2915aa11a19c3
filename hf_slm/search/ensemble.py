"""Uniform mixtures of models (paper 000, section 3.7): p_ens(a_t | a_<t) = 1/K sum_k p_k(a_t | a_<t).

The members may use different grammars (a heterogeneous TG + TXL (CC) ensemble): each reads the same action
sequence through its own grammar, and every grammar gives exactly one prediction per action, so the
per-action probabilities line up.
"""

import json
import math

import numpy as np

from ..modeling.grammars import grammar_for_config
from .scoring import action_log_probs


class UniformMixture:
    """Score action sequences with the uniform mixture of several models with grammars over one id layout."""

    def __init__(self, models):
        if not models:
            raise ValueError("an ensemble needs at least one model")
        # the whole id layout (every action kind's ids, a dependency layout's arcs included) and the vocabulary size
        layouts = {json.dumps([m.config.vocab_size, grammar_for_config(m.config).layout.to_dict()], sort_keys=True,
                              default=str) for m in models}
        if len(layouts) > 1:
            raise ValueError(f"ensemble members must share one vocabulary and id layout; found {len(layouts)} different ones")
        self.models = list(models)

    def action_log_probs(self, sequences, **kwargs):
        """Per sequence, log p_ens(a_t | a_<t) for every action after `<s>`."""
        members = [action_log_probs(model, sequences, **kwargs) for model in self.models]
        log_k = math.log(len(self.models))
        return [np.logaddexp.reduce(np.stack(per_model), axis=0) - log_k for per_model in zip(*members)]

    def joint_log_probs(self, sequences, **kwargs):
        return [float(values.sum()) for values in self.action_log_probs(sequences, **kwargs)]
