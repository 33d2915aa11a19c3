"""Tiny DTG models (each transition system) with a tokenizer trained on four dependency trees, and the brute-force
sum over every projective tree that their beam search is checked against."""

import torch

from hf_slm.families import causal_lm_for_config, config_for_grammar
from hf_slm.tokenization.tokenization_dependency import DependencyTokenizer


TREES = ["There/2 is/0 a/4 difference/2", "The/2 cat/3 sleeps/0 ./3", "a/0 b/1 c/1", "Dogs/2 bark/0 loudly/2"]


# TXL (trans) reads DTG's arc-standard sequences: every test of the contract and the search covers it too.
SYSTEMS = {"dtg": "arc_standard", "dtg_eager": "arc_eager", "dtg_swift": "arc_swift", "txl_trans": "arc_standard"}


def tiny(grammar, layers=2, **fields):
    tokenizer = DependencyTokenizer.train(TREES, vocab_size=30, transition_system=SYSTEMS[grammar])
    config = config_for_grammar(grammar, vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=layers,
                                num_attention_heads=2, intermediate_size=32, **tokenizer.action_layout, **fields)
    torch.manual_seed(0)
    return causal_lm_for_config(config).eval(), tokenizer


def every_projective_tree(words):
    """Every projective dependency tree over `words` (by brute force over all head assignments)."""
    from itertools import product

    from hf_slm.tokenization.dependency_trees import DependencyTree

    found = []
    for heads in product(range(len(words) + 1), repeat=len(words)):
        try:
            tree = DependencyTree(words, heads)
        except ValueError:
            continue
        if tree.is_projective():
            found.append(tree)
    return found


def joint_log_prob(model, tokenizer, tree):
    ids = torch.tensor([tokenizer(tree)["input_ids"]])
    with torch.no_grad():
        log_probs = model(input_ids=ids).logits[0, :-1].log_softmax(-1)
    return float(log_probs.gather(1, ids[0, 1:, None]).sum())
