"""Grammar states as rows of hypotheses: every fast path equals the incremental grammar, row by row.

Random walks branch, prune, reorder and join hypotheses as beam search does (select with repeated rows,
concat of two beams), and take random legal actions; at every round the fast rows and StateListRows (which
steps each hypothesis with grammar.step) must give the same legal actions, counters, completeness and new
positions (ids, kinds, what each predicts, coordinates, attended positions).
"""

import numpy as np
import pytest

from hf_slm.action_vocab import ActionVocabulary
from hf_slm.modeling.grammars import get_grammar
from hf_slm.modeling.hypothesis_rows import FAST_ROWS, HypothesisRows, StateListRows, hypothesis_rows

LABELED = ActionVocabulary(["a", "b", "c"], ["S", "NP", "VP"])


def assert_rows_equal(fast, slow):
    assert np.array_equal(fast.legal_actions().numpy(), slow.legal_actions().numpy())
    for name in ("open_total", "closes_root", "complete"):
        assert np.array_equal(getattr(fast, name).numpy(), getattr(slow, name).numpy()), name


def assert_positions_equal(fast, slow):
    assert np.array_equal(fast.count, slow.count)
    valid = slow.valid
    for name in ("input_id", "kind", "predicts", "coordinate"):
        assert np.array_equal(getattr(fast, name)[valid], getattr(slow, name)[valid]), name
    width = max(fast.attended.shape[2], slow.attended.shape[2])
    pad = lambda a: np.pad(a, ((0, 0), (0, 0), (0, width - a.shape[2])), constant_values=-1)  # noqa: E731
    assert np.array_equal(pad(fast.attended)[valid], pad(slow.attended)[valid])


@pytest.mark.parametrize("grammar_name", sorted({g.name for g in FAST_ROWS}))
@pytest.mark.parametrize("document_level", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_fast_rows_equal_the_incremental_grammar(grammar_name, document_level, seed):
    grammar = get_grammar(grammar_name, LABELED.layout, document_level=document_level)
    random = np.random.default_rng(seed)
    start = [grammar.start() for _ in range(6)]
    slow, fast = StateListRows(grammar, start), hypothesis_rows(grammar, start)
    assert type(fast) is not StateListRows  # the fast path is what is tested here
    steps = 0
    for round_ in range(80):
        assert_rows_equal(fast, slow)
        legal = slow.legal_actions().numpy()
        alive = np.flatnonzero(legal.any(1))
        if not len(alive):
            break
        # branch and prune as a beam: some rows twice, some dropped, in a shuffled order
        rows = random.choice(alive, size=min(len(alive) * 2, 40), replace=True)
        if round_ % 7 == 3:  # join two beams, as the search does with pending word beams
            half = len(rows) // 2
            slow = HypothesisRows.concat([slow.select(rows[:half]), slow.select(rows[half:])])
            fast = HypothesisRows.concat([fast.select(rows[:half]), fast.select(rows[half:])])
        else:
            slow, fast = slow.select(rows), fast.select(rows)
        legal = legal[rows]
        # prefer closing brackets now and then, so that trees complete and documents go on
        weights = legal * np.where(np.arange(legal.shape[1]) >= LABELED.layout.close_nt_start, 4.0, 1.0)
        actions = np.array([random.choice(len(w), p=w / w.sum()) for w in weights])
        slow, slow_positions = slow.step(actions)
        fast, fast_positions = fast.step(actions)
        assert_positions_equal(fast_positions, slow_positions)
        steps += len(actions)
    assert steps > 500  # the walk went deep enough to mean something


def test_a_grammar_without_a_fast_path_uses_its_states():
    grammar = get_grammar("choe_charniak", LABELED.layout)
    assert type(hypothesis_rows(grammar, [grammar.start()])) is StateListRows
