"""TG's incremental states as arrays over hypotheses: the fast form of hypothesis_rows.StateListRows for
transformer_grammars.TransformerGrammarRules (its `rows_class`): bracket_rows.BracketRows (the open constituents,
the counters, legality) with TG's stack.

rnng-pytorch likewise keeps its whole beam state in tensors. tests/test_hypothesis_rows.py holds it equal to
StateListRows (which steps each hypothesis with grammar.step) on random walks of thousands of hypotheses.

Hub code: imports only numpy, torch and its sibling files.
"""

import numpy as np

from .bracket_rows import BracketRows
from .grammars import POSITION_KIND_OF_ACTION, ActionKind, PositionKind
from .hypothesis_rows import NewPositions, numpy_rows


class TransformerGrammarRows(BracketRows):
    """TG's incremental state (transformer_grammars.TransformerGrammarRules) as arrays over hypotheses: BracketRows'
    and the stack (positions and depths; `stack_size` used), with the stack index of each open nonterminal (where its
    COMPOSE copy starts popping). Columns past a row's size are garbage, never read.
    """

    ARRAYS = BracketRows.ARRAYS + ("stack", "stack_depth", "stack_size", "open_stack_index")
    OPEN_ARRAYS = BracketRows.OPEN_ARRAYS + ("open_stack_index",)

    @classmethod
    def _own_arrays(cls, states, open_width):
        count = len(states)
        stack_width = max([len(s.stack) for s in states] + [0]) + 2
        arrays = {"stack_size": np.zeros(count, np.int64), "open_stack_index": np.zeros((count, open_width), np.int64)}
        for name in ("stack", "stack_depth"):
            arrays[name] = np.zeros((count, stack_width), np.int64)
        for row, state in enumerate(states):
            size = len(state.stack)
            arrays["stack"][row, :size], arrays["stack_depth"][row, :size] = state.stack, state.stack_depths
            # the stack holds every open NT's own position (nothing pops it before its COMPOSE copy)
            arrays["open_stack_index"][row, :len(state.open_ids)] = [state.stack.index(p) for p in state.open_positions]
            arrays["stack_size"][row] = size
        return arrays

    def step(self, actions):
        """The successors and their positions: the vectorized form of TransformerGrammarRules._positions_for
        and Grammar._advance (actions are legal: the caller took them from legal_actions)."""
        actions = numpy_rows(actions)
        grammar = self.grammar
        kinds = grammar.action_kinds[actions]
        rows = np.arange(len(actions))
        new = self._copied_with_room(((("stack", "stack_depth"), self.stack_size),))
        stack, stack_depth, size, opened = new["stack"], new["stack_depth"], new["stack_size"], new["open_count"]
        length = self.length
        closing = kinds == ActionKind.CLOSE_NT
        pushing = ~closing
        innermost = np.maximum(opened - 1, 0)

        # One position for every action but a closing NT: pushed, at depth(parent) + 1 (<s>: 0), attending the
        # stack and itself.
        depth = np.where(kinds == ActionKind.BOS, 0, opened + 1)
        push_rows = rows[pushing]
        stack[push_rows, size[push_rows]] = length[push_rows]
        stack_depth[push_rows, size[push_rows]] = depth[push_rows]
        # A closing NT: the COMPOSE copy attends its opening NT and the children above it on the stack, replaces
        # them; the STACK copy attends the new stack and itself.
        close_rows = rows[closing]
        start = new["open_stack_index"][close_rows, innermost[close_rows]]
        close_depth = opened[close_rows]
        compose_attended = _windows(self.stack[close_rows], start, self.stack_size[close_rows] - start,
                                    length[close_rows])
        stack[close_rows, start] = length[close_rows]
        stack_depth[close_rows, start] = close_depth
        size[push_rows] += 1
        size[close_rows] = start + 1
        stack_attended = _windows(stack, np.zeros_like(size), np.where(closing, size, size - 1),
                                  np.where(closing, length + 1, length))

        slots = 2 if closing.any() else 1
        width = max(stack_attended.shape[1], compose_attended.shape[1])
        attended = np.full((len(rows), slots, width), -1, np.int64)
        attended[push_rows, 0, : stack_attended.shape[1]] = stack_attended[push_rows]
        input_id = np.repeat(actions[:, None], slots, axis=1)
        kind = np.zeros((len(rows), slots), np.int64)
        kind[:, 0] = POSITION_KIND_OF_ACTION[kinds]  # the closing NTs' are set below
        coordinate = np.repeat(np.where(closing, opened, depth)[:, None], slots, axis=1)
        predicts = np.zeros((len(rows), slots), bool)
        predicts[:, 0] = pushing
        if slots == 2:
            attended[close_rows, 0, : compose_attended.shape[1]] = compose_attended
            attended[close_rows, 1, : stack_attended.shape[1]] = stack_attended[close_rows]
            kind[close_rows, 0], kind[close_rows, 1] = PositionKind.CLOSE_COMPOSE, PositionKind.CLOSE_STACK
            predicts[close_rows, 1] = True
        positions = NewPositions(np.where(closing, 2, 1), input_id, kind, predicts, coordinate, attended)

        # where each opened nonterminal sits on the stack, then Grammar._advance: the open nonterminals and counters
        open_rows = rows[kinds == ActionKind.OPEN_NT]
        new["open_stack_index"][open_rows, opened[open_rows]] = size[open_rows] - 1
        self._advance(new, actions, kinds, positions.count)
        return type(self)(grammar, **new), positions


class TransformerGrammarSequencePositionsRows(TransformerGrammarRows):
    """The fast form of transformer_grammars.TransformerGrammarSequencePositionsRules: TG's states and attention,
    each new position's coordinate its index in the sequence (R = i - j) instead of its depth."""

    def step(self, actions):
        successors, positions = super().step(actions)
        slots = np.arange(positions.coordinate.shape[1])[None, :]
        positions.coordinate = self.length[:, None] + slots
        return successors, positions


def _windows(table, start, length, own):
    """[H, max(length) + 1]: row h is table[h, start[h] : start[h] + length[h]], then own[h], then -1."""
    width = int(length.max(initial=0)) + 1
    columns = np.arange(width)[None, :]
    index = np.minimum(start[:, None] + columns, max(table.shape[1] - 1, 0))
    windows = np.where(columns < length[:, None], np.take_along_axis(table, index, axis=1) if table.size else 0, -1)
    windows[np.arange(len(own)), length] = own
    return windows
