"""Saving evaluation results beside the model, so that a model card can quote them.

Results are named by their data: `<kind>-<data name>[-limit<N>].json` (`result_stem`), e.g. `ppl-test.json`
and `ppl-dev.json` for perplexities on test.txt and dev.txt, `sg-syntaxgym.json`, `blimp-blimp-limit20.json`;
the files an evaluation writes beside it share the stem (`ppl-test_sentences.jsonl`, `sg-syntaxgym.csv`, ...).
So an evaluation on other data never replaces a result a model card quotes. Each result has a journal beside
it (`<stem>.journal.jsonl`, hf_slm.runs.journal): an interrupted run resumes from it, and a run of other
settings, another model or other data of the same name is refused unless overwrite=True (`--overwrite`).
"""

import datetime
import json
import math
import re
from contextlib import contextmanager
from pathlib import Path

from ..runs.distributed import main_process_context
from ..runs.journal import RunJournal, data_fingerprint, model_fingerprint, output_lock, text_fingerprint

# Folder names that say nothing about the data: the name is taken from the folder above them
# (../shared/data/syntaxgym/test_suites/json -> "syntaxgym", ../shared/data/blimp/data -> "blimp").
GENERIC_FOLDER_NAMES = ("data", "json", "jsonl", "test_suites", "suites", "files")
# Options that change how fast an evaluation runs, not its numbers: a run may resume with other values.
SPEED_ONLY_OPTIONS = ("batch_size", "use_cache", "progress", "chunk_size")


def results_directory(model_dir, output=None):
    """Where an evaluation writes: `output` if given, else `<model_dir>/eval_results/`. The folder is created by
    the run's lock (`evaluation_run`) once the inputs were read, so a command that fails on its inputs leaves
    no empty folder behind (in a model folder, one that a model card would look for results in)."""
    return Path(output) if output else Path(model_dir) / "eval_results"


def data_name(data):
    """A short name of evaluation data for file names: the file's stem, or the folder's name (walking up past
    generic names such as `json` and `data`); "in-memory" for data given as Python objects."""
    if not isinstance(data, (str, Path)) or str(data).startswith("<"):
        return "in-memory"
    path = Path(data).resolve()
    if path.is_file():
        name = path.stem
    else:
        name = path.name
        while name.lower() in GENERIC_FOLDER_NAMES and path.parent != path:
            path = path.parent
            name = path.name
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", name).strip("._") or "data"


def result_stem(kind, data, limit=None):
    """`<kind>-<data name>[-limit<N>]`, the stem of an evaluation's files (module docstring)."""
    return f"{kind}-{data_name(data)}" + (f"-limit{limit}" if limit is not None else "")


class EvaluationRun:
    """The files of one evaluation in a results folder, its lock and its journal (see `evaluation_run`)."""

    def __init__(self, directory, stem, journal):
        self.directory, self.stem, self.journal = Path(directory), stem, journal

    def path(self, suffix):
        """`<directory>/<stem><suffix>`, e.g. path(".json"), path("_sentences.jsonl")."""
        return self.directory / f"{self.stem}{suffix}"


@contextmanager
def evaluation_run(output_dir, kind, data, model, settings, limit=None, overwrite=False, data_description=None):
    """Lock `output_dir` and open the journal of `<kind>-<data name>[-limit<N>]`; yields an EvaluationRun, or
    None when output_dir is None (nothing is written, nothing is resumed).

    settings: what the numbers depend on besides the model and the data (options in SPEED_ONLY_OPTIONS are
        left out of the journal's header). data_description: the text hashed for data held in memory (default:
        `data` as JSON). A result file without a journal (an older version's, or one whose journal was
        removed) is not replaced unless overwrite.

    Under torchrun / accelerate launch the main process alone locks the folder, keeps the journal and writes the
    results; the other processes get None (they compute their share of the items and write nothing).
    """
    if output_dir is None:
        yield None
        return
    opened = _opened_run(output_dir, kind, data, model, settings, limit, overwrite, data_description)
    with main_process_context(opened, f"opening the {kind} results in {output_dir}") as run:
        yield run


@contextmanager
def _opened_run(output_dir, kind, data, model, settings, limit, overwrite, data_description):
    directory = Path(output_dir)
    stem = result_stem(kind, data, limit)
    with output_lock(directory):
        result, journal_path = directory / f"{stem}.json", directory / f"{stem}.journal.jsonl"
        if result.exists() and not journal_path.exists() and not overwrite:
            raise ValueError(f"{result} exists and has no journal to show which run wrote it; pass --overwrite to "
                             "replace it, or write elsewhere with --output")
        kept = {key: ({k: v for k, v in value.items() if k not in SPEED_ONLY_OPTIONS} if isinstance(value, dict)
                      else value) for key, value in settings.items() if key not in SPEED_ONLY_OPTIONS}
        if data_description is None and isinstance(data, (str, Path)):
            fingerprint = data_fingerprint(data)
        else:  # data given as Python objects
            fingerprint = text_fingerprint(data_description if data_description is not None
                                           else json.dumps(data, default=str))
        header = {"run": kind, "model": model_fingerprint(model), "data": fingerprint, "settings": kept,
                  "limit": limit}
        journal = RunJournal(journal_path, header, overwrite=overwrite)
        try:
            yield EvaluationRun(directory, stem, journal)
        finally:
            journal.close()


# Significant digits a result keeps: float sums and means end in rounding noise (a mean accuracy of 0.5000000000000001)
# that says nothing; 12 digits keep every figure the evaluations compute (log-probabilities of whole corpora included).
SIGNIFICANT_DIGITS = 12


def tidy_numbers(value):
    """`value` (JSON-like: dicts, lists, numbers) with each float rounded to SIGNIFICANT_DIGITS significant digits."""
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT_DIGITS}g}") if math.isfinite(value) else value
    if isinstance(value, dict):
        return {key: tidy_numbers(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [tidy_numbers(item) for item in value]
    return value


def save_results(directory, name, metrics, model, data, options, stem=None):
    """Write `<directory>/<stem>.json` (stem defaults to `name`): the metrics with what produced them. Returns
    the path.

    Args:
        name: the evaluation ("ppl", "sg", "blimp", "rerank", "parse").
        metrics: a JSON-serializable dict of numbers (and per-item details if small).
        model: the model (its name_or_path, grammar and config are recorded); None for outputs of no model of
            ours (ROUGE of another system's summaries).
        data: a description of the data (paths, counts).
        options: the options the evaluation ran with (beam sizes, limits, ...).
    """
    config = getattr(model, "config", None)
    record = {
        "evaluation": name,
        "model": str(getattr(config, "_name_or_path", "") or getattr(model, "name_or_path", "")),
        "grammar": getattr(config, "grammar", None),
        "config": {k: getattr(config, k, None) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                                          "intermediate_size", "vocab_size")},
        "data": data,
        "options": options,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "metrics": tidy_numbers(metrics),
    }
    path = Path(directory) / f"{stem or name}.json"
    # Written beside and renamed, so that an interruption never leaves half a result for a card to quote.
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(record, indent=2, default=str) + "\n")
    partial.replace(path)
    return path


def add_to_results(path, key, value):
    """Add `key: value` to the result JSON at `path` (e.g. the evaluation protocol the command applied), written
    beside and renamed as save_results writes."""
    path = Path(path)
    record = json.loads(path.read_text())
    record[key] = value
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(record, indent=2, default=str) + "\n")
    partial.replace(path)
