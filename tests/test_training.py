"""Training with transformers.Trainer: the schedule, the loss going down, exact resumption."""

import json
import math
import shutil
from pathlib import Path

import pytest

from hf_slm.training.train import TrainingSetup, train, warmup_cosine_schedule

SAMPLE = Path(__file__).resolve().parents[1] / "hf_slm" / "sample_data" / "gum"
TINY = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, max_sequence_length=512)


def test_warmup_then_cosine_schedule():
    args = dict(warmup_steps=10, total_steps=110, initial=1e-7, peak=1e-3, final=3e-7)
    assert warmup_cosine_schedule(0, **args) == pytest.approx(1e-7)
    assert warmup_cosine_schedule(5, **args) == pytest.approx(1e-7 + (1e-3 - 1e-7) / 2)
    assert warmup_cosine_schedule(10, **args) == pytest.approx(1e-3)
    assert warmup_cosine_schedule(60, **args) == pytest.approx(3e-7 + (1e-3 - 3e-7) / 2)
    assert warmup_cosine_schedule(110, **args) == pytest.approx(3e-7)
    assert warmup_cosine_schedule(500, **args) == pytest.approx(3e-7)


def test_a_run_that_ends_inside_its_warm_up_says_so(capsys):
    """Issue 39: `train --preset tg-ptb --max-steps 50` (6,000 warm-up steps) learned nothing, silently: the learning rate
    never rose above 4.7e-6 of its 1e-3 peak."""
    from hf_slm.families import preset
    from hf_slm.training.train import schedule_optimizer, short_warmup_warning

    schedule = dict(preset("tg-ptb")[1]["training"], max_steps=50, embedding_learning_rate_multiplier=1.0)
    warning = short_warmup_warning(schedule)
    peak = schedule["learning_rate"]
    reached = warmup_cosine_schedule(50, schedule["warmup_steps"], 50, schedule["initial_learning_rate"], peak,
                                     schedule["final_learning_rate"])
    assert reached < peak / 50 and f"rises to {reached:.3g} at most" in warning and "--warmup-steps 5" in warning
    import torch

    schedule_optimizer(torch.nn.Linear(2, 2), schedule)
    assert "end inside the warm-up of 6000 steps" in capsys.readouterr().err
    assert short_warmup_warning(dict(schedule, max_steps=6001)) is None


@pytest.fixture(scope="module")
def small_trees(tmp_path_factory):
    directory = tmp_path_factory.mktemp("trees")
    lines = (SAMPLE / "train.txt").read_text().splitlines()
    (directory / "train.txt").write_text("\n".join(lines[:160]) + "\n")
    (directory / "dev.txt").write_text("\n".join(lines[160:200]) + "\n")
    return directory


def setup_for(directory, output, **changes):
    options = dict(
        preset="tg-ptb", train=[directory / "train.txt"], eval=[directory / "dev.txt"], output=str(output),
        vocab_size=300, model_overrides=TINY, max_steps=40, batch_size=8, learning_rate=3e-3, warmup_steps=5,
        eval_steps=1000, save_steps=1000, logging_steps=5, disable_progress=True, label_files=[],
    )
    options.update(changes)
    return TrainingSetup(**options)


def test_short_training_run_lowers_the_loss(small_trees, tmp_path):
    trainer, tokenizer = train(setup_for(small_trees, tmp_path / "run"), log=lambda *_: None)
    record = json.loads((tmp_path / "run" / "training_setup.json").read_text())
    assert not list((tmp_path / "run").glob("*.bin")), "the final model folder holds no pickles"
    assert record["preset"] == "tg-ptb" and record["grammar"] == "tg"
    assert record["steps_done"] == trainer.state.global_step > 0
    assert record["train_examples"] == 160 and record["eval_examples"] == 40
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 8
    assert losses[-1] < losses[0] - 1.0
    assert trainer.evaluate()["eval_loss"] < math.log(len(tokenizer)) - 1.0  # well below a uniform guess
    assert (tmp_path / "run" / "model.safetensors").exists() and (tmp_path / "run" / "tokenizer_config.json").exists()


def test_resuming_reproduces_the_next_steps_exactly(small_trees, tmp_path):
    quiet = dict(max_steps=8, save_steps=4, logging_steps=1, learning_rate=1e-3, warmup_steps=2)
    first, _ = train(setup_for(small_trees, tmp_path / "a", **quiet), log=lambda *_: None)
    full = {e["step"]: e["loss"] for e in first.state.log_history if "loss" in e}
    # A second run that starts from the step-4 checkpoint of the first, with the first run's tokenizer.
    (tmp_path / "b").mkdir()
    shutil.copytree(tmp_path / "a" / "checkpoint-4", tmp_path / "b" / "checkpoint-4")
    second, _ = train(setup_for(small_trees, tmp_path / "b", tokenizer=str(tmp_path / "a"), resume=True, **quiet),
                      log=lambda *_: None)
    # The history up to step 4 comes from the checkpoint; steps 5-8 were computed by the second run.
    resumed = {e["step"]: e["loss"] for e in second.state.log_history if "loss" in e and e["step"] > 4}
    assert sorted(resumed) == [5, 6, 7, 8]
    for step in resumed:
        assert resumed[step] == full[step], (step, resumed[step], full[step])


def test_training_errors(small_trees, tmp_path):
    with pytest.raises(ValueError, match="unknown preset 'tg-xl'"):
        train(setup_for(small_trees, tmp_path / "x", preset="tg-xl"), log=lambda *_: None)
    with pytest.raises(ValueError, match="does not exist"):
        train(setup_for(small_trees, tmp_path / "x", train=[tmp_path / "nope.txt"]), log=lambda *_: None)
    with pytest.raises(ValueError, match="tree 0 expands to .* max_sequence_length 20"):
        train(setup_for(small_trees, tmp_path / "x", model_overrides=dict(TINY, max_sequence_length=20)), log=lambda *_: None)


# ---- training on a dataset made by `hf-slm data prepare` ---------------------------------------------------
DATA_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "data"


def _quiet(*_):
    pass


@pytest.fixture(scope="module")
def prepared_wsj(tmp_path_factory):
    """The WSJ fixture prepared with a tokenizer trained on it: train 4 trees, validation 1, test 2."""
    from hf_slm import SyntacticTokenizer
    from hf_slm.data.prepare import prepare_dataset

    directory = tmp_path_factory.mktemp("prepared_wsj")
    SyntacticTokenizer.train(sorted((DATA_FIXTURES / "wsj").glob("*/*.mrg")), vocab_size=60).save_pretrained(
        directory / "source_tokenizer")
    prepare_dataset("ptb", DATA_FIXTURES / "wsj", directory / "source_tokenizer", directory / "prepared",
                    cache_dir=str(directory / "cache"), log=_quiet)
    return directory / "prepared"


def prepared_setup(train_paths, output, **changes):
    options = dict(preset="tg-ptb", train=[str(path) for path in train_paths], output=str(output),
                   model_overrides=dict(TINY), max_steps=2, batch_size=2, learning_rate=1e-3, warmup_steps=1,
                   eval_steps=1000, save_steps=1000, logging_steps=1, disable_progress=True)
    options.update(changes)
    return TrainingSetup(**options)


def test_training_on_a_prepared_dataset(prepared_wsj, tmp_path):
    from datasets import load_from_disk

    from hf_slm import SyntacticTokenizer

    trainer, tokenizer = train(prepared_setup([prepared_wsj], tmp_path / "run"), log=lambda *_: None)
    saved = load_from_disk(str(prepared_wsj))
    assert tokenizer.get_vocab() == SyntacticTokenizer.from_pretrained(prepared_wsj / "tokenizer").get_vocab()
    assert trainer.train_dataset["input_ids"] == saved["train"]["input_ids"]  # the prepared ids, as they are
    assert trainer.eval_dataset["input_ids"] == saved["validation"]["input_ids"]
    record = json.loads((tmp_path / "run" / "training_setup.json").read_text())
    assert not list((tmp_path / "run").glob("*.bin")), "the final model folder holds no pickles"
    assert record["train_examples"] == 4 and record["eval_examples"] == 1 and record["steps_done"] == 2
    assert record["prepared_dataset"]["path"] == str(prepared_wsj)
    assert record["prepared_dataset"]["loader"] == "ptb" and record["prepared_dataset"]["eval"].endswith(":validation")
    # Raw tree files as --eval are normalized with the prepared tokenizer's options.
    trainer, _ = train(prepared_setup([prepared_wsj], tmp_path / "run2", eval=[DATA_FIXTURES / "ptb_lines" / "dev.txt"]),
                       log=lambda *_: None)
    assert trainer.eval_dataset["input_ids"] == [tokenizer("(S (NP (NNS Prices)) (VP (VBD fell)) (. .))")["input_ids"]]


def test_prepared_dataset_errors(prepared_wsj, tmp_path):
    from hf_slm import SyntacticTokenizer

    other = tmp_path / "other_tokenizer"
    SyntacticTokenizer.train(DATA_FIXTURES / "ptb_lines" / "train.txt", vocab_size=20).save_pretrained(other)
    with pytest.raises(ValueError, match="does not match the one the prepared ids of .* were made with"):
        train(prepared_setup([prepared_wsj], tmp_path / "x", tokenizer=str(other)), log=lambda *_: None)
    with pytest.raises(ValueError, match="normalization options .* apply to tree files"):
        train(prepared_setup([prepared_wsj], tmp_path / "x", normalize_options={"strip_function_tags": True}),
              log=lambda *_: None)
    with pytest.raises(ValueError, match="expected either tree files or one prepared dataset folder"):
        train(prepared_setup([prepared_wsj, DATA_FIXTURES / "ptb_lines" / "train.txt"], tmp_path / "x"),
              log=lambda *_: None)
    from datasets import load_from_disk

    first = load_from_disk(str(prepared_wsj))["train"][0]
    # TG doubles every closing nonterminal: one per constituent, i.e. per "(" of the tree.
    expanded = len(first["input_ids"]) + first["tree"].count("(")
    short = dict(TINY, max_sequence_length=expanded - 1)
    with pytest.raises(ValueError, match=rf"split 'train': example 0 \(02/wsj_0201\.mrg, tree 0\) expands to "
                                         rf"{expanded} positions .* max_sequence_length {expanded - 1}"):
        train(prepared_setup([prepared_wsj], tmp_path / "x", model_overrides=short), log=lambda *_: None)


def test_prepared_dataset_without_trees_is_refused(tmp_path):
    from hf_slm import SyntacticWordTokenizer
    from hf_slm.data.prepare import prepare_dataset

    SyntacticWordTokenizer.train(DATA_FIXTURES / "ptb_lines" / "train.txt", min_count=1).save_pretrained(tmp_path / "tok")
    prepare_dataset("conllu", DATA_FIXTURES / "conllu", tmp_path / "tok", tmp_path / "conllu",
                    cache_dir=str(tmp_path / "cache"), log=_quiet)
    with pytest.raises(ValueError, match="made by the 'conllu' loader, which has no trees"):
        train(prepared_setup([tmp_path / "conllu"], tmp_path / "x"), log=lambda *_: None)


def test_training_on_prepared_documents(tmp_path):
    from hf_slm import SyntacticWordTokenizer
    from hf_slm.data.prepare import prepare_dataset

    SyntacticWordTokenizer.train(sorted((DATA_FIXTURES / "bllip").glob("*.txt")), min_count=1).save_pretrained(
        tmp_path / "tok")
    prepare_dataset("bllip", DATA_FIXTURES / "bllip", tmp_path / "tok", tmp_path / "documents", document_level=True,
                    cache_dir=str(tmp_path / "cache"), log=_quiet)
    # --segment-length 0: whole documents, one sequence each
    trainer, _ = train(prepared_setup([tmp_path / "documents"], tmp_path / "run", segment_length=0),
                       log=lambda *_: None)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["document_level"] is True and config.get("segment_length") is None
    assert trainer.state.global_step == 2 and len(trainer.train_dataset) == 3
    record = json.loads((tmp_path / "run" / "training_setup.json").read_text())
    assert not list((tmp_path / "run").glob("*.bin")), "the final model folder holds no pickles"
    assert record["prepared_dataset"]["document_level"] is True and record["segments"] is None
    # By default documents train with the preset's segment length L and memory M (Figure 9: 192 and 192 for tg-ptb)
    train(prepared_setup([tmp_path / "documents"], tmp_path / "segments"), log=lambda *_: None)
    config = json.loads((tmp_path / "segments" / "config.json").read_text())
    assert (config["segment_length"], config["memory_length"]) == (192, 192)


# ---- the token embedding's learning rate, DTG presets and training DTG on prepared CoNLL-U ---------------------


def _tiny_model(grammar="tg"):
    from hf_slm.families.action_vocab import ActionVocabulary
    from hf_slm.families import config_for_grammar
    from hf_slm.families import causal_lm_for_config

    vocab = ActionVocabulary.from_action_sequences([["(S", "a", "b", "S)"]])
    config = config_for_grammar(grammar, vocab_size=len(vocab.tokens), hidden_size=16, num_hidden_layers=1,
                                num_attention_heads=2, intermediate_size=32, **vocab.layout.to_dict())
    return causal_lm_for_config(config)


def test_the_token_embedding_gets_its_own_learning_rate_and_the_schedule_scales_both():
    from hf_slm.training.train import make_optimizer

    model = _tiny_model()
    embedding = model.get_input_embeddings().weight
    assert model.get_output_embeddings().weight is embedding  # tied: the output layer shares the multiplier
    schedule = dict(warmup_steps=10, total_steps=110, initial=1e-7, peak=1e-3, final=3e-7)
    optimizer, scheduler = make_optimizer(model, 1e-3, 10, 110, 1e-7, 3e-7, embedding_learning_rate_multiplier=2.0)
    others, embeddings = optimizer.param_groups
    assert len(embeddings["params"]) == 1 and embeddings["params"][0] is embedding
    assert not any(parameter is embedding for parameter in others["params"])
    assert len(others["params"]) + 1 == len(list(model.parameters()))  # every parameter, once
    for step in range(61):
        if step in (0, 5, 10, 60):
            expected = warmup_cosine_schedule(step, **schedule)
            assert others["lr"] == pytest.approx(expected) and embeddings["lr"] == pytest.approx(2 * expected), step
        optimizer.step()
        scheduler.step()
    # Multiplier 1: one group, as TG always had (its checkpoints' optimizer states resume unchanged).
    optimizer, scheduler = make_optimizer(model, 1e-3, 10, 110, 1e-7, 3e-7)
    assert len(optimizer.param_groups) == 1 and optimizer.param_groups[0]["lr"] == pytest.approx(1e-7)
    with pytest.raises(ValueError, match="expected a positive factor"):
        make_optimizer(model, 1e-3, 10, 110, 1e-7, 3e-7, embedding_learning_rate_multiplier=0)


def test_dependency_presets_follow_paper_002():
    import torch

    from hf_slm.families import preset_config, presets
    from hf_slm.families import causal_lm_for_config

    def parameters(name):
        with torch.device("meta"):
            return sum(p.numel() for p in causal_lm_for_config(preset_config(name)).parameters())

    # "16-layer models with 252M parameters" (section 4): TG's BLLIP setting, whose count the reference gives.
    assert parameters("dtg-bllip") == parameters("txl-trans-bllip") == parameters("tg-bllip") == 251_887_616
    assert parameters("dtg-ptb") == parameters("tg-ptb")
    assert parameters("dtg-tiny") < 2_000_000
    for name, preset in presets().items():
        multiplier = preset["training"].get("embedding_learning_rate_multiplier", 1.0)
        dependency = name.startswith(("dtg-", "txl-trans-"))
        assert multiplier == (2.0 if dependency else 1.0), name
        if dependency:  # a twin differs from its DTG preset in the grammar only
            twin = presets()[name.replace("txl-trans-", "dtg-")]
            assert preset["training"] == twin["training"]
            assert {**preset["model"], "grammar": "dtg"} == twin["model"]
    assert preset_config("dtg-tiny").attention_dropout == 0.0  # the CPU-fast attention kernel


@pytest.fixture(scope="module")
def conllu_treebank(tmp_path_factory):
    from conftest import write_conllu_treebank

    return write_conllu_treebank(tmp_path_factory.mktemp("treebank"))


def _prepared_conllu(treebank, directory, grammar):
    from hf_slm.data.prepare import prepare_dataset

    prepare_dataset("conllu", treebank, None, directory, grammar=grammar, vocab_size=40, non_projective="lift",
                    cache_dir=str(directory.parent / "cache"), log=_quiet)
    return directory


TINY_SET = [item for key, value in dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                        num_attention_heads=2).items() for item in ("--set", f"{key}={value}")]


def test_a_tiny_dtg_trains_on_prepared_conllu_through_the_cli_and_loads_with_the_auto_classes(conllu_treebank, tmp_path,
                                                                                              capsys):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import hf_slm
    from hf_slm.cli import main

    prepared = _prepared_conllu(conllu_treebank, tmp_path / "prepared", "dtg")
    run = tmp_path / "run"
    assert main(["train", "--preset", "dtg-tiny", "--train", str(prepared), "--output", str(run), "--max-steps", "3",
                 "--batch-size", "2", "--warmup-steps", "1", *TINY_SET]) == 0, capsys.readouterr().err
    record = json.loads((run / "training_setup.json").read_text())
    assert record["grammar"] == "dtg" and record["steps_done"] == 3 and record["train_examples"] == 4
    assert record["eval_examples"] == 1 and record["prepared_dataset"]["loader"] == "conllu"
    assert record["embedding_learning_rate_multiplier"] == 2.0
    # The optimizer Trainer ran: the token embedding's group at twice the others' learning rate.
    groups = torch.load(run / "checkpoint-3" / "optimizer.pt", weights_only=True)["param_groups"]
    assert len(groups) == 2 and groups[1]["lr"] == pytest.approx(2 * groups[0]["lr"]) and groups[0]["lr"] > 0

    model = AutoModelForCausalLM.from_pretrained(run).eval()
    tokenizer = AutoTokenizer.from_pretrained(run)
    assert type(model).__name__ == "DependencyTransformerGrammarForCausalLM" and model.config.grammar == "dtg"
    assert type(tokenizer).__name__ == "DependencyTokenizer" and tokenizer.transition_system == "arc_standard"
    assert model.config.root_token_id == tokenizer.action_layout["root_token_id"]
    tree = "Sam/2 likes/0 the/4 cat/2"
    ids = torch.tensor([tokenizer(tree)["input_ids"]])
    with torch.no_grad():
        loss = model(input_ids=ids, labels=ids).loss
    assert torch.isfinite(loss) and 0 < float(loss) < 2 * math.log(len(tokenizer))
    scored = hf_slm.score(model, tokenizer, ["Sam likes the cat"], beam_size=10, word_beam_size=3, progress=False)[0]
    assert scored["words"] == ["Sam", "likes", "the", "cat"] and len(scored["surprisals"]) == 4
    assert -math.inf < scored["log_prob"] < 0
    assert [item.rpartition("/")[0] for item in scored["tree"].split()] == scored["words"]


def test_dtg_eager_swift_and_txl_trans_train_with_a_preset(conllu_treebank, tmp_path):
    swift = _prepared_conllu(conllu_treebank, tmp_path / "swift", "dtg_swift")
    overrides = dict(TINY, grammar="dtg_swift")
    trainer, tokenizer = train(prepared_setup([swift], tmp_path / "swift_run", preset="dtg-tiny",
                                              model_overrides=overrides), log=_quiet)
    config = json.loads((tmp_path / "swift_run" / "config.json").read_text())
    assert config["grammar"] == "dtg_swift"
    assert config["left_arc_stop"] - config["left_arc_start"] == tokenizer.max_k == 3
    assert json.loads((tmp_path / "swift_run" / "training_setup.json").read_text())["grammar"] == "dtg_swift"
    assert trainer.state.global_step == 2
    # TXL (trans) reads DTG's arc-standard sequences: the same prepared data.
    standard = _prepared_conllu(conllu_treebank, tmp_path / "standard", "dtg")
    train(prepared_setup([standard], tmp_path / "txl_run", preset="txl-trans-tiny"), log=_quiet)
    assert json.loads((tmp_path / "txl_run" / "config.json").read_text())["model_type"] == "dependency_transformer_xl"


def test_dependency_training_errors(conllu_treebank, prepared_wsj, tmp_path):
    eager = _prepared_conllu(conllu_treebank, tmp_path / "eager", "dtg_eager")

    def eager_setup(**fields):
        return prepared_setup([eager], tmp_path / "x", preset="dtg-tiny",
                              model_overrides=dict(TINY, grammar="dtg_eager", **fields))

    with pytest.raises(ValueError, match=r"linearizes 'arc_eager' \(read by dtg_eager: e.g. --set grammar=dtg_eager\); "
                                         "the dtg grammar needs 'arc_standard'"):
        train(prepared_setup([eager], tmp_path / "x", preset="dtg-tiny"), log=_quiet)
    with pytest.raises(ValueError, match="the dtg grammar trains on dependency trees prepared by"):
        train(prepared_setup([DATA_FIXTURES / "ptb_lines" / "train.txt"], tmp_path / "x", preset="dtg-tiny"),
              log=_quiet)
    with pytest.raises(ValueError, match="dependency models evaluate on prepared data"):
        setup = eager_setup()
        setup.eval = [DATA_FIXTURES / "ptb_lines" / "dev.txt"]
        train(setup, log=_quiet)
    with pytest.raises(ValueError, match="the tokenizer's ids are those of dependency_variant 'paper'"):
        train(eager_setup(dependency_variant="reference"), log=_quiet)
    with pytest.raises(ValueError, match="unknown grammar 'dtg_hybrid'"):
        train(prepared_setup([eager], tmp_path / "x", preset="dtg-tiny", model_overrides=dict(grammar="dtg_hybrid")),
              log=_quiet)
    with pytest.raises(ValueError, match="linearizes 'top_down'.*the dtg grammar needs 'arc_standard'"):
        train(prepared_setup([prepared_wsj], tmp_path / "x", preset="dtg-tiny"), log=_quiet)
    # Lengths are checked before training with each arc counted twice (its COMPOSE and STACK copies).
    from datasets import load_from_disk

    from hf_slm.modeling.dependency_grammars import DependencyLayout
    from hf_slm.families import get_grammar
    from hf_slm.tokenization.tokenization_dependency import DependencyTokenizer

    layout = DependencyTokenizer.from_pretrained(eager / "tokenizer").action_layout
    rules = get_grammar("dtg_eager", DependencyLayout(**layout))
    lengths = [len(rules.positions(ids)) for ids in load_from_disk(str(eager))["train"]["input_ids"]]
    longest = max(lengths)
    with pytest.raises(ValueError, match=rf"example {lengths.index(longest)} .* expands to {longest} positions under "
                                         rf"the dtg_eager grammar, more than .* max_sequence_length {longest - 1}"):
        train(eager_setup(max_sequence_length=longest - 1), log=_quiet)
    assert not (tmp_path / "x").exists()


def _one_variant_per_composition():
    """The first paper 003 model of each composition kind that exists (In; Ex once it lands), from
    COMPOSITIONAL_MODEL_VARIANTS: the training path has no per-variant code, so one of each stands for the rest."""
    from hf_slm.modeling.compositional_grammars import COMPOSITIONAL_GRAMMARS
    from hf_slm.modeling.compositional_config import COMPOSITIONAL_MODEL_VARIANTS

    first = {}
    for name in COMPOSITIONAL_MODEL_VARIANTS:
        first.setdefault(COMPOSITIONAL_GRAMMARS[name].internal, name)
    return list(first.values())


@pytest.mark.parametrize("grammar", _one_variant_per_composition())
def test_a_compositional_model_trains_on_tree_files_through_the_cli_then_parses_scores_and_evaluates(
        grammar, small_trees, tmp_path, capsys, one_thread):
    from transformers import AutoTokenizer

    from hf_slm.cli import main
    from hf_slm.modeling.compositional_grammars import COMPOSITIONAL_GRAMMARS

    run = tmp_path / "run"
    assert main(["train", "--preset", f"{grammar}-tiny", "--train", str(small_trees / "train.txt"), "--eval",
                 str(small_trees / "dev.txt"), "--output", str(run), "--max-steps", "3", "--batch-size", "4",
                 "--warmup-steps", "1", "--vocab-size", "300", "--eval-steps", "3", *TINY_SET]) == 0, \
        capsys.readouterr().err
    capsys.readouterr()
    record = json.loads((run / "training_setup.json").read_text())
    assert record["grammar"] == grammar and record["steps_done"] == 3 and record["eval_examples"] == 40
    assert math.isfinite(record["final_eval_loss"])
    # The tokenizer the preset's grammar reads: paper 003's, over unlabeled trees in the grammar's linearization.
    tokenizer = AutoTokenizer.from_pretrained(run)
    assert type(tokenizer).__name__ == "CompositionalTokenizer"
    assert tokenizer.linearization == COMPOSITIONAL_GRAMMARS[grammar].linearization
    assert tokenizer.action_layout["open_nt_stop"] - tokenizer.action_layout["open_nt_start"] == 1

    sentence = "the year is over ."
    beam = ["--beam-size", "10", "--word-beam-size", "3"]
    assert main(["parse", "--model", str(run), *beam, sentence]) == 0
    [parsed] = capsys.readouterr().out.splitlines()
    # An unlabeled tree over exactly the sentence's words.
    assert parsed.startswith("( ") and [t for t in parsed.split() if t not in "()"] == sentence.split()
    assert main(["score", "--model", str(run), *beam, "--constraints", "paper003-sg", sentence]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert len(scored["surprisals"]) == 5 and -math.inf < scored["log_prob"] < 0
    assert math.fsum(scored["surprisals"]) + scored["end_surprisal"] == pytest.approx(-scored["log_prob"], abs=1e-6)

    results = ["--output", str(tmp_path / "results"), *beam, "--constraints", "paper003-sg"]
    assert main(["eval", "ppl", "--model", str(run), "--data", str(small_trees / "dev.txt"), "--limit", "3",
                 *results]) == 0
    ppl = json.loads((tmp_path / "results" / "ppl-dev-limit3.json").read_text())["metrics"]
    assert ppl["sentences"] == 3 and ppl["is_upper_bound"] is True and ppl["perplexity"] > 1
    suites = Path(__file__).parent / "fixtures" / "syntaxgym"
    assert main(["eval", "sg", "--model", str(run), "--suites", str(suites), "--limit", "1", *results]) == 0
    [sg_path] = (tmp_path / "results").glob("sg-*.json")
    assert 0 <= json.loads(sg_path.read_text())["metrics"]["sg_score"] <= 1
    capsys.readouterr()

    # The card of what `train` wrote: the variant's card, with its training record.
    assert main(["card", str(run)]) == 0
    card = (run / "README.md").read_text()
    assert f"(`{grammar}`) takes:" in card and f"`{grammar}-tiny`" in card


def test_a_compositional_model_trains_on_byte_level_bpe_pieces(small_trees, tmp_path):
    """Paper 003's models read GPT-2's byte-level BPE: `--pieces byte_bpe` trains the new tokenizer that way, and
    the saved model folder reads it back; --pieces with a given tokenizer is refused (it would do nothing)."""
    from transformers import AutoTokenizer

    setup = setup_for(small_trees, tmp_path / "bpe", preset="nb-dn-in-m-tiny", eval=[], vocab_size=400,
                      model_overrides={}, max_steps=2, batch_size=2, pieces="byte_bpe")
    trainer, tokenizer = train(setup, log=lambda *_: None)
    assert tokenizer.pieces == "byte_bpe" and (tmp_path / "bpe" / "byte_bpe.json").is_file()
    assert all(math.isfinite(e["loss"]) for e in trainer.state.log_history if "loss" in e)
    loaded = AutoTokenizer.from_pretrained(tmp_path / "bpe", trust_remote_code=True)
    assert loaded.pieces == "byte_bpe" and loaded("( ( the bird ) ( sings loudly ) )")["input_ids"] == \
        tokenizer("( ( the bird ) ( sings loudly ) )")["input_ids"]
    from hf_slm.publishing.model_card import build_model_card

    card = build_model_card(tmp_path / "bpe").text  # the card tells which vocabulary the model reads
    assert "`CompositionalTokenizer`: a GPT-2-style byte-level BPE trained on the words" in card
    assert "SentencePiece" not in card and "Its byte-level pieces spell any text." in card and "<unk>" not in card
    with pytest.raises(ValueError, match="--pieces byte_bpe: it chooses the piece model of a tokenizer trained here"):
        train(setup_for(small_trees, tmp_path / "x", tokenizer=str(tmp_path / "bpe"), pieces="byte_bpe"),
              log=lambda *_: None)


def test_reloading_the_best_checkpoint_reports_no_missing_keys(small_trees, tmp_path):
    """Issue 39: the quickstart printed "There were missing keys in the checkpoint model loaded: ['lm_head.weight']"
    when Trainer reloaded its best checkpoint: the tied output layer is the embedding, saved once, and tied again."""
    from conftest import transformers_messages

    with transformers_messages() as messages:
        trainer, _ = train(setup_for(small_trees, tmp_path / "run", max_steps=4, eval_steps=2, save_steps=2),
                           log=lambda *_: None)
    assert trainer.state.best_model_checkpoint is not None  # the best checkpoint was reloaded
    # by its name once whole (hf_slm/checkpoints/whole.py), as its own trainer_state.json says
    assert Path(trainer.state.best_model_checkpoint).parent == tmp_path / "run"
    best = Path(trainer.state.best_model_checkpoint)
    assert json.loads((best / "trainer_state.json").read_text())["best_model_checkpoint"] == str(best)
    assert not [message for message in messages if "missing keys" in message]
    model = trainer.model
    assert model.lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()  # still tied
