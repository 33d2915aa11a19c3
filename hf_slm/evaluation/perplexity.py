"""Word-level perplexity: exact for terminals models, an upper bound for syntactic ones (paper 000, 3.1), an
approximation for syntactic ones at document level.

PPL(D) = exp(-sum_x log p(x) / N_w).

- TXL (terminals) models (grammar "terminals") give p(x) exactly: the joint log-probability of
  `<s> words </s>`, the `</s>` prediction included. Following paper 000's footnote 3 ("+1 for the
  end-of-sequence token to model the termination of the sequence. This is only needed for the word-level
  language models"), N_w then counts one extra token per sentence for `</s>`. The metrics also give
  `perplexity_words_only_count` (the same log p(x) over the words alone) for comparison with a syntactic
  model's number on the same denominator.
- Syntactic models (tg, choe_charniak) model p(x, y). p(x) = sum_y p(x, y) is intractable, so p(x) is
  bounded from below by a sum over some trees, and the perplexity from above:
    * proposals: log p(x) >= logsumexp_j log p(x, y_j) over the sentence's proposal trees (duplicates
      removed; the paper uses J = 300 unique trees per sentence from a discriminative RNNG, the same trees
      for every model);
    * beam (no proposal file): the mass of word-synchronous beam search's final beam (`hf_slm.score`).
  N_w counts the words only: the syntactic models end when the root closes, no `</s>` is predicted.
  Every such number is labelled an upper bound (`estimate: "upper bound"`, `is_upper_bound: true`, and the
  summary text says so).

Proposal file format (the one of hf_slm.evaluation.parsing, whose reader is used): a UTF-8 text file with one
block per sentence, in the order of the data; a block holds that sentence's candidate trees, one bracketed
PTB tree per line (POS tags allowed; trees are normalized with the tokenizer's options, as the tokenizer
normalizes bracketed input); blocks are separated by one or more blank lines. Each proposal's words must
equal its sentence's words.

Data files: a tree file (PTB brackets, one or many trees, POS tags allowed; the trees' words are used), or a
text file with one sentence per line, words separated by spaces. A file whose first non-blank line starts
with "(" is a tree file. With document_level=True, documents are separated by blank lines.

Document level (paper 000, 3.1) needs a document-level model (config.document_level: the trees of a
document follow each other after one `<s>`). For sentence i of a document the prefix is the concatenation
of the greedy best trees of sentences 1..i-1, and
    with proposals: log p(x_i | prefix) ~ logsumexp_j [log p(prefix + y_j) - log p(prefix)], the prefix
        growing by the highest-scoring proposal of each sentence;
    with the beam: log p(x_i | prefix) ~ the mass of the final beam of a search that starts after the
        prefix, which grows by the best tree of each final beam (`hf_slm.beam.score_documents`).
Both are approximations, not bounds: p(x_i | x_<i) sums over every tree of the earlier sentences, and
conditioning on their single greedy best tree instead can make sentence i more or less likely, so the
perplexity can come out above or below the true one. They are labelled so (`estimate: "approximation"`,
`is_upper_bound: false`, the summary says "approximation"). A document-level terminals model is exact:
log p(<s> the document's words </s>), N_w counting one `</s>` per document; its per-sentence numbers in
ppl_sentences.jsonl are the sums of each sentence's word-piece log-probabilities (the `</s>` goes to the
last sentence).

Log-probabilities (`log_prob_total`, ppl_sentences.jsonl) are natural logs; the outputs say "nats".
"""

import json
import math
import re
import warnings
from pathlib import Path

import numpy as np

from ..beam import score as beam_score
from ..beam import score_documents
from ..checks import check_tokenizer_matches
from ..scoring import action_log_probs, joint_log_probs
from ..tokenization.trees import normalize_tree, parse_trees, read_trees
from .parsing import iter_proposals
from ..modeling.grammars import grammar_class
from .results import save_results

BLANK_LINES = re.compile(r"\n[ \t\r\f\v]*\n")


def _logsumexp(values):
    values = np.asarray(values, dtype=np.float64)
    top = values.max()
    if not np.isfinite(top):
        return float(top)
    return float(top + np.log(np.exp(values - top).sum()))


def _normalization(tokenizer):
    return dict(getattr(tokenizer, "normalization", None) or {})


# ---- reading ------------------------------------------------------------------------------------------


def is_tree_file(path):
    """Whether the first non-blank line of `path` starts with "(" (a tree file, not plain text)."""
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                return line.lstrip().startswith("(")
    raise ValueError(f"data file {str(path)!r} is empty; expected trees or one sentence per line")


def read_sentences(path, normalization=None):
    """The sentences (lists of words) of a data file, in order (see `read_documents`)."""
    return read_documents(path, normalization)[0]


def read_documents(path, normalization=None, document_level=False):
    """Documents (lists of sentences, each a list of words) of a data file.

    Tree files are read with `normalization` (trees.normalize_tree options; the tokenizer's, so that the
    words match what the tokenizer would see). Without document_level the file is one document holding
    every sentence; with it, blank lines separate documents.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"data file {str(path)!r} does not exist or is not a file")
    normalization = normalization or {}
    trees = is_tree_file(path)
    if not document_level:
        if trees:
            return [[list(tree.leaves()) for tree in read_trees(path, **normalization)]]
        text = path.read_text(encoding="utf-8")
        return [[line.split() for line in text.splitlines() if line.strip()]]
    documents = []
    text = path.read_text(encoding="utf-8")
    for index, block in enumerate(b for b in BLANK_LINES.split(text) if b.strip()):
        if trees:
            parsed = parse_trees(block, source=f"{path}, document {index}")
            document = [list(normalize_tree(tree, **normalization).leaves()) for tree in parsed]
        else:
            document = [line.split() for line in block.splitlines() if line.strip()]
        documents.append(document)
    return documents


def read_proposals(path, normalization=None, limit=None):
    """The proposal trees of a proposal file (format: module docstring; read by parsing.iter_proposals),
    normalized with `normalization`, as nltk Trees: one list per block (sentence), in file order, at most
    `limit` blocks."""
    normalization = normalization or {}
    blocks = []
    for index, (trees, lines) in enumerate(iter_proposals(path, limit=limit, with_lines=True)):
        normalized = []
        for j, (tree, line) in enumerate(zip(trees, lines)):
            try:
                normalized.append(normalize_tree(tree, **normalization))
            except ValueError as error:
                raise ValueError(f"{path}, line {line} (sentence {index}, proposal {j}): {error}") from error
        blocks.append(normalized)
    return blocks


def check_proposal_words(sentences, proposals, source="proposals"):
    """Raise ValueError unless there is one block per sentence and every proposal spells its sentence."""
    if len(proposals) != len(sentences):
        raise ValueError(
            f"{source}: {len(proposals)} block(s) of proposal trees for {len(sentences)} sentence(s); expected "
            "one block per sentence, in order, blocks separated by a blank line"
        )
    for index, (words, trees) in enumerate(zip(sentences, proposals)):
        for j, tree in enumerate(trees):
            leaves = list(tree.leaves())
            if leaves != list(words):
                position = next((k for k, (a, b) in enumerate(zip(leaves, words)) if a != b),
                                min(len(leaves), len(words)))
                raise ValueError(
                    f"{source}: sentence {index}, proposal {j} has the words {' '.join(leaves)!r} but the "
                    f"sentence is {' '.join(words)!r} (first difference at word {position}); expected the "
                    "same words in the same order"
                )


# ---- log p(x) -----------------------------------------------------------------------------------------


def _joint_in_length_order(model, sequences, batch_size, progress):
    """joint_log_probs of every sequence, batched by length (less padding), returned in input order."""
    if not sequences:
        return []
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
    scores = joint_log_probs(model, [sequences[i] for i in order], batch_size=batch_size, progress=progress)
    result = [0.0] * len(sequences)
    for position, index in enumerate(order):
        result[index] = scores[position]
    return result


def terminal_sequences(tokenizer, sentences):
    """`<s> pieces </s>` ids of each sentence, as the terminals linearization encodes a tree's words."""
    encoded = tokenizer(list(sentences), is_split_into_words=True)["input_ids"]
    return [list(ids) + [tokenizer.eos_token_id] for ids in encoded]


def sentence_log_probs(model, tokenizer, sentences, batch_size=32, progress=True, **beam_options):
    """log p(x) of each sentence (a list of words), natural log.

    Exact for terminals models (joint log-probability of `<s> words </s>`; beam options are unused); for
    syntactic models the mass of the final beam of word-synchronous beam search (a lower bound).
    """
    sentences = [list(words) for words in sentences]
    if grammar_class(model.config.grammar).words_only:
        return _joint_in_length_order(model, terminal_sequences(tokenizer, sentences), batch_size, progress)
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    results = beam_score(model, tokenizer, [sentences[i] for i in order], batch_size=batch_size,
                         progress=progress, **beam_options)
    log_probs = [0.0] * len(sentences)
    for position, index in enumerate(order):
        log_probs[index] = results[position]["log_prob"]
    return log_probs


def unique_proposal_ids(tokenizer, proposals, max_proposals=None):
    """Per sentence, the action ids (`<s>` first) of its distinct proposal trees, in file order.

    Trees are distinct when their action sequences differ (two trees that differ only in POS tags are one
    tree for the model). With max_proposals, only the first that many distinct trees are kept.
    """
    unique = []
    for trees in proposals:
        seen, kept = set(), []
        for ids in tokenizer(list(trees))["input_ids"] if trees else []:
            key = tuple(ids)
            if key not in seen:
                seen.add(key)
                kept.append(list(ids))
            if max_proposals is not None and len(kept) == max_proposals:
                break
        unique.append(kept)
    return unique


def proposal_log_probs(model, tokenizer, proposals, batch_size=32, progress=True, max_proposals=None):
    """Per sentence: (logsumexp_j log p(x, y_j) over its distinct proposals, number of distinct proposals,
    index of the best one among them)."""
    unique = unique_proposal_ids(tokenizer, proposals, max_proposals)
    flat = [ids for sentence in unique for ids in sentence]
    scores = _joint_in_length_order(model, flat, batch_size, progress)
    results, start = [], 0
    for sentence in unique:
        values = scores[start : start + len(sentence)]
        start += len(sentence)
        results.append((_logsumexp(values), len(values), int(np.argmax(values))))
    return results


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
                raise ValueError(f"document {k}, sentence {position}: expected at least one candidate tree")
            values = [scores[j] for j in picks]
            best = picks[int(np.argmax(values))]
            results[k].append(_logsumexp(values) - prefix_log_probs[k])
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
        "exact": "log p(<s> words </s>) of a terminals model; N_w counts one </s> per sentence",
        "proposals": "p(x) >= sum of p(x, y) over the proposal trees of each sentence",
        "beam": "p(x) >= the mass of the final beam of word-synchronous beam search",
        "proposals_greedy_prefix": "proposal trees of each sentence after the greedy best trees of the sentences "
                                   "before it in its document",
        "beam_greedy_prefix": "the final beam of each sentence after the greedy best trees of the sentences "
                              "before it in its document",
    }[metrics["method"]]
    if metrics["method"] == "exact" and metrics.get("documents") is not None:
        how = "log p(<s> document </s>) of a terminals model; N_w counts one </s> per document"
    return (f"word perplexity {metrics['perplexity']:.3f} ({ESTIMATES[metrics['method']]}: {how}) on "
            f"{metrics['sentences']} sentences, {metrics['words']} words; total log p {metrics['log_prob_total']:.3f} "
            f"{metrics['log_prob_units']}")


def _check_document_level(model):
    if not getattr(model.config, "document_level", False):
        raise ValueError(
            f"document-level perplexity needs a document-level model: this {model.config.grammar!r} model reads one "
            "sentence per sequence (config.document_level is False), so its numbers after a first sentence would "
            "mean nothing; train one on documents (tokenizer.encode_document) or use document_level=False"
        )


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


def word_perplexity(model, tokenizer, data, proposals=None, beam_options=None, document_level=False, batch_size=32,
                    limit=None, output_dir=None, max_proposals=None, progress=True):
    """Word-level perplexity of `data` under `model` (see the module docstring for the method and formats).

    Args:
        data: a tree file or a text file with one sentence per line.
        proposals: a proposal file for syntactic models (one block of trees per sentence); without it,
            syntactic models use the final beam of word-synchronous beam search. Unused for terminals models.
        beam_options: BeamSearchOptions fields for the beam (beam_size, word_beam_size, ...).
        document_level: documents separated by blank lines, greedy best-tree prefixes (a document-level model,
            config.document_level, is required).
        batch_size: sequences per forward call (proposal / exact scoring) or sentences per beam search batch.
        limit: only the first `limit` sentences (documents with document_level).
        output_dir: when given, write `ppl.json` (save_results) and `ppl_sentences.jsonl` there.
        max_proposals: keep at most this many distinct proposals per sentence (the paper: J = 300).
        progress: show progress bars.
    Returns metrics: perplexity, log_prob_total (nats), log_prob_units ("nats"), words, sentences, method
        ("exact", "proposals", "beam", "proposals_greedy_prefix" or "beam_greedy_prefix"), estimate ("exact",
        "upper bound" or, for the greedy-prefix methods, "approximation"), is_upper_bound, denominator (the
        N_w used), eos_counted, summary (a sentence that starts its parenthesis with the estimate), documents
        with document_level, and proposal counts when proposals are used.
    """
    check_tokenizer_matches(model.config, tokenizer)
    beam_options = dict(beam_options or {})
    terminals = grammar_class(model.config.grammar).words_only
    if document_level:
        _check_document_level(model)
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive number of {'documents' if document_level else 'sentences'}, "
                         f"got {limit!r}")
    normalization = _normalization(tokenizer)
    documents = read_documents(data, normalization, document_level)
    if not any(documents):
        raise ValueError(f"data file {str(data)!r} holds no sentences")
    if limit is not None:
        documents = documents[:limit] if document_level else [documents[0][:limit]]
    sentences = [sentence for document in documents for sentence in document]

    blocks = None
    if proposals is not None and terminals:
        warnings.warn("a terminals model's perplexity is exact; the proposal trees are not used", stacklevel=2)
    elif proposals is not None:
        # With a limit only the first blocks are read (the file may cover the whole data or just them).
        blocks = read_proposals(proposals, normalization, limit=len(sentences) if limit is not None else None)
        check_proposal_words(sentences, blocks, source=str(proposals))

    proposal_counts = None
    if terminals and document_level:
        method = "exact"
        per_document = document_terminal_log_probs(model, tokenizer, documents, batch_size, progress)
        log_probs = [lp for document in per_document for lp in document]
    elif terminals:
        method = "exact"
        log_probs = sentence_log_probs(model, tokenizer, sentences, batch_size=batch_size, progress=progress)
    elif document_level and blocks is None:
        method = "beam_greedy_prefix"
        per_document = score_documents(model, tokenizer, documents, batch_size=batch_size, progress=progress,
                                       **beam_options)
        log_probs = [result["log_prob"] for document in per_document for result in document]
    elif document_level:
        method = "proposals_greedy_prefix"
        unique = iter(unique_proposal_ids(tokenizer, blocks, max_proposals))
        candidates = [[[ids[1:] for ids in next(unique)] for _ in document] for document in documents]
        proposal_counts = [len(c) for document in candidates for c in document]
        per_document = document_log_probs(
            lambda sequences: _joint_in_length_order(model, sequences, batch_size, progress),
            candidates, model.config.bos_token_id)
        log_probs = [lp for document in per_document for lp in document]
    elif blocks is not None:
        method = "proposals"
        per_sentence = proposal_log_probs(model, tokenizer, blocks, batch_size=batch_size, progress=progress,
                                          max_proposals=max_proposals)
        log_probs = [lp for lp, _, _ in per_sentence]
        proposal_counts = [count for _, count, _ in per_sentence]
    else:
        method = "beam"
        log_probs = sentence_log_probs(model, tokenizer, sentences, batch_size=batch_size, progress=progress,
                                       **beam_options)

    words = sum(len(s) for s in sentences)
    # One </s> per sequence: per sentence, or per document for a document-level model.
    denominator = words + ((len(documents) if document_level else len(sentences)) if terminals else 0)
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
        "eos_counted": terminals,
    }
    if document_level:
        metrics["documents"] = len(documents)
    if terminals:
        metrics["perplexity_words_only_count"] = math.exp(-total / words)
    if proposal_counts is not None:
        metrics["proposals_per_sentence"] = {"min": min(proposal_counts), "max": max(proposal_counts),
                                             "mean": float(np.mean(proposal_counts))}
    metrics["summary"] = describe_perplexity(metrics)

    if output_dir is not None:
        directory = Path(output_dir)
        directory.mkdir(parents=True, exist_ok=True)
        options = {"method": method, "document_level": document_level, "limit": limit, "batch_size": batch_size,
                   "max_proposals": max_proposals, "beam_options": beam_options if method.startswith("beam") else None}
        described = {"path": str(data), "proposals": str(proposals) if proposals is not None else None,
                     "sentences": len(sentences), "words": words}
        save_results(directory, "ppl", metrics, model, described, options)
        with open(directory / "ppl_sentences.jsonl", "w", encoding="utf-8") as handle:
            for index, (sentence, log_prob) in enumerate(zip(sentences, log_probs)):
                record = {"index": index, "words": len(sentence), "log_prob": log_prob, "units": "nats"}
                if proposal_counts is not None:
                    record["proposals"] = proposal_counts[index]
                handle.write(json.dumps(record) + "\n")
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
