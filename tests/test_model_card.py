"""Model cards (`hf_slm.publishing.model_card`, model_cards/*.md, `hf-slm card`): metadata, tables, family text, errors.

The checkpoints are tiny random models; their training records and evaluation results are written by the
library's own writers (write_training_record, and real evaluations on a few sentences), so the card is
tested against what those writers really produce.
"""

import json
import re
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import save_tiny_checkpoint
from huggingface_hub import ModelCard

from hf_slm.cli import main
from hf_slm.search.beam import SentenceResults
from hf_slm.search.scorers import scorer_for
from hf_slm.evaluation.blimp import run_blimp
from hf_slm.evaluation.parsing import parse_eval, rerank
from hf_slm.evaluation.perplexity import word_perplexity
from hf_slm.evaluation.syntaxgym import run_syntaxgym
from hf_slm.publishing.model_card import build_model_card, count_parameters, write_model_card
from hf_slm.training.train import TrainingSetup, write_training_record

pytestmark = pytest.mark.slow  # conftest.py: scheduled first

FIXTURES = Path(__file__).parent / "fixtures"
TREES = [
    "(ROOT (S (NP (DT the) (JJ blue) (NN bird)) (VP (VBZ sings)) (. .)))",
    "(ROOT (S (NP (DT a) (NN dog)) (VP (VBZ barks) (PP (IN at) (NP (DT the) (NN moon))))))",
    "(ROOT (S (NP (PRP I)) (VP (VBP like) (NP (PRP it))) (. .)))",
]
BEAM = dict(beam_size=10, word_beam_size=5)
GRAMMARS = {  # grammar -> (linearization, family tag, a phrase only that family's text has)
    "tg": ("top_down", "transformer-grammar", "A **Transformer Grammar** (TG"),
    "choe_charniak": ("top_down", "txl-cc", "Choe and Charniak (2016)"),
    "terminals": ("terminals", "txl-terminals", "trained on words alone"),
    # paper 003: a compositional variant (CompositionalTokenizer, unlabeled trees) and the word-level baseline
    "nb-dn-in-m": ("nb-dn", "compositional-slm", "four independent options"),
    "gpt2-token": ("terminals", "gpt2-token", "GPT2-token is paper 003's reference point"),
}
WORDS_ONLY = ("terminals", "gpt2-token")  # models of p(x): no trees, exact perplexity
# Bracketing F1 (parse, rerank) is evaluated on labeled gold trees: the families that predict labels.
LABELED = ("tg", "choe_charniak")
PRESETS = {"tg": "tg-ptb", "choe_charniak": "txl-cc-ptb", "terminals": "txl-terminals-ptb",
           "nb-dn-in-m": "nb-dn-in-m-tiny", "gpt2-token": "gpt2-token-tiny"}
SHA = "0123456789abcdef0123456789abcdef01234567"


def _tiny(directory, grammar):
    return save_tiny_checkpoint(directory, TREES, grammar=grammar, linearization=GRAMMARS[grammar][0])


def _write_training_record(directory, grammar, train_file):
    """training_setup.json through the real writer, with a stand-in for the Trainer's state."""
    setup = TrainingSetup(preset=PRESETS[grammar],
                          train=[str(train_file)], eval=[str(train_file)], output=str(directory),
                          normalize_options={"strip_function_tags": True, "remove_unary": False})
    schedule = {"max_steps": 50, "batch_size": 4, "learning_rate": 1e-3, "warmup_steps": 5,
                "initial_learning_rate": 1e-7, "final_learning_rate": 3e-7}
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=40, log_history=[
        {"loss": 3.25, "step": 20}, {"eval_loss": 3.5, "step": 20}, {"loss": 2.125, "step": 40}]))
    return write_training_record(directory, setup, grammar, schedule, trainer, train_examples=3, eval_examples=3)


def _fake_surprisals(sentences, **options):
    """Stands in for the Scorer's `score` in SyntaxGym: deterministic per-word surprisals, no beam search (fast)."""
    results = []
    for sentence in sentences:
        words = sentence.split() if isinstance(sentence, str) else list(sentence)
        results.append({"surprisals": [float(sum(map(ord, word)) % 7) for word in words]})
    return SentenceResults(results)


def _fake_log_probs(sentences):
    """A BLiMP scorer: deterministic log p(x) per sentence, no beam search (fast)."""
    return [-float(sum(map(len, words)) + 0.5 * len(words)) for words in sentences]


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """Per grammar: (checkpoint dir, model) with a training record and evaluation results.

    Perplexity, parsing and reranking run for real on two short sentences; SyntaxGym and BLiMP run their
    real code with a stand-in scorer (beam search over dozens of sentences would take too long here).
    """
    root = tmp_path_factory.mktemp("cards")
    train_file = root / "train_trees.txt"
    train_file.write_text("\n".join(TREES) + "\n")
    sentences = root / "test_sentences.txt"
    sentences.write_text("the bird sings\nI like it\n")
    gold = ["(ROOT (S (NP (DT the) (NN bird)) (VP (VBZ sings))))", "(ROOT (S (NP (PRP I)) (VP (VBP like) (NP (PRP it)))))"]
    proposals = [[gold[0], "(ROOT (S (DT the) (NN bird) (VBZ sings)))"],
                 [gold[1], "(ROOT (S (NP (PRP I)) (VBP like) (PRP it)))"]]
    checkpoints = {}
    with warnings.catch_warnings(), pytest.MonkeyPatch.context() as patch:
        warnings.simplefilter("ignore")  # the tiny tokenizer spells unseen characters as <unk>
        for grammar in GRAMMARS:
            directory, model, tokenizer = _tiny(root / grammar, grammar)
            results = directory / "eval_results"
            _write_training_record(directory, grammar, train_file)
            word_perplexity(model, tokenizer, sentences, beam_options=BEAM, output_dir=results, progress=False)
            # the model's own Scorer (it records the beam options the card shows), its beam search stood in for
            scorer = scorer_for(model, tokenizer, **BEAM)
            scorer.score = _fake_surprisals
            run_syntaxgym(model, tokenizer, FIXTURES / "syntaxgym", output_dir=results, limit=3, progress=False,
                          scorer=scorer)
            run_blimp(model, tokenizer, FIXTURES / "blimp", limit=3, output_dir=results, scorer=_fake_log_probs)
            if grammar in LABELED:
                parse_eval(model, tokenizer, gold, output_dir=results, progress=False, **BEAM)
                rerank(model, tokenizer, gold, proposals, output_dir=results, progress=False)
            checkpoints[grammar] = (directory, model)
    return checkpoints


def _load_card(path):
    text = Path(path).read_text(encoding="utf-8")
    match = re.match(r"---\n(.*?)\n---\n", text, re.DOTALL)
    assert match, "the card has no YAML front matter"
    return ModelCard.load(path), yaml.safe_load(match.group(1)), text


def _saved(directory, name):
    """The one saved result of evaluation `name` (results are named by their data: ppl-test_sentences.json)."""
    [path] = (Path(directory) / "eval_results").glob(f"{name}-*.json")
    return json.loads(path.read_text())


def _section(text, title):
    """The Markdown of one '## title' section."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.DOTALL | re.MULTILINE)
    assert match, f"no section {title!r}"
    return match.group(1)


def _table(section):
    """Rows of the first Markdown table of a section, as lists of cells (header and rule dropped)."""
    lines = [line for line in section.splitlines() if line.startswith("|")]
    rows = [[cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]
    return rows[2:]


def _results_by_evaluation(text):
    return {row[0]: row for row in _table(_section(text, "Evaluation"))}


# ---- metadata --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("grammar", list(GRAMMARS))
def test_metadata_has_library_tags_metrics_and_model_index(evaluated, grammar):
    directory, _ = evaluated[grammar]
    path = write_model_card(directory, repo_id=f"org/tiny-{grammar}", revision=SHA)
    assert path == directory / "README.md"
    card, front, _ = _load_card(path)
    assert card.data.library_name == "transformers" == front["library_name"]
    assert card.data.license == "apache-2.0"
    tags = card.data.tags
    assert {"hf-slm", GRAMMARS[grammar][1], "custom_code"} <= set(tags)
    assert ("syntactic-language-model" in tags) == (grammar not in WORDS_ONLY)
    assert not ({tag for _, tag, _ in GRAMMARS.values()} - {GRAMMARS[grammar][1]}) & set(tags)
    expected_metrics = {"perplexity", "sg_score", "blimp_accuracy"}
    if grammar in LABELED:
        expected_metrics.add("bracketing_f1")
    assert set(card.data.metrics) == expected_metrics
    training = json.loads((directory / "training_setup.json").read_text())
    assert card.data.datasets == [Path(p).name for p in training["train_data"]]

    # model-index: one entry per results file, with the saved numbers exactly.
    assert front["model-index"][0]["name"] == f"tiny-{grammar}"
    values = {(r.task_type, r.metric_type): r.metric_value for r in card.data.eval_results}
    assert values[("text-generation", "perplexity")] == _saved(directory, "ppl")["metrics"]["perplexity"]
    assert values[("text-generation", "sg_score")] == _saved(directory, "sg")["metrics"]["sg_score"]
    assert values[("text-generation", "blimp_accuracy")] == _saved(directory, "blimp")["metrics"]["accuracy"]
    if grammar in LABELED:
        assert values[("constituency-parsing", "bracketing_f1")] == _saved(directory, "parse")["metrics"]["f1"]
        assert values[("parse-reranking", "bracketing_f1")] == _saved(directory, "rerank")["metrics"]["f1"]
        assert len(card.data.eval_results) == 5
    else:
        assert len(card.data.eval_results) == 3


def test_license_and_datasets_options(evaluated):
    directory, _ = evaluated["tg"]
    card = build_model_card(directory, license="cc-by-sa-4.0", datasets=["org/bllip-lg"])
    assert card.data.license == "cc-by-sa-4.0"
    assert card.data.datasets == ["org/bllip-lg"]
    assert "released under `cc-by-sa-4.0`" in card.text


# ---- the text --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("grammar", list(GRAMMARS))
def test_table_numbers_equal_the_saved_results(evaluated, grammar):
    directory, _ = evaluated[grammar]
    text = build_model_card(directory).content
    rows = _results_by_evaluation(text)
    ppl = _saved(directory, "ppl")
    label = "Word perplexity, exact" if grammar in WORDS_ONLY else "Word perplexity, upper bound"
    assert float(rows[label][1]) == pytest.approx(ppl["metrics"]["perplexity"], abs=0.006)
    assert rows[label][4] == ppl["date"][:10]
    assert f"{ppl['metrics']['sentences']} sentences" in rows[label][2]

    sg = _saved(directory, "sg")
    score = rows["SyntaxGym SG score"]
    assert float(score[1].rstrip("%")) / 100 == pytest.approx(sg["metrics"]["sg_score"], abs=6e-4)
    assert f"beam {BEAM['beam_size']}" in score[3] and f"word beam {BEAM['word_beam_size']}" in score[3]
    assert f"first {sg['options']['limit']} items per suite" in score[2]
    for circuit, values in sg["metrics"]["circuits"].items():
        if values["accuracy"] is not None:
            shown = rows[f"SyntaxGym circuit: {circuit}"][1]
            assert float(shown.rstrip("%")) / 100 == pytest.approx(values["accuracy"], abs=6e-4)

    blimp = _saved(directory, "blimp")
    overall = rows["BLiMP accuracy (mean over paradigms)"]
    assert float(overall[1].rstrip("%")) / 100 == pytest.approx(blimp["metrics"]["accuracy"], abs=6e-4)
    assert f"{blimp['metrics']['pairs']} pairs" in overall[2]
    for field, accuracy in blimp["metrics"]["by_field"].items():
        assert float(rows[f"BLiMP field: {field}"][1].rstrip("%")) / 100 == pytest.approx(accuracy, abs=6e-4)

    if grammar in LABELED:
        for name, label in (("parse", "Bracketing F1, beam-search parses"), ("rerank", "Bracketing F1, reranking proposals")):
            saved = _saved(directory, name)
            assert float(rows[label][1]) == pytest.approx(saved["metrics"]["f1"], abs=0.006)
            assert rows[label][4] == saved["date"][:10]
    else:
        assert not any(label.startswith("Bracketing F1") for label in rows)


@pytest.mark.parametrize("grammar", list(GRAMMARS))
def test_family_text_matches_the_grammar(evaluated, grammar):
    directory, _ = evaluated[grammar]
    text = build_model_card(directory).text
    for other, (_, _, phrase) in GRAMMARS.items():
        assert (phrase in text) == (other == grammar), (grammar, phrase)
    if grammar in WORDS_ONLY:
        assert "word_synchronous_beam_search" not in text
    else:
        assert "model.word_synchronous_beam_search(" in text and "hf_slm.parse(" in text
    assert "Sartran" in text and "@article{sartran" in text and "@software{hf-slm" in text
    assert ("@inproceedings{choe-charniak-2016-parsing" in text) == (grammar == "choe_charniak")


@pytest.mark.parametrize("grammar", list(GRAMMARS))
def test_upper_bound_only_for_syntactic_perplexity(evaluated, grammar):
    directory, _ = evaluated[grammar]
    card = build_model_card(directory)
    ppl = _saved(directory, "ppl")["metrics"]
    perplexity = next(r for r in card.data.eval_results if r.metric_type == "perplexity")
    rows = _results_by_evaluation(card.text)
    if grammar in WORDS_ONLY:
        assert ppl["is_upper_bound"] is False
        assert "upper bound" not in card.content.lower()
        assert "Word perplexity, exact" in rows and perplexity.metric_name == "word perplexity (exact)"
    else:
        assert ppl["is_upper_bound"] is True
        assert "Word perplexity, upper bound" in rows
        assert perplexity.metric_name == "word perplexity (upper bound)"
        assert "upper bound" in _section(card.text, "Limitations")


def test_document_level_perplexity_is_an_approximation(tmp_path):
    # Greedy best-tree prefixes (paper 000, 3.1) bound nothing: the card says approximation, never upper bound,
    # for that row, even for results saved when they were (wrongly) labelled upper bounds.
    directory, model, tokenizer = save_tiny_checkpoint(tmp_path / "doc-tg", TREES, document_level=True)
    documents = tmp_path / "documents.txt"
    documents.write_text("the bird sings\nI like it\n\nthe dog barks\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tiny tokenizer spells unseen characters as <unk>
        word_perplexity(model, tokenizer, documents, document_level=True, beam_options=BEAM,
                        output_dir=directory / "eval_results", progress=False)
    path = directory / "eval_results" / "ppl-documents.json"
    saved = json.loads(path.read_text())
    assert saved["metrics"]["estimate"] == "approximation" and saved["metrics"]["is_upper_bound"] is False
    legacy = dict(saved, metrics=dict(saved["metrics"], is_upper_bound=True))
    del legacy["metrics"]["estimate"]
    for record in (saved, legacy):
        path.write_text(json.dumps(record))
        card = build_model_card(directory)
        rows = _results_by_evaluation(card.text)
        assert "Word perplexity (document level), approximation" in rows
        assert not any("bound" in " ".join(row) for label, row in rows.items() if label.startswith("Word perplexity"))
        perplexity = next(r for r in card.data.eval_results if r.metric_type == "perplexity")
        assert perplexity.metric_name == "word perplexity (document level) (approximation)"
        assert "approximation" in _section(card.text, "Limitations")


def test_results_on_two_data_files_are_both_quoted_with_their_data(tmp_path):
    # Issue 12: a test-set run once replaced the dev-set result a card quoted. Results are named by their data,
    # so both stay, and each row names its data and each file is listed.
    directory, model, tokenizer = save_tiny_checkpoint(tmp_path / "tg", TREES)
    for name, text in (("dev", "the bird sings\n"), ("test", "I like it\nthe dog barks\n")):
        (tmp_path / f"{name}.txt").write_text(text)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tiny tokenizer spells unseen characters as <unk>
            word_perplexity(model, tokenizer, tmp_path / f"{name}.txt", beam_options=BEAM,
                            output_dir=directory / "eval_results", progress=False)
    card = build_model_card(directory)
    rows = [row for row in _table(_section(card.text, "Evaluation")) if row[0].startswith("Word perplexity")]
    assert sorted(row[2] for row in rows) == ["dev.txt (1 sentences, 3 words)", "test.txt (2 sentences, 6 words)"]
    assert "`eval_results/ppl-dev.json`" in card.text and "`eval_results/ppl-test.json`" in card.text
    assert sorted(r.dataset_name for r in card.data.eval_results) == ["dev.txt", "test.txt"]


def test_pinned_revision_advice(evaluated):
    directory, _ = evaluated["tg"]
    pinned = build_model_card(directory, repo_id="org/tiny-tg", revision=SHA).text
    assert "Pin a revision" in pinned and "trust_remote_code=True" in pinned
    assert f'REVISION = "{SHA}"' in pinned and 'REPO = "org/tiny-tg"' in pinned
    assert pinned.count("revision=REVISION") == 2  # model and tokenizer
    unpinned = build_model_card(directory).text
    assert 'REVISION = "COMMIT_SHA"' in unpinned and "Replace `ORG/NAME`" in unpinned
    with pytest.raises(ValueError, match="'main' is not a commit sha"):
        build_model_card(directory, revision="main")


@pytest.mark.parametrize("grammar", list(GRAMMARS))
def test_details_and_training_come_from_the_checkpoint(evaluated, grammar):
    directory, model = evaluated[grammar]
    text = build_model_card(directory).text
    details = dict(_table(_section(text, "Model details")))
    config = json.loads((directory / "config.json").read_text())
    assert details["grammar"] == f"`{grammar}`"
    assert details["layers"] == str(config["num_hidden_layers"])
    assert details["hidden size"] == str(config["hidden_size"])
    assert details["feed-forward size"] == str(config["intermediate_size"])
    assert details["parameters"] == f"{model.num_parameters():,}"
    if config["position_encoding"] == "absolute":  # paper 003's GPT-2 backbone
        assert details["absolute positions"].startswith("learned embeddings") and "relative positions" not in details
    else:
        assert f"[{config['min_relative_position']}, {config['max_relative_position']}]" in details["relative positions"]
    training = dict(_table(_section(text, "Training")))
    record = json.loads((directory / "training_setup.json").read_text())
    assert training["preset"] == f"`{record['preset']}`"
    assert training["steps"] == f"{record['steps_done']} of {record['max_steps']}"
    assert training["final training loss"] == f"{record['final_train_loss']:.4f}"
    assert training["tree normalization"] == "strip function tags"
    assert training["learning rate"] == "linear warm-up from 1e-07 to 0.001 over 5 steps, then cosine decay to 3e-07"
    assert training["gradient clipping"] == "norm 3.0"  # the default: the schedule names none
    # the code trust_remote_code runs, as the folder holds it (issue 40: the card named TG's files for every family)
    warning = text[text.index("Pin a revision"):text.index("## What this model is")]
    held = sorted(path.name for path in directory.glob("*.py"))
    assert held and all(f"`{name}`" in warning for name in held)
    assert warning.count(".py`") == len(held)
    details_of = {"activation": details["feed-forward activation"], "initialization": details["initialization"]}
    assert details_of["activation"] == {"gelu": "GELU, exact (erf)", "gelu_pytorch_tanh": "GELU, tanh approximation",
                                        "relu": "ReLU"}[config.get("hidden_act", "gelu")]
    assert "where the reference draws" in details_of["initialization"]


def test_usage_examples_run(evaluated, tmp_path, monkeypatch):
    """The card's Python blocks run as written against the checkpoint (REPO pointed at the folder)."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))  # remote-code modules are cached there
    for grammar in ("tg", "terminals", "nb-dn-in-m", "gpt2-token"):
        directory, _ = evaluated[grammar]
        text = build_model_card(directory, repo_id="org/tiny", revision=SHA).text
        blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
        assert blocks
        code = "\n".join(blocks).replace('REPO = "org/tiny"', f"REPO = {str(directory)!r}")
        # Smaller searches than the card's, so that the test stays fast on a random model.
        code = re.sub(r"\b(beam_size|num_beams)=\d+", r"\1=3", code)
        code = re.sub(r"\b(word_beam_size|max_new_tokens)=\d+", r"\1=2", code)
        namespace = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(code, f"<{grammar} card>", "exec"), namespace)
        if grammar in WORDS_ONLY:
            assert float(namespace["log_p"]) < 0
        else:
            assert len(namespace["result"].surprisals) == len(namespace["words"])
            assert namespace["trees"][0].startswith("(")


def test_document_level_checkpoint(tmp_path):
    """A document-level TG says so in its details, description and limitations; a prepared dataset is named."""
    directory, _, _ = save_tiny_checkpoint(tmp_path / "doc", TREES, grammar="tg", document_level=True)
    setup = TrainingSetup(preset="tg-ptb", train=[str(tmp_path / "prepared")], output=str(directory))
    schedule = {"max_steps": 2, "batch_size": 1, "learning_rate": 1e-3, "warmup_steps": 1,
                "initial_learning_rate": 1e-7, "final_learning_rate": 3e-7}
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=2, log_history=[]))
    prepared = {"path": str(tmp_path / "prepared"), "loader": "bllip", "source": "/data/bllip/train.txt",
                "options": {}, "document_level": True, "train_split": "train", "eval": None}
    write_training_record(directory, setup, "tg", schedule, trainer, 3, 0, prepared=prepared)
    text = build_model_card(directory).text
    details = dict(_table(_section(text, "Model details")))
    assert details["sequences"].startswith("documents")
    assert "This model reads documents" in _section(text, "What this model is")
    assert "A document is modeled whole" in _section(text, "Limitations")
    training = dict(_table(_section(text, "Training")))
    assert training["prepared dataset"] == ("`prepared`, made by `hf-slm data prepare` with the bllip loader from "
                                            "`train.txt`; documents")
    assert training["final training loss"] == "not recorded"
    single = build_model_card(_tiny(tmp_path / "single", "tg")[0]).text
    assert dict(_table(_section(single, "Model details")))["sequences"] == "single sentences"
    assert "no document-level modeling" in _section(single, "Limitations")


# ---- no results, parameters, CLI, errors -----------------------------------------------------------------


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    directory, model, _ = _tiny(tmp_path_factory.mktemp("bare"), "tg")
    return directory, model


def test_no_results_and_no_record(bare):
    directory, _ = bare
    card = build_model_card(directory)
    assert card.data.eval_results is None and card.data.metrics is None and card.data.datasets is None
    evaluation = _section(card.text, "Evaluation")
    assert "No evaluation results saved yet" in evaluation and "hf-slm eval ppl" in evaluation
    assert "hf-slm eval parse" in evaluation
    assert "not recorded" in _section(card.text, "Training")
    assert "model-index" not in card.content


def test_parameters_counted_from_shards(bare, tmp_path):
    directory, model = bare
    assert count_parameters(directory) == model.num_parameters()
    sharded = tmp_path / "sharded"
    model.save_pretrained(sharded, max_shard_size="8KB")
    assert (sharded / "model.safetensors.index.json").is_file()
    assert count_parameters(sharded) == model.num_parameters()
    assert count_parameters(tmp_path) is None


def test_cli_writes_readme(bare, tmp_path, capsys):
    directory, _ = bare
    assert main(["card", str(directory)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {directory / 'README.md'}"
    card, _, _ = _load_card(directory / "README.md")
    assert "transformer-grammar" in card.data.tags
    output = tmp_path / "cards" / "tg.md"
    assert main(["card", str(directory), "--output", str(output), "--repo", "org/tg-ptb", "--revision", SHA,
                 "--dataset", "org/ptb"]) == 0
    card, front, text = _load_card(output)
    assert 'REPO = "org/tg-ptb"' in text and front["datasets"] == ["org/ptb"]
    assert main(["card", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err


def _copy_checkpoint(source, target):
    target.mkdir()
    for name in ("config.json", "model.safetensors"):
        (target / name).write_bytes((source / name).read_bytes())
    return target


def test_bad_input_is_a_clear_error(bare, tmp_path):
    directory, _ = bare
    with pytest.raises(ValueError, match="does not exist"):
        write_model_card(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="no config.json"):
        write_model_card(tmp_path)
    with pytest.raises(ValueError, match="ORG/NAME"):
        build_model_card(directory, repo_id="no-organization")

    unknown = _copy_checkpoint(directory, tmp_path / "som")
    config = json.loads((unknown / "config.json").read_text())
    (unknown / "config.json").write_text(json.dumps(dict(config, grammar="som")))  # SOM goes by model_type, not this
    with pytest.raises(ValueError, match=r"config.json: a transformer_grammar model with grammar 'som'; expected one of the transformer_grammar family's grammars \['tg'"):
        build_model_card(unknown)

    broken = _copy_checkpoint(directory, tmp_path / "broken")
    (broken / "config.json").write_text('{"grammar": "tg",\n "hidden_size": }')
    with pytest.raises(ValueError, match=r"config.json, line 2: not valid JSON"):
        build_model_card(broken)


def test_bad_results_and_records_are_clear_errors(bare, evaluated, tmp_path):
    directory, _ = bare
    checkpoint = _copy_checkpoint(directory, tmp_path / "checkpoint")
    results = checkpoint / "eval_results"
    results.mkdir()
    (results / "ppl.json").write_text('{"evaluation": "ppl",\n  oops}')
    with pytest.raises(ValueError, match=r"ppl.json, line 2: not valid JSON"):
        build_model_card(checkpoint)

    saved = _saved(evaluated["terminals"][0], "ppl")
    (results / "ppl.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match=r"ppl.json: evaluates a model with grammar 'terminals'.*grammar is 'tg'"):
        build_model_card(checkpoint)

    (results / "ppl.json").write_text(json.dumps(dict(saved, evaluation="bleu", grammar="tg")))
    with pytest.raises(ValueError, match=r"ppl.json: evaluation 'bleu' is not one a model card can report"):
        build_model_card(checkpoint)

    (results / "ppl.json").write_text(json.dumps({"evaluation": "ppl", "metrics": {}}))
    with pytest.raises(ValueError, match=r"ppl.json: lacks grammar, data, options, date"):
        build_model_card(checkpoint)

    metrics = {k: v for k, v in saved["metrics"].items() if k != "perplexity"}
    (results / "ppl.json").write_text(json.dumps(dict(saved, grammar="tg", metrics=metrics)))
    with pytest.raises(ValueError, match=r"ppl.json: the ppl metrics lack perplexity"):
        build_model_card(checkpoint)

    (results / "ppl.json").unlink()
    record = json.loads((evaluated["terminals"][0] / "training_setup.json").read_text())
    (checkpoint / "training_setup.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match=r"training_setup.json: records grammar 'terminals'"):
        build_model_card(checkpoint)


@pytest.mark.parametrize("grammar, system", [("dtg", "arc-standard"), ("dtg_swift", "arc-swift"),
                                             ("txl_trans", "arc-standard")])
def test_dependency_card_says_what_the_model_is_and_its_examples_run(grammar, system, tmp_path, monkeypatch):
    from helpers.dependency_models import tiny

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    model, tokenizer = tiny(grammar)
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    text = build_model_card(tmp_path / "model", repo_id="org/tiny", revision=SHA).text
    if grammar == "txl_trans":
        assert f"transitions of the generative {system} system" in text and "no syntactic attention" in text
        assert "count twice" not in text  # one position per transition
    else:
        assert f"generative transition system ({system} here)" in text
        assert "(arcs count twice)" in text and "closing nonterminals" not in text
    assert "hf-slm eval parse" not in text  # no bracketing F1 for dependency trees
    for phrase in ("A **Transformer Grammar** (TG", "Choe and Charniak (2016)", "trained on words alone"):
        assert phrase not in text  # no constituency family's own text
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    code = "\n".join(blocks).replace('REPO = "org/tiny"', f"REPO = {str(tmp_path / 'model')!r}")
    code = re.sub(r"\b(beam_size|num_beams)=\d+", r"\1=3", code)
    code = re.sub(r"\b(word_beam_size|max_new_tokens)=\d+", r"\1=2", code)
    code = code.replace('"The students are happy ."', '"a b c"').replace('["The", "students"]', '["a", "b"]')
    namespace = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, f"<{grammar} card>", "exec"), namespace)
    assert len(namespace["result"].surprisals) == len(namespace["words"])
    assert namespace["trees"][0].startswith("a/")  # hf_slm.parse: an inline dependency tree of the words


def _compositional_cards():
    """Every paper 003 model that exists (the variants COMPOSITIONAL_MODEL_VARIANTS names, as they land) and
    GPT2-tree: a card needs no per-variant code."""
    from hf_slm.modeling.compositional_config import COMPOSITIONAL_MODEL_VARIANTS

    return list(COMPOSITIONAL_MODEL_VARIANTS) + ["gpt2-tree"]


@pytest.mark.parametrize("grammar", _compositional_cards())
def test_compositional_card_states_the_variant_options_and_the_tokenizer(grammar, tmp_path):
    from hf_slm.modeling.compositional_grammars import COMPOSITIONAL_GRAMMARS

    directory, _, tokenizer = save_tiny_checkpoint(tmp_path / grammar, TREES, grammar=grammar)
    card = build_model_card(directory)
    text = card.text
    assert card.data.tags == ["hf-slm", "syntactic-language-model",
                              "gpt2-tree" if grammar == "gpt2-tree" else "compositional-slm", "custom_code"]
    description = _section(text, "What this model is")
    # The truth about the vocabulary: SentencePiece, not the paper's GPT-2 BPE.
    assert "`CompositionalTokenizer`: a SentencePiece unigram model" in description
    assert f"({len(tokenizer)} ids in all)" in description and "GPT-2's byte-level BPE" in description
    assert "tokenizer.unlabel" in description
    details = dict(_table(_section(text, "Model details")))
    assert details["grammar"] == f"`{grammar}`"
    assert details["vocabulary"].endswith("(one unlabeled bracket: a `(` and a `)` action)")
    rules = COMPOSITIONAL_GRAMMARS.get(grammar)
    if rules is None:  # GPT2-tree: no options table, no composition
        assert "four independent options" not in text and "A **GPT2-tree** model" in text
        return
    assert f"variant **{'-'.join(part.capitalize() for part in grammar.split('-'))}**" in text
    options = [row for row in _table(description) if row[0].split(" (")[0] in
               ("tree form", "linearization", "composition", "masking")]
    chosen = [row[1].split(":")[0] for row in options]
    assert chosen == ["Bi" if rules.binary else "Nb", "Dn" if rules.top_down else "Up",
                      "In" if rules.internal else "Ex", "M" if rules.masked else "Nm"]
    assert [row[2].split(":")[0] for row in options] == [
        "Nb" if rules.binary else "Bi", "Up" if rules.top_down else "Dn", "Ex" if rules.internal else "In",
        "Nm" if rules.masked else "M"]
    config = json.loads((directory / "config.json").read_text())
    if rules.external_composition:
        assert details["external composer"].startswith(
            f"a Transformer of {config['composer_num_layers']} layers, width {config['composer_hidden_size']}")
    else:
        assert "external composer" not in details
        assert details["max sequence length"].endswith("(closing brackets count twice)")
    assert ("`</s>`" in description) == rules.uses_eos


def test_the_training_rows_say_a_constant_rate_and_the_clipping_a_run_used():
    """RNNG's presets train at one learning rate, clipped at norm 5: the card says so (issue 40: it said paper 000's
    warm-up and norm 3 for every family); a record written before the clipping was recorded says what it was."""
    from hf_slm.publishing.model_card import training_details

    record = {"max_steps": 10, "steps_done": 10, "batch_size": 4, "learning_rate": 1e-3, "warmup_steps": 0,
              "initial_learning_rate": 1e-3, "final_learning_rate": 1e-3, "max_grad_norm": 5.0}
    rows = dict(training_details(record))
    assert rows["learning rate"] == "constant 0.001" and rows["gradient clipping"] == "norm 5.0"
    del record["max_grad_norm"]
    record["final_learning_rate"] = 1e-4  # a cosine decay: not constant
    rows = dict(training_details(record))
    assert rows["gradient clipping"].startswith("norm 3 (not recorded")
    assert rows["learning rate"].startswith("linear warm-up from 0.001 to 0.001 over 0 steps")
