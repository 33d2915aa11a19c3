"""Training checkpoints that are whole or absent, and the last whole one, which `--resume` continues.

Trainer writes `checkpoint-N/` file by file, its `trainer_state.json` last. A save that fails part-way (a full disk)
or a process killed during one used to leave a `checkpoint-N/` that looked like the newest checkpoint: `--resume`
took it and stopped on the missing file, and the user had to find and delete it by hand. Here every file of a
checkpoint is written into `.partial-checkpoint/checkpoint-N/` beside the others and the folder is renamed to
`checkpoint-N/` once the last one is written (a rename within a folder is atomic), so a `checkpoint-N/` is always
complete. A failed save removes its partial folder, saying what failed; a killed one leaves it, and the next save,
`--overwrite` or `--resume` (which names it) deals with it.
"""

import json
import os
import shutil
from pathlib import Path

from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

from ..runs.disk import disk_full, readable_size

TRAINER_STATE_NAME = "trainer_state.json"  # transformers.trainer's name for it (that module is slow to import)
PARTIAL = ".partial-checkpoint"  # hidden: neither Trainer's nor our globs of checkpoint-* see it

class CheckpointNotSaved(OSError):
    """A checkpoint could not be written (an OSError: the command line reports it as one line)."""

    def __str__(self):
        return self.args[0]


class WholeCheckpoints:
    """Trainer mixin (before Trainer in the bases): checkpoints written aside and renamed once whole (module
    docstring). `save_extra_files(folder)` is where a subclass writes files of its own into a checkpoint; every
    process calls it, before the rename."""

    _writing_into = None  # the partial folder's parent while a checkpoint is written

    def _get_output_dir(self, trial):
        # Trainer._save_checkpoint writes into <this>/checkpoint-N
        return self._writing_into or super()._get_output_dir(trial)

    def save_extra_files(self, folder):
        pass

    def _save_checkpoint(self, model, trial):
        run_dir = self._get_output_dir(trial)
        name = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        partial_root = os.path.join(run_dir, PARTIAL)
        partial, whole = os.path.join(partial_root, name), os.path.join(run_dir, name)
        if self.args.should_save:
            shutil.rmtree(partial_root, ignore_errors=True)  # what a killed save left
        self.accelerator.wait_for_everyone()
        self._writing_into = partial_root
        try:
            super()._save_checkpoint(model, trial)
            self.save_extra_files(partial)
        except Exception as error:
            if self.args.should_save:
                written = folder_size(partial)
                shutil.rmtree(partial_root, ignore_errors=True)
                if disk_full(error):
                    raise CheckpointNotSaved(disk_full_message(run_dir, name, written)) from error
            raise
        finally:
            self._writing_into = None
        self.accelerator.wait_for_everyone()
        if self.args.should_save:
            if self.state.best_model_checkpoint == partial:  # this checkpoint is the best: it is read back by name
                self.state.best_model_checkpoint = whole
                self.state.save_to_json(os.path.join(partial, TRAINER_STATE_NAME))
            if os.path.isdir(whole):  # a step saved again: the run resumed from before an incomplete checkpoint-N
                shutil.rmtree(whole)
            os.replace(partial, whole)
            shutil.rmtree(partial_root, ignore_errors=True)
            rotate_checkpoints(run_dir, self.args.save_total_limit, self.state.best_model_checkpoint)
        self.accelerator.wait_for_everyone()


def disk_full_message(run_dir, name, written):
    """What to tell the user when checkpoint `name` did not fit in `run_dir`; `written`: bytes it had when it failed."""
    last = last_whole_checkpoint(run_dir)[0]
    needed = (f"a checkpoint of this run takes {readable_size(folder_size(last))} ({Path(last).name})" if last
              else f"{readable_size(written)} had been written when it failed")
    then = (f"run the same command with --resume: it continues from {Path(last).name}" if last
            else "run the same command again (no checkpoint of this run was complete)")
    return (f"saving {name} in {run_dir}: no space left on the device ({readable_size(shutil.disk_usage(run_dir).free)} "
            f"free there; {needed}); the partial {name} was removed. Free some space or choose another --output, then "
            f"{then}")


def folder_size(folder):
    """Bytes in the files under `folder` (0 when it does not exist)."""
    return sum(path.stat().st_size for path in Path(folder).rglob("*") if path.is_file()) if folder else 0


def is_whole(checkpoint):
    """Whether `checkpoint` holds a readable trainer_state.json, the file Trainer writes last (a checkpoint written
    before whole checkpoints, or by another tool, can lack it)."""
    try:
        json.loads((Path(checkpoint) / TRAINER_STATE_NAME).read_text())
    except (OSError, ValueError):
        return False
    return True


def last_whole_checkpoint(run_dir):
    """(the newest whole checkpoint-N folder of `run_dir` or None, [the folders passed over: incomplete
    checkpoint-N newer than it, and a partial save's folder])."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return None, []
    steps = {int(path.name.split("-")[1]): path for path in run_dir.glob(f"{PREFIX_CHECKPOINT_DIR}-*")
             if path.is_dir() and path.name.split("-")[1].isdigit()}
    skipped = [path for path in (run_dir / PARTIAL).glob(f"{PREFIX_CHECKPOINT_DIR}-*")]
    for step in sorted(steps, reverse=True):
        if is_whole(steps[step]):
            return str(steps[step]), skipped
        skipped.append(steps[step])
    return None, skipped


def checkpoint_to_resume(run_dir, log=None):
    """The checkpoint `--resume` continues from: the newest whole one in `run_dir`; `log` is told which folders were
    passed over and why. ValueError when there is none."""
    checkpoint, skipped = last_whole_checkpoint(run_dir)
    if log is not None:
        for folder in skipped:
            why = ("a save that did not finish (the process stopped during it)" if folder.parent.name == PARTIAL
                   else f"no readable {TRAINER_STATE_NAME}: its save did not finish")
            log(f"--resume: passing over {folder} ({why})")
    if checkpoint is None:
        which = (f"no complete checkpoint-* folder to resume from (only incomplete ones: "
                 f"{', '.join(path.name for path in skipped)})" if skipped else "no checkpoint-* folder to resume from")
        raise ValueError(f"--resume: {str(run_dir)!r} holds {which}; leave out --resume to start a new run")
    return checkpoint


def resume_plan(checkpoint, max_steps):
    """The line that says what resuming from `checkpoint` for a run of `max_steps` steps does: a finished run trained
    further, or an interrupted one with another length, follows the learning-rate schedule of `max_steps` steps from
    the checkpoint's step on (the schedule is a function of the run's length; the checkpoint keeps only its step).
    ValueError when nothing is left to train."""
    state = json.loads((Path(checkpoint) / TRAINER_STATE_NAME).read_text())
    done, planned, name = state["global_step"], state.get("max_steps"), Path(checkpoint).name
    if max_steps <= done:
        raise ValueError(f"--resume: {checkpoint} is at step {done} and this run stops at step {max_steps}: nothing is "
                         f"left to train; pass a --max-steps above {done} to train it further")
    schedule = f"the learning-rate schedule of a run of {max_steps} steps, from its step {done + 1}"
    if planned is not None and done >= planned:
        return (f"resuming from {name}, the end of a finished run of {planned} steps: training on to step {max_steps} "
                f"(--max-steps sets it) with {schedule}")
    if planned is not None and planned != max_steps:
        return (f"resuming from {name}, step {done} of a run of {planned} steps: training to step {max_steps} "
                f"(--max-steps sets it) with {schedule}")
    return f"resuming from {name}, step {done} of {max_steps}"
