"""Progress of the searches and generations a user waits on (issue 31, item 6): the word-synchronous search reports
every word step of every sentence, and `hf-slm parse`, `score` and `generate` show a bar once the work takes longer
than hf_slm.search.progress.PROGRESS_DELAY (0 here, so that the tiny model's work shows one)."""

from pathlib import Path

import pytest

from hf_slm.cli import main
from hf_slm.modeling.generation_slm import BeamSearchOptions, WordSynchronousBeamSearch

from conftest import save_tiny_checkpoint

GUM = Path(__file__).resolve().parents[1] / "hf_slm" / "sample_data" / "gum" / "train.txt"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp("progress")
    return save_tiny_checkpoint(directory, GUM.read_text(encoding="utf-8").splitlines()[:30], vocab_size=100)


def test_the_search_reports_each_word_of_each_sentence(checkpoint):
    _, model, tokenizer = checkpoint
    sentences = [["The", "students", "sleep"], ["A", "cat", "sat", "on", "mats"]]
    pieces = [[tokenizer([word], is_split_into_words=True, add_special_tokens=False)["input_ids"] for word in words]
              for words in sentences]
    steps = []
    search = WordSynchronousBeamSearch(model, BeamSearchOptions(beam_size=10, word_beam_size=2),
                                       word_start_mask=tokenizer.word_start_mask, on_word=steps.append)
    search.search(pieces)
    # both sentences take a word at each of the first three steps, then the first ends its trees while the longer
    # one takes its fourth word; the longer one alone after that (its last word, its end)
    assert steps == [2, 2, 2, 2, 1, 1]


@pytest.mark.parametrize("command", [
    ["parse", "The students sleep ."],
    ["score", "The students sleep ."],
    ["generate", "--prompt", "The students", "--max-new-words", "3"],
    ["generate", "--top-k", "2", "--num-trees", "2", "--max-new-words", "3", "--seed", "0"],
])
def test_commands_show_progress_on_long_work(checkpoint, command, monkeypatch, capsys):
    directory, _, _ = checkpoint
    monkeypatch.setattr("hf_slm.search.progress.PROGRESS_DELAY", 0)
    assert main([command[0], "--model", str(directory), *command[1:]]) == 0
    error = capsys.readouterr().err
    assert f"{'generating' if command[0] == 'generate' else 'beam search'}:" in error and "step" in error, error
