"""The data collator: padded model inputs for a batch of action sequences, computed on the fly.

Datasets store only the (unexpanded) action ids of each tree; the grammar expands them and derives the
[T', T'] attention mask and relative positions per batch, so nothing quadratic is ever stored.
"""

import numpy as np
import torch

from .modeling.composer import composition_schedule
from .families import grammar_class
from .modeling.modeling_slm import coordinate_count


class SyntacticDataCollator:
    """Collate `{"input_ids": [<s>, actions...]}` features into model inputs, with the grammar's structure
    precomputed (the fast training path; the model computes the same itself from input_ids alone).

    Returns a dict of tensors, T = the longest action sequence, T' = the longest expanded one:
        input_ids            [B, T] long, action ids, right-padded with the pad id
        attention_mask       [B, T] long, 1 for real actions (the tokenizer's padding mask)
        labels               [B, T] long, = input_ids with -100 on padding (the model shifts them); a
                             feature's own "labels" (one per action, -100 for actions not trained, e.g. a
                             summarization example's document: hf_slm/summarization.py) replace input_ids
        expansion_index      [B, T'] long, the action each expanded position comes from
        position_mask        [B, T', T'] bool, row i = positions i may attend (padding columns masked;
                             a padding row attends only itself so no softmax row is empty)
        position_coordinates [B, T'] long, c with relative position c[i] - c[j] wherever attended (TG: tree
                             depth; causal grammars: the position)
        position_kinds       [B, T'] long, PositionKind (COMPOSE copies, padding...)
        prediction_index     [B, T] long, the position whose output predicts action t + 1
        num_coordinate_values a plain Python int, not a tensor (with host_counts): 1 + the largest of
                             position_coordinates less the smallest (taken as at most 0), the width of the
                             factorized attention's one-hot key block, counted here on the host so that the model
                             does not read it back from the device (a sync) in every training step.
                             transformers.Trainer and DistributedDataParallel hand a non-tensor to forward untouched.
    and, for a dependency grammar (DTG), whose arcs add their head word's embedding and whose COMPOSE rows have
    relative positions that are no coordinate differences:
        head_token_index     [B, T'] long, the position whose token embedding an arc position adds, -1 none
        position_relative_positions [B, T', T'] long, R wherever attended; left out where the model derives R
                             from coordinates and kinds (arc-standard DTG: grammar.relative_affine_by_kind)
    and, for a grammar with external composition (paper 003's Ex variants), whose `)` positions input the
    composer's output over their children:
        composition_children [B, T', T'] bool, row t of a `)` position marks its direct children's positions
        composition_level    [B, T'] long, 0 for a token, 1 + its highest child's for a `)`, -1 otherwise
        composition_schedule [S] long and composition_schedule_levels (a list of [4] Python ints per tree level;
                             with host_counts):
                             the composer's order, pairs and sizes per level (modeling/composer.py,
                             composition_schedule), counted here on the host so that the model does not read
                             them back from the device
    and, for a grammar whose `)` points at its start (paper 003's Nb-Up variants; each feature then carries the
    tokenizer's "constituent_starts", one per action):
        constituent_starts   [B, T] long, the start (action index, `<s>` = 0) of each `)`, -1 elsewhere: the
                             start pointer's targets
        start_candidates     [B, T', T'] bool, per predicting position the positions of the feasible starts C_k

    Works as `data_collator` of transformers.Trainer. Features may be dicts with "input_ids" (other keys,
    such as a tokenizer's attention_mask, are ignored) or plain lists of ids.

    Args:
        grammar: a grammar name ("tg", "choe_charniak", "terminals", "dtg", "dtg_eager", "dtg_swift") or a
            grammar object.
        layout: an ActionLayout (a DependencyLayout for the dependency grammars) or a dict of its fields
            (`tokenizer.action_layout`).
        max_length: raise ValueError when an expanded sequence is longer (nothing is truncated).
        pad_to_multiple_of: round the padded expanded length up.
        validate: check every sequence against the grammar (a clear error instead of a silent bad mask).
        document_level: each sequence is a document, several trees after one `<s>`
            (`tokenizer.encode_document`); the model's config must say document_level=True too.
        host_counts: add num_coordinate_values and (Ex grammars) the composition schedule, the sizes that the
            model would otherwise read back from the device (a sync per training step off the CPU). False leaves
            them out, for a model whose code predates them (a checkpoint's hub code saved before they existed
            rejects unknown inputs).
        grammar_options: further options of the grammar (a dependency grammar's `variant`).
    """

    def __init__(self, grammar, layout, max_length=None, pad_to_multiple_of=None, validate=True, document_level=False,
                 host_counts=True, **grammar_options):
        if isinstance(grammar, str):
            rules = grammar_class(grammar)
            if isinstance(layout, dict):
                layout = rules.layout_class(**layout)
            grammar = rules(layout, document_level=document_level, **grammar_options)
        self.grammar = grammar
        self.max_length = max_length
        self.pad_to_multiple_of = pad_to_multiple_of
        self.validate = validate
        self.host_counts = host_counts

    @classmethod
    def from_tokenizer(cls, tokenizer, grammar="tg", **kwargs):
        return cls(grammar, tokenizer.action_layout, **kwargs)

    def __call__(self, features):
        sequences = [f["input_ids"] if isinstance(f, dict) else f for f in features]
        # Tokenizers may hand back right-padded rows; trailing padding is not part of a sequence (padding
        # anywhere else is left for the grammar to reject).
        pad = self.grammar.layout.pad_token_id
        sequences = [_strip_trailing(np.asarray(s, dtype=np.int64), pad) for s in sequences]
        given_labels = _given_labels(features, sequences)
        starts = _given_starts(features, sequences) if self.grammar.takes_start else None
        # Explicit R only where the model cannot derive it from coordinates and kinds (DTG-eager, -swift, the
        # reference variant): it is the largest array of the batch.
        explicit = self.grammar.needs_explicit_relative_positions
        batch = self.grammar.batch(
            sequences,
            validate=self.validate,
            pad_to_multiple_of=self.pad_to_multiple_of,
            max_length=self.max_length,
            with_relative_positions=explicit,
            **({} if starts is None else {"starts": starts}),
        )
        lengths = batch["action_lengths"]
        width = int(lengths.max())
        real = np.arange(width)[None, :] < lengths[:, None]
        input_ids = np.full((len(sequences), width), pad, dtype=np.int64)
        input_ids[real] = np.concatenate(sequences)
        collated = {
            "input_ids": torch.from_numpy(input_ids),
            "attention_mask": torch.from_numpy(real.astype(np.int64)),
            "labels": torch.from_numpy(np.where(real, input_ids if given_labels is None else given_labels, -100)),
            "expansion_index": torch.from_numpy(batch["expansion_index"]),
            "position_mask": torch.from_numpy(batch["attention_mask"]),
            "position_coordinates": torch.from_numpy(batch["position_coordinates"]),
            "position_kinds": torch.from_numpy(batch["position_kinds"].astype(np.int64)),
            "prediction_index": torch.from_numpy(batch["prediction_index"]),
        }
        if self.host_counts:
            collated["num_coordinate_values"] = coordinate_count(batch["position_coordinates"])
        if explicit:
            collated["position_relative_positions"] = torch.from_numpy(batch["relative_positions"])
        if "head_token_index" in batch:
            collated["head_token_index"] = torch.from_numpy(batch["head_token_index"])
        if "composition_children" in batch:  # Ex: what the composer reads, bottom-up by level
            collated["composition_children"] = torch.from_numpy(batch["composition_children"])
            collated["composition_level"] = torch.from_numpy(batch["composition_level"])
            if self.host_counts:
                indices, levels = composition_schedule(batch["composition_children"], batch["composition_level"])
                collated["composition_schedule"] = torch.from_numpy(indices)
                collated["composition_schedule_levels"] = levels
        if starts is not None:  # Nb-Up: the pointer's targets and candidates
            padded_starts = np.full((len(sequences), width), -1, dtype=np.int64)
            padded_starts[real] = np.concatenate(starts)
            collated["constituent_starts"] = torch.from_numpy(padded_starts)
            collated["start_candidates"] = torch.from_numpy(batch["start_candidates"])
        return collated


def _given_starts(features, sequences):
    """Per sequence, the features' "constituent_starts" (a Nb-Up tokenizer's output), cut to the sequence; a
    feature without them is a ValueError (a Nb-Up `)` cannot be expanded without its start)."""
    starts = []
    for row, (feature, sequence) in enumerate(zip(features, sequences)):
        given = feature.get("constituent_starts") if isinstance(feature, dict) else None
        if given is None:
            raise ValueError(f"feature {row} has no constituent_starts: a Nb-Up grammar's `)` needs its start (paper "
                             "003, section 2.2); keep the tokenizer's constituent_starts beside input_ids")
        given = np.asarray(given, dtype=np.int64)
        if len(given) < len(sequence):
            raise ValueError(f"feature {row}: {len(given)} constituent_starts for {len(sequence)} actions; expected "
                             "one per action (-1 where there is none)")
        starts.append(given[: len(sequence)])
    return starts


def _given_labels(features, sequences):
    """[B, T] labels from the features' own "labels" (padding columns -100), or None when no feature has any.
    Features either all carry labels or none do; each feature's labels match its input_ids in length (before
    trailing padding is stripped, which strips their ends with it)."""
    has = [isinstance(f, dict) and f.get("labels") is not None for f in features]
    if not any(has):
        return None
    if not all(has):
        raise ValueError("some features carry labels and others do not; expected labels for all or for none")
    width = max(len(s) for s in sequences)
    labels = np.full((len(sequences), width), -100, dtype=np.int64)
    for row, (feature, sequence) in enumerate(zip(features, sequences)):
        given = np.asarray(feature["labels"], dtype=np.int64)
        if len(given) != len(feature["input_ids"]):
            raise ValueError(f"feature {row}: {len(given)} labels for {len(feature['input_ids'])} input_ids; expected "
                             "one label per action")
        labels[row, : len(sequence)] = given[: len(sequence)]
    return labels


def _strip_trailing(ids, pad):
    end = len(ids)
    while end > 0 and ids[end - 1] == pad:
        end -= 1
    return ids[:end]


def takes_host_counts(model):
    """Whether `model`'s forward takes the collator's host counts (num_coordinate_values, the composition
    schedule): a checkpoint saved before they existed carries modeling code that refuses unknown inputs, so its
    collator leaves them out (host_counts=False) and the model reads them from the device as it did."""
    import inspect

    inner = getattr(model, "model", model)
    return "num_coordinate_values" in inspect.signature(inner.forward).parameters
