"""Evaluating Syntactic Ordered Memory: exact perplexity, surprisals for SyntaxGym and BLiMP, incremental parses.

SOM gives p(x_{t+1} | x_<=t) directly from its logits: its parse is a soft latent structure inside the model,
so no beam search is run and log p(x) = sum_t log p(x_t | x_<t) is exact (not a bound).

- `som_token_log_probs` / `som_sentence_scores`: per sentence, the log-probability of each word (the sum over its
  pieces) and of `</s>`, natural logs.
- `som_perplexity(model, tokenizer, sentences)`: exp(-sum log p(x) / N), N counting the words and one `</s>`
  per sentence (a words-only LM's convention, paper 000 footnote 3), plus the number over the words alone.
- `som_syntaxgym(model, tokenizer, suites)` and `som_blimp(model, tokenizer, data_dir)`: the repository's own
  SyntaxGym and BLiMP scorers (evaluation.syntaxgym.evaluate_suites, evaluation.blimp.run_blimp) fed with SOM's
  exact surprisals / log-probabilities.
- `som_parse_eval(model, tokenizer, examples)`: Table 2's metrics on gold trees Gamma (dependency trees turned
  into binary constituency trees, tokenization/som_trees.py): unlabeled F1 of the greedy incremental parses
  (the argmax decisions of p_t), p accuracy and p' accuracy against Algorithm 1's labels. Brackets that count:
  every constituent of two or more words except the whole sentence, punctuation kept (Gamma has it), as sets of
  (first word, last word) spans, micro-averaged over the corpus as EVALB does; leaves, the whole-sentence span
  and the spans that contain `<s>` or `</s>` are left out.
"""

import math

import torch

from .modeling.som_structure import parse_spans
from .som_data import SyntacticOrderedMemoryCollator, gold_tree, som_example
from .tokenization.som_trees import constituent_spans


def _device(model):
    return next(model.parameters()).device


@torch.no_grad()
def som_sentence_scores(model, tokenizer, sentences, batch_size=32, eos=True):
    """For each sentence (a list of words): {"word_log_probs": [log p(word_i | earlier)], "eos_log_prob": log p(</s>
    | sentence) or None without eos, "log_prob": their sum}, natural logs."""
    model.eval()
    results = []
    for start in range(0, len(sentences), batch_size):
        chunk = [list(words) for words in sentences[start:start + batch_size]]
        for index, words in enumerate(chunk):
            if not words:
                raise ValueError(f"sentence {start + index} is empty; expected at least one word")
        encoded = tokenizer(chunk, is_split_into_words=True, return_word_starts=True)
        sequences = [list(ids) + ([tokenizer.eos_token_id] if eos else []) for ids in encoded["input_ids"]]
        batch = SyntacticOrderedMemoryCollator(pad_token_id=tokenizer.pad_token_id)(
            [{"input_ids": ids} for ids in sequences])
        device = _device(model)
        logits = model(input_ids=batch["input_ids"].to(device),
                       attention_mask=batch["attention_mask"].to(device)).logits.float()
        picked = torch.log_softmax(logits[:, :-1], -1).gather(-1, batch["input_ids"][:, 1:, None].to(device))[..., 0]
        for row, (ids, starts) in enumerate(zip(sequences, encoded["word_starts"])):
            values = picked[row, :len(ids) - 1].cpu().tolist()  # token t + 1 for t = 0.., i.e. after <s>
            words, eos_log_prob = [], None
            for position, value in enumerate(values, start=1):
                if position < len(starts) and starts[position]:
                    words.append(value)
                elif position < len(starts):
                    words[-1] += value  # a later piece of the same word
                else:
                    eos_log_prob = value
            results.append({"word_log_probs": words, "eos_log_prob": eos_log_prob,
                            "log_prob": math.fsum(words) + (eos_log_prob or 0.0)})
    return results


def som_surprisals(model, tokenizer, sentences, bits=True, batch_size=32):
    """Per sentence, the surprisal of each word (bits by default, as SyntaxGym), from the logits directly."""
    scale = 1 / math.log(2) if bits else 1.0
    scores = som_sentence_scores(model, tokenizer, sentences, batch_size=batch_size, eos=False)
    return [[-value * scale for value in score["word_log_probs"]] for score in scores]


def som_perplexity(model, tokenizer, sentences, batch_size=32):
    """Exact word-level perplexity of `sentences` (lists of words); see the module docstring."""
    scores = som_sentence_scores(model, tokenizer, sentences, batch_size=batch_size, eos=True)
    total = math.fsum(score["log_prob"] for score in scores)
    words = sum(len(score["word_log_probs"]) for score in scores)
    words_only = math.fsum(math.fsum(score["word_log_probs"]) for score in scores)
    return {
        "perplexity": math.exp(-total / (words + len(scores))),
        "perplexity_words_only_count": math.exp(-words_only / words),
        "log_prob_total": total, "log_prob_units": "nats", "words": words, "sentences": len(scores),
        "method": "exact", "estimate": "exact", "is_upper_bound": False, "eos_counted": True,
        "summary": (f"perplexity {math.exp(-total / (words + len(scores))):.2f} (exact: SOM's soft parser marginalizes "
                    f"its structure; {words} words + {len(scores)} </s>)"),
    }


def som_syntaxgym(model, tokenizer, suites, limit=None, rule="first", batch_size=32):
    """SyntaxGym metrics (evaluation.syntaxgym.evaluate_suites) with SOM's exact surprisals in bits."""
    from .evaluation.syntaxgym import evaluate_suites

    return evaluate_suites(lambda sentences: som_surprisals(model, tokenizer, sentences, batch_size=batch_size),
                           suites, limit=limit, rule=rule)


def som_blimp(model, tokenizer, data_dir, limit=None, batch_size=32, word_splitting="ptb"):
    """BLiMP accuracy (evaluation.blimp.run_blimp) with SOM's exact log p(x), `</s>` included."""
    from .evaluation.blimp import run_blimp

    def scorer(sentences):
        return [score["log_prob"] for score in som_sentence_scores(model, tokenizer, sentences, batch_size=batch_size)]

    metrics = run_blimp(None, None, data_dir, limit=limit, batch_size=batch_size, progress=False, scorer=scorer,
                        word_splitting=word_splitting)
    metrics["log_prob"] = "exact"
    metrics["summary"] = metrics["summary"].replace("p(x): custom scorer", "p(x): exact")
    return metrics


def word_spans(spans, length):
    """The brackets UF1 counts (module docstring), in word positions 1..length of a token sequence with `<s>`
    first: spans of two or more words inside the sentence, the whole sentence left out."""
    return {span for span in spans if 1 <= span[0] < span[1] <= length and span != (1, length)}


@torch.no_grad()
def som_parse_eval(model, tokenizer, examples, tree="dependency", batch_size=32):
    """UF1 of SOM's incremental parses against Gamma, p accuracy and p' accuracy (Table 2's metrics).

    examples: dicts with "words" and "heads" (CoNLL-U rows, e.g. hf_slm.data.conllu_loader's). The input ends
    with `</s>`, so its decision closes the sentence and counts towards p accuracy. Returns {"uf1", "precision",
    "recall", "p_accuracy", "next_p_accuracy", "sentences", "brackets": "..."}.
    """
    model.eval()
    matched = predicted_count = gold_count = 0
    p_right = p_total = q_right = q_total = 0
    num_slots = model.config.num_slots
    for start in range(0, len(examples), batch_size):
        chunk = examples[start:start + batch_size]
        features = [som_example(tokenizer, example["words"], example.get("heads"), tree,
                                where=f"example {start + index}") for index, example in enumerate(chunk)]
        batch = SyntacticOrderedMemoryCollator(pad_token_id=tokenizer.pad_token_id)(features)
        device = _device(model)
        out = model(**{name: value.to(device) for name, value in batch.items() if name != "labels"})
        labels, decisions = out.structure_labels.cpu(), out.decisions.cpu()
        first_siblings = batch["som_first_siblings"]
        labeled = first_siblings >= 0
        p_right += int((decisions[labeled] == labels[labeled]).sum())
        p_total += int(labeled.sum())
        if out.next_split_log_probs is not None:
            guesses = out.next_split_log_probs.argmax(-1).cpu()[:, :-1]
            next_labeled = labeled[:, 1:]
            q_right += int((guesses[next_labeled] == labels[:, 1:][next_labeled]).sum())
            q_total += int(next_labeled.sum())
        for row, (example, feature) in enumerate(zip(chunk, features)):
            length = len(feature["input_ids"])
            words = len(example["words"])
            if length != words + 2:
                raise ValueError(f"example {start + row}: UF1 needs one token per word (a word vocabulary); "
                                 f"got {length - 2} tokens for {words} words")
            parse = parse_spans([decision + 1 for decision in decisions[row, :length].tolist()], num_slots)
            gold = constituent_spans(gold_tree(example["words"], example.get("heads"), tree), offset=1)
            parse, gold = word_spans(parse, words), word_spans(gold, words)
            matched += len(parse & gold)
            predicted_count += len(parse)
            gold_count += len(gold)
    precision = matched / predicted_count if predicted_count else 0.0
    recall = matched / gold_count if gold_count else 0.0
    return {
        "uf1": 100 * (2 * precision * recall / (precision + recall) if precision + recall else 0.0),
        "precision": 100 * precision, "recall": 100 * recall,
        "p_accuracy": p_right / p_total if p_total else None,
        "next_p_accuracy": q_right / q_total if q_total else None,
        "sentences": len(examples),
        "brackets": "unlabeled spans of 2+ words, whole sentence excluded, punctuation kept; corpus micro-average",
    }


__all__ = ["gold_tree", "som_blimp", "som_parse_eval", "som_perplexity", "som_sentence_scores", "som_surprisals",
           "som_syntaxgym", "word_spans"]
