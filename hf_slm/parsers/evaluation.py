"""How good a proposal parser is: its best trees scored against gold trees, beside a right-branching baseline.

- Constituency (`hf-slm eval parse --parser DIR --gold FILE`): bracketing precision, recall and F1 with EVALB's
  COLLINS.prm rules (hf_slm/evaluation/evalb.py): labelled for a labelled parser, and unlabelled for every parser;
  the right-branching baseline (every span from a word to the sentence's end a bracket) scored unlabelled.
- Dependency (`hf-slm eval uas --parser DIR --data FILE`): UAS with hf_slm/evaluation/attachment.py's punctuation
  rule, LAS (the relation too) on the same words, and the baseline that heads every word by the next one (the
  last word the root), scored the same way.
Percent, as EVALB and CoNLL print them. `parser_evaluation` writes the usual results files (evaluation/results.py:
`parse-<gold>.json` or `uas-<gold>.json` beside their trees, journaled, so an interrupted run resumes).
"""

from ..data.conllu_loader import read_conllu_file
from ..evaluation.attachment import attachment_score, resolve_punctuation_rule, scored_words
from ..evaluation.evalb import GoldSentence, summarize
from ..evaluation.parsing import read_gold_trees
from ..evaluation.results import evaluation_run, save_results
from ..families.tree_formats import tree_format
from ..runs.journal import map_in_chunks
from ..tokenization.tree_type import Tree
from ..tokenization.trees import parse_tree


def right_branching(words):
    """(w1 (w2 (... (w(n-1) wn)))) as an unlabelled tree (every label "X")."""
    tree = Tree("X", list(words[-2:])) if len(words) > 1 else Tree("X", list(words))
    for word in reversed(words[:-2]):
        tree = Tree("X", [word, tree])
    return tree


def _read_predicted(text, labelled, where):
    return parse_tree(text, source=where) if labelled else tree_format("unlabelled_brackets").read(text, where)


def bracketing_scores(gold_trees, predicted, labelled, tagged):
    """{"f1", "precision", "recall" (labelled, for a labelled parser), "unlabelled_f1", "right_branching_f1" (unlabelled),
    ...} of predicted tree strings against gold trees (as written: POS tags, traces, wrapper roots), percent."""
    gold = [GoldSentence(tree, index=index) for index, tree in enumerate(gold_trees)]
    unlabelled_gold = [GoldSentence(tree, index=index, labeled=False) for index, tree in enumerate(gold_trees)]
    trees = [_read_predicted(text, labelled, f"predicted tree {index + 1}") for index, text in enumerate(predicted)]
    test_pos = bool(tagged) and labelled
    unlabelled = summarize([sentence.score(tree, test_pos=test_pos) for sentence, tree in zip(unlabelled_gold, trees)])
    baseline = summarize([sentence.score(right_branching(sentence.words), test_pos=False)
                          for sentence in unlabelled_gold])
    metrics = {}
    if labelled:
        metrics.update(summarize([sentence.score(tree, test_pos=test_pos) for sentence, tree in zip(gold, trees)]))
    metrics.update(unlabelled_f1=unlabelled["f1"], unlabelled_precision=unlabelled["precision"],
                   unlabelled_recall=unlabelled["recall"], right_branching_f1=baseline["f1"],
                   sentences=unlabelled["sentences"], units="percent")
    return metrics


def attachment_scores(gold, predicted_heads, predicted_relations, include_punctuation=False):
    """{"uas", "las", "right_branching_uas", ...} of predicted heads and relations against gold sentences
    ({"words", "heads", "deprels", "upos", "source"}), percent, punctuation as attachment.py's rule says."""
    scores = attachment_score(gold, predicted_heads, include_punctuation=include_punctuation)
    baseline = attachment_score(gold, [list(range(2, len(s["words"]) + 1)) + [0] for s in gold],
                                include_punctuation=include_punctuation)
    rule = resolve_punctuation_rule(gold, include_punctuation)
    correct = scored = 0
    for sentence, heads, relations in zip(gold, predicted_heads, predicted_relations):
        for position, counted in enumerate(scored_words(sentence, rule)):
            if counted:
                scored += 1
                correct += (heads[position] == sentence["heads"][position]
                            and relations[position] == sentence["deprels"][position])
    return {"uas": scores["uas"], "las": 100.0 * correct / scored if scored else None,
            "right_branching_uas": baseline["uas"], "scored_tokens": scores["scored_tokens"],
            "sentences": scores["sentences"], "punctuation": scores["punctuation"], "units": "percent"}


def gold_dependencies(path, limit=None):
    """The gold sentences of a CoNLL-U file as attachment.py reads them, with their relations ("deprels")."""
    sentences = []
    for example in read_conllu_file(path, str(path)):
        if limit is not None and len(sentences) >= limit:
            break
        sentences.append({"words": example["words"], "heads": example["heads"], "deprels": example["deprels"],
                          "upos": example["upos"], "sent_id": example["sent_id"],
                          "source": f"{path}, sentence {example['index'] + 1}"})
    if not sentences:
        raise ValueError(f"gold file {path}: no sentences; expected CoNLL-U sentences with heads")
    return sentences


def score_examples(model, tokenizer, kind, examples, batch_size=32):
    """The held-out quality of a trained parser on its evaluation examples (hf_slm/parsers/data.py's)."""
    from .parser import ProposalParser

    parser = ProposalParser(model, tokenizer)
    if kind.tree_kind == "dependency":
        gold = [{"words": ex["words"], "heads": ex["heads"], "deprels": ex["relations"], "upos": None,
                 "source": where} for ex, where in examples]
        structures = _best_structures(parser, [g["words"] for g in gold], batch_size)
        return attachment_scores(gold, [s["heads"] for s in structures],
                                 [[tokenizer.labels[r] for r in s["relations"]] for s in structures])
    gold = [tree for tree, _ in examples]
    words = [GoldSentence(tree, index=index).words for index, tree in enumerate(gold)]
    return bracketing_scores(gold, [tree for tree, _ in parser.best(words, batch_size)], kind.labelled,
                             tokenizer.tags)


def _best_structures(parser, sentences, batch_size):
    found = [None] * len(sentences)
    for indices, batch in parser._batches(sentences, batch_size):
        for index, structure in zip(indices, parser.model.best_structures(**parser._inputs(batch))):
            found[index] = structure
    return found


def parser_evaluation(parser, gold_path, evaluation, limit=None, batch_size=32, output_dir=None, overwrite=False,
                      include_punctuation=False, progress=True):
    """`hf-slm eval parse|uas --parser DIR`: the parser's best trees of the gold sentences, scored (module
    docstring), the results and trees written into output_dir. Returns the metrics, with "files"."""
    dependency = parser.kind.tree_kind == "dependency"
    if (evaluation == "uas") != dependency:
        wanted = "uas" if dependency else "parse"
        raise ValueError(f"hf-slm eval {evaluation}: {parser.describe()} draws {parser.kind.tree_kind} trees, scored by "
                         f"hf-slm eval {wanted}")
    if dependency:
        gold = gold_dependencies(gold_path, limit=limit)
        sentences = [sentence["words"] for sentence in gold]
    else:
        gold = read_gold_trees(gold_path, limit=limit)
        sentences = [GoldSentence(tree, index=index).words for index, tree in enumerate(gold)]
    options = {"limit": limit, "batch_size": batch_size, "include_punctuation": include_punctuation,
               "parser": parser.fingerprint()}
    with evaluation_run(output_dir, evaluation, gold_path, parser.model, options, limit=limit,
                        overwrite=overwrite) as run:
        def parse_chunk(chunk):
            return [{"structure": structure, "tree": parser.write(words, structure)}
                    for words, structure in zip(chunk, _best_structures(parser, chunk, batch_size))]

        found = map_in_chunks(parse_chunk, sentences, batch_size, run.journal if run is not None else None,
                              progress=progress, desc="parsing", unit="sentence")
        structures = [item["structure"] for item in found]
        if dependency:
            metrics = attachment_scores(gold, [s["heads"] for s in structures],
                                        [[parser.tokenizer.labels[r] for r in s["relations"]] for s in structures],
                                        include_punctuation)
        else:
            metrics = bracketing_scores(gold, [item["tree"] for item in found], parser.kind.labelled,
                                        parser.tokenizer.tags)
        metrics["parser"] = parser.fingerprint()
        if run is not None:
            trees = run.path("_trees.conllu" if dependency else "_trees.txt")
            separator = "\n\n" if dependency else "\n"
            trees.write_text(separator.join(item["tree"] for item in found) + "\n", encoding="utf-8")
            path = save_results(run.directory, evaluation, metrics, parser.model,
                                {"gold": str(gold_path), "sentences": len(sentences)}, options, stem=run.stem)
            metrics["files"] = {"json": str(path), "trees": str(trees)}
    return metrics


__all__ = ["attachment_scores", "bracketing_scores", "parser_evaluation", "right_branching", "score_examples"]
