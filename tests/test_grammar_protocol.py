"""The grammar protocol is declared in one place: every registered family's grammars derive from it and have each
capability, and the hub code reads capabilities as plain attributes, never with getattr / hasattr."""

import ast
from pathlib import Path

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
                       "host_input_names", "host_inputs", "references_positions"):
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
