"""The DTG tokenizer (tokenization/tokenization_dependency.py): trees <-> ids for every transition system, ids
the grammars accept (subwords included), saving and loading without hf-slm, and errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ISOLATION_PREAMBLE
from hf_slm.modeling.dependency_grammars import DEPENDENCY_GRAMMARS, DependencyLayout
from hf_slm.modeling.grammars import PositionKind
from hf_slm.tokenization.dependency_trees import DependencyTree, projective_tree
from hf_slm.tokenization.tokenization_dependency import DependencyTokenizer

EWT = Path(__file__).resolve().parents[2] / "shared" / "data" / "ud_english_ewt"
TREES = ["There/2 is/0 a/4 difference/2", "The/2 cat/3 sleeps/0 ./3", "a/0 b/1 c/1", "Dogs/2 bark/0 loudly/2",
         "She/2 gave/0 him/2 a/5 book/2 ./2"]
GRAMMAR_OF = {"arc_standard": "dtg", "arc_eager": "dtg_eager", "arc_swift": "dtg_swift"}
STRUCTURE = {  # the structure tokens of TREES[0] (paper 002 Figures 1, 4 and 5)
    "arc_standard": "<root> <LA> <LA> <RA> <RA> </s>",
    "arc_eager": "<root> <LA> <RA> <LA> <RA> <POP> <POP> <POP> </s>",
    "arc_swift": "<root> <LA[1]> <RA[1]> <LA[1]> <RA[1]> </s>",
}


@pytest.fixture(scope="module", params=sorted(GRAMMAR_OF))
def tokenizer(request):
    max_k = 3 if request.param == "arc_swift" else None  # more LA[k] / RA[k] ids than the trees need
    return DependencyTokenizer.train(TREES, vocab_size=40, transition_system=request.param, max_k=max_k)


def test_trees_round_trip_and_structure_tokens_follow_the_oracle(tokenizer):
    system = tokenizer.transition_system
    for text in TREES:
        ids = tokenizer(text)["input_ids"]
        assert tokenizer.decode(ids, skip_special_tokens=True) == text
    tokens = tokenizer.convert_ids_to_tokens(tokenizer(TREES[0])["input_ids"])
    assert " ".join(t for t in tokens if t.startswith("<")) == STRUCTURE[system]
    # load_conllu's examples (mappings with words and heads) encode as their trees, alone or in a batch
    examples = [{"words": tree.words, "heads": tree.heads, "upos": None} for tree in map(DependencyTree.from_inline, TREES)]
    assert tokenizer(examples)["input_ids"] == tokenizer(TREES)["input_ids"]
    assert tokenizer(examples[1])["input_ids"] == tokenizer(TREES[1])["input_ids"]
    words = tokenizer("There is a difference")["input_ids"]  # plain words: a prompt, no structure, no </s>
    assert words[0] == tokenizer.start_id and tokenizer.decode(words, skip_special_tokens=True) == "There is a difference"


def test_the_grammar_accepts_what_the_tokenizer_writes(tokenizer):
    layout = DependencyLayout(**tokenizer.action_layout)
    grammar = DEPENDENCY_GRAMMARS[GRAMMAR_OF[tokenizer.transition_system]](layout)
    encoded = tokenizer(TREES, return_word_starts=True)
    batch = grammar.batch(encoded["input_ids"])
    continuations = set(layout.continuation_ids)
    for row, (ids, starts) in enumerate(zip(encoded["input_ids"], encoded["word_starts"])):
        kinds = batch["position_kinds"][row]
        assert (kinds == PositionKind.TERMINAL).sum() == sum(starts) == len(TREES[row].split())  # one per word
        assert (kinds == PositionKind.SUBWORD).sum() == sum(i in continuations for i in ids)  # its later pieces


def test_every_ewt_dev_tree_encodes_to_ids_the_grammar_accepts():
    if not EWT.is_dir():
        pytest.skip("needs ../shared/data/ud_english_ewt")
    from hf_slm.data.conllu_loader import read_conllu_file

    examples = list(read_conllu_file(EWT / "en_ewt-ud-dev.conllu", "dev"))[:300]
    trees = [DependencyTree(e["words"], e["heads"]) for e in examples]
    for system in GRAMMAR_OF:
        tokenizer = DependencyTokenizer.train(trees, vocab_size=300, transition_system=system, non_projective="skip")
        grammar = DEPENDENCY_GRAMMARS[GRAMMAR_OF[system]](DependencyLayout(**tokenizer.action_layout))
        projective = [tree for tree in trees if tree.is_projective()]
        ids = tokenizer(projective)["input_ids"]
        grammar.batch(ids)  # raises on any illegal action
        assert [tokenizer.decode(row, skip_special_tokens=True) for row in ids] == [tree.to_inline() for tree in projective]


def test_saved_tokenizer_loads_through_autotokenizer_without_hf_slm(tmp_path, tokenizer):
    tokenizer.save_pretrained(tmp_path)
    expected = tokenizer(TREES[0])["input_ids"]
    assert DependencyTokenizer.from_pretrained(tmp_path)(TREES[0])["input_ids"] == expected
    script = ISOLATION_PREAMBLE + f"""
import json
from transformers import AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained({str(tmp_path)!r}, trust_remote_code=True)
ids = tokenizer({TREES[0]!r})["input_ids"]
print(json.dumps({{"ids": ids, "decoded": tokenizer.decode(ids, skip_special_tokens=True), "layout": tokenizer.action_layout}}))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                            env={"HF_HOME": str(tmp_path / ".hf"), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr[-2000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["ids"] == expected and found["decoded"] == TREES[0]
    assert found["layout"] == tokenizer.action_layout


def test_errors_name_the_input():
    tokenizer = DependencyTokenizer.train(TREES, vocab_size=40)
    with pytest.raises(ValueError, match=r"tokenizer input is not projective \(the arcs"):
        tokenizer("a/3 b/0 c/2 d/1")
    with pytest.raises(ValueError, match=r"2 words have head 0"):
        tokenizer("a/0 b/0")
    swift = DependencyTokenizer.train(TREES, vocab_size=40, transition_system="arc_swift", max_k=1)
    with pytest.raises(ValueError, match=r"RA\[2\] needs k <= 1, this tokenizer's max_k"):
        swift("a/0 b/1 c/1")
    with pytest.raises(ValueError, match=r"training tree 1 is not projective"):
        DependencyTokenizer.train(TREES[:1] + ["a/3 b/0 c/2 d/1"], vocab_size=20)
    with pytest.raises(ValueError, match="reference variant exists for arc_standard only"):
        DependencyTokenizer.train(TREES, vocab_size=20, transition_system="arc_eager", variant="reference")


def test_training_skips_or_lifts_non_projective_trees():
    crossing = "qa/3 qb/0 qc/2 qd/1"  # "q" occurs in no other training word
    skipped = DependencyTokenizer.train(TREES + [crossing], vocab_size=40, non_projective="skip")
    assert 3 in skipped("qa qb")["input_ids"]  # its words were left out of training: "q" is <unk>
    lifted = DependencyTokenizer.train(TREES + [crossing], vocab_size=40, non_projective="lift")
    assert 3 not in lifted("qa qb")["input_ids"]
    tree, lifts = projective_tree(DependencyTree.from_inline(crossing), "lift")  # lifting: test_transitions.py
    assert lifts > 0 and lifted.decode(lifted(tree)["input_ids"], skip_special_tokens=True) == tree.to_inline()
    swift = DependencyTokenizer.train(["a/0 b/1 c/1"], vocab_size=10, transition_system="arc_swift")
    assert swift.max_k == 2  # the largest k its training trees need
    assert swift.convert_ids_to_tokens(swift("a/0 b/1 c/1")["input_ids"])[-2:] == ["<RA[2]>", "</s>"]
