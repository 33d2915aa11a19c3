"""Compositional grammars: the sixteen variants of paper 003 (section 2), named `{bi,nb}-{dn,up}-{in,ex}-{m,nm}`.

Four independent options, each implemented once (`CompositionalRules`) and combined by name:

- Bi / Nb (section 2.1): binary trees (left-binarized, no unary chains) or non-binary trees (unary chains removed).
  The rules differ in legality only: a Bi constituent closes with exactly two children (the one exception: a
  sentence of one word is `(X w)`, the root over that word, as trees.normalize_tree leaves it), so a Bi-Up `)`
  always closes the two items on top of the stack and its start is implied; a Nb constituent closes with any
  number of children, and a Nb-Up `)` needs its start position (the pointer of section 2.2). Following the
  paper's C_k, which holds the top item too, nothing refuses a Nb constituent with one child (n_c bounds them
  in search); trees.remove_unary_chains keeps them out of the data.
- Dn / Up (section 2.2): top-down `<s> ( ( Write ( an essay ) ) quickly )` (a `(` opens, a `)` closes the
  innermost open constituent; the root's `)` ends the sequence, as in TG) or bottom-up `<s> Write an essay ) )
  quickly ) </s>` (only `)`, each closing items on top of the stack; since a prefix that spans all its words
  with one constituent may still go on, `</s>` ends the sequence, legal exactly then).
- In / Ex (section 2.3): internal composition duplicates every `)`: its first copy (COMPOSE) attends only the
  constituent (Dn: its `(`, its children and itself; Up: its children and itself) and predicts nothing; the
  duplicate (STACK) attends the allowed context and predicts the next action, and no later position ever
  attends it. External composition keeps one position per `)`, whose input embedding is the composer's output
  f(children): `NewPosition.extra_inputs` of that position (and `composition_children` of `batch`) are the
  positions of its direct children (tokens, or earlier `)` positions holding their compositions), in order;
  `composition_level` orders the compositions bottom-up (a token 0, a constituent 1 + its highest child's).
- M / Nm (section 2.4): once composed, a constituent's children (Dn: and its `(`) are masked from every later
  position (M), or stay visible (Nm). Either way a COMPOSE row is the same. Under Ex + Nm nothing is ever
  masked: the mask is plain causal (section 3.4), and those four grammars say `causal = True`.

Stack rule, shared by all: `<s>` and every token, `(` and composed constituent are pushed; a `)` pops its
constituent (Dn: from its `(`; Up: from its start) and pushes itself (In: its COMPOSE copy). A position that is
not a COMPOSE copy attends itself and the pushed positions before it that are still on the stack (M) or all of
them (Nm). So TG (paper 000) is Nb-Dn-In-M over labeled trees: over one `(` and one `)` id, tg and nb-dn-in-m
give the same masks and legality (tests hold them equal); only the positions differ (below).

Start positions (Nb-Up's pointer, section 2.2). An action sequence is the ids, plus a parallel array `starts` of
the same length (`step(state, id, start=...)`, `batch(sequences, starts=...)`): for a `)`, the index in the id
sequence (`<s>` = 0) of the first item it closes; -1 elsewhere. An item is what C_k holds: a token, or the `)` of
a closed constituent not yet subsumed (so `<s> Write an essay )` has C_4 = [1, 2, 3], the paper's example, and
`((a b) c)` closes its root from the inner `)`, not from `a`; linearizers.bottom_up_pointers converts the first-
action starts of linearizers.bottom_up_actions). `legal_starts(state)` is C_k (Bi-Up: the one implied start;
Dn: none) and `legal_start_positions(state)` the positions whose outputs h_i score them; a start outside C_k is a
ValueError naming it. Bi-Up takes -1 or its implied start, the other variants -1 only. For Nb-Up, `batch` also
gives `start_labels` (at each position whose label is `)`, the position of its start item) and
`start_candidates` (per predicting row, the positions of C_k).

Positions. Paper 003 runs these grammars on GPT-2, with absolute position embeddings and no relative term. An
expanded position's coordinate is its index in the expanded sequence (`<s>` = 0), the step at which it is
input: section 2.3 inputs a `)` at step k and its duplicate at step k + 1, so the two copies take consecutive
indices. `position_coordinates` are these absolute position ids, and `relative_positions` are i - j on attended
cells (>= 0), for a backbone that wants them; `depth` is 0 (no grammar here has one).

Document level (`document_level=True`): one sequence holds a document's sentences. The Dn grammars read it as TG
does (roots children of `<s>`, complete after any closed root). Bottom-up, a constituent spanning the words read
so far may still be extended, so a sentence needs its end said: `</s>` after each sentence,
`<s> It rained ) </s> We left ) </s>`. There `</s>` is legal where it ends a sentence-level sequence (one
constituent spans the sentence's words), is pushed (later sentences attend it and the sentence's constituent,
which stay on the stack under M) and predicts the next sentence's first word; a `)` starts within its own
sentence (C_k holds the current sentence's items only); and the sequence is complete after any `</s>`.

This file is hub code: it is copied into checkpoints and must import nothing from hf_slm.
"""

from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from .grammars import (IGNORE_INDEX, ActionKind, CausalRules, CausalWordsRules, FlatBatch, Grammar, GrammarSequence,
                       NewPosition, PositionKind, any_per_sequence)

# The options of each aspect, in name order (paper 003, section 2.5).
TREE_FORMS = ("bi", "nb")
LINEARIZATIONS = ("dn", "up")
COMPOSITIONS = ("in", "ex")
MASKINGS = ("m", "nm")
COMPOSITIONAL_GRAMMAR_NAMES = tuple(f"{t}-{o}-{c}-{m}" for t in TREE_FORMS for o in LINEARIZATIONS
                                    for c in COMPOSITIONS for m in MASKINGS)

_NEVER = np.iinfo(np.int32).max  # the pop time of a position that stays on the stack
_INFINITE = np.iinfo(np.int64).max

# Stack entries of the incremental state: (action index, position, what it is).
_OPEN, _WORD, _CONSTITUENT = 0, 1, 2


@dataclass
class CompositionalSequence(GrammarSequence):
    """`GrammarSequence` plus the fields of the Ex and Nb-Up grammars (None where a grammar has none)."""

    composition_children: np.ndarray = None  # [T', T'] bool, Ex: row of a `)` -> its direct children's positions
    composition_level: np.ndarray = None  # [T'] int64, Ex: 0 token, 1 + highest child for a `)`, -1 otherwise
    start_labels: np.ndarray = None  # [T'] int64, Nb-Up: the start item's position where the label is `)`
    start_candidates: np.ndarray = None  # [T', T'] bool, Nb-Up: per predicting row, the positions of C_k


class CompositionState:
    """Incremental state: the stack of entries (open `(`, tokens, closed constituents), the positions that later
    STACK rows attend (`visible`: `<s>` and the stack under M, every pushed position under Nm)."""

    __slots__ = ("length", "num_actions", "num_terminals", "num_open_total", "trees_complete", "finished",
                 "entries", "opens", "visible", "sealed", "boundary", "sentence_start")

    def __init__(self):
        self.length = 0  # positions emitted so far
        self.num_actions = 0
        self.num_terminals = 0
        self.num_open_total = 0  # constituents begun so far (Dn: `(`; Up: `)`), what n_c counts
        self.trees_complete = 0  # closed roots (Dn documents)
        self.finished = False
        self.entries = []  # the stack: (action index, position, _OPEN / _WORD / _CONSTITUENT)
        self.opens = []  # indices into `entries` of the open `(` (Dn), innermost last
        self.visible = []  # positions a STACK row attends (besides itself), increasing
        self.sealed = False  # Bi-Up: a one-word sentence's `)` was read, only `</s>` may follow
        # Up documents: the entries of earlier sentences (entries[:boundary]) and the action index of the current
        # sentence's first action (1 after `<s>`; after a `</s>`, the action after it).
        self.boundary = 0
        self.sentence_start = 1

    def clone(self):
        """An independent copy (beam search branches a hypothesis into several)."""
        copy = CompositionState.__new__(CompositionState)
        for name in ("length", "num_actions", "num_terminals", "num_open_total", "trees_complete", "finished",
                     "sealed", "boundary", "sentence_start"):
            setattr(copy, name, getattr(self, name))
        copy.entries, copy.opens, copy.visible = self.entries[:], self.opens[:], self.visible[:]
        return copy


class CompositionalRules(Grammar):
    """One of the sixteen variants: the class attributes `binary`, `top_down`, `internal`, `masked` choose it."""

    binary = False  # Bi (else Nb)
    top_down = True  # Dn (else Up)
    internal = True  # In (else Ex)
    masked = True  # M (else Nm)
    # Relative positions are i - j (coordinates are positions); paper 003 reads none (absolute positions).
    relative_position_meaning = "sequence distances i - j (paper 003 uses GPT-2's absolute positions)"
    duplicated_actions = "closing brackets"
    # Set per variant by _grammar_class: external_composition (Ex: a `)` position's input is the composer's output
    # over its extra_inputs), takes_start (Nb-Up: every `)` comes with a start position from legal_starts),
    # structure_between_pieces (Bi: the tree is binary over tokens, so a word of several pieces is a constituent of
    # its own and brackets come between its pieces; search_constraints.py lets them).

    def __init__(self, layout, document_level=False):
        super().__init__(layout, document_level=document_level)
        if layout.close_nt_stop - layout.close_nt_start != 1:
            raise ValueError(f"{self.name} grammar: paper 003's trees are unlabeled: expected one `)` id, the layout "
                             f"has {layout.close_nt_stop - layout.close_nt_start}")
        if self.top_down and layout.open_nt_stop - layout.open_nt_start != 1:
            raise ValueError(f"{self.name} grammar: paper 003's trees are unlabeled: expected one `(` id, the layout "
                             f"has {layout.open_nt_stop - layout.open_nt_start}")
        self._close_id = layout.close_nt_start

    @staticmethod
    def report_fields(sequence):
        """An Ex `)`'s inputs (`composes`: its children's positions) and, at the position that predicts a Nb-Up `)`,
        the start it points at (`starts`); either only where the sequence holds it."""
        fields, given = {}, vars(sequence)
        if given.get("composition_children") is not None:
            fields["composes"] = [[int(j) for j in row.nonzero()[0]] or None for row in given["composition_children"]]
        if given.get("start_labels") is not None:
            fields["starts"] = [None if label == IGNORE_INDEX else int(label) for label in given["start_labels"]]
        return fields

    @property
    def pointer_action_id(self):
        """Nb-Up: the `)`, whose start the pointer chooses (takes_start); None for the other variants."""
        return self._close_id if self.takes_start else None

    # ---- legality: the one source ----------------------------------------------------------------------
    def _legal_after_start(self, state):
        """The kinds of action the state allows (module docstring); `legal_starts` adds a `)`'s start."""
        K = ActionKind
        entries = state.entries
        if self.top_down:
            if not state.opens:  # after `<s>`, or after a closed root in a document: a root opens
                return self._mask(K.OPEN_NT)
            children = len(entries) - state.opens[-1] - 1
            if not self.binary:
                return self._mask(K.OPEN_NT, K.TERMINAL) if children == 0 else self._mask(K.OPEN_NT, K.TERMINAL,
                                                                                           K.CLOSE_NT)
            if children == 2:
                return self._mask(K.CLOSE_NT)
            if children == 1 and len(state.opens) == 1 and entries[-1][2] == _WORD:  # a one-word sentence's root
                return self._mask(K.OPEN_NT, K.TERMINAL, K.CLOSE_NT)
            return self._mask(K.OPEN_NT, K.TERMINAL)
        if state.sealed:
            return self._mask(K.EOS)
        sentence = entries[state.boundary :]  # a document's earlier sentences are closed
        kinds = [K.TERMINAL]
        if len(sentence) >= (2 if self.binary else 1) or self._closes_one_word(state):
            kinds.append(K.CLOSE_NT)
        if len(sentence) == 1 and sentence[0][2] == _CONSTITUENT:  # one constituent spans every word
            kinds.append(K.EOS)
        return self._mask(*kinds)

    def _closes_one_word(self, state):
        """Bi-Up: the sentence so far is one word (`<s> w`, or `</s> w` in a document), whose `)` may close it (a
        one-word sentence)."""
        return (self.binary and state.num_actions == state.sentence_start + 1
                and len(state.entries) == state.boundary + 1 and state.entries[-1][2] == _WORD)

    def legal_starts(self, state):
        """C_k: the start positions (action indices, `<s>` = 0, increasing) that a `)` may take now; empty when a
        `)` is not legal. Nb-Up: every item on the stack (tokens and closed constituents not yet subsumed);
        Bi-Up: the one implied start (the second item from the top; the word of a one-word sentence); Dn: none."""
        return np.array([entry[0] for entry in self._start_entries(state)], dtype=np.int64)

    def legal_start_positions(self, state):
        """The positions of the items of `legal_starts(state)`, in the same order: where the pointer reads h_i
        (a token's position; a constituent's `)`, its COMPOSE copy under In)."""
        return np.array([entry[1] for entry in self._start_entries(state)], dtype=np.int64)

    def _start_entries(self, state):
        if self.top_down or not self.legal_actions(state)[self._close_id]:
            return []
        entries = state.entries[state.boundary :]
        if not self.binary:
            return entries
        return entries[-2:-1] if len(entries) >= 2 else entries[-1:]

    def _check_action(self, state, action_id, kind):
        """Raise ValueError naming the action, why it is refused and what was expected, unless `legal_actions`
        allows it."""
        where = f"{self.name} grammar: action {state.num_actions} (id {action_id}, {kind.name})"
        if self._refused(state, action_id, where) is None:
            return
        allowed = ", ".join(sorted(k.name for k in self.allowed_next_kinds(state))) or "nothing (the sequence is complete)"
        raise ValueError(f"{where} is not allowed here{self._why_refused(state, kind)}; expected {allowed}")

    def _why_refused(self, state, kind):
        """A reason for the refusals that the kinds alone do not explain (the binary rules, the end)."""
        if state.finished or state.num_actions == 0 or kind in (ActionKind.PAD, ActionKind.BOS):
            return ""
        if self.top_down and self.binary and state.opens:
            children = len(state.entries) - state.opens[-1] - 1
            if kind == ActionKind.CLOSE_NT:
                return f" (a binary tree's constituent closes with two children; this one has {children})"
            if children == 2 and kind in (ActionKind.OPEN_NT, ActionKind.TERMINAL):
                return " (the constituent has its two children: a binary tree closes it now)"
        if not self.top_down:
            if state.sealed:
                return " (a one-word sentence ends after its `)`)"
            if kind == ActionKind.CLOSE_NT:
                return f" (a binary tree's `)` closes the top two items; the stack holds {len(state.entries)})"
            if kind == ActionKind.EOS:
                return " (`</s>` ends the sequence once one constituent spans all its words)"
            if kind == ActionKind.OPEN_NT:
                return " (a bottom-up sequence has no `(`)"
        return ""

    def _start_entry(self, state, kind, start, where):
        """The index in `state.entries` of the first item a `)` closes (Up), None for every other action; a start
        that the action does not take, or outside C_k, is a ValueError naming it."""
        if kind != ActionKind.CLOSE_NT or self.top_down:
            if start >= 0:
                raise ValueError(f"{where} takes no start position, got {start}: only a bottom-up `)` has one")
            return None
        entries = self._start_entries(state)
        feasible = [entry[0] for entry in entries]
        if self.binary:
            if start >= 0 and start not in feasible:
                raise ValueError(f"{where}: start {start} is not the implied one; a binary tree's `)` closes the top "
                                 f"two items, from {feasible[0] if feasible else 'none'}")
            start = feasible[0] if feasible else start
        elif start < 0:
            raise ValueError(f"{where} needs a start position (paper 003, section 2.2): one of the feasible starts "
                             f"C_k = {feasible}")
        elif start not in feasible:
            raise ValueError(f"{where}: start {start} is not a feasible start position; expected one of C_k = "
                             f"{feasible} (tokens and closed constituents not yet subsumed)")
        if not entries:  # the `)` itself is illegal: check=False let it through
            raise ValueError(f"{where} is not allowed here: no constituent can close")
        if self.binary:  # the item second from the top (the only one, for a one-word sentence)
            return max(len(state.entries) - 2, state.boundary)
        return state.boundary + feasible.index(start)  # Nb: C_k is the current sentence's part of the stack

    # ---- incremental ----------------------------------------------------------------------------------
    def start(self):
        return CompositionState()

    def step(self, state, action_id, check=True, start=None):
        """Feed one action (and, for a bottom-up `)`, its start: module docstring); return the NewPositions it
        expands to. It is validated first unless `check=False` (the start is always checked)."""
        action_id = int(action_id)
        kind = self._kind_members[action_id] if 0 <= action_id < self.vocab_size else self.layout.kind(action_id)
        start = -1 if start is None else int(start)
        if check:
            self._check_action(state, action_id, kind)
        where = f"{self.name} grammar: action {state.num_actions} (id {action_id}, {kind.name})"
        first_child = self._start_entry(state, kind, start, where)
        positions = self._positions_for(state, action_id, kind, first_child)
        state.num_actions += 1
        return positions

    def _new_position(self, state, action_id, kind, attended, predicts, extra=()):
        """The next position, attending `attended` (itself included), at coordinate = its index."""
        position = state.length
        state.length += 1
        attended = np.array(attended, dtype=np.int64)
        return NewPosition(action_id, kind, attended, position - attended, predicts, position, tuple(extra))

    def _positions_for(self, state, action_id, kind, first_child):
        K = ActionKind
        index, position, entries = state.num_actions, state.length, state.entries
        if kind in (K.BOS, K.OPEN_NT, K.TERMINAL):  # pushed, attends what is visible and itself
            if kind != K.BOS:
                entries.append((index, position, _OPEN if kind == K.OPEN_NT else _WORD))
            if kind == K.OPEN_NT:
                state.opens.append(len(entries) - 1)
                state.num_open_total += 1
            state.num_terminals += kind == K.TERMINAL
            state.visible.append(position)
            return [self._new_position(state, action_id, _POSITION_KIND[kind], state.visible, True)]
        if kind == K.EOS:
            if not self.document_level:
                state.finished = True
                return [self._new_position(state, action_id, PositionKind.EOS, state.visible + [position], False)]
            # A document's sentence ends: `</s>` stays visible, predicts the next sentence's first word, and the
            # sentence's constituent is closed to later `)`.
            state.trees_complete += 1
            state.boundary, state.sentence_start, state.sealed = len(entries), index + 1, False
            state.visible.append(position)
            return [self._new_position(state, action_id, PositionKind.EOS, state.visible, True)]
        # A `)`: its constituent starts at its `(` (Dn) or at its start item (Up).
        if self.top_down:
            opening = state.opens.pop()
            popped_from, first_child = opening, opening + 1
        else:
            popped_from = first_child
            state.num_open_total += 1
        children = [entry[1] for entry in entries[first_child:]]
        composing = [entries[popped_from][1]] * (popped_from < first_child) + children  # with Dn's `(`
        positions = []
        if self.internal:  # COMPOSE copy: the constituent and itself, predicts nothing
            positions.append(self._new_position(state, action_id, PositionKind.CLOSE_COMPOSE, composing + [position],
                                                False))
        popped = len(entries) - popped_from
        del entries[popped_from:]
        entries.append((index, position, _CONSTITUENT))
        if self.masked:  # under M, `visible` is `<s>` and the stack: the popped entries are its suffix
            del state.visible[len(state.visible) - popped:]
        state.visible.append(position)
        if self.internal:  # the duplicate: visible context and itself; never visible to later positions
            positions.append(self._new_position(state, action_id, PositionKind.CLOSE_STACK,
                                                state.visible + [state.length], True))
        else:  # Ex: one position, the composition of `children`, attending the stack it is now on
            positions.append(self._new_position(state, action_id, PositionKind.CLOSE_STACK, state.visible, True,
                                                extra=children))
        if self.top_down and not state.opens:
            state.trees_complete += 1
            state.finished = not self.document_level
        if self.binary and not self.top_down and len(children) == 1:
            state.sealed = True
        return positions

    def structure_completes_tree(self, state):
        """Dn: whether a `)` now would close the root; Up: never (`</s>` ends the sequence)."""
        return self.top_down and len(state.opens) == 1

    def is_complete(self, state):
        if self.document_level:
            if not self.top_down:  # after any `</s>`
                return state.trees_complete > 0 and len(state.entries) == state.boundary
            return state.trees_complete > 0 and not state.opens
        return state.finished

    def completion_need(self, state):
        """(positions, terminals) still needed (grammars.LegalityChecks). Dn: close every open `(`, each after the
        children it still lacks, one piece apiece (Nb: the innermost needs one child; Bi: every constituent two,
        a one-word sentence's root one). Up: the `)` that join the stack's items into one constituent (Nb: one
        over them all; Bi: one per pair), then `</s>`."""
        if state.finished or self.is_complete(state):
            return 0, 0
        if state.num_actions == 0:
            return self.minimum_positions(1, 1), 1
        close = 2 if self.internal else 1
        entries = state.entries
        if self.top_down:
            if not state.opens:  # a root still to open: `(` w `)`
                return 2 + close, 1
            missing = 0
            for depth, opening in enumerate(state.opens):
                end = state.opens[depth + 1] + 1 if depth + 1 < len(state.opens) else len(entries)
                children = end - opening - 1  # an inner `(` counts as its parent's child
                if not self.binary:
                    missing += int(children == 0)
                elif depth == 0 and len(state.opens) == 1 and (children == 0 or entries[-1][2] == _WORD):
                    missing += int(children == 0)  # the root of a one-word sentence may close over one word
                else:
                    missing += 2 - children
            return close * len(state.opens) + missing, missing
        if state.sealed:
            return 1, 0
        entries = entries[state.boundary :]  # the current sentence's
        if not entries:
            return 1 + close + 1, 1
        if len(entries) == 1 and entries[0][2] == _CONSTITUENT:
            return 1, 0
        closes = max(len(entries) - 1, 1) if self.binary else 1
        return close * closes + 1, 0

    def _step_for_need(self, state, action):
        # Nb-Up: the `)` that closes the most (from the bottom of the stack) leaves the least to do.
        start = None
        if not self.top_down and self.action_kinds[action] == ActionKind.CLOSE_NT and not self.binary:
            start = int(self.legal_starts(state)[0])
        return self.step(state, action, check=False, start=start)

    def minimum_positions(self, pieces, words):
        """The fewest positions a sentence of `pieces` terminals expands to, `<s>` included: one constituent over
        them (Nb), or the pieces - 1 constituents of a binary tree over them (Bi; one for a single piece); each
        `(` one position (Dn), each `)` one or two (Ex or In), and `</s>` (Up)."""
        constituents = max(pieces - 1, 1) if self.binary else 1
        per_constituent = (2 if self.internal else 1) + (1 if self.top_down else 0)
        return 1 + pieces + constituents * per_constituent + (0 if self.top_down else 1)

    # ---- whole sequences --------------------------------------------------------------------------------
    def positions(self, ids, starts=None, validate=True, require_complete=True):
        """The NewPositions of a whole sequence, from `step` (ValueError naming the first illegal action)."""
        starts = _starts_of([ids], None if starts is None else [starts], self.name)[0]  # one sequence's starts
        state, positions = self.start(), []
        for action_id, start in zip(ids, starts):
            positions += self.step(state, action_id, check=validate, start=start)
        if require_complete and not self.is_complete(state):
            end = " (a bottom-up sequence ends with `</s>`)" if not self.top_down else ""
            raise ValueError(f"{self.name} grammar: the sequence of {len(ids)} actions ends before it is complete{end}")
        return positions

    def validate(self, ids, require_complete=True, starts=None):
        """Check one sequence (and its starts) against the rules; raise ValueError naming the first illegal action."""
        self.validate_batch([ids], require_complete, starts=None if starts is None else [starts])

    def valid_sequences(self, sequences, require_complete=True, starts=None):
        """A bool per sequence: whether it follows the rules (the vectorized fast path of `legal_actions` and
        `legal_starts`)."""
        flat = self._flat(sequences, starts)
        return _Analysis(self, flat).valid(require_complete)

    def validate_batch(self, sequences, require_complete=True, starts=None):
        """Check many sequences at once (vectorized); raise ValueError naming the first bad one and its action."""
        flat = self._flat(sequences, starts)
        self._validate_analysis(_Analysis(self, flat), require_complete)

    def _flat(self, sequences, starts):
        sequences = [np.asarray(ids, dtype=np.int64) for ids in sequences]
        if not sequences:
            raise ValueError(f"{self.name} grammar: expected at least one sequence, got an empty batch")
        for index, ids in enumerate(sequences):
            if ids.ndim != 1 or len(ids) == 0:
                raise ValueError(f"{self.name} grammar: sequence {index}: expected a non-empty 1-D list of action ids, "
                                 f"got shape {ids.shape}")
        flat = FlatBatch(sequences, self.layout)
        flat.pointer = np.concatenate(_starts_of(sequences, starts, self.name))
        return flat

    def _validate_analysis(self, analysis, require_complete):
        valid = analysis.valid(require_complete)
        if valid.all():
            return
        index = int(np.flatnonzero(~valid)[0])
        flat = analysis.flat
        pointer = flat.pointer[flat.starts[index] : flat.starts[index] + flat.lengths[index]]
        try:  # replay the step rules: they name what is wrong
            self.positions(flat.sequences[index].tolist(), pointer.tolist(), True, require_complete)
        except ValueError as error:
            raise ValueError(f"sequence {index}: {error}") from None
        raise AssertionError(f"sequence {index}: the vectorized and the step rules disagree")  # pragma: no cover

    def sequence(self, ids, validate=True, require_complete=True, starts=None):
        """Model inputs for one sequence (`CompositionalSequence`)."""
        batch = self.batch([ids], validate=validate, require_complete=require_complete,
                           starts=None if starts is None else [starts])
        fields = CompositionalSequence.__dataclass_fields__
        return CompositionalSequence(**{name: value[0] for name, value in batch.items() if name in fields})

    def batch(self, sequences, validate=True, require_complete=True, pad_to_multiple_of=None, max_length=None,
              with_relative_positions=True, starts=None):
        """Model inputs for a batch of action-id sequences (and their `starts`), padded to the longest expansion.

        The fields of grammars.Grammar.batch: input_ids, position_kinds, attention_mask [B, T', T'], labels,
        depth (0), position_coordinates (the absolute position ids 0, 1, ...; 0 for padding), expansion_index,
        prediction_index [B, T], lengths, action_lengths, relative_positions (i - j where attended); plus, for Ex,
        composition_children [B, T', T'] and composition_level [B, T'], and for Nb-Up, start_labels [B, T'] and
        start_candidates [B, T', T'] (module docstring). Padding rows attend only themselves and predict nothing.
        Raises ValueError naming the sequence when one breaks the grammar or expands past `max_length`.
        """
        flat = self._flat(sequences, starts)
        analysis = _Analysis(self, flat)
        if validate:
            self._validate_analysis(analysis, require_complete)
        expanded = analysis.expand()
        lengths = expanded["lengths"]
        if max_length is not None and lengths.max() > max_length:
            index = int(lengths.argmax())
            raise ValueError(f"sequence {index} expands to {lengths[index]} positions under the {self.name} grammar; "
                             f"the maximum is {max_length}")
        width = int(lengths.max())
        if pad_to_multiple_of:
            width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
        return self._dense(expanded, width, with_relative_positions, count=len(flat.lengths),
                           action_width=int(flat.lengths.max()))

    def _dense(self, expanded, width, with_relative_positions, count, action_width):
        """The padded [B, T'] and [B, T', T'] arrays from the flat expansion of `_Analysis.expand`."""
        rows, columns = expanded["sequence"], expanded["column"]

        def padded(values, fill, dtype=None):
            array = np.full((count, width), fill, dtype=dtype or values.dtype)
            array[rows, columns] = values
            return array

        input_ids = padded(expanded["input_ids"], self.layout.pad_token_id, np.int64)
        kinds = padded(expanded["kinds"], PositionKind.PAD, np.int8)
        real = kinds != PositionKind.PAD
        pushed = padded(expanded["pushed"], False)
        pop_time = padded(np.minimum(expanded["pop_time"], width + 1), width + 1, np.int64)
        mask = self._attention(kinds, pushed, pop_time)
        mask &= real[:, :, None] & real[:, None, :]
        mask |= np.eye(width, dtype=bool)[None]  # every position attends itself; padding only itself
        predicts = real & (kinds != PositionKind.CLOSE_COMPOSE) & ((kinds != PositionKind.EOS) | self.document_level)
        labels = np.full((count, width), IGNORE_INDEX, dtype=np.int64)
        labels[:, :-1] = np.where(predicts[:, :-1] & real[:, 1:], input_ids[:, 1:], IGNORE_INDEX)
        prediction_index = np.zeros((count, action_width), dtype=np.int64)
        prediction_index[expanded["action_sequence"], expanded["action_local"]] = expanded["output_position"]
        line = np.arange(width, dtype=np.int64)
        result = {
            "input_ids": input_ids,
            "position_kinds": kinds,
            "attention_mask": mask,
            "labels": labels,
            "depth": np.zeros((count, width), dtype=np.int64),
            "position_coordinates": np.where(real, line[None, :], 0),
            "expansion_index": padded(expanded["expansion"], 0, np.int64),
            "prediction_index": prediction_index,
            "lengths": expanded["lengths"],
            "action_lengths": expanded["action_lengths"],
        }
        if with_relative_positions:
            result["relative_positions"] = np.where(mask, line[None, :, None] - line[None, None, :], 0)
        if self.external_composition:
            children = np.zeros((count, width, width), dtype=bool)
            cell_sequence, cell_row, cell_column = expanded["children"]
            children[cell_sequence, cell_row, cell_column] = True
            result["composition_children"] = children
            result["composition_level"] = padded(expanded["level"], -1, np.int64)
        if self.takes_start:
            start_labels = np.full((count, width), IGNORE_INDEX, dtype=np.int64)
            label_sequence, label_row, label_value = expanded["start_labels"]
            start_labels[label_sequence, label_row] = label_value
            result["start_labels"] = start_labels
            item = padded(expanded["item"], False)
            # C_k of the state a row predicts from: the items pushed by then and not yet popped.
            floor = padded(expanded["sentence_floor"], 0, np.int64)
            result["start_candidates"] = (item[:, None, :] & (line[None, None, :] <= line[None, :, None])
                                          & (line[None, None, :] > floor[:, :, None])
                                          & (pop_time[:, None, :] > line[None, :, None]) & predicts[:, :, None])
        return result

    def host_inputs(self, batch):
        """Ex: the composer's schedule of the batch's compositions (composition_schedule), counted on the host."""
        if not self.external_composition:
            return {}
        indices, levels = composition_schedule(batch["composition_children"], batch["composition_level"])
        return {"composition_schedule": indices, "composition_schedule_levels": levels}

    def _attention(self, kinds, pushed, pop_time):
        """[B, T', T'] mask: a COMPOSE row attends what it pops (its `(` and children); any other row the pushed
        positions up to itself, under M only those not yet popped."""
        width = kinds.shape[1]
        rows = np.arange(width, dtype=np.int64)[None, :, None]
        cols = np.arange(width, dtype=np.int64)[None, None, :]
        pop = pop_time[:, None, :]
        stack = pushed[:, None, :] & (cols <= rows)
        if self.masked:
            stack &= pop > rows
        compose = (kinds == PositionKind.CLOSE_COMPOSE)[:, :, None]
        return np.where(compose, pop == rows, stack)


_POSITION_KIND = {ActionKind.BOS: PositionKind.BOS, ActionKind.OPEN_NT: PositionKind.OPEN_NT,
                  ActionKind.TERMINAL: PositionKind.TERMINAL}


def _starts_of(sequences, starts, name):
    """One int64 array of starts per sequence (-1: none; None reads as -1), each as long as its sequence."""
    if starts is None:
        return [np.full(len(ids), -1, dtype=np.int64) for ids in sequences]
    if len(starts) != len(sequences):
        raise ValueError(f"{name} grammar: {len(sequences)} sequences but {len(starts)} start arrays")
    arrays = []
    for index, (ids, values) in enumerate(zip(sequences, starts)):
        values = np.array([-1 if value is None else value for value in values], dtype=np.int64)
        if len(values) != len(ids):
            raise ValueError(f"{name} grammar: sequence {index} has {len(ids)} actions but {len(values)} starts; "
                             "expected one per action (-1 where there is none)")
        arrays.append(values)
    return arrays


class _Analysis:
    """What `step` derives action by action, for every action of a batch at once (numpy over the sequences
    concatenated, no loop over actions): legality, each `)`'s start, and the `)` that pops each position.

    Numbers after a sequence's first illegal action mean nothing: only legal prefixes are expanded. Every
    constituent is an interval of actions, from the first action of its first word to its `)`; in a legal
    sequence these intervals nest, so a position's nesting level (the constituents around it) says which `)`
    pops it: the first one after it that closes one level up (as transformer_grammars.tg_stack_lifetimes does for TG).
    """

    def __init__(self, grammar, flat):
        self.grammar, self.flat = grammar, flat
        count = self.count = len(flat.ids)
        self.index = np.arange(count)
        self.sequence = flat.sequence_index
        self.local = flat.local_position
        self.base = flat.starts[self.sequence]  # flat index of each action's `<s>`
        in_vocabulary = (flat.ids >= 0) & (flat.ids < grammar.vocab_size)
        kinds = np.where(in_vocabulary, flat.kinds, ActionKind.PAD)
        self.in_vocabulary = in_vocabulary
        self.is_open = kinds == ActionKind.OPEN_NT
        self.is_word = kinds == ActionKind.TERMINAL
        self.is_close = kinds == ActionKind.CLOSE_NT
        self.is_eos = kinds == ActionKind.EOS
        self.is_bos = kinds == ActionKind.BOS
        self.kinds = kinds
        if grammar.top_down:
            change = self.is_open.astype(np.int64) - self.is_close
            self.level_after = flat.segment_cumsum(change)  # open constituents after each action
            self.level_before = self.level_after - change
        else:
            # The flat index of the first action of each action's sentence: after `<s>`, or after the last `</s>`
            # before it (a document). Flat indices grow with the sequences, so a running maximum stays in its own.
            self.last_end = np.maximum.accumulate(np.where(self.is_eos, self.index, self.base))
            self.sentence_first = self.previous(self.last_end, 0) + 1
            self.pointer = self._bottom_up_pointers()  # flat index of each `)`'s first item (-1 elsewhere)

    # ---- helpers over the flat batch ----------------------------------------------------------------------
    def previous(self, values, fill):
        """Each action's value at the action before it in its sequence (`fill` for a first action)."""
        shifted = np.empty_like(values)
        shifted[1:] = values[:-1]
        shifted[self.flat.is_first] = fill
        return shifted

    def keys(self, level, index, span):
        """Sort keys grouping actions by (sequence, level), ordered by position within a group."""
        return (self.sequence[index] * span + np.clip(level, -1, span - 2) + 1) * (self.count + 1) + index

    def last_before(self, sorted_keys, query):
        """Per query key: the flat index of the last sorted key before it in the same group, -1 for none."""
        if not len(sorted_keys):
            return np.full(len(query), -1, dtype=np.int64)
        found = np.searchsorted(sorted_keys, query) - 1
        safe = np.maximum(found, 0)
        hit = (found >= 0) & (sorted_keys[safe] // (self.count + 1) == query // (self.count + 1))
        return np.where(hit, sorted_keys[safe] % (self.count + 1), -1)

    def first_after(self, sorted_keys, query):
        """Per query key: the flat index of the first sorted key after it in the same group, -1 for none."""
        if not len(sorted_keys):
            return np.full(len(query), -1, dtype=np.int64)
        found = np.searchsorted(sorted_keys, query, side="right")
        safe = np.minimum(found, len(sorted_keys) - 1)
        hit = (found < len(sorted_keys)) & (sorted_keys[safe] // (self.count + 1) == query // (self.count + 1))
        return np.where(hit, sorted_keys[safe] % (self.count + 1), -1)

    # ---- starts (Up) --------------------------------------------------------------------------------------
    def _bottom_up_pointers(self):
        """Flat index of each `)`'s first item: Bi the implied one (the item second from the top, found by its
        height as the last push there), Nb the given start. Also notes `legal_start`: whether a given start is
        one `legal_starts` allows, and `unary`: Bi's one-word sentence `<s> w )`."""
        flat, close, word = self.flat, self.is_close, self.is_word
        given = np.where(flat.pointer >= 0, self.base + flat.pointer, -1)
        self.unary = close & (self.index == self.sentence_first + 1) & self.previous(word, False)
        if not self.grammar.binary:
            # A start is feasible if it is an item before the `)` that no `)` in between has closed, i.e. no `)`
            # in between starts at or before it (a range minimum over the starts of the `)` in between).
            target = np.clip(given, 0, self.count - 1)
            ok = (given >= self.sentence_first) & (flat.pointer < self.local) & (word | close)[target]
            starts = np.where(close, given, _INFINITE)
            ok &= _range_minimum(starts, given + 1, self.index - 1) > given
            self.legal_start = ok
            return np.where(close, given, -1)
        delta = word.astype(np.int64) - (close & ~self.unary)  # a one-word sentence's `)` replaces its word
        size = flat.segment_cumsum(delta) - delta  # items on the stack before each action
        # ... of them in the current sentence: every earlier sentence of a document left one, its constituent
        self.sentence_size_before = size - self.previous(flat.segment_cumsum(self.is_eos.astype(np.int64)), 0)
        height = np.where(word, size, size - 2 + self.unary)  # where each push lands
        pushes = np.flatnonzero(word | (close & (size >= 2)))
        span = int(size.max(initial=0)) + 3
        found = self.last_before(np.sort(self.keys(height[pushes], pushes, span)),
                                 self.keys(size - 2, self.index, span))
        implied = np.where(self.unary, self.index - 1, found)
        self.legal_start = (flat.pointer < 0) | (given == implied)
        return np.where(close, implied, -1)

    def span_starts(self):
        """Up: the flat index of the first word of each `)`'s constituent (its start's, followed to a word)."""
        first = self.index.copy()
        close = np.flatnonzero(self.is_close)
        first[close] = np.clip(self.pointer[close], self.base[close], close - 1)  # earlier: the chain ends
        while True:
            followed = first[first]
            if np.array_equal(followed, first):
                return first
            first = followed

    # ---- legality -----------------------------------------------------------------------------------------
    def illegal(self):
        """Per action: whether `legal_actions` / `legal_starts` refuse it after the actions before it."""
        flat, grammar = self.flat, self.grammar
        first = flat.is_first
        illegal = ~self.in_vocabulary | (self.kinds == ActionKind.PAD) | (first != self.is_bos)
        takes_start = self.is_close & (not grammar.top_down)
        illegal |= (flat.pointer >= 0) & ~takes_start
        if grammar.top_down:
            illegal |= self.is_eos
            level = self.level_before
            # No constituent open: a root, only right after `<s>` in a sentence, after any closed root in a document.
            top = (level <= 0) & ~first
            illegal |= top & ~(self.is_open & (grammar.document_level | (self.local == 1)))
            if grammar.binary:
                children = self._children_before()
                illegal |= (self.is_open | self.is_word) & (level >= 1) & (children >= 2)
                one_word_root = (children == 1) & (level == 1) & self.previous(self.is_word, False)
                illegal |= self.is_close & (level >= 1) & (children != 2) & ~one_word_root
            else:
                illegal |= self.is_close & self.previous(self.is_open, False)  # a constituent with no child
            return illegal
        illegal |= self.is_open
        after_end = self.previous(self.is_eos, False) & ~first
        # After `</s>`: nothing (a sentence), or the next sentence's first word (a document).
        illegal |= after_end & ~(self.is_word & grammar.document_level)
        illegal |= takes_start & ~self.legal_start
        if grammar.binary:
            illegal |= self.is_close & (self.sentence_size_before < 2) & ~self.unary
            illegal |= self.previous(self.unary, False) & ~self.is_eos  # a one-word sentence ends after its `)`
        # `</s>` right after a `)` whose constituent starts at the sentence's first word: one spans them all.
        spans_all = self.is_close & (self.span_starts() == self.sentence_first)
        illegal |= self.is_eos & ~self.previous(spans_all, False)
        return illegal

    def _children_before(self):
        """Dn: the children that the innermost open constituent has before each action (its `(` counted once a
        child constituent opens)."""
        level_before, level_after = self.level_before, self.level_after
        span = int(max(level_after.max(initial=0), level_before.max(initial=0))) + 3
        child = np.flatnonzero((self.is_open | self.is_word) & (level_before >= 1))
        child_keys = np.sort(self.keys(level_before[child], child, span))
        opens = np.flatnonzero(self.is_open)
        innermost = self.last_before(np.sort(self.keys(level_after[opens], opens, span)),
                                     self.keys(level_before, self.index, span))
        here = self.keys(level_before, self.index, span)
        since = self.keys(level_before, np.maximum(innermost, 0), span)
        return np.searchsorted(child_keys, here) - np.searchsorted(child_keys, since)

    def valid(self, require_complete):
        """A bool per sequence: no illegal action, and complete if asked."""
        flat = self.flat
        valid = ~any_per_sequence(self.illegal(), self.sequence, len(flat.lengths))
        if require_complete:
            last = flat.starts + flat.lengths - 1
            if self.grammar.top_down:
                valid &= (self.level_after[last] == 0) & (flat.lengths >= 2)
            else:
                valid &= self.is_eos[last]
        return valid

    # ---- expansion ----------------------------------------------------------------------------------------
    def popped_by(self):
        """Per action: the flat index of the `)` that pops it (a `(` its own; a word or closed constituent its
        parent's), -1 while nothing does (`<s>`, `</s>`, what is still open or on the stack at the end)."""
        close = self.is_close
        if self.grammar.top_down:
            # A position is at the level it leaves after it; a `)` pops the positions at its level before it.
            level, close_level = self.level_after, self.level_before
        else:
            # Up: the constituents around a position are the intervals [first word, `)`] that contain it.
            closes = np.flatnonzero(close)
            edges = np.bincount(self.span_starts()[closes], minlength=self.count + 1)
            edges -= np.bincount(closes + 1, minlength=self.count + 1)
            around = np.cumsum(edges)[: self.count]
            level, close_level = around - close, around
        items = np.flatnonzero((self.is_open | self.is_word | close) & (level >= 1))
        closes = np.flatnonzero(close)
        span = int(max(level.max(initial=0), close_level.max(initial=0))) + 3
        popper = np.full(self.count, -1, dtype=np.int64)
        popper[items] = self.first_after(np.sort(self.keys(close_level[closes], closes, span)),
                                         self.keys(level[items], items, span))
        return popper

    def expand(self):
        """Per position, flat over the batch: sequence, column, ids, kinds, whether pushed, the column of the
        COMPOSE (In) or `)` (Ex) position that pops it; per action its output position; Ex's children and
        levels, Nb-Up's start labels."""
        grammar, flat = self.grammar, self.flat
        internal = grammar.internal
        repeats = 1 + (self.is_close & internal).astype(np.int64)
        last = np.cumsum(repeats) - 1
        first = last - (repeats - 1)
        counts = np.bincount(self.sequence, weights=repeats, minlength=len(flat.lengths)).astype(np.int64)
        position_starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        local_first = first - position_starts[self.sequence]
        total = int(counts.sum())
        sequence = np.repeat(self.sequence, repeats)
        column = np.arange(total) - position_starts[sequence]

        table = np.full(len(ActionKind), PositionKind.PAD, dtype=np.int8)
        table[[ActionKind.BOS, ActionKind.OPEN_NT, ActionKind.TERMINAL, ActionKind.CLOSE_NT, ActionKind.EOS]] = [
            PositionKind.BOS, PositionKind.OPEN_NT, PositionKind.TERMINAL, PositionKind.CLOSE_STACK, PositionKind.EOS]
        kinds = np.repeat(table[self.kinds], repeats)
        if internal:
            kinds[first[self.is_close]] = PositionKind.CLOSE_COMPOSE

        popper = self.popped_by()
        pushed = np.zeros(total, dtype=bool)
        pushed[first[self.is_bos | self.is_open | self.is_word | self.is_close
                     | (self.is_eos & grammar.document_level)]] = True  # a document's `</s>` stays visible
        pop_time = np.full(total, _NEVER, dtype=np.int64)
        popped = popper >= 0
        pop_time[first[popped]] = local_first[popper[popped]]

        expanded = {"sequence": sequence, "column": column, "input_ids": np.repeat(flat.ids, repeats), "kinds": kinds,
                    "pushed": pushed, "pop_time": pop_time, "expansion": np.repeat(self.local, repeats),
                    "lengths": counts, "action_lengths": flat.lengths, "action_sequence": self.sequence,
                    "action_local": self.local, "output_position": last - position_starts[self.sequence]}
        item = np.zeros(total, dtype=bool)
        item[first[self.is_word | self.is_close]] = True
        expanded["item"] = item
        if grammar.external_composition:
            children = np.flatnonzero(popped & (self.is_word | self.is_close))
            parents = popper[children]
            expanded["children"] = (self.sequence[children], local_first[parents], local_first[children])
            height = np.zeros(self.count, dtype=np.int64)
            while True:  # a constituent is one above its highest child: as many rounds as the tree is high
                raised = np.zeros(self.count, dtype=np.int64)
                np.maximum.at(raised, parents, height[children] + 1)
                if np.array_equal(raised, height):
                    break
                height = raised
            level = np.where(self.is_word | self.is_close, height, -1)
            expanded["level"] = np.full(total, -1, dtype=np.int64)
            expanded["level"][first] = level
        if grammar.takes_start:
            closes = np.flatnonzero(self.is_close & ~flat.is_first)
            before = closes - 1  # the action whose output position predicts the `)`
            expanded["start_labels"] = (self.sequence[closes], last[before] - position_starts[self.sequence[before]],
                                        local_first[self.pointer[closes]])
            # Per position, the column of the last `</s>` at or before it (`<s>`'s 0 in the first sentence): a
            # document's earlier sentences are no start.
            expanded["sentence_floor"] = np.repeat(local_first[self.last_end], repeats)
        return expanded


def composition_schedule(children, level):
    """composer.ExternalComposer.compose_by_level's schedule, computed on the host (numpy) from grammar.batch's composition_children
    [B, T', T'] bool and composition_level [B, T'] long, so that the model reads nothing back from the device:
    (indices [N + 2 P + P] int64, levels [[constituents, pairs, token pairs, widest], ...] Python ints, one
    entry per tree level from 1). Indices are, in order: the N `)` positions (flat, b * T' + t), by level then
    position; then P (parent, child) pairs ordered by level and, within a level, token children first: each
    pair's parent (its index among its level's constituents), its rank among the parent's children; then the
    token children's flat positions, and the composed children's indices among the N. The same numbers as the
    device's reading (ExternalComposer._device_schedule). A ValueError names a bad input."""
    children, level = np.asarray(children, dtype=bool), np.asarray(level, dtype=np.int64)
    count, length = level.shape
    flat_level = level.reshape(-1)
    constituents = np.flatnonzero(flat_level > 0)
    if not len(constituents):
        return np.zeros(0, dtype=np.int64), []
    constituents = constituents[np.argsort(flat_level[constituents], kind="stable")]
    per_level = np.bincount(flat_level[constituents])
    table_index = np.full(count * length, -1, dtype=np.int64)
    table_index[constituents] = np.arange(len(constituents))
    # The children of the `)`s only (the rows that are read), ordered by parent position, then child position: the
    # order of the device's nonzero over the whole [B, T', T'] tensor, at a fraction of the cost.
    parent_rows = np.flatnonzero(flat_level > 0)
    which, kids = np.nonzero(children.reshape(count * length, length)[parent_rows])
    parent_flat = parent_rows[which]
    child_flat = parent_flat - parent_flat % length + kids
    parent_index = table_index[parent_flat]
    counts = np.bincount(parent_index, minlength=len(constituents))
    if (counts == 0).any():
        bad = int(constituents[np.flatnonzero(counts == 0)[0]])
        raise ValueError(f"composition_children: the `)` at row {bad // length}, position {bad % length} "
                         f"(composition_level {int(flat_level[bad])}) has no children; expected its direct "
                         "children's positions (grammar.batch gives them)")
    order = np.arange(len(parent_flat))
    starts = np.ones(len(parent_flat), dtype=bool)
    starts[1:] = parent_flat[1:] != parent_flat[:-1]
    rank = order - np.maximum.accumulate(np.where(starts, order, 0))
    child_index = table_index[child_flat]
    parent_level = flat_level[parent_flat]
    if (flat_level[child_flat] >= parent_level).any():
        raise ValueError("composition_level: a `)` has a child `)` of the same or a higher level; expected 1 + "
                         "the highest child's level (grammar.batch gives them)")
    composed = child_index >= 0
    by_level = np.argsort(parent_level * 2 + composed, kind="stable")
    parent_level, parent_index, child_flat, child_index, rank, composed = (
        parent_level[by_level], parent_index[by_level], child_flat[by_level], child_index[by_level], rank[by_level],
        composed[by_level])
    first = np.cumsum(per_level) - per_level
    indices = np.concatenate([constituents, parent_index - first[parent_level], rank, child_flat[~composed],
                              child_index[composed]]).astype(np.int64)
    levels = []
    for current in range(1, len(per_level)):
        in_level = parent_level == current
        levels.append([int(per_level[current]), int(in_level.sum()), int((in_level & ~composed).sum()),
                       int(rank[in_level].max()) + 1 if in_level.any() else 0])
    return indices, levels


def _range_minimum(values, low, high):
    """min(values[low ..high]) per query, inclusive (the largest int64 for an empty range): a sparse table."""
    count = len(values)
    levels, width = [values], 1
    while 2 * width <= count:
        previous = levels[-1]
        levels.append(np.minimum(previous, np.concatenate([previous[width:], np.full(width, _INFINITE)])))
        width *= 2
    table = np.stack(levels)
    empty = low > high
    length = np.maximum(high - low + 1, 1)
    exponent = np.frexp(length.astype(np.float64))[1] - 1  # floor(log2(length)), exactly
    low = np.clip(low, 0, count - 1)
    high = np.clip(high - (1 << exponent) + 1, 0, count - 1)
    result = np.minimum(table[exponent, low], table[exponent, high])
    return np.where(empty, _INFINITE, result)


def _grammar_class(name):
    tree, order, composition, masking = name.split("-")
    binary, top_down, internal, masked = tree == "bi", order == "dn", composition == "in", masking == "m"
    words = {"bi": "binary", "nb": "non-binary", "dn": "top-down", "up": "bottom-up", "in": "internal",
             "ex": "external", "m": "masked", "nm": "unmasked"}
    attributes = {
        "name": name,
        "__module__": __name__,  # type() would take abc's, ABCMeta's caller
        "__doc__": f"Paper 003's {'-'.join(p.capitalize() for p in name.split('-'))}: {words[tree]} unlabeled trees, "
                   f"{words[order]} linearization, {words[composition]} composition, {words[masking]} "
                   "sub-constituents (module docstring).",
        "binary": binary, "top_down": top_down, "internal": internal, "masked": masked,
        "duplicates_closing": internal,
        "compose_kinds": frozenset({PositionKind.CLOSE_COMPOSE}) if internal else frozenset(),
        "external_composition": not internal,
        "references_positions": not internal,  # a `)`'s NewPosition.extra_inputs: its children's positions
        # the family inputs (module docstring): Ex's compositions (and their schedule, on the host); Nb-Up's starts
        "action_inputs": MappingProxyType({"constituent_starts": "starts"} if not (binary or top_down) else {}),
        "family_inputs": (() if internal else ("composition_children", "composition_level"))
                         + (() if binary or top_down else ("start_candidates",)),
        "host_input_names": () if internal else ("composition_schedule", "composition_schedule_levels"),
        "input_references": MappingProxyType({"constituent_starts": "actions"} if not (binary or top_down) else {}),
        "auxiliary_losses": MappingProxyType({"start_loss": "constituent_starts"} if not (binary or top_down) else {}),
        # an external composition reads children that an earlier segment may hold: no segment recurrence
        "supports_segments": internal,
        "takes_start": not (binary or top_down),
        "start_input": None if binary or top_down else "constituent_starts",
        "start_output": None if binary or top_down else "start_log_probs",
        "causal": not internal and not masked,  # Ex + Nm: nothing is ever masked (paper 003, section 3.4)
        "structure_between_pieces": binary,
        "uses_eos": not top_down,
        # What a tokenizer for this grammar must produce: the tree form and the order (paper 003's names).
        "linearization": f"{tree}-{order}",
    }
    class_name = "".join(part.capitalize() for part in name.split("-")) + "Rules"
    return type(class_name, (CompositionalRules,), attributes)


COMPOSITIONAL_GRAMMARS = {name: _grammar_class(name) for name in COMPOSITIONAL_GRAMMAR_NAMES}


class Gpt2TreeRules(CausalRules):
    """Paper 003's GPT2-tree baseline (section 3): a plain causal LM over Nb-Dn linearized unlabeled trees
    `<s> ( Write ( an essay ) quickly )`, no composition and no masking. Legality is that of bracketed trees (a
    root after `<s>`, a constituent closes once it has a child, the root's `)` ends the sequence), as nb-dn's."""

    name = "gpt2-tree"
    linearization = "nb-dn"
    relative_position_meaning = "sequence distances i - j (paper 003 uses GPT-2's absolute positions)"

    def __init__(self, layout, document_level=False):
        super().__init__(layout, document_level=document_level)
        if layout.close_nt_stop - layout.close_nt_start != 1 or layout.open_nt_stop - layout.open_nt_start != 1:
            raise ValueError(f"{self.name} grammar: paper 003's trees are unlabeled: expected one `(` and one `)` id, "
                             f"the layout has {layout.open_nt_stop - layout.open_nt_start} and "
                             f"{layout.close_nt_stop - layout.close_nt_start}")


class Gpt2TokenRules(CausalWordsRules):
    """Paper 003's GPT2-token baseline (section 3): a plain causal LM over the words `<s> w1 ... wn </s>`."""

    name = "gpt2-token"
    relative_position_meaning = "sequence distances i - j (paper 003 uses GPT-2's absolute positions)"


# Paper 003's two Transformer baselines, trained and compared with the sixteen variants.
BASELINE_GRAMMARS = {rules.name: rules for rules in (Gpt2TokenRules, Gpt2TreeRules)}


# The family's grammars by name, nb-dn-in-m (the default) first (configuration_slm.py and hf_slm/families read it).
COMPOSITIONAL_SLM_GRAMMARS = {**{name: COMPOSITIONAL_GRAMMARS[name]
                                 for name in sorted(COMPOSITIONAL_GRAMMAR_NAMES, key=lambda name: name != "nb-dn-in-m")},
                              **BASELINE_GRAMMARS}


def compositional_grammar_class(name):
    """The class of the variant `name` (`bi-up-ex-nm`, ...); an unknown name is a ValueError listing the sixteen."""
    if name not in COMPOSITIONAL_GRAMMARS:
        raise ValueError(f"unknown compositional grammar {name!r}; expected one of {list(COMPOSITIONAL_GRAMMAR_NAMES)} "
                         "({bi,nb}-{dn,up}-{in,ex}-{m,nm}, paper 003 section 2.5, lowercase)")
    return COMPOSITIONAL_GRAMMARS[name]
