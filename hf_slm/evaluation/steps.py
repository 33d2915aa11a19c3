"""The steps the evaluation drivers share (perplexity, SyntaxGym, BLiMP), each doing one job: checking a limit,
deciding whether a proposal file gives log p(x), scoring each distinct sentence once in journaled chunks, keeping
what could be scored, and writing per-item records and the list of files written."""

import json
import warnings

from ..runs.journal import map_in_chunks
from .proposals import check_scores_proposals

# ---- checking -----------------------------------------------------------------------------------------


def limit_error(limit, what):
    """The error for a limit that is no positive number of `what` ("sentences", "pairs per paradigm", ...)."""
    return ValueError(f"limit must be a positive number of {what}, got {limit!r}")


def check_limit(limit, what):
    """Refuse a limit below 1 (None: no limit)."""
    if limit is not None and limit < 1:
        raise limit_error(limit, what)


def uses_proposals(proposals, scorer, exact_quantity, stacklevel):
    """Whether the trees of the proposal file `proposals` (None: none given) give log p(x). A scorer that scores no
    given trees refuses them (proposals.check_scores_proposals); one whose p(x) is exact has no use for them, and a
    warning says so ("this model's <exact_quantity> is exact"). stacklevel: the warning's, as warnings.warn would
    count it in the function that calls this one (so that it names the line that called the public driver)."""
    if proposals is None:
        return False
    check_scores_proposals(scorer, f"proposals {proposals}")
    if scorer.log_prob_estimate == "exact":
        warnings.warn(f"this model's {exact_quantity} is exact; the proposal trees are not used",
                      stacklevel=stacklevel + 1)
        return False
    return True


# ---- scoring ------------------------------------------------------------------------------------------


def distinct_sentences(sentences):
    """Each distinct sentence (as a tuple of words) once, shortest first, then by its words: a sentence that
    recurs across items is scored once, and a batch holds sentences of about one length."""
    return sorted({tuple(words) for words in sentences}, key=lambda words: (len(words), words))


def quoted_sentences(sentences):
    """How messages about sentences that cannot be scored name them: their words, quoted."""
    return [repr(" ".join(words)) for words in sentences]


def journal_of(run):
    """The journal of an evaluation run (results.evaluation_run); None without one (nothing is written)."""
    return run.journal if run is not None else None


def map_sentences(compute, sentences, batch_size, run, progress, desc):
    """[compute(batch) values of every sentence], batch_size sentences at a time, each batch journaled under its
    sentences' words as soon as it is done (runs.journal.map_in_chunks), so that an interrupted run resumes."""
    return map_in_chunks(compute, sentences, batch_size, journal_of(run), keys=[" ".join(words) for words in sentences],
                         progress=progress, desc=desc, unit="sentence")


def positions_scored(values):
    """The positions of the values that are not None (None: what could not be scored)."""
    return [position for position, value in enumerate(values) if value is not None]


def taken(values, positions):
    """values[p] for each p of `positions`, in that order; None for values None (nothing to take)."""
    return None if values is None else [values[position] for position in positions]


# ---- writing ------------------------------------------------------------------------------------------


def write_jsonl(path, records):
    """Write one JSON line per record to `path`; returns the path."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(record) + "\n" for record in records)
    return path


def file_names(files):
    """{kind: path as a string} of the files an evaluation wrote, for its metrics' "files"."""
    return {kind: str(path) for kind, path in files.items()}


__all__ = [
    "check_limit", "distinct_sentences", "file_names", "journal_of", "limit_error", "map_sentences",
    "positions_scored", "quoted_sentences", "taken", "uses_proposals", "write_jsonl",
]
