"""`hf-slm train` for Syntactic Ordered Memory (hf_slm/families/ordered_memory/training.py): a tiny SOM trained by the
command line on the tests' CoNLL-U treebank and saved with its record and card (loaded without hf-slm: test_som_model
and test_families), resumed after an interruption with the losses of an uninterrupted run, trained on PTB trees
(converted to dependencies, or as constituency trees), and bad inputs named."""

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from hf_slm.cli import main

from conftest import write_conllu_treebank

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TINY = ["--set", "hidden_size=16", "--set", "num_slots=6", "--set", "intermediate_size=24", "--set", "parser_size=8"]
DSOM = ["--set", "semantic_size=12", "--set", "syntactic_size=4"]


@pytest.fixture(scope="module")
def treebank(tmp_path_factory):
    """conftest's UD-style treebank (one non-projective sentence, lifted for Gamma) as en_mini-ud-*.conllu."""
    return write_conllu_treebank(tmp_path_factory.mktemp("conllu"))


def train_command(treebank, output, *extra, preset="esom-tiny", steps=4):
    return ["train", "--preset", preset, "--train", str(treebank / "en_mini-ud-train.conllu"),
            "--eval", str(treebank / "en_mini-ud-dev.conllu"), "--output", str(output), "--max-steps", str(steps),
            "--batch-size", "2", "--min-count", "1", "--logging-steps", "1", "--save-steps", "2",
            "--eval-steps", "2", "--warmup-steps", "1", *TINY, *extra]


def test_train_saves_a_checkpoint_and_its_record(treebank, tmp_path, capsys):
    output = tmp_path / "dsom"
    assert main(train_command(treebank, output, *DSOM, preset="dsom-tiny")) == 0
    files = {path.name for path in output.iterdir()}
    assert {"model.safetensors", "config.json", "modeling_som.py", "configuration_som.py", "tokenizer_config.json",
            "vocab.json", "training_setup.json"} <= files
    assert not list(output.glob("*.bin")), "the final folder holds no pickles"
    record = json.loads((output / "training_setup.json").read_text())
    assert record["preset"] == "dsom-tiny" and record["grammar"] is None and record["steps_done"] == 4
    assert record["train_examples"] == 4 and record["eval_examples"] == 1
    assert record["final_eval_loss"] is not None and record["final_train_loss"] is not None
    assert record["som"]["gold_tree"] == "dependency" and record["som"]["model"] == "dSOM"
    assert record["som"]["tokenizer"] == "SyntacticWordTokenizer" and record["som"]["dependency_conversion"] is None
    config = json.loads((output / "config.json").read_text())
    assert config["model_type"] == "syntactic_ordered_memory" and config["disentangle"] is True
    assert config["hidden_size"] == 16 and config["num_slots"] == 6

    # The card quotes training_setup.json.
    capsys.readouterr()
    assert main(["card", str(output)]) == 0
    card = (output / "README.md").read_text()
    assert "dSOM" in card and "`dsom-tiny`" in card and "4 of 4" in card and "no `training_setup.json`" not in card


def _losses(checkpoint):
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    return {entry["step"]: entry["loss"] for entry in state["log_history"] if "loss" in entry}


def test_resume_after_an_interruption_gives_the_uninterrupted_run(treebank, tmp_path, capsys, monkeypatch):
    from transformers import Trainer

    every4 = ["--save-steps", "4"]  # (the last two checkpoints are kept)
    full = tmp_path / "full"
    assert main(train_command(treebank, full, *every4, steps=8)) == 0
    # The same command stopped by Ctrl-C in its 6th step: checkpoint-4 is saved, no final model.
    interrupted = tmp_path / "interrupted"
    step = Trainer.training_step
    calls = []

    def stopped_in_step_6(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 6:
            raise KeyboardInterrupt
        return step(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "training_step", stopped_in_step_6)
    capsys.readouterr()
    assert main(train_command(treebank, interrupted, *every4, steps=8)) == 130
    assert "interrupted" in capsys.readouterr().err
    monkeypatch.setattr(Trainer, "training_step", step)
    assert [path.name for path in interrupted.glob("checkpoint-*")] == ["checkpoint-4"]
    assert not (interrupted / "model.safetensors").exists() and not (interrupted / ".hf-slm.lock").exists()
    assert main(train_command(treebank, interrupted, *every4, steps=8)) == 2  # refused without --resume
    assert "holds the checkpoints of an earlier run (checkpoint-4)" in capsys.readouterr().err
    assert main(train_command(treebank, interrupted, *every4, "--resume", steps=8)) == 0
    resumed, uninterrupted = _losses(interrupted / "checkpoint-8"), _losses(full / "checkpoint-8")
    assert sorted(resumed) == list(range(1, 9))
    for number in range(5, 9):
        assert resumed[number] == uninterrupted[number], (number, resumed[number], uninterrupted[number])
    first, second = load_file(full / "model.safetensors"), load_file(interrupted / "model.safetensors")
    assert first.keys() == second.keys()
    assert all(torch.equal(first[name], second[name]) for name in first)


@pytest.mark.parametrize("extra, gold_tree, converted", [
    (["--convert-to-dependencies"], "dependency", True),
    (["--gold-tree", "constituency", "--strip-function-tags"], "constituency", False),
    (["--gold-tree", "left_branching"], "left_branching", False),
])
def test_ptb_trees_train_som(tmp_path, extra, gold_tree, converted):
    trees = [str(FIXTURES / "tokenizer_trees.mrg"), str(FIXTURES / "data" / "wsj" / "02")]
    output = tmp_path / "run"
    assert main(["train", "--preset", "esom-tiny", "--train", *trees, "--output", str(output), "--max-steps", "2",
                 "--batch-size", "4", *TINY, *extra]) == 0
    record = json.loads((output / "training_setup.json").read_text())
    assert record["train_examples"] == 13 and record["steps_done"] == 2
    assert record["som"]["gold_tree"] == gold_tree
    assert (record["som"]["dependency_conversion"] is not None) == converted


MISTAKES = [
    # a constituency-only file for a dependency setup
    (lambda tb, out: ["--train", str(FIXTURES / "tokenizer_trees.mrg")],
     "holds bracketed \\(constituency\\) trees.*--convert-to-dependencies"),
    (lambda tb, out: ["--train", str(tb / "en_mini-ud-train.conllu"), "--gold-tree", "constituency"],
     "is a CoNLL-U file \\(dependency trees\\); --gold-tree constituency needs bracketed PTB trees"),
    (lambda tb, out: ["--train", str(tb / "en_mini-ud-train.conllu"), "--convert-to-dependencies"],
     "holds dependency trees already"),
    (lambda tb, out: ["--train", str(tb)], "is a folder of CoNLL-U files .*name the file"),
    (lambda tb, out: ["--train", str(tb / "en_mini-ud-train.conllu"), "--set", "hiden_size=8"],
     "no field 'hiden_size' \\(did you mean hidden_size"),
    (lambda tb, out: ["--train", str(tb / "en_mini-ud-train.conllu"), "--set", "vocab_size=8"],
     "--set vocab_size: it comes from the tokenizer"),
    (lambda tb, out: ["--train", str(tb / "en_mini-ud-train.conllu"), "--segment-length", "8"],
     "--segment-length.*Syntactic Ordered Memory model is recurrent"),
    (lambda tb, out: ["--train", str(tb / "en_mini-ud-train.conllu"), "--tokenizer", str(out)],
     "tokenizer .* does not exist"),
    (lambda tb, out: ["--train", str(tb / "missing.conllu")], "--train .*missing.conllu' does not exist"),
    (lambda tb, out: ["--train", str(tb / "en_mini-ud-train.conllu"), "--min-count", "0"],
     "argument --min-count: expected a positive integer, got 0"),
]


@pytest.mark.parametrize("arguments, message", MISTAKES, ids=[f"mistake{i}" for i in range(len(MISTAKES))])
def test_bad_inputs_are_named_before_anything_is_written(treebank, tmp_path, capsys, arguments, message):
    import re

    output = tmp_path / "run"
    try:
        code = main(["train", "--preset", "esom-tiny", "--output", str(output), "--max-steps", "1",
                     *arguments(treebank, tmp_path / "no-tokenizer")])
    except SystemExit as stopped:  # argparse's own errors (an option's range) exit with 2
        code = stopped.code
    error = capsys.readouterr().err
    assert code == 2 and re.search(message, error), error
    assert "Traceback" not in error
    assert not output.exists() or not any(output.iterdir())


def test_som_options_with_another_preset_are_refused(treebank, tmp_path, capsys):
    code = main(["train", "--preset", "tg-ptb", "--train", str(FIXTURES / "tokenizer_trees.mrg"), "--output",
                 str(tmp_path / "run"), "--gold-tree", "constituency"])
    assert code == 2 and "--gold-tree: an option of Syntactic Ordered Memory (SOM) presets (paper 001); preset 'tg-ptb' is a" in capsys.readouterr().err


def test_presets_cover_table_6_and_tiny_ones(capsys):
    from hf_slm.modeling.configuration_som import SOM_PRESETS
    from hf_slm.families.ordered_memory.training import SOM_TRAINING_PRESETS

    assert set(SOM_PRESETS) | {"esom-tiny", "dsom-tiny"} == set(SOM_TRAINING_PRESETS)
    assert SOM_TRAINING_PRESETS["dsom-ptb"]["model"]["semantic_size"] == 300
    assert SOM_TRAINING_PRESETS["esom-ptb"]["model"]["hidden_size"] == 400
    assert main(["presets"]) == 0  # `hf-slm presets` lists them beside the Transformer presets
    listed = {line.split()[0]: line.split()[1:4] for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert listed["dsom-ptb"] == ["dsom", "400", "15"] and listed["esom-tiny"] == ["esom", "64", "10"]


# ---- Table 2's ablations from the command line: section 3.2's sampled slot, the oracle trees ---------------------
def test_the_sampled_prediction_network_trains_from_the_command_line(treebank, tmp_path):
    output = tmp_path / "sampled"
    assert main(train_command(treebank, output, "--set", "prediction_network=sampled")) == 0
    assert json.loads((output / "config.json").read_text())["prediction_network"] == "sampled"
    record = json.loads((output / "training_setup.json").read_text())
    assert record["som"]["prediction_network"] == "sampled" and record["final_train_loss"] is not None


def test_the_oracle_trains_and_evaluates_with_the_gold_trees(treebank, tmp_path, capsys):
    """`--oracle-trees` (Table 2's "- Predicted tree + Gold tree"): saved in the config, and `eval parse` reports the
    perplexity given the gold trees, which is the model's own when its memory follows the gold grid, not when it
    follows its parser."""
    from hf_slm.checkpoints.loading import load_checkpoint
    from hf_slm.data.conllu_loader import read_conllu_file
    from hf_slm.families.ordered_memory.data import (
        SyntacticOrderedMemoryCollator,
        som_example,
    )

    output = tmp_path / "oracle"
    assert main(train_command(treebank, output, "--oracle-trees")) == 0
    assert json.loads((output / "config.json").read_text())["oracle_trees"] is True
    assert json.loads((output / "training_setup.json").read_text())["som"]["oracle_trees"] is True
    capsys.readouterr()
    gold = treebank / "en_mini-ud-train.conllu"
    assert main(["eval", "parse", "--model", str(output), "--gold", str(gold)]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert "uf1" not in printed and 0 <= printed["p_accuracy"] <= 1

    model, tokenizer = load_checkpoint(output)
    model.eval()
    sentences = read_conllu_file(gold, gold.name)
    batch = SyntacticOrderedMemoryCollator(tokenizer)([som_example(tokenizer, s["words"], s["heads"]) for s in sentences])
    plain = {name: value for name, value in batch.items() if name != "som_first_siblings"}
    with torch.no_grad():
        given_gold = model(**plain, gold_decisions=model.gold_grid(batch["som_first_siblings"])).lm_loss
        own_parse = model(**plain).lm_loss
    assert printed["perplexity"] == pytest.approx(math.exp(given_gold.item()), rel=1e-5)
    assert printed["perplexity"] != pytest.approx(math.exp(own_parse.item()), rel=1e-5)
    results = json.loads(next((output / "eval_results").glob("uf1-*.json")).read_text())
    assert "gold tree" in results["metrics"]["decisions"]
    assert main(["card", str(output)]) == 0
    assert "Perplexity given the gold trees (oracle)" in (output / "README.md").read_text()
