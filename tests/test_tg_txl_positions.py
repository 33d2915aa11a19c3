"""TG (TXL mem. & rel. pos.) of paper 000 (section 3.5, Table 2): TG's attention with Transformer-XL's relative
positions i - j and Transformer-XL's memory. Golden masks and relative positions of a small document written out
by hand from Algorithm 1 and the section's definition; the model reads them the same whole, incrementally and in
segments; the preset trains on documents from the command line and evaluates document-level perplexity."""

import json
from pathlib import Path

import pytest
import torch
from hf_slm.modeling.segment_recurrence import segment_log_probs
from hf_slm.modeling.segments import segment_sequence

from hf_slm.families import causal_lm_for_config, config_for_grammar, get_grammar
from hf_slm.families.action_vocab import ActionVocabulary
from helpers.gum_documents import prepare_gum_documents

SAMPLE = Path(__file__).resolve().parents[1] / "hf_slm" / "sample_data" / "gum"

# Two sentences after one <s>. Expanded positions (each closing NT twice: COMPOSE, then STACK):
#   0 <s>  1 (S  2 (NP  3 a  4 NP)c  5 NP)s  6 b  7 S)c  8 S)s  9 (S  10 c  11 S)c  12 S)s
DOCUMENT = "(S (NP a NP) b S) (S c S)"
# Algorithm 1 by hand: the stack after each position, and so what each position attends. STACK rows attend the
# stack (and themselves); a COMPOSE row attends its opening NT, the children on the stack above it, and itself.
ATTENDS = {
    0: [0], 1: [0, 1], 2: [0, 1, 2], 3: [0, 1, 2, 3],
    4: [2, 3, 4],  # NP)c composes (NP and a; the stack becomes 0 1 4
    5: [0, 1, 4, 5], 6: [0, 1, 4, 6],
    7: [1, 4, 6, 7],  # S)c composes (S, NP) and b; the stack becomes 0 7
    8: [0, 7, 8], 9: [0, 7, 9], 10: [0, 7, 9, 10],
    11: [9, 10, 11],  # the second S)c; the stack becomes 0 7 11
    12: [0, 7, 11, 12],
}


def _document():
    actions = DOCUMENT.split()
    vocab = ActionVocabulary.from_action_sequences([actions])
    return vocab, vocab.encode(actions)


def test_masks_and_relative_positions_of_a_document_are_the_papers():
    vocab, ids = _document()
    grammar = get_grammar("tg_txl_positions", vocab.layout, document_level=True)
    sequence = grammar.sequence(ids)
    total = len(ATTENDS)
    assert len(sequence.input_ids) == total
    for i in range(total):
        assert sequence.attention_mask[i].nonzero()[0].tolist() == ATTENDS[i], i
        # "their linear relative positional difference i - j, as in a Transformer-XL" on every attended cell
        assert sequence.relative_positions[i, ATTENDS[i]].tolist() == [i - j for j in ATTENDS[i]], i
    # TG's mask (the same rows under the depth grammar), TG's own relative positions: depth differences
    tg = get_grammar("tg", vocab.layout, document_level=True).sequence(ids)
    assert (tg.attention_mask == sequence.attention_mask).all()
    assert tg.relative_positions[12, [0, 7, 11, 12]].tolist() == [1, 0, 0, 0]  # the roots sit at one depth
    # the step form gives the same rows, one action at a time
    state, position = grammar.start(), 0
    for action in ids:
        for new in grammar.step(state, action):
            assert new.attended.tolist() == ATTENDS[position]
            assert new.relative_positions.tolist() == [position - j for j in ATTENDS[position]]
            assert new.coordinate == position
            position += 1
    assert position == total


def test_segments_shift_the_memory_as_transformer_xl():
    """L = M = 4: each segment's memory is the 4 positions before it, whatever the stack (Transformer-XL's update,
    the grammar's default); a row attends, of its whole-sequence row, what memory and segment hold."""
    vocab, ids = _document()
    grammar = get_grammar("tg_txl_positions", vocab.layout, document_level=True)
    assert grammar.default_memory_update == "shift"
    segmented = segment_sequence(grammar, ids, 4, 4)
    assert segmented.memory_update == "shift"
    assert segmented.memory_positions.tolist() == [[-1, -1, -1, -1], [0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    # segment 2 (positions 8-11): columns are the memory 4 5 6 7, then 8 9 10 11; <s> (position 0) is gone
    expected = {
        8: {3: 1, 4: 0},  # attends 7 and itself; 0 has left the memory
        9: {3: 2, 5: 0},  # 7, itself
        10: {3: 3, 5: 1, 6: 0},  # 7, 9, itself
        11: {5: 2, 6: 1, 7: 0},  # composes 9 and 10
    }
    for x, row in enumerate(range(8, 12)):
        cells = segmented.attention_mask[2, x].nonzero()[0].tolist()
        assert cells == sorted(expected[row]), row
        assert {c: int(segmented.relative_positions[2, x, c]) for c in cells} == expected[row], row
    # segment 3: position 12 attends 0 7 11 12; only 11 (slot 3) and itself are in reach
    assert segmented.attention_mask[3, 0].nonzero()[0].tolist() == [3, 4]
    assert segmented.relative_positions[3, 0, [3, 4]].tolist() == [1, 0]


def _tiny_model(grammar, seed=0, name="tg_txl_positions", **overrides):
    config = config_for_grammar(grammar=name, vocab_size=grammar.vocab_size, hidden_size=16,
                                num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                                document_level=grammar.document_level, **grammar.layout.to_dict(), **overrides)
    torch.manual_seed(seed)
    return causal_lm_for_config(config).eval()


def _whole_log_probs(model, ids):
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, :-1]
    return torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]


def test_the_model_reads_the_document_alike_whole_by_reference_and_in_segments():
    vocab, ids = _document()
    grammar = get_grammar("tg_txl_positions", vocab.layout, document_level=True)
    model = _tiny_model(grammar)
    assert (model.config.min_relative_position, model.config.max_relative_position) == (0, 1023)
    whole = _whole_log_probs(model, ids)
    # the fast kernels (the relative shift under TG's mask) equal the explicit scores
    reference = _tiny_model(grammar, relative_attention="reference")
    torch.testing.assert_close(_whole_log_probs(reference, ids), whole, rtol=1e-5, atol=1e-5)
    # segments with a shift memory that reaches the start: the whole sequence's numbers
    torch.testing.assert_close(segment_log_probs(model, grammar, [ids], 4, 13, "shift")[0], whole, rtol=1e-5,
                               atol=1e-5)
    # with M = 4, later rows lose <s> and the first root: other numbers
    assert not torch.allclose(segment_log_probs(model, grammar, [ids], 4, 4, "shift")[0], whole, atol=1e-4)
    # relative positions reach the model: TG's depth differences give other numbers with the same weights
    depth_model = _tiny_model(grammar, name="tg")
    depth_model.load_state_dict(model.state_dict())
    assert not torch.allclose(_whole_log_probs(depth_model, ids), whole, atol=1e-4)


def test_the_key_value_cache_decoder_equals_the_whole_document():
    """Batch equals incremental: the beam search's decoder, fed the document one action at a time (the grammar's
    fast rows give each new position's attended positions and coordinate), predicts each next action as the
    whole-sequence forward does."""
    from hf_slm.modeling.hypothesis_rows import NewPositions, hypothesis_rows
    from hf_slm.modeling.search_decoders import search_decoder_for

    vocab, ids = _document()
    grammar = get_grammar("tg_txl_positions", vocab.layout, document_level=True)
    model = _tiny_model(grammar, seed=1)
    whole = _whole_log_probs(model, ids)
    decoder = search_decoder_for(model, use_cache=True)
    state = grammar.start()
    first = NewPositions.from_lists([grammar.step(state, ids[0])])
    cache, log_probs = decoder.start([ids[:1]], first)
    rows = hypothesis_rows(grammar, [state])
    incremental = []
    for action in ids[1:]:
        incremental.append(float(log_probs[0, action]))
        rows, steps = rows.step(torch.tensor([action]))
        cache, log_probs = decoder.advance(cache, torch.tensor([0]), torch.tensor([action]), steps)
    torch.testing.assert_close(torch.tensor(incremental), whole, rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    """GUM trees as documents of 6 trees (a blank line between documents), prepared document-level."""
    from hf_slm import parse_tree

    directory = tmp_path_factory.mktemp("documents")
    trees = prepare_gum_documents(directory, 6)
    # one document of two short sentences: the beam search of an untrained model is quick on them
    short = [tree for tree in trees if len(parse_tree(tree).leaves()) <= 3][:2]
    (directory / "eval.txt").write_text("\n".join(short) + "\n")
    return directory


def test_the_preset_trains_on_documents_and_evaluates_from_the_command_line(documents, tmp_path, capsys,
                                                                           monkeypatch):
    from transformers import AutoModelForCausalLM

    from hf_slm.cli import main
    from hf_slm.publishing.model_card import build_model_card

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    output = tmp_path / "model"
    tiny = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2}
    assert main(["train", "--preset", "tg-txl-positions-ptb", "--train", str(documents / "prepared"), "--output",
                 str(output), "--max-steps", "2", "--batch-size", "2", "--warmup-steps", "1", "--segment-length", "16",
                 "--save-steps", "100", *[f"--set={k}={v}" for k, v in tiny.items()]]) == 0
    config = json.loads((output / "config.json").read_text())
    # the paper's variant: its grammar, Transformer-XL's memory (the grammar's default) on documents
    assert (config["grammar"], config["document_level"]) == ("tg_txl_positions", True)
    assert (config["segment_length"], config["memory_length"], config["memory_update"]) == (16, 16, "shift")
    card = build_model_card(output).text  # the variant's own card
    assert "**TG (TXL mem. & rel. pos.)**" in card and "(`shift` update)" in card
    model = AutoModelForCausalLM.from_pretrained(output, trust_remote_code=True)
    assert model.grammar.name == "tg_txl_positions" and model.config.max_relative_position > 62
    capsys.readouterr()
    assert main(["eval", "ppl", "--model", str(output), "--data", str(documents / "eval.txt"), "--document-level",
                 "--beam-size", "4", "--word-beam-size", "2"]) == 0
    assert "approximation" in capsys.readouterr().out
    record = json.loads((output / "eval_results" / "ppl-eval.json").read_text())
    assert record["metrics"]["documents"] == 1 and record["metrics"]["estimate"] == "approximation"
    assert record["metrics"]["perplexity"] > 1
