"""Every family's tokenizer as HF tools use it (issue 28, items 1 and 4).

One parametrized module over every registered variant (and every tokenizer class its family may hold): `decode`
takes an id, a list or a batch; `<s>`, `</s>`, `<pad>` and the start token decode as themselves unless
skip_special_tokens; the start token (`bos_token`: a dependency tokenizer's `<root>`) is the first token of
every encoded sequence; what decode writes encodes back
to the same ids, with or without the special tokens, for random sequences of the family's own format (one-word
constituents, unary chains, words of several pieces, unknown characters; a words-only sentence's `</s>`, which
skip_special_tokens leaves out as any HF tokenizer does, excepted); another family's format is refused with a
message naming the expected one; a string of plain words is a prompt (`<s>` and the pieces, as a GPT-2 or Llama
tokenizer reads text), which a words-only model scores as `hf-slm score` scores its words (and, with `</s>`
written, the whole sentence); and only a words-only tokenizer reads plain words without the start token, as a
client's continuation (issue 39: lm-evaluation-harness's tasks with their defaults).
"""

import contextlib
import io
import json
import random
from pathlib import Path

import pytest
import torch

from hf_slm import SyntacticTokenizer, SyntacticWordTokenizer, joint_log_probs
from hf_slm.cli import main
from hf_slm.families import grammar_class, registered_families
from hf_slm.families.tree_formats import tree_format
from hf_slm.tokenization.dependency_trees import DependencyTree
from hf_slm.tokenization.tokenization_compositional import STARTS_FIELD
from hf_slm.tokenization.tokenization_dependency import DependencyTokenizer
from hf_slm.tokenization.tree_type import Tree

from conftest import DEPENDENCY_TREEBANK, save_tiny_checkpoint

GUM = Path(__file__).resolve().parents[1] / "hf_slm" / "sample_data" / "gum" / "train.txt"
GUM_TREES = GUM.read_text(encoding="utf-8").splitlines()[:60]
DEPENDENCY_TREES = [DependencyTree(words, heads) for words, heads in DEPENDENCY_TREEBANK["train"]]
# Words of one piece, of several (a long one), with characters the piece models never saw (`ï`, `€`), spelled
# like a label, and spelled like an unknown-word class.
EXTRA_WORDS = ["naïve", "€€x", "antidisestablishmentarianism", "NP", "<UNK-LC>", "x"]
SAMPLES = 12


def _linearization(variant):
    return grammar_class(variant.name).linearization if variant.is_grammar else "terminals"


def _cases():
    """(case id, variant, tokenizer class, options): every registered variant with every tokenizer class its family
    may hold; a dependency variant also in the reference form, where the arc-standard system has one."""
    cases = []
    for family in registered_families():
        for variant in family.variants:
            for tokenizer_class in dict.fromkeys(family.tokenizer_classes):
                cases.append((f"{variant.name}-{tokenizer_class.__name__}", variant, tokenizer_class, {}))
                if tokenizer_class is DependencyTokenizer and _linearization(variant) == "arc_standard":
                    cases.append((f"{variant.name}-reference", variant, tokenizer_class, {"variant": "reference"}))
    return cases


CASES = _cases()
_built = {}


def build_tokenizer(variant, tokenizer_class, options):
    """A tiny tokenizer of the variant, as `hf-slm train` builds one (cached: several variants share one)."""
    key = (tokenizer_class, _linearization(variant), tuple(sorted(options.items())))
    if key not in _built:
        if tokenizer_class is DependencyTokenizer:
            _built[key] = DependencyTokenizer.train(DEPENDENCY_TREES, vocab_size=30, transition_system=key[1],
                                                    non_projective="lift", **options)
        elif tokenizer_class is SyntacticWordTokenizer:
            _built[key] = SyntacticWordTokenizer.train(GUM_TREES, linearization=key[1])
        else:
            _built[key] = tokenizer_class.train(GUM_TREES, vocab_size=150, linearization=key[1])
    return _built[key]


@pytest.fixture(params=CASES, ids=[case[0] for case in CASES])
def case(request):
    _, variant, tokenizer_class, options = request.param
    return variant, build_tokenizer(variant, tokenizer_class, options)


# ---- random sequences of each format ------------------------------------------------------------------------

def _word_pool(tokenizer):
    words = [word for tree in GUM_TREES[:20] for word in tree.replace("(", " ").replace(")", " ").split()
             if word.islower()]
    return sorted(set(words))[:40] + EXTRA_WORDS


def random_tree(rng, words, labels):
    """A random tree over 1 to 6 words: one-word constituents, unary chains and flat constituents, labelled with
    `labels` (or "" for unlabelled trees)."""
    def node(count):
        if count == 1 and rng.random() < 0.5:
            return rng.choice(words)
        children, left = [], count
        while left:
            size = rng.randint(1, left)
            children.append(node(size))
            left -= size
        tree = Tree(rng.choice(labels), children)
        if rng.random() < 0.2:  # a unary chain
            tree = Tree(rng.choice(labels), [tree])
        return tree

    tree = node(rng.randint(1, 6))
    return tree if isinstance(tree, Tree) else Tree(rng.choice(labels), [tree])


def random_dependency_tree(rng, words):
    """A random projective tree: each span's head is one of its words, the spans either side of it its dependents."""
    count = rng.randint(1, 6)
    heads = [0] * count

    def attach(low, high, head):
        if low > high:
            return
        middle = rng.randint(low, high)
        heads[middle - 1] = head
        attach(low, middle - 1, middle)
        attach(middle + 1, high, middle)

    attach(1, count, 0)
    return DependencyTree([rng.choice(words) for _ in range(count)], heads)


def sampled_encodings(variant, tokenizer, seed=0):
    """Encodings of random inputs of the variant's own format (what its tokenizer encodes its sequences from)."""
    rng = random.Random(seed)
    words = _word_pool(tokenizer)
    kind = tree_format(variant.tree_format).name
    encodings = []
    for _ in range(SAMPLES):
        if isinstance(tokenizer, DependencyTokenizer):
            item = random_dependency_tree(rng, words).to_inline()
        elif kind == "words" and tokenizer.linearization == "terminals":  # a prompt, or a sentence with its end
            item = " ".join(rng.choice(words) for _ in range(rng.randint(1, 6))) + rng.choice(["", " </s>"])
        elif getattr(tokenizer, "nonterminals", None):
            item = random_tree(rng, words, tokenizer.nonterminals)
        else:
            item = random_tree(rng, words, [""])
        encodings.append(tokenizer(item))
    return encodings


def decode_of(tokenizer, encoding, **options):
    if STARTS_FIELD in encoding:  # nb-up: a `)` says where it starts only through its constituent start
        options["starts"] = encoding[STARTS_FIELD]
    return tokenizer.decode(encoding["input_ids"], **options)


# ---- the contract ---------------------------------------------------------------------------------------------

def test_every_registered_variant_is_a_case():
    assert {variant.name for _, variant, _, _ in CASES} == {v.name for f in registered_families() for v in f.variants}


def test_decode_takes_an_id_a_list_a_tensor_and_a_batch(case):
    variant, tokenizer = case
    for index in range(len(tokenizer)):
        assert tokenizer.decode(index) == tokenizer.decode([index]) == tokenizer.decode(torch.tensor(index))
    ids = [encoding["input_ids"] for encoding in sampled_encodings(variant, tokenizer)[:3]]
    assert tokenizer.batch_decode(ids) == [tokenizer.decode(row) for row in ids]
    assert tokenizer.decode(torch.tensor(ids[0])) == tokenizer.decode(ids[0])


def test_special_tokens_decode_as_themselves_unless_skipped(case):
    variant, tokenizer = case
    start = tokenizer.convert_ids_to_tokens(tokenizer.start_id)  # `<root>` for the paper's dependency tokenizers
    specials = [tokenizer.pad_token, tokenizer.bos_token, start, tokenizer.eos_token]
    for token in specials:
        assert tokenizer.decode(tokenizer.convert_tokens_to_ids(token)) == token
        assert tokenizer.decode(tokenizer.convert_tokens_to_ids(token), skip_special_tokens=True) == ""
    for token in [tokenizer.unk_token] + (["<root>"] if isinstance(tokenizer, DependencyTokenizer) else []):
        assert tokenizer.decode(tokenizer.convert_tokens_to_ids(token)) == token
    ids = sampled_encodings(variant, tokenizer)[0]["input_ids"]
    written = tokenizer.decode([tokenizer.pad_token_id] + ids).split()
    assert written[:2] == [tokenizer.pad_token, start]
    assert (written[-1] == tokenizer.eos_token) == (ids[-1] == tokenizer.eos_token_id)
    skipped = tokenizer.decode([tokenizer.pad_token_id] + ids, skip_special_tokens=True).split()
    assert not set(skipped[:1] + skipped[-1:]) & set(specials)


def test_the_start_token_is_the_first_token_of_every_sequence(case, tmp_path):
    """`bos_token` is that token in every family (`<root>` for the paper's dependency tokenizers), and a saved
    tokenizer loads with the same one."""
    variant, tokenizer = case
    assert tokenizer.start_id == tokenizer.bos_token_id
    for encoding in sampled_encodings(variant, tokenizer):
        assert encoding["input_ids"][0] == tokenizer.start_id
    # a prompt of words, too
    assert tokenizer(["the"], is_split_into_words=True)["input_ids"][0] == tokenizer.start_id
    tokenizer.save_pretrained(tmp_path)
    reloaded = type(tokenizer).from_pretrained(tmp_path)
    assert (reloaded.bos_token, reloaded.bos_token_id) == (tokenizer.bos_token, tokenizer.bos_token_id)
    assert reloaded.convert_ids_to_tokens(list(range(len(tokenizer)))) == \
        tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))


def test_what_decode_writes_encodes_to_the_same_ids(case):
    variant, tokenizer = case
    for encoding in sampled_encodings(variant, tokenizer, seed=1) + sampled_encodings(variant, tokenizer, seed=2):
        for skip in (False, True):
            text = decode_of(tokenizer, encoding, skip_special_tokens=skip)
            again = tokenizer(text)
            expected = encoding["input_ids"]
            if skip and tokenizer.words_only and expected[-1] == tokenizer.eos_token_id and \
                    not text.startswith("("):  # plain words: their end left out, they read back as a prompt
                expected = expected[:-1]
            assert again["input_ids"] == expected, (skip, text)
            assert again.get(STARTS_FIELD) == encoding.get(STARTS_FIELD)


def test_a_bracket_over_one_word_is_not_read_as_a_pos_tag():
    variant = next(v for f in registered_families() for v in f.variants if v.name == "tg")
    tokenizer = build_tokenizer(variant, SyntacticTokenizer, {})
    ids = tokenizer("(S (NP The NP) (VP sleeps VP) S)")["input_ids"]
    assert tokenizer(tokenizer.decode(ids))["input_ids"] == ids
    # PTB brackets stay the written form where they read back as the tree, and POS-tagged PTB reads as today
    assert tokenizer.decode(tokenizer("(S (NP the cat) (VP sleeps))")["input_ids"], skip_special_tokens=True) == \
        "(S (NP the cat) (VP sleeps))"
    assert tokenizer("(S (NP (DT the) (NN cat)) (VP (VBZ sleeps)))")["input_ids"] == \
        tokenizer("(S (NP the cat) (VP sleeps))")["input_ids"]


CONLLU = "\n".join("\t".join(fields) for fields in [
    ("1", "The", "the", "DET", "DT", "_", "2", "det", "_", "_"),
    ("2", "cat", "cat", "NOUN", "NN", "_", "3", "nsubj", "_", "_"),
    ("3", "sleeps", "sleep", "VERB", "VBZ", "_", "0", "root", "_", "_")])


def test_another_familys_format_is_refused_naming_the_expected_one(case):
    variant, tokenizer = case
    if isinstance(tokenizer, DependencyTokenizer):
        foreign = ["(S (NP The cat) (VP sleeps))", "(S (NP The cat NP) (VP sleeps VP) S)"]
        expected = "inline dependency tree"
    else:
        foreign = ["The/2 cat/3 sleeps/0", CONLLU]
        expected = "unlabelled tree" if not getattr(tokenizer, "nonterminals", None) and \
            tokenizer.linearization != "terminals" else "PTB brackets"
        if type(tokenizer).__name__ == "CompositionalTokenizer":
            expected = "unlabelled tree"
    for text in foreign:
        with pytest.raises(ValueError, match=expected):
            tokenizer(text)
    # plain words whose items merely hold a slash are words
    assert tokenizer("the 1/2 cat")["input_ids"][0] == tokenizer.start_id


# ---- plain words: a prompt, and a continuation only for a words-only model --------------------------------------

WORDS_ONLY = [v.name for f in registered_families() for v in f.variants
              if tree_format(v.tree_format).name == "words" and v.is_grammar]


@pytest.mark.parametrize("grammar", WORDS_ONLY)
def test_words_only_model_scores_plain_words_as_hf_slm_score_does(grammar, tmp_path):
    directory, model, tokenizer = save_tiny_checkpoint(tmp_path / grammar, GUM_TREES, vocab_size=150, grammar=grammar)
    sentence = "the cat sleeps"
    ids = tokenizer(sentence)["input_ids"]
    tree = tokenizer("(S (NP the cat) (VP sleeps))" if not grammar.startswith("gpt2") else "( ( the cat ) sleeps )")
    # a prompt: the sentence's sequence (its tree's) without its end, as GPT-2's tokenizer reads text
    assert ids == tree["input_ids"][:-1] and tree["input_ids"][-1] == tokenizer.eos_token_id
    assert tokenizer(sentence + " </s>")["input_ids"] == tree["input_ids"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["score", "--model", str(directory), sentence]) == 0
    scored = json.loads(printed.getvalue().splitlines()[-1])
    assert scored["log_prob"] == pytest.approx(joint_log_probs(model, [tree["input_ids"]])[0], abs=1e-5)
    # what a client gets for the prompt (the shifted log-probs of its ids) is the words' alone: log p(x) without the
    # end's surprisal (nats)
    with torch.no_grad():
        logits = model(**tokenizer(sentence, return_tensors="pt")).logits[0, :-1]
    words_alone = float(logits.log_softmax(-1).gather(-1, torch.tensor(ids[1:])[:, None]).sum())
    assert words_alone == pytest.approx(scored["log_prob"] + scored["end_surprisal"], abs=1e-5)
    # without the start token: the pieces alone, a continuation
    assert tokenizer(sentence, add_special_tokens=False)["input_ids"] == ids[1:]


def test_only_a_words_only_tokenizer_reads_plain_words_without_the_start_token(case):
    """Issue 39: lm-evaluation-harness encodes a task's sentence without special tokens after its own prefix token; a
    tree model's tokenizer says at once that plain words are no part of its sequences, and what gives p(x)."""
    variant, tokenizer = case
    words = " ".join(_word_pool(tokenizer)[:3])
    prompt = tokenizer(words)["input_ids"]
    assert prompt[0] == tokenizer.start_id and tokenizer.eos_token_id not in prompt
    if tokenizer.linearization == "terminals":
        assert tokenizer(words, add_special_tokens=False)["input_ids"] == prompt[1:]
        return
    with pytest.raises(ValueError, match=r"plain words without the start token .* hf-slm eval blimp"):
        tokenizer(words, add_special_tokens=False)
    # a list of words stays a prompt's pieces, which the search asks for
    assert tokenizer(words.split(), is_split_into_words=True, add_special_tokens=False)["input_ids"] == prompt[1:]
