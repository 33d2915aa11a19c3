"""Paper 001's family: Syntactic Ordered Memory (eSOM, dSOM), a recurrent model with its own parser; no grammar."""

from .registry import Family, Variant, register_family

SYNTACTIC_ORDERED_MEMORY = register_family(Family(
    name="syntactic_ordered_memory",
    model_type="syntactic_ordered_memory",
    paper="001",
    config_class="hf_slm.modeling.configuration_som:SyntacticOrderedMemoryConfig",
    model_class="hf_slm.modeling.modeling_som:SyntacticOrderedMemoryModel",
    causal_lm_class="hf_slm.modeling.modeling_som:SyntacticOrderedMemoryForCausalLM",
    # words: a subword vocabulary, or the PTB set-up's word vocabulary (the default)
    tokenizer_classes=("hf_slm.tokenization.tokenization_slm:SyntacticTokenizer",
                       "hf_slm.tokenization.tokenization_slm:SyntacticWordTokenizer"),
    variants=(Variant("syntactic_ordered_memory", "Syntactic Ordered Memory (SOM)", "syntactic-ordered-memory",
                      "som.md", tree_format="words", is_grammar=False),),
    presets="hf_slm.som_training:SOM_TRAINING_PRESETS",
    check_tokenizer="hf_slm.som_data:check_som_tokenizer",
    train="hf_slm.som_training:train_som",
    card_details="hf_slm.families.ordered_memory_card:model_details",
    card_values="hf_slm.families.ordered_memory_card:card_values",
    preset_columns="hf_slm.som_training:som_preset_columns",
    scorer="hf_slm.som_scorer:SyntacticOrderedMemoryScorer",
))
