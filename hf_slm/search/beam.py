"""Scoring, parsing and generation with word-synchronous beam search, from words to readable results.

The search itself is hub code (modeling/generation_slm.py): anyone who loads a checkpoint with
trust_remote_code gets it through `model.generate` and `model.word_synchronous_beam_search`. This module adds
the tokenizer side: words to pieces, batching with a progress bar, trees back to brackets.
"""

import math
import numbers
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import StoppingCriteriaList

from ..data.numbering import item_name, sentence_name
from ..checkpoints.checks import check_tokenizer_matches
from ..modeling.configuration_slm import position_limit
from ..modeling.generation_slm import BeamSearchOptions, WordSynchronousBeamSearch
from ..modeling.grammars import ActionKind, ActionLayout, grammar_for_config
from ..option_types import or_default
from ..tokenization.linearizers import tree_from_top_down
from ..tokenization.trees import check_word_separators, escape_word, tree_to_string
from .progress import TokenProgress, progress_bar

# What `score`, `parse`, `score_documents` and the evaluations do with a sentence that cannot be scored.
ON_ERROR = ("skip", "raise")


class SentencesLeftOut(UserWarning):
    """Sentences that cannot be scored were left out (on_error="skip"); the others' results are complete."""


class UnknownWords(UserWarning):
    """Words the tokenizer spells through `<unk>` or an unknown-word class (characters it cannot spell, or words
    outside a word vocabulary): they are scored, as that unknown token. The command line says it as a note (hf_slm/cli/errors.py)."""

    label = "note"


class SentenceResults(list):
    """Per-sentence results in input order, plus `left_out`: one dict {"index", "source", "words", "error"}
    per sentence that could not be scored, in order. A left-out sentence's place in the list holds that dict
    (`score`) or None (`parse`, the evaluations' log-probabilities)."""

    def __init__(self, results=(), left_out=()):
        super().__init__(results)
        self.left_out = list(left_out)


def sentence_words(sentence, where="sentence"):
    """A sentence as a list of words: a string is split on ASCII whitespace (an empty sentence gives []; other
    whitespace is refused, as every reader refuses it: tokenization/trees.py's `check_word_separators`), a list or
    tuple of strings taken as it is. Anything else is a TypeError naming `where` and what was given: every
    sentence a scorer reads comes through here (`check_sentences`), so the Python API checks it as the CLI's
    readers do."""
    if isinstance(sentence, str):
        return check_word_separators(sentence, where).split()
    if not isinstance(sentence, (list, tuple)):
        raise TypeError(f"{where} is {_shown(sentence)}; expected a string of words or a list of word strings")
    for position, word in enumerate(sentence):
        if not isinstance(word, str):
            raise TypeError(f"{where}, {item_name('word', position)} is {_shown(word)}; expected a string")
    return list(sentence)


def _shown(value):
    """A value in an error message: None, or its type and (cut) repr."""
    text = repr(value)
    return text if value is None else f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def words_to_pieces(tokenizer, words, index=0):
    """(piece ids of each word, the words the model does not see as themselves): words the tokenizer cannot spell
    become <unk> pieces, and a word vocabulary's unseen words their unknown-word class (`<UNK-LC-s>` for `students`:
    SyntacticWordTokenizer); the check warns of them once per call."""
    pieces = [tokenizer(word, is_split_into_words=True, add_special_tokens=False)["input_ids"] for word in words]
    unknown = [w for w, p in zip(words, pieces) if tokenizer.unk_token_id in p or _is_word_class(tokenizer, w, p)]
    return pieces, unknown


def _is_word_class(tokenizer, word, pieces):
    """Whether `word` is read as one of a word vocabulary's unknown-word classes (`<UNK...>`), not as itself."""
    if len(pieces) != 1:
        return False
    token = tokenizer.convert_ids_to_tokens(pieces[0])
    return token != word and token.startswith("<UNK") and token.endswith(">")


def _check_sentence_list(value, name):
    """A lone string where a list of sentences is expected would be read character by character."""
    if isinstance(value, str):
        raise TypeError(f"{name} must be a list of sentences (strings or lists of words), got one string; "
                        f"wrap it in a list: [{value[:40]!r}]")


def check_batch_size(batch_size):
    """The API's check of what --batch-size's type (hf_slm/option_types.py) checks on the command line."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")


def _incomplete_word_ids(tokenizer):
    return getattr(tokenizer, "incomplete_word_ids", ())


# ---- the sentence check: every sentence passes it before any search --------------------------------------


def _name(index, sources):
    return sources[index] if sources is not None else sentence_name(index)


def check_sentences(model, tokenizer, sentences, sources=None, on_error="skip"):
    """The check every sentence passes before any search: `score`, `parse`, `score_documents` and the
    evaluations (hf_slm.evaluation) all come here. A sentence cannot be scored when it is empty, when a word
    of it has no pieces, or when even its shortest derivation (`<s>`, its pieces and the fewest positions the
    grammar needs around them, `grammar.minimum_positions`) is longer than the model's maximum (`position_limit`;
    none for a model without one).

    sources: per sentence, how messages name it (e.g. "data.txt:4"); default "sentence i".
    on_error: "skip" leaves such sentences out; "raise" raises ValueError naming the first one.
    Returns (words, pieces, left_out): per sentence its words and each word's piece ids, and one dict
    {"index", "source", "words", "error"} per sentence left out, in order. Words the tokenizer spells through
    `<unk>` are warned about once.
    """
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
    if sources is not None and len(sources) != len(sentences):
        raise ValueError(f"got {len(sources)} sources for {len(sentences)} sentences; expected one per sentence")
    limit, limit_field = position_limit(model.config)
    # Only a model with a position limit has sentences too long for it; its grammar says how long the shortest
    # tree is (a model without one, e.g. a recurrent one, needs no grammar here).
    grammar = grammar_for_config(model.config) if limit is not None else None
    all_words, encoded, left_out, unknown = [], [], [], set()
    for index, sentence in enumerate(sentences):
        words = sentence_words(sentence, _name(index, sources))
        pieces, missing = words_to_pieces(tokenizer, words, index)
        unknown.update(missing)
        name, count = _name(index, sources), sum(len(p) for p in pieces)
        empty = [k for k, p in enumerate(pieces) if not p]
        problem = None
        if not words:
            problem = f"{name} is empty; expected at least one word"
        elif empty:
            problem = (f"{name}: word {empty[0]} ({words[empty[0]]!r}) is empty after tokenization; expected "
                       "at least one piece")
        elif limit is not None and grammar.minimum_positions(count, len(words)) > limit:
            needed = grammar.minimum_positions(count, len(words))
            problem = (f"{name} is too long for the model: its shortest tree takes {needed} positions "
                       f"({len(words)} words in {count} pieces, <s> and {needed - 1 - count} for the structure), more "
                       f"than the model's maximum of {limit} (config.{limit_field})")
        if problem is not None:
            if on_error == "raise":
                raise ValueError(f"{problem}; stopped before any search (without stopping, such sentences are "
                                 "left out and reported)")
            left_out.append({"index": index, "source": name, "words": words, "error": problem})
        all_words.append(words)
        encoded.append(pieces)
    if unknown:
        warnings.warn(f"{len(unknown)} word(s) go through <unk> or an unknown-word class (characters the tokenizer "
                      "cannot spell, or words outside a word vocabulary): "
                      f"{sorted(unknown)[:10]}", UnknownWords, stacklevel=3)
    return all_words, encoded, left_out


def describe_left_out(left_out, total, noun="sentences"):
    """One line: how many of `total` were left out, and each one with why (the first 10)."""
    shown = "; ".join(entry["error"] for entry in left_out[:10])
    more = f"; and {len(left_out) - 10} more" if len(left_out) > 10 else ""
    return (f"left out {len(left_out)} of {total} {noun} that cannot be scored (the others' results are complete): "
            f"{shown}{more}")


def warn_left_out(left_out, total):
    """One SentencesLeftOut warning naming the sentences left out, if any."""
    if left_out:
        warnings.warn(describe_left_out(left_out, total), SentencesLeftOut, stacklevel=3)


def _search_each(search, pieces, prefixes=None):
    """`search.search` on a batch; if the batch fails (a hypothesis outgrew the model's positions), each
    sentence alone, so that one sentence's failure costs only its own result. Returns per sentence a
    SentenceResult or the ValueError its search raised."""
    try:
        return search.search(pieces, prefixes=prefixes)
    except ValueError as error:
        if len(pieces) == 1:
            return [error]
    return [_search_each(search, [p], None if prefixes is None else [prefixes[i]])[0] for i, p in enumerate(pieces)]


def _search_failed(index, name, words, error, on_error):
    problem = f"{name}: the search failed: {error}"
    if on_error == "raise":
        raise ValueError(problem) from error
    return {"index": index, "source": name, "words": words, "error": problem}


# ---- the API -----------------------------------------------------------------------------------------------


def score(model, tokenizer, sentences, bits=False, batch_size=8, progress=True, num_trees=1, on_error="skip",
          sources=None, **beam_options):
    """Per-word surprisals, log p(x) (a lower bound: the final beam's mass) and the best tree per sentence.

    Returns a SentenceResults: one dict per sentence, {"words", "surprisals", "end_surprisal", "log_prob",
    "tree", "trees"}. Surprisals and log_prob are in nats, or bits with bits=True (log_prob then in log2); the
    surprisals plus end_surprisal add up to -log_prob. Trees carry the given words as leaves, brackets escaped
    (`(` -> `-LRB-`, `)` -> `-RRB-`). beam_options are BeamSearchOptions fields (beam_size, word_beam_size,
    fast_track, max_nonterminals, max_consecutive_open, ...).

    on_error: a sentence that cannot be scored (`check_sentences`: empty, a word without pieces, too long for
        the model even as its shortest tree) is, with "skip" (the default), left out: its place holds
        {"index", "source", "words", "error"}, `.left_out` lists it, and one SentencesLeftOut warning names
        every such sentence; with "raise", ValueError before any search. A batch whose search fails is
        searched again sentence by sentence, so that only the failing sentence is left out (or raises).
    sources: per sentence, how messages name it (e.g. "data.txt:4"); default "sentence i".
    """
    check_tokenizer_matches(model.config, tokenizer)
    _check_sentence_list(sentences, "sentences")
    check_batch_size(batch_size)
    options = BeamSearchOptions(num_trees=num_trees, **beam_options).check()
    all_words, encoded, left_out = check_sentences(model, tokenizer, sentences, sources, on_error)
    unit = 1 / math.log(2) if bits else 1.0
    skipped = {entry["index"] for entry in left_out}
    kept = [index for index in range(len(all_words)) if index not in skipped]
    results = [None] * len(all_words)
    # a step per word of each sentence and one to end it (a batch that fails is searched again sentence by sentence)
    with progress_bar(sum(len(all_words[index]) + 1 for index in kept), "beam search", "step", progress) as bar:
        search = WordSynchronousBeamSearch(model, options, word_start_mask=tokenizer.word_start_mask,
                                           incomplete_word_ids=_incomplete_word_ids(tokenizer), on_word=bar.update)
        for start in range(0, len(kept), batch_size):
            batch = kept[start : start + batch_size]
            for index, result in zip(batch, _search_each(search, [encoded[i] for i in batch])):
                if isinstance(result, ValueError):
                    left_out.append(_search_failed(index, _name(index, sources), all_words[index], result, on_error))
                else:
                    results[index] = _readable(tokenizer, all_words[index], encoded[index], result, unit)
    left_out.sort(key=lambda entry: entry["index"])
    for entry in left_out:
        results[entry["index"]] = entry
    warn_left_out(left_out, len(all_words))
    return SentenceResults(results, left_out)


def bracketed_tree(tokenizer, ids, words=(), pieces=()):
    """The bracketed tree of action ids `ids` whose first leaves are `words`: word i of a forced-word search is
    the given word i (`pieces[i]` its piece ids), whatever the tokenizer made of it (`<unk>` pieces
    included). Leaves after them (free generation) are spelled from their pieces. Brackets in words are
    escaped (trees.escape_word). `<s>`, `</s>` and padding are left out; ids that are not one tree give their
    actions joined by spaces, as tokenizer.decode does."""
    ids = [int(i) for i in ids]
    kinds = ActionLayout(**tokenizer.action_layout).kinds(np.array(ids, dtype=np.int64))
    starts_word = tokenizer.word_start_mask
    actions, position, word = [], 0, 0
    while position < len(ids):
        kind = kinds[position]
        if kind == ActionKind.TERMINAL:
            if word < len(words):  # a given word: its pieces follow each other
                end, text = position + len(pieces[word]), words[word]
                word += 1
            else:
                end = position + 1
                while end < len(ids) and kinds[end] == ActionKind.TERMINAL and not starts_word[ids[end]]:
                    end += 1
                text = "".join(tokenizer.decode_actions(ids[position:end]))
            actions.append(escape_word(text))
            position = end
        else:
            if kind in (ActionKind.OPEN_NT, ActionKind.CLOSE_NT):
                actions.append(tokenizer.convert_ids_to_tokens(ids[position]))
            position += 1
    if not any(kind in (ActionKind.OPEN_NT, ActionKind.CLOSE_NT) for kind in kinds):  # words only
        return " ".join(actions)
    try:
        return tree_to_string(tree_from_top_down(actions))
    except ValueError:
        return " ".join(actions)


def tree_string(tokenizer, ids, words=(), pieces=(), starts=None):
    """The tree of action ids with the given words as its first words: a dependency tokenizer writes its own
    (inline `There/2 is/0 ...`), a constituency one gets `bracketed_tree`. `starts`: a Nb-Up tree's constituent
    starts (indices into `ids`; by default those the ids carry, generation_slm.ActionIds)."""
    if tokenizer.tree_with_words is not None:  # the tokenizer hook (tokenization_slm.SyntacticTokenizerBase)
        starts = getattr(ids, "starts", None) if starts is None else starts
        if starts is not None:
            return tokenizer.tree_with_words([int(i) for i in ids], words, starts=list(starts))
        return tokenizer.tree_with_words([int(i) for i in ids], words)
    return bracketed_tree(tokenizer, ids, words, pieces)


def _without_prefix(ids, prefix_length):
    """(ids, starts) after the first `prefix_length` actions; a Nb-Up tree's starts (ActionIds) shift with them."""
    starts = getattr(ids, "starts", None)
    if starts is None:
        return ids[prefix_length:], None
    return ids[prefix_length:], [s - prefix_length if s >= 0 else -1 for s in starts[prefix_length:]]


def _readable(tokenizer, words, pieces, result, unit, prefix_length=1):
    """A SentenceResult as a dict of words, numbers in `unit` and trees (the prefix left out)."""
    trees = [tree_string(tokenizer, *_with_pieces(_without_prefix(ids, prefix_length), words, pieces))
             for ids, _ in result.trees]
    return {
        "words": words,
        "surprisals": [s * unit for s in result.surprisals],
        "end_surprisal": result.end_surprisal * unit,
        "log_prob": result.log_prob * unit,
        "tree": trees[0],
        "trees": [{"tree": t, "log_prob": lp * unit} for t, (_, lp) in zip(trees, result.trees)],
    }


def _with_pieces(ids_and_starts, words, pieces):
    ids, starts = ids_and_starts
    return ids, words, pieces, starts


def _sequence_positions(grammar, ids):
    """How many positions the grammar expands action ids (`<s>` first; a Nb-Up prefix's ActionIds with their
    starts) to."""
    state = grammar.start()
    starts = getattr(ids, "starts", None)
    if starts is None:
        return sum(len(grammar.step(state, action, check=False)) for action in ids)
    return sum(len(grammar.step(state, action, check=False, start=start)) for action, start in zip(ids, starts))


def score_documents(model, tokenizer, documents, bits=False, batch_size=8, progress=True, num_trees=1,
                    on_error="skip", sources=None, **beam_options):
    """Document-level scoring with greedy best-tree prefixes (paper 000, section 3.1).

    `documents` is a list of documents, each a list of sentences (strings or word lists). Sentence i of a
    document is searched after the best trees found for its sentences 1..i-1 (each the top of its own
    final beam), so its numbers are conditional on them: log_prob is an approximation of log p(x_i | x_<i),
    not a bound. It is the beam's mass of p(x_i | that one prefix tree), while log p(x_i | x_<i) averages
    over every tree of x_<i, which can make x_i more or less likely than the greedy trees do.
    Needs a document-level model (config.document_level). Returns per document a list of `score`-like
    dicts, one per sentence; "tree" is that sentence's tree alone. Sentence i of all documents is batched.

    on_error, sources: as in `score` (sources: per document, per sentence; default "document d, sentence i").
    Since a sentence is searched after the trees of the ones before it, the rest of a document is left out
    with a sentence that is, and with the sentence whose shortest tree no longer fits after its document's
    prefix. A left-out sentence's place holds {"document", "index", "source", "words", "error"} ("index"
    counts sentences over all documents); the returned SentenceResults (one list per document) has them all
    in `.left_out`.
    """
    grammar = _check_documents(model, tokenizer, documents, batch_size)
    options = BeamSearchOptions(num_trees=num_trees, **beam_options).check()
    search = WordSynchronousBeamSearch(model, options, word_start_mask=tokenizer.word_start_mask,
                                       incomplete_word_ids=_incomplete_word_ids(tokenizer))
    names = _document_names(documents, sources)
    # check_sentences and warn_left_out are called here, not in a helper: their warnings (stacklevel=3) name the line
    # that called score_documents
    words, pieces, left_out = check_sentences(
        model, tokenizer, [sentence for document in documents for sentence in document], names, on_error)
    sentences = _DocumentSentences(documents, grammar, names, words, pieces, left_out, on_error,
                                   *position_limit(model.config))
    if on_error == "raise" and sentences.limit is not None:
        _check_shortest_trees_fit(sentences)
    unit = 1 / math.log(2) if bits else 1.0
    _search_sentence_by_sentence(search, tokenizer, sentences, batch_size, unit, progress)
    _put_left_out_in_place(sentences)
    warn_left_out(sentences.left_out, sentences.total)
    return SentenceResults(sentences.results, sentences.left_out)


def _check_documents(model, tokenizer, documents, batch_size):
    """score_documents' checks of its arguments, before any work; returns the model's grammar."""
    check_tokenizer_matches(model.config, tokenizer)
    _check_sentence_list(documents, "documents")
    check_batch_size(batch_size)
    for index, document in enumerate(documents):
        _check_sentence_list(document, f"document {index}")
        if not document:
            raise ValueError(f"document {index} is empty; expected at least one sentence")
    if not getattr(model.config, "document_level", False):
        raise ValueError("score_documents needs a document-level model (config.document_level=True); this model "
                         "reads one sentence per sequence: use score()")
    grammar = grammar_for_config(model.config)
    if grammar.words_only:
        raise ValueError("a words-only model has no trees to search: score its documents exactly with "
                         "hf_slm.joint_log_probs on tokenizer.encode_document(...) ids")
    return grammar


def _document_names(documents, sources):
    """How messages name each sentence, over all documents: per document per sentence `sources`, checked, or
    "document d, sentence i"."""
    if sources is None:
        sources = [[f"{item_name('document', d)}, {sentence_name(i)}" for i in range(len(document))]
                   for d, document in enumerate(documents)]
    if [len(names) for names in sources] != [len(document) for document in documents]:
        raise ValueError("sources must hold one name per sentence of each document")
    return [name for names in sources for name in names]


@dataclass
class _DocumentSentences:
    """score_documents' sentences, numbered over all documents (sentence i of document k is number offsets[k] + i),
    and what has become of them: each document's prefix (`<s>` and the best trees of its sentences so far), the
    results found, the sentences left out and the documents stopped at one of them."""

    documents: list
    grammar: object  # the model's (grammar_for_config)
    names: list  # per sentence (over all documents)
    words: list
    pieces: list
    left_out: list  # {"index", "source", "words", "error"}, as check_sentences and _search_failed give them
    on_error: str
    limit: int | None  # the model's position limit (position_limit) and the config field that sets it
    limit_field: str | None
    offsets: np.ndarray = field(init=False)
    prefixes: list = field(init=False)  # per document: action ids, `<s>` (DTG: `<root>`) then its sentences' best trees
    results: list = field(init=False)  # per document, per sentence
    stopped: dict = field(init=False)  # document -> its first left-out sentence's name: nothing after it is searched
    checked_out: set = field(init=False)  # the sentences check_sentences left out

    def __post_init__(self):
        self.offsets = np.cumsum([0] + [len(document) for document in self.documents])
        self.prefixes = [[self.grammar.start_action_id] for _ in self.documents]
        self.results = [[None] * len(document) for document in self.documents]
        self.stopped = {}
        self.checked_out = {entry["index"] for entry in self.left_out}

    @property
    def total(self):
        return int(self.offsets[-1])

    def index(self, document, position):
        """The number of sentence `position` of `document` over all documents."""
        return int(self.offsets[document]) + position

    def leave_out(self, index, problem):
        """Leave sentence `index` out (on_error "skip"), or stop there ("raise")."""
        if self.on_error == "raise":
            raise ValueError(f"{problem}; stopped (without stopping, such sentences are left out and reported)")
        self.left_out.append({"index": index, "source": self.names[index], "words": self.words[index],
                              "error": problem})


def _check_shortest_trees_fit(sentences):
    """With on_error "raise": stop before any search if even the shortest trees of a document's sentences, one after
    the other, overflow the model's positions."""
    for k, document in enumerate(sentences.documents):
        pieces = [sentences.pieces[sentences.index(k, i)] for i in range(len(document))]  # their `<s>` is shared
        needed = 1 + np.cumsum([sentences.grammar.minimum_positions(sum(map(len, p)), len(p)) - 1 for p in pieces])
        if needed[-1] > sentences.limit:
            index = sentences.index(k, int(np.argmax(needed > sentences.limit)))
            sentences.leave_out(index, f"{sentences.names[index]} does not fit after its document's earlier sentences: "
                                f"even their shortest trees and its own end at position "
                                f"{needed[index - int(sentences.offsets[k])]}, past the model's maximum of "
                                f"{sentences.limit} (config.{sentences.limit_field})")


def _search_sentence_by_sentence(search, tokenizer, sentences, batch_size, unit, progress):
    """Search sentence 1 of every document, then sentence 2, and so on, each after its document's prefix, in batches
    of `batch_size` documents; a progress bar counts sentences."""
    documents = sentences.documents
    with tqdm(total=sentences.total, desc="beam search (documents)", unit="sentence", disable=not progress) as bar:
        for position in range(max(len(d) for d in documents)):
            ready = _documents_to_search(sentences, position)
            for start in range(0, len(ready), batch_size):
                _search_after_prefixes(search, tokenizer, sentences, ready[start : start + batch_size], position, unit)
            bar.update(sum(1 for document in documents if position < len(document)))


def _documents_to_search(sentences, position):
    """The documents whose sentence `position` is searched now: those that have one, not stopped at an earlier
    sentence (whose later sentences are left out), whose sentence was not left out by the check and still fits after
    the document's prefix (else the document stops there)."""
    ready = []
    for k, document in enumerate(sentences.documents):
        if position >= len(document):
            continue
        index = sentences.index(k, position)
        if k in sentences.stopped:
            if index not in sentences.checked_out:
                sentences.leave_out(index, f"{sentences.names[index]} is left out: it comes after "
                                    f"{sentences.stopped[k]}, which was left out, and each sentence is scored after "
                                    "the trees of those before it")
        elif index in sentences.checked_out:
            sentences.stopped[k] = sentences.names[index]
        elif _fits_after_prefix(sentences, k, index):
            ready.append(k)
    return ready


def _fits_after_prefix(sentences, document, index):
    """Whether sentence `index`'s shortest tree fits after its document's prefix; if not, it is left out and its
    document stopped."""
    pieces = sentences.pieces[index]  # after the prefix, the sentence takes its shortest tree less `<s>`
    grammar = sentences.grammar
    needed = _sequence_positions(grammar, sentences.prefixes[document]) + grammar.minimum_positions(
        sum(map(len, pieces)), len(pieces)) - 1
    if sentences.limit is None or needed <= sentences.limit:
        return True
    sentences.leave_out(index, f"{sentences.names[index]} does not fit after the trees of its document's earlier "
                        f"sentences: its shortest tree would end at position {needed}, past the model's maximum "
                        f"of {sentences.limit} (config.{sentences.limit_field})")
    sentences.stopped[document] = sentences.names[index]
    return False


def _search_after_prefixes(search, tokenizer, sentences, chunk, position, unit):
    """Search sentence `position` of each document of `chunk` (one batch) after its document's prefix; keep each
    result and extend the prefix by its best tree, or leave the sentence out and stop its document."""
    indices = [sentences.index(k, position) for k in chunk]
    found = _search_each(search, [sentences.pieces[i] for i in indices],
                         prefixes=[sentences.prefixes[k] for k in chunk])
    for k, index, result in zip(chunk, indices, found):
        if isinstance(result, ValueError):
            sentences.left_out.append(_search_failed(index, sentences.names[index], sentences.words[index], result,
                                                     sentences.on_error))
            sentences.stopped[k] = sentences.names[index]
            continue
        sentences.results[k][position] = _readable(tokenizer, sentences.words[index], sentences.pieces[index], result,
                                                   unit, len(sentences.prefixes[k]))
        sentences.prefixes[k] = result.trees[0][0]  # (a Nb-Up tree's ActionIds keep their starts)


def _put_left_out_in_place(sentences):
    """Sort the left-out sentences by number and put each, told of its document, in its place of the results."""
    sentences.left_out.sort(key=lambda entry: entry["index"])
    for entry in sentences.left_out:
        k = int(np.searchsorted(sentences.offsets, entry["index"], side="right")) - 1
        entry["document"] = k
        sentences.results[k][entry["index"] - int(sentences.offsets[k])] = entry


def parse(model, tokenizer, sentences, **options):
    """The best tree of each sentence (word-synchronous beam search over the model's joint distribution), its
    leaves the given words (brackets escaped: `(` -> `-LRB-`, `)` -> `-RRB-`). Options as in `score`
    (on_error, sources, beam options): a left-out sentence's tree is None, and `.left_out` names it."""
    results = score(model, tokenizer, sentences, **options)
    return SentenceResults([None if "error" in result else result["tree"] for result in results], results.left_out)


def generate_trees(model, tokenizer, prompt=None, num_trees=1, num_beams=None, top_k=None, max_new_words=20, seed=None,
                   progress=True, **beam_options):
    """Bracketed trees that continue `prompt` (words; None for none), by beam search or top-k sampling. The
    prompt's words are the first leaves of every tree, as given (brackets escaped). `progress`: a bar over the
    new words (hf_slm.search.progress: it shows after a few seconds)."""
    inputs, words, pieces = None, [], []
    if prompt:
        words, pieces, _ = check_sentences(model, tokenizer, [prompt], ["the prompt"], on_error="raise")
        words, pieces = words[0], pieces[0]
        inputs = tokenizer([words], is_split_into_words=True, return_tensors="pt")["input_ids"]
    grammar = grammar_for_config(model.config)
    words_only = grammar.words_only  # transformers' own generate: a step a token
    # transformers' steps (a token each) are at most max_new_words; the search's are not bounded by the words (after
    # its last word a hypothesis may take further steps to close its constituents), so its bar counts without a total
    with progress_bar(max_new_words if words_only else None, "generating", "step", progress) as bar:
        seeded = {"seed": seed, "on_word": bar.update}
        if words_only:  # transformers' own generate takes no seed: seeded here
            seeded = {"stopping_criteria": StoppingCriteriaList([TokenProgress(bar)])}
            if seed is not None:
                torch.manual_seed(seed)
        output = model.generate(
            inputs, tokenizer=tokenizer, do_sample=top_k is not None,
            # sampling draws each tree on its own: a beam is beam search's only
            num_beams=1 if top_k is not None else or_default(num_beams, max(num_trees, 1)),
            top_k=top_k, num_return_sequences=num_trees, max_new_tokens=max_new_words,
            beam_options=beam_options or None, **seeded,
        )
    # a grammar whose action comes with a start (Nb-Up): syntactic_generate's output holds them under its start_input
    starts = getattr(output, grammar.start_input) if grammar.takes_start else None
    return [tree_string(tokenizer, row.tolist(), words, pieces, None if starts is None else starts[index].tolist())
            for index, row in enumerate(output)]


def gold_tree_coverage(tokenizer, trees, grammar=None, **beam_options):
    """(fraction, indices): the fraction of `trees` (bracketed strings or trees) that forced-word beam search
    could find at all under the search constraints of `beam_options` (BeamSearchOptions fields: n_c, p_c...),
    and the indices of those it could not. Each gold tree is replayed action by action, with its own words
    forced, through the same SearchConstraints the search uses. grammar: the grammar that reads the tokenizer's
    sequences (default: the first registered one of its linearization)."""
    from ..families import grammar_class
    from ..families.tree_formats import grammars_of_linearization
    from ..modeling.grammars import ActionKind
    from ..modeling.search_constraints import SearchConstraints

    options = BeamSearchOptions(**beam_options).check()
    if grammar is None:
        readers = grammars_of_linearization(tokenizer.linearization)
        if not readers:
            raise ValueError(f"no registered grammar reads the tokenizer's {tokenizer.linearization!r} sequences")
        grammar = readers[0]
    rules_class = grammar_class(grammar)
    rules = rules_class(rules_class.layout_class(**tokenizer.action_layout))
    constraints = SearchConstraints(rules, tokenizer.word_start_mask, _incomplete_word_ids(tokenizer),
                                    options.max_nonterminals, options.max_consecutive_open,
                                    options.max_structural_per_word, options.max_nonterminals_per_word)
    sequences, words, starts = [], [], []
    for tree in trees:
        encoded = tokenizer(tree, return_word_starts=True)
        pieces = []  # the tree's words as piece ids: a new word at every word start
        for piece, starts_word in zip(encoded["input_ids"], encoded["word_starts"]):
            if rules.layout.kind(piece) == ActionKind.TERMINAL:
                if starts_word or not pieces:
                    pieces.append([piece])
                else:
                    pieces[-1].append(piece)
        sequences.append(encoded["input_ids"])
        words.append(pieces)
        starts.append(encoded[rules_class.start_input] if rules_class.takes_start else None)
    found = constraints.reachable_all(sequences, words, starts if all(s is not None for s in starts) else None)
    unreachable = [index for index, reached in enumerate(found) if not reached]
    return 1 - len(unreachable) / max(len(trees), 1), unreachable
