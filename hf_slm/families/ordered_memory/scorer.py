"""The Scorer of Syntactic Ordered Memory (hf_slm/search/scorers.py; the family's record names it).

SOM scores words straight from its logits (hf_slm/families/ordered_memory/evaluation.py), so every log p(x) is exact,
and parses with its own incremental parser (the argmax decisions of p_t); it runs no search, so the options of
word-synchronous beam search are refused (ValueError naming them). Generation is transformers' own `model.generate` over
the model's tokens, words printed. Its parses are evaluated by UF1 against gold dependency trees (Table 2's setting)
or PTB constituency trees (Table 8's): `evaluate_parses`, hf_slm.families.ordered_memory.evaluation.run_som_parse_eval.
"""

import math

from ...option_types import or_default
from ...search.beam import SentenceResults, warn_left_out
from ...search.progress import TokenProgress, progress_bar
from ...search.scorers import Scorer
from .evaluation import run_som_parse_eval, som_parses, som_sentence_scores, som_surprisals

# What a results file records as the way SOM's surprisals were computed (no search of any kind).
EXACT_SURPRISALS = "exact, from the logits (no beam search)"
# Sentences per forward call when the caller does not say.
BATCH_SIZE = 32


class SyntacticOrderedMemoryScorer(Scorer):
    """Exact scores from a SOM model's logits; parses by its incremental parser (module docstring)."""

    runs_search = False
    without_search = ("a Syntactic Ordered Memory model does not run (it scores words from its logits and parses "
                      "with its own incremental parser)")
    log_prob_estimate = "exact"

    @property
    def recorded_options(self):
        return {"surprisals": EXACT_SURPRISALS}

    def tree_settings(self):
        return {"parser": "incremental: the argmax decisions of p_t"}

    def _kept(self, sentences, sources, on_error):
        """(words of every sentence, indices of those that can be scored, the left-out ones)."""
        words, _, left_out = self.check_sentences(sentences, sources, on_error)
        skipped = {entry["index"] for entry in left_out}
        return words, [index for index in range(len(words)) if index not in skipped], left_out

    def _per_sentence(self, sentences, sources, on_error, compute, entries=False):
        """compute(kept word lists) -> one value per kept sentence, placed among the left-out ones (whose places
        hold None, or with `entries` their {"index", "source", "words", "error"})."""
        words, kept, left_out = self._kept(sentences, sources, on_error)
        values = compute([words[index] for index in kept]) if kept else []
        results = [None] * len(words)
        for index, value in zip(kept, values):
            results[index] = value
        if entries:
            for entry in left_out:
                results[entry["index"]] = entry
        warn_left_out(left_out, len(words))
        return SentenceResults(results, left_out)

    def score(self, sentences, bits=False, batch_size=None, progress=True, on_error="skip", sources=None):
        scale = 1 / math.log(2) if bits else 1.0

        def compute(kept):
            return [{"words": words, "surprisals": [-value * scale for value in found["word_log_probs"]],
                     "end_surprisal": -found["eos_log_prob"] * scale, "log_prob": found["log_prob"] * scale,
                     "exact": True}
                    for words, found in zip(kept, som_sentence_scores(self.model, self.tokenizer, kept,
                                                                      batch_size=or_default(batch_size, BATCH_SIZE)))]

        return self._per_sentence(sentences, sources, on_error, compute, entries=True)

    def log_probs(self, sentences, batch_size=None, progress=True, on_error="skip", sources=None):
        return self._per_sentence(sentences, sources, on_error, lambda kept: [
            found["log_prob"] for found in som_sentence_scores(self.model, self.tokenizer, kept,
                                                               batch_size=or_default(batch_size, BATCH_SIZE),
                                                               eos=True)])

    def surprisals(self, sentences, bits=True, batch_size=None, progress=True, on_error="skip", sources=None):
        return self._per_sentence(sentences, sources, on_error, lambda kept: som_surprisals(
            self.model, self.tokenizer, kept, bits=bits, batch_size=or_default(batch_size, BATCH_SIZE)))

    def parse(self, sentences, batch_size=None, progress=True, on_error="skip", sources=None):
        return self._per_sentence(sentences, sources, on_error, lambda kept: som_parses(
            self.model, self.tokenizer, kept, batch_size=or_default(batch_size, BATCH_SIZE)))

    def generate(self, prompt=None, num_trees=1, num_beams=None, top_k=None, max_new_words=20, seed=None,
                 progress=True):
        """Sentences (the prompt's words, then the new ones) by transformers' model.generate: beam search with
        `num_beams` (default num_trees; greedy for one), sampling among the top k with `top_k` (0: among all)."""
        import torch
        from transformers import StoppingCriteriaList

        if num_trees < 1 or max_new_words < 1:
            raise ValueError(f"--num-trees {num_trees} and --max-new-words {max_new_words}: expected positive "
                             "numbers")
        tokenizer = self.tokenizer
        prompt = prompt.split() if isinstance(prompt, str) else list(prompt or [])
        ids = tokenizer(prompt, is_split_into_words=True)["input_ids"] if prompt else [tokenizer.bos_token_id]
        if seed is not None:
            torch.manual_seed(seed)
        options = {"max_new_tokens": max_new_words * _pieces_per_word_bound(tokenizer),
                   "num_return_sequences": num_trees, "pad_token_id": tokenizer.pad_token_id,
                   "eos_token_id": tokenizer.eos_token_id}
        if top_k is not None:
            options.update(do_sample=True, top_k=top_k, num_beams=1)
        else:
            num_beams = num_beams if num_beams is not None else num_trees
            if num_beams < num_trees:
                raise ValueError(f"--num-beams {num_beams} is smaller than --num-trees {num_trees}; expected at "
                                 "least as many beams as sentences to return")
            options.update(do_sample=False, num_beams=num_beams)
        self.model.eval()
        with torch.no_grad(), progress_bar(options["max_new_tokens"], "generating", "token", progress) as bar:
            output = self.model.generate(torch.tensor([ids], device=next(self.model.parameters()).device),
                                         stopping_criteria=StoppingCriteriaList([TokenProgress(bar)]), **options)
        return [" ".join(_words(tokenizer, row[1:])[:len(prompt) + max_new_words]) for row in output.tolist()]

    def evaluate_parses(self, gold, limit=None, batch_size=None, output_dir=None, overwrite=False, progress=True,
                        on_error="skip"):
        """UF1, p and p' accuracy of the incremental parses against the dependency trees of a CoNLL-U file, or
        Table 8's UF1 against the trees of a PTB file (hf_slm.families.ordered_memory.evaluation.run_som_parse_eval;
        every gold sentence has words, so none is left out)."""
        return run_som_parse_eval(self.model, self.tokenizer, gold, limit=limit,
                                  batch_size=or_default(batch_size, BATCH_SIZE),
                                  output_dir=output_dir, overwrite=overwrite, progress=progress)


def _pieces_per_word_bound(tokenizer):
    """How many tokens --max-new-words words may take: one for a word vocabulary; for pieces, the longest
    piece sequence a word can have is not known, so up to 4 per word are generated and the words are cut after."""
    from ...tokenization.tokenization_slm import SyntacticWordTokenizer

    return 1 if isinstance(tokenizer, SyntacticWordTokenizer) else 4


def _words(tokenizer, ids):
    """The words of generated ids, up to `</s>` (pieces joined by the tokenizer's decoding)."""
    if tokenizer.eos_token_id in ids:
        ids = ids[:ids.index(tokenizer.eos_token_id)]
    ids = [i for i in ids if i != tokenizer.pad_token_id]
    return tokenizer.decode(ids, skip_special_tokens=True).split()


__all__ = ["EXACT_SURPRISALS", "SyntacticOrderedMemoryScorer"]
