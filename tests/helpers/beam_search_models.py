"""Tiny TG-style models over a four-word action vocabulary, every tree of a sentence (the exhaustive search that
word-synchronous beam search is checked against: test_beam_search, test_search_decoders), and a decoder whose numbers
do not depend on the batch (BigramDecoder)."""

import torch

from hf_slm.families import causal_lm_for_config, config_for_grammar
from hf_slm.families.action_vocab import ActionVocabulary
from hf_slm.modeling.grammars import ActionKind
from hf_slm.modeling.search_decoders import SearchDecoder

from helpers.family_sizes import tiny_sizes


# Words "a" and "c" are one piece each; "b" is two pieces, b1 b2.
VOCAB = ActionVocabulary(["a", "b1", "b2", "c"], ["S", "NP"])


SENTENCE = [[VOCAB.ids["a"]], [VOCAB.ids["b1"], VOCAB.ids["b2"]], [VOCAB.ids["c"]]]


def tiny_model(grammar, seed=0, vocab=VOCAB, **overrides):
    config = config_for_grammar(
        vocab_size=len(vocab.tokens), grammar=grammar, **vocab.layout.to_dict(), **tiny_sizes(grammar),
        # every word of an ActionVocabulary is one id (after the specials, before the nonterminals)
        word_start_ranges=[[vocab.layout.unk_token_id + 1, vocab.layout.open_nt_start]], **overrides,
    )
    torch.manual_seed(seed)
    return causal_lm_for_config(config).eval()


def all_trees(grammar, words, max_nonterminals):
    """Every complete action sequence over `words` with at most `max_nonterminals` opening NTs, the root
    closing last and no action between the pieces of a word: the space the exhaustive beam explores."""
    found = []

    def extend(ids, state, word, piece):
        if state.finished:
            if word == len(words):
                found.append(ids)
            return
        kinds = grammar.allowed_next_kinds(state)
        if piece == 0:
            if ActionKind.OPEN_NT in kinds and state.num_open_total < max_nonterminals and word < len(words):
                for label in range(VOCAB.layout.open_nt_start, VOCAB.layout.open_nt_stop):
                    child = state.clone()
                    grammar.step(child, label)
                    extend(ids + [label], child, word, 0)
            if ActionKind.CLOSE_NT in kinds and (len(state.open_ids) > 1 or word == len(words)):
                closing = VOCAB.layout.closing_id_for(state.open_ids[-1])
                child = state.clone()
                grammar.step(child, closing)
                extend(ids + [closing], child, word, 0)
        if ActionKind.TERMINAL in kinds and word < len(words):
            child = state.clone()
            grammar.step(child, words[word][piece])
            last = piece == len(words[word]) - 1
            extend(ids + [words[word][piece]], child, word + 1 if last else word, 0 if last else piece + 1)

    start = grammar.start()
    grammar.step(start, VOCAB.layout.bos_token_id)
    extend([VOCAB.layout.bos_token_id], start, 0, 0)
    return found


class BigramDecoder(SearchDecoder):
    """A search decoder whose log-probabilities of the next action are a fixed table's row of the last action [V, V],
    rounded to quarters (so that scores tie, exactly: sums of quarters are exact in float32 and float64). A row's
    numbers depend on its own last action only, never on the other rows of a call: a search of many sentences must
    find, bit for bit, what a search of each alone finds (a Transformer's numbers move in the last bits with the rows
    of its batch). Its state is the rows' last actions [H]."""

    def __init__(self, vocab_size, seed=0):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        table = torch.log_softmax(torch.randn(vocab_size, vocab_size, generator=generator), -1)
        self.table = (table * 4).round() / 4

    def _start(self, sequences, steps):
        last = torch.tensor([sequence[-1] for sequence in sequences])
        return last, self.table[last]

    def _advance(self, state, rows, actions, steps):
        return actions.clone(), self.table[actions]

    def select(self, state, rows):
        return state[rows]

    def concat(self, states):
        return torch.cat(states)
