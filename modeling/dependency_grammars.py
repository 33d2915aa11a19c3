"""Dependency grammars: the attention of Dependency Transformer Grammars (paper 002) over transition sequences.

A sequence is `<root>` (the reference variant: `<s>`), then the transitions of tokenization/transitions.py as
action ids (a word's pieces are GEN actions, `LA[k]` / `RA[k]` ids, `POP`), then `</s>`. The grammar keeps the
items of the stack (a word is one item holding all its pieces; a composed arc is one item holding its COMPOSE
position) and, for each action, says which positions it expands to, what each attends, at which relative
position, and what it predicts:

- `<root>`, a word piece: pushed (a later piece joins its word's item), STACK attention: every position of
  every item, itself included. Predicts the next action.
- LA / RA (Algorithm 1): duplicated. The COMPOSE copy attends the head and the dependent (paper: each word's
  last piece, Appendix B; arc-swift: also the k - 1 items between them), predicts nothing, and replaces them
  on the stack by itself, a substitute for the head; the STACK copy attends the stack and predicts the next
  action. Both copies add the embedding of the head word's last piece to their own (section 3.3): that
  position is their `extra_inputs`.
- Arc-eager (section 3.4, Figure 4): the newest word waits in the buffer, attended as the top item; its RA
  keeps the dependent on the stack (only the head is replaced); POP (POP-STACK attention) removes the stack top
  and attends what remains and itself (the last POP removes the root and would otherwise attend nothing).
- Arc-swift (Figure 5): LA[k] / RA[k] also attend and remove the k - 1 items between head and dependent
  (paper 002 gives them no relative position; here they take the dependent's, -1).
- `</s>` ends the sequence: it attends the stack and itself and predicts nothing.

Relative positions (section 3.2): on STACK rows R_ij = d(i) - d(j) with d the depth counted from the stack top;
written with each item's height h from the bottom (the root 0), R_ij = h(j) - h(i) <= 0, i.e. c_i - c_j with
per-position coordinates c = -h (a STACK copy and POP take the height of the stack top). COMPOSE rows give 0 to
the head and -1 to the dependent: explicit values, since an RA's head lies below its dependent (no coordinates
give both).

The `reference` variant (arc-standard only) matches the authors' released code, which differs from the paper
in four ways: (a) `<s>` plays the root (no `<root>`), and the sentence ends with one undoubled POP (`pop_root`)
that attends `<s>` (0), the item left on the stack (-1) and itself (0) and predicts `</s>`; (b) every COMPOSE
row and arc STACK copy also attends itself, at 0; (c) STACK relative positions count up from the top
(c = +h, so they are >= 0); (d) COMPOSE attends every piece of both words.

`legal_actions(state)` is the one source of legality (section 3.5: arcs need two items, the root takes one
dependent, k within the stack, POP only for a stack top that has its head; a word's later pieces only right
after its earlier ones), plus the oracle's canonical order, so that each tree has one sequence and p(x) sums
over trees: arc-standard takes no left dependent once the head has a right one, arc-eager generates no word
right after a POP. tests/test_dependency_grammars.py holds it equal to tokenization/transitions.py.

This file is hub code: it is copied into checkpoints and must import nothing from hf_slm.
"""

from dataclasses import dataclass

import numpy as np

from .grammars import IGNORE_INDEX, ActionKind, GrammarSequence, LegalityChecks, NewPosition, PositionKind

SYSTEMS = ("arc_standard", "arc_eager", "arc_swift")
VARIANTS = ("paper", "reference")


@dataclass(frozen=True)
class DependencyLayout:
    """Where each action kind lives in a dependency vocabulary.

    LA[k] is `left_arc_start + k - 1` for k = 1 .. K (K = 1 outside arc-swift), RA[k] likewise; every other id
    that is not special is a word piece, and `continuation_ids` are the pieces that continue a word (not its
    first piece: SentencePiece pieces without the word-boundary mark).
    """

    pad_token_id: int
    bos_token_id: int
    eos_token_id: int
    root_token_id: int
    left_arc_start: int
    left_arc_stop: int
    right_arc_start: int
    right_arc_stop: int
    pop_token_id: int | None = None
    unk_token_id: int | None = None
    vocab_size: int | None = None
    continuation_ids: tuple = ()

    def __post_init__(self):
        lefts, rights = self.left_arc_stop - self.left_arc_start, self.right_arc_stop - self.right_arc_start
        if lefts < 1 or lefts != rights:
            raise ValueError(f"the LA and RA ranges hold {lefts} and {rights} ids; expected the same number K >= 1 "
                             "(one per arc-swift k; 1 otherwise)")
        object.__setattr__(self, "continuation_ids", tuple(sorted(int(i) for i in self.continuation_ids)))

    @property
    def max_k(self):
        return self.left_arc_stop - self.left_arc_start

    @property
    def size(self):
        if self.vocab_size is not None:
            return int(self.vocab_size)
        specials = (self.pad_token_id, self.bos_token_id, self.eos_token_id, self.root_token_id, self.pop_token_id)
        return max([self.left_arc_stop, self.right_arc_stop] + [i + 1 for i in specials if i is not None])

    def kinds(self, ids):
        """ActionKind of every id (word pieces are TERMINAL), as an int8 array of the same shape."""
        ids = np.asarray(ids)
        kinds = np.full(ids.shape, ActionKind.TERMINAL, dtype=np.int8)
        kinds[(ids >= self.left_arc_start) & (ids < self.left_arc_stop)] = ActionKind.LEFT_ARC
        kinds[(ids >= self.right_arc_start) & (ids < self.right_arc_stop)] = ActionKind.RIGHT_ARC
        for special, kind in ((self.pad_token_id, ActionKind.PAD), (self.bos_token_id, ActionKind.BOS),
                              (self.eos_token_id, ActionKind.EOS), (self.root_token_id, ActionKind.ROOT),
                              (self.pop_token_id, ActionKind.POP)):
            if special is not None:
                kinds[ids == special] = kind
        return kinds

    def to_dict(self):
        """The layout as config fields (not vocab_size: a model may have more ids)."""
        fields = {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "vocab_size"}
        fields["continuation_ids"] = list(self.continuation_ids)
        return fields

    @classmethod
    def from_config(cls, config):
        """The layout of a model config (fields of the same names)."""
        fields = {name: getattr(config, name, None) for name in cls.__dataclass_fields__}
        fields["continuation_ids"] = tuple(fields["continuation_ids"] or ())
        return cls(**fields)

    def continues_word(self, ids):
        return np.isin(np.asarray(ids), np.array(self.continuation_ids, dtype=np.int64))

    def arc_k(self, action_id):
        """k of an LA[k] / RA[k] id."""
        start = self.left_arc_start if action_id < self.left_arc_stop else self.right_arc_start
        return action_id - start + 1


class _Item:
    """A stack item: its positions (a word's pieces, or one COMPOSE position), the position of its head word's
    last piece (added to arc inputs), whether it has its head, whether it is the root."""

    __slots__ = ("positions", "head_token", "has_head", "is_root", "has_right_dependent")

    def __init__(self, positions, head_token, has_head=False, is_root=False, has_right_dependent=False):
        self.positions, self.head_token, self.has_head, self.is_root = positions, head_token, has_head, is_root
        self.has_right_dependent = has_right_dependent

    def copy(self):
        return _Item(self.positions[:], self.head_token, self.has_head, self.is_root, self.has_right_dependent)


class _DependencyState:
    """Incremental state; `buffered`: the top item is arc-eager's / arc-swift's buffer word."""

    __slots__ = ("length", "items", "buffered", "root_taken", "num_actions", "num_terminals", "num_words",
                 "in_word", "closed", "finished", "last_was_pop")

    def __init__(self):
        self.length = 0
        self.items = []
        self.buffered = False
        self.root_taken = False
        self.num_actions = self.num_terminals = self.num_words = 0
        self.in_word = False  # the last action was a piece: the word may go on
        self.closed = False  # the tree is complete: only `</s>` may follow
        self.finished = False
        self.last_was_pop = False

    def clone(self):
        copy = _DependencyState.__new__(_DependencyState)
        for name in self.__slots__:
            setattr(copy, name, getattr(self, name))
        copy.items = [item.copy() for item in self.items]
        return copy


class DependencyGrammar(LegalityChecks):
    """The grammar of DTG over one transition system (module docstring); `variant` "paper" or "reference"."""

    name = "dtg"
    system = "arc_standard"
    duplicates_closing = True  # arcs are duplicated into COMPOSE and STACK copies
    duplicated_actions = "arcs"
    uses_eos = True
    causal = False
    words_only = False
    document_level = False
    relative_position_meaning = "stack-depth differences d(i) - d(j) (paper 002, section 3.2)"
    explicit_relative_positions = True  # COMPOSE rows' 0 / -1 are no coordinate differences (module docstring)
    adds_head_tokens = True  # arc positions add their head word's last piece (NewPosition.extra_inputs)

    def __init__(self, layout, variant="paper", document_level=False):
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; expected one of {VARIANTS}")
        if variant == "reference" and self.system != "arc_standard":
            raise ValueError(f"the reference variant exists for arc-standard only, not {self.system}")
        if document_level:
            raise ValueError("dependency grammars read one sentence per sequence (paper 002 models sentences "
                             "independently); document_level is not supported")
        if self.system == "arc_eager" and layout.pop_token_id is None:
            raise ValueError("arc-eager needs a POP id in the layout (pop_token_id)")
        if variant == "reference" and layout.pop_token_id is None:
            raise ValueError("the reference variant ends with pop_root: the layout needs a POP id (pop_token_id)")
        if self.system != "arc_swift" and layout.max_k != 1:
            raise ValueError(f"{self.system} has one LA and one RA; the layout has K = {layout.max_k}")
        self.layout, self.variant = layout, variant
        self.vocab_size = layout.size
        self._kinds = layout.kinds(np.arange(self.vocab_size))
        self._continues = layout.continues_word(np.arange(self.vocab_size))
        self._sign = 1 if variant == "reference" else -1  # coordinate c = sign * height
        self._masks = {}


    # Default clipping range: stack distances up to 63 items either way, which covers both variants (the paper's
    # R <= 0, the reference's R >= -1); the sinusoids are fixed, so the range costs no parameters.
    relative_position_range = (-63, 62)

    # ---- legality: the one source ----------------------------------------------------------------------
    def _mask(self, key, build):
        if key not in self._masks:
            mask = build()
            mask.setflags(write=False)
            self._masks[key] = mask
        return self._masks[key]

    def _kind_mask(self, *kinds):
        return self._mask(kinds, lambda: np.isin(self._kinds, np.array(kinds, dtype=np.int8)))

    def legal_actions(self, state):
        """Bool mask [vocab_size] of the actions that may follow the prefix in `state` (read-only)."""
        if state.finished:
            return self._kind_mask()
        if state.num_actions == 0:
            return self._kind_mask(ActionKind.BOS if self.variant == "reference" else ActionKind.ROOT)
        if state.closed:
            return self._kind_mask(ActionKind.EOS)
        # A handful of masks exist (words or not, and which structural ids): cached, never copied per call.
        words = "none" if state.last_was_pop else state.in_word  # canonical order: no word right after a POP
        structure = tuple(self._legal_structure(state))
        return self._mask(("legal", words, structure), lambda: self._words_and(words, structure))

    def _words_and(self, words, structure):
        """The mask of the words allowed ("none", or whether a word is going on) and of `structure` ids."""
        if words == "none":
            legal = np.zeros(self.vocab_size, bool)
        else:
            legal = (self._kinds == ActionKind.TERMINAL) & (np.ones(self.vocab_size, bool) if words else ~self._continues)
        legal[list(structure)] = True
        return legal

    def _legal_structure(self, state):
        """The ids of the legal arcs, POP and `</s>` (words are legal apart from these)."""
        layout, items = self.layout, state.items
        if self.system == "arc_standard":
            legal = []
            if len(items) >= 3:
                # canonical order: a head takes its left dependents before its right ones (transitions.py)
                legal += [layout.right_arc_start] if items[-1].has_right_dependent else [layout.left_arc_start,
                                                                                        layout.right_arc_start]
            elif len(items) == 2:  # root and one item: the last arc, onto the root
                legal.append(layout.pop_token_id if self.variant == "reference" else layout.right_arc_start)
            return legal
        if self.system == "arc_eager":
            legal = []
            if state.buffered and len(items) >= 2:
                top = items[-2]
                if not top.is_root and not top.has_head:
                    legal.append(layout.left_arc_start)
                if not (top.is_root and state.root_taken):
                    legal.append(layout.right_arc_start)
            stack_top = items[-2] if state.buffered else (items[-1] if items else None)
            if stack_top is not None and (stack_top.has_head or (stack_top.is_root and state.root_taken
                                                                  and len(items) == 1)):
                legal.append(layout.pop_token_id)
            return legal
        legal = []  # arc_swift
        if state.buffered:
            stack = items[:-1]
            for k in range(1, min(layout.max_k, len(stack)) + 1):
                if not all(item.has_head for item in stack[len(stack) - k + 1 :]):
                    break  # the items between must have their heads, for this k and every larger one
                item = stack[-k]
                if not item.is_root and not item.has_head:
                    legal.append(layout.left_arc_start + k - 1)
                if not (item.is_root and state.root_taken):
                    legal.append(layout.right_arc_start + k - 1)
        elif state.num_words and all(item.has_head or item.is_root for item in items):
            legal.append(layout.eos_token_id)
        return legal

    def _check_action(self, state, action_id, kind):
        where = f"{self.name} grammar ({self.system}): action {state.num_actions} (id {action_id}, {kind.name})"
        if self._refused(state, action_id, where) is None:
            return
        if kind == ActionKind.TERMINAL and self._continues[action_id] and not state.in_word:
            raise ValueError(f"{where} continues a word, but no word is being generated; expected a word's first "
                             "piece")
        allowed = ", ".join(sorted(k.name for k in self.allowed_next_kinds(state))) or "nothing"
        raise ValueError(f"{where} is not allowed here; expected {allowed}")

    # ---- incremental ----------------------------------------------------------------------------------
    def start(self):
        return _DependencyState()

    @property
    def start_action_id(self):
        """The first action of every sequence: `<root>`, or `<s>` in the reference variant."""
        return self.layout.bos_token_id if self.variant == "reference" else self.layout.root_token_id

    def is_complete(self, state):
        return state.finished

    def structure_completes_tree(self, state):
        """Whether a structural action now would complete the tree (then only `</s>` may follow): arc-standard's
        arc onto the root (the root and one item left), arc-eager's POP of the root."""
        if self.system == "arc_standard":
            return len(state.items) == 2
        if self.system == "arc_eager":
            return len(state.items) == 1 and state.root_taken
        return False  # arc-swift ends with `</s>` itself

    def minimum_positions(self, pieces, words):
        """The fewest positions a sentence of `words` words in `pieces` pieces expands to, the start and `</s>`
        included: each word takes one arc as a dependent (two positions); arc-eager also pops at least the root's
        dependent and the root (when every other word is a left dependent)."""
        positions = 1 + pieces + 2 * words + 1
        return positions + 2 if self.system == "arc_eager" else positions

    def step(self, state, action_id, check=True):
        """Feed one action; return the NewPositions it expands to (validated first unless check=False)."""
        action_id = int(action_id)
        kind = ActionKind(int(self._kinds[action_id])) if 0 <= action_id < self.vocab_size else ActionKind.TERMINAL
        if check:
            self._check_action(state, action_id, kind)
        state.num_actions += 1
        state.last_was_pop = kind == ActionKind.POP
        if kind in (ActionKind.BOS, ActionKind.ROOT):
            state.items.append(_Item([state.length], state.length, is_root=True))
            position_kind = PositionKind.ROOT if kind == ActionKind.ROOT else PositionKind.BOS
            return [self._stack_position(state, action_id, position_kind, on_stack=True)]
        if kind == ActionKind.TERMINAL:
            return [self._piece(state, action_id)]
        state.in_word = False
        if kind in (ActionKind.LEFT_ARC, ActionKind.RIGHT_ARC):
            return self._arc(state, action_id, kind == ActionKind.LEFT_ARC, self.layout.arc_k(action_id))
        if kind == ActionKind.POP:
            return [self._pop_root(state, action_id) if self.variant == "reference" else self._pop(state, action_id)]
        state.finished = True  # </s>
        return [self._stack_position(state, action_id, PositionKind.EOS, on_stack=False, predicts=False)]

    def _coordinate(self, height):
        return self._sign * height

    def _stack_position(self, state, action_id, kind, on_stack, predicts=True, extra=(), itself=True):
        """The next position, with STACK attention: every position of every item, and itself (`on_stack`: the
        caller put it in the top item already; otherwise as `itself` says). It sits at the top item's height
        (an empty stack: one below the root's)."""
        position = state.length
        state.length += 1
        attended, heights = [], []
        for height, item in enumerate(state.items):
            attended += item.positions
            heights += [height] * len(item.positions)
        top = len(state.items) - 1
        if not on_stack and itself:
            attended.append(position)
            heights.append(top)
        coordinate = self._coordinate(top)
        order = np.argsort(attended, kind="stable")
        attended = np.array(attended, dtype=np.int64)[order]
        relative = coordinate - self._sign * np.array(heights, dtype=np.int64)[order]
        return NewPosition(action_id, kind, attended, relative, predicts, coordinate, extra)

    def _piece(self, state, action_id):
        position = state.length
        state.num_terminals += 1
        if self._continues[action_id]:
            state.items[-1].positions.append(position)
            state.items[-1].head_token = position  # arcs use the word's last piece
            kind = PositionKind.SUBWORD
        else:
            state.num_words += 1
            state.items.append(_Item([position], position))
            state.buffered = self.system != "arc_standard"
            kind = PositionKind.TERMINAL
        state.in_word = True
        return self._stack_position(state, action_id, kind, on_stack=True)

    def _arc(self, state, action_id, left, k):
        items = state.items
        # arc-standard: the two top items; arc-eager / arc-swift: the buffer word and the k-th stack item below
        # it, with the k - 1 items between them. The arc's COMPOSE position takes the lower one's slot.
        slot = len(items) - 1 - k
        lower, upper, between = items[slot], items[-1], items[slot + 1 : -1]
        head, dependent = (upper, lower) if left else (lower, upper)
        compose_position = state.length
        compose_kind = PositionKind.LEFT_ARC_COMPOSE if left else PositionKind.RIGHT_ARC_COMPOSE
        stack_kind = PositionKind.LEFT_ARC_STACK if left else PositionKind.RIGHT_ARC_STACK
        reference = self.variant == "reference"

        def attended_of(item):
            return item.positions if reference else item.positions[-1:]

        cells = [(p, 0) for p in attended_of(head)] + [(p, -1) for other in [dependent] + between
                                                       for p in attended_of(other)]
        if reference:
            cells.append((compose_position, 0))
        cells.sort()
        composed = _Item([compose_position], head.head_token, head.has_head, head.is_root,
                         head.has_right_dependent or not left)
        if head.is_root and not left:
            state.root_taken = True
        dependent.has_head = True
        if self.system == "arc_standard" or left:  # both leave; the composed head takes their place
            items[slot:] = [composed]
        else:  # RA of arc-eager / arc-swift: the head is replaced, the items between go, the word stays on top
            items[slot:-1] = [composed]
        state.buffered = self.system != "arc_standard" and left
        state.length += 1
        compose = NewPosition(action_id, compose_kind, np.array([p for p, _ in cells], dtype=np.int64),
                              np.array([r for _, r in cells], dtype=np.int64), False,
                              self._coordinate(slot), (head.head_token,))
        if self.system == "arc_standard" and head.is_root:
            state.closed = True  # the root has its dependent: the tree is complete
        stack = self._stack_position(state, action_id, stack_kind, on_stack=False, extra=(head.head_token,),
                                     itself=reference)
        return [compose, stack]

    def _pop(self, state, action_id):
        """Arc-eager's POP: remove the stack top (below the buffer word, if there is one)."""
        index = -2 if state.buffered else -1
        popped = state.items.pop(index)
        if popped.is_root:  # the last item: the tree is complete, and this POP attends itself only
            state.closed = True
        return self._stack_position(state, action_id, PositionKind.POP, on_stack=False)

    def _pop_root(self, state, action_id):
        """The reference variant's end: `<s>` takes the one item left as its dependent."""
        root, item = state.items
        position = state.length
        state.length += 1
        cells = sorted([(p, 0) for p in root.positions] + [(p, -1) for p in item.positions] + [(position, 0)])
        state.items = [root]
        state.root_taken = state.closed = True
        return NewPosition(action_id, PositionKind.POP_ROOT, np.array([p for p, _ in cells], dtype=np.int64),
                           np.array([r for _, r in cells], dtype=np.int64), True, self._coordinate(0),
                           (root.head_token,))

    # ---- whole sequences ------------------------------------------------------------------------------
    def positions(self, ids, validate=True, require_complete=True):
        """The NewPositions of a whole sequence, in order (ValueError naming the first illegal action)."""
        state, positions = self.start(), []
        for action_id in ids:
            positions += self.step(state, action_id, check=validate)
        if require_complete and not self.is_complete(state):
            raise ValueError(f"{self.name} grammar ({self.system}): the sequence of {len(ids)} actions ends before "
                             "`</s>`")
        return positions

    def batch(self, sequences, validate=True, require_complete=True, pad_to_multiple_of=None, max_length=None,
              with_relative_positions=True):
        """Model inputs for a batch, the fields of grammars.Grammar.batch plus `head_token_index` [B, T'] (the
        position whose token embedding is added to an arc's, -1 for none). Built from the incremental rules,
        sequence by sequence."""
        if not len(sequences):
            raise ValueError(f"{self.name} grammar: expected at least one sequence, got an empty batch")
        expanded = [self.positions([int(i) for i in ids], validate, require_complete) for ids in sequences]
        lengths = np.array([len(p) for p in expanded], dtype=np.int64)
        if max_length is not None and lengths.max() > max_length:
            index = int(lengths.argmax())
            raise ValueError(f"sequence {index} expands to {lengths[index]} positions under the {self.name} grammar; "
                             f"the maximum is {max_length}")
        width = int(lengths.max())
        if pad_to_multiple_of:
            width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
        batch = len(expanded)
        input_ids = np.full((batch, width), self.layout.pad_token_id, dtype=np.int64)
        kinds = np.full((batch, width), PositionKind.PAD, dtype=np.int8)
        mask = np.zeros((batch, width, width), dtype=bool)
        relative = np.zeros((batch, width, width), dtype=np.int64)
        labels = np.full((batch, width), IGNORE_INDEX, dtype=np.int64)
        coordinates = np.zeros((batch, width), dtype=np.int64)
        head_token = np.full((batch, width), -1, dtype=np.int64)
        expansion = np.zeros((batch, width), dtype=np.int64)
        prediction = np.zeros((batch, max(len(ids) for ids in sequences)), dtype=np.int64)
        for row, positions in enumerate(expanded):
            action = -1
            for column, new in enumerate(positions):
                if new.kind not in (PositionKind.LEFT_ARC_STACK, PositionKind.RIGHT_ARC_STACK):
                    action += 1  # a STACK copy comes from the same action as the COMPOSE copy before it
                input_ids[row, column], kinds[row, column] = new.input_id, new.kind
                mask[row, column, new.attended] = True
                relative[row, column, new.attended] = new.relative_positions
                coordinates[row, column] = new.coordinate
                head_token[row, column] = new.extra_inputs[0] if new.extra_inputs else -1
                expansion[row, column] = action
                prediction[row, action] = column  # an action's last position gives the next action's logits
                if new.predicts and column + 1 < len(positions):
                    labels[row, column] = positions[column + 1].input_id
            for column in range(len(positions), width):  # padding rows attend themselves only
                mask[row, column, column] = True
        result = {"input_ids": input_ids, "position_kinds": kinds, "attention_mask": mask, "labels": labels,
                  "depth": self._sign * coordinates, "position_coordinates": coordinates, "head_token_index": head_token,
                  "expansion_index": expansion, "prediction_index": prediction, "lengths": lengths,
                  "action_lengths": np.array([len(ids) for ids in sequences], dtype=np.int64)}
        if with_relative_positions:
            result["relative_positions"] = relative
        return result

    def sequence(self, ids, validate=True, require_complete=True):
        batch = self.batch([ids], validate=validate, require_complete=require_complete)
        fields = GrammarSequence.__dataclass_fields__
        return GrammarSequence(**{name: value[0] for name, value in batch.items() if name in fields})


class ArcStandardGrammar(DependencyGrammar):
    """DTG (paper 002, Algorithm 1)."""

    name = "dtg"
    system = "arc_standard"
    linearization = "arc_standard"  # what the tokenizer must produce (DependencyTokenizer's transition_system)


class ArcEagerGrammar(DependencyGrammar):
    """DTG-eager (paper 002, section 3.4 and Figure 4)."""

    name = "dtg_eager"
    system = "arc_eager"
    linearization = "arc_eager"  # what the tokenizer must produce (DependencyTokenizer's transition_system)


class ArcSwiftGrammar(DependencyGrammar):
    """DTG-swift (paper 002, section 3.4 and Figure 5)."""

    name = "dtg_swift"
    system = "arc_swift"
    linearization = "arc_swift"  # what the tokenizer must produce (DependencyTokenizer's transition_system)


DEPENDENCY_GRAMMARS = {grammar.name: grammar for grammar in (ArcStandardGrammar, ArcEagerGrammar, ArcSwiftGrammar)}
