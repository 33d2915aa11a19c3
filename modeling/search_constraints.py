"""Search constraints: what a decoder may pick among the actions the grammar allows.

The grammar's `legal_actions(state)` says which actions keep a sequence well formed; it is the only source
of legality. Decoding adds its own limits on top, the same for every family:
- forced words: while a sentence's words are given, the only terminal is the next piece of the next word,
  and inside a word (after its first piece) nothing else may come; for a grammar whose trees are binary over
  pieces (`grammar.structure_between_pieces`, paper 003's Bi variants) a word of several pieces is a
  constituent of its own, left-binarized, so its `)` follows each piece but the first, its `(` (top-down) come
  right before it, and free words are one piece;
- word pieces in free generation: a continuation piece only right after a piece, and necessarily right
  after a bare word start (SentencePiece's lone "\u2581"); `<unk>` is never generated;
- n_c (`max_nonterminals`), p_c (`max_consecutive_open`) and `max_structural_per_word`;
- the tree (or the sequence) ends only after the last forced word, and after at least one free word;
- every action leaves a hypothesis that can still complete: the grammar's `completion_needs_after` (the fewest
  positions and pieces from there to a complete tree) fits in the positions the model reads
  (`max_positions`: config.max_sequence_length) and in the pieces its words can still bring.
It also says which actions complete a round of word-synchronous beam search (generate the next word, or
finish the sentence once its words are there).

Everything here works on H hypotheses at once: counters are [H] tensors (DecodingStatus), the sentences'
words are tables (SentenceWords), and the result is two [H, C] masks over the C candidate ids (`allowed_columns`;
`allowed` spreads them over the vocabulary) from a handful of tensor operations.

Hub code: imports only numpy, torch and its sibling files.
"""

from dataclasses import dataclass, fields

import numpy as np
import torch

from .grammars import NEED_KINDS, UNREACHABLE, ActionKind
from .hypothesis_rows import HypothesisRows, hypothesis_rows

# In free generation a word ends after this many pieces at the latest (a runaway word cannot stall a beam).
MAX_PIECES_PER_WORD = 16
# The columns of SearchConstraints._needs_by_column after NEED_KINDS': a bare word start (it brings the piece
# that must follow it), and ids of no kind there.
_BARE_START, _ALWAYS_FITS = len(NEED_KINDS), len(NEED_KINDS) + 1
_TERMINAL_NEED = NEED_KINDS.index(ActionKind.TERMINAL)


class SentenceWords:
    """The words each sentence of a search must contain, as tables, and how many free words may follow.

    forced_words[s]: sentence s's given words, each a list of piece ids (may be empty);
    free_words[s]: how many words may follow them (0: the given words only).
    """

    def __init__(self, forced_words, free_words):
        count = len(forced_words)
        width = max([len(words) for words in forced_words] + [1])
        depth = max([len(word) for words in forced_words for word in words] + [1])
        self.pieces = torch.full((count, width, depth), -1, dtype=torch.long)  # [S, W, P], -1 past a word's end
        self.word_lengths = torch.zeros((count, width), dtype=torch.long)  # [S, W]
        for s, words in enumerate(forced_words):
            for w, word in enumerate(words):
                self.pieces[s, w, : len(word)] = torch.tensor(word, dtype=torch.long)
                self.word_lengths[s, w] = len(word)
        self.num_forced = torch.tensor([len(words) for words in forced_words], dtype=torch.long)  # [S]
        # [S, W + 1]: the pieces of a sentence's words before word w (its last column: all of them)
        self.pieces_before = torch.nn.functional.pad(self.word_lengths.cumsum(1), (1, 0))
        self.free_words = torch.tensor(list(free_words), dtype=torch.long)  # [S]

    def forced_pieces_left(self, status):
        """[H]: the pieces of its forced words that each hypothesis has still to generate."""
        sentence = status.sentence
        word = torch.minimum(status.word, self.num_forced[sentence])
        done = self.pieces_before[sentence, word] + torch.where(status.word < self.num_forced[sentence], status.piece, 0)
        return self.pieces_before[sentence, self.num_forced[sentence]] - done

    def forced_slots_left(self, status, opening=False):
        """[H]: for a Bi tree over pieces, the most children of open constituents that its forced words left can
        fill (after one more `(`, with `opening`). A word of k pieces is a constituent of its own (its k - 1 `(`
        come right before its first piece): not begun, it fills one child, or j + 1 once j of its `(` are open
        (at most the opening run so far); begun, each of its pieces left fills one."""
        sentence = status.sentence
        num_forced = self.num_forced[sentence]
        in_forced = status.word < num_forced
        length = self.word_lengths[sentence, status.word.clamp(max=self.word_lengths.shape[1] - 1)]
        current = torch.where(status.piece > 0, length - status.piece,
                              torch.minimum(status.consecutive_open + int(opening), (length - 1).clamp(min=0)) + 1)
        return torch.where(in_forced, current + num_forced - status.word - 1, 0)

    def next_forced_piece(self, status):
        """Per hypothesis: whether it is inside its forced words, the piece that must come next (-1 if
        none), and whether that piece ends its word."""
        sentence = status.sentence
        in_forced = status.word < self.num_forced[sentence]
        word = status.word.clamp(max=self.pieces.shape[1] - 1)
        piece = status.piece.clamp(max=self.pieces.shape[2] - 1)
        next_piece = torch.where(in_forced, self.pieces[sentence, word, piece], -1)
        ends_word = in_forced & (status.piece == self.word_lengths[sentence, word] - 1)
        return in_forced, next_piece, ends_word


@dataclass
class DecodingStatus:
    """Where H hypotheses stand, as the constraints need it: the grammar states (hypothesis_rows.py) and [H]
    long tensors of counters (the beam search keeps them; `counters_after` is the only place they advance)."""

    grammar_rows: object  # a HypothesisRows: the grammar's incremental states
    sentence: torch.Tensor  # the sentence (row of SentenceWords) each hypothesis belongs to
    last_action: torch.Tensor
    word: torch.Tensor  # words generated so far in its sentence
    piece: torch.Tensor  # pieces of the current word generated so far (0: between words)
    structural: torch.Tensor  # structural actions since the last word
    consecutive_open: torch.Tensor  # opening actions in a row
    open_before: torch.Tensor  # opening NTs before this sentence (a document's earlier sentences)

    COUNTERS = ("word", "piece", "structural", "consecutive_open")

    @classmethod
    def start(cls, grammar_rows, last_actions, sentence=None, **counters):
        """The status of hypotheses at `grammar_rows` (counters zero unless given; open_before from the rows)."""
        count = len(grammar_rows)
        values = {name: torch.as_tensor(counters.get(name, [0] * count), dtype=torch.long) for name in cls.COUNTERS}
        sentence = torch.arange(count) if sentence is None else torch.as_tensor(sentence, dtype=torch.long)
        return cls(grammar_rows, sentence, torch.as_tensor(last_actions, dtype=torch.long), **values,
                   open_before=grammar_rows.open_total.clone())

    def __len__(self):
        return len(self.sentence)

    def select(self, rows):
        """The status of hypotheses `rows` (a long tensor), in that order."""
        picked = {f.name: getattr(self, f.name)[rows] for f in fields(self) if f.name != "grammar_rows"}
        return DecodingStatus(self.grammar_rows.select(rows), **picked)

    @staticmethod
    def concat(statuses):
        joined = {f.name: torch.cat([getattr(s, f.name) for s in statuses]) for f in fields(DecodingStatus)
                  if f.name != "grammar_rows"}
        return DecodingStatus(HypothesisRows.concat([s.grammar_rows for s in statuses]), **joined)


class SearchConstraints:
    """Decoding limits over a grammar's legal actions (see the module docstring).

    word_start_mask: for every id, whether it begins a word (tokenizer.word_start_mask); None: every
        terminal piece is a word.
    incomplete_word_ids: pieces that start a word but spell none of it.
    max_positions: the most positions a sequence may have (the model's config.max_sequence_length); None: no
        limit but the words'.
    """

    def __init__(self, grammar, word_start_mask=None, incomplete_word_ids=(), max_nonterminals=None,
                 max_consecutive_open=None, max_structural_per_word=None, max_nonterminals_per_word=1.0,
                 max_positions=None):
        self.grammar = grammar
        self.max_positions = max_positions
        # For every id, its column of the needs (_needs_by_column): its kind's row of grammar.completion_needs_after
        # (NEED_KINDS); for a bare word start, that of a terminal and the piece that must follow it; else a column
        # that always fits (`<s>`, padding).
        kind_of_id = torch.from_numpy(grammar.action_kinds.astype(np.int64))
        self._need_column = torch.full((grammar.vocab_size,), _ALWAYS_FITS, dtype=torch.long)
        for column, kind in enumerate(NEED_KINDS):
            self._need_column[kind_of_id == kind] = column
        layout = grammar.layout
        kinds = torch.from_numpy(grammar.action_kinds.astype(np.int64))
        size = grammar.vocab_size
        self.open_mask = kinds == ActionKind.OPEN_NT
        # Structure that reduces (grammar.reducing_kinds: closing NTs; a dependency grammar's arcs and POP).
        self.close_mask = torch.isin(kinds, torch.tensor(sorted(int(kind) for kind in grammar.reducing_kinds),
                                                         dtype=torch.long))
        self.eos_mask = kinds == ActionKind.EOS
        self.terminal_mask = kinds == ActionKind.TERMINAL
        starts = torch.ones(size, dtype=torch.bool)
        if word_start_mask is not None:
            starts = torch.zeros(size, dtype=torch.bool)
            given = torch.tensor(list(word_start_mask), dtype=torch.bool)[:size]
            starts[: len(given)] = given
        self.word_start_mask = starts
        generable = self.terminal_mask.clone()
        if layout.unk_token_id is not None:
            generable[layout.unk_token_id] = False
        self.start_mask = generable & starts
        self.continuation_mask = generable & ~starts
        self.incomplete_mask = torch.zeros(size, dtype=torch.bool)
        self.incomplete_mask[[int(i) for i in incomplete_word_ids]] = True
        self._need_column[self.incomplete_mask & self.terminal_mask] = _BARE_START
        # Which actions a hypothesis may take (or which complete its round) depends on a few per-hypothesis
        # flags: one [2^k, V] table row per combination, so that [H, V] masks are one gather, not k products.
        self._permitted = self._flag_table([self.open_mask, self.close_mask, self.eos_mask, self.start_mask,
                                            self.continuation_mask])
        self._completing = self._flag_table([self.terminal_mask, self.close_mask, self.eos_mask])
        self.max_nonterminals = max_nonterminals
        self.max_consecutive_open = max_consecutive_open
        self.max_structural_per_word = max_structural_per_word
        self.max_nonterminals_per_word = max_nonterminals_per_word
        # Paper 003's Bi trees are binary over pieces: a word of three pieces has a bracket between two of them.
        self.structure_between_pieces = grammar.structure_between_pieces

    @staticmethod
    def _flag_table(masks):
        """[2^k, V]: row `code` is the union of masks[i] over the bits i set in `code`."""
        codes = torch.arange(2 ** len(masks))
        table = torch.zeros((len(codes), len(masks[0])), dtype=torch.bool)
        for bit, mask in enumerate(masks):
            table |= ((codes >> bit) & 1).bool()[:, None] & mask
        return table

    @staticmethod
    def _code(*flags):
        return sum(flag.long() << bit for bit, flag in enumerate(flags))

    def counters_after(self, status, actions, words):
        """{word, piece, structural, consecutive_open} [H] after `actions` [H]: the one place these counters
        advance. A forced word ends with its last piece; a free word starts with a word-start piece."""
        terminal = self.terminal_mask[actions]
        in_forced, _, ends_word = words.next_forced_piece(status)
        starts_free_word = ~in_forced & self.start_mask[actions]
        word = torch.where(terminal & (ends_word | starts_free_word), status.word + 1, status.word)
        piece = torch.where(ends_word, 0, torch.where(starts_free_word, 1, status.piece + 1))
        opening = self.open_mask[actions]
        return dict(
            word=word,
            piece=torch.where(terminal, piece, status.piece),
            structural=torch.where(terminal, 0, status.structural + 1),
            consecutive_open=torch.where(opening, status.consecutive_open + 1, 0),
        )

    def reachable(self, sequence, words, starts=None):
        """Whether the action sequence `sequence` (`<s>` first, a whole tree over the given `words`, each a
        list of piece ids; Nb-Up: with its constituent `starts`, one per action) stays inside these constraints at
        every step: whether forced-word beam search can find it at all."""
        return self.reachable_all([sequence], [words], None if starts is None else [starts])[0]

    def reachable_all(self, sequences, words, starts=None):
        """`reachable` of each sequence (with its words, and starts if given), all replayed together as the rows
        of one batch, as beam search advances its hypotheses: a row leaves the batch at its first refused action
        or at its sequence's end."""
        states = []
        for sequence in sequences:
            states.append(self.grammar.start())
            self.grammar.step(states[-1], sequence[0])
        status = DecodingStatus.start(hypothesis_rows(self.grammar, states), [sequence[0] for sequence in sequences])
        table = SentenceWords(list(words), [0] * len(sequences))
        lengths = torch.tensor([len(sequence) for sequence in sequences])
        found = [False] * len(sequences)
        for index in range(1, int(lengths.max()) if len(sequences) else 1):
            ended = lengths[status.sentence] == index
            self._judge_ended(status, ended, table, found)
            status = status.select(torch.nonzero(~ended).flatten())
            if not len(status):
                return found
            actions = torch.tensor([sequences[row][index] for row in status.sentence.tolist()])
            kept = torch.nonzero(self.allowed(status, table)[0][torch.arange(len(status)), actions]).flatten()
            status, actions = status.select(kept), actions[kept]
            if not len(status):
                return found
            if starts is None:
                rows, _ = status.grammar_rows.step(actions)
            else:  # a Nb-Up `)` with its start (the grammar checks it is in C_k)
                rows, _ = status.grammar_rows.step(
                    actions, torch.tensor([starts[row][index] for row in status.sentence.tolist()]))
            status = DecodingStatus(rows, status.sentence, actions, **self.counters_after(status, actions, table),
                                    open_before=status.open_before)
        self._judge_ended(status, torch.ones(len(status), dtype=torch.bool), table, found)
        return found

    @staticmethod
    def _judge_ended(status, ended, words, found):
        """Mark in `found` the rows of `status` whose sequence has ended (`ended` [H]) with every word and a
        complete tree."""
        complete = (status.word == words.num_forced[status.sentence]) & status.grammar_rows.complete
        for row in torch.nonzero(ended & complete).flatten().tolist():
            found[int(status.sentence[row])] = True

    def _nothing_binds(self, status, forced_left, needs):
        """Whether no hypothesis can be refused by _keep_completable (most rounds: checked in a few reductions, not
        [H, K] work). Outside Bi trees the pieces budget is at least MAX_PIECES_PER_WORD, so pieces bind only for a
        larger need; positions cannot bind while the positions so far, every forced piece left and the largest
        need of any kind fit in max_positions (a bound on what each kind needs with its pieces)."""
        reachable = needs[:, :, 0] < UNREACHABLE
        if bool(((needs[:, :, 1] > MAX_PIECES_PER_WORD) & reachable).any()):
            return False
        if self.max_positions is None:
            return True
        worst = torch.where(reachable, needs[:, :, 0], 0).amax(1)
        return bool((status.grammar_rows.positions + forced_left + worst <= self.max_positions).all())

    @staticmethod
    def _needs_by_column(needs):
        """[H, K + 1, 2]: the grammar's needs per action kind [H, K, 2], then a bare word start's: a terminal's and one
        position and piece more, for the continuation piece that must follow it (free generation)."""
        bare = needs[:, _TERMINAL_NEED] + 1
        return torch.cat([needs, bare[:, None]], dim=1)

    def _keep_completable(self, status, words, free_words, new_words, in_forced, allowed, columns):
        """Narrow `allowed` [H, C] (the ids `columns`; in place) to the actions after which a hypothesis can still complete its tree,
        by the grammar's completion_needs_after: the pieces it needs within the pieces its words can still bring
        (forced ones left, then the free words, up to MAX_PIECES_PER_WORD each, and the rest of a free word going
        on; in a Bi tree, where a word of several pieces is its own constituent, the children its words can still
        fill: SentenceWords.forced_slots_left, and one per free word), and the positions it needs (with every
        forced piece left, one position each) within max_positions. Where no action fits the positions (a prefix
        already too long to finish), the positions are not checked: the model then names the length it cannot
        read, as before. Checked per action kind, so only the rows where some kind does not fit cost [V] work."""
        needs = self._needs_by_column(status.grammar_rows.completion_needs_after())  # [H, K + 1, 2]
        # A forced word's bare start is one of its forced pieces: the piece after it is forced too, and already
        # counted in the forced pieces (slots, Bi) left, so it needs what any terminal does.
        needs[in_forced, _BARE_START] = needs[in_forced, _TERMINAL_NEED]
        forced_left = words.forced_pieces_left(status)
        if not self.structure_between_pieces and self._nothing_binds(status, forced_left, needs):
            return allowed
        free_left = (free_words - new_words.clamp(min=0)).clamp(min=0)
        if self.structure_between_pieces:  # a Bi tree: what counts is the children the words can still fill
            pieces_left = (words.forced_slots_left(status) + free_left)[:, None].repeat(1, needs.shape[1])
            # an opening may be one of the next word's own `(`: it then fills one child more (free words: one piece)
            pieces_left[:, NEED_KINDS.index(ActionKind.OPEN_NT)] = words.forced_slots_left(status, opening=True) + free_left
        else:
            pieces_left = (forced_left + (free_left + 1) * MAX_PIECES_PER_WORD)[:, None]
        illegal = needs[:, :, 0] >= UNREACHABLE  # the grammar's mask refuses these kinds already
        # [H, K + 2]: per column of _needs_by_column, then one for ids of no kind there
        fits_pieces = torch.nn.functional.pad(illegal | (needs[:, :, 1] <= pieces_left), (0, 1), value=True)
        fits = fits_pieces
        if self.max_positions is not None:
            positions_left = self.max_positions - status.grammar_rows.positions
            # Every forced piece left comes, one position each, beyond the pieces the structure needs anyway.
            must_come = (forced_left[:, None] - needs[:, :, 1]).clamp(min=0)
            fits = fits & torch.nn.functional.pad(illegal | (needs[:, :, 0] + must_come <= positions_left[:, None]),
                                                  (0, 1), value=True)
        rows = torch.nonzero(~fits.all(1)).squeeze(1)
        if not len(rows):
            return allowed
        need_column = self._need_column[columns]
        narrowed = allowed[rows] & fits[rows][:, need_column]
        stuck = torch.nonzero(~narrowed.any(1)).squeeze(1)
        narrowed[stuck] = allowed[rows[stuck]] & fits_pieces[rows[stuck]][:, need_column]
        allowed[rows] = narrowed
        return allowed

    def nonterminal_limit(self, status, words):
        """[H] n_c of each hypothesis's sentence: max_nonterminals, or max_nonterminals_per_word times its words
        (forced and free), rounded up, at least 1."""
        sentence = status.sentence
        if self.max_nonterminals is not None:
            return torch.full_like(sentence, self.max_nonterminals)
        per_word = self.max_nonterminals_per_word * (words.num_forced[sentence] + words.free_words[sentence]).double()
        return per_word.ceil().long().clamp(min=1)  # float64, so that the rounding is Python's math.ceil

    def final_close_only(self, status, words):
        """[H] bool, Nb-Up: a `)` now would be the last that n_c allows, so it must close the whole stack (start at its
        bottom item, the first of grammar.legal_starts): a tree it leaves open could never close."""
        return self.nonterminal_limit(status, words) - (status.grammar_rows.open_total - status.open_before) == 1

    def feasible_starts(self, actions, starts):
        """[H, C] bool, Nb-Up: which of the legal `starts` [H, C] (action indices into the rows of `actions` [H, L],
        -1 for none) a `)` may take. Where a grammar keeps a word's pieces siblings (not structure_between_pieces:
        Nb), a constituent starts at a word's first piece, or it would split the word (a closed constituent's
        start is its first word's); Bi-Up's one start may sit between pieces (a word's pieces are a constituent)."""
        feasible = starts >= 0
        if self.structure_between_pieces:
            return feasible
        first = actions.gather(1, starts.clamp(min=0))
        return feasible & (self.word_start_mask[first.clamp(min=0)] | ~self.terminal_mask[first.clamp(min=0)])

    def allowed(self, status, words):
        """([H, V] bool allowed actions, [H, V] bool actions that complete the round) for the H hypotheses
        of `status` (a DecodingStatus) searching the sentences of `words` (SentenceWords)."""
        allowed, completing, columns = self.allowed_columns(status, words)
        full = torch.zeros((2, len(allowed), self.grammar.vocab_size), dtype=torch.bool)
        full[0][:, columns], full[1][:, columns] = allowed, completing
        return full[0], full[1]

    def allowed_columns(self, status, words):
        """`allowed` over the candidate ids only: ([H, C] allowed, [H, C] completing, the C ids). The candidates
        are the ids some hypothesis's flags permit and the forced pieces: with forced words, the structural ids
        and a few pieces of thousands, so that the [H, ...] work of a round is that narrow."""
        grammar_rows = status.grammar_rows
        open_total = grammar_rows.open_total
        # whether a closing action now would complete the tree (TG: the root's; DTG: the arc onto the root)
        closes_root = grammar_rows.closes_root
        num_forced = words.num_forced[status.sentence]
        free_words = words.free_words[status.sentence]
        in_forced, forced_piece, forced_completes = words.next_forced_piece(status)
        new_words = status.word - num_forced
        inside_word = in_forced & (status.piece > 0)
        bare_start = ~in_forced & self.incomplete_mask[status.last_action]
        between_words = ~inside_word & ~bare_start
        structure_here = between_words
        forced_piece_ok = torch.ones_like(in_forced)
        if self.structure_between_pieces:
            # Paper 003's Bi trees over pieces: a word of k > 1 pieces is a constituent of its own, left-binarized
            # ((p1 p2) p3 ...), so that it reads back as one word. After each of its pieces but the first comes
            # exactly its `)`; top-down, its k - 1 `(` come right before p1 (the last consecutive opens).
            terminal_last = self.terminal_mask[status.last_action]
            word = status.word.clamp(max=words.pieces.shape[1] - 1)
            previous = (status.word - 1).clamp(min=0, max=words.pieces.shape[1] - 1)
            previous_length = torch.where((status.word > 0) & (status.word - 1 < num_forced),
                                          words.word_lengths[status.sentence, previous], 0)
            just_ended_long_word = ~inside_word & terminal_last & (previous_length > 1)
            needs_close = (inside_word & terminal_last & (status.piece >= 2)) | just_ended_long_word
            length = torch.where(in_forced, words.word_lengths[status.sentence, word], 1)
            opened_for_it = status.consecutive_open >= length - 1
            if self.grammar.top_down:
                # Child slots still to fill: the root's, plus one per `(` (it takes one and brings two), minus one
                # per piece. A forced word's k pieces take k of them (its own k - 1 `(` are already counted); one
                # must stay open for the words after it, or its pieces complete the tree and they can never attach
                # (a sentence's first word of several pieces with only its own brackets becomes the root).
                pending = 1 + (open_total - status.open_before) - words.pieces_before[status.sentence, word]
                words_after = (status.word + 1 < num_forced).long()
                opened_for_it &= pending - length >= words_after
            forced_piece_ok = ~needs_close & ((status.piece > 0) | opened_for_it | (not self.grammar.top_down))
            structure_here = (between_words & ~needs_close) | needs_close
            # Those brackets come with the pieces, not with the tree: n_c and p_c do not count them (top-down).
            word_brackets = (length - 1).clamp(min=0) * (status.piece == 0) * self.grammar.top_down
            sentence_brackets = (words.word_lengths - 1).clamp(min=0).sum(1)[status.sentence] * self.grammar.top_down
        may_start_word = in_forced | (new_words < free_words)
        words_done = ~in_forced & ((new_words > 0) | (free_words == 0))
        no_free_words = free_words == 0

        limit = self.nonterminal_limit(status, words)
        if self.structure_between_pieces:
            limit = limit + sentence_brackets
        may_open = structure_here & may_start_word & (open_total - status.open_before < limit)
        if self.structure_between_pieces:
            may_open &= ~needs_close
        if self.max_consecutive_open is not None:
            extra = word_brackets if self.structure_between_pieces else 0
            may_open &= status.consecutive_open < self.max_consecutive_open + extra
        structural_ok = torch.ones_like(words_done)
        if self.max_structural_per_word is not None:
            may_open &= status.structural < self.max_structural_per_word
            structural_ok = words_done | (status.structural < self.max_structural_per_word)
        # the root closes only after the last forced word (and a first new word, if any)
        may_close = structure_here & structural_ok & (words_done | ~closes_root)
        takes_start = self.grammar.takes_start
        if takes_start:
            # Nb-Up (paper 003, section 2.6: n_c for Nb-#-#-#): bottom-up, each `)` makes a constituent and may close
            # a single item, so n_c bounds the `)`. The last one n_c allows must close the tree (its start the
            # bottom item: final_close_only), so it waits for the words; after it only `</s>` may come.
            closes_left = limit - (open_total - status.open_before)
            may_close &= (closes_left > 1) | ((closes_left == 1) & words_done)
        may_end = between_words & words_done
        if self.structure_between_pieces:
            may_end &= ~needs_close

        free = ~in_forced & (free_words > 0)
        may_start_free_word = free & may_start_word & ~bare_start
        if takes_start:  # a word after the last `)` n_c allows could never be closed over
            may_start_free_word &= closes_left > 0
        # Only a new word continues (status.piece counts its pieces); a forced word is complete. A Bi tree would
        # need a free word's length before its first piece (its brackets): free words are one piece there.
        continues = free & self.terminal_mask[status.last_action] & (status.piece > 0) & (status.piece < MAX_PIECES_PER_WORD)
        if self.structure_between_pieces:
            may_start_free_word = may_start_free_word & ~needs_close
            continues = torch.zeros_like(continues)
        permit_code = self._code(may_open, may_close, may_end, may_start_free_word, continues)
        forced_rows = torch.nonzero(in_forced).squeeze(1)
        forced_rows = forced_rows[forced_piece_ok[forced_rows]]
        candidate = self._permitted[torch.unique(permit_code)].any(0)
        candidate[forced_piece[forced_rows]] = True
        columns = torch.nonzero(candidate).squeeze(1)
        place = torch.full((len(candidate),), -1, dtype=torch.long)  # each candidate id's column
        place[columns] = torch.arange(len(columns))
        permitted = self._permitted[:, columns][permit_code]
        permitted[forced_rows, place[forced_piece[forced_rows]]] = True
        allowed = grammar_rows.legal_actions(columns) & permitted
        allowed = self._keep_completable(status, words, free_words, new_words, in_forced, allowed, columns)
        # A round completes with a free word's piece, the root's closing or `</s>` when no free words follow,
        # or the last piece of a forced word. A grammar that ends with `</s>` completes it there, not at the root.
        finishing = between_words & no_free_words
        root_completes = finishing & closes_root & (not self.grammar.uses_eos)
        completing = allowed & self._completing[:, columns][self._code(free, root_completes, finishing)]
        completes_word = forced_rows[forced_completes[forced_rows]]
        at = place[forced_piece[completes_word]]
        completing[completes_word, at] = allowed[completes_word, at]
        return allowed, completing, columns
