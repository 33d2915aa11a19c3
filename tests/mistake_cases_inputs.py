"""Issue 12, inputs read wrongly or crashing: which strings are trees, malformed SyntaxGym / BLiMP files, and
formulas that group a number.

One rule decides how a string is read (tokenization.trees.input_format): an action sequence when a token `X)`
closes its own `(X`, else PTB brackets when it starts with "(", else plain words without brackets. The
tokenizer, `hf-slm masks` and the perplexity readers all use it; each reading is then checked strictly.
"""

import json
import shutil

import pytest

import hf_slm
from hf_slm.evaluation.blimp import read_blimp
from hf_slm.evaluation.perplexity import read_documents
from hf_slm.evaluation.syntaxgym import evaluate_suites, load_suite, parse_formula
from hf_slm.tokenization.trees import input_format, read_tree_string

from mistake_cases import ApiCase, CliCase

ACTIONS = "(S (NP the bird NP) (VP sings VP) S)"
PTB = "(S (NP (DT the) (NN bird)) (VP (VBZ sings)))"


# ---- SyntaxGym and BLiMP inputs, kept to one item / one pair --------------------------------------------

def _suite(formula="(2;%a%) < (2;%b%)"):
    """One item, conditions a and b, regions 1 and 2."""
    return {"meta": {"name": "mine", "metric": "sum"},
            "predictions": [{"type": "formula", "formula": formula}],
            "items": [{"item_number": 1, "conditions": [
                {"condition_name": name, "regions": [{"region_number": 1, "content": "the bird"},
                                                     {"region_number": 2, "content": word}]}
                for name, word in (("a", "sings"), ("b", "barks"))]}]}


def _write_suite(change=None, text=None):
    """prepare: {tmp}/suites/mine.json, the tiny suite after `change(suite)`, or `text` as it is."""
    def prepare(tmp, model):
        suite = _suite()
        if change is not None:
            change(suite)
        (tmp / "suites").mkdir()
        (tmp / "suites" / "mine.json").write_text(text if text is not None else json.dumps(suite), encoding="utf-8")

    return prepare


def _copy_model(tmp, model):
    shutil.copytree(model, tmp / "m")


def _no_results_folder(result, tmp):
    assert not (tmp / "m" / "eval_results").exists(), "a command that failed on its input left a folder behind"


def _empty_suites_folder(tmp, model):
    (tmp / "suites").mkdir()
    (tmp / "suites" / "README.md").write_text("no suites here\n")


PAIR = {"sentence_good": "The bird sings.", "sentence_bad": "The bird sing.", "field": "morphology",
        "linguistics_term": "agreement", "UID": "mine", "pairID": "0"}


def _write_blimp(*lines):
    """prepare: {tmp}/blimp/mine.jsonl holding `lines` (dicts are written as JSON)."""
    def prepare(tmp, model):
        (tmp / "blimp").mkdir()
        text = "\n".join(json.dumps(line) if isinstance(line, dict) else line for line in lines) + "\n"
        (tmp / "blimp" / "mine.jsonl").write_text(text, encoding="utf-8")

    return prepare


def _write_data(text):
    def prepare(tmp, model):
        (tmp / "x.txt").write_text(text, encoding="utf-8")

    return prepare


def _sg(*extra):
    return ["eval", "sg", "--model", "{model}", "--suites", "{tmp}/suites", "--output", "{tmp}/out", *extra]


def _blimp():
    return ["eval", "blimp", "--model", "{model}", "--data", "{tmp}/blimp", "--output", "{tmp}/out"]


PPL = ["eval", "ppl", "--model", "{model}", "--data", "{tmp}/x.txt", "--output", "{tmp}/out"]


# ---- checks of the cases that now succeed ---------------------------------------------------------------

def _mask_tokens(expected):
    def check(result, tmp):
        assert json.loads(result.stdout)["tokens"] == expected, result.stdout

    return check


def _same_ids(returned):
    first, second = returned
    assert first == second


def _formula_values(returned):
    assert returned == [True, False, False, True]


def _suite_accuracy(returned):
    assert returned["suites"]["mine"]["accuracy"] == 1.0
    assert returned["suites"]["mine"]["predictions"][0]["formula"] == "(0) < (2;%b%) - (2;%a%)"


def _trained_on_actions(tokenizer):
    assert tokenizer.nonterminals == ["NP", "S", "VP"]
    assert tokenizer.decode(tokenizer(ACTIONS)["input_ids"], skip_special_tokens=True) == "(S (NP the bird) (VP sings))"


def _train_on_action_string(model, tokenizer, tmp, model_dir):
    return hf_slm.SyntacticTokenizer.train([ACTIONS, "(S (NP a dog NP) (VP barks VP) S)"], vocab_size=20)


def _formulas(model, tokenizer, tmp, model_dir):
    low, high = {("a", 1): 0.5}, {("a", 1): 2.0}
    return [parse_formula("(0) < (1;%a%)").evaluate(low), parse_formula("(1 - (1;%a%)) < 0").evaluate(low),
            parse_formula("(1 - (1;%a%)) < (0)").evaluate({("a", 1): 1.0}),
            parse_formula("(1 - (1;%a%)) < 0").evaluate(high)]


def _grouped_formula_suite(model, tokenizer, tmp, model_dir):
    suite = _suite("(0) < (2;%b%) - (2;%a%)")
    cost = {"sings": 1.0, "barks": 3.0}
    return evaluate_suites(lambda sentences: [[cost.get(w, 0.5) for w in words] for words in sentences], [suite])


def _read_sentence_documents(model, tokenizer, tmp, model_dir):
    (tmp / "docs.txt").write_text("the bird sings .\nit rains\n\na dog barks\nthe dog ( barks\n", encoding="utf-8")
    return read_documents(tmp / "docs.txt", document_level=True)


def _check_region_content(model, tokenizer, tmp, model_dir):
    suite = _suite()
    suite["items"][0]["conditions"][1]["regions"][0]["content"] = 7
    return load_suite(suite)


def _read_blimp_with_empty_sentence(model, tokenizer, tmp, model_dir):
    (tmp / "mine.jsonl").write_text(json.dumps(PAIR) + "\n" + json.dumps({**PAIR, "sentence_bad": " "}) + "\n")
    return read_blimp(tmp / "mine.jsonl")


CASES = [
    # ---- which strings are trees: one rule, the same in masks, the tokenizer and eval --------------------
    CliCase("masks reads '(S (NP the bird VP) S)' as actions and refuses the VP) that closes (NP",
            ["masks", "(S (NP the bird VP) S)"], message=r"reads as an action sequence.*action 4 \('VP\)'\).*closes 'NP'"),
    CliCase("masks refuses '(S (NP NP) S)': the constituent NP is empty, NP is no word",
            ["masks", "(S (NP NP) S)"], message=r"action 2 \('NP\)'\).*constituent 'NP' is empty"),
    CliCase("masks refuses plain words", ["masks", "the bird sings"], message=r"'the bird sings' is plain words; expected a tree"),
    CliCase("masks names the column of an extra closing bracket in PTB brackets",
            ["masks", "(S (NP (DT the) (NN bird)) (VP sings)))"], message=r"extra '\)' with no open constituent at column 39"),
    CliCase("masks reads a POS tag over a word spelled like it, (IN IN), as PTB",
            ["masks", "(PP (IN IN) (NP (DT the) (NN box)))", "--json"], exit_code=0, message=r"\"tokens\"",
            check=_mask_tokens(["<s>", "(PP", "IN", "(NP", "the", "box", "NP)", "NP)", "PP)", "PP)"])),
    CliCase("masks --format ptb reads an action-looking string as PTB when the user says so",
            ["masks", "(S (NP the bird NP) S)", "--format", "ptb", "--json"], exit_code=0, message=r"\"tokens\"",
            check=_mask_tokens(["<s>", "(S", "(NP", "the", "bird", "NP", "NP)", "NP)", "S", "S)", "S)"])),
    ApiCase("tokenizer reads an action string as masks does, not as PTB with the words NP and S",
            lambda model, tokenizer, tmp, directory: (tokenizer([ACTIONS])["input_ids"], tokenizer([PTB])["input_ids"]),
            None, check=_same_ids),
    ApiCase("tokenizer refuses an action string whose closing does not match",
            lambda model, tokenizer, tmp, directory: tokenizer(["(S (NP the bird VP) S)"]),
            ValueError, r"tokenizer input reads as an action sequence.*action 4 \('VP\)'\).*closes 'NP'"),
    ApiCase("tokenizer refuses a sentence string with a bracket word, suggesting -LRB-",
            lambda model, tokenizer, tmp, directory: tokenizer("the ( bird sings"),
            ValueError, r"word 1 '\(' contains a bracket.*-LRB-"),
    ApiCase("tokenizer names the column of unbalanced PTB brackets",
            lambda model, tokenizer, tmp, directory: tokenizer("(S (NP the bird) (VP sings)))"),
            ValueError, r"tokenizer input, tree 0, line 1: unbalanced brackets: extra '\)'.* at column 29"),
    ApiCase("input_format: actions, PTB with POS tags, PTB over a word spelled like its tag, words",
            lambda model, tokenizer, tmp, directory: [input_format(text) for text in
                                                      (ACTIONS, PTB, "(PP (IN IN) (NP it))", "the bird sings")],
            None, check=lambda found: found == ["actions", "ptb", "ptb", "words"] or pytest.fail(str(found))),
    ApiCase("read_tree_string with tree_format='ptb' keeps the words NP and S",
            lambda model, tokenizer, tmp, directory: read_tree_string("(S (NP the bird NP) S)", tree_format="ptb"),
            None, check=lambda tree: tree.leaves() == ["the", "bird", "NP", "S"] or pytest.fail(str(tree))),
    ApiCase("training on an action string learns its labels, not words NP) and S)", _train_on_action_string,
            None, check=_trained_on_actions),
    # ---- eval ppl: sentence lines and tree lines ---------------------------------------------------------
    CliCase("eval ppl refuses a tree line among sentences, naming the line",
            PPL, prepare=_write_data("the bird sings .\n(S (NP the dog) barks\n"),
            message=r"x\.txt, line 2 \(a file of sentences.*word 0 '\(S' contains a bracket"),
    CliCase("eval ppl refuses a bracket word in a sentence, suggesting -LRB-",
            PPL, prepare=_write_data("the bird sings .\nthe dog ( barks\n"),
            message=r"x\.txt, line 2.*word 2 '\(' contains a bracket.*-LRB-"),
    CliCase("eval ppl refuses an action-sequence line in a tree file",
            PPL, prepare=_write_data(PTB + "\n" + ACTIONS + "\n"),
            message=r"x\.txt, line 2: .*reads as an action sequence \(its token 4, 'NP\)'"),
    CliCase("eval ppl names the line and column of an unclosed tree",
            PPL, prepare=_write_data("(S (NP the bird) (VP sings)\n(S (NP a dog) (VP barks))\n"),
            message=r"x\.txt, tree 0, line 1: unbalanced brackets: missing '\)'.*column 1"),
    ApiCase("document-level sentence files name the line of a bracket word", _read_sentence_documents,
            ValueError, r"docs\.txt, line 5 .*word 2 '\('"),
    # ---- SyntaxGym suites --------------------------------------------------------------------------------
    CliCase("eval sg --suites pointing nowhere leaves no results folder in the model",
            ["eval", "sg", "--model", "{tmp}/m", "--suites", "{tmp}/nope"], prepare=_copy_model,
            message=r"no SyntaxGym suites at '.*nope': it does not exist", check=_no_results_folder),
    CliCase("eval sg on an empty suites folder", _sg(), prepare=_empty_suites_folder,
            message=r"no suite JSON files \(\*\.json\) in '.*suites'"),
    CliCase("eval sg on a suite that is not JSON", _sg(), prepare=_write_suite(text="{\"meta\": {\"name\": "),
            message=r"suite file '.*mine\.json' is not JSON"),
    CliCase("eval sg on a condition without regions",
            _sg(), prepare=_write_suite(lambda s: s["items"][0]["conditions"][1].pop("regions")),
            message=r"suite 'mine' \(.*mine\.json\), item 1, condition 'b': missing the field 'regions'"),
    CliCase("eval sg on a region without content",
            _sg(), prepare=_write_suite(lambda s: s["items"][0]["conditions"][0]["regions"][1].pop("content")),
            message=r"item 1, condition 'a', region 2: missing the field 'content'"),
    CliCase("eval sg on a suite without items", _sg(), prepare=_write_suite(lambda s: s.pop("items")),
            message=r"suite 'mine' \(.*mine\.json\): missing the field 'items'"),
    CliCase("eval sg on a suite without predictions", _sg(), prepare=_write_suite(lambda s: s.pop("predictions")),
            message=r"suite 'mine' \(.*mine\.json\): missing the field 'predictions'"),
    CliCase("eval sg on a formula naming a region the conditions lack",
            _sg(), prepare=_write_suite(lambda s: s["predictions"][0].update(formula="(9;%a%) < (2;%b%)")),
            message=r"item 1: prediction 0 .*refers to region 9 of condition 'a'"),
    CliCase("eval sg on a formula naming an unknown condition",
            _sg(), prepare=_write_suite(lambda s: s["predictions"][0].update(formula="(2;%a%) < (2;%c%)")),
            message=r"item 1: prediction 0 .*refers to condition 'c', which the item does not have"),
    ApiCase("a suite region whose content is not a string",
            _check_region_content, ValueError, r"item 1, condition 'b', region 1: the field 'content' is int"),
    # ---- SyntaxGym formulas that group a number ----------------------------------------------------------
    ApiCase("formulas (0) < (1;%a%) and (1 - (1;%a%)) < 0 parse and evaluate", _formulas, None,
            check=_formula_values),
    ApiCase("a suite whose formula groups a number scores", _grouped_formula_suite, None, check=_suite_accuracy),
    # ---- BLiMP files -------------------------------------------------------------------------------------
    CliCase("eval blimp on a pair whose field is not a string", _blimp(), prepare=_write_blimp({**PAIR, "field": 3}),
            message=r"mine\.jsonl, line 1: the field 'field' is int 3; expected a string"),
    CliCase("eval blimp on a line that is not JSON", _blimp(), prepare=_write_blimp(PAIR, "{\"sentence_good\": "),
            message=r"BLiMP file .*mine\.jsonl, line 2: not a JSON object"),
    CliCase("eval blimp on a pair without sentence_bad",
            _blimp(), prepare=_write_blimp({k: v for k, v in PAIR.items() if k != "sentence_bad"}),
            message=r"mine\.jsonl, line 1: missing field\(s\) \['sentence_bad'\]"),
    CliCase("eval blimp on the folder above the paradigm files suggests the one that holds them",
            ["eval", "blimp", "--model", "{model}", "--data", "{tmp}", "--output", "{tmp}/out"],
            prepare=_write_blimp(PAIR), message=r"BLiMP directory '\S+' holds no \.jsonl files; did you mean "
                                                r"'\S+/blimp' \(1 \.jsonl files\)\?"),
    ApiCase("read_blimp refuses an empty sentence, naming the line", _read_blimp_with_empty_sentence,
            ValueError, r"mine\.jsonl, line 2: the field 'sentence_bad' is empty"),
]
