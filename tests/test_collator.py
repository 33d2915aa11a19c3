"""The data collator: shapes, agreement with the grammar, padding, errors, and use inside Trainer."""

import pytest
import torch

from hf_slm.action_vocab import ActionVocabulary
from hf_slm.collator import SyntacticDataCollator
from hf_slm.modeling.grammars import get_grammar

TREES = [
    "(S (NP the blue bird NP) (VP sings VP) S)",
    "(S (NP a dog NP) (VP barks (PP at (NP the moon NP) PP) VP) S)",
    "(S (VP go VP) S)",
    "(NP the end NP)",
]
VOCAB = ActionVocabulary.from_action_sequences([t.split() for t in TREES])
FEATURES = [{"input_ids": VOCAB.encode(t.split())} for t in TREES]


@pytest.mark.parametrize("grammar", ["tg", "choe_charniak"])
def test_collator_matches_grammar_per_sequence(grammar):
    collator = SyntacticDataCollator(grammar, VOCAB.layout.to_dict())
    batch = collator(FEATURES)
    assert set(batch) == {"input_ids", "attention_mask", "relative_positions", "position_coordinates", "labels"}
    width = batch["input_ids"].shape[1]
    assert batch["attention_mask"].shape == (4, width, width) and batch["attention_mask"].dtype == torch.bool
    assert batch["relative_positions"].dtype == torch.long and batch["labels"].dtype == torch.long
    rules = get_grammar(grammar, VOCAB.layout)
    for row, feature in enumerate(FEATURES):
        seq = rules.sequence(feature["input_ids"])
        n = len(seq.input_ids)
        assert batch["input_ids"][row, :n].tolist() == seq.input_ids.tolist()
        assert (batch["attention_mask"][row, :n, :n].numpy() == seq.attention_mask).all()
        assert (batch["relative_positions"][row, :n, :n].numpy() == seq.relative_positions).all()
        assert batch["labels"][row, :n].tolist() == seq.labels.tolist()
        coordinates = batch["position_coordinates"][row, :n]
        attended = batch["attention_mask"][row, :n, :n]
        implied = coordinates[:, None] - coordinates[None, :]
        assert torch.equal(batch["relative_positions"][row, :n, :n][attended], implied[attended])
        assert (batch["labels"][row, n:] == -100).all()
        assert (batch["input_ids"][row, n:] == VOCAB.layout.pad_token_id).all()


def test_compose_copies_predict_nothing():
    batch = SyntacticDataCollator("tg", VOCAB.layout)(FEATURES[:1])
    tokens = VOCAB.decode(batch["input_ids"][0].tolist())
    labels = batch["labels"][0].tolist()
    # Each closing NT appears twice: the first copy (COMPOSE) has no label.
    for i, token in enumerate(tokens[:-1]):
        if token.endswith(")") and tokens[i + 1] == token:
            assert labels[i] == -100
            assert labels[i + 1] != -100 or i + 1 == len(tokens) - 1


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
    batch = SyntacticDataCollator("tg", VOCAB.layout, pad_to_multiple_of=16)(FEATURES)
    assert batch["input_ids"].shape[1] % 16 == 0


class TinyMaskedLM(torch.nn.Module):
    """One attention layer that uses the collator's mask and relative positions, to drive Trainer."""

    def __init__(self, vocab_size, dim=32):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab_size, dim)
        self.relpos = torch.nn.Embedding(64, 1)
        self.attn = torch.nn.MultiheadAttention(dim, 2, batch_first=True)
        self.head = torch.nn.Linear(dim, vocab_size)
        self.seen = []

    def forward(self, input_ids, attention_mask, relative_positions, position_coordinates, labels):
        self.seen.append((tuple(input_ids.shape), tuple(attention_mask.shape), tuple(relative_positions.shape)))
        h = self.embed(input_ids)
        bias = self.relpos(relative_positions.clamp(-1, 62) + 1).squeeze(-1)
        bias = bias.masked_fill(~attention_mask, float("-inf"))
        bias = bias.repeat_interleave(2, dim=0)  # one copy per head
        h = h + self.attn(h, h, h, attn_mask=bias)[0]
        logits = self.head(h)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
        return {"loss": loss, "logits": logits}


def test_works_as_trainer_data_collator(tmp_path):
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    torch.manual_seed(0)
    dataset = Dataset.from_dict({"input_ids": [f["input_ids"] for f in FEATURES] * 8})
    model = TinyMaskedLM(len(VOCAB.tokens))
    collator = SyntacticDataCollator("tg", VOCAB.layout)
    with torch.no_grad():
        before = float(model(**collator(FEATURES))["loss"])
    model.seen.clear()
    args = TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=4, num_train_epochs=10, learning_rate=1e-2,
        logging_steps=100, save_strategy="no", report_to=[], disable_tqdm=True, use_cpu=True,
    )
    Trainer(model=model, args=args, train_dataset=dataset, data_collator=collator).train()
    assert model.seen and all(len(set(shapes[0])) <= 2 for shapes in model.seen)
    batch_shape, mask_shape, relpos_shape = model.seen[0]
    assert mask_shape == relpos_shape == (batch_shape[0], batch_shape[1], batch_shape[1])
    with torch.no_grad():
        after = float(model(**collator(FEATURES))["loss"])
    assert after < before * 0.7
