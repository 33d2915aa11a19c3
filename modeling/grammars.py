"""Grammars of bracketed trees: which positions an action sequence expands to, what each attends, where it sits.

A grammar turns a sequence of action ids (starting with `<s>`) into the model's inputs: expanded ids,
a boolean attention mask [T', T'], integer relative positions [T', T'] and labels [T'] (-100 where
nothing is predicted), and says which kinds of action may come next. Each grammar has two faces built
on the same rules:

- `sequence(ids)`: the whole sequence at once (training, scoring), vectorized with numpy;
- `start()` / `step(state, id)`: one action at a time (generation, beam search), a direct transcription
  of the paper's algorithm. Tests hold the two equal on thousands of random trees.

`legal_actions(state)` is the one source of legality: a bool mask over the vocabulary of the actions that
may follow a prefix. `step` validates with it, the sampler and the beam search start from it (search
constraints such as forced words or p_c are a separate layer, search_constraints.py), and the vectorized
validation of whole batches is a fast path that tests hold equal to it.

What every family over bracketed trees builds on (a family's grammars are in its own file, e.g.
transformer_grammars.py for paper 000's):
- `ActionLayout`: where each action kind lives in the vocabulary.
- `Grammar`: the legality of bracketed trees (top-down, `(X ... X)`; a document of several trees), validation,
  and `batch`, which pads what a subclass's `_expanded_vectors` and `_attention` give. A subclass says where each
  position sits (`_positions_for`) and what it attends.
- `CausalRules`: those trees under causal attention, relative positions i - j; `CausalWordsRules`: words only,
  `<s> w1 ... wn </s>`, under causal attention.
- The vectorized form's pieces, for a subclass's `_expanded_vectors`: `FlatBatch` (a batch as one array),
  `expand_actions` (positions of the actions, closing NTs optionally duplicated into COMPOSE and STACK copies),
  `ExpandedPositions`, `POSITION_KIND_OF_ACTION` / `POSITION_KIND_BY_ACTION` and `any_per_sequence`.
- `grammar_for_config(config)`: the grammar a model config names.

This file is hub code: it is copied into checkpoints and must import nothing from hf_slm.
"""

from dataclasses import dataclass

import numpy as np

from .grammar_protocol import (IGNORE_INDEX, NEED_KINDS, POSITION_KIND_NAMES, UNREACHABLE, ActionKind,  # noqa: F401
                               GrammarProtocol, GrammarSequence, NewPosition, PositionKind)


@dataclass(frozen=True)
class ActionLayout:
    """Where each action kind lives in the vocabulary.

    Opening and closing nonterminals occupy contiguous id ranges [start, stop) in the same label order,
    so `close_id - close_nt_start == open_id - open_nt_start` for a matching pair. A closing range of
    length one means unlabeled closing brackets (any `)` closes any constituent). Every other id that is
    not pad/bos/eos is a terminal (word pieces, unk).
    """

    pad_token_id: int
    bos_token_id: int
    eos_token_id: int
    open_nt_start: int
    open_nt_stop: int
    close_nt_start: int
    close_nt_stop: int
    unk_token_id: int | None = None  # a terminal that legality allows (data has unknown words) and generation never picks
    vocab_size: int | None = None  # number of ids; None: close_nt_stop (hf-slm vocabularies end with the NTs)

    def __post_init__(self):
        n_open = self.open_nt_stop - self.open_nt_start
        n_close = self.close_nt_stop - self.close_nt_start
        if n_close not in (0, 1, n_open):
            raise ValueError(
                f"closing nonterminal range has {n_close} ids; expected {n_open} (one per opening label), "
                "1 (unlabeled) or 0 (no nonterminals)"
            )

    @property
    def size(self):
        """Number of ids in the vocabulary (every id past the specials and nonterminals is a terminal)."""
        if self.vocab_size is not None:
            return int(self.vocab_size)
        return max(self.close_nt_stop, self.open_nt_stop, self.pad_token_id + 1, self.bos_token_id + 1,
                   self.eos_token_id + 1)

    @property
    def labeled(self):
        return self.close_nt_stop - self.close_nt_start > 1 or self.open_nt_stop - self.open_nt_start == 1

    def kinds(self, ids):
        """ActionKind of every id, as an int8 numpy array of the same shape."""
        ids = np.asarray(ids)
        kinds = np.full(ids.shape, ActionKind.TERMINAL, dtype=np.int8)
        kinds[(ids >= self.open_nt_start) & (ids < self.open_nt_stop)] = ActionKind.OPEN_NT
        kinds[(ids >= self.close_nt_start) & (ids < self.close_nt_stop)] = ActionKind.CLOSE_NT
        kinds[ids == self.pad_token_id] = ActionKind.PAD
        kinds[ids == self.bos_token_id] = ActionKind.BOS
        kinds[ids == self.eos_token_id] = ActionKind.EOS
        return kinds

    def kind(self, action_id):
        return ActionKind(int(self.kinds(np.array([action_id]))[0]))

    def closing_id_for(self, open_id):
        """The closing action that matches an opening one."""
        if self.close_nt_stop - self.close_nt_start == 1:
            return self.close_nt_start
        return self.close_nt_start + (open_id - self.open_nt_start)

    def to_dict(self):
        """The id ranges and specials, as config fields (not vocab_size: a model may have more ids)."""
        return {name: value for name, value in self.__dict__.items() if name != "vocab_size"}

    @classmethod
    def from_config(cls, config):
        """Read the layout from a model config (fields of the same names)."""
        fields = {}
        for name in cls.__dataclass_fields__:
            value = getattr(config, name, None)
            fields[name] = None if value is None else int(value)
        return cls(**fields)


class _GrammarState:
    """Incremental state: everything the rules need to know about the prefix read so far."""

    # Slots and an explicit copy: beam search clones a state for every successor it keeps.
    __slots__ = ("length", "stack", "stack_depths", "open_positions", "open_ids", "children", "num_open_total",
                 "num_actions", "num_terminals", "trees_complete", "finished")

    def __init__(self):
        self.length = 0  # positions emitted so far
        self.stack = []  # positions attendable by STACK attention (a grammar with a stack)
        self.stack_depths = []  # their depths
        self.open_positions = []  # positions of the open NTs, innermost last
        self.open_ids = []  # their action ids
        self.children = []  # number of children of each open NT
        self.num_open_total = 0
        self.num_actions = 0
        self.num_terminals = 0
        self.trees_complete = 0  # closed roots (document-level grammars read several trees)
        self.finished = False

    def clone(self):
        """An independent copy (beam search branches a hypothesis into several)."""
        copy = _GrammarState.__new__(_GrammarState)
        copy.length, copy.num_open_total, copy.num_actions = self.length, self.num_open_total, self.num_actions
        copy.num_terminals, copy.trees_complete, copy.finished = self.num_terminals, self.trees_complete, self.finished
        copy.stack, copy.stack_depths = self.stack[:], self.stack_depths[:]
        copy.open_positions, copy.open_ids, copy.children = self.open_positions[:], self.open_ids[:], self.children[:]
        return copy


class Grammar(GrammarProtocol):
    """Shared validation and legality rules; subclasses define attention and positions.

    A sentence-level grammar reads one tree: `<s>` then one root constituent, and nothing after the root
    closes. With `document_level=True` it reads a document: `<s>` then any number of trees, each root a
    child of `<s>` (paper 000, section 3.1). Under TG a new sentence then attends the earlier sentences
    through their composed roots, all at the same depth, so their order is not visible to it. The end of
    a document is not predicted: a sequence is complete after any closed root.
    """

    duplicated_actions = "closing nonterminals"  # what duplicates_closing duplicates, in words (model cards)
    compose_kinds = frozenset({PositionKind.CLOSE_COMPOSE})  # the COMPOSE copy of a duplicated closing NT
    reducing_kinds = frozenset({ActionKind.CLOSE_NT})
    top_down = True  # a constituent opens with `(X` before its children
    # What a tokenizer for this grammar must produce ("top_down" bracketed trees, or "terminals" only).
    linearization = "top_down"
    layout_class = ActionLayout

    def __init__(self, layout, document_level=False):
        super().__init__(layout, document_level=document_level)
        self._kind_members = [ActionKind(int(k)) for k in self.action_kinds]  # enum lookups are slow in `step`
        self._mask_cache = {}

    # ---- legality: the one source ------------------------------------------------------------------
    def legal_actions(self, state):
        """Bool mask [vocab_size] of the actions that may follow the prefix in `state`.

        The returned array is shared and read-only: copy it before changing it. Subclasses define
        `_legal_after_start`; everything that needs legality (validation, sampling, beam search) asks here.
        """
        if state.finished:
            return self._mask()
        if state.num_actions == 0:
            return self._mask(ActionKind.BOS)
        return self._legal_after_start(state)

    def _legal_after_start(self, state):
        """Bracketed trees (TG, TXL (CC)): a root opens after `<s>` (in a document, after every closed
        root); inside a constituent any NT opens and any word comes; the innermost constituent closes, with
        its own label, once it has a child."""
        if not state.open_ids:
            return self._mask(ActionKind.OPEN_NT)
        if state.children[-1] == 0:
            return self._mask(ActionKind.OPEN_NT, ActionKind.TERMINAL)
        closing = self.layout.closing_id_for(state.open_ids[-1])
        return self._mask(ActionKind.OPEN_NT, ActionKind.TERMINAL, extra_id=closing)

    def _mask(self, *kinds, extra_id=None):
        """The read-only mask of every id of the given kinds, plus `extra_id` (cached: a handful exist)."""
        key = (kinds, extra_id)
        if key not in self._mask_cache:
            mask = np.isin(self.action_kinds, np.array(kinds, dtype=np.int8)) if kinds else np.zeros(self.vocab_size, bool)
            if extra_id is not None:
                mask[extra_id] = True
            mask.setflags(write=False)
            self._mask_cache[key] = mask
        return self._mask_cache[key]

    def _check_action(self, state, action_id, kind):
        """Raise ValueError naming the action and what was expected, unless `legal_actions` allows it."""
        where = f"action {state.num_actions} (id {action_id}, {kind.name})"
        legal = self._refused(state, action_id, f"{self.name} grammar: {where}")
        if legal is None:
            return
        allowed = self.allowed_next_kinds(state)
        if kind in allowed:  # the kind may come here, but not this id: a closing NT of the wrong label
            expected = np.flatnonzero(legal & (self.action_kinds == kind)).tolist()
            raise ValueError(
                f"{self.name} grammar: {where} closes the wrong label; expected id {expected[0] if len(expected) == 1 else expected} "
                f"to close the constituent opened by id {state.open_ids[-1]}"
            )
        expected = ", ".join(sorted(k.name for k in allowed)) or "nothing (the sequence is complete)"
        raise ValueError(f"{self.name} grammar: {where} is not allowed here; expected {expected}")

    # ---- incremental ----------------------------------------------------------------------------
    def start(self):
        return _GrammarState()

    def step(self, state, action_id, check=True):
        """Feed one action; return the list of NewPosition it expands to. It is validated first unless
        `check=False`: for callers that took it from `legal_actions(state)` already (beam search)."""
        action_id = int(action_id)
        kind = self._kind_members[action_id] if 0 <= action_id < self.vocab_size else self.layout.kind(action_id)
        if check:
            self._check_action(state, action_id, kind)
        positions = self._positions_for(state, action_id, kind)
        self._advance(state, action_id, kind, opening_position=state.length - 1)
        return positions

    def _advance(self, state, action_id, kind, opening_position=-1):
        """Bookkeeping shared by all grammars, after an action was accepted."""
        state.num_actions += 1
        if kind == ActionKind.OPEN_NT:
            state.num_open_total += 1
            if state.open_ids:
                state.children[-1] += 1
            state.open_positions.append(opening_position)
            state.open_ids.append(action_id)
            state.children.append(0)
        elif kind == ActionKind.TERMINAL:
            state.num_terminals += 1
            if state.open_ids:
                state.children[-1] += 1
        elif kind == ActionKind.CLOSE_NT:
            state.open_positions.pop()
            state.open_ids.pop()
            state.children.pop()
            if state.open_ids:
                state.children[-1] += 1
            else:
                state.trees_complete += 1
                state.finished = not self.document_level
        elif kind == ActionKind.EOS:
            state.finished = True

    def open_total(self, state):
        return state.num_open_total

    def minimum_positions(self, pieces, words):
        """The fewest positions a sentence of `words` words in `pieces` pieces expands to, `<s>` included: one
        constituent around the pieces (TG: its closing bracket is two positions, COMPOSE and STACK), or `</s>`
        for a words-only grammar. The grammar counts them itself on a one-piece sentence; each further piece
        is one more position."""
        if "_one_piece_positions" not in self.__dict__:
            layout = self.layout
            piece = int(np.flatnonzero(self.action_kinds == ActionKind.TERMINAL)[0])
            if self.words_only:
                actions = [layout.bos_token_id, piece, layout.eos_token_id]
            else:
                actions = [layout.bos_token_id, layout.open_nt_start, piece, layout.closing_id_for(layout.open_nt_start)]
            state = self.start()
            self._one_piece_positions = sum(len(self.step(state, action)) for action in actions)
        return self._one_piece_positions + pieces - 1

    def completion_need(self, state):
        """(positions, terminals) still needed (LegalityChecks): close every open constituent (TG: COMPOSE and
        STACK, two positions each), after one word in the innermost if it has no child yet; a words-only grammar
        needs `</s>`, after a first word."""
        if state.finished or self.is_complete(state):
            return 0, 0
        if state.num_actions == 0:
            return self.minimum_positions(1, 1), 1
        if self.words_only:
            return (1, 0) if state.num_terminals else (2, 1)
        close = 2 if self.duplicates_closing else 1
        if not state.open_ids:  # a root still to open (after `<s>`, or between a document's trees)
            return 2 + close, 1
        empty = int(state.children[-1] == 0)
        return close * len(state.open_ids) + empty, empty

    def structure_completes_tree(self, state):
        """Whether a closing action now would complete the tree: the root is the only open constituent."""
        return len(state.open_ids) == 1

    def is_complete(self, state):
        """Whether the prefix read so far is a whole sequence (a document may go on after a complete one)."""
        if self.document_level and not self.uses_eos:
            return state.trees_complete > 0 and not state.open_ids
        return state.finished

    def _positions_for(self, state, action_id, kind):
        raise NotImplementedError

    # ---- whole sequences ------------------------------------------------------------------------
    # All sequences of a batch are concatenated into one flat array, so every step below is a handful of
    # numpy calls per batch (not per sequence), and the [B, T', T'] mask comes from broadcast comparisons.

    def validate(self, ids, require_complete=True):
        """Check one sequence against the rules; raise ValueError naming the first illegal action."""
        flat = FlatBatch([np.asarray(ids, dtype=np.int64)], self.layout)
        if not self._valid_sequences(flat, require_complete)[0]:
            self._raise_first_error(flat.sequences[0], require_complete)

    def valid_sequences(self, sequences, require_complete=True):
        """A bool per sequence: whether it follows the rules (the vectorized fast path of `legal_actions`)."""
        return self._valid_sequences(FlatBatch([np.asarray(ids, dtype=np.int64) for ids in sequences], self.layout),
                                     require_complete)

    def validate_batch(self, sequences, require_complete=True):
        """Check many sequences at once (vectorized); raise ValueError naming the first bad one and its action."""
        self._validate_flat(FlatBatch([np.asarray(ids, dtype=np.int64) for ids in sequences], self.layout),
                            require_complete)

    def _validate_flat(self, flat, require_complete):
        valid = self._valid_sequences(flat, require_complete)
        if not valid.all():
            index = int(np.flatnonzero(~valid)[0])
            try:
                self._raise_first_error(flat.sequences[index], require_complete)
            except ValueError as error:
                raise ValueError(f"sequence {index}: {error}") from None

    def _raise_first_error(self, ids, require_complete):
        """Replay a sequence action by action with the incremental rules, to name what is wrong."""
        state = self.start()
        for action_id in ids:
            action_id = int(action_id)
            kind = self.layout.kind(action_id)
            self._check_action(state, action_id, kind)
            self._advance(state, action_id, kind)
        if require_complete and not self.is_complete(state):
            raise ValueError(f"{self.name} grammar: the sequence of {len(ids)} actions ends before it is complete")
        raise AssertionError("the vectorized and incremental legality rules disagree")  # pragma: no cover

    def _valid_sequences(self, flat, require_complete):
        """Vectorized form of the legality rules of `allowed_next_kinds`: one bool per sequence."""
        kinds, seq = flat.kinds, flat.sequence_index
        first = flat.starts
        last = flat.starts + flat.lengths - 1
        count = len(first)
        bad = (kinds == ActionKind.PAD) | ((kinds == ActionKind.BOS) != flat.is_first)
        bad |= (flat.ids < 0) | (flat.ids >= self.vocab_size)
        if self.uses_eos:
            bad |= (kinds == ActionKind.OPEN_NT) | (kinds == ActionKind.CLOSE_NT)
            is_eos = kinds == ActionKind.EOS
            bad |= is_eos & ~flat.is_last  # </s> only at the end
            bad |= is_eos & (flat.local_position == 1)  # and after at least one word
            valid = ~any_per_sequence(bad, seq, count)
            if require_complete:
                valid &= is_eos[last]
            return valid
        bad |= kinds == ActionKind.EOS
        is_open = kinds == ActionKind.OPEN_NT
        is_close = kinds == ActionKind.CLOSE_NT
        level = flat.segment_cumsum(is_open.astype(np.int64) - is_close)  # open constituents after each action
        # After <s> (level 0) only a root may open; a sentence-level sequence reaches level 0 again only at
        # its end, a document whenever a root closes.
        level_before = level - is_open + is_close
        bad |= (level_before <= 0) & ~is_open & ~flat.is_first
        if not self.document_level:
            bad |= (level <= 0) & ~flat.is_first & ~flat.is_last
        bad |= level < 0
        bad[1:] |= is_close[1:] & is_open[:-1]  # a constituent closed with no child
        valid = ~any_per_sequence(bad, seq, count)
        if require_complete:
            valid &= (level[last] == 0) & (flat.lengths >= 2)
        if self.layout.labeled and valid.any():
            # Opening and closing NTs of one constituent sit at the same level: sorting all of them by
            # (sequence, level, position) puts each opening right before its closing.
            opens = np.flatnonzero(is_open)
            closes = np.flatnonzero(is_close)
            events = np.concatenate([opens, closes])
            event_level = np.concatenate([level[opens], level[closes] + 1])
            depth_span = int(event_level.max(initial=0)) + 2
            keys = (seq[events] * depth_span + event_level) * (len(kinds) + 1) + events
            ordered = events[np.argsort(keys, kind="stable")]
            # Within one sequence of the batch, pairs line up only if it is balanced: pair them only for
            # complete sequences (the others are replayed one action at a time).
            if require_complete and len(ordered) % 2 == 0:
                pairs = ordered.reshape(-1, 2)
                wrong = ~is_open[pairs[:, 0]] | ~is_close[pairs[:, 1]]
                wrong |= seq[pairs[:, 0]] != seq[pairs[:, 1]]
                wrong |= flat.ids[pairs[:, 1]] != self.layout.closing_id_for(flat.ids[pairs[:, 0]])
                valid &= ~any_per_sequence(wrong, seq[pairs[:, 0]], count)
            else:
                valid &= np.array([self._labels_match(ids) for ids in flat.sequences])
        return valid

    def _labels_match(self, ids):
        state = self.start()
        for action_id in ids:
            action_id = int(action_id)
            kind = self.layout.kind(action_id)
            try:
                self._check_action(state, action_id, kind)
            except ValueError:
                return False
            self._advance(state, action_id, kind)
        return True

    def batch(self, sequences, validate=True, require_complete=True, pad_to_multiple_of=None, max_length=None,
              with_relative_positions=True):
        """Model inputs for a batch of action-id sequences, padded to the longest expanded length.

        Returns numpy arrays over the T' expanded positions: input_ids [B, T'] (padded with pad_token_id),
        position_kinds [B, T'], attention_mask [B, T', T'] bool, relative_positions [B, T', T'] int64 (only
        with `with_relative_positions`), labels [B, T'] (the action each position predicts), depth [B, T'],
        position_coordinates [B, T'], expansion_index [B, T'] (the action each position comes from),
        lengths [B]; and over the T actions: prediction_index [B, T] (the position whose output predicts
        the next action; 0 for padding) and action_lengths [B]. Padding columns are never attended; a
        padding row attends only itself (so that no softmax row is empty) and predicts nothing.
        Raises ValueError naming the sequence when one breaks the grammar or expands past `max_length`.
        """
        sequences = [np.asarray(ids, dtype=np.int64) for ids in sequences]
        if not sequences:
            raise ValueError(f"{self.name} grammar: expected at least one sequence, got an empty batch")
        for index, ids in enumerate(sequences):
            if ids.ndim != 1 or len(ids) == 0:
                raise ValueError(
                    f"{self.name} grammar: sequence {index}: expected a non-empty 1-D list of action ids, "
                    f"got shape {ids.shape}"
                )
        flat = FlatBatch(sequences, self.layout)
        if validate:
            self._validate_flat(flat, require_complete)
        expanded = self._expanded_vectors(flat)
        lengths = expanded.lengths
        if max_length is not None and lengths.max() > max_length:
            index = int(lengths.argmax())
            raise ValueError(
                f"sequence {index} expands to {lengths[index]} positions under the {self.name} grammar; "
                f"the maximum is {max_length}"
            )
        width = int(lengths.max())
        if pad_to_multiple_of:
            width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
        rows, cols = expanded.sequence_index, expanded.local_position

        def padded(values, fill):
            array = np.full((len(sequences), width), fill, dtype=values.dtype)
            array[rows, cols] = values
            return array

        vectors = {
            "input_ids": padded(expanded.ids, self.layout.pad_token_id),
            "position_kinds": padded(expanded.kinds, PositionKind.PAD),
            "depth": padded(expanded.depth, 0),
            "pushed": padded(expanded.pushed, False),
            "pop_time": padded(np.minimum(expanded.pop_time, width + 1), width + 1),
        }
        valid = vectors["position_kinds"] != PositionKind.PAD
        mask, relative_positions = self._attention(vectors)
        # Sequences are right-padded: padding rows and columns are a suffix of each sequence's block.
        # Padding columns are never attended; every position attends itself, so a padding row attends
        # only itself (no softmax row is empty).
        for row, length in enumerate(lengths):
            if length < width:
                mask[row, length:, :] = False
                mask[row, :, length:] = False
        mask |= np.eye(width, dtype=bool)[None]
        predicts = padded(expanded.kinds != PositionKind.CLOSE_COMPOSE, False)
        labels = np.full((len(sequences), width), IGNORE_INDEX, dtype=np.int64)
        labels[:, :-1] = np.where(predicts[:, :-1] & valid[:, 1:], vectors["input_ids"][:, 1:], IGNORE_INDEX)
        prediction_index = np.zeros((len(sequences), int(flat.lengths.max())), dtype=np.int64)
        prediction_index[flat.sequence_index, flat.local_position] = expanded.output_position
        result = {
            "input_ids": vectors["input_ids"],
            "position_kinds": vectors["position_kinds"],
            "attention_mask": mask,
            "labels": labels,
            "depth": vectors["depth"],
            "position_coordinates": self._coordinates(vectors),
            "expansion_index": padded(expanded.source_action.astype(np.int64), 0),
            "prediction_index": prediction_index,
            "lengths": lengths,
            "action_lengths": flat.lengths,
        }
        if with_relative_positions:  # 0 wherever nothing is attended
            result["relative_positions"] = (relative_positions * mask).astype(np.int64)
        return result

    def _coordinates(self, vectors):
        """Per-position c with relative position R_ij = c_i - c_j on every attended cell."""
        raise NotImplementedError

    def _expanded_vectors(self, flat):
        """Per-position vectors of the whole batch, flat (ids, kinds, depth, pushed, pop_time)."""
        raise NotImplementedError

    def _attention(self, vectors):
        """Batched [B, T', T'] mask and relative positions from the padded per-position vectors."""
        raise NotImplementedError


class FlatBatch:
    """Sequences of action ids concatenated into one array, with where each one starts: every step of a grammar's
    vectorized form (validation, expansion) is then a handful of numpy calls per batch, not per sequence.

    sequences: the [T_b] arrays; lengths, starts [B]; ids, kinds (ActionKind, from `layout`), sequence_index,
    local_position, is_first, is_last [sum T_b]."""

    def __init__(self, sequences, layout):
        self.sequences = sequences
        self.lengths = np.array([len(s) for s in sequences], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int64)
        self.ids = np.concatenate(sequences)
        self.kinds = layout.kinds(self.ids)
        self.sequence_index = np.repeat(np.arange(len(sequences)), self.lengths)
        self.local_position = np.arange(len(self.ids)) - self.starts[self.sequence_index]
        self.is_first = self.local_position == 0
        self.is_last = self.local_position == self.lengths[self.sequence_index] - 1

    def segment_cumsum(self, values):
        """Cumulative sum restarting at every sequence."""
        total = np.cumsum(values)
        before = total[self.starts] - values[self.starts]
        return total - before[self.sequence_index]


def any_per_sequence(flags, sequence_index, count):
    """[count] bool: whether any of the flat `flags` of each sequence is set (`sequence_index`: each flag's sequence)."""
    return np.bincount(sequence_index, weights=flags, minlength=count) > 0


class ExpandedPositions:
    """Flat per-position vectors of a batch after expansion (`expand_actions`), with each position's sequence and
    local position. A grammar's `_expanded_vectors` fills `depth`, `pushed` and `pop_time` (what `batch` pads and
    `_attention` reads)."""

    def __init__(self, ids, kinds, lengths):
        self.ids, self.kinds, self.lengths = ids, kinds, lengths
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        self.sequence_index = np.repeat(np.arange(len(lengths)), lengths)
        self.local_position = np.arange(len(ids)) - starts[self.sequence_index]
        self.depth = self.pushed = self.pop_time = None
        self.source_action = None  # per position: the index of the action it comes from, in its sequence
        self.output_position = None  # per action (flat like the actions): its position that predicts the next


def expand_actions(flat, duplicate_closing):
    """The ExpandedPositions of a FlatBatch of bracketed actions: one position per action (its PositionKind from
    POSITION_KIND_OF_ACTION), or with `duplicate_closing` two per closing NT, a COMPOSE copy then a STACK copy (the
    STACK copy predicts the next action)."""
    position_kinds = POSITION_KIND_OF_ACTION[flat.kinds]
    if not duplicate_closing:
        expanded = ExpandedPositions(flat.ids, position_kinds, flat.lengths)
        expanded.source_action = expanded.output_position = flat.local_position
        return expanded
    is_close = flat.kinds == ActionKind.CLOSE_NT
    repeats = 1 + is_close
    kinds = np.repeat(position_kinds, repeats)
    kinds[np.cumsum(repeats)[is_close] - 2] = PositionKind.CLOSE_COMPOSE
    extra = np.bincount(flat.sequence_index, weights=is_close, minlength=len(flat.lengths)).astype(np.int64)
    expanded = ExpandedPositions(np.repeat(flat.ids, repeats), kinds, flat.lengths + extra)
    expanded.source_action = np.repeat(flat.local_position, repeats)
    # An action's last position is the one that predicts (the STACK copy of a duplicated closing NT).
    last = np.cumsum(repeats) - 1
    expanded.output_position = expanded.local_position[last]
    return expanded


# The PositionKind of each ActionKind of bracketed trees (indexed by ActionKind, PAD to EOS), where an action is
# one position: a closing NT that is not duplicated predicts like a STACK copy.
POSITION_KIND_OF_ACTION = np.array(
    [
        PositionKind.PAD,
        PositionKind.BOS,
        PositionKind.OPEN_NT,
        PositionKind.TERMINAL,
        PositionKind.CLOSE_STACK,
        PositionKind.EOS,
    ],
    dtype=np.int8,
)
# The same, as enum members by ActionKind (an incremental `step` reads one at a time, and enum lookups are slow).
POSITION_KIND_BY_ACTION = {kind: PositionKind(int(POSITION_KIND_OF_ACTION[kind])) for kind in ActionKind
                           if kind < len(POSITION_KIND_OF_ACTION)}


class CausalRules(Grammar):
    """Bracketed trees under causal attention, relative positions i - j (Transformer-XL over the actions): the
    legality of `Grammar`, one position per action. A family's grammar sets its `name`."""

    # One position per action, each attending every earlier one, coordinate = its index: a model may build
    # this structure itself for any layout of the batch (left padding, a KV cache).
    causal = True

    @property
    def rows_class(self):
        """The fast form of these states over hypotheses (bracket_rows.CausalGrammarRows, imported when the search
        asks: it imports torch) for a grammar that keeps these positions and Grammar's legality and bookkeeping;
        None for a subclass that changes any of them (a words-only grammar, a toy's own positions), whose states
        the search then steps one by one (hypothesis_rows.StateListRows)."""
        rules = type(self)
        kept = (rules._positions_for is CausalRules._positions_for and rules.legal_actions is Grammar.legal_actions
                and rules._legal_after_start is Grammar._legal_after_start and rules._advance is Grammar._advance
                and not self.uses_eos)
        if not kept:
            return None
        from .bracket_rows import CausalGrammarRows

        return CausalGrammarRows

    def _positions_for(self, state, action_id, kind):
        position = state.length
        state.length += 1
        attended = np.arange(position + 1, dtype=np.int64)
        kind_of_position = POSITION_KIND_BY_ACTION[kind]
        return [NewPosition(action_id, kind_of_position, attended, position - attended, True, position)]

    def _expanded_vectors(self, flat):
        expanded = expand_actions(flat, duplicate_closing=False)
        total = len(expanded.ids)
        expanded.depth = np.zeros(total, dtype=np.int64)
        expanded.pushed = np.ones(total, dtype=bool)
        expanded.pop_time = np.full(total, np.iinfo(np.int32).max, dtype=np.int64)
        return expanded

    def _attention(self, vectors):
        batch, width = vectors["input_ids"].shape
        rows = np.arange(width, dtype=np.int16)[:, None]
        cols = np.arange(width, dtype=np.int16)[None, :]
        mask = np.broadcast_to(cols <= rows, (batch, width, width)).copy()
        return mask, sequence_distances(width)

    def _coordinates(self, vectors):
        return sequence_coordinates(vectors)


def sequence_distances(width):
    """[1, T', T'] int16: Transformer-XL's relative positions i - j over `width` expanded positions (the causal
    grammars', and TG (TXL mem. & rel. pos.)'s under TG's mask)."""
    line = np.arange(width, dtype=np.int16)
    return (line[:, None] - line[None, :])[None]


def sequence_coordinates(vectors):
    """[B, T'] int64: each position's own index, the coordinates c whose differences c_i - c_j are
    `sequence_distances`."""
    batch, width = vectors["input_ids"].shape
    return np.broadcast_to(np.arange(width, dtype=np.int64), (batch, width)).copy()


class CausalWordsRules(CausalRules):
    """Words only under causal attention: `<s> w1 ... wn </s>` (a plain causal LM over a tree's words). A family's
    grammar sets its `name`."""

    uses_eos = True
    linearization = "terminals"
    words_only = True
    top_down = False  # no constituents

    def _legal_after_start(self, state):
        """Words, and `</s>` once there is at least one."""
        if state.num_terminals:
            return self._mask(ActionKind.TERMINAL, ActionKind.EOS)
        return self._mask(ActionKind.TERMINAL)

    def _check_action(self, state, action_id, kind):
        if kind in (ActionKind.OPEN_NT, ActionKind.CLOSE_NT):
            raise ValueError(
                f"{self.name} grammar: action {state.num_actions} (id {action_id}) is a nonterminal; "
                "this grammar reads words only"
            )
        super()._check_action(state, action_id, kind)


def grammar_for_config(config):
    """The grammar a model config names (its class's `grammar_classes`), sentence- or document-level as
    `config.document_level` says."""
    return type(config).grammar_classes[config.grammar].for_config(config)
