"""The training, data, summarization, card and publishing layers ask the family records (hf_slm/families), never a
family by name (issue 27): their code (docstrings and comments aside) holds no grammar name, model_type, family
name, display name or family class name, and imports no family's own module."""

import ast
import re
from pathlib import Path

import pytest
from family_files import FAMILY_PACKAGE_MODULES, family_modules

from hf_slm.families import registered_families

PACKAGE = Path(__file__).resolve().parents[1] / "hf_slm"
# The generic modules of these layers (the families' own files are hf_slm/families/*, the modules below in
# FAMILY_MODULES, and what a record names).
LAYER_MODULES = [
    "training.py", "segment_training.py", "finetuning.py", "summarization.py", "summarization_command.py",
    "mask_inspection.py", "model_card.py", "card_command.py", "publishing.py", "publishing_command.py",
    "run_journal.py", "quickstart.py", "loading.py",
    "data/__init__.py", "data/command.py", "data/prepare.py", "data/prepare_summarization.py", "data/ptb.py",
    "data/bllip.py", "data/xsum.py", "data/split_files.py", "data/conllu_loader.py",
]
# What every tree format does: built on the readers that exist, some in a family's module (the unlabelled
# brackets' reader, the transition systems' oracle), so they may import those; they name no family.
FORMAT_MODULES = ["families/tree_formats.py", "families/mask_examples.py"]
# Modules that hold one family's code (or one paper's families'), hub files and hf_slm's (tests/family_files.py): a
# generic layer reaches them through a record.
FAMILY_MODULES = family_modules()


def _class_names(family):
    """The names of the classes a record names."""
    references = [family.reference(name) for name in ("config_class", "model_class", "causal_lm_class")]
    references += list(family.reference("tokenizer_classes"))
    return {reference.rpartition(":")[2] if isinstance(reference, str) else reference.__name__
            for reference in references}


def family_words():
    """Every name of a family or of one of its variants, and the classes of one paper's families (a class the
    families of several papers share, such as the base tokenizer, is generic)."""
    families = registered_families()
    words = set()
    for family in families:
        words |= {family.name, family.model_type}
        words |= {variant.name for variant in family.variants}
        words |= {variant.display_name for variant in family.variants}
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
                if imports and FAMILY_MODULES & set(module.split(".")):
                    found.append((node.lineno, f"imports {module}"))
                if module in classes:
                    found.append((node.lineno, f"imports the class {module}"))
    return found


def test_the_scan_finds_what_it_looks_for():
    words, classes = family_words()
    assert {"tg", "dtg_swift", "nb-up-ex-m", "transformer_grammar", "DTG-eager"} <= words
    assert "DependencyTokenizer" in classes and "SyntacticTokenizer" not in classes  # shared by several families
    source = '''"""A docstring may say tg and DTG."""
import numpy
from .tokenization.tokenization_dependency import is_inline_tree


def f(x):
    """So may this one: dtg."""
    # and a comment: tg
    if x == "dtg" or isinstance(x, DependencyTokenizer):
        return f"the {x} grammar, not nb-dn-in-m"
    return "tg-ptb is a preset, not a grammar name"
'''
    assert sorted(what for _, what in family_mentions(source, words, classes)) == [
        "imports tokenization.tokenization_dependency", "string names 'dtg'", "string names 'nb-dn-in-m'",
        "uses the class DependencyTokenizer"]


def test_the_family_modules_exist():
    """Each of hf_slm's family modules that the scan refuses to see imported is a module of hf_slm (a stale name
    would hide nothing)."""
    assert FAMILY_PACKAGE_MODULES <= {path.stem for path in PACKAGE.rglob("*.py")}


@pytest.mark.parametrize("module", LAYER_MODULES + FORMAT_MODULES)
def test_layer_module_names_no_family(module):
    words, classes = family_words()
    path = PACKAGE / module
    found = family_mentions(path.read_text(encoding="utf-8"), words, classes, imports=module not in FORMAT_MODULES)
    assert not found, f"{path}: " + "; ".join(f"line {line}: {what}" for line, what in found)
