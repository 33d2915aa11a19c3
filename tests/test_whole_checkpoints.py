"""Checkpoints are whole or absent (hf_slm/checkpoints/whole.py, issue 39 section 4): a save that runs out of space
says so and leaves no checkpoint-N, a process killed during a save leaves none either, and `--resume` continues from
the last whole checkpoint, naming what it passed over. For every trainer hf-slm runs: the families with grammars',
SOM's and the proposal parsers'."""

import errno
import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hf_slm.checkpoints.whole import PARTIAL, checkpoint_to_resume, is_whole, last_whole_checkpoint
from hf_slm.cli import main
from hf_slm.cli.errors import user_error_message

from conftest import write_conllu_treebank

GUM = Path(__file__).resolve().parents[1] / "hf_slm" / "sample_data" / "gum"
RUN = ["--max-steps", "6", "--save-steps", "2", "--logging-steps", "1"]
TINY_TG = ["--set", "hidden_size=16", "--set", "num_hidden_layers=1", "--set", "num_attention_heads=2",
           "--set", "intermediate_size=32"]
TINY_SOM = ["--set", "hidden_size=16", "--set", "num_slots=6", "--set", "intermediate_size=24",
            "--set", "parser_size=8"]
TINY_PARSER = ["--set", "lstm_hidden_size=24", "--set", "lstm_layers=1", "--set", "word_embedding_size=16",
               "--set", "span_mlp_size=16", "--set", "label_mlp_size=16", "--set", "tag_mlp_size=16"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("whole-checkpoints")
    lines = (GUM / "train.txt").read_text().splitlines()[:40]
    (folder / "trees.txt").write_text("\n".join(lines) + "\n")
    write_conllu_treebank(folder)
    return folder


def command(trainer, data, output):
    """The training command of each trainer hf-slm runs, tiny."""
    if trainer == "grammar":
        return ["train", "--preset", "tg-tiny", "--train", str(data / "trees.txt"), "--output", str(output),
                "--batch-size", "4", "--warmup-steps", "1", *TINY_TG, *RUN]
    if trainer == "som":
        return ["train", "--preset", "esom-tiny", "--train", str(data / "en_mini-ud-train.conllu"), "--output",
                str(output), "--batch-size", "2", "--min-count", "1", "--warmup-steps", "1", *TINY_SOM, *RUN]
    return ["parser", "train", "--kind", "crf", "--train", str(data / "trees.txt"), "--output", str(output),
            "--batch-size", "4", *TINY_PARSER, *RUN]


def steps_logged(checkpoint):
    state = json.loads((Path(checkpoint) / "trainer_state.json").read_text())
    return [entry["step"] for entry in state["log_history"] if "loss" in entry]


# A training run whose process is killed (SIGKILL: nothing runs after it) once the weights and the optimizer of
# checkpoint-4 are written, before its RNG states and trainer_state.json.
KILLED_IN_SAVE_4 = """
import os, signal, sys
from transformers import Trainer
from hf_slm.cli import main

save_rng_state = Trainer._save_rng_state

def killed_at_step_4(self, output_dir):
    if self.state.global_step == 4:
        os.kill(os.getpid(), signal.SIGKILL)
    return save_rng_state(self, output_dir)

Trainer._save_rng_state = killed_at_step_4
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("trainer", ["grammar", "som", "parser"])
def test_a_process_killed_during_a_save_leaves_no_checkpoint_and_resume_continues(trainer, data, tmp_path, capsys):
    output = tmp_path / "run"
    killed = subprocess.run([sys.executable, "-c", KILLED_IN_SAVE_4, *command(trainer, data, output)],
                            capture_output=True, text=True, timeout=600)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    # What the killed save wrote is aside, not a checkpoint: the last checkpoint is the whole checkpoint-2.
    assert sorted(path.name for path in output.glob("checkpoint-*")) == ["checkpoint-2"]
    assert is_whole(output / "checkpoint-2")
    assert (output / PARTIAL / "checkpoint-4" / "model.safetensors").is_file()

    assert main([*command(trainer, data, output), "--resume"]) == 0
    said = capsys.readouterr().out
    assert f"passing over {output / PARTIAL / 'checkpoint-4'} (a save that did not finish" in said
    assert steps_logged(output / "checkpoint-6") == [1, 2, 3, 4, 5, 6]  # steps 1-2 from checkpoint-2, then 3-6
    assert is_whole(output / "checkpoint-4") and not (output / PARTIAL).exists()


@pytest.mark.parametrize("failure", [
    OSError(errno.ENOSPC, "No space left on device"),
    RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 279488 vs 279376"),  # torch.save's
], ids=["OSError", "torch"])
def test_a_save_that_runs_out_of_space_says_so_and_leaves_no_checkpoint(failure, data, tmp_path, monkeypatch, capsys):
    from transformers import Trainer

    output = tmp_path / "run"
    save_optimizer = Trainer._save_optimizer_and_scheduler

    def full_at_step_4(self, output_dir):
        if self.state.global_step == 4:
            (Path(output_dir) / "optimizer.pt").write_bytes(b"\0" * 1000)  # part of the file
            raise failure
        return save_optimizer(self, output_dir)

    monkeypatch.setattr(Trainer, "_save_optimizer_and_scheduler", full_at_step_4)
    assert main(command("grammar", data, output)) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"hf-slm train: error: saving checkpoint-4 in {output}: no space left on the device (")
    assert re.search(r"\(\d+(\.\d)? [kMG]B free there; a checkpoint of this run takes \d+(\.\d)? [kMG]B \(checkpoint-2\)\)",
                     err), err
    assert err.endswith("then run the same command with --resume: it continues from checkpoint-2")
    assert sorted(path.name for path in output.glob("checkpoint-*")) == ["checkpoint-2"]
    assert not (output / PARTIAL).exists()  # the partial checkpoint's space is given back

    monkeypatch.setattr(Trainer, "_save_optimizer_and_scheduler", save_optimizer)
    assert main([*command("grammar", data, output), "--resume"]) == 0
    assert steps_logged(output / "checkpoint-6") == [1, 2, 3, 4, 5, 6]


def test_other_save_failures_are_not_called_a_full_disk(data, tmp_path, monkeypatch):
    from transformers import Trainer

    def refused(self, output_dir):
        raise PermissionError(errno.EACCES, "Permission denied", str(Path(output_dir) / "optimizer.pt"))

    monkeypatch.setattr(Trainer, "_save_optimizer_and_scheduler", refused)
    with pytest.raises(PermissionError) as caught:
        main(["--debug", *command("grammar", data, tmp_path / "run")])
    assert "no space" not in user_error_message(caught.value)
    assert not list((tmp_path / "run").glob("checkpoint-*")) and not (tmp_path / "run" / PARTIAL).exists()


def _checkpoint(folder, state="{}"):
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"weights")
    if state is not None:
        (folder / "trainer_state.json").write_text(state)


def test_resume_takes_the_last_whole_checkpoint_and_names_what_it_passes_over(tmp_path):
    _checkpoint(tmp_path / "checkpoint-2")
    _checkpoint(tmp_path / "checkpoint-10")
    _checkpoint(tmp_path / "checkpoint-20", state=None)  # written before whole checkpoints: no trainer_state.json
    _checkpoint(tmp_path / "checkpoint-30", state='{"log_history": [')  # cut short
    _checkpoint(tmp_path / PARTIAL / "checkpoint-40", state=None)
    lines = []
    assert checkpoint_to_resume(tmp_path, lines.append) == str(tmp_path / "checkpoint-10")  # by step, not by name
    assert lines == [f"--resume: passing over {tmp_path / PARTIAL / 'checkpoint-40'} (a save that did not finish "
                     "(the process stopped during it))",
                     f"--resume: passing over {tmp_path / 'checkpoint-30'} (no readable trainer_state.json: its save "
                     "did not finish)",
                     f"--resume: passing over {tmp_path / 'checkpoint-20'} (no readable trainer_state.json: its save "
                     "did not finish)"]

    only_partial = tmp_path / "only-partial"
    _checkpoint(only_partial / "checkpoint-4", state=None)
    assert last_whole_checkpoint(only_partial) == (None, [only_partial / "checkpoint-4"])
    with pytest.raises(ValueError, match=r"holds no complete checkpoint-\* folder to resume from \(only incomplete "
                                         r"ones: checkpoint-4\); leave out --resume"):
        checkpoint_to_resume(only_partial)
    assert last_whole_checkpoint(tmp_path / "absent") == (None, [])
