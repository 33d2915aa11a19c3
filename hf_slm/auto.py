"""Register hf-slm's classes with the transformers Auto factories.

With hf_slm installed, AutoConfig / AutoModel / AutoModelForCausalLM / AutoTokenizer load hf-slm
checkpoints from the installed code, without trust_remote_code. Without it, the hub code saved inside each
checkpoint serves the same classes to `trust_remote_code=True`.
"""

from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer

from .modeling.configuration_slm import (
    CompositionalSLMConfig, DependencyTransformerGrammarConfig, DependencyTransformerXLConfig, TransformerGrammarConfig,
    TransformerXLConfig,
)
from .modeling.modeling_slm import (
    CompositionalSLMForCausalLM,
    CompositionalSLMModel,
    DependencyTransformerGrammarForCausalLM,
    DependencyTransformerGrammarModel,
    DependencyTransformerXLForCausalLM,
    DependencyTransformerXLModel,
    TransformerGrammarForCausalLM,
    TransformerGrammarModel,
    TransformerXLForCausalLM,
    TransformerXLModel,
)
from .modeling.configuration_som import SyntacticOrderedMemoryConfig
from .modeling.modeling_som import SyntacticOrderedMemoryForCausalLM, SyntacticOrderedMemoryModel
from .tokenization.tokenization_compositional import CompositionalTokenizer
from .tokenization.tokenization_dependency import DependencyTokenizer
from .tokenization.tokenization_slm import SyntacticTokenizer, SyntacticWordTokenizer

# (config, model, causal LM, tokenizer classes): the last tokenizer class is the family's default.
CONSTITUENCY_TOKENIZERS = (SyntacticWordTokenizer, SyntacticTokenizer)
FAMILIES = (
    (TransformerGrammarConfig, TransformerGrammarModel, TransformerGrammarForCausalLM, CONSTITUENCY_TOKENIZERS),
    (TransformerXLConfig, TransformerXLModel, TransformerXLForCausalLM, CONSTITUENCY_TOKENIZERS),
    (DependencyTransformerGrammarConfig, DependencyTransformerGrammarModel, DependencyTransformerGrammarForCausalLM,
     (DependencyTokenizer,)),
    (DependencyTransformerXLConfig, DependencyTransformerXLModel, DependencyTransformerXLForCausalLM, (DependencyTokenizer,)),
    (CompositionalSLMConfig, CompositionalSLMModel, CompositionalSLMForCausalLM, (CompositionalTokenizer,)),
    # SOM (paper 001) reads words: a subword vocabulary, or the PTB setup's word vocabulary (the default)
    (SyntacticOrderedMemoryConfig, SyntacticOrderedMemoryModel, SyntacticOrderedMemoryForCausalLM,
     (SyntacticTokenizer, SyntacticWordTokenizer)),
)


def family_tokenizer_classes():
    """Every hf-slm tokenizer class (what a saved hf-slm tokenizer may be), each once, in FAMILIES' order."""
    return tuple(dict.fromkeys(cls for *_, tokenizer_classes in FAMILIES for cls in tokenizer_classes))


def tokenizer_class_for_grammar(grammar):
    """The tokenizer class a new model of `grammar` is trained with: the default (last) tokenizer class of the family
    whose config takes the grammar (SyntacticTokenizer for TG / TXL, DependencyTokenizer for DTG,
    CompositionalTokenizer for paper 003's variants and baselines), so a new family is picked up from FAMILIES."""
    from .modeling.configuration_slm import config_class_for_grammar

    config_class = config_class_for_grammar(grammar)
    for family_config, *_, tokenizer_classes in FAMILIES:
        if family_config is config_class:
            return tokenizer_classes[-1]
    raise ValueError(f"grammar {grammar!r}: its config {config_class.__name__} has no tokenizer in "
                     "hf_slm.auto.FAMILIES")


def register_auto_classes():
    for config_class, model_class, causal_lm_class, tokenizer_classes in FAMILIES:
        AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
        AutoModel.register(config_class, model_class, exist_ok=True)
        AutoModelForCausalLM.register(config_class, causal_lm_class, exist_ok=True)
        # AutoTokenizer finds a checkpoint's tokenizer by the class name in its tokenizer_config.json among
        # the registered classes; one config maps to one default class, so the word tokenizer is registered
        # first (its name stays known) and the SentencePiece one last (the default).
        for tokenizer_class in tokenizer_classes:
            AutoTokenizer.register(config_class, tokenizer_class=tokenizer_class, exist_ok=True)
