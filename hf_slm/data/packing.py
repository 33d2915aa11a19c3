"""Packing whole sentences into long rows (paper 003, Appendix A: sentences packed into sequences of up to the
cutoff length, cut only between sentences), with every sentence read exactly as it is alone.

Two steps:
- `pack_sentences` groups a dataset's sentences, in order, into rows of at most N expanded positions, and
  `packed_dataset` writes each group as one example: its sentences' columns concatenated (input_ids holds
  `<s> ... <s> ...`). A sentence longer than N is an error naming it; nothing is cut.
- `SyntacticDataCollator(packed=True)` (collator.py) splits each example back into its sentences at the start
  action (`grammar.start_action_id`), lets the grammar compute each sentence's structure alone, and lays those out
  side by side in the row (`pack_structure`): the attention mask is block-diagonal (no position attends across a
  sentence boundary), coordinates and absolute position ids (`position_indices`) start again at every sentence,
  pointers into a sentence (`grammar.input_references`) are shifted to where it starts, and no sentence predicts
  the next one's `<s>`. So the loss summed over a packed row's tokens is the sum of its sentences' own.

Packing reads sentences, not documents: a document-level grammar (whose sequence holds several trees that attend
each other) is refused, and so are segment recurrence and unrestricted heads (whose causal mask spans a whole
row); the training command checks them (hf_slm/training/train.py).
"""

import numpy as np

from ..modeling.grammars import IGNORE_INDEX, PositionKind


def pack_sentences(lengths, budget, source="training data"):
    """[[sentence indices], ...]: the sentences in order, a new group whenever the next one would take the group past
    `budget` positions (`lengths`: each sentence's expanded length). A sentence longer than `budget` is a ValueError
    naming it."""
    if budget < 1:
        raise ValueError(f"pack to {budget!r} positions: expected a positive number")
    groups, used = [], budget + 1
    for index, length in enumerate(np.asarray(lengths, dtype=np.int64).tolist()):
        if length > budget:
            raise ValueError(f"{source}: example {index} expands to {length} positions, more than the {budget} a packed "
                             "sequence holds; raise --pack-to or remove the example")
        if used + length > budget:
            groups.append([])
            used = 0
        groups[-1].append(index)
        used += length
    return groups


def packed_dataset(dataset, lengths, budget, source="training data"):
    """A datasets.Dataset with one example per group of `pack_sentences`: each column of `dataset` (input_ids, and
    labels or a grammar's action inputs where present) concatenated over the group's sentences."""
    from datasets import Dataset

    groups = pack_sentences(lengths, budget, source)
    columns = {}
    for name in dataset.column_names:
        values = dataset[name]
        columns[name] = [[value for index in group for value in values[index]] for group in groups]
    return Dataset.from_dict(columns)


def sentence_bounds(ids, start_id, where):
    """[(start, stop), ...] of the sentences of one packed row of action ids: each begins with `start_id`."""
    ids = np.asarray(ids)
    starts = np.flatnonzero(ids == start_id)
    if len(ids) == 0 or len(starts) == 0 or starts[0] != 0:
        raise ValueError(f"{where}: a packed sequence begins with the start action (id {start_id}) and holds whole "
                         f"sentences, each beginning with it; got ids {ids[:8].tolist()}...")
    stops = np.append(starts[1:], len(ids))
    return list(zip(starts.tolist(), stops.tolist()))


def pack_structure(grammar, batch, groups, pad_to_multiple_of=None):
    """grammar.batch's arrays over single sentences (`batch`, one row per sentence) laid out in packed rows, one per
    group of sentence indices (`groups`, in row order): the generic structure, the family inputs and the relative
    positions when present, plus position_indices [R, W] (each position's index in its own sentence, -1 for
    padding). Padding rows attend only themselves, as grammar.batch's."""
    lengths, action_lengths = batch["lengths"], batch["action_lengths"]
    row_lengths = np.array([lengths[group].sum() for group in groups], dtype=np.int64)
    row_actions = np.array([action_lengths[group].sum() for group in groups], dtype=np.int64)
    width = int(row_lengths.max())
    if pad_to_multiple_of:
        width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
    references = grammar.input_references
    fills = {"input_ids": grammar.layout.pad_token_id, "position_kinds": PositionKind.PAD, "labels": IGNORE_INDEX,
             "depth": 0, "position_coordinates": 0, "expansion_index": 0}
    per_position = [name for name in fills if name in batch]
    families = [name for name in grammar.family_inputs if name in batch]
    packed = {name: np.full((len(groups), width), fills[name], dtype=batch[name].dtype) for name in per_position}
    for name in families:
        shape = (len(groups),) + (width,) * (batch[name].ndim - 1)
        packed[name] = np.full(shape, False if batch[name].dtype == bool else -1, dtype=batch[name].dtype)
    packed["attention_mask"] = np.zeros((len(groups), width, width), dtype=bool)
    if "relative_positions" in batch:
        packed["relative_positions"] = np.zeros((len(groups), width, width), dtype=batch["relative_positions"].dtype)
    packed["prediction_index"] = np.zeros((len(groups), int(row_actions.max())), dtype=np.int64)
    packed["position_indices"] = np.full((len(groups), width), -1, dtype=np.int64)
    for row, group in enumerate(groups):
        position, action = 0, 0
        for sentence in group:
            length, count = int(lengths[sentence]), int(action_lengths[sentence])
            here, actions = slice(position, position + length), slice(action, action + count)
            for name in per_position:
                packed[name][row, here] = batch[name][sentence, :length]
            packed["expansion_index"][row, here] += action
            packed["prediction_index"][row, actions] = batch["prediction_index"][sentence, :count] + position
            packed["position_indices"][row, here] = np.arange(length)
            for name in ("attention_mask", "relative_positions"):
                if name in packed:
                    packed[name][row, here, here] = batch[name][sentence, :length, :length]
            for name in families:
                values = batch[name][sentence, :length]
                if values.ndim == 2:
                    packed[name][row, here, here] = values[:, :length]
                    continue
                shift = {"positions": position, "actions": action}.get(references.get(name), 0)
                packed[name][row, here] = np.where(values >= 0, values + shift, values) if shift else values
            position += length
            action += count
    # a padding row attends itself only (a real row attends what its grammar says: not always itself, DTG's COMPOSE)
    padding = np.arange(width)[None, :] >= row_lengths[:, None]
    packed["attention_mask"] |= np.eye(width, dtype=bool)[None] & padding[:, :, None]
    packed["lengths"], packed["action_lengths"] = row_lengths, row_actions
    return packed


def packed_action_values(values, groups, action_lengths, shift):
    """Per row, the sentences' per-action arrays (`values`, one per sentence) concatenated; with `shift`, each value
    that points at an action (>= 0) moved by where its sentence starts in the row."""
    rows = []
    for group in groups:
        parts, offset = [], 0
        for sentence in group:
            part = np.asarray(values[sentence], dtype=np.int64)
            parts.append(np.where(part >= 0, part + offset, part) if shift else part)
            offset += int(action_lengths[sentence])
        rows.append(np.concatenate(parts))
    return rows
