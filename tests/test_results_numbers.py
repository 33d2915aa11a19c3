"""Results files and printed results keep numbers, not float noise (issue 39: results held floats like
0.5000000000000001, the mean of paradigm accuracies)."""

import json

import numpy as np

from hf_slm.evaluation.results import SIGNIFICANT_DIGITS, save_results, tidy_numbers


def test_float_noise_is_rounded_away_and_figures_are_kept():
    noisy = float(np.mean([0.1, 0.2]) * 2)  # 0.30000000000000004
    assert noisy != 0.3 and tidy_numbers(noisy) == 0.3
    corpus = -33683.14312345678  # a corpus log-probability keeps its decimals
    assert tidy_numbers(corpus) == float(f"{corpus:.{SIGNIFICANT_DIGITS}g}") and abs(tidy_numbers(corpus) - corpus) < 1e-7
    assert tidy_numbers({"a": [noisy, 3, "x", None], "b": {"c": float("nan")}})["a"] == [0.3, 3, "x", None]


def test_a_saved_result_holds_the_rounded_numbers(tmp_path):
    path = save_results(tmp_path, "blimp", {"accuracy": 0.1 + 0.2, "pairs": 2}, None, {"path": "d"}, {})
    assert json.loads(path.read_text())["metrics"] == {"accuracy": 0.3, "pairs": 2}
