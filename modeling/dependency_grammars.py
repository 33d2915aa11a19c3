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

Documents (`document_level=True`; arc-standard, paper variant): the sentences follow each other after one
`<root>`. Each sentence's last arc, onto the root, closes it; a word then begins the next sentence or `</s>` ends
the document, which is complete after any closed sentence. The root item is then the composition of the root
and every earlier sentence's head: later sentences attend the earlier ones through it, as a TG document's
sentences attend the earlier roots.

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

Classes. `DependencyGrammar` holds what every transition system shares (the stack of items, words and their
pieces, STACK positions, the vectorized whole-sequence form); each system is its own subclass, whose methods say
which transitions are legal, where an arc leaves its items and when the tree is complete: `ArcStandardGrammar`,
and, for the systems whose newest word waits in a buffer (`BufferedDependencyGrammar`), `ArcEagerGrammar` and
`ArcSwiftGrammar`. The reference variant is the mixin `ReferenceVariant` over arc-standard
(`ArcStandardReferenceGrammar`, and TXL (trans)'s twin). A system's class is also its factory:
`DTG_GRAMMARS["dtg"](layout, variant="reference")` builds the reference class (`variant_classes`), as a config's
`dependency_variant` asks.

`legal_actions(state)` is the one source of legality (section 3.5: arcs need two items, the root takes one
dependent, k within the stack, POP only for a stack top that has its head; a word's later pieces only right
after its earlier ones), plus the oracle's canonical order, so that each tree has one sequence and p(x) sums
over trees: arc-standard takes no left dependent once the head has a right one, arc-eager generates no word
right after a POP. tests/test_dependency_grammars.py holds it equal to tokenization/transitions.py.

This file is hub code: it is copied into checkpoints and must import nothing from hf_slm.
"""

from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from .grammar_protocol import IGNORE_INDEX, ActionKind, GrammarProtocol, NewPosition, PositionKind

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
        # the config's bos_token_id is HF's (the start token, `<root>`); the layout's `<s>` is its own field
        fields["bos_token_id"] = getattr(config, "layout_bos_token_id", None)
        if fields["bos_token_id"] is None:
            fields["bos_token_id"] = config.bos_token_id
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
                 "in_word", "closed", "finished", "last_was_pop", "trees_complete")

    def __init__(self):
        self.length = 0
        self.items = []
        self.buffered = False
        self.root_taken = False
        self.num_actions = self.num_terminals = self.num_words = 0
        self.in_word = False  # the last action was a piece: the word may go on
        self.closed = False  # the tree is complete: only `</s>` may follow (a document: or the next sentence)
        self.finished = False
        self.last_was_pop = False
        self.trees_complete = 0  # sentences whose tree is complete

    def clone(self):
        copy = _DependencyState.__new__(_DependencyState)
        for name in self.__slots__:
            setattr(copy, name, getattr(self, name))
        copy.items = [item.copy() for item in self.items]
        return copy


class DependencyGrammar(GrammarProtocol):
    """What every DTG transition system shares (module docstring): the stack of items, words and their pieces, the
    STACK positions and the whole-sequence form. A subclass per transition system (and per variant) says which
    transitions are legal, where an arc leaves its items and when a tree is complete.

    `cls(layout, variant=None, document_level=False)` builds the class of `variant` among the system's
    `variant_classes` ("paper" or "reference"; None: this class's own), as a config's dependency_variant asks.
    """

    name = None
    system = None  # the transition system (tokenization/transitions.py), a DependencyTokenizer's transition_system
    variant = "paper"  # the variant this class implements: "paper", or "reference" (paper 002's released code)
    variant_classes = None  # {variant: class} of this system (filled below); a variant it lacks is a ValueError
    duplicates_closing = True  # arcs are duplicated into COMPOSE and STACK copies
    duplicated_actions = "arcs"
    uses_eos = True
    relative_position_meaning = "stack-depth differences d(i) - d(j) (paper 002, section 3.2)"
    explicit_relative_positions = True  # COMPOSE rows' 0 / -1 are no coordinate differences (module docstring)
    adds_head_tokens = True  # arc positions add their head word's last piece (NewPosition.extra_inputs)
    references_positions = True  # ... which steps name by its position
    family_inputs = ("head_token_index",)  # batch()'s head positions (dependency_model.py adds their embeddings)
    input_references = MappingProxyType({"head_token_index": "positions"})
    compose_kinds = frozenset({PositionKind.LEFT_ARC_COMPOSE, PositionKind.RIGHT_ARC_COMPOSE})
    reducing_kinds = frozenset({ActionKind.LEFT_ARC, ActionKind.RIGHT_ARC, ActionKind.POP})
    has_stack = True  # items leave the stack when an arc or POP removes them (stack_lifetimes)
    # Default clipping range: stack distances up to 63 items either way, which covers both variants (the paper's
    # R <= 0, the reference's R >= -1); the sinusoids are fixed, so the range costs no parameters.
    relative_position_range = (-63, 62)

    layout_class = DependencyLayout

    # What distinguishes the systems and variants, read by the shared machinery (each subclass sets its own):
    buffers_words = False  # the newest word waits in the buffer, attended as the top item (arc-eager, arc-swift)
    takes_k = False  # LA[k] / RA[k] reach the k-th item below the buffer word (arc-swift); the others have K = 1
    reads_documents = False  # one sequence may hold a document's sentences (module docstring, "Documents")
    start_action_kind = ActionKind.ROOT  # `<root>` starts a sequence (the reference variant: `<s>`)
    coordinate_sign = -1  # c = sign * height: STACK relative positions <= 0 (the reference variant's >= 0)
    ends_with_pop_root = False  # POP is pop_root: `<s>` takes the last item as its dependent (the reference variant)
    arcs_attend_themselves = False  # an arc's COMPOSE and STACK rows also attend themselves (the reference variant)
    arcs_read_every_piece = False  # a COMPOSE row attends every piece of both words, not their last (reference)

    def __new__(cls, layout=None, variant=None, document_level=False):
        # The class of `variant` (copy and pickle call __new__ with no arguments: this class).
        return super().__new__(cls.class_of_variant(variant))

    @classmethod
    def class_of_variant(cls, variant):
        """This system's class of `variant` (None: this class); ValueError naming a variant it lacks."""
        if variant is None or variant == cls.variant:
            return cls
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; expected one of {VARIANTS}")
        chosen = (cls.variant_classes or {}).get(variant)
        if chosen is None:
            raise ValueError(f"the reference variant exists for arc-standard only, not {cls.system}")
        if issubclass(chosen, cls):
            return chosen
        raise ValueError(f"{cls.__name__} is the {cls.variant} variant of {cls.system}, not the {variant} one; build "
                         f"it from {chosen.__name__}")

    @classmethod
    def for_config(cls, config):
        """The grammar over a model config's id layout and dependency_variant, at the config's document level."""
        return cls(DependencyLayout.from_config(config), variant=config.dependency_variant,
                   document_level=config.document_level)

    def __init__(self, layout, variant=None, document_level=False):
        if document_level:
            self.check_document_level(self.variant)
        self._check_layout(layout)
        super().__init__(layout, document_level=document_level)
        self.continues_word = layout.continues_word(np.arange(self.vocab_size))
        self._masks = {}

    def _check_layout(self, layout):
        """ValueError unless the layout has the ids this system and variant read."""
        if not self.takes_k and layout.max_k != 1:
            raise ValueError(f"{self.system} has one LA and one RA; the layout has K = {layout.max_k}")

    @classmethod
    def check_document_level(cls, variant):
        """Raise ValueError unless this system and `variant` read documents: the paper variant of arc-standard,
        whose root takes each sentence's head by the sentence's last arc (module docstring, "Documents"); the
        others end a sentence otherwise (arc-eager pops the root; the reference variant's pop_root)."""
        chosen = cls if variant is None or variant == cls.variant else (cls.variant_classes or {}).get(variant)
        if chosen is None or not chosen.reads_documents:
            raise ValueError(f"a document (document_level) is read by the paper variant of arc-standard (dtg, "
                             f"txl_trans) only; {cls.system} ({variant}) reads one sentence per sequence")

    # ---- legality: the one source ----------------------------------------------------------------------
    def _mask(self, key, build):
        if key not in self._masks:
            mask = build()
            mask.setflags(write=False)
            self._masks[key] = mask
        return self._masks[key]

    def legal_actions(self, state):
        """Bool mask [vocab_size] of the actions that may follow the prefix in `state` (read-only)."""
        if state.finished:
            return self.kinds_mask()
        if state.num_actions == 0:
            return self.kinds_mask(self.start_action_kind)
        if state.closed:
            if self.document_level:  # the document ends, or its next sentence begins with a word
                return self._mask("next sentence", lambda: self._words_and(False, (self.layout.eos_token_id,)))
            return self.kinds_mask(ActionKind.EOS)
        # A handful of masks exist (words or not, and which structural ids): cached, never copied per call.
        words = "none" if state.last_was_pop else state.in_word  # canonical order: no word right after a POP
        structure = tuple(self._legal_structure(state))
        return self._mask(("legal", words, structure), lambda: self._words_and(words, structure))

    def _words_and(self, words, structure):
        """The mask of the words allowed ("none", or whether a word is going on) and of `structure` ids."""
        if words == "none":
            legal = np.zeros(self.vocab_size, bool)
        else:
            legal = (self.action_kinds == ActionKind.TERMINAL) & (np.ones(self.vocab_size, bool) if words else ~self.continues_word)
        legal[list(structure)] = True
        return legal

    def _legal_structure(self, state):
        """The ids of the legal arcs, POP and `</s>` (words are legal apart from these): each system's."""
        raise NotImplementedError

    def _check_action(self, state, action_id, kind):
        where = f"{self.name} grammar ({self.system}): action {state.num_actions} (id {action_id}, {kind.name})"
        if self._refused(state, action_id, where) is None:
            return
        if kind == ActionKind.TERMINAL and self.continues_word[action_id] and not state.in_word:
            raise ValueError(f"{where} continues a word, but no word is being generated; expected a word's first "
                             "piece")
        allowed = ", ".join(sorted(k.name for k in self.allowed_next_kinds(state))) or "nothing"
        raise ValueError(f"{where} is not allowed here; expected {allowed}")

    # ---- incremental ----------------------------------------------------------------------------------
    def start(self):
        return _DependencyState()

    @property
    def start_action_id(self):
        """The first action of every sequence: `<root>` (the reference variant: `<s>`)."""
        return self.layout.root_token_id

    def is_complete(self, state):
        """A sentence after its `</s>`; a document after `</s>` or any sentence's last arc (which closes it)."""
        return state.finished or (self.document_level and state.closed)

    def structure_completes_tree(self, state):
        """Whether a structural action now would complete the tree (then only `</s>` may follow): each system's."""
        raise NotImplementedError

    def completion_need(self, state):
        """(positions, terminals) still needed (GrammarProtocol): none once complete, the whole minimum before the
        start, `</s>` once the tree is; otherwise what the system's stack still needs (`_stack_need`)."""
        if state.finished or self.is_complete(state):
            return 0, 0
        if state.num_actions == 0:
            return self.minimum_positions(1, 1), 1
        if state.closed:
            return 1, 0
        return self._stack_need(state)

    def _stack_need(self, state):
        """completion_need of a started tree that is not complete yet: each system's."""
        raise NotImplementedError

    def minimum_positions(self, pieces, words):
        """The fewest positions a sentence of `words` words in `pieces` pieces expands to, the start and `</s>`
        included: each word takes one arc as a dependent (two positions)."""
        return 1 + pieces + 2 * words + 1

    def step(self, state, action_id, check=True):
        """Feed one action; return the NewPositions it expands to (validated first unless check=False)."""
        action_id = int(action_id)
        kind = ActionKind(int(self.action_kinds[action_id])) if 0 <= action_id < self.vocab_size else ActionKind.TERMINAL
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
            return [self._pop(state, action_id)]
        state.finished = True  # </s>
        return [self._stack_position(state, action_id, PositionKind.EOS, on_stack=False, predicts=False)]

    # False while _step_for_need steps: the positions are counted, their attention rows not built (None)
    _rows_wanted = True

    def _step_for_need(self, state, action):
        """The state after `action` and a list as long as the positions it adds: all that the search's completion
        needs read. Building the attention rows was most of the time a DTG beam search spent on them."""
        self._rows_wanted = False
        try:
            return self.step(state, action, check=False)
        finally:
            del self._rows_wanted  # the class's True again

    def _coordinate(self, height):
        return self.coordinate_sign * height

    def _stack_position(self, state, action_id, kind, on_stack, predicts=True, extra=(), itself=True):
        """The next position, with STACK attention: every position of every item, and itself (`on_stack`: the
        caller put it in the top item already; otherwise as `itself` says). It sits at the top item's height
        (an empty stack: one below the root's)."""
        position = state.length
        state.length += 1
        if not self._rows_wanted:
            return None
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
        relative = coordinate - self.coordinate_sign * np.array(heights, dtype=np.int64)[order]
        return NewPosition(action_id, kind, attended, relative, predicts, coordinate, extra)

    def _piece(self, state, action_id):
        position = state.length
        state.num_terminals += 1
        if self.continues_word[action_id]:
            state.items[-1].positions.append(position)
            state.items[-1].head_token = position  # arcs use the word's last piece
            kind = PositionKind.SUBWORD
        else:
            state.num_words += 1
            state.closed = False  # a document's next sentence
            state.items.append(_Item([position], position))
            state.buffered = self.buffers_words
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
        every_piece = self.arcs_read_every_piece

        def attended_of(item):
            return item.positions if every_piece else item.positions[-1:]

        compose = None
        if self._rows_wanted:
            cells = [(p, 0) for p in attended_of(head)] + [(p, -1) for other in [dependent] + between
                                                           for p in attended_of(other)]
            if self.arcs_attend_themselves:
                cells.append((compose_position, 0))
            cells.sort()
            compose = NewPosition(action_id, compose_kind, np.array([p for p, _ in cells], dtype=np.int64),
                                  np.array([r for _, r in cells], dtype=np.int64), False,
                                  self._coordinate(slot), (head.head_token,))
        composed = _Item([compose_position], head.head_token, head.has_head, head.is_root,
                         head.has_right_dependent or not left)
        if head.is_root and not left:
            state.root_taken = True
        dependent.has_head = True
        self._place_composed(items, slot, composed, left)
        state.buffered = self.buffers_words and left
        state.length += 1
        self._after_arc(state, head)
        stack = self._stack_position(state, action_id, stack_kind, on_stack=False, extra=(head.head_token,),
                                     itself=self.arcs_attend_themselves)
        return [compose, stack]

    def _place_composed(self, items, slot, composed, left):
        """Put an arc's composed head in place of the items it joined (items[slot:], the top ones)."""
        items[slot:] = [composed]

    def _after_arc(self, state, head):
        """What an arc onto `head` does besides (arc-standard: onto the root, it completes the tree)."""

    def _pop(self, state, action_id):
        """A POP (arc-eager's removes the stack top; the reference variant's pop_root ends the sentence)."""
        raise ValueError(f"{self.name} grammar ({self.system}): action {state.num_actions - 1} (id {action_id}) is a "
                         "POP, which this transition system does not have")

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

    def added_token_ids(self, batch):
        """[B, T'] the token each arc position adds, its head word's last piece (`head_token_index`), -1 for none;
        None where arcs add no head (adds_head_tokens is False)."""
        if not self.adds_head_tokens:
            return None
        slots = batch["head_token_index"].astype(np.int64)
        tokens = np.take_along_axis(batch["input_ids"].astype(np.int64), np.maximum(slots, 0), axis=1)
        return np.where(slots >= 0, tokens, -1)

    def batch(self, sequences, validate=True, require_complete=True, pad_to_multiple_of=None, max_length=None,
              with_relative_positions=True):
        """Model inputs for a batch, the fields of grammars.Grammar.batch plus the family input `head_token_index`
        [B, T'] (the position whose token embedding is added to an arc's, -1 for none).

        Vectorized over the whole batch (`_TransitionStacks`); equal, field by field, to `_batch_from_steps`,
        which replays `step` (the definition) and which tests compare it with. A sequence that breaks the rules
        is replayed with `positions` to raise the step's own error."""
        if not len(sequences):
            raise ValueError(f"{self.name} grammar: expected at least one sequence, got an empty batch")
        expanded = self._checked_stacks(sequences, validate, require_complete).expand()
        lengths = expanded["lengths"]
        width = self._padded_width(lengths, max_length, pad_to_multiple_of)
        return _dense_batch(self, expanded, width, with_relative_positions)

    def _padded_width(self, lengths, max_length, pad_to_multiple_of):
        """The batch's width: its longest sequence's positions (ValueError past `max_length`), rounded up."""
        if max_length is not None and lengths.max() > max_length:
            index = int(lengths.argmax())
            raise ValueError(f"sequence {index} expands to {lengths[index]} positions under the {self.name} grammar; "
                             f"the maximum is {max_length}")
        width = int(lengths.max())
        return -(-width // pad_to_multiple_of) * pad_to_multiple_of if pad_to_multiple_of else width

    def _checked_stacks(self, sequences, validate, require_complete):
        """The `_TransitionStacks` of a batch whose every sequence follows the rules (ValueError from the step
        rules, naming the first illegal action of the first sequence that breaks them)."""
        sequences = [np.asarray(ids, dtype=np.int64) for ids in sequences]
        for index, ids in enumerate(sequences):
            if ids.ndim != 1:
                raise ValueError(f"{self.name} grammar: sequence {index}: expected a 1-D list of action ids, got "
                                 f"shape {ids.shape}")
        stacks = _TransitionStacks(self, sequences)
        ok = np.ones(len(sequences), dtype=bool)
        if validate:
            ok &= stacks.first_illegal() < 0
        if require_complete:  # what `positions` asks (is_complete)
            ok &= stacks.complete()
        if not ok.all():
            index = int(np.flatnonzero(~ok)[0])
            self.positions([int(i) for i in sequences[index]], validate, require_complete)
            raise AssertionError(f"sequence {index}: the vectorized and the step rules disagree")  # pragma: no cover
        return stacks

    def validate(self, ids, require_complete=True):
        """Check one sequence against the rules; raise ValueError naming the first illegal action."""
        self._checked_stacks([ids], True, require_complete)

    def validate_batch(self, sequences, require_complete=True):
        """Check many sequences at once (vectorized); raise ValueError naming the first bad one and its action."""
        self._checked_stacks(sequences, True, require_complete)

    def _first_illegal_actions(self, sequences):
        """Per sequence, the index of its first action that `legal_actions` refuses (-1: none), vectorized
        (tests hold it equal to replaying `legal_actions`)."""
        return _TransitionStacks(self, [np.asarray(ids, dtype=np.int64) for ids in sequences]).first_illegal()

    def _batch_from_steps(self, sequences, validate=True, require_complete=True, pad_to_multiple_of=None,
                          max_length=None, with_relative_positions=True):
        """`batch` built from the incremental rules, sequence by sequence: the reference that the vectorized
        `batch` is tested against."""
        if not len(sequences):
            raise ValueError(f"{self.name} grammar: expected at least one sequence, got an empty batch")
        expanded = [self.positions([int(i) for i in ids], validate, require_complete) for ids in sequences]
        lengths = np.array([len(p) for p in expanded], dtype=np.int64)
        width = self._padded_width(lengths, max_length, pad_to_multiple_of)
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
                  "depth": self.coordinate_sign * coordinates, "position_coordinates": coordinates,
                  "head_token_index": head_token,
                  "expansion_index": expansion, "prediction_index": prediction, "lengths": lengths,
                  "action_lengths": np.array([len(ids) for ids in sequences], dtype=np.int64)}
        if with_relative_positions:
            result["relative_positions"] = relative
        return result

    def stack_lifetimes(self, ids, validate=True, require_complete=True):
        """(pushed [T'] bool, removal [T'] int64) of one sequence: once position t is read, position j is on the
        stack (a later position may attend it) iff pushed[j] and j <= t < removal[j] (the last position of the
        action that removes its item; T' if none does). Segment recurrence keeps these in its memory
        (segments.py)."""
        expanded = self._checked_stacks([ids], validate, require_complete).expand()
        removal = expanded["removal"].astype(np.int64)
        return removal > expanded["column"], removal


class _TransitionStacks:
    """What `step` keeps in `_DependencyState`, for every action of a batch at once: numpy over the sequences
    concatenated, with no loop over actions (`DependencyGrammar.batch`).

    The stack as numbers. An item keeps the height it is pushed at, except the buffer item of arc-eager and
    arc-swift: it is always the top (a POP or an RA[k] below it moves it down) until a new word or its own RA
    fixes it where it is; until then it is "buffered". Every other change removes the fixed items from some
    height up (`floor`) and pushes at most one item per height, so the item at height h before action n is the
    last one pushed at h before n: one sorted search (as tg_stack_lifetimes does for TG). Numbers after a
    sequence's first illegal action mean nothing; only legal prefixes are expanded.
    """

    def __init__(self, grammar, sequences):
        self.grammar = grammar
        layout, count = grammar.layout, len(sequences)
        self.buffers = grammar.buffers_words  # arc-eager, arc-swift: the newest word waits in the buffer
        self.lengths = np.array([len(ids) for ids in sequences], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int64)
        ids = np.concatenate(sequences).astype(np.int64)
        total = self.total = len(ids)
        self.sequence = np.repeat(np.arange(count), self.lengths)
        self.sequence_start = starts[self.sequence]
        self.local = np.arange(total) - self.sequence_start
        self.first = self.local == 0
        self.in_vocabulary = (ids >= 0) & (ids < grammar.vocab_size)
        safe = np.where(self.in_vocabulary, ids, 0)
        kinds = np.where(self.in_vocabulary, grammar.action_kinds[safe], ActionKind.PAD)
        self.ids, self.kinds = ids, kinds
        self.is_start = (kinds == ActionKind.ROOT) | (kinds == ActionKind.BOS)
        self.is_piece = kinds == ActionKind.TERMINAL
        self.is_continuation = self.is_piece & grammar.continues_word[safe]
        self.is_word = self.is_piece & ~self.is_continuation
        self.is_left, self.is_right = kinds == ActionKind.LEFT_ARC, kinds == ActionKind.RIGHT_ARC
        self.is_arc = self.is_left | self.is_right
        self.is_pop, self.is_eos = kinds == ActionKind.POP, kinds == ActionKind.EOS
        self.is_pop_root = self.is_pop & grammar.ends_with_pop_root
        k = self.k = np.where(self.is_left, ids - layout.left_arc_start + 1,
                              np.where(self.is_right, ids - layout.right_arc_start + 1, 0))
        # Items each action adds: the start and a word one; an arc replaces the k + 1 items it joins by one
        # (the RA of arc-eager / arc-swift keeps its dependent besides); a POP removes one.
        delta = (self.is_start.astype(np.int64) + self.is_word - self.is_pop - np.where(self.is_left, k, 0)
                 - np.where(self.is_right, k - 1 if self.buffers else 1, 0))
        self.size_after = self.cumsum(delta)
        self.size_before = size = self.size_after - delta
        if not self.buffers:
            self.buffered = np.zeros(total, dtype=bool)
        else:  # a word fills the buffer, an LA leaves its composed head there, an RA empties it
            change = self.last_index(self.is_word | self.is_arc)
            after = (change >= 0) & (self.is_word | self.is_left)[np.maximum(change, 0)]
            self.buffered = self.previous(after, False)  # before each action, like every state below
        self.fixed = size - self.buffered
        self.slot = size - 1 - k
        self.floor = np.where(self.is_arc, self.slot, self.fixed - 1)
        self.removed = np.where(self.is_arc | self.is_pop, np.maximum(self.fixed - self.floor, 0), 0)

        self.repeats = 1 + self.is_arc.astype(np.int64)  # an arc: its COMPOSE, then its STACK copy
        self.position_last = np.cumsum(self.repeats) - 1
        self.position_first = self.position_last - self.is_arc
        self.position_counts = np.bincount(self.sequence, weights=self.repeats, minlength=count).astype(np.int64)
        self.position_starts = np.concatenate([[0], np.cumsum(self.position_counts)[:-1]]).astype(np.int64)
        self.last_local = self.position_last - self.position_starts[self.sequence]
        # An item is named by its first position (flat over the batch): the start, a word's first piece, a COMPOSE.
        if self.buffers:
            pushed = self.previous(self.last_index(self.is_word | self.is_left), -1)
            self.buffered_item = np.where(pushed >= 0, self.position_first[np.maximum(pushed, 0)], -1)
        self._index_pushes()

    # ---- per-sequence scans, flat -----------------------------------------------------------------------
    def cumsum(self, values):
        """Inclusive cumulative sum restarting at every sequence."""
        running = np.cumsum(values)
        return running - (running - values)[self.sequence_start]

    def previous(self, values, fill):
        """Each action's value at the action before it in its sequence (`fill` for a first action)."""
        shifted = np.empty_like(values)
        shifted[1:] = values[:-1]
        shifted[self.first] = fill
        return shifted

    def last_index(self, flags):
        """The flat index of the last action at or before each action, in its sequence, with `flags`; -1: none."""
        index = np.maximum.accumulate(np.where(flags, np.arange(self.total), -1))
        return np.where(index >= self.sequence_start, index, -1)

    # ---- which item is where --------------------------------------------------------------------------
    def _index_pushes(self):
        """Every push of an item at a fixed height, sorted by (sequence, height, action), with what the
        legality rules read of it: whether it has its head and whether it is an RA's composed item (it then
        has a right dependent)."""
        n, size, slot, first = np.arange(self.total), self.size_before, self.slot, self.position_first
        # (which actions, height, item, plain: not an RA's composed item, has_head, RA's composed item,
        # fixes: a buffered item's height fixed from here on)
        events = [(self.is_start, 0, first, True, False, False, False)]
        if not self.buffers:  # a composed item holds the legal arc's head: no head, a right dependent after RA
            events += [(self.is_word, self.size_after - 1, first, True, False, False, False),
                       (self.is_arc, slot, first, True, False, self.is_right, False)]
        else:
            events += [
                (self.is_right, slot, first, False, False, True, False),  # in its head's place: the head's has_head
                (self.is_word & self.buffered, size - 1, self.buffered_item, True, False, False, True),  # shifted
                (self.is_right & self.buffered, slot + 1, self.buffered_item, True, True, False, True),  # headed
            ]
        columns = [[] for _ in range(7)]
        for mask, *values in events:
            where = n[mask]
            columns[0].append(where)
            for column, value in zip(columns[1:], values):
                column.append(value[where] if isinstance(value, np.ndarray) else np.full(len(where), value))
        action, height, item, base, has_head, right, fixes = (np.concatenate(column) for column in columns)
        self.push_action, self.push_height, self.push_item, self.push_fixes = action, height, item, fixes
        self._span = int(max(self.size_after.max(initial=0), size.max(initial=0))) + 2
        # A sentinel first (key -1, no group) so that every search lands on an entry.
        keys = np.concatenate([[-1], self._group(action, height) * (self.total + 1) + action])
        order = np.argsort(keys, kind="stable")
        self.push_keys = keys[order]
        self.push_sorted_item = np.concatenate([[-1], item])[order]
        self.push_right = np.concatenate([[False], right])[order]
        # An RA's composed item takes its head's has_head: the last plain push at the same height says it.
        plain = np.maximum.accumulate(np.where(np.concatenate([[True], base])[order], np.arange(len(order)), 0))
        self.push_has_head = np.concatenate([[False], has_head])[order][plain]

    def _group(self, action, height):
        return self.sequence[action] * self._span + np.clip(height, -1, self._span - 2) + 1

    def lookup(self, action, height):
        """Index into the sorted pushes of the item at `height` before `action` (0, the sentinel: none)."""
        group = self._group(action, height)
        index = np.searchsorted(self.push_keys, group * (self.total + 1) + action) - 1
        return np.where(self.push_keys[index] // (self.total + 1) == group, index, 0)

    @staticmethod
    def spans(low, high):
        """Every value of the ranges low .. high - 1 (empty where high <= low), as (the range's index, value)."""
        counts = np.maximum(high - low, 0)
        owner = np.repeat(np.arange(len(low)), counts)
        return owner, low[owner] + np.arange(len(owner)) - (np.cumsum(counts) - counts)[owner]

    def all_have_heads(self, actions, low, high):
        """For each of `actions`, whether every item at heights low .. high - 1 has its head."""
        owner, height = self.spans(low, high)
        headless = ~self.push_has_head[self.lookup(actions[owner], height)]
        return np.bincount(owner, weights=headless, minlength=len(actions)) == 0

    # ---- legality: legal_actions, per action ----------------------------------------------------------
    def legal(self):
        """Per action: whether `legal_actions` of the state before it allows it (meaningful up to a sequence's
        first illegal action). Tests hold it equal to `legal_actions` on valid and invalid sequences."""
        kinds, slot = self.kinds, self.slot
        before = self.previous(kinds, -1)
        root_arc = self.is_right & (slot == 0)  # an RA whose head is the root (the item at height 0)
        taken = self.previous(self.cumsum(root_arc | self.is_pop_root), 0) > 0
        closed = self.previous(self.closed_after(self.grammar._closing_actions(self, root_arc)), False)
        finished = self.previous(self.cumsum(self.is_eos), 0) > 0
        legal = self.is_piece & (before != ActionKind.POP) & (~self.is_continuation | (before == ActionKind.TERMINAL))
        self.grammar._legal_structure_batch(self, legal, taken)
        # Closed: `</s>`; in a document also the next sentence's first word.
        legal = np.where(closed, self.is_eos | (self.is_word & self.grammar.document_level), legal) & ~finished
        return np.where(self.first, kinds == self.grammar.start_action_kind, legal) & self.in_vocabulary

    def closed_after(self, closes):
        """Per action: whether the tree is complete after it: a `closes` action came before (a document: and no word
        since, which began the next sentence)."""
        if not self.grammar.document_level:
            return self.cumsum(closes) > 0
        last_close = self.last_index(closes)
        return (last_close >= 0) & (last_close > self.last_index(self.is_word))

    def complete(self):
        """Per sequence: whether it is complete: `</s>` was read (a document: or its last sentence is closed)."""
        complete = self.has_eos()
        if self.grammar.document_level and self.total:
            closes = self.grammar._closing_actions(self, self.is_right & (self.slot == 0))
            last = np.concatenate([[0], np.cumsum(self.lengths)])[1:] - 1
            complete |= (self.lengths > 0) & self.closed_after(closes)[np.maximum(last, 0)]
        return complete

    def first_illegal(self):
        """Per sequence: the index of its first illegal action, -1 for none."""
        illegal = np.flatnonzero(~self.legal())
        first = np.full(len(self.lengths), -1, dtype=np.int64)
        sequences, where = np.unique(self.sequence[illegal], return_index=True)
        first[sequences] = self.local[illegal[where]]
        return first

    def has_eos(self):
        return np.bincount(self.sequence, weights=self.is_eos, minlength=len(self.lengths)) > 0

    # ---- expansion ----------------------------------------------------------------------------------------
    def expand(self):
        """Per position, flat over the batch, what `_dense_batch` lays out: ids, kinds, coordinates, head tokens;
        for STACK rows each position's life on the stack in local positions (pushed at itself, gone from
        `removal` on, at height `height` from row `fix` on and at the top before) and each row's top `top`; for
        COMPOSE and pop_root rows (`explicit`) the cells they attend, listed (`cells`: sequence, row, column,
        relative position)."""
        total, repeats, first, last = self.total, self.repeats, self.position_first, self.position_last
        size, slot, count = self.size_before, self.slot, int(self.position_counts.sum())
        sequence = np.repeat(self.sequence, repeats)
        column = np.arange(count) - self.position_starts[sequence]
        seq_length = self.position_counts[sequence]
        local_first = first - self.position_starts[self.sequence]

        table = np.full(len(ActionKind), PositionKind.EOS, dtype=np.int8)  # step ends on any other kind
        table[[ActionKind.ROOT, ActionKind.BOS, ActionKind.TERMINAL, ActionKind.LEFT_ARC, ActionKind.RIGHT_ARC]] = [
            PositionKind.ROOT, PositionKind.BOS, PositionKind.TERMINAL, PositionKind.LEFT_ARC_COMPOSE,
            PositionKind.RIGHT_ARC_COMPOSE]
        table[ActionKind.POP] = PositionKind.POP_ROOT if self.grammar.ends_with_pop_root else PositionKind.POP
        first_kind = table[self.kinds]
        first_kind[self.is_continuation] = PositionKind.SUBWORD
        kinds = np.repeat(first_kind, repeats)
        kinds[last[self.is_left]] = PositionKind.LEFT_ARC_STACK
        kinds[last[self.is_right]] = PositionKind.RIGHT_ARC_STACK
        compose = np.zeros(count, dtype=bool)
        compose[first[self.is_arc]] = True

        # Items: which action removes each, and from when it sits at which height.
        removed_by = np.full(count, -1, dtype=np.int64)
        owner, height = self.spans(self.floor, self.floor + self.removed)
        found = self.push_sorted_item[self.lookup(owner, height)]
        removed_by[found[found >= 0]] = owner[found >= 0]
        fixed_at = np.full(count, -1, dtype=np.int64)  # -1: from its push; `total`: never (buffered till the end)
        item_height = np.zeros(count, dtype=np.int64)
        if self.buffers:
            left = np.flatnonzero(self.is_left & self.buffered & (self.buffered_item >= 0))
            removed_by[self.buffered_item[left]] = left  # LA's head, the buffer item
            fixed_at[first[self.is_word | self.is_left]] = total
        real = self.push_item >= 0
        item_height[self.push_item[real]] = self.push_height[real]
        fixes = real & self.push_fixes
        fixed_at[self.push_item[fixes]] = self.push_action[fixes]

        pushed = np.zeros(count, dtype=bool)
        pushed[first[self.is_start | self.is_piece]] = True
        pushed |= compose
        item = np.arange(count)
        words = self.last_index(self.is_word)[self.is_piece]
        pieces = first[self.is_piece]
        item[pieces] = np.where(words >= 0, first[np.maximum(words, 0)], pieces)
        remover = removed_by[item]
        removal = np.where(remover >= 0, self.last_local[np.maximum(remover, 0)], seq_length)
        removal = np.where(pushed, removal, 0)  # never attended by a STACK row
        fixed = fixed_at[item]
        fix = np.where(fixed < 0, 0, np.where(fixed >= total, seq_length, local_first[np.minimum(fixed, total - 1)]))
        continues = np.zeros(total, dtype=bool)
        continues[:-1] = self.is_continuation[1:] & ~self.first[1:]
        item_last = np.arange(count)  # an item's last position: a word's last piece
        ends = first[self.is_piece & ~continues]
        item_last[item[ends]] = ends

        # Rows: the top they see (COMPOSE and pop_root: before the action; the others after it).
        top = np.repeat(self.size_after - 1, repeats)
        before = self.is_arc | self.is_pop_root
        top[first[before]] = size[before] - 1
        sign = self.grammar.coordinate_sign
        coordinates = sign * top
        coordinates[first[self.is_arc]] = sign * slot[self.is_arc]
        coordinates[first[self.is_pop_root]] = 0
        itself = (pushed & ~compose) | (kinds == PositionKind.POP) | (kinds == PositionKind.POP_ROOT)
        itself |= kinds == PositionKind.EOS
        if self.grammar.arcs_attend_themselves:
            itself |= np.repeat(self.is_arc, repeats)

        # COMPOSE and pop_root rows attend the items from the lowest they join (pop_root: the root) to the top,
        # the head at 0 and the others at -1: the paper's each item's last position, the reference's every one.
        explicit = np.flatnonzero(before)
        explicit_rows = np.zeros(count, dtype=bool)
        explicit_rows[first[explicit]] = True
        owner, height = self.spans(np.where(self.is_arc[explicit], slot[explicit], 0), size[explicit])
        action = explicit[owner]
        joined = self.push_sorted_item[self.lookup(action, height)]
        if self.buffers:
            joined = np.where(self.buffered[action] & (height == size[action] - 1), self.buffered_item[action], joined)
        head = np.where(self.is_left[action], size[action] - 1, np.where(self.is_right[action], slot[action], 0))
        value = np.where(height == head, 0, -1)[joined >= 0]
        action, joined = action[joined >= 0], joined[joined >= 0]
        if self.grammar.arcs_read_every_piece:
            owner, joined = self.spans(joined, item_last[joined] + 1)  # a word's pieces are consecutive
            action, value = action[owner], value[owner]
        else:
            joined = item_last[joined]
        cells_sequence = self.sequence[action]
        cells = (cells_sequence, local_first[action], joined - self.position_starts[cells_sequence], value)

        # Head tokens: a composed item's is its head item's, back to a word's last piece or the root.
        arcs = np.flatnonzero(self.is_arc)
        head_item = self.push_sorted_item[self.lookup(arcs, np.where(self.is_left[arcs], size[arcs] - 1, slot[arcs]))]
        if self.buffers:
            head_item = np.where(self.is_left[arcs], self.buffered_item[arcs], head_item)
        parent = np.arange(count)
        parent[first[arcs]] = np.where(head_item >= 0, head_item, first[arcs])  # always an earlier item: no cycle
        while True:
            grandparent = parent[parent]
            if np.array_equal(grandparent, parent):
                break
            parent = grandparent
        token = item_last[parent] - self.position_starts[sequence]
        head_token = np.full(count, -1, dtype=np.int64)
        head_token[first[arcs]] = head_token[last[arcs]] = token[first[arcs]]
        roots = np.flatnonzero(self.is_pop_root)  # the root's own head token
        root_item = self.push_sorted_item[self.lookup(roots, np.zeros_like(roots))]
        head_token[first[roots]] = np.where(root_item >= 0, token[np.maximum(root_item, 0)], -1)

        return {"sequence": sequence, "column": column, "input_ids": np.repeat(self.ids, repeats), "kinds": kinds,
                "coordinates": coordinates, "head_token": head_token, "expansion": np.repeat(self.local, repeats),
                "predicts": ~compose & (kinds != PositionKind.EOS), "removal": removal, "fix": fix,
                "height": item_height[item], "top": top, "explicit": explicit_rows, "cells": cells, "itself": itself,
                "lengths": self.position_counts, "action_lengths": self.lengths,
                "prediction": (self.sequence, self.local, self.last_local)}


def _dense_batch(grammar, expanded, width, with_relative_positions):
    """The [B, T'] and [B, T', T'] arrays of `DependencyGrammar.batch` from `_TransitionStacks.expand`.

    A STACK row i attends the positions on the stack, j <= i < removal[j], at relative position
    sign * (top[i] - h) with h the height of j's item, which is top[i] itself while that item is buffered
    (i < fix[j]). COMPOSE and pop_root rows are then overwritten with their listed cells.
    """
    lengths, batch = expanded["lengths"], len(expanded["lengths"])
    rows, columns = expanded["sequence"], expanded["column"]
    # The [B, T', T'] passes cost the most: the narrowest integers that hold a position, and a height.
    small = next(t for t in (np.uint8, np.int16, np.int32) if width < np.iinfo(t).max)
    deepest = max(int(expanded["top"].max(initial=0)), int(expanded["height"].max(initial=0)))
    heights_type = np.int8 if deepest < np.iinfo(np.int8).max else np.int32

    def padded(values, fill, dtype=None):
        array = np.full((batch, width), fill, dtype=dtype or values.dtype)
        array[rows, columns] = values
        return array

    input_ids = padded(expanded["input_ids"], grammar.layout.pad_token_id, np.int64)
    real = padded(np.ones(len(rows), dtype=bool), False)
    predicts = padded(expanded["predicts"], False)
    labels = np.full((batch, width), IGNORE_INDEX, dtype=np.int64)
    labels[:, :-1] = np.where(predicts[:, :-1] & real[:, 1:], input_ids[:, 1:], IGNORE_INDEX)
    coordinates = padded(expanded["coordinates"], 0, np.int64)
    action_sequence, action_local, output = expanded["prediction"]
    prediction = np.zeros((batch, int(expanded["action_lengths"].max())), dtype=np.int64)
    prediction[action_sequence, action_local] = output

    line = np.arange(width, dtype=small)
    # j <= i < removal[j] as one unsigned comparison: i - j (negative wraps past any life) < removal[j] - j
    unsigned = np.uint16 if small == np.uint8 else np.uint32
    since = (line[:, None].astype(np.int64) - line[None, :]).astype(unsigned)
    life = np.maximum(expanded["removal"] - columns, 0).astype(unsigned)
    mask = since[None] < padded(life, 0)[:, None, :]
    if with_relative_positions:
        height = padded(expanded["height"], 0, heights_type)
        top = padded(expanded["top"], 0, heights_type)
        if grammar.coordinate_sign > 0:
            relative = top[:, :, None] - height[:, None, :]
        else:
            relative = height[:, None, :] - top[:, :, None]
        if not grammar.buffers_words:  # nothing is ever buffered
            cells = mask
        else:
            cells = mask & (line[None, :, None] >= padded(expanded["fix"], 0, small)[:, None, :])
        relative *= cells.view(np.int8) if relative.dtype == np.int8 else cells  # no mixed-type loop
    explicit = expanded["explicit"]
    b, i = rows[explicit], columns[explicit]
    cell_b, cell_i, cell_j, cell_value = expanded["cells"]
    mask[b, i] = False
    mask[cell_b, cell_i, cell_j] = True
    diagonal = np.arange(width)
    mask[:, diagonal, diagonal] = padded(expanded["itself"], True)  # padding rows attend only themselves
    result = {"input_ids": input_ids, "position_kinds": padded(expanded["kinds"], PositionKind.PAD, np.int8),
              "attention_mask": mask, "labels": labels, "depth": grammar.coordinate_sign * coordinates,
              "position_coordinates": coordinates, "head_token_index": padded(expanded["head_token"], -1, np.int64),
              "expansion_index": padded(expanded["expansion"], 0, np.int64), "prediction_index": prediction,
              "lengths": lengths, "action_lengths": expanded["action_lengths"]}
    if with_relative_positions:
        relative[b, i] = 0
        relative[cell_b, cell_i, cell_j] = cell_value
        relative[:, diagonal, diagonal] = 0
        result["relative_positions"] = relative.astype(np.int64)
    return result


class ArcStandardGrammar(DependencyGrammar):
    """DTG (paper 002, Algorithm 1): arc-standard. Arcs join the two top items; the arc onto the root, the tree's
    last, completes it; items never move, so relative positions are affine in the coordinates."""

    name = "dtg"
    system = "arc_standard"
    linearization = "arc_standard"  # what the tokenizer must produce (DependencyTokenizer's transition_system)
    reads_documents = True
    # Items never move, so a position's coordinate (-height) stays its item's and STACK rows get R = c_i - c_j; a
    # COMPOSE row sits at the lower item's height h and attends the two top items' last pieces (heights h and
    # h + 1), so R = (c_i - c_j) - 1 on an LA's (head above: 0, dependent: -1) and -(c_i - c_j) on an RA's (head: 0,
    # dependent above: -1). The model then keeps its fast attention paths (backbone.PositionStructure.
    # relative_affine); tests hold this equal to the explicit values. (Other systems move items, a POP or an
    # arc-swift RA[k], and the reference variant attends more: explicit values.)
    relative_affine_by_kind = MappingProxyType({PositionKind.LEFT_ARC_COMPOSE: (1, -1),
                                                PositionKind.RIGHT_ARC_COMPOSE: (-1, 0)})

    def _legal_structure(self, state):
        layout, items = self.layout, state.items
        legal = []
        if len(items) >= 3:
            # canonical order: a head takes its left dependents before its right ones (transitions.py)
            legal += [layout.right_arc_start] if items[-1].has_right_dependent else [layout.left_arc_start,
                                                                                    layout.right_arc_start]
        elif len(items) == 2:  # root and one item: the last arc, onto the root
            legal.append(self._root_arc_id())
        return legal

    def _root_arc_id(self):
        """The action that gives the root its dependent: RA (the reference variant: pop_root)."""
        return self.layout.right_arc_start

    def structure_completes_tree(self, state):
        """The arc onto the root (the root and one item left)."""
        return len(state.items) == 2

    def _stack_need(self, state):
        """Exactly: an arc (two positions) for every item but the root, the last one onto the root (pop_root: one),
        then `</s>`; a first word if there is none."""
        last_arc = 1 if self.ends_with_pop_root else 2
        dependents = len(state.items) - 1
        if dependents == 0:
            return 1 + last_arc + 1, 1
        return 2 * (dependents - 1) + last_arc + 1, 0

    def _after_arc(self, state, head):
        if head.is_root:
            state.closed = True  # the root has its dependent: the tree is complete
            state.trees_complete += 1

    # ---- the vectorized rules (_TransitionStacks.legal) ----
    def _closing_actions(self, stacks, root_arc):
        """Per action: whether it completes the tree (the arc onto the root, or pop_root)."""
        return root_arc | stacks.is_pop_root

    def _legal_structure_batch(self, stacks, legal, taken):
        """`_legal_structure` for every action of `stacks` at once: marks the legal arcs and POP in `legal`."""
        size = stacks.size_before
        lefts = np.flatnonzero(stacks.is_left)
        top_right = stacks.push_right[stacks.lookup(lefts, size[lefts] - 1)]  # canonical: left dependents first
        legal[lefts] |= (size[lefts] >= 3) & ~top_right
        legal |= stacks.is_right & (size >= (3 if self.ends_with_pop_root else 2))
        legal |= stacks.is_pop_root & (size == 2)


class BufferedDependencyGrammar(DependencyGrammar):
    """What arc-eager and arc-swift share: the newest word waits in the buffer, attended as the top item; an arc
    joins it with an item below; its RA keeps the dependent (the word) on the stack."""

    buffers_words = True

    def _place_composed(self, items, slot, composed, left):
        if left:  # the head (the buffer word) takes the place of the items it joined
            items[slot:] = [composed]
        else:  # RA: the head is replaced, the items between go, the word stays on top
            items[slot:-1] = [composed]

    def _stack_need(self, state):
        """A lower bound (an arc for every item without a head, `</s>`), so that the search never refuses a tree
        that could still finish; a first word if there is none."""
        headless = sum(1 for item in state.items if not item.is_root and not item.has_head)
        if not state.num_words:
            return 1 + 2 + 1, 1
        return 2 * headless + 1, 0

    def _legal_structure_batch(self, stacks, legal, taken):
        """The vectorized arcs: the buffer word and the k-th item below it (k = 1 outside arc-swift), the items
        between with their heads; no LA onto the root or a headed item, no second RA onto the root."""
        size, slot, k = stacks.size_before, stacks.slot, stacks.k
        arcs = np.flatnonzero(stacks.is_arc)
        reach = stacks.buffered[arcs] & (k[arcs] <= size[arcs] - 1)
        reach &= stacks.all_have_heads(arcs, slot[arcs] + 1, size[arcs] - 1)  # the items between
        headed = stacks.all_have_heads(arcs, slot[arcs], slot[arcs] + 1)
        legal[arcs] |= stacks.is_left[arcs] & reach & (slot[arcs] != 0) & ~headed
        legal[arcs] |= stacks.is_right[arcs] & reach & ~((slot[arcs] == 0) & taken[arcs])


class ArcEagerGrammar(BufferedDependencyGrammar):
    """DTG-eager (paper 002, section 3.4 and Figure 4): POP removes the stack top once it has its head; popping the
    root completes the tree."""

    name = "dtg_eager"
    system = "arc_eager"
    linearization = "arc_eager"  # what the tokenizer must produce (DependencyTokenizer's transition_system)

    def _check_layout(self, layout):
        super()._check_layout(layout)
        if layout.pop_token_id is None:
            raise ValueError("arc-eager needs a POP id in the layout (pop_token_id)")

    def _legal_structure(self, state):
        layout, items = self.layout, state.items
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

    def structure_completes_tree(self, state):
        """The POP of the root (its dependent taken, nothing else left)."""
        return len(state.items) == 1 and state.root_taken

    def minimum_positions(self, pieces, words):
        """DependencyGrammar's, and at least the POPs of the root's dependent and of the root (when every other
        word is a left dependent)."""
        return super().minimum_positions(pieces, words) + 2

    def _pop(self, state, action_id):
        """Arc-eager's POP: remove the stack top (below the buffer word, if there is one)."""
        index = -2 if state.buffered else -1
        popped = state.items.pop(index)
        if popped.is_root:  # the last item: the tree is complete, and this POP attends itself only
            state.closed = True
        return self._stack_position(state, action_id, PositionKind.POP, on_stack=False)

    def _closing_actions(self, stacks, root_arc):
        return stacks.is_pop & (stacks.fixed == 1)  # the root popped

    def _legal_structure_batch(self, stacks, legal, taken):
        super()._legal_structure_batch(stacks, legal, taken)
        size = stacks.size_before
        pops = np.flatnonzero(stacks.is_pop)
        top = stacks.fixed[pops] - 1
        legal[pops] |= (top >= 0) & (stacks.all_have_heads(pops, top, top + 1)
                                     | ((top == 0) & taken[pops] & (size[pops] == 1)))


class ArcSwiftGrammar(BufferedDependencyGrammar):
    """DTG-swift (paper 002, section 3.4 and Figure 5): LA[k] / RA[k] join the buffer word with the k-th item below
    it (the k - 1 between must have their heads, and go); `</s>` ends the tree once every word has its head."""

    name = "dtg_swift"
    system = "arc_swift"
    linearization = "arc_swift"  # what the tokenizer must produce (DependencyTokenizer's transition_system)
    takes_k = True

    def _legal_structure(self, state):
        layout, items = self.layout, state.items
        legal = []
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

    def structure_completes_tree(self, state):
        return False  # `</s>` ends the tree itself

    def _closing_actions(self, stacks, root_arc):
        return np.zeros(stacks.total, dtype=bool)

    def _legal_structure_batch(self, stacks, legal, taken):
        super()._legal_structure_batch(stacks, legal, taken)
        ends = np.flatnonzero(stacks.is_eos)
        words = stacks.previous(stacks.cumsum(stacks.is_word), 0)[ends]
        legal[ends] |= ~stacks.buffered[ends] & (words > 0) & stacks.all_have_heads(ends, np.ones_like(ends),
                                                                                     stacks.size_before[ends])


class ReferenceVariant:
    """The reference variant of arc-standard: paper 002's released code (module docstring, (a) to (d)): `<s>` plays
    the root and the sentence ends with pop_root; arcs attend themselves and every piece of both words; STACK
    relative positions count up from the top. Mixed into ArcStandardGrammar and TXL (trans)."""

    variant = "reference"
    start_action_kind = ActionKind.BOS
    coordinate_sign = 1
    ends_with_pop_root = True
    arcs_attend_themselves = True
    arcs_read_every_piece = True
    reads_documents = False  # pop_root ends the sequence's one sentence
    relative_affine_by_kind = None  # COMPOSE rows attend more than two pieces: explicit values

    @property
    def start_action_id(self):
        """`<s>` plays the root."""
        return self.layout.bos_token_id

    def _check_layout(self, layout):
        super()._check_layout(layout)
        if layout.pop_token_id is None:
            raise ValueError("the reference variant ends with pop_root: the layout needs a POP id (pop_token_id)")

    def _root_arc_id(self):
        return self.layout.pop_token_id

    def _pop(self, state, action_id):
        """The reference variant's end: `<s>` takes the one item left as its dependent."""
        root, item = state.items
        position = state.length
        state.length += 1
        state.items = [root]
        state.root_taken = state.closed = True
        if not self._rows_wanted:
            return None
        cells = sorted([(p, 0) for p in root.positions] + [(p, -1) for p in item.positions] + [(position, 0)])
        return NewPosition(action_id, PositionKind.POP_ROOT, np.array([p for p, _ in cells], dtype=np.int64),
                           np.array([r for _, r in cells], dtype=np.int64), True, self._coordinate(0),
                           (root.head_token,))



class ArcStandardReferenceGrammar(ReferenceVariant, ArcStandardGrammar):
    """DTG, arc-standard as paper 002's released code implements it (ReferenceVariant)."""


class TransitionTXLGrammar(ArcStandardGrammar):
    """TXL (trans) (paper 002, section 4): DTG's arc-standard sequences read by a plain Transformer-XL. One
    position per action (arcs are not duplicated and add no head embedding), each attending every earlier
    one, with linear relative positions i - j. Legality is DTG's (`legal_actions`, inherited), so beam search
    explores the same trees."""

    name = "txl_trans"
    causal = True
    duplicates_closing = False
    duplicated_actions = "nothing"
    explicit_relative_positions = False
    relative_affine_by_kind = None
    adds_head_tokens = False
    references_positions = False
    family_inputs = ()
    compose_kinds = frozenset()
    relative_position_range = (0, None)
    relative_position_meaning = "sequence distances i - j"

    def step(self, state, action_id, check=True):
        position = state.num_actions
        # DTG's step keeps the stack that legality reads; of its positions only the last one's kind (an arc's
        # STACK copy) and whether it predicts carry over to the single causal position.
        last = super().step(state, action_id, check)[-1]
        if not self._rows_wanted:
            return [None]
        attended = np.arange(position + 1, dtype=np.int64)
        return [NewPosition(last.input_id, last.kind, attended, position - attended, last.predicts, position)]

    def minimum_positions(self, pieces, words):
        return 1 + pieces + words + 1  # `<root>`, the pieces, one arc per word, `</s>`

    def stack_lifetimes(self, ids, validate=True, require_complete=True):
        """Causal: every position stays attendable (not DTG's stack, which this grammar's positions do not have)."""
        self._checked_stacks([ids], validate, require_complete)
        return np.ones(len(ids), dtype=bool), np.full(len(ids), np.iinfo(np.int64).max, dtype=np.int64)

    def batch(self, sequences, validate=True, require_complete=True, pad_to_multiple_of=None, max_length=None,
              with_relative_positions=True):
        """Model inputs for a batch (the fields of grammars.Grammar.batch): a causal mask, coordinates 0, 1, ...
        per row, each position predicting the next action (`</s>` nothing); legality checked as DTG's batch does
        (`step` stays the definition: tests compare the two)."""
        if not len(sequences):
            raise ValueError(f"{self.name} grammar: expected at least one sequence, got an empty batch")
        self._checked_stacks(sequences, validate, require_complete)
        lengths = np.array([len(ids) for ids in sequences], dtype=np.int64)
        width = max(self._padded_width(lengths, max_length, pad_to_multiple_of), 1)
        count = len(sequences)
        columns = np.arange(width, dtype=np.int64)
        real = columns[None, :] < lengths[:, None]
        input_ids = np.full((count, width), self.layout.pad_token_id, dtype=np.int64)
        input_ids[real] = np.concatenate([np.asarray(ids, dtype=np.int64) for ids in sequences]) if real.any() else []
        kinds = self._position_kinds(input_ids)
        kinds[~real] = PositionKind.PAD
        following = np.concatenate([input_ids[:, 1:], np.full((count, 1), IGNORE_INDEX)], axis=1)
        predicts = np.concatenate([real[:, 1:], np.zeros((count, 1), dtype=bool)], axis=1) & (kinds != PositionKind.EOS)
        labels = np.where(predicts, following, IGNORE_INDEX)
        causal = columns[None, :] <= columns[:, None]
        mask = (causal[None] & real[:, None, :] & real[:, :, None]) | np.eye(width, dtype=bool)[None]  # padding: itself
        index = np.minimum(columns[None, :], np.maximum(lengths - 1, 0)[:, None])
        result = {"input_ids": input_ids, "position_kinds": kinds, "attention_mask": mask, "labels": labels,
                  "depth": np.zeros((count, width), dtype=np.int64),
                  "position_coordinates": np.where(real, columns[None, :], 0),
                  "expansion_index": index, "prediction_index": index[:, : max(int(lengths.max()), 1)].copy(),
                  "lengths": lengths, "action_lengths": lengths.copy()}
        if with_relative_positions:
            result["relative_positions"] = np.where(mask, columns[:, None] - columns[None, :], 0)
        return result

    def __init__(self, layout, variant=None, document_level=False):
        super().__init__(layout, variant, document_level)
        # The PositionKind of each id's one position: an arc's is its STACK copy's (the copy that predicts).
        by_action = {ActionKind.ROOT: PositionKind.ROOT, ActionKind.BOS: PositionKind.BOS,
                     ActionKind.TERMINAL: PositionKind.TERMINAL, ActionKind.LEFT_ARC: PositionKind.LEFT_ARC_STACK,
                     ActionKind.RIGHT_ARC: PositionKind.RIGHT_ARC_STACK, ActionKind.EOS: PositionKind.EOS,
                     ActionKind.PAD: PositionKind.PAD,
                     ActionKind.POP: PositionKind.POP_ROOT if self.ends_with_pop_root else PositionKind.POP}
        self._kind_of_id = np.array([by_action[ActionKind(int(k))] for k in self.action_kinds], dtype=np.int8)
        self._kind_of_id[self.continues_word & (self.action_kinds == ActionKind.TERMINAL)] = PositionKind.SUBWORD

    def _position_kinds(self, ids):
        """The PositionKind of each action's one position."""
        # ids outside the vocabulary read as words (as `step` reads them; validation refuses them)
        return np.where(ids < len(self._kind_of_id), self._kind_of_id[np.minimum(ids, len(self._kind_of_id) - 1)],
                        PositionKind.TERMINAL).astype(np.int8)


class TransitionTXLReferenceGrammar(ReferenceVariant, TransitionTXLGrammar):
    """TXL (trans) over the reference variant's sequences (ReferenceVariant)."""


# Each system's classes by variant (the factory of DependencyGrammar.__new__).
for _paper, _reference in ((ArcStandardGrammar, ArcStandardReferenceGrammar), (ArcEagerGrammar, None),
                           (ArcSwiftGrammar, None), (TransitionTXLGrammar, TransitionTXLReferenceGrammar)):
    _paper.variant_classes = {"paper": _paper, **({"reference": _reference} if _reference else {})}

DEPENDENCY_GRAMMARS = {grammar.name: grammar for grammar in (ArcStandardGrammar, ArcEagerGrammar, ArcSwiftGrammar,
                                                             TransitionTXLGrammar)}


# Each family's grammars by name, the default first (configuration_slm.py and hf_slm/families read these).
DTG_GRAMMARS = {name: DEPENDENCY_GRAMMARS[name] for name in ("dtg", "dtg_eager", "dtg_swift")}
TXL_TRANS_GRAMMARS = {"txl_trans": TransitionTXLGrammar}
