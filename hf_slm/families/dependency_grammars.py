"""Paper 002's families: Dependency Transformer Grammars (arc-standard, arc-eager, arc-swift) and their
Transformer-XL baseline over the arc-standard transitions, TXL (trans)."""

from .registry import Family, Variant, register_family

_CONFIGS = "hf_slm.modeling.dependency_config"
_MODELS = "hf_slm.modeling.dependency_model"
_TOKENIZERS = ("hf_slm.tokenization.tokenization_dependency:DependencyTokenizer",)
_HERE = "hf_slm.families.dependency_grammars"
# What both families share beyond their classes: the tokenizer, its variant and the data prepared for it.
_SHARED = {
    "doubled_id_ranges": f"{_HERE}:arc_ranges",
    "tokenizer_grammar_options": f"{_HERE}:grammar_options_of_tokenizer",
    "tokenizer_config_fields": f"{_HERE}:config_fields_of_tokenizer",
    "preparation": "hf_slm.data.prepare_dependency:DEPENDENCY_PREPARATION",
    "card_values": "hf_slm.families.dependency_card:card_values",
    # dependency trees: attachment scores (eval uas), no bracketing F1
    "evaluations": ("ppl", "sg", "blimp", "uas"),
    "paper_table": "hf_slm.families.dependency_paper:PAPER_002",
}


def arc_ranges(layout):
    """Family.doubled_id_ranges: the LA[k] and RA[k] ids of a DependencyLayout's fields."""
    return [(layout["left_arc_start"], layout["left_arc_stop"]), (layout["right_arc_start"], layout["right_arc_stop"])]


def grammar_options_of_tokenizer(tokenizer):
    """The variant a DependencyTokenizer encodes (the same vocabulary gives other sequences: `<s>` as the root)."""
    return {"variant": tokenizer.variant}


def config_fields_of_tokenizer(tokenizer):
    """A model reads its tokenizer's variant (config.dependency_variant)."""
    return {"dependency_variant": tokenizer.variant}


DEPENDENCY_TRANSFORMER_GRAMMAR = register_family(Family(
    name="dependency_transformer_grammar",
    model_type="dependency_transformer_grammar",
    paper="002",
    config_class=f"{_CONFIGS}:DependencyTransformerGrammarConfig",
    model_class=f"{_MODELS}:DependencyTransformerGrammarModel",
    causal_lm_class=f"{_MODELS}:DependencyTransformerGrammarForCausalLM",
    tokenizer_classes=_TOKENIZERS,
    variants=tuple(Variant(grammar, name, "dependency-transformer-grammar", "dtg.md", tree_format="dependency")
                   for grammar, name in (("dtg", "DTG"), ("dtg_eager", "DTG-eager"), ("dtg_swift", "DTG-swift"))),
    grammar_classes="hf_slm.modeling.dependency_grammars:DTG_GRAMMARS",
    presets=f"{_CONFIGS}:DEPENDENCY_TRANSFORMER_GRAMMAR_PRESETS",
    **_SHARED,
))

DEPENDENCY_TRANSFORMER_XL = register_family(Family(
    name="dependency_transformer_xl",
    model_type="dependency_transformer_xl",
    paper="002",
    config_class=f"{_CONFIGS}:DependencyTransformerXLConfig",
    model_class=f"{_MODELS}:DependencyTransformerXLModel",
    causal_lm_class=f"{_MODELS}:DependencyTransformerXLForCausalLM",
    tokenizer_classes=_TOKENIZERS,
    variants=(Variant("txl_trans", "TXL (trans)", "txl-trans", "txl_trans.md", tree_format="dependency"),),
    grammar_classes="hf_slm.modeling.dependency_grammars:TXL_TRANS_GRAMMARS",
    presets=f"{_CONFIGS}:DEPENDENCY_TRANSFORMER_XL_PRESETS",
    **_SHARED,
))
