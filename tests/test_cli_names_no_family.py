"""The command line, the scorer interface and the evaluation drivers ask the family records and the scorers
(hf_slm/scorers.py), never a family by name (issue 27): their code (docstrings and comments aside) holds no grammar
name, model_type, family name, display name or family class name, and imports no family's own module. The scan is
tests/test_layers_name_no_family.py's."""

import pytest

from test_layers_name_no_family import PACKAGE, family_mentions, family_words

MODULES = [
    "cli.py", "checks.py", "scorers.py", "search_scorer.py", "beam.py", "silver.py", "scoring.py", "sampling.py",
    "ensemble.py", "evaluation/perplexity.py", "evaluation/syntaxgym.py", "evaluation/blimp.py",
    "evaluation/parsing.py", "evaluation/attachment.py", "evaluation/results.py", "evaluation/evalb.py",
    "evaluation/rouge.py",
]


@pytest.mark.parametrize("module", MODULES)
def test_module_names_no_family(module):
    words, classes = family_words()
    path = PACKAGE / module
    found = family_mentions(path.read_text(encoding="utf-8"), words, classes)
    assert not found, f"{path}: " + "; ".join(f"line {line}: {what}" for line, what in found)
