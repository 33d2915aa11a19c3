"""hf-slm: syntactic language models as HuggingFace transformers models.

The names below are imported on first use (PEP 562 `__getattr__`): the `hf-slm` command line runs this
file before every command, and `hf-slm --help` or `hf-slm masks` must not wait seconds for torch and
transformers. Importing hf_slm still registers its classes with the transformers Auto factories, at once
when transformers is already imported, else when it is (hf_slm/auto_registration.py).
"""

from importlib import import_module
from importlib.util import find_spec

from .auto_registration import register_auto_classes_once, watch_transformers

__version__ = "0.1.0"

# public name -> submodule that defines it
_NAMES = {
    "register_auto_classes": "auto",
    "generate_trees": "search.beam",
    "parse": "search.beam",
    "score": "search.beam",
    "check_tokenizer_matches": "checkpoints.checks",
    "SyntacticDataCollator": "data.collator",
    "UniformMixture": "search.ensemble",
    "Family": "families",
    "Variant": "families",
    "register_family": "families",
    "registered_families": "families",
    "family_for_config": "families",
    "family_for_grammar": "families",
    "grammar_class": "families",
    "get_grammar": "families",
    "presets": "families",
    "preset_config": "families",
    "config_for_grammar": "families",
    "causal_lm_for_config": "families",
    "TransformerGrammarConfig": "modeling.transformer_grammar_config",
    "SyntacticTransformerConfig": "modeling.configuration_slm",
    "TransformerXLConfig": "modeling.transformer_grammar_config",
    "BeamSearchOptions": "modeling.generation_slm",
    "WordSynchronousBeamSearch": "modeling.generation_slm",
    "SearchDecoder": "modeling.search_decoders",
    "TransformerSearchDecoder": "modeling.search_decoders",
    "DependencyLayout": "modeling.dependency_grammars",
    "ActionKind": "modeling.grammars",
    "ActionLayout": "modeling.grammars",
    "PositionKind": "modeling.grammars",
    "TransformerGrammarForCausalLM": "modeling.transformer_grammar_model",
    "TransformerGrammarModel": "modeling.transformer_grammar_model",
    "TransformerXLForCausalLM": "modeling.transformer_grammar_model",
    "TransformerXLModel": "modeling.transformer_grammar_model",
    "SyntacticTransformerForCausalLM": "modeling.modeling_slm",
    "SyntacticTransformerModel": "modeling.modeling_slm",
    "sample_trees": "search.sampling",
    "Scorer": "search.scorers",
    "scorer_for": "search.scorers",
    "split_sentences": "data.sentence_splitting",
    "treebank_words": "data.sentence_splitting",
    "parse_sentences": "summarization.silver",
    "silver_trees": "summarization.silver",
    "summarize": "summarization.summaries",
    "action_log_probs": "search.scoring",
    "action_perplexity": "search.scoring",
    "joint_log_probs": "search.scoring",
    "bottom_up_actions": "tokenization.linearizers",
    "terminal_actions": "tokenization.linearizers",
    "top_down_actions": "tokenization.linearizers",
    "tree_from_bottom_up": "tokenization.linearizers",
    "tree_from_top_down": "tokenization.linearizers",
    "DependencyTree": "tokenization.dependency_trees",
    "DependencyTokenizer": "tokenization.tokenization_dependency",
    "CompositionalTokenizer": "tokenization.tokenization_compositional",
    "CompositionalSLMConfig": "modeling.compositional_config",
    "CompositionalSLMForCausalLM": "modeling.compositional_model",
    "CompositionalSLMModel": "modeling.compositional_model",
    "SyntacticOrderedMemoryConfig": "modeling.configuration_som",
    "SyntacticOrderedMemoryForCausalLM": "modeling.modeling_som",
    "SyntacticOrderedMemoryModel": "modeling.modeling_som",
    "SyntacticOrderedMemoryCollator": "families.ordered_memory.data",
    "transition_system": "tokenization.transitions",
    "SyntacticTokenizer": "tokenization.tokenization_slm",
    "SyntacticWordTokenizer": "tokenization.tokenization_slm",
    "normalize_tree": "tokenization.trees",
    "parse_tree": "tokenization.trees",
    "parse_trees": "tokenization.trees",
    "read_trees": "tokenization.trees",
    "tree_to_string": "tokenization.trees",
}

# Submodules that need neither torch nor transformers (numpy, nltk): handing out their names registers nothing.
_WITHOUT_TRANSFORMERS = {
    "checkpoints.checks", "families", "search.scorers", "data.sentence_splitting", "modeling.grammars",
    "modeling.dependency_grammars", "tokenization.linearizers", "tokenization.trees", "tokenization.dependency_trees",
    "tokenization.transitions",
}

__all__ = sorted(_NAMES) + ["__version__"]

watch_transformers()


def __getattr__(name: str) -> object:
    """A public name (imported from its submodule, then cached here), or a submodule such as `hf_slm.search.beam`."""
    if name in _NAMES:
        module = _NAMES[name]
        value = getattr(import_module(f".{module}", __name__), name)
        if module not in _WITHOUT_TRANSFORMERS:
            # Whoever touches the model, tokenizer or config classes expects the Auto factories to know them.
            register_auto_classes_once()
        globals()[name] = value
        return value
    if not name.startswith("_") and find_spec(f"{__name__}.{name}") is not None:
        return import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_NAMES))
