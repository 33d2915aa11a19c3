"""The dependency grammars of DTG (modeling/dependency_grammars.py): the figures of paper 002 position by
position, the reference variant's four differences, subwords, and legality equal to the transition systems.

Figure 2b, 4b and 5b (the masks) are images that the text copy of the paper does not hold: the expected rows
below are derived by hand from Algorithm 1 (masks) and section 3.2 (relative positions: on STACK rows the
depth from the stack top, so R = h(j) - h(i) <= 0 with h the height of an item; on COMPOSE rows 0 for the
head, -1 for the dependent). Figure 5 is garbled after position 12; its end follows Table 1 (see
tokenization/transitions.py).
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hf_slm.modeling.dependency_grammars import DEPENDENCY_GRAMMARS
from hf_slm.modeling.grammars import IGNORE_INDEX, POSITION_KIND_NAMES, PositionKind
from hf_slm.tokenization.dependency_trees import DependencyTree
from hf_slm.tokenization.transitions import GEN, LEFT_ARC, POP, RIGHT_ARC, TRANSITION_SYSTEMS, Transition, gen

from tree_strategies import projective_trees
from helpers.dependency_toy_layout import BOS, EOS, ROOT, WORDS, encode, grammar, layout, tree_ids


def rows(rules, tokens):
    """Per position: (kind name, {attended position: relative position}, label token or None, head token)."""
    ids = encode(rules, tokens)
    batch = rules.batch([ids])
    names = {v: k for k, v in [("<root>", ROOT), ("<s>", BOS), ("</s>", EOS)]}
    lay = rules.layout

    def name(action_id):
        if action_id in names:
            return names[action_id]
        if lay.left_arc_start <= action_id < lay.left_arc_stop:
            return "LA" if lay.max_k == 1 else f"LA[{action_id - lay.left_arc_start + 1}]"
        if lay.right_arc_start <= action_id < lay.right_arc_stop:
            return "RA" if lay.max_k == 1 else f"RA[{action_id - lay.right_arc_start + 1}]"
        if action_id == lay.pop_token_id:
            return "POP"
        return WORDS[action_id - lay.pop_token_id - 1]

    out = []
    for i in range(int(batch["lengths"][0])):
        attended = np.flatnonzero(batch["attention_mask"][0, i])
        label = int(batch["labels"][0, i])
        out.append((POSITION_KIND_NAMES[PositionKind(int(batch["position_kinds"][0, i]))],
                    {int(j): int(batch["relative_positions"][0, i, j]) for j in attended},
                    None if label == IGNORE_INDEX else name(label), int(batch["head_token_index"][0, i])))
    return out


# (kind, {attended: R}, label, head-token position) per position; derived by hand (module docstring).
FIGURE_2 = [  # arc-standard, "There is a difference", paper 002 Figure 2
    ("root", {0: 0}, "There", -1),
    ("terminal", {0: -1, 1: 0}, "is", -1),
    ("terminal", {0: -2, 1: -1, 2: 0}, "LA", -1),
    ("left_arc_compose", {1: -1, 2: 0}, None, 2),  # LEFTARC + is: COMPOSE of There and is
    ("left_arc_stack", {0: -1, 3: 0}, "a", 2),  # LEFTARC2 + is: the stack, not itself
    ("terminal", {0: -2, 3: -1, 5: 0}, "difference", -1),
    ("terminal", {0: -3, 3: -2, 5: -1, 6: 0}, "LA", -1),
    ("left_arc_compose", {5: -1, 6: 0}, None, 6),
    ("left_arc_stack", {0: -2, 3: -1, 7: 0}, "RA", 6),
    ("right_arc_compose", {3: 0, 7: -1}, None, 2),  # RIGHTARC + is: the head (is, composed at 3) below
    ("right_arc_stack", {0: -1, 9: 0}, "RA", 2),
    ("right_arc_compose", {0: 0, 9: -1}, None, 0),  # RIGHTARC + <root>
    ("right_arc_stack", {11: 0}, "</s>", 0),  # predicts <end>
    ("eos", {11: 0, 13: 0}, None, -1),
]

FIGURE_4 = [  # arc-eager, paper 002 Figure 4
    ("root", {0: 0}, "There", -1),
    ("terminal", {0: -1, 1: 0}, "is", -1),
    ("terminal", {0: -2, 1: -1, 2: 0}, "LA", -1),  # is waits in the buffer, attended as the top item
    ("left_arc_compose", {1: -1, 2: 0}, None, 2),
    ("left_arc_stack", {0: -1, 3: 0}, "RA", 2),
    ("right_arc_compose", {0: 0, 3: -1}, None, 0),  # RIGHTARC + <root>: is stays on the stack
    ("right_arc_stack", {5: -1, 3: 0}, "a", 0),
    ("terminal", {5: -2, 3: -1, 7: 0}, "difference", -1),
    ("terminal", {5: -3, 3: -2, 7: -1, 8: 0}, "LA", -1),
    ("left_arc_compose", {7: -1, 8: 0}, None, 8),
    ("left_arc_stack", {5: -2, 3: -1, 9: 0}, "RA", 8),
    ("right_arc_compose", {3: 0, 9: -1}, None, 2),  # RIGHTARC + is
    ("right_arc_stack", {5: -2, 11: -1, 9: 0}, "POP", 2),
    ("pop", {5: -1, 11: 0, 13: 0}, "POP", -1),  # POP-STACK: difference is masked
    ("pop", {5: 0, 14: 0}, "POP", -1),
    ("pop", {15: 0}, "</s>", -1),  # the root is popped last; <end>
    ("eos", {16: 0}, None, -1),
]

FIGURE_5 = [  # arc-swift, paper 002 Figure 5, positions 0-12 as printed, then the end Table 1 gives
    *[(kind, attended, label.replace("LA", "LA[1]").replace("RA", "RA[1]") if label in ("LA", "RA") else label, head)
      for kind, attended, label, head in FIGURE_4[:13]],
    ("eos", {5: -2, 11: -1, 9: 0, 13: 0}, None, -1),
]
FIGURE_5[12] = ("right_arc_stack", {5: -2, 11: -1, 9: 0}, "</s>", 2)

REFERENCE = [  # arc-standard, the reference variant (the four differences)
    ("bos", {0: 0}, "There", -1),  # (a) <s> plays the root
    ("terminal", {0: 1, 1: 0}, "is", -1),  # (c) counted up from the top: >= 0
    ("terminal", {0: 2, 1: 1, 2: 0}, "LA", -1),
    ("left_arc_compose", {1: -1, 2: 0, 3: 0}, None, 2),  # (b) itself, at 0
    ("left_arc_stack", {0: 1, 3: 0, 4: 0}, "a", 2),  # (b) the STACK copy too
    ("terminal", {0: 2, 3: 1, 5: 0}, "difference", -1),
    ("terminal", {0: 3, 3: 2, 5: 1, 6: 0}, "LA", -1),
    ("left_arc_compose", {5: -1, 6: 0, 7: 0}, None, 6),
    ("left_arc_stack", {0: 2, 3: 1, 7: 0, 8: 0}, "RA", 6),
    ("right_arc_compose", {3: 0, 7: -1, 9: 0}, None, 2),
    ("right_arc_stack", {0: 1, 9: 0, 10: 0}, "POP", 2),  # predicts pop_root
    ("pop_root", {0: 0, 9: -1, 11: 0}, "</s>", 0),  # (a) <s> 0, the sentence's head -1, itself 0
    ("eos", {0: 0, 12: 0}, None, -1),
]


@pytest.mark.parametrize("system, variant, tokens, expected", [
    ("arc_standard", "paper", "<root> There is LA a difference LA RA RA </s>", FIGURE_2),
    ("arc_eager", "paper", "<root> There is LA RA a difference LA RA POP POP POP </s>", FIGURE_4),
    ("arc_swift", "paper", "<root> There is LA[1] RA[1] a difference LA[1] RA[1] </s>", FIGURE_5),
    ("arc_standard", "reference", "<s> There is LA a difference LA RA pop_root </s>", REFERENCE),
], ids=["figure-2", "figure-4", "figure-5", "reference"])
def test_the_figures_position_by_position(system, variant, tokens, expected):
    found = rows(grammar(system, variant), tokens)
    assert len(found) == len(expected)
    for position, (got, want) in enumerate(zip(found, expected)):
        assert got == want, f"position {position}: got {got}, expected {want}"


def test_subwords_share_an_item_and_arcs_use_the_last_piece():
    # "There" in two pieces is one stack item: both at one depth, both masked together, the arc input is
    # "ere" (the last piece); the paper's COMPOSE attends last pieces, the reference's every piece (d).
    paper = rows(grammar("arc_standard"), "<root> ▁Th ere is LA RA </s>")
    assert paper[2] == ("subword", {0: -1, 1: 0, 2: 0}, "is", -1)
    assert paper[3] == ("terminal", {0: -2, 1: -1, 2: -1, 3: 0}, "LA", -1)
    assert paper[4] == ("left_arc_compose", {2: -1, 3: 0}, None, 3)
    assert paper[5] == ("left_arc_stack", {0: -1, 4: 0}, "RA", 3)  # no piece of "There" is left
    reference = rows(grammar("arc_standard", "reference"), "<s> ▁Th ere is LA pop_root </s>")
    assert reference[4] == ("left_arc_compose", {1: -1, 2: -1, 3: 0, 4: 0}, None, 3)
    head_in_pieces = rows(grammar("arc_standard"), "<root> a ▁diff erence LA RA </s>")
    assert head_in_pieces[4][3] == 3  # LEFTARC + "erence", the head word's last piece


@pytest.mark.parametrize("system", sorted(TRANSITION_SYSTEMS))
def test_step_and_batch_agree_and_compose_predicts_nothing(system):
    rules = grammar(system)
    tokens = {"arc_standard": "<root> There is LA a difference LA RA RA </s>",
              "arc_eager": "<root> There is LA RA a difference LA RA POP POP POP </s>",
              "arc_swift": "<root> There is LA[1] RA[1] a difference LA[1] RA[1] </s>"}[system]
    ids = encode(rules, tokens)
    state, positions = rules.start(), []
    for action_id in ids:
        positions += rules.step(state, action_id)
    sequence = rules.sequence(ids)
    for index, new in enumerate(positions):
        assert np.flatnonzero(sequence.attention_mask[index]).tolist() == new.attended.tolist()
        assert sequence.relative_positions[index, new.attended].tolist() == new.relative_positions.tolist()
        is_compose = new.kind in (PositionKind.LEFT_ARC_COMPOSE, PositionKind.RIGHT_ARC_COMPOSE)
        assert new.predicts != is_compose or new.kind == PositionKind.EOS
    assert rules.is_complete(state)


# ---- legality: the grammar equals the transition systems --------------------------------------------


def _candidates(rules):
    """Each structural action, as (action id, the transition tokenization/transitions.py calls it)."""
    lay = rules.layout
    out = [(lay.left_arc_start + k - 1, Transition(LEFT_ARC, k)) for k in range(1, lay.max_k + 1)]
    out += [(lay.right_arc_start + k - 1, Transition(RIGHT_ARC, k)) for k in range(1, lay.max_k + 1)]
    if rules.system == "arc_eager":
        out.append((lay.pop_token_id, Transition(POP)))
    return out


def _replay_accepts(system, transitions, where="prefix"):
    from hf_slm.tokenization.transitions import _State

    state = _State()
    try:
        for transition in transitions:
            system.apply(state, transition, where)
    except ValueError:
        return False, None
    return True, state


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(projective_trees(max_words=9))
def test_legal_actions_equal_the_transition_systems_rules(tree):
    words = DependencyTree(["There"] * len(tree), tree.heads)  # one vocabulary word, one piece each
    for name, system in TRANSITION_SYSTEMS.items():
        rules = grammar(name)
        transitions = system.transitions(words)
        state = rules.start()
        rules.step(state, ROOT)
        for cut in range(len(transitions) + 1):
            prefix = transitions[:cut]
            legal = rules.legal_actions(state)
            for action_id, transition in _candidates(rules):
                assert legal[action_id] == _replay_accepts(system, prefix + [transition])[0], (name, prefix, transition)
            assert legal[encode(rules, "There")[0]] == _replay_accepts(system, prefix + [gen("There")])[0]
            ok, replayed = _replay_accepts(system, prefix)
            assert legal[EOS] == (ok and not system.unfinished(replayed)), (name, prefix)
            if cut < len(transitions):
                step = transitions[cut]
                action_id = encode(rules, "There")[0] if step.action == GEN else next(
                    i for i, t in _candidates(rules) if t == step)
                rules.step(state, action_id)


def test_illegal_actions_are_named():
    rules = grammar("arc_standard")
    with pytest.raises(ValueError, match=r"action 0 .* is not allowed here; expected ROOT"):
        rules.batch([encode(rules, "There </s>")])
    with pytest.raises(ValueError, match=r"action 4 .* continues a word, but no word is being generated"):
        rules.batch([encode(rules, "<root> There is LA ere")], require_complete=False)
    with pytest.raises(ValueError, match=r"action 2 \(id 5, LEFT_ARC\) is not allowed here"):
        rules.batch([encode(rules, "<root> There LA")], require_complete=False)
    with pytest.raises(ValueError, match=r"ends before `</s>`"):
        rules.batch([encode(rules, "<root> There RA")])
    swift = grammar("arc_swift")
    with pytest.raises(ValueError, match=r"action 3 \(id 7, LEFT_ARC\) is not allowed here"):
        swift.batch([encode(swift, "<root> There is LA[3]")], require_complete=False)  # k beyond the stack


def test_the_reference_variant_is_arc_standard_only():
    with pytest.raises(ValueError, match="reference variant exists for arc-standard only"):
        DEPENDENCY_GRAMMARS["dtg_eager"](layout("arc_eager"), variant="reference")


def test_each_transition_system_and_variant_is_its_own_class():
    """A system's class builds the class of the variant asked for (a config's dependency_variant), which carries its
    behaviour in its own methods; copies and pickles keep the class."""
    import copy
    import pickle

    from hf_slm.modeling import dependency_grammars as module

    built = {(system, variant): type(grammar(system, variant)) for system, variant in SYSTEMS_AND_VARIANTS}
    assert built == {("arc_standard", "paper"): module.ArcStandardGrammar,
                     ("arc_standard", "reference"): module.ArcStandardReferenceGrammar,
                     ("arc_eager", "paper"): module.ArcEagerGrammar, ("arc_swift", "paper"): module.ArcSwiftGrammar}
    for (system, variant), rules in built.items():
        assert (rules.system, rules.variant) == (system, variant)
    reference = grammar("arc_standard", "reference")
    assert isinstance(reference, module.ArcStandardGrammar) and isinstance(reference, module.ReferenceVariant)
    assert reference.start_action_id == BOS and grammar("arc_standard").start_action_id == ROOT
    for rules in (reference, grammar("arc_swift")):
        assert type(copy.deepcopy(rules)) is type(rules) and type(pickle.loads(pickle.dumps(rules))) is type(rules)
    txl = DEPENDENCY_GRAMMARS["txl_trans"](layout("arc_standard"), variant="reference")
    assert type(txl) is module.TransitionTXLReferenceGrammar and txl.causal and txl.ends_with_pop_root
    assert module.ArcStandardGrammar.class_of_variant("reference").class_of_variant(None).variant == "reference"
    with pytest.raises(ValueError, match="ArcStandardReferenceGrammar is the reference variant of arc_standard, not "
                                         "the paper one"):
        module.ArcStandardReferenceGrammar(layout("arc_standard"), variant="paper")
    with pytest.raises(ValueError, match="unknown variant 'released'"):
        grammar("arc_standard", "released")


def test_no_comparison_of_a_system_or_variant_name_chooses_behaviour():
    """Behaviour lives in each class's methods: the module compares the `system` or `variant` names nowhere but
    where a class is chosen for a variant (the factory)."""
    import ast
    from pathlib import Path

    from hf_slm.modeling import dependency_grammars as module

    tree = ast.parse(Path(module.__file__).read_text())
    choosing = {"class_of_variant", "check_document_level"}
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef) or function.name in choosing:
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Compare) and any(
                    (isinstance(part, ast.Attribute) and part.attr in ("system", "variant"))
                    or (isinstance(part, ast.Name) and part.id in ("system", "variant"))
                    for part in [node.left, *node.comparators]):
                found.append((function.name, node.lineno))
    assert found == []


# ---- the vectorized batch: equal to the steps ------------------------------------------------------------

SYSTEMS_AND_VARIANTS = [("arc_standard", "paper"), ("arc_standard", "reference"), ("arc_eager", "paper"),
                        ("arc_swift", "paper")]


def mutated(ids, rng, vocab_size):
    """`ids` with one to three random edits (most such sequences break the rules)."""
    ids = list(ids)
    for _ in range(rng.integers(1, 4)):
        where, edit = int(rng.integers(0, len(ids))), rng.integers(0, 4)
        if edit == 0:
            ids[where] = int(rng.integers(-1, vocab_size + 1))
        elif edit == 1:
            ids.insert(where, int(rng.integers(0, vocab_size)))
        elif edit == 2 and len(ids) > 1:
            del ids[where]
        else:
            other = int(rng.integers(0, len(ids)))
            ids[where], ids[other] = ids[other], ids[where]
    return ids


def outcome(build, sequences, **options):
    try:
        return build(sequences, **options)
    except ValueError as error:
        return str(error)


def assert_same_batch(rules, sequences, **options):
    """`batch` equals `_batch_from_steps`: every field, dtype and shape, or the same error."""
    expected, found = outcome(rules._batch_from_steps, sequences, **options), outcome(rules.batch, sequences, **options)
    if isinstance(expected, str) or isinstance(found, str):
        assert found == expected, (rules.system, rules.variant, sequences, options)
        return
    assert found.keys() == expected.keys()
    for name, value in expected.items():
        assert found[name].dtype == value.dtype and found[name].shape == value.shape, name
        assert np.array_equal(found[name], value), (name, rules.system, rules.variant, sequences, options)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(projective_trees(max_words=9), min_size=1, max_size=5), st.integers(0, 2**32 - 1))
def test_the_vectorized_batch_equals_the_steps(trees, seed):
    rng = np.random.default_rng(seed)
    for system, variant in SYSTEMS_AND_VARIANTS:
        rules = grammar(system, variant)
        sequences = [tree_ids(rules, tree, rng) for tree in trees]
        options = {"pad_to_multiple_of": rng.choice([None, 8]), "with_relative_positions": bool(rng.random() < 0.8)}
        assert_same_batch(rules, sequences, **options)
        longest = int(rules.batch(sequences)["lengths"].max())
        assert_same_batch(rules, sequences, max_length=longest - int(rng.integers(0, 2)))  # fits, or is named
        prefixes = [ids[: rng.integers(0 if rng.random() < 0.1 else 1, len(ids) + 1)] for ids in sequences]
        assert_same_batch(rules, prefixes, require_complete=False, **options)
        broken = [mutated(ids, rng, rules.vocab_size) if rng.random() < 0.5 else ids for ids in sequences]
        assert_same_batch(rules, broken)  # the step's error, naming the action, for the first bad sequence
        assert_same_batch(rules, broken, require_complete=False)


@pytest.mark.parametrize("system, variant", SYSTEMS_AND_VARIANTS)
def test_the_vectorized_batch_equals_the_steps_on_a_long_deep_sentence(system, variant):
    # 130 words, each the head of the next: a stack 130 items deep (heights past int8) and T' past 255.
    chain = DependencyTree(["w"] * 130, list(range(130)))
    rules = grammar(system, variant)
    rng = np.random.default_rng(0)
    sequences = [tree_ids(rules, chain, rng), tree_ids(rules, DependencyTree(["w"] * 3, [2, 0, 2]), rng)]
    assert_same_batch(rules, sequences)
    assert_same_batch(rules, [ids[:200] for ids in sequences], require_complete=False)


def first_refused(rules, ids):
    """The index of the first action of `ids` that `legal_actions` refuses, -1 for none (the definition)."""
    state = rules.start()
    for index, action_id in enumerate(ids):
        legal = rules.legal_actions(state)
        if not (0 <= action_id < len(legal) and legal[action_id]):
            return index
        rules.step(state, action_id, check=False)
    return -1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(projective_trees(max_words=9), st.integers(0, 2**32 - 1))
def test_the_vectorized_legality_equals_legal_actions(tree, seed):
    # After every prefix of a valid sequence, every id (and two outside the vocabulary): exactly the ids that
    # legal_actions allows pass; then random invalid sequences, refused at the same action.
    rng = np.random.default_rng(seed)
    for system, variant in SYSTEMS_AND_VARIANTS:
        rules = grammar(system, variant)
        ids = tree_ids(rules, tree, rng)
        candidates, expected, state = [], [], rules.start()
        for cut in range(len(ids) + 1):
            legal = rules.legal_actions(state)
            for action_id in range(-1, rules.vocab_size + 1):
                candidates.append(ids[:cut] + [action_id])
                expected.append(-1 if 0 <= action_id < rules.vocab_size and legal[action_id] else cut)
            if cut < len(ids):
                rules.step(state, ids[cut])
        broken = [mutated(ids, rng, rules.vocab_size) for _ in range(20)]
        candidates += broken
        expected += [first_refused(rules, sequence) for sequence in broken]
        assert rules._first_illegal_actions(candidates).tolist() == expected, (system, variant)


# ---- hf-slm masks ---------------------------------------------------------------------------------------


def test_masks_report_of_an_inline_tree_is_figure_2():
    from hf_slm.cli.mask_inspection import mask_report

    report = mask_report("There/2 is/0 a/4 difference/2", "dtg")
    assert report["tokens"] == "<root> There is LA LA a difference LA LA RA RA RA RA </s>".split()
    assert report["kinds"] == [kind for kind, *_ in FIGURE_2]
    assert report["labels"] == [label for _, _, label, _ in FIGURE_2]
    for row, (_, attended, _, _) in zip(report["attention_mask"], FIGURE_2):
        assert [j for j, on in enumerate(row) if on] == sorted(attended)
    reference = mask_report("There/2 is/0 a/4 difference/2", "dtg", variant="reference")
    assert reference["kinds"] == [kind for kind, *_ in REFERENCE]
    assert reference["relative_positions"][11][:12] == [0] * 9 + [-1, 0, 0]  # pop_root: <s> 0, the head -1, itself 0


def test_masks_cli_for_dependency_grammars(tmp_path):
    import json

    from helpers.cli import run_cli_in_process

    def masks(*argv):
        return run_cli_in_process("masks", *argv, cwd=tmp_path)

    swift = masks("a/0 b/1 c/1", "--grammar", "dtg_swift", "--json")
    assert swift.returncode == 0, swift.stderr
    assert json.loads(swift.stdout)["tokens"] == "<root> a RA[1] RA[1] b RA[1] RA[1] c RA[2] RA[2] </s>".split()
    pieces = json.loads(masks("▁Th|ere/2 is/0", "--grammar", "dtg", "--pieces", "--json").stdout)
    assert pieces["kinds"][:3] == ["root", "terminal", "subword"]
    assert masks("There/2 is/0", "--grammar", "dtg_eager", "--png", "mask.png").returncode == 0
    assert (tmp_path / "mask.png").stat().st_size > 1000
    crossing = masks("a/3 b/0 c/2 d/1", "--grammar", "dtg")
    assert crossing.returncode == 2 and "Traceback" not in crossing.stderr
    assert "the tree argument is not projective" in crossing.stderr
    wrong = masks("(S (NP a NP) S)", "--grammar", "tg", "--pieces")
    assert wrong.returncode == 2 and "--variant and --pieces are options of the dependency grammars" in wrong.stderr


def test_the_cli_knows_every_dependency_grammar():
    from hf_slm.cli.commands import build_parser

    masks = build_parser()._subparsers._group_actions[0].choices["masks"]
    [grammar] = [action for action in masks._actions if action.dest == "grammar"]
    assert set(DEPENDENCY_GRAMMARS) <= set(grammar.choices)  # the registry's names (hf_slm.families)


# ---- TXL (trans): DTG's transitions under a causal mask --------------------------------------------------


def test_txl_trans_reads_figure_2s_transitions_once_each_causally():
    rules = DEPENDENCY_GRAMMARS["txl_trans"](layout("arc_standard"))
    ids = encode(rules, "<root> There is LA a difference LA RA RA </s>")
    batch = rules.batch([ids, ids[:4]], require_complete=False)
    count = len(ids)  # no arc is duplicated
    assert batch["lengths"].tolist() == [count, 4] and batch["input_ids"][0].tolist() == ids
    assert "head_token_index" not in batch  # an arc reads its own embedding only
    lower = np.tril(np.ones((count, count), dtype=bool))
    assert (batch["attention_mask"][0] == lower).all()
    assert (batch["relative_positions"][0] == np.where(lower, np.subtract.outer(range(count), range(count)), 0)).all()
    assert batch["labels"][0].tolist() == ids[1:] + [IGNORE_INDEX]  # `</s>` predicts nothing
    assert batch["labels"][1].tolist() == ids[1:4] + [IGNORE_INDEX] * (count - 3)  # a prefix's end predicts nothing
    padding = batch["attention_mask"][1, 4:]
    assert (padding == np.eye(count, dtype=bool)[4:]).all()  # padding rows attend only themselves
    names = [POSITION_KIND_NAMES[k] for k in batch["position_kinds"][0]]
    assert names == ["root", "terminal", "terminal", "left_arc_stack", "terminal", "terminal", "left_arc_stack",
                     "right_arc_stack", "right_arc_stack", "eos"]
    with pytest.raises(ValueError, match="not allowed here"):
        rules.batch([encode(rules, "<root> There LA </s>")])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(projective_trees(max_words=9))
def test_txl_trans_allows_exactly_what_dtg_allows(tree):
    words = DependencyTree(["There"] * len(tree), tree.heads)
    dtg, txl = grammar("arc_standard"), DEPENDENCY_GRAMMARS["txl_trans"](layout("arc_standard"))
    ids = [ROOT] + [encode(dtg, "There")[0] if t.action == GEN else next(i for i, c in _candidates(dtg) if c == t)
                    for t in TRANSITION_SYSTEMS["arc_standard"].transitions(words)] + [EOS]
    dtg_state, txl_state = dtg.start(), txl.start()
    for position, action_id in enumerate(ids):
        assert (dtg.legal_actions(dtg_state) == txl.legal_actions(txl_state)).all()
        dtg.step(dtg_state, action_id)
        (new,) = txl.step(txl_state, action_id)
        assert new.attended.tolist() == list(range(position + 1)) and new.coordinate == position
    assert txl.is_complete(txl_state)
    # The vectorized batch equals the one replayed from `step` (the definition), prefixes included; its
    # expansion is the identity (one position per action).
    sequences = [ids, ids[: len(ids) // 2]]
    batch = txl.batch(sequences, require_complete=False, pad_to_multiple_of=8)
    steps = txl._batch_from_steps(sequences, require_complete=False, pad_to_multiple_of=8)
    for name in ("input_ids", "position_kinds", "attention_mask", "relative_positions", "labels",
                 "position_coordinates", "lengths", "action_lengths"):
        assert np.array_equal(batch[name], steps[name]), name
    for row, sequence in enumerate(sequences):
        assert batch["expansion_index"][row, : len(sequence)].tolist() == list(range(len(sequence)))
        assert batch["prediction_index"][row, : len(sequence)].tolist() == list(range(len(sequence)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(projective_trees(max_words=12), st.integers(0, 2**32 - 1))
def test_arc_standard_relative_positions_are_affine_in_the_coordinates(tree, seed):
    """What the model derives from coordinates and kinds (relative_affine_by_kind) equals the explicit R on
    every attended cell, pieces and prefixes included; the other systems and the reference variant say None."""
    rules = grammar("arc_standard")
    ids = tree_ids(rules, tree, np.random.default_rng(seed))
    batch = rules.batch([ids, ids[: len(ids) // 2]], require_complete=False)
    scale = np.ones(batch["position_kinds"].shape, dtype=np.int64)
    offset = np.zeros_like(scale)
    for kind, (kind_scale, kind_offset) in rules.relative_affine_by_kind.items():
        scale[batch["position_kinds"] == kind], offset[batch["position_kinds"] == kind] = kind_scale, kind_offset
    c = batch["position_coordinates"]
    derived = scale[:, :, None] * (c[:, :, None] - c[:, None, :]) + offset[:, :, None]
    mask = batch["attention_mask"]
    assert (derived[mask] == batch["relative_positions"][mask]).all()
    assert grammar("arc_eager").relative_affine_by_kind is None and grammar("arc_swift").relative_affine_by_kind is None
    assert grammar("arc_standard", "reference").relative_affine_by_kind is None


# ---- documents (arc-standard, paper variant) -----------------------------------------------------------------


def document_ids(rules, trees, rng):
    """(`<root>`, each tree's transitions (its last one the arc onto the root), then `</s>`; the index of each
    sentence's last action)."""
    ids, ends = [ROOT], []
    for tree in trees:
        ids += tree_ids(rules, tree, rng)[1:-1]
        ends.append(len(ids) - 1)
    return ids + [EOS], ends


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(projective_trees(max_words=6), min_size=1, max_size=3), min_size=1, max_size=4),
       st.integers(0, 2**32 - 1))
def test_documents_vectorized_equal_the_steps(documents, seed):
    """A document is its sentences one after another under one `<root>`, each sentence's last arc onto the root
    (which then holds one composed item per sentence read); after that arc a word begins the next sentence or
    `</s>` ends the document. The vectorized batch and legality equal the step rules, on documents, their
    prefixes and broken ones; a document is complete after each sentence's last arc."""
    rng = np.random.default_rng(seed)
    rules = DEPENDENCY_GRAMMARS["dtg"](layout("arc_standard"), document_level=True)
    encoded = [document_ids(rules, trees, rng) for trees in documents]
    sequences = [ids for ids, _ in encoded]
    assert_same_batch(rules, sequences)
    prefixes = [ids[: rng.integers(1, len(ids) + 1)] for ids in sequences]
    assert_same_batch(rules, prefixes, require_complete=False)
    assert_same_batch(rules, [ids[:-1] for ids in sequences])  # complete without `</s>` too
    broken = [mutated(ids, rng, rules.vocab_size) if rng.random() < 0.7 else ids for ids in sequences]
    assert_same_batch(rules, broken)
    assert_same_batch(rules, broken, require_complete=False)
    assert rules._first_illegal_actions(broken).tolist() == [first_refused(rules, ids) for ids in broken]
    for trees, (ids, ends) in zip(documents, encoded):
        state, complete = rules.start(), []
        for action in ids:
            rules.step(state, action)
            complete.append(rules.is_complete(state))
        assert [k for k, done in enumerate(complete[:-1]) if done] == ends
        assert complete[-1] and state.trees_complete == len(trees)
    # TXL (trans) reads DTG's sequences with DTG's legality, one causal position per action.
    causal = DEPENDENCY_GRAMMARS["txl_trans"](layout("arc_standard"), document_level=True)
    assert causal._first_illegal_actions(broken).tolist() == [first_refused(rules, ids) for ids in broken]
    assert causal.batch(sequences)["lengths"].tolist() == [len(ids) for ids in sequences]


def test_a_document_by_hand():
    """`<root> There is RA RA </s>`... two sentences: the second's words attend the root's composition of the
    first (position 5, the COMPOSE copy of the arc onto the root), and the arc onto the root closes each."""
    rules = DEPENDENCY_GRAMMARS["dtg"](layout("arc_standard"), document_level=True)
    ids = encode(rules, "<root> There is LA RA a difference LA RA </s>")
    seq = rules.sequence(ids)
    attended = [set(np.flatnonzero(row).tolist()) for row in seq.attention_mask]
    # 0 <root>, 1 There, 2 is, 3-4 LA (compose, stack), 5-6 RA onto the root, 7 a, 8 difference, 9-10 LA, 11-12 RA
    assert attended[5] == {0, 3}  # the arc onto the root composes the root and `is` (its LA's COMPOSE)
    assert attended[7] == {5, 7} and attended[8] == {5, 7, 8}  # the next sentence sees the first's composition
    assert seq.labels[6] == encode(rules, "a")[0]  # the root arc's STACK copy predicts the next sentence's word
    with pytest.raises(ValueError, match="is not allowed here"):  # closed: no arc before a new word
        rules.positions(encode(rules, "<root> There is LA RA RA"), require_complete=False)
    with pytest.raises(ValueError, match="read by the paper variant of arc-standard"):
        DEPENDENCY_GRAMMARS["dtg_eager"](layout("arc_eager"), document_level=True)
