"""Paper 003's Nb-Up search keeps a word's pieces together: a `)` takes its start from the grammar's legal starts
C_k, and where a grammar keeps a word's pieces siblings (Nb) the search lets a constituent start at a word's
first piece only (SearchConstraints.feasible_starts), or the tree would split the word and read back as no tree
over the given words. Before, an untrained model's pointer could choose a start inside a word."""

import pytest
import torch

import hf_slm
from hf_slm.tokenization.trees import parse_tree

from helpers.compositional_models import tiny


@pytest.mark.parametrize("grammar", ["nb-up-in-m", "nb-up-ex-nm"])
def test_every_tree_of_an_nb_up_beam_is_a_tree_over_the_given_words(grammar, one_thread):
    model, tokenizer = tiny(grammar, vocab_size=30)
    sentences = [["the", "dog", "barks"], ["Write", "an", "essay", "quickly"], ["the", "blue", "bird", "sings", "."]]
    pieces = [len(tokenizer(words, is_split_into_words=True, add_special_tokens=False)["input_ids"]) for words in
              sentences]
    assert any(count > len(words) for count, words in zip(pieces, sentences))  # some word of several pieces
    checked = 0
    for seed in range(3):  # a few random pointers
        torch.manual_seed(seed)
        for parameter in model.parameters():
            parameter.data.normal_(0, 0.5)
        for result, words in zip(hf_slm.score(model, tokenizer, sentences, beam_size=20, word_beam_size=5,
                                              progress=False), sentences):
            for tree in result["trees"]:
                assert parse_tree(tree["tree"].replace("( ", "(X ")).leaves() == words, tree["tree"]
                checked += 1
    assert checked >= 9
