"""The small data samples shipped in hf_slm/sample_data/, and how the new ones were cut from the full releases.

    from hf_slm.data.samples import sample_path
    ewt = load_conllu(sample_path("ud_english_ewt_sample"), non_projective="lift")
    run_syntaxgym(model, tokenizer, sample_path("syntaxgym_sample"))

Each sample folder has a README.md (source, release, license, attribution, what was taken) and its license
beside the data. So that examples run without a download, and the full data stays one command away
(`hf-slm data fetch NAME`, hf_slm/data/fetch.py):

| sample | cut from (`hf-slm data fetch` name) | what was taken |
| --- | --- | --- |
| gum | gum-const | 1,800 trees (see its README) |
| ud_english_ewt_sample | ud-english-ewt | per split, the first sentences of each of the 5 genres, verbatim |
| syntaxgym_sample | syntaxgym | 4 whole suites, the JSON written without indentation |
| blimp_sample | blimp | per phenomenon, the first paradigm's first 10 pairs, verbatim |

The sample folders' names end in `_sample`, and so do the names of evaluation results on them (results are
named by their data, hf_slm/evaluation/results.py): a score on a sample is never taken for one on the full set.

`python -m hf_slm.data.samples FETCHED_ROOT` writes the three samples again from full copies laid out as
`hf-slm data fetch` leaves them (FETCHED_ROOT/ud-english-ewt, .../syntaxgym, .../blimp), README.md and
licenses aside; tests/test_data_samples.py checks that the shipped files are what it writes.
"""

import json
import sys
from pathlib import Path

SAMPLE_DATA = Path(__file__).resolve().parents[1] / "sample_data"

EWT_SENTENCES_PER_GENRE = {"train": 20, "dev": 5, "test": 5}
EWT_GENRES = ("weblog", "newsgroup", "email", "reviews", "answers")  # the sent_id prefixes of EWT's 5 genres
SYNTAXGYM_SUITES = ("number_prep", "number_src", "reflexive_src_masc", "subordination")
BLIMP_PAIRS_PER_PHENOMENON = 10


def sample_path(name):
    """The folder of a shipped sample (`gum`, `ud_english_ewt_sample`, `syntaxgym_sample`, `blimp_sample`)."""
    folder = SAMPLE_DATA / name
    if not folder.is_dir():
        shipped = sorted(path.name for path in SAMPLE_DATA.iterdir() if path.is_dir())
        raise ValueError(f"no shipped sample named {name!r}; expected one of {', '.join(shipped)}")
    return folder


def _conllu_sentences(path):
    """The sentence blocks of a CoNLL-U file, each with its comment lines and the blank line that ends it."""
    block = []
    with open(path, encoding="utf-8", newline="") as handle:
        for line in handle:
            block.append(line)
            if not line.strip():
                yield "".join(block)
                block = []
    if block:
        yield "".join(block)


def _sent_id(block):
    for line in block.splitlines():
        if line.startswith("# sent_id = "):
            return line.removeprefix("# sent_id = ")
    raise ValueError(f"a CoNLL-U sentence without a '# sent_id' comment: {block[:200]!r}")


def ewt_sample(path, per_genre):
    """The first `per_genre` sentences of each EWT genre in the file `path`, in file order, unchanged."""
    taken = dict.fromkeys(EWT_GENRES, 0)
    kept = []
    for block in _conllu_sentences(path):
        genre = _sent_id(block).split("-", 1)[0]
        if genre not in taken:
            raise ValueError(f"{path}: sentence {_sent_id(block)!r} is of no known genre; expected one of {EWT_GENRES}")
        if taken[genre] < per_genre:
            taken[genre] += 1
            kept.append(block)
    return "".join(kept)


def syntaxgym_sample(path):
    """Suite file `path` as one line of JSON: the same suite, about a third of the indented file's size."""
    return json.dumps(json.loads(Path(path).read_text(encoding="utf-8")), ensure_ascii=False) + "\n"


def blimp_sample(folder):
    """{file name: its first BLIMP_PAIRS_PER_PHENOMENON lines} for the first paradigm (by file name) of each
    BLiMP phenomenon (the `linguistics_term` field: 13 values in the data)."""
    chosen = {}
    for path in sorted(Path(folder).glob("*.jsonl")):
        with open(path, encoding="utf-8", newline="") as handle:
            lines = [handle.readline() for _ in range(BLIMP_PAIRS_PER_PHENOMENON)]
        phenomenon = json.loads(lines[0])["linguistics_term"]
        if phenomenon not in {term for term, _ in chosen.values()}:
            chosen[path.name] = (phenomenon, "".join(lines))
    return {name: text for name, (_, text) in chosen.items()}


def sample_files(fetched_root):
    """{path under hf_slm/sample_data: text} of the three samples, cut from full copies under `fetched_root`."""
    root = Path(fetched_root)
    files = {}
    for split, count in EWT_SENTENCES_PER_GENRE.items():
        files[f"ud_english_ewt_sample/en_ewt-sample-ud-{split}.conllu"] = ewt_sample(
            root / "ud-english-ewt" / f"en_ewt-ud-{split}.conllu", count)
    for suite in SYNTAXGYM_SUITES:
        files[f"syntaxgym_sample/{suite}.json"] = syntaxgym_sample(root / "syntaxgym" / "test_suites" / "json" /
                                                                   f"{suite}.json")
    for name, text in blimp_sample(root / "blimp" / "data").items():
        files[f"blimp_sample/{name}"] = text
    return files


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m hf_slm.data.samples FETCHED_ROOT  (the folder holding ud-english-ewt/, syntaxgym/ and "
              "blimp/ as `hf-slm data fetch` leaves them)", file=sys.stderr)
        return 2
    for relative, text in sample_files(argv[0]).items():
        target = SAMPLE_DATA / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8", newline="")
        print(f"{target} ({len(text.encode('utf-8')):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
