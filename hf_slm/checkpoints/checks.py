"""Checks that a tokenizer and a model were made for each other."""

from ..families import family_for_config, grammar_class
from ..modeling.grammars import grammar_for_config


def linearization_of(grammar):
    """What a tokenizer must produce for `grammar` (its grammar class says it)."""
    return grammar_class(grammar).linearization


def check_tokenizer_matches(config, tokenizer):
    """Raise ValueError naming every way `tokenizer` disagrees with a model `config`, by its family's check
    (Family.check_tokenizer; a family with grammars: check_grammar_tokenizer)."""
    family_for_config(config).check_tokenizer(config, tokenizer)


def check_grammar_tokenizer(config, tokenizer):
    """Raise ValueError naming every way `tokenizer` disagrees with the `config` of a model with a grammar.

    The model reads ids by their ranges (config.open_nt_start, ...), so a tokenizer with another layout
    would silently turn nonterminals into words, and one with the same layout but other pieces would feed
    it other words (config.vocabulary_fingerprint, when the model recorded it); this catches both before
    any number is computed.
    """
    problems = []
    if len(tokenizer) > config.vocab_size:
        problems.append(f"the tokenizer has {len(tokenizer)} ids but the model's vocab_size is {config.vocab_size}")
    layout = grammar_for_config(config).layout.to_dict()
    given = tokenizer.action_layout
    foreign = sorted(set(given) ^ set(layout))
    if foreign:  # a tokenizer of another family (nonterminals for a dependency model, or the reverse)
        problems.append(f"the tokenizer's id layout has other fields than a {config.grammar} model reads ({', '.join(foreign)}): "
                        "a tokenizer of another model family")
    for name, value in given.items():
        if name in layout and layout[name] != value:
            shown = lambda v: f"{len(v)} ids" if isinstance(v, (list, tuple)) and len(v) > 8 else v  # noqa: E731
            problems.append(f"{name} is {shown(value)} in the tokenizer but {shown(layout[name])} in the model config")
    trained_with = getattr(config, "vocabulary_fingerprint", None)
    fingerprint = getattr(tokenizer, "vocabulary_fingerprint", None)
    if trained_with and fingerprint and fingerprint != trained_with:
        problems.append(f"the tokenizer's vocabulary (fingerprint {fingerprint}) is not the one the model was "
                        f"trained with ({trained_with}): same id ranges, other pieces or labels")
    expected = linearization_of(config.grammar)
    linearization = getattr(tokenizer, "linearization", None)
    if expected and linearization and linearization != expected:
        problems.append(f"the tokenizer linearizes {linearization!r} but the {config.grammar} grammar reads {expected!r}")
    if problems:
        raise ValueError("tokenizer and model do not match: " + "; ".join(problems))
