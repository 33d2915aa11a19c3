"""Document-level models (paper 000, section 3.1): several trees after one <s>, their masks, beam search after a
prefix of earlier sentences, and document-level perplexity."""

import json
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tree_strategies import action_vocabulary_trees

import hf_slm
from hf_slm import SyntacticDataCollator
from hf_slm.families import config_for_grammar
from hf_slm.families import causal_lm_for_config
from hf_slm.families.action_vocab import ActionVocabulary
from hf_slm.search.beam import score, score_documents, words_to_pieces
from hf_slm.evaluation.perplexity import word_perplexity
from hf_slm.modeling.generation_slm import BeamSearchOptions, WordSynchronousBeamSearch
from hf_slm.families import get_grammar
from hf_slm.modeling.grammars import PositionKind
from hf_slm.search.scoring import joint_log_probs
from hf_slm.tokenization.linearizers import top_down_actions

NONE = -100
DOCUMENT = "(S (NP the bird NP) S) (S (VP sings VP) S)"


def document_run(action_string, grammar="tg"):
    actions = action_string.split()
    vocab = ActionVocabulary.from_action_sequences([actions])
    rules = get_grammar(grammar, vocab.layout, document_level=True)
    ids = vocab.encode(actions)
    return vocab, rules, ids, rules.sequence(ids)


# ---- the grammar -------------------------------------------------------------------------------------


def test_two_sentence_document_by_hand():
    vocab, _, _, seq = document_run(DOCUMENT)
    assert vocab.decode(seq.input_ids) == [
        "<s>", "(S", "(NP", "the", "bird", "NP)", "NP)", "S)", "S)", "(S", "(VP", "sings", "VP)", "VP)", "S)", "S)",
    ]
    # Algorithm 1, row by row; both roots are children of <s>, so the second sentence's opening NT sees <s>
    # and the first sentence's composed root (position 7), nothing of its inside.
    expected = [
        {0}, {0, 1}, {0, 1, 2}, {0, 1, 2, 3}, {0, 1, 2, 3, 4},
        {2, 3, 4, 5},      # NP) COMPOSE
        {0, 1, 5, 6},      # NP) STACK
        {1, 5, 7},         # S) COMPOSE: the first sentence in one position
        {0, 7, 8},         # S) STACK
        {0, 7, 9},         # (S of sentence 2
        {0, 7, 9, 10},     # (VP
        {0, 7, 9, 10, 11},  # sings
        {10, 11, 12},      # VP) COMPOSE
        {0, 7, 9, 12, 13},  # VP) STACK
        {9, 12, 14},       # S) COMPOSE
        {0, 7, 14, 15},    # S) STACK: both sentences, composed
    ]  # fmt: skip
    assert [set(np.flatnonzero(row).tolist()) for row in seq.attention_mask] == expected
    assert seq.depth.tolist() == [0, 1, 2, 3, 3, 2, 2, 1, 1, 1, 2, 3, 2, 2, 1, 1]
    # Depth differences: both roots at depth 1, so the earlier sentence is at relative position 0.
    assert seq.relative_positions[9, [0, 7, 9]].tolist() == [1, 0, 0]
    assert seq.relative_positions[15, [0, 7, 14, 15]].tolist() == [1, 0, 0, 0]
    labels = [None if label == NONE else vocab.tokens[label] for label in seq.labels]
    # The first root's STACK copy predicts the second sentence's root; the document's end is not predicted.
    assert labels == ["(S", "(NP", "the", "bird", "NP)", None, "S)", None, "(S", "(VP", "sings", "VP)", None, "S)",
                      None, None]


def test_sentence_level_grammar_refuses_a_document_and_the_document_grammar_checks_its_trees():
    vocab, _, ids, _ = document_run(DOCUMENT)
    with pytest.raises(ValueError, match="is not allowed here; expected nothing"):
        get_grammar("tg", vocab.layout).validate(ids)
    rules = get_grammar("tg", vocab.layout, document_level=True)
    word_after_root = vocab.encode("(S (NP the bird NP) S) sings".split())
    with pytest.raises(ValueError, match="expected OPEN_NT"):
        rules.validate(word_after_root)
    with pytest.raises(ValueError, match="ends before it is complete"):
        rules.validate(vocab.encode("(S (NP the bird NP) S) (S".split()))
    rules.validate(vocab.encode("(S (NP the bird NP) S) (S".split()), require_complete=False)
    state = rules.start()
    for action in ids[:7]:  # <s> and the first tree
        rules.step(state, action)
    assert rules.is_complete(state) and rules.allowed_next_kinds(state) == {hf_slm.ActionKind.OPEN_NT}


LABELS = ["S", "NP", "VP", "PP"]
WORDS = ["the", "bird", "sings", "a"]




def documents():
    tree = action_vocabulary_trees(max_depth=5, max_children=4, max_nodes=20, labels=LABELS, words=WORDS)
    return st.lists(tree, min_size=1, max_size=4)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_incremental_equals_whole_document_and_one_tree_equals_the_sentence_grammar(trees):
    actions = [a for tree in trees for a in top_down_actions(tree)]
    vocab = ActionVocabulary.from_action_sequences([actions])
    ids = vocab.encode(actions)
    for name in ("tg", "choe_charniak"):
        rules = get_grammar(name, vocab.layout, document_level=True)
        seq = rules.sequence(ids)
        state, positions = rules.start(), []
        for action in ids:
            positions += rules.step(state, action)
        assert rules.is_complete(state) and state.trees_complete == len(trees)
        n = len(positions)
        mask = np.zeros((n, n), dtype=bool)
        relpos = np.zeros((n, n), dtype=np.int64)
        for row, position in enumerate(positions):
            mask[row, position.attended] = True
            relpos[row, position.attended] = position.relative_positions
        assert (mask == seq.attention_mask).all() and (relpos == seq.relative_positions).all()
        assert [p.kind for p in positions] == seq.position_kinds.tolist()
        if len(trees) == 1:
            alone = get_grammar(name, vocab.layout).sequence(ids)
            assert (alone.attention_mask == seq.attention_mask).all() and (alone.labels == seq.labels).all()
        if name == "tg":
            # Every root is at depth 1 and stays on the stack: the last STACK row sees <s> and all roots.
            roots = np.flatnonzero((seq.position_kinds == PositionKind.CLOSE_COMPOSE) & (seq.depth == 1))
            assert len(roots) == len(trees)
            assert set(np.flatnonzero(seq.attention_mask[-1])) == {0, *roots.tolist(), n - 1}


@settings(max_examples=400, deadline=None)
@given(documents(), st.integers(min_value=0, max_value=10**6), st.sampled_from(["delete", "swap", "replace"]))
def test_vectorized_document_validation_agrees_with_the_step_rules(trees, seed, edit):
    actions = [a for tree in trees for a in top_down_actions(tree)]
    vocab = ActionVocabulary.from_action_sequences([actions])
    ids = vocab.encode(actions)
    rng = np.random.default_rng(seed)
    k = int(rng.integers(0, len(ids)))
    if edit == "delete":
        ids = ids[:k] + ids[k + 1 :]
    elif edit == "swap" and k + 1 < len(ids):
        ids[k], ids[k + 1] = ids[k + 1], ids[k]
    else:
        ids[k] = int(rng.integers(1, len(vocab.tokens)))
    rules = get_grammar("tg", vocab.layout, document_level=True)
    try:
        state = rules.start()
        for action in ids:
            rules.step(state, action)  # raises ValueError on an illegal action (kind or closing label)
        step_ok = rules.is_complete(state)
    except ValueError:
        step_ok = False
    if step_ok:
        rules.validate(ids)
    else:
        with pytest.raises(ValueError):
            rules.validate(ids)


# ---- tokenizer, collator, model ------------------------------------------------------------------------

TREES = [
    "(S (NP the bird) (VP sings))",
    "(S (NP a dog) (VP barks (PP at (NP the moon))))",
    "(S (NP I) (VP like (NP it)))",
    "(S (NP the dog) (VP sings))",
]
DOCS = [[TREES[0], TREES[1]], [TREES[2]], [TREES[3], TREES[0], TREES[2]]]


def _model(tokenizer, grammar, document_level=True, seed=0):
    config = config_for_grammar(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=2,
                                      num_attention_heads=2, intermediate_size=32, grammar=grammar,
                                      document_level=document_level, **tokenizer.action_layout)
    torch.manual_seed(seed)
    return causal_lm_for_config(config).eval()


@pytest.fixture(scope="module")
def tg():
    tokenizer = hf_slm.SyntacticWordTokenizer.train(TREES, min_count=1)
    return _model(tokenizer, "tg"), tokenizer


@pytest.fixture(scope="module")
def terminals():
    tokenizer = hf_slm.SyntacticWordTokenizer.train(TREES, min_count=1, linearization="terminals")
    return _model(tokenizer, "terminals"), tokenizer


def test_encode_document_collates_and_trains(tg):
    model, tokenizer = tg
    encoded = [tokenizer.encode_document(doc)["input_ids"] for doc in DOCS]
    sentences = [[tokenizer(t)["input_ids"] for t in doc] for doc in DOCS]
    # <s> once, then each sentence's actions in order.
    assert encoded == [[tokenizer.bos_token_id] + [i for ids in doc for i in ids[1:]] for doc in sentences]
    collate = SyntacticDataCollator("tg", tokenizer.action_layout, document_level=True)
    batch = collate(encoded)
    with pytest.raises(ValueError, match="sequence 0"):
        SyntacticDataCollator("tg", tokenizer.action_layout)(encoded)
    model.train()
    output = model(**batch)
    model.eval()
    assert torch.isfinite(output.loss)
    output.loss.backward()
    assert model.get_input_embeddings().weight.grad.abs().sum() > 0
    model.zero_grad()
    # The same scores without a given mask: the model derives it from its (document-level) grammar.
    with torch.no_grad():
        given_mask = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
        derived = model(input_ids=batch["input_ids"][:1, : (batch["input_ids"][0] != 0).sum()]).logits
    n = derived.shape[1]
    assert torch.allclose(given_mask[0, :n], derived[0], atol=1e-5)


def _pieces(tokenizer, tree):
    words = hf_slm.parse_tree(tree).leaves()
    return words, words_to_pieces(tokenizer, words)[0]


@pytest.mark.parametrize("grammar, use_cache", [("tg", True), ("tg", False), ("choe_charniak", True)])
def test_beam_search_after_a_prefix_scores_conditionally(tg, grammar, use_cache):
    _, tokenizer = tg
    model = _model(tokenizer, grammar)
    prefix = tokenizer.encode_document(DOCS[0])["input_ids"]
    words, pieces = _pieces(tokenizer, TREES[2])
    options = BeamSearchOptions(beam_size=40, word_beam_size=8, num_trees=5, use_cache=use_cache)
    search = WordSynchronousBeamSearch(model, options, word_start_mask=tokenizer.word_start_mask)
    (result,) = search.search([pieces], prefixes=[prefix])
    prefix_score = joint_log_probs(model, [prefix])[0]
    full = joint_log_probs(model, [ids for ids, _ in result.trees])
    for (ids, log_prob), joint in zip(result.trees, full):
        assert ids[: len(prefix)] == prefix
        assert log_prob == pytest.approx(joint - prefix_score, abs=1e-4)  # log p(y, x | prefix)
        # What follows the prefix is one tree over the sentence's words.
        assert hf_slm.parse_tree(tokenizer.decode([tokenizer.bos_token_id] + ids[len(prefix) :], skip_special_tokens=True)).leaves() == words
    assert sum(result.surprisals) + result.end_surprisal == pytest.approx(-result.log_prob, abs=1e-4)
    # The prefix matters: the same sentence without it scores differently.
    (alone,) = search.search([pieces])
    assert alone.log_prob != pytest.approx(result.log_prob, abs=1e-6)


def test_prefixes_are_checked(tg):
    model, tokenizer = tg
    _, pieces = _pieces(tokenizer, TREES[0])
    search = WordSynchronousBeamSearch(model, BeamSearchOptions(beam_size=10, word_beam_size=5))
    unfinished = tokenizer.encode_document(DOCS[0])["input_ids"][:-1]
    with pytest.raises(ValueError, match="prefix 0 is not a sequence of complete trees"):
        search.search([pieces], prefixes=[unfinished])
    with pytest.raises(ValueError, match="one per sentence"):
        search.search([pieces], prefixes=[])
    sentence_model = _model(tokenizer, "tg", document_level=False)
    with pytest.raises(ValueError, match="need a document-level model"):
        WordSynchronousBeamSearch(sentence_model).search([pieces], prefixes=[tokenizer(TREES[1])["input_ids"]])


def test_score_documents_chains_greedy_best_trees(tg):
    model, tokenizer = tg
    documents = [[hf_slm.parse_tree(t).leaves() for t in doc] for doc in DOCS]
    options = dict(beam_size=30, word_beam_size=6)
    results = score_documents(model, tokenizer, documents, progress=False, batch_size=2, **options)
    assert [len(r) for r in results] == [len(d) for d in documents]
    # First sentences have no prefix: exactly what sentence-level scoring finds.
    firsts = score(model, tokenizer, [d[0] for d in documents], progress=False, **options)
    for document, first in zip(results, firsts):
        assert document[0]["log_prob"] == pytest.approx(first["log_prob"], abs=1e-5)
        assert document[0]["tree"] == first["tree"]
    # Sentence 3 of document 2, searched by hand after the best trees of its sentences 1 and 2.
    search = WordSynchronousBeamSearch(model, BeamSearchOptions(**options), word_start_mask=tokenizer.word_start_mask)
    prefix = [tokenizer.bos_token_id]
    for position in range(3):
        _, pieces = _pieces(tokenizer, DOCS[2][position])
        (found,) = search.search([pieces], prefixes=[prefix])
        assert results[2][position]["log_prob"] == pytest.approx(found.log_prob, abs=1e-5)
        assert results[2][position]["tree"] == tokenizer.decode([tokenizer.bos_token_id] + found.trees[0][0][len(prefix) :], skip_special_tokens=True)
        prefix = found.trees[0][0]
    with pytest.raises(ValueError, match="needs a document-level model"):
        score_documents(_model(tokenizer, "tg", document_level=False), tokenizer, documents, progress=False)


# ---- perplexity ----------------------------------------------------------------------------------------


def _write_documents(path, docs):
    path.write_text("\n\n".join("\n".join(doc) for doc in docs) + "\n")
    return path


def test_document_perplexity_from_the_beam(tg, tmp_path):
    model, tokenizer = tg
    data = _write_documents(tmp_path / "docs.mrg", DOCS)
    options = dict(beam_size=30, word_beam_size=6)
    metrics = word_perplexity(model, tokenizer, data, document_level=True, beam_options=options, progress=False,
                              batch_size=2, output_dir=tmp_path / "out")
    documents = [[hf_slm.parse_tree(t).leaves() for t in doc] for doc in DOCS]
    expected = score_documents(model, tokenizer, documents, progress=False, **options)
    total = sum(r["log_prob"] for doc in expected for r in doc)
    words = sum(len(s) for doc in documents for s in doc)
    assert metrics["method"] == "beam_greedy_prefix" and metrics["documents"] == 3 and metrics["sentences"] == 6
    assert metrics["perplexity"] == pytest.approx(math.exp(-total / words), rel=1e-6)
    # Greedy prefixes bound nothing (paper 000, 3.1 "we approximate"): the result says so and claims no bound.
    assert metrics["estimate"] == "approximation" and metrics["is_upper_bound"] is False
    assert "approximation" in metrics["summary"] and "bound" not in metrics["summary"]
    assert (tmp_path / "out" / "ppl-docs.json").exists()
    with pytest.raises(ValueError, match="needs a document-level model"):
        word_perplexity(_model(tokenizer, "tg", document_level=False), tokenizer, data, document_level=True,
                        progress=False)


def test_document_perplexity_from_proposals_by_hand(tg, tmp_path):
    model, tokenizer = tg
    data = _write_documents(tmp_path / "docs.txt", [["the bird sings", "I like it"], ["a dog barks"]])
    blocks = [
        ["(S (NP the bird) (VP sings))", "(S the (NP bird) sings)", "(S (NP the bird sings))"],
        ["(S (NP I) (VP like (NP it)))", "(S I like it)"],
        ["(S (NP a dog) (VP barks))", "(S a dog barks)"],
    ]
    proposals = tmp_path / "proposals.txt"
    proposals.write_text("\n\n".join("\n".join(block) for block in blocks) + "\n")
    metrics = word_perplexity(model, tokenizer, data, proposals=proposals, document_level=True, progress=False)
    bos = tokenizer.bos_token_id
    ids = [[tokenizer(t)["input_ids"][1:] for t in block] for block in blocks]
    first = joint_log_probs(model, [[bos] + c for c in ids[0]])
    best = [bos] + ids[0][int(np.argmax(first))]
    second = joint_log_probs(model, [best + c for c in ids[1]])
    third = joint_log_probs(model, [[bos] + c for c in ids[2]])

    def logsumexp(values):
        return float(np.logaddexp.reduce(values))

    total = logsumexp(first) + logsumexp(second) - joint_log_probs(model, [best])[0] + logsumexp(third)
    assert metrics["method"] == "proposals_greedy_prefix" and metrics["estimate"] == "approximation"
    assert "approximation" in metrics["summary"] and "bound" not in metrics["summary"]
    assert metrics["perplexity"] == pytest.approx(math.exp(-total / 9), rel=1e-6)


def test_document_perplexity_of_a_terminals_model_is_exact(terminals, tmp_path):
    model, tokenizer = terminals
    data = _write_documents(tmp_path / "docs.mrg", DOCS)
    metrics = word_perplexity(model, tokenizer, data, document_level=True, progress=False,
                              output_dir=tmp_path / "out")
    documents = [[hf_slm.parse_tree(t).leaves() for t in doc] for doc in DOCS]
    totals = joint_log_probs(model, [tokenizer.encode_document(doc)["input_ids"] for doc in documents])
    words = sum(len(s) for doc in documents for s in doc)
    assert metrics["method"] == "exact" and metrics["estimate"] == "exact" and not metrics["is_upper_bound"]
    assert metrics["denominator"] == words + len(documents)  # one </s> per document
    assert metrics["perplexity"] == pytest.approx(math.exp(-sum(totals) / (words + 3)), rel=1e-6)
    assert "one </s> per document" in metrics["summary"]
    # Per-sentence numbers add up to each document's total.
    lines = (tmp_path / "out" / "ppl-docs_sentences.jsonl").read_text().splitlines()
    per_sentence = [float(line.split('"log_prob": ')[1].split(",")[0].rstrip("}")) for line in lines]
    assert sum(per_sentence[:2]) == pytest.approx(totals[0], abs=1e-4)
    assert per_sentence[2] == pytest.approx(totals[1], abs=1e-4)


def test_cli_document_level_perplexity(tmp_path, capsys):
    from conftest import save_tiny_checkpoint

    from hf_slm.cli import main

    directory, _, _ = save_tiny_checkpoint(tmp_path / "doc-tg", TREES, vocab_size=40, document_level=True)
    data = _write_documents(tmp_path / "docs.mrg", DOCS)
    assert main(["eval", "ppl", "--model", str(directory), "--data", str(data), "--document-level",
                 "--beam-size", "10", "--word-beam-size", "2"]) == 0
    printed = capsys.readouterr().out
    assert "approximation" in printed and "bound" not in printed
    record = json.loads((directory / "eval_results" / "ppl-docs.json").read_text())
    assert record["metrics"]["method"] == "beam_greedy_prefix" and record["metrics"]["documents"] == 3
    assert record["metrics"]["estimate"] == "approximation" and record["metrics"]["is_upper_bound"] is False
    assert record["options"]["document_level"] is True


@pytest.mark.parametrize("grammar", ["nb-up-in-m", "bi-up-ex-m", "dtg"])
def test_documents_of_other_families_chain_their_best_trees(grammar):
    """Bottom-up compositional documents (`</s>` after each sentence, Nb-Up's starts in the prefix) and DTG ones
    (each sentence closed by its arc onto the root) score sentence by sentence after the best trees before
    them, as TG's: sentence 2's numbers are those of a search after sentence 1's best tree, and differ from
    the sentence scored alone."""
    if grammar == "dtg":
        from helpers.dependency_models import tiny as tiny_dependency

        model, tokenizer = tiny_dependency("dtg", document_level=True)
        sentences = [["There", "is", "a", "difference"], ["a", "difference", "is", "there"]]
    else:
        from helpers.compositional_models import tiny as tiny_compositional

        model, tokenizer = tiny_compositional(grammar, document_level=True)
        sentences = [["the", "bird", "sings"], ["a", "dog", "barks", "."]]
    options = dict(beam_size=20, word_beam_size=5)
    (results,) = score_documents(model, tokenizer, [sentences], progress=False, **options)
    assert [result["words"] for result in results] == sentences
    search = WordSynchronousBeamSearch(model, BeamSearchOptions(**options), word_start_mask=tokenizer.word_start_mask,
                                       incomplete_word_ids=getattr(tokenizer, "incomplete_word_ids", ()))
    (first,) = search.search([words_to_pieces(tokenizer, sentences[0])[0]])
    (second,) = search.search([words_to_pieces(tokenizer, sentences[1])[0]], prefixes=[first.trees[0][0]])
    assert results[1]["log_prob"] == pytest.approx(second.log_prob, abs=1e-5)
    (alone,) = search.search([words_to_pieces(tokenizer, sentences[1])[0]])
    assert alone.log_prob != pytest.approx(second.log_prob, abs=1e-6)
