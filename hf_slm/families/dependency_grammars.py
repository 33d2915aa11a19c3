"""Paper 002's families: Dependency Transformer Grammars (arc-standard, arc-eager, arc-swift) and their
Transformer-XL baseline over the arc-standard transitions, TXL (trans)."""

from .registry import Family, Variant, register_family

_CONFIGS = "hf_slm.modeling.configuration_slm"
_MODELS = "hf_slm.modeling.modeling_slm"
_TOKENIZERS = ("hf_slm.tokenization.tokenization_dependency:DependencyTokenizer",)

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
    card_values="hf_slm.model_card:dependency_card_values",
    presets=f"{_CONFIGS}:DEPENDENCY_TRANSFORMER_GRAMMAR_PRESETS",
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
    card_values="hf_slm.model_card:dependency_card_values",
    presets=f"{_CONFIGS}:DEPENDENCY_TRANSFORMER_XL_PRESETS",
))
