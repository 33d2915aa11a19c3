"""The scorer interface: what the commands (`hf-slm score | parse | generate`) and the evaluation drivers
(perplexity, SyntaxGym, BLiMP, parsing) ask of a model, whatever its family.

A Scorer wraps a model and its tokenizer and answers, per sentence (a list of words or a string):
- `score`: the surprisal of each word, of the end, log p(x) and (where the model has them) the best trees;
- `log_probs`: log p(x) alone (natural log), `surprisals`: the word surprisals alone (bits by default);
- `parse`: the model's tree of each sentence; `generate`: sentences (or trees) that continue a prompt.
`log_prob_estimate` says what kind of number log p(x) is: "exact", or "lower bound" (a beam's mass);
`recorded_options` is what an evaluation records of how the numbers were computed (its journal compares them,
so a resumed run goes on with the numbers it started with).

Every sentence passes the same check before it is scored (hf_slm.search.beam.check_sentences: empty, a word without
pieces, too long for the model). With on_error="skip" such a sentence is left out: its place in the results holds
None (or, for `score`, a dict {"index", "source", "words", "error"}) and `.left_out` names it; "raise" raises
ValueError naming the first one before anything is scored.

Each family's record names its Scorer class (Family.scorer): the word-synchronous beam search of
hf_slm/search/search_scorer.py for the families with grammars (exact for words-only grammars), or the family's own
(SOM: hf_slm/families/ordered_memory/scorer.py, exact from its logits, parses by its own incremental parser).
`scorer_for(model, tokenizer, **search_options)` builds the one a model's family names.
"""

from abc import ABC, abstractmethod

from ..families import family_for_config


class Scorer(ABC):
    """Scores, parses and generates for one model and its tokenizer (module docstring).

    runs_search: whether the scorer runs a search that `search_options` tune; a scorer without one refuses
        them (ValueError naming them), and `without_search` says why in a user's words.
    scores_trees: whether `joint_log_probs` scores given action sequences (proposal trees, reranking).
    """

    runs_search = True
    without_search = ""
    scores_trees = False

    def __init__(self, model, tokenizer, **search_options):
        if search_options and not self.runs_search:
            raise ValueError(f"search options {sorted(search_options)} were given, but {self.without_search}")
        self.model, self.tokenizer = model, tokenizer
        self.search_options = dict(search_options)

    # ---- what the numbers are -------------------------------------------------------------------------------

    @property
    @abstractmethod
    def log_prob_estimate(self):
        """"exact" when log p(x) is exact, "lower bound" when it is a lower bound (a beam's mass)."""

    @property
    def log_prob_description(self):
        """How log p(x) is computed, in a few words (BLiMP records it as "log_prob")."""
        return self.log_prob_estimate

    @property
    def recorded_options(self):
        """What an evaluation records of how the numbers were computed (default: the search options)."""
        return dict(self.search_options)

    def tree_settings(self):
        """What a tree of `parse` depends on besides the model and the tokenizer (hf_slm/summarization/silver.py's cache
        header)."""
        return dict(self.search_options)

    # ---- sentences ------------------------------------------------------------------------------------------

    def check_sentences(self, sentences, sources=None, on_error="skip"):
        """(words, pieces, left_out) of hf_slm.search.beam.check_sentences: the check every sentence passes first."""
        from .beam import check_sentences

        return check_sentences(self.model, self.tokenizer, sentences, sources, on_error)

    @abstractmethod
    def score(self, sentences, bits=False, batch_size=None, progress=True, on_error="skip", sources=None):
        """A SentenceResults (hf_slm.search.beam) of one dict per sentence: "words", "surprisals" (one per word),
        "end_surprisal", "log_prob" (nats, or bits with bits=True; the surprisals and end_surprisal add up to
        -log_prob) and what else the model gives ("tree" and "trees" for a search, "exact" for an exact
        scorer). A left-out sentence's place holds {"index", "source", "words", "error"}."""

    def log_probs(self, sentences, batch_size=None, progress=True, on_error="skip", sources=None):
        """A SentenceResults of log p(x) per sentence (natural log), None for a left-out one."""
        results = self.score(sentences, batch_size=batch_size, progress=progress, on_error=on_error,
                             sources=sources)
        return _results_of(results, "log_prob")

    def surprisals(self, sentences, bits=True, batch_size=None, progress=True, on_error="skip", sources=None):
        """A SentenceResults of the word surprisals of each sentence (bits by default, as SyntaxGym reads
        them), None for a left-out one."""
        results = self.score(sentences, bits=bits, batch_size=batch_size, progress=progress, on_error=on_error,
                             sources=sources)
        return _results_of(results, "surprisals")

    @abstractmethod
    def parse(self, sentences, batch_size=None, progress=True, on_error="skip", sources=None):
        """A SentenceResults of one tree string per sentence (its leaves the given words), None for a
        left-out one."""

    @abstractmethod
    def generate(self, prompt=None, num_trees=1, num_beams=None, top_k=None, max_new_words=20, seed=None,
                 progress=True):
        """Strings (trees, or sentences for a model of words) that continue `prompt` (words, or None): beam
        search with `num_beams` (default num_trees), or sampling among the top `top_k` (0: among all).
        `progress`: a bar over the generation's steps (hf_slm.search.progress)."""

    @abstractmethod
    def evaluate_parses(self, gold, limit=None, batch_size=None, output_dir=None, overwrite=False, progress=True,
                        on_error="skip"):
        """`hf-slm eval parse`: the model's parses of the sentences of `gold` (a file) scored against its trees,
        by the measure the model's trees call for (EVALB's bracketing F1 for labelled trees; SOM: UF1), written
        into output_dir as every evaluation's results (evaluation.results). Returns the metrics, with "files"."""

    # ---- what only some scorers do --------------------------------------------------------------------------

    def joint_log_probs(self, sequences, batch_size=32, progress=False):
        """log p(x, y) of each action-id sequence (`<s>` first): proposal trees, reranking."""
        raise ValueError(f"{self.describe()} does not score given trees (proposal trees, reranking)")

    def score_documents(self, documents, batch_size=None, progress=True, on_error="skip", sources=None):
        """Per document, `score`-like dicts of its sentences, each scored after the ones before it."""
        raise ValueError(f"{self.describe()} does not score documents")

    def document_log_probs(self, documents, batch_size=32, progress=False):
        """Exact log p of each sentence of each document (lists of word lists), after the ones before it."""
        raise ValueError(f"{self.describe()} does not score documents exactly")

    def describe(self):
        """"a <model> model's <scorer>", for messages."""
        return f"a {family_for_config(self.model.config).variant_of(self.model.config).display_name} model's " \
               f"{type(self).__name__}"


def _results_of(results, key):
    from .beam import SentenceResults

    return SentenceResults([None if "error" in result else result[key] for result in results], results.left_out)


def scorer_class_for(model):
    """The Scorer class the family of `model` names (Family.scorer); a proposal parser's, whose trees it parses with
    (hf_slm/parsers/scorer.py), for a parser of no family."""
    from ..parsers.kinds import is_parser_config, kind_of_config

    if is_parser_config(model.config):
        return kind_of_config(model.config).resolved("scorer_class")
    return family_for_config(model.config).scorer


def scorer_for(model, tokenizer, **search_options):
    """The Scorer of `model` (its family's, Family.scorer) with `search_options` (BeamSearchOptions fields for a
    search; a scorer without one refuses them)."""
    return scorer_class_for(model)(model, tokenizer, **search_options)


def scorer_of(model, tokenizer, scorer=None, **search_options):
    """`scorer` when given (then without search options: they belong to the scorer), else `scorer_for`: what the
    evaluation drivers call with their `scorer` argument."""
    if scorer is None:
        return scorer_for(model, tokenizer, **search_options)
    if search_options:
        raise ValueError(f"search options {sorted(search_options)} were given with a scorer, which has its own "
                         f"({scorer.search_options}); expected one or the other")
    return scorer


__all__ = ["Scorer", "scorer_class_for", "scorer_for", "scorer_of"]
