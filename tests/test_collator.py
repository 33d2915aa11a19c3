"""The data collator: shapes, agreement with the grammar, padding, errors, and use inside Trainer."""

import pytest
import torch

from hf_slm.action_vocab import ActionVocabulary
from hf_slm.collator import SyntacticDataCollator
from hf_slm.modeling.configuration_slm import config_for_grammar
from hf_slm.modeling.grammars import PositionKind
from hf_slm.modeling.modeling_slm import causal_lm_for_config

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
    for key in a:
        assert torch.equal(a[key], b[key])


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
    seen = []
    model.register_forward_pre_hook(lambda module, args, kwargs: seen.append(set(kwargs)), with_kwargs=True)
    args = TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=4, num_train_epochs=10, learning_rate=1e-2,
        logging_steps=100, save_strategy="no", report_to=[], disable_tqdm=True, use_cpu=True,
    )
    Trainer(model=model, args=args, train_dataset=dataset, data_collator=collator).train()
    expected_inputs = {"input_ids", "attention_mask", "labels", "expansion_index", "position_mask",
                       "position_coordinates", "position_kinds", "prediction_index"}
    assert len(seen) == 80 and all(expected_inputs <= keys for keys in seen)
    model.eval()
    with torch.no_grad():
        after = float(model(**collator(FEATURES)).loss)
    assert after < before * 0.7
