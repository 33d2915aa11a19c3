"""Recurrent Neural Network Grammars (Dyer et al. 2016), the generative RNNG batched as Noji and Oseki (2021) batch it:
the fifth family, added only through the public family API, as a package outside hf-slm would add one.

Its files are its own: this record, its hub code (modeling_rnng.py: config, model, grammar, search decoder), its
presets (presets.py), its card template and rows (card.md, card.py) and its collator (data.py). Paper 000 reports it
(Table 2) and draws its perplexity protocol's proposal trees from a discriminative RNNG, so its record names paper 000:
`--protocol paper000` applies to its models.
"""

from pathlib import Path

from ..registry import Family, Variant, register_family


_HUB = "hf_slm.families.recurrent_grammars.modeling_rnng"

RNNG = register_family(Family(
    name="rnng",
    model_type="rnng",
    paper="000",
    config_class=f"{_HUB}:RNNGConfig",
    model_class=f"{_HUB}:RNNGModel",
    causal_lm_class=f"{_HUB}:RNNGForCausalLM",
    # the PTB set-up's word vocabulary with unknown-word classes (its preset's), or SentencePiece pieces
    tokenizer_classes=("hf_slm.tokenization.tokenization_slm:SyntacticWordTokenizer",
                       "hf_slm.tokenization.tokenization_slm:SyntacticTokenizer"),
    variants=(Variant("rnng", "Generative RNNG", "rnng", str(Path(__file__).with_name("card.md"))),),
    grammar_classes=f"{_HUB}:RNNG_GRAMMARS",
    presets="hf_slm.families.recurrent_grammars.presets:RNNG_PRESETS",
    card_details="hf_slm.families.recurrent_grammars.card:model_details",
    preset_columns="hf_slm.families.recurrent_grammars.presets:preset_columns",
    collator="hf_slm.families.recurrent_grammars.data:collator_for_model",
))
