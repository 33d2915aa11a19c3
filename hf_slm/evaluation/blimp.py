"""BLiMP (Warstadt et al., 2020): is log p(good) > log p(bad) for each minimal pair?

Data: the BLiMP jsonl files (one paradigm per file, 1,000 pairs each) with the fields sentence_good,
sentence_bad, field, linguistics_term, UID and pairID. One released file spells its field
"syntax/semantics" where the others write "syntax_semantics": fields are normalized ("/" and "-" read as "_").

Scoring: log p(x) of each whole sentence (the "simple LM method") by the model's Scorer (hf_slm/search/scorers.py):
exact for models of words (`<s> words </s>`: words-only grammars, SOM), the final beam's mass (a lower bound on
p(x)) for syntactic models. A pair counts as correct only when log p(good) > log p(bad) strictly (a tie is
wrong). Any other scorer can be passed as `scorer`: a Scorer, or a function from a list of sentences (lists of
words) to their log-probabilities.

Proposals (`proposals`, `hf-slm eval blimp --proposals`): instead of the beam, log p(x) >= logsumexp of log p(x, y)
over each sentence's proposal trees (hf_slm/evaluation/proposals.py: the model's own tree format reads the file, its
scorer scores the trees). The file holds two blocks per pair, the good sentence's then the bad one's, pairs in the
order of the data (files sorted by name, lines in order), covering all of it (with `limit` the blocks of the
pairs left out are skipped) or just the pairs evaluated (what `hf-slm eval blimp --proposal-parser` draws). Each proposal spells its sentence's words as split (`word_splitting`).

Words: BLiMP sentences are untokenized ("Katherine can't help herself."), while the training trees (PTB, GUM)
are PTB-tokenized. `ptb_words` splits them the PTB way: sentence-final ". ? !" and any ", ; :" at the end of a
word become their own words, and clitics are split off as in the treebank ("can't" -> "ca n't",
"won't" -> "wo n't", "cannot" -> "can not", "John's" -> "John 's", "they're" -> "they 're", the possessive
"guests'" -> "guests '"). Hyphenated words stay whole, as in the PTB. `word_splitting="whitespace"` keeps
the whitespace tokens as they are.

Aggregation, as the BLiMP paper reports it: accuracy per paradigm (UID); per field and per phenomenon
(linguistics_term) the mean over their paradigms; overall the mean over paradigms (`accuracy`), and the
share of all pairs (`accuracy_pairs`, equal to it when every paradigm has as many pairs).
"""

import re
from collections import defaultdict
from pathlib import Path

import numpy as np

from ..data.jsonl import iter_jsonl
from ..runs.journal import data_fingerprint, map_in_chunks
from ..search.scorers import Scorer, scorer_of
from .proposals import check_proposal_words, proposal_format, proposal_log_probs, read_proposal_blocks
from .results import evaluation_run, save_results
from .steps import (
    check_limit, distinct_sentences, file_names, journal_of, map_sentences, quoted_sentences, taken, uses_proposals,
    write_jsonl,
)

FIELDS = ("morphology", "semantics", "syntax", "syntax_semantics")

_CLITIC = re.compile(r"^(.+?)('s|'re|'ve|'ll|'d|'m)$", re.IGNORECASE)
_NEGATION = re.compile(r"^(.+?)(n't)$", re.IGNORECASE)
_CANNOT = re.compile(r"^(can)(not)$", re.IGNORECASE)
_POSSESSIVE_PLURAL = re.compile(r"^(.*s)(')$", re.IGNORECASE)


def normalize_field(field):
    """'syntax/semantics' and 'syntax-semantics' -> 'syntax_semantics'; other fields unchanged."""
    return re.sub(r"[/\-\s]+", "_", str(field).strip())


def _split_clitic(word):
    for pattern in (_NEGATION, _CANNOT, _CLITIC, _POSSESSIVE_PLURAL):
        match = pattern.match(word)
        if match and match.group(1).strip("'"):
            return [match.group(1), match.group(2)]
    return [word]


def ptb_words(sentence):
    """PTB-style words of an untokenized sentence (rules: module docstring)."""
    tokens = sentence.split()
    words = []
    for index, token in enumerate(tokens):
        trailing = []
        final = index == len(tokens) - 1
        while len(token) > 1 and (token[-1] in ",;:" or (final and token[-1] in ".?!")):
            trailing.insert(0, token[-1])
            token = token[:-1]
        words.extend(_split_clitic(token))
        words.extend(trailing)
    return words


def split_words(sentence, word_splitting="ptb"):
    if word_splitting == "ptb":
        return ptb_words(sentence)
    if word_splitting == "whitespace":
        return sentence.split()
    raise ValueError(f"word_splitting must be 'ptb' or 'whitespace', got {word_splitting!r}")


def _blimp_files(data):
    """The jsonl files of BLiMP data: every *.jsonl file of a directory, sorted, or the one file given."""
    path = Path(data)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ValueError(f"BLiMP data {str(path)!r} does not exist; expected a directory of .jsonl files or one file")
    files = sorted(path.glob("*.jsonl"))
    if not files:
        nested = sorted({file.parent for file in path.glob("*/*.jsonl")})  # e.g. the release's data/ folder
        hint = (f"; did you mean {str(nested[0])!r} ({len(list(nested[0].glob('*.jsonl')))} .jsonl files)?"
                if nested else "; expected one file per paradigm, e.g. anaphor_gender_agreement.jsonl")
        raise ValueError(f"BLiMP directory {str(path)!r} holds no .jsonl files{hint}")
    return files


def _check_pair_record(record, file, line_number):
    """A BLiMP pair has its two sentences (not blank) and its field; each of its fields read is a string."""
    missing = [k for k in ("sentence_good", "sentence_bad", "field") if k not in record]
    if missing:
        raise ValueError(f"{file}, line {line_number}: missing field(s) {missing}; expected a BLiMP pair")
    for key in ("sentence_good", "sentence_bad", "field", "UID", "linguistics_term"):
        value = record.get(key, "")
        if not isinstance(value, str) or (key.startswith("sentence") and not value.strip()):
            what = "empty" if isinstance(value, str) else f"{type(value).__name__} {value!r:.40}"
            raise ValueError(f"{file}, line {line_number}: the field {key!r} is {what}; expected "
                             f"{'a sentence' if key.startswith('sentence') else 'a string'}")


def _file_pairs(file, limit, position):
    """(the pairs of one BLiMP file, at most `limit` per paradigm, as read_blimp gives them; the position of its last
    pair, those beyond the limit counted), its pairs' positions counted on from `position`."""
    pairs, taken_per_paradigm, records = [], defaultdict(int), 0
    for line_number, record in iter_jsonl(file, "BLiMP file"):
        records += 1
        _check_pair_record(record, file, line_number)
        uid = record.get("UID") or file.stem
        position += 1
        if limit is not None and taken_per_paradigm[uid] >= limit:
            continue
        taken_per_paradigm[uid] += 1
        pairs.append({
            "UID": uid,
            "field": normalize_field(record["field"]),
            "linguistics_term": record.get("linguistics_term", ""),
            "pairID": str(record.get("pairID", taken_per_paradigm[uid] - 1)),
            "sentence_good": record["sentence_good"],
            "sentence_bad": record["sentence_bad"],
            "position": position,
        })
    if not records:
        raise ValueError(f"BLiMP file {str(file)!r} holds no pairs; expected one JSON object per line")
    return pairs, position


def read_blimp(data, limit=None):
    """The pairs of a BLiMP directory (every *.jsonl file in it, sorted) or of one jsonl file.

    Returns a list of dicts {"UID", "field" (normalized), "linguistics_term", "pairID", "sentence_good",
    "sentence_bad", "position"}, at most `limit` pairs per paradigm (the first ones of each file); "position" is the
    pair's place among all pairs of the data, those beyond the limit counted.
    """
    files = _blimp_files(data)
    check_limit(limit, "pairs per paradigm")
    pairs, position = [], -1
    for file in files:
        found, position = _file_pairs(file, limit, position)
        pairs.extend(found)
    return pairs


def blimp_accuracy(pairs, log_probs_good, log_probs_bad):
    """Accuracy per paradigm, per field, per phenomenon and overall (see the module docstring)."""
    by_paradigm = {}
    for pair, good, bad in zip(pairs, log_probs_good, log_probs_bad, strict=True):
        entry = by_paradigm.setdefault(pair["UID"], {"field": pair["field"],
                                                     "linguistics_term": pair["linguistics_term"],
                                                     "correct": 0, "pairs": 0})
        entry["pairs"] += 1
        entry["correct"] += int(good > bad)
    if not by_paradigm:
        raise ValueError("no BLiMP pairs to score")
    for entry in by_paradigm.values():
        entry["accuracy"] = entry["correct"] / entry["pairs"]

    def mean_over(key):
        groups = defaultdict(list)
        for entry in by_paradigm.values():
            groups[entry[key]].append(entry["accuracy"])
        return {name: float(np.mean(values)) for name, values in sorted(groups.items())}

    correct = sum(e["correct"] for e in by_paradigm.values())
    total = sum(e["pairs"] for e in by_paradigm.values())
    return {
        "accuracy": float(np.mean([e["accuracy"] for e in by_paradigm.values()])),
        "accuracy_pairs": correct / total,
        "pairs": total,
        "paradigms": len(by_paradigm),
        "by_field": mean_over("field"),
        "by_phenomenon": mean_over("linguistics_term"),
        "by_paradigm": dict(sorted(by_paradigm.items())),
    }


def _proposal_blocks(proposals, scorer, pairs, split, total_pairs):
    """The proposal blocks of the pairs' sentences (good, bad, pair after pair; module docstring), read by the model's
    tree format and checked against the words; None without proposals or for a model whose p(x) is exact."""
    if proposals is None:
        return None
    if scorer is None:
        raise ValueError("proposals are scored by the model's scorer; a scorer function cannot take them")
    if not uses_proposals(proposals, scorer, "log p(x)", stacklevel=3):
        return None
    read = read_proposal_blocks(proposals, scorer.model, scorer.tokenizer)
    if len(read) == 2 * len(pairs):  # the pairs evaluated (those --limit keeps), in order
        blocks = list(read)
    elif len(read) == 2 * total_pairs:  # every pair of the data: those evaluated by their positions
        blocks = [read[2 * pair["position"] + side] for pair in pairs for side in (0, 1)]
    else:
        raise ValueError(f"{proposals}: {len(read)} block(s) of proposal trees for {total_pairs} BLiMP pair(s) of "
                         f"the data ({len(pairs)} evaluated); expected two blocks per pair (the good sentence's, then "
                         "the bad one's), in the order of the data, for every pair of the data or for those "
                         f"evaluated ({proposal_format(scorer.model).proposal_description})")
    check_proposal_words([words for pair in split for words in pair], blocks, str(proposals),
                         proposal_format(scorer.model).name)
    return blocks


# How p(x) is computed from proposal trees, as the metrics record it.
PROPOSALS_LOG_PROB = "p(x) >= sum of p(x, y) over the proposal trees of each sentence (a lower bound)"


def _sentence_scorer(model, tokenizer, scorer, scorer_description, batch_size, on_error, beam_options):
    """(the model's Scorer, or None for a scorer function; a function from sentences to their log p(x); the beam
    options it searches with; how it computes p(x)), from run_blimp's arguments."""
    if scorer is not None and not isinstance(scorer, Scorer):  # a function: it says nothing of itself
        return None, scorer, beam_options, scorer_description
    if scorer is None and (model is None or tokenizer is None):
        raise ValueError("run_blimp needs a model and a tokenizer, or a scorer")
    model_scorer = scorer_of(model, tokenizer, scorer, **beam_options)

    def log_probs(sentences):
        return model_scorer.log_probs(sentences, batch_size=batch_size, progress=False, on_error=on_error,
                                      sources=quoted_sentences(sentences))

    return model_scorer, log_probs, model_scorer.search_options, model_scorer.log_prob_description


def _log_probs_by_sentence(score_sentences, split, batch_size, run, progress):
    """(log p(good), log p(bad)) of every pair, each distinct sentence scored once (some recur across pairs and
    paradigms); None for a sentence that cannot be scored."""
    distinct = distinct_sentences(words for pair in split for words in pair)
    scores = map_sentences(score_sentences, [list(words) for words in distinct], batch_size, run, progress, "BLiMP")
    log_prob = dict(zip(distinct, (None if value is None else float(value) for value in scores)))
    return [log_prob[tuple(good)] for good, _ in split], [log_prob[tuple(bad)] for _, bad in split]


def _log_probs_by_proposals(model, tokenizer, pairs, blocks, batch_size, max_proposals, run, progress):
    """(log p(good), log p(bad)) of every pair, each sentence by its own block of proposal trees; journaled under
    the pair's position and the side."""
    def from_proposals(chunk):
        return [value for value, _, _ in proposal_log_probs(model, tokenizer, chunk, batch_size=batch_size,
                                                            progress=False, max_proposals=max_proposals)]

    keys = [f"{pair['position']}:{kind}" for pair in pairs for kind in ("good", "bad")]
    scores = map_in_chunks(from_proposals, blocks, batch_size, journal_of(run), keys=keys, progress=progress,
                           desc="BLiMP", unit="sentence")
    return [float(value) for value in scores[0::2]], [float(value) for value in scores[1::2]]


def _pairs_left_out(pairs, split, good, bad):
    """{"pairs_left_out", "left_out"} for the pairs with a sentence that cannot be scored (None); {} if none."""
    left_out = [i for i in range(len(pairs)) if good[i] is None or bad[i] is None]
    if not left_out:
        return {}
    return {"pairs_left_out": len(left_out),
            "left_out": [{"UID": pairs[i]["UID"], "pairID": pairs[i]["pairID"],
                          "sentences": [" ".join(words) for words, log_prob in zip(split[i], (good[i], bad[i]))
                                        if log_prob is None]}
                         for i in left_out]}


def _blimp_summary(metrics, how):
    fields = ", ".join(f"{name} {value:.3f}" for name, value in metrics["by_field"].items())
    summary = (f"BLiMP accuracy {metrics['accuracy']:.3f} (mean over {metrics['paradigms']} paradigms, "
               f"{metrics['pairs']} pairs; p(x): {how}); by field: {fields}")
    if "pairs_left_out" in metrics:
        summary += (f"; {metrics['pairs_left_out']} pair(s) left out with a sentence that cannot be scored "
                    "(see left_out)")
    return summary


def _blimp_metrics(pairs, split, good, bad, how):
    """run_blimp's metrics: blimp_accuracy over the pairs whose sentences could both be scored (a sentence that
    cannot be, None, hf_slm.search.beam.check_sentences warned of, takes its pairs out), the pairs left out, units,
    how p(x) was computed and the summary."""
    scored = [i for i in range(len(pairs)) if good[i] is not None and bad[i] is not None]
    metrics = blimp_accuracy(taken(pairs, scored), taken(good, scored), taken(bad, scored))
    metrics.update(_pairs_left_out(pairs, split, good, bad))
    metrics["units"] = "fraction"  # accuracies in [0, 1], not percent
    metrics["log_prob_units"] = "nats"  # the log-probabilities of blimp-DATA_pairs.jsonl
    metrics["log_prob"] = how
    metrics["summary"] = _blimp_summary(metrics, how)
    return metrics


def _pair_records(pairs, split, good, bad):
    """The lines of blimp-DATA_pairs.jsonl: every pair with both log-probabilities (None: cannot be scored)."""
    return [{"UID": pair["UID"], "pairID": pair["pairID"], "good": " ".join(good_words), "bad": " ".join(bad_words),
             "log_prob_good": g, "log_prob_bad": b, "correct": g > b if None not in (g, b) else None, "units": "nats"}
            for pair, (good_words, bad_words), g, b in zip(pairs, split, good, bad)]


def _write_blimp_files(run, metrics, model, data_dir, pairs, records, options):
    """Write the result JSON and the pairs' lines; returns {kind: path}."""
    files = {"json": save_results(run.directory, "blimp", metrics, model, {"path": str(data_dir), "pairs": len(pairs)},
                                  options, stem=run.stem),
             "pairs": run.path("_pairs.jsonl")}
    write_jsonl(files["pairs"], records)
    return files


def run_blimp(model, tokenizer, data_dir, limit=None, output_dir=None, batch_size=8, progress=True, scorer=None,
              word_splitting="ptb", overwrite=False, on_error="skip", scorer_description="custom scorer",
              proposals=None, max_proposals=None, **beam_options):
    """BLiMP accuracy of a model (or of `scorer`) on the jsonl files of `data_dir`.

    Args:
        limit: pairs per paradigm (the first ones of each file).
        output_dir: when given, write `blimp-<data name>.json` (save_results, `-limit<N>` added with a limit;
            needs `model`), `<that stem>_pairs.jsonl` (every pair with both log-probabilities) and the journal
            `<that stem>.journal.jsonl` there; an interrupted run resumes from the journal (evaluation.results).
        batch_size: sentences per beam search batch, or sequences per forward call for terminals models; also
            the sentences scored (and journaled) at a time.
        scorer: the Scorer (hf_slm/search/scorers.py) whose `log_probs` give log p(x) (default: the model's family's,
            with `beam_options`), or a function from a list of sentences (lists of words) to their log p(x); either is
            called on batch_size sentences at a time.
        scorer_description: how a scorer function computes p(x), recorded as "log_prob" (a Scorer says it).
        word_splitting: "ptb" (default) or "whitespace" (module docstring).
        overwrite: discard the journal of an earlier run into the same file and start over.
        on_error: "skip" leaves out the pairs of a sentence that cannot be scored (hf_slm.search.beam.check_sentences;
            a scorer returns None for it): `pairs_left_out` counts them, `left_out` names them; "raise" stops.
        proposals: a proposal file (module docstring): log p(x) from the proposal trees instead of the beam (a model
            whose p(x) is exact does not use them, with a warning; a scorer that scores no given trees refuses them).
        max_proposals: keep at most this many distinct proposals per sentence.
        beam_options: BeamSearchOptions fields (beam_size, word_beam_size, ...) for the default scorer.
    Returns the metrics of `blimp_accuracy` plus "log_prob" (how p(x) was computed), "units" ("fraction": the
    accuracies), "log_prob_units" ("nats": the pair log-probabilities) and "summary".
    """
    pairs = read_blimp(data_dir, limit)
    split = [(split_words(p["sentence_good"], word_splitting), split_words(p["sentence_bad"], word_splitting))
             for p in pairs]
    model_scorer, score_sentences, beam_options, how = _sentence_scorer(model, tokenizer, scorer, scorer_description,
                                                                       batch_size, on_error, beam_options)
    total_pairs = len(pairs) if limit is None or proposals is None else len(read_blimp(data_dir))
    blocks = _proposal_blocks(proposals, model_scorer, pairs, split, total_pairs)
    if blocks is not None:
        beam_options, how = None, PROPOSALS_LOG_PROB
    if output_dir is not None and model is None:
        raise ValueError("saving BLiMP results needs the model (its name and config are recorded)")
    options = {"limit": limit, "batch_size": batch_size, "word_splitting": word_splitting,
               "beam_options": beam_options, "log_prob": how}
    if blocks is not None:
        options.update(proposals=data_fingerprint(proposals), max_proposals=max_proposals)
    with evaluation_run(output_dir, "blimp", data_dir, model, options, limit=limit, overwrite=overwrite) as run:
        if blocks is None:
            good, bad = _log_probs_by_sentence(score_sentences, split, batch_size, run, progress)
        else:
            good, bad = _log_probs_by_proposals(model, tokenizer, pairs, blocks, batch_size, max_proposals, run,
                                                progress)
        metrics = _blimp_metrics(pairs, split, good, bad, how)
        if run is not None:
            records = _pair_records(pairs, split, good, bad)
            metrics["files"] = file_names(_write_blimp_files(run, metrics, model, data_dir, pairs, records, options))
    return metrics
