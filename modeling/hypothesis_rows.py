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
hypotheses, which it names as its `rows_class` (bracket_rows.py: the causal grammars' and, with its stack in
transformer_grammar_rows.py, TG's). Tests hold every fast path
equal to StateListRows on thousands of random trees.

Hub code: imports only numpy, torch and its sibling files.
"""

from dataclasses import dataclass, fields

import numpy as np
import torch

from .grammar_protocol import NEED_KINDS


@dataclass
class NewPositions:
    """The positions that H actions expand to: action h adds count[h] positions (at most P), slot by slot.

    attended[h, p] lists the positions (indices in the hypothesis's sequence) that position p attends under the
    grammar's mask, increasing, itself last, -1 after; `relative` gives explicit relative positions for
    grammars whose R is not c_i - c_j (DTG's COMPOSE rows; None otherwise); `references[h, p]` lists the earlier
    positions whose input position p reads besides its token (NewPosition.extra_inputs, -1 after: DTG's arcs, the
    head word's last piece; paper 003's Ex `)`, its direct children, in order), None for a grammar whose positions
    read none (grammar.references_positions). The model's family hooks say what they mean.
    """

    count: np.ndarray  # [H] int64
    input_id: np.ndarray  # [H, P] int64
    kind: np.ndarray  # [H, P] int64, PositionKind
    predicts: np.ndarray  # [H, P] bool
    coordinate: np.ndarray  # [H, P] int64
    attended: np.ndarray  # [H, P, W] int64
    relative: np.ndarray | None = None  # [H, P, W] int64
    references: np.ndarray | None = None  # [H, P, C] int64

    def __len__(self):
        return len(self.count)

    @property
    def valid(self):
        """[H, P] bool: which slots hold a position."""
        return np.arange(self.input_id.shape[1])[None, :] < self.count[:, None]

    def select(self, rows):
        rows = numpy_rows(rows)
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
            fill = -1 if f.name in ("attended", "references") else 0
            width = max(part.shape[2] for part in parts) if parts[0].ndim == 3 else 0  # each field its own
            joined[f.name] = np.concatenate([_pad_to(part, slots, width, fill) for part in parts])
        return NewPositions(**joined)

    @staticmethod
    def from_lists(steps, relative=False, references=False):
        """From lists of NewPosition (grammar.step's form): steps[h] are the positions of action h; with `relative`
        their explicit relative positions, with `references` their extra_inputs (grammar.references_positions)."""
        count = np.array([len(positions) for positions in steps], dtype=np.int64)
        rows, slots = len(steps), max(int(count.max(initial=0)), 1)
        width = max([len(p.attended) for positions in steps for p in positions] + [1])
        most_references = max([len(p.extra_inputs) for positions in steps for p in positions] + [1])
        made = NewPositions(count, np.zeros((rows, slots), np.int64), np.zeros((rows, slots), np.int64),
                            np.zeros((rows, slots), bool), np.zeros((rows, slots), np.int64),
                            np.full((rows, slots, width), -1, np.int64),
                            np.zeros((rows, slots, width), np.int64) if relative else None,
                            np.full((rows, slots, most_references), -1, np.int64) if references else None)
        for h, positions in enumerate(steps):
            for p, position in enumerate(positions):
                made.input_id[h, p], made.kind[h, p] = position.input_id, int(position.kind)
                made.predicts[h, p], made.coordinate[h, p] = position.predicts, position.coordinate
                made.attended[h, p, : len(position.attended)] = position.attended
                if relative:
                    made.relative[h, p, : len(position.attended)] = position.relative_positions
                if references and position.extra_inputs:
                    made.references[h, p, : len(position.extra_inputs)] = position.extra_inputs
        return made


def numpy_rows(rows):
    """Row indices or per-row values (a torch tensor on the CPU, or a sequence) as an int64 numpy array: what a
    rows class (a family's fast form too) steps and selects with."""
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
        return StateListRows(self.grammar, [self.states[i] for i in numpy_rows(rows).tolist()])

    @staticmethod
    def _concat(rows_list):
        return StateListRows(rows_list[0].grammar, [state for rows in rows_list for state in rows.states])

    def step(self, actions, starts=None):
        """starts [H]: a Nb-Up `)`'s start (grammar.step's `start`; -1 or None: none)."""
        states, steps = [], []
        step = self.grammar.step
        # only the grammars that take a start have the `start` argument
        with_start = [{}] * len(self.states) if starts is None else [{"start": s} for s in numpy_rows(starts).tolist()]
        for state, action, extra in zip(self.states, numpy_rows(actions).tolist(), with_start):
            state = state.clone()
            steps.append(step(state, action, check=False, **extra))  # the caller took it from legal_actions
            states.append(state)
        grammar = self.grammar
        return StateListRows(grammar, states), NewPositions.from_lists(
            steps, relative=grammar.explicit_relative_positions, references=grammar.references_positions)

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
        """Constituents begun so far (grammar.open_total: 0 for grammars without them, such as the dependency
        grammars)."""
        return torch.tensor([self.grammar.open_total(s) for s in self.states], dtype=torch.long)

    @property
    def closes_root(self):
        """Whether a closing action now would complete the tree (TG: the root's; DTG: the arc onto the root)."""
        return torch.tensor([self.grammar.structure_completes_tree(s) for s in self.states], dtype=torch.bool)

    @property
    def complete(self):
        """Whether the sequence is whole (in a document: the current sentence's root closed)."""
        is_complete = self.grammar.is_complete
        return torch.tensor([s.finished or is_complete(s) for s in self.states], dtype=torch.bool)


def hypothesis_rows(grammar, states):
    """The rows of hypotheses at `states` (incremental states of `grammar`): its fast form (`grammar.rows_class`),
    if it has one, else StateListRows."""
    fast = grammar.rows_class
    return fast.from_states(grammar, states) if fast is not None else StateListRows(grammar, states)


def prefix_rows(grammar, sequences):
    """(rows, NewPositions): one row per action sequence (`<s>`, then any document prefix; a Nb-Up prefix's
    ActionIds step with their starts) and the positions each whole sequence expands to, as a search's first call
    reads them."""
    states, steps = [], []
    for sequence in sequences:
        state = grammar.start()
        starts = getattr(sequence, "starts", None)
        if starts is None:
            steps.append([position for action in sequence for position in grammar.step(state, action)])
        else:
            steps.append([position for action, start in zip(sequence, starts)
                          for position in grammar.step(state, action, start=start)])
        states.append(state)
    return hypothesis_rows(grammar, states), NewPositions.from_lists(
        steps, relative=grammar.explicit_relative_positions, references=grammar.references_positions)
