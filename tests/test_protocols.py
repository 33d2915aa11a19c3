"""Evaluation protocols by name (issue 29, item 2): `hf-slm eval ... --protocol paperNNN` runs on a tiny model of every
family its paper covers, sets the paper's values (beam 300 for papers 002 and 003's SG, n_c / p_c for paper 003's,
300 proposals per sentence), lets an option the command gives win, records every setting it used in the results
file, and refuses another paper's family or an evaluation the paper does not run. Without --protocol the defaults
are as before."""

import json
from pathlib import Path

import pytest
import torch
from conftest import save_tiny_checkpoint
from family_cases import variant_family
from hf_slm.tokenization.tokenization_slm import SyntacticWordTokenizer

from hf_slm.auto import tokenizer_class_for_grammar
from hf_slm.cli import main
from hf_slm.evaluation.protocols import PROTOCOLS
from hf_slm.families import causal_lm_for_config, config_for_grammar, grammar_class

FIXTURES = Path(__file__).parent / "fixtures"
SUITE = FIXTURES / "syntaxgym" / "npz_ambig.json"
TINY = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2)
WORDS = [["the", "bird", "sings"], ["a", "dog", "barks", "loudly"]]
BRACKETED = [["(S (NP (DT the) (NN bird)) (VP (VBZ sings)))", "(S (DT the) (NN bird) (VBZ sings))"],
             ["(S (NP (DT a) (NN dog)) (VP (VBZ barks) (ADVP (RB loudly))))",
              "(S (NP (DT a) (NN dog) (VBZ barks)) (RB loudly))"]]
UNLABELLED = [["( ( the bird ) sings )", "( the ( bird sings ) )"], ["( ( a dog ) ( barks loudly ) )"]]
HEADS = [[[2, 3, 0], [3, 3, 0]], [[2, 3, 0, 3], [2, 0, 2, 3]]]  # per sentence, its proposals (the gold one first)
DEPENDENCY_TRAINING = ["the/2 bird/3 sings/0", "a/2 dog/3 barks/0 loudly/3", "the/2 dog/3 sings/0 loudly/3"]
SOM = "syntactic_ordered_memory"
# protocol -> a variant of each family its paper covers
RUNS = {"paper000": ["tg", "choe_charniak", "rnng"], "paper001": [SOM], "paper002": ["dtg", "txl_trans"],
        "paper003": ["nb-dn-in-m"]}


def _conllu(analyses):
    blocks = []
    for sent_id, words, heads in analyses:
        lines = [f"# sent_id = {sent_id}"] + [f"{k}\t{word}\t{word}\tX\t_\t_\t{head}\tdep\t_\t_"
                                              for k, (word, head) in enumerate(zip(words, heads), start=1)]
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def _save(variant, directory):
    if variant == SOM:
        from hf_slm.modeling.configuration_som import SyntacticOrderedMemoryConfig
        from hf_slm.modeling.modeling_som import SyntacticOrderedMemoryForCausalLM

        tokenizer = SyntacticWordTokenizer.train([group[0] for group in BRACKETED], linearization="terminals",
                                                 min_count=1)
        torch.manual_seed(0)
        model = SyntacticOrderedMemoryForCausalLM(SyntacticOrderedMemoryConfig(
            vocab_size=len(tokenizer), hidden_size=8, num_slots=4, intermediate_size=12, parser_size=6))
    elif variant in ("dtg", "txl_trans"):
        tokenizer = tokenizer_class_for_grammar(variant).train(
            DEPENDENCY_TRAINING, vocab_size=40, transition_system=grammar_class(variant).linearization)
        model = causal_lm_for_config(config_for_grammar(variant, vocab_size=len(tokenizer), **tokenizer.action_layout,
                                                        **TINY))
    else:
        return save_tiny_checkpoint(directory, [group[0] for group in BRACKETED], vocab_size=40, grammar=variant,
                                    **TINY)[0]
    model.eval().save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    saved = {}

    def get(variant):
        if variant not in saved:
            saved[variant] = _save(variant, tmp_path_factory.mktemp(f"protocol-{variant}"))
        return saved[variant]

    return get


def _inputs(variant, directory):
    """{evaluation: its data options} for `variant`, files written into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    dependency = variant in ("dtg", "txl_trans")
    data = directory / ("data.conllu" if dependency else "data.txt")
    proposals = directory / ("proposals.conllu" if dependency else "proposals.txt")
    if dependency:
        data.write_text(_conllu([(f"s{k}", words, HEADS[k][0]) for k, words in enumerate(WORDS)]))
        proposals.write_text(_conllu([(f"s{k}", WORDS[k], heads) for k in range(2)
                                      for heads in HEADS[k]]))
    else:
        data.write_text("\n".join(" ".join(words) for words in WORDS) + "\n")
        groups = UNLABELLED if variant_family(variant).unlabelled_trees else BRACKETED
        proposals.write_text("\n\n".join("\n".join(group) for group in groups) + "\n")
    gold = directory / "gold.txt"
    gold.write_text("\n".join(group[0] for group in BRACKETED) + "\n")
    blimp = directory / "blimp"
    blimp.mkdir(exist_ok=True)
    (blimp / "toy.jsonl").write_text(json.dumps({"sentence_good": " ".join(WORDS[0]), "sentence_bad": " ".join(WORDS[1]),
                                                 "field": "syntax", "UID": "toy", "pairID": "0"}) + "\n")
    pair_proposals = directory / "pair_proposals.conllu"
    if dependency:
        pair_proposals.write_text(_conllu([(f"p{k}", WORDS[k], heads) for k in range(2)
                                           for heads in HEADS[k]]))
    som_gold = directory / "gold.conllu"
    som_gold.write_text(_conllu([(f"g{k}", words, HEADS[k][0]) for k, words in enumerate(WORDS)]))
    return {
        "ppl": ["--data", str(data)] + ([] if variant == SOM else ["--proposals", str(proposals)]),
        "sg": ["--suites", str(SUITE), "--limit", "1"],
        "blimp": ["--data", str(blimp), "--proposals", str(pair_proposals)],
        "rerank": ["--gold", str(gold), "--proposals", str(proposals)],
        "uas": ["--data", str(data), "--proposals", str(proposals)],
        "parse": ["--gold", str(som_gold)],
    }


def _result(output, evaluation):
    found = list(output.glob("*.json"))  # one per results folder (SOM's parses: uf1-DATA.json)
    assert len(found) == 1, found
    return json.loads(found[0].read_text())


@pytest.mark.parametrize("protocol, variant", [(name, variant) for name, variants in RUNS.items()
                                               for variant in variants])
def test_each_protocol_runs_on_a_model_of_each_family_it_covers_and_records_its_settings(protocol, variant,
                                                                                       checkpoint, tmp_path):
    directory = checkpoint(variant)
    inputs = _inputs(variant, tmp_path / "inputs")
    evaluations = [name for name in PROTOCOLS[protocol].evaluations if name in variant_family(variant).evaluations]
    assert evaluations
    for evaluation in evaluations:
        output = tmp_path / evaluation
        assert main(["eval", evaluation, "--model", str(directory), "--output", str(output), "--protocol", protocol,
                     *inputs[evaluation]]) == 0, evaluation
        record = _result(output, evaluation)
        used = record["protocol"]
        assert (used["name"], used["evaluation"]) == (protocol, evaluation)
        settings, notes = PROTOCOLS[protocol].evaluations[evaluation]
        # every setting of the protocol, with its value and source, and every option the command ran with
        assert {setting.option for setting in settings} == set(used["settings"])
        for setting in settings:
            assert used["settings"][setting.option]["source"] == setting.source
            if setting.option != "proposals":
                assert used["options"][setting.option] == setting.value
        assert used["notes"] == list(notes)
        if evaluation == "sg" and variant != SOM:
            assert {"beam_size", "word_beam_size", "fast_track"} <= set(used["options"])
            # the search ran with them: the results' own options (what the journal was opened with)
            assert record["options"]["beam_size"] == used["options"]["beam_size"]
        if any(setting.option == "max_proposals" for setting in settings):
            assert used["options"]["max_proposals"] == 300


def test_the_papers_search_settings_and_an_option_given_wins(checkpoint, tmp_path):
    directory = checkpoint("nb-dn-in-m")
    assert main(["eval", "sg", "--model", str(directory), "--output", str(tmp_path / "p"), "--protocol", "paper003",
                 "--suites", str(SUITE), "--limit", "1"]) == 0
    record = _result(tmp_path / "p", "sg")
    assert record["options"]["beam_size"] == 300 and record["protocol"]["options"]["constraints"] == "paper003-sg"
    assert record["options"]["max_consecutive_open"] == 3  # p_c = 3
    assert main(["eval", "sg", "--model", str(directory), "--output", str(tmp_path / "given"), "--protocol",
                 "paper003", "--beam-size", "20", "--suites", str(SUITE), "--limit", "1"]) == 0
    record = _result(tmp_path / "given", "sg")
    assert record["options"]["beam_size"] == 20
    assert record["protocol"]["settings"]["beam_size"] == {
        "value": 20, "paper": 300, "source": PROTOCOLS["paper003"].evaluations["sg"][0][0].source,
        "from": "command (overrides the protocol)"}
    # without --protocol the defaults are unchanged, and nothing is recorded
    assert main(["eval", "sg", "--model", str(directory), "--output", str(tmp_path / "none"), "--suites", str(SUITE),
                 "--limit", "1"]) == 0
    record = _result(tmp_path / "none", "sg")
    assert record["options"]["beam_size"] == 100 and record["options"]["word_beam_size"] == 10
    assert "protocol" not in record


def test_a_protocol_of_another_paper_or_evaluation_is_refused(checkpoint, tmp_path, capsys):
    directory = checkpoint("tg")
    inputs = _inputs("tg", tmp_path / "inputs")
    assert main(["eval", "sg", "--model", str(directory), "--protocol", "paper003", *inputs["sg"]]) == 2
    error = capsys.readouterr().err
    assert "--protocol paper003: paper 003's evaluation protocol applies to the models of paper 003's families" in error
    assert "use --protocol paper000" in error
    assert main(["eval", "blimp", "--model", str(directory), "--protocol", "paper000", "--data",
                 str(tmp_path / "inputs" / "blimp")]) == 2
    assert "paper 000 runs no 'blimp' evaluation" in capsys.readouterr().err
    # the paper's perplexity comes from proposal trees: the command must be given them
    assert main(["eval", "ppl", "--model", str(directory), "--protocol", "paper000", "--data",
                 str(tmp_path / "inputs" / "data.txt")]) == 2
    assert "eval ppl needs --proposals" in capsys.readouterr().err
