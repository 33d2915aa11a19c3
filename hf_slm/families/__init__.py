"""Model families: the registry (registry.py) and hf-slm's own records, one module per paper's families.

Generic code asks `family_for_config(config)`, `family_for_grammar(name)`, `grammar_class(name)`,
`registered_families()`...; a family of another package joins with `register_family(Family(...))`.
"""

from .registry import (Family, Variant, all_presets, causal_lm_for_config, config_for_grammar, data_preparations,
                       doubled_id_ranges, families_of_tokenizer, family_for_config, family_for_grammar,
                       family_for_model_type, family_named, get_grammar, grammar_class, grammar_names, model_identity, paper_table,
                       preset, preset_config, presets, register_family, registered_families, resolve, unregister_family,
                       variant_for_config)

__all__ = [
    "Family", "Variant", "all_presets", "causal_lm_for_config", "config_for_grammar", "data_preparations", "doubled_id_ranges",
    "families_of_tokenizer", "family_for_config", "family_for_grammar", "family_for_model_type", "family_named", "get_grammar", "grammar_class", "grammar_names", "model_identity", "paper_table", "preset",
    "preset_config", "presets", "register_family", "registered_families", "resolve", "unregister_family", "variant_for_config",
]
