"""Segment recurrence (Transformer-XL): a sequence cut into segments of L positions, each reading a memory of M
slots that the segments before it filled (paper 000, section 2.2 and Appendix A, Figure 8).

Segment tau holds the expanded positions tau*L .. tau*L + L - 1 (the last segment may be shorter: its rows past
the end are padding). For each segment, `segment_sequence` gives:

- `memory_positions` [M]: the original position whose hidden state each memory slot holds when the segment
  starts; -1 for an empty slot (a zero vector). The memory is empty at a sequence's first segment: a document
  starts with no memory (`memory_reset` says so, for a model that streams documents one after another).
- `attention_mask` A_tau [L, M + L] bool, memory columns first, then the segment's own L columns: the
  whole-sequence mask's cell (row's position, column's position). A row thus attends, of what the grammar lets
  it attend over the whole sequence, what sits in the memory or in the segment; nothing else.
- `relative_positions` R_tau [L, M + L] int64: the whole-sequence relative position of each attended cell, 0
  elsewhere (the model clips them, as it does for whole sequences).
- `update_from_segment` U^{h->m} [M, L] and `update_from_memory` U^{m->m} [M, M] bool: the memory of the next
  segment is m_{tau+1} = U^{m->m} m_tau + U^{h->m} h_tau (per layer, h_tau the layer's input). Every row holds at
  most one 1: a slot copies one segment position, or one slot of the memory, or stays empty.

Memory rules (`memory_update`):

- "structure" (TG and DTG; paper 000's "gather into new memory"): after a segment, the memory holds the M most
  recent positions that a later position may still attend: those on the grammar's stack
  (`grammar.stack_lifetimes`), the most recent in slot M - 1, empty slots first. As in Figure 8, a position
  dropped once (more than M attendable positions after it) is gone for good, and dropped positions take no
  slot. For TG the stack is ordered by position, so this is Figure 8's walk from the stack top; a DTG-eager
  stack is not (an RA's COMPOSE copy replaces a head below its dependent), and the rule is still "the most
  recent positions". For a causal grammar nothing ever leaves the stack, and the structure memory is the shift
  memory.
- "shift" (Transformer-XL, and TG (TXL memory) of paper 000 section 3.5): the memory holds the M positions right
  before the segment, whatever the grammar; the mask hides those the grammar does not let a row attend.

When is the memory big enough? A row attends, through memory and segment, exactly its whole-sequence row when
every position it attends is still in the memory or in the segment. Under "structure" that holds for every row
when M >= `structure_memory_needed(...)`: the largest number of positions on the stack at the end of a
segment (for TG, the stack depth at each segment boundary). Under "shift" it holds when no row attends a
position more than M before its segment's start.

Why this is vectorized without a loop over segments: a position j is attendable from its own step until it
leaves the stack (an interval), so at each segment end the attendable positions after j are a suffix of those
of the end before. By induction, when j is still kept, every attendable position after it is kept too, so j's
slot is M - 1 - (attendable positions after j), and j is kept at the end of segment tau iff at every segment end
from its own to tau it was attendable with fewer than M attendable positions after it: one cumulative AND over
an [n, T'] array.

This file is hub code: it is copied into checkpoints and must import nothing from hf_slm.
"""

from dataclasses import dataclass

import numpy as np

from .grammars import IGNORE_INDEX, PositionKind

MEMORY_UPDATES = ("structure", "shift")


@dataclass
class SegmentedSequence:
    """Per-segment model inputs of one sequence: n segments of L positions, a memory of M slots.

    Arrays are numpy, n = ceil(T' / L) over the T' expanded positions. Padding rows (past the end, in the last
    segment) have position -1, the pad id, kind PAD, no label, and attend only their own column (M + x), so
    that no softmax row is empty, as in `Grammar.batch`.
    """

    segment_length: int  # L
    memory_length: int  # M
    memory_update: str  # "structure" or "shift"
    input_ids: np.ndarray  # [n, L] int64
    position_kinds: np.ndarray  # [n, L] int8, PositionKind
    labels: np.ndarray  # [n, L] int64, IGNORE_INDEX where nothing is predicted
    depth: np.ndarray  # [n, L] int64
    segment_positions: np.ndarray  # [n, L] int64, original position of each row, -1 for padding
    memory_positions: np.ndarray  # [n, M] int64, original position in each slot at the segment's start, -1 empty
    attention_mask: np.ndarray  # [n, L, M + L] bool, memory columns first
    relative_positions: np.ndarray  # [n, L, M + L] int64, 0 where not attended
    update_from_segment: np.ndarray  # [n, M, L] bool, U^{h->m}
    update_from_memory: np.ndarray  # [n, M, M] bool, U^{m->m}
    memory_reset: np.ndarray  # [n] bool: the memory starts empty (the sequence's first segment)
    # [n, M + L] int64: the whole sequence's coordinate (Grammar.position_coordinates, R_ij = c_i - c_j) of each
    # memory slot, then of each row (0 where empty), for grammars whose relative positions are such differences
    # (the model's fast attention paths need them); None for grammars with explicit relative positions.
    coordinates: np.ndarray | None = None
    # [n, L] int64: for a grammar whose positions add another position's token (grammar.added_token_ids: DTG's arcs,
    # their head word's last piece), the token each position adds, -1 for none (that position may lie in an earlier
    # segment, so the segment carries its token); None for other grammars.
    added_token_ids: np.ndarray | None = None

    @property
    def num_segments(self):
        return len(self.input_ids)

    def next_memory_positions(self):
        """[n, M]: the original position in each slot after each segment (-1 empty): the next segment's memory."""
        return memory_after_update(self.memory_positions, self.segment_positions, self.update_from_segment,
                                   self.update_from_memory)


# The per-segment arrays of a SegmentedSequence (coordinates and added_token_ids may be None).
SEGMENT_ARRAYS = ("input_ids", "position_kinds", "labels", "depth", "segment_positions", "memory_positions",
                  "attention_mask", "relative_positions", "update_from_segment", "update_from_memory", "memory_reset",
                  "coordinates", "added_token_ids")


def padding_segment(segment_length, memory_length, pad_token_id, coordinates=False, added_token_ids=False):
    """A SegmentedSequence of one segment that reads and predicts nothing, for a batch row with no segment left
    (`segment_batch`; a training stream that has ended): padding rows that attend only their own column (no
    softmax row is empty), an empty memory that stays empty, no labels; with `coordinates` / `added_token_ids`, those
    fields too (zeros / -1), so that it stacks with a grammar's segments."""
    L, M = segment_length, memory_length
    mask = np.zeros((1, L, M + L), dtype=bool)
    mask[0, np.arange(L), M + np.arange(L)] = True
    return SegmentedSequence(
        segment_length=L, memory_length=M, memory_update="shift",
        input_ids=np.full((1, L), pad_token_id, dtype=np.int64),
        position_kinds=np.full((1, L), PositionKind.PAD, dtype=np.int8),
        labels=np.full((1, L), IGNORE_INDEX, dtype=np.int64), depth=np.zeros((1, L), dtype=np.int64),
        segment_positions=np.full((1, L), -1, dtype=np.int64), memory_positions=np.full((1, M), -1, dtype=np.int64),
        attention_mask=mask, relative_positions=np.zeros((1, L, M + L), dtype=np.int64),
        update_from_segment=np.zeros((1, M, L), dtype=bool), update_from_memory=np.zeros((1, M, M), dtype=bool),
        memory_reset=np.zeros(1, dtype=bool), coordinates=np.zeros((1, M + L), dtype=np.int64) if coordinates else None,
        added_token_ids=np.full((1, L), -1, dtype=np.int64) if added_token_ids else None,
    )


def memory_after_update(memory_positions, segment_positions, update_from_segment, update_from_memory):
    """Apply the update matrices to position numbers instead of hidden states: [n, M] positions after each
    segment. (A slot no row of U fills is empty, -1.)"""
    from_segment = np.where(update_from_segment, segment_positions[:, None, :] + 1, 0).sum(-1)
    from_memory = np.where(update_from_memory, memory_positions[:, None, :] + 1, 0).sum(-1)
    return (from_segment + from_memory - 1).astype(np.int64)


def check_segment_options(grammar, segment_length, memory_length, memory_update):
    """(L, M, memory_update) after checking them against the grammar; ValueError naming what is wrong."""
    name = grammar.name
    if not grammar.supports_segments:
        raise ValueError(f"the {name} grammar has no segment recurrence (grammar.supports_segments): a position's "
                         "input reads earlier positions (an external composition its children's), which may lie in "
                         "earlier segments; expected a grammar with internal composition")
    if isinstance(segment_length, bool) or not isinstance(segment_length, (int, np.integer)) or segment_length < 1:
        raise ValueError(f"segment length {segment_length!r}: expected a whole number of positions >= 1")
    if memory_length is None:
        memory_length = segment_length
    if isinstance(memory_length, bool) or not isinstance(memory_length, (int, np.integer)) or memory_length < 0:
        raise ValueError(f"memory length {memory_length!r}: expected a whole number of slots >= 0")
    if memory_update is None:
        memory_update = grammar.default_memory_update
    if memory_update not in MEMORY_UPDATES:
        raise ValueError(f"memory update {memory_update!r}: expected one of {', '.join(MEMORY_UPDATES)}")
    if memory_update == "structure" and not _has_stack(grammar):
        raise ValueError(f"memory update 'structure' needs the grammar's stack, and the {name} grammar exposes "
                         "none (no stack_lifetimes); expected memory update 'shift' for it")
    return int(segment_length), int(memory_length), memory_update


def check_segments_carry_inputs(rules):
    """ValueError naming the grammar (a grammar class or instance) when its model reads inputs beside the action ids
    (grammar.action_inputs, paper 003's Nb-Up starts): a segment carries its ids and their memory only (and the
    tokens positions add, grammar.added_token_ids), so a model reading segments would train and score without them.
    The config's segment fields and the segment model check both ask here."""
    if rules.action_inputs:
        raise ValueError(f"the {rules.name} grammar reads {list(rules.action_inputs)} beside the action ids "
                         "(grammar.action_inputs), and a segment carries only its ids and their memory: a model "
                         "reading segments would train and score without them (no loss of their own, e.g. no start "
                         "loss); it has no segment recurrence")


def _has_stack(grammar):
    """Whether the "structure" memory applies: positions leave a stack (grammar.has_stack), or never leave (causal)."""
    return grammar.causal or grammar.has_stack


def _lifetimes(grammar, ids, total, validate, require_complete):
    """(pushed [T'], removal [T']) of the grammar's stack; a causal grammar keeps every position forever."""
    if grammar.causal:
        return np.ones(total, dtype=bool), np.full(total, np.iinfo(np.int64).max, dtype=np.int64)
    pushed, removal = grammar.stack_lifetimes(ids, validate=validate, require_complete=require_complete)
    return np.asarray(pushed, dtype=bool), np.asarray(removal, dtype=np.int64)


def segment_ends(total, segment_length):
    """[n] int64: the last position of each segment of a sequence of `total` positions."""
    count = -(-total // segment_length)
    return np.minimum(np.arange(1, count + 1, dtype=np.int64) * segment_length, total) - 1


def attendable_after_segments(pushed, removal, segment_length):
    """[n, T'] bool: position j may still be attended by a position after segment tau's end e (it is on the
    stack after e: pushed, j <= e < removal[j])."""
    total = len(pushed)
    ends = segment_ends(total, segment_length)[:, None]
    line = np.arange(total, dtype=np.int64)[None, :]
    return pushed[None, :] & (line <= ends) & (removal[None, :] > ends)


def structure_memory_needed(pushed, removal, segment_length):
    """The smallest M with which the structure memory drops nothing: the most positions on the stack at the end
    of any segment but the last (after the last one, no position reads the memory)."""
    attendable = attendable_after_segments(pushed, removal, segment_length)[:-1]
    return int(attendable.sum(1).max(initial=0))


def structure_memory(pushed, removal, segment_length, memory_length):
    """[n, M] int64: the positions in the memory after each segment under the "structure" rule (module
    docstring), -1 for an empty slot; row tau is segment tau + 1's memory."""
    total, M = len(pushed), memory_length
    attendable = attendable_after_segments(pushed, removal, segment_length)
    count = len(attendable)
    # Attendable positions after j at each segment end: a suffix count.
    later = np.cumsum(attendable[:, ::-1], axis=1)[:, ::-1] - attendable
    fits = attendable & (later < M)
    started = np.arange(count)[:, None] >= (np.arange(total) // segment_length)[None, :]
    kept = np.logical_and.accumulate(fits | ~started, axis=0) & started
    memory = np.full((count, M), -1, dtype=np.int64)
    rows, positions = np.nonzero(kept)
    memory[rows, M - 1 - later[rows, positions]] = positions
    return memory


def shift_memory(total, segment_length, memory_length):
    """[n, M] int64: the positions in the memory after each segment under the "shift" rule: the M positions up
    to the segment's end, oldest first, -1 before the sequence's start."""
    ends = segment_ends(total, segment_length)
    memory = ends[:, None] + 1 - memory_length + np.arange(memory_length, dtype=np.int64)[None, :]
    return np.where(memory >= 0, memory, -1)


def causal_segment_window(query_positions, key_positions, segment_length, memory_length):
    """For a causal grammar, [..., T, S] bool: whether the query at position p may attend the key at position j
    through segments of L positions and a memory of M, j >= L * floor(p / L) - M (with j <= p: AND it with the
    causal mask). Both memory rules keep the M positions right before a segment for a causal grammar (module
    docstring), so reading a sequence segment by segment with its memory is one causal pass under this window,
    and so is a key/value cache that keeps every position (transformers' generate). Positions are indices among
    a row's real tokens; numpy or torch arrays [..., T] and [..., S]."""
    window_start = (query_positions // segment_length) * segment_length - memory_length
    return key_positions[..., None, :] >= window_start[..., :, None]


def update_matrices(memory_positions, segment_positions, next_memory_positions):
    """(U^{h->m} [n, M, L], U^{m->m} [n, M, M]) bool: slot y of the next memory copies the segment row, or the
    memory slot, that holds the same original position (an empty slot copies nothing)."""
    filled = (next_memory_positions >= 0)[:, :, None]
    from_segment = filled & (next_memory_positions[:, :, None] == segment_positions[:, None, :])
    from_memory = filled & (next_memory_positions[:, :, None] == memory_positions[:, None, :])
    return from_segment, from_memory


def segment_sequence(grammar, ids, segment_length, memory_length=None, memory_update=None, validate=True,
                     require_complete=True, **sequence_options):
    """Per-segment attention masks, relative positions and memory updates of one action sequence
    (`SegmentedSequence`).

    `grammar` is any grammar with internal composition; `ids` its action ids (a document under a document-level
    grammar); `segment_length` L >= 1; `memory_length` M >= 0 (default L: paper 000's reference uses M = L;
    any M works); `memory_update` "structure" or "shift" (default: `grammar.default_memory_update`).
    `sequence_options` go to `grammar.batch` (paper 003's Nb-Up: `starts`). The attention rules come from the
    grammar's whole-sequence form and its stack (`stack_lifetimes`): this module adds no rule of its own.
    """
    L, M, memory_update = check_segment_options(grammar, segment_length, memory_length, memory_update)
    explicit = grammar.explicit_relative_positions
    if "starts" in sequence_options and sequence_options["starts"] is not None:
        sequence_options["starts"] = [sequence_options["starts"]]
    whole = grammar.batch([ids], validate=validate, require_complete=require_complete,
                          with_relative_positions=explicit, **sequence_options)
    total = int(whole["lengths"][0])
    count = -(-total // L)
    width = count * L

    def by_segment(values, fill):
        padded = np.full(width, fill, dtype=values.dtype)
        padded[:total] = values[:total]
        return padded.reshape(count, L)

    line = np.arange(total, dtype=np.int64)
    segment_positions = by_segment(line, -1)
    if memory_update == "structure":
        pushed, removal = _lifetimes(grammar, ids, total, validate, require_complete)
        after = structure_memory(pushed, removal, L, M)
    else:
        after = shift_memory(total, L, M)
    memory_positions = np.concatenate([np.full((1, M), -1, dtype=np.int64), after[:-1]])
    from_segment, from_memory = update_matrices(memory_positions, segment_positions, after)

    # Gather the whole-sequence cells (row position, column position) of every segment at once.
    columns = np.concatenate([memory_positions, segment_positions], axis=1)  # [n, M + L]
    real_rows, real_columns = segment_positions >= 0, columns >= 0
    row_index = np.maximum(segment_positions, 0)[:, :, None]
    column_index = np.maximum(columns, 0)[:, None, :]
    mask = whole["attention_mask"][0][row_index, column_index] & real_rows[:, :, None] & real_columns[:, None, :]
    if explicit:
        relative = whole["relative_positions"][0][row_index, column_index]
    else:  # R_ij = c_i - c_j on every attended cell (Grammar.position_coordinates)
        coordinates = whole["position_coordinates"][0].astype(np.int64)
        relative = coordinates[row_index] - coordinates[column_index]
    relative = np.where(mask, relative, 0).astype(np.int64)
    slot_coordinates = None
    if not explicit:
        slot_coordinates = np.where(real_columns, whole["position_coordinates"][0].astype(np.int64)[np.maximum(columns, 0)], 0)
    added_token_ids = grammar.added_token_ids(whole)
    if added_token_ids is not None:
        added_token_ids = by_segment(added_token_ids[0][:total].astype(np.int64), -1)
    padding = np.flatnonzero(~real_rows.reshape(-1))
    mask.reshape(width, M + L)[padding, M + padding % L] = True  # a padding row attends only itself

    return SegmentedSequence(
        segment_length=L, memory_length=M, memory_update=memory_update,
        input_ids=by_segment(whole["input_ids"][0].astype(np.int64), int(grammar.layout.pad_token_id)),
        position_kinds=by_segment(whole["position_kinds"][0].astype(np.int8), np.int8(PositionKind.PAD)),
        labels=by_segment(whole["labels"][0].astype(np.int64), IGNORE_INDEX),
        depth=by_segment(whole["depth"][0].astype(np.int64), 0),
        segment_positions=segment_positions, memory_positions=memory_positions, attention_mask=mask,
        relative_positions=relative, update_from_segment=from_segment, update_from_memory=from_memory,
        memory_reset=np.arange(count) == 0, coordinates=slot_coordinates, added_token_ids=added_token_ids,
    )


def segment_batch(grammar, sequences, segment_length, memory_length=None, memory_update=None, validate=True,
                  require_complete=True, starts=None):
    """`segment_sequence` for a batch, stacked: a dict of arrays with a leading batch dimension B and the batch's
    largest number of segments n (the fields of `SegmentedSequence`: input_ids [B, n, L], attention_mask
    [B, n, L, M + L], update_from_segment [B, n, M, L], ...; plus num_segments [B]). A sequence with fewer
    segments is padded with empty segments: padding rows that attend only themselves, an empty memory, zero
    update matrices. A model runs segment tau of every sequence at once, carrying each row's memory."""
    if not len(sequences):
        raise ValueError(f"{grammar.name} grammar: expected at least one sequence, got an empty batch")
    if starts is not None and len(starts) != len(sequences):
        raise ValueError(f"starts: expected one list per sequence ({len(sequences)}), got {len(starts)}")
    parts = [segment_sequence(grammar, ids, segment_length, memory_length, memory_update, validate,
                              require_complete, **({} if starts is None else {"starts": starts[index]}))
             for index, ids in enumerate(sequences)]
    first = parts[0]
    L, M, count = first.segment_length, first.memory_length, max(part.num_segments for part in parts)
    padding = padding_segment(L, M, int(grammar.layout.pad_token_id), first.coordinates is not None,
                              first.added_token_ids is not None)
    result = {}
    for field in SEGMENT_ARRAYS:
        if getattr(first, field) is None:
            continue
        result[field] = np.stack([np.concatenate([getattr(part, field)] + [getattr(padding, field)] *
                                                 (count - part.num_segments)) for part in parts])
    result["num_segments"] = np.array([part.num_segments for part in parts], dtype=np.int64)
    result.update(segment_length=L, memory_length=M, memory_update=first.memory_update)
    return result
