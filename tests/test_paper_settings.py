"""Presets are the papers' tables (issue 29): one test per paper compares every field of each of its presets with the
paper's table (hf_slm/families/*_paper.py, each value with its table or section), parameter counts included;
`hf-slm presets --paper N` shows them side by side and fails on an unexplained difference; training on documents
reads the preset's L, M and document batch; with evaluation data the best checkpoint is the final model."""

import json
from pathlib import Path

import pytest
import torch

from hf_slm.cli import main
from hf_slm.families import paper_table, preset, presets
from hf_slm.families.paper_settings import (
    compare_table,
    count_preset_parameters,
    differences_text,
)
from hf_slm.training.train import TrainingSetup, apply_document_settings, train

SAMPLE = Path(__file__).resolve().parents[1] / "hf_slm" / "sample_data" / "gum"


def _compare(paper):
    table, family_presets = paper_table(paper)
    rows = compare_table(table, family_presets, lambda name, vocab: count_preset_parameters(name, vocab, table))
    unexplained = [row for row in rows if row.status == "unexplained"]
    assert not unexplained, "\n".join(f"{row.preset} {row.field}: {row.ours} vs {row.paper}: {row.reason}"
                                      for row in unexplained)
    # every field of every paper preset is in the table (an absent one is unexplained above), and every preset of
    # the paper's families is either one of its settings or a CPU-sized one / another paper's setting named here
    return table, family_presets, {(row.preset, row.field): row for row in rows}


def _value(rows, preset, field):
    return rows[(preset, field)].ours


def test_paper_000_presets_are_figure_9():
    table, family_presets, rows = _compare("000")
    assert set(family_presets) - set(table.presets) == {"tg-tiny", "txl-cc-tiny", "txl-terminals-tiny"}  # CPU-sized
    # Figure 9: BLLIP sentences train 176 at a time, documents 64; L and M by column
    assert _value(rows, "tg-bllip", "training.batch_size") == 176
    assert _value(rows, "tg-bllip", "training.document_batch_size") == 64
    for name, length in (("tg-ptb", 192), ("txl-cc-ptb", 192), ("txl-terminals-ptb", 80), ("tg-bllip", 256)):
        assert _value(rows, name, "training.segment_length") == _value(rows, name, "training.memory_length") == length
    assert _value(rows, "txl-terminals-ptb", "model.vocab_size") == 23835
    assert _value(rows, "tg-ptb", "model.embedding_dropout") == 0.34
    # section 3: 12M and 252M parameters
    assert rows[("tg-ptb", "parameters")].status == "same" and rows[("tg-bllip", "parameters")].ours.startswith(
        "251,887,616")


def test_paper_001_presets_are_table_6_and_their_parameter_counts_table_2s():
    table, family_presets, rows = _compare("001")
    assert set(family_presets) - set(table.presets) == {"esom-tiny", "dsom-tiny"}
    assert (_value(rows, "dsom-bllip-sm", "model.semantic_size"), _value(rows, "dsom-bllip-sm", "model.syntactic_size"),
            _value(rows, "dsom-bllip-sm", "model.num_slots")) == (400, 100, 15)
    assert _value(rows, "esom-bllip-md-bpe", "model.embedding_dropout") == 0.0
    # Table 2: 17.7M and 16.3M with PTB's 23,815 words (they were both 13,637,417 with the config's default widths)
    assert rows[("esom-ptb", "parameters")].ours == "17,719,817 (17.7M)"
    assert rows[("dsom-ptb", "parameters")].ours == "16,279,817 (16.3M)"
    stored = count_preset_parameters("dsom-ptb", 23815)
    assert stored == count_preset_parameters("esom-ptb", 23815) == 17_719_817
    # the difference is exactly the weights dSOM's block-triangular layers hold at zero: in each of the two cells
    # from_state and from_input (syntactic 400 of 1,600 outputs x semantic 300 inputs) and to_gates (4 x 100 x 1,200)
    assert stored - 16_279_817 == 2 * (2 * 400 * 300 + 400 * 1200)
    # Table 7's MD dSOM count is the one difference left, with its reason
    assert rows[("dsom-bllip-md-bpe", "parameters")].status == "differs"


def test_paper_002_presets_are_tg_bllip_with_the_embedding_learning_rate_doubled():
    table, family_presets, rows = _compare("002")
    assert set(family_presets) - set(table.presets) == {"dtg-ptb", "dtg-tiny", "txl-trans-ptb", "txl-trans-tiny"}
    for name in ("dtg-bllip", "txl-trans-bllip"):
        assert _value(rows, name, "training.batch_size") == 176  # BLLIP sentences (paper 002 models sentences)
        assert _value(rows, name, "training.embedding_learning_rate_multiplier") == 2.0
        assert rows[(name, "parameters")].status == "same"  # 252M


def test_paper_003_presets_are_gpt2_small_with_appendix_a_cutoffs():
    table, family_presets, rows = _compare("003")
    assert {name for name in family_presets if name not in table.presets} == {
        name for name in family_presets if name.endswith("-tiny")}
    assert _value(rows, "gpt2-token", "model.max_sequence_length") == 1024
    assert _value(rows, "bi-up-ex-nm", "model.max_sequence_length") == 2048
    assert _value(rows, "nb-dn-ex-m", "model.composer_hidden_size") == 256
    assert (_value(rows, "nb-up-in-m", "training.warmup_steps"), _value(rows, "nb-up-in-m", "training.learning_rate"),
            _value(rows, "nb-up-in-m", "training.final_learning_rate")) == (0, 5e-5, 5e-5)
    assert rows[("gpt2-tree", "training.batch_size")].status == "differs"  # the paper gives none


def test_presets_paper_prints_both_sides_and_fails_on_an_unexplained_difference(capsys, monkeypatch):
    assert main(["presets", "--paper", "001"]) == 0
    out = capsys.readouterr().out
    assert "16,279,817 (16.3M)  16.3M" in out and "Table 2, vocabulary 23,815" in out
    assert "CoreNLP is Java" in out and "0 unexplained" in out
    # a preset that strays from the paper without a reason is shown and fails the command
    _, chosen = preset("tg-ptb")  # the family's own dict
    monkeypatch.setitem(chosen, "training", dict(chosen["training"], batch_size=65))
    assert main(["presets", "--paper", "000"]) == 1
    out = capsys.readouterr().out
    assert "UNEXPLAINED: the preset holds another value, and the table gives no reason" in out
    with pytest.raises(SystemExit):
        main(["presets", "--paper", "004"])


def test_the_cards_differences_come_from_the_table():
    table, family_presets = paper_table("001")
    lines = differences_text(table, "dsom-ptb", family_presets["dsom-ptb"])
    assert any(line.startswith("`model.intermediate_size`: 1600 here, not given in paper 001") for line in lines)
    assert any(line.startswith("gold trees:") and "CoreNLP is Java" in line for line in lines)


def test_documents_train_with_the_presets_segments_and_document_batch_unless_the_command_says():
    quiet = lambda *_: None
    bllip = presets()["tg-bllip"]["training"]
    setup = TrainingSetup(preset="tg-bllip", train=[], output="unused")
    schedule = dict(bllip)
    apply_document_settings(setup, bllip, schedule, quiet)
    assert (setup.segment_length, setup.memory_length, schedule["batch_size"]) == (256, 256, 64)
    # the command's own values win: --segment-length alone keeps M = L; --batch-size keeps its batch
    setup = TrainingSetup(preset="tg-bllip", train=[], output="unused", segment_length=32, batch_size=8)
    schedule = dict(bllip, batch_size=8)
    apply_document_settings(setup, bllip, schedule, quiet)
    assert (setup.segment_length, setup.memory_length, schedule["batch_size"]) == (32, None, 8)


def test_with_evaluation_data_the_final_model_is_the_best_checkpoint(tmp_path):
    trees = [line for line in (SAMPLE / "train.txt").read_text().splitlines() if line.strip()]
    (tmp_path / "train.txt").write_text("\n".join(trees[:40]) + "\n")
    (tmp_path / "dev.txt").write_text("\n".join(trees[40:48]) + "\n")
    setup = TrainingSetup(preset="tg-ptb", train=[tmp_path / "train.txt"], eval=[tmp_path / "dev.txt"],
                          output=str(tmp_path / "run"), vocab_size=200, max_steps=4, batch_size=8, warmup_steps=1,
                          learning_rate=3e-2, eval_steps=2, save_steps=1, logging_steps=1, disable_progress=True,
                          model_overrides=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                               num_attention_heads=2, max_sequence_length=512))
    trainer, _ = train(setup, log=lambda *_: None)
    losses = {entry["step"]: entry["eval_loss"] for entry in trainer.state.log_history if "eval_loss" in entry}
    assert sorted(losses) == [1, 2, 3, 4]  # evaluated at every save (gcd of 2 and 1)
    best_step = min(losses, key=losses.get)
    assert trainer.args.load_best_model_at_end and trainer.args.metric_for_best_model == "eval_loss"
    assert trainer.state.best_model_checkpoint.endswith(f"checkpoint-{best_step}")
    from safetensors.torch import load_file

    final = load_file(tmp_path / "run" / "model.safetensors")
    kept = load_file(Path(trainer.state.best_model_checkpoint) / "model.safetensors")
    assert final.keys() == kept.keys() and all(torch.equal(final[key], kept[key]) for key in final)
    record = json.loads((tmp_path / "run" / "training_setup.json").read_text())
    assert record["preset"] == "tg-ptb"


def test_a_card_lists_its_presets_differences_from_the_paper_and_the_proposal_format(tmp_path):
    from conftest import save_tiny_checkpoint

    from hf_slm.publishing.model_card import build_model_card

    trees = [line for line in (SAMPLE / "train.txt").read_text().splitlines() if line.strip()][:20]
    directory = tmp_path / "model"
    save_tiny_checkpoint(directory, trees, vocab_size=120, grammar="nb-dn-in-m", hidden_size=16, num_hidden_layers=1,
                         num_attention_heads=2, intermediate_size=32)
    (directory / "training_setup.json").write_text(json.dumps({"preset": "nb-dn-in-m", "grammar": "nb-dn-in-m"}))
    text = build_model_card(directory).text
    section = text[text.index("## Differences from the paper"):text.index("## License")]
    table, family_presets = paper_table("003")
    for line in differences_text(table, "nb-dn-in-m", family_presets["nb-dn-in-m"]):
        assert f"- {line}" in section
    assert "`training.batch_size`: 16 here, not given in paper 003" in section
    assert "GPT-2's BPE files cannot be downloaded here" in section
    # a model of another preset says so
    (directory / "training_setup.json").write_text(json.dumps({"preset": "nb-dn-in-m-tiny", "grammar": "nb-dn-in-m"}))
    assert "trained from preset `nb-dn-in-m-tiny`, which is none of paper 003's settings" in build_model_card(
        directory).text
    # proposals: the card says which format this model's proposal files hold (unlabelled brackets)
    assert "in this model's tree format" in text


def test_the_command_lines_papers_are_the_registered_tables():
    from hf_slm.cli.commands import PAPERS_WITH_TABLES
    from hf_slm.families import registered_families

    assert set(PAPERS_WITH_TABLES) == {family.paper for family in registered_families()
                                       if family.reference("paper_table") is not None}
