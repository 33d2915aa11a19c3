"""hf-slm's proposal parsers (issue 38): the tokenizer, the CRF constituency and biaffine dependency parsers as HF
models, J unique trees drawn per sentence, proposal files, and the bound they give (paper 000, section 3.1).

The parsers are tiny and random (tests/helpers/parser_models.py): the tokenizers are trained on the shipped GUM and
UD EWT samples, the weights drawn with a fixed seed. What is checked holds for any weights: a sentence's scores,
log Z and best tree do not depend on its batch; samples carry their own log q; the training loss is the mean of
log Z - score(gold tree) (plus the tagging or relation cross-entropy), computed here from the outputs; J unique
trees are unique, sorted and reproducible; proposal files read back through the families' tree formats as the
trees drawn; every tree of the samples written by decode_tree reads back as itself; proposals never estimate more
than the exact sum over the trees the parser can draw; a saved parser loads without hf-slm and gives the same trees.
The span and projective CRFs themselves are checked against enumeration in tests/test_span_crf.py and
tests/test_projective_crf.py.
"""

import itertools
import math
import re

import pytest
import torch
import torch.nn.functional as F
from conftest import ISOLATION_PREAMBLE, run_without_hf_slm, save_tiny_checkpoint
from helpers.dependency_models import every_projective_tree
from helpers.parser_models import (
    EWT,
    SPLITS,
    encode,
    ewt_examples,
    gum_trees,
    nary_trees,
    tiny_parser,
)
from hf_slm.tokenization.dependency_trees import DependencyTree, projective_tree
from hf_slm.tokenization.parser_trees import tree_to_spans
from hf_slm.tokenization.tokenization_parser import (
    BOS_ID,
    CHAR_BOS,
    CHAR_EOS,
    CHAR_PAD,
    CHAR_UNK,
    EOS_ID,
    PAD_ID,
    UNK_ID,
    ProposalParserTokenizer,
)
from hf_slm.tokenization.tokenization_slm import unknown_word_signature
from hf_slm.tokenization.trees import (
    has_preterminals,
    parse_tree,
    remove_unary_chains,
    tree_to_string,
)

from hf_slm.data.conllu_loader import read_conllu_file
from hf_slm.evaluation.proposals import (
    proposal_log_probs,
    read_proposal_blocks,
    read_proposals,
)
from hf_slm.families.tree_formats import tree_format
from hf_slm.parsers.data import ParserCollator
from hf_slm.parsers.parser import ProposalParser
from hf_slm.parsers.proposals import JOURNAL_SUFFIX, draw_proposals
from hf_slm.search.search_scorer import joint_in_length_order

pytestmark = pytest.mark.usefixtures("one_thread")

KINDS = ("crf", "crf-unlabeled", "biaffine", "rnng-discriminative")
# Lengths 4, 1, 13 and 2 (a padded batch has longer and shorter neighbours); words of the samples, a rare word and
# words no sample has.
SENTENCES = [["The", "cat", "sleeps", "."], ["Hi"],
             ["A", "very", "long", "sentence", "with", "many", "words", ",", "some", "unknown", ":", "Zyzzogeton",
              "."],
             ["Two", "words"]]
TOLERANCE = 1e-5  # float32 charts of a few dozen spans


@pytest.fixture(scope="module")
def gum():
    return gum_trees()


@pytest.fixture(scope="module")
def parsers(gum):
    """kind -> (model, tokenizer): the constituency parsers' tokenizers trained on every GUM sample tree (so every
    label and tag of the sample is known), the dependency parser's on every UD EWT sample sentence."""
    return {"crf": tiny_parser("crf", gum), "crf-unlabeled": tiny_parser("crf-unlabeled", gum),
            "biaffine": tiny_parser("biaffine", ewt_examples()), "rnng-discriminative": tiny_parser("rnng-discriminative", gum)}


def structure_of(tokenizer, text):
    """The structure (label and head ids) of a tree a parser wrote: PTB brackets, unlabelled brackets or CoNLL-U."""
    if tokenizer.tree_kind == "dependency":
        rows = [line.split("\t") for line in text.splitlines() if line and not line.startswith("#")]
        return {"heads": [int(row[6]) for row in rows], "relations": [tokenizer.label_ids[row[7]] for row in rows]}
    tree = tree_format("brackets" if tokenizer.labelled else "unlabelled_brackets").read(text)
    _, spans = tree_to_spans(tree, labelled=tokenizer.labelled)
    return {"spans": [(start, end, tokenizer.label_ids[label]) for start, end, label in spans]}


# ---- the tokenizer ---------------------------------------------------------------------------------------------------

def hand_tokenizer(max_word_length):
    """A tokenizer with vocabularies written here: words `ab` (id 4) and `cd` (id 5), characters a..l (ids 4..15)."""
    return ProposalParserTokenizer(words=["ab", "cd"], chars=list("abcdefghijkl"),
                                   labels=["S", "<binarized>", "<word>"], max_word_length=max_word_length)


def chars(text, width):
    """The character ids of `text` under hand_tokenizer: a..l are 4..15, anything else `<unk>`, padded to width."""
    row = [4 + "abcdefghijkl".index(c) if c in "abcdefghijkl" else CHAR_UNK for c in text]
    return row + [CHAR_PAD] * (width - len(row))


def boundary(char_id, width):
    return [char_id] + [CHAR_PAD] * (width - 1)


def test_a_padded_batch_has_word_ids_a_mask_and_character_rows():
    tokenizer = hand_tokenizer(6)
    encoded = tokenizer([["ab", "abcdefghij", "cd"], ["zz"]], is_split_into_words=True, padding=True,
                        return_tensors="pt")
    assert set(encoded) == {"input_ids", "attention_mask", "char_ids"}
    assert encoded["input_ids"].tolist() == [[BOS_ID, 4, UNK_ID, 5, EOS_ID], [BOS_ID, UNK_ID, EOS_ID, PAD_ID, PAD_ID]]
    assert encoded["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert encoded["char_ids"].shape == (2, 5, 6)
    padding = [CHAR_PAD] * 6
    assert encoded["char_ids"].tolist() == [
        [boundary(CHAR_BOS, 6), chars("ab", 6), chars("abchij", 6), chars("cd", 6), boundary(CHAR_EOS, 6)],
        [boundary(CHAR_BOS, 6), chars("zz", 6), boundary(CHAR_EOS, 6), padding, padding]]
    # one sentence, a string of words: a batch of one
    assert tokenizer("cd ab", return_tensors="pt")["input_ids"].tolist() == [[BOS_ID, 5, 4, EOS_ID]]


@pytest.mark.parametrize("width, kept", [(5, "abhij"), (6, "abchij"), (10, "abcdefghij"), (11, "abcdefghij")])
def test_a_long_word_keeps_its_first_and_last_characters(width, kept):
    encoded = hand_tokenizer(width)([["abcdefghij"]], is_split_into_words=True)
    assert encoded["char_ids"][0][1] == chars(kept, width)


def test_rare_and_unknown_words_map_to_their_class():
    trees = ["(S (NP The cat) (VP sleeps))", "(S (NP The dog) (VP sleeps) .)", "(S (NP The cats) (VP sleeps))"]
    tokenizer = ProposalParserTokenizer.train(trees, min_count=2)
    tokens = tokenizer.convert_ids_to_tokens
    assert tokens(tokenizer.word_id("The")) == "The" and tokens(tokenizer.word_id("sleeps")) == "sleeps"
    for rare, unseen in (("cat", "cow"), ("cats", "cows"), ("dog", "pig")):  # seen once: represented by its class
        assert unknown_word_signature(rare) == unknown_word_signature(unseen)
        assert tokens(tokenizer.word_id(rare)) == unknown_word_signature(rare) != "<unk>"
        assert tokenizer.word_id(unseen) == tokenizer.word_id(rare)
    assert unknown_word_signature("1999") not in tokenizer.get_vocab()  # a class no training word had
    ids = tokenizer([["The", "cow", "1999"]], is_split_into_words=True)["input_ids"][0]
    assert ids == [BOS_ID, tokenizer.word_id("The"), tokenizer.word_id("cat"), UNK_ID, EOS_ID]


@pytest.mark.parametrize("kind", KINDS)
def test_a_saved_tokenizer_loads_with_the_same_vocabularies_and_encodings(kind, parsers, gum, tmp_path):
    _, tokenizer = parsers[kind]
    tokenizer.save_pretrained(tmp_path)
    loaded = ProposalParserTokenizer.from_pretrained(tmp_path)
    for name in ("tree_kind", "labelled", "max_word_length", "normalization", "labels", "tags",
                 "vocabulary_fingerprint"):
        assert getattr(loaded, name) == getattr(tokenizer, name), name
    assert loaded.get_vocab() == tokenizer.get_vocab() and loaded.num_chars == tokenizer.num_chars
    before = tokenizer(SENTENCES, is_split_into_words=True, padding=True, return_tensors="pt")
    after = loaded(SENTENCES, is_split_into_words=True, padding=True, return_tensors="pt")
    assert set(before) == set(after) and all(torch.equal(before[key], after[key]) for key in before)
    examples = ewt_examples(("dev",))[:5] if kind == "biaffine" else gum[:5]
    assert [loaded.encode_target(example) for example in examples] == \
        [tokenizer.encode_target(example) for example in examples]


def test_a_tokenizer_keeps_its_options_through_save_and_load(tmp_path):
    trees = ["(ROOT (S (NP-SBJ (DT The) (NN cat)) (VP (VBZ sleeps))))",
             "(ROOT (S (NP (DT A) (NN dog)) (VP (VBZ runs))))"]
    tokenizer = ProposalParserTokenizer.train(trees, min_count=1, max_word_length=7, strip_function_tags=True,
                                              drop_root=False)
    tokenizer.save_pretrained(tmp_path)
    loaded = ProposalParserTokenizer.from_pretrained(tmp_path)
    assert (loaded.labelled, loaded.max_word_length) == (True, 7)
    assert loaded.normalization == {"strip_traces": True, "strip_function_tags": True, "preterminals": "auto",
                                    "drop_root": False}
    # the wrapper root stays (a chain over the sentence), the function tag goes
    assert loaded.tree_spans(trees[0]) == tokenizer.tree_spans(trees[0]) == \
        (["The", "cat", "sleeps"], [(0, 3, "ROOT+S"), (0, 2, "NP"), (0, 1, "<word>"), (1, 2, "<word>"),
                                    (2, 3, "VP")], ["DT", "NN", "VBZ"])


def test_encode_target_names_a_label_tag_or_relation_it_never_saw(parsers):
    _, tokenizer = parsers["crf"]
    with pytest.raises(ValueError, match="my tree: label 'ZZLABEL' is not in this parser's vocabulary"):
        tokenizer.encode_target("(S (NP (DT the) (NN cat)) (ZZLABEL (VBZ sleeps)))", "my tree")
    with pytest.raises(ValueError, match="POS tag 'ZZTAG' is not in this parser's vocabulary"):
        tokenizer.encode_target("(S (NP (ZZTAG the) (NN cat)) (VP (VBZ sleeps)))")
    with pytest.raises(ValueError, match="the tree has no POS tags"):
        tokenizer.encode_target("(S (NP the cat) (VP sleeps))")
    _, tokenizer = parsers["biaffine"]
    with pytest.raises(ValueError, match="relation 'zzrel' is not in this parser's vocabulary"):
        tokenizer.encode_target({"words": ["a", "b"], "heads": [2, 0], "relations": ["zzrel", "root"]})


# ---- the models --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_a_sentence_scores_the_same_alone_and_in_a_padded_batch(kind, parsers):
    model, tokenizer = parsers[kind]
    batch_inputs = encode(tokenizer, SENTENCES)
    with torch.no_grad():
        batch = model(**batch_inputs)
    best = model.best_structures(**batch_inputs)
    charts = batch.scores is not None  # a CRF's potentials (the RNNG scores its actions as it parses)
    assert not charts or batch.scores.shape[1] == max(map(len, SENTENCES)) + 1
    for row, words in enumerate(SENTENCES):
        inputs = encode(tokenizer, [words])
        with torch.no_grad():
            alone = model(**inputs)
        size = len(words) + 1
        if charts:
            torch.testing.assert_close(batch.scores[row, :size, :size], alone.scores[0], atol=TOLERANCE, rtol=0)
            torch.testing.assert_close(batch.log_partition[row], alone.log_partition[0], atol=TOLERANCE, rtol=0)
        own = model.best_structures(**inputs)[0]
        assert {key: value for key, value in best[row].items() if key != "log_prob"} == \
            {key: value for key, value in own.items() if key != "log_prob"}
        assert best[row]["log_prob"] == pytest.approx(own["log_prob"], abs=TOLERANCE)


@pytest.mark.parametrize("kind", KINDS)
def test_samples_carry_their_log_q_and_none_beats_the_best_tree(kind, parsers):
    model, tokenizer = parsers[kind]
    inputs = encode(tokenizer, SENTENCES)
    samples = model.sample_structures(8, generator=torch.Generator().manual_seed(0), **inputs)
    best = model.best_structures(**inputs)
    assert [len(row) for row in samples] == [8] * len(SENTENCES)
    for k in range(8):
        structures = [row[k] for row in samples]
        given = torch.tensor([structure["log_prob"] for structure in structures])
        torch.testing.assert_close(model.structure_log_probs(structures, **inputs), given, atol=TOLERANCE, rtol=0)
    torch.testing.assert_close(model.structure_log_probs(best, **inputs),
                               torch.tensor([structure["log_prob"] for structure in best]), atol=TOLERANCE, rtol=0)
    for row, structure in zip(samples, best):
        assert structure["log_prob"] <= TOLERANCE
        if model.best_is_exact:  # (the RNNG's best tree is its greedy parse's)
            assert all(sample["log_prob"] <= structure["log_prob"] + TOLERANCE for sample in row)


def every_tree_of_three_words(kind, tokenizer):
    """The structures of every tree a parser of `kind` can give three words (enumerated here)."""
    words = ["a", "b", "c"]
    if kind == "biaffine":
        return [{"heads": list(tree.heads)} for tree in every_projective_tree(words) if tree.heads.count(0) == 1]
    # unlabelled trees have no one-word constituents: without them, the distinct shapes
    shapes = {tree_to_string(remove_unary_chains(parse_tree(text))) for text in nary_trees(words, ["X"])}
    return [{"spans": [(i, j, tokenizer.label_ids[label])
                       for i, j, label in tree_to_spans(parse_tree(text), labelled=False)[1]]}
            for text in sorted(shapes)]


@pytest.mark.parametrize("kind", ["crf-unlabeled", "biaffine"])
def test_q_sums_to_one_over_every_tree_of_a_short_sentence(kind, parsers):
    model, tokenizer = parsers[kind]
    structures = every_tree_of_three_words(kind, tokenizer)
    # the single-root projective trees; ((a b) c), (a (b c)) and (a b c)
    assert len(structures) == (7 if kind == "biaffine" else 3)
    inputs = encode(tokenizer, [["the", "cat", "sleeps"]] * len(structures))
    log_q = model.structure_log_probs(structures, **inputs)
    assert float(torch.logsumexp(log_q.double(), 0)) == pytest.approx(0.0, abs=TOLERANCE)


def test_the_constituency_loss_is_log_z_minus_the_gold_score_plus_tagging(parsers, gum):
    """The tree loss is the mean over sentences of log Z - score(gold); with tags, each sentence's summed tagging
    negative log-likelihood is added, averaged over sentences too (ProposalParserOutput's docstring)."""
    model, tokenizer = parsers["crf"]
    trees = [tree for tree in gum if len(tree.leaves()) <= 12][:4]
    rows = [tokenizer.encode_target(tree) for tree in trees]
    batch = ParserCollator(tokenizer)(rows)
    assert {len(row["tags"]) for row in rows} != {1}  # sentences of several lengths: padding in the batch
    untagged = {key: value for key, value in batch.items() if key != "tags"}
    with torch.no_grad():
        out = model(**untagged)
    gold = torch.stack([sum(out.scores[b, i, j, label] for i, j, label in row["spans"]) for b, row in enumerate(rows)])
    assert torch.all(out.log_partition > gold)  # every tree has a positive probability
    assert float(out.loss) == pytest.approx(float((out.log_partition - gold).mean()), abs=1e-4)
    model.zero_grad()
    out = model(**batch)
    log_tags = out.label_logits.detach().log_softmax(-1)
    tagging = torch.stack([-log_tags[b, 1 : 1 + len(row["tags"])].gather(1, torch.tensor(row["tags"])[:, None]).sum()
                           for b, row in enumerate(rows)])
    expected = (out.log_partition.detach() - gold + tagging).mean()
    assert float(out.loss.detach()) == pytest.approx(float(expected), abs=1e-4)
    check_gradients(model, out.loss)


def test_the_dependency_loss_is_log_z_minus_the_gold_score_plus_relations(parsers):
    """As for constituency, with each sentence's summed relation negative log-likelihood at its gold arcs."""
    model, tokenizer = parsers["biaffine"]
    examples = [example for example in ewt_examples(("dev",)) if len(example["words"]) <= 12][:4]
    rows = [tokenizer.encode_target(example) for example in examples]
    batch = ParserCollator(tokenizer)(rows)
    with torch.no_grad():
        out = model(**{key: value for key, value in batch.items() if key != "relations"})
    gold = torch.stack([sum(out.scores[b, head, d] for d, head in enumerate(row["heads"], start=1))
                        for b, row in enumerate(rows)])
    assert float(out.loss) == pytest.approx(float((out.log_partition - gold).mean()), abs=1e-4)
    model.zero_grad()
    out = model(**batch)
    relations = torch.stack([sum(F.cross_entropy(out.label_logits[b, head, d].detach(), torch.tensor(relation))
                                 for d, (head, relation) in enumerate(zip(row["heads"], row["relations"]), start=1))
                             for b, row in enumerate(rows)])
    expected = (out.log_partition.detach() - gold + relations).mean()
    assert float(out.loss.detach()) == pytest.approx(float(expected), abs=1e-4)
    check_gradients(model, out.loss)


def check_gradients(model, loss):
    loss.backward()
    missing = [name for name, parameter in model.named_parameters() if parameter.grad is None]
    assert not missing
    assert all(torch.isfinite(parameter.grad).all() for parameter in model.parameters())
    for name, parameter in model.named_parameters():
        if "scorer" in name:
            assert parameter.grad.abs().sum() > 0, name
    model.zero_grad()


# ---- J unique trees per sentence -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def proposal_parsers(parsers):
    return {kind: ProposalParser(*parsers[kind], source=kind) for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS)
def test_draw_gives_distinct_trees_most_probable_first_with_their_log_q(kind, parsers, proposal_parsers):
    model, tokenizer = parsers[kind]
    drawn = proposal_parsers[kind].draw(SENTENCES, 6, max_draws=60, seed=1)
    assert len(drawn) == len(SENTENCES)
    for words, block in zip(SENTENCES, drawn):
        assert len(block["trees"]) == len(set(block["trees"])) == len(block["log_q"]) <= 6
        assert block["log_q"] == sorted(block["log_q"], reverse=True)
        assert len(block["trees"]) <= block["draws"] <= 60
        if len(words) > 10:  # more trees than a few draws could miss
            assert len(block["trees"]) == 6
        # each tree, read back, has the log q the block gives it
        structures = [structure_of(tokenizer, tree) for tree in block["trees"]]
        log_q = model.structure_log_probs(structures, **encode(tokenizer, [words] * len(structures)))
        torch.testing.assert_close(log_q, torch.tensor(block["log_q"]), atol=1e-4, rtol=0)


@pytest.mark.parametrize("kind", KINDS)
def test_the_same_seed_draws_the_same_trees(kind, proposal_parsers):
    parser = proposal_parsers[kind]
    first = parser.draw(SENTENCES, 5, max_draws=40, seed=7)
    assert parser.draw(SENTENCES, 5, max_draws=40, seed=7) == first
    assert parser.draw(SENTENCES, 5, max_draws=40, seed=8) != first


def same_draws(found, expected):
    """The same trees and draws per sentence, and the same log q up to float noise (a batch of other sentences
    changes the encoder's float sums in their last bits)."""
    assert [(block["trees"], block["draws"]) for block in found] == \
        [(block["trees"], block["draws"]) for block in expected]
    for block, other in zip(found, expected):
        assert block["log_q"] == pytest.approx(other["log_q"], abs=TOLERANCE)


@pytest.mark.parametrize("kind", KINDS)
def test_each_sentence_draws_from_its_own_seed_and_index(kind, proposal_parsers):
    """Sentences of one length (the same padding in any batch): the same trees in batches of one or of two, alone
    under their own index, and other trees under another index."""
    parser = proposal_parsers[kind]
    sentences = [["The", "cat", "sleeps", "."], ["They", "left", "early", "."]]
    together = parser.draw(sentences, 3, max_draws=30, seed=4)
    same_draws(parser.draw(sentences, 3, max_draws=30, seed=4, batch_size=1), together)
    same_draws(parser.draw(sentences[1:], 3, max_draws=30, seed=4, indices=[1]), together[1:])
    assert parser.draw(sentences[1:], 3, max_draws=30, seed=4, indices=[0])[0]["trees"] != together[1]["trees"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_sentences_samples_depend_on_its_own_generator_only(kind, parsers):
    """draw_per_sentence's promise: with a generator per sentence, a sentence's samples (in order) are the same
    alone and beside a longer sentence."""
    model, tokenizer = parsers[kind]
    short, long = SENTENCES[0], SENTENCES[2]
    alone = model.sample_structures(16, generator=[torch.Generator().manual_seed(5)], **encode(tokenizer, [short]))
    beside = model.sample_structures(16, generator=[torch.Generator().manual_seed(5), torch.Generator().manual_seed(6)],
                                     **encode(tokenizer, [short, long]))
    key = "heads" if kind == "biaffine" else "spans"
    assert [sample[key] for sample in beside[0]] == [sample[key] for sample in alone[0]]


@pytest.mark.parametrize("kind", KINDS)
def test_a_sentence_draws_the_same_trees_alone_among_others_and_whatever_the_batch_size(kind, proposal_parsers):
    parser = proposal_parsers[kind]
    sentences = [SENTENCES[2], ["They", "left", "the", "house", "very", "early", "."]]  # 13 and 7 words
    together = parser.draw(sentences, 5, max_draws=40, seed=7)
    same_draws(parser.draw(sentences[1:], 5, max_draws=40, seed=7, indices=[1]), together[1:])
    same_draws(parser.draw(sentences, 5, max_draws=40, seed=7, batch_size=1), together)


@pytest.mark.parametrize("kind, counts", [("crf-unlabeled", {1: 1, 2: 1, 3: 3}), ("biaffine", {1: 1, 2: 2, 3: 7})])
def test_a_sentence_with_few_trees_stops_at_the_cap_with_fewer_trees(kind, counts, parsers, proposal_parsers):
    """`counts`: how many trees a sentence of 1, 2, 3 words has (unlabelled: ((a b) c), (a (b c)), (a b c); dependency:
    the single-root projective trees). Both trees of two words are about equally likely here, so 200 draws find
    them; a tree of three words may be rarer than that."""
    model, tokenizer = parsers[kind]
    sentences = [["Hi"], ["Two", "words"], ["the", "cat", "sleeps"]]
    drawn = proposal_parsers[kind].draw(sentences, 10, max_draws=200, seed=0)
    for words, block in zip(sentences, drawn):
        assert block["draws"] == 200  # fewer than 10 trees exist: it draws until the cap
        structures = [structure_of(tokenizer, tree) for tree in block["trees"]]
        if kind == "biaffine":
            assert all(DependencyTree(words, s["heads"]).is_projective() and s["heads"].count(0) == 1
                       for s in structures)
        log_q = model.structure_log_probs(structures, **encode(tokenizer, [words] * len(structures)))
        assert float(torch.logsumexp(log_q.double(), 0)) <= TOLERANCE  # distinct trees: their q sum to at most 1
        assert 1 <= len(block["trees"]) <= counts[len(words)]
        if len(words) < 3:
            assert len(block["trees"]) == counts[len(words)]


@pytest.mark.parametrize("num, max_draws, problem", [
    (0, None, "num 0"), (-2, 10, "num -2"), (1.5, 10, "num 1.5"), ("3", 10, "num '3'"),
    (5, 4, "max_draws 4: expected at least num"), (2, 0, "max_draws 0"), (2, 2.5, "max_draws 2.5"),
])
def test_bad_num_or_max_draws_is_refused(num, max_draws, problem, proposal_parsers, tmp_path):
    with pytest.raises(ValueError, match=re.escape(problem)):
        proposal_parsers["crf"].draw(SENTENCES, num, max_draws=max_draws)
    with pytest.raises(ValueError, match=re.escape(problem)):
        draw_proposals(proposal_parsers["crf"], SENTENCES, tmp_path / "p.txt", num, max_draws, progress=False)
    assert not (tmp_path / "p.txt").exists()


# ---- proposal files --------------------------------------------------------------------------------------------

FILE_SENTENCES = SENTENCES[:1] + SENTENCES[3:] + [["Hi"], ["They", "left", "early", "."]]


@pytest.fixture(scope="module")
def proposal_files(proposal_parsers, tmp_path_factory):
    """kind -> (file, the blocks parser.draw gives the same sentences and settings), J = 4, seed 3."""
    folder = tmp_path_factory.mktemp("proposals")
    files = {}
    for kind, parser in proposal_parsers.items():
        path = folder / ("proposals.conllu" if kind == "biaffine" else f"proposals-{kind}.txt")
        draw_proposals(parser, FILE_SENTENCES, path, num=4, max_draws=40, seed=3, progress=False)
        files[kind] = (path, parser.draw(FILE_SENTENCES, 4, max_draws=40, seed=3))
    return files


def check_comments(path, drawn):
    """The file's `# sentence K: M unique trees from D draws` and `# log_q = X` lines say what was drawn."""
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# proposal trees drawn by hf-slm: the ")
    found = re.findall(r"^# sentence (\d+): (\d+) unique trees from (\d+) draws$", text, re.MULTILINE)
    assert found == [(str(k), str(len(block["trees"])), str(block["draws"])) for k, block in enumerate(drawn, 1)]
    log_q = [float(value) for value in re.findall(r"^# log_q = (\S+)$", text, re.MULTILINE)]
    assert log_q == pytest.approx([value for block in drawn for value in block["log_q"]], abs=1e-6)


def test_a_labelled_parsers_file_reads_as_brackets_and_as_unlabelled_brackets(proposal_files):
    path, drawn = proposal_files["crf"]
    check_comments(path, drawn)
    as_written = [block.trees for block in tree_format("brackets").proposal_blocks(path)]  # not normalized
    normalized = read_proposals(path, normalization={}, tree_format_name="brackets")
    unlabelled = read_proposals(path, tree_format_name="unlabelled_brackets")
    assert [len(block) for block in as_written] == [len(block["trees"]) for block in drawn]
    assert [len(block) for block in normalized] == [len(block) for block in unlabelled] == \
        [len(block["trees"]) for block in drawn]
    for words, written, plain, bare, block in zip(FILE_SENTENCES, as_written, normalized, unlabelled, drawn):
        assert [tree_to_string(tree) for tree in written] == block["trees"]
        assert all(tree.leaves() == words for tree in written + plain + bare)
        assert all(has_preterminals(tree) for tree in written)  # POS tags over every word, as written
        assert all(tree.label() == "" for tree in bare)  # labels left out
    assert len(as_written[1]) > 1 and len(as_written[2]) > 1  # two words, one word: still several labelled trees


def test_an_unlabelled_parsers_file_reads_as_unlabelled_brackets(proposal_files):
    path, drawn = proposal_files["crf-unlabeled"]
    check_comments(path, drawn)
    blocks = read_proposals(path, tree_format_name="unlabelled_brackets")
    writer = tree_format("unlabelled_brackets")
    assert [[writer.write(tree) for tree in block] for block in blocks] == [block["trees"] for block in drawn]
    assert [len(block) for block in blocks] == [4, 1, 1, 4]  # one tree of two words, and of one word
    assert all(tree.leaves() == words for words, block in zip(FILE_SENTENCES, blocks) for tree in block)


def test_an_unlabelled_parser_writes_trees_without_unary_constituents(proposal_files):
    path, _ = proposal_files["crf-unlabeled"]
    trees = [tree for block in read_proposals(path, tree_format_name="unlabelled_brackets") for tree in block]
    assert [tree for tree in trees if remove_unary_chains(tree) != tree] == []


def test_a_dependency_parsers_file_reads_as_conllu_grouped_by_sent_id(proposal_files):
    path, drawn = proposal_files["biaffine"]
    check_comments(path, drawn)
    blocks = list(tree_format("dependency").proposal_blocks(path))
    assert [block.sent_id for block in blocks] == [str(k) for k in range(1, len(FILE_SENTENCES) + 1)]
    assert [len(block.trees) for block in blocks] == [len(block["trees"]) for block in drawn]
    assert [len(block.trees) for block in blocks][1:3] == [2, 1]  # every tree of two words, of one word
    for words, block, expected in zip(FILE_SENTENCES, blocks, drawn):
        for tree, text in zip(block.trees, expected["trees"]):
            assert list(tree.words) == words
            assert tree.heads.count(0) == 1 and tree.is_projective()
            assert list(tree.heads) == [int(line.split("\t")[6]) for line in text.splitlines()]


def test_a_rerun_reuses_the_journal_and_other_settings_are_refused(proposal_parsers, tmp_path, monkeypatch):
    parser = proposal_parsers["crf"]
    path = tmp_path / "proposals.txt"
    record = draw_proposals(parser, FILE_SENTENCES, path, num=3, max_draws=30, seed=5, batch_size=2, progress=False)
    assert record["sentences"] == len(FILE_SENTENCES) and record["num"] == 3
    assert (tmp_path / ("proposals.txt" + JOURNAL_SUFFIX)).is_file()
    written = path.read_bytes()

    def no_drawing(*args, **kwargs):
        raise AssertionError("a rerun with the same settings draws nothing")

    with monkeypatch.context() as patch:
        patch.setattr(parser, "draw", no_drawing)
        draw_proposals(parser, FILE_SENTENCES, path, num=3, max_draws=30, seed=5, batch_size=2, progress=False)
    assert path.read_bytes() == written
    for change in ({"seed": 6}, {"num": 4}, {"max_draws": 31}):
        settings = {"num": 3, "max_draws": 30, "seed": 5, **change}
        with pytest.raises(ValueError, match="belongs to another run"):
            draw_proposals(parser, FILE_SENTENCES, path, batch_size=2, progress=False, **settings)
    with pytest.raises(ValueError, match="belongs to another run"):
        draw_proposals(parser, FILE_SENTENCES[:2], path, num=3, max_draws=30, seed=5, progress=False)
    assert path.read_bytes() == written
    draw_proposals(parser, FILE_SENTENCES, path, num=2, max_draws=30, seed=5, overwrite=True, progress=False)
    assert len(read_proposals(path)[0]) == 2


# ---- every sample tree reads back as the family's format --------------------------------------------------------

@pytest.fixture(scope="module")
def tg_model(tmp_path_factory):
    """A tiny random TG language model (its tokenizer's normalization is the one TG reads trees with)."""
    trees = ["(S (NP the bird) sings)", "(S (NP a dog) barks (NP the bird))", "(NP (NP the dog) (NP a bird))"]
    _, model, tokenizer = save_tiny_checkpoint(tmp_path_factory.mktemp("tg"), trees, vocab_size=30, grammar="tg")
    return model, tokenizer, trees


def test_every_gum_tree_written_by_the_parser_reads_back_as_itself(parsers, gum, tg_model):
    _, tg_tokenizer, _ = tg_model
    brackets, unlabelled = tree_format("brackets"), tree_format("unlabelled_brackets")
    labelled_tokenizer, unlabelled_tokenizer = parsers["crf"][1], parsers["crf-unlabeled"][1]
    failures = []
    for index, raw in enumerate(gum):
        where = f"GUM tree {index + 1}"
        words, spans, tags = labelled_tokenizer.tree_spans(raw, where)
        structure = {"spans": [(i, j, labelled_tokenizer.label_ids[label]) for i, j, label in spans],
                     "tags": [labelled_tokenizer.tag_ids[tag] for tag in tags]}
        text = labelled_tokenizer.decode_tree(words, structure)
        gold = brackets.read_proposal(tree_to_string(raw), where, tg_tokenizer.normalization)
        if brackets.read_proposal(text, where, tg_tokenizer.normalization) != gold:
            failures.append((where, text))
        # unlabelled: what paper 003's tokenizer encodes of the gold tree (unary chains removed)
        words, spans, _ = unlabelled_tokenizer.tree_spans(raw, where)
        text = unlabelled_tokenizer.decode_tree(words, {"spans": [(i, j, unlabelled_tokenizer.label_ids[label])
                                                                  for i, j, label in spans]})
        if unlabelled.read_proposal(text, where) != remove_unary_chains(unlabelled.read_proposal(tree_to_string(raw),
                                                                                                 where)):
            failures.append((where, text))
    assert len(gum) == 1800 and not failures, failures[:3]


def test_every_ewt_tree_written_by_the_parser_reads_back_with_its_heads(parsers, tmp_path):
    _, tokenizer = parsers["biaffine"]
    sentences = []
    for split in SPLITS:
        path = EWT / f"en_ewt-sample-ud-{split}.conllu"
        for example in read_conllu_file(path, path.name):
            tree, _ = projective_tree(DependencyTree(example["words"], example["heads"]), "lift")
            sentences.append((example["words"], list(tree.heads), example["deprels"]))
    dependency = tree_format("dependency")
    inline, conllu = [], []
    for number, (words, heads, relations) in enumerate(sentences, start=1):
        structure = {"heads": heads, "relations": [tokenizer.label_ids[relation] for relation in relations]}
        inline.append(tokenizer.decode_tree(words, structure) + "\n")
        conllu.append(f"# sent_id = {number}\n" + tokenizer.decode_tree(words, structure, "conllu") + "\n")
    (tmp_path / "inline.txt").write_text("\n".join(inline), encoding="utf-8")  # blocks of one tree
    path = tmp_path / "trees.conllu"
    path.write_text("\n".join(conllu) + "\n", encoding="utf-8")
    assert len(sentences) == 150
    for name in ("inline.txt", "trees.conllu"):
        read = list(dependency.proposal_blocks(tmp_path / name))
        assert len(read) == len(sentences), name
        for block, (words, heads, _) in zip(read, sentences):
            assert len(block.trees) == 1
            assert (list(block.trees[0].words), list(block.trees[0].heads)) == (words, heads), name
    written = list(read_conllu_file(path, path.name))
    assert [example["deprels"] for example in written] == [relations for _, _, relations in sentences]


# ---- the bound (paper 000, section 3.1) ---------------------------------------------------------------------------

BOUND_WORDS = ["the", "bird", "sings"]


def test_proposals_bound_log_p_x_from_below_and_tighten_as_j_grows(tg_model, tmp_path):
    """With the labels S and NP (no unary chains in its training trees), the parser draws only trees of
    nary_trees(BOUND_WORDS, ["S", "NP"]): the exact log of the sum of p(x, y) over all of them bounds every estimate
    from proposals, and the estimate from the first J distinct proposals of a file grows with J (strictly whenever
    a tree new to the model is added). Tolerance: 1e-4 nats (float32 log-probs of the same sequences scored in
    batches of different padding)."""
    lm, lm_tokenizer, trees = tg_model
    model, tokenizer = tiny_parser("crf", trees, min_count=1)
    assert sorted(tokenizer.labels) == ["<binarized>", "<word>", "NP", "S"]
    universe = nary_trees(BOUND_WORDS, ["S", "NP"])
    assert len(universe) == 2 * 3 ** 3 + 2 * (2 * 2 * 3 ** 3)  # flat, ((a b) c) and (a (b c)): 270 trees
    # two trees are one for the model when it reads the same ids (`(S (NP the) (NP bird) (NP sings))` reads as POS
    # tags over the words): the sum runs over the distinct sequences
    universe_ids = {tuple(lm_tokenizer(tree)["input_ids"]) for tree in universe}
    joint = joint_in_length_order(lm, [list(ids) for ids in sorted(universe_ids)], 512, False)
    exact = float(torch.logsumexp(torch.tensor(joint, dtype=torch.float64), 0))
    assert math.isfinite(exact) and 100 < len(universe_ids) < len(universe)
    parser = ProposalParser(model, tokenizer, source="bound parser")
    path = tmp_path / "proposals.txt"
    draw_proposals(parser, [BOUND_WORDS], path, num=64, max_draws=2000, seed=0, progress=False)
    blocks = read_proposal_blocks(path, lm, lm_tokenizer)
    assert len(blocks[0].trees) == 64
    drawn_ids = {tuple(lm_tokenizer(tree)["input_ids"]) for tree in blocks[0].trees}
    assert drawn_ids <= universe_ids
    estimates = [proposal_log_probs(lm, lm_tokenizer, blocks, progress=False, max_proposals=j)[0]
                 for j in (1, 2, 4, 8, 16, 32, 64)]
    for (low, count, _), (high, more, _) in itertools.pairwise(estimates):
        assert count <= more and high >= low - 1e-4
        if more > count:
            assert high > low
    assert estimates[0][1] == 1 and estimates[-1][1] > 32
    assert all(estimate <= exact + 1e-4 for estimate, _, _ in estimates)
    assert estimates[-1][0] < exact  # the parser drew some of the trees, not all
    for j in (1, 2, 4, 8):  # files of J trees each, drawn apart
        draw_proposals(parser, [BOUND_WORDS], tmp_path / f"J{j}.txt", num=j, seed=1, progress=False)
        block = read_proposal_blocks(tmp_path / f"J{j}.txt", lm, lm_tokenizer)
        estimate, count, _ = proposal_log_probs(lm, lm_tokenizer, block, progress=False)[0]
        assert 1 <= count <= j and estimate <= exact + 1e-4


# ---- loading without hf-slm ------------------------------------------------------------------------------------

CHILD = ISOLATION_PREAMBLE + r'''
import sys, torch
from transformers import AutoModel, AutoTokenizer

sentences = torch.load(sys.argv[1])["sentences"]
found = {}
for checkpoint in sys.argv[2:-1]:
    model = AutoModel.from_pretrained(checkpoint, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(checkpoint, trust_remote_code=True)
    inputs = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        log_z = model(**inputs).log_partition
    best = model.best_structures(**inputs)
    found[checkpoint] = {"log_z": log_z, "best": best, "input_ids": inputs["input_ids"],
                         "trees": [tokenizer.decode_tree(words, tree) for words, tree in zip(sentences, best)],
                         "modules": [type(model).__module__, type(tokenizer).__module__]}
torch.save(found, sys.argv[-1])
'''


def test_a_saved_parser_loads_without_hf_slm_and_with_it(parsers, tmp_path):
    from transformers import AutoModel, AutoTokenizer

    folders = {}
    for kind in ("crf", "biaffine", "rnng-discriminative"):
        model, tokenizer = parsers[kind]
        folders[kind] = tmp_path / kind
        model.save_pretrained(folders[kind])
        tokenizer.save_pretrained(folders[kind])
    torch.save({"sentences": SENTENCES}, tmp_path / "inputs.pt")
    found = run_without_hf_slm(CHILD, [tmp_path / "inputs.pt", *folders.values()], tmp_path)
    for kind, folder in folders.items():
        model, tokenizer = parsers[kind]
        inputs = encode(tokenizer, SENTENCES)
        with torch.no_grad():
            log_z = model(**inputs).log_partition
        best = model.best_structures(**inputs)
        child = found[str(folder)]
        assert all(not module.startswith("hf_slm") for module in child["modules"]), child["modules"]
        assert torch.equal(child["input_ids"], inputs["input_ids"])
        torch.testing.assert_close(child["log_z"], log_z, atol=TOLERANCE, rtol=0)
        assert [{key: value for key, value in structure.items() if key != "log_prob"} for structure in child["best"]] \
            == [{key: value for key, value in structure.items() if key != "log_prob"} for structure in best]
        assert child["trees"] == [tokenizer.decode_tree(words, structure) for words, structure in zip(SENTENCES, best)]
        # with hf_slm installed, the Auto classes load its own classes, without trust_remote_code
        installed = AutoModel.from_pretrained(folder).eval()
        installed_tokenizer = AutoTokenizer.from_pretrained(folder)
        assert type(installed) is type(model)  # hf-slm's class (a family's package's: the discriminative RNNG's)
        assert type(installed_tokenizer).__module__.startswith("hf_slm.tokenization.")
        with torch.no_grad():
            torch.testing.assert_close(installed(**encode(installed_tokenizer, SENTENCES)).log_partition, log_z,
                                       atol=TOLERANCE, rtol=0)
        assert ProposalParser.load(folder).best(SENTENCES) == ProposalParser(model, tokenizer).best(SENTENCES)
