"""Tiny models of paper 003's compositional SLMs, each with a tokenizer trained on three labelled trees."""

import torch

from hf_slm.families import causal_lm_for_config, config_for_grammar, grammar_class
from hf_slm.tokenization.tokenization_compositional import CompositionalTokenizer


LABELED = ["(ROOT (S (NP (DT the) (JJ blue) (NN bird)) (VP (VBZ sings)) (. .)))",
           "(ROOT (S (NP (DT a) (NN dog)) (VP (VBZ barks) (PP (IN at) (NP (DT the) (NN moon))))))",
           "(ROOT (S (VP (VB Write) (NP (DT an) (NN essay)) (ADVP (RB quickly)))))"]


# A composer small enough for tests (the presets' is 256-d, 4 layers).
TINY_COMPOSER = dict(composer_hidden_size=8, composer_num_layers=2, composer_num_heads=2, composer_intermediate_size=16)


def linearization_of(grammar):
    return grammar_class(grammar).linearization


def tiny(grammar, vocab_size=40, sentencepiece_options=None, **fields):
    tokenizer = CompositionalTokenizer.train(LABELED, vocab_size=vocab_size, linearization=linearization_of(grammar),
                                             sentencepiece_options=sentencepiece_options)
    if "-ex-" in grammar:
        fields = dict(TINY_COMPOSER, **fields)
    config = config_for_grammar(grammar, vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=2,
                                num_attention_heads=2, intermediate_size=32, **tokenizer.action_layout, **fields)
    torch.manual_seed(0)
    return causal_lm_for_config(config).eval(), tokenizer
