"""Transformer-XL segment recurrence in the model (modeling/segment_recurrence.py, issue 16): segment by segment
with a memory large enough, a model gives the whole sequence's log-probabilities; the memory carries no gradient;
streams in one batch do not mix; a small memory changes what is attended."""

import numpy as np
import pytest
import torch
from helpers.random_documents import VOCAB, WORDS, random_case

from hf_slm.families import config_for_grammar
from hf_slm.families import get_grammar
from hf_slm.families import causal_lm_for_config
from hf_slm.modeling.segment_recurrence import (collate_segments, empty_memory, segment_forward, segment_log_probs,
                                               slots_before_the_segment)
from hf_slm.modeling.segments import segment_sequence, structure_memory_needed

# (grammar, config overrides): TG with and without hybrid heads and distinct COMPOSE attention, the TXL baselines.
MODELS = [
    ("tg", {}),
    ("tg", {"num_unrestricted_heads": 1, "distinct_compose_attention": True}),
    ("tg", {"pre_layer_norm": False}),
    ("tg_txl_positions", {}),  # paper 000's TG (TXL mem. & rel. pos.)
    ("choe_charniak", {}),
    ("terminals", {}),
    ("dtg", {}),
    ("dtg_eager", {}),
    ("txl_trans", {}),
    ("nb-dn-in-m", {"position_encoding": "relative"}),  # paper 003's In variants, on relative positions
    ("bi-up-in-nm", {"position_encoding": "relative"}),
]


def tiny_model(grammar, seed=0, **overrides):
    config = config_for_grammar(
        grammar=grammar.name if hasattr(grammar, "name") else grammar, vocab_size=grammar.vocab_size, hidden_size=16,
        num_hidden_layers=2, num_attention_heads=2, intermediate_size=32, document_level=grammar.document_level,
        **grammar.layout.to_dict(), **variant_of(grammar), **overrides)
    torch.manual_seed(seed)
    return causal_lm_for_config(config).eval()


def variant_of(grammar):
    """A dependency grammar's variant (config.dependency_variant), so that the model reads the grammar's sequences."""
    variant = getattr(grammar, "variant", None)
    return {} if variant is None else {"dependency_variant": variant}


def whole_log_probs(model, ids):
    """log p(action t + 1 | actions up to t) over the whole sequence at once, [T - 1]."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, :-1]
    return torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]


def big_enough_memory(grammar, ids, L, rule):
    if rule == "shift":
        return len(grammar.batch([ids])["input_ids"][0])
    return max(1, structure_memory_needed(*grammar.stack_lifetimes(ids), L)) if not grammar.causal else \
        len(grammar.batch([ids])["input_ids"][0])


@pytest.mark.parametrize("name, overrides", MODELS)
def test_segments_with_a_large_enough_memory_equal_the_whole_sequence(name, overrides):
    rng = np.random.default_rng(7)
    for case in range(6):
        grammar, ids, _ = random_case(rng, name)
        model = tiny_model(grammar, seed=case, **overrides)
        expected = whole_log_probs(model, ids)
        for L in (4, 8):
            # Hybrid heads attend every earlier position: a structure memory (the stack) holds fewer.
            structure = name in ("tg", "dtg", "dtg_eager") and "num_unrestricted_heads" not in overrides
            rules = ["shift"] + (["structure"] if structure else [])
            for rule in rules:
                M = big_enough_memory(grammar, ids, L, rule)
                got = segment_log_probs(model, grammar, [ids], L, M, rule)[0]
                assert got.shape == expected.shape
                torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_the_references_reading_puts_the_memorys_slots_right_before_the_segment():
    """Issue 39: paper 000's reference reads memory slot j of M at i + M - j, over a memory right-aligned with the
    stack's elements: the k-th most recent real slot is read at the segment's first position - k."""
    positions = torch.tensor([[3, 7, -1, 9, 12, 13, 14],  # slots of positions 3, 7 and 9, one empty; segment 12..14
                              [-1, -1, 5, 2, 8, 9, -1],  # unsorted slots, a padded segment row
                              [-1, -1, -1, -1, -1, -1, -1]])  # a padding row: as it is
    assert slots_before_the_segment(positions, 4).tolist() == [[9, 10, -1, 11, 12, 13, 14],
                                                               [-1, -1, 7, 6, 8, 9, -1],
                                                               [-1, -1, -1, -1, -1, -1, -1]]


def test_hybrid_heads_read_the_memory_at_the_true_distance_or_as_the_reference():
    """The two readings (config.unrestricted_memory_reading) agree on the first segment, whose memory is empty, and
    under the shift memory, whose slots lie right before the segment; under the structure memory, from the second
    segment on, they differ."""
    rng = np.random.default_rng(5)
    while True:
        grammar, ids, _ = random_case(rng, "tg")
        if len(grammar.batch([ids])["input_ids"][0]) > 16:
            break
    read = {}
    for reading in ("distance", "shift"):
        model = tiny_model(grammar, seed=1, num_unrestricted_heads=1, unrestricted_memory_reading=reading)
        for rule in ("structure", "shift"):
            read[reading, rule] = segment_log_probs(model, grammar, [ids], 4, 4, rule)[0]
    torch.testing.assert_close(read["distance", "shift"], read["shift", "shift"], rtol=1e-5, atol=1e-5)
    first = int((segment_sequence(grammar, ids, 4, 4, "structure").labels[0] != -100).sum())
    torch.testing.assert_close(read["distance", "structure"][:first], read["shift", "structure"][:first])
    assert (read["distance", "structure"][first:] - read["shift", "structure"][first:]).abs().max() > 1e-4
    with pytest.raises(ValueError, match="unrestricted_memory_reading must be one of"):
        tiny_model(grammar, unrestricted_memory_reading="slots")


def test_streams_in_one_batch_equal_each_alone():
    rng = np.random.default_rng(3)
    cases = [random_case(rng, "tg")[:2] for _ in range(3)]
    model = tiny_model(cases[0][0], **{"num_unrestricted_heads": 1})
    grammar = get_grammar("tg", VOCAB.layout, document_level=True)  # reads one tree or several
    together = segment_log_probs(model, grammar, [ids for _, ids in cases], 4, 6)
    assert len({len(ids) for _, ids in cases}) > 1  # streams of different lengths
    for (_, ids), got in zip(cases, together):
        torch.testing.assert_close(got, segment_log_probs(model, grammar, [ids], 4, 6)[0], rtol=1e-5, atol=1e-5)


def test_the_memory_carries_no_gradient_and_a_small_memory_forgets():
    rng = np.random.default_rng(11)
    while True:
        grammar, ids, _ = random_case(rng, "terminals")
        if len(ids) >= 12:
            break
    model = tiny_model(grammar).train()
    segmented = segment_sequence(grammar, ids, 4, 4, "shift")
    memory = empty_memory(model, 1, 4)
    out = segment_forward(model, collate_segments([(segmented, 0)]), memory)
    assert all(not layer.requires_grad for layer in out.memory)
    second = segment_forward(model, collate_segments([(segmented, 1)]), out.memory)
    second.loss.backward()  # reaches the parameters through segment 1 only: segment 0's graph is not kept
    assert any(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in model.parameters())
    model.eval()
    # The third segment's first row attends 8 positions back with a memory of 8, not with a memory of 4.
    small = segment_log_probs(model, grammar, [ids], 4, 4, "shift")[0]
    large = segment_log_probs(model, grammar, [ids], 4, 8, "shift")[0]
    assert torch.allclose(small[:8], large[:8], atol=1e-6)  # the first two segments see everything either way
    assert not torch.allclose(small[8:], large[8:], atol=1e-4)


@pytest.mark.parametrize("name, overrides, message", [
    ("nb-dn-in-m", {}, "absolute positions has no segment recurrence"),  # paper 003's GPT-2 positions
    ("nb-dn-ex-m", {"position_encoding": "relative"}, "read earlier positions' inputs"),
])
def test_models_without_segment_recurrence_are_named(name, overrides, message):
    rng = np.random.default_rng(1)
    grammar, ids, _ = random_case(rng, name.replace("-ex-", "-in-"))
    model = tiny_model(grammar, **overrides) if "-in-" in name else None
    if model is None:
        from hf_slm.modeling.compositional_grammars import COMPOSITIONAL_GRAMMARS

        model = tiny_model(COMPOSITIONAL_GRAMMARS[name](grammar.layout), **overrides)
    segmented = segment_sequence(grammar, ids, 4, 4, "shift")
    with pytest.raises(ValueError, match=message):
        segment_forward(model, collate_segments([(segmented, 0)]), empty_memory(model, 1, 4))


def test_a_search_after_a_long_prefix_reads_it_through_the_memory():
    """A segment model continues a document prefix from the memory the prefix leaves (search_decoders): with a
    memory that holds everything still attendable, the search's trees and scores equal those of the same weights
    reading the prefix whole; with a small memory they differ (the holes are masked, nothing fails)."""
    from helpers.random_documents import random_document

    from hf_slm.modeling.generation_slm import BeamSearchOptions, WordSynchronousBeamSearch

    rng = np.random.default_rng(5)
    grammar = get_grammar("tg", VOCAB.layout, document_level=True)
    while True:  # earlier sentences of a document, long enough for several segments
        trees = random_document(rng) + random_document(rng)
        prefix = VOCAB.encode([a for tree in trees for a in tree])
        if len(trees) >= 3 and len(prefix) > 24:
            break
    options = BeamSearchOptions(beam_size=20, word_beam_size=5)
    whole_model = tiny_model(grammar, seed=2, max_sequence_length=4096)
    whole = WordSynchronousBeamSearch(whole_model, options).generate([[]], max_new_words=3, prefixes=[prefix])[0]
    model = tiny_model(grammar, seed=2)
    needed = max(1, structure_memory_needed(*grammar.stack_lifetimes(prefix), 4))
    model.config.segment_length, model.config.memory_length, model.config.memory_update = 4, needed, "structure"
    through_memory = WordSynchronousBeamSearch(model, options).generate([[]], max_new_words=3, prefixes=[prefix])[0]
    assert [ids for ids, _ in through_memory] == [ids for ids, _ in whole]
    for (_, expected), (_, got) in zip(whole, through_memory):
        assert got == pytest.approx(expected, abs=1e-4)
    model.config.memory_length = 1
    small = WordSynchronousBeamSearch(model, options).generate([[]], max_new_words=3, prefixes=[prefix])[0]
    assert small and [score for _, score in small] != pytest.approx([score for _, score in whole], abs=1e-4)


def _terminals_segment_model(segment_length, memory_length, seed=0):
    """A tiny TXL (terminals) model trained as segments of `segment_length` with a memory of `memory_length`, whose
    max_sequence_length (8) is shorter than the sequences it reads."""
    grammar = get_grammar("terminals", VOCAB.layout)
    model = tiny_model(grammar, seed=seed, max_sequence_length=8)
    model.config.segment_length, model.config.memory_length, model.config.memory_update = \
        segment_length, memory_length, "shift"
    return grammar, model


def _random_words(rng, count):
    return VOCAB.encode(list(rng.choice(WORDS, count)), add_eos=False)


@pytest.mark.parametrize("memory_length", [2, 4, 7])
def test_a_causal_segment_model_reads_any_length_in_one_pass_as_segment_by_segment(memory_length):
    """model(**inputs) of a segment model with a causal grammar reads as it was trained, through its memory (the
    window of segments.causal_segment_window), past max_sequence_length, under either padding side."""
    rng = np.random.default_rng(memory_length)
    grammar, model = _terminals_segment_model(4, memory_length)
    rows = [_random_words(rng, 21) + [VOCAB.layout.eos_token_id], _random_words(rng, 14) + [VOCAB.layout.eos_token_id]]
    expected = [segment_log_probs(model, grammar, [ids], 4, memory_length, "shift")[0] for ids in rows]
    for side in ("right", "left"):
        width = max(map(len, rows))
        pad = [[VOCAB.layout.pad_token_id] * (width - len(ids)) for ids in rows]
        ids = torch.tensor([ids + p if side == "right" else p + ids for ids, p in zip(rows, pad)])
        mask = ids != VOCAB.layout.pad_token_id
        with torch.no_grad():
            log_probs = torch.log_softmax(model(input_ids=ids, attention_mask=mask.long()).logits.float(), -1)
        for b, row in enumerate(rows):
            real = torch.nonzero(mask[b])[:, 0]
            got = log_probs[b, real[:-1]].gather(1, torch.tensor(row[1:])[:, None])[:, 0]
            torch.testing.assert_close(got, expected[b], rtol=1e-5, atol=1e-5)
    # Not the whole causal context: with a window smaller than the row, reading whole differs.
    whole = tiny_model(grammar, seed=0, max_sequence_length=64)
    assert not torch.allclose(whole_log_probs(whole, rows[0]), expected[0], atol=1e-4)


def test_transformers_generate_continues_a_long_prompt_through_the_memory():
    """transformers' own generate (past_key_values) for a words-only segment model: a prompt longer than
    max_sequence_length, greedy, gives the words that reading each prefix segment by segment picks."""
    from hf_slm.modeling.segment_recurrence import read_prefixes

    rng = np.random.default_rng(2)
    grammar, model = _terminals_segment_model(4, 4, seed=3)
    prompt = _random_words(rng, 13)
    not_words = [i for i in range(len(VOCAB.tokens)) if VOCAB.tokens[i] not in WORDS]  # a random model's picks
    expected = list(prompt)
    for _ in range(6):
        _, _, logits = read_prefixes(model, grammar, [expected], 4, 4, "shift")
        expected.append(int(logits[0].index_fill(0, torch.tensor(not_words), float("-inf")).argmax()))
    model.generation_config.pad_token_id = VOCAB.layout.pad_token_id
    got = model.generate(torch.tensor([prompt]), max_new_tokens=6, do_sample=False, suppress_tokens=not_words)
    assert got[0].tolist() == expected


def test_the_segment_options_are_declared_config_fields():
    """segment_length, memory_length and memory_update are fields of every Transformer family's config, with their
    defaults (no segments), checked against the grammar when given, and kept through to_dict / from_dict."""
    from hf_slm.modeling.configuration_slm import SyntacticTransformerConfig

    plain = config_for_grammar("tg")
    assert (plain.segment_length, plain.memory_length, plain.memory_update) == (None, None, None)
    config = config_for_grammar("dtg_eager", segment_length=8, memory_length=4, memory_update="shift")
    again = type(config).from_dict(config.to_dict())
    assert (again.segment_length, again.memory_length, again.memory_update) == (8, 4, "shift")
    assert config_for_grammar("choe_charniak", segment_length=4, memory_update="structure").memory_update == "structure"
    for grammar, fields, message in (
            ("tg", {"segment_length": 0}, "segment_length must be None or a whole number of positions >= 1, got 0"),
            ("tg", {"memory_length": 3}, "memory_length=3 needs segment_length"),
            ("tg", {"segment_length": 4, "memory_update": "gather"}, "memory_update must be None or one of"),
            ("tg", {"segment_length": 4, "memory_length": -1}, "memory_length must be None or a whole number of slots"),
            ("nb-dn-ex-m", {"segment_length": 4, "position_encoding": "relative"}, "the nb-dn-ex-m grammar has no segment"),
            ("nb-dn-in-m", {"segment_length": 4}, "segment_length needs position_encoding='relative'"),
            ("nb-dn-in-m", {"segment_length": 4, "position_encoding": "relative", "memory_update": "structure"},
             "memory_update='structure' needs the grammar's stack")):
        with pytest.raises(ValueError, match=message):
            config_for_grammar(grammar, **fields)
    documented = SyntacticTransformerConfig.__doc__
    assert all(f"{name}:" in documented for name in ("segment_length", "memory_length", "memory_update"))
    assert "there is no Transformer-XL segment memory" not in documented
