"""`hf-slm data prepare` (hf_slm.data.prepare): tokenized, saved datasets that `hf-slm train` reads."""

import json
import shutil
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
            # decode writes the tree so that it reads back (the action sequence where every word is alone)
            assert tokenizer.decode(example["input_ids"], skip_special_tokens=True) == \
                tokenizer.tree_text(parse_tree(example["tree"]))
    # (S (NP-SBJ It) (VP rained)): re-normalizing the stored string would take NP-SBJ and VP for POS tags.
    rained = prepared["train"][1]
    assert rained["tree"] == "(S (NP-SBJ It) (VP rained))"
    assert tokenizer.decode(rained["input_ids"], skip_special_tokens=True) == "(S (NP-SBJ It NP-SBJ) (VP rained VP) S)"
    assert tokenizer.decode(tokenizer(rained["tree"])["input_ids"], skip_special_tokens=True) == "(S It rained)"
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


def test_two_processes_read_a_tree_file_in_byte_ranges_and_prepare_what_one_does(tmp_path, monkeypatch):
    from hf_slm.data import ptb

    # 120 sample trees, every fifth followed by a blank line (BLLIP's document breaks hold no tree), cut into
    # byte ranges of at least 2 KB (1 MiB by default) so that a small file is read by 2 processes.
    lines = (Path(hf_slm.__file__).parent / "sample_data" / "gum" / "train.txt").read_text().splitlines()[:120]
    text = "".join(line + "\n" + ("\n" if number % 5 == 4 else "") for number, line in enumerate(lines))
    trees = tmp_path / "train.txt"
    trees.write_text(text)
    tokenizer = tmp_path / "tokenizer"
    hf_slm.SyntacticTokenizer.train(lines, vocab_size=200).save_pretrained(tokenizer)
    monkeypatch.setattr(ptb, "MIN_SHARD_BYTES", 2000)
    shards = ptb.line_shards(trees, 2)
    assert len(shards) == 2 and shards[0].start == 0 and shards[1].stop == trees.stat().st_size
    # The second range starts at a line start, with that line's number and the count of trees before it.
    before = text.encode()[: shards[1].start].decode()
    assert before.endswith("\n") and shards[1].first_line == before.count("\n") + 1
    assert shards[1].first_index == sum(1 for line in before.splitlines() if line.strip())

    prepared = {}
    for processes in (1, 2):
        prepared[processes] = prepare_dataset("bllip", {"train": trees}, tokenizer, tmp_path / f"out{processes}",
                                              num_proc=processes, log=quiet, cache_dir=str(tmp_path / "cache"))
    one, two = prepared[1]["train"], prepared[2]["train"]
    assert len(one) == 120 and one["index"] == list(range(120))
    assert two.to_dict() == one.to_dict()  # every column, in order
    assert (json.loads((tmp_path / "out2" / "prepare.json").read_text())["options"]
            == json.loads((tmp_path / "out1" / "prepare.json").read_text())["options"])

    # An error in the second range names the line of the file, as one process would.
    broken = text.splitlines()
    bad = len(broken) - 3
    broken[bad] = "(S (NP the bird)"
    trees.write_text("\n".join(broken) + "\n")
    with pytest.raises(ValueError, match=rf"train.txt, line {bad + 1}: unbalanced brackets"):
        prepare_dataset("bllip", {"train": trees}, tokenizer, tmp_path / "broken", num_proc=2, log=quiet,
                        cache_dir=str(tmp_path / "cache"))


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


# ---- dependency data (CoNLL-U) for Dependency Transformer Grammars --------------------------------------------


@pytest.fixture(scope="module")
def dependency_treebank(tmp_path_factory):
    from conftest import write_conllu_treebank

    return write_conllu_treebank(tmp_path_factory.mktemp("treebank"))


def dependency_prepare(treebank, output, *options, cache=None):
    return ["data", "prepare", "--loader", "conllu", "--path", str(treebank), "--output", str(output),
            "--cache-dir", str(cache or output.parent / "cache"), *options]


@pytest.mark.parametrize("grammar, system", [("dtg", "arc_standard"), ("dtg_eager", "arc_eager"),
                                             ("dtg_swift", "arc_swift")])
def test_prepare_conllu_for_a_dependency_grammar(dependency_treebank, tmp_path, capsys, grammar, system):
    from conftest import DEPENDENCY_TREEBANK, LIFTED_HEADS, NON_PROJECTIVE_INDEX

    from hf_slm.tokenization.dependency_trees import DependencyTree
    from hf_slm.tokenization.tokenization_dependency import DependencyTokenizer
    from hf_slm.tokenization.transitions import LEFT_ARC, RIGHT_ARC, transition_system

    output = tmp_path / "prepared"
    assert main(dependency_prepare(dependency_treebank, output, "--grammar", grammar, "--non-projective", "lift",
                                   "--vocab-size", "40")) == 0, capsys.readouterr().err
    assert f"training a DependencyTokenizer for {system} transitions" in capsys.readouterr().out
    prepared = load_from_disk(str(output))
    tokenizer = AutoTokenizer.from_pretrained(str(output / "tokenizer"))
    assert isinstance(tokenizer, DependencyTokenizer) and tokenizer.transition_system == system
    assert {split: len(prepared[split]) for split in prepared} == {"train": 4, "validation": 1, "test": 1}
    lifted = prepared["train"][NON_PROJECTIVE_INDEX]
    assert lifted["heads"] == LIFTED_HEADS and lifted["lifted_arcs"] == 1
    for split, name in (("train", "train"), ("validation", "dev"), ("test", "test")):
        for example, (words, _) in zip(prepared[split], DEPENDENCY_TREEBANK[name]):
            tree = DependencyTree(example["words"], example["heads"])
            assert example["words"] == words
            # The ids are the tree's transition sequence: <root> ... </s>, decoding to the same tree.
            assert example["input_ids"] == tokenizer(tree)["input_ids"]
            assert example["input_ids"][0] == tokenizer.action_layout["root_token_id"]
            assert example["input_ids"][-1] == tokenizer.eos_token_id
            assert tokenizer.decode(example["input_ids"], skip_special_tokens=True) == tree.to_inline()
    # arc-swift: max_k is the largest k the (lifted) training trees need; the other systems have one LA and one RA.
    needed = max(t.value for words, heads in zip(prepared["train"]["words"], prepared["train"]["heads"])
                 for t in transition_system("arc_swift").transitions(DependencyTree(words, heads))
                 if t.action in (LEFT_ARC, RIGHT_ARC))
    assert tokenizer.max_k == (needed if system == "arc_swift" else 1) and needed == 3  # the lifted tree needs RA[3]
    record = json.loads((output / "prepare.json").read_text())
    assert record["dependency"] == {"grammar": grammar, "transition_system": system, "max_k": tokenizer.max_k,
                                    "variant": "paper"}
    assert record["options"] == {"non_projective": "lift"}
    assert record["tokenizer"]["source"] == "trained on the train split"
    assert record["splits"]["train"]["ids"]["input_ids"] == sum(map(len, prepared["train"]["input_ids"]))


def test_prepare_dependency_policies_reuse_and_errors(dependency_treebank, tmp_path, capsys):
    def run(output, *options):
        code = main(dependency_prepare(dependency_treebank, tmp_path / output, *options,
                                       cache=tmp_path / "cache"))
        return code, capsys.readouterr().err

    # Transition systems build projective trees: by default a non-projective one is an error naming it.
    code, error = run("default", "--grammar", "dtg")
    assert code == 2 and "sentence 2 (train-2) is not projective" in error and "'on'" in error
    code, error = run("skip", "--grammar", "dtg", "--non-projective", "skip", "--vocab-size", "40")
    assert code == 0 and "hf-slm data prepare: warning: split 'train': left out 1 non-projective sentence" in error
    skipped = load_from_disk(str(tmp_path / "skip"))
    assert len(skipped["train"]) == 3 and "hearing" not in skipped["train"]["words"][1]
    # A saved DependencyTokenizer is reused as it is, and implies its grammar.
    tokenizer_dir = tmp_path / "skip" / "tokenizer"
    assert run("reused", "--tokenizer", str(tokenizer_dir), "--non-projective", "skip")[0] == 0
    reused = load_from_disk(str(tmp_path / "reused"))
    assert reused["test"]["input_ids"] == skipped["test"]["input_ids"]
    record = json.loads((tmp_path / "reused" / "prepare.json").read_text())
    assert record["tokenizer"]["source"] == str(tokenizer_dir) and record["dependency"]["grammar"] == "dtg"

    for options, message in [
        (["--grammar", "dtg", "--non-projective", "keep"], "reads projective trees only"),
        (["--grammar", "dtg_eager", "--tokenizer", str(tokenizer_dir)], "encodes arc_standard transitions; the "
                                                                        "dtg_eager grammar reads arc_eager"),
        (["--grammar", "dtg", "--tokenizer", str(tokenizer_dir), "--vocab-size", "50"], "--vocab-size applies when"),
        (["--grammar", "dtg", "--max-k", "2"], "max_k 2: expected 1, or for arc_swift"),
        (["--grammar", "dtg_eager", "--variant", "reference"], "reference variant exists for arc_standard only"),
        (["--grammar", "tg"], "tg reads bracketed trees"),
        (["--grammar", "urnng"], "unknown grammar 'urnng'"),
        ([], "--loader conllu without --tokenizer: pass --grammar"),
    ]:
        code, error = run("refused", *options)
        assert code == 2 and message in error, (options, error)
    assert not (tmp_path / "refused").exists()  # refused before anything was written
    assert main(["data", "prepare", "--loader", "ptb", "--path", str(FIXTURES / "wsj"), "--grammar", "dtg",
                 "--output", str(tmp_path / "ptb")]) == 2
    assert "use --loader conllu, not ptb" in capsys.readouterr().err
    # A swift tokenizer whose max_k the test split exceeds: the error names the sentence.
    swift = tmp_path / "swift_tokenizer"
    hf_slm.DependencyTokenizer.train(["a/0 b/1"], vocab_size=20, transition_system="arc_swift").save_pretrained(swift)
    code, error = run("swift", "--tokenizer", str(swift), "--non-projective", "lift")
    assert code == 2 and "needs k <= 1" in error and "en_mini-ud-" in error


def test_an_interrupted_dependency_prepare_resumes_with_the_tokenizer_it_trained(dependency_treebank, tmp_path,
                                                                                 capsys, monkeypatch):
    from hf_slm.tokenization.tokenization_dependency import DependencyTokenizer

    command = dependency_prepare(dependency_treebank, tmp_path / "prepared", "--grammar", "dtg_swift",
                                 "--non-projective", "lift", "--vocab-size", "40")
    assert main(command) == 0
    finished = load_from_disk(str(tmp_path / "prepared"))
    # As if interrupted after the train split: the journal holds its header, the tokenizer and train.
    output = tmp_path / "prepared"
    journal = (output / "prepare.journal.jsonl").read_text().splitlines()
    assert [json.loads(line).get("key") for line in journal] == [None, "tokenizer", "train", "validation", "test"]
    (output / "prepare.journal.jsonl").write_text("\n".join(journal[:3]) + "\n")
    for name in ("validation", "test"):
        shutil.rmtree(output / name)
    for name in ("prepare.json", "dataset_dict.json"):
        (output / name).unlink()
    capsys.readouterr()

    def no_training(*args, **kwargs):
        raise AssertionError("the tokenizer was trained again")

    monkeypatch.setattr(DependencyTokenizer, "train", no_training)
    assert main(command) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "reusing the tokenizer an earlier run of this prepare trained" in printed
    assert "1 of 3 splits already finished" in printed
    resumed = load_from_disk(str(output))
    for split in finished:
        assert resumed[split]["input_ids"] == finished[split]["input_ids"]
    # Other tokenizer settings are another run: refused, not mixed into the saved splits.
    assert main(command[:-1] + ["50"]) == 2
    assert "tokenizer.vocab_size: 40 in the journal, 50 now" in capsys.readouterr().err
