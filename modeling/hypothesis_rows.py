"""Grammar states of many hypotheses at once: what beam search and sampling step, select and ask for legality.

Beam search advances hundreds of hypotheses per round. Stepping each one's incremental state in Python (clone,
`grammar.step`, one NewPosition object per position) cost about as much as the model's forward, so the search
sees the grammar through rows:

  rows.step(actions) -> (rows, NewPositions): the successors (row i of self followed by actions[i]; self is
      not changed) and the positions each action expands to, as arrays;
  rows.select(index) / HypothesisRows.concat(list): keep, reorder, join;
  rows.legal_actions(columns=None) [H, V] (or [H, C]) bool tensor; rows.open_total, rows.closes_root, rows.complete, rows.positions
      [H] tensors; rows.completion_needs_after() [H, len(NEED_KINDS), 2] (grammar.completion_needs_after).

`StateListRows` implements them for any grammar with its incremental states (`grammar.step` and
`grammar.legal_actions`, the one source of legality). A grammar may have a fast path, its state as arrays over
hypotheses, registered in FAST_ROWS: `TransformerGrammarRows` for TG (rnng-pytorch likewise keeps its whole
beam state in tensors). Tests hold every fast path equal to StateListRows on thousands of random trees.

Hub code: imports only numpy, torch and its sibling files.
"""

from dataclasses import dataclass, fields

import numpy as np
import torch

from .grammars import _POSITION_KIND_OF_ACTION, NEED_KINDS, UNREACHABLE, ActionKind, PositionKind, TransformerGrammarRules


@dataclass
class NewPositions:
    """The positions that H actions expand to: action h adds count[h] positions (at most P), slot by slot.

    attended[h, p] lists the positions (indices in the hypothesis's sequence) that position p attends under the
    grammar's mask, increasing, itself last, -1 after; `relative` gives explicit relative positions for
    grammars whose R is not c_i - c_j (DTG's COMPOSE rows; None otherwise); `head_position` is an earlier
    position whose token embedding is added to this one's (DTG's arcs; -1: none; None: the grammar adds none);
    `composed_from[h, p]` lists the earlier positions whose input embeddings the external composer reads to make
    this position's (paper 003's Ex `)`: its direct children, in order, -1 after; all -1: its own token's;
    None: the grammar composes nothing).
    """

    count: np.ndarray  # [H] int64
    input_id: np.ndarray  # [H, P] int64
    kind: np.ndarray  # [H, P] int64, PositionKind
    predicts: np.ndarray  # [H, P] bool
    coordinate: np.ndarray  # [H, P] int64
    attended: np.ndarray  # [H, P, W] int64
    relative: np.ndarray | None = None  # [H, P, W] int64
    head_position: np.ndarray | None = None  # [H, P] int64
    composed_from: np.ndarray | None = None  # [H, P, C] int64

    def __len__(self):
        return len(self.count)

    @property
    def valid(self):
        """[H, P] bool: which slots hold a position."""
        return np.arange(self.input_id.shape[1])[None, :] < self.count[:, None]

    def select(self, rows):
        rows = _numpy_rows(rows)
        return NewPositions(**{f.name: None if getattr(self, f.name) is None else getattr(self, f.name)[rows]
                               for f in fields(self)})

    @staticmethod
    def concat(batches):
        slots = max(b.input_id.shape[1] for b in batches)
        joined = {}
        for f in fields(NewPositions):
            parts = [getattr(b, f.name) for b in batches]
            if any(part is None for part in parts):
                joined[f.name] = None
                continue
            fill = -1 if f.name in ("attended", "head_position", "composed_from") else 0
            width = max(part.shape[2] for part in parts) if parts[0].ndim == 3 else 0  # each field its own
            joined[f.name] = np.concatenate([_pad_to(part, slots, width, fill) for part in parts])
        return NewPositions(**joined)

    @staticmethod
    def from_lists(steps, relative=False, heads=False, composes=False):
        """From lists of NewPosition (grammar.step's form): steps[h] are the positions of action h. `extra_inputs`
        are a head position (`heads`, DTG) or the children a composition reads (`composes`, Ex)."""
        count = np.array([len(positions) for positions in steps], dtype=np.int64)
        rows, slots = len(steps), max(int(count.max(initial=0)), 1)
        width = max([len(p.attended) for positions in steps for p in positions] + [1])
        most_children = max([len(p.extra_inputs) for positions in steps for p in positions] + [1])
        made = NewPositions(count, np.zeros((rows, slots), np.int64), np.zeros((rows, slots), np.int64),
                            np.zeros((rows, slots), bool), np.zeros((rows, slots), np.int64),
                            np.full((rows, slots, width), -1, np.int64),
                            np.zeros((rows, slots, width), np.int64) if relative else None,
                            np.full((rows, slots), -1, np.int64) if heads else None,
                            np.full((rows, slots, most_children), -1, np.int64) if composes else None)
        for h, positions in enumerate(steps):
            for p, position in enumerate(positions):
                made.input_id[h, p], made.kind[h, p] = position.input_id, int(position.kind)
                made.predicts[h, p], made.coordinate[h, p] = position.predicts, position.coordinate
                made.attended[h, p, : len(position.attended)] = position.attended
                if relative:
                    made.relative[h, p, : len(position.attended)] = position.relative_positions
                if heads and position.extra_inputs:
                    made.head_position[h, p] = position.extra_inputs[0]
                if composes and position.extra_inputs:
                    made.composed_from[h, p, : len(position.extra_inputs)] = position.extra_inputs
        return made


def _numpy_rows(rows):
    return rows.numpy() if isinstance(rows, torch.Tensor) else np.asarray(rows, dtype=np.int64)


def _pad_to(array, slots, width, fill):
    """Pad an [H] (unchanged), [H, P] or [H, P, W] array to P = slots (and W = width)."""
    if array.ndim == 1:
        return array
    pad = [(0, 0), (0, slots - array.shape[1])] + ([(0, width - array.shape[2])] if array.ndim == 3 else [])
    return np.pad(array, pad, constant_values=fill)


class HypothesisRows:
    """The grammar states of H hypotheses (see the module docstring)."""

    def __len__(self):
        raise NotImplementedError

    @staticmethod
    def concat(rows_list):
        return type(rows_list[0])._concat(rows_list)


class StateListRows(HypothesisRows):
    """Any grammar: one incremental state per hypothesis, stepped with `grammar.step` (shared, never changed:
    a successor steps a clone)."""

    def __init__(self, grammar, states):
        self.grammar = grammar
        self.states = list(states)

    def __len__(self):
        return len(self.states)

    def select(self, rows):
        return StateListRows(self.grammar, [self.states[i] for i in _numpy_rows(rows).tolist()])

    @staticmethod
    def _concat(rows_list):
        return StateListRows(rows_list[0].grammar, [state for rows in rows_list for state in rows.states])

    def step(self, actions, starts=None):
        """starts [H]: a Nb-Up `)`'s start (grammar.step's `start`; -1 or None: none)."""
        states, steps = [], []
        step = self.grammar.step
        # only the grammars that take a start have the `start` argument
        with_start = [{}] * len(self.states) if starts is None else [{"start": s} for s in _numpy_rows(starts).tolist()]
        for state, action, extra in zip(self.states, _numpy_rows(actions).tolist(), with_start):
            state = state.clone()
            steps.append(step(state, action, check=False, **extra))  # the caller took it from legal_actions
            states.append(state)
        grammar = self.grammar
        return StateListRows(grammar, states), NewPositions.from_lists(
            steps, relative=grammar.explicit_relative_positions, heads=grammar.adds_head_tokens,
            composes=getattr(grammar, "external_composition", False))

    def legal_actions(self, columns=None):
        """[H, V] bool (or [H, C]: only the ids `columns`, a long tensor)."""
        legal = np.stack([self.grammar.legal_actions(s) for s in self.states])
        return torch.from_numpy(legal if columns is None else legal[:, columns.numpy()])

    def start_choices(self):
        """Nb-Up (a grammar that `takes_start`): ([H, C] the feasible starts C_k of a `)` now, as action indices,
        [H, C] the positions the pointer reads for them), -1 past each row's own (grammar.legal_starts and
        legal_start_positions: empty where a `)` is not legal)."""
        starts = [self.grammar.legal_starts(s) for s in self.states]
        positions = [self.grammar.legal_start_positions(s) for s in self.states]
        width = max([len(row) for row in starts] + [1])
        table = np.full((2, len(starts), width), -1, dtype=np.int64)
        for h, (row_starts, row_positions) in enumerate(zip(starts, positions)):
            table[0, h, : len(row_starts)], table[1, h, : len(row_positions)] = row_starts, row_positions
        return table[0], table[1]

    def completion_needs_after(self):
        """[H, len(NEED_KINDS), 2] long: grammar.completion_needs_after of each state."""
        needs = self.grammar.completion_needs_after
        return torch.from_numpy(np.stack([needs(s) for s in self.states]).reshape(len(self.states), len(NEED_KINDS), 2))

    @property
    def positions(self):
        """Positions of each sequence so far (what the model reads)."""
        return torch.tensor([s.length for s in self.states], dtype=torch.long)

    @property
    def open_total(self):
        """Opening NTs so far (0 for grammars without them, such as the dependency grammars)."""
        return torch.tensor([getattr(s, "num_open_total", 0) for s in self.states], dtype=torch.long)

    @property
    def closes_root(self):
        """Whether a closing action now would complete the tree (TG: the root's; DTG: the arc onto the root)."""
        return torch.tensor([self.grammar.structure_completes_tree(s) for s in self.states], dtype=torch.bool)

    @property
    def complete(self):
        """Whether the sequence is whole (in a document: the current sentence's root closed)."""
        is_complete = self.grammar.is_complete
        return torch.tensor([s.finished or is_complete(s) for s in self.states], dtype=torch.bool)


# Columns added at once when a row's stack or open NTs outgrow the arrays.
_SPARE_COLUMNS = 8


class TransformerGrammarRows(HypothesisRows):
    """TG's incremental state (grammars.TransformerGrammarRules) as arrays over hypotheses.

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
        rows = _numpy_rows(rows)
        return TransformerGrammarRows(self.grammar, **{name: array[rows] for name, array in self._arrays().items()})

    @staticmethod
    def _concat(rows_list):
        joined = {}
        for name in TransformerGrammarRows.ARRAYS:
            parts = [getattr(rows, name) for rows in rows_list]
            if parts[0].ndim == 2:
                width = max(part.shape[1] for part in parts)
                parts = [np.pad(part, ((0, 0), (0, width - part.shape[1]))) for part in parts]
            joined[name] = np.concatenate(parts)
        return TransformerGrammarRows(rows_list[0].grammar, **joined)

    def step(self, actions):
        """The successors and their positions: the vectorized form of TransformerGrammarRules._positions_for
        and Grammar._advance (actions are legal: the caller took them from legal_actions)."""
        actions = _numpy_rows(actions)
        grammar = self.grammar
        kinds = grammar._kinds[actions]
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
        kind[:, 0] = _POSITION_KIND_OF_ACTION[kinds]  # the closing NTs' are set below
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
        return TransformerGrammarRows(grammar, **new), positions

    def legal_actions(self, columns=None):
        """[H, V] bool: Grammar.legal_actions for bracketed trees, row by row (tests hold them equal); with
        `columns` (a long tensor of C ids), [H, C]: those ids only (the search's candidates, a few dozen of
        thousands)."""
        grammar = self.grammar
        tables = _legal_tables(grammar)
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


def _legal_tables(grammar):
    """[4, V] read-only: TG's legal actions when finished, at `<s>`, outside any NT, inside one (its closing
    aside), stacked once per grammar so that legal_actions is one gather."""
    tables = getattr(grammar, "_rows_legal_tables", None)
    if tables is None:
        tables = np.stack([grammar._mask(), grammar._mask(ActionKind.BOS), grammar._mask(ActionKind.OPEN_NT),
                           grammar._mask(ActionKind.OPEN_NT, ActionKind.TERMINAL)])
        tables.setflags(write=False)
        grammar._rows_legal_tables = tables
    return tables


def _windows(table, start, length, own):
    """[H, max(length) + 1]: row h is table[h, start[h] : start[h] + length[h]], then own[h], then -1."""
    width = int(length.max(initial=0)) + 1
    columns = np.arange(width)[None, :]
    index = np.minimum(start[:, None] + columns, max(table.shape[1] - 1, 0))
    windows = np.where(columns < length[:, None], np.take_along_axis(table, index, axis=1) if table.size else 0, -1)
    windows[np.arange(len(own)), length] = own
    return windows


# Grammars with a fast path, by exact class (a subclass may change the rules the fast path transcribes).
FAST_ROWS = {TransformerGrammarRules: TransformerGrammarRows}


def hypothesis_rows(grammar, states):
    """The rows of hypotheses at `states` (incremental states of `grammar`): its fast path, if it has one."""
    fast = FAST_ROWS.get(type(grammar))
    return fast.from_states(grammar, states) if fast else StateListRows(grammar, states)
