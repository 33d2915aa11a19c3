"""No generic module of hf_slm names a family (issue 27): every module but the families' own (listed once, in
tests/family_files.py: the records, their card modules, SOM's and paper 002's data modules) asks the family records
(hf_slm/families) instead. Its code (docstrings and comments aside) holds no grammar name, model_type, family name,
display name or family class name, and imports no family's own module. The hub code's scan is
test_hub_code_names_no_family's."""

from pathlib import Path

import pytest
from family_files import FAMILY_PACKAGE_MODULES, FAMILY_RECORD_MODULES, family_modules

from family_files import family_mentions, family_words

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
