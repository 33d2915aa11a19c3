"""Helpers shared by the tests: a tiny saved checkpoint, and an interpreter where hf_slm cannot be imported."""

import torch

import hf_slm
from hf_slm.modeling.configuration_slm import config_for_grammar
from hf_slm.modeling.modeling_slm import causal_lm_for_config

# Prepended to scripts run in a fresh interpreter: hf_slm and nltk cannot be imported there (a meta-path
# finder in front of every other, the editable install's included), so only a checkpoint's hub code serves.
ISOLATION_PREAMBLE = r'''
import importlib.abc, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("hf_slm", "nltk"):
            raise ModuleNotFoundError(f"blocked: {name}")
        return None

sys.meta_path.insert(0, Block())
for blocked in ("hf_slm", "nltk"):
    try:
        __import__(blocked)
    except ModuleNotFoundError:
        pass
    else:
        raise SystemExit(f"{blocked} is importable: the isolation is not real")
'''


def save_tiny_checkpoint(directory, trees, vocab_size=30, grammar="tg", linearization="top_down", seed=0, **config):
    """Train a tokenizer on `trees`, build a small random model, save both to `directory`."""
    tokenizer = hf_slm.SyntacticTokenizer.train(trees, vocab_size=vocab_size, linearization=linearization)
    options = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32)
    options.update(config)
    model_config = config_for_grammar(vocab_size=len(tokenizer), grammar=grammar, **options,
                                            **tokenizer.action_layout)
    torch.manual_seed(seed)
    model = causal_lm_for_config(model_config).eval()
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory, model, tokenizer
