"""benchmarks/reference_comparison.py (issue 39) needs the reference implementation's environment to run; what it can
check without it, here: its map from hf-slm's parameters to the reference's Haiku names gives every parameter of every
case's model a place, and names no parameter the model lacks (a renamed hf-slm parameter would otherwise break the
comparison unseen, since it runs by hand)."""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def benchmark_module(name):
    sys.path.insert(0, str(BENCHMARKS))  # the scripts import their sibling report.py
    try:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


@pytest.fixture(scope="module")
def sides():
    comparison = benchmark_module("reference_comparison")
    from hf_slm.families.action_vocab import ActionVocabulary

    sentences, documents = comparison.case_actions(comparison.test_documents())
    return comparison, benchmark_module("reference_comparison_jax"), ActionVocabulary.from_action_sequences(
        sentences + documents)


def test_every_case_maps_each_hf_slm_parameter_to_one_reference_parameter(sides):
    comparison, reference_side, vocabulary = sides
    from hf_slm.families import causal_lm_for_config

    for case in comparison.CASES:
        config = comparison.case_config(case, vocabulary)
        torch.manual_seed(0)
        names = set(causal_lm_for_config(config).state_dict()) - {"lm_head.weight"}  # tied to the embeddings
        reference = comparison.reference_config(config, comparison.SEGMENT_LENGTH, "structure")
        functions = 2 if config.distinct_compose_attention else 1
        sources = [source for source, _ in reference_side.parameter_sources(reference, functions).values()]
        assert len(sources) == len(set(sources)), case.name
        assert set(sources) == names, (case.name, sorted(set(sources) ^ names))
