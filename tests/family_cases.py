"""The cases of the parametrized family tests (test_families.py, test_proposals.py): a variant of every registered
family, and two toy families written as another package would write them, registered with the public call
`hf_slm.register_family` while a module that takes `toy_registered` runs: a Transformer (tests/toy_family.py) and a
recurrent model (tests/toy_recurrent_family.py)."""

from pathlib import Path

import pytest

import toy_family
import toy_recurrent_family
from hf_slm import Family, Variant, register_family
from hf_slm.data.collator import collator_for_model
from hf_slm.families import registered_families, unregister_family

FIXTURES = Path(__file__).parent / "fixtures"

TINY = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2)
# The toy family's record: what a package outside hf-slm registers (its card template is its own file).
TOY = Family(
    name="toy_depth_causal", model_type=toy_family.ToyConfig.model_type, paper="tests/toy_family.py",
    config_class=toy_family.ToyConfig, model_class=toy_family.ToyModel, causal_lm_class=toy_family.ToyForCausalLM,
    tokenizer_classes=("hf_slm.tokenization.tokenization_slm:SyntacticTokenizer",),
    variants=(Variant("toy-depth", "Toy depth-causal LM", "toy-depth-causal", str(FIXTURES / "toy_card.md")),),
    grammar_classes=toy_family.TOY_GRAMMARS,
    presets={"toy-tiny": {"description": "the toy for CPUs", "model": dict(TINY, grammar="toy-depth"),
                          "training": dict(batch_size=4, sequence_length=256, max_steps=10, warmup_steps=1,
                                           initial_learning_rate=1e-7, learning_rate=1e-3,
                                           final_learning_rate=1e-7)}},
)


def _lstm_collator(model, tokenizer=None, **options):
    """The toy LSTM's collator: hf-slm's, without the position structure an LSTM reading in order does not use."""
    return collator_for_model(model, tokenizer, positions=False, host_counts=False, **options)


def _lstm_card_rows(config, parameters):
    """The toy LSTM's "Model details" rows on its card."""
    return [("grammar", f"`{config['grammar']}`"), ("LSTM", f"{config['num_hidden_layers']} layers of "
                                                           f"{config['hidden_size']}"),
            ("parameters", f"{parameters:,}" if parameters is not None else "not counted")]


# A recurrent family outside hf-slm: an LSTM LM over bracketed actions (tests/toy_recurrent_family.py), whose hub
# code imports hf-slm hub modules beyond its base classes' files.
TOY_RECURRENT = Family(
    name="toy_action_lstm", model_type=toy_recurrent_family.ToyLSTMConfig.model_type,
    paper="tests/toy_recurrent_family.py", config_class=toy_recurrent_family.ToyLSTMConfig,
    model_class=toy_recurrent_family.ToyLSTMModel, causal_lm_class=toy_recurrent_family.ToyLSTMForCausalLM,
    tokenizer_classes=("hf_slm.tokenization.tokenization_slm:SyntacticTokenizer",),
    variants=(Variant("toy-lstm", "Toy action LSTM", "toy-action-lstm", str(FIXTURES / "toy_card.md")),),
    grammar_classes=toy_recurrent_family.TOY_LSTM_GRAMMARS,
    presets={"toy-lstm-tiny": {"description": "the toy LSTM for CPUs",
                               "model": dict(grammar="toy-lstm", hidden_size=16, num_hidden_layers=1),
                               "training": dict(batch_size=4, sequence_length=256, max_steps=10, warmup_steps=1,
                                                initial_learning_rate=1e-7, learning_rate=1e-3,
                                                final_learning_rate=1e-7)}},
    card_details=_lstm_card_rows,
    preset_columns=lambda preset: {"d": preset["model"]["hidden_size"]},
    collator=_lstm_collator,
)

# variant -> (preset, its extra `hf-slm train` options). Every registered family has a case (a test says so).
TINY_SET = [item for key, value in TINY.items() for item in ("--set", f"{key}={value}")]
CASES = {
    "tg": ("tg-ptb", TINY_SET),
    "choe_charniak": ("txl-cc-ptb", TINY_SET),
    "terminals": ("txl-terminals-ptb", TINY_SET),
    "dtg": ("dtg-tiny", TINY_SET),
    "txl_trans": ("txl-trans-tiny", TINY_SET),
    "nb-dn-in-m": ("nb-dn-in-m-tiny", TINY_SET),
    # external composition and the start pointer (two heads)
    "nb-up-ex-m": ("nb-up-ex-m-tiny", TINY_SET + ["--set", "composer_hidden_size=8", "--set", "composer_num_layers=1",
                                                  "--set", "composer_num_heads=2", "--set",
                                                  "composer_intermediate_size=16"]),
    "syntactic_ordered_memory": ("esom-tiny", ["--set", "hidden_size=16", "--set", "num_slots=4", "--gold-tree",
                                               "constituency"]),
    "toy-depth": ("toy-tiny", []),
    "toy-lstm": ("toy-lstm-tiny", []),
    # a recurrent family added through the public API (hf_slm/families/recurrent_grammars)
    "rnng": ("rnng-tiny", ["--set", "embedding_size=16", "--set", "hidden_size=16", "--set", "num_hidden_layers=1"]),
}


@pytest.fixture(scope="module", autouse=True)
def toy_registered():
    for family in (TOY, TOY_RECURRENT):
        register_family(family)
    yield
    for family in (TOY, TOY_RECURRENT):
        unregister_family(family.name)


def variant_family(variant):
    return next(family for family in registered_families() if variant in [v.name for v in family.variants])
