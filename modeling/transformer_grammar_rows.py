"""TG's incremental states as arrays over hypotheses: the fast form of hypothesis_rows.StateListRows for
transformer_grammars.TransformerGrammarRules (its `rows_class`).

rnng-pytorch likewise keeps its whole beam state in tensors. tests/test_hypothesis_rows.py holds it equal to
StateListRows (which steps each hypothesis with grammar.step) on random walks of thousands of hypotheses.

Hub code: imports only numpy, torch and its sibling files.
"""

import numpy as np
import torch

from .grammars import NEED_KINDS, POSITION_KIND_OF_ACTION, UNREACHABLE, ActionKind, PositionKind
from .hypothesis_rows import HypothesisRows, NewPositions, numpy_rows

# Columns added at once when a row's stack or open NTs outgrow the arrays.
_SPARE_COLUMNS = 8


class TransformerGrammarRows(HypothesisRows):
    """TG's incremental state (transformer_grammars.TransformerGrammarRules) as arrays over hypotheses.

    Per row: the stack (positions and depths; `stack_size` used), the open nonterminals (ids, the stack index
    of each, where its COMPOSE copy starts popping, and its children so far), and the counters of
    grammars._GrammarState. Columns past a row's size are garbage, never read.
    """

    ARRAYS = ("stack", "stack_depth", "stack_size", "open_id", "open_stack_index", "children", "open_count",
              "length", "num_actions", "num_open_total", "trees_complete", "finished")

    def __init__(self, grammar, **arrays):
        self.grammar = grammar
        for name in self.ARRAYS:
            setattr(self, name, arrays[name])

    @classmethod
    def from_states(cls, grammar, states):
        count = len(states)
        stack_width = max([len(s.stack) for s in states] + [0]) + 2
        open_width = max([len(s.open_ids) for s in states] + [0]) + 1
        arrays = {name: np.zeros(count, np.int64) for name in ("stack_size", "open_count", "length", "num_actions",
                                                                "num_open_total", "trees_complete")}
        arrays["finished"] = np.zeros(count, bool)
        for name in ("stack", "stack_depth"):
            arrays[name] = np.zeros((count, stack_width), np.int64)
        for name in ("open_id", "open_stack_index", "children"):
            arrays[name] = np.zeros((count, open_width), np.int64)
        for row, state in enumerate(states):
            size, opened = len(state.stack), len(state.open_ids)
            arrays["stack"][row, :size], arrays["stack_depth"][row, :size] = state.stack, state.stack_depths
            arrays["open_id"][row, :opened], arrays["children"][row, :opened] = state.open_ids, state.children
            # the stack holds every open NT's own position (nothing pops it before its COMPOSE copy)
            arrays["open_stack_index"][row, :opened] = [state.stack.index(p) for p in state.open_positions]
            arrays["stack_size"][row], arrays["open_count"][row] = size, opened
            for name, value in (("length", state.length), ("num_actions", state.num_actions),
                                ("num_open_total", state.num_open_total), ("trees_complete", state.trees_complete),
                                ("finished", state.finished)):
                arrays[name][row] = value
        return cls(grammar, **arrays)

    def __len__(self):
        return len(self.length)

    def _arrays(self):
        return {name: getattr(self, name) for name in self.ARRAYS}

    def select(self, rows):
        rows = numpy_rows(rows)
        return type(self)(self.grammar, **{name: array[rows] for name, array in self._arrays().items()})

    @staticmethod
    def _concat(rows_list):
        joined = {}
        for name in TransformerGrammarRows.ARRAYS:
            parts = [getattr(rows, name) for rows in rows_list]
            if parts[0].ndim == 2:
                width = max(part.shape[1] for part in parts)
                parts = [np.pad(part, ((0, 0), (0, width - part.shape[1]))) for part in parts]
            joined[name] = np.concatenate(parts)
        return type(rows_list[0])(rows_list[0].grammar, **joined)

    def step(self, actions):
        """The successors and their positions: the vectorized form of TransformerGrammarRules._positions_for
        and Grammar._advance (actions are legal: the caller took them from legal_actions)."""
        actions = numpy_rows(actions)
        grammar = self.grammar
        kinds = grammar.action_kinds[actions]
        rows = np.arange(len(actions))
        new = {name: array.copy() for name, array in self._arrays().items()}
        # room for one more stack entry and one more open NT (and a few more: growing one column a step costs a copy
        # of every array a step)
        for names, used in ((("stack", "stack_depth"), self.stack_size), (("open_id", "open_stack_index", "children"),
                                                                          self.open_count)):
            width = int(used.max(initial=0)) + 1
            for name in names:
                if new[name].shape[1] < width:
                    new[name] = np.pad(new[name], ((0, 0), (0, width + _SPARE_COLUMNS - new[name].shape[1])))
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

        # Grammar._advance: the open nonterminals and counters.
        opening = kinds == ActionKind.OPEN_NT
        child = (opening | (kinds == ActionKind.TERMINAL)) & (opened > 0)
        new["children"][rows[child], innermost[child]] += 1
        open_rows = rows[opening]
        new["open_id"][open_rows, opened[open_rows]] = actions[open_rows]
        new["open_stack_index"][open_rows, opened[open_rows]] = size[open_rows] - 1
        new["children"][open_rows, opened[open_rows]] = 0
        opened[open_rows] += 1
        new["num_open_total"] += opening
        opened[close_rows] -= 1
        inner = close_rows[opened[close_rows] > 0]
        new["children"][inner, opened[inner] - 1] += 1
        roots = close_rows[opened[close_rows] == 0]
        new["trees_complete"][roots] += 1
        new["finished"][roots] = not grammar.document_level
        new["length"] = length + positions.count
        new["num_actions"] = self.num_actions + 1
        return type(self)(grammar, **new), positions

    def legal_actions(self, columns=None):
        """[H, V] bool: Grammar.legal_actions for bracketed trees, row by row (tests hold them equal); with
        `columns` (a long tensor of C ids), [H, C]: those ids only (the search's candidates, a few dozen of
        thousands)."""
        grammar = self.grammar
        tables = grammar.legal_table(_LEGAL_KINDS)
        if columns is not None:
            columns = columns.numpy()
            tables = tables[:, columns]
        rows = np.arange(len(self))
        innermost = np.maximum(self.open_count - 1, 0)
        children = self.children[rows, innermost]
        which = np.where(self.open_count == 0, 2, 3)
        which = np.where(self.num_actions == 0, 1, which)
        which = np.where(self.finished, 0, which)
        legal = tables[which]
        may_close = (which == 3) & (children > 0)
        closing_ids = np.broadcast_to(grammar.layout.closing_id_for(self.open_id[rows, innermost]), rows.shape)
        if columns is not None:  # the closing ids' places among the columns (-1: not a candidate)
            place = np.full(grammar.vocab_size, -1, dtype=np.int64)
            place[columns] = np.arange(len(columns))
            closing_ids = place[closing_ids]
            may_close &= closing_ids >= 0
        legal[rows[may_close], closing_ids[may_close]] = True
        return torch.from_numpy(legal)

    def completion_needs_after(self):
        """[H, len(NEED_KINDS), 2]: Grammar.completion_needs_after for TG, row by row (tests hold them equal). With
        k open NTs: a `(` costs itself, its word and k + 1 closings (two positions each); a word itself and k
        closings; a closing its two positions and the k - 1 closings left (the parent has a child now)."""
        count = len(self)
        rows = np.arange(count)
        opened = self.open_count
        children = self.children[rows, np.maximum(opened - 1, 0)]
        needs = np.full((count, len(NEED_KINDS), 2), UNREACHABLE, np.int64)
        column = {kind: NEED_KINDS.index(kind) for kind in (ActionKind.OPEN_NT, ActionKind.TERMINAL, ActionKind.CLOSE_NT)}
        may_open = ~self.finished & (self.num_actions > 0)
        may_word = ~self.finished & (opened > 0)
        may_close = may_word & (children > 0)
        for kind, legal, positions, terminals in (
                (ActionKind.OPEN_NT, may_open, 2 * opened + 4, 1),
                (ActionKind.TERMINAL, may_word, 2 * opened + 1, 1),
                (ActionKind.CLOSE_NT, may_close, 2 * opened, 0)):
            needs[legal, column[kind], 0] = positions[legal]
            needs[legal, column[kind], 1] = terminals
        return torch.from_numpy(needs)

    @property
    def positions(self):
        return torch.from_numpy(self.length)

    @property
    def open_total(self):
        return torch.from_numpy(self.num_open_total)

    @property
    def closes_root(self):
        return torch.from_numpy(self.open_count == 1)

    @property
    def complete(self):
        if self.grammar.document_level and not self.grammar.uses_eos:
            return torch.from_numpy(self.finished | ((self.trees_complete > 0) & (self.open_count == 0)))
        return torch.from_numpy(self.finished.copy())


class TransformerGrammarSequencePositionsRows(TransformerGrammarRows):
    """The fast form of transformer_grammars.TransformerGrammarSequencePositionsRules: TG's states and attention,
    each new position's coordinate its index in the sequence (R = i - j) instead of its depth."""

    def step(self, actions):
        successors, positions = super().step(actions)
        slots = np.arange(positions.coordinate.shape[1])[None, :]
        positions.coordinate = self.length[:, None] + slots
        return successors, positions


# TG's legal actions when finished, at `<s>`, outside any NT, inside one (its closing aside): rows of
# grammar.legal_table, so that legal_actions is one gather.
_LEGAL_KINDS = ((), (ActionKind.BOS,), (ActionKind.OPEN_NT,), (ActionKind.OPEN_NT, ActionKind.TERMINAL))


def _windows(table, start, length, own):
    """[H, max(length) + 1]: row h is table[h, start[h] : start[h] + length[h]], then own[h], then -1."""
    width = int(length.max(initial=0)) + 1
    columns = np.arange(width)[None, :]
    index = np.minimum(start[:, None] + columns, max(table.shape[1] - 1, 0))
    windows = np.where(columns < length[:, None], np.take_along_axis(table, index, axis=1) if table.size else 0, -1)
    windows[np.arange(len(own)), length] = own
    return windows
