"""Configuration of paper 003's family (its compositional SLMs and their GPT-2 baselines), and its presets.

`CompositionalSLMConfig`: grammar = one of the sixteen variants `{bi,nb}-{dn,up}-{in,ex}-{m,nm}`
(compositional_grammars.py) or a baseline; beside the shared backbone's fields (configuration_slm.
SyntacticTransformerConfig), the external composer's sizes. The model classes are in compositional_model.py.

Hub code: copied into every checkpoint; imports nothing from hf_slm.
"""

from .compositional_grammars import (
    BASELINE_GRAMMARS,
    COMPOSITIONAL_GRAMMAR_NAMES,
    COMPOSITIONAL_SLM_GRAMMARS,
)
from .configuration_slm import SyntacticTransformerConfig, family_auto_classes
from functools import partial

from .preset_settings import TINY, preset

# The hub files of this family's classes (its Auto classes name them: config.auto_map).
_CONFIG_FILE, _MODEL_FILE = "compositional_config", "compositional_model"

# The compositional variants that are models: all sixteen (Nb-Up's with the start pointer, modeling/start_pointer.py).
COMPOSITIONAL_MODEL_VARIANTS = COMPOSITIONAL_GRAMMAR_NAMES


class CompositionalSLMConfig(SyntacticTransformerConfig):
    """Compositional syntactic LMs of paper 003 on a GPT-2-style backbone (absolute positions): grammar = one of
    the sixteen variants `{bi,nb}-{dn,up}-{in,ex}-{m,nm}` (modeling/compositional_grammars.py) or one of the
    two baselines "gpt2-token" (words) and "gpt2-tree" (Nb-Dn trees, plain causal), over a
    CompositionalTokenizer's vocabulary (one `(` and one `)` id).

    Args (besides SyntacticTransformerConfig's):
        position_encoding: "absolute" by default, as the paper's GPT-2 backbone ("relative" is allowed, for
            comparisons).
        composer_hidden_size: width of the external composer f of the Ex variants (modeling/composer.py); the
            paper's is 256, "following GPST". The main model's embeddings are down-projected to it and f's output
            up-projected back. Unused by the other variants.
        composer_num_layers: f's Transformer layers (the paper: 4).
        composer_num_heads: f's attention heads (the paper does not say; 4 heads of 64 here).
        composer_intermediate_size: f's feed-forward width (the paper does not say; 4 x its width here).
        composer_max_children: the most children a constituent may have: f's table of child position embeddings
            (Figure 2) has this many rows. A Bi constituent has two; a longer Nb constituent is a ValueError.
    Nb-Up variants add the start pointer of section 2.2 (modeling/start_pointer.py): a learned Θ of
    [2 head_dim, 2 head_dim] over the outputs of the final layer's first two attention heads, so they need
    num_attention_heads >= 2; its loss is added to the LM loss.
    """

    model_type = "compositional_slm"
    grammar_classes = COMPOSITIONAL_SLM_GRAMMARS
    auto_classes = family_auto_classes("CompositionalSLM", _CONFIG_FILE, _MODEL_FILE)

    def __init__(self, position_encoding="absolute", composer_hidden_size=256, composer_num_layers=4,
                 composer_num_heads=4, composer_intermediate_size=1024, composer_max_children=128, **kwargs):
        if composer_hidden_size % composer_num_heads:
            raise ValueError(f"composer_hidden_size {composer_hidden_size} is not a multiple of composer_num_heads "
                             f"{composer_num_heads}")
        if composer_max_children < 2:
            raise ValueError(f"composer_max_children must be at least 2 (a binary constituent), got "
                             f"{composer_max_children}")
        self.composer_hidden_size = composer_hidden_size
        self.composer_num_layers = composer_num_layers
        self.composer_num_heads = composer_num_heads
        self.composer_intermediate_size = composer_intermediate_size
        self.composer_max_children = composer_max_children
        super().__init__(position_encoding=position_encoding, **kwargs)
        if self.grammar_classes[self.grammar].takes_start and self.num_attention_heads < 2:
            raise ValueError(f"grammar {self.grammar!r} points at each constituent's start from the outputs of the final "
                             "layer's first two attention heads (paper 003, section 2.2): num_attention_heads must be "
                             f"at least 2, got {self.num_attention_heads}")


# Paper 003, section 3 and appendix A: GPT-2 small for every model (768-d, 12 layers, 12 heads, 3072-d feed-forward,
# pre-LN, dropout 0.1, absolute positions), a cutoff of 2048 positions for the SLMs and 1024 for GPT2-token, and
# "a fixed learning rate of 5e-5". The paper's vocabulary is GPT-2's BPE (50,257 tokens); here 50,257 is the number
# of SentencePiece pieces a new tokenizer is asked for. It gives no batch size ("modified to fit the GPU memory")
# nor step count: 16 sequences and 100,000 steps are this library's choice. Sentences are packed into sequences of up
# to the cutoff, cut only between sentences (pack_to: `hf-slm train --pack-to`, hf_slm/data/packing.py).
_GPT2_SMALL = dict(
    model=dict(vocab_size=50257, hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
               embedding_dropout=0.1, core_dropout=0.1, final_dropout=0.0, pre_layer_norm=True,
               max_sequence_length=2048),
    training=dict(batch_size=16, max_steps=100_000, warmup_steps=0,
                  initial_learning_rate=5e-5, learning_rate=5e-5, final_learning_rate=5e-5, pack_to=2048),
)
# The CPU-sized twins (tests, examples): TINY's sizes, pre-LN and absolute positions as GPT-2.
_GPT2_TINY = dict(model=dict(TINY["model"], pre_layer_norm=True), training=dict(TINY["training"]))


# Paper 003, section 3: the Ex variants' composer is "a relatively small Transformer ... input dimension 256 and
# 4 layers, following (Hu et al., 2024)"; heads and feed-forward width are this library's choice. The tiny twin
# keeps the same ratio to its 128-d main model (half its width).
_COMPOSER_PAPER = dict(composer_hidden_size=256, composer_num_layers=4, composer_num_heads=4,
                       composer_intermediate_size=1024)
_COMPOSER_TINY = dict(composer_hidden_size=64, composer_num_layers=2, composer_num_heads=4,
                      composer_intermediate_size=256)


# Paper 003's released code is GPT-2's, whose configs ask for gelu_new, the tanh approximation (its composer's
# own feed-forward uses the exact GELU, as composer.py does).
_preset = partial(preset, model={"hidden_act": "gelu_pytorch_tanh"})


def _compositional_presets():
    """`{variant}` (GPT-2 small) and `{variant}-tiny` for every compositional model and both baselines."""
    presets = {}
    for name in COMPOSITIONAL_MODEL_VARIANTS + tuple(sorted(BASELINE_GRAMMARS)):
        what = {"gpt2-token": "GPT2-token (words)", "gpt2-tree": "GPT2-tree (Nb-Dn trees, causal)"}.get(
            name, "-".join(part.capitalize() for part in name.split("-")))
        small, training = _GPT2_SMALL["model"], _GPT2_SMALL["training"]
        if name == "gpt2-token":  # words only: a cutoff of 1024
            small, training = dict(small, max_sequence_length=1024), dict(training, pack_to=1024)
        presets[name] = _preset(dict(model=small, training=training), name,
                               f"{what}, paper 003's GPT-2 small setting: 12 layers, d 768, 12 heads")
        presets[f"{name}-tiny"] = _preset(_GPT2_TINY, name, f"{what} for CPUs: 4 layers, d 128")
        if "-ex-" in name:  # the composer: the paper's (256-d, 4 layers) beside GPT-2 small, a small one beside tiny
            presets[name]["model"].update(_COMPOSER_PAPER)
            presets[name]["description"] += "; composer 256-d, 4 layers"
            presets[f"{name}-tiny"]["model"].update(_COMPOSER_TINY)
            presets[f"{name}-tiny"]["description"] += "; composer 64-d, 2 layers"
    return presets


# Paper 003: the compositional variants, and the GPT2-token / GPT2-tree baselines.
COMPOSITIONAL_PRESETS = _compositional_presets()


CompositionalSLMConfig._auto_class = "AutoConfig"
