"""The data collator: shapes, agreement with the grammar, padding, errors, and use inside Trainer."""

import pytest
import torch

from hf_slm.families.action_vocab import ActionVocabulary
from hf_slm.data.collator import SyntacticDataCollator
from hf_slm.families import config_for_grammar
from hf_slm.modeling.grammars import PositionKind
from hf_slm.families import causal_lm_for_config

TREES = [
    "(S (NP the blue bird NP) (VP sings VP) S)",
    "(S (NP a dog NP) (VP barks (PP at (NP the moon NP) PP) VP) S)",
    "(S (VP go VP) S)",
    "(NP the end NP)",
]
VOCAB = ActionVocabulary.from_action_sequences([t.split() for t in TREES])
FEATURES = [{"input_ids": VOCAB.encode(t.split())} for t in TREES]


def test_collator_output_for_a_tree_derived_by_hand():
    """(S (NP a NP) S) and (NP a NP) under TG, worked out from Algorithm 1 of paper 000 by hand."""
    vocab = ActionVocabulary.from_action_sequences([["(S", "(NP", "a", "NP)", "S)"]])
    long, short = vocab.encode("(S (NP a NP) S)".split()), vocab.encode("(NP a NP)".split())
    batch = SyntacticDataCollator("tg", vocab.layout)([long, short])
    pad = vocab.layout.pad_token_id
    assert batch["input_ids"].tolist() == [long, short + [pad, pad]]
    assert batch["attention_mask"].tolist() == [[1] * 6, [1] * 4 + [0, 0]]
    assert batch["labels"].tolist() == [long, short + [-100, -100]]  # shifted by the model, not here
    # positions: <s> (S (NP a NP)compose NP)stack S)compose S)stack
    assert batch["expansion_index"][0].tolist() == [0, 1, 2, 3, 4, 4, 5, 5]
    assert batch["prediction_index"][0].tolist() == [0, 1, 2, 3, 5, 7]  # a closing NT predicts from its STACK copy
    assert batch["position_coordinates"][0].tolist() == [0, 1, 2, 3, 2, 2, 1, 1]  # depths
    # depths 0 to 3, counted on the host: a plain int, so that the model need not read it back from the device
    assert batch["num_coordinate_values"] == 4 and type(batch["num_coordinate_values"]) is int
    K = PositionKind
    assert batch["position_kinds"][0].tolist() == [K.BOS, K.OPEN_NT, K.OPEN_NT, K.TERMINAL, K.CLOSE_COMPOSE,
                                                   K.CLOSE_STACK, K.CLOSE_COMPOSE, K.CLOSE_STACK]
    attends = [[0], [0, 1], [0, 1, 2], [0, 1, 2, 3],
               [2, 3, 4],  # COMPOSE: the opening NT, its child, itself
               [0, 1, 4, 5],  # STACK: the stack after composing, and itself
               [1, 4, 6], [0, 6, 7]]
    assert [row.nonzero()[:, 0].tolist() for row in batch["position_mask"][0]] == attends
    # The short row: (NP a NP) at depths 1..2, then two padding positions that attend only themselves.
    assert batch["expansion_index"][1, :5].tolist() == [0, 1, 2, 3, 3]
    assert batch["prediction_index"][1].tolist() == [0, 1, 2, 4, 0, 0]
    assert [row.nonzero()[:, 0].tolist() for row in batch["position_mask"][1]] == [
        [0], [0, 1], [0, 1, 2], [1, 2, 3], [0, 3, 4], [5], [6], [7]]
    assert batch["position_kinds"][1, 5:].tolist() == [K.PAD] * 3


def test_causal_grammar_collates_one_position_per_action():
    batch = SyntacticDataCollator("choe_charniak", VOCAB.layout)(FEATURES)
    lengths = [len(f["input_ids"]) for f in FEATURES]
    width = max(lengths)
    assert batch["position_mask"].shape == (4, width, width)
    for row, n in enumerate(lengths):
        assert batch["expansion_index"][row, :n].tolist() == list(range(n))
        assert batch["prediction_index"][row, :n].tolist() == list(range(n))
        assert torch.equal(batch["position_mask"][row, :n, :n], torch.tril(torch.ones(n, n, dtype=torch.bool)))
        assert batch["position_coordinates"][row, :n].tolist() == list(range(n))


def test_tokenizer_padding_is_removed_and_plain_lists_accepted():
    collator = SyntacticDataCollator("tg", VOCAB.layout)
    padded = [f["input_ids"] + [VOCAB.layout.pad_token_id] * 5 for f in FEATURES]
    a, b = collator(padded), collator(FEATURES)
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]) if torch.is_tensor(a[key]) else a[key] == b[key]


def test_host_counts_can_be_left_out_for_a_model_whose_code_predates_them():
    """host_counts=False gives the batch without num_coordinate_values (which a checkpoint's older hub code would
    reject); the model then counts the coordinates itself, with the same loss."""
    with_counts = SyntacticDataCollator("tg", VOCAB.layout)(FEATURES)
    without = SyntacticDataCollator("tg", VOCAB.layout, host_counts=False)(FEATURES)
    assert set(with_counts) - set(without) == {"num_coordinate_values"}
    model = tiny_tg()
    with torch.no_grad():
        assert torch.equal(model(**with_counts).loss, model(**without).loss)


def test_collator_errors():
    collator = SyntacticDataCollator("tg", VOCAB.layout, max_length=10)
    with pytest.raises(ValueError, match="sequence 0 expands to 14 positions .* maximum is 10"):
        collator(FEATURES[:1])
    bad = VOCAB.encode("(S (NP the bird VP) S)".split())
    with pytest.raises(ValueError, match="sequence 1: .*wrong label"):
        SyntacticDataCollator("tg", VOCAB.layout)([FEATURES[0], {"input_ids": bad}])


def test_pad_to_multiple_of():
    model = tiny_tg()
    plain = SyntacticDataCollator("tg", VOCAB.layout)(FEATURES)
    padded = SyntacticDataCollator("tg", VOCAB.layout, pad_to_multiple_of=16)(FEATURES)
    assert plain["position_mask"].shape[1] % 16 != 0  # the padding below is not there by chance
    assert padded["position_mask"].shape[1] % 16 == 0 and padded["expansion_index"].shape[1] % 16 == 0
    with torch.no_grad():
        assert torch.allclose(model(**padded).logits, model(**plain).logits, atol=1e-5)


def tiny_tg(seed=0):
    config = config_for_grammar("tg", vocab_size=len(VOCAB.tokens), hidden_size=32, num_hidden_layers=2,
                                num_attention_heads=2, intermediate_size=64, **VOCAB.layout.to_dict())
    torch.manual_seed(seed)
    return causal_lm_for_config(config).eval()


def test_works_as_trainer_data_collator(tmp_path):
    """Trainer drives the real TG model on the collator's batches: every precomputed input reaches forward
    (Trainer drops nothing), and the loss falls."""
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    dataset = Dataset.from_dict({"input_ids": [f["input_ids"] for f in FEATURES] * 8})
    model = tiny_tg()
    collator = SyntacticDataCollator("tg", VOCAB.layout)
    with torch.no_grad():
        before = float(model(**collator(FEATURES)).loss)
    seen, counts = [], []

    def record(module, args, kwargs):
        seen.append(set(kwargs))
        counts.append(kwargs.get("num_coordinate_values"))

    model.register_forward_pre_hook(record, with_kwargs=True)
    args = TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=4, num_train_epochs=10, learning_rate=1e-2,
        logging_steps=100, save_strategy="no", report_to=[], disable_tqdm=True, use_cpu=True,
    )
    Trainer(model=model, args=args, train_dataset=dataset, data_collator=collator).train()
    expected_inputs = {"input_ids", "attention_mask", "labels", "expansion_index", "position_mask",
                       "position_coordinates", "position_kinds", "prediction_index", "num_coordinate_values"}
    assert len(seen) == 80 and all(expected_inputs <= keys for keys in seen)
    assert all(type(count) is int and count > 1 for count in counts)  # the host's count, not moved to a tensor
    model.eval()
    with torch.no_grad():
        after = float(model(**collator(FEATURES)).loss)
    assert after < before * 0.7


def test_a_model_without_host_counts_gets_a_collator_without_them():
    """A checkpoint saved before the host counts carries modeling code that refuses unknown inputs: its collator
    (scoring.collator_for, hf-slm train / finetune) leaves them out; today's models take them."""
    import torch.nn as nn

    from hf_slm.data.collator import takes_host_counts
    from hf_slm.search.scoring import collator_for

    config = config_for_grammar("tg", vocab_size=20, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                intermediate_size=32)
    model = causal_lm_for_config(config)
    assert takes_host_counts(model) and collator_for(model).host_counts

    class OldInner(nn.Module):
        def forward(self, input_ids=None, attention_mask=None, position_coordinates=None, **unused):
            raise AssertionError("not called")

    model.model = OldInner()
    assert not takes_host_counts(model) and not collator_for(model).host_counts
