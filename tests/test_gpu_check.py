"""benchmarks/gpu_check.sh (issue 41): the one call a lent GPU gets. Its dry run (every part at tiny sizes on the CPU)
runs here, so that the script never rots between the rare sessions that have a GPU; and the budgets that keep the
real run inside its 8 minutes stop a part from starting what cannot finish, saying what was left out."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]
BENCHMARKS = REPOSITORY / "benchmarks"
PARTS = ["train", "search", "blimp", "proposals", "suite"]
pytestmark = pytest.mark.slow  # conftest.py: scheduled first
TRAINED = ["GPT-2", "TG", "TXL (CC)", "TXL (terminals)", "DTG", "Nb-Dn-In-M", "Nb-Dn-Ex-M", "SOM (words)"]


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-results")
    finished = subprocess.run(["bash", str(BENCHMARKS / "gpu_check.sh"), "--dry-run"], cwd=REPOSITORY,
                              env={**os.environ, "OUT": str(out)}, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr[-3000:]
    return out


def _table_rows(page):
    """The data rows of a Markdown page's tables, as lists of cells."""
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in page.splitlines()
            if line.startswith("| ") and not line.startswith("| model |") and "---" not in line
            and not line.startswith(("| beam |", "| pairs |", "| parser |"))]


def test_the_dry_run_runs_every_part_within_its_budget(dry_run):
    ended = dict(line.split(": ", 1) for line in (dry_run / "device.txt").read_text().splitlines() if ": exit " in line)
    assert list(ended) == PARTS
    assert all(how.startswith("exit 0 ") for how in ended.values()), ended


def test_the_dry_run_writes_every_table_the_gpu_run_writes(dry_run):
    train = (dry_run / "train_step_cuda.md").read_text()
    assert [row[0] for row in _table_rows(train)] == TRAINED
    assert "DRY RUN" in train and "Left out" not in train
    search = _table_rows((dry_run / "beam_search_cuda.md").read_text())
    assert [(row[0], row[2]) for row in search] == [("10", "1"), ("10", "2")]  # beam, sentences per search
    assert all(float(row[5]) > 0 for row in search)  # s/sent
    blimp = _table_rows((dry_run / "blimp_cuda.md").read_text())
    assert len(blimp) == 1 and blimp[0][1] == blimp[0][2] == "8"  # 4 pairs: 8 distinct sentences, all scored
    proposals = (dry_run / "proposals_cuda.md").read_text()
    assert "Table 3: J = 8 unique proposals per sentence" in proposals
    collected = (dry_run / "suite.log").read_text()
    assert "tests/test_training_step.py" in collected and "tests/test_low_precision.py" in collected


def test_a_usage_mistake_is_refused_before_anything_runs(tmp_path):
    finished = subprocess.run(["bash", str(BENCHMARKS / "gpu_check.sh"), "--dryrun"], cwd=REPOSITORY,
                              env={**os.environ, "OUT": str(tmp_path)}, capture_output=True, text=True)
    assert finished.returncode == 2 and "usage: bash benchmarks/gpu_check.sh [--dry-run]" in finished.stderr
    assert not list(tmp_path.iterdir())


@pytest.fixture
def beam_search_script(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import beam_search

    return beam_search


def test_a_row_is_expected_to_take_its_beams_time_per_sentence(beam_search_script):
    expected = beam_search_script.expected_seconds
    done = [dict(beam=10, seconds=0.5), dict(beam=100, seconds=2.0)]
    assert expected([], 10, 1) == 0.0  # nothing known: the first row always runs
    assert expected(done, 100, 64) == 2 * 2.0 * 64  # the same beam's s/sent, doubled, times its sentences
    assert expected(done, 300, 5) == 2 * 2.0 * 5 * 3  # a larger beam: the last smaller one's, scaled by the beam
    assert expected(done, 10, 1) == 2 * 0.5 * 3  # one per search: three searches of one


def test_a_budget_left_out_rows_are_named_on_the_page(tmp_path):
    """A budget too small for a second row: the first runs (nothing is known before it), the second is left out
    and the page says so."""
    page = tmp_path / "search.md"
    finished = subprocess.run([sys.executable, str(BENCHMARKS / "beam_search.py"), "--dry-run", "--tables", "search",
                               "--budget", "0.01", "--markdown", str(page)], cwd=REPOSITORY, capture_output=True,
                              text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr[-3000:]
    text = page.read_text()
    assert [row[2] for row in _table_rows(text)] == ["1"]
    assert "Left out for the 0 s budget: beam 10, 2 per search." in text


def test_train_step_refuses_a_model_it_does_not_know(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import train_step

    assert train_step.model_names(["som", "tg"]) == ["gpt2", "tg", "som"]  # GPT-2 first: the ratios' base
    with pytest.raises(SystemExit, match="--only urnng: expected some of gpt2, tg,"):
        train_step.model_names(["tg", "urnng"])


def test_the_products_replay_records_the_backward_and_reads_a_weight_as_one_tensor(monkeypatch):
    """train_step's floor for SOM (time_products_alone) replays what recorded_products saw: the forward's and the
    backward's products in order, a weight the step reads twice named by one memory location."""
    import math
    from types import SimpleNamespace

    import torch
    from torch import nn

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import train_step

    class TwoLayers(nn.Module):
        def __init__(self):
            super().__init__()
            self.first, self.second = nn.Linear(3, 4), nn.Linear(4, 5)

        def forward(self, x):
            return SimpleNamespace(loss=self.second(torch.relu(self.first(x))).square().sum())

    model = TwoLayers()
    calls = train_step.recorded_products(model, {"x": torch.randn(2, 3)})
    names = [func.__name__ for func, _, _ in calls]
    # forward: two addmm; backward: the second layer's input and weight gradients, the first layer's weight gradient
    assert names == ["addmm.default", "addmm.default", "mm.default", "mm.default", "mm.default"]
    addresses = [layout[3] for _, args, _ in calls for layout in args if isinstance(layout, tuple)]
    assert addresses.count(model.second.weight.untyped_storage().data_ptr()) == 2  # forward, and the input gradient
    assert all(parameter.grad is None for parameter in model.parameters())  # the recording leaves no gradient
    assert math.isfinite(train_step.time_products_alone(model, {"x": torch.randn(2, 3)}))
