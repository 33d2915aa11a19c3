"""The families' own files, listed once: the scans that generic code names no family read them (issue 27).

tests/test_hub_code_names_no_family.py scans every other hub module (modeling/, tokenization/);
tests/test_layers_name_no_family.py scans every other module of hf_slm, which may reach a family's code only
through its record, so it may import none of these modules. Both find a family's name with `family_mentions`.
"""

import ast
import re

from hf_slm.families import registered_families

# Each family's own hub files, by folder (paper 000: TG and TXL; paper 002: DTG and TXL (trans); paper 003: the
# compositional SLMs; SOM).
FAMILY_HUB_FILES = {
    "modeling": {
        "transformer_grammars.py", "transformer_grammar_rows.py", "transformer_grammar_config.py",
        "transformer_grammar_model.py",
        "dependency_grammars.py", "dependency_config.py", "dependency_model.py",
        "compositional_grammars.py", "compositional_config.py", "compositional_model.py", "composer.py",
        "start_pointer.py",
        "configuration_som.py", "modeling_som.py", "som_structure.py",
    },
    "tokenization": {
        "tokenization_dependency.py", "transitions.py",
        "tokenization_compositional.py",
        "som_trees.py",
    },
}

# hf_slm's modules that hold one family's code (or one paper's families'), by module name: a module may move
# between hf_slm's sub-packages and keep its place here.
FAMILY_PACKAGE_MODULES = {
    "ordered_memory",  # SOM
    "recurrent_grammars",  # RNNG, its hub file (modeling_rnng.py) included: a family's files in its own package
    "dependency_conversion", "prepare_dependency",  # paper 002's data
}


# The records of hf-slm's own families and their card modules (hf_slm/families/), by module name (SOM's record is
# its package's __init__, its card module ordered_memory/card.py).
FAMILY_RECORD_MODULES = {
    "transformer_grammars", "dependency_grammars", "compositional", "ordered_memory", "recurrent_grammars",
    "dependency_card", "compositional_card",
    "transformer_grammar_paper", "dependency_paper", "compositional_paper",  # the papers' tables
}


def family_hub_modules():
    """The module names (file stems) of the families' hub files."""
    return {name[:-3] for files in FAMILY_HUB_FILES.values() for name in files}


def family_modules():
    """The module names of every family's own files, hub and hf_slm's."""
    return family_hub_modules() | FAMILY_PACKAGE_MODULES


def _class_names(family):
    """The names of the classes a record names."""
    references = [family.reference(name) for name in ("config_class", "model_class", "causal_lm_class")]
    references += list(family.reference("tokenizer_classes"))
    return {reference.rpartition(":")[2] if isinstance(reference, str) else reference.__name__
            for reference in references}


def family_field_names(family):
    """The names of what a family's grammars carry beside the generic inputs (issue 40): their per-action inputs,
    family inputs, host inputs, auxiliary losses and start pointer's output (Nb-Up's constituent_starts, start_loss
    and start_log_probs, DTG's head_token_index...). Generic code reads them from the grammar's declarations, never
    by name."""
    names = set()
    for grammar in family.grammars:
        rules = family.grammar_class(grammar)
        names |= set(rules.action_inputs) | set(rules.family_inputs) | set(rules.host_input_names)
        names |= set(rules.input_references) | set(rules.auxiliary_losses)
        names |= {rules.start_input, rules.start_output} - {None}
    return names


def family_words():
    """Every name of a family or of one of its variants, and the classes of one paper's families (a class the
    families of several papers share, such as the base tokenizer, is generic)."""
    families = registered_families()
    words = set()
    for family in families:
        words |= {family.name, family.model_type}
        words |= {variant.name for variant in family.variants}
        words |= {variant.display_name for variant in family.variants}
        words |= family_field_names(family)
    papers = {}
    for family in families:
        for name in _class_names(family):
            papers.setdefault(name, set()).add(family.paper)
    classes = {name for name, named_by in papers.items() if len(named_by) == 1}
    return words, classes


def _docstrings(tree):
    """The docstring nodes of a module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def family_mentions(source, words, classes, imports=True):
    """(line, what) of each place the code names a family: a word in a string (not a docstring), a class name
    used, or (with `imports`) a family module imported."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    patterns = {word: re.compile(rf"(?<![\w-]){re.escape(word)}(?![\w-])") for word in words}
    family_own = family_modules()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            found += [(node.lineno, f"string names {word!r}") for word, pattern in patterns.items()
                      if pattern.search(node.value)]
        elif isinstance(node, ast.Name) and node.id in classes:
            found.append((node.lineno, f"uses the class {node.id}"))
        elif isinstance(node, ast.Attribute) and node.attr in classes:
            found.append((node.lineno, f"uses the class {node.attr}"))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [alias.name for alias in node.names]
            modules += [alias.name for alias in node.names] if isinstance(node, ast.ImportFrom) else []
            for module in modules:
                if imports and family_own & set(module.split(".")):
                    found.append((node.lineno, f"imports {module}"))
                if module in classes:
                    found.append((node.lineno, f"imports the class {module}"))
    return found
