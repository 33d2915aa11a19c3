"""The data collator: padded model inputs for a batch of action sequences, computed on the fly.

Datasets store only the (unexpanded) action ids of each tree; the grammar expands them and derives the
[T', T'] attention mask and relative positions per batch, so nothing quadratic is ever stored.
"""

import numpy as np
import torch

from .modeling.grammars import ActionLayout, get_grammar


class SyntacticDataCollator:
    """Collate `{"input_ids": [<s>, actions...]}` features into TG / TXL (CC) / TXL (terminals) inputs.

    Returns a dict of tensors:
        input_ids           [B, T'] long, expanded ids padded with the pad id
        attention_mask      [B, T', T'] bool, row i = positions i may attend (padding columns masked;
                            a padding row attends only itself so no softmax row is empty)
        relative_positions  [B, T', T'] long, 0 where not attended (left out with return_relative_positions=False)
        position_coordinates [B, T'] long, c with relative_positions[b, i, j] = c[b, i] - c[b, j] wherever
                            attended (TG: tree depth; causal grammars: the position). The model's fast
                            attention path needs only these.
        labels              [B, T'] long, -100 on COMPOSE copies, the last position and padding

    Works as `data_collator` of transformers.Trainer. Features may be dicts with "input_ids" (other keys,
    such as a tokenizer's 1-D attention_mask, are ignored) or plain lists of ids.

    Args:
        grammar: "tg", "choe_charniak" or "terminals".
        layout: an ActionLayout or a dict of its fields (`tokenizer.action_layout`).
        max_length: raise ValueError when an expanded sequence is longer (nothing is truncated).
        pad_to_multiple_of: round the padded length up.
        validate: check every sequence against the grammar (a clear error instead of a silent bad mask).
        return_relative_positions: include the [B, T', T'] matrix (training needs only the coordinates).
        document_level: each sequence is a document, several trees after one `<s>`
            (`tokenizer.encode_document`); the model's config must say document_level=True too.
    """

    def __init__(self, grammar, layout, max_length=None, pad_to_multiple_of=None, validate=True,
                 return_relative_positions=True, document_level=False):
        if isinstance(layout, dict):
            layout = ActionLayout(**layout)
        self.grammar = get_grammar(grammar, layout, document_level) if isinstance(grammar, str) else grammar
        self.max_length = max_length
        self.pad_to_multiple_of = pad_to_multiple_of
        self.validate = validate
        self.return_relative_positions = return_relative_positions

    @classmethod
    def from_tokenizer(cls, tokenizer, grammar="tg", **kwargs):
        return cls(grammar, tokenizer.action_layout, **kwargs)

    def __call__(self, features):
        sequences = [f["input_ids"] if isinstance(f, dict) else f for f in features]
        # Tokenizers may hand back right-padded rows; trailing padding is not part of a sequence (padding
        # anywhere else is left for the grammar to reject).
        pad = self.grammar.layout.pad_token_id
        sequences = [_strip_trailing(np.asarray(s, dtype=np.int64), pad) for s in sequences]
        batch = self.grammar.batch(
            sequences,
            validate=self.validate,
            pad_to_multiple_of=self.pad_to_multiple_of,
            max_length=self.max_length,
        )
        features = {
            "input_ids": torch.from_numpy(batch["input_ids"]),
            "attention_mask": torch.from_numpy(batch["attention_mask"]),
            "position_coordinates": torch.from_numpy(batch["position_coordinates"]),
            "labels": torch.from_numpy(batch["labels"]),
        }
        if self.return_relative_positions:
            features["relative_positions"] = torch.from_numpy(batch["relative_positions"])
        return features


def _strip_trailing(ids, pad):
    end = len(ids)
    while end > 0 and ids[end - 1] == pad:
        end -= 1
    return ids[:end]
