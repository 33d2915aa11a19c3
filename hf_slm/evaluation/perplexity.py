"""Word-level perplexity: exact for models that score words exactly, an upper bound for syntactic ones (paper
000, 3.1), an approximation for syntactic ones at document level.

PPL(D) = exp(-sum_x log p(x) / N_w).

log p(x) comes from the model's Scorer (hf_slm/search/scorers.py, named by its family's record), which says what kind of
number it is:
- Exact (`Scorer.log_prob_estimate == "exact"`): a words-only grammar gives the joint log-probability of
  `<s> words </s>`; a model that marginalizes its structure inside (a recurrent one with its own parser) gives
  the same from its logits. The `</s>` prediction is included: following paper 000's footnote 3 ("+1 for the
  end-of-sequence token to model the termination of the sequence. This is only needed for the word-level language
  models"), N_w then counts one extra token per sentence for `</s>`. The metrics also give `perplexity_words_only_count`
  (the same log p(x) over the words alone) for comparison with a syntactic model's number on the same
  denominator.
- Syntactic models model p(x, y). p(x) = sum_y p(x, y) is intractable, so p(x) is
  bounded from below by a sum over some trees, and the perplexity from above:
    * proposals: log p(x) >= logsumexp_j log p(x, y_j) over the sentence's proposal trees (duplicates
      removed; the paper uses J = 300 unique trees per sentence from a discriminative RNNG, the same trees
      for every model);
    * beam (no proposal file): the mass of word-synchronous beam search's final beam (`hf_slm.score`).
  N_w counts the words only: the syntactic models end when the root closes, no `</s>` is predicted.
  Every such number is labelled an upper bound (`estimate: "upper bound"`, `is_upper_bound: true`, and the
  summary text says so).

Proposal files (hf_slm/evaluation/proposals.py): one block of candidate trees per sentence, in the order of the data,
in the format of the model's trees, read by that format (hf_slm/families/tree_formats.py): PTB brackets for TG and
its baselines, unlabelled (or labelled, then unlabelled) brackets for paper 003's variants, CoNLL-U or inline trees
for the dependency families. Each proposal's words must equal its sentence's words. A model whose scorer scores
no given trees (SOM's) refuses them; a words-only grammar, whose p(x) is exact, does not use them (a warning).

Data files: a CoNLL-U file (a .conllu / .conll name, or a first line that is a `#` comment or has tabs: one
sentence per CoNLL-U sentence, its words the FORM of the lines with an integer ID; hf_slm.data.conllu_loader), a
tree file (PTB brackets, one or many trees, POS tags allowed; the trees' words are used), or a text file with one
sentence per line, words separated by spaces. A file whose first non-blank line starts with "(" is a tree file.
Lines are checked by the rule of tokenization.trees.input_format: a line of a tree file that reads as an action
sequence, and a word with a bracket in a sentence file (a tree line there included), are errors naming the line.
With document_level=True, documents are separated by blank lines (CoNLL-U data is read at sentence level).

Document level (paper 000, 3.1) needs a document-level model (config.document_level: the trees of a
document follow each other after one `<s>`). For sentence i of a document the prefix is the concatenation
of the greedy best trees of sentences 1..i-1, and
    with proposals: log p(x_i | prefix) ~ logsumexp_j [log p(prefix + y_j) - log p(prefix)], the prefix
        growing by the highest-scoring proposal of each sentence;
    with the beam: log p(x_i | prefix) ~ the mass of the final beam of a search that starts after the
        prefix, which grows by the best tree of each final beam (`hf_slm.search.beam.score_documents`).
Both are approximations, not bounds: p(x_i | x_<i) sums over every tree of the earlier sentences, and
conditioning on their single greedy best tree instead can make sentence i more or less likely, so the
perplexity can come out above or below the true one. They are labelled so (`estimate: "approximation"`,
`is_upper_bound: false`, the summary says "approximation"). A document-level terminals model is exact:
log p(<s> the document's words </s>), N_w counting one `</s>` per document; its per-sentence numbers in
ppl-DATA_sentences.jsonl are the sums of each sentence's word-piece log-probabilities (the `</s>` goes to the
last sentence).

Log-probabilities (`log_prob_total`, ppl-DATA_sentences.jsonl) are natural logs; the outputs say "nats".
"""

import math
import re
from pathlib import Path

import numpy as np

from ..data.numbering import item_name, sentence_name
from ..search.beam import describe_left_out
from ..checkpoints.checks import check_tokenizer_matches
from ..families import variant_for_config
from ..runs.journal import data_fingerprint, map_in_chunks
from ..search.scorers import scorer_for, scorer_of
from ..search.search_scorer import joint_in_length_order, terminal_sequences
from ..data.conllu_loader import is_conllu_file, read_conllu_file
from ..data.text_files import check_text_file, open_text, read_text
from ..tokenization.trees import labelled_closing, normalize_tree, parse_trees, read_trees, read_words
from .proposals import (
    check_proposal_words, logsumexp, proposal_format, proposal_log_probs, read_proposal_blocks, read_proposals,
    unique_proposal_ids,
)
from .results import evaluation_run, save_results
from .steps import check_limit, file_names, journal_of, positions_scored, taken, uses_proposals, write_jsonl

BLANK_LINES = re.compile(r"\n[ \t\r\f\v]*\n")


def _normalization(tokenizer):
    return dict(getattr(tokenizer, "normalization", None) or {})


# ---- reading ------------------------------------------------------------------------------------------


def is_tree_file(path):
    """Whether the first non-blank line of `path` starts with "(" (a tree file, not plain text)."""
    with open_text(path, "data file") as handle:
        for line in handle:
            if line.strip():
                return line.lstrip().startswith("(")
    raise ValueError(f"data file {str(path)!r} is empty; expected trees or one sentence per line")


def read_sentences(path, normalization=None):
    """The sentences (lists of words) of a data file, in order (see `read_documents`)."""
    return read_documents(path, normalization)[0]


def _refuse_action_lines(text, path):
    """A tree file holds PTB brackets: a line that the rule of trees.input_format reads as an action sequence
    (`(S (NP the bird NP) S)`) would otherwise count the labels of its closings as words."""
    for number, line in enumerate(text.split("\n"), start=1):
        mark = labelled_closing(line.split())
        if mark is not None:
            token = line.split()[mark]
            raise ValueError(
                f"{path}, line {number}: {line.strip()[:60]!r} reads as an action sequence (its token {mark}, "
                f"{token!r}, closes {'(' + token[:-1]!r}), but a data file holds PTB brackets, e.g. "
                "'(S (NP the bird) (VP sings))', or one sentence of plain words per line"
            )


def _sentence_documents(text, path):
    """The blank-line separated documents of a sentence file, one sentence of plain words per line; a word
    with a bracket is an error naming the line (trees.read_words)."""
    documents, current = [], []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            current.append(read_words(line, f"{path}, line {number} (a file of sentences: its first line is no tree)"))
        elif current:
            documents.append(current)
            current = []
    return documents + [current] if current else documents


def read_documents(path, normalization=None, document_level=False):
    """Documents (lists of sentences, each a list of words) of a data file.

    Tree files are read with `normalization` (trees.normalize_tree options; the tokenizer's, so that the
    words match what the tokenizer would see); a line of one that reads as an action sequence is an error.
    In a sentence file a word with a bracket is an error naming the line (a tree line among sentences
    included). A CoNLL-U file gives the FORMs of each of its sentences. Without document_level the file is one document holding every sentence; with it, blank lines
    separate documents.
    """
    path = check_text_file(path, "data file")
    normalization = normalization or {}
    if is_conllu_file(path, "data file"):
        if document_level:
            raise ValueError(f"data file {path} is CoNLL-U, read one sentence at a time; document-level perplexity "
                             "reads documents of trees or sentences separated by blank lines")
        return [[example["words"] for example in read_conllu_file(path, str(path), heads=False)]]
    trees = is_tree_file(path)
    text = read_text(path, "data file")
    if not trees:
        documents = _sentence_documents(text, path)
        return documents if document_level else [[sentence for document in documents for sentence in document]]
    _refuse_action_lines(text, path)
    if not document_level:
        return [[list(tree.leaves()) for tree in read_trees(path, **normalization)]]
    documents = []
    for index, block in enumerate(b for b in BLANK_LINES.split(text) if b.strip()):
        parsed = parse_trees(block, source=f"{path}, document {index}")
        documents.append([list(normalize_tree(tree, **normalization).leaves()) for tree in parsed])
    return documents


# ---- log p(x) -----------------------------------------------------------------------------------------


def sentence_log_probs(model, tokenizer, sentences, batch_size=32, progress=True, on_error="skip", sources=None,
                       **beam_options):
    """log p(x) of each sentence (a list of words), natural log, by the model's Scorer (hf_slm/search/scorers.py):
    exact for a words-only grammar or a model with its own exact scorer, the final beam's mass of word-synchronous beam
    search (a lower bound) for syntactic models, searched with `beam_options`.
    A sentence that cannot be scored (hf_slm.search.beam.check_sentences) gets None, is named in `.left_out` of the
    returned SentenceResults and in a SentencesLeftOut warning; on_error="raise" raises instead. sources:
    how messages name each sentence (default "sentence i").
    """
    return scorer_for(model, tokenizer, **beam_options).log_probs(sentences, batch_size=batch_size, progress=progress,
                                                                  on_error=on_error, sources=sources)


# ---- document level -----------------------------------------------------------------------------------


def document_log_probs(score_sequences, documents, bos_token_id):
    """Greedy best-tree prefixes (paper 000, 3.1), for models whose grammar continues after a sentence.

    Args:
        score_sequences: maps a list of id sequences (`<s>` first) to their joint log-probabilities.
        documents: per document, per sentence, the candidate action-id lists of that sentence (no `<s>`).
        bos_token_id: the id of `<s>`.
    Returns per document the list of log p(x_i | prefix) approximations, one per sentence:
        logsumexp_j [log p(prefix + y_j)] - log p(prefix), where the prefix is `<s>` followed by the best
        candidate (highest log p(prefix + y_j)) of each earlier sentence. Sentence position i of all
        documents is scored in one call.
    """
    prefixes = [[bos_token_id] for _ in documents]
    prefix_log_probs = [0.0 for _ in documents]
    results = [[] for _ in documents]
    for position in range(max((len(d) for d in documents), default=0)):
        active = [k for k, document in enumerate(documents) if position < len(document)]
        sequences, owners = [], []
        for k in active:
            for candidate in documents[k][position]:
                sequences.append(prefixes[k] + list(candidate))
                owners.append(k)
        scores = score_sequences(sequences) if sequences else []
        for k in active:
            picks = [j for j, owner in enumerate(owners) if owner == k]
            if not picks:
                raise ValueError(f"{item_name('document', k)}, {sentence_name(position)}: expected at least one candidate tree")
            values = [scores[j] for j in picks]
            best = picks[int(np.argmax(values))]
            results[k].append(logsumexp(values) - prefix_log_probs[k])
            prefixes[k] = sequences[best]
            prefix_log_probs[k] = scores[best]
    return results


# ---- the evaluation -----------------------------------------------------------------------------------


# What kind of number each method gives: exact, an upper bound on the perplexity, or an approximation.
ESTIMATES = {
    "exact": "exact",
    "proposals": "upper bound",
    "beam": "upper bound",
    # Conditioning on one greedy tree of the earlier sentences instead of summing over their trees bounds
    # nothing (module docstring).
    "proposals_greedy_prefix": "approximation",
    "beam_greedy_prefix": "approximation",
}


def describe_perplexity(metrics):
    """One line for people: the number, whether it is exact, an upper bound or an approximation, and how it was
    computed."""
    how = {
        "exact": "log p(<s> words </s>) of a model that scores words exactly; N_w counts one </s> per sentence",
        "proposals": "p(x) >= sum of p(x, y) over the proposal trees of each sentence",
        "beam": "p(x) >= the mass of the final beam of word-synchronous beam search",
        "proposals_greedy_prefix": "proposal trees of each sentence after the greedy best trees of the sentences "
                                   "before it in its document",
        "beam_greedy_prefix": "the final beam of each sentence after the greedy best trees of the sentences "
                              "before it in its document",
    }[metrics["method"]]
    if metrics["method"] == "exact" and metrics.get("documents") is not None:
        how = "log p(<s> document </s>) of a model that scores words exactly; N_w counts one </s> per document"
    left_out = metrics.get("sentences_left_out")
    return (f"word perplexity {metrics['perplexity']:.3f} ({ESTIMATES[metrics['method']]}: {how}) on "
            f"{metrics['sentences']} sentences, {metrics['words']} words; total log p {metrics['log_prob_total']:.3f} "
            f"{metrics['log_prob_units']}" + (f"; {left_out} sentence(s) left out that cannot be scored: "
                                              f"{', '.join(entry['source'] for entry in metrics['left_out'][:10])}"
                                              if left_out else ""))


def _check_document_level(model):
    if not getattr(model.config, "document_level", False):
        raise ValueError(
            f"document-level perplexity needs a document-level model: this "
            f"{variant_for_config(model.config).display_name} model reads one "
            "sentence per sequence (config.document_level is False), so its numbers after a first sentence would "
            "mean nothing; train one on documents (tokenizer.encode_document) or use document_level=False"
        )


def _map_in_order(compute, items, order, batch_size, journal, progress, desc, unit):
    """[compute(chunk) values of every item], the items taken batch_size at a time in `order` (journaled under their
    positions), the values given back in the items' own order."""
    values = map_in_chunks(compute, [items[i] for i in order], batch_size, journal, keys=[str(i) for i in order],
                           progress=progress, desc=desc, unit=unit)
    result = [None] * len(items)
    for index, value in zip(order, values):
        result[index] = value
    return result


def _flat(per_document):
    """The items of every document, one list."""
    return [item for document in per_document for item in document]


def _log_probs_in_chunks(method, scorer, documents, blocks, batch_size, max_proposals, journal, progress,
                         document_level):
    """(log p of each sentence, proposals per sentence or None) by `method`, computed batch_size sentences
    (documents at document level) at a time, shortest sentences first. With a journal each chunk is recorded as
    soon as it is done, so that an interrupted run resumes where it stopped with the same numbers."""
    model, tokenizer = scorer.model, scorer.tokenizer
    sentences = _flat(documents)

    def in_chunks(compute, items, unit, by_length=False):
        order = sorted(range(len(items)), key=lambda i: len(items[i])) if by_length else list(range(len(items)))
        return _map_in_order(compute, items, order, batch_size, journal, progress, f"perplexity ({method})", unit)

    if method == "exact" and document_level:
        return _flat(in_chunks(lambda chunk: scorer.document_log_probs(chunk, batch_size, False),
                               documents, "document")), None
    if method in ("exact", "beam"):
        return in_chunks(lambda chunk: scorer.log_probs(chunk, batch_size=batch_size, progress=False),
                         sentences, "sentence", by_length=True), None
    if method == "beam_greedy_prefix":
        def compute(chunk):
            found = scorer.score_documents(chunk, batch_size=batch_size, progress=False)
            return [[result.get("log_prob") for result in document] for document in found]

        return _flat(in_chunks(compute, documents, "document")), None
    if method == "proposals_greedy_prefix":
        unique = iter(unique_proposal_ids(tokenizer, blocks, max_proposals))
        candidates = [[[ids[1:] for ids in next(unique)] for _ in document] for document in documents]
        counts = [len(c) for document in candidates for c in document]

        def compute(chunk):
            return document_log_probs(lambda sequences: joint_in_length_order(model, sequences, batch_size, False),
                                      chunk, model.config.bos_token_id)

        return _flat(in_chunks(compute, candidates, "document")), counts
    # proposals: per sentence (logsumexp over its proposals, their number, the best one)
    per_sentence = in_chunks(lambda chunk: proposal_log_probs(model, tokenizer, chunk, batch_size=batch_size,
                                                              progress=False, max_proposals=max_proposals),
                             blocks, "sentence")
    return [value[0] for value in per_sentence], [value[1] for value in per_sentence]


def _perplexity_metrics(method, log_probs, documents, sentences, exact, document_level, proposal_counts):
    """The metrics dict of `word_perplexity` (its docstring) from the per-sentence log-probabilities."""
    words = sum(len(s) for s in sentences)
    # One </s> per sequence: per sentence, or per document for a document-level model.
    denominator = words + ((len(documents) if document_level else len(sentences)) if exact else 0)
    total = float(sum(log_probs))
    metrics = {
        "perplexity": math.exp(-total / denominator),
        "log_prob_total": total,
        "log_prob_units": "nats",
        "words": words,
        "sentences": len(sentences),
        "estimate": ESTIMATES[method],
        "is_upper_bound": ESTIMATES[method] == "upper bound",
        "method": method,
        "denominator": denominator,
        "eos_counted": exact,
    }
    if document_level:
        metrics["documents"] = len(documents)
    if exact:
        metrics["perplexity_words_only_count"] = math.exp(-total / words)
    if proposal_counts is not None:
        metrics["proposals_per_sentence"] = {"min": min(proposal_counts), "max": max(proposal_counts),
                                             "mean": float(np.mean(proposal_counts))}
    metrics["summary"] = describe_perplexity(metrics)
    return metrics


def _sentence_names(path, count):
    """How messages name the first `count` sentences of a data file: `path:line` in a file of sentences (one per
    non-blank line), `path, tree k` in a tree file, `path, sentence k (sent_id)` in a CoNLL-U file (k from 1)."""
    if is_conllu_file(path, "data file"):
        return [f"{path}, {sentence_name(example['index'])}" + (f" ({example['sent_id']})" if example["sent_id"] else "")
                for example, _ in zip(read_conllu_file(path, str(path), heads=False), range(count))]
    if is_tree_file(path):
        return [f"{path}, tree {k}" for k in range(count)]
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    return [f"{path}:{number}" for number, line in enumerate(lines, start=1) if line.strip()][:count]


def _scorable(scorer, documents, names, on_error, document_level):
    """(the documents without the sentences that cannot be scored, the index of each kept sentence among all,
    the left-out sentences as hf_slm.search.beam.check_sentences gives them). At document level a sentence is scored
    after those before it, so the rest of a document goes with a left-out sentence."""
    _, _, left_out = scorer.check_sentences([s for d in documents for s in d], names, on_error)
    out = {entry["index"] for entry in left_out}
    kept_documents, kept, index = [], [], 0
    for document in documents:
        current, stopped = [], None
        for sentence in document:
            if index in out or (document_level and stopped):
                if index not in out:
                    left_out.append({"index": index, "source": names[index], "words": sentence,
                                     "error": f"{names[index]} is left out: it comes after {stopped} in its document"})
                stopped = stopped or names[index]
            else:
                current.append(sentence)
                kept.append(index)
            index += 1
        if current:
            kept_documents.append(current)
    if not kept:
        raise ValueError(f"no sentence can be scored: {describe_left_out(left_out, index)}")
    return kept_documents, kept, sorted(left_out, key=lambda entry: entry["index"])


def _evaluated_documents(model, tokenizer, data, document_level, limit):
    """The documents of `data` that are evaluated (all, or the first `limit` sentences, or documents at document
    level), read with the tokenizer's normalization; refuses document level for a model of sentences."""
    if document_level:
        _check_document_level(model)
    check_limit(limit, "documents" if document_level else "sentences")
    documents = read_documents(data, _normalization(tokenizer), document_level)
    if not any(documents):
        raise ValueError(f"data file {str(data)!r} holds no sentences")
    if limit is None:
        return documents
    return documents[:limit] if document_level else [documents[0][:limit]]


def _proposal_blocks(proposals, scorer, model, tokenizer, sentences, limit):
    """The blocks of proposal trees of the sentences, read by the model's tree format and checked against their
    words; None without proposals or for a model whose perplexity is exact (a warning). With a limit only the first
    blocks are read (the file may cover the whole data or just them)."""
    if not uses_proposals(proposals, scorer, "perplexity", stacklevel=3):
        return None
    blocks = read_proposal_blocks(proposals, model, tokenizer, limit=len(sentences) if limit is not None else None)
    check_proposal_words(sentences, blocks, str(proposals), proposal_format(model).name)
    return blocks


def _method(exact, document_level, with_proposals):
    """How log p(x) is computed (a key of ESTIMATES)."""
    if exact:
        return "exact"
    source = "proposals" if with_proposals else "beam"
    return f"{source}_greedy_prefix" if document_level else source


def _failed_searches(log_probs, kept, names, sentences):
    """Left-out entries of the scored sentences whose search failed (their log p is None)."""
    failed = [kept[position] for position, log_prob in enumerate(log_probs) if log_prob is None]
    return [{"index": index, "source": names[index], "words": sentences[index],
             "error": f"{names[index]}: its search failed (hf_slm.score on it says why)"} for index in failed]


def _add_proposals_and_left_out(metrics, model, with_proposals, left_out):
    """Add to the metrics the kind of proposal trees used and the sentences left out (their count, each one's
    index, source and error); the summary then names them."""
    if with_proposals:
        metrics["proposal_trees"] = proposal_format(model).description
    if left_out:
        metrics["sentences_left_out"] = len(left_out)
        metrics["left_out"] = [{key: entry[key] for key in ("index", "source", "error")} for entry in left_out]
        metrics["summary"] = describe_perplexity(metrics)


def _sentence_records(sentences, kept, log_probs, proposal_counts, left_out):
    """The lines of ppl-DATA_sentences.jsonl: one per sentence of the data, in order; a left-out one says why."""
    records = {entry["index"]: {"index": entry["index"], "words": len(entry["words"]), "error": entry["error"]}
               for entry in left_out}
    for position, (index, log_prob) in enumerate(zip(kept, log_probs)):
        records[index] = {"index": index, "words": len(sentences[index]), "log_prob": log_prob, "units": "nats"}
        if proposal_counts is not None:
            records[index]["proposals"] = proposal_counts[position]
    return [records[index] for index in sorted(records)]


def _write_perplexity_files(run, metrics, model, data, proposals, options, records):
    """Write the result JSON and the sentences' lines; returns {kind: path}."""
    described = {"path": str(data), "proposals": str(proposals) if proposals is not None else None,
                 "sentences": metrics["sentences"], "sentences_left_out": metrics.get("sentences_left_out", 0),
                 "words": metrics["words"]}
    files = {"json": save_results(run.directory, "ppl", metrics, model, described, options, stem=run.stem),
             "sentences": run.path("_sentences.jsonl")}
    write_jsonl(files["sentences"], records)
    return files


def word_perplexity(model, tokenizer, data, proposals=None, beam_options=None, document_level=False, batch_size=32,
                    limit=None, output_dir=None, max_proposals=None, progress=True, overwrite=False, on_error="skip",
                    scorer=None):
    """Word-level perplexity of `data` under `model` (see the module docstring for the method and formats).

    Args:
        data: a tree file or a text file with one sentence per line.
        proposals: a proposal file for syntactic models (one block of trees per sentence); without it,
            syntactic models use the final beam of word-synchronous beam search. Unused by an exact scorer.
        beam_options: BeamSearchOptions fields for the beam (beam_size, word_beam_size, ...).
        document_level: documents separated by blank lines, greedy best-tree prefixes (a document-level model,
            config.document_level, is required).
        batch_size: sequences per forward call (proposal / exact scoring) or sentences per beam search batch.
        limit: only the first `limit` sentences (documents with document_level).
        output_dir: when given, write `ppl-<data name>.json` (save_results; `-limit<N>` added with a limit),
            `<that stem>_sentences.jsonl` and the journal `<that stem>.journal.jsonl` there; a run that was
            interrupted resumes from the journal (evaluation.results, hf_slm.runs.journal).
        max_proposals: keep at most this many distinct proposals per sentence (the paper: J = 300).
        progress: show progress bars.
        overwrite: discard the journal of an earlier run into the same file (another model, other settings or
            other data of the same name are refused without it) and start over.
        scorer: the Scorer (hf_slm/search/scorers.py) that gives log p(x); default: the model's family's, with
            `beam_options` (which must then be left out). An exact scorer (a words-only grammar, SOM) makes the
            perplexity exact; proposals are then unused.
        on_error: a sentence that cannot be scored (hf_slm.search.beam.check_sentences: empty, a word without pieces,
            too long for the model even as its shortest tree; or its search failed) is left out with "skip":
            the numbers are over the others, `sentences_left_out` counts and `left_out` names them
            ([{"index", "source", "error"}], source `file:line` or `file, tree k`; at document level the rest
            of its document goes with it), and `<stem>_sentences.jsonl` gives them an "error". "raise"
            raises ValueError before anything is scored.
    Returns metrics: perplexity, log_prob_total (nats), log_prob_units ("nats"), words, sentences, method
        ("exact", "proposals", "beam", "proposals_greedy_prefix" or "beam_greedy_prefix"), estimate ("exact",
        "upper bound" or, for the greedy-prefix methods, "approximation"), is_upper_bound, denominator (the
        N_w used), eos_counted, summary (a sentence that starts its parenthesis with the estimate), documents
        with document_level, and proposal counts when proposals are used.
    """
    check_tokenizer_matches(model.config, tokenizer)
    scorer = scorer_of(model, tokenizer, scorer, **(beam_options or {}))
    exact = scorer.log_prob_estimate == "exact"  # one </s> per sequence is scored and counted
    documents = _evaluated_documents(model, tokenizer, data, document_level, limit)
    sentences = _flat(documents)
    blocks = _proposal_blocks(proposals, scorer, model, tokenizer, sentences, limit)
    # Every sentence is checked before anything is scored; those that cannot be are left out and named.
    names = _sentence_names(data, len(sentences))
    documents, kept, left_out = _scorable(scorer, documents, names, on_error, document_level)
    blocks = taken(blocks, kept)
    method = _method(exact, document_level, blocks is not None)
    options = {"method": method, "document_level": document_level, "limit": limit, "batch_size": batch_size,
               "max_proposals": max_proposals,
               "beam_options": scorer.search_options if method.startswith("beam") else None}
    settings = dict(options, proposals=data_fingerprint(proposals) if blocks is not None else None)
    with evaluation_run(output_dir, "ppl", data, model, settings, limit=limit, overwrite=overwrite) as run:
        log_probs, proposal_counts = _log_probs_in_chunks(method, scorer, documents, blocks, batch_size, max_proposals,
                                                          journal_of(run), progress, document_level)
        left_out = sorted(left_out + _failed_searches(log_probs, kept, names, sentences),
                          key=lambda entry: entry["index"])
        scored = positions_scored(log_probs)
        log_probs, kept, proposal_counts = taken(log_probs, scored), taken(kept, scored), taken(proposal_counts, scored)
        metrics = _perplexity_metrics(method, log_probs, documents, taken(sentences, kept), exact, document_level,
                                      proposal_counts)
        _add_proposals_and_left_out(metrics, model, blocks is not None, left_out)
        if run is not None:
            records = _sentence_records(sentences, kept, log_probs, proposal_counts, left_out)
            metrics["files"] = file_names(_write_perplexity_files(run, metrics, model, data, proposals, options,
                                                                  records))
    return metrics


__all__ = [
    "check_proposal_words",
    "describe_perplexity",
    "document_log_probs",
    "is_tree_file",
    "proposal_log_probs",
    "read_documents",
    "read_proposals",
    "read_sentences",
    "sentence_log_probs",
    "terminal_sequences",
    "unique_proposal_ids",
    "word_perplexity",
]
