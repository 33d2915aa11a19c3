"""Segment recurrence (modeling/segments.py): per-segment masks, relative positions and memory updates.

The reference is paper 000's Figure 8, transcribed below as a plain loop (`figure_8`) over random TG sentences
and documents; the other properties hold for every grammar with segment support: a memory large enough gives
each row its whole-sequence row, the shift memory is Transformer-XL's sliding window masked by the grammar, and
the update matrices move hidden states the way the memory positions say. Plus a worked example of Figure 2's
sentence derived by hand, errors, and `hf-slm masks --segment-length`.
"""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tree_strategies import action_vocabulary_trees

from hf_slm.families.action_vocab import ActionVocabulary
from hf_slm.cli import main
from hf_slm.modeling.compositional_grammars import COMPOSITIONAL_GRAMMAR_NAMES
from hf_slm.families import get_grammar
from hf_slm.modeling.segments import segment_batch, segment_sequence, structure_memory_needed
from hf_slm.tokenization.linearizers import is_close_nt, is_open_nt, top_down_actions
from helpers.random_documents import LABELS, VOCAB, compositional_inputs, random_case, random_document, random_tree

pytestmark = pytest.mark.slow  # conftest.py: scheduled first

FIGURE_2 = "(S (NP the blue bird NP) (VP sings VP) S)"
SEGMENT_LENGTHS = (4, 8, 16, 64)


def tg_inputs(trees):
    """The TG grammar (document-level for several trees) and the ids of `<s>` and the trees' actions."""
    grammar = get_grammar("tg", VOCAB.layout, document_level=len(trees) > 1)
    return grammar, VOCAB.encode([a for tree in trees for a in tree])


# ---- paper 000, Figure 8, as a plain loop ---------------------------------------------------------------

ONT, T, CNT1, CNT2 = "ONT", "T", "CNT1", "CNT2"


def figure_8_types_and_depths(trees):
    """a' of Figure 2: `<s>` (typed ONT, as Figure 2a types it), each action, each closing NT twice (CNT1 then
    CNT2), with tree depths (<s> 0, a child one below its parent, both closing copies at their NT's depth)."""
    types, depths, open_count = [ONT], [0], 0
    for action in (a for tree in trees for a in tree):
        if is_open_nt(action):
            open_count += 1
            types.append(ONT)
            depths.append(open_count)
        elif is_close_nt(action):
            types += [CNT1, CNT2]
            depths += [open_count, open_count]
            open_count -= 1
        else:
            types.append(T)
            depths.append(open_count + 1)
    return types, depths


def figure_8(types, depths, L, M):
    """Paper 000 Figure 8, step by step, for every segment: (A, R, U^{h->m}, U^{m->m}, memory positions at the
    segment's start). Three departures, each marked below: (1) as this project's TG (and the reference code),
    a CNT2 position also attends itself; (2) the pseudo-code forgets `next_seq2mem[j] = next_y` when it keeps a
    position that was already in the memory (without it, kept positions could never be attended again); (3)
    `next_y < 0` is checked before a slot is written rather than after, the same for M >= 1 and safe for M = 0.
    R ("straightforward and omitted"): depth(i) - depth(j) on every allowed cell."""
    stack, seq2mem, segments = [], {}, []
    for tau in range(-(-len(types) // L)):
        A = np.zeros((L, M + L), dtype=bool)
        R = np.zeros((L, M + L), dtype=np.int64)
        U_hm = np.zeros((M, L), dtype=bool)
        U_mm = np.zeros((M, M), dtype=bool)

        def allow_attention(i, x, j):
            if j >= L * tau:  # attention to the segment
                y = M + j - L * tau
            elif j in seq2mem:  # attention to the memory
                y = seq2mem[j]
            else:  # too far back: neither in the segment nor in the memory
                return
            A[x, y] = True
            R[x, y] = depths[i] - depths[j]

        for x in range(L):
            i = x + tau * L
            if i >= len(types):
                break
            if types[i] == CNT1:  # COMPOSE attention
                j = i
                while types[j] != ONT:
                    allow_attention(i, x, j)  # allow attention, and pop from the stack
                    j = stack.pop()
                allow_attention(i, x, j)  # the corresponding ONT
                stack.append(i)
            else:  # STACK attention
                if types[i] != CNT2:
                    stack.append(i)
                for j in stack:
                    allow_attention(i, x, j)
                if types[i] == CNT2:
                    allow_attention(i, x, i)  # departure (1)
        memory = [-1] * M
        for j, y in seq2mem.items():
            memory[y] = j
        # End of the segment reached: the next memory, from the stack top down.
        next_seq2mem, next_y = {}, M - 1
        for j in reversed(stack):
            if next_y < 0:  # departure (3)
                break
            if j >= L * tau:  # on the stack and in the current segment
                U_hm[next_y, j - L * tau] = True
                next_seq2mem[j] = next_y
                next_y -= 1
            elif j in seq2mem:  # on the stack and in the memory
                U_mm[next_y, seq2mem[j]] = True
                next_seq2mem[j] = next_y  # departure (2)
                next_y -= 1
            # else: too far back, not in the memory
        segments.append((A, R, U_hm, U_mm, memory))
        seq2mem = next_seq2mem
    return segments


def assert_equals_figure_8(trees, L, M, grammar=None, ids=None):
    if grammar is None:
        grammar, ids = tg_inputs(trees)
    segmented = segment_sequence(grammar, ids, L, M, "structure")
    types, depths = figure_8_types_and_depths(trees)
    expected = figure_8(types, depths, L, M)
    assert segmented.num_segments == len(expected)
    for tau, (A, R, U_hm, U_mm, memory) in enumerate(expected):
        rows = min(L, len(types) - tau * L)
        assert (segmented.attention_mask[tau, :rows] == A[:rows]).all(), (tau, L, M)
        assert (segmented.relative_positions[tau, :rows] == R[:rows]).all(), (tau, L, M)
        assert (segmented.update_from_segment[tau] == U_hm).all(), (tau, L, M)
        assert (segmented.update_from_memory[tau] == U_mm).all(), (tau, L, M)
        assert segmented.memory_positions[tau].tolist() == memory, (tau, L, M)
        # Padding rows of the last segment attend their own column only.
        for x in range(rows, L):
            assert np.flatnonzero(segmented.attention_mask[tau, x]).tolist() == [M + x]


def test_structure_memory_equals_figure_8_on_random_documents():
    """600 random sentences and documents (3,000 segmentings; 2,000 took 25 s of the suite), L in {4, 8, 16, 64},
    M = L (the reference's) and a random M in [0, 2L] (this implementation takes any M)."""
    rng = np.random.default_rng(8)
    for _ in range(600):
        trees = random_document(rng)
        for L in SEGMENT_LENGTHS:
            assert_equals_figure_8(trees, L, L)
        L = int(rng.choice(SEGMENT_LENGTHS))
        assert_equals_figure_8(trees, L, int(rng.integers(0, 2 * L + 1)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(action_vocabulary_trees(max_nodes=60), min_size=1, max_size=3), st.sampled_from(SEGMENT_LENGTHS),
       st.integers(0, 80))
def test_structure_memory_equals_figure_8_on_odd_trees(trees, L, M):
    """Trees with every label and word spelling the readers keep (tree_strategies), as documents."""
    actions = [top_down_actions(tree) for tree in trees]
    vocab = ActionVocabulary.from_action_sequences(actions)
    grammar = get_grammar("tg", vocab.layout, document_level=len(trees) > 1)
    assert_equals_figure_8(actions, L, M, grammar, vocab.encode([a for tree in actions for a in tree]))


def test_figure_8_on_a_deep_tree_that_overflows_the_memory():
    """Nesting deeper than M: the bottom of the stack is dropped, and COMPOSE rows lose what was dropped."""
    deep = [f"({LABELS[k % 4]}" for k in range(30)] + ["x"] + [f"{LABELS[k % 4]})" for k in reversed(range(30))]
    for L in SEGMENT_LENGTHS:
        for M in (0, 1, 2, 3, L):
            assert_equals_figure_8([deep, random_tree(np.random.default_rng(L + M))], L, M)


# ---- a worked example: Figure 2's sentence, L = M = 8 ----------------------------------------------------


def test_figure_2_sentence_by_hand():
    # a': 0 <s>, 1 (S, 2 (NP, 3 the, 4 blue, 5 bird, 6 NP) COMPOSE, 7 NP) STACK | 8 (VP, 9 sings, 10 VP) COMPOSE,
    # 11 VP) STACK, 12 S) COMPOSE, 13 S) STACK. After position 7 the stack is <s>, (S, NP) = 0, 1, 6.
    actions = FIGURE_2.split()
    vocab = ActionVocabulary.from_action_sequences([actions])
    segmented = segment_sequence(get_grammar("tg", vocab.layout), vocab.encode(actions), 8)
    assert segmented.memory_length == 8 and segmented.memory_update == "structure"
    assert segmented.memory_positions.tolist() == [[-1] * 8, [-1] * 5 + [0, 1, 6]]
    assert segmented.memory_reset.tolist() == [True, False]
    # Segment 0 fills slots 5, 6, 7 from rows 0, 1, 6; nothing comes from the (empty) memory.
    assert [tuple(c) for c in np.argwhere(segmented.update_from_segment[0])] == [(5, 0), (6, 1), (7, 6)]
    assert not segmented.update_from_memory[0].any()
    # Row 12 (S) COMPOSE) attends (S in slot 6 at 0, NP) in slot 7 at -1, VP) (segment column 2) at -1 and itself.
    row = segment_sequence(get_grammar("tg", vocab.layout), vocab.encode(actions), 8).attention_mask[1, 4]
    assert np.flatnonzero(row).tolist() == [6, 7, 8 + 2, 8 + 4]
    assert segmented.relative_positions[1, 4, [6, 7, 10, 12]].tolist() == [0, -1, -1, 0]
    # Row 8 ((VP) attends <s>, (S, NP) from the memory (depths 0, 1, 2 against its 2) and itself.
    assert np.flatnonzero(segmented.attention_mask[1, 0]).tolist() == [5, 6, 7, 8]
    assert segmented.relative_positions[1, 0, [5, 6, 7, 8]].tolist() == [2, 1, 0, 0]
    # After segment 1 the stack is <s>, S) COMPOSE: <s> moves from slot 5 to 6, row 4 (position 12) into 7.
    assert [tuple(c) for c in np.argwhere(segmented.update_from_memory[1])] == [(6, 5)]
    assert [tuple(c) for c in np.argwhere(segmented.update_from_segment[1])] == [(7, 4)]
    assert segmented.segment_positions[1].tolist() == [8, 9, 10, 11, 12, 13, -1, -1]


# ---- every grammar with segment support ------------------------------------------------------------------


SEGMENTED_GRAMMARS = ["tg", "tg_txl_positions", "choe_charniak", "terminals", "dtg", "dtg_eager", "dtg_swift", "txl_trans",
                      *[name for name in COMPOSITIONAL_GRAMMAR_NAMES if "-in-" in name]]


def attended_positions(segmented, tau, x):
    """The original positions row x of segment tau attends, through memory slots and segment columns, with
    their relative positions."""
    columns = np.concatenate([segmented.memory_positions[tau], segmented.segment_positions[tau]])
    cells = np.flatnonzero(segmented.attention_mask[tau, x])
    return dict(zip(columns[cells].tolist(), segmented.relative_positions[tau, x, cells].tolist()))


def whole_rows(grammar, ids, options):
    options = {k: [v] for k, v in options.items()}
    whole = grammar.batch([ids], **options)
    return whole["attention_mask"][0], whole["relative_positions"][0]


def needed_at_segment_ends(mask, L):
    """Per segment end but the last: how many positions up to it a later row attends (read off the mask)."""
    total = len(mask)
    counts = []
    for end in range(L - 1, total - 1, L):
        counts.append(int(mask[end + 1:, : end + 1].any(0).sum()))
    return max(counts, default=0)


@pytest.mark.parametrize("name", SEGMENTED_GRAMMARS)
def test_rows_through_memory_and_segment_equal_the_whole_sequence(name):
    """Structure memory with M >= the stack size at every segment end (structure_memory_needed), and shift
    memory with any M: each row attends exactly the positions of its whole-sequence row that it can reach (all
    of them for structure; those from M before its segment's start for shift), at the same relative
    positions."""
    rng = np.random.default_rng(sum(map(ord, name)))
    for _ in range(60):
        grammar, ids, options = random_case(rng, name)
        mask, relative = whole_rows(grammar, ids, options)
        total = len(mask)
        L = int(rng.choice(SEGMENT_LENGTHS))
        # Structure memory: TG and DTG, and causal grammars (whose stack keeps everything: test_shift_memory...).
        structure = grammar.default_memory_update == "structure" or grammar.causal
        for rule in ["shift"] + (["structure"] if structure else []):
            if rule == "structure":
                pushed, removal = (grammar.stack_lifetimes(ids) if not grammar.causal
                                   else (np.ones(total, bool), np.full(total, 1 << 62)))
                M = structure_memory_needed(pushed, removal, L)
                # The stack holds at least what later rows attend (TG: exactly that).
                needed = needed_at_segment_ends(mask, L)
                assert M >= needed
                if name == "tg":
                    assert M == needed
            else:
                M = int(rng.integers(0, 2 * L + 1))
            segmented = segment_sequence(grammar, ids, L, M, rule, **options)
            for i in range(total):
                tau, x = divmod(i, L)
                reach = 0 if rule == "structure" else tau * L - M
                expected = {int(j): int(relative[i, j]) for j in np.flatnonzero(mask[i]) if j >= reach}
                assert attended_positions(segmented, tau, x) == expected, (name, rule, L, M, i)


@pytest.mark.parametrize("name", ["tg", "dtg", "dtg_eager"])
def test_one_slot_less_than_the_stack_loses_attention(name):
    """The bound is tight for TG: with M one below the largest stack at a segment end, some row misses a
    position it attends over the whole sequence. For every grammar, a row never attends what its whole row
    does not."""
    rng = np.random.default_rng(3)
    lost = 0
    for _ in range(80):
        grammar, ids, options = random_case(rng, name)
        mask, _ = whole_rows(grammar, ids, options)
        L = int(rng.choice(SEGMENT_LENGTHS[:3]))
        M = structure_memory_needed(*grammar.stack_lifetimes(ids), L) - 1
        if M < 0:
            continue
        segmented = segment_sequence(grammar, ids, L, M)
        rows_lost = 0
        for i in range(len(mask)):
            reached = set(attended_positions(segmented, *divmod(i, L)))
            assert reached <= set(np.flatnonzero(mask[i]).tolist())
            rows_lost += reached != set(np.flatnonzero(mask[i]).tolist())
        if name == "tg":
            assert rows_lost > 0
        lost += rows_lost > 0
    assert lost > 0


def test_stack_lifetimes_cover_every_attended_cell():
    """The grammar method's contract: a position attended by a later row i is on the stack once i - 1 is read."""
    rng = np.random.default_rng(5)
    for name in ("tg", "dtg", "dtg_eager", "dtg_swift", "txl_trans"):
        for _ in range(40):
            grammar, ids, options = random_case(rng, name)
            mask, _ = whole_rows(grammar, ids, options)
            pushed, removal = grammar.stack_lifetimes(ids)
            rows, columns = np.nonzero(np.tril(mask, -1))
            assert pushed[columns].all() and (removal[columns] >= rows).all(), name


@pytest.mark.parametrize("name", SEGMENTED_GRAMMARS)
def test_one_segment_holding_the_whole_sequence_is_the_whole_mask(name):
    rng = np.random.default_rng(11)
    for _ in range(20):
        grammar, ids, options = random_case(rng, name)
        mask, relative = whole_rows(grammar, ids, options)
        total = len(mask)
        for rule in ("structure", "shift") if grammar.default_memory_update == "structure" else ("shift",):
            segmented = segment_sequence(grammar, ids, total + int(rng.integers(0, 3)), 5, rule, **options)
            assert segmented.num_segments == 1
            assert not segmented.attention_mask[0, :, :5].any()
            assert (segmented.attention_mask[0, :total, 5:5 + total] == mask).all()
            assert (segmented.relative_positions[0, :total, 5:5 + total] == relative).all()


def test_shift_memory_is_transformer_xl_sliding_window():
    """A causal grammar with shift memory is plain Transformer-XL: slot y holds position tau*L - M + y, every row
    attends every filled slot and the segment up to itself, at relative position i - j; the structure memory
    of a causal grammar is the same; the update is m <- concat(m, h)[-M:]."""
    rng = np.random.default_rng(2)
    for _ in range(100):
        grammar, ids, _ = random_case(rng, "choe_charniak")
        L = int(rng.choice(SEGMENT_LENGTHS))
        M = int(rng.integers(0, 2 * L + 1))
        shift = segment_sequence(grammar, ids, L, M, "shift")
        structure = segment_sequence(grammar, ids, L, M, "structure")
        for field in ("memory_positions", "attention_mask", "relative_positions", "update_from_segment",
                      "update_from_memory"):
            assert (getattr(shift, field) == getattr(structure, field)).all()
        total = len(grammar.sequence(ids).input_ids)
        hidden = rng.normal(size=(total, 3))
        memory = np.zeros((M, 3))
        for tau in range(shift.num_segments):
            slots = tau * L - M + np.arange(M)
            assert shift.memory_positions[tau].tolist() == np.where(slots >= 0, slots, -1).tolist()
            for x in range(min(L, total - tau * L)):
                i = tau * L + x
                expected = np.concatenate([slots >= 0, np.arange(L) <= x])
                assert (shift.attention_mask[tau, x] == expected).all()
                positions = np.concatenate([slots, tau * L + np.arange(L)])
                assert (shift.relative_positions[tau, x] == np.where(expected, i - positions, 0)).all()
            if (tau + 1) * L <= total:  # a full segment: Transformer-XL's update
                segment = hidden[tau * L:(tau + 1) * L]
                after = shift.update_from_memory[tau] @ memory + shift.update_from_segment[tau] @ segment
                window = np.concatenate([np.zeros((M, 3)), memory, segment])[-M:] if M else np.zeros((0, 3))
                assert np.allclose(after, window)
                memory = after


@pytest.mark.parametrize("name", ["tg", "dtg_eager", "nb-up-in-m"])
def test_update_matrices_move_hidden_states_as_the_memory_positions_say(name):
    """m_{tau+1} = U^{m->m} m_tau + U^{h->m} h_tau, from a zero memory at the start, holds in each slot the
    hidden state of the position memory_positions names (zero for an empty slot); each U row copies at most one
    vector."""
    rng = np.random.default_rng(4)
    for _ in range(30):
        grammar, ids, options = random_case(rng, name)
        L = int(rng.choice(SEGMENT_LENGTHS[:2]))
        M = int(rng.integers(0, 2 * L + 1))
        for rule in ("structure", "shift") if grammar.default_memory_update == "structure" else ("shift",):
            segmented = segment_sequence(grammar, ids, L, M, rule, **options)
            states = rng.normal(size=(segmented.num_segments * L, 4))
            memory = np.zeros((M, 4))
            for tau in range(segmented.num_segments):
                held = segmented.memory_positions[tau]
                assert np.allclose(memory, np.where((held >= 0)[:, None], states[held], 0))
                assert (segmented.update_from_segment[tau].sum(1) + segmented.update_from_memory[tau].sum(1)
                        <= 1).all()
                memory = (segmented.update_from_memory[tau] @ memory
                          + segmented.update_from_segment[tau] @ states[tau * L:(tau + 1) * L])
            next_positions = segmented.next_memory_positions()
            assert (next_positions[:-1] == segmented.memory_positions[1:]).all()


def test_a_batch_stacks_the_sequences_and_pads_with_empty_segments():
    rng = np.random.default_rng(9)
    for name in ("tg", "nb-up-in-m"):
        cases = [random_case(rng, name) for _ in range(5)]
        grammar = cases[0][0]
        sequences = [ids for _, ids, _ in cases]
        starts = [options["starts"] for _, _, options in cases] if name != "tg" else None
        if name == "tg":  # one grammar for the batch: sentence-level trees only
            grammar = get_grammar("tg", VOCAB.layout)
            sequences = [VOCAB.encode(random_tree(rng)) for _ in range(5)]
        batch = segment_batch(grammar, sequences, 4, 3, "shift", starts=starts)
        count = batch["attention_mask"].shape[1]
        assert batch["attention_mask"].shape == (5, count, 4, 7)
        assert batch["update_from_segment"].shape == (5, count, 3, 4)
        for row, ids in enumerate(sequences):
            options = {} if starts is None else {"starts": starts[row]}
            one = segment_sequence(grammar, ids, 4, 3, "shift", **options)
            assert batch["num_segments"][row] == one.num_segments
            assert (batch["attention_mask"][row, : one.num_segments] == one.attention_mask).all()
            assert (batch["memory_positions"][row, : one.num_segments] == one.memory_positions).all()
            assert (batch["labels"][row, : one.num_segments] == one.labels).all()
            padding = batch["attention_mask"][row, one.num_segments:]
            assert (padding == np.eye(4, 7, 3, dtype=bool)).all()
            assert (batch["memory_positions"][row, one.num_segments:] == -1).all()
            assert not batch["update_from_memory"][row, one.num_segments:].any()
    assert count == batch["num_segments"].max()
    with pytest.raises(ValueError, match="expected at least one sequence"):
        segment_batch(grammar, [], 4)


def test_memory_starts_empty_at_each_document():
    """Each sequence (a document) starts from an empty memory, whatever came before it."""
    rng = np.random.default_rng(6)
    for _ in range(20):
        grammar, ids = tg_inputs(random_document(rng))
        segmented = segment_sequence(grammar, ids, 4)
        assert segmented.memory_positions[0].tolist() == [-1] * 4
        assert not segmented.attention_mask[0, :, :4].any()
        assert segmented.memory_reset.tolist() == [True] + [False] * (segmented.num_segments - 1)


def test_default_memory_rules():
    layouts = {"tg": "structure", "choe_charniak": "shift", "terminals": "shift"}
    for name, rule in layouts.items():
        assert get_grammar(name, VOCAB.layout).default_memory_update == rule
    rng = np.random.default_rng(0)
    for name, rule in (("dtg", "structure"), ("dtg_eager", "structure"), ("dtg_swift", "structure"),
                       ("txl_trans", "shift"), ("nb-dn-in-m", "shift")):
        assert random_case(rng, name)[0].default_memory_update == rule


@pytest.mark.parametrize(("arguments", "message"), [
    ((0, None, None), "segment length 0: expected a whole number of positions >= 1"),
    ((-3, None, None), "segment length -3"),
    ((2.5, None, None), "segment length 2.5"),
    ((4, -1, None), "memory length -1: expected a whole number of slots >= 0"),
    ((4, 4, "fifo"), "memory update 'fifo': expected one of structure, shift"),
])
def test_bad_options_are_named(arguments, message):
    grammar, ids = tg_inputs([random_tree(np.random.default_rng(0))])
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        segment_sequence(grammar, ids, *arguments)


def test_grammars_without_segment_support_are_named():
    rng = np.random.default_rng(1)
    grammar, ids, options = compositional_inputs(rng, "nb-up-in-m")
    with pytest.raises(ValueError, match="memory update 'structure' needs the grammar's stack, and the nb-up-in-m"):
        segment_sequence(grammar, ids, 4, memory_update="structure", **options)
    grammar, ids, options = compositional_inputs(rng, "bi-dn-ex-m")
    with pytest.raises(ValueError, match="the bi-dn-ex-m grammar has no segment recurrence"):
        segment_sequence(grammar, ids, 4, **options)


# ---- hf-slm masks --segment-length -------------------------------------------------------------------------


def masks_json(capsys, *arguments):
    assert main(["masks", *arguments, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_segments_of_figure_2(capsys):
    report = masks_json(capsys, FIGURE_2, "--segment-length", "8")
    assert (report["segment_length"], report["memory_length"], report["memory_update"]) == (8, 8, "structure")
    assert report["trees"] == 1 and not report["document_level"]
    first, second = report["chunks"]
    for chunk in report["chunks"]:
        assert len(chunk["attention_mask"]) == 8 and {len(r) for r in chunk["attention_mask"]} == {16}
        assert len(chunk["relative_positions"]) == 8 and {len(r) for r in chunk["relative_positions"]} == {16}
        assert len(chunk["memory_positions"]) == 8
        assert np.shape(chunk["update_from_segment"]) == (8, 8) and np.shape(chunk["update_from_memory"]) == (8, 8)
    assert first["tokens"] == "<s> (S (NP the blue bird NP) NP)".split()
    assert second["tokens"] == "(VP sings VP) VP) S) S) <pad> <pad>".split()
    assert second["kinds"][:6] == ["open_nt", "terminal", "close_compose", "close_stack", "close_compose",
                                   "close_stack"]
    assert second["labels"] == ["sings", "VP)", None, "S)", None, None, None, None]
    assert first["depths"] == [0, 1, 2, 3, 3, 3, 2, 2]
    assert second["memory_positions"] == [-1, -1, -1, -1, -1, 0, 1, 6]
    assert second["attention_mask"][4] == [0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0, 0]  # S) COMPOSE
    assert second["relative_positions"][4][6:13] == [0, -1, 0, 0, -1, 0, 0]
    assert first["update_from_segment"][7] == [0, 0, 0, 0, 0, 0, 1, 0]  # NP) COMPOSE into slot 7
    assert second["update_from_memory"][6] == [0, 0, 0, 0, 0, 1, 0, 0]  # <s> from slot 5 to 6


def test_cli_documents_several_trees_or_one_doc_tree(capsys):
    two = masks_json(capsys, "(S (NP the bird NP) S) (S (VP sings VP) S)", "--segment-length", "4")
    assert two["trees"] == 2 and two["document_level"]
    tokens = [t for chunk in two["chunks"] for t in chunk["tokens"]]
    assert tokens == "<s> (S (NP the bird NP) NP) S) S) (S (VP sings VP) VP) S) S)".split()
    # The second sentence's (S (position 9, segment 2) sees <s> and the first sentence's composed root (7).
    chunk = two["chunks"][2]
    assert [chunk["memory_positions"][c] for c in range(4) if chunk["attention_mask"][1][c]] == [0, 7]
    ptb = masks_json(capsys, "(S (NP (DT the) (NN bird))) (S (VP (VBZ sings)))", "--segment-length", "4")
    assert [t for c in ptb["chunks"] for t in c["tokens"]] == tokens
    wrapped = masks_json(capsys, "(DOC (S (NP the bird NP) S) (S (VP sings VP) S) DOC)", "--segment-length", "4",
                         "--memory", "shift", "--memory-length", "6")
    assert wrapped["trees"] == 1 and not wrapped["document_level"]
    assert (wrapped["memory_length"], wrapped["memory_update"]) == (6, "shift")
    assert wrapped["chunks"][0]["tokens"][:3] == ["<s>", "(DOC", "(S"]
    assert wrapped["chunks"][2]["memory_positions"] == [2, 3, 4, 5, 6, 7]


def test_cli_segments_of_other_grammars_and_text_output(capsys):
    dtg = masks_json(capsys, "There/2 is/0 a/4 difference/2", "--grammar", "dtg", "--segment-length", "4")
    assert dtg["memory_update"] == "structure" and dtg["chunks"][0]["tokens"][0] == "<root>"
    cc = masks_json(capsys, FIGURE_2, "--grammar", "choe_charniak", "--segment-length", "4")
    assert cc["memory_update"] == "shift" and cc["chunks"][1]["memory_positions"] == [0, 1, 2, 3]
    assert main(["masks", FIGURE_2, "--segment-length", "8"]) == 0
    text = capsys.readouterr().out
    assert "segment 1: memory 5:0 6:1 7:6" in text
    assert "next memory: 6<-0 7<-12" in text


@pytest.mark.parametrize(("arguments", "message"), [
    # argparse's (hf_slm/option_types.py): the option named where it is parsed
    (["--segment-length", "0"], "argument --segment-length: expected a positive integer, got 0"),
    (["--segment-length", "4", "--memory-length", "-2"],
     "argument --memory-length: expected a non-negative integer, got -2"),
    (["--memory", "shift"], "give --segment-length too"),
    (["--segment-length", "4", "--png", "x.png"], "does not combine with --segment-length"),
    (["--segment-length", "4", "--grammar", "nb-dn-ex-m"], "has no segment recurrence"),
])
def test_cli_errors(arguments, message, capsys):
    try:
        code = main(["masks", FIGURE_2, *arguments])
    except SystemExit as stopped:  # argparse's own errors exit with 2
        code = stopped.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_cli_names_the_bad_tree_of_a_document(capsys):
    assert main(["masks", "(S (NP the bird NP) S) (S sings VP)", "--segment-length", "4"]) == 2
    assert "tree 1 of the document argument reads as an action sequence, but action 2 ('VP)')" in \
        capsys.readouterr().err
