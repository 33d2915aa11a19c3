"""Training with segment recurrence (hf_slm/training/segment_training.py, issue 16): documents four times longer than
the model's max_sequence_length train through `hf-slm train --segment-length`, a resumed run gives the losses of an
uninterrupted one (the memory is restored), the streams keep Transformer-XL's order, and a long document is
scored."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from hf_slm import SyntacticTokenizer, register_auto_classes
from hf_slm.cli import main
from hf_slm.modeling.segment_recurrence import segment_log_probs
from hf_slm.modeling.segments import segment_sequence, structure_memory_needed
from hf_slm.training.segment_training import DocumentStreams, split_into_streams
from hf_slm.training.train import TrainingSetup, train
from helpers.gum_documents import prepare_gum_documents

SAMPLE = Path(__file__).resolve().parents[1] / "hf_slm" / "sample_data" / "gum"
MAX_LENGTH = 64
TINY = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
            max_sequence_length=MAX_LENGTH)


def _quiet(*_):
    pass


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    """GUM documents of 14 trees, BLLIP-style (a blank line between documents), prepared document-level."""
    directory = tmp_path_factory.mktemp("documents")
    prepare_gum_documents(directory, 14)
    return directory


def setup_for(documents, output, **changes):
    options = dict(preset="tg-ptb", train=[documents / "prepared"], output=str(output), model_overrides=TINY,
                   max_steps=8, batch_size=2, learning_rate=3e-3, warmup_steps=2, save_steps=4, logging_steps=1,
                   disable_progress=True, segment_length=32, memory_length=32)
    options.update(changes)
    return TrainingSetup(**options)


def test_documents_longer_than_the_model_train_in_segments_and_resume_exactly(documents, tmp_path):
    from datasets import load_from_disk

    lengths = [len(ids) for ids in load_from_disk(str(documents / "prepared" / "train"))["input_ids"]]
    assert min(lengths) > 4 * MAX_LENGTH  # each document is over four times what the model reads at once
    with pytest.raises(ValueError, match="max_sequence_length 64"):  # without segments they do not fit
        train(setup_for(documents, tmp_path / "whole", segment_length=0, memory_length=None), log=_quiet)

    first, _ = train(setup_for(documents, tmp_path / "a"), log=_quiet)
    full = {e["step"]: e["loss"] for e in first.state.log_history if "loss" in e}
    assert sorted(full) == list(range(1, 9)) and all(np.isfinite(list(full.values())))
    assert (tmp_path / "a" / "checkpoint-4" / "segment_memory.safetensors").is_file()
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert (config["segment_length"], config["memory_length"], config["memory_update"]) == (32, 32, "structure")
    record = json.loads((tmp_path / "a" / "training_setup.json").read_text())
    assert record["segments"] == {"segment_length": 32, "memory_length": 32, "memory_update": "structure"}

    (tmp_path / "b").mkdir()
    shutil.copytree(tmp_path / "a" / "checkpoint-4", tmp_path / "b" / "checkpoint-4")
    second, _ = train(setup_for(documents, tmp_path / "b", resume=True), log=_quiet)
    resumed = {e["step"]: e["loss"] for e in second.state.log_history if "loss" in e and e["step"] > 4}
    assert sorted(resumed) == [5, 6, 7, 8]
    for step in resumed:
        assert resumed[step] == full[step], (step, resumed[step], full[step])

    # Without the memory the checkpoint saved, step 5 reads another memory and gives another loss.
    (tmp_path / "c").mkdir()
    shutil.copytree(tmp_path / "a" / "checkpoint-4", tmp_path / "c" / "checkpoint-4")
    (tmp_path / "c" / "checkpoint-4" / "segment_memory.safetensors").unlink()
    with pytest.raises(ValueError, match="segment_memory.safetensors"):
        train(setup_for(documents, tmp_path / "c", resume=True), log=_quiet)


def test_a_trained_model_scores_a_long_document_through_segments(documents, tmp_path):
    """The model of a segment run, loaded through the Auto classes, scores a test document (over 4x its
    max_sequence_length) segment by segment; with a memory that holds every attendable position this equals the
    whole-sequence computation of the same weights (run with max_sequence_length raised)."""
    from datasets import load_from_disk

    assert main(["train", "--preset", "tg-ptb", "--train", str(documents / "prepared"), "--output", str(tmp_path / "m"),
                 "--max-steps", "2", "--batch-size", "2", "--warmup-steps", "1", "--segment-length", "16",
                 "--save-steps", "100", *[f"--set={k}={v}" for k, v in TINY.items()]]) == 0
    from hf_slm.publishing.model_card import build_model_card

    card = build_model_card(tmp_path / "m").text
    assert "| segment recurrence | read 16 positions at a time with a memory of 16 positions per layer holding the " \
           "positions still on the grammar's stack" in card
    assert "Documents of any length are read 16 positions at a time with a memory\n  of 16 positions per layer " \
           "(`structure` update)" in card and "there is no\n  Transformer-XL segment recurrence" not in card
    register_auto_classes()
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "m").eval()
    ids = load_from_disk(str(documents / "prepared" / "test"))["input_ids"][0]
    grammar = model.grammar
    needed = structure_memory_needed(*grammar.stack_lifetimes(ids), 16)
    scored = segment_log_probs(model, grammar, [ids], 16, needed, "structure")[0]
    assert len(scored) == len(ids) - 1 and bool(torch.isfinite(scored).all())
    model.config.max_sequence_length = 4096
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, :-1]
    whole = torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]
    torch.testing.assert_close(scored, whole, rtol=1e-4, atol=1e-4)
    # With the memory of training (M = L = 16) the deep stacks of a document do not all fit: an approximation.
    assert needed > 16
    assert not torch.allclose(segment_log_probs(model, grammar, [ids], 16, 16, "structure")[0], whole, atol=1e-4)


def test_streams_are_contiguous_and_every_segment_is_read_once():
    lengths = [5, 1, 7, 2, 2, 9, 3]
    parts = split_into_streams(lengths, 3)
    assert [i for part in parts for i in part] == list(range(len(lengths)))  # contiguous, in order, none lost
    totals = [sum(lengths[i] for i in part) for part in parts]
    assert max(totals) <= sum(lengths) / 3 + max(lengths)  # each part its share, give or take one sequence
    few = split_into_streams([4, 4], 4)  # more rows than sequences: some rows stay idle, none reads twice
    assert [i for part in few for i in part] == [0, 1]
    with pytest.raises(ValueError, match="streams 0"):
        split_into_streams(lengths, 0)


def test_document_streams_carry_each_row_through_its_documents():
    from helpers.random_documents import VOCAB, random_document

    from hf_slm.families import get_grammar

    rng = np.random.default_rng(0)
    grammar = get_grammar("tg", VOCAB.layout, document_level=True)
    sequences = [VOCAB.encode([a for tree in random_document(rng) for a in tree]) for _ in range(7)]
    streams = DocumentStreams(grammar, sequences, 3, 8, disable_progress=True)
    seen = {b: [] for b in range(3)}
    for step in range(len(streams)):
        batch = streams[step]
        assert batch["input_ids"].shape[0] == 3
        for b in range(3):
            if bool((batch["positions"][b, streams.memory_length:] >= 0).any()):  # a real segment, not padding
                seen[b].append((bool(batch["memory_reset"][b]), batch["input_ids"][b].tolist()))
    # Each row reads its documents' segments in order; a new document starts with memory_reset.
    segmented = [segment_sequence(grammar, ids, 8) for ids in sequences]
    assert streams.segment_counts == [s.num_segments for s in segmented]
    for b, part in enumerate(split_into_streams(streams.segment_counts, 3)):
        expected = [(tau == 0, segmented[i].input_ids[tau].tolist()) for i in part for tau in range(segmented[i].num_segments)]
        assert seen[b] == expected
    assert sum(len(rows) for rows in seen.values()) == sum(streams.segment_counts)  # every segment read once


def test_exact_document_perplexity_of_a_terminals_model_reads_long_documents_in_segments(tmp_path):
    """A terminals model with segment options (config.segment_length) scores documents longer than its
    max_sequence_length exactly, through segments; with a memory holding the whole document the perplexity equals
    the whole-sequence one of the same weights, with a short memory it is the model's own (another) number."""
    from hf_slm.evaluation.perplexity import word_perplexity
    from hf_slm.families import config_for_grammar
    from hf_slm.families import causal_lm_for_config

    trees = [line for line in (SAMPLE / "train.txt").read_text().splitlines() if line.strip()]
    tokenizer = SyntacticTokenizer.train(trees[:300], vocab_size=300, linearization="terminals")
    config = config_for_grammar(grammar="terminals", vocab_size=len(tokenizer), document_level=True,
                                **TINY, **tokenizer.action_layout)
    torch.manual_seed(0)
    model = causal_lm_for_config(config).eval()
    from nltk import Tree

    sentences = [" ".join(Tree.fromstring(tree).leaves()) for tree in trees[:120]]
    # sentences that fit in the model (2 positions for <s> and </s>), documents that do not
    sentences = [s for s in sentences if len(tokenizer(s.split(), is_split_into_words=True)["input_ids"]) < MAX_LENGTH - 2][:24]
    data = tmp_path / "documents.txt"
    data.write_text("\n".join(sentences[:12]) + "\n\n" + "\n".join(sentences[12:]) + "\n")
    with pytest.raises(ValueError, match="maximum"):  # each document is longer than the 64 positions read at once
        word_perplexity(model, tokenizer, data, document_level=True, progress=False)
    model.config.segment_length, model.config.memory_length, model.config.memory_update = 16, 4096, "shift"
    in_segments = word_perplexity(model, tokenizer, data, document_level=True, progress=False)
    assert "left_out" not in in_segments and in_segments["estimate"] == "exact" and in_segments["words"] == sum(len(s.split()) for s in sentences)
    model.config.segment_length, model.config.max_sequence_length = None, 4096
    whole = word_perplexity(model, tokenizer, data, document_level=True, progress=False)
    assert in_segments["perplexity"] == pytest.approx(whole["perplexity"], rel=1e-5)
    model.config.segment_length, model.config.memory_length = 16, 16
    short_memory = word_perplexity(model, tokenizer, data, document_level=True, progress=False)
    assert np.isfinite(short_memory["perplexity"]) and short_memory["perplexity"] != pytest.approx(whole["perplexity"])


def test_document_perplexity_of_a_tg_segment_model_continues_each_prefix_through_the_memory(tmp_path):
    """Document-level perplexity of a syntactic model (the paper's approximation: each sentence searched after the
    greedy best trees of the sentences before it) over documents longer than max_sequence_length: the prefixes are
    read through the memory; with a memory holding every attendable position it equals the same weights reading
    the prefixes whole."""
    from hf_slm.evaluation.perplexity import word_perplexity
    from hf_slm.families import config_for_grammar
    from hf_slm.families import causal_lm_for_config

    trees = [line for line in (SAMPLE / "train.txt").read_text().splitlines() if line.strip()]
    tokenizer = SyntacticTokenizer.train(trees, vocab_size=600)
    config = config_for_grammar(grammar="tg", vocab_size=len(tokenizer), document_level=True, **TINY,
                                **tokenizer.action_layout)
    torch.manual_seed(0)
    model = causal_lm_for_config(config).eval()
    short = [t for t in trees if len(tokenizer(t)["input_ids"]) < 30][:6]
    data = tmp_path / "documents.txt"
    data.write_text("\n".join(short[:3]) + "\n\n" + "\n".join(short[3:]) + "\n")
    beam = dict(beam_size=10, word_beam_size=5)
    model.config.segment_length, model.config.memory_length, model.config.memory_update = 8, 512, "structure"
    in_segments = word_perplexity(model, tokenizer, data, document_level=True, beam_options=beam, progress=False)
    assert "left_out" not in in_segments and "approximation" in in_segments["summary"]
    model.config.segment_length, model.config.max_sequence_length = None, 4096
    whole = word_perplexity(model, tokenizer, data, document_level=True, beam_options=beam, progress=False)
    assert in_segments["perplexity"] == pytest.approx(whole["perplexity"], rel=1e-4)
