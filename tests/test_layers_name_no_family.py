"""No generic module of hf_slm names a family (issue 27): every module but the families' own (listed once, in
tests/family_files.py: the records, their card modules, SOM's and paper 002's data modules) asks the family records
(hf_slm/families) instead. Its code (docstrings and comments aside) holds no grammar name, model_type, family name,
display name or family class name, and imports no family's own module. The hub code's scan is
test_hub_code_names_no_family's."""

import ast
import re
from pathlib import Path

import pytest
from family_files import FAMILY_PACKAGE_MODULES, FAMILY_RECORD_MODULES, family_modules

from hf_slm.families import registered_families

PACKAGE = Path(__file__).resolve().parents[1] / "hf_slm"
# Modules that hold one family's code (or one paper's families'), hub files and hf_slm's (tests/family_files.py): a
# generic layer reaches them through a record.
FAMILY_MODULES = family_modules()
FAMILY_OWN = FAMILY_MODULES | FAMILY_RECORD_MODULES
# What every tree format does: built on the readers that exist, some in a family's module (the unlabelled
# brackets' reader, the transition systems' oracle), so they may import those; they name no family.
FORMAT_MODULES = {"tree_formats", "mask_examples"}


def generic_modules():
    """Every module of hf_slm (path relative to hf_slm/) but the families' own: a module, or a package, whose name
    is one of FAMILY_OWN."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if not set(relative.with_suffix("").parts) & FAMILY_OWN:
            found.append(str(relative))
    return found


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


def test_the_family_modules_exist_and_the_scan_covers_every_layer():
    """Each of hf_slm's family modules that the scan refuses to see imported is a module of hf_slm (a stale name
    would hide nothing), and the scan reads every generic layer."""
    stems = {path.stem for path in PACKAGE.rglob("*.py")} | {path.name for path in PACKAGE.rglob("*") if path.is_dir()}
    assert FAMILY_PACKAGE_MODULES | FAMILY_RECORD_MODULES <= stems
    scanned = generic_modules()
    folders = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").exists()}
    assert folders <= {Path(module).parts[0] for module in scanned}  # every layer's folder is read
    assert {"cli/commands.py", "training/train.py", "data/collator.py", "search/beam.py", "families/registry.py",
            "evaluation/perplexity.py", "auto.py"} <= set(scanned)


@pytest.mark.parametrize("module", generic_modules())
def test_generic_module_names_no_family(module):
    words, classes = family_words()
    path = PACKAGE / module
    found = family_mentions(path.read_text(encoding="utf-8"), words, classes,
                            imports=Path(module).stem not in FORMAT_MODULES)
    assert not found, f"{path}: " + "; ".join(f"line {line}: {what}" for line, what in found)
