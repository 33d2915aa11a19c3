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

import json
import re
from collections import defaultdict
from pathlib import Path

import numpy as np

import warnings

from ..data.jsonl import iter_jsonl
from ..runs.journal import data_fingerprint, map_in_chunks
from ..search.scorers import Scorer, scorer_of
from .proposals import (
    check_proposal_words, check_scores_proposals, proposal_format, proposal_log_probs, read_proposal_blocks,
)
from .results import evaluation_run, save_results

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


def read_blimp(data, limit=None):
    """The pairs of a BLiMP directory (every *.jsonl file in it, sorted) or of one jsonl file.

    Returns a list of dicts {"UID", "field" (normalized), "linguistics_term", "pairID", "sentence_good",
    "sentence_bad", "position"}, at most `limit` pairs per paradigm (the first ones of each file); "position" is the
    pair's place among all pairs of the data, those beyond the limit counted.
    """
    path = Path(data)
    if path.is_dir():
        files = sorted(path.glob("*.jsonl"))
        if not files:
            nested = sorted({file.parent for file in path.glob("*/*.jsonl")})  # e.g. the release's data/ folder
            hint = (f"; did you mean {str(nested[0])!r} ({len(list(nested[0].glob('*.jsonl')))} .jsonl files)?"
                    if nested else "; expected one file per paradigm, e.g. anaphor_gender_agreement.jsonl")
            raise ValueError(f"BLiMP directory {str(path)!r} holds no .jsonl files{hint}")
    elif path.is_file():
        files = [path]
    else:
        raise ValueError(f"BLiMP data {str(path)!r} does not exist; expected a directory of .jsonl files or one file")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive number of pairs per paradigm, got {limit!r}")
    pairs, position = [], -1
    for file in files:
        taken = defaultdict(int)
        records = 0
        for line_number, record in iter_jsonl(file, "BLiMP file"):
            records += 1
            missing = [k for k in ("sentence_good", "sentence_bad", "field") if k not in record]
            if missing:
                raise ValueError(f"{file}, line {line_number}: missing field(s) {missing}; expected a BLiMP pair")
            for key in ("sentence_good", "sentence_bad", "field", "UID", "linguistics_term"):
                value = record.get(key, "")
                if not isinstance(value, str) or (key.startswith("sentence") and not value.strip()):
                    what = "empty" if isinstance(value, str) else f"{type(value).__name__} {value!r:.40}"
                    raise ValueError(f"{file}, line {line_number}: the field {key!r} is {what}; expected "
                                     f"{'a sentence' if key.startswith('sentence') else 'a string'}")
            uid = record.get("UID") or file.stem
            position += 1
            if limit is not None and taken[uid] >= limit:
                continue
            taken[uid] += 1
            pairs.append({
                "UID": uid,
                "field": normalize_field(record["field"]),
                "linguistics_term": record.get("linguistics_term", ""),
                "pairID": str(record.get("pairID", taken[uid] - 1)),
                "sentence_good": record["sentence_good"],
                "sentence_bad": record["sentence_bad"],
                "position": position,
            })
        if not records:
            raise ValueError(f"BLiMP file {str(file)!r} holds no pairs; expected one JSON object per line")
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
    check_scores_proposals(scorer, f"proposals {proposals}")
    if scorer.log_prob_estimate == "exact":
        warnings.warn("this model's log p(x) is exact; the proposal trees are not used", stacklevel=3)
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
    # Score each distinct sentence once (some sentences recur across pairs and paradigms).
    distinct = sorted({tuple(words) for pair in split for words in pair}, key=lambda w: (len(w), w))
    if scorer is None or isinstance(scorer, Scorer):
        if scorer is None and (model is None or tokenizer is None):
            raise ValueError("run_blimp needs a model and a tokenizer, or a scorer")
        model_scorer = scorer_of(model, tokenizer, scorer, **beam_options)
        beam_options, how = model_scorer.search_options, model_scorer.log_prob_description

        def scorer(sentences):
            return model_scorer.log_probs(sentences, batch_size=batch_size, progress=False, on_error=on_error,
                                          sources=[repr(" ".join(words)) for words in sentences])
    else:
        model_scorer, how = None, scorer_description
    total_pairs = len(pairs) if limit is None or proposals is None else len(read_blimp(data_dir))
    blocks = _proposal_blocks(proposals, model_scorer, pairs, split, total_pairs)
    if blocks is not None:
        beam_options, how = None, "p(x) >= sum of p(x, y) over the proposal trees of each sentence (a lower bound)"
    if output_dir is not None and model is None:
        raise ValueError("saving BLiMP results needs the model (its name and config are recorded)")
    options = {"limit": limit, "batch_size": batch_size, "word_splitting": word_splitting,
               "beam_options": beam_options, "log_prob": how}
    if blocks is not None:
        options.update(proposals=data_fingerprint(proposals), max_proposals=max_proposals)
    with evaluation_run(output_dir, "blimp", data_dir, model, options, limit=limit, overwrite=overwrite) as run:
        journal = run.journal if run is not None else None
        if blocks is None:
            scores = map_in_chunks(scorer, [list(words) for words in distinct], batch_size, journal,
                                   keys=[" ".join(words) for words in distinct], progress=progress, desc="BLiMP",
                                   unit="sentence")
            log_prob = dict(zip(distinct, (None if v is None else float(v) for v in scores)))
            good = [log_prob[tuple(g)] for g, _ in split]
            bad = [log_prob[tuple(b)] for _, b in split]
        else:  # each sentence of each pair by its own proposals
            def from_proposals(chunk):
                return [value for value, _, _ in proposal_log_probs(model, tokenizer, chunk, batch_size=batch_size,
                                                                    progress=False, max_proposals=max_proposals)]

            keys = [f"{pair['position']}:{kind}" for pair in pairs for kind in ("good", "bad")]
            scores = map_in_chunks(from_proposals, blocks, batch_size, journal, keys=keys, progress=progress,
                                   desc="BLiMP", unit="sentence")
            good, bad = [float(v) for v in scores[0::2]], [float(v) for v in scores[1::2]]
        # A sentence that cannot be scored (None; hf_slm.search.beam.check_sentences warned) takes its pairs out.
        scored = [i for i in range(len(pairs)) if good[i] is not None and bad[i] is not None]
        metrics = blimp_accuracy([pairs[i] for i in scored], [good[i] for i in scored], [bad[i] for i in scored])
        if len(scored) < len(pairs):
            left_out = sorted(set(range(len(pairs))) - set(scored))
            metrics["pairs_left_out"] = len(left_out)
            metrics["left_out"] = [{"UID": pairs[i]["UID"], "pairID": pairs[i]["pairID"],
                                    "sentences": [" ".join(w) for w, lp in zip(split[i], (good[i], bad[i])) if lp is None]}
                                   for i in left_out]
        metrics["units"] = "fraction"  # accuracies in [0, 1], not percent
        metrics["log_prob_units"] = "nats"  # the log-probabilities of blimp-DATA_pairs.jsonl
        metrics["log_prob"] = how
        fields = ", ".join(f"{name} {value:.3f}" for name, value in metrics["by_field"].items())
        metrics["summary"] = (f"BLiMP accuracy {metrics['accuracy']:.3f} (mean over {metrics['paradigms']} "
                              f"paradigms, {metrics['pairs']} pairs; p(x): {how}); by field: {fields}")
        if "pairs_left_out" in metrics:
            metrics["summary"] += (f"; {metrics['pairs_left_out']} pair(s) left out with a sentence that cannot be "
                                   "scored (see left_out)")
        if run is not None:
            files = {"json": save_results(run.directory, "blimp", metrics, model,
                                          {"path": str(data_dir), "pairs": len(pairs)}, options, stem=run.stem),
                     "pairs": run.path("_pairs.jsonl")}
            with open(files["pairs"], "w", encoding="utf-8") as handle:
                for pair, (g_words, b_words), g, b in zip(pairs, split, good, bad):
                    handle.write(json.dumps({"UID": pair["UID"], "pairID": pair["pairID"], "good": " ".join(g_words),
                                             "bad": " ".join(b_words), "log_prob_good": g, "log_prob_bad": b,
                                             "correct": g > b if None not in (g, b) else None,
                                             "units": "nats"}) + "\n")
            metrics["files"] = {kind: str(path) for kind, path in files.items()}
    return metrics
