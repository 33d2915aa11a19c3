"""The grammar protocol is declared in one place: every registered family's grammars derive from it and have each
capability, and the hub code reads capabilities as plain attributes, never with getattr / hasattr."""

import ast
from pathlib import Path

import numpy as np
import pytest

from hf_slm.families import registered_families
from hf_slm.modeling.grammar_protocol import CAPABILITIES, GrammarProtocol

MODELING = Path(__file__).resolve().parent.parent / "modeling"

GRAMMAR_CLASSES = sorted(((family.name, name, family.grammar_class(name)) for family in registered_families()
                          for name in family.grammars), key=lambda entry: entry[:2])


def test_every_family_has_grammars():
    assert len(GRAMMAR_CLASSES) >= 20  # TG's 3, DTG's 4, paper 003's 18 at least


@pytest.mark.parametrize(("family", "name", "rules"), GRAMMAR_CLASSES, ids=[f"{f}:{n}" for f, n, _ in GRAMMAR_CLASSES])
def test_every_grammar_class_derives_from_the_protocol_and_has_every_capability(family, name, rules):
    assert issubclass(rules, GrammarProtocol), f"{family}: {name} ({rules.__name__}) is not a GrammarProtocol"
    missing = [capability for capability in CAPABILITIES if not hasattr(rules, capability)]
    assert not missing, f"{family}: {name} lacks {missing}"
    assert not getattr(rules, "__abstractmethods__", None), f"{name} leaves {sorted(rules.__abstractmethods__)} abstract"
    assert rules.name == name
    assert rules.layout_class is not None and rules.linearization is not None


def test_the_protocol_declares_the_capabilities_the_generic_code_reads():
    for capability in ("causal", "words_only", "duplicates_closing", "duplicated_actions", "compose_kinds",
                       "reducing_kinds", "explicit_relative_positions", "relative_affine_by_kind",
                       "needs_explicit_relative_positions", "adds_head_tokens", "external_composition", "takes_start",
                       "structure_between_pieces", "uses_eos", "linearization", "relative_position_range",
                       "relative_position_meaning", "has_stack", "stack_lifetimes", "default_memory_update",
                       "supports_segments", "start_action_id", "continues_word", "action_kinds", "open_total",
                       "legal_table", "kinds_mask", "rows_class", "layout_class", "action_inputs", "family_inputs",
                       "host_input_names", "host_inputs", "references_positions", "auxiliary_losses", "report_fields",
                       "start_input", "start_output"):
        assert capability in CAPABILITIES, capability
    assert "for_config" in vars(GrammarProtocol)


def _capability_reads(path):
    """(line, call) of every getattr / hasattr in `path` whose attribute is a protocol capability."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in CAPABILITIES):
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_no_modeling_module_but_the_protocol_reads_a_capability_with_getattr():
    reads = {path.name: _capability_reads(path) for path in sorted(MODELING.glob("*.py"))
             if path.name != "grammar_protocol.py"}
    assert {name: found for name, found in reads.items() if found} == {}


def test_the_check_sees_a_capability_read_with_getattr(tmp_path):
    """The scan above would find one (it is not vacuous)."""
    module = tmp_path / "sample.py"
    module.write_text("def f(grammar):\n    return getattr(grammar, 'takes_start', False) or hasattr(grammar, 'causal')\n")
    assert [line for line, _ in _capability_reads(module)] == [2, 2]


CAUSAL_GRAMMARS = [entry for entry in GRAMMAR_CLASSES if entry[2].causal]


def _random_sequences(name, rules, count=12):
    """`count` random (grammar, ids, sequence options) the grammar `name` reads: the segment tests' random cases where
    they have the grammar, else random unlabelled trees in its linearization (words only: their words)."""
    from hf_slm.families import get_grammar
    from hf_slm.families.action_vocab import ActionVocabulary
    from hf_slm.families.mask_examples import unlabelled_actions
    from hf_slm.tokenization.linearizers import tree_from_top_down

    from helpers.random_documents import WORDS, random_case, random_tree

    rng = np.random.default_rng(0)
    vocab = ActionVocabulary(WORDS, [""])
    found = []
    for _ in range(count):
        try:
            found.append(random_case(rng, name))
            continue
        except KeyError:  # a grammar the segment tests do not list (paper 003's GPT-2 baselines)
            pass
        actions, _ = unlabelled_actions(tree_from_top_down(random_tree(rng, max_depth=int(rng.integers(1, 7)))), rules)
        if rules.words_only:
            actions = [a for a in actions if a in WORDS or a in ("<s>", "</s>")]
        found.append((get_grammar(name, vocab.layout), [vocab.ids[a] for a in actions], {}))
    return found


def _not_causal(grammar, ids, options):
    """Why the sequence `ids` of `grammar` is not the causal structure (one position per action, each attending
    itself and every earlier one, its coordinate its index), or None."""
    sequence = grammar.sequence(ids, **options)
    length = len(ids)
    if len(sequence.input_ids) != length:
        return f"{len(sequence.input_ids)} positions for {length} actions"
    if not (sequence.attention_mask == np.tril(np.ones((length, length), dtype=bool))).all():
        return "a mask that is not every earlier position"
    if not (sequence.position_coordinates == np.arange(length)).all():
        return f"coordinates {sequence.position_coordinates.tolist()}, not the indices"
    return None


@pytest.mark.parametrize(("family", "name", "rules"), CAUSAL_GRAMMARS, ids=[f"{f}:{n}" for f, n, _ in CAUSAL_GRAMMARS])
def test_a_grammar_that_says_causal_has_the_structure_a_model_builds_from_the_ids_alone(family, name, rules):
    """`causal` lets the model build a batch's structure from its ids (left padding, a key/value cache): one position
    per action, each attending itself and every earlier one, its coordinate its index. A grammar that says so and
    expands, masks or places its positions otherwise (issue 40: coordinates that are not indices) would be read
    wrong without an error; its batch must be exactly that structure."""
    assert len(CAUSAL_GRAMMARS) >= 7  # TXL (CC), TXL (terminals), TXL (trans), the four Ex-Nm, paper 003's GPT-2s
    found = {_not_causal(*case) for case in _random_sequences(name, rules)}
    assert found == {None}, f"{family}: {name} says causal, but its batch has {found - {None}}"


@pytest.mark.parametrize("name", ["tg", "dtg", "nb-dn-ex-m"])
def test_the_causal_check_sees_a_structure_that_is_not(name):
    """The check above is not blind: TG's duplicated closing positions and depths, DTG's, an Ex-M mask."""
    rules = next(entry[2] for entry in GRAMMAR_CLASSES if entry[1] == name)
    assert not rules.causal
    found = {_not_causal(*case) for case in _random_sequences(name, rules)}
    assert found - {None}, f"{name}: no random case was seen as not causal"
