"""Recurrent Neural Network Grammars (Dyer et al. 2016), the generative RNNG batched as Noji and Oseki (2021) batch it:
the fifth family, added only through the public family API, as a package outside hf-slm would add one.

Its files are its own: this record, its hub code (modeling_rnng.py: config, model, grammar, search decoder), its
presets (presets.py), its card template and rows (card.md, card.py) and its collator (data.py). Paper 000 reports it
(Table 2) and draws its perplexity protocol's proposal trees from a discriminative RNNG, so its record names paper 000:
`--protocol paper000` applies to its models.
"""

from pathlib import Path

from ...parsers.kinds import ParserKind, register_parser_kind, sizes_with
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

# The discriminative RNNG, a proposal parser (`hf-slm parser train --kind rnng-discriminative`, then `hf-slm propose
# --parser`; paper 000's protocol names this kind, hf_slm/evaluation/protocols.py): the
# parsers' word encoder at each size, and a stack of the generative presets' shape (paper 000 does not give its
# proposal model's sizes).
_DYER = """@inproceedings{dyer-etal-2016-recurrent,
  title     = {Recurrent Neural Network Grammars},
  author    = {Dyer, Chris and Kuncoro, Adhiguna and Ballesteros, Miguel and Smith, Noah A.},
  booktitle = {Proceedings of the 2016 Conference of the North {A}merican Chapter of the Association for Computational Linguistics: Human Language Technologies},
  pages     = {199--209},
  year      = {2016}
}"""
_STACKS = {"tiny": dict(stack_input_size=64, stack_hidden_size=64, stack_layers=2, action_mlp_size=64),
           "paper": dict(stack_input_size=256, stack_hidden_size=256, stack_layers=2, action_mlp_size=256)}
RNNG_PARSER = register_parser_kind(ParserKind(
    name="rnng-discriminative",
    description="discriminative RNNG (Dyer et al. 2016): trees built top-down by a stack LSTM over the words' encoder "
                "states, sampled action by action; paper 000's kind of proposal model",
    tree_kind="constituency", labelled=True, tree_format="brackets",
    config_class=f"{_HUB}_parser:RNNGParserConfig",
    model_class=f"{_HUB}_parser:RNNGParser",
    sizes=sizes_with(_STACKS),
    model_rows="hf_slm.families.recurrent_grammars.card:parser_rows",
    best_tree="its greedy parse, the most probable action at every step (a sample may be more probable)",
    citation=_DYER,
))
