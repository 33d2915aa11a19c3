"""SOM through the command line: `hf-slm score | parse | generate`, the eval commands' results files and journals,
and the model card (`hf-slm card`) that reports them."""

import json
import math
import re
import warnings
from pathlib import Path

import pytest
import torch

from hf_slm.cli.commands import SEARCH_OPTION_DEFAULTS, build_parser
from hf_slm.cli import main
from hf_slm.publishing.model_card import build_model_card
from hf_slm.families.ordered_memory.data import SyntacticOrderedMemoryCollator, gold_tree, som_example
from hf_slm.families.ordered_memory.evaluation import som_parses
from hf_slm.tokenization.tokenization_slm import SyntacticWordTokenizer
from hf_slm.tokenization.trees import parse_tree

from conftest import DEPENDENCY_TREEBANK, write_conllu_treebank
from helpers.som_models import manual_greedy, model_for, som_perplexity

SENTENCES = DEPENDENCY_TREEBANK["train"]
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def word_tokenizer():
    return SyntacticWordTokenizer.train([gold_tree(w, h) for w, h in SENTENCES], linearization="terminals",
                                        min_count=1)


def save(model, tokenizer, directory):
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture
def checkpoint(word_tokenizer, tmp_path):
    model = model_for(word_tokenizer, seed=1)
    return model, save(model, word_tokenizer, tmp_path / "som")


def exact_log_prob(model, tokenizer, words):
    """log p(<s> words </s>) summed from the model's next-token distributions (nats)."""
    ids = torch.tensor([tokenizer(words, is_split_into_words=True)["input_ids"] + [tokenizer.eos_token_id]])
    with torch.no_grad():
        log_probs = model(input_ids=ids).logits[0, :-1].log_softmax(-1)
    return log_probs.gather(-1, ids[0, 1:, None]).sum().item()


def printed_json(capsys):
    return [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]


# ---- score, parse, generate ------------------------------------------------------------------------------


def test_score_prints_the_exact_log_probability(checkpoint, word_tokenizer, capsys):
    model, directory = checkpoint
    sentences = ["Sam likes tea", "The cat sleeps on the mat"]
    assert main(["score", "--model", str(directory), *sentences]) == 0
    for line, sentence in zip(printed_json(capsys), sentences):
        expected = exact_log_prob(model, word_tokenizer, sentence.split())
        assert line["words"] == sentence.split() and line["units"] == "nats" and line["exact"]
        assert line["log_prob"] == pytest.approx(expected, abs=1e-5)
        assert len(line["surprisals"]) == len(line["words"])
        assert sum(line["surprisals"]) + line["end_surprisal"] == pytest.approx(-line["log_prob"], abs=1e-6)
    assert main(["score", "--model", str(directory), "--bits", sentences[0]]) == 0
    [line] = printed_json(capsys)
    expected = exact_log_prob(model, word_tokenizer, sentences[0].split()) / math.log(2)
    assert line["units"] == "bits" and line["log_prob"] == pytest.approx(expected, abs=1e-5)


def test_score_leaves_out_an_empty_sentence_or_stops(checkpoint, capsys):
    _, directory = checkpoint
    assert main(["score", "--model", str(directory), "Sam likes tea", ""]) == 1  # an item failed
    captured = capsys.readouterr()
    lines = [json.loads(line) for line in captured.out.strip().splitlines()]
    assert "log_prob" in lines[0] and lines[1]["error"] == "sentence 2 is empty; expected at least one word"
    assert "left out 1 of 2" in captured.err
    assert main(["score", "--model", str(directory), "--stop-on-error", "Sam likes tea", ""]) == 2
    assert "sentence 2 is empty" in capsys.readouterr().err


@pytest.mark.parametrize("command, option", [
    (["score", "Sam likes tea"], ["--beam-size", "5"]),
    (["parse", "Sam likes tea"], ["--word-beam-size", "3"]),
    (["parse", "Sam likes tea"], ["--constraints", "default"]),
    (["eval", "sg", "--suites", "suites"], ["--no-cache"]),
    (["generate", "--prompt", "Sam"], ["--max-nonterminals", "4"]),
    (["eval", "ppl", "--data", "data.txt"], ["--fast-track", "2"]),
])
def test_search_options_are_refused_by_name(checkpoint, capsys, command, option):
    _, directory = checkpoint
    assert main([*command[:2 if command[0] == "eval" else 1], "--model", str(directory),
                 *command[2 if command[0] == "eval" else 1:], *option]) == 2
    error = capsys.readouterr().err
    assert option[0] in error and "Syntactic Ordered Memory model does not run" in error


def test_evaluations_its_family_does_not_support_say_so(checkpoint, tmp_path, capsys):
    """The family's record lists its evaluations (Family.evaluations): eval rerank and uas are refused before any
    file is read, naming those it supports; document-level perplexity needs a document-level model."""
    _, directory = checkpoint
    data = tmp_path / "dev.txt"
    data.write_text("Sam likes tea\n")
    for command in (["eval", "rerank", "--gold", str(data), "--proposals", str(data)],
                    ["eval", "uas", "--data", str(data)]):
        assert main([*command[:2], "--model", str(directory), *command[2:]]) == 2
        assert (f"hf-slm {' '.join(command[:2])}: a Syntactic Ordered Memory (SOM) model does not support it (its "
                "family, syntactic_ordered_memory, supports eval ppl, sg, blimp, parse)") in capsys.readouterr().err
    assert main(["eval", "ppl", "--model", str(directory), "--data", str(data), "--document-level"]) == 2
    assert ("document-level perplexity needs a document-level model: this Syntactic Ordered Memory (SOM) model reads "
            "one sentence per sequence") in capsys.readouterr().err
    assert not (directory / "eval_results").exists()


def test_search_option_defaults_are_the_parsers():
    """SEARCH_OPTION_DEFAULTS holds the defaults of hf_slm.cli's search options: a value away from them is refused
    by a scorer without a search."""
    parser = build_parser()
    for argv in (["parse", "--model", "m", "x"], ["score", "--model", "m", "x"], ["generate", "--model", "m"],
                 ["eval", "sg", "--model", "m", "--suites", "s"]):
        defaults = vars(parser.parse_args(argv))
        shared = {name: defaults[name] for name in SEARCH_OPTION_DEFAULTS if name in defaults}
        if argv[0] == "eval":  # unset until the model is loaded: --protocol may set them, else these defaults
            shared = {name: SEARCH_OPTION_DEFAULTS[name] if value is None else value for name, value in shared.items()}
        assert shared == {name: SEARCH_OPTION_DEFAULTS[name] for name in shared}, argv
        assert {"fast_track", "max_nonterminals", "no_cache"} <= set(shared)


def test_parse_follows_the_parsers_decisions(word_tokenizer):
    """Driven by the gold grid (Table 2's oracle), the incremental parse is the gold tree itself."""
    model = model_for(word_tokenizer)
    batch = SyntacticOrderedMemoryCollator(word_tokenizer)([som_example(word_tokenizer, w, h) for w, h in SENTENCES])
    grid = model.gold_grid(batch["som_first_siblings"])
    forward = model.forward
    model.forward = lambda **inputs: forward(**inputs, gold_decisions=grid[:, :inputs["input_ids"].shape[1]])
    parses = som_parses(model, word_tokenizer, [words for words, _ in SENTENCES])
    assert [parse_tree(tree) for tree in parses] == [gold_tree(w, h) for w, h in SENTENCES]
    assert any(len(gold_tree(w, h)) == 2 for w, h in SENTENCES)  # binary trees with inner brackets, not flat


def test_cli_parse_prints_one_tree_per_sentence(checkpoint, word_tokenizer, capsys):
    model, directory = checkpoint
    sentences = ["Sam likes tea", "The cat sleeps on the mat"]
    assert main(["parse", "--model", str(directory), *sentences]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [parse_tree(line).leaves() for line in lines] == [s.split() for s in sentences]
    assert lines == som_parses(model, word_tokenizer, [s.split() for s in sentences])
    assert main(["parse", "--model", str(directory), "--pretty", sentences[0]]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) > 1  # drawn over several lines


def test_cli_parse_records_its_trees_in_a_cache(checkpoint, tmp_path, capsys, monkeypatch):
    """`hf-slm parse --cache` keeps SOM's parses as it keeps a search's (hf_slm/summarization/silver.py): a rerun reads
    them."""
    from hf_slm.families.ordered_memory.scorer import SyntacticOrderedMemoryScorer

    _, directory = checkpoint
    sentences = ["Sam likes tea", "The cat sleeps on the mat"]
    assert main(["parse", "--model", str(directory), "--cache", str(tmp_path / "cache"), *sentences]) == 0
    first = capsys.readouterr().out
    [journal] = (tmp_path / "cache").glob("silver-*.journal.jsonl")
    header = json.loads(journal.read_text().splitlines()[0])
    assert header["beam"] == {"parser": "incremental: the argmax decisions of p_t"}
    monkeypatch.setattr(SyntacticOrderedMemoryScorer, "parse", lambda *args, **kwargs: pytest.fail("parsed again"))
    assert main(["parse", "--model", str(directory), "--cache", str(tmp_path / "cache"), *sentences]) == 0
    assert capsys.readouterr().out == first


def test_generate_is_transformers_generate(checkpoint, word_tokenizer, capsys):
    model, directory = checkpoint
    assert main(["generate", "--model", str(directory), "--prompt", "Sam likes", "--max-new-words", "4"]) == 0
    printed = capsys.readouterr().out.strip().split()
    prompt = torch.tensor([word_tokenizer(["Sam", "likes"], is_split_into_words=True)["input_ids"]])
    ids = manual_greedy(model.eval(), prompt, 4)[0, 1:].tolist()
    if word_tokenizer.eos_token_id in ids:
        ids = ids[:ids.index(word_tokenizer.eos_token_id)]
    assert printed == word_tokenizer.convert_ids_to_tokens(ids)
    sampled = []
    for _ in range(2):
        assert main(["generate", "--model", str(directory), "--top-k", "0", "--seed", "3", "--num-trees", "2"]) == 0
        sampled.append(capsys.readouterr().out)
    assert sampled[0] == sampled[1] and len(sampled[0].strip().splitlines()) == 2
    assert main(["generate", "--model", str(directory), "--num-trees", "3", "--num-beams", "2"]) == 2
    assert "--num-beams 2 is smaller than --num-trees 3" in capsys.readouterr().err


# ---- evaluation results, journals, the card --------------------------------------------------------------


def test_eval_ppl_writes_results_and_resumes_from_its_journal(checkpoint, word_tokenizer, tmp_path, capsys):
    model, directory = checkpoint
    data = tmp_path / "dev.txt"
    data.write_text("\n".join(" ".join(words) for words, _ in SENTENCES) + "\n")
    assert main(["eval", "ppl", "--model", str(directory), "--data", str(data), "--batch-size", "2"]) == 0
    assert "ppl-dev.json" in capsys.readouterr().err  # "wrote ..."
    saved = json.loads((directory / "eval_results" / "ppl-dev.json").read_text())
    expected = som_perplexity(model, word_tokenizer, [words for words, _ in SENTENCES], tmp_path)["perplexity"]
    assert saved["evaluation"] == "ppl" and saved["metrics"]["perplexity"] == pytest.approx(expected, rel=1e-6)
    assert saved["metrics"]["method"] == "exact" and saved["metrics"]["is_upper_bound"] is False
    journal = directory / "eval_results" / "ppl-dev.journal.jsonl"
    lines = journal.read_text().splitlines()
    assert len(lines) == 1 + len(SENTENCES)  # the header, then one finished sentence per line
    # A rerun (another batch size: speed only) reads the finished sentences from the journal, not the model.
    entries = [json.loads(line) for line in lines]
    entries[1]["value"] -= 10.0  # one sentence's log p(x)
    journal.write_text("\n".join(json.dumps(entry) for entry in entries) + "\n")
    assert main(["eval", "ppl", "--model", str(directory), "--data", str(data), "--batch-size", "3"]) == 0
    resumed = json.loads((directory / "eval_results" / "ppl-dev.json").read_text())["metrics"]
    words = saved["metrics"]["denominator"]
    assert resumed["perplexity"] == pytest.approx(expected * math.exp(10.0 / words), rel=1e-6)
    # Another model is refused, unless --overwrite.
    save(model_for(word_tokenizer, seed=2), word_tokenizer, directory)
    assert main(["eval", "ppl", "--model", str(directory), "--data", str(data)]) == 2
    assert "belongs to another run" in capsys.readouterr().err
    assert main(["eval", "ppl", "--model", str(directory), "--data", str(data), "--overwrite"]) == 0


def _card_code(text, directory):
    code = "\n".join(re.findall(r"```python\n(.*?)```", text, re.DOTALL))
    return code.replace('REPO = "org/som-tiny"', f"REPO = {str(directory)!r}")


@pytest.mark.parametrize("disentangle", [False, True])
def test_card_of_a_som_checkpoint(word_tokenizer, tmp_path, capsys, monkeypatch, disentangle):
    """`hf-slm card` on an evaluated SOM checkpoint: what the model is, exact perplexity, UF1, and usage code that
    runs; none of the beam-search text of the syntactic families."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))  # remote-code modules are cached there
    torch.manual_seed(0)
    options = dict(disentangle=True, semantic_size=6) if disentangle else {}
    from hf_slm.modeling.configuration_som import SyntacticOrderedMemoryConfig
    from hf_slm.modeling.modeling_som import SyntacticOrderedMemoryForCausalLM

    config = SyntacticOrderedMemoryConfig(vocab_size=len(word_tokenizer), hidden_size=8, num_slots=7,
                                          intermediate_size=12, parser_size=6, **options)
    directory = save(SyntacticOrderedMemoryForCausalLM(config).eval(), word_tokenizer, tmp_path / "som")
    data = tmp_path / "test.txt"
    data.write_text("Sam likes tea\nKim likes the cat today\n")
    gold = write_conllu_treebank(tmp_path / "ud") / "en_mini-ud-train.conllu"
    assert main(["eval", "ppl", "--model", str(directory), "--data", str(data)]) == 0
    assert main(["eval", "parse", "--model", str(directory), "--gold", str(gold)]) == 0
    capsys.readouterr()
    assert main(["card", str(directory), "--repo", "org/som-tiny", "--revision", SHA]) == 0
    text = (directory / "README.md").read_text()
    card = build_model_card(directory, repo_id="org/som-tiny", revision=SHA)
    assert "syntactic-ordered-memory" in card.data.tags
    ppl = json.loads((directory / "eval_results" / "ppl-test.json").read_text())["metrics"]["perplexity"]
    uf1 = json.loads((directory / "eval_results" / "uf1-en_mini-ud-train.json").read_text())["metrics"]["uf1"]
    assert f"| Word perplexity, exact | {ppl:.2f} |" in text
    assert f"| Unlabeled F1, incremental parses | {uf1:.2f} |" in text
    assert {entry.metric_type for entry in card.data.eval_results} == {"perplexity", "uf1"}
    assert "exact" in text and "upper bound" not in text.lower() and "word_synchronous_beam_search" not in text
    assert "Transformer Grammar" not in text and "sartran" not in text  # not TG's card or citation
    assert "trust_remote_code=True" in text and "model.generate(" in text and "modeling_som.py" in text
    assert "| memory slots N | 7 " in text and "| hidden size D | 8 |" in text
    if disentangle:
        assert "**dSOM**" in text and "D_sem = 6" in text and "D_syn = 2" in text
    else:
        assert "**eSOM**" in text and "D_sem =" not in text
    namespace = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(_card_code(text, directory), "<som card>", "exec"), namespace)
    model = namespace["model"]
    assert type(model).__name__ == "SyntacticOrderedMemoryForCausalLM"
    assert float(namespace["log_p"]) == pytest.approx(exact_log_prob(model, word_tokenizer,
                                                                     namespace["words"]), abs=1e-5)
    assert namespace["generated"].shape[1] > namespace["prompt"].shape[1]


@pytest.mark.skipif(not (SHARED / "syntaxgym").is_dir(), reason="../shared/data/syntaxgym is absent")
def test_sg_and_blimp_results_say_the_surprisals_are_exact(checkpoint, capsys):
    _, directory = checkpoint
    suite = SHARED / "syntaxgym" / "test_suites" / "json" / "cleft.json"
    assert main(["eval", "sg", "--model", str(directory), "--suites", str(suite), "--limit", "2"]) == 0
    [path] = (directory / "eval_results").glob("sg-*.json")
    record = json.loads(path.read_text())
    assert record["options"]["surprisals"].startswith("exact") and record["metrics"]["suites"]["cleft"]["items"] == 2
    assert path.with_name(path.stem + ".journal.jsonl").is_file()
    if (SHARED / "blimp").is_dir():
        assert main(["eval", "blimp", "--model", str(directory), "--data", str(SHARED / "blimp" / "data"),
                     "--limit", "1"]) == 0
        [path] = (directory / "eval_results").glob("blimp-*.json")
        assert json.loads(path.read_text())["metrics"]["log_prob"] == "exact"
    capsys.readouterr()
    text = build_model_card(directory).text
    assert "surprisals exact, from the logits (no beam search)" in text and "default beam options" not in text


def test_a_config_without_grammar_or_known_model_type_is_named(checkpoint, tmp_path):
    _, directory = checkpoint
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps(dict(config, model_type="not_a_family")))
    with pytest.raises(ValueError, match=r"config.json: model_type 'not_a_family' is no registered hf-slm family; expected one of"):
        build_model_card(directory)
