"""Unlabeled attachment score (UAS) of dependency models (paper 002, section 4): the best tree of the beam
search over the gold words, or the proposal tree the model gives the highest log p(x, y).

Score (`attachment_score`): a scored word is correct when its predicted head is its gold head (1-based
positions, 0 = the root). Corpus UAS is micro-averaged: correct heads over scored words of all sentences
(a long sentence weighs more than a short one), in percent. Each sentence also gets its own counts and UAS.

Punctuation (`PUNCTUATION_RULES`, decided on the gold sentence, never on the prediction): not scored by default.
    "upos"        words whose gold UPOS is PUNCT (Universal Dependencies). Used when every gold word has a
                  UPOS (not `_`).
    "characters"  words made only of Unicode punctuation characters (general category P: Pc Pd Ps Pe Pi Pf Po),
                  the rule of the CoNLL-X shared task's eval.pl. Used when some gold word has no UPOS (inline
                  trees, a CoNLL-U file whose UPOS column is `_`). Symbols such as `$`, `+` and `` ` `` (category
                  S) are scored; `%`, `#`, `&`, `*` and `@` are category Po, so not.
    "none"        every word is scored: include_punctuation=True (`--include-punctuation`).
`punctuation_rule="auto"` (the default) picks "upos" or "characters" for the whole corpus as said; the results
name the rule and describe it, and give the UAS over all words beside it (`all_words`).

Gold: a CoNLL-U file (hf_slm.data.conllu_loader: multiword-token lines and empty nodes skipped, so word i has
ID i), or in memory a list of mappings with `words`, `heads` and optionally `upos` (load_conllu's examples),
DependencyTree objects or inline trees (`There/2 is/0 a/4 difference/2`). Gold heads are scored as given:
non-projective gold trees are kept (`gold_non_projective` counts them), though a projective parser cannot
get all their heads right.

Beam (`parse_uas`): the gold words are parsed with `hf_slm.search.beam.score` (word-synchronous beam search, the
best tree of the final beam); a sentence that cannot be parsed (hf_slm.search.beam.check_sentences: too long for the
model ...) is left out of the scores, counted in `sentences_left_out` and named in `left_out`.

Reranking (`rerank_uas`): every proposal is scored with `dependency_log_probs` (tokenized, then
hf_slm.search.scoring.joint_log_probs: the sum of its action log-probabilities, the function TG's reranking
uses); the proposal with the highest log p(x, y) is chosen (ties: the first). A proposal the model cannot
build (a non-projective tree: the transition systems build projective trees only, so its probability is 0; or
more positions than the model has) is not a candidate; a sentence none of whose proposals is one is left out.
Also reported: the first proposal of each sentence (usually the proposal parser's best) and the oracle (per
sentence the proposal with the most correct heads). Proposal files, in gold order, at least one tree per
sentence, each with the gold sentence's words:
    - CoNLL-U (a `.conllu` / `.conll` name, or a first line that is a `#` comment or has tabs): several
      analyses per gold sentence, those of one sentence consecutive. A sentence's block is a run of analyses
      with the same `# sent_id` (checked against the gold one when both have it), or, without sent_id
      comments, with the same words (two consecutive gold sentences with the same words then need sent_ids).
    - otherwise inline trees, one per line, blocks separated by blank lines (as parsing.py's proposal files).

Results: with `output_dir`, `uas-<gold name>.json` (beam) or `uas-rerank-<gold name>.json` (reranking;
`-limit<N>` added with a limit, evaluation.results) and, per sentence, `<that stem>_sentences.jsonl`. The journal
`<stem>.journal.jsonl` keeps the parses (the proposals' log-probabilities) finished so far: an interrupted run
resumes from it and gives the numbers of an uninterrupted one; `overwrite` discards it.
"""

import dataclasses
import json
import unicodedata
from pathlib import Path

import numpy as np

from ..data.numbering import item_name, sentence_name
from ..search.beam import _sequence_positions, check_sentences, position_limit
from ..search.beam import score as beam_score
from ..checkpoints.checks import check_tokenizer_matches
from ..data.conllu_loader import read_conllu_file
from ..modeling.generation_slm import BeamSearchOptions
from ..runs.distributed import is_main_process, world_size
from ..modeling.grammars import grammar_for_config
from ..runs.journal import data_fingerprint, journaled_chunks, map_in_chunks, proposal_rounds, text_fingerprint
from ..search.scoring import joint_log_probs
from ..families import variant_for_config
from ..families.tree_formats import tree_format
from ..tokenization.dependency_trees import DependencyTree
from .results import evaluation_run, save_results

PUNCTUATION_RULES = {
    "upos": "words whose gold UPOS is PUNCT are not scored (Universal Dependencies)",
    "characters": "words made only of Unicode punctuation characters (general category P: Pc Pd Ps Pe Pi Pf Po) are "
                  "not scored (the CoNLL-X shared task's eval.pl rule; used when the gold words have no UPOS)",
    "none": "every word is scored, punctuation included",
}
PUNCTUATION_CHOICES = ("auto", "upos", "characters")
NO_UPOS = (None, "_", "")


# ---------------------------------------------------------------------------------------------------------
# The score


def is_punctuation_word(word):
    """Whether every character of `word` is Unicode punctuation (category P*), the "characters" rule."""
    return bool(word) and all(unicodedata.category(character).startswith("P") for character in word)


def _has_upos(sentence):
    upos = sentence.get("upos")
    return upos is not None and all(tag not in NO_UPOS for tag in upos)


def resolve_punctuation_rule(gold, include_punctuation=False, punctuation_rule="auto"):
    """The rule (a key of PUNCTUATION_RULES) for gold sentences (`gold_sentences`' dicts): "none" when
    punctuation is included; for "auto", "upos" when every gold word has a UPOS, else "characters"."""
    if punctuation_rule not in PUNCTUATION_CHOICES:
        raise ValueError(f"punctuation_rule must be one of {PUNCTUATION_CHOICES}, got {punctuation_rule!r}")
    if include_punctuation:
        return "none"
    if punctuation_rule == "upos":
        missing = next((s for s in gold if not _has_upos(s)), None)
        if missing is not None:
            raise ValueError(f"{missing['source']}: punctuation_rule 'upos' needs a UPOS for every gold word; this "
                             "sentence has none (or '_'): use 'auto' or 'characters'")
        return "upos"
    if punctuation_rule == "characters":
        return "characters"
    return "upos" if all(_has_upos(s) for s in gold) else "characters"


def scored_words(sentence, rule):
    """Per word of a gold sentence, whether it is scored under `rule` (module docstring)."""
    if rule == "none":
        return [True] * len(sentence["words"])
    if rule == "upos":
        return [tag != "PUNCT" for tag in sentence["upos"]]
    return [not is_punctuation_word(word) for word in sentence["words"]]


def sentence_attachment(gold_heads, predicted_heads, scored=None):
    """{"correct", "scored", "uas"}: heads predicted right among the scored words (`scored`: one bool per word;
    None: all), and their percentage (None when no word is scored)."""
    if len(predicted_heads) != len(gold_heads):
        raise ValueError(f"{len(predicted_heads)} predicted heads for {len(gold_heads)} gold words; expected one "
                         "head per word")
    scored = [True] * len(gold_heads) if scored is None else list(scored)
    correct = sum(1 for g, p, s in zip(gold_heads, predicted_heads, scored) if s and int(g) == int(p))
    count = sum(1 for s in scored if s)
    return {"correct": correct, "scored": count, "uas": 100.0 * correct / count if count else None}


def _corpus(scores):
    """Micro-averaged UAS of per-sentence {"correct", "scored"} counts."""
    correct, count = sum(s["correct"] for s in scores), sum(s["scored"] for s in scores)
    return {"uas": 100.0 * correct / count if count else None, "correct": correct, "scored_tokens": count}


def _heads(predicted, where):
    if predicted is None or isinstance(predicted, (list, tuple)) and all(isinstance(h, (int, np.integer))
                                                                          for h in predicted):
        return None if predicted is None else [int(h) for h in predicted]
    return list(_dependency_tree(predicted, where).heads)


def attachment_score(gold, predicted, include_punctuation=False, punctuation_rule="auto"):
    """Corpus and per-sentence UAS of predicted heads against gold.

    Args:
        gold: a CoNLL-U file, or gold sentences in memory (module docstring).
        predicted: per gold sentence its predicted heads (ints, 1-based, 0 = the root), a DependencyTree or an
            inline tree; None for a sentence left out (not scored, counted in `sentences_left_out`).
        include_punctuation: score every word.
        punctuation_rule: "auto", "upos" or "characters" (module docstring).

    Returns:
        {"uas" (percent, micro-averaged; None when nothing is scored), "correct", "scored_tokens", "tokens" (words
        of the scored sentences), "punctuation_excluded" (words not scored), "sentences", "sentences_left_out",
        "punctuation": {"rule", "excluded", "description"}, "all_words": {"uas", "correct", "scored_tokens"},
        "per_sentence": one {"correct", "scored", "uas"} per gold sentence (None when left out),
        "units": "percent"}
    """
    sentences = gold_sentences(gold)
    predicted = list(predicted)
    if len(predicted) != len(sentences):
        raise ValueError(f"{len(predicted)} predicted trees for {len(sentences)} gold sentences; expected one per "
                         "gold sentence (None for one left out)")
    rule = resolve_punctuation_rule(sentences, include_punctuation, punctuation_rule)
    metrics, per_sentence = _metrics(sentences, [_heads(heads, f"predicted tree {index}")
                                                 for index, heads in enumerate(predicted)], rule)
    return {**metrics, "per_sentence": per_sentence}


def _metrics(sentences, predicted, rule):
    """(`attachment_score`'s metrics less per_sentence, per_sentence) of predicted heads (None: left out) under
    a rule already chosen."""
    per_sentence, all_words = [], []
    for sentence, heads in zip(sentences, predicted):
        if heads is None:
            per_sentence.append(None)
            continue
        try:
            per_sentence.append(sentence_attachment(sentence["heads"], heads, scored_words(sentence, rule)))
        except ValueError as error:
            raise ValueError(f"{sentence['source']}: {error}") from None
        all_words.append(sentence_attachment(sentence["heads"], heads))
    scored = [s for s in per_sentence if s is not None]
    metrics = _corpus(scored)
    tokens = sum(len(s["words"]) for s, score in zip(sentences, per_sentence) if score is not None)
    metrics.update(
        tokens=tokens, punctuation_excluded=tokens - metrics["scored_tokens"], sentences=len(scored),
        sentences_left_out=len(per_sentence) - len(scored),
        punctuation={"rule": rule, "excluded": rule != "none", "description": PUNCTUATION_RULES[rule]},
        all_words=_corpus(all_words), units="percent",
    )
    return metrics, per_sentence


# ---------------------------------------------------------------------------------------------------------
# Files


def _dependency_tree(item, where):
    if isinstance(item, DependencyTree):
        return item
    if isinstance(item, str):
        return DependencyTree.from_inline(item, where=where)
    if isinstance(item, dict) and "words" in item and "heads" in item:
        try:
            return DependencyTree(item["words"], item["heads"])
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
    raise ValueError(f"{where}: {type(item).__name__} is not a dependency tree; expected a DependencyTree, an inline "
                     "tree such as 'There/2 is/0 a/4 difference/2', or a mapping with 'words' and 'heads'")


def _needs_heads(error, what):
    """A CoNLL-U reading error, with what UAS needs when the file lacks heads."""
    message = str(error)
    if "has HEAD" in message:
        message += f"; UAS needs {what} with heads: a CoNLL-U file whose HEAD column is filled"
    return ValueError(message)


def _conllu_examples(path, what):
    """The examples of a CoNLL-U file (read_conllu_file), lazily, with `what` named when it has no heads."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{what} {str(path)!r} {'is a directory' if path.is_dir() else 'does not exist'}; expected "
                         "a CoNLL-U file")
    examples = read_conllu_file(path, str(path))
    while True:
        try:
            example = next(examples)
        except StopIteration:
            return
        except ValueError as error:
            raise _needs_heads(error, what) from None
        yield example


def gold_sentences(gold, limit=None):
    """The gold sentences as dicts {"words", "heads", "upos" (None without), "sent_id", "source"}: from a CoNLL-U
    file, or from mappings, DependencyTree objects or inline trees in memory (module docstring)."""
    if isinstance(gold, (str, Path)):
        sentences = []
        for example in _conllu_examples(gold, "gold file"):
            if limit is not None and len(sentences) >= limit:
                break
            sentences.append({"words": example["words"], "heads": example["heads"], "upos": example["upos"],
                              "sent_id": example["sent_id"],
                              "source": f"{gold}, {sentence_name(example['index'])}"
                                        + (f" ({example['sent_id']})" if example["sent_id"] else "")})
        if not sentences and limit != 0:
            raise ValueError(f"gold file {gold}: no sentences; expected CoNLL-U sentences with heads")
        return sentences
    if _read_already(gold):
        return gold[:limit] if limit is not None else gold
    sentences = []
    for index, item in enumerate(gold):
        if limit is not None and index >= limit:
            break
        where = f"gold {sentence_name(index)}"
        tree = _dependency_tree(item, where)
        upos = item.get("upos") if isinstance(item, dict) else None
        if upos is not None and len(upos) != len(tree.words):
            raise ValueError(f"{where}: {len(upos)} UPOS tags for {len(tree.words)} words; expected one per word")
        sentences.append({"words": list(tree.words), "heads": list(tree.heads), "upos": upos,
                          "sent_id": item.get("sent_id") if isinstance(item, dict) else None, "source": where})
    return sentences


def _read_already(gold):
    """Whether `gold` is a list of `gold_sentences` dicts (read once, passed on)."""
    return bool(gold) and isinstance(gold, list) and all(isinstance(s, dict) and "source" in s for s in gold)


def proposal_blocks(proposals):
    """Yield (trees, locations, sent_id) per sentence of a proposal file (read by the dependency format,
    hf_slm/families/tree_formats.py, as every evaluation reads proposals) or of lists in memory (one list of
    DependencyTree objects, inline trees or mappings per sentence); locations name each tree in errors."""
    if isinstance(proposals, (str, Path)):
        blocks = tree_format("dependency").proposal_blocks(proposals)
        while True:
            try:
                yield next(blocks)
            except StopIteration:
                return
            except ValueError as error:
                raise _needs_heads(error, "proposal file") from None
    for index, block in enumerate(proposals):
        where = [f"{sentence_name(index)}, {item_name('proposal', j)}" for j in range(len(block))]
        yield [_dependency_tree(tree, w) for tree, w in zip(block, where)], where, None


def write_dependency_proposals(path, proposals):
    """Write proposal blocks (trees as accepted by proposal_blocks) as inline trees, blocks separated by blank
    lines (module docstring)."""
    blocks = []
    for index, block in enumerate(proposals):
        if not len(block):
            raise ValueError(f"{sentence_name(index)} has no proposal trees; expected at least one")
        blocks.append("\n".join(_dependency_tree(t, sentence_name(index)).to_inline() for t in block))
    Path(path).write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------------------
# Scoring given trees


def dependency_log_probs(model, tokenizer, trees, batch_size=32):
    """log p(x, y) of each dependency tree (natural log), or a string saying why the model cannot build it.

    Trees (DependencyTree, inline trees or mappings with words and heads) are encoded by the tokenizer and scored
    with hf_slm.search.scoring.joint_log_probs, the function TG's reranking scores bracketed trees with. The transition
    systems build projective trees only, so a non-projective tree has probability 0 under the model; it, and a
    tree with more positions than the model reads, gets the reason instead of a number.
    """
    trees = [_dependency_tree(tree, f"tree {index}") for index, tree in enumerate(trees)]
    grammar = grammar_for_config(model.config)
    limit, field = position_limit(model.config)
    results = [None] * len(trees)
    projective = []
    for index, tree in enumerate(trees):
        crossing = tree.crossing_arcs()
        if crossing is None:
            projective.append(index)
        else:
            (h1, d1), (h2, d2) = crossing
            results[index] = (f"not projective (the arcs {h1} -> {d1} and {h2} -> {d2} cross): the model builds "
                              "projective trees only")
    if not projective:
        return results
    # As the dependency format hands trees to a tokenizer (mappings: a checkpoint's hub code has its own DependencyTree
    # class, and an inline tree of a word with a bracket would read as PTB brackets).
    texts = [tree_format("dependency").encodable(trees[i]) for i in projective]
    try:
        encoded = tokenizer(texts)["input_ids"]
    except ValueError:  # one tree the tokenizer cannot encode (arc-swift: an arc past its max_k): find which
        encoded = []
        for index, text in zip(projective, texts):
            try:
                encoded.append(tokenizer(text)["input_ids"])
            except ValueError as error:
                encoded.append(None)
                results[index] = f"cannot be encoded: {error}"
    scorable = []
    for index, ids in zip(projective, encoded):
        if ids is None:
            continue
        # No grammar gives an action more than two positions (an arc's COMPOSE and STACK copies): only
        # sequences near the limit are expanded to count their positions.
        positions = _sequence_positions(grammar, ids) if limit is not None and 2 * len(ids) > limit else 0
        if limit is not None and positions > limit:
            results[index] = f"takes {positions} positions, more than the model's maximum of {limit} (config.{field})"
        else:
            scorable.append((index, ids))
    # Similar lengths batch together (less padding); results go back to tree order.
    scorable.sort(key=lambda item: len(item[1]))
    scores = joint_log_probs(model, [ids for _, ids in scorable], batch_size=batch_size) if scorable else []
    for (index, _), value in zip(scorable, scores):
        results[index] = float(value)
    return results


# ---------------------------------------------------------------------------------------------------------
# Shared by both evaluations


def _check_dependency_model(model, tokenizer, what):
    """Attachment scores need a model whose trees are dependency trees (its variant's tree format, in its family's
    record)."""
    variant = variant_for_config(model.config)
    if variant.tree_format != "dependency":
        raise ValueError(f"{what} needs a model of dependency trees; a {variant.display_name} model writes "
                         f"{tree_format(variant.tree_format).description}, which have no heads (bracketing F1 of "
                         "a constituency model: hf-slm eval parse / eval rerank)")
    check_tokenizer_matches(model.config, tokenizer)


def _gold(gold, limit):
    sentences = gold_sentences(gold, limit)
    source = str(gold) if isinstance(gold, (str, Path)) else "<trees in memory>"
    description = None if isinstance(gold, (str, Path)) else json.dumps(
        [[s["words"], s["heads"], s["upos"]] for s in sentences])
    return sentences, source, description


def _data(sentences, source, **more):
    return {"gold": source, "sentences": len(sentences), "words": sum(len(s["words"]) for s in sentences),
            "gold_non_projective": sum(1 for s in sentences if DependencyTree(s["words"], s["heads"]).crossing_arcs()),
            **more}


def _save(run, name, metrics, model, data, options, records):
    """Write the results and the per-sentence records of an EvaluationRun (nothing when run is None); adds
    metrics["files"]."""
    if run is None:
        return
    files = {"json": save_results(run.directory, name, metrics, model, data, options, stem=run.stem),
             "sentences": run.path("_sentences.jsonl")}
    with open(files["sentences"], "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
    metrics["files"] = {kind: str(path) for kind, path in files.items()}


def _record(index, sentence, heads=None, score=None, rule="none", **more):
    record = {"index": index, "sent_id": sentence["sent_id"], "words": sentence["words"],
              "gold_heads": sentence["heads"]}
    if heads is None:
        return {**record, **more}
    excluded = [position for position, kept in enumerate(scored_words(sentence, rule), start=1) if not kept]
    return {**record, "predicted_heads": heads, "correct": score["correct"], "scored_tokens": score["scored"],
            "uas": score["uas"], "excluded_as_punctuation": excluded, **more}


# ---------------------------------------------------------------------------------------------------------
# The beam's best tree


def parse_uas(model, tokenizer, gold, limit=None, batch_size=8, include_punctuation=False, punctuation_rule="auto",
              progress=True, output_dir=None, overwrite=False, on_error="skip", **beam_options):
    """UAS of the best tree word-synchronous beam search finds for the gold words.

    Args:
        model, tokenizer: a dependency checkpoint (DTG) and its tokenizer.
        gold: a CoNLL-U file or gold sentences in memory (module docstring).
        limit: evaluate only the first `limit` sentences.
        batch_size: sentences per beam-search batch.
        include_punctuation, punctuation_rule: which words are scored (module docstring).
        progress: show a progress bar over sentences.
        output_dir: if given, write `uas-<gold name>.json` (save_results), `<that stem>_sentences.jsonl` and the
            journal of the parses finished so far there (module docstring).
        overwrite: discard the journal of an earlier run into the same file and start over.
        on_error: "skip" leaves out a sentence that cannot be parsed (module docstring); "raise" stops before any
            search.
        beam_options: BeamSearchOptions fields (beam_size, word_beam_size, fast_track, ...).

    Returns:
        `attachment_score`'s metrics (less per_sentence) plus "parses" (how the trees were found), "beam" (every
        search setting), "left_out" (when any), "log_prob_units" ("nats", the best trees' log p(x, y) in the
        sentences file) and "files" (with output_dir).
    """
    _check_dependency_model(model, tokenizer, "UAS")
    sentences, source, description = _gold(gold, limit)
    rule = resolve_punctuation_rule(sentences, include_punctuation, punctuation_rule)
    search = dataclasses.asdict(BeamSearchOptions(**beam_options).check())
    search.pop("num_trees")
    words = [s["words"] for s in sentences]
    sources = [s["source"] for s in sentences]
    if on_error == "raise":  # stop before any search, not at the chunk that holds the sentence
        check_sentences(model, tokenizer, words, sources, on_error="raise")
    options = {"batch_size": batch_size, "limit": limit, "beam": search,
               "punctuation": {"rule": rule, "include_punctuation": include_punctuation}}

    def parse_chunk(chunk):
        found = beam_score(model, tokenizer, [words[i] for i in chunk], batch_size=batch_size, progress=False,
                           sources=[sources[i] for i in chunk], on_error=on_error, **beam_options)
        return [{"error": r["error"]} if "error" in r else {"tree": r["tree"], "log_prob": r["log_prob"]}
                for r in found]

    with evaluation_run(output_dir, "uas", gold, model, options, limit=limit, overwrite=overwrite,
                        data_description=description) as run:
        parses = map_in_chunks(parse_chunk, range(len(sentences)), batch_size,
                               run.journal if run is not None else None, progress=progress, desc="parsing",
                               unit="sentence")
        predicted, left_out = [], []
        for index, (sentence, parse) in enumerate(zip(sentences, parses)):
            if "error" in parse:
                predicted.append(None)
                left_out.append({"index": index, "source": sentence["source"], "error": parse["error"]})
                continue
            tree = DependencyTree.from_inline(parse["tree"], where=f"{sentence['source']}: the predicted tree")
            if list(tree.words) != list(sentence["words"]):
                raise ValueError(f"{sentence['source']}: the predicted tree {parse['tree'][:120]!r} does not have the "
                                 "gold words (a word with whitespace or '/' followed by digits?)")
            predicted.append(list(tree.heads))
        metrics, per_sentence = _metrics(sentences, predicted, rule)
        metrics["parses"] = (f"beam search: the best tree of word-synchronous beam search over the gold words "
                             f"(beam_size {search['beam_size']}, word_beam_size {search['word_beam_size']}, fast_track "
                             f"{search['fast_track']})")
        metrics["beam"] = search
        metrics["log_prob_units"] = "nats"
        if left_out:
            metrics["left_out"] = left_out
        records = [_record(i, s, heads, score, rule, log_prob=parse.get("log_prob"), tree=parse.get("tree"),
                           error=parse.get("error"))
                   for i, (s, heads, score, parse) in enumerate(zip(sentences, predicted, per_sentence, parses))]
        _save(run, "uas", metrics, model, _data(sentences, source), options,
              [{k: v for k, v in r.items() if v is not None or k in ("sent_id", "uas")} for r in records])
        return metrics


# ---------------------------------------------------------------------------------------------------------
# Reranking proposal trees


def _score_block_chunk(model, tokenizer, chunk, batch_size):
    """Per sentence of a chunk, per proposal, log p(x, y) or why it cannot be scored; proposals with the same
    heads are scored once."""
    unique, where = {}, []
    for _, trees, _ in chunk:
        for tree in trees:
            where.append(unique.setdefault(tree, len(unique)))
    values = dependency_log_probs(model, tokenizer, list(unique), batch_size=batch_size)
    results, start = [], 0
    for _, trees, _ in chunk:
        results.append([values[k] for k in where[start : start + len(trees)]])
        start += len(trees)
    return results


def _check_block(index, sentence, trees, locations, sent_id):
    if not trees:
        raise ValueError(f"{sentence_name(index)} has no proposal trees; expected at least one")
    if sent_id is not None and sentence["sent_id"] is not None and sent_id != sentence["sent_id"]:
        raise ValueError(f"{locations[0]}: proposal block {index + 1} has sent_id {sent_id!r} but gold sentence "
                         f"{index + 1} has {sentence['sent_id']!r}; expected the analyses of each gold sentence, in "
                         "gold order")
    for tree, location in zip(trees, locations):
        if list(tree.words) != list(sentence["words"]):
            raise ValueError(f"{location}: the proposal's words {' '.join(tree.words)[:100]!r} are not those of "
                             f"{sentence['source']} ({' '.join(sentence['words'])[:100]!r}); expected the analyses of "
                             "each gold sentence, in gold order")


def rerank_uas(model, tokenizer, gold, proposals, batch_size=32, limit=None, max_proposals=None,
               include_punctuation=False, punctuation_rule="auto", progress=True, output_dir=None, chunk_size=2048,
               overwrite=False, on_error="skip"):
    """UAS of the proposal tree with the highest log p(x, y) under the model, per gold sentence.

    Args:
        model, tokenizer: a dependency checkpoint (DTG) and its tokenizer.
        gold: a CoNLL-U file or gold sentences in memory (module docstring).
        proposals: a proposal file (CoNLL-U or inline trees, module docstring), or per gold sentence a list of
            trees (DependencyTree, inline trees or mappings with words and heads).
        batch_size: proposals per forward call.
        limit: evaluate only the first `limit` sentences.
        max_proposals: keep only the first this many proposals of each sentence (None: all).
        include_punctuation, punctuation_rule: which words are scored (module docstring).
        progress: show a progress bar over sentences.
        output_dir: if given, write `uas-rerank-<gold name>.json`, `<that stem>_sentences.jsonl` and the journal
            of the proposals scored so far there (module docstring).
        chunk_size: proposals scored together (bounds memory on 300-proposal files).
        overwrite: discard the journal of an earlier run into the same file and start over.
        on_error: "skip" leaves out a sentence none of whose proposals the model can build; "raise" stops there.

    Returns:
        `attachment_score`'s metrics of the chosen trees (less per_sentence), plus "first_proposal" and "oracle"
        ({"uas", "correct", "scored_tokens"} of those choices, on the same sentences), "parses", "proposals"
        (trees read), "proposals_not_scored" (trees the model cannot build), "left_out" (when any) and "files".
    """
    _check_dependency_model(model, tokenizer, "UAS by reranking")
    sentences, source, description = _gold(gold, limit)
    rule = resolve_punctuation_rule(sentences, include_punctuation, punctuation_rule)
    given = (data_fingerprint(proposals) if isinstance(proposals, (str, Path))
             else text_fingerprint(json.dumps([[_dependency_tree(t, "proposal").to_inline() for t in block]
                                               for block in proposals])))
    options = {"batch_size": batch_size, "limit": limit, "max_proposals": max_proposals,
               "punctuation": {"rule": rule, "include_punctuation": include_punctuation}}
    settings = dict(options, chunk_size=chunk_size, proposals=given)
    with evaluation_run(output_dir, "uas-rerank", gold, model, settings, limit=limit, overwrite=overwrite,
                        data_description=description) as run:
        if run is not None:
            run.journal.say_resumed([str(index) for index in range(len(sentences))], "sentence")
        blocks, values = [], []

        def evaluate_round(chunks):
            # Under torchrun each process scores one chunk of the round, and every process gets all of them.
            scored = journaled_chunks(run.journal if run is not None else None,
                                      [[str(index) for index, _, _ in chunk] for chunk in chunks],
                                      lambda position: _score_block_chunk(model, tokenizer, chunks[position],
                                                                          batch_size))
            for chunk, chunk_values in zip(chunks, scored):
                blocks.extend(trees for _, trees, _ in chunk)
                values.extend(chunk_values)

        def checked_blocks():
            for index, (trees, locations, sent_id) in enumerate(proposal_blocks(proposals)):
                if index >= len(sentences):
                    if limit is not None:
                        return
                    raise ValueError(f"more proposal blocks than the {len(sentences)} gold sentences; expected one "
                                     f"block per gold sentence (the extra block starts at {locations[0]})")
                _check_block(index, sentences[index], trees, locations, sent_id)
                if max_proposals is not None:
                    trees, locations = trees[:max_proposals], locations[:max_proposals]
                yield index, trees, locations

        count = proposal_rounds(checked_blocks(), evaluate_round, chunk_size, world_size(), len(sentences),
                                progress and is_main_process())
        if count < len(sentences):
            hint = ("; analyses without sent_id comments are grouped by their words, so two consecutive gold "
                    "sentences with the same words need sent_ids" if isinstance(proposals, (str, Path)) else "")
            raise ValueError(f"{count} proposal blocks for {len(sentences)} gold sentences; expected one block per "
                             f"gold sentence, in the same order{hint}")
        return _rerank_results(run, model, sentences, source, proposals, blocks, values, rule, options, on_error)


def _rerank_results(run, model, sentences, source, proposals, blocks, values, rule, options, on_error):
    chosen, first, oracle, left_out, records = [], [], [], [], []
    not_scored = 0
    for index, (sentence, trees, log_probs) in enumerate(zip(sentences, blocks, values)):
        numbers = [v if isinstance(v, (int, float)) else None for v in log_probs]
        not_scored += sum(1 for v in numbers if v is None)
        if all(v is None for v in numbers):
            problem = (f"{sentence['source']}: none of its {len(trees)} proposals can be scored by the model "
                       f"(the first: {log_probs[0]})")
            if on_error == "raise":
                raise ValueError(problem)
            left_out.append({"index": index, "source": sentence["source"], "error": problem})
            for choice in (chosen, first, oracle):
                choice.append(None)
            records.append(_record(index, sentence, error=problem, proposals=len(trees)))
            continue
        best = max(range(len(trees)), key=lambda j: (numbers[j] is not None, numbers[j] or 0.0, -j))
        correct = [sum(1 for g, p in zip(sentence["heads"], tree.heads) if g == p) for tree in trees]
        best_oracle = max(range(len(trees)), key=lambda j: (correct[j], -j))
        chosen.append(list(trees[best].heads))
        first.append(list(trees[0].heads))
        oracle.append(list(trees[best_oracle].heads))
        records.append((index, sentence, best, numbers, log_probs, best_oracle))
    metrics, per_sentence = _metrics(sentences, chosen, rule)
    first_metrics, first_scores = _metrics(sentences, first, rule)
    oracle_metrics, oracle_scores = _metrics(sentences, oracle, rule)
    for name, found in (("first_proposal", first_metrics), ("oracle", oracle_metrics)):
        metrics[name] = {key: found[key] for key in ("uas", "correct", "scored_tokens")}
    total = sum(len(trees) for trees in blocks)
    metrics.update(parses=f"reranking: per sentence, of its proposal trees, the one with the highest log p(x, y) "
                          f"under the model ({total} proposals for {len(sentences)} sentences)",
                   proposals=total, proposals_not_scored=not_scored, log_prob_units="nats")
    if left_out:
        metrics["left_out"] = left_out
    lines = []
    for record, score, first_score, oracle_score, heads in zip(records, per_sentence, first_scores, oracle_scores,
                                                                chosen):
        if isinstance(record, dict):
            lines.append(record)
            continue
        index, sentence, best, numbers, log_probs, best_oracle = record
        reasons = {str(j): v for j, v in enumerate(log_probs) if isinstance(v, str)}
        lines.append(_record(index, sentence, heads, score, rule, chosen=best, chosen_log_prob=numbers[best],
                             proposals=len(numbers), log_probs=numbers, first_proposal_uas=first_score["uas"],
                             oracle=best_oracle, oracle_uas=oracle_score["uas"],
                             **({"not_scored": reasons} if reasons else {})))
    data = _data(sentences, source, proposals=str(proposals) if isinstance(proposals, (str, Path)) else
                 "<trees in memory>", proposal_trees=total)
    _save(run, "uas-rerank", metrics, model, data, options, lines)
    return metrics


def evaluate_uas(model, tokenizer, gold, proposals=None, **options):
    """`rerank_uas` when proposals are given (beam options are then unused and dropped), else `parse_uas`."""
    if proposals is None:
        return parse_uas(model, tokenizer, gold, **options)
    beam_fields = {field.name for field in dataclasses.fields(BeamSearchOptions)}
    return rerank_uas(model, tokenizer, gold, proposals,
                      **{key: value for key, value in options.items() if key not in beam_fields})


__all__ = ["PUNCTUATION_RULES", "attachment_score", "dependency_log_probs", "evaluate_uas", "gold_sentences",
           "is_punctuation_word", "parse_uas", "proposal_blocks", "rerank_uas", "resolve_punctuation_rule",
           "scored_words", "sentence_attachment", "write_dependency_proposals"]
