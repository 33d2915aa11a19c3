"""The grammar protocol: what every grammar of every family offers, declared in one place.

A grammar turns a sequence of action ids into the model's positions (what each attends, where it sits, what it
predicts, any extra input it carries) and says which actions may come next. Every family's grammar classes derive
from `GrammarProtocol`; generic code (the collator, the model, the beam search, segment recurrence, model cards)
reads its capabilities as plain attributes, each declared below with its default and what it means, and calls
its methods. A family overrides what differs; it never needs a capability that is not declared here.

Also here, because every grammar shares them: the kinds of actions (`ActionKind`) and of positions
(`PositionKind`), the per-position record of the incremental form (`NewPosition`), the per-sequence record of
the whole-sequence form (`GrammarSequence`), and the rows of `completion_needs_after` (`NEED_KINDS`).

This file is hub code: it is copied into checkpoints and must import nothing from hf_slm.
"""

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from types import MappingProxyType
from typing import Any

import numpy as np


IGNORE_INDEX = -100


# How a client's sequence that does not begin with its start token once is refused: a grammar's legality
# (GrammarProtocol._refused) and, for a model without a grammar, padding.check_starts.
def second_start_token_message(where, start_id):
    """The error of a sequence whose action `where` is a second start token (id `start_id`) right after the first."""
    return (f"{where} is a second start token: the sequence starts with two. A client put its own start token before "
            "ids the tokenizer already starts with it; lm-evaluation-harness does so by default: for "
            f"loglikelihood_rolling tasks pass add_bos_token=False,prefix_token_id={start_id} in its model_args "
            "(docs/using-a-checkpoint.md)")


def no_start_token_message(refusal, start_id):
    """The error of a sequence that does not begin with its start token (id `start_id`), after `refusal`, which
    names the first token."""
    return (f"{refusal}: every sequence starts with the start token (id {start_id}). A client that encodes text "
            "without special tokens must put it first; lm-evaluation-harness with add_bos_token=False does not put "
            "it before a task's context: leave add_bos_token out for tasks with a context (docs/using-a-checkpoint.md)")



class ActionKind(IntEnum):
    """Kind of an action id, read from the id ranges of a grammar's layout."""

    PAD = 0
    BOS = 1
    OPEN_NT = 2
    TERMINAL = 3
    CLOSE_NT = 4
    EOS = 5
    # Dependency transition systems (dependency_grammars.py): the artificial root and the transitions.
    ROOT = 6
    LEFT_ARC = 7
    RIGHT_ARC = 8
    POP = 9


class PositionKind(IntEnum):
    """Kind of an input position after expansion (closing NTs become COMPOSE + STACK copies in TG)."""

    PAD = 0
    BOS = 1
    OPEN_NT = 2
    TERMINAL = 3
    CLOSE_COMPOSE = 4
    CLOSE_STACK = 5
    EOS = 6
    # Dependency grammars (dependency_grammars.py); their words are TERMINAL, a word's later pieces SUBWORD.
    ROOT = 7
    SUBWORD = 8
    LEFT_ARC_COMPOSE = 9
    LEFT_ARC_STACK = 10
    RIGHT_ARC_COMPOSE = 11
    RIGHT_ARC_STACK = 12
    POP = 13
    POP_ROOT = 14


POSITION_KIND_NAMES = {
    PositionKind.PAD: "pad",
    PositionKind.BOS: "bos",
    PositionKind.OPEN_NT: "open_nt",
    PositionKind.TERMINAL: "terminal",
    PositionKind.CLOSE_COMPOSE: "close_compose",
    PositionKind.CLOSE_STACK: "close_stack",
    PositionKind.EOS: "eos",
    PositionKind.ROOT: "root",
    PositionKind.SUBWORD: "subword",
    PositionKind.LEFT_ARC_COMPOSE: "left_arc_compose",
    PositionKind.LEFT_ARC_STACK: "left_arc_stack",
    PositionKind.RIGHT_ARC_COMPOSE: "right_arc_compose",
    PositionKind.RIGHT_ARC_STACK: "right_arc_stack",
    PositionKind.POP: "pop",
    PositionKind.POP_ROOT: "pop_root",
}


@dataclass
class GrammarSequence:
    """Model inputs for one action sequence (T' positions after expansion)."""

    input_ids: np.ndarray  # [T'] int64
    position_kinds: np.ndarray  # [T'] int8, PositionKind
    attention_mask: np.ndarray  # [T', T'] bool, row i = positions i may attend
    relative_positions: np.ndarray  # [T', T'] int64, 0 where not attended
    labels: np.ndarray  # [T'] int64, IGNORE_INDEX where nothing is predicted
    depth: np.ndarray  # [T'] int64 (0 for grammars without depth)
    position_coordinates: np.ndarray  # [T'] int64, relative_positions[i, j] = c[i] - c[j] where attended


@dataclass
class NewPosition:
    """What one input position, added incrementally, needs from the grammar."""

    input_id: int
    kind: PositionKind
    attended: np.ndarray  # positions attended, increasing
    relative_positions: np.ndarray  # relative position to each attended position
    predicts: bool  # whether this position's output predicts the next action
    coordinate: int = 0  # c with relative position c_i - c_j (TG: depth; causal grammars: the position)
    # Earlier positions this position's input reads besides its own token, for grammars whose positions carry
    # more (`GrammarProtocol.references_positions`: DTG, the head word's last piece; paper 003's Ex, the children a
    # composition reads). TG and the causal grammars read none.
    extra_inputs: tuple = ()


# The action kinds whose cost to completion `completion_needs_after` reports, one row each, in this order.
NEED_KINDS = (ActionKind.OPEN_NT, ActionKind.TERMINAL, ActionKind.CLOSE_NT, ActionKind.LEFT_ARC, ActionKind.RIGHT_ARC,
              ActionKind.POP, ActionKind.EOS)
# What an action that is not legal (or cannot lead to a complete sequence) "needs": more than any budget.
UNREACHABLE = 1 << 40


class GrammarProtocol(ABC):
    """Every grammar's capabilities (class attributes with their defaults) and methods.

    A grammar is built over a layout (`layout_class`, the id ranges of each action kind) and a document level:
    `grammar = cls(layout, document_level=...)`, or `cls.for_config(config)` for a model config. Subclasses call
    `GrammarProtocol.__init__`, which sets `layout`, `document_level`, `vocab_size` and `action_kinds`.
    """

    # ---- identity ---------------------------------------------------------------------------------------------
    name: str | None = None  # the grammar's name, a config's `grammar`
    # What a tokenizer for this grammar must produce (a tokenizer's `linearization`: "top_down", "terminals",
    # "arc_standard", "nb-up", ...); None: the grammar names none.
    linearization: str | None = None
    # The id layout the grammar reads (a config's or tokenizer's `action_layout`): a class with `from_config(config)`,
    # `kinds(ids)`, `size`, `pad_token_id` and `bos_token_id`. Each family sets its own.
    layout_class: Any = None

    # ---- positions and attention ------------------------------------------------------------------------------
    # A causal grammar has one position per action, each attending every earlier one, coordinate = its index: a
    # model may build this structure itself for any layout of the batch (left padding, a key/value cache). A grammar
    # that expands, masks or places positions otherwise must leave it False (tests/test_grammar_protocol.py holds
    # every registered grammar that says True to it, on random sequences).
    causal: bool = False
    # No structure actions: p(x) is the model's own, exact (TXL (terminals), GPT2-token); generate is transformers'.
    words_only: bool = False
    # Some actions expand into two positions, a COMPOSE copy that predicts nothing and a STACK copy.
    duplicates_closing: bool = False
    duplicated_actions: str = "nothing"  # what duplicates_closing duplicates, in words (model cards)
    # The PositionKinds whose rows compose (the COMPOSE copies): distinct COMPOSE attention serves them
    # (config.distinct_compose_attention).
    compose_kinds: frozenset[int] = frozenset()
    # Relative positions are not all c_i - c_j of per-position coordinates: batch(with_relative_positions=True)
    # gives them explicitly, and steps carry them (NewPosition.relative_positions).
    explicit_relative_positions: bool = False
    # Where R is not always c_i - c_j but scale (c_i - c_j) + offset per query kind: {PositionKind: (scale,
    # offset)}, the other kinds (1, 0); None: no such form. With it the model derives R from coordinates and
    # kinds and keeps its fast attention paths (backbone.PositionStructure.relative_affine).
    relative_affine_by_kind: Mapping[int, tuple[int, int]] | None = None
    # Default clipping range of relative positions (None for the maximum: max_sequence_length - 1).
    relative_position_range: tuple[int, int | None] = (0, None)
    relative_position_meaning: str = "sequence distances i - j"  # what R_ij is, in words (model cards)

    # ---- what positions carry besides their token ------------------------------------------------------------
    adds_head_tokens: bool = False  # a position adds another position's token embedding (DTG's arcs: the head's piece)
    external_composition: bool = False  # a position's input is composed by an external module (paper 003's Ex)
    # An action comes with a pointer to a start position (paper 003's Nb-Up `)`): `pointer_action_id` is that
    # action; `legal_starts` / `legal_start_positions` say where it may start; `step` takes its start (`start=`) and
    # `batch` / `validate` the starts of every action (under the keyword action_inputs gives `start_input`); the model
    # scores the starts (its `search_pointer_log_probs` hook), and the beam search chooses each with its action.
    takes_start: bool = False
    # The action input (a field of action_inputs) that holds each action's start, -1 where there is none, for a
    # grammar that takes_start (paper 003's Nb-Up: "constituent_starts"); the search's outputs carry it by this name.
    start_input: str | None = None
    # The model output that holds, for a grammar that takes_start, log p(start | action) [B, T, T] (indexed by the
    # predicting position, then by the start's action index); scoring reads it by this name (Nb-Up: "start_log_probs").
    start_output: str | None = None
    # NewPosition.extra_inputs name earlier positions whose input a position reads (DTG: an arc's head word's last
    # piece; paper 003's Ex: a `)`'s children): the search decoder maps them to the slots of its cache.
    references_positions: bool = False

    # ---- a family's extra inputs: one mapping, from batch() through the collator to the model's hooks --------
    # The per-action fields the grammar reads beside the action ids: {field: the keyword under which batch() takes
    # them, one array per sequence}. A field is the tokenizer's (a dataset column), one value per action, -1 where
    # there is none (paper 003's Nb-Up: {"constituent_starts": "starts"}). The collator and the model pass them on.
    action_inputs: Mapping[str, str] = MappingProxyType({})
    # The losses the model's output holds beside lm_loss (its family_losses hook), each the mean over the predicted
    # actions whose entry in an action input is not -1: {loss name: that action input} (paper 003's Nb-Up:
    # {"start_loss": "constituent_starts"}, the start pointer's loss over the `)` starts). The trainer weights each
    # by its own count when batches of a step hold unequal shares of it (gradient accumulation, several processes).
    auxiliary_losses: Mapping[str, str] = MappingProxyType({})
    # The arrays batch() gives beside the generic fields, for the family's model hooks (modeling_slm.py): the
    # collator passes them on by these names (DTG: head_token_index; Ex: composition_children, composition_level;
    # Nb-Up: start_candidates).
    family_inputs: tuple[str, ...] = ()
    # What host_inputs(batch) counts on the host (paper 003's Ex: the composer's schedule).
    host_input_names: tuple[str, ...] = ()
    # The action and family inputs whose values point into their own sequence: {name: "actions" (action indices,
    # `<s>` = 0) or "positions" (expanded positions)}, -1 where there is none (paper 003's Nb-Up:
    # {"constituent_starts": "actions"}; DTG: {"head_token_index": "positions"}). Packing several sequences into one
    # row (hf_slm/data/packing.py) shifts them by where their sequence starts; any other [T'] input is a value, and a
    # [T', T'] one is laid out block by block.
    input_references: Mapping[str, str] = MappingProxyType({})

    # ---- the action sequence ----------------------------------------------------------------------------------
    uses_eos: bool = False  # a sequence ends with `</s>` (else when its root closes)
    # A constituent opens with an action before its children (`(`, a top-down linearization); False: constituents
    # only close after their children (bottom-up), or there are none. The search's brackets around the pieces of a
    # word read it (search_constraints.py, with structure_between_pieces).
    top_down: bool = False
    # Whether structural actions may come between the pieces of one word (paper 003's Bi trees, binary over
    # tokens); otherwise a word's pieces follow each other (search_constraints.py reads it).
    structure_between_pieces: bool = False
    # The ActionKinds of structure that reduces (closes constituents, attaches dependents): the search's n_c and
    # per-word limits count them (search_constraints.py).
    reducing_kinds: frozenset[int] = frozenset()
    # [vocab_size] bool: the ids that continue a word (a word's later pieces, which legality tells apart from its
    # first); None: legality treats every piece alike. Set from the layout by grammars that tell them apart.
    continues_word: np.ndarray | None = None
    action_kinds: Any = None  # [vocab_size] int8, the ActionKind of every id (set by __init__ from the layout)

    # ---- segment recurrence (segments.py) --------------------------------------------------------------------
    # Positions leave a stack that `stack_lifetimes` describes (TG, DTG): the "structure" memory keeps those still
    # on it. A causal grammar's positions never leave.
    has_stack: bool = False
    # Whether a model of this grammar may read a long sequence segment by segment through a memory (an external
    # composition reads children that an earlier segment may hold: paper 003's Ex variants may not).
    supports_segments: bool = True

    # ---- the beam search ----------------------------------------------------------------------------------
    # A fast form of many hypotheses' states as arrays (hypothesis_rows.HypothesisRows, with
    # `from_states(grammar, states)`), tested equal to stepping each state; None: StateListRows, any grammar's.
    # A subclass that changes the rules the fast form transcribes must set it back to None.
    rows_class: type | None = None

    def __init__(self, layout: Any, document_level: bool = False) -> None:
        self.layout = layout
        self.document_level = bool(document_level)
        self.vocab_size = layout.size
        self.action_kinds = layout.kinds(np.arange(self.vocab_size))
        self._kind_masks: dict[tuple, np.ndarray] = {}

    @classmethod
    def for_config(cls, config: Any) -> "GrammarProtocol":
        """The grammar over a model config's id layout (and its options), at the config's document level."""
        return cls(cls.layout_class.from_config(config), document_level=config.document_level)

    def host_inputs(self, batch: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """{name: value} for host_input_names, counted on the host from batch()'s arrays: sizes the model would
        otherwise read back from the device (a sync per training step off the CPU). The collator adds them (numpy
        arrays as tensors, other values as they are); a model without them reads the same numbers itself."""
        return {}

    @staticmethod
    def report_fields(sequence: Any) -> dict[str, Any]:
        """What a mask report (`hf-slm mask`, hf_slm/families/mask_examples.py) adds about a GrammarSequence of
        this grammar beyond its mask and positions, per position: none here (paper 003's Ex: what each `)`
        composes; Nb-Up: the start each `)` points at)."""
        return {}

    # ---- derived capabilities -------------------------------------------------------------------------------
    @property
    def needs_explicit_relative_positions(self) -> bool:
        """Whether the model needs the explicit relative positions of `batch`: R is not c_i - c_j, nor affine in
        it per kind (relative_affine_by_kind). The collator gives them, and the model asks the grammar for them."""
        return self.explicit_relative_positions and self.relative_affine_by_kind is None

    @property
    def default_memory_update(self) -> str:
        """The memory rule of segment recurrence by default (segments.py): "structure" where positions leave a
        stack (TG, DTG), "shift" (Transformer-XL's) for the others."""
        return "structure" if self.has_stack and not self.causal else "shift"

    @property
    def start_action_id(self) -> int:
        """The first action of every sequence: `<s>`."""
        return self.layout.bos_token_id

    @property
    def pointer_action_id(self) -> int | None:
        """The action that comes with a start (takes_start), whose starts the search scores with the model's pointer;
        None for a grammar whose actions take none."""
        return None

    # ---- legality: the one source ----------------------------------------------------------------------------
    @abstractmethod
    def legal_actions(self, state: Any) -> np.ndarray:
        """Bool mask [vocab_size] of the actions that may follow the prefix in `state` (shared and read-only: copy
        it before changing it). Everything that needs legality (validation, sampling, beam search) asks here."""

    def kinds_mask(self, *kinds: int) -> np.ndarray:
        """The read-only mask [vocab_size] of every id of the given ActionKinds (cached)."""
        key = tuple(int(kind) for kind in kinds)
        if key not in self._kind_masks:
            mask = np.isin(self.action_kinds, np.array(key, dtype=np.int8))
            mask.setflags(write=False)
            self._kind_masks[key] = mask
        return self._kind_masks[key]

    def legal_table(self, kind_sets: Sequence[Sequence[int]]) -> np.ndarray:
        """[len(kind_sets), vocab_size] bool, read-only: row i marks every id of the kinds kind_sets[i] (each a tuple
        of ActionKinds; () for none). Cached, so that a fast form of many states (rows_class) reads legality with
        one gather."""
        key = ("table",) + tuple(tuple(int(kind) for kind in kinds) for kinds in kind_sets)
        if key not in self._kind_masks:
            table = np.stack([self.kinds_mask(*kinds) for kinds in kind_sets])
            table.setflags(write=False)
            self._kind_masks[key] = table
        return self._kind_masks[key]

    def allowed_next_kinds(self, state: Any) -> frozenset[ActionKind]:
        """The set of ActionKind that `legal_actions(state)` allows (for messages and inspection)."""
        return frozenset(ActionKind(int(k)) for k in np.unique(self.action_kinds[self.legal_actions(state)]))

    def _refused(self, state, action_id, where):
        """None when `legal_actions(state)` allows `action_id`, else the legal mask; an id outside the
        vocabulary is a ValueError naming `where`."""
        legal = self.legal_actions(state)
        if 0 <= action_id < len(legal) and legal[action_id]:
            return None
        if not 0 <= action_id < len(legal):
            raise ValueError(f"{where} is outside the vocabulary of {len(legal)} ids")
        # Where a client's encoding went wrong, said as such (the grammar's own "expected ..." would not say why):
        # its own start token before ids that start with one, which lm-evaluation-harness puts unless told
        # otherwise; no start token; plain words given to a model of trees.
        if action_id == self.start_action_id and state.num_actions == 1:
            raise ValueError(second_start_token_message(where, self.start_action_id))
        if state.num_actions == 0:
            expected = ActionKind(int(self.action_kinds[self.start_action_id])).name
            raise ValueError(no_start_token_message(f"{where} is not allowed here; expected {expected}",
                                                    self.start_action_id))
        if state.num_actions == 1 and self.action_kinds[action_id] == ActionKind.TERMINAL:
            raise ValueError(
                f"{where} is not allowed here; expected "
                f"{', '.join(sorted(kind.name for kind in self.allowed_next_kinds(state)))}: a word where a tree "
                "begins, so the ids hold words without their tree, as a client that scores plain sentences encodes "
                "them. This model scores trees, log p(x, y); p(x) of plain "
                "sentences comes from search (hf-slm score, hf-slm eval blimp), and a client scores a tree when "
                "given the tree (docs/using-a-checkpoint.md)")
        return legal

    # ---- incremental --------------------------------------------------------------------------------------
    @abstractmethod
    def start(self) -> Any:
        """A new incremental state (before the start action); states have `clone()`, `length` (positions emitted),
        `num_actions`, `num_terminals`, `trees_complete` and `finished`."""

    @abstractmethod
    def step(self, state: Any, action_id: int, check: bool = True) -> list[NewPosition]:
        """Feed one action; return the list of NewPosition it expands to. It is validated first unless
        `check=False`: for callers that took it from `legal_actions(state)` already (beam search)."""

    @abstractmethod
    def is_complete(self, state: Any) -> bool:
        """Whether the prefix read so far is a whole sequence (a document may go on after a complete one)."""

    @abstractmethod
    def structure_completes_tree(self, state: Any) -> bool:
        """Whether a structural action now would complete the tree."""

    def open_total(self, state: Any) -> int:
        """How many constituents the prefix in `state` has begun (what the search's n_c counts); 0 for grammars
        without nonterminals."""
        return 0

    def legal_starts(self, state: Any) -> np.ndarray:
        """The starts (action indices, `<s>` = 0, increasing) that `pointer_action_id` may take after the prefix in
        `state`; empty where it is not legal, and for a grammar that takes no start."""
        return np.zeros(0, dtype=np.int64)

    def legal_start_positions(self, state: Any) -> np.ndarray:
        """The positions whose outputs the model's pointer reads for `legal_starts(state)`, in the same order."""
        return np.zeros(0, dtype=np.int64)

    def added_token_ids(self, batch: Mapping[str, np.ndarray]) -> np.ndarray | None:
        """[B, T'] int64, from batch()'s arrays: for a grammar whose positions add another position's token embedding
        (adds_head_tokens), the token each position adds, -1 for none; None for the others. Segment recurrence
        carries these tokens with each segment (the other position may lie in an earlier one) to the model's
        `added_token_embeddings` hook (segments.py)."""
        return None

    def stack_lifetimes(self, ids: Sequence[int], validate: bool = True,
                        require_complete: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """(pushed [T'] bool, removal [T'] int64) of one sequence, for grammars whose positions leave a stack
        (`has_stack`): once position t is read, position j is on the stack iff pushed[j] and j <= t < removal[j].
        Segment recurrence keeps these in its memory (segments.py)."""
        raise ValueError(f"the {self.name} grammar has no stack whose positions a memory could keep (has_stack is "
                         "False)")

    # ---- what the search needs to stay within its limits --------------------------------------------------
    @abstractmethod
    def completion_need(self, state: Any) -> tuple[int, int]:
        """(positions, terminals): the fewest positions and the fewest terminal pieces still to come before the
        sequence in `state` is complete (a document: its current tree closed)."""

    @abstractmethod
    def minimum_positions(self, pieces: int, words: int) -> int:
        """The fewest positions a sentence of `words` words in `pieces` pieces expands to, the start included."""

    def completion_needs_after(self, state: Any) -> np.ndarray:
        """[len(NEED_KINDS), 2] int64: per action kind, the fewest positions and terminal pieces from now to a
        complete sequence when the next action is of that kind (the action's own positions and piece included);
        UNREACHABLE for a kind that is not legal. Search constraints compare it with the positions and pieces left
        (search_constraints.py); a fast path (rows_class) vectorizes it."""
        needs: np.ndarray = np.full((len(NEED_KINDS), 2), UNREACHABLE, np.int64)
        legal = self.legal_actions(state)
        continues = self.continues_word
        for row, kind in enumerate(NEED_KINDS):
            ids: Any = np.flatnonzero(legal & (self.action_kinds == kind))
            # Every `(` (any label) leaves the same structure, and so does every piece that starts a word (or every
            # one that continues it); arcs may differ (arc-swift's k).
            if kind == ActionKind.OPEN_NT:
                ids = ids[:1]
            elif kind == ActionKind.TERMINAL:
                ids = ids[:1] if continues is None else [g[0] for g in (ids[~continues[ids]], ids[continues[ids]]) if len(g)]
            for action in ids:
                after = state.clone()
                added = len(self._step_for_need(after, int(action)))
                positions, terminals = self.completion_need(after)
                needs[row, 0] = min(needs[row, 0], added + positions)
                needs[row, 1] = min(needs[row, 1], int(kind == ActionKind.TERMINAL) + terminals)
        return needs

    def _step_for_need(self, state, action):
        return self.step(state, action, check=False)

    # ---- whole sequences ------------------------------------------------------------------------------------
    @abstractmethod
    def batch(self, sequences: Sequence[Sequence[int]], validate: bool = True, require_complete: bool = True,
              pad_to_multiple_of: int | None = None, max_length: float | None = None,
              with_relative_positions: bool = True) -> dict[str, np.ndarray]:
        """Model inputs for a batch of action-id sequences, padded to the longest expanded length (numpy arrays):
        input_ids, position_kinds, labels, depth, position_coordinates and expansion_index [B, T'], attention_mask
        [B, T', T'], relative_positions [B, T', T'] (with `with_relative_positions`), prediction_index [B, T],
        lengths and action_lengths [B]. ValueError naming the sequence when one breaks the grammar or expands past
        `max_length`."""

    @abstractmethod
    def validate(self, ids: Sequence[int], require_complete: bool = True) -> None:
        """Check one sequence against the rules; raise ValueError naming the first illegal action."""

    @abstractmethod
    def validate_batch(self, sequences: Sequence[Sequence[int]], require_complete: bool = True) -> None:
        """Check many sequences at once; raise ValueError naming the first bad one and its action."""

    def sequence(self, ids: Sequence[int], validate: bool = True, require_complete: bool = True) -> GrammarSequence:
        """Expanded ids, attention mask, relative positions, labels and depths for one sequence."""
        batch = self.batch([ids], validate=validate, require_complete=require_complete)
        fields = GrammarSequence.__dataclass_fields__
        return GrammarSequence(**{name: value[0] for name, value in batch.items() if name in fields})


# Every capability the protocol declares (tests hold every registered family's grammar classes to it).
CAPABILITIES = tuple(name for name, value in vars(GrammarProtocol).items()
                     if not name.startswith("_") and name not in ("for_config",))
