"""`hf-slm data prepare` (hf_slm.data.prepare): tokenized, saved datasets that `hf-slm train` reads."""

import json
from pathlib import Path

import pytest
from datasets import load_from_disk
from transformers import AutoTokenizer

import hf_slm
from hf_slm.cli import main
from hf_slm.data.command import parse_split_spec
from hf_slm.data.prepare import prepare_dataset
from hf_slm.tokenization.trees import parse_tree, parse_trees, tree_to_string

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "data"
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
TINY_MODEL = ["--set", "hidden_size=16", "--set", "num_hidden_layers=1", "--set", "num_attention_heads=2",
              "--set", "intermediate_size=32"]


def quiet(*_):
    pass


@pytest.fixture(scope="module")
def wsj_tokenizer(tmp_path_factory):
    """A SentencePiece tokenizer trained on the raw WSJ fixture files (default normalization)."""
    directory = tmp_path_factory.mktemp("wsj_tokenizer")
    files = sorted((FIXTURES / "wsj").glob("*/*.mrg"))
    hf_slm.SyntacticTokenizer.train(files, vocab_size=60).save_pretrained(directory)
    return directory


def raw_wsj_tree(relative_file, index):
    """The tree as it stands in the .mrg file, before any normalization, as one line."""
    text = (FIXTURES / "wsj" / relative_file).read_text()
    return tree_to_string(parse_trees(text)[index])


def test_parse_split_spec():
    assert parse_split_spec("train=02-21,validation=22,test=23") == {"train": ["02-21"], "validation": ["22"],
                                                                    "test": ["23"]}
    assert parse_split_spec("train=00+0100-0150") == {"train": ["00", "0100-0150"]}
    assert parse_split_spec('{"train": ["00"]}') == {"train": ["00"]}
    with pytest.raises(ValueError, match="expected split=item"):
        parse_split_spec("train")
    with pytest.raises(ValueError, match="given twice"):
        parse_split_spec("train=00,train=01")


def test_prepare_ptb_through_the_cli_then_train(wsj_tokenizer, tmp_path, capsys):
    output = tmp_path / "prepared"
    code = main(["data", "prepare", "--loader", "ptb", "--path", str(FIXTURES / "wsj"), "--tokenizer",
                 str(wsj_tokenizer), "--output", str(output), "--cache-dir", str(tmp_path / "cache")])
    printed = capsys.readouterr().out
    assert code == 0
    assert "train" in printed and "validation" in printed and "input_ids" in printed

    prepared = load_from_disk(str(output))
    tokenizer = AutoTokenizer.from_pretrained(str(output / "tokenizer"))
    assert type(tokenizer).__name__ == "SyntacticTokenizer" and len(tokenizer) > 4
    assert {split: len(prepared[split]) for split in prepared} == {"train": 4, "validation": 1, "test": 2}
    assert prepared["train"].column_names == ["tree", "words", "file", "index", "input_ids"]
    for split in prepared:
        for example in prepared[split]:
            # The ids are what the tokenizer gives for the raw tree of the .mrg file (it normalizes once).
            raw = raw_wsj_tree(example["file"], example["index"])
            assert example["input_ids"] == tokenizer(raw)["input_ids"], (example["file"], example["index"])
            assert tokenizer.decode(example["input_ids"]) == example["tree"]
    # (S (NP-SBJ It) (VP rained)): re-normalizing the stored string would take NP-SBJ and VP for POS tags.
    rained = prepared["train"][1]
    assert rained["tree"] == "(S (NP-SBJ It) (VP rained))"
    assert tokenizer.decode(tokenizer(rained["tree"])["input_ids"]) == "(S It rained)"
    assert rained["input_ids"] == tokenizer([parse_tree(rained["tree"])])["input_ids"][0]

    record = json.loads((output / "prepare.json").read_text())
    assert record["loader"] == "ptb" and record["path"] == str(FIXTURES / "wsj")
    assert record["options"]["strip_traces"] is True and "cache_dir" not in record["options"]
    assert record["splits"]["train"] == {"examples": 4, "ids": {"input_ids": sum(map(len, prepared["train"]["input_ids"]))}}
    assert record["tokenizer"]["vocab_size"] == len(tokenizer)

    run = tmp_path / "run"
    code = main(["train", "--preset", "tg-ptb", "--train", str(output), "--output", str(run), "--max-steps", "3",
                 "--batch-size", "2", *TINY_MODEL])
    assert code == 0, capsys.readouterr().err
    setup = json.loads((run / "training_setup.json").read_text())
    assert setup["steps_done"] == 3 and setup["train_examples"] == 4 and setup["eval_examples"] == 1
    assert setup["prepared_dataset"]["path"] == str(output) and setup["prepared_dataset"]["eval"] == f"{output}:validation"


def test_prepare_errors(wsj_tokenizer, tmp_path, capsys):
    arguments = ["data", "prepare", "--loader", "ptb", "--path", str(FIXTURES / "wsj"), "--tokenizer", str(wsj_tokenizer)]
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "something").write_text("x")
    assert main(arguments + ["--output", str(tmp_path / "full")]) == 2
    assert "is not empty" in capsys.readouterr().err
    # The tokenizer keeps function tags: stripping them for the data only would train on other trees.
    assert main(arguments + ["--output", str(tmp_path / "a"), "--strip-function-tags"]) == 2
    assert "normalization {'strip_function_tags': True} differs from the tokenizer's" in capsys.readouterr().err
    assert main(arguments + ["--output", str(tmp_path / "b"), "--document-level"]) == 2
    assert "document_level applies to the bllip loader" in capsys.readouterr().err
    assert main(["data", "prepare", "--loader", "ptb", "--path", str(FIXTURES / "wsj"), "--tokenizer",
                 str(tmp_path / "no_tokenizer"), "--output", str(tmp_path / "c")]) == 2
    assert "no_tokenizer' does not exist" in capsys.readouterr().err
    assert main(["data", "prepare", "--loader", "penn", "--path", str(FIXTURES / "wsj"), "--tokenizer",
                 str(wsj_tokenizer), "--output", str(tmp_path / "d")]) == 2
    assert "unknown loader 'penn'" in capsys.readouterr().err
    assert main(arguments + ["--output", str(tmp_path / "e"), "--splits", "train=07"]) == 2
    assert "split 'train': '07' matches no .mrg file" in capsys.readouterr().err
    # A tree whose label the tokenizer has never seen: the error names the file and the tree.
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "test.txt").write_text("(S (NP (NN a)) (VP (VBD b)))\n(S (XYZ (NN a)) (VP (VBD b)))\n")
    assert main(["data", "prepare", "--loader", "ptb", "--path", str(tmp_path / "odd"), "--tokenizer", str(wsj_tokenizer),
                 "--output", str(tmp_path / "f"), "--cache-dir", str(tmp_path / "cache")]) == 2
    assert "split 'test': test.txt, tree 1: cannot encode its tree" in capsys.readouterr().err


def test_prepare_with_several_processes_gives_the_same_ids(wsj_tokenizer, tmp_path):
    one = prepare_dataset("ptb", FIXTURES / "wsj", wsj_tokenizer, tmp_path / "one", log=quiet,
                          splits={"train": "00-24"}, cache_dir=str(tmp_path / "cache"))
    two = prepare_dataset("ptb", FIXTURES / "wsj", wsj_tokenizer, tmp_path / "two", num_proc=2, log=quiet,
                          splits={"train": "00-24"}, cache_dir=str(tmp_path / "cache"))
    assert len(one["train"]) == 11  # every tree of the fixture folder
    assert two["train"]["input_ids"] == one["train"]["input_ids"]


def test_prepare_bllip_documents(tmp_path):
    trees = FIXTURES / "bllip"
    tokenizer_dir = tmp_path / "tokenizer"
    tokenizer = hf_slm.SyntacticWordTokenizer.train(sorted(trees.glob("*.txt")), min_count=1)
    tokenizer.save_pretrained(tokenizer_dir)
    prepared = prepare_dataset("bllip", trees, tokenizer_dir, tmp_path / "documents", document_level=True, log=quiet,
                               cache_dir=str(tmp_path / "cache"))
    assert {split: len(prepared[split]) for split in prepared} == {"train": 3, "validation": 1, "test": 2}
    blocks = (trees / "train.txt").read_text().split("\n\n")
    raw_documents = [[line for line in block.splitlines() if line.strip()] for block in blocks if block.strip()]
    expected = [tokenizer.encode_document(lines)["input_ids"] for lines in raw_documents]
    assert prepared["train"]["input_ids"] == expected
    assert prepared["train"][1]["input_ids"].count(tokenizer.bos_token_id) == 1  # one <s> for two trees
    record = json.loads((tmp_path / "documents" / "prepare.json").read_text())
    assert record["document_level"] is True and record["splits"]["train"]["examples"] == 3


def test_prepare_xsum_and_conllu_words(tmp_path):
    tokenizer_dir = tmp_path / "tokenizer"
    tokenizer = hf_slm.SyntacticWordTokenizer.train(sorted((FIXTURES / "bllip").glob("*.txt")), min_count=1)
    tokenizer.save_pretrained(tokenizer_dir)
    xsum = prepare_dataset("xsum", FIXTURES / "xsum" / "csv", tokenizer_dir, tmp_path / "xsum", log=quiet,
                           cache_dir=str(tmp_path / "cache"))
    example = xsum["train"][0]
    assert example["document_ids"] == tokenizer(example["document"].split(), is_split_into_words=True)["input_ids"]
    assert example["summary_ids"] == tokenizer(example["summary"].split(), is_split_into_words=True)["input_ids"]
    assert len(example["document_ids"]) == 1 + len(example["document"].split())  # <s> + one id per word
    record = json.loads((tmp_path / "xsum" / "prepare.json").read_text())
    assert record["id_columns"] == ["document_ids", "summary_ids"]
    conllu = prepare_dataset("conllu", FIXTURES / "conllu", tokenizer_dir, tmp_path / "conllu", log=quiet,
                             cache_dir=str(tmp_path / "cache"))
    first = conllu["train"][0]
    assert first["input_ids"] == tokenizer(first["words"], is_split_into_words=True)["input_ids"]
    with pytest.raises(ValueError, match="tree normalization options .* apply to the tree loaders"):
        prepare_dataset("conllu", FIXTURES / "conllu", tokenizer_dir, tmp_path / "x", log=quiet, binarize=True)


def test_prepare_nltk_ptb_sample_by_sections(tmp_path, capsys):
    treebank = SHARED / "ptb_sample" / "treebank" / "combined"
    if not treebank.is_dir():
        pytest.skip(f"{treebank} is absent (real data lives outside the repository)")
    tokenizer_dir = tmp_path / "tokenizer"
    hf_slm.SyntacticTokenizer.train(sorted(treebank.glob("*.mrg")), vocab_size=2000).save_pretrained(tokenizer_dir)
    arguments = ["data", "prepare", "--loader", "ptb", "--path", str(treebank), "--tokenizer", str(tokenizer_dir),
                 "--cache-dir", str(tmp_path / "cache")]
    assert main(arguments + ["--output", str(tmp_path / "default")]) == 2
    assert "WSJ section(s) 00, 01" in capsys.readouterr().err  # the standard 02-21 / 22 / 23 are not there
    assert main(arguments + ["--output", str(tmp_path / "prepared"), "--splits", "train=00,validation=01"]) == 0
    record = json.loads((tmp_path / "prepared" / "prepare.json").read_text())
    counts = {split: record["splits"][split]["examples"] for split in record["splits"]}
    assert counts == {"train": 1921, "validation": 1993} and sum(counts.values()) == 3914  # PROVENANCE.md
    prepared = load_from_disk(str(tmp_path / "prepared"))
    assert prepared["validation"][0]["file"].startswith("wsj_01")
