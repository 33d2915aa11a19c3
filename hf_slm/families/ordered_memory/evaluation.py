"""Evaluating Syntactic Ordered Memory: exact scores from the logits, incremental parses, and their UF1.

SOM gives p(x_{t+1} | x_<=t) directly from its logits: its parse is a soft latent structure inside the model,
so no beam search is run and log p(x) = sum_t log p(x_t | x_<t) is exact (not a bound). The family's Scorer
(hf_slm/families/ordered_memory/scorer.py) serves these numbers to the shared drivers (perplexity, SyntaxGym, BLiMP:
hf_slm.evaluation), which write their results files and journals as for every model.

- `som_sentence_scores`: per sentence, the log-probability of each word (the sum over its pieces) and of `</s>`,
  natural logs; `som_surprisals`: the word surprisals alone (bits by default).
- `som_parse_eval(model, tokenizer, examples)`: Table 2's metrics on gold trees Gamma (dependency trees turned
  into binary constituency trees, tokenization/som_trees.py): unlabeled F1 of the greedy incremental parses
  (the argmax decisions of p_t), p accuracy and p' accuracy against Algorithm 1's labels, and the perplexity given
  the memory's decisions. A model with config.oracle_trees (Table 2's "- Predicted tree + Gold tree") follows
  the gold decisions instead: its perplexity is given the gold trees, p accuracy scores p_t's argmax, and no UF1
  is reported (the parse is the gold tree). Brackets that count:
  every constituent of two or more words except the whole sentence, punctuation kept (Gamma has it), as sets of
  (first word, last word) spans, micro-averaged over the corpus as EVALB does; leaves, the whole-sentence span
  and the spans that contain `<s>` or `</s>` are left out. `run_som_parse_eval` runs it on a CoNLL-U file and
  writes `eval_results/uf1-<data>.json` with its journal (evaluation.results, hf_slm.runs.journal): SOM's
  `hf-slm eval parse`. A model card quotes it (hf_slm.publishing.model_card).
- `som_constituency_uf1(model, tokenizer, gold_trees)`: Table 8's UF1 against constituency trees (PTB), by
  EVALB's rules (hf_slm.evaluation.evalb) unlabeled, punctuation and trivial spans left out (appendix B.1);
  `run_som_parse_eval` runs it on any --gold file that is not CoNLL-U.
- `som_parses(model, tokenizer, sentences)`: those incremental parses as bracketed trees (`hf-slm parse`).
"""

import math
from pathlib import Path

import torch

from ...data.numbering import sentence_name
from ...evaluation.evalb import GoldSentence, summarize
from ...evaluation.results import evaluation_run, save_results
from ...modeling.som_structure import parse_spans
from ...runs.journal import map_in_chunks
from .data import SyntacticOrderedMemoryCollator, gold_tree, som_example
from ...tokenization.som_trees import constituent_spans


# What the results say the memory followed (the model's config.oracle_trees decides).
OWN_DECISIONS = "argmax of p_t"
ORACLE_DECISIONS = ("the gold tree's (oracle_trees: Table 2's '- Predicted tree + Gold tree'); the perplexity is "
                    "given the gold trees, p and p' accuracy score the parsers' argmax against them")


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
                raise ValueError(f"{sentence_name(start + index)} is empty; expected at least one word")
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


def _journal(run):
    return run.journal if run is not None else None


def bracketed_tree(words, spans, label="X"):
    """A bracketed tree string over `words` with a node `(label ...)` for each span (first, last word index,
    0-based) of a nested set, the whole sentence the root; words outside every smaller span are the root's."""
    spans = {span for span in spans if span[0] < span[1]} | {(0, len(words) - 1)}
    ordered = sorted(spans, key=lambda span: (span[0], -span[1]))

    def node(first, last):
        parts, position = [], first
        for span in ordered:  # the children: the widest spans inside, left to right
            if span[0] >= position and span[1] <= last and span != (first, last):
                parts.extend(words[position:span[0]])
                parts.append(node(*span))
                position = span[1] + 1
        parts.extend(words[position:last + 1])
        return f"({label} {' '.join(parts)})"

    return node(0, len(words) - 1)


@torch.no_grad()
def som_parses(model, tokenizer, sentences, batch_size=32):
    """The model's incremental parse of each sentence (lists of words) as an unlabeled bracketed tree: the
    binary tree that the argmax decisions of p_t build over `<s> words </s>` (what `som_parse_eval` scores),
    its constituents that cover two or more whole words and neither `<s>` nor `</s>`, under one root. A
    constituent that splits a word's pieces is left out (subword vocabularies)."""
    model.eval()
    trees = []
    for start in range(0, len(sentences), batch_size):
        chunk = [list(words) for words in sentences[start:start + batch_size]]
        for index, words in enumerate(chunk):
            if not words:
                raise ValueError(f"{sentence_name(start + index)} is empty; expected at least one word")
        encoded = tokenizer(chunk, is_split_into_words=True, return_word_starts=True)
        features = [{"input_ids": list(ids) + [tokenizer.eos_token_id]} for ids in encoded["input_ids"]]
        out, _ = _decisions(model, tokenizer, features)
        for row, (words, starts) in enumerate(zip(chunk, encoded["word_starts"])):
            length = len(features[row]["input_ids"])
            spans = parse_spans([decision + 1 for decision in out.decisions[row, :length].tolist()],
                                model.config.num_slots)
            trees.append(bracketed_tree(words, _word_spans_of_tokens(spans, list(starts), length)))
    return trees


def _word_spans_of_tokens(spans, word_starts, length):
    """Token spans (positions in `<s> pieces </s>`) as 0-based word spans, for those that begin at a word's first
    piece and end at a word's last piece, inside the sentence."""
    boundaries = list(word_starts[1:length - 1]) + [1]  # whether each position 1.. starts a word (</s> does)
    word_of = [0] * length
    for position in range(1, length - 1):
        word_of[position] = word_of[position - 1] + (1 if boundaries[position - 1] else 0)
    return {(word_of[a] - 1, word_of[b] - 1) for a, b in spans
            if 1 <= a <= b <= length - 2 and boundaries[a - 1] and boundaries[b]}


def word_spans(spans, length):
    """The brackets UF1 counts (module docstring), in word positions 1..length of a token sequence with `<s>`
    first: spans of two or more words inside the sentence, the whole sentence left out."""
    return {span for span in spans if 1 <= span[0] < span[1] <= length and span != (1, length)}


def _decisions(model, tokenizer, features):
    """The model's forward output on `features` (som_example dicts) and the batch it read."""
    batch = SyntacticOrderedMemoryCollator(pad_token_id=tokenizer.pad_token_id)(features)
    device = _device(model)
    out = model(**{name: value.to(device) for name, value in batch.items() if name != "labels"})
    return out, batch


def _parse_counts(model, tokenizer, examples, tree, first_index):
    """Per example: the counts UF1, p accuracy and p' accuracy are summed from (see som_parse_eval)."""
    features = [som_example(tokenizer, example["words"], example.get("heads"), tree,
                            where=f"example {first_index + index}") for index, example in enumerate(examples)]
    out, batch = _decisions(model, tokenizer, features)
    labels, decisions = out.structure_labels.cpu(), out.decisions.cpu()
    # p accuracy scores p_t's own choice: under the oracle the decisions are the gold ones, and p_t's argmax is its
    # choice (the memory follows the gold tree, so the open slots are exactly those a tree allows)
    chosen = out.split_log_probs.argmax(-1).cpu() if model.config.oracle_trees else decisions
    labeled = batch["som_first_siblings"] >= 0
    guesses = out.next_split_log_probs.argmax(-1).cpu() if out.next_split_log_probs is not None else None
    token_log_probs = torch.log_softmax(out.logits[:, :-1].float(), -1).gather(
        -1, batch["input_ids"][:, 1:, None].to(out.logits.device))[..., 0].cpu()
    counts = []
    for row, (example, feature) in enumerate(zip(examples, features)):
        length, words = len(feature["input_ids"]), len(example["words"])
        if length != words + 2:
            raise ValueError(f"example {first_index + row}: UF1 needs one token per word (a word vocabulary); "
                             f"got {length - 2} tokens for {words} words")
        mine = labeled[row]
        count = {"p_right": int((chosen[row][mine] == labels[row][mine]).sum()), "p_total": int(mine.sum()),
                 "q_right": 0, "q_total": 0, "tokens": length - 1,
                 "log_prob": math.fsum(token_log_probs[row, :length - 1].tolist())}  # the words and </s>
        if guesses is not None:  # p'_t guesses the decision of token t + 1
            later = mine[1:]
            count["q_right"] = int((guesses[row, :-1][later] == labels[row, 1:][later]).sum())
            count["q_total"] = int(later.sum())
        parse = parse_spans([decision + 1 for decision in decisions[row, :length].tolist()], model.config.num_slots)
        gold = constituent_spans(gold_tree(example["words"], example.get("heads"), tree), offset=1)
        parse, gold = word_spans(parse, words), word_spans(gold, words)
        count.update(matched=len(parse & gold), predicted=len(parse), gold=len(gold))
        counts.append(count)
    return counts


@torch.no_grad()
def som_parse_eval(model, tokenizer, examples, tree="dependency", batch_size=32, journal=None, progress=False):
    """UF1 of SOM's incremental parses against Gamma, p accuracy and p' accuracy (Table 2's metrics).

    examples: dicts with "words" and "heads" (CoNLL-U rows, e.g. hf_slm.data.conllu_loader's). The input ends
    with `</s>`, so its decision closes the sentence and counts towards p accuracy. With a journal the counts of
    each batch are recorded as they are done. Returns {"uf1", "precision", "recall", "p_accuracy",
    "next_p_accuracy", "sentences", "brackets": "..."}.
    """
    model.eval()
    examples = list(examples)
    counts = _chunked_counts(model, tokenizer, examples, tree, batch_size, journal, progress)
    total = {key: sum(count[key] for count in counts) for key in
             ("matched", "predicted", "gold", "p_right", "p_total", "q_right", "q_total", "tokens")}
    log_prob = math.fsum(count["log_prob"] for count in counts)
    precision = total["matched"] / total["predicted"] if total["predicted"] else 0.0
    recall = total["matched"] / total["gold"] if total["gold"] else 0.0
    metrics = {
        "uf1": 100 * (2 * precision * recall / (precision + recall) if precision + recall else 0.0),
        "precision": 100 * precision, "recall": 100 * recall,
        "p_accuracy": total["p_right"] / total["p_total"] if total["p_total"] else None,
        "next_p_accuracy": total["q_right"] / total["q_total"] if total["q_total"] else None,
        # exp(-log p(x) / N_w), N_w counting each word and one </s> per sentence, as `hf-slm eval ppl`
        "perplexity": math.exp(-log_prob / total["tokens"]) if total["tokens"] else None,
        "sentences": len(examples),
        "decisions": ORACLE_DECISIONS if model.config.oracle_trees else OWN_DECISIONS,
        "brackets": "unlabeled spans of 2+ words, whole sentence excluded, punctuation kept; corpus micro-average",
    }
    if model.config.oracle_trees:  # the parse is the gold tree: Table 2 prints no UF1 for the oracle
        for name in ("uf1", "precision", "recall", "brackets"):
            del metrics[name]
    return metrics


def _chunked_counts(model, tokenizer, examples, tree, batch_size, journal, progress):
    """_parse_counts of every example, batch_size examples per forward call (and per journal record)."""
    indexed = list(enumerate(examples))

    def compute(chunk):
        return _parse_counts(model, tokenizer, [example for _, example in chunk], tree, chunk[0][0])

    return map_in_chunks(compute, indexed, batch_size, journal, progress=progress, desc="incremental parses",
                         unit="sentence")


# How Table 8's UF1 counts brackets (appendix B.1, following Kim et al. 2019): EVALB's, unlabeled, punctuation and
# trivial spans left out.
CONSTITUENCY_BRACKETS = ("EVALB (COLLINS.prm rules, hf_slm.evaluation.evalb) unlabeled: punctuation deleted by the "
                         "gold POS tags, brackets of one word and of the whole sentence left out, duplicates counted "
                         "as EVALB counts them; corpus micro-average (Table 8, appendix B.1)")


@torch.no_grad()
def som_constituency_uf1(model, tokenizer, gold_trees, batch_size=32, journal=None, progress=False):
    """UF1 of SOM's incremental parses against constituency trees (paper 001, appendix B.1, Table 8).

    gold_trees: nltk Trees as a treebank holds them (POS tags, traces, function tags, a wrapper root). The model
    parses each tree's words (traces removed) with `som_parses` (a binary, unlabeled tree); both trees are scored
    by EVALB's rules, unlabeled, with punctuation (gold POS tags) and trivial spans (one word, the whole sentence)
    left out, against the original n-ary trees, so even the best binary tree scores below 100 (the paper's
    "Oracle Binary Trees", 82.5 on PTB). Returns {"uf1", "precision", "recall", "sentences", "brackets", "trees"}.
    """
    prepared = [GoldSentence(tree, index=index, labeled=False, trivial_spans=False)
                for index, tree in enumerate(gold_trees)]

    def compute(chunk):
        return som_parses(model, tokenizer, [words for _, words in chunk], batch_size=batch_size)

    trees = map_in_chunks(compute, [(index, gold.words) for index, gold in enumerate(prepared)], batch_size, journal,
                          progress=progress, desc="incremental parses", unit="sentence")
    corpus = summarize([gold.score(tree, test_pos=False) for gold, tree in zip(prepared, trees)])
    return {"uf1": corpus["f1"], "precision": corpus["precision"], "recall": corpus["recall"],
            "sentences": corpus["sentences"], "brackets": CONSTITUENCY_BRACKETS, "trees": trees}


def run_som_parse_eval(model, tokenizer, gold, limit=None, batch_size=32, output_dir=None, overwrite=False,
                       progress=False):
    """`som_parse_eval` against the dependency trees of a CoNLL-U file (Gamma is built from their heads), or
    `som_constituency_uf1` against the trees of any other file (PTB brackets, one tree per line, or a folder of
    .mrg files), written as `<output_dir>/uf1-<data name>[-limit<N>].json` with its journal, from which an
    interrupted run resumes (`overwrite` starts over); output_dir None: nothing is written."""
    from ...data.conllu_loader import read_conllu_file

    gold = Path(gold)
    if gold.suffix != ".conllu":
        return _run_constituency_uf1(model, tokenizer, gold, limit, batch_size, output_dir, overwrite, progress)
    examples = [{"words": e["words"], "heads": e["heads"]} for e in read_conllu_file(gold, gold.name)]
    if limit is not None:
        examples = examples[:limit]
    options = {"limit": limit, "batch_size": batch_size, "tree": "dependency",
               "decisions": ORACLE_DECISIONS if model.config.oracle_trees else OWN_DECISIONS,
               "counts": "brackets, p and p' accuracy, log p(x) per sentence"}
    with evaluation_run(output_dir, "uf1", gold, model, options, limit=limit, overwrite=overwrite) as run:
        metrics = som_parse_eval(model, tokenizer, examples, batch_size=batch_size, journal=_journal(run),
                                 progress=progress)
        if run is not None:
            path = save_results(run.directory, "uf1", metrics, model, {"gold": str(gold), "sentences": len(examples)},
                                options, stem=run.stem)
            metrics["files"] = {"json": str(path)}
    return metrics


def _run_constituency_uf1(model, tokenizer, gold, limit, batch_size, output_dir, overwrite, progress):
    """`som_constituency_uf1` of a gold tree file, written as run_som_parse_eval says, the parses in
    `<stem>_trees.txt` (one per line)."""
    from ...evaluation.parsing import read_gold_trees

    if model.config.oracle_trees:
        raise ValueError(f"--gold {gold}: this model follows the gold tree (oracle_trees), whose Table 2 numbers "
                         "(perplexity, p and p' accuracy) come from gold dependency trees; expected a .conllu file")
    try:
        trees = read_gold_trees(gold, limit=limit)
    except ValueError as error:
        raise ValueError(f"--gold {gold}: a SOM model is evaluated against gold dependency trees (a .conllu file) or "
                         f"constituency trees (PTB brackets, or a folder of .mrg files); {error}") from error
    options = {"limit": limit, "batch_size": batch_size, "tree": "constituency", "decisions": OWN_DECISIONS,
               "brackets": CONSTITUENCY_BRACKETS}
    with evaluation_run(output_dir, "uf1", gold, model, options, limit=limit, overwrite=overwrite) as run:
        metrics = som_constituency_uf1(model, tokenizer, trees, batch_size=batch_size, journal=_journal(run),
                                       progress=progress)
        parses = metrics.pop("trees")
        if run is not None:
            path = save_results(run.directory, "uf1", metrics, model, {"gold": str(gold), "sentences": len(trees)},
                                options, stem=run.stem)
            written = run.path("_trees.txt")
            written.write_text("".join(tree + "\n" for tree in parses), encoding="utf-8")
            metrics["files"] = {"json": str(path), "trees": str(written)}
    return metrics


__all__ = ["bracketed_tree", "gold_tree", "run_som_parse_eval", "som_constituency_uf1", "som_parse_eval", "som_parses", "som_sentence_scores",
           "som_surprisals", "word_spans"]
