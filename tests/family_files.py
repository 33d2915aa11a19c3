"""The families' own files, listed once: the scans that generic code names no family read them (issue 27).

tests/test_hub_code_names_no_family.py scans every other hub module (modeling/, tokenization/);
tests/test_layers_name_no_family.py scans every other module of hf_slm, which may reach a family's code only
through its record, so it may import none of these modules.
"""

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
    "dependency_conversion", "prepare_dependency",  # paper 002's data
}


# The records of hf-slm's own families and their card modules (hf_slm/families/), by module name (SOM's record is
# its package's __init__, its card module ordered_memory/card.py).
FAMILY_RECORD_MODULES = {
    "transformer_grammars", "dependency_grammars", "compositional", "ordered_memory",
    "dependency_card", "compositional_card",
    "transformer_grammar_paper", "dependency_paper", "compositional_paper",  # the papers' tables
}


def family_hub_modules():
    """The module names (file stems) of the families' hub files."""
    return {name[:-3] for files in FAMILY_HUB_FILES.values() for name in files}


def family_modules():
    """The module names of every family's own files, hub and hf_slm's."""
    return family_hub_modules() | FAMILY_PACKAGE_MODULES
