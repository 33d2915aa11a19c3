"""Packing whole sentences into one row (paper 003, Appendix A; hf_slm/data/packing.py): for every compositional variant
and both GPT-2 baselines, a packed batch's loss summed over its tokens is its sentences' own, and each sentence's
logits (and Nb-Up's start log-probabilities) are those it has alone; the grouping cuts only between sentences; the
collator refuses documents and a model with unrestricted heads refuses packed rows."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import hf_slm
from hf_slm.data.collator import SyntacticDataCollator
from hf_slm.data.packing import pack_sentences, packed_dataset
from hf_slm.families import causal_lm_for_config, config_for_grammar, grammar_class
from hf_slm.modeling.compositional_config import COMPOSITIONAL_MODEL_VARIANTS
from hf_slm.tokenization.tokenization_compositional import CompositionalTokenizer

TREES = ["(ROOT (S (NP (DT the) (JJ blue) (NN bird)) (VP (VBZ sings)) (. .)))",
         "(ROOT (S (NP (DT a) (NN dog)) (VP (VBZ barks) (PP (IN at) (NP (DT the) (NN moon))))))",
         "(ROOT (S (VP (VB Write) (NP (DT an) (NN essay)) (ADVP (RB quickly)))))",
         "(ROOT (S (NP (PRP It)) (VP (VBD rained))))"]
MODELS = COMPOSITIONAL_MODEL_VARIANTS + ("gpt2-token", "gpt2-tree")
TINY_COMPOSER = dict(composer_hidden_size=8, composer_num_layers=2, composer_num_heads=2, composer_intermediate_size=16)


@pytest.fixture(scope="module")
def tokenizers():
    """One tokenizer per linearization (the variants of one share it)."""
    made = {}

    def tokenizer_for(grammar):
        linearization = grammar_class(grammar).linearization
        if linearization not in made:
            made[linearization] = CompositionalTokenizer.train(TREES, vocab_size=40, linearization=linearization)
        return made[linearization]

    return tokenizer_for


def _tiny(grammar, tokenizer, **fields):
    if "-ex-" in grammar:
        fields = dict(TINY_COMPOSER, **fields)
    config = config_for_grammar(grammar, vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=2,
                                num_attention_heads=2, intermediate_size=32, **tokenizer.action_layout, **fields)
    torch.manual_seed(0)
    return causal_lm_for_config(config).eval()


def _features(tokenizer):
    encoded = tokenizer([tokenizer.unlabel(tree) for tree in TREES])
    names = [name for name in ("input_ids", "constituent_starts") if name in encoded]
    return [{name: list(encoded[name][index]) for name in names} for index in range(len(TREES))]


def _summed(output, batch):
    """The loss summed over what it averages (the actions; Nb-Up's start loss over its `)` starts)."""
    targets = batch["labels"][:, 1:]
    actions = int((targets != -100).sum())
    if getattr(output, "start_loss", None) is None:
        return float(output.loss) * actions
    starts = int(((targets != -100) & (batch["constituent_starts"][:, 1:] >= 0)).sum())
    return float(output.lm_loss) * actions + float(output.start_loss) * starts


def _check_packed_equals_alone(model, grammar, layout, features):
    """Sentences 0, 1, 2 packed in one row, sentence 3 alone in another: the loss summed over the packed batch's
    tokens is the sentences' own, each sentence's logits (and start log-probabilities) those it has alone."""
    packed = [{name: features[0][name] + features[1][name] + features[2][name] for name in features[0]}, features[3]]
    packed_batch = SyntacticDataCollator(grammar, layout, packed=True)(packed)
    alone = SyntacticDataCollator(grammar, layout)
    with torch.no_grad():
        packed_output = model(**packed_batch)
        summed, column = 0.0, 0
        for index, feature in enumerate(features):
            batch = alone([feature])
            output = model(**batch)
            summed += _summed(output, batch)
            row, start = (0, column) if index < 3 else (1, 0)
            count = len(feature["input_ids"])
            # each action's distribution of the next action, but the last's (in a row it would predict the next `<s>`)
            torch.testing.assert_close(packed_output.logits[row, start : start + count - 1],
                                       output.logits[0, : count - 1], atol=1e-5, rtol=1e-5)
            if getattr(output, "start_log_probs", None) is not None:
                mine = packed_output.start_log_probs[row, start : start + count - 1, start : start + count]
                torch.testing.assert_close(mine, output.start_log_probs[0, : count - 1, :count], atol=1e-5, rtol=1e-5)
            column += count if index < 3 else 0
    assert _summed(packed_output, packed_batch) == pytest.approx(summed, abs=1e-5 * max(1.0, abs(summed)))
    assert int((packed_batch["labels"] != -100).sum()) < int(packed_batch["attention_mask"].sum())


@pytest.mark.parametrize("grammar", MODELS)
def test_a_packed_batch_is_its_sentences_alone(grammar, tokenizers):
    tokenizer = tokenizers(grammar)
    _check_packed_equals_alone(_tiny(grammar, tokenizer), grammar, tokenizer.action_layout, _features(tokenizer))


DEPENDENCY_TREES = ["There/2 is/0 a/4 difference/2", "The/2 cat/3 sleeps/0 ./3", "a/0 b/1 c/1", "Dogs/2 bark/0 loudly/2"]


@pytest.mark.parametrize("grammar", ["tg", "dtg", "dtg_eager"])
def test_other_families_pack_the_same_way(grammar):
    """TG (depth coordinates, relative positions) and DTG (head tokens: positions its grammar declares in
    input_references; arc-eager's explicit relative positions) pack through the same collator."""
    if grammar == "tg":
        tokenizer = hf_slm.SyntacticTokenizer.train(TREES, vocab_size=60)
        features = [{"input_ids": tokenizer(tree)["input_ids"]} for tree in TREES]
    else:
        from hf_slm.tokenization.tokenization_dependency import DependencyTokenizer

        system = {"dtg": "arc_standard", "dtg_eager": "arc_eager"}[grammar]
        tokenizer = DependencyTokenizer.train(DEPENDENCY_TREES, vocab_size=30, transition_system=system)
        features = [{"input_ids": tokenizer(tree)["input_ids"]} for tree in DEPENDENCY_TREES]
    config = config_for_grammar(grammar, vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=2,
                                num_attention_heads=2, intermediate_size=32, **tokenizer.action_layout)
    torch.manual_seed(0)
    _check_packed_equals_alone(causal_lm_for_config(config).eval(), grammar, tokenizer.action_layout, features)


def test_packed_rows_number_positions_from_each_sentence():
    tokenizer = CompositionalTokenizer.train(TREES, vocab_size=40, linearization="nb-dn")
    features = _features(tokenizer)
    row = {"input_ids": features[3]["input_ids"] + features[3]["input_ids"]}
    batch = SyntacticDataCollator("nb-dn-in-m", tokenizer.action_layout, packed=True)([row])
    alone = SyntacticDataCollator("nb-dn-in-m", tokenizer.action_layout)([features[3]])
    length = alone["position_kinds"].shape[1]
    assert batch["position_indices"][0].tolist() == list(range(length)) * 2
    mask = batch["position_mask"][0]
    assert not mask[length:, :length].any() and not mask[:length, length:].any()  # no attention across the boundary
    assert torch.equal(mask[length:, length:], alone["position_mask"][0])
    assert batch["labels"][0, len(features[3]["input_ids"])] == -100  # the second `<s>` is not predicted


def test_grouping_cuts_only_between_sentences():
    assert pack_sentences([3, 4, 2, 5, 1], budget=7) == [[0, 1], [2, 3], [4]]
    with pytest.raises(ValueError, match="example 1 expands to 9 positions, more than the 8"):
        pack_sentences([3, 9], budget=8)
    from datasets import Dataset

    data = Dataset.from_dict({"input_ids": [[1, 5], [1, 6, 7], [1, 8]], "constituent_starts": [[-1, -1], [-1, 0, 1],
                                                                                                 [-1, -1]]})
    packed = packed_dataset(data, [2, 3, 2], budget=5)
    assert packed["input_ids"] == [[1, 5, 1, 6, 7], [1, 8]]
    assert packed["constituent_starts"] == [[-1, -1, -1, 0, 1], [-1, -1]]


def test_packing_refuses_documents_and_unrestricted_heads(tokenizers):
    tokenizer = tokenizers("nb-dn-in-m")
    with pytest.raises(ValueError, match="document_level"):
        SyntacticDataCollator("nb-dn-in-m", tokenizer.action_layout, document_level=True, packed=True)
    model = _tiny("nb-dn-in-m", tokenizer, num_unrestricted_heads=1)
    features = _features(tokenizer)
    batch = SyntacticDataCollator("nb-dn-in-m", tokenizer.action_layout, packed=True)(
        [{"input_ids": features[0]["input_ids"] + features[1]["input_ids"]}])
    with pytest.raises(ValueError, match="unrestricted heads"):
        model(**batch)
    with pytest.raises(ValueError, match="not a packed|begins with the start action"):
        SyntacticDataCollator("nb-dn-in-m", tokenizer.action_layout, packed=True)(
            [{"input_ids": features[0]["input_ids"][1:]}])


def test_packed_rows_hold_the_sentences_of_every_row():
    """The collator's packed rows against numpy's own concatenation: input ids, and the action each position comes
    from, shifted by where its sentence starts."""
    tokenizer = CompositionalTokenizer.train(TREES, vocab_size=40, linearization="nb-up")
    features = _features(tokenizer)
    row = {name: features[1][name] + features[2][name] for name in features[1]}
    batch = SyntacticDataCollator("nb-up-ex-m", tokenizer.action_layout, packed=True)([row])
    assert batch["input_ids"][0].tolist() == row["input_ids"]
    first = len(features[1]["input_ids"])
    starts = np.array(row["constituent_starts"])
    expected = np.where((starts >= 0) & (np.arange(len(starts)) >= first), starts + first, starts)
    assert batch["constituent_starts"][0].tolist() == expected.tolist()


GUM = Path(__file__).resolve().parents[1] / "hf_slm" / "sample_data" / "gum" / "train.txt"
SMALL = [item for key, value in dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                                     composer_hidden_size=8, composer_num_layers=1, composer_num_heads=2,
                                     composer_intermediate_size=16).items() for item in ("--set", f"{key}={value}")]


def test_the_cli_trains_on_packed_sentences(tmp_path, capsys, one_thread):
    from hf_slm.cli import main

    trees = tmp_path / "train.txt"
    trees.write_text("\n".join(GUM.read_text().splitlines()[:40]) + "\n")
    run = tmp_path / "run"
    arguments = ["train", "--preset", "nb-up-ex-m-tiny", "--train", str(trees), "--output", str(run), "--max-steps",
                 "2", "--batch-size", "2", "--warmup-steps", "1", "--vocab-size", "200", "--pack-to", "400", *SMALL]
    assert main(arguments) == 0, capsys.readouterr().err
    record = json.loads((run / "training_setup.json").read_text())
    assert record["pack_to"] == 400 and record["steps_done"] == 2
    assert 1 < record["train_examples"] < 40  # packed sequences, each of several sentences
    assert "packing: 40 training sentences into" in capsys.readouterr().out
    # packing and segment recurrence exclude each other
    assert main(arguments[:-len(SMALL)] + ["--overwrite", "--segment-length", "64", *SMALL]) == 2
    assert "--pack-to 400: segment recurrence" in capsys.readouterr().err


def test_paper_003_presets_pack_to_their_cutoff():
    from hf_slm.families import presets

    assert presets()["nb-up-ex-m"]["training"]["pack_to"] == 2048
    assert presets()["gpt2-token"]["training"]["pack_to"] == 1024
    assert "pack_to" not in presets()["nb-up-ex-m-tiny"]["training"]  # the CPU twins train one sentence per row
