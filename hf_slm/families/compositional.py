"""Paper 003's family: the sixteen compositional SLMs `{bi,nb}-{dn,up}-{in,ex}-{m,nm}` and the GPT-2 baselines
GPT2-token (words) and GPT2-tree (Nb-Dn trees, plain causal), all over unlabelled brackets."""

from .registry import Family, Variant, register_family

# The variants' names (modeling/compositional_grammars.py derives each grammar from its name's four parts).
VARIANT_NAMES = tuple(f"{tree}-{order}-{composition}-{masking}" for tree in ("bi", "nb") for order in ("dn", "up")
                      for composition in ("in", "ex") for masking in ("m", "nm"))


def _paper_name(name):
    return "-".join(part.capitalize() for part in name.split("-"))


COMPOSITIONAL_SLM = register_family(Family(
    name="compositional_slm",
    model_type="compositional_slm",
    paper="003",
    config_class="hf_slm.modeling.compositional_config:CompositionalSLMConfig",
    model_class="hf_slm.modeling.compositional_model:CompositionalSLMModel",
    causal_lm_class="hf_slm.modeling.compositional_model:CompositionalSLMForCausalLM",
    tokenizer_classes=("hf_slm.tokenization.tokenization_compositional:CompositionalTokenizer",),
    # nb-dn-in-m first: a new config's default
    variants=tuple(Variant(name, _paper_name(name), "compositional-slm", "compositional.md",
                           tree_format="unlabelled_brackets")
                   for name in sorted(VARIANT_NAMES, key=lambda name: name != "nb-dn-in-m"))
    + (Variant("gpt2-token", "GPT2-token", "gpt2-token", "gpt2_token.md", syntactic=False, tree_format="words"),
       Variant("gpt2-tree", "GPT2-tree", "gpt2-tree", "compositional.md", tree_format="unlabelled_brackets")),
    grammar_classes="hf_slm.modeling.compositional_grammars:COMPOSITIONAL_SLM_GRAMMARS",
    card_details="hf_slm.families.compositional_card:model_details",
    card_values="hf_slm.families.compositional_card:card_values",
    presets="hf_slm.modeling.compositional_config:COMPOSITIONAL_PRESETS",
    unlabelled_trees=True,  # CompositionalTokenizer.unlabel
    # unlabelled trees: no labelled bracketing F1 (eval parse, rerank)
    evaluations=("ppl", "sg", "blimp"),
    paper_table="hf_slm.families.compositional_paper:PAPER_003",
))
