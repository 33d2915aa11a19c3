"""Transformer-XL segment recurrence for every Transformer family (paper 000, section 2.2 and Appendix A).

A long sequence (a document) is read segment by segment (segments.py cuts it and says, per segment, what each
position attends among the memory slots and the segment, and how the next memory is built). The model carries
a memory per layer: the layer's inputs at the positions the memory holds, without gradient (Transformer-XL's
SG(m)). For segment tau and layer k:

    keys, values of layer k   = projections of [m_k; h_k]   (M memory slots, then the L positions)
    m_k for segment tau + 1   = U^{m->m} m_k + U^{h->m} h_k  (stop-gradient)

The model's forward over one segment is `segment_forward`; the memory it returns goes into the next call. A
stream that starts a new document (memory_reset) starts from an empty memory. The relative positions are the
whole sequence's (segments.py takes them from the grammar's whole-sequence form), so a segment attends exactly
what the whole sequence would, wherever the memory holds what it attends: with a memory large enough, segment
logits equal whole-sequence logits (tests/test_segment_model.py holds them equal). Hybrid (unrestricted) heads
attend every slot the memory and the segment hold: under the "structure" memory that is the stack, not every
earlier position, so a hybrid model equals its whole-sequence form only under a "shift" memory of M >= T. They read a
memory slot at its true distance, or (config.unrestricted_memory_reading "shift") as paper 000's reference reads it:
the memory's slots as the positions right before the segment (slots_before_the_segment).

Hub code: imports only numpy, torch and its sibling files.
"""

from dataclasses import dataclass, fields

import numpy as np
import torch
import torch.nn.functional as F

from .backbone import PositionStructure
from .grammars import IGNORE_INDEX
from .segments import check_segments_carry_inputs


@dataclass
class SegmentBatch:
    """One step of B streams: row b holds the current segment of stream b (segments.SegmentedSequence's rows).

    input_ids [B, L] (the position ids), position_kinds [B, L], labels [B, L] (the action each position predicts,
    IGNORE_INDEX where none), attention_mask [B, L, M + L] bool (memory columns first), relative_positions
    [B, L, M + L], positions [B, M + L] (the original position of each memory slot, then of each row; -1 for an
    empty slot or padding), update_from_segment [B, M, L] and update_from_memory [B, M, M] bool, memory_reset [B]
    bool; coordinates [B, M + L] (R = c_i - c_j: the attention's fast paths; None for grammars with explicit
    relative positions, which then take the gathered bias) and added_token_ids [B, L] (the token each position adds,
    grammar.added_token_ids: DTG's arcs, their head word's piece; -1 none; None for other grammars).
    """

    input_ids: torch.Tensor
    position_kinds: torch.Tensor
    labels: torch.Tensor
    attention_mask: torch.Tensor
    relative_positions: torch.Tensor
    positions: torch.Tensor
    update_from_segment: torch.Tensor
    update_from_memory: torch.Tensor
    memory_reset: torch.Tensor
    coordinates: torch.Tensor | None = None
    added_token_ids: torch.Tensor | None = None

    def to(self, device):
        return SegmentBatch(**{f.name: None if getattr(self, f.name) is None else getattr(self, f.name).to(device)
                               for f in fields(self)})


def collate_segments(rows):
    """A SegmentBatch from `rows`: (SegmentedSequence, segment index) pairs, one per stream (all with the same L
    and M)."""
    if not rows:
        raise ValueError("collate_segments needs at least one (segmented sequence, segment index) pair")
    shapes = {(sequence.segment_length, sequence.memory_length) for sequence, _ in rows}
    if len(shapes) != 1:
        raise ValueError(f"segments of one batch must share segment and memory lengths; got (L, M) in {sorted(shapes)}")

    def stack(name):
        return torch.from_numpy(np.stack([getattr(sequence, name)[tau] for sequence, tau in rows]))

    positions = np.stack([np.concatenate([sequence.memory_positions[tau], sequence.segment_positions[tau]])
                          for sequence, tau in rows])
    optional = {}
    for name in ("coordinates", "added_token_ids"):
        present = {getattr(sequence, name) is not None for sequence, _ in rows}
        if len(present) != 1:
            raise ValueError(f"segments of one batch must all have {name} or none (segments of one grammar)")
        optional[name] = stack(name) if present.pop() else None
    return SegmentBatch(
        input_ids=stack("input_ids"), position_kinds=stack("position_kinds").long(), labels=stack("labels"),
        attention_mask=stack("attention_mask"), relative_positions=stack("relative_positions"),
        positions=torch.from_numpy(positions), update_from_segment=stack("update_from_segment"),
        update_from_memory=stack("update_from_memory"), memory_reset=stack("memory_reset"), **optional,
    )


def empty_memory(model, batch_size, memory_length, device=None, dtype=None):
    """Per layer, a memory of zeros [B, M, d] (an empty memory: every slot masked)."""
    parameter = next(model.parameters())
    shape = (batch_size, memory_length, model.config.hidden_size)
    return tuple(torch.zeros(shape, device=device or parameter.device, dtype=dtype or parameter.dtype)
                 for _ in range(model.config.num_hidden_layers))


def check_segment_model(model):
    """ValueError unless `model` can run segments: relative positions (absolute position embeddings index the
    whole sequence) and a grammar that supports them (grammar.supports_segments: not an external composition) and
    reads nothing beside the action ids (segments.check_segments_carry_inputs: not a start pointer's starts)."""
    config = model.config
    if config.position_encoding != "relative":
        raise ValueError(f"a {config.grammar} model with {config.position_encoding} positions has no segment recurrence: "
                         "Transformer-XL memory needs relative positions (position_encoding='relative')")
    if not model.grammar.supports_segments:
        raise ValueError(f"a {config.grammar} model's positions read earlier positions' inputs (an external "
                         "composition, its children's), which may lie in earlier segments: it has no segment recurrence "
                         "(grammar.supports_segments; the In variants have)")
    check_segments_carry_inputs(model.grammar)


@dataclass
class SegmentOutput:
    """loss: mean NLL (nats) of the segment's predicted actions (None without labels); logits [B, L, V]; memory:
    the next segment's, per layer [B, M, d] (no gradient); num_predicted: how many positions carried a label."""

    loss: torch.Tensor | None
    logits: torch.Tensor
    memory: tuple
    num_predicted: int


def segment_forward(model, batch, memory, compute_loss=True):
    """One segment of B streams through a *ForCausalLM of the Transformer families (module docstring): `batch` a
    SegmentBatch on the model's device, `memory` the previous call's (or empty_memory; rows with memory_reset
    start from zeros whatever it holds)."""
    check_segment_model(model)
    reset = batch.memory_reset[:, None, None]
    memory = tuple(torch.where(reset, torch.zeros_like(layer), layer) for layer in memory)
    kinds = batch.position_kinds
    if batch.coordinates is not None:  # R = c_i - c_j: the fast attention paths
        coordinates, relative = batch.coordinates - batch.coordinates.amin(1, keepdim=True), None
    else:
        coordinates, relative = torch.zeros_like(batch.positions), batch.relative_positions
    positions = batch.positions
    if model.config.unrestricted_memory_reading == "shift":  # the reference's reading (the config's docstring)
        positions = slots_before_the_segment(positions, positions.shape[1] - batch.input_ids.shape[1])
    structure = PositionStructure(batch.attention_mask.bool(), coordinates, _renumbered(positions), kinds,
                                  model.config.min_relative_position, model.config.relative_attention, relative)
    core = model.model
    extra = core.added_token_embeddings(batch.input_ids, batch.added_token_ids)
    hidden, layer_inputs = core.decoder.forward_segment(batch.input_ids, structure, memory, extra_embeddings=extra)
    logits = model._logits(hidden)
    # The next memory: U^{m->m} m + U^{h->m} h per layer, exact (each row of [U^{m->m} U^{h->m}] holds at most one 1).
    from_memory = batch.update_from_memory.to(hidden.dtype)
    from_segment = batch.update_from_segment.to(hidden.dtype)
    next_memory = tuple((torch.bmm(from_memory, m) + torch.bmm(from_segment, h)).detach()
                        for m, h in zip(memory, layer_inputs))
    labels = batch.labels
    predicted = labels != IGNORE_INDEX
    loss = None
    if compute_loss:
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX,
                               reduction="sum") / predicted.sum().clamp(min=1)
    return SegmentOutput(loss, logits, next_memory, int(predicted.sum()))


def slots_before_the_segment(positions, memory_slots):
    """`positions` [B, M + L] (the original position of each memory slot, then of each segment row; -1 for none) as
    the reference's hybrid heads read them: each row's real memory slots, most recent last, at the positions right
    before its segment's first (the k-th most recent at first - k), as its relative shift over a right-aligned memory
    reads them. A row without a real segment position is left as it is."""
    memory, segment = positions[:, :memory_slots], positions[:, memory_slots:]
    real = memory >= 0
    more_recent = ((memory[:, None, :] > memory[:, :, None]) & real[:, None, :]).sum(-1)  # [B, M]
    unset = torch.iinfo(positions.dtype).max
    first = torch.where(segment >= 0, segment, torch.full_like(segment, unset)).amin(1, keepdim=True)
    shifted = torch.where(real & (first != unset), first - 1 - more_recent, memory)
    return torch.cat([shifted, segment], dim=1)


def _renumbered(positions):
    """Positions shifted so that each row's earliest real one is 0 (-1 kept): hybrid heads read only differences,
    and a long document's positions would otherwise outgrow every table."""
    real = positions >= 0
    earliest = torch.where(real, positions, torch.full_like(positions, torch.iinfo(positions.dtype).max)).amin(1, keepdim=True)
    return torch.where(real, positions - earliest, -1)


def _read_together(model, grammar, segmented):
    """Read segmented sequences (segments.segment_sequence) together, one per batch row, segment after segment with
    the memory carried; a row whose sequence has ended reads a padding segment (it costs no result). Yields
    (tau, the collated batch, segment_forward's output) for each segment index tau."""
    from .segments import padding_segment

    first = segmented[0]
    device = next(model.parameters()).device
    memory = empty_memory(model, len(segmented), first.memory_length)
    padding = padding_segment(first.segment_length, first.memory_length, int(grammar.layout.pad_token_id),
                              first.coordinates is not None, first.added_token_ids is not None)
    for tau in range(max(s.num_segments for s in segmented)):
        rows = [(s, tau) if tau < s.num_segments else (padding, 0) for s in segmented]
        batch = collate_segments(rows).to(device)
        with torch.no_grad():
            out = segment_forward(model, batch, memory, compute_loss=False)
        memory = out.memory
        yield tau, batch, out


def segment_log_probs(model, grammar, sequences, segment_length, memory_length=None, memory_update=None):
    """Per action sequence of `sequences` (lists of ids; documents under a document-level grammar), the log-
    probabilities [T - 1] (float32, nats) of its actions after the first, read segment by segment with the memory
    carried, one sequence per batch row. With gold trees that is log p(x, y) of each action, exact for the model
    as it reads segments (for a model without structure, log p(x)); sequences may be longer than
    max_sequence_length."""
    from .segments import segment_sequence

    segmented = [segment_sequence(grammar, list(ids), segment_length, memory_length, memory_update) for ids in sequences]
    if not segmented:
        return []
    results = [[] for _ in segmented]
    for tau, batch, out in _read_together(model, grammar, segmented):
        log_probs = torch.log_softmax(out.logits.float(), -1)
        for b, sequence in enumerate(segmented):
            if tau < sequence.num_segments:
                labels = batch.labels[b]
                where = torch.nonzero(labels != IGNORE_INDEX)[:, 0]
                results[b].append(log_probs[b, where].gather(1, labels[where][:, None])[:, 0].cpu())
    return [torch.cat(parts) for parts in results]


@torch.no_grad()
def read_prefixes(model, grammar, sequences, segment_length, memory_length=None, memory_update=None):
    """Read action sequences (document prefixes that a search continues) segment by segment, one per batch row.
    Returns (the memory after each sequence, per layer [B, M, d]; the original position each memory slot holds
    [B, M] numpy, -1 empty; the logits [B, V] at each sequence's last position: its next action's)."""
    from .segments import segment_sequence

    segmented = [segment_sequence(grammar, list(ids), segment_length, memory_length, memory_update,
                                  require_complete=False) for ids in sequences]
    count = len(segmented)
    final = None  # per layer, per row: the memory after the row's last segment
    logits = [None] * count
    for tau, _, out in _read_together(model, grammar, segmented):
        if final is None:
            final = [list(layer) for layer in out.memory]
        for b, sequence in enumerate(segmented):
            if tau == sequence.num_segments - 1:  # the row's last segment: keep what it leaves
                last = int(np.flatnonzero(sequence.segment_positions[tau] >= 0)[-1])
                logits[b] = out.logits[b, last]
                for layer, state in zip(final, out.memory):
                    layer[b] = state[b]
    positions = np.stack([s.next_memory_positions()[-1] for s in segmented])
    return tuple(torch.stack(layer) for layer in final), positions, torch.stack(logits)
