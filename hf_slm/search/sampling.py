"""Ancestral sampling of well-formed trees (or word sequences), for looking at what a model has learned.

A sample is drawn action by action from the model's full distribution (top-k sampling with k = the whole
vocabulary) among the actions the grammar's `legal_actions` allows under the search constraints: words are
whole (a continuation piece only after a piece), `<unk>` is never drawn, and a tree closes after at most
`max_words` words. It runs through the cached, batched decoder of word-synchronous beam search, so the
sampler, the search and validation share one source of legality.
"""

from ..modeling.generation_slm import BeamSearchOptions, WordSynchronousBeamSearch


def sample_trees(model, num_samples=3, max_words=20, temperature=1.0, word_start_mask=None, incomplete_word_ids=(),
                 seed=None):
    """Sample `num_samples` action-id sequences (`<s>` first) from a model, each a complete tree (or, for a
    words-only model, words then `</s>`) of 1 to `max_words` words. A Nb-Up model's `)` are drawn with their starts
    (log p(")") + log p(start | ")")); its samples are generation_slm.ActionIds, whose `starts` the tokenizer's
    `tree_with_words` reads.

    word_start_mask / incomplete_word_ids: as the tokenizer gives them (`tokenizer.word_start_mask`,
    `tokenizer.incomplete_word_ids`), so that words made of several pieces are told apart.
    """
    # No p_c: ancestral sampling follows the model; n_c stays the number of words (every NT spans a word).
    options = BeamSearchOptions(max_consecutive_open=None)
    search = WordSynchronousBeamSearch(model, options, word_start_mask=word_start_mask,
                                       incomplete_word_ids=incomplete_word_ids)
    samples = search.generate([[]], max_new_words=max_words, top_k=model.config.vocab_size, num_samples=num_samples,
                              seed=seed, temperature=temperature)
    return [ids for ids, _ in samples[0]]
