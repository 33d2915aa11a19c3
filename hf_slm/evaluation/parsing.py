"""Parsing evaluations: reranking proposal trees by log p(x, y), and parsing with the beam search.

Both report EVALB bracketing scores with COLLINS.prm rules (evalb.py) against the gold trees as they are
in the gold file: POS tags decide punctuation, traces and function tags are handled by EVALB's rules, and
the tokenizer's normalization (binarization, unary removal ...) is applied only to what the model scores.

Proposal file format (`read_proposals`, `write_proposals`): plain UTF-8 text. Each sentence is one block of
candidate trees, one bracketed tree per line (PTB brackets, POS tags optional, any wrapper root); blocks are
separated by one or more blank lines and come in the same order as the gold trees. Every block holds at
least one tree; the papers use up to 300 per sentence (e.g. the top 300 of a discriminative parser), in
any order (the first tree of a block is reported as "first_proposal", usually the proposal parser's best).

    (S (NP (DT The) (NN bird)) (VP (VBZ sings)) (. .))
    (S (NP (DT The)) (VP (NN bird) (VBZ sings)) (. .))

    (S (NP (PRP I)) (VP (VBP like) (NP (PRP it))) (. .))

Reranking (`rerank`): every proposal is normalized with the tokenizer's own options
(`normalize_tree(tree, **tokenizer.normalization)`), encoded, and scored with `joint_log_probs`; the
proposal with the highest log p(x, y) is chosen (ties: the first), and the ORIGINAL proposal tree is scored
against gold. Also reported: the first proposal of each block, and the oracle, which picks per sentence the
proposal with the highest sentence F1 (an approximation of the best achievable corpus F1).

Parsing (`parse_eval`): the gold words (traces removed) are parsed by the model's Scorer (hf_slm/search/scorers.py:
word-synchronous beam search, `hf_slm.search.beam.parse`); the predicted
trees have no POS tags; binarized models' intermediate nodes (labels with `|<`, nltk's CNF) are spliced out;
their leaves are the gold words (hf_slm.search.beam.parse keeps the given words, <unk> spellings included). A
sentence that cannot be parsed (hf_slm.search.beam.check_sentences: too long for the model...) is left out of the
scores, counted in `sentences_left_out`, named in `left_out`, and an empty line in the trees file.

Results: with `output_dir`, `save_results` writes `<output_dir>/<stem>.json`, named by the gold data
(results.result_stem: `parse-<gold name>` or `rerank-<gold name>`, `-limit<N>` added with a limit), and the
chosen / predicted trees go to `<output_dir>/<stem>_trees.txt`, one per line. The journal
`<stem>.journal.jsonl` keeps the parses (the proposals' log-probabilities) finished so far: an interrupted
run resumes from it, and `overwrite` discards it.
"""

import json
from pathlib import Path

import numpy as np

from ..data.numbering import item_name, sentence_name
from ..checkpoints.checks import check_tokenizer_matches
from ..runs.distributed import is_main_process, world_size
from ..families import variant_for_config
from ..families.tree_formats import BRACKETED
from ..runs.journal import data_fingerprint, journaled_chunks, map_in_chunks, proposal_rounds, text_fingerprint
from ..search.scorers import scorer_of
from ..search.scoring import joint_log_probs
from ..tokenization.tree_type import Tree
from ..tokenization.trees import normalize_tree, parse_tree, read_trees, tree_to_string
from .evalb import GoldSentence, summarize
from .results import evaluation_run, save_results


# ---------------------------------------------------------------------------------------------------------
# Files


def read_gold_trees(path, limit=None):
    """The trees of a gold file, a directory of .mrg files or a list of files, as they are: POS tags,
    traces, function tags and wrapper roots kept, for EVALB's rules to handle."""
    if not isinstance(path, (list, tuple)):
        path = Path(path)
    if isinstance(path, Path) and path.is_dir() and any(path.glob("*.mrg")):  # WSJ folders also hold a README
        path = sorted(path.glob("*.mrg"))
    trees = read_trees(path, strip_traces=False, strip_function_tags=False, binarize=False, preterminals=False,
                       drop_root=False, remove_unary=False)
    return trees[:limit] if limit is not None else trees


def iter_proposals(path, limit=None):
    """Yield the proposal trees of each sentence of a proposal file (format: module docstring), lazily, as written,
    at most `limit` sentences (read by the bracketed format, hf_slm/families/tree_formats.py, as every evaluation
    reads proposals)."""
    for block in BRACKETED.proposal_blocks(path, limit=limit):
        yield block.trees


def read_proposals(path, limit=None):
    """All proposal blocks of a file as a list (one list of nltk.Tree per sentence)."""
    return list(iter_proposals(path, limit=limit))


def write_proposals(path, proposals):
    """Write proposal blocks (lists of trees or bracketed strings) in the proposal file format."""
    blocks = []
    for index, block in enumerate(proposals):
        if not len(block):
            raise ValueError(f"{sentence_name(index)} has no proposal trees; expected at least one")
        blocks.append("\n".join(tree_to_string(t) if isinstance(t, Tree) else " ".join(t.split()) for t in block))
    Path(path).write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    return path


# What a model writes, by its variant's tree format (hf_slm/families/registry.py, Variant.tree_format).
_TREES_WRITTEN = {"words": "words only", "unlabelled_brackets": "unlabelled brackets",
                  "dependency": "dependency trees (scored by hf-slm eval uas)"}


def _check_syntactic(model, tokenizer, what):
    """EVALB scores labelled PTB brackets: refuse a model whose trees are something else, naming what it writes."""
    check_tokenizer_matches(model.config, tokenizer)
    variant = variant_for_config(model.config)
    if variant.tree_format != "brackets":
        written = _TREES_WRITTEN.get(variant.tree_format, f"{variant.tree_format!r} trees")
        raise ValueError(f"{what} scores labelled trees with EVALB against labelled gold trees; a "
                         f"{variant.display_name} model writes {written}, which EVALB does not score; its models are "
                         "scored by perplexity (hf-slm eval ppl), SyntaxGym and BLiMP")


def _gold_list(gold_trees, limit):
    if isinstance(gold_trees, (str, Path)):
        return read_gold_trees(gold_trees, limit=limit), str(gold_trees)
    gold = [parse_tree(t, source=f"gold tree {i}") if isinstance(t, str) else t for i, t in enumerate(gold_trees)]
    return (gold[:limit] if limit is not None else gold), "<trees in memory>"


def _proposal_blocks(proposals, limit):
    """Yield (trees, locations) per sentence: locations name each tree in error messages."""
    if isinstance(proposals, (str, Path)):
        for block in BRACKETED.proposal_blocks(proposals, limit=limit):
            yield block.trees, block.locations
        return
    for index, block in enumerate(proposals):
        if limit is not None and index >= limit:
            return
        where = [f"{sentence_name(index)}, {item_name('proposal', j)}" for j in range(len(block))]
        trees = [parse_tree(t, source=w) if isinstance(t, str) else t for t, w in zip(block, where)]
        yield trees, where


def _save(run, name, metrics, model, data, options, trees):
    """Write the results and the trees of an EvaluationRun (nothing when run is None); adds metrics["files"]."""
    if run is None:
        return
    files = {"json": save_results(run.directory, name, metrics, model, data, options, stem=run.stem),
             "trees": run.path("_trees.txt")}
    files["trees"].write_text("".join(tree_to_string(t) + "\n" for t in trees), encoding="utf-8")
    metrics["files"] = {kind: str(path) for kind, path in files.items()}


def _gold_description(gold_trees, gold):
    """What the journal hashes for the gold data: its path, or the text of trees given in memory."""
    if isinstance(gold_trees, (str, Path)):
        return None
    return "\n".join(tree_to_string(tree) for tree in gold)


# ---------------------------------------------------------------------------------------------------------
# Reranking


def _score_chunk(model, tokenizer, chunk, batch_size):
    """log p(x, y) of every proposal of a chunk of sentences; returns one array per sentence."""
    flat, where = [], []
    for _, trees, locations in chunk:
        for tree, location in zip(trees, locations):
            try:
                flat.append(normalize_tree(tree, **tokenizer.normalization))
            except ValueError as error:
                raise ValueError(f"{location}: {error}") from error
            where.append(location)
    try:
        ids = tokenizer(flat)["input_ids"]
    except ValueError as error:
        message = str(error)
        if message.startswith("batch item "):  # name the proposal, not the position in this chunk
            item, _, rest = message[len("batch item "):].partition(": ")
            if item.isdigit():
                raise ValueError(f"{where[int(item)]}: {rest}") from error
        raise
    # Similar lengths batch together (less padding); results go back to proposal order.
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    sorted_scores = joint_log_probs(model, [ids[i] for i in order], batch_size=batch_size)
    scores = np.empty(len(ids))
    scores[order] = sorted_scores
    arrays, start = [], 0
    for _, trees, _ in chunk:
        arrays.append(scores[start : start + len(trees)])
        start += len(trees)
    return arrays


def rerank(model, tokenizer, gold_trees, proposals, batch_size=32, limit=None, max_proposals=None, max_length=None,
           proposal_pos="auto", progress=True, output_dir=None, chunk_size=2048, overwrite=False):
    """Rerank proposal trees by the model's joint log-probability and score the choice with EVALB rules.

    Args:
        model: a TG / TXL (CC) checkpoint (any model `hf_slm.search.scoring.joint_log_probs` accepts).
        tokenizer: its tokenizer; its `normalization` options turn each proposal into what the model reads.
        gold_trees: the gold trees (nltk.Tree or bracketed strings, with POS tags) or a gold file path.
        proposals: one list of candidate trees per gold tree, or a proposal file path (module docstring).
        batch_size: proposals per forward call.
        limit: evaluate only the first `limit` sentences.
        max_proposals: keep only the first this many proposals of each sentence (None: all).
        max_length: EVALB's length cut-off for the scores (None: all sentences; the model still scores all).
        proposal_pos: whether proposals carry POS tags ("auto", True, False), for the EVALB scores.
        progress: show a progress bar over sentences.
        output_dir: if given, write `rerank-<gold name>.json` (save_results), `<that stem>_trees.txt` (chosen
            trees) and the journal of the proposals scored so far there (module docstring).
        chunk_size: proposals tokenized and scored together (bounds memory on 300-proposal files).
        overwrite: discard the journal of an earlier run into the same file and start over.

    Returns:
        EVALB corpus metrics of the chosen trees (`evalb.summarize`: precision, recall, f1, exact_match, ...),
        plus "oracle" and "first_proposal" (the same metrics for those choices), "proposals" (trees scored),
        "chosen" (index of the chosen proposal per sentence) and "chosen_log_probs" (their log p(x, y), nats);
        "units": "percent" and "log_prob_units": "nats" say so.
    """
    _check_syntactic(model, tokenizer, "reranking")
    gold, gold_source = _gold_list(gold_trees, limit)
    options = {"batch_size": batch_size, "limit": limit, "max_proposals": max_proposals, "max_length": max_length,
               "normalization": dict(tokenizer.normalization), "evalb": "COLLINS.prm rules (hf_slm.evaluation.evalb)"}
    given = (data_fingerprint(proposals) if isinstance(proposals, (str, Path))
             else text_fingerprint(json.dumps(proposals, default=str)))
    settings = dict(options, proposal_pos=proposal_pos, chunk_size=chunk_size, proposals=given)
    with evaluation_run(output_dir, "rerank", gold_trees, model, settings, limit=limit, overwrite=overwrite,
                        data_description=_gold_description(gold_trees, gold)) as run:
        return _rerank(model, tokenizer, gold, gold_source, proposals, batch_size, limit, max_proposals, max_length,
                       proposal_pos, progress, chunk_size, run, options)


def _rerank(model, tokenizer, gold, gold_source, proposals, batch_size, limit, max_proposals, max_length,
            proposal_pos, progress, chunk_size, run, options):
    """`rerank` once its results folder is locked and its journal open (`run`, None when nothing is written)."""
    prepared = [GoldSentence(tree, index=i) for i, tree in enumerate(gold)]
    if run is not None:
        run.journal.say_resumed([str(index) for index in range(len(gold))], "sentence")
    chosen, chosen_log_probs, chosen_trees = [], [], []
    by_choice = {"chosen": [], "oracle": [], "first_proposal": []}
    total = 0

    def evaluate_round(chunks):
        # Under torchrun each process scores one chunk of the round, and every process gets all of them.
        scored = journaled_chunks(run.journal if run is not None else None,
                                  [[str(index) for index, _, _ in chunk] for chunk in chunks],
                                  lambda position: _score_chunk(model, tokenizer, chunks[position], batch_size))
        for chunk, values in zip(chunks, scored):
            tally(chunk, [np.asarray(value, dtype=float) for value in values])

    def tally(chunk, arrays):
        nonlocal total
        for (index, trees, locations), log_probs in zip(chunk, arrays):
            sentence_scores = []
            for tree, location in zip(trees, locations):
                try:
                    sentence_scores.append(prepared[index].score(tree, test_pos=proposal_pos))
                except ValueError as error:
                    raise ValueError(f"{location}: {error}") from error
            best = int(np.argmax(log_probs))
            oracle = max(range(len(trees)), key=lambda j: (sentence_scores[j]["f1"], -j))
            chosen.append(best)
            chosen_log_probs.append(float(log_probs[best]))
            chosen_trees.append(trees[best])
            total += len(trees)
            if max_length is None or prepared[index].length <= max_length:
                by_choice["chosen"].append(sentence_scores[best])
                by_choice["oracle"].append(sentence_scores[oracle])
                by_choice["first_proposal"].append(sentence_scores[0])

    def blocks():
        for index, (trees, locations) in enumerate(_proposal_blocks(proposals, limit)):
            if index >= len(gold):
                raise ValueError(f"more proposal blocks than the {len(gold)} gold trees; expected one block per "
                                 f"gold tree (the extra block starts at {locations[0]})")
            if not trees:
                raise ValueError(f"{sentence_name(index)} has no proposal trees; expected at least one")
            if max_proposals is not None:
                trees, locations = trees[:max_proposals], locations[:max_proposals]
            yield index, trees, locations

    count = proposal_rounds(blocks(), evaluate_round, chunk_size, world_size(), len(gold),
                            progress and is_main_process())
    if count != len(gold):
        raise ValueError(f"{count} proposal blocks for {len(gold)} gold trees; expected one block per gold tree, "
                         "in the same order")

    skipped = len(gold) - len(by_choice["chosen"])
    metrics = summarize(by_choice["chosen"], skipped_long=skipped)
    metrics["oracle"] = summarize(by_choice["oracle"], skipped_long=skipped)
    metrics["first_proposal"] = summarize(by_choice["first_proposal"], skipped_long=skipped)
    metrics["proposals"] = total
    metrics["chosen"] = chosen
    metrics["chosen_log_probs"] = chosen_log_probs
    metrics["units"] = "percent"  # precision, recall, f1, exact_match, no_crossing (as EVALB prints them)
    metrics["log_prob_units"] = "nats"  # chosen_log_probs
    data = {"gold": gold_source, "proposals": str(proposals) if isinstance(proposals, (str, Path)) else
            "<trees in memory>", "sentences": len(gold), "proposal_trees": total}
    _save(run, "rerank", metrics, model, data, options, chosen_trees)
    return metrics


# ---------------------------------------------------------------------------------------------------------
# Parsing


def debinarize(tree):
    """Splice out the intermediate nodes of nltk's CNF binarization (labels like `NP|<DT-JJ>`).

    Only `|<` marks such a node: PTB's own `PRT|ADVP` (an annotator's either-or label) stays a constituent.
    """
    children = []
    for child in tree:
        if isinstance(child, Tree):
            child = debinarize(child)
            if "|<" in child.label():
                children.extend(child)
                continue
        children.append(child)
    return Tree(tree.label(), children)


def _with_words(tree, words, index):
    """A copy of `tree` whose leaves are `words` (undoes <unk> spellings); the counts must agree."""
    leaves = iter(words)

    def copy(node):
        return Tree(node.label(), [copy(c) if isinstance(c, Tree) else next(leaves) for c in node])

    if len(tree.leaves()) != len(words):
        raise ValueError(f"{sentence_name(index)}: the predicted tree has {len(tree.leaves())} words, the gold "
                         f"sentence {len(words)}: {tree_to_string(tree)[:120]!r}")
    return copy(tree)


def parse_eval(model, tokenizer, gold_trees, limit=None, batch_size=8, max_length=None, progress=True, output_dir=None,
               overwrite=False, on_error="skip", scorer=None, **beam_options):
    """Parse the gold sentences with the model's Scorer (word-synchronous beam search) and score the trees with
    EVALB rules.

    Args:
        model, tokenizer: a syntactic checkpoint and its tokenizer.
        gold_trees: the gold trees (nltk.Tree or bracketed strings, with POS tags) or a gold file path.
        limit: evaluate only the first `limit` sentences.
        batch_size: sentences per beam-search batch.
        max_length: EVALB's length cut-off for the scores (None: all sentences; all are parsed).
        progress: show the beam search's progress bar.
        output_dir: if given, write `parse-<gold name>.json` (save_results), `<that stem>_trees.txt` (predicted
            trees) and the journal of the parses finished so far there (module docstring).
        overwrite: discard the journal of an earlier run into the same file and start over.
        on_error: "skip" leaves out a sentence that cannot be parsed (module docstring); "raise" stops.
        scorer: the Scorer whose `parse` gives the trees (hf_slm/search/scorers.py; default: the model's family's, with
            `beam_options`, BeamSearchOptions fields such as beam_size, word_beam_size, fast_track).

    Returns:
        EVALB corpus metrics of the predicted trees (`evalb.summarize`), with "units": "percent".
    """
    _check_syntactic(model, tokenizer, "parsing")
    scorer = scorer_of(model, tokenizer, scorer, **beam_options)
    gold, gold_source = _gold_list(gold_trees, limit)
    prepared = [GoldSentence(tree, index=i) for i, tree in enumerate(gold)]
    sentences = [sentence.words for sentence in prepared]
    options = {"batch_size": batch_size, "limit": limit, "max_length": max_length, "beam": scorer.search_options,
               "normalization": dict(tokenizer.normalization), "evalb": "COLLINS.prm rules (hf_slm.evaluation.evalb)"}
    with evaluation_run(output_dir, "parse", gold_trees, model, options, limit=limit, overwrite=overwrite,
                        data_description=_gold_description(gold_trees, gold)) as run:
        predicted = map_in_chunks(
            lambda chunk: scorer.parse([words for _, words in chunk], batch_size=batch_size, progress=False,
                                       sources=[f"{gold_source}, tree {i}" for i, _ in chunk], on_error=on_error),
            list(enumerate(sentences)), batch_size, run.journal if run is not None else None, progress=progress, desc="parsing",
            unit="sentence")
        return _score_parses(model, tokenizer, gold, gold_source, prepared, predicted, max_length, run, options)


def _score_parses(model, tokenizer, gold, gold_source, prepared, predicted, max_length, run, options):
    """EVALB scores of the predicted trees of `parse_eval`, saved by `run` (when not None)."""
    # Model trees carry POS tags only when the tokenizer kept preterminals as constituents.
    test_pos = "auto" if tokenizer.normalization.get("preterminals") is False else False
    trees, scores, left_out = [], [], []
    for index, (text, sentence) in enumerate(zip(predicted, prepared)):
        # cannot be parsed (hf_slm.search.beam.check_sentences; warned): an empty line in the trees file
        if text is None:
            left_out.append({"index": index, "source": f"{gold_source}, tree {index}"})
            trees.append("")
            continue
        tree = parse_tree(text, source=f"predicted tree {index}")
        if tokenizer.normalization.get("binarize"):
            tree = debinarize(tree)
        tree = _with_words(tree, sentence.words, index)
        trees.append(tree)
        if max_length is None or sentence.length <= max_length:
            scores.append(sentence.score(tree, test_pos=test_pos))
    metrics = summarize(scores, skipped_long=len(gold) - len(left_out) - len(scores))
    metrics["units"] = "percent"  # precision, recall, f1, exact_match, no_crossing (as EVALB prints them)
    if left_out:
        metrics["sentences_left_out"] = len(left_out)
        metrics["left_out"] = left_out
    data = {"gold": gold_source, "sentences": len(gold)}
    _save(run, "parse", metrics, model, data, options, trees)
    return metrics
