"""Low precision (issue 18, part 4): the models under torch.autocast (bf16 on CPU; bf16 and fp16 on CUDA) against
float32, for a TG (relative attention, the factorized extra query/key blocks), a DTG and a compositional Ex variant.

- logits within a stated tolerance of float32 (LOGIT_TOLERANCE), and finite everywhere;
- masks stay exact: changing the words at positions a query does not attend (later positions) leaves its logits
  bit-for-bit unchanged under autocast, which holds only if masked positions get exactly zero attention;
- a beam-search parse under autocast finds the tree float32 finds.
Each test runs on the CPU and, where there is one, on CUDA; the CUDA cases skip cleanly without it.
"""

import math
from pathlib import Path

import pytest
import torch

from conftest import save_tiny_checkpoint

import hf_slm

SAMPLE = Path(__file__).resolve().parents[1] / "hf_slm" / "sample_data" / "gum" / "train.txt"
# |autocast - float32| <= atol + rtol |float32| per logit. bf16 keeps 8 bits of mantissa (a relative step of
# 2^-8 = 0.4%) and every layer rounds again; tiny random models have logits of order 1.
LOGIT_TOLERANCE = {torch.bfloat16: dict(atol=0.05, rtol=0.05), torch.float16: dict(atol=0.01, rtol=0.01)}
PRECISIONS = [
    pytest.param("cpu", torch.bfloat16, id="cpu-bf16"),
    pytest.param("cuda", torch.bfloat16, id="cuda-bf16",
                 marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")),
    pytest.param("cuda", torch.float16, id="cuda-fp16",
                 marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")),
]
FAMILIES = ["tg", "dtg", "bi-up-ex-m"]

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.one_thread


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    """{family: (model, tokenizer, trees)}: tiny random models with a few of their own trees."""
    from helpers.compositional_models import LABELED
    from helpers.compositional_models import tiny as tiny_compositional
    from helpers.dependency_models import TREES as DEPENDENCY_TREES
    from helpers.dependency_models import tiny as tiny_dependency

    lines = SAMPLE.read_text().splitlines()[:20]
    # 4 heads of 8 dimensions: the TG attention takes the factorized path (extra blocks) on the CPU.
    _, tg, tg_tokenizer = save_tiny_checkpoint(tmp_path_factory.mktemp("tg"), lines, vocab_size=80, hidden_size=32,
                                               num_attention_heads=4, intermediate_size=64)
    dtg, dtg_tokenizer = tiny_dependency("dtg")
    compositional, compositional_tokenizer = tiny_compositional("bi-up-ex-m")
    return {"tg": (tg, tg_tokenizer, lines[:3]),
            "dtg": (dtg, dtg_tokenizer, DEPENDENCY_TREES[:3]),
            "bi-up-ex-m": (compositional, compositional_tokenizer,
                           [compositional_tokenizer.unlabel(tree) for tree in LABELED])}


def on_device(family, tiny_models, device):
    model, tokenizer, trees = tiny_models[family]
    return model.to(device).eval(), tokenizer, trees


def logits(model, batch, device, dtype=None):
    batch = {name: value.to(device) if torch.is_tensor(value) else value for name, value in batch.items()}
    with torch.no_grad(), torch.autocast(device, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        return model(**batch).logits.float()


@pytest.mark.parametrize("device,dtype", PRECISIONS)
@pytest.mark.parametrize("family", FAMILIES)
def test_logits_under_autocast_are_those_of_float32_within_the_tolerance(tiny_models, family, device, dtype):
    model, tokenizer, trees = on_device(family, tiny_models, device)
    batch = tokenizer(trees, padding=True, return_tensors="pt")
    exact, low = logits(model, batch, device), logits(model, batch, device, dtype)
    assert torch.isfinite(low).all(), "autocast gave inf or NaN logits (padding rows included)"
    real = batch["attention_mask"].bool().to(device)
    torch.testing.assert_close(low[real], exact[real], **LOGIT_TOLERANCE[dtype])
    # The tolerance is not met trivially: autocast did compute in low precision.
    assert not torch.equal(low, exact)


def other_words(ids, layout, after):
    """`ids` with every word piece after position `after` replaced by another word piece of the same kind (a word's
    first piece by another first piece, a continuation by a continuation): the actions, and so every mask and
    relative position, stay those of `ids`."""
    structural = min(value for name, value in layout.items()
                     if name.endswith("_start") or name in ("root_token_id", "pop_token_id"))
    continuations = set(layout.get("continuation_ids", ()))
    specials = {layout["pad_token_id"], layout["bos_token_id"], layout["eos_token_id"], layout.get("unk_token_id")}
    words = [i for i in range(structural) if i not in specials]
    same_kind = {False: [i for i in words if i not in continuations], True: [i for i in words if i in continuations]}
    changed = list(ids)
    for position in range(after + 1, len(ids)):
        if ids[position] in words:
            kind = same_kind[ids[position] in continuations]
            changed[position] = kind[(kind.index(ids[position]) + 1) % len(kind)]
    return changed


@pytest.mark.parametrize("device,dtype", PRECISIONS)
@pytest.mark.parametrize("family", FAMILIES)
def test_masked_positions_get_exactly_no_attention_under_autocast(tiny_models, family, device, dtype):
    model, tokenizer, trees = on_device(family, tiny_models, device)
    ids = tokenizer(trees[0])["input_ids"]
    cut = len(ids) // 2
    changed = other_words(ids, tokenizer.action_layout, cut)
    assert changed[cut + 1 :] != ids[cut + 1 :], "the sequence has no words after the cut to change"
    first, second = (logits(model, {"input_ids": torch.tensor([sequence])}, device, dtype)
                     for sequence in (ids, changed))
    # The positions up to the cut attend none of the changed ones: their logits are bit-for-bit the same.
    assert torch.equal(first[0, : cut + 1], second[0, : cut + 1])
    assert not torch.equal(first[0, cut + 1 :], second[0, cut + 1 :]), "the changed words were read by no one"


@pytest.mark.parametrize("device,dtype", PRECISIONS)
@pytest.mark.parametrize("family", FAMILIES)
def test_a_beam_search_parse_under_autocast_finds_the_float32_tree(tiny_models, family, device, dtype):
    model, tokenizer, trees = on_device(family, tiny_models, device)
    sentences = [sentence_words(family, tree) for tree in trees[:2]]
    search = dict(beam_size=20, word_beam_size=5, progress=False)
    exact = hf_slm.score(model, tokenizer, sentences, **search)
    with torch.autocast(device, dtype=dtype):
        low = hf_slm.score(model, tokenizer, sentences, **search)
    assert [result["tree"] for result in low] == [result["tree"] for result in exact]
    for found, expected in zip(low, exact):
        assert found["log_prob"] == pytest.approx(expected["log_prob"], abs=0.1 * len(expected["words"]))


def sentence_words(family, tree):
    if family == "dtg":  # "word/head ..." strings
        return [token.rsplit("/", 1)[0] for token in tree.split()]
    if family == "tg":
        return hf_slm.parse_tree(tree).leaves()
    return [token for token in tree.split() if token not in ("(", ")")]  # an unlabeled tree: "( ( the bird ) ... )"


# ---- training under autocast (hf-slm train --bf16) -----------------------------------------------------------
def train_tiny(output, **options):
    from hf_slm.training.train import TrainingSetup, train

    trees = Path(output).parent / "trees.txt"  # 40 sample trees
    trees.write_text("\n".join(SAMPLE.read_text().splitlines()[:40]) + "\n")
    setup = TrainingSetup(preset="tg-ptb", train=[str(trees)], output=str(output), vocab_size=120, max_steps=2,
                          batch_size=4, logging_steps=1, save_steps=100, warmup_steps=1, learning_rate=1e-3,
                          disable_progress=True,
                          model_overrides=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                               num_attention_heads=4, embedding_dropout=0, core_dropout=0,
                                               final_dropout=0), **options)
    trainer, _ = train(setup, log=lambda *_: None)
    return trainer


def logged_losses(trainer):
    return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]


@pytest.fixture(scope="module")
def float32_run(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("float32") / "run")


def test_training_with_bf16_takes_the_steps_of_float32_within_the_tolerance(float32_run, tmp_path):
    import json

    float32_losses, losses = logged_losses(float32_run), logged_losses(train_tiny(tmp_path / "bf16",
                                                                                  mixed_precision="bf16"))
    assert len(losses) == len(float32_losses) == 2 and all(map(math.isfinite, losses))
    # The same weights and batches: the losses differ by bf16's rounding only (the first step's, before any update,
    # is the float32 loss computed in bf16), and they do differ: the forward ran under autocast.
    assert losses == pytest.approx(float32_losses, rel=0.02)
    assert losses[0] != float32_losses[0]
    record = json.loads((tmp_path / "bf16" / "training_setup.json").read_text())
    assert record["mixed_precision"] == "bf16" and record["steps_done"] == 2


def test_segment_training_with_bf16_runs_under_autocast(tmp_path):
    # SegmentTrainer calls the model outside accelerate's prepared forward, where --bf16's autocast is applied.
    segments = dict(segment_length=32, memory_length=16)
    exact = logged_losses(train_tiny(tmp_path / "float32", **segments))
    low = logged_losses(train_tiny(tmp_path / "bf16", mixed_precision="bf16", **segments))
    assert len(low) == 2 and low == pytest.approx(exact, rel=0.02)
    assert low != exact, "--bf16 changed nothing: the segment steps did not run under autocast"


def test_gradient_accumulation_reads_k_batches_per_step(float32_run, tmp_path):
    accumulated = train_tiny(tmp_path / "accumulated", gradient_accumulation_steps=2)
    # 2 steps of 2 batches of 4 of the 40 trees: 16 trees, 0.4 epoch (without accumulation 8 trees, 0.2 epoch).
    assert float32_run.state.epoch == pytest.approx(0.2) and accumulated.state.epoch == pytest.approx(0.4)
    assert accumulated.state.global_step == 2 and len(logged_losses(accumulated)) == 2


def test_unknown_precisions_and_accumulations_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"mixed precision 'bf8': expected one of \['bf16', 'fp16'\]"):
        train_tiny(tmp_path / "bf8", mixed_precision="bf8")
    with pytest.raises(ValueError, match="--gradient-accumulation-steps 0: expected a positive number"):
        train_tiny(tmp_path / "zero", gradient_accumulation_steps=0)


# ---- hf-slm ... --autocast ------------------------------------------------------------------------------------
def test_the_cli_scores_under_autocast_with_the_float32_tree_and_keeps_the_journals_apart(tiny_models, tmp_path,
                                                                                          capsys):
    import json

    from hf_slm.cli import main

    model, tokenizer, trees = tiny_models["tg"]
    model.to("cpu").save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    sentence = " ".join(hf_slm.parse_tree(trees[0]).leaves())
    search = ["--beam-size", "20", "--word-beam-size", "5"]
    printed = {}
    for precision in ([], ["--autocast", "bf16"]):
        capsys.readouterr()
        assert main(["score", "--model", str(tmp_path / "model"), *search, *precision, sentence]) == 0
        printed[bool(precision)] = json.loads(capsys.readouterr().out)
    assert printed[True]["tree"] == printed[False]["tree"]
    assert printed[True]["log_prob"] == pytest.approx(printed[False]["log_prob"], abs=0.1 * len(sentence.split()))
    assert printed[True]["log_prob"] != printed[False]["log_prob"]  # computed in bf16

    # An evaluation journaled in float32 is not resumed (nor its results replaced) under autocast.
    (tmp_path / "gold.txt").write_text(trees[0] + "\n")
    ppl = ["eval", "ppl", "--model", str(tmp_path / "model"), "--data", str(tmp_path / "gold.txt"), *search]
    assert main(ppl) == 0
    capsys.readouterr()
    assert main([*ppl, "--autocast", "bf16"]) != 0
    refused = capsys.readouterr().err
    assert "autocast" in refused and "--overwrite" in refused, refused
