"""The Scorer of the families with grammars (hf_slm/search/scorers.py): word-synchronous beam search
(hf_slm/search/beam.py).

A grammar model gives p(x, y). Forced words, the search's final beam gives the word surprisals, a lower bound
on log p(x) (its mass) and the best trees. A words-only grammar (TXL (terminals), GPT2-token) has one derivation
per sentence, so its log p(x) is exact: `log_probs` reads it from one forward call over `<s> pieces </s>` (the
joint log-probability, as the terminals linearization encodes a tree's words), not from a search.
"""

import dataclasses

from ..data.numbering import sentence_name
from ..option_types import or_default
from .beam import (
    SentenceResults,
    check_sentences,
    generate_trees,
    parse,
    score,
    score_documents,
    sentence_words,
    warn_left_out,
)
from ..modeling.generation_slm import BeamSearchOptions
from ..modeling.grammars import grammar_for_config
from .scorers import Scorer
from .scoring import action_log_probs, joint_log_probs

# Beam options that change how fast a tree is found, not which (left out of `tree_settings`).
SPEED_ONLY_BEAM_OPTIONS = ("use_cache",)
# What `score`, `parse` and the surprisals batch when the caller does not say (hf_slm.search.beam's default).
SEARCH_BATCH_SIZE = 8
# What the exact log-probabilities of a words-only model batch when the caller does not say.
FORWARD_BATCH_SIZE = 32


class BeamSearchScorer(Scorer):
    """Scores, parses and generates by word-synchronous beam search; `search_options` are BeamSearchOptions
    fields (beam_size, word_beam_size, fast_track, max_nonterminals, ...)."""

    runs_search = True
    scores_trees = True

    def __init__(self, model, tokenizer, **search_options):
        super().__init__(model, tokenizer, **search_options)
        self.words_only = grammar_for_config(model.config).words_only

    @property
    def log_prob_estimate(self):
        return "exact" if self.words_only else "lower bound"

    @property
    def log_prob_description(self):
        return "exact" if self.words_only else "beam (lower bound on p(x))"

    def tree_settings(self):
        options = dataclasses.asdict(BeamSearchOptions(**self.search_options).check())
        return {key: value for key, value in options.items() if key not in SPEED_ONLY_BEAM_OPTIONS}

    def score(self, sentences, bits=False, batch_size=None, progress=True, on_error="skip", sources=None):
        return score(self.model, self.tokenizer, sentences, bits=bits,
                     batch_size=or_default(batch_size, SEARCH_BATCH_SIZE),
                     progress=progress, on_error=on_error, sources=sources, **self.search_options)

    def log_probs(self, sentences, batch_size=None, progress=True, on_error="skip", sources=None):
        """log p(x) per sentence, shortest sentences batched together: exact for a words-only grammar (the
        search options are then unused), else the final beam's mass."""
        sentences = [sentence_words(sentence) for sentence in sentences]
        sources = list(sources) if sources is not None else [sentence_name(i) for i in range(len(sentences))]
        if self.words_only:
            _, _, left_out = check_sentences(self.model, self.tokenizer, sentences, sources, on_error)
            skipped = {entry["index"] for entry in left_out}
            kept = [i for i in range(len(sentences)) if i not in skipped]
            scores = joint_in_length_order(self.model, terminal_sequences(self.tokenizer, [sentences[i] for i in kept]),
                                           or_default(batch_size, FORWARD_BATCH_SIZE), progress)
            log_probs = [None] * len(sentences)
            for index, value in zip(kept, scores):
                log_probs[index] = value
            warn_left_out(left_out, len(sentences))
            return SentenceResults(log_probs, left_out)
        order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
        results = self.score([sentences[i] for i in order], batch_size=or_default(batch_size, FORWARD_BATCH_SIZE),
                             progress=progress, on_error=on_error, sources=[sources[i] for i in order])
        log_probs = [None] * len(sentences)
        for position, index in enumerate(order):
            log_probs[index] = results[position].get("log_prob")
        left_out = sorted((dict(entry, index=order[entry["index"]]) for entry in results.left_out),
                          key=lambda entry: entry["index"])
        return SentenceResults(log_probs, left_out)

    def parse(self, sentences, batch_size=None, progress=True, on_error="skip", sources=None):
        return parse(self.model, self.tokenizer, sentences, batch_size=or_default(batch_size, SEARCH_BATCH_SIZE),
                     progress=progress, on_error=on_error, sources=sources, **self.search_options)

    def generate(self, prompt=None, num_trees=1, num_beams=None, top_k=None, max_new_words=20, seed=None,
                 progress=True):
        return generate_trees(self.model, self.tokenizer, prompt, num_trees=num_trees, num_beams=num_beams,
                              top_k=top_k, max_new_words=max_new_words, seed=seed, progress=progress,
                              **self.search_options)

    def evaluate_parses(self, gold, limit=None, batch_size=None, output_dir=None, overwrite=False, progress=True,
                        on_error="skip"):
        """EVALB's bracketing F1 of the beam search's best trees against labelled gold trees
        (hf_slm.evaluation.parsing.parse_eval)."""
        from ..evaluation.parsing import parse_eval

        return parse_eval(self.model, self.tokenizer, gold, limit=limit,
                          batch_size=or_default(batch_size, SEARCH_BATCH_SIZE),
                          output_dir=output_dir, overwrite=overwrite, progress=progress, on_error=on_error,
                          scorer=self)

    def joint_log_probs(self, sequences, batch_size=32, progress=False):
        return joint_log_probs(self.model, sequences, batch_size=batch_size, progress=progress)

    def score_documents(self, documents, batch_size=None, progress=True, on_error="skip", sources=None):
        return score_documents(self.model, self.tokenizer, documents,
                               batch_size=or_default(batch_size, SEARCH_BATCH_SIZE),
                               progress=progress, on_error=on_error, sources=sources, **self.search_options)

    def document_log_probs(self, documents, batch_size=32, progress=False):
        if not self.words_only:
            raise ValueError(f"{self.describe()} scores documents by search (score_documents), not exactly")
        return document_terminal_log_probs(self.model, self.tokenizer, documents, batch_size, progress)


def terminal_sequences(tokenizer, sentences):
    """`<s> pieces </s>` ids of each sentence, as the terminals linearization encodes a tree's words."""
    encoded = tokenizer(list(sentences), is_split_into_words=True)["input_ids"]
    return [list(ids) + [tokenizer.eos_token_id] for ids in encoded]


def joint_in_length_order(model, sequences, batch_size, progress):
    """joint_log_probs of every sequence (ids, or a mapping of input_ids and a grammar's action inputs), batched by
    length (less padding), returned in input order."""
    if not sequences:
        return []

    def length(sequence):
        return len(sequence["input_ids"] if isinstance(sequence, dict) else sequence)

    order = sorted(range(len(sequences)), key=lambda i: length(sequences[i]))
    scores = joint_log_probs(model, [sequences[i] for i in order], batch_size=batch_size, progress=progress)
    result = [0.0] * len(sequences)
    for position, index in enumerate(order):
        result[index] = scores[position]
    return result


def document_terminal_log_probs(model, tokenizer, documents, batch_size=32, progress=True):
    """Exact per-sentence log-probabilities of a document-level terminals model: the log p(piece | before) of
    each sentence's pieces in `<s> document </s>`, the `</s>` counted in the document's last sentence."""
    sequences = [tokenizer.encode_document([list(s) for s in document])["input_ids"] for document in documents]
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
    arrays = action_log_probs(model, [sequences[i] for i in order], batch_size=batch_size, progress=progress)
    per_document = [None] * len(sequences)
    for position, index in enumerate(order):
        values, start, sentences = arrays[position], 0, []
        for sentence in documents[index]:
            count = len(tokenizer(list(sentence), is_split_into_words=True, add_special_tokens=False)["input_ids"])
            sentences.append(float(values[start : start + count].sum()))
            start += count
        sentences[-1] += float(values[start:].sum())  # </s>
        per_document[index] = sentences
    return per_document


__all__ = ["BeamSearchScorer", "document_terminal_log_probs", "joint_in_length_order", "terminal_sequences"]
