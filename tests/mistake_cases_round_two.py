"""Issue 30, bad input round two: each class is fixed by one mechanism, and each has the issue's case and a second,
different case the same mechanism handles.

1. a falsy value taken for "not given": `is None` (hf_slm/option_types.py `or_default`; the hub code inline);
2. a user's file replaced: hf_slm/runs/user_files.py `write_user_file` / `check_replaceable`;
3. option values checked where parsed: hf_slm/option_types.py's argparse types;
4. input text: tokenization/trees.py `check_word_separators` (BOM dropped, other whitespace refused);
5. deep input: tokenization/tree_type.py MAX_TREE_DEPTH, checked by the tree readers (TreeTooDeep);
6. messages: tokenization/linearizers.py `_require_tree`; the f-string lint in test_bad_input_mechanisms.py;
7. nothing produced: hf_slm/cli/item_failures.py `report_failed_items` (exit 1 when items failed); data prepare's
   projectivity policy applied after reading (hf_slm/data/conllu_loader.py `_apply_non_projective`);
8. the Python API checks its arguments: hf_slm/search/beam.py `sentence_words`, and the model's
   `check_padding_at_the_ends` (modeling/modeling_slm.py) in the path every family's forward takes.
"""

import json
import shutil

import torch
from conftest import DEPENDENCY_TREEBANK, save_tiny_checkpoint, write_conllu_treebank
from hf_slm.tokenization.linearizers import bottom_up_actions, top_down_actions
from hf_slm.tokenization.tree_type import TreeTooDeep
from hf_slm.tokenization.trees import read_trees
from mistake_cases import ApiCase, CliCase

import hf_slm

GUM_SAMPLE = hf_slm.__file__.replace("__init__.py", "sample_data/gum/train.txt")
NBSP, THIN_SPACE, BOM = "\u00a0", "\u2009", "\ufeff"
TREE = "(S (NP (DT the) (NN bird)) (VP (VBZ sings)))"


def _deep_tree(depth):
    """PTB brackets nested `depth` constituents deep (the preterminal included)."""
    return "(S " * (depth - 1) + "(NN x)" + ")" * (depth - 1)


def _read_written(path, text):
    path.write_text(text)
    return read_trees(path)


def _deep_actions(depth):
    return " ".join(["(S"] * depth + ["x"] + ["S)"] * depth)


def _write(name, text):
    def prepare(tmp, model):
        (tmp / name).write_text(text, encoding="utf-8")
    return prepare


def _ppl(data):
    return ["eval", "ppl", "--model", "{model}", "--output", "{tmp}/out", "--data", data, "--beam-size", "5",
            "--word-beam-size", "2"]


# ---- class 2: files the user wrote ----

HAND_WRITTEN = "# My model\n\nNotes I wrote by hand.\n"


def _hand_written_readme(tmp, model):
    shutil.copytree(model, tmp / "m")
    (tmp / "m" / "README.md").write_text(HAND_WRITTEN)


def _readme_kept(result, tmp):
    assert (tmp / "m" / "README.md").read_text() == HAND_WRITTEN


def _own_card(tmp, model):
    """A checkpoint copy whose README.md is a card `hf-slm card` wrote (it holds the card's mark)."""
    shutil.copytree(model, tmp / "m")
    from hf_slm.publishing.model_card import write_model_card

    write_model_card(tmp / "m")
    (tmp / "m" / "README.md").write_text((tmp / "m" / "README.md").read_text() + "\nstale line\n")


def _card_refreshed(result, tmp):
    text = (tmp / "m" / "README.md").read_text()
    assert "stale line" not in text and "Written by `hf-slm card`" in text


def _user_png(tmp, model):
    (tmp / "mine.png").write_bytes(b"\x89PNG my own drawing")


def _png_kept(result, tmp):
    assert (tmp / "mine.png").read_bytes() == b"\x89PNG my own drawing"
    assert result.stdout == ""  # refused before the report is printed


# ---- class 4: text as it comes ----

def _word_counts(counts):
    def check(result, tmp):
        records = [json.loads(line) for line in next((tmp / "out").glob("*_sentences.jsonl")).read_text().splitlines()]
        assert [record["words"] for record in records] == counts
    return check


def _conllu_with(character):
    def prepare(tmp, model):
        treebank = {"test": [(["New" + character + "York", "sleeps"], [2, 0]), (["Sam", "sleeps"], [2, 0])]}
        write_conllu_treebank(tmp / "ud", treebank)
    return prepare


# ---- class 7: work that produces nothing ----

def _summarization_model(tmp, model):
    """A document-level tiny model to summarize with (the model itself parses the documents)."""
    from helpers.ptb_trees import TREES

    save_tiny_checkpoint(tmp / "doc-model", TREES, document_level=True)
    (tmp / "short.txt").write_text("The bird sings .\n")
    (tmp / "empty.txt").write_text("\n \n")
    (tmp / "long.txt").write_text("the bird sings .\n" * 750)  # 3,000 words: no summary fits after its context


def _summaries(expected_lines, empty_at):
    def check(result, tmp):
        lines = result.stdout.split("\n")[:-1]
        assert len(lines) == expected_lines, result.stdout
        assert [k for k, line in enumerate(lines) if not line] == [empty_at]
        assert "--max-document-words" not in result.stderr  # an option summarize does not take
    return check


def _summarize(*files):
    return ["summarize", "--model", "{tmp}/doc-model", "--max-new-words", "3", "--batch-size", "2", *files]


def _treebank(train):
    def prepare(tmp, model):
        write_conllu_treebank(tmp / "ud", {**DEPENDENCY_TREEBANK, "train": train})
    return prepare


def _prepare_conllu(*options):
    return ["data", "prepare", "--loader", "conllu", "--path", "{tmp}/ud", "--output", "{tmp}/prepared",
            "--cache-dir", "{tmp}/cache", "--grammar", "dtg", "--vocab-size", "40", *options]


NON_PROJECTIVE = DEPENDENCY_TREEBANK["train"][1]


# ---- class 8: the Python API ----

def _with_pad_inside(model, tokenizer, mask=False):
    ids = tokenizer([TREE], return_tensors="pt")["input_ids"]
    ids[0, 3] = tokenizer.pad_token_id
    inputs = {"input_ids": ids, "labels": ids}
    if mask:
        inputs["attention_mask"] = (ids != tokenizer.pad_token_id).long()
    return model(**inputs)


def _unchanged_for_valid_input(model, tokenizer, tmp, model_dir):
    """Right padding, with the mask or without, still gives the loss of the row alone."""
    alone = tokenizer([TREE], return_tensors="pt")["input_ids"]
    pad = tokenizer.pad_token_id
    right = torch.cat([alone, torch.full((1, 3), pad)], dim=1)
    with torch.no_grad():
        reference = model(input_ids=alone, labels=alone).loss
        return reference, [model(input_ids=right, labels=right).loss,
                           model(input_ids=right, attention_mask=(right != pad).long(), labels=right).loss]


def _same_losses(returned):
    reference, others = returned
    for loss in others:
        assert torch.equal(loss, reference)


CASES = [
    # 1. a falsy value taken for "not given"
    CliCase("generate --max-new-words 0 is refused, not read as 20", ["generate", "--model", "{model}",
                                                                        "--max-new-words", "0"],
            message=r"argument --max-new-words: expected a positive integer, got 0$"),
    ApiCase("model.generate(max_new_tokens=0) is refused, not read as 20", lambda model, tokenizer, tmp, directory:
            model.generate(max_new_tokens=0, tokenizer=tokenizer), ValueError,
            r"max_new_words must be a positive integer, got 0"),
    ApiCase("a scorer's batch_size=0 is refused, not read as the default", lambda model, tokenizer, tmp, directory:
            hf_slm.scorer_for(model, tokenizer, beam_size=5, word_beam_size=2).score(["the bird sings ."],
                                                                                     batch_size=0, progress=False),
            ValueError, r"batch_size must be a positive integer, got 0"),

    # 2. a user's file replaced without asking
    CliCase("card does not replace a hand-written README.md", ["card", "{tmp}/m"], prepare=_hand_written_readme,
            message=r"\S*/m/README\.md already exists and this command did not write it; pass --overwrite",
            check=_readme_kept),
    CliCase("masks --png does not replace the user's file", ["masks", TREE, "--png", "{tmp}/mine.png"],
            prepare=_user_png, message=r"\S*mine\.png already exists and this command did not write it",
            check=_png_kept),
    CliCase("card replaces a card it wrote", ["card", "{tmp}/m"], prepare=_own_card, exit_code=0,
            message=r"wrote \S*/m/README\.md", check=_card_refreshed),

    # 3. option values checked where they are parsed
    CliCase("eval ppl --batch-size 0 names the option", _ppl(GUM_SAMPLE) + ["--batch-size", "0"],
            message=r"hf-slm eval ppl: error: argument --batch-size: expected a positive integer, got 0$"),
    CliCase("train --learning-rate -0.5 names the option", ["train", "--preset", "tg-ptb", "--train", GUM_SAMPLE,
                                                            "--output", "{tmp}/run", "--learning-rate", "-0.5"],
            message=r"argument --learning-rate: expected a positive number, got -0\.5$"),

    # 4. input text as it really comes
    CliCase("eval ppl refuses a no-break space inside a word, naming line and column",
            _ppl("{tmp}/trees.mrg"), prepare=_write("trees.mrg", f"{TREE}\n(S (NP (NNP New{NBSP}York)) (VP (VBZ "
                                                                 "sleeps)))\n"),
            message=r"tree file '\S*trees\.mrg', line 2, column 16: U\+00A0 \(NO-BREAK SPACE\) in 'New\\xa0York"),
    CliCase("eval ppl drops a byte-order mark at the start of the file", _ppl("{tmp}/trees.mrg"), exit_code=0,
            prepare=_write("trees.mrg", f"{BOM}{TREE}\n"), message=r"on 1 sentences, 3 words",
            check=_word_counts([3])),
    CliCase("eval ppl refuses a thin space inside a CoNLL-U FORM", _ppl("{tmp}/ud/en_mini-ud-test.conllu"),
            prepare=_conllu_with(THIN_SPACE),
            message=r"CoNLL-U file \S*en_mini-ud-test\.conllu, line 3, column 6: U\+2009 \(THIN SPACE\)"),
    ApiCase("the tokenizer refuses a no-break space inside a word", lambda model, tokenizer, tmp, directory:
            tokenizer(f"(S (NP New{NBSP}York) (VP sings))"), ValueError,
            r"tokenizer input, column 11: U\+00A0 \(NO-BREAK SPACE\) in 'New\\xa0York\)'"),
    ApiCase("hf_slm.score refuses a hair space inside a word", lambda model, tokenizer, tmp, directory:
            hf_slm.score(model, tokenizer, ["the bird sings .", "New\u200aYork sings"], progress=False),
            ValueError, r"sentence 2, column 4: U\+200A \(HAIR SPACE\)"),

    # 5. deep input
    CliCase("masks refuses a tree nested 2,000 deep, naming the depth", ["masks", _deep_tree(2000)],
            message=r"the tree argument, tree 0, line 1: the tree is nested more than 300 constituents deep at column "
                    r"901"),
    ApiCase("read_trees refuses a tree nested 3,000 deep, naming the file and line", lambda model, tokenizer, tmp,
            directory: _read_written(tmp / "deep.mrg", f"{TREE}\n{_deep_tree(3000)}\n"), TreeTooDeep,
            r"deep\.mrg, tree 1, line 2: the tree is nested more than 300 constituents deep"),
    ApiCase("the tokenizer refuses an action sequence nested 2,000 deep", lambda model, tokenizer, tmp, directory:
            tokenizer(_deep_actions(2000)), ValueError,  # the checkpoint's own copy of TreeTooDeep
            r"action 300 \('\(S'\).*nested more than 300"),
    ApiCase("a tree at the depth limit is read, linearized and scored", lambda model, tokenizer, tmp, directory:
            model(**tokenizer([_deep_tree(300)], return_tensors="pt")), None),

    # 6. messages that say what they mean
    CliCase("data prepare --splits train names the part it cannot read",
            ["data", "prepare", "--loader", "ptb", "--path", GUM_SAMPLE, "--output", "{tmp}/p", "--tokenizer",
             "{model}", "--splits", "train"],
            message=r"the part 'train' is not$"),
    ApiCase("top_down_actions given a tree as a string says so", lambda model, tokenizer, tmp, directory:
            top_down_actions("(S (NP the bird) (VP sings))"), ValueError,
            r"expected a tree, got the string '\(S \(NP the bird\) \(VP sings\)\)' \(a tree written as text\?\): read "
            r"it first with read_tree_string"),
    ApiCase("bottom_up_actions given a word still says it is a word", lambda model, tokenizer, tmp, directory:
            bottom_up_actions("bird"), ValueError, r"expected a tree, got the bare word 'bird'$"),

    # 7. work that produces nothing does not look like success
    CliCase("summarize a 3,000-word document: an empty line, named, exit 1", _summarize("{tmp}/long.txt",
                                                                                       "{tmp}/short.txt"),
            prepare=_summarization_model, exit_code=1, check=_summaries(2, 0),
            message=r"hf-slm summarize: warning: left out 1 of 2 documents that got no summary .*exit status 1\): "
                    r"document \S*long\.txt: .*longer than the model's maximum"),
    CliCase("summarize goes on past an empty document", _summarize("{tmp}/empty.txt", "{tmp}/short.txt"),
            prepare=_summarization_model, exit_code=1, check=_summaries(2, 0),
            message=r"left out 1 of 2 documents that got no summary .*document \S*empty\.txt is empty after cleaning"),
    CliCase("data prepare --non-projective skip says every tree was skipped", _prepare_conllu("--non-projective",
                                                                                              "skip"),
            prepare=_treebank([NON_PROJECTIVE]),
            message=r"split 'train': no examples left: all 1 sentence\(s\) are non-projective and "
                    r"non_projective='skip'"),
    CliCase("data prepare --non-projective skip warns of what it skips", _prepare_conllu("--non-projective", "skip"),
            prepare=_treebank(DEPENDENCY_TREEBANK["train"]), exit_code=0,
            message=r"split 'train': left out 1 non-projective sentence\(s\) of 4"),

    # 8. the Python API checks its arguments as the CLI does
    ApiCase("hf_slm.score given [None]", lambda model, tokenizer, tmp, directory:
            hf_slm.score(model, tokenizer, [None], progress=False), TypeError,
            r"^sentence 1 is None; expected a string of words or a list of word strings$"),
    ApiCase("hf_slm.parse given a word that is not a string", lambda model, tokenizer, tmp, directory:
            hf_slm.parse(model, tokenizer, [["the", 3, "sings"]], progress=False), TypeError,
            r"^sentence 1, word 2 is int 3; expected a string$"),
    ApiCase("the model refuses a pad id inside a sequence without a mask", lambda model, tokenizer, tmp, directory:
            _with_pad_inside(model, tokenizer), ValueError,
            r"input_ids row 0 holds the pad id 0 at position 3, between real tokens"),
    ApiCase("the model refuses a mask with a hole", lambda model, tokenizer, tmp, directory:
            _with_pad_inside(model, tokenizer, mask=True), ValueError,
            r"attention_mask row 0 is 0 at position 3, between real tokens"),
    ApiCase("right padding gives the loss of the row alone", _unchanged_for_valid_input, None,
            check=_same_losses),
]
