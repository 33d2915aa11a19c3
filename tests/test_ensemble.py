"""Uniform mixtures (paper 000, section 3.7): per action, the mean of the members' probabilities; members must read
one id layout."""

import math

import numpy as np
import pytest
import torch

from hf_slm.search.ensemble import UniformMixture
from hf_slm.families import causal_lm_for_config, config_for_grammar
from hf_slm.search.scoring import action_log_probs
from hf_slm.tokenization.tokenization_slm import SyntacticTokenizer

TREES = ["(S (NP (DT the) (NN bird)) (VP (VBZ sings)))", "(S (NP (DT a) (NN dog)) (VP (VBZ barks)))"]


def member(grammar, tokenizer, seed):
    config = config_for_grammar(grammar, vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
                                num_attention_heads=2, intermediate_size=32, **tokenizer.action_layout)
    torch.manual_seed(seed)
    return causal_lm_for_config(config).eval()


def test_a_tg_and_txl_mixture_averages_probabilities_per_action():
    tokenizer = SyntacticTokenizer.train(TREES, vocab_size=30)
    models = [member("tg", tokenizer, 0), member("choe_charniak", tokenizer, 1)]
    sequences = [tokenizer(tree)["input_ids"] for tree in TREES]
    mixed = UniformMixture(models).action_log_probs(sequences)
    alone = [action_log_probs(model, sequences) for model in models]
    for index, values in enumerate(mixed):
        expected = np.log((np.exp(alone[0][index]) + np.exp(alone[1][index])) / 2)
        assert values == pytest.approx(expected, abs=1e-6)
    assert UniformMixture(models).joint_log_probs(sequences) == pytest.approx([float(v.sum()) for v in mixed])
    assert all(value <= 0 for value in UniformMixture(models).joint_log_probs(sequences))
    assert math.isfinite(sum(UniformMixture(models).joint_log_probs(sequences)))


def test_members_of_other_id_layouts_are_refused():
    tokenizer = SyntacticTokenizer.train(TREES, vocab_size=30)
    other = SyntacticTokenizer.train(TREES + ["(S (ADJP (JJ odd)))"], vocab_size=30)
    with pytest.raises(ValueError, match="share one vocabulary and id layout; found 2 different ones"):
        UniformMixture([member("tg", tokenizer, 0), member("tg", other, 0)])
    with pytest.raises(ValueError, match="at least one model"):
        UniformMixture([])
