"""Paper 000's grammars: Transformer Grammars ("tg") and the Transformer-XL baselines' ("choe_charniak", "terminals").

- `tg` (Transformer Grammars, paper 000, Algorithm 1): each closing nonterminal is duplicated into a
  COMPOSE copy (attends its opening NT, its children still on the stack and itself; predicts nothing)
  and a STACK copy (attends the stack and itself; predicts the next action). Every other position uses
  STACK attention and is pushed. Relative position = depth(i) - depth(j), where depth(<s>) = 0,
  depth(child) = depth(parent) + 1, and both closing copies take the depth of their opening NT.
  As the reference implementation, every position attends itself (Algorithm 1 leaves CNT2's own cell out).
- `tg_txl_positions` (TG (TXL mem. & rel. pos.), paper 000 section 3.5, Table 2): TG's actions and attention mask,
  with Transformer-XL's relative position i - j between expanded positions (the duplicated closing NTs count)
  instead of the depth difference, and Transformer-XL's memory ("shift": the M positions before a segment, the
  mask hiding what TG's stack no longer holds) as its default under segment recurrence (segments.py).
  TG (TXL memory), the row above it in Table 2, is `tg` with memory update "shift".
- `choe_charniak` (TXL (CC)): the same actions, causal mask, relative position i - j, no duplication.
- `terminals` (TXL (terminals)): words only, causal mask, relative position i - j, ends with `</s>`.

The legality of bracketed trees and the causal forms are grammars.py's (`Grammar`, `CausalRules`,
`CausalWordsRules`); this file adds TG's attention and positions, and names the grammars of both families.

This file is hub code: it is copied into checkpoints and must import nothing from hf_slm.
"""

import numpy as np

from .grammars import (
    POSITION_KIND_BY_ACTION,
    ActionKind,
    CausalRules,
    CausalWordsRules,
    FlatBatch,
    Grammar,
    NewPosition,
    PositionKind,
    expand_actions,
    sequence_coordinates,
    sequence_distances,
)


class TransformerGrammarRules(Grammar):
    """STACK/COMPOSE attention with duplicated closing nonterminals (paper 000, Algorithm 1)."""

    name = "tg"
    duplicates_closing = True
    has_stack = True
    relative_position_range = (-1, 62)  # the reference's 64 values: depth differences beyond are clipped
    relative_position_meaning = "tree-depth differences depth(i) - depth(j)"

    @property
    def rows_class(self):
        """TG's states as arrays over hypotheses (transformer_grammar_rows.py, which imports torch: imported here,
        when the search asks). A subclass that changes these rules sets rows_class = None."""
        from .transformer_grammar_rows import TransformerGrammarRows

        return TransformerGrammarRows

    def _positions_for(self, state, action_id, kind):
        # The innermost open NT's depth is the number of open NTs: roots are children of <s> (depth 0).
        if kind == ActionKind.CLOSE_NT:
            depth = len(state.open_ids)
            # COMPOSE copy: attend the opening NT and its children still on the stack, pop them, push self.
            position = state.length
            count = sum(1 for p in state.stack if p >= state.open_positions[-1])
            popped, popped_depths = state.stack[-count:], state.stack_depths[-count:]
            del state.stack[-count:], state.stack_depths[-count:]
            compose = NewPosition(action_id, PositionKind.CLOSE_COMPOSE, np.array(popped + [position], dtype=np.int64),
                                  depth - np.array(popped_depths + [depth], dtype=np.int64), False, depth)
            state.stack.append(position)
            state.stack_depths.append(depth)
            # STACK copy: attend the stack and itself, not pushed.
            position += 1
            state.length += 2
            stack = NewPosition(action_id, PositionKind.CLOSE_STACK, np.array(state.stack + [position], dtype=np.int64),
                                depth - np.array(state.stack_depths + [depth], dtype=np.int64), True, depth)
            return [compose, stack]
        depth = 0 if kind == ActionKind.BOS else len(state.open_ids) + 1
        state.stack.append(state.length)
        state.stack_depths.append(depth)
        state.length += 1
        attended = np.array(state.stack, dtype=np.int64)
        relpos = depth - np.array(state.stack_depths, dtype=np.int64)
        return [NewPosition(action_id, POSITION_KIND_BY_ACTION[kind], attended, relpos, True, depth)]

    def _expanded_vectors(self, flat):
        expanded = expand_actions(flat, duplicate_closing=True)
        expanded.depth = tg_depths(expanded)
        expanded.pushed, expanded.pop_time = tg_stack_lifetimes(expanded)
        return expanded

    def _attention(self, vectors):
        # A position j is on the stack from its own step until the COMPOSE position that pops it.
        # STACK rows attend what is on the stack (and themselves); COMPOSE rows attend what they pop.
        width = vectors["input_ids"].shape[1]
        rows = np.arange(width, dtype=np.int16)[None, :, None]
        cols = np.arange(width, dtype=np.int16)[None, None, :]
        pop_time = vectors["pop_time"].astype(np.int16)[:, None, :]
        is_compose = (vectors["position_kinds"] == PositionKind.CLOSE_COMPOSE)[:, :, None]
        mask = (cols <= rows) & (pop_time > rows) & vectors["pushed"][:, None, :]
        mask &= ~is_compose
        mask |= (pop_time == rows) & is_compose
        depth = vectors["depth"].astype(np.int16)  # half the memory traffic of int64 on [B, T', T']
        return mask, depth[:, :, None] - depth[:, None, :]

    def _coordinates(self, vectors):
        return vectors["depth"]

    def stack_lifetimes(self, ids, validate=True, require_complete=True):
        """(pushed [T'] bool, removal [T'] int64) of one sequence: once position t is read, position j is on the
        stack (a later position may attend it) iff pushed[j] and j <= t < removal[j] (its COMPOSE position; past
        any sequence if never popped). Segment recurrence keeps these in its memory (segments.py)."""
        flat = FlatBatch([np.asarray(ids, dtype=np.int64)], self.layout)
        if validate:
            self._validate_flat(flat, require_complete)
        expanded = self._expanded_vectors(flat)
        return expanded.pushed, expanded.pop_time


class TransformerGrammarSequencePositionsRules(TransformerGrammarRules):
    """TG (TXL mem. & rel. pos.) of paper 000 (section 3.5, Table 2): TG's STACK/COMPOSE attention, with the
    relative position of attended cell (i, j) the distance i - j between the expanded positions, "as in a
    Transformer-XL", and Transformer-XL's memory update by default. Attended cells have j <= i, so R >= 0."""

    name = "tg_txl_positions"
    relative_position_range = (0, None)  # Transformer-XL's: every distance the model reads, never clipped
    relative_position_meaning = ("sequence distances i - j between expanded positions, under TG's attention (paper "
                                 "000 section 3.5: TG (TXL mem. & rel. pos.))")

    @property
    def default_memory_update(self):
        """The paper's variant shifts each segment onto the memory, as Transformer-XL (section 3.5)."""
        return "shift"

    @property
    def rows_class(self):
        from .transformer_grammar_rows import TransformerGrammarSequencePositionsRows

        return TransformerGrammarSequencePositionsRows

    def _positions_for(self, state, action_id, kind):
        first = state.length
        positions = super()._positions_for(state, action_id, kind)
        for index, position in enumerate(positions, start=first):  # TG's attention, the sequence's distances
            position.coordinate = index
            position.relative_positions = index - position.attended
        return positions

    def _attention(self, vectors):
        mask, _ = super()._attention(vectors)
        return mask, sequence_distances(vectors["input_ids"].shape[1])

    def _coordinates(self, vectors):
        return sequence_coordinates(vectors)


def tg_depths(expanded):
    """Tree depth of every expanded TG position (<s> 0, root NT 1, its children 2, ...), flat over a batch."""
    kinds = expanded.kinds
    opens = kinds == PositionKind.OPEN_NT
    change = opens.astype(np.int64) - (kinds == PositionKind.CLOSE_COMPOSE)
    total = np.cumsum(change)
    starts = np.concatenate([[0], np.cumsum(expanded.lengths)[:-1]]).astype(np.int64)
    level = total - (total[starts] - change[starts])[expanded.sequence_index]  # open NTs after each position
    # An opening NT sits at the level it opens; words and closed constituents one below their parent.
    # After a COMPOSE copy the level has dropped back to the parent's, so both closing copies get
    # level + 1, the depth of their opening NT.
    depth = np.where(opens, level, level + 1)
    depth[(kinds == PositionKind.BOS) | (kinds == PositionKind.PAD)] = 0
    return depth


def tg_stack_lifetimes(expanded):
    """For every position: whether it is pushed on the stack, and the COMPOSE position that pops it.

    An opening NT is popped by its own COMPOSE copy; a word or a composed constituent is popped by its
    parent's COMPOSE copy, the first COMPOSE position after it one level up. Positions never popped
    (<s>, anything still open at the end) get a pop time past any sequence. Pop times are local positions.
    """
    kinds, depth, sequence_index = expanded.kinds, expanded.depth, expanded.sequence_index
    total = len(kinds)
    pushed = (kinds != PositionKind.CLOSE_STACK) & (kinds != PositionKind.PAD)
    compose = np.flatnonzero(kinds == PositionKind.CLOSE_COMPOSE)
    target_depth = np.where(kinds == PositionKind.OPEN_NT, depth, depth - 1)
    depth_span = int(depth.max(initial=0)) + 2

    # Among COMPOSE positions sorted by (sequence, depth, position), find the first one at
    # (same sequence, target depth) after each position.
    def key(sequence, level, position):
        return (sequence * depth_span + level + 1) * (total + 1) + position

    compose_keys = key(sequence_index[compose], depth[compose], compose)
    order = np.argsort(compose_keys, kind="stable")
    found = np.searchsorted(compose_keys[order], key(sequence_index, target_depth, np.arange(total)), side="right")
    pop_time = np.full(total, np.iinfo(np.int32).max, dtype=np.int64)
    if len(compose):
        candidate = compose[order][np.minimum(found, len(compose) - 1)]
        ok = (found < len(compose)) & pushed & (kinds != PositionKind.BOS)
        ok &= (sequence_index[candidate] == sequence_index) & (depth[candidate] == target_depth)
        pop_time = np.where(ok, expanded.local_position[candidate], pop_time)
    return pushed, pop_time


class ChoeCharniakRules(CausalRules):
    """TXL (CC): trees as plain sequences `(S (NP the bird NP) S)`."""

    name = "choe_charniak"


class TerminalsRules(CausalWordsRules):
    """TXL (terminals): words only, `<s> w1 ... wn </s>`."""

    name = "terminals"


# Each family's grammars by name (its config's `grammar`), the default first: the config classes
# (transformer_grammar_config.py) and hf_slm's family records (hf_slm/families) both read these.
TRANSFORMER_GRAMMAR_GRAMMARS = {"tg": TransformerGrammarRules, "tg_txl_positions": TransformerGrammarSequencePositionsRules}
TRANSFORMER_XL_GRAMMARS = {"choe_charniak": ChoeCharniakRules, "terminals": TerminalsRules}
