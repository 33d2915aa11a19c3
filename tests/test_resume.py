"""Lost work (issue 12, class 2): the journal and lock of hf_slm/runs/journal.py, a real run interrupted with
SIGINT and resumed, and the quickstart run twice into one folder. The table's cases are in
mistake_cases_outputs.py."""

import json
import os
import random
import signal
import re
import subprocess
import sys

import pytest

from conftest import save_tiny_checkpoint
from hf_slm.runs.journal import LOCK_NAME, RunJournal, map_in_chunks, output_lock
from helpers.cli import run_cli_in_process
from helpers.processes import read_stderr_until
from helpers.ptb_trees import TREES

pytestmark = pytest.mark.slow  # conftest.py: scheduled first


def test_journal_resumes_drops_a_cut_line_and_names_a_difference(tmp_path):
    path = tmp_path / "run.journal.jsonl"
    header = {"run": "ppl", "settings": {"beam_size": 5}}
    calls = []

    def compute(chunk):
        calls.append(list(chunk))
        return [len(item) * 0.5 for item in chunk]

    journal = RunJournal(path, header, log=lambda line: None)
    assert not path.exists()  # nothing finished, nothing written
    first = map_in_chunks(compute, ["a", "bb", "ccc", "dddd", "e"], 2, journal)
    journal.close()
    path.write_text(path.read_text().rsplit("\n", 4)[0] + '\n{"key": "2", "va')  # killed mid-line, 2 chunks left
    said = []
    again = RunJournal(path, header, log=said.append)
    calls.clear()
    assert map_in_chunks(compute, ["a", "bb", "ccc", "dddd", "e"], 2, again) == first
    assert calls == [["ccc", "dddd"], ["e"]]  # the cut line was dropped, its chunk computed again
    assert said == ["resuming run.journal.jsonl: 2 of 5 items already finished"]
    again.close()
    with pytest.raises(ValueError, match=r"belongs to another run \(settings\.beam_size: 5 in the journal, 6 now\)"):
        RunJournal(path, {"run": "ppl", "settings": {"beam_size": 6}})
    assert RunJournal(path, {"run": "ppl", "settings": {"beam_size": 6}}, overwrite=True).finished == {}


def test_lock_refuses_a_live_holder_takes_a_stale_one_and_is_reentrant(tmp_path):
    with output_lock(tmp_path / "out") as lock:
        holder = json.loads(lock.read_text())
        assert holder["pid"] == os.getpid()
        with output_lock(tmp_path / "out"):  # the same process (quickstart -> train)
            pass
        assert lock.exists()
    assert not lock.exists() and not (tmp_path / "out").exists()  # made for the run, left empty: removed
    (tmp_path / "out").mkdir()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "out" / LOCK_NAME).write_text(json.dumps({"pid": sleeper.pid, "host": holder["host"]}))
        with pytest.raises(ValueError, match=rf"lock file .*{LOCK_NAME}, pid {sleeper.pid}\)"):
            with output_lock(tmp_path / "out"):
                pass
    finally:
        sleeper.kill()
        sleeper.wait()
    said = []
    with output_lock(tmp_path / "out", log=said.append):  # its process is gone now
        pass
    assert said and "taking over the stale lock" in said[0]
    with pytest.raises(RuntimeError):
        with output_lock(tmp_path / "new"):
            raise RuntimeError("failed before writing anything")
    assert not (tmp_path / "new").exists()


def _hf_slm_process(tmp_path, *argv):
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    # A background job's shell starts it with SIGINT ignored, which Python keeps: Ctrl-C must reach the command.
    return subprocess.Popen([sys.executable, "-m", "hf_slm.cli", *map(str, argv)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def test_an_evaluation_stopped_with_ctrl_c_resumes_with_the_same_numbers(tmp_path):
    model = save_tiny_checkpoint(tmp_path / "model", TREES)[0]
    words = "the blue bird sings a dog barks at moon I like it".split()
    rng = random.Random(0)
    data = tmp_path / "data.txt"
    data.write_text("".join(" ".join(rng.choice(words) for _ in range(rng.randint(3, 8))) + "\n" for _ in range(12)))
    command = ["eval", "ppl", "--model", model, "--data", data, "--batch-size", "1", "--beam-size", "20",
               "--word-beam-size", "5"]

    run = _hf_slm_process(tmp_path, *command, "--output", tmp_path / "results")
    journal = tmp_path / "results" / "ppl-data.journal.jsonl"
    # The progress bar counts a sentence once the journal holds it: wait until it shows 3 of the 12.
    seen = read_stderr_until(run, lambda seen: max(map(int, re.findall(rb"(\d+)/12 \[", seen)), default=0) >= 3,
                             timeout=300)
    assert run.poll() is None, seen.decode(errors="replace")
    assert len(journal.read_text().splitlines()) >= 4, seen.decode(errors="replace")  # the header and 3 sentences
    run.send_signal(signal.SIGINT)
    _, rest = run.communicate(timeout=120)
    stderr = seen.decode(errors="replace") + rest
    assert run.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted" in stderr
    finished = len(journal.read_text().splitlines()) - 1
    assert 3 <= finished < 12, "the run was interrupted mid-way"
    assert not (tmp_path / "results" / "ppl-data.json").exists()
    assert not (tmp_path / "results" / LOCK_NAME).exists()

    # Only the interrupted run needs a process of its own (a signal); the two runs compared run here.
    resumed = run_cli_in_process(*command, "--output", tmp_path / "results", cwd=tmp_path)
    uninterrupted = run_cli_in_process(*command, "--output", tmp_path / "uninterrupted", cwd=tmp_path)
    assert resumed.returncode == 0 and uninterrupted.returncode == 0, resumed.stderr + uninterrupted.stderr
    assert f"resuming ppl-data.journal.jsonl: {finished} of 12 sentences already finished" in resumed.stderr

    def saved(folder):
        return json.loads((tmp_path / folder / "ppl-data.json").read_text())["metrics"]

    assert saved("results") == saved("uninterrupted")
    assert ((tmp_path / "results" / "ppl-data_sentences.jsonl").read_text()
            == (tmp_path / "uninterrupted" / "ppl-data_sentences.jsonl").read_text())


def test_quickstart_run_twice_into_one_folder_reuses_its_model(tmp_path):
    from hf_slm.cli.quickstart import run_quickstart

    lines = []
    first = run_quickstart(tmp_path / "quick", max_steps=2, max_seconds=60, log=lines.append)
    weights = (tmp_path / "quick" / "model.safetensors").read_bytes()
    lines.clear()
    second = run_quickstart(tmp_path / "quick", max_steps=2, max_seconds=60, log=lines.append)
    assert any("holds the model an earlier quickstart trained (2 steps" in line for line in lines), lines
    # issue 39: a rerun said "[1/4] training ... for 2 steps" before saying it reuses the model
    assert not any("training a tokenizer" in line for line in lines), lines
    assert (tmp_path / "quick" / "model.safetensors").read_bytes() == weights
    assert second["steps"] == first["steps"] == 2 and second["log_probs"] == first["log_probs"]


def test_a_quickstart_stopped_by_its_time_cap_says_so_and_is_not_reused(tmp_path):
    from hf_slm.cli.quickstart import run_quickstart

    lines = []
    capped = run_quickstart(tmp_path / "quick", max_steps=3, max_seconds=1e-6, log=lines.append)
    assert capped["steps"] == 1
    assert any("STOPPED EARLY at step 1 of 3" in line for line in lines), lines
    with pytest.raises(ValueError, match=r"stopped at step 1 of 3 .*--overwrite"):
        run_quickstart(tmp_path / "quick", max_steps=3, log=lines.append)
