"""A family's extra inputs travel as one mapping: the grammar declares them and makes them in batch(), the collator
passes them on by name, the model gathers them once (whichever path built the structure) and hands them to its
family's hooks; the backbone's structure carries none of them.

The family here is written in this module only: a TG grammar whose batch also marks the words (a family input), reads
a weight per action beside the ids (an action input) and counts the marks on the host (a host input), and a model
class whose hook adds a learned vector at the marked positions, scaled by the word's weight.
"""

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from hf_slm.families.action_vocab import ActionVocabulary
from hf_slm.data.collator import SyntacticDataCollator
from hf_slm.modeling.backbone import PositionStructure
from hf_slm.modeling.transformer_grammar_config import TransformerGrammarConfig
from hf_slm.modeling.grammars import PositionKind
from hf_slm.modeling.transformer_grammar_model import TransformerGrammarForCausalLM, TransformerGrammarModel
from hf_slm.modeling.transformer_grammars import TransformerGrammarRules

VOCAB = ActionVocabulary(["a", "b", "c"], ["S", "NP"])
TREES = ["(S a (NP b c NP) S)", "(S (NP c NP) S)", "(S b S)"]


class MarkedWordsRules(TransformerGrammarRules):
    """TG, with each word's position marked by the weight its action carries (`word_weights`, one int per action)."""

    name = "tg_marked"
    action_inputs = {"word_weights": "weights"}
    family_inputs = ("word_marks",)
    host_input_names = ("mark_count",)
    rows_class = None

    def batch(self, sequences, weights=None, **options):
        if weights is None:
            raise ValueError("the tg_marked grammar needs weights")
        batch = super().batch(sequences, **options)
        marks = np.zeros(batch["input_ids"].shape, dtype=np.float32)
        for row, row_weights in enumerate(weights):
            expansion = batch["expansion_index"][row]
            is_word = batch["position_kinds"][row] == PositionKind.TERMINAL
            marks[row] = np.where(is_word, np.asarray(row_weights, dtype=np.float32)[expansion], 0.0)
        batch["word_marks"] = marks
        return batch

    def host_inputs(self, batch):
        return {"mark_count": int((batch["word_marks"] != 0).sum())}


class MarkedWordsConfig(TransformerGrammarConfig):
    grammar_classes = {"tg_marked": MarkedWordsRules}

    def __init__(self, **kwargs):  # an explicit __init__: transformers would otherwise generate a dataclass one
        super().__init__(**kwargs)


class MarkedWordsModel(TransformerGrammarModel):
    config_class = MarkedWordsConfig
    seen = []  # the family inputs each forward call's hooks received

    def build_family_modules(self, config):
        self.mark = torch.nn.Parameter(torch.randn(config.hidden_size))

    def family_embeddings(self, expanded):
        MarkedWordsModel.seen.append(dict(expanded.family_inputs))
        return expanded.family_inputs["word_marks"][..., None] * self.mark, None


class MarkedWordsForCausalLM(TransformerGrammarForCausalLM):
    config_class = MarkedWordsConfig
    base_model_class = MarkedWordsModel


def model_and_features():
    torch.manual_seed(0)
    config = MarkedWordsConfig(grammar="tg_marked", vocab_size=VOCAB.layout.size, hidden_size=16, num_hidden_layers=2,
                               num_attention_heads=2, intermediate_size=32, **VOCAB.layout.to_dict())
    model = MarkedWordsForCausalLM(config).eval()
    ids = [VOCAB.encode(tree.split()) for tree in TREES]
    features = [{"input_ids": row, "word_weights": [i % 3 + 1 for i in range(len(row))]} for row in ids]
    return model, features


def test_the_family_inputs_travel_from_the_grammar_through_the_collator_to_the_hooks():
    model, features = model_and_features()
    collated = SyntacticDataCollator(model.grammar, VOCAB.layout)(features)
    assert collated["word_marks"].shape == collated["position_kinds"].shape  # family input, from batch()
    assert collated["word_weights"].shape == collated["input_ids"].shape  # action input, padded with -1
    assert collated["word_weights"][2, -1] == -1
    assert isinstance(collated["mark_count"], int) and collated["mark_count"] == int((collated["word_marks"] != 0).sum())
    MarkedWordsModel.seen.clear()
    with torch.no_grad():
        precomputed = model(**collated).logits
        host = model(input_ids=collated["input_ids"], attention_mask=collated["attention_mask"],
                     word_weights=collated["word_weights"]).logits
    fast, slow = MarkedWordsModel.seen
    assert set(fast) == {"word_weights", "word_marks", "mark_count"} and set(slow) == {"word_weights", "word_marks"}
    assert torch.equal(fast["word_marks"], slow["word_marks"])  # the same mapping, whichever path
    real = collated["attention_mask"].bool()
    assert torch.allclose(precomputed[real], host[real], atol=1e-5)
    with torch.no_grad():  # the hook's input reaches the outputs
        collated["word_marks"] = collated["word_marks"] * 2
        assert not torch.allclose(model(**collated).logits[real], precomputed[real], atol=1e-3)


def test_family_inputs_are_checked_by_name():
    model, features = model_and_features()
    collated = SyntacticDataCollator(model.grammar, VOCAB.layout)(features)
    with pytest.raises(ValueError, match=r"needs \['word_marks'\] with the precomputed structure"):
        model(**{name: value for name, value in collated.items() if name != "word_marks"})
    with pytest.raises(TypeError, match=r"unexpected inputs \['word_sizes'\]"):
        model(**collated, word_sizes=collated["word_weights"])
    with pytest.raises(ValueError, match=r"word_weights has shape \(3, 2\); expected that of input_ids"):
        model(input_ids=collated["input_ids"], word_weights=collated["word_weights"][:, :2])
    with pytest.raises(ValueError, match="feature 1 has no word_weights: the tg_marked grammar reads it"):
        SyntacticDataCollator(model.grammar, VOCAB.layout)([features[0], {"input_ids": features[1]["input_ids"]}])


def test_the_backbone_structure_carries_no_family_input():
    fields = {field.name for field in dataclasses.fields(PositionStructure)}
    assert fields == {"mask", "coordinates", "positions", "kinds", "min_position", "implementation",
                      "relative_positions", "relative_affine", "segmented", "coordinate_bound", "position_bound"}


# What paper 002's and 003's families pass (their grammars' family inputs), and the modules that carry them
# without knowing them.
FAMILY_NAMES = {"head_token_index", "head_slots", "composition_children", "composition_level", "composition_schedule",
                "composition_schedule_levels", "constituent_starts", "start_candidates", "composer", "start_pointer",
                "final_heads"}
ROOT = Path(__file__).resolve().parent.parent
GENERIC_MODULES = (
    "hf_slm/data/collator.py", "modeling/modeling_slm.py", "modeling/backbone.py", "modeling/search_decoders.py",
    "modeling/hypothesis_rows.py",
)


def _names_in_code(path):
    """The identifiers, attribute names and string constants of a module, docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, (ast.arg, ast.keyword)) and node.arg:  # parameters and keyword arguments
            names.add(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            names.update(node.value.replace("`", " ").replace(",", " ").split())
    return names


@pytest.mark.parametrize("module", GENERIC_MODULES)
def test_the_generic_modules_pass_family_inputs_without_naming_them(module):
    assert _names_in_code(ROOT / module) & FAMILY_NAMES == set()


def test_the_check_sees_a_family_name_in_code(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('"""composer in a docstring is fine."""\n\ndef f(batch):\n    return batch["start_candidates"]\n')
    assert _names_in_code(sample) & FAMILY_NAMES == {"start_candidates"}
