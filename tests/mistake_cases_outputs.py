"""Class 2 of issue 12, lost work: a trained model or a quoted result is never replaced silently, two runs never
write one folder at once, and an interrupted run resumes where it stopped with the numbers of an uninterrupted
one (hf_slm/runs/journal.py).

An interruption is simulated by cutting an uninterrupted run's journal after a few entries (and half a line, as
a killed process leaves it) and removing its results; tests/test_resume.py interrupts a real run with SIGINT.
"""

import json
import os
import random
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import hf_slm

from mistake_cases import CliCase
from helpers.cli import run_cli_in_process
from helpers.ptb_trees import TREES

FIXTURES = Path(__file__).parent / "fixtures"
GUM_TRAIN = Path(hf_slm.__file__).parent / "sample_data" / "gum" / "train.txt"
TINY_MODEL = ["--preset", "tg-ptb", "--batch-size", "2", "--set", "hidden_size=16", "--set", "num_hidden_layers=1",
              "--set", "num_attention_heads=2", "--set", "intermediate_size=32"]
SMALL_BEAM = ["--beam-size", "5", "--word-beam-size", "2"]
SENTENCES = "the blue bird sings .\nI like it .\na dog barks at the moon\nthe dog sings\n"


def _hf_slm(tmp, *argv):
    """Run `hf-slm *argv` as the case itself runs (helpers/cli.py); it must succeed."""
    result = run_cli_in_process(*argv, cwd=tmp)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _write(tmp, name, text):
    (tmp / name).write_text(text)
    return tmp / name


def _lock(directory, pid):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / ".hf-slm.lock").write_text(json.dumps({"pid": pid, "host": socket.gethostname(),
                                                        "command": "hf-slm eval ppl (another run)"}))


def _dead_pid():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _interrupt(results, stem, keep):
    """Leave `results` as a run of `stem` killed after `keep` finished items, keeping the uninterrupted metrics
    in ../uninterrupted.json: the journal cut to its header, `keep` entries and half of the next line, and the
    result files removed."""
    journal = results / f"{stem}.journal.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    assert len(lines) > keep + 1, "nothing would be left to resume"
    journal.write_text("".join(lines[: keep + 1]) + lines[keep + 1][: len(lines[keep + 1]) // 2])
    (results.parent / "uninterrupted.json").write_text((results / f"{stem}.json").read_text())
    for path in results.glob(f"{stem}*"):
        if path != journal:
            path.unlink()


def _same_as_uninterrupted(stem):
    def check(result, tmp):
        resumed = json.loads((tmp / "results" / f"{stem}.json").read_text())
        uninterrupted = json.loads((tmp / "uninterrupted.json").read_text())
        assert resumed["metrics"] == uninterrupted["metrics"]
        assert resumed["options"] == uninterrupted["options"] and resumed["data"] == uninterrupted["data"]
    return check


# ---- train -------------------------------------------------------------------------------------------------


def _trained_model_in_out(tmp, model):
    shutil.copytree(model, tmp / "out")
    _write(tmp, "train.txt", "\n".join(TREES) + "\n")


def _weights_unchanged(result, tmp):
    assert not (tmp / "out" / "training_setup.json").exists()
    assert (tmp / "out" / "model.safetensors").read_bytes() == (tmp / "model.safetensors.before").read_bytes()


def _trained_model_and_its_results(tmp, model):
    _trained_model_in_out(tmp, model)
    shutil.copy(model / "model.safetensors", tmp / "model.safetensors.before")
    (tmp / "out" / "eval_results").mkdir()
    _write(tmp / "out" / "eval_results", "ppl-test.json", "{}")
    (tmp / "out" / "checkpoint-7").mkdir()


def _replaced(result, tmp):
    record = json.loads((tmp / "out" / "training_setup.json").read_text())
    assert record["steps_done"] == 1
    assert json.loads((tmp / "out" / "config.json").read_text())["hidden_size"] == 16
    assert not (tmp / "out" / "eval_results").exists() and not (tmp / "out" / "checkpoint-7").exists()


def _gum_trees(count, seed=None):
    lines = GUM_TRAIN.read_text().splitlines()[:count]
    if seed is not None:
        random.Random(seed).shuffle(lines)
    return "\n".join(lines) + "\n"


def _interrupted_training(tmp, model):
    _write(tmp, "train.txt", _gum_trees(30))
    _hf_slm(tmp, "train", *TINY_MODEL, "--train", "train.txt", "--output", "out", "--vocab-size", "120",
            "--max-steps", "2", "--save-steps", "1")
    _write(tmp, "shuffled.txt", _gum_trees(30, seed=1))  # the same trees: a tokenizer trained on them differs


def _tokenizer_kept(result, tmp):
    from hf_slm.data.prepare import load_syntactic_tokenizer
    from hf_slm.tokenization.trees import read_trees

    saved = load_syntactic_tokenizer(tmp / "out" / "checkpoint-2").get_vocab()
    assert load_syntactic_tokenizer(tmp / "out").get_vocab() == saved
    assert load_syntactic_tokenizer(tmp / "out" / "checkpoint-3").get_vocab() == saved
    retrained = hf_slm.SyntacticTokenizer.train(read_trees(tmp / "shuffled.txt"), vocab_size=120).get_vocab()
    assert sum(retrained.get(token) != index for token, index in saved.items()) > 10, "the test would prove nothing"
    assert json.loads((tmp / "out" / "training_setup.json").read_text())["steps_done"] == 3


TRAIN = ["train", *TINY_MODEL, "--train", "{tmp}/train.txt", "--output", "{tmp}/out", "--max-steps", "1",
         "--vocab-size", "30"]

TRAIN_CASES = [
    CliCase("train --output over a trained model is refused", TRAIN, r"out' holds a trained model.*--overwrite",
            prepare=lambda tmp, model: (_trained_model_in_out(tmp, model),
                                        shutil.copy(model / "model.safetensors", tmp / "model.safetensors.before")),
            check=_weights_unchanged),
    CliCase("train --overwrite replaces a trained model and the results that described it", TRAIN + ["--overwrite"],
            r"removed .*checkpoint-7", exit_code=0, prepare=_trained_model_and_its_results, check=_replaced),
    CliCase("train into an interrupted run's checkpoints without --resume is refused", TRAIN,
            r"checkpoints of an earlier run \(checkpoint-4\).*--resume",
            prepare=lambda tmp, model: (_write(tmp, "train.txt", "\n".join(TREES) + "\n"),
                                        (tmp / "out" / "checkpoint-4").mkdir(parents=True))),
    CliCase("train --resume without a checkpoint is refused", TRAIN + ["--resume"],
            r"holds no checkpoint-\* folder to resume from",
            prepare=lambda tmp, model: _write(tmp, "train.txt", "\n".join(TREES) + "\n")),
    CliCase("train --resume on a shuffled train file keeps the checkpoint's tokenizer",
            ["train", *TINY_MODEL, "--train", "{tmp}/shuffled.txt", "--output", "{tmp}/out", "--vocab-size", "120",
             "--max-steps", "3", "--save-steps", "1", "--resume"],
            r"resuming with the tokenizer saved in .*checkpoint-2 \(not trained again\)", exit_code=0,
            prepare=_interrupted_training, check=_tokenizer_kept),
    CliCase("train into a folder another run is writing is refused", TRAIN,
            r"out' is being written by another run \(lock file .*out/\.hf-slm\.lock, pid \d+",
            prepare=lambda tmp, model: (_write(tmp, "train.txt", "\n".join(TREES) + "\n"),
                                        _lock(tmp / "out", os.getppid()))),
]


# ---- eval --------------------------------------------------------------------------------------------------

PPL = ["eval", "ppl", "--model", "{model}", "--data", "{tmp}/data.txt", "--output", "{tmp}/results", *SMALL_BEAM]


def _two_data_files(tmp, model):
    _write(tmp, "dev.txt", "the bird sings\n")
    _write(tmp, "test.txt", SENTENCES)
    _hf_slm(tmp, "eval", "ppl", "--model", model, "--data", "dev.txt", "--output", "results", *SMALL_BEAM)


def _both_kept(result, tmp):
    for name, sentences in (("dev", 1), ("test", 4)):
        record = json.loads((tmp / "results" / f"ppl-{name}.json").read_text())
        assert record["data"]["path"].endswith(f"{name}.txt") and record["data"]["sentences"] == sentences


def _evaluated(command, *files, keep=2, stem="ppl-data"):
    """prepare: write the data files, run `command` uninterrupted, then cut its journal after `keep` items."""
    def prepare(tmp, model):
        for name, text in files:
            _write(tmp, name, text)
        _hf_slm(tmp, *[argument.format(model=model, tmp=tmp) for argument in command])
        _interrupt(tmp / "results", stem, keep)
    return prepare


def _ran(command, *files):
    def prepare(tmp, model):
        for name, text in files:
            _write(tmp, name, text)
        _hf_slm(tmp, *[argument.format(model=model, tmp=tmp) for argument in command])
    return prepare


def _other_model(tmp, model):
    """The data evaluated by {model}, and a copy of {model} with one weight changed in other/."""
    from safetensors.torch import load_file, save_file

    _ran(PPL, ("data.txt", SENTENCES))(tmp, model)
    shutil.copytree(model, tmp / "other")
    tensors = load_file(tmp / "other" / "model.safetensors")
    name = sorted(tensors)[0]
    tensors[name] = tensors[name] + 0.5
    save_file(tensors, tmp / "other" / "model.safetensors", metadata={"format": "pt"})


def _beam_size(size):
    def check(result, tmp):
        record = json.loads((tmp / "results" / "ppl-data.json").read_text())
        assert record["options"]["beam_options"]["beam_size"] == size
    return check


def _nothing_written(result, tmp):
    assert (tmp / "results" / ".hf-slm.lock").exists()  # the other run's lock is left alone
    assert not list((tmp / "results").glob("ppl-*"))


def _lock_released_and_result_written(result, tmp):
    assert not (tmp / "results" / ".hf-slm.lock").exists()
    assert json.loads((tmp / "results" / "ppl-data.json").read_text())["metrics"]["sentences"] == 4


SG = ["eval", "sg", "--model", "{model}", "--suites", str(FIXTURES / "syntaxgym"), "--limit", "1", "--batch-size", "2",
      "--output", "{tmp}/results", *SMALL_BEAM]
BLIMP = ["eval", "blimp", "--model", "{model}", "--data", str(FIXTURES / "blimp"), "--limit", "1", "--batch-size",
         "2", "--output", "{tmp}/results", *SMALL_BEAM]
PARSE = ["eval", "parse", "--model", "{model}", "--gold", "{tmp}/gold.mrg", "--batch-size", "1", "--output",
         "{tmp}/results", *SMALL_BEAM]
GOLD = "\n".join(TREES) + "\n"

EVAL_CASES = [
    CliCase("eval ppl on a second data file keeps the first result: both named by their data",
            ["eval", "ppl", "--model", "{model}", "--data", "{tmp}/test.txt", "--output", "{tmp}/results", *SMALL_BEAM],
            r"wrote .*results/ppl-test\.json", exit_code=0, prepare=_two_data_files, check=_both_kept),
    CliCase("eval ppl after an interruption resumes with the numbers of an uninterrupted run",
            PPL + ["--batch-size", "2"], r"resuming ppl-data\.journal\.jsonl: 2 of 4 sentences already finished",
            exit_code=0, prepare=_evaluated(PPL + ["--batch-size", "2"], ("data.txt", SENTENCES)),
            check=_same_as_uninterrupted("ppl-data")),
    CliCase("eval sg after an interruption resumes with the numbers of an uninterrupted run", SG,
            r"resuming sg-syntaxgym-limit1\.journal\.jsonl: 2 of \d+ sentences already finished", exit_code=0,
            prepare=_evaluated(SG, stem="sg-syntaxgym-limit1"), check=_same_as_uninterrupted("sg-syntaxgym-limit1")),
    CliCase("eval blimp after an interruption resumes with the numbers of an uninterrupted run", BLIMP,
            r"resuming blimp-blimp-limit1\.journal\.jsonl: 2 of \d+ sentences already finished", exit_code=0,
            prepare=_evaluated(BLIMP, stem="blimp-blimp-limit1"),
            check=_same_as_uninterrupted("blimp-blimp-limit1")),
    CliCase("eval parse after an interruption resumes with the numbers of an uninterrupted run", PARSE,
            r"resuming parse-gold\.journal\.jsonl: 1 of 3 sentences already finished", exit_code=0,
            prepare=_evaluated(PARSE, ("gold.mrg", GOLD), keep=1, stem="parse-gold"),
            check=_same_as_uninterrupted("parse-gold")),
    CliCase("eval ppl with other settings than the journal's is refused", PPL + ["--beam-size", "6"],
            r"ppl-data\.journal\.jsonl belongs to another run \(settings\.beam_options\.beam_size: 5 in the journal, "
            r"6 now\); pass --overwrite", prepare=_ran(PPL, ("data.txt", SENTENCES)), check=_beam_size(5)),
    CliCase("eval ppl --overwrite starts over with other settings", PPL + ["--beam-size", "6", "--overwrite"],
            r"wrote .*ppl-data\.json", exit_code=0, prepare=_ran(PPL, ("data.txt", SENTENCES)), check=_beam_size(6)),
    CliCase("eval ppl of another model into the same results is refused",
            ["eval", "ppl", "--model", "{tmp}/other", "--data", "{tmp}/data.txt", "--output", "{tmp}/results",
             *SMALL_BEAM],
            r"ppl-data\.journal\.jsonl belongs to another run \(model\.parameters_sha256", prepare=_other_model),
    CliCase("eval ppl does not replace a result that has no journal", PPL,
            r"ppl-data\.json exists and has no journal.*--overwrite",
            prepare=lambda tmp, model: (_write(tmp, "data.txt", SENTENCES), (tmp / "results").mkdir(),
                                        _write(tmp / "results", "ppl-data.json", '{"evaluation": "ppl"}'))),
    CliCase("eval into a results folder another run is writing is refused", PPL,
            r"results' is being written by another run \(lock file .*results/\.hf-slm\.lock, pid \d+: hf-slm eval ppl",
            prepare=lambda tmp, model: (_write(tmp, "data.txt", SENTENCES), _lock(tmp / "results", os.getppid())),
            check=_nothing_written),
    CliCase("eval takes over the lock of a run that is gone", PPL, r"taking over the stale lock .*\.hf-slm\.lock",
            exit_code=0, prepare=lambda tmp, model: (_write(tmp, "data.txt", SENTENCES),
                                                     _lock(tmp / "results", _dead_pid())),
            check=_lock_released_and_result_written),
]


# ---- data prepare ------------------------------------------------------------------------------------------

PREPARE = ["data", "prepare", "--loader", "ptb", "--path", "{tmp}/trees", "--tokenizer", "{model}", "--output",
           "{tmp}/prepared", "--cache-dir", "{tmp}/cache"]


def _tree_files(tmp):
    (tmp / "trees").mkdir()
    for name, trees in (("train.txt", TREES[:2]), ("dev.txt", TREES[2:]), ("test.txt", TREES[:1])):
        _write(tmp / "trees", name, "\n".join(trees) + "\n")


def _interrupted_prepare(tmp, model):
    """A prepare killed while tokenizing its last split: two splits saved and journaled."""
    from datasets import load_from_disk

    _tree_files(tmp)
    _hf_slm(tmp, *[argument.format(model=model, tmp=tmp) for argument in PREPARE])
    prepared = tmp / "prepared"
    full = load_from_disk(str(prepared))
    (tmp / "uninterrupted.json").write_text(json.dumps({split: full[split].to_dict()["input_ids"] for split in full}))
    journal = prepared / "prepare.journal.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    assert len(lines) == 4  # the header and three splits
    journal.write_text("".join(lines[:3]))
    last = json.loads(lines[3])["key"]
    shutil.rmtree(prepared / last)
    shutil.rmtree(prepared / "tokenizer")
    (prepared / "prepare.json").unlink()
    (prepared / "dataset_dict.json").unlink()


def _same_splits(result, tmp):
    from datasets import load_from_disk

    resumed = load_from_disk(str(tmp / "prepared"))
    ids = {split: resumed[split].to_dict()["input_ids"] for split in resumed}
    assert ids == json.loads((tmp / "uninterrupted.json").read_text())
    assert json.loads((tmp / "prepared" / "prepare.json").read_text())["splits"]["train"]["examples"] == 2


def _prepared_then_data_changed(tmp, model):
    _tree_files(tmp)
    _hf_slm(tmp, *[argument.format(model=model, tmp=tmp) for argument in PREPARE])
    _write(tmp / "trees", "test.txt", "\n".join(TREES) + "\n")


PREPARE_CASES = [
    CliCase("data prepare after an interruption loads the finished splits and gives the same ids", PREPARE,
            r"resuming prepare\.journal\.jsonl: 2 of 3 splits already finished", exit_code=0,
            prepare=_interrupted_prepare, check=_same_splits),
    CliCase("data prepare into the folder of a prepare of other data is refused", PREPARE,
            r"prepare\.journal\.jsonl belongs to another run \(data\.sha256.*--overwrite",
            prepare=_prepared_then_data_changed),
]

CASES = TRAIN_CASES + EVAL_CASES + PREPARE_CASES
