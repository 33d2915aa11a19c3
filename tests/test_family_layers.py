"""What the training, data, summarization and card layers ask a family record (hf_slm/families/registry.py), for
every registered family: doubled id ranges, the tokenizer's options, identity, card hooks, data preparations."""

import pytest

from hf_slm.data.prepare import data_preparations, holds_trees
from hf_slm.families import (
    doubled_id_ranges,
    families_of_tokenizer,
    family_for_grammar,
    grammar_names,
    model_identity,
    registered_families,
)
from hf_slm.families.tree_formats import build_mask_example, format_of_grammar

TREE = "(S (NP (DT the) (NN bird)) (VP (VBZ sings) (ADVP loudly)))"
DEPENDENCY_TREE = "There/2 is/0 a/4 difference/2"


@pytest.mark.parametrize("grammar", grammar_names())
def test_doubled_id_ranges_count_every_grammars_expansion(grammar):
    """Training checks expanded lengths by counting the ids in doubled_id_ranges twice: the count is the length
    the grammar expands a sequence to."""
    text = DEPENDENCY_TREE if format_of_grammar(grammar).name == "dependency" else TREE
    example = build_mask_example(grammar, text)
    sequence = example.grammar.sequence(example.ids, **example.sequence_options)
    ranges = doubled_id_ranges(grammar, example.grammar.layout.to_dict())
    doubled = sum(1 for i in example.ids for start, stop in ranges if start <= i < stop)
    assert len(sequence.input_ids) == len(example.ids) + doubled
    assert bool(ranges) == bool(example.grammar.duplicates_closing)


def test_model_identity_is_the_variant_name():
    for family in registered_families():
        for variant in family.variants:
            config = {"model_type": family.model_type, **({"grammar": variant.name} if variant.is_grammar else {})}
            assert model_identity(config) == variant.name
    assert model_identity(None) is None
    assert model_identity({"grammar": "stub"}) == "stub"  # a stand-in config without a model_type


def test_a_tokenizer_belongs_to_the_families_that_name_its_class():
    for family in registered_families():
        for tokenizer_class in family.tokenizer_classes:
            stand_in = type(tokenizer_class.__name__, (), {})()  # a checkpoint's own copy of the class: same name
            assert family in families_of_tokenizer(stand_in)
    assert families_of_tokenizer(object()) == ()


def test_every_family_gives_its_tokenizer_options_and_card_hooks():
    for family in registered_families():
        assert callable(family.tokenizer_grammar_options) and callable(family.tokenizer_config_fields)
        assert callable(family.card_details) and callable(family.card_values) and callable(family.doubled_id_ranges)
        assert isinstance(family.unlabelled_trees, bool)


def test_data_preparations_say_what_they_prepare():
    hooks = data_preparations()
    assert hooks  # the dependency families' conllu data
    for hook, grammars in hooks.items():
        assert grammars and all(family_for_grammar(name).preparation is hook for name in grammars)
        assert hook.loader and hook.description and hook.record_key
        assert holds_trees({"loader": hook.loader, hook.record_key: {"grammar": grammars[0]}})
        assert not holds_trees({"loader": hook.loader})
        # a grammar prepared by a hook has trees that tree files do not hold
        assert all(not format_of_grammar(name).from_tree_files for name in grammars)
