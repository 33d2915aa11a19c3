"""A proposal parser as the Scorer that silver trees and `hf-slm parse` ask for trees (hf_slm/search/scorers.py).

The silver-tree machinery (hf_slm/summarization/silver.py: sentence splitting, the cache, torchrun) parses with a
Scorer's `parse`; a proposal parser's is its best tree under q(y | x), exact (no search, so search options are
refused). A parser models trees given words, not words: it gives no p(x), generates nothing and scores no LM's
trees, and says so when asked.
"""

from ..search.beam import SentenceResults, sentence_words
from ..search.scorers import Scorer
from .parser import ProposalParser


class ProposalParserScorer(Scorer):
    """The Scorer of a proposal parser checkpoint (model, tokenizer): `parse` gives its best trees."""

    runs_search = False
    without_search = "a proposal parser's best tree is exact (CKY / Eisner over its CRF), with no search to tune"

    def __init__(self, model, tokenizer, **search_options):
        super().__init__(model, tokenizer, **search_options)
        self.parser = ProposalParser(model, tokenizer)

    @property
    def log_prob_estimate(self):
        raise ValueError(f"{self.describe()} models trees given words, q(y | x): it gives no p(x)")

    def tree_settings(self):
        return {"proposal_parser": self.parser.kind.name}

    def describe(self):
        return self.parser.describe()

    def check_sentences(self, sentences, sources=None, on_error="skip"):
        """(words, None, left_out): a sentence must have words (a parser reads any word: unknown ones by class)."""
        words, left_out = [], []
        for index, sentence in enumerate(sentences):
            name = sources[index] if sources is not None else f"sentence {index + 1}"
            words.append(sentence_words(sentence, name))
            if not words[-1]:
                error = f"{name} is empty; expected at least one word"
                if on_error == "raise":
                    raise ValueError(error)
                left_out.append({"index": index, "source": name, "words": [], "error": error})
        return words, None, left_out

    def parse(self, sentences, batch_size=None, progress=True, on_error="skip", sources=None):
        words, _, left_out = self.check_sentences(sentences, sources, on_error)
        skipped = {entry["index"] for entry in left_out}
        kept = [index for index in range(len(words)) if index not in skipped]
        # no bar of its own: a parser's chunk is one forward pass (the callers' bar counts the sentences)
        found = self.parser.best([words[index] for index in kept], batch_size=batch_size or 32)
        trees = [None] * len(words)
        for index, (tree, _) in zip(kept, found):
            trees[index] = tree
        return SentenceResults(trees, left_out)

    def score(self, sentences, bits=False, batch_size=None, progress=True, on_error="skip", sources=None):
        raise ValueError(f"{self.describe()} models trees given words, q(y | x): it scores no words (use a language "
                         "model, or hf-slm eval parse|uas --parser for its trees' quality)")

    def generate(self, prompt=None, num_trees=1, num_beams=None, top_k=None, max_new_words=20, seed=None,
                 progress=True):
        raise ValueError(f"{self.describe()} parses given words; it generates none")

    def evaluate_parses(self, gold, limit=None, batch_size=None, output_dir=None, overwrite=False, progress=True,
                        on_error="skip"):
        from .evaluation import parser_evaluation

        evaluation = "uas" if self.parser.kind.tree_kind == "dependency" else "parse"
        return parser_evaluation(self.parser, gold, evaluation, limit=limit, batch_size=batch_size or 32,
                                 output_dir=output_dir, overwrite=overwrite, progress=progress)
