"""Paper 003's compositional grammars (modeling/compositional_grammars.py): Figure 1's linearizations and Figure 3's
masks written out by hand, the step rules equal to the vectorized ones on random trees for all sixteen variants,
legality (binary trees, `</s>`, start positions in C_k), TG against nb-dn-in-m, registration and `hf-slm masks`."""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nltk import Tree
from tree_strategies import action_vocabulary_trees, assert_positions_equal_sequence

from hf_slm.families.action_vocab import ActionVocabulary
from hf_slm.cli import main
from hf_slm.families.mask_examples import unlabelled_actions as compositional_actions
from hf_slm.modeling.compositional_grammars import (COMPOSITIONAL_GRAMMAR_NAMES, COMPOSITIONAL_GRAMMARS,
                                                    compositional_grammar_class)
from hf_slm.families import get_grammar
from hf_slm.modeling.grammars import ActionKind, ActionLayout, PositionKind
from hf_slm.tokenization.linearizers import bottom_up_actions, bottom_up_pointers, top_down_actions
from hf_slm.tokenization.trees import left_binarize, normalize_tree, parse_tree, remove_unary_chains

NONE = -100
K = PositionKind
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def vocabulary(words):
    """Special tokens, the words, one `(` and one `)` (paper 003's trees are unlabeled)."""
    return ActionVocabulary(sorted(set(words)), [""])


def encoded(tree, name):
    """(vocabulary, ids, starts) of a tree under a variant (unary chains removed, binarized for bi)."""
    actions, starts = compositional_actions(tree, COMPOSITIONAL_GRAMMARS[name])
    vocab = vocabulary(tree.leaves())
    return vocab, [vocab.ids[action] for action in actions], starts


def run(name, action_string, starts=None):
    """Grammar and whole-sequence output for an action string written with `<s>` (and `</s>`)."""
    actions = action_string.split()
    vocab = vocabulary(a for a in actions if a not in ("<s>", "</s>", "(", ")"))
    grammar = get_grammar(name, vocab.layout)
    ids = [vocab.ids[a] for a in actions]
    return vocab, grammar, ids, grammar.sequence(ids, starts=starts)


def attended_sets(mask):
    return [set(np.flatnonzero(row).tolist()) for row in mask]


def tokens(vocab, ids):
    return " ".join(vocab.tokens[i] for i in ids)


# ---- paper 003, Figure 1: "Write an essay quickly" -----------------------------------------------------------

FIGURE_1 = normalize_tree(parse_tree("(S (VP (VB Write) (NP (DT an) (NN essay)) (ADVP (RB quickly))))"))


def test_figure_1_linearizations():
    """The four linearizations of Figure 1 (Nb / Bi x Dn / Up), with the arcs of the Nb-Up one: its first `)`
    starts at `an`, its second at `Write`. Bi-Up's starts are implied (the item below the top)."""
    expected = {
        "nb-dn": ("<s> ( Write ( an essay ) quickly )", [-1] * 9),
        "bi-dn": ("<s> ( ( Write ( an essay ) ) quickly )", [-1] * 11),
        "nb-up": ("<s> Write an essay ) quickly ) </s>", [-1, -1, -1, -1, 2, -1, 1, -1]),
        "bi-up": ("<s> Write an essay ) ) quickly ) </s>", [-1, -1, -1, -1, 2, 1, -1, 5, -1]),
    }
    for prefix, (actions, starts) in expected.items():
        for suffix in ("in-m", "in-nm", "ex-m", "ex-nm"):
            name = f"{prefix}-{suffix}"
            vocab, ids, found = encoded(FIGURE_1, name)
            assert (tokens(vocab, ids), found) == (actions, starts), name
            get_grammar(name, vocab.layout).validate(ids, starts=found)
    # Bi-Up takes its starts or none: the same sequence without them.
    vocab, ids, _ = encoded(FIGURE_1, "bi-up-ex-nm")
    get_grammar("bi-up-ex-nm", vocab.layout).validate(ids)


def test_figure_1_start_positions_are_the_feasible_sets():
    """Section 2.2: after `Write an essay` the first `)` may start at 1, 2 or 3 (C_k = {1, 2, 3}); after
    `Write an essay )[an] quickly` the second at Write, the closed `an essay` (its `)` at 4) or quickly."""
    vocab, ids, starts = encoded(FIGURE_1, "nb-up-ex-m")
    grammar = get_grammar("nb-up-ex-m", vocab.layout)
    state = grammar.start()
    for action, start in zip(ids[:4], starts):
        grammar.step(state, action, start=start)
    assert grammar.legal_starts(state).tolist() == [1, 2, 3]
    for action, start in zip(ids[4:6], starts[4:6]):
        grammar.step(state, action, start=start)
    assert grammar.legal_starts(state).tolist() == [1, 4, 5]
    assert grammar.legal_start_positions(state).tolist() == [1, 4, 5]  # Ex: one position per action
    inner = get_grammar("nb-up-in-m", vocab.layout)
    state = inner.start()
    for action, start in zip(ids[:6], starts[:6]):
        inner.step(state, action, start=start)
    assert inner.legal_starts(state).tolist() == [1, 4, 5]
    assert inner.legal_start_positions(state).tolist() == [1, 4, 6]  # In: the COMPOSE copy, after which a duplicate


def test_bottom_up_pointers():
    N = None
    actions, starts = bottom_up_actions(Tree.fromstring("(X (X a b) c)"))
    assert (actions, starts) == (["a", "b", ")", "c", ")"], [N, N, 0, N, 0])
    assert bottom_up_pointers(actions, starts) == [N, N, 0, N, 2]  # the root starts with the closed `a b )`
    # Figure 1's tree as the grammars read it: the unary chains (S over VP, ADVP over quickly) removed (section 2.1).
    assert bottom_up_pointers(*bottom_up_actions(remove_unary_chains(FIGURE_1))) == [N, N, N, 1, N, 0]
    with pytest.raises(ValueError, match=r"start 1 is not one of the feasible starts \[0, 3\]"):
        bottom_up_pointers(actions, [N, N, 0, N, 1])


# ---- paper 003, Figure 3: the binary tree of Figure 1 ------------------------------------------------------------
# Figure 3 draws `Write an essay ) )' ) )' quickly ) )'` (a) and `Write an essay S24 S14 quickly S15` (b); written out
# here by hand from the figure's colours and section 2.3-2.4, with our `<s>` at 0 (every position attends it) and the
# bottom-up `</s>` at the end. Rows are the attending positions. Orange (COMPOSE rows) is the same under M and Nm;
# light blue (composed positions, Nm only) is the difference of the two.

FIGURE_3A = "<s> Write an essay ) ) quickly ) </s>"  # (a) internal: each `)` expands to `)` and `)'`


def test_figure_3a_internal_composition_masks():
    vocab, _, _, masked = run("bi-up-in-m", FIGURE_3A)
    assert tokens(vocab, masked.input_ids) == "<s> Write an essay ) ) ) ) quickly ) ) </s>"
    assert [K(k) for k in masked.position_kinds] == [
        K.BOS, K.TERMINAL, K.TERMINAL, K.TERMINAL, K.CLOSE_COMPOSE, K.CLOSE_STACK, K.CLOSE_COMPOSE, K.CLOSE_STACK,
        K.TERMINAL, K.CLOSE_COMPOSE, K.CLOSE_STACK, K.EOS]
    compose = {4: {2, 3, 4}, 6: {1, 4, 6}, 9: {6, 8, 9}}  # orange: an essay; Write S24; S14 quickly
    m_rows = [
        {0},                    # <s>
        {0, 1},                 # Write
        {0, 1, 2},              # an
        {0, 1, 2, 3},           # essay
        compose[4],             # )  composes an, essay
        {0, 1, 4, 5},           # )' an, essay masked
        compose[6],             # )  composes Write, S24
        {0, 6, 7},              # )'
        {0, 6, 8},              # quickly
        compose[9],             # )  composes S14, quickly
        {0, 9, 10},             # )'
        {0, 9, 11},             # </s>
    ]
    assert attended_sets(masked.attention_mask) == m_rows
    _, _, _, unmasked = run("bi-up-in-nm", FIGURE_3A)
    nm_rows = attended_sets(unmasked.attention_mask)
    light_blue = {i: nm_rows[i] - m_rows[i] for i in range(12) if nm_rows[i] != m_rows[i]}
    # Already composed positions stay visible under Nm (after S15: Write, an, essay, S24, S14's `)` 6 and quickly);
    # the duplicates 5, 7, 10 never are.
    assert light_blue == {5: {2, 3}, 7: {1, 2, 3, 4}, 8: {1, 2, 3, 4}, 10: {1, 2, 3, 4, 6, 8},
                          11: {1, 2, 3, 4, 6, 8}}
    assert all(nm_rows[i] == compose[i] for i in compose)  # M or Nm does not change the composition rows
    for sequence in (masked, unmasked):
        assert tokens(vocab, [t for t in sequence.labels if t != NONE]) == "Write an essay ) ) quickly ) </s>"
        assert (sequence.labels[[4, 6, 9]] == NONE).all()  # COMPOSE rows predict nothing
        assert sequence.position_coordinates.tolist() == list(range(12))  # the step each copy is input at


def test_figure_3b_external_composition_masks():
    vocab, grammar, ids, masked = run("bi-up-ex-m", FIGURE_3A)
    assert tokens(vocab, masked.input_ids) == FIGURE_3A
    assert attended_sets(masked.attention_mask) == [
        {0},                    # <s>
        {0, 1},                 # Write
        {0, 1, 2},              # an
        {0, 1, 2, 3},           # essay
        {0, 1, 4},              # S24 = f(an, essay): an, essay masked
        {0, 5},                 # S14 = f(Write, S24)
        {0, 5, 6},              # quickly
        {0, 7},                 # S15 = f(S14, quickly)
        {0, 7, 8},              # </s>
    ]
    # The caption's compositions: S_{2,4} = f(an, essay), S_{1,4} = f(Write, S_{2,4}), S_{1,5} = f(S_{1,4}, quickly).
    children = {i: np.flatnonzero(row).tolist() for i, row in enumerate(masked.composition_children) if row.any()}
    assert children == {4: [2, 3], 5: [1, 4], 7: [5, 6]}
    assert masked.composition_level.tolist() == [-1, 0, 0, 0, 1, 2, 0, 3, -1]
    state, extra = grammar.start(), {}
    for action in ids:
        for position in grammar.step(state, action):
            if position.extra_inputs:
                extra[int(position.coordinate)] = list(position.extra_inputs)
    assert extra == children
    _, unmasked_grammar, _, unmasked = run("bi-up-ex-nm", FIGURE_3A)
    assert (unmasked.attention_mask == np.tril(np.ones((9, 9), dtype=bool))).all()  # Ex + Nm: causal
    assert unmasked_grammar.causal and not grammar.causal


def test_figure_3_trees_top_down():
    """The same tree top-down, by the same rules (not drawn in the paper): a COMPOSE row also attends its `(`,
    and under M a composed `(` is masked with the children."""
    vocab, _, _, seq = run("bi-dn-in-m", "<s> ( ( Write ( an essay ) ) quickly )")
    assert tokens(vocab, seq.input_ids) == "<s> ( ( Write ( an essay ) ) ) ) quickly ) )"
    assert attended_sets(seq.attention_mask) == [
        {0}, {0, 1}, {0, 1, 2}, {0, 1, 2, 3}, {0, 1, 2, 3, 4}, {0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5, 6},
        {4, 5, 6, 7},           # ) composes ( an essay
        {0, 1, 2, 3, 7, 8},     # )'
        {2, 3, 7, 9},           # ) composes ( Write S
        {0, 1, 9, 10},          # )'
        {0, 1, 9, 11},          # quickly
        {1, 9, 11, 12},         # ) composes the root
        {0, 12, 13},            # )'
    ]
    _, _, _, seq = run("bi-dn-ex-m", "<s> ( ( Write ( an essay ) ) quickly )")
    assert attended_sets(seq.attention_mask)[7:] == [{0, 1, 2, 3, 7}, {0, 1, 8}, {0, 1, 8, 9}, {0, 10}]
    _, _, _, seq = run("bi-dn-in-nm", "<s> ( ( Write ( an essay ) ) quickly )")
    assert attended_sets(seq.attention_mask)[13] == set(range(14)) - {8, 10}  # all but the duplicates


def test_non_binary_figure_tree_with_starts():
    """Figure 1's non-binary tree bottom-up: the root composes Write, the closed `an essay` and quickly."""
    vocab, grammar, ids, seq = run("nb-up-in-m", "<s> Write an essay ) quickly ) </s>", [-1, -1, -1, -1, 2, -1, 1, -1])
    assert attended_sets(seq.attention_mask) == [
        {0}, {0, 1}, {0, 1, 2}, {0, 1, 2, 3}, {2, 3, 4}, {0, 1, 4, 5}, {0, 1, 4, 6}, {1, 4, 6, 7}, {0, 7, 8},
        {0, 7, 9}]
    # The position that predicts each `)` points at its start item (its position: a token, a COMPOSE copy).
    assert seq.start_labels.tolist() == [NONE, NONE, NONE, 2, NONE, NONE, 1, NONE, NONE, NONE]
    assert attended_sets(seq.start_candidates)[3] == {1, 2, 3} and attended_sets(seq.start_candidates)[6] == {1, 4, 6}
    assert not seq.start_candidates[[4, 9]].any()  # COMPOSE and `</s>` rows predict nothing
    _, _, _, seq = run("nb-up-ex-m", "<s> Write an essay ) quickly ) </s>", [-1, -1, -1, -1, 2, -1, 1, -1])
    children = {i: np.flatnonzero(row).tolist() for i, row in enumerate(seq.composition_children) if row.any()}
    assert children == {4: [2, 3], 6: [1, 4, 5]}
    assert attended_sets(seq.attention_mask)[4:] == [{0, 1, 4}, {0, 1, 4, 5}, {0, 6}, {0, 6, 7}]


# ---- TG is Nb-Dn-In-M over labeled trees -----------------------------------------------------------------------

WORDS = ["the", "a", "bird", "sings", "of", "x"]


def small_trees(max_leaves=30):
    leaf = st.sampled_from(WORDS)
    node = st.recursive(leaf, lambda kids: st.builds(lambda k: Tree("X", k), st.lists(kids, min_size=1, max_size=5)),
                        max_leaves=max_leaves)
    return st.builds(lambda k: Tree("X", k), st.lists(node, min_size=1, max_size=5))


@settings(max_examples=300, **SETTINGS)
@given(small_trees())
def test_tg_and_nb_dn_in_m_agree_on_unlabeled_trees(tree):
    """Over one `(` and one `)`, TG and nb-dn-in-m read the same sequences (unary chains included) with the same
    masks, kinds and labels; what differs is the positions: TG's relative positions are depth differences (its
    coordinates depths), nb-dn-in-m's are i - j of absolute positions."""
    vocab = vocabulary(WORDS)
    actions, _ = compositional_actions(tree, COMPOSITIONAL_GRAMMARS["nb-dn-in-m"])
    with_unary = ["<s>"] + ["(" if a.startswith("(") else a for a in top_down_actions(tree, labeled=False)]
    for sequence in (actions, with_unary):
        ids = [vocab.ids[a] for a in sequence]
        tg, ours = get_grammar("tg", vocab.layout), get_grammar("nb-dn-in-m", vocab.layout)
        a, b = tg.sequence(ids), ours.sequence(ids)
        for field in ("input_ids", "position_kinds", "attention_mask", "labels"):
            assert (getattr(a, field) == getattr(b, field)).all(), field
        n = len(b.input_ids)
        i, j = np.indices((n, n))
        assert (b.relative_positions == np.where(b.attention_mask, i - j, 0)).all()
        assert (a.relative_positions == np.where(a.attention_mask, a.depth[:, None] - a.depth[None, :], 0)).all()
        assert b.position_coordinates.tolist() == list(range(n)) and a.position_coordinates.tolist() == a.depth.tolist()
        state_a, state_b = tg.start(), ours.start()
        for action in ids:
            assert (tg.legal_actions(state_a) == ours.legal_actions(state_b)).all()
            tg.step(state_a, action)
            ours.step(state_b, action)
        assert not ours.legal_actions(state_b).any() and not tg.legal_actions(state_a).any()


# ---- every variant: the step rules equal the vectorized ones ---------------------------------------------------

def expected_compositions(tree, name):
    """From the tree alone: for each `)`, the position that holds its composition (In: the COMPOSE copy) and the
    positions of its `(` (Dn; None otherwise) and of its direct children, in order."""
    top_down, internal = "-dn-" in name, "-in-" in name
    rows, position = {}, 1  # after <s>

    def visit(node):
        nonlocal position
        if isinstance(node, str):
            position += 1
            return position - 1
        opening = None
        if top_down:
            opening, position = position, position + 1
        children = [visit(child) for child in node]
        here = position
        position += 2 if internal else 1
        rows[here] = (opening, children)
        return here

    visit(tree)
    return rows


def variant_tree(tree, name):
    return remove_unary_chains(left_binarize(tree) if name.startswith("bi") else tree)


def step_through(grammar, ids, starts, sentence_ends=None):
    """The NewPositions of a sequence, checking that legal_actions / legal_starts allow each action, and each
    predicting position's C_k (the positions of legal_starts) before the next action. A sentence ends the
    sequence; a document (`sentence_ends`: the index of each sentence's last action) is complete exactly after
    them and may go on."""
    state, positions, candidates = grammar.start(), [], {}
    close = grammar.layout.close_nt_start
    for index, (action, start) in enumerate(zip(ids, starts)):
        assert grammar.legal_actions(state)[action]
        if positions:
            candidates[len(positions) - 1] = set(grammar.legal_start_positions(state).tolist())
        if action == close and not grammar.top_down:
            assert start in grammar.legal_starts(state).tolist()
        positions += grammar.step(state, action, start=start)
        if sentence_ends is not None:
            assert grammar.is_complete(state) == (index in sentence_ends)
    if sentence_ends is None:
        assert grammar.is_complete(state) and not grammar.legal_actions(state).any()
    else:  # another sentence may follow: a root's `(` (Dn) or a first word (Up)
        legal_kinds = set(grammar.layout.kinds(np.flatnonzero(grammar.legal_actions(state))).tolist())
        assert legal_kinds == {ActionKind.OPEN_NT if grammar.top_down else ActionKind.TERMINAL}
        candidates[len(positions) - 1] = set(grammar.legal_start_positions(state).tolist())
    return positions, candidates


def assert_step_equals_batch(grammar, tree, ids, starts, seq):
    positions, candidates = step_through(grammar, ids, starts)
    assert_positions_equal_sequence(positions, seq, NONE)
    n = len(positions)
    assert [p.coordinate for p in positions] == seq.position_coordinates.tolist() == list(range(n))
    assert not np.triu(seq.attention_mask, 1).any() and seq.attention_mask.diagonal().all()
    compositions = expected_compositions(variant_tree(tree, grammar.name), grammar.name)
    if grammar.internal:
        compose_rows = {i: set(np.flatnonzero(seq.attention_mask[i])) for i in np.flatnonzero(seq.position_kinds == K.CLOSE_COMPOSE)}
        assert compose_rows == {i: {o for o in [opening] if o is not None} | set(kids) | {i}
                                for i, (opening, kids) in compositions.items()}
    else:
        extra = {i: list(p.extra_inputs) for i, p in enumerate(positions) if p.extra_inputs}
        assert extra == {i: kids for i, (_, kids) in compositions.items()}
        assert extra == {i: np.flatnonzero(row).tolist() for i, row in enumerate(seq.composition_children) if row.any()}
    if not grammar.masked:  # Nm: everything but the duplicates (Ex: nothing at all) stays visible
        duplicate = (seq.position_kinds == K.CLOSE_STACK) & grammar.internal
        expected = np.tril(np.ones((n, n), dtype=bool)) & ~duplicate[None, :] | np.eye(n, dtype=bool)
        rows = seq.position_kinds != K.CLOSE_COMPOSE
        assert (seq.attention_mask[rows] == expected[rows]).all()
    if grammar.takes_start:
        assert {i: set(np.flatnonzero(row).tolist()) for i, row in enumerate(seq.start_candidates)
                if i in candidates} == candidates
        assert not seq.start_candidates[[i for i in range(n) if i not in candidates]].any()
        closes = [i for i, p in enumerate(positions) if p.predicts and i + 1 < n and positions[i + 1].input_id ==
                  grammar.layout.close_nt_start]
        assert sorted(np.flatnonzero(seq.start_labels != NONE).tolist()) == closes


@settings(max_examples=250, **SETTINGS)
@given(action_vocabulary_trees(max_nodes=60))
def test_step_rules_equal_vectorized_for_every_variant(tree):
    for name in COMPOSITIONAL_GRAMMAR_NAMES:
        vocab, ids, starts = encoded(tree, name)
        grammar = get_grammar(name, vocab.layout)
        assert_step_equals_batch(grammar, tree, ids, starts, grammar.sequence(ids, starts=starts))


@settings(max_examples=60, **SETTINGS)
@given(st.lists(small_trees(max_leaves=10), min_size=1, max_size=4))
def test_document_step_rules_equal_vectorized_for_every_variant(trees):
    """Documents: the step form equals the whole-sequence form (masks, kinds, labels, Nb-Up's C_k and start
    labels) for all sixteen variants, and the sequence is complete exactly at each sentence's end."""
    vocab = vocabulary(WORDS)
    for name in COMPOSITIONAL_GRAMMAR_NAMES:
        grammar = get_grammar(name, vocab.layout, document_level=True)
        actions, starts = document_actions(trees, name)
        ids = [vocab.ids[a] for a in actions]
        ends, length = set(), 0
        for tree in trees:
            length += len(document_actions([tree], name)[0]) - 1
            ends.add(length)
        positions, candidates = step_through(grammar, ids, starts, sentence_ends=ends)
        seq = grammar.sequence(ids, starts=starts)
        assert_positions_equal_sequence(positions, seq, NONE)
        if grammar.takes_start:
            assert {i: set(np.flatnonzero(row).tolist()) for i, row in enumerate(seq.start_candidates)
                    if i in candidates} == candidates


@settings(max_examples=60, **SETTINGS)
@given(st.lists(small_trees(), min_size=1, max_size=6), st.sampled_from(COMPOSITIONAL_GRAMMAR_NAMES))
def test_batch_equals_one_at_a_time(trees, name):
    vocab = vocabulary(WORDS)
    encoded_trees = [compositional_actions(tree, COMPOSITIONAL_GRAMMARS[name]) for tree in trees]
    sequences = [[vocab.ids[a] for a in actions] for actions, _ in encoded_trees]
    starts = [s for _, s in encoded_trees]
    grammar = get_grammar(name, vocab.layout)
    batch = grammar.batch(sequences, starts=starts, pad_to_multiple_of=8)
    for row, (ids, start) in enumerate(zip(sequences, starts)):
        alone = grammar.sequence(ids, starts=start)
        n = len(alone.input_ids)
        for field, value in vars(alone).items():
            if value is None:
                assert field not in batch
            elif value.ndim == 2:
                assert (batch[field][row, :n, :n] == value).all(), field
                assert not batch[field][row, :n, n:].any() or field == "relative_positions"
            else:
                assert (batch[field][row, :n] == value).all(), field
        assert (batch["attention_mask"][row, n:] == np.eye(batch["input_ids"].shape[1], dtype=bool)[n:]).all()
        assert (batch["labels"][row, n:] == NONE).all()


@settings(max_examples=400, **SETTINGS)
@given(st.lists(st.tuples(small_trees(max_leaves=12), st.integers(0, 10**6)), min_size=1, max_size=4),
       st.sampled_from(COMPOSITIONAL_GRAMMAR_NAMES), st.sampled_from(["delete", "swap", "replace", "start"]))
def test_vectorized_validation_agrees_with_legal_actions_and_starts(cases, name, edit):
    """Corrupt valid sequences (and starts); the vectorized check of a batch must accept exactly what
    legal_actions and legal_starts accept, action by action, for whole sequences and prefixes."""
    grammar = get_grammar(name, vocabulary(WORDS).layout)
    assert_corruptions_agree(grammar, [(*compositional_actions(tree, COMPOSITIONAL_GRAMMARS[name]), seed)
                                       for tree, seed in cases], edit)


@settings(max_examples=300, **SETTINGS)
@given(st.lists(st.tuples(st.lists(small_trees(max_leaves=8), min_size=1, max_size=3), st.integers(0, 10**6)),
                min_size=1, max_size=4),
       st.sampled_from(COMPOSITIONAL_GRAMMAR_NAMES), st.sampled_from(["delete", "swap", "replace", "start", "none"]))
def test_document_validation_agrees_with_legal_actions_and_starts(cases, name, edit):
    """The same for documents (document_level=True): several sentences after one `<s>`, bottom-up each ended by
    `</s>`; a corrupted document is refused exactly where the step rules refuse it (a start in an earlier
    sentence, a `)` or `</s>` right after `</s>`, a Bi `)` over the last sentence's constituent...)."""
    grammar = get_grammar(name, vocabulary(WORDS).layout, document_level=True)
    assert_corruptions_agree(grammar, [(*document_actions(trees, name), seed) for trees, seed in cases], edit)


def document_actions(trees, name):
    """(actions, starts) of a document: `<s>`, then each tree's actions as a sentence gives them (bottom-up with
    its `</s>`), its starts moved by the actions before it."""
    actions, starts = ["<s>"], [-1]
    for tree in trees:
        tree_actions, tree_starts = compositional_actions(tree, COMPOSITIONAL_GRAMMARS[name])
        offset = len(actions) - 1
        actions += tree_actions[1:]
        starts += [start + offset if start >= 0 else -1 for start in tree_starts[1:]]
    return actions, starts


def assert_corruptions_agree(grammar, cases, edit):
    """cases: (actions, starts, seed); each is corrupted by `edit` at a seeded place and cut to a seeded prefix
    or kept whole; the vectorized validation must agree with `legal_by_steps` on every one."""
    vocab = vocabulary(WORDS)
    sequences, all_starts, completes = [], [], []
    for actions, starts, seed in cases:
        ids = [vocab.ids[a] for a in actions]
        rng = np.random.default_rng(seed)
        k = int(rng.integers(0, len(ids)))
        if edit == "delete":
            del ids[k], starts[k]
        elif edit == "swap" and k + 1 < len(ids):
            ids[k], ids[k + 1], starts[k], starts[k + 1] = ids[k + 1], ids[k], starts[k + 1], starts[k]
        elif edit == "replace":
            ids[k] = int(rng.integers(0, len(vocab.tokens) + 1))  # one past the vocabulary too
        elif edit == "start":
            starts[k] = int(rng.integers(-1, len(ids) + 1))
        cut = int(rng.integers(1, len(ids) + 1)) if len(ids) else 0
        complete = bool(rng.integers(0, 2))
        if ids:
            sequences.append(ids if complete else ids[:cut])
            all_starts.append(starts if complete else starts[:cut])
            completes.append(complete)
    if not sequences:
        return
    expected = [legal_by_steps(grammar, ids, starts, complete)
                for ids, starts, complete in zip(sequences, all_starts, completes)]
    for complete in (True, False):
        found = grammar.valid_sequences(sequences, complete, starts=all_starts).tolist()
        assert found == [legal_by_steps(grammar, ids, starts, complete) for ids, starts in zip(sequences, all_starts)]
    for ids, starts, complete, ok in zip(sequences, all_starts, completes, expected):
        if ok:
            grammar.validate(ids, require_complete=complete, starts=starts)
        else:
            with pytest.raises(ValueError):
                grammar.validate(ids, require_complete=complete, starts=starts)


def legal_by_steps(grammar, ids, starts, complete):
    state = grammar.start()
    for action, start in zip(ids, starts):
        if not (0 <= action < grammar.vocab_size and grammar.legal_actions(state)[action]):
            return False
        if action == grammar.layout.close_nt_start and not grammar.top_down:
            if start not in grammar.legal_starts(state).tolist() and (grammar.takes_start or start >= 0):
                return False
        elif start >= 0:
            return False
        grammar.step(state, action, start=start)
    return grammar.is_complete(state) or not complete


# ---- legality ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, actions, starts, message", [
    ("bi-dn-in-m", "<s> ( a b c )", None, r"action 4 \(id \d+, TERMINAL\) is not allowed here \(the constituent has "
                                          r"its two children: a binary tree closes it now\); expected CLOSE_NT"),
    ("bi-dn-ex-nm", "<s> ( ( a ) b )", None, r"action 4 .* \(a binary tree's constituent closes with two children; "
                                             r"this one has 1\)"),
    ("nb-dn-in-m", "<s> ( )", None, r"action 2 \(id \d+, CLOSE_NT\) is not allowed here; expected OPEN_NT, TERMINAL"),
    ("nb-dn-ex-m", "<s> ( a ) ( b )", None, "expected nothing"),
    ("nb-dn-in-nm", "<s> ( a ) </s>", None, "EOS.* not allowed"),
    ("nb-dn-in-m", "<s> ( a )", [-1, -1, -1, 1], r"action 3 \(id \d+, CLOSE_NT\) takes no start position, got 1"),
    ("bi-up-in-m", "<s> a ) b", None, r"action 3 .* \(a one-word sentence ends after its `\)`\); expected EOS"),
    ("bi-up-ex-m", "<s> a b ) ) </s>", None, r"action 4 .* \(a binary tree's `\)` closes the top two items; the "
                                             r"stack holds 1\)"),
    ("bi-up-in-nm", "<s> a b c ) ) </s>", [-1, -1, -1, -1, 1, -1, -1],
     r"action 4 .*: start 1 is not the implied one; a binary tree's `\)` closes the top two items, from 2"),
    ("nb-up-in-m", "<s> a b ) </s>", None, r"action 3 .* needs a start position \(paper 003, section 2.2\): one of "
                                           r"the feasible starts C_k = \[1, 2\]"),
    ("nb-up-ex-m", "<s> a b c ) ) </s>", [-1, -1, -1, -1, 2, 2, -1],
     r"action 5 .*: start 2 is not a feasible start position; expected one of C_k = \[1, 4\]"),
    ("nb-up-ex-nm", "<s> a b ) </s>", [-1, -1, -1, 0, -1], r"start 0 is not a feasible start position"),
    ("nb-up-in-nm", "<s> a b ) </s>", [-1, -1, -1, 3, -1], r"start 3 is not a feasible start position"),
    ("nb-up-in-m", "<s> a b ) </s>", [-1, 1, -1, 1, -1], r"action 1 \(id \d+, TERMINAL\) takes no start position"),
    ("nb-up-ex-m", "<s> a b </s>", None, r"\(`</s>` ends the sequence once one constituent spans all its words\)"),
    ("nb-up-ex-m", "<s> a b ) c </s>", [-1, -1, -1, 2, -1, -1], r"action 5 .*`</s>` ends the sequence once"),
    ("bi-up-in-m", "<s> a ( b", None, r"\(a bottom-up sequence has no `\(`\)"),
    ("bi-up-ex-nm", "<s> a b )", None, r"ends before it is complete \(a bottom-up sequence ends with `</s>`\)"),
    ("nb-dn-ex-m", "<s> ( a ( b )", None, "ends before it is complete"),
])
def test_illegal_sequences_are_refused_with_reasons(name, actions, starts, message):
    vocab = vocabulary(["a", "b", "c"])
    ids = [vocab.ids[a] for a in actions.split()]
    grammar = get_grammar(name, vocab.layout)
    assert not grammar.valid_sequences([ids], starts=None if starts is None else [starts])[0]
    with pytest.raises(ValueError, match=f"{name} grammar: .*{message}"):
        grammar.sequence(ids, starts=starts)


def test_one_word_sentences():
    """A one-word tree is `(X w)`: the one constituent with a single child that a binary tree may have."""
    vocab = vocabulary(["w"])
    tree = Tree.fromstring("(X w)")
    for name in COMPOSITIONAL_GRAMMAR_NAMES:
        _, ids, starts = encoded(tree, name)
        grammar = get_grammar(name, vocab.layout)
        assert_step_equals_batch(grammar, tree, ids, starts, grammar.sequence(ids, starts=starts))
    assert tokens(vocab, encoded(tree, "bi-up-in-m")[1]) == "<s> w ) </s>"
    # A unary constituent elsewhere is no binary tree's; a non-binary tree may have one (C_k holds the top item).
    up = [vocab.ids[a] for a in "<s> w w ) ) </s>".split()]
    assert not get_grammar("bi-up-ex-m", vocab.layout).valid_sequences([up])[0]
    # The inner `)` closes the second w alone (start 2), the root the first w and that constituent (start 1).
    assert get_grammar("nb-up-ex-m", vocab.layout).valid_sequences([up], starts=[[-1, -1, -1, 2, 1, -1]])[0]
    down = [vocab.ids[a] for a in "<s> ( ( w ) w )".split()]
    assert not get_grammar("bi-dn-in-m", vocab.layout).valid_sequences([down])[0]
    assert get_grammar("nb-dn-in-m", vocab.layout).valid_sequences([down])[0]


def test_batch_errors_name_the_sequence():
    vocab = vocabulary(["a", "b"])
    grammar = get_grammar("nb-up-in-m", vocab.layout)
    good = [vocab.ids[a] for a in "<s> a b ) </s>".split()]
    with pytest.raises(ValueError, match=r"sequence 1: nb-up-in-m grammar: action 3 .* needs a start position"):
        grammar.batch([good, good], starts=[[-1, -1, -1, 1, -1], [-1] * 5])
    with pytest.raises(ValueError, match="sequence 0 has 5 actions but 4 starts"):
        grammar.batch([good], starts=[[-1] * 4])
    with pytest.raises(ValueError, match="expands to 6 positions under the nb-up-in-m grammar; the maximum is 5"):
        grammar.batch([good], starts=[[-1, -1, -1, 1, -1]], max_length=5)
    with pytest.raises(ValueError, match="expected at least one sequence"):
        grammar.batch([])


def test_layouts_and_document_level():
    labeled = ActionVocabulary.from_action_sequences([["(S", "(NP", "a", "NP)", "S)"]]).layout
    with pytest.raises(ValueError, match=r"paper 003's trees are unlabeled: expected one `\)` id, the layout has 2"):
        get_grammar("nb-up-ex-m", labeled)
    no_open = ActionLayout(0, 1, 2, 5, 5, 5, 6, unk_token_id=3)
    get_grammar("bi-up-in-m", no_open)  # bottom-up needs no `(`
    with pytest.raises(ValueError, match=r"expected one `\(` id, the layout has 0"):
        get_grammar("bi-dn-in-m", no_open)
    vocab = vocabulary(["a", "b"])
    # Top-down documents: roots are children of <s>, as in TG; the second sentence sees the first one composed.
    ids = [vocab.ids[a] for a in "<s> ( a b ) ( b ( a b ) )".split()]
    for name in ("nb-dn-in-m", "bi-dn-ex-nm", "bi-dn-in-nm"):
        grammar = get_grammar(name, vocab.layout, document_level=True)
        seq = grammar.sequence(ids)
        state, positions = grammar.start(), []
        for k, action in enumerate(ids):
            positions += grammar.step(state, action)
            assert grammar.is_complete(state) == (k in (4, len(ids) - 1))
        mask = np.zeros_like(seq.attention_mask)
        for row, position in enumerate(positions):
            mask[row, position.attended] = True
        assert (mask == seq.attention_mask).all()
        assert grammar.legal_actions(state)[vocab.ids["("]]  # another sentence may follow
    seq = get_grammar("nb-dn-in-m", vocab.layout, document_level=True).sequence(ids)
    assert attended_sets(seq.attention_mask)[6] == {0, 4, 6}  # `(` of sentence 2: <s>, sentence 1's composition


def test_bottom_up_documents_by_hand():
    """`<s> a b ) </s> b a ) </s>` under nb-up-in-m, written out: the first `</s>` stays visible and predicts the
    next sentence's first word; the second sentence sees the first through its composition; its `)` may start
    at its own words only; the sequence is complete after each `</s>`."""
    vocab = vocabulary(["a", "b"])
    grammar = get_grammar("nb-up-in-m", vocab.layout, document_level=True)
    ids = [vocab.ids[a] for a in "<s> a b ) </s> b a ) </s>".split()]
    starts = [-1, -1, -1, 1, -1, -1, -1, 5, -1]
    seq = grammar.sequence(ids, starts=starts)
    assert attended_sets(seq.attention_mask) == [
        {0}, {0, 1}, {0, 1, 2}, {1, 2, 3}, {0, 3, 4}, {0, 3, 5}, {0, 3, 5, 6}, {0, 3, 5, 6, 7}, {6, 7, 8},
        {0, 3, 5, 8, 9}, {0, 3, 5, 8, 10}]
    assert seq.labels[5] == vocab.ids["b"] and seq.labels[10] == NONE
    assert set(np.flatnonzero(seq.start_candidates[7])) == {6, 7}  # not sentence 1's composition (3)
    with pytest.raises(ValueError, match=r"start 3 is not a feasible start position; expected one of C_k = \[5, 6\]"):
        grammar.validate(ids, starts=[-1, -1, -1, 1, -1, -1, -1, 3, -1])
    state = grammar.start()
    complete = []
    for action, start in zip(ids, starts):
        grammar.step(state, action, start=start)
        complete.append(grammar.is_complete(state))
    assert complete == [False, False, False, False, True, False, False, False, True]
    # Bi-Up: a `)` closes the top two items of its own sentence, never the last sentence's constituent.
    binary = get_grammar("bi-up-in-m", vocab.layout, document_level=True)
    binary.validate([vocab.ids[a] for a in "<s> a b ) </s> b a ) </s> a ) </s>".split()])
    with pytest.raises(ValueError, match="CLOSE_NT.* is not allowed here"):
        binary.validate([vocab.ids[a] for a in "<s> a b ) </s> b a ) ) </s>".split()])
    with pytest.raises(ValueError, match=r"action 5 .*CLOSE_NT.* is not allowed here"):  # a new sentence's word first
        grammar.validate([vocab.ids[a] for a in "<s> a b ) </s> )".split()], require_complete=False,
                         starts=[-1, -1, -1, 1, -1, 3])


def test_minimum_positions_match_the_smallest_trees():
    for name in COMPOSITIONAL_GRAMMAR_NAMES:
        for count in range(1, 6):
            flat = Tree("X", WORDS[:count])  # one constituent; binarized: count - 1 of them
            vocab, ids, starts = encoded(flat, name)  # ids of the tree's own vocabulary: the grammar must share it
            grammar = get_grammar(name, vocab.layout)
            assert grammar.minimum_positions(count, count) == len(grammar.sequence(ids, starts=starts).input_ids)


# ---- registration, the CLI -------------------------------------------------------------------------------------

def test_every_variant_is_registered():
    from hf_slm.cli.commands import build_parser

    masks = build_parser()._subparsers._group_actions[0].choices["masks"]
    [grammar] = [action for action in masks._actions if action.dest == "grammar"]
    assert set(COMPOSITIONAL_GRAMMAR_NAMES) <= set(grammar.choices) and len(set(COMPOSITIONAL_GRAMMAR_NAMES)) == 16
    vocab = vocabulary(["a"])
    for name in COMPOSITIONAL_GRAMMAR_NAMES:
        tree, order, composition, masking = name.split("-")
        grammar = get_grammar(name, vocab.layout)
        assert type(grammar) is compositional_grammar_class(name) and grammar.name == name
        assert grammar.duplicates_closing == (composition == "in") == grammar.internal
        assert grammar.external_composition == (composition == "ex")
        assert grammar.causal == (composition == "ex" and masking == "nm")
        assert grammar.uses_eos == (order == "up") and grammar.takes_start == (tree == "nb" and order == "up")
        assert grammar.linearization == f"{tree}-{order}"
    for unknown in ("bi-up-ex-x", "Bi-Up-Ex-Nm", "bi-up"):
        with pytest.raises(ValueError) as error:
            get_grammar(unknown, vocab.layout)
        assert all(repr(name) in str(error.value) for name in COMPOSITIONAL_GRAMMAR_NAMES)
        with pytest.raises(ValueError, match=r"unknown compositional grammar .*\{bi,nb\}-\{dn,up\}"):
            compositional_grammar_class(unknown)


def test_masks_cli_prints_a_variant(capsys):
    assert main(["masks", "--grammar", "bi-up-ex-nm", "(X (X the bird) (X sings))", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # (X sings) is a unary chain over a word: removed (section 2.1), so the tree is ((the bird) sings).
    assert report["tokens"] == "<s> the bird ) sings ) </s>".split()
    assert report["attention_mask"] == np.tril(np.ones((7, 7), dtype=int)).tolist()  # Ex + Nm: causal
    assert report["labels"] == "the bird ) sings ) </s>".split() + [None]
    assert main(["masks", "--grammar", "nb-up-in-m", "(S (VP (VB Write) (NP (DT an) (NN essay)) (ADVP (RB quickly))))"]) == 0
    text = capsys.readouterr().out
    assert "close_compose" in text and "start 2" in text and "start 1" in text
    assert main(["masks", "--grammar", "bi-up-ex-m", "(X (X the bird) (X sings))"]) == 0
    assert "composes 1 2" in capsys.readouterr().out


def test_masks_cli_shows_the_gpt2_baselines(capsys, tmp_path):
    """Paper 003's baselines through their family record's tree formats: GPT2-token reads the words (plain causal
    mask over `<s>`, the words and `</s>`), GPT2-tree the Nb-Dn actions of the unlabelled tree (plain causal mask over
    them, where Nb-Dn-In-M masks composed children)."""
    tree = "(S (NP (DT the) (NN bird)) (VP (VBZ sings)))"
    assert main(["masks", "--grammar", "gpt2-token", tree, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tokens"] == "<s> the bird sings </s>".split()
    assert report["attention_mask"] == np.tril(np.ones((5, 5), dtype=int)).tolist()
    assert report["relative_positions"][4] == [4, 3, 2, 1, 0]
    assert report["labels"] == "the bird sings </s>".split() + [None]
    assert main(["masks", "--grammar", "gpt2-tree", tree, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # (VP sings) is a unary chain over a word: removed, as Nb-Dn removes it
    assert report["tokens"] == "<s> ( ( the bird ) sings )".split()
    assert report["attention_mask"] == np.tril(np.ones((8, 8), dtype=int)).tolist()
    assert report["kinds"][5] == "close_stack" and report["labels"][-1] is None
    assert main(["masks", "--grammar", "nb-dn-in-m", tree, "--json"]) == 0
    composed = json.loads(capsys.readouterr().out)
    assert [t for t in composed["tokens"] if t != ")"] == [t for t in report["tokens"] if t != ")"]
    assert composed["attention_mask"] != np.tril(np.ones_like(composed["attention_mask"])).tolist()
    png = tmp_path / "gpt2-tree.png"
    assert main(["masks", "--grammar", "gpt2-tree", tree, "--png", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_masks_cli_json_of_figure_3a_matches_the_grammar(capsys):
    assert main(["masks", "--grammar", "bi-up-in-m", "(X (X Write (X an essay)) quickly)", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    _, _, _, seq = run("bi-up-in-m", FIGURE_3A)
    assert report["attention_mask"] == seq.attention_mask.astype(int).tolist()
    assert report["kinds"][4:6] == ["close_compose", "close_stack"]


def test_action_kinds_of_the_unlabeled_vocabulary():
    vocab = vocabulary(["a"])
    layout = vocab.layout
    assert [layout.kind(vocab.ids[t]) for t in ("<s>", "(", "a", ")", "</s>")] == [
        ActionKind.BOS, ActionKind.OPEN_NT, ActionKind.TERMINAL, ActionKind.CLOSE_NT, ActionKind.EOS]
