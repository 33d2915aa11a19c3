"""The samples shipped in hf_slm/sample_data/ (hf_slm/data/samples.py): each is read by the reader its examples
use, carries its license and attribution, is installed with the package, stays small, and (where the full
data in ../shared/data is at hand) is exactly what its README says was cut from the release."""

import fnmatch
import json
from pathlib import Path

import pytest

from hf_slm.data import load_conllu
from hf_slm.data.samples import SAMPLE_DATA, sample_files, sample_path
from hf_slm.evaluation.blimp import read_blimp
from hf_slm.evaluation.syntaxgym import load_suites

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
NEW_SAMPLES = ("ud_english_ewt_sample", "syntaxgym_sample", "blimp_sample")


def test_the_ewt_sample_loads_as_projective_trees_of_three_splits(tmp_path):
    data = load_conllu(sample_path("ud_english_ewt_sample"), non_projective="error", cache_dir=str(tmp_path))
    assert {split: len(rows) for split, rows in data.items()} == {"train": 100, "validation": 25, "test": 25}
    genres = {sent_id.split("-", 1)[0] for sent_id in data["train"]["sent_id"]}
    assert genres == {"weblog", "newsgroup", "email", "reviews", "answers"}


def test_the_syntaxgym_sample_is_four_whole_suites():
    suites = load_suites(sample_path("syntaxgym_sample"))
    assert sorted(suite.name for suite in suites) == ["number_prep", "number_src", "reflexive_src_masc",
                                                      "subordination"]
    assert sum(len(suite.items) for suite in suites) == 19 + 19 + 19 + 23


def test_the_blimp_sample_has_ten_pairs_of_each_phenomenon():
    pairs = read_blimp(sample_path("blimp_sample"))
    phenomena = {pair["linguistics_term"] for pair in pairs}
    assert len(pairs) == 130 and len(phenomena) == 13
    assert all(sum(pair["linguistics_term"] == term for pair in pairs) == 10 for term in phenomena)


@pytest.mark.parametrize("sample, license_file, words", [
    ("ud_english_ewt_sample", "LICENSE.txt", ["CC BY-SA 4.0", "Stanford", "Silveira"]),
    ("syntaxgym_sample", "LICENSE", ["MIT", "Hu, Gauthier"]),
    ("blimp_sample", None, ["CC BY 4.0", "Warstadt"]),
])
def test_each_sample_says_its_source_license_and_attribution(sample, license_file, words):
    readme = (sample_path(sample) / "README.md").read_text(encoding="utf-8")
    assert all(word in readme for word in words), readme[:300]
    assert "commit" in readme and "hf-slm data fetch" in readme
    if license_file:
        assert (sample_path(sample) / license_file).stat().st_size > 500


def test_the_samples_are_package_data():
    """Every file of a sample is matched by pyproject.toml's package-data, so a pip install has it too."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["hf_slm"]
    for path in SAMPLE_DATA.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            relative = path.relative_to(SAMPLE_DATA.parent).as_posix()
            assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative


def test_the_new_samples_stay_small():
    total = sum(path.stat().st_size for sample in NEW_SAMPLES for path in sample_path(sample).rglob("*"))
    assert total < 400_000, f"{total:,} bytes"


def test_an_unknown_sample_names_the_shipped_ones():
    with pytest.raises(ValueError, match=r"no shipped sample named 'ptb'; expected one of .*blimp_sample.*gum"):
        sample_path("ptb")


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data (the full releases) is absent")
def test_the_shipped_samples_are_what_the_sampling_rules_cut_from_the_releases(tmp_path):
    # sample_files reads the layout `hf-slm data fetch` leaves; the project's copies are laid out the same way
    for name, folder in {"ud-english-ewt": "ud_english_ewt", "syntaxgym": "syntaxgym", "blimp": "blimp"}.items():
        (tmp_path / name).symlink_to(SHARED / folder)
    expected = sample_files(tmp_path)
    shipped = {path.relative_to(SAMPLE_DATA).as_posix(): path.read_bytes().decode("utf-8")
               for sample in NEW_SAMPLES for path in sample_path(sample).iterdir()
               if path.suffix in (".conllu", ".json", ".jsonl")}
    assert shipped.keys() == expected.keys()
    assert all(shipped[path] == text for path, text in expected.items())
    # the suites are the released ones, only written without indentation
    original = json.loads((SHARED / "syntaxgym" / "test_suites" / "json" / "subordination.json").read_text())
    assert json.loads(shipped["syntaxgym_sample/subordination.json"]) == original
