"""ROUGE-1/2/L of generated summaries, with bootstrap confidence intervals and the lead-1 baseline.

Paper 003 (section 3.3, Table 2) reports ROUGE-1, -2, -L and their mean R-AVG on XSum. This module scores
summaries that were generated elsewhere: it takes rows (document id, document, reference, generated summary
[, tree]) and generates nothing.

Scores: `rouge_score` (the reimplementation of ROUGE-1.5.5 that `evaluate`'s "rouge" wraps; evaluate.load
would fetch that wrapper from the Hub), F-measure, Porter stemming on, ROUGE-L over the whole summary
("rougeL", not the sentence-split "rougeLsum": XSum's summaries are one sentence). The corpus score is the
mean of the documents' F-measures, as rouge_score's aggregator and the papers take it; "rouge_avg" is the mean
of ROUGE-1, -2 and -L (paper 003's R-AVG). Values are fractions (1.0 = identical); the summary line prints
them x 100, as the papers do.

Words, not actions: a syntactic model's summary is a tree, and rouge_score's tokenizer would read its labels
as words ("(NP" -> "np"). `summary_words` takes the words out of a bracketed tree, a top-down action
sequence, an inline dependency tree or plain words. The reference and the lead sentence are split into
PTB-style words (hf_slm/data/sentence_splitting.py) like the documents the model read, so that both sides split
clitics alike ("don't" and the model's "do n't" would otherwise differ). PTB bracket escapes are undone
(-LRB- -> "("). rouge_score then lowercases, drops everything but letters and digits, and stems words longer
than 3 characters.

Lead-1: the first sentence of each document (`sentence_splitting.lead_sentence`), scored against the same
references in the same call, under "lead1".

Bootstrap: documents are resampled with replacement BOOTSTRAP_SAMPLES = 1000 times from numpy's
default_rng(BOOTSTRAP_SEED = 0); each interval is the percentile interval of the resampled means (2.5th and
97.5th percentiles for confidence 0.95). The model's and lead-1's scores share the resamples (a paired
bootstrap). Same rows, samples and seed: the same intervals.

Results: with `output_dir`, `rouge-<data name>.json` (evaluation/results.py: named by `data`) holds the
metrics, and `<that stem>_documents.jsonl` one row per document: id, reference, generated (the words
scored), tree, lead1 and both F-measures. The journal `<that stem>.journal.jsonl` keeps the documents'
scores: a run of other summaries, references or settings into the same file is refused unless overwrite.
"""

import json
import re

import numpy as np

from ..runs.journal import map_in_chunks
from ..data.sentence_splitting import lead_sentence, text_words, treebank_words
from ..families.tree_formats import tree_format
from ..tokenization.tree_type import Tree
from ..tokenization.trees import input_format, tree_to_string
from .results import evaluation_run, save_results

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
NAMES = {"rouge1": "R-1", "rouge2": "R-2", "rougeL": "R-L", "rouge_avg": "R-AVG"}
BOOTSTRAP_SAMPLES = 1000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95
# Documents scored (and journaled) at a time: scoring is fast, the journal only has to say which run it is.
CHUNK_DOCUMENTS = 1000
PTB_ESCAPES = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}"}
_BRACKET_TOKENS = re.compile(r"\(|\)|[^\s()]+")


def _unescaped(words):
    # Any case: lower-cased data (the XSum human-evaluation release) writes -lrb-.
    return [PTB_ESCAPES.get(word.upper(), word) for word in words]


def summary_words(summary):
    """The words of a generated summary, PTB bracket escapes undone.

    `summary` is a string, an nltk.Tree, or a list: a list of single tokens (no whitespace in any) is one
    sequence of actions or words; any other list holds one summary part (a sentence's tree) per item. A string
    is read as
    - an inline dependency tree (`There/2 is/0 a/4 difference/2`): the words before the slashes;
    - an unlabeled tree (`( ( the bird ) sings )`, paper 003's): every token but `(` and `)`;
    - a top-down action sequence (`(S (NP the bird NP) S)`, trees.input_format): every token but `(X` and
      `X)`; a sequence cut short, or several trees one after another, read the same way;
    - PTB brackets, with or without POS tags, one or several trees, complete or cut short: every token but the
      brackets and the label that follows each `(`;
    - otherwise plain words, split on whitespace.
    """
    if isinstance(summary, Tree):
        return _unescaped(summary.leaves())
    if isinstance(summary, (list, tuple)):
        if all(isinstance(item, str) and len(item.split()) == 1 for item in summary):
            return summary_words(" ".join(summary))
        return [word for part in summary for word in summary_words(part)]
    if not isinstance(summary, str):
        raise TypeError(f"a summary is a string, an nltk.Tree or a list of them, not {type(summary).__name__}")
    text = summary.strip()
    if not text:
        return []
    if tree_format("dependency").recognizes(text):  # inline `word/head`
        return _unescaped([item.rpartition("/")[0] for item in text.split()])
    if tree_format("unlabelled_brackets").recognizes(text):  # `(` and `)` are tokens, there are no labels
        return _unescaped([token for token in text.split() if token not in ("(", ")")])
    found = input_format(text)
    if found == "actions":
        return _unescaped([t for t in text.split() if not (t.startswith("(") or t.endswith(")"))])
    if found == "ptb":
        words, after_open = [], False
        for token in _BRACKET_TOKENS.findall(text):
            if token not in "()" and not after_open:
                words.append(token)
            after_open = token == "("
        return _unescaped(words)
    return _unescaped(text.split())


def _tree_of(summary):
    """The tree a generated summary was given as (a string, or an nltk.Tree written out), else None."""
    if isinstance(summary, Tree):
        return tree_to_string(summary)
    if isinstance(summary, str) and (tree_format("dependency").recognizes(summary) or input_format(summary) != "words"):
        return summary
    return None


class RougeScorer:
    """F-measures of ROUGE_TYPES between word lists, by rouge_score with stemming on (module docstring)."""

    def __init__(self):
        from rouge_score import rouge_scorer

        self._scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)

    def __call__(self, reference_words, candidate_words):
        """{rouge type: F-measure} of `candidate_words` against `reference_words` (lists of words)."""
        scores = self._scorer.score(" ".join(_unescaped(reference_words)), " ".join(_unescaped(candidate_words)))
        return {kind: float(scores[kind].fmeasure) for kind in ROUGE_TYPES}


def bootstrap_intervals(values, samples=BOOTSTRAP_SAMPLES, seed=BOOTSTRAP_SEED, confidence=CONFIDENCE):
    """(low, high): percentile bootstrap intervals of the column means of `values` (documents x metrics);
    every column uses the same resamples of the rows (module docstring)."""
    values = np.asarray(values, dtype=float)
    if values.ndim != 2 or not len(values):
        raise ValueError(f"expected a documents x metrics array with at least one document, got shape {values.shape}")
    if not (isinstance(samples, int) and samples >= 1):
        raise ValueError(f"bootstrap samples must be a positive integer, got {samples!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie between 0 and 1, got {confidence!r}")
    count = len(values)
    generator = np.random.default_rng(seed)
    means = np.empty((samples, values.shape[1]))
    block = max(1, 1_000_000 // count)  # resamples drawn at a time: about a million indices in memory
    for start in range(0, samples, block):
        size = min(block, samples - start)
        means[start : start + size] = values[generator.integers(0, count, size=(size, count))].mean(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail], axis=0)
    return low, high


# ---- rows ------------------------------------------------------------------------------------------------

ROW_FIELDS = ("id", "document", "reference", "generated", "tree")


def read_rows(rows):
    """The rows as dicts {"id", "document", "reference", "generated", "tree"}.

    A row is such a dict ("summary", XSum's column, may stand for "reference"; "tree" is optional), or a tuple
    (id, document, reference, generated[, tree]). Raises ValueError naming the row and its document id when a
    field is missing or not text, a reference is empty, or an id recurs.
    """
    read, seen = [], {}
    for position, row in enumerate(rows):
        if isinstance(row, dict):
            row = dict(row)
            if "reference" not in row and "summary" in row:
                row["reference"] = row["summary"]
            missing = [field for field in ROW_FIELDS[:4] if field not in row]
            if missing:
                raise ValueError(f"row {position}: missing field(s) {missing}; expected {list(ROW_FIELDS[:4])} and "
                                 "optionally 'tree'")
            row = {field: row.get(field) for field in ROW_FIELDS}
        elif isinstance(row, (tuple, list)) and len(row) in (4, 5):
            row = dict(zip(ROW_FIELDS, list(row) + [None] * (5 - len(row))))
        else:
            raise ValueError(f"row {position} is a {type(row).__name__}; expected a dict or a tuple (id, document, "
                             "reference, generated[, tree])")
        if isinstance(row["id"], bool) or not isinstance(row["id"], (str, int)):
            raise ValueError(f"row {position}: the document id is {row['id']!r}; expected a string or an integer")
        row["id"] = str(row["id"])
        where = f"row {position} (document {row['id']})"
        if row["id"] in seen:
            raise ValueError(f"{where}: the document id also names row {seen[row['id']]}; expected one row per "
                             "document")
        seen[row["id"]] = position
        for field in ("document", "reference"):
            if not isinstance(row[field], str):
                raise ValueError(f"{where}: the {field} is a {type(row[field]).__name__}; expected a string")
        if not text_words(row["reference"]):
            raise ValueError(f"{where}: the reference summary is empty; expected words to score against")
        if row["generated"] is None:
            raise ValueError(f"{where}: no generated summary; expected a string, a tree, or a list of them "
                             "('' for a summary the model left empty)")
        read.append(row)
    if not read:
        raise ValueError("no rows to score; expected (id, document, reference, generated) rows")
    return read


def _score_rows(scorer, rows, line_breaks):
    """Per row {"generated": [F per ROUGE type], "lead1": [...], "lead1_text": ...}."""
    values = []
    for row in rows:
        reference = text_words(row["reference"], line_breaks)
        lead = lead_sentence(row["document"], line_breaks)
        generated = scorer(reference, row["generated_words"])
        lead_scores = scorer(reference, treebank_words(lead) if lead else [])
        values.append({"generated": [generated[kind] for kind in ROUGE_TYPES],
                       "lead1": [lead_scores[kind] for kind in ROUGE_TYPES], "lead1_text": lead})
    return values


def _corpus_scores(matrix, low, high):
    """{metric: {"f_measure", "confidence_interval"}} of the columns of `matrix` (ROUGE_TYPES, then their mean)."""
    means = matrix.mean(axis=0)
    return {name: {"f_measure": float(means[j]), "confidence_interval": [float(low[j]), float(high[j])]}
            for j, name in enumerate((*ROUGE_TYPES, "rouge_avg"))}


def _line(scores):
    return ", ".join(f"{NAMES[name]} {100 * value['f_measure']:.2f} "
                     f"[{100 * value['confidence_interval'][0]:.2f}, {100 * value['confidence_interval'][1]:.2f}]"
                     for name, value in scores.items())


def evaluate_rouge(rows, data="in-memory", model=None, output_dir=None, bootstrap_samples=BOOTSTRAP_SAMPLES,
                   seed=BOOTSTRAP_SEED, confidence=CONFIDENCE, line_breaks=True, overwrite=False, progress=False):
    """ROUGE F-measures of generated summaries and of lead-1, with bootstrap intervals (module docstring).

    Args:
        rows: (id, document, reference, generated[, tree]) tuples or dicts (`read_rows`); `generated` is a
            string, a tree or a list of them (`summary_words`), '' for an empty summary.
        data: what names the result files: the path or name of the data (`rouge-<name>.json`).
        model: the model that generated the summaries, recorded with the results (None: none recorded).
        output_dir: if given, write the results, the per-document rows and the journal there.
        bootstrap_samples, seed, confidence: the bootstrap (module docstring).
        line_breaks: how documents and references split into sentences (hf_slm/data/sentence_splitting.py).
        overwrite: replace the results and journal of another run into the same files.
        progress: a progress bar over the documents.

    Returns the metrics: "rouge1", "rouge2", "rougeL", "rouge_avg" ({"f_measure", "confidence_interval"}),
    "lead1" (the same for lead-1), "documents", "empty_summaries", "units" ("fraction"), "bootstrap",
    "summary" (one line), "files" (with output_dir), and "per_document" (the rows of
    `<stem>_documents.jsonl`; not in the JSON file).
    """
    rows = read_rows(rows)
    for position, row in enumerate(rows):
        try:
            row["generated_words"] = summary_words(row["generated"])
        except TypeError as error:
            raise ValueError(f"row {position} (document {row['id']}): {error}") from None
    bootstrap = {"samples": bootstrap_samples, "seed": seed, "confidence": confidence,
                 "method": "percentile intervals; documents resampled with replacement; paired with lead-1"}
    options = {"rouge_types": list(ROUGE_TYPES), "measure": "F-measure", "use_stemmer": True,
               "words": "tree leaves / PTB words, rouge_score's tokenizer", "line_breaks": line_breaks,
               "bootstrap": bootstrap}
    described = json.dumps([[row["id"], row["document"], row["reference"], row["generated_words"]] for row in rows])
    scorer = RougeScorer()
    with evaluation_run(output_dir, "rouge", data, model, options, overwrite=overwrite,
                        data_description=described) as run:
        values = map_in_chunks(lambda chunk: _score_rows(scorer, chunk, line_breaks), rows, CHUNK_DOCUMENTS,
                               run.journal if run is not None else None, keys=[row["id"] for row in rows],
                               progress=progress, desc="ROUGE", unit="document")
        generated = np.array([value["generated"] for value in values])
        lead = np.array([value["lead1"] for value in values])
        matrix = np.column_stack([generated, generated.mean(axis=1), lead, lead.mean(axis=1)])
        low, high = bootstrap_intervals(matrix, bootstrap_samples, seed, confidence)
        width = len(ROUGE_TYPES) + 1
        metrics = _corpus_scores(matrix[:, :width], low[:width], high[:width])
        metrics["lead1"] = _corpus_scores(matrix[:, width:], low[width:], high[width:])
        metrics["documents"] = len(rows)
        metrics["empty_summaries"] = sum(1 for row in rows if not row["generated_words"])
        metrics["units"] = "fraction"
        metrics["bootstrap"] = bootstrap
        metrics["summary"] = (f"ROUGE F-measure x 100 (stemmed, {len(rows)} documents; {confidence:.0%} bootstrap "
                              f"intervals, {bootstrap_samples} resamples): {_line({k: metrics[k] for k in NAMES})}; "
                              f"lead-1: {_line(metrics['lead1'])}")
        per_document = []
        for row, value in zip(rows, values):
            per_document.append({
                "id": row["id"], "reference": row["reference"], "generated": " ".join(row["generated_words"]),
                "tree": row["tree"] if row["tree"] is not None else _tree_of(row["generated"]),
                "lead1": value["lead1_text"], "rouge": dict(zip(ROUGE_TYPES, value["generated"])),
                "lead1_rouge": dict(zip(ROUGE_TYPES, value["lead1"])), "units": "fraction"})
        if run is not None:
            files = {"json": save_results(run.directory, "rouge", metrics, model,
                                          {"data": str(data), "documents": len(rows)}, options, stem=run.stem),
                     "documents": run.path("_documents.jsonl")}
            with open(files["documents"], "w", encoding="utf-8") as handle:
                handle.writelines(json.dumps(row, default=str) + "\n" for row in per_document)
            metrics["files"] = {kind: str(path) for kind, path in files.items()}
    metrics["per_document"] = per_document
    return metrics


__all__ = ["BOOTSTRAP_SAMPLES", "BOOTSTRAP_SEED", "CONFIDENCE", "ROUGE_TYPES", "RougeScorer", "bootstrap_intervals",
           "evaluate_rouge", "read_rows", "summary_words"]
