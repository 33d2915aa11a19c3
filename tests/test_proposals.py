"""Proposal trees in each family's own format (issue 28, item 3), through the real command line.

For every family of tests/test_families.py's CASES (its toy family, registered as another package would, included),
a tiny saved checkpoint is given a proposal file in its own format: PTB brackets (POS tags included) for bracketed
models, a mix of unlabelled and labelled trees for paper 003's models, CoNLL-U for dependency models. `hf-slm eval ppl
--proposals` and `hf-slm eval blimp --proposals` must give, per sentence, the log-sum-exp of the joint log-probs that
the family's scorer gives those trees encoded by the tokenizer directly (no proposal reader involved), and say that
the perplexity is an upper bound. A model of words scores p(x) exactly and does not use proposals; SOM's scorer
scores no given trees, and the command refuses them by name. `--data` in CoNLL-U is read as its sentences.
"""

import json
import warnings

import numpy as np
import pytest
from conftest import save_tiny_checkpoint
from hf_slm.tokenization.tokenization_slm import SyntacticWordTokenizer
from family_cases import CASES, toy_registered, variant_family  # noqa: F401 (a fixture)

from hf_slm.auto import tokenizer_class_for_grammar
from hf_slm.cli import main
from hf_slm.families import (
    causal_lm_for_config,
    config_for_grammar,
    grammar_class,
)
from hf_slm.families.tree_formats import tree_format
from hf_slm.search.scorers import scorer_for

# Two sentences; per sentence, its candidate trees in each kind of format (the first of each is the gold one).
WORDS = [["the", "bird", "sings"], ["a", "dog", "barks", "loudly"]]
BRACKETED = [
    ["(S (NP (DT the) (NN bird)) (VP (VBZ sings)))", "(S (DT the) (NN bird) (VBZ sings))",
     "(S (DT the) (VP (NN bird) (VBZ sings)))", "(S (NP (DT the) (NN bird)) (VP (VBZ sings)))"],  # a duplicate
    ["(S (NP (DT a) (NN dog)) (VP (VBZ barks) (ADVP (RB loudly))))", "(S (NP (DT a) (NN dog) (VBZ barks)) (RB loudly))"],
]
# paper 003's models: unlabelled trees, and labelled ones that the reader unlabels as the tokenizer's `unlabel` does
UNLABELLED = [
    ["( ( the bird ) sings )", "(S (DT the) (NN bird) (VBZ sings))", "( the ( bird sings ) )"],
    ["( ( a dog ) ( barks loudly ) )", "(S (NP (DT a) (NN dog) (VBZ barks)) (RB loudly))"],
]
DEPENDENCY = [  # heads, 1-based, 0 the root
    [[2, 3, 0], [3, 3, 0], [0, 1, 2]],
    [[2, 3, 0, 3], [2, 0, 2, 3]],
]
TRAINING_DEPENDENCY = ["the/2 bird/3 sings/0", "a/2 dog/3 barks/0 loudly/3", "the/2 dog/3 sings/0 loudly/3"]
TRAINING_TREES = [group[0] for group in BRACKETED] + ["(S (NP (DT the) (NN dog)) (VP (VBZ sings) (RB loudly)))"]
WORDS_ONLY, REFUSED = "terminals", "syntactic_ordered_memory"
SYNTACTIC = [variant for variant in CASES if variant not in (WORDS_ONLY, REFUSED)]


def _format(variant):
    return tree_format(variant_family(variant).variant(variant).tree_format)


def _set_fields(options):
    """The config fields a CASES entry sets with `--set KEY=VALUE`."""
    return {options[k + 1].partition("=")[0]: json.loads(options[k + 1].partition("=")[2])
            for k in range(len(options) - 1) if options[k] == "--set"}


def _save_checkpoint(variant, directory):
    """A tiny random model of `variant` and its tokenizer, saved in `directory` (no training)."""
    fields = _set_fields(CASES[variant][1])
    if variant == REFUSED:
        from helpers.som_models import model_for

        tokenizer = SyntacticWordTokenizer.train(TRAINING_TREES, linearization="terminals", min_count=1)
        model = model_for(tokenizer)
    elif _format(variant).name == "dependency":
        tokenizer = tokenizer_class_for_grammar(variant).train(
            TRAINING_DEPENDENCY, vocab_size=40, transition_system=grammar_class(variant).linearization)
        config = config_for_grammar(variant, vocab_size=len(tokenizer), **tokenizer.action_layout, **fields)
        model = causal_lm_for_config(config).eval()
    else:
        return save_tiny_checkpoint(directory, TRAINING_TREES, vocab_size=40, grammar=variant, **fields)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory, model, tokenizer


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    saved = {}

    def checkpoint(variant):
        if variant not in saved:
            saved[variant] = _save_checkpoint(variant, tmp_path_factory.mktemp(f"proposals-{variant}"))
        return saved[variant]

    return checkpoint


def _conllu(sentences):
    """CoNLL-U of (sent_id, words, heads) analyses, comments included."""
    blocks = []
    for sent_id, words, heads in sentences:
        lines = [f"# sent_id = {sent_id}", f"# text = {' '.join(words)}"]
        lines += [f"{k}\t{word}\t{word}\tX\t_\t_\t{head}\tdep\t_\t_"
                  for k, (word, head) in enumerate(zip(words, heads), start=1)]
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def _proposals(variant, sentences):
    """(the proposal file's text, per sentence the strings the tokenizer encodes for its proposals) in the format of
    `variant`, for the sentences (indices into WORDS) in order."""
    formatted = _format(variant)
    if formatted.name == "dependency":
        analyses = [(f"s{position}-{index}", WORDS[index], heads) for position, index in enumerate(sentences)
                    for heads in DEPENDENCY[index]]
        encoded = [[" ".join(f"{w}/{h}" for w, h in zip(WORDS[index], heads)) for heads in DEPENDENCY[index]]
                   for index in sentences]
        return _conllu(analyses), encoded
    groups = UNLABELLED if formatted.name == "unlabelled_brackets" else BRACKETED
    blocks = [groups[index] for index in sentences]
    return "\n\n".join("\n".join(block) for block in blocks) + "\n", blocks


def _expected_log_probs(model, tokenizer, encoded):
    """Per sentence, logsumexp over its distinct trees of the joint log-probs the family's scorer gives them."""
    unlabel = getattr(tokenizer, "unlabel", None)
    scorer, results = scorer_for(model, tokenizer), []
    for trees in encoded:
        texts = [unlabel(tree) if unlabel is not None and not tree.startswith("( ") else tree for tree in trees]
        # what the model reads of each tree: its ids, and a grammar's action inputs (Nb-Up's constituent_starts)
        features = {tuple((key, tuple(values)) for key, values in sorted(tokenizer(text).items())
                          if key not in ("attention_mask", "token_type_ids")) for text in texts}
        values = scorer.joint_log_probs([{key: list(values) for key, values in feature} for feature in features])
        values = np.asarray(values, dtype=np.float64)
        results.append(float(values.max() + np.log(np.exp(values - values.max()).sum())))
    return results


def _data_file(variant, directory):
    """The sentences of WORDS as the family reads them: CoNLL-U for dependency models, else one per line."""
    if _format(variant).name == "dependency":
        path = directory / "data.conllu"
        path.write_text(_conllu([(f"s{k}", words, DEPENDENCY[k][0]) for k, words in enumerate(WORDS)]))
    else:
        path = directory / "data.txt"
        path.write_text("\n".join(" ".join(words) for words in WORDS) + "\n")
    return path


@pytest.mark.parametrize("variant", SYNTACTIC)
def test_eval_ppl_scores_proposals_in_the_familys_format(variant, checkpoints, tmp_path, capsys):
    directory, model, tokenizer = checkpoints(variant)
    data = _data_file(variant, tmp_path)
    text, encoded = _proposals(variant, [0, 1])
    proposals = tmp_path / ("proposals.conllu" if _format(variant).name == "dependency" else "proposals.txt")
    proposals.write_text(text)
    assert main(["eval", "ppl", "--model", str(directory), "--data", str(data), "--proposals", str(proposals),
                 "--output", str(tmp_path / "out")]) == 0
    assert "upper bound" in capsys.readouterr().out
    record = json.loads((tmp_path / "out" / f"ppl-{data.stem}.json").read_text())["metrics"]
    assert record["method"] == "proposals" and record["estimate"] == "upper bound" and record["is_upper_bound"]
    assert record["sentences"] == 2 and record["words"] == 7
    lines = [json.loads(line) for line in (tmp_path / "out" / f"ppl-{data.stem}_sentences.jsonl").read_text().splitlines()]
    expected = _expected_log_probs(model, tokenizer, encoded)
    assert [line["log_prob"] for line in lines] == pytest.approx(expected, rel=1e-5, abs=1e-5)
    assert record["log_prob_total"] == pytest.approx(sum(expected), rel=1e-5)


@pytest.mark.parametrize("variant", SYNTACTIC)
def test_eval_blimp_scores_each_sentence_by_its_proposals(variant, checkpoints, tmp_path):
    directory, model, tokenizer = checkpoints(variant)
    blimp = tmp_path / "blimp"
    blimp.mkdir()
    # Two pairs; the "bad" sentences are the other pair's good one, so every sentence has proposals of its own words.
    pairs = [{"sentence_good": " ".join(WORDS[0]), "sentence_bad": " ".join(WORDS[1]), "field": "syntax",
              "UID": "toy", "linguistics_term": "t", "pairID": "0"},
             {"sentence_good": " ".join(WORDS[1]), "sentence_bad": " ".join(WORDS[0]), "field": "syntax",
              "UID": "toy", "linguistics_term": "t", "pairID": "1"}]
    (blimp / "toy.jsonl").write_text("".join(json.dumps(pair) + "\n" for pair in pairs))
    order = [0, 1, 1, 0]
    text, encoded = _proposals(variant, order)
    proposals = tmp_path / ("proposals.conllu" if _format(variant).name == "dependency" else "proposals.txt")
    proposals.write_text(text)
    assert main(["eval", "blimp", "--model", str(directory), "--data", str(blimp), "--proposals", str(proposals),
                 "--output", str(tmp_path / "out")]) == 0
    lines = [json.loads(line) for line in (tmp_path / "out" / "blimp-blimp_pairs.jsonl").read_text().splitlines()]
    expected = _expected_log_probs(model, tokenizer, encoded)
    found = [value for line in lines for value in (line["log_prob_good"], line["log_prob_bad"])]
    assert found == pytest.approx(expected, rel=1e-5, abs=1e-5)
    record = json.loads((tmp_path / "out" / "blimp-blimp.json").read_text())["metrics"]
    assert "proposal trees" in record["log_prob"] and "lower bound" in record["log_prob"]


def test_a_model_of_words_is_exact_and_leaves_proposals_unused(checkpoints, tmp_path, capsys):
    directory, _, _ = checkpoints(WORDS_ONLY)
    data = _data_file(WORDS_ONLY, tmp_path)
    proposals = tmp_path / "proposals.txt"
    proposals.write_text(_proposals("tg", [0, 1])[0])
    capsys.readouterr()
    assert main(["eval", "ppl", "--model", str(directory), "--data", str(data), "--proposals", str(proposals),
                 "--output", str(tmp_path / "out")]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("hf-slm eval ppl: warning: ")]
    assert len(said) == 1 and "exact; the proposal trees are not used" in said[0]
    record = json.loads((tmp_path / "out" / "ppl-data.json").read_text())["metrics"]
    assert record["method"] == "exact" and record["sentences"] == 2


@pytest.mark.parametrize("command", ["ppl", "blimp"])
def test_a_scorer_of_no_given_trees_refuses_proposals_by_name(command, checkpoints, tmp_path, capsys):
    directory, _, _ = checkpoints(REFUSED)
    data = _data_file(REFUSED, tmp_path)
    if command == "blimp":
        data = tmp_path / "blimp.jsonl"
        data.write_text(json.dumps({"sentence_good": "the bird sings", "sentence_bad": "bird the sings",
                                    "field": "syntax", "UID": "toy"}) + "\n")
    proposals = tmp_path / "proposals.txt"
    proposals.write_text(_proposals("tg", [0, 1])[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # refused, not a warning
        assert main(["eval", command, "--model", str(directory), "--data", str(data), "--proposals",
                     str(proposals), "--output", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert f"hf-slm eval {command}: error: proposals {proposals}" in error
    assert "does not score given trees; its p(x) is exact without them" in error


@pytest.mark.parametrize("variant", [WORDS_ONLY, "dtg"])
def test_eval_ppl_reads_conllu_data_as_its_sentences(variant, checkpoints, tmp_path):
    """Ten CoNLL-U sentences, comments and all, are ten sentences of their FORMs (not one per line)."""
    directory, model, tokenizer = checkpoints(variant)
    sentences = [(f"n{k}", WORDS[k % 2], DEPENDENCY[k % 2][0]) for k in range(10)]
    data = tmp_path / "ten.conllu"
    data.write_text(_conllu(sentences).replace("\tdep\t", "\t_\t").replace("\t3\t_", "\t_\t_"))  # heads need not be
    options = [] if variant == WORDS_ONLY else ["--beam-size", "4", "--word-beam-size", "2"]
    assert main(["eval", "ppl", "--model", str(directory), "--data", str(data), "--output", str(tmp_path / "out"),
                 *options]) == 0
    record = json.loads((tmp_path / "out" / "ppl-ten.json").read_text())["metrics"]
    assert record["sentences"] == 10 and record["words"] == 35
    if variant == WORDS_ONLY:  # exact: the log p(x) of each sentence's FORMs
        expected = scorer_for(model, tokenizer).log_probs([words for _, words, _ in sentences], progress=False)
        assert record["log_prob_total"] == pytest.approx(sum(expected), rel=1e-5)


def test_proposal_errors_name_the_file_the_place_and_the_format(checkpoints, tmp_path, capsys):
    directory, _, _ = checkpoints("dtg")
    data = _data_file("dtg", tmp_path)
    wrong = tmp_path / "wrong.conllu"
    wrong.write_text(_conllu([("s0", WORDS[0], [2, 3, 0]), ("s1", ["a", "cat", "barks", "loudly"], [2, 3, 0, 3])]))
    assert main(["eval", "ppl", "--model", str(directory), "--data", str(data), "--proposals", str(wrong)]) == 2
    error = capsys.readouterr().err
    assert f"{wrong}, analysis 2 (s1): sentence 2, proposal 1 has the words 'a cat barks loudly'" in error
    bracketed = tmp_path / "bracketed.txt"
    bracketed.write_text(_proposals("tg", [0, 1])[0])
    assert main(["eval", "ppl", "--model", str(directory), "--data", str(data), "--proposals", str(bracketed)]) == 2
    error = capsys.readouterr().err
    assert f"{bracketed}, line 1" in error and "expected CoNLL-U" in error

    directory, _, _ = checkpoints("nb-dn-in-m")
    data = _data_file("nb-dn-in-m", tmp_path)
    broken = tmp_path / "broken.txt"
    broken.write_text("( ( the bird ) sings )\n\n( ( a dog ) barks loudly\n")
    assert main(["eval", "ppl", "--model", str(directory), "--data", str(data), "--proposals", str(broken)]) == 2
    error = capsys.readouterr().err
    assert f"{broken}, line 3" in error and "expected one tree per line, unlabelled" in error


def test_eval_blimp_with_a_limit_skips_the_blocks_of_the_pairs_left_out(checkpoints, tmp_path):
    directory, model, tokenizer = checkpoints("tg")
    blimp = tmp_path / "blimp"
    blimp.mkdir()
    for name, (good, bad) in (("a", (0, 1)), ("b", (1, 0))):  # two paradigms of two pairs; --limit 1 keeps the first
        records = [{"sentence_good": " ".join(WORDS[good]), "sentence_bad": " ".join(WORDS[bad]), "field": "syntax",
                    "UID": name, "pairID": str(k)} for k in range(2)]
        (blimp / f"{name}.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    # the blocks of the whole data: paradigm a's two pairs, then b's
    text, encoded = _proposals("tg", [0, 1, 0, 1, 1, 0, 1, 0])
    proposals = tmp_path / "proposals.txt"
    proposals.write_text(text)
    assert main(["eval", "blimp", "--model", str(directory), "--data", str(blimp), "--proposals", str(proposals),
                 "--limit", "1", "--output", str(tmp_path / "out")]) == 0
    lines = [json.loads(line) for line in (tmp_path / "out" / "blimp-blimp-limit1_pairs.jsonl").read_text().splitlines()]
    assert [line["UID"] for line in lines] == ["a", "b"]
    expected = _expected_log_probs(model, tokenizer, encoded[:2] + encoded[4:6])
    found = [value for line in lines for value in (line["log_prob_good"], line["log_prob_bad"])]
    assert found == pytest.approx(expected, rel=1e-5, abs=1e-5)
    # a file of the pairs evaluated only (what --proposal-parser draws): the same numbers
    proposals.write_text(_proposals("tg", [0, 1, 1, 0])[0])
    assert main(["eval", "blimp", "--model", str(directory), "--data", str(blimp), "--proposals", str(proposals),
                 "--limit", "1", "--output", str(tmp_path / "only")]) == 0
    lines = [json.loads(line) for line in (tmp_path / "only" / "blimp-blimp-limit1_pairs.jsonl").read_text().splitlines()]
    assert [value for line in lines for value in (line["log_prob_good"], line["log_prob_bad"])] == \
        pytest.approx(expected, rel=1e-5, abs=1e-5)
    proposals.write_text(_proposals("tg", [0, 1, 0, 1, 1, 0])[0])  # blocks for three pairs: neither
    with pytest.raises(ValueError, match=r"6 block\(s\) of proposal trees for 4 BLiMP pair\(s\) of the data \(2 "
                                         r"evaluated\)"):
        main(["--debug", "eval", "blimp", "--model", str(directory), "--data", str(blimp), "--proposals",
              str(proposals), "--limit", "1"])
