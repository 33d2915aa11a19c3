"""The generic hub modules (modeling/, tokenization/) keep no family (issue 27): their code (docstrings and comments
aside) names no grammar, model_type, variant or class of a registered family and imports no family's hub file, and
every family class lives in a family's hub file. The families' hub files are listed in one place
(tests/family_files.py, which the scans of hf_slm's layers read too); everything else in those folders is generic."""

import ast
from pathlib import Path

import pytest
from family_files import FAMILY_HUB_FILES, FAMILY_PACKAGE_MODULES, family_hub_modules
from family_files import family_mentions, family_words

from hf_slm.families import registered_families

ROOT = Path(__file__).resolve().parents[1]
GENERIC_HUB_MODULES = sorted(f"{folder}/{path.name}" for folder, family_files in FAMILY_HUB_FILES.items()
                             for path in (ROOT / folder).glob("*.py") if path.name not in family_files)


def hub_family_words():
    """family_words() (names, model_types, variants, the classes of one paper's families) and every family's grammar
    classes; less the linearizations that the grammars of several papers' families share ("terminals": TXL
    (terminals)'s and GPT2-token's), which are tree formats every tokenizer knows, not a family's name."""
    words, classes = family_words()
    papers = {}
    for family in registered_families():
        for name in family.grammars:
            rules = family.grammar_class(name)
            classes.add(rules.__name__)
            papers.setdefault(rules.linearization, set()).add(family.paper)
    shared = {linearization for linearization, named_by in papers.items() if len(named_by) > 1}
    return words - shared, classes


def family_hub_imports(source):
    """(line, what) of each relative import of a family's hub file."""
    stems = family_hub_modules()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level and node.module in stems:
            found.append((node.lineno, f"imports {node.module}"))
        elif isinstance(node, ast.ImportFrom) and node.level and node.module is None:
            found += [(node.lineno, f"imports {alias.name}") for alias in node.names if alias.name in stems]
    return found


def test_the_lists_name_files_that_exist_and_the_scan_covers_the_generic_ones():
    for folder, files in FAMILY_HUB_FILES.items():
        assert files <= {path.name for path in (ROOT / folder).glob("*.py")}, folder
    assert {"modeling/grammars.py", "modeling/configuration_slm.py", "modeling/modeling_slm.py",
            "modeling/generation_slm.py", "modeling/search_constraints.py", "modeling/segments.py",
            "tokenization/tokenization_slm.py"} <= set(GENERIC_HUB_MODULES)


def test_the_scan_finds_what_it_looks_for():
    words, classes = hub_family_words()
    assert {"tg", "choe_charniak", "nb-up-in-m", "transformer_grammar", "compositional_slm"} <= words
    assert "terminals" not in words  # a linearization of two papers' grammars
    assert {"TransformerGrammarRules", "TransformerGrammarConfig", "CompositionalSLMForCausalLM"} <= classes
    source = '''"""tg in a docstring is fine, and so is TransformerGrammarConfig."""
from .transformer_grammars import TRANSFORMER_GRAMMAR_GRAMMARS
from . import dependency_model
from .grammars import Grammar


def f(config):
    # a comment may say choe_charniak
    return config.grammar == "tg" or isinstance(config, TransformerGrammarConfig), "terminals"
'''
    assert sorted(what for _, what in family_mentions(source, words, classes, imports=False)) == [
        "string names 'tg'", "uses the class TransformerGrammarConfig"]
    assert sorted(what for _, what in family_hub_imports(source)) == ["imports dependency_model",
                                                                       "imports transformer_grammars"]


@pytest.mark.parametrize("module", GENERIC_HUB_MODULES)
def test_generic_hub_module_names_no_family(module):
    words, classes = hub_family_words()
    source = (ROOT / module).read_text(encoding="utf-8")
    found = family_mentions(source, words, classes, imports=False) + family_hub_imports(source)
    assert not found, f"{module}: " + "; ".join(f"line {line}: {what}" for line, what in sorted(found))


def test_every_family_class_lives_in_a_family_hub_file():
    """A family's config, model and grammar classes are defined in its own hub files (a class that several papers'
    families share, such as the base tokenizer, is generic)."""
    _, shared_or_not = family_words()
    family_files = family_hub_modules()
    for family in registered_families():
        classes = [family.config_class, family.model_class, family.causal_lm_class]
        classes += [family.grammar_class(name) for name in family.grammars]
        classes += [cls for cls in family.tokenizer_classes if cls.__name__ in shared_or_not]
        for cls in classes:
            # in a family's hub file of modeling/ or tokenization/, or in a family's own package (RNNG's)
            own = cls.__module__.rpartition(".")[2] in family_files or \
                any(part in FAMILY_PACKAGE_MODULES for part in cls.__module__.split("."))
            assert own, f"{family.name}: {cls.__name__} in {cls.__module__}"
