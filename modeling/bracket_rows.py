"""Bracketed-tree states as arrays over hypotheses: the fast form of hypothesis_rows.StateListRows for the grammars
whose legality and bookkeeping are `grammars.Grammar`'s (TG's, TXL (CC)'s, RNNG's, GPT2-tree's).

`BracketRows` holds what every such grammar's state has, the open constituents and the counters, and reads from them
what the search asks: the legal actions, the fewest positions to a complete tree, completeness. A subclass adds
where each action's positions go: `CausalGrammarRows` here (one position per action, attending every earlier one:
grammars.CausalRules), TG's `transformer_grammar_rows.TransformerGrammarRows` (its stack).
tests/test_hypothesis_rows.py holds each equal to StateListRows (which steps each hypothesis with grammar.step) on random walks.

Hub code: imports only numpy, torch and its sibling files.
"""

import numpy as np
import torch

from .grammars import NEED_KINDS, POSITION_KIND_OF_ACTION, UNREACHABLE, ActionKind
from .hypothesis_rows import HypothesisRows, NewPositions, numpy_rows

# Columns added at once when a row's stack or open NTs outgrow the arrays: growing one column a step would cost a
# copy of every array a step.
SPARE_COLUMNS = 8
# Legal actions when finished, at `<s>`, outside any NT, inside one (its closing aside): rows of grammar.legal_table,
# so that legal_actions is one gather.
_LEGAL_KINDS = ((), (ActionKind.BOS,), (ActionKind.OPEN_NT,), (ActionKind.OPEN_NT, ActionKind.TERMINAL))


class BracketRows(HypothesisRows):
    """The open constituents (ids, children so far) and the counters of grammars._GrammarState as arrays over
    hypotheses. Columns past a row's open_count are garbage, never read. A subclass names its own arrays in ARRAYS
    (after these) and fills them in `_own_arrays`."""

    ARRAYS = ("open_id", "children", "open_count", "length", "num_actions", "num_open_total", "trees_complete",
              "finished")
    OPEN_ARRAYS = ("open_id", "children")  # [H, open constituents]

    def __init__(self, grammar, **arrays):
        self.grammar = grammar
        for name in self.ARRAYS:
            setattr(self, name, arrays[name])

    @classmethod
    def from_states(cls, grammar, states):
        count = len(states)
        open_width = max([len(s.open_ids) for s in states] + [0]) + 1
        arrays = {name: np.zeros(count, np.int64) for name in ("open_count", "length", "num_actions", "num_open_total",
                                                                "trees_complete")}
        arrays["finished"] = np.zeros(count, bool)
        for name in cls.OPEN_ARRAYS:
            arrays[name] = np.zeros((count, open_width), np.int64)
        for row, state in enumerate(states):
            opened = len(state.open_ids)
            arrays["open_id"][row, :opened], arrays["children"][row, :opened] = state.open_ids, state.children
            arrays["open_count"][row] = opened
            for name, value in (("length", state.length), ("num_actions", state.num_actions),
                                ("num_open_total", state.num_open_total), ("trees_complete", state.trees_complete),
                                ("finished", state.finished)):
                arrays[name][row] = value
        arrays.update(cls._own_arrays(states, open_width))
        return cls(grammar, **arrays)

    @classmethod
    def _own_arrays(cls, states, open_width):
        """A subclass's arrays of `states` beyond the shared ones ({name: array})."""
        return {}

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
        for name in type(rows_list[0]).ARRAYS:
            parts = [getattr(rows, name) for rows in rows_list]
            if parts[0].ndim == 2:
                width = max(part.shape[1] for part in parts)
                parts = [np.pad(part, ((0, 0), (0, width - part.shape[1]))) for part in parts]
            joined[name] = np.concatenate(parts)
        return type(rows_list[0])(rows_list[0].grammar, **joined)

    def _copied_with_room(self, names_and_used):
        """A copy of every array, the 2-D ones of each (names, used) group with room for one more entry than `used`
        [H] counts (and SPARE_COLUMNS more)."""
        new = {name: array.copy() for name, array in self._arrays().items()}
        for names, used in ((self.OPEN_ARRAYS, self.open_count), *names_and_used):
            width = int(used.max(initial=0)) + 1
            for name in names:
                if new[name].shape[1] < width:
                    new[name] = np.pad(new[name], ((0, 0), (0, width + SPARE_COLUMNS - new[name].shape[1])))
        return new

    def _advance(self, new, actions, kinds, added_positions):
        """Grammar._advance over the rows, in the copied arrays `new`: the open constituents and the counters after
        `actions` (their ActionKinds `kinds`), which added `added_positions` [H] positions."""
        rows = np.arange(len(actions))
        opened = new["open_count"]
        innermost = np.maximum(opened - 1, 0)
        opening = kinds == ActionKind.OPEN_NT
        child = (opening | (kinds == ActionKind.TERMINAL)) & (opened > 0)
        new["children"][rows[child], innermost[child]] += 1
        open_rows = rows[opening]
        new["open_id"][open_rows, opened[open_rows]] = actions[open_rows]
        new["children"][open_rows, opened[open_rows]] = 0
        opened[open_rows] += 1
        new["num_open_total"] += opening
        close_rows = rows[kinds == ActionKind.CLOSE_NT]
        opened[close_rows] -= 1
        inner = close_rows[opened[close_rows] > 0]
        new["children"][inner, opened[inner] - 1] += 1
        roots = close_rows[opened[close_rows] == 0]
        new["trees_complete"][roots] += 1
        new["finished"][roots] = not self.grammar.document_level
        new["length"] = self.length + added_positions
        new["num_actions"] = self.num_actions + 1

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
        """[H, len(NEED_KINDS), 2]: Grammar.completion_needs_after, row by row (tests hold them equal). With k open
        NTs and c positions a closing NT (2 under TG, which duplicates it; else 1): a `(` costs itself, its word and
        k + 1 closings; a word itself and k closings; a closing the k it leaves (the parent has a child now) and
        itself."""
        count = len(self)
        rows = np.arange(count)
        opened = self.open_count
        close = 2 if self.grammar.duplicates_closing else 1
        children = self.children[rows, np.maximum(opened - 1, 0)]
        needs = np.full((count, len(NEED_KINDS), 2), UNREACHABLE, np.int64)
        column = {kind: NEED_KINDS.index(kind) for kind in (ActionKind.OPEN_NT, ActionKind.TERMINAL, ActionKind.CLOSE_NT)}
        may_open = ~self.finished & (self.num_actions > 0)
        may_word = ~self.finished & (opened > 0)
        may_close = may_word & (children > 0)
        for kind, legal, positions, terminals in (
                (ActionKind.OPEN_NT, may_open, close * (opened + 1) + 2, 1),
                (ActionKind.TERMINAL, may_word, close * opened + 1, 1),
                (ActionKind.CLOSE_NT, may_close, close * opened, 0)):
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


class CausalGrammarRows(BracketRows):
    """grammars.CausalRules' states (TXL (CC), RNNG, GPT2-tree): one position per action, its coordinate its index,
    attending every position up to itself."""

    def step(self, actions):
        """The successors and their positions (actions are legal: the caller took them from legal_actions)."""
        actions = numpy_rows(actions)
        kinds = self.grammar.action_kinds[actions]
        new = self._copied_with_room(())
        self._advance(new, actions, kinds, np.ones(len(actions), np.int64))
        length = self.length
        columns = np.arange(int(length.max(initial=0)) + 1)[None, :]
        attended = np.where(columns <= length[:, None], columns, -1)[:, None, :]
        positions = NewPositions(np.ones(len(actions), np.int64), actions[:, None].copy(),
                                 POSITION_KIND_OF_ACTION[kinds][:, None].astype(np.int64),
                                 np.ones((len(actions), 1), bool), length[:, None].copy(), attended)
        return type(self)(self.grammar, **new), positions
