"""Scoring, parsing and generation with word-synchronous beam search, from words to readable results.

The search itself is hub code (modeling/generation_slm.py): anyone who loads a checkpoint with
trust_remote_code gets it through `model.generate` and `model.word_synchronous_beam_search`. This module adds
the tokenizer side: words to pieces, batching with a progress bar, trees back to brackets.
"""

import math
import warnings

from tqdm.auto import tqdm

from .checks import check_tokenizer_matches
from .modeling.generation_slm import BeamSearchOptions, WordSynchronousBeamSearch
from .modeling.grammars import grammar_class


def sentence_words(sentence, index=0):
    """A sentence as a list of words: a string is split on whitespace."""
    words = sentence.split() if isinstance(sentence, str) else list(sentence)
    if not words:
        raise ValueError(f"sentence {index} is empty; expected at least one word")
    return words


def words_to_pieces(tokenizer, words, index=0):
    """Piece ids of each word; words the tokenizer cannot spell become <unk> pieces (warned once per call)."""
    pieces = [tokenizer(word, is_split_into_words=True, add_special_tokens=False)["input_ids"] for word in words]
    unknown = [w for w, p in zip(words, pieces) if tokenizer.unk_token_id in p]
    return pieces, unknown


def _check_sentence_list(value, name):
    """A lone string where a list of sentences is expected would be read character by character."""
    if isinstance(value, str):
        raise TypeError(f"{name} must be a list of sentences (strings or lists of words), got one string; "
                        f"wrap it in a list: [{value[:40]!r}]")


def _incomplete_word_ids(tokenizer):
    return getattr(tokenizer, "incomplete_word_ids", ())


def score(model, tokenizer, sentences, bits=False, batch_size=8, progress=True, num_trees=1, **beam_options):
    """Per-word surprisals, log p(x) (a lower bound: the final beam's mass) and the best tree per sentence.

    Returns one dict per sentence: {"words", "surprisals", "end_surprisal", "log_prob", "tree", "trees"}.
    Surprisals and log_prob are in nats, or bits with bits=True (log_prob then in log2); the surprisals plus
    end_surprisal add up to -log_prob. beam_options are BeamSearchOptions fields (beam_size,
    word_beam_size, fast_track, max_nonterminals, max_consecutive_open, ...).
    """
    check_tokenizer_matches(model.config, tokenizer)
    options = BeamSearchOptions(num_trees=num_trees, **beam_options).check()
    search = WordSynchronousBeamSearch(model, options, word_start_mask=tokenizer.word_start_mask,
                                       incomplete_word_ids=_incomplete_word_ids(tokenizer))
    all_words, encoded = _encode_sentences(tokenizer, sentences)
    unit = 1 / math.log(2) if bits else 1.0
    results = []
    starts = range(0, len(encoded), batch_size)
    for start in tqdm(starts, desc="beam search", unit="batch", disable=not progress):
        for offset, result in enumerate(search.search(encoded[start : start + batch_size])):
            results.append(_readable(tokenizer, all_words[start + offset], result, unit))
    return results


def _readable(tokenizer, words, result, unit, prefix_length=1):
    """A SentenceResult as a dict of words, numbers in `unit` and bracketed trees (the prefix left out)."""
    bos = [tokenizer.bos_token_id]
    trees = [tokenizer.decode(bos + list(ids[prefix_length:])) for ids, _ in result.trees]
    return {
        "words": words,
        "surprisals": [s * unit for s in result.surprisals],
        "end_surprisal": result.end_surprisal * unit,
        "log_prob": result.log_prob * unit,
        "tree": trees[0],
        "trees": [{"tree": t, "log_prob": lp * unit} for t, (_, lp) in zip(trees, result.trees)],
    }


def _encode_sentences(tokenizer, sentences):
    """(words, pieces) of every sentence, with one warning for all words spelled through <unk>."""
    _check_sentence_list(sentences, "sentences")
    all_words = [sentence_words(s, i) for i, s in enumerate(sentences)]
    encoded, unknown = [], set()
    for index, words in enumerate(all_words):
        pieces, missing = words_to_pieces(tokenizer, words, index)
        encoded.append(pieces)
        unknown.update(missing)
    if unknown:
        warnings.warn(f"{len(unknown)} word(s) contain characters the tokenizer cannot spell and go through <unk>: "
                      f"{sorted(unknown)[:10]}", stacklevel=3)
    return all_words, encoded


def score_documents(model, tokenizer, documents, bits=False, batch_size=8, progress=True, num_trees=1,
                    **beam_options):
    """Document-level scoring with greedy best-tree prefixes (paper 000, section 3.1).

    `documents` is a list of documents, each a list of sentences (strings or word lists). Sentence i of a
    document is searched after the best trees found for its sentences 1..i-1 (each the top of its own
    final beam), so its numbers are conditional on them: log_prob is an approximation of log p(x_i | x_<i),
    not a bound. It is the beam's mass of p(x_i | that one prefix tree), while log p(x_i | x_<i) averages
    over every tree of x_<i, which can make x_i more or less likely than the greedy trees do.
    Needs a document-level model (config.document_level). Returns per document a list of `score`-like
    dicts, one per sentence; "tree" is that sentence's tree alone. Sentence i of all documents is batched.
    """
    check_tokenizer_matches(model.config, tokenizer)
    _check_sentence_list(documents, "documents")
    for index, document in enumerate(documents):
        _check_sentence_list(document, f"document {index}")
    if not getattr(model.config, "document_level", False):
        raise ValueError("score_documents needs a document-level model (config.document_level=True); this model "
                         "reads one sentence per sequence: use score()")
    if grammar_class(model.config.grammar).words_only:
        raise ValueError("a terminals model has no trees to search: score its documents exactly with "
                         "hf_slm.joint_log_probs on tokenizer.encode_document(...) ids")
    options = BeamSearchOptions(num_trees=num_trees, **beam_options).check()
    search = WordSynchronousBeamSearch(model, options, word_start_mask=tokenizer.word_start_mask,
                                       incomplete_word_ids=_incomplete_word_ids(tokenizer))
    flat_words, flat_pieces = _encode_sentences(tokenizer, [s for document in documents for s in document])
    words, pieces, start = [], [], 0
    for index, document in enumerate(documents):
        if not document:
            raise ValueError(f"document {index} is empty; expected at least one sentence")
        words.append(flat_words[start : start + len(document)])
        pieces.append(flat_pieces[start : start + len(document)])
        start += len(document)
    unit = 1 / math.log(2) if bits else 1.0
    prefixes = [[tokenizer.bos_token_id] for _ in documents]
    results = [[] for _ in documents]
    with tqdm(total=start, desc="beam search (documents)", unit="sentence", disable=not progress) as bar:
        for position in range(max(len(d) for d in documents)):
            active = [k for k, document in enumerate(documents) if position < len(document)]
            for chunk_start in range(0, len(active), batch_size):
                chunk = active[chunk_start : chunk_start + batch_size]
                found = search.search([pieces[k][position] for k in chunk], prefixes=[prefixes[k] for k in chunk])
                for k, result in zip(chunk, found):
                    results[k].append(_readable(tokenizer, words[k][position], result, unit, len(prefixes[k])))
                    prefixes[k] = list(result.trees[0][0])
                bar.update(len(chunk))
    return results


def parse(model, tokenizer, sentences, **options):
    """The best tree of each sentence (word-synchronous beam search over the model's joint distribution)."""
    return [result["tree"] for result in score(model, tokenizer, sentences, **options)]


def generate_trees(model, tokenizer, prompt=None, num_trees=1, num_beams=None, top_k=None, max_new_words=20, seed=None,
                   **beam_options):
    """Bracketed trees that continue `prompt` (words; None for none), by beam search or top-k sampling."""
    inputs = None
    if prompt:
        inputs = tokenizer([sentence_words(prompt)], is_split_into_words=True, return_tensors="pt")["input_ids"]
    output = model.generate(
        inputs, tokenizer=tokenizer, num_beams=num_beams or max(num_trees, 1), do_sample=top_k is not None,
        top_k=top_k, num_return_sequences=num_trees, max_new_tokens=max_new_words, seed=seed,
        beam_options=beam_options or None,
    )
    return [tokenizer.decode(row) for row in output]


def gold_tree_coverage(tokenizer, trees, grammar="tg", **beam_options):
    """(fraction, indices): the fraction of `trees` (bracketed strings or trees) that forced-word beam search
    could find at all under the search constraints of `beam_options` (BeamSearchOptions fields: n_c, p_c...),
    and the indices of those it could not. Each gold tree is replayed action by action, with its own words
    forced, through the same SearchConstraints the search uses."""
    from .modeling.grammars import ActionKind, ActionLayout, get_grammar
    from .modeling.search_constraints import SearchConstraints

    options = BeamSearchOptions(**beam_options).check()
    rules = get_grammar(grammar, ActionLayout(**tokenizer.action_layout))
    constraints = SearchConstraints(rules, tokenizer.word_start_mask, _incomplete_word_ids(tokenizer),
                                    options.max_nonterminals, options.max_consecutive_open,
                                    options.max_structural_per_word, options.max_nonterminals_per_word)
    unreachable = []
    for index, tree in enumerate(trees):
        encoded = tokenizer(tree, return_word_starts=True)
        words = []  # the tree's words as piece ids: a new word at every word start
        for piece, starts in zip(encoded["input_ids"], encoded["word_starts"]):
            if rules.layout.kind(piece) == ActionKind.TERMINAL:
                if starts or not words:
                    words.append([piece])
                else:
                    words[-1].append(piece)
        if not constraints.reachable(encoded["input_ids"], words):
            unreachable.append(index)
    return 1 - len(unreachable) / max(len(trees), 1), unreachable
