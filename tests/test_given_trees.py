"""Silver trees from a file of the user's own parses (`hf-slm data prepare --summarization --silver-trees FILE`,
hf_slm/summarization/given_trees.py): each sentence of the documents and summaries takes the tree whose words are its
words, in whatever order the file holds them; a sentence without a tree, two trees for one sentence and a file given
beside --parser are errors naming what is wrong."""

import json
import random
from pathlib import Path

import pytest

import hf_slm
from hf_slm.cli import main
from hf_slm.data.prepare import prepare_dataset
from hf_slm.data.sentence_splitting import split_sentences, treebank_words
from hf_slm.summarization.summaries import summarization_sequence

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "data" / "xsum" / "jsonl" / "train.jsonl"
PROMPT_TREE = "(NP Summary :)"


def _tree(text, shape, tagged=True):
    """A bracketed tree over the words of `text`, POS-tagged under a ROOT as a parser writes them (`tagged`), or as
    training reads it (no tags, no ROOT); `shape` picks one of two bracketings, so that a tree taken for the wrong
    sentence shows."""
    words = treebank_words(text)
    leaf = (lambda word: f"(XX {word})") if tagged else (lambda word: word)
    if shape or len(words) < 2:
        tree = f"(S (NP {' '.join(map(leaf, words))}))"
    else:
        tree = f"(S (NP {leaf(words[0])}) (VP {' '.join(map(leaf, words[1:]))}))"
    return f"(ROOT {tree})" if tagged else tree


@pytest.fixture(scope="module")
def xsum(tmp_path_factory):
    """Two XSum rows, their trees (by sentence: (document trees, summary trees) per row), a file of those trees
    shuffled with one more, and a tokenizer that spells them."""
    directory = tmp_path_factory.mktemp("given")
    rows = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()][:2]
    data = directory / "xsum"
    data.mkdir()
    (data / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    by_row, lines = [], [_tree("Nothing here .", 0)]
    for number, row in enumerate(rows):
        shapes = [(text, (number + index) % 2) for index, text in enumerate(split_sentences(row["document"]))]
        summary = [(text, 1) for text in split_sentences(row["summary"])]
        by_row.append(([_tree(*item, tagged=False) for item in shapes], [_tree(*item, tagged=False) for item in summary]))
        lines += [_tree(*item) for item in shapes + summary]
    random.Random(0).shuffle(lines)
    trees = directory / "parses.txt"
    trees.write_text("\n".join(lines) + "\n", encoding="utf-8")
    readable = [tree for document, summary in by_row for tree in document + summary]
    tokenizer = hf_slm.SyntacticTokenizer.train(readable + [PROMPT_TREE, "(VP (PP x))"], vocab_size=150)
    tokenizer.save_pretrained(directory / "tokenizer")
    return rows, data, by_row, lines, trees, directory / "tokenizer", tokenizer


def test_prepare_takes_each_sentence_s_tree_from_the_file(xsum, tmp_path):
    rows, data, by_row, _, trees, tokenizer_dir, tokenizer = xsum
    output = tmp_path / "prepared"
    assert main(["data", "prepare", "--loader", "xsum", "--summarization", "--silver-trees", str(trees), "--path",
                 str(data), "--tokenizer", str(tokenizer_dir), "--output", str(output), "--max-document-words",
                 "5000"]) == 0
    record = json.loads((output / "prepare.json").read_text())
    assert record["summarization"]["silver_trees"] == str(trees) and record["summarization"]["parser"] is None
    from datasets import load_from_disk

    prepared = load_from_disk(str(output))["train"]
    for row, (document, summary), ids in zip(rows, by_row, prepared["input_ids"]):
        # the trees written for this row's sentences, in the row's order, whatever the file's order was
        expected = summarization_sequence(tokenizer, document, summary, row["id"])
        assert ids == expected["input_ids"]


def test_a_sentence_without_a_tree_is_named(xsum, tmp_path):
    rows, data, by_row, lines, _, tokenizer_dir, _ = xsum
    missing = _tree(split_sentences(rows[1]["document"])[2], (1 + 2) % 2)
    partial = tmp_path / "partial.txt"
    partial.write_text("\n".join(line for line in lines if line != missing) + "\n", encoding="utf-8")
    words = " ".join(treebank_words(split_sentences(rows[1]["document"])[2]))
    with pytest.raises(ValueError, match=rf"1 of \d+ sentences have no tree whose words are theirs .*document "
                                         rf"{rows[1]['id']}, sentence 3: '{words[:30]}"):
        prepare_dataset("xsum", data, tokenizer_dir, tmp_path / "out", summarization=True, silver_trees=partial,
                        log=lambda *_: None)


def test_file_errors(xsum, tmp_path):
    _, data, _, lines, trees, tokenizer_dir, _ = xsum
    twice = tmp_path / "twice.txt"
    other = lines[1].replace("(ROOT (S (NP", "(ROOT (S (VP", 1)
    twice.write_text("\n".join([lines[1], lines[2], other]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="trees 1 and 3 have the same words .* but differ"):
        prepare_dataset("xsum", data, tokenizer_dir, tmp_path / "a", summarization=True, silver_trees=twice)
    with pytest.raises(ValueError, match="--parser and --silver-trees both give the silver trees"):
        prepare_dataset("xsum", data, tokenizer_dir, tmp_path / "b", summarization=True, silver_trees=trees,
                        parser=tokenizer_dir)
    with pytest.raises(ValueError, match="silver trees apply to summarization data"):
        prepare_dataset("xsum", data, tokenizer_dir, tmp_path / "c", silver_trees=trees)
    with pytest.raises(ValueError, match="no such file"):
        prepare_dataset("xsum", data, tokenizer_dir, tmp_path / "d", summarization=True,
                        silver_trees=tmp_path / "absent.txt")
