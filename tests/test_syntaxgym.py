"""SyntaxGym: suite reading, the formula parser, scoring and aggregation, and a tiny end-to-end run."""

import csv
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import hf_slm
from hf_slm.evaluation.syntaxgym import (
    CIRCUITS,
    EXCLUDED_SUITES,
    PAPER_SUITES,
    SUITE_CIRCUITS,
    BinaryOp,
    FormulaError,
    RegionRef,
    circuit_of,
    evaluate_suites,
    format_summary,
    load_suite,
    load_suites,
    parse_formula,
    run_syntaxgym,
)
from hf_slm.modeling.transformer_grammar_model import TransformerGrammarForCausalLM

FIXTURES = Path(__file__).parent / "fixtures" / "syntaxgym"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
SHARED_SUITES = SHARED / "syntaxgym" / "test_suites" / "json"
needs_shared = pytest.mark.skipif(not SHARED_SUITES.is_dir(), reason="../shared/data/syntaxgym is absent")


# ---- the released suites -------------------------------------------------------------------------------

@needs_shared
def test_all_34_suites_load_and_every_formula_parses():
    suites = load_suites(SHARED / "syntaxgym")  # the folder's test_suites/json is found
    assert {s.name for s in suites} == set(SUITE_CIRCUITS)
    assert len(suites) == 34 and len(PAPER_SUITES) == 31
    assert sum(len(s.predictions) for s in suites) == 36
    assert sum(len(s.items) for s in suites) == 842
    assert sum(len(item.conditions) for s in suites for item in s.items) == 3304
    for suite in suites:
        for formula in suite.predictions:
            # `[ ]` and `( )` group the same way
            assert str(parse_formula(formula.text.replace("[", "(").replace("]", ")"))) == str(formula)
    two = {s.name: [f.text for f in s.predictions] for s in suites if len(s.predictions) > 1}
    assert set(two) == {"fgd_hierarchy", "nn-nv-rpl"}
    # The circuit table agrees with the prefix rule of Hu et al.; the excluded suites are in no circuit.
    for name in PAPER_SUITES:
        assert SUITE_CIRCUITS[name] in CIRCUITS
    for suite in suites:
        assert suite.in_sg_score == (suite.name not in EXCLUDED_SUITES)
    sizes = {c: sum(SUITE_CIRCUITS[n] == c for n in PAPER_SUITES) for c in CIRCUITS}
    assert sizes == {"Agreement": 3, "Center Embedding": 2, "Garden-Path Effects": 6, "Gross Syntactic State": 4,
                     "Licensing": 10, "Long-Distance Dependencies": 6}


def test_circuit_prefixes():
    assert circuit_of("npi_orc_any") == circuit_of("reflexive_new") == "Licensing"
    assert circuit_of("cleft_other") == circuit_of("fgd_new") == "Long-Distance Dependencies"
    assert circuit_of("npz_x") == circuit_of("mvrr_y") == "Garden-Path Effects"
    assert circuit_of("center_embed_z") == "Center Embedding"
    assert circuit_of("subordination_q") == "Gross Syntactic State"
    assert circuit_of("number_q") == "Agreement"
    assert circuit_of("fgd-embed3") is None and circuit_of("nn-nv-rpl") is None and circuit_of("blimp") is None


def test_fixture_suites_stray_spaces_and_empty_regions():
    suites = load_suites(FIXTURES)
    assert [s.name for s in suites] == ["npz_ambig", "subordination"]
    npz = suites[0]
    condition = npz.items[0].conditions["ambig_nocomma"]
    contents = [r.content for r in condition.regions]
    assert contents[2] == "" and contents[3].startswith(" ")  # as released
    assert condition.text == "As the criminal shot the woman yelled at the top of her lungs"
    assert condition.regions[2].words == () and condition.regions[3].words == ("the", "woman")
    totals = condition.region_surprisals([1.0] * len(condition.words))
    assert totals == {1: 3.0, 2: 1.0, 3: 0.0, 4: 2.0, 5: 1.0, 6: 6.0}
    for suite in suites:
        for item in suite.items:
            for cond in item.conditions.values():
                assert "  " not in cond.text and cond.text == cond.text.strip()
                assert cond.text.split() == list(cond.words)


# ---- formulas ------------------------------------------------------------------------------------------

VALUES = {("a", 1): 1.0, ("a", 2): 2.0, ("b", 1): 3.0, ("b", 2): 0.0005, ("b", 3): 0.0}


@pytest.mark.parametrize("formula, expected", [
    ("(1;%a%) < (1;%b%)", True),
    ("(1;%a%)>(1;%b%)", False),
    ("[(1;%a%) < (1;%b%)] & [(2;%a%) > (2;%b%)]", True),
    ("[(1;%a%) > (1;%b%)] & [(2;%a%) > (2;%b%)]", False),
    ("[(1;%a%) > (1;%b%)] | [(2;%a%) > (2;%b%)]", True),
    ("[(1;%a%) > (1;%b%)] | [(2;%a%) < (2;%b%)]", False),
    ("[[(1;%a%) + (2;%a%)] - [(1;%b%) - (2;%b%)]] > 0", True),      # 3 - 2.9995
    ("[[(1;%a%) + (2;%a%)] - [(1;%b%) - (2;%b%)]] > 0.001", False),
    ("[[[(1;%a%)]]] < [([(1;%b%)])]", True),                          # nested, mixed brackets
    ("(1;%a%) - (2;%a%) + (1;%b%) = 2", True),                        # left-associative: (1 - 2) + 3
    ("(1;%a%) - (2;%a%) - (1;%b%) = -4", True),                       # (1 - 2) - 3
    ("(2;%b%) = 0", True),                                            # |0.0005 - 0| <= atol 1e-3
    ("(2;%b%) = 0.0016", False),                                      # 0.0011 > 1e-3 + 1e-5 * 0.0016
    ("(2;%b%) = 0.0015", True),
    ("(1;%b%) = 3.00003", True),                                      # within rtol
    ("(3;%b%) = (3;%b%)", True),                                      # an empty region: 0 = 0
    ("(3;%b%) < (3;%b%)", False),
    ("(*;%a%) = 3", True),                                            # whole sentence
    ("(*;%b%) = 3.0005", True),
    ("(1;%a%) > -1.5", True),
    ("(1;%a%) - -2 = 3", True),
    ("(2;%b%) < 1e-3 & (2;%b%) > .0004", True),
    ("(1;%a%) < 5 | (1;%a%) > 5 & (1;%a%) > 5", False),               # & and | are one left-assoc. level
    ("(1;%a%) < 5 | [(1;%a%) > 5 & (1;%a%) > 5]", True),
    ("  ( 1 ;%a% )<( 1;%b%)  ", True),
])
def test_formulas_evaluate(formula, expected):
    assert parse_formula(formula).evaluate(VALUES) is expected


def test_formula_structure():
    f = parse_formula("[(6;%what_no-gap%)>(6;%that_no-gap%)] & [(7;%what_gap%)<(7;%that_gap%)]")
    assert str(f) == "(((6;%what_no-gap%) > (6;%that_no-gap%)) & ((7;%what_gap%) < (7;%that_gap%)))"
    assert f.references == {("what_no-gap", 6), ("that_no-gap", 6), ("what_gap", 7), ("that_gap", 7)}
    assert str(parse_formula("(1;%a%) - (1;%b%) + (*;%c%) > 0")) == "((((1;%a%) - (1;%b%)) + (*;%c%)) > 0)"
    assert str(parse_formula("(1;%a%) > 0 & (1;%b%) > 0 | (1;%c%) > 0")) == \
        "((((1;%a%) > 0) & ((1;%b%) > 0)) | ((1;%c%) > 0))"


@pytest.mark.parametrize("formula, position, message", [
    ("(1;%a%) < (2;%a%) < 3", 18, "cannot be chained"),
    ("(1;%a%) * 2 > 1", 8, "'*' is not an operator"),
    ("-(1;%a%) > 1", 0, "unary '-'"),
    ("[(1;%a%) > 1)", 12, "expected ']' to close the '[' at position 0"),
    ("((1;%a%) > 1", 12, "expected ')' to close the '(' at position 0"),
    ("(1;%a%) > 1 ]", 12, "closes no bracket"),
    ("(1;%a b%) > 1", 6, "expected '%'"),
    ("(1;a%) > 1", 3, "expected '%'"),
    ("(1;%%) > 1", 4, "condition name"),
    ("(1;%a%) + 1", 0, "not a truth value"),
    ("(1;%a%) & (1;%b%) > 1", 0, "'&' takes truth values"),
    ("[(1;%a%) > 1] + 2 > 1", 0, "'+' takes numbers"),
    ("[(1;%a%) > 1] < 2", 0, "'<' takes numbers"),
    ("(1;%a%) <= 1", 8, "'<=' is not an operator"),
    ("(1;%a%) >", 9, "unexpected end"),
    ("", 0, "unexpected end"),
    ("(x;%a%) > 1", 1, "expected a region reference"),
    ("(1;%a%) > 1 2", 12, "unexpected '2'"),
])
def test_formula_errors_name_formula_and_position(formula, position, message):
    with pytest.raises(FormulaError) as caught:
        parse_formula(formula)
    error = caught.value
    assert isinstance(error, ValueError)
    assert error.position == position and message in str(error)
    assert repr(formula) in str(error) and f"position {position}" in str(error)


# A "(" opens a region reference only as `(N;%cond%)`; otherwise it groups an expression (issue 12).
@pytest.mark.parametrize("formula, canonical, expected", [
    ("(0) < (1;%a%)", "(0 < (1;%a%))", True),                          # 0 < 1
    ("(1 - (1;%a%)) < 0", "((1 - (1;%a%)) < 0)", False),                # 0 < 0
    ("(3 - (1;%b%)) < 0.0001", "((3 - (1;%b%)) < 0.0001)", True),       # 0 < 1e-4
    ("(2) = (2;%a%)", "(2 = (2;%a%))", True),
    ("((1;%a%) + (2)) > (1;%b%) - (0.5)", "(((1;%a%) + 2) > ((1;%b%) - 0.5))", True),   # 3 > 2.5
    ("[(0)] < ((-1.5) + (1;%b%))", "(0 < (-1.5 + (1;%b%)))", True),    # 0 < 1.5
    ("( 1 ;%a%) > (( 1 ))", "((1;%a%) > 1)", False),                    # still a region reference
    ("(*;%a%) - (3) = 0", "(((*;%a%) - 3) = 0)", True),
])
def test_formula_groups_that_start_with_a_number(formula, canonical, expected):
    parsed = parse_formula(formula)
    assert str(parsed) == canonical
    assert parsed.evaluate(VALUES) is expected


@pytest.mark.parametrize("formula, position, message", [
    ("(0 < (1;%a%)", 12, "expected ')' to close the '(' at position 0"),
    ("(1;%a%) < (2", 12, "expected ')' to close the '(' at position 10"),
    ("(1 ; a) > 0", 5, "expected '%' before the condition name"),
])
def test_formula_group_errors(formula, position, message):
    with pytest.raises(FormulaError) as caught:
        parse_formula(formula)
    assert caught.value.position == position and message in str(caught.value)


@needs_shared
def test_released_formulas_keep_every_region_reference():
    # Each `(N;%cond%)` of the 36 released formulas is still one region reference, none is read as a group.
    for suite in load_suites(SHARED / "syntaxgym"):
        for formula in suite.predictions:
            stack, references = [formula.tree], 0
            while stack:
                node = stack.pop()
                references += isinstance(node, RegionRef)
                stack += [node.left, node.right] if isinstance(node, BinaryOp) else []
            assert references == formula.text.count(";%"), formula.text
            assert str(parse_formula(str(formula))) == str(formula)


# ---- suites and scoring with a controlled score_fn ---------------------------------------------------

COST = {"cheap": 1.0, "costly": 5.0}


def fake_score_fn(calls=None):
    def score_fn(sentences):
        if calls is not None:
            calls.append(sentences)
        return [[COST.get(word, 0.0) for word in words] for words in sentences]
    return score_fn


def make_suite(name, outcomes, second=None):
    """Items whose first prediction "(2;%good%) < (2;%bad%)" holds exactly where `outcomes` is True; with
    `second`, a second prediction "(2;%good%) = (2;%same%)" that holds exactly where second[i] is True."""
    items = []
    for i, ok in enumerate(outcomes):
        good, bad = ("cheap", "costly") if ok else ("costly", "cheap")
        conditions = [("good", good), ("bad", bad)]
        if second is not None:
            conditions.append(("same", good if second[i] else bad))
        items.append({"item_number": i + 1, "conditions": [
            {"condition_name": c, "regions": [{"region_number": 1, "content": f" item{i} {name} "},
                                              {"region_number": 2, "content": word},
                                              {"region_number": 3, "content": ""}]}
            for c, word in conditions]})
    predictions = [{"type": "formula", "formula": "[(2;%good%) < (2;%bad%)]"}]
    if second is not None:
        predictions.append({"type": "formula", "formula": "(2;%good%) = (2;%same%)"})
    return {"meta": {"name": name, "metric": "sum"}, "region_meta": {"1": "intro", "2": "critical", "3": "end"},
            "predictions": predictions, "items": items}


def test_per_suite_circuit_and_sg_score_aggregation():
    suites = [make_suite("number_src", [True, True, True, False]),        # 0.75
              make_suite("number_orc", [True, False]),                    # 0.5  -> Agreement 0.625
              make_suite("npi_orc_any", [True, False, False, False]),     # 0.25 -> Licensing 0.25
              make_suite("fgd-embed3", [False, False]),                   # 0, left out
              make_suite("my_suite", [True])]                             # 1.0, in the score, no circuit
    calls = []
    metrics = evaluate_suites(fake_score_fn(calls), suites)
    assert {n: m["accuracy"] for n, m in metrics["suites"].items()} == {
        "fgd-embed3": 0.0, "my_suite": 1.0, "npi_orc_any": 0.25, "number_orc": 0.5, "number_src": 0.75}
    assert metrics["sg_score"] == pytest.approx((0.75 + 0.5 + 0.25 + 1.0) / 4)
    assert metrics["mean_all_suites"] == pytest.approx((0.75 + 0.5 + 0.25 + 0 + 1.0) / 5)
    assert metrics["sg_score_suites"] == 4 and metrics["sg_score_is_paper_31"] is False
    circuits = metrics["circuits"]
    assert list(circuits) == list(CIRCUITS)
    assert circuits["Agreement"]["accuracy"] == pytest.approx(0.625)
    assert circuits["Agreement"]["suites"] == ["number_orc", "number_src"]
    assert circuits["Licensing"]["accuracy"] == pytest.approx(0.25)
    assert circuits["Long-Distance Dependencies"] == {"accuracy": None, "ci95": None, "suites": []}
    low, high = circuits["Agreement"]["ci95"]
    assert 0 <= low <= 0.625 <= high <= 1
    assert metrics["suites"]["fgd-embed3"]["in_sg_score"] is False
    assert metrics["counts"] == {"suites": 5, "suites_in_sg_score": 4, "items": 13, "sentences": 26, "words": 78,
                                 "distinct_sentences": 26, "distinct_sentence_words": 78}
    # one call, the sentences with stray spaces stripped and the empty region left out
    assert len(calls) == 1 and len(calls[0]) == 26
    assert ["item0", "number_src", "cheap"] in calls[0]
    row = next(r for r in metrics["items"] if r["suite"] == "number_src" and r["item"] == 4)
    assert row["correct"] == 0.0 and row["predictions"] == [False]
    assert row["regions"]["good"] == {1: 0.0, 2: 5.0, 3: 0.0}
    json.dumps({k: v for k, v in metrics.items() if k != "items"})
    assert "number_src" in format_summary(metrics)

    limited = evaluate_suites(fake_score_fn(), suites, limit=2)
    assert limited["suites"]["number_src"]["accuracy"] == 1.0 and limited["counts"]["items"] == 9
    assert limited["sg_score"] == pytest.approx((1.0 + 0.5 + 0.5 + 1.0) / 4)


def test_two_prediction_rules():
    suite = make_suite("fgd_hierarchy", [True] * 4, second=[True, False, True, False])
    results = {rule: evaluate_suites(fake_score_fn(), [suite], rule=rule) for rule in ("first", "all", "mean")}
    assert results["first"]["suites"]["fgd_hierarchy"]["accuracy"] == 1.0
    assert results["all"]["suites"]["fgd_hierarchy"]["accuracy"] == 0.5
    assert results["mean"]["suites"]["fgd_hierarchy"]["accuracy"] == 0.75
    assert [p["accuracy"] for p in results["first"]["suites"]["fgd_hierarchy"]["predictions"]] == [1.0, 0.5]
    assert results["first"]["circuits"]["Long-Distance Dependencies"]["accuracy"] == 1.0
    with pytest.raises(ValueError, match="rule"):
        evaluate_suites(fake_score_fn(), [suite], rule="any")


def test_identical_sentences_scored_once_and_score_fn_checked():
    calls = []
    suite = make_suite("number_src", [True, False])
    evaluate_suites(fake_score_fn(calls), [suite, {**suite, "meta": {"name": "number_src_copy", "metric": "sum"}}])
    assert len(calls[0]) == 4
    with pytest.raises(ValueError, match="surprisals for the"):
        evaluate_suites(lambda sentences: [[1.0] for _ in sentences], [suite])
    with pytest.raises(ValueError, match="results for"):
        evaluate_suites(lambda sentences: [], [suite])
    with pytest.raises(ValueError, match="more than once"):
        evaluate_suites(fake_score_fn(), [suite, suite])
    with pytest.raises(ValueError, match="limit"):
        evaluate_suites(fake_score_fn(), [suite], limit=0)


def test_suite_validation_errors():
    suite = make_suite("number_src", [True])
    bad = json.loads(json.dumps(suite))
    bad["predictions"][0]["formula"] = "[(2;%good%) < (2;%bad%)"
    with pytest.raises(FormulaError, match="suite 'number_src', prediction 0"):
        load_suite(bad)
    bad["predictions"][0]["formula"] = "(2;%good%) < (2;%nope%)"
    with pytest.raises(ValueError, match="condition 'nope'"):
        load_suite(bad)
    bad["predictions"][0]["formula"] = "(9;%good%) < (2;%bad%)"
    with pytest.raises(ValueError, match="region 9"):
        load_suite(bad)
    bad = json.loads(json.dumps(suite))
    bad["meta"]["metric"] = "mean"
    with pytest.raises(ValueError, match="metric"):
        load_suite(bad)
    bad = json.loads(json.dumps(suite))
    for region in bad["items"][0]["conditions"][0]["regions"]:
        region["content"] = "  "
    with pytest.raises(ValueError, match="every region is empty"):
        load_suite(bad)


# ---- end to end on a tiny randomly initialized TG -------------------------------------------------------

TREES = [
    "(ROOT (S (NP (DT the) (JJ blue) (NN bird)) (VP (VBZ sings)) (. .)))",
    "(ROOT (S (NP (DT a) (NN dog)) (VP (VBZ barks) (PP (IN at) (NP (DT the) (NN moon))))))",
    "(ROOT (S (NP (PRP I)) (VP (VBP like) (NP (PRP it))) (. .)))",
]
BEAM = {"beam_size": 10, "word_beam_size": 2}


@pytest.fixture(scope="module")
def tiny_tg(tmp_path_factory):
    from conftest import save_tiny_checkpoint

    return save_tiny_checkpoint(tmp_path_factory.mktemp("tg"), TREES)


def test_run_syntaxgym_end_to_end(tiny_tg, tmp_path, one_thread):
    _, model, tokenizer = tiny_tg
    output = tmp_path / "out"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unknown characters go through <unk>
        metrics = run_syntaxgym(model, tokenizer, FIXTURES, output_dir=output, limit=2, batch_size=4,
                                progress=False, **BEAM)
    assert set(metrics["files"]) == {"json", "csv", "items_csv", "png"}
    record = json.loads((output / "sg-syntaxgym-limit2.json").read_text())  # named by the suites and the limit
    assert record["evaluation"] == "sg" and record["options"]["beam_size"] == 10 and record["options"]["limit"] == 2
    assert record["data"]["suite_names"] == ["npz_ambig", "subordination"] and record["data"]["sentences"] == 16
    saved = record["metrics"]
    assert "items" not in saved and saved["counts"]["items"] == 4
    for name, suite in saved["suites"].items():
        assert 0 <= suite["accuracy"] <= 1 and suite["items"] == 2
    assert 0 <= saved["sg_score"] <= 1 and saved["sg_score_suites"] == 2
    assert saved["sg_score"] == pytest.approx(np.mean([s["accuracy"] for s in saved["suites"].values()]))
    for circuit in ("Garden-Path Effects", "Gross Syntactic State"):
        assert 0 <= saved["circuits"][circuit]["accuracy"] <= 1
    rows = list(csv.DictReader((output / "sg-syntaxgym-limit2.csv").open()))
    assert [r["suite"] for r in rows] == ["npz_ambig", "subordination"]
    assert all(0 <= float(r["accuracy"]) <= 1 for r in rows)
    assert len(list(csv.DictReader((output / "sg-syntaxgym-limit2_items.csv").open()))) == 4
    assert (output / "sg-syntaxgym-limit2.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # region surprisals are the beam search's word surprisals in bits, summed per region
    row = next(r for r in metrics["items"] if r["suite"] == "subordination")
    condition = load_suite(FIXTURES / "subordination.json").items[0].conditions["sub_matrix"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        direct = hf_slm.score(model, tokenizer, [list(condition.words)], bits=True, progress=False, **BEAM)[0]
    assert sum(row["regions"]["sub_matrix"].values()) == pytest.approx(sum(direct["surprisals"]), rel=1e-4)
    assert row["regions"]["sub_matrix"][1] == pytest.approx(sum(direct["surprisals"][:3]), rel=1e-4)


def test_run_syntaxgym_writes_beside_a_loaded_model(tiny_tg, tmp_path, one_thread):
    directory, _, tokenizer = tiny_tg
    copy = tmp_path / "model"
    shutil.copytree(directory, copy)
    model = TransformerGrammarForCausalLM.from_pretrained(copy).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        metrics = run_syntaxgym(model, tokenizer, FIXTURES / "subordination.json", limit=1, progress=False, **BEAM)
    assert Path(metrics["files"]["json"]) == copy / "eval_results" / "sg-subordination-limit1.json"
    assert (copy / "eval_results" / "sg-subordination-limit1.png").is_file()


def test_a_suite_whose_every_item_is_left_out_is_named_and_kept_out_of_every_mean():
    """A score_fn that cannot score a sentence returns None for it: its items are left out. When that leaves a suite
    with no item, its accuracy is None, and the SG score, its circuit and the mean over suites are over the suites
    that were scored (they once divided by None), the score no longer the papers' 31 suites; the summary names it."""
    suites = [make_suite("number_src", [True, True, True, False]),   # 0.75
              make_suite("number_orc", [True, False]),               # every item left out
              make_suite("npi_orc_any", [True, False, False, False])]  # 0.25

    def score_fn(sentences):
        return [None if "number_orc" in words else [COST.get(word, 0.0) for word in words] for words in sentences]

    metrics = evaluate_suites(score_fn, suites)
    assert metrics["suites"]["number_orc"]["accuracy"] is None
    assert metrics["sg_score"] == pytest.approx((0.75 + 0.25) / 2)
    assert metrics["mean_all_suites"] == pytest.approx((0.75 + 0.25) / 2)
    assert metrics["sg_score_suites"] == 2 and metrics["suites_without_items"] == ["number_orc"]
    assert metrics["circuits"]["Agreement"]["accuracy"] == pytest.approx(0.75)
    assert metrics["circuits"]["Agreement"]["suites"] == ["number_src"]
    assert metrics["items_left_out"] == 2
    assert "number_orc                      n/a  (0 items)  (every item left out: in no mean)" in format_summary(metrics)
