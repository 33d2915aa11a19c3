"""Training with transformers.Trainer: the schedule, the loss going down, exact resumption."""

import json
import math
import shutil
from pathlib import Path

import pytest

from hf_slm.training import TrainingSetup, train, warmup_cosine_schedule

SAMPLE = Path(__file__).resolve().parents[1] / "hf_slm" / "sample_data" / "gum"
TINY = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, max_sequence_length=512)


def test_warmup_then_cosine_schedule():
    args = dict(warmup_steps=10, total_steps=110, initial=1e-7, peak=1e-3, final=3e-7)
    assert warmup_cosine_schedule(0, **args) == pytest.approx(1e-7)
    assert warmup_cosine_schedule(5, **args) == pytest.approx(1e-7 + (1e-3 - 1e-7) / 2)
    assert warmup_cosine_schedule(10, **args) == pytest.approx(1e-3)
    assert warmup_cosine_schedule(60, **args) == pytest.approx(3e-7 + (1e-3 - 3e-7) / 2)
    assert warmup_cosine_schedule(110, **args) == pytest.approx(3e-7)
    assert warmup_cosine_schedule(500, **args) == pytest.approx(3e-7)


@pytest.fixture(scope="module")
def small_trees(tmp_path_factory):
    directory = tmp_path_factory.mktemp("trees")
    lines = (SAMPLE / "train.txt").read_text().splitlines()
    (directory / "train.txt").write_text("\n".join(lines[:160]) + "\n")
    (directory / "dev.txt").write_text("\n".join(lines[160:200]) + "\n")
    return directory


def setup_for(directory, output, **changes):
    options = dict(
        preset="tg-ptb", train=[directory / "train.txt"], eval=[directory / "dev.txt"], output=str(output),
        vocab_size=300, model_overrides=TINY, max_steps=40, batch_size=8, learning_rate=3e-3, warmup_steps=5,
        eval_steps=1000, save_steps=1000, logging_steps=5, disable_progress=True, label_files=[],
    )
    options.update(changes)
    return TrainingSetup(**options)


def test_short_training_run_lowers_the_loss(small_trees, tmp_path):
    trainer, tokenizer = train(setup_for(small_trees, tmp_path / "run"), log=lambda *_: None)
    record = json.loads((tmp_path / "run" / "training_setup.json").read_text())
    assert record["preset"] == "tg-ptb" and record["grammar"] == "tg"
    assert record["steps_done"] == trainer.state.global_step > 0
    assert record["train_examples"] == 160 and record["eval_examples"] == 40
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 8
    assert losses[-1] < losses[0] - 1.0
    assert trainer.evaluate()["eval_loss"] < math.log(len(tokenizer)) - 1.0  # well below a uniform guess
    assert (tmp_path / "run" / "model.safetensors").exists() and (tmp_path / "run" / "tokenizer_config.json").exists()


def test_resuming_reproduces_the_next_steps_exactly(small_trees, tmp_path):
    quiet = dict(max_steps=8, save_steps=4, logging_steps=1, learning_rate=1e-3, warmup_steps=2)
    first, _ = train(setup_for(small_trees, tmp_path / "a", **quiet), log=lambda *_: None)
    full = {e["step"]: e["loss"] for e in first.state.log_history if "loss" in e}
    # A second run that starts from the step-4 checkpoint of the first, with the first run's tokenizer.
    (tmp_path / "b").mkdir()
    shutil.copytree(tmp_path / "a" / "checkpoint-4", tmp_path / "b" / "checkpoint-4")
    second, _ = train(setup_for(small_trees, tmp_path / "b", tokenizer=str(tmp_path / "a"), resume=True, **quiet),
                      log=lambda *_: None)
    # The history up to step 4 comes from the checkpoint; steps 5-8 were computed by the second run.
    resumed = {e["step"]: e["loss"] for e in second.state.log_history if "loss" in e and e["step"] > 4}
    assert sorted(resumed) == [5, 6, 7, 8]
    for step in resumed:
        assert resumed[step] == full[step], (step, resumed[step], full[step])


def test_training_errors(small_trees, tmp_path):
    with pytest.raises(ValueError, match="unknown preset 'tg-xl'"):
        train(setup_for(small_trees, tmp_path / "x", preset="tg-xl"), log=lambda *_: None)
    with pytest.raises(ValueError, match="does not exist"):
        train(setup_for(small_trees, tmp_path / "x", train=[tmp_path / "nope.txt"]), log=lambda *_: None)
    with pytest.raises(ValueError, match="tree 0 expands to .* max_sequence_length 20"):
        train(setup_for(small_trees, tmp_path / "x", model_overrides=dict(TINY, max_sequence_length=20)), log=lambda *_: None)
