"""Search constraints: what a decoder may pick among the actions the grammar allows.

The grammar's `legal_actions(state)` says which actions keep a sequence well formed; it is the only source
of legality. Decoding adds its own limits on top, the same for every family:
- forced words: while a sentence's words are given, the only terminal is the next piece of the next word,
  and inside a word (after its first piece) nothing else may come;
- word pieces in free generation: a continuation piece only right after a piece, and necessarily right
  after a bare word start (SentencePiece's lone "\u2581"); `<unk>` is never generated;
- n_c (`max_nonterminals`), p_c (`max_consecutive_open`) and `max_structural_per_word`;
- the tree (or the sequence) ends only after the last forced word, and after at least one free word.
It also says which actions complete a round of word-synchronous beam search (generate the next word, or
finish the sentence once its words are there).

Hub code: imports only numpy, torch and its sibling files.
"""

import math
from dataclasses import dataclass

import numpy as np
import torch

from .grammars import ActionKind

# In free generation a word ends after this many pieces at the latest (a runaway word cannot stall a beam).
MAX_PIECES_PER_WORD = 16


@dataclass
class DecodingStatus:
    """Where one hypothesis stands, as the constraints need it (the beam search keeps these counters)."""

    state: object  # the grammar's incremental state
    last_action: int
    forced_words: list  # the sentence's given words, each a list of piece ids
    free_words: int  # how many words may follow the forced ones (0: forced words only)
    word: int = 0  # words generated so far in this sentence
    piece: int = 0  # pieces of the current word generated so far (0: between words)
    structural: int = 0  # structural actions since the last word
    consecutive_open: int = 0  # opening actions in a row
    open_before: int = 0  # opening NTs before this sentence (a document's earlier sentences)


class SearchConstraints:
    """Decoding limits over a grammar's legal actions (see the module docstring).

    word_start_mask: for every id, whether it begins a word (tokenizer.word_start_mask); None: every
        terminal piece is a word.
    incomplete_word_ids: pieces that start a word but spell none of it.
    """

    def __init__(self, grammar, word_start_mask=None, incomplete_word_ids=(), max_nonterminals=None,
                 max_consecutive_open=None, max_structural_per_word=None, max_nonterminals_per_word=1.0):
        self.grammar = grammar
        layout = grammar.layout
        kinds = grammar._kinds
        size = grammar.vocab_size
        self.open_mask = torch.from_numpy(kinds == ActionKind.OPEN_NT)
        self.close_mask = torch.from_numpy(kinds == ActionKind.CLOSE_NT)
        self.eos_mask = torch.from_numpy(kinds == ActionKind.EOS)
        self.terminal_mask = torch.from_numpy(kinds == ActionKind.TERMINAL)
        starts = torch.ones(size, dtype=torch.bool)
        if word_start_mask is not None:
            starts = torch.zeros(size, dtype=torch.bool)
            given = torch.tensor(list(word_start_mask), dtype=torch.bool)[:size]
            starts[: len(given)] = given
        generable = self.terminal_mask.clone()
        if layout.unk_token_id is not None:
            generable[layout.unk_token_id] = False
        self.start_mask = generable & starts
        self.continuation_mask = generable & ~starts
        self.incomplete_ids = {int(i) for i in incomplete_word_ids}
        self.is_terminal = kinds == ActionKind.TERMINAL
        self.max_nonterminals = max_nonterminals
        self.max_consecutive_open = max_consecutive_open
        self.max_structural_per_word = max_structural_per_word
        self.max_nonterminals_per_word = max_nonterminals_per_word

    def counters_after(self, action, forced_words, word, piece, structural, consecutive_open):
        """(word, piece, structural, consecutive_open) after `action`: the one place these counters advance.
        A forced word ends with its last piece; a free word starts with a word-start piece."""
        if self.is_terminal[action]:
            if word < len(forced_words):
                done = piece == len(forced_words[word]) - 1
                word, piece = (word + 1, 0) if done else (word, piece + 1)
            elif self.start_mask[action]:
                word, piece = word + 1, 1
            else:
                piece += 1
            return word, piece, 0, 0
        return word, piece, structural + 1, consecutive_open + 1 if self.open_mask[action] else 0

    def reachable(self, sequence, words):
        """Whether the action sequence `sequence` (`<s>` first, a whole tree over the given `words`, each a
        list of piece ids) stays inside these constraints at every step: whether forced-word beam search
        can find it at all."""
        state = self.grammar.start()
        self.grammar.step(state, sequence[0])
        status = DecodingStatus(state, sequence[0], words, 0, open_before=state.num_open_total)
        for action in sequence[1:]:
            if not bool(self.allowed([status])[0][0, action]):
                return False
            self.grammar.step(state, action)
            status.word, status.piece, status.structural, status.consecutive_open = self.counters_after(
                action, words, status.word, status.piece, status.structural, status.consecutive_open)
            status.last_action = action
        return status.word == len(words) and self.grammar.is_complete(state)

    def allowed(self, statuses):
        """([H, V] bool allowed actions, [H, V] bool actions that complete the round) for H hypotheses."""
        count = len(statuses)
        legal = torch.from_numpy(np.stack([self.grammar.legal_actions(s.state) for s in statuses]))
        flags = {name: torch.zeros(count, dtype=torch.bool) for name in (
            "open", "close", "eos", "forced", "forced_completes", "start", "continuation", "free",
            "close_completes", "eos_completes")}
        forced_piece = torch.zeros(count, dtype=torch.long)
        for i, s in enumerate(statuses):
            in_forced = s.word < len(s.forced_words)
            new_words = s.word - len(s.forced_words)
            inside_word = in_forced and s.piece > 0
            bare_start = not in_forced and s.last_action in self.incomplete_ids
            may_start_word = in_forced or new_words < s.free_words
            words_done = not in_forced and (new_words > 0 or s.free_words == 0)
            if not inside_word and not bare_start and may_start_word:
                words = len(s.forced_words) + s.free_words
                limit = self.max_nonterminals or max(1, math.ceil(self.max_nonterminals_per_word * words))
                ok = s.state.num_open_total - s.open_before < limit
                if self.max_consecutive_open is not None:
                    ok &= s.consecutive_open < self.max_consecutive_open
                if self.max_structural_per_word is not None:
                    ok &= s.structural < self.max_structural_per_word
                flags["open"][i] = ok
            if not inside_word and not bare_start:
                closes_root = len(s.state.open_ids) == 1
                structural_ok = (self.max_structural_per_word is None or words_done
                                 or s.structural < self.max_structural_per_word)
                # the root closes only after the last forced word (and a first new word, if any)
                flags["close"][i] = structural_ok and (words_done or not closes_root)
                flags["close_completes"][i] = closes_root and not s.free_words
                flags["eos"][i] = words_done
                flags["eos_completes"][i] = not s.free_words
            if in_forced:
                flags["forced"][i] = True
                forced_piece[i] = s.forced_words[s.word][s.piece]
                flags["forced_completes"][i] = s.piece == len(s.forced_words[s.word]) - 1
            elif s.free_words:
                flags["free"][i] = True
                flags["start"][i] = may_start_word and not bare_start
                # Only a new word continues (s.piece counts its pieces); a forced word is complete.
                last_is_piece = self.is_terminal[s.last_action]
                flags["continuation"][i] = bool(last_is_piece) and 0 < s.piece < MAX_PIECES_PER_WORD
        forced = torch.zeros_like(legal)
        forced[torch.arange(count), forced_piece] = True
        forced &= flags["forced"][:, None]
        terminals = forced | (flags["start"][:, None] & self.start_mask) | (flags["continuation"][:, None] & self.continuation_mask)
        permitted = (flags["open"][:, None] & self.open_mask) | (flags["close"][:, None] & self.close_mask)
        permitted |= (flags["eos"][:, None] & self.eos_mask) | terminals
        allowed = legal & permitted
        completing = (forced & flags["forced_completes"][:, None]) | (terminals & flags["free"][:, None])
        completing |= (flags["close_completes"][:, None] & self.close_mask) | (flags["eos_completes"][:, None] & self.eos_mask)
        return allowed, completing & allowed
