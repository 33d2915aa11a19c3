"""The data collator: padded model inputs for a batch of action sequences, computed on the fly.

Datasets store only the (unexpanded) action ids of each tree; the grammar expands them and derives the
[T', T'] attention mask and relative positions per batch, so nothing quadratic is ever stored. What a family's
grammar needs beyond that (its family inputs: the modeling.grammar_protocol capabilities `action_inputs`,
`family_inputs`, `host_input_names`) passes through by name: this module knows no family.
"""

import numpy as np
import torch

from ..families import grammar_class
from ..modeling.modeling_slm import coordinate_count
from .packing import pack_structure, packed_action_values, sentence_bounds


class SyntacticDataCollator:
    """Collate `{"input_ids": [<s>, actions...]}` features into model inputs, with the grammar's structure
    precomputed (the fast training path; the model computes the same itself from input_ids alone).

    Returns a dict of tensors, T = the longest action sequence, T' = the longest expanded one:
        input_ids            [B, T] long, action ids, right-padded with the pad id
        attention_mask       [B, T] long, 1 for real actions (the tokenizer's padding mask)
        labels               [B, T] long, = input_ids with -100 on padding (the model shifts them); a
                             feature's own "labels" (one per action, -100 for actions not trained, e.g. a
                             summarization example's document: hf_slm/summarization/summaries.py) replace input_ids
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
        position_relative_positions [B, T', T'] long, R wherever attended, for a grammar whose R the model cannot
                             derive from coordinates and kinds (grammar.needs_explicit_relative_positions: DTG-eager,
                             -swift, the reference variant)
    and the grammar's family inputs, by name:
        each of grammar.action_inputs [B, T] long: the feature's field of that name, one value per action (-1 on
                             padding): what the grammar reads beside input_ids (paper 003's Nb-Up: the
                             start of each `)`), and what the model's loss may read
        each of grammar.family_inputs: the array of that name from grammar.batch, as a tensor (DTG:
                             head_token_index [B, T']; paper 003's Ex: composition_children [B, T', T'] and
                             composition_level [B, T']; Nb-Up: start_candidates [B, T', T'])
        each of grammar.host_input_names (with host_counts): grammar.host_inputs(batch), numpy arrays as tensors and
                             other values (host ints) as they are: sizes the model would otherwise read back from
                             the device (paper 003's Ex: the composer's schedule)

    Works as `data_collator` of transformers.Trainer. Features may be dicts with "input_ids" (other keys,
    such as a tokenizer's attention_mask, are ignored, but for the grammar's action inputs) or plain lists of ids.

    Args:
        grammar: a grammar name ("tg", "dtg", "nb-up-in-m", ... any registered family's) or a grammar object.
        layout: the grammar's layout (its `layout_class`) or a dict of its fields (`tokenizer.action_layout`).
        max_length: raise ValueError when an expanded sequence is longer (nothing is truncated).
        pad_to_multiple_of: round the padded expanded length up.
        validate: check every sequence against the grammar (a clear error instead of a silent bad mask).
        document_level: each sequence is a document, several trees after one `<s>`
            (`tokenizer.encode_document`); the model's config must say document_level=True too.
        host_counts: add num_coordinate_values and the grammar's host inputs, the sizes that the model would
            otherwise read back from the device (a sync per training step off the CPU). False leaves them out, for a
            model whose code predates them (a checkpoint's hub code saved before they existed rejects unknown inputs).
        positions: add the grammar's structure (expansion_index ... prediction_index, and what goes with them), the
            fast training path of a model that reads positions (a Transformer's); False: the action ids, mask, labels
            and action inputs only, for a model that reads the actions in order (a recurrent family's: RNNG).
        packed: each feature is a packed row of whole sentences (hf_slm/data/packing.py: `packed_dataset`), each
            beginning with the start action: every sentence is read as it is alone (its own block of the mask,
            coordinates and position_indices from 0, its pointers shifted to where it starts in the row, no label for
            a sentence's `<s>`), and the batch adds
            position_indices [B, T'] long, each position's index in its own sentence (-1 on padding): the absolute
                             position ids (a model reads the slot in the row without it).
            Not with a document-level grammar (whose trees attend each other).
        grammar_options: further options of the grammar (a dependency grammar's `variant`).
    """

    def __init__(self, grammar, layout, max_length=None, pad_to_multiple_of=None, validate=True, document_level=False,
                 host_counts=True, packed=False, positions=True, **grammar_options):
        if isinstance(grammar, str):
            rules = grammar_class(grammar)
            if isinstance(layout, dict):
                layout = rules.layout_class(**layout)
            grammar = rules(layout, document_level=document_level, **grammar_options)
        if packed and grammar.document_level:
            raise ValueError(f"packed rows hold sentences that never attend each other; the {grammar.name} grammar reads "
                             "documents (document_level), whose trees do: pack sentence-level data only")
        self.grammar = grammar
        self.max_length = max_length
        self.pad_to_multiple_of = pad_to_multiple_of
        self.validate = validate
        self.host_counts = host_counts
        self.packed = packed
        self.positions = positions

    @classmethod
    def from_tokenizer(cls, tokenizer, grammar=None, **kwargs):
        """The collator of `grammar` over the tokenizer's id layout; by default the first registered grammar that
        reads the tokenizer's linearization (a top-down tokenizer's: Transformer Grammars')."""
        if grammar is None:
            from ..families.tree_formats import grammars_of_linearization

            readers = grammars_of_linearization(tokenizer.linearization)
            if not readers:
                raise ValueError(f"no registered grammar reads the tokenizer's {tokenizer.linearization!r} sequences; "
                                 "name one with grammar=")
            grammar = readers[0]
        return cls(grammar, tokenizer.action_layout, **kwargs)

    def __call__(self, features):
        grammar = self.grammar
        sequences = [f["input_ids"] if isinstance(f, dict) else f for f in features]
        # Tokenizers may hand back right-padded rows; trailing padding is not part of a sequence (padding
        # anywhere else is left for the grammar to reject).
        pad = grammar.layout.pad_token_id
        sequences = [_strip_trailing(np.asarray(s, dtype=np.int64), pad) for s in sequences]
        given_labels = _given_labels(features, sequences)
        action_inputs = {name: _given_per_action(features, sequences, name, grammar.name) for name in grammar.action_inputs}
        # Explicit R only where the model cannot derive it from coordinates and kinds (DTG-eager, -swift, the
        # reference variant): it is the largest array of the batch.
        explicit = grammar.needs_explicit_relative_positions
        rows = None
        if self.packed:  # the grammar reads each sentence alone; pack_structure lays them out in their rows
            rows, sequences, given_labels, action_inputs = self._sentences(sequences, given_labels, action_inputs)
        batch = grammar.batch(
            sequences,
            validate=self.validate,
            pad_to_multiple_of=None if self.packed else self.pad_to_multiple_of,
            max_length=self.max_length,
            with_relative_positions=explicit,
            **{grammar.action_inputs[name]: values for name, values in action_inputs.items()},
        )
        if self.packed:
            batch = pack_structure(grammar, batch, rows, self.pad_to_multiple_of)
            counts = [len(s) for s in sequences]
            action_inputs = {name: packed_action_values(values, rows, counts, grammar.input_references.get(name) == "actions")
                             for name, values in action_inputs.items()}
            if given_labels is not None:
                given_labels = packed_action_values(given_labels, rows, counts, shift=False)
            sequences = packed_action_values(sequences, rows, counts, shift=False)
        lengths = batch["action_lengths"]
        width = int(lengths.max())
        real = np.arange(width)[None, :] < lengths[:, None]
        input_ids = np.full((len(sequences), width), pad, dtype=np.int64)
        input_ids[real] = np.concatenate(sequences)
        if given_labels is not None and not isinstance(given_labels, np.ndarray):  # packed: one array per row
            given_labels = _padded_rows(given_labels, width, -100)
        labels = np.where(real, input_ids if given_labels is None else given_labels, -100)
        if self.packed:  # a sentence's `<s>` is not predicted from the sentence before it
            labels[input_ids == grammar.start_action_id] = -100
        collated = {
            "input_ids": torch.from_numpy(input_ids),
            "attention_mask": torch.from_numpy(real.astype(np.int64)),
            "labels": torch.from_numpy(labels),
        }
        for name, values in action_inputs.items():
            padded = np.full((len(sequences), width), -1, dtype=np.int64)
            padded[real] = np.concatenate(values)
            collated[name] = torch.from_numpy(padded)
        if self.positions:
            collated.update(self._structure(batch, explicit))
        return collated

    def _structure(self, batch, explicit):
        """The grammar's structure of a batch (grammar.batch's arrays) as the model's inputs: the positions, their mask,
        coordinates, kinds and prediction index, and what goes with them (module docstring)."""
        grammar = self.grammar
        structure = {
            "expansion_index": torch.from_numpy(batch["expansion_index"]),
            "position_mask": torch.from_numpy(batch["attention_mask"]),
            "position_coordinates": torch.from_numpy(batch["position_coordinates"]),
            "position_kinds": torch.from_numpy(batch["position_kinds"].astype(np.int64)),
            "prediction_index": torch.from_numpy(batch["prediction_index"]),
        }
        if explicit:
            structure["position_relative_positions"] = torch.from_numpy(batch["relative_positions"])
        if self.packed:
            structure["position_indices"] = torch.from_numpy(batch["position_indices"])
        for name in grammar.family_inputs:
            structure[name] = torch.from_numpy(batch[name])
        if self.host_counts:
            structure["num_coordinate_values"] = coordinate_count(batch["position_coordinates"])
            for name, value in grammar.host_inputs(batch).items():
                structure[name] = torch.from_numpy(value) if isinstance(value, np.ndarray) else value
        return structure

    def _sentences(self, sequences, given_labels, action_inputs):
        """(rows: [[sentence indices], ...], the sentences' ids, labels (None, or one array per sentence) and action
        inputs) of packed rows, split where each sentence begins with the start action."""
        rows, sentences, labels, inputs = [], [], [], {name: [] for name in action_inputs}
        for row, ids in enumerate(sequences):
            rows.append([])
            for start, stop in sentence_bounds(ids, self.grammar.start_action_id, f"packed feature {row}"):
                rows[-1].append(len(sentences))
                sentences.append(ids[start:stop])
                if given_labels is not None:
                    labels.append(given_labels[row, start:stop])
                for name, values in action_inputs.items():
                    # a sentence's pointers count from its own `<s>`, as the tokenizer wrote them
                    inputs[name].append(values[row][start:stop])
        return rows, sentences, (labels if given_labels is not None else None), inputs


def _padded_rows(rows, width, fill):
    """[B, width] of one 1-D array per row, right-padded with `fill`."""
    padded = np.full((len(rows), width), fill, dtype=np.int64)
    for index, row in enumerate(rows):
        padded[index, : len(row)] = row
    return padded


def _given_per_action(features, sequences, name, grammar_name):
    """Per sequence, the features' field `name` (one value per action, a grammar's action input: paper 003's Nb-Up
    start of each `)`), cut to the sequence; a feature without it is a ValueError (the grammar cannot expand the
    sequence without it)."""
    values = []
    for row, (feature, sequence) in enumerate(zip(features, sequences)):
        given = feature.get(name) if isinstance(feature, dict) else None
        if given is None:
            raise ValueError(f"feature {row} has no {name}: the {grammar_name} grammar reads it beside input_ids "
                             f"(grammar.action_inputs); keep the tokenizer's {name} beside input_ids")
        given = np.asarray(given, dtype=np.int64)
        if len(given) < len(sequence):
            raise ValueError(f"feature {row}: {len(given)} {name} for {len(sequence)} actions; expected one per action "
                             "(-1 where there is none)")
        values.append(given[: len(sequence)])
    return values


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


def collator_for_model(model, tokenizer=None, **options):
    """The SyntacticDataCollator of a model's own grammar (its config's: the grammar, the id layout, the document
    level and any option of the grammar's family), refusing sequences longer than the model reads (Family.collator
    of the families with grammars; `tokenizer` is not needed: the config carries the id layout)."""
    from ..modeling.grammars import grammar_for_config

    options.setdefault("host_counts", takes_host_counts(model))
    return SyntacticDataCollator(grammar_for_config(model.config), None, max_length=model.config.max_sequence_length,
                                 **options)


def takes_host_counts(model):
    """Whether `model`'s forward takes the collator's host counts (num_coordinate_values, the composition
    schedule): a checkpoint saved before they existed carries modeling code that refuses unknown inputs, so its
    collator leaves them out (host_counts=False) and the model reads them from the device as it did."""
    import inspect

    inner = getattr(model, "model", model)
    return "num_coordinate_values" in inspect.signature(inner.forward).parameters
