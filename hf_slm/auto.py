"""Register hf-slm's classes with the transformers Auto factories.

With hf_slm installed, AutoConfig / AutoModel / AutoModelForCausalLM / AutoTokenizer load hf-slm
checkpoints from the installed code, without trust_remote_code. Without it, the hub code saved inside each
checkpoint serves the same classes to `trust_remote_code=True`. What is registered is every family of the
registry (hf_slm/families), a family another package registers included, and every proposal parser kind
(hf_slm/parsers/kinds.py).
"""

from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer

from .families import family_for_grammar, registered_families


def family_tokenizer_classes():
    """Every registered tokenizer class (what a saved hf-slm tokenizer may be), each once, family by family."""
    return tuple(dict.fromkeys(cls for family in registered_families() for cls in family.tokenizer_classes))


def tokenizer_class_for_grammar(grammar):
    """The tokenizer class a new model of `grammar` is trained with: its family's default (last) tokenizer class."""
    return family_for_grammar(grammar).default_tokenizer


def register_family_classes(family):
    """Register one family's config, model, causal LM and tokenizer classes with the Auto factories."""
    config_class = family.config_class
    AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
    AutoModel.register(config_class, family.model_class, exist_ok=True)
    AutoModelForCausalLM.register(config_class, family.causal_lm_class, exist_ok=True)
    # AutoTokenizer finds a checkpoint's tokenizer by the class name in its tokenizer_config.json among the
    # registered classes; one config maps to one default class, so the default is registered last (the others'
    # names stay known).
    for tokenizer_class in family.tokenizer_classes:
        AutoTokenizer.register(config_class, tokenizer_class=tokenizer_class, exist_ok=True)


def register_parser_classes():
    """Register the proposal parsers' config, model and tokenizer classes (hf_slm/parsers/kinds.py)."""
    from .parsers.kinds import parser_kinds

    for kind in parser_kinds():
        config_class = kind.resolved("config_class")
        AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
        AutoModel.register(config_class, kind.resolved("model_class"), exist_ok=True)
        AutoTokenizer.register(config_class, tokenizer_class=kind.resolved("tokenizer_class"), exist_ok=True)


def register_auto_classes():
    for family in registered_families():
        register_family_classes(family)
    register_parser_classes()
