"""Tree reading and normalization (tokenization/trees.py): hand-checked examples, error messages, and
hypothesis properties over random trees."""

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk import Tree
from tree_strategies import random_trees

from hf_slm.tokenization.linearizers import top_down_actions
from hf_slm.tokenization.tree_type import MAX_TREE_DEPTH, TreeTooDeep
from hf_slm.tokenization.trees import (
    drop_preterminals,
    drop_wrapper_root,
    has_preterminals,
    input_format,
    left_binarize,
    normalize_tree,
    parse_tree,
    parse_trees,
    read_input,
    read_tree_file,
    read_tree_string,
    read_trees,
    read_words,
    remove_traces,
    remove_unary_chains,
    strip_function_tag,
    tree_to_string,
)

T = Tree.fromstring  # nltk's own reader: an independent way to write the expected trees
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def labels(tree):
    return [subtree.label() for subtree in tree.subtrees()]


def max_children(tree):
    return max(len(subtree) for subtree in tree.subtrees())


def unary_nodes(tree):
    """Positions of constituents with exactly one child, except a root whose only child is a word."""
    found = []
    for position in tree.treepositions():
        node = tree[position]
        if isinstance(node, Tree) and len(node) == 1 and not (position == () and isinstance(node[0], str)):
            found.append(position)
    return found


# ---------------------------------------------------------------------------------------------------------
# Reading

WSJ = """( (S
    (NP-SBJ-1 (-NONE- *T*-1) )
    (NP-SBJ (PRP$ Our) (NN bird) )
    (VP (VBZ sings)
      (PP-LOC (IN in)
        (NP (-LRB- -LRB-) (DT the) (NN tree) (-RRB- -RRB-) )))
    (: :) (. .) ))
( (S (NP-SBJ=2 (PRP It)) (VP (VBD rained)) (. .)) )
"""

GUM = """(ROOT
  (NP
    (NP (JJ Aesthetic) (NN Appreciation))
    (CC and)
    (NP (JJ Spanish) (NN Art))
    (: :)))

(ROOT
  (NP
    (NP (NNS Insights))
    (PP (IN from) (NP (NN Eye) (HYPH -) (NN Tracking)))))
"""


def test_one_tree_on_one_line():
    tree = parse_tree("(S (NP (DT the) (NN bird)) (VP (VBZ sings)))")
    assert tree == T("(S (NP (DT the) (NN bird)) (VP (VBZ sings)))")
    assert tree.leaves() == ["the", "bird", "sings"]


def test_many_trees_per_line_and_per_string():
    assert parse_trees("(S a b) (S c) (NP (D d) (N e))") == [T("(S a b)"), T("(S c)"), T("(NP (D d) (N e))")]
    # GUM has trees that start right after the previous one's last bracket: `(. .)))(ROOT`.
    assert parse_trees("(ROOT (S (. .)))(ROOT\n  (NP x))") == [T("(ROOT (S (. .)))"), T("(ROOT (NP x))")]


def test_multi_line_blank_line_separated_trees():
    trees = parse_trees(GUM)
    assert len(trees) == 2
    assert trees[0] == T(
        "(ROOT (NP (NP (JJ Aesthetic) (NN Appreciation)) (CC and) (NP (JJ Spanish) (NN Art)) (: :)))"
    )
    assert trees[1].leaves() == ["Insights", "from", "Eye", "-", "Tracking"]
    assert "HYPH" in labels(trees[1])


def test_crlf_tabs_and_odd_spacing():
    assert parse_trees("\r\n\t( S\r\n\t(NP  a )\tb )\r\n\r\n(S c)") == [T("(S (NP a) b)"), T("(S c)")]


def test_empty_text_has_no_trees():
    assert parse_trees("") == []
    assert parse_trees(" \n\n\t ") == []


def test_wsj_unlabeled_root_is_read_with_an_empty_label():
    trees = parse_trees(WSJ)
    assert len(trees) == 2
    assert trees[0].label() == ""
    assert len(trees[0]) == 1 and trees[0][0].label() == "S"
    assert trees[0][0][0] == T("(NP-SBJ-1 (-NONE- *T*-1))")
    assert trees[0] == T(WSJ.split("\n( (S (NP-SBJ=2")[0])  # nltk's reader agrees
    assert trees[1] == Tree("", [T("(S (NP-SBJ=2 (PRP It)) (VP (VBD rained)) (. .))")])


def test_trees_with_and_without_preterminals():
    with_pos = parse_tree("(S (NP (DT the) (NN bird)) (VP (VBZ sings)))")
    without_pos = parse_tree("(S (NP the bird) (VP sings))")
    assert has_preterminals(with_pos)
    assert not has_preterminals(without_pos)
    assert normalize_tree(with_pos) == normalize_tree(without_pos) == T("(S (NP the bird) (VP sings))")


def test_odd_labels_survive_verbatim():
    text = "(S|<NP-VP> (NP-SBJ (PRP$ Our) (, ,) (HYPH -) (-LRB- -LRB-) (: :)) (VP (VBZ sings)) (`` ``) (-NONE- *))"
    tree = parse_tree(text)
    assert labels(tree) == ["S|<NP-VP>", "NP-SBJ", "PRP$", ",", "HYPH", "-LRB-", ":", "VP", "VBZ", "``", "-NONE-"]
    assert tree_to_string(tree) == text
    kept = normalize_tree(tree, strip_traces=False, preterminals=False, drop_root=False)
    assert tree_to_string(kept) == text


def test_words_are_any_token_without_brackets_or_spaces():
    tree = parse_tree("(S (X claire.bailey-ross@port.ac.uk) (X -LRB-a-RRB-) (X $) (X ''') (X ʒæk) (X 1/2) (X S|<A>))")
    assert tree.leaves() == ["claire.bailey-ross@port.ac.uk", "-LRB-a-RRB-", "$", "'''", "ʒæk", "1/2", "S|<A>"]


def test_deep_nesting_parses_to_the_limit_and_deeper_is_a_named_error():
    """Issue 30: a tree as deep as MAX_TREE_DEPTH parses (the reader keeps an explicit stack); a deeper one is a
    TreeTooDeep naming the depth, line and column where it passes the limit, not a RecursionError later in the
    recursive normalizations and linearizations."""
    depth = MAX_TREE_DEPTH
    node = parse_tree("(A " * depth + "w" + ")" * depth)
    for _ in range(depth - 1):
        assert len(node) == 1
        node = node[0]
    assert node == Tree("A", ["w"])
    with pytest.raises(TreeTooDeep, match=r"tree 0, line 2: the tree is nested more than 300 constituents deep at "
                                          r"column 601;"):
        parse_tree("(A " * 100 + "\n" + "(A " * 2900 + "w" + ")" * 3000)


def test_read_tree_file_and_directories(tmp_path):
    (tmp_path / "b.ptb").write_text(GUM, encoding="utf-8")
    trees = read_tree_file(tmp_path / "b.ptb")
    assert trees[1] == T("(NP (NP Insights) (PP from (NP Eye - Tracking)))")
    (tmp_path / "c.txt").write_text(GUM, encoding="utf-8")
    (tmp_path / ".hidden").write_text("not a tree", encoding="utf-8")
    all_trees = read_trees(tmp_path)  # no .mrg file: all files but hidden ones, in sorted order
    assert all_trees == trees + trees
    (tmp_path / "a.mrg").write_text(WSJ, encoding="utf-8")
    (tmp_path / "README").write_text("The WSJ sample, see below.", encoding="utf-8")
    wsj = read_trees(tmp_path)  # a treebank folder: its .mrg files only, not the README or the rest
    assert len(wsj) == 2 and wsj[1] == T("(S (NP-SBJ=2 It) (VP rained) .)")
    assert read_trees([tmp_path / "b.ptb", tmp_path / "a.mrg"])[:2] == trees
    assert read_trees(str(tmp_path / "a.mrg"), strip_function_tags=True)[1] == T("(S (NP It) (VP rained) .)")


# ---------------------------------------------------------------------------------------------------------
# Normalization


def test_wsj_default_normalization():
    tree = normalize_tree(parse_trees(WSJ)[0])
    assert tree == T("(S (NP-SBJ Our bird) (VP sings (PP-LOC in (NP -LRB- the tree -RRB-))) : .)")


def test_wsj_with_function_tags_stripped():
    first, second = [normalize_tree(t, strip_function_tags=True) for t in parse_trees(WSJ)]
    assert first == T("(S (NP Our bird) (VP sings (PP in (NP -LRB- the tree -RRB-))) : .)")
    assert second == T("(S (NP It) (VP rained) .)")


def test_traces_and_the_constituents_they_empty_are_removed_recursively():
    tree = parse_tree(
        "(S (NP-SBJ (NP (-NONE- *)) (SBAR (-NONE- 0) (S (NP (-NONE- *T*-1))))) (VP (VBD left) (S (-NONE- *-2))))"
    )
    assert remove_traces(tree) == T("(S (VP (VBD left)))")
    assert normalize_tree(tree) == T("(S (VP left))")
    assert remove_traces(T("(S (-NONE- *))")) is None
    kept = normalize_tree(tree, strip_traces=False)  # not stripped: traces stay, as words
    assert kept.leaves() == ["*", "0", "*T*-1", "left", "*-2"]


def test_strip_function_tag():
    cases = {
        "NP-SBJ-1": "NP",
        "NP-SBJ": "NP",
        "NP=2": "NP",
        "NP-SBJ=2": "NP",
        "PP-LOC-PRD": "PP",
        "S-NOM-SBJ": "S",
        "WHNP-1": "WHNP",
        "-NONE-": "-NONE-",
        "-LRB-": "-LRB-",
        "-RRB-": "-RRB-",
        "PRP$": "PRP$",
        ":": ":",
        ",": ",",
        "-": "-",
        "--": "--",
        "HYPH": "HYPH",
        "S|<NP-VP>": "S|<NP-VP>",
        "NP-SBJ|<DT-JJ>": "NP|<DT-JJ>",
        "PRT|ADVP": "PRT|ADVP",
        "": "",
    }
    assert {label: strip_function_tag(label) for label in cases} == cases


def test_function_tags_stripped_while_traces_and_brackets_kept():
    tree = parse_tree("(S (NP-SBJ-1 (-NONE- *T*-1)) (NP=2 (-LRB- -LRB-) (NN x)) (VP (VB go)))")
    out = normalize_tree(tree, strip_traces=False, strip_function_tags=True, preterminals=False)
    assert out == T("(S (NP (-NONE- *T*-1)) (NP (-LRB- -LRB-) (NN x)) (VP (VB go)))")


def test_drop_wrapper_root():
    assert drop_wrapper_root(T("(ROOT (S a b))")) == T("(S a b)")
    assert drop_wrapper_root(T("(TOP (S a b))")) == T("(S a b)")
    assert drop_wrapper_root(parse_tree("( (S a b) )")) == T("(S a b)")
    # A wrapper with several children stays; an unlabeled one is labeled ROOT.
    assert drop_wrapper_root(parse_tree("( (S a) (S b) )")) == T("(ROOT (S a) (S b))")
    assert drop_wrapper_root(T("(ROOT (S a) (S b))")) == T("(ROOT (S a) (S b))")
    # A wrapper over a single word stays a constituent; other labels are not wrappers.
    assert drop_wrapper_root(T("(ROOT hello)")) == T("(ROOT hello)")
    assert drop_wrapper_root(T("(S (VP a b))")) == T("(S (VP a b))")


def test_drop_root_option():
    tree = parse_trees(GUM)[1]
    assert normalize_tree(tree).label() == "NP"
    assert normalize_tree(tree, drop_root=False) == T("(ROOT (NP (NP Insights) (PP from (NP Eye - Tracking))))")
    wsj = normalize_tree(parse_trees(WSJ)[1], drop_root=False)
    assert wsj.label() == "" and wsj[0] == T("(S (NP-SBJ=2 It) (VP rained) .)")
    assert parse_tree(tree_to_string(wsj)) == wsj


def test_preterminals_option():
    pos_free = parse_tree("(S (NP the) (VP sings))")  # "auto" reads it as tagged: every word is an only child
    assert normalize_tree(pos_free) == T("(S the sings)")
    assert normalize_tree(pos_free, preterminals=False) == pos_free
    tagged = parse_tree("(S (NP (DT the) (NN bird)) (VP (VBZ sings)))")
    assert normalize_tree(tagged, preterminals=True) == T("(S (NP the bird) (VP sings))")
    assert normalize_tree(tagged, preterminals=False) == tagged
    assert drop_preterminals(tagged) == T("(S (NP the bird) (VP sings))")


def test_single_word_trees():
    assert normalize_tree(parse_tree("(ROOT (UH Hello))")) == T("(ROOT Hello)")
    assert normalize_tree(parse_tree("(ROOT (INTJ (UH Hello)))")) == T("(INTJ Hello)")
    assert normalize_tree(parse_tree("(ROOT (INTJ (UH Hello)))"), remove_unary=True) == T("(INTJ Hello)")
    assert normalize_tree(parse_tree("(S x)"), remove_unary=True, binarize=True) == T("(S x)")


FIGURE_1 = "(S (VP (VB Write) (NP (DT an) (NN essay)) (ADVP (RB quickly))))"  # paper 003, Figure 1


def test_remove_unary_chains_paper_003_figure_1():
    # Section 2.1: "(quickly)" is simplified to "quickly"; the root chain S -> VP collapses as well.
    tree = normalize_tree(parse_tree(FIGURE_1), remove_unary=True)
    assert tree == T("(VP Write (NP an essay) quickly)")
    assert unary_nodes(tree) == []


def test_remove_unary_chains_examples():
    assert remove_unary_chains(T("(S (NP (NP x)) (VP y))")) == T("(S x y)")
    assert remove_unary_chains(T("(S (A (B (C a b))) (D (E c)))")) == T("(S (C a b) c)")
    assert remove_unary_chains(T("(ROOT (S (NP (N x))))")) == T("(N x)")  # the root stays a constituent
    assert remove_unary_chains(T("(S (VP (ADVP quickly) (V go)))")) == T("(VP quickly go)")
    assert remove_unary_chains(T("(S a b)")) == T("(S a b)")


def test_left_binarization_hand_derived():
    # nltk's left factoring names each new node after its parent and the children it spans.
    assert normalize_tree(parse_tree("(NP (DT a) (JJ b) (NN c))"), binarize=True) == T("(NP (NP|<DT-JJ> a b) c)")
    four = parse_tree("(NP (DT a) (JJ b) (NN c) (NNS d))")
    assert normalize_tree(four, binarize=True) == T("(NP (NP|<DT-JJ-NN> (NP|<DT-JJ> a b) c) d)")
    assert normalize_tree(four, binarize=True, horizontal_markov=1) == T("(NP (NP|<NN> (NP|<JJ> a b) c) d)")
    # POS-free trees: words get a temporary preterminal `_` while binarizing, which shows in the labels.
    assert left_binarize(T("(NP a b c d)")) == T("(NP (NP|<_-_-_> (NP|<_-_> a b) c) d)")
    assert left_binarize(T("(S (NP a b) c d)")) == T("(S (S|<NP-_> (NP a b) c) d)")
    assert left_binarize(T("(S a b)")) == T("(S a b)")


def test_left_binarization_of_figure_1():
    tree = normalize_tree(parse_tree(FIGURE_1), binarize=True, remove_unary=True)
    assert tree == T("(VP (VP|<VB-NP> Write (NP an essay)) quickly)")
    # nltk keeps unary chains; remove_unary removes them too (paper 003's Bi trees).
    assert normalize_tree(parse_tree(FIGURE_1), binarize=True) == T(
        "(S (VP (VP|<VB-NP> Write (NP an essay)) (ADVP quickly)))"
    )


def test_binarization_does_not_modify_its_input():
    tree = T("(NP (DT a) (JJ b) (NN c))")
    left_binarize(tree)
    normalize_tree(tree, binarize=True)
    assert tree == T("(NP (DT a) (JJ b) (NN c))")


def test_binarized_wsj_and_gum_have_at_most_two_children():
    for tree in parse_trees(WSJ) + parse_trees(GUM):
        out = normalize_tree(tree, binarize=True)
        assert max_children(out) <= 2
        assert out.leaves() == normalize_tree(tree).leaves()
        assert unary_nodes(normalize_tree(tree, binarize=True, remove_unary=True)) == []


def test_tree_to_string():
    for text in ["(S (NP-SBJ (PRP$ Our) (NN bird)) (VP sings))", "(S|<NP-VP> a (-LRB- -LRB-) (: :))"]:
        assert tree_to_string(parse_tree(text)) == text
    assert tree_to_string(parse_tree("( (S a) )")) == "( (S a))"
    assert tree_to_string("word") == "word"


# ---------------------------------------------------------------------------------------------------------
# Errors: ValueError naming the source, the tree index, the line and a snippet


@pytest.mark.parametrize(
    "text, pattern",
    [
        ("(S (NP a) (VP b)", r"src, tree 0, line 1: unbalanced brackets: missing '\)'.*'\(S \(NP a\) \(VP b\)'"),
        ("(S a)\n(S (NP b) c", r"src, tree 1, line 2: unbalanced brackets: missing '\)'.*'\(S \(NP b\) c'"),
        ("(S a)\n\n(S (NP b) c))", r"src, tree 1, line 3: unbalanced brackets: extra '\)'.*'\(S a\).*\(S \(NP b\) c\)\)'"),
        ("(S (NP a)))", r"src, tree 0, line 1: unbalanced brackets: extra '\)'.*'\(S \(NP a\)\)\)'"),
        (")", r"src, tree 0, line 1: unbalanced brackets: extra '\)'"),
        ("(S (NP) (VP x))", r"src, tree 0, line 1: empty constituent 'NP'.*'\(NP\) \(VP x\)\)'"),
        ("(S a)\n(S\n  (VP x) (PP))", r"src, tree 1, line 3: empty constituent 'PP'"),
        ("()", r"src, tree 0, line 1: empty tree '\(\)'"),
        ("(S a) ( )", r"src, tree 1, line 1: empty tree"),
        ("(S)", r"src, tree 0, line 1: empty constituent 'S'"),
        ("(S (NP) (VP))", r"src, tree 0, line 1: empty constituent 'NP'"),
        ("the bird (S sings)", r"src, tree 0, line 1: expected '\(' to start a tree, found 'the'.*'the bird"),
        ("(S a)\n\nstray (S b)", r"src, tree 1, line 3: expected '\(' to start a tree, found 'stray'"),
        ("(S a)\n\n(S (NP b)) c)", r"src, tree 2, line 3: expected '\(' to start a tree, found 'c'"),
    ],
)  # fmt: skip
def test_parse_errors(text, pattern):
    with pytest.raises(ValueError, match=pattern):
        parse_trees(text, source="src")


def test_parse_tree_expects_exactly_one_tree():
    with pytest.raises(ValueError, match=r"<string>: expected exactly one tree, found 2 in '\(S a\) \(S b\)'"):
        parse_tree("(S a) (S b)")
    with pytest.raises(ValueError, match="found 0"):
        parse_tree("   ")


# ---------------------------------------------------------------------------------------------------------
# One string, one reading (input_format): actions, PTB brackets or plain words


@pytest.mark.parametrize(
    "text, expected",
    [
        ("(S (NP the bird NP) (VP sings VP) S)", "actions"),
        ("(S (NP the bird VP) S)", "actions"),              # S) closes (S: actions, refused below
        ("(S (NP NP) S)", "actions"),
        ("(S (NP the bird NP)", "actions"),                 # a prefix: refused below
        ("(S a S)", "actions"),
        ("(S (NP (DT the) (NN bird)) (VP (VBZ sings)))", "ptb"),
        ("(PP (IN IN) (NP (DT the) (NN box)))", "ptb"),     # a tag over a word spelled like it
        ("(S (NP the letter S) (VP is))", "ptb"),           # S) closes (NP, not (S
        ("( (S (NP-SBJ (-NONE- *T*-1)) (VP (VB go))) )", "ptb"),
        ("(S (NP the bird ) )", "ptb"),                     # unlabeled closings read the same either way
        ("(S (NP the dog) barks", "ptb"),
        ("the bird sings .", "words"),
        ("the (bird", "words"),
        ("", "words"),
    ],
)  # fmt: skip
def test_input_format_golden_examples(text, expected):
    assert input_format(text) == expected


def test_read_input_of_each_format():
    assert read_input("(S (NP the bird NP) S)") == T("(S (NP the bird))")
    assert read_input("(ROOT (S (NP (DT the) (NN bird)) (VP (VBZ sings))))") == T("(S (NP the bird) (VP sings))")
    assert read_input("(ROOT (S (NP (DT the) (NN bird))))", drop_root=False) == T("(ROOT (S (NP the bird)))")
    assert read_input("the bird sings") == ["the", "bird", "sings"]
    assert read_tree_string("(S (NP the bird NP) S)", tree_format="ptb") == T("(S (NP the bird NP) S)")
    assert read_tree_string("(S (NP the bird ) )", tree_format="actions") == T("(S (NP the bird))")


@pytest.mark.parametrize(
    "text, pattern",
    [
        ("(S (NP the bird VP) S)", r"^arg reads as an action sequence \(its token 5, 'S\)', closes '\(S'\), but "
                                   r"action 4 \('VP\)'\) in .*: closes 'NP', expected 'NP\)' or '\)'"),
        ("(S (NP NP) S)", r"action 2 \('NP\)'\).*constituent 'NP' is empty"),
        ("(S (NP the bird NP)", r"actions end with 1 unclosed constituent"),
        ("(S (NP the bird) (VP sings)))", r"^arg, tree 0, line 1: unbalanced brackets: extra '\)'.* at column 29 in"),
        ("(S (NP the bird)\n  (VP sings)) x", r"^arg, tree 1, line 2: expected '\(' to start a tree.* at column 15 in"),
        ("the bird (sings)", r"^arg: word 2 '\(sings\)' contains a bracket, but 'the bird \(sings\)' is read as a "
                             r"sentence of plain words, which has none; write a bracket .* -LRB- or -RRB-"),
    ],
)  # fmt: skip
def test_read_input_errors_name_the_position(text, pattern):
    with pytest.raises(ValueError, match=pattern):
        read_input(text, "arg")


def test_read_tree_string_refuses_words_and_unknown_formats():
    with pytest.raises(ValueError, match=r"^arg 'the bird' is plain words; expected a tree"):
        read_tree_string("the bird", "arg")
    with pytest.raises(ValueError, match="tree_format must be"):
        read_tree_string("(S a)", tree_format="PTB")
    with pytest.raises(ValueError, match=r"word 0 '\(S' contains a bracket, but '\(S \(NP the dog\) barks' \(PTB brackets\?\) is read"):
        read_words("(S (NP the dog) barks")


@settings(max_examples=500, deadline=None)
@given(random_trees())
def test_action_strings_read_as_actions_and_tagged_trees_as_ptb(tree):
    actions = " ".join(top_down_actions(tree))
    assert input_format(actions) == "actions"
    assert read_input(actions) == tree
    tagged = tree_to_string(_tag_words(tree))
    assert input_format(tagged) == "ptb"
    assert read_input(tagged, strip_traces=False, preterminals=True, drop_root=False) == tree
    text = tree_to_string(tree)
    if input_format(text) == "actions":  # only a constituent that ends in a word spelled like its own label
        assert any(len(node) > 1 and node[-1] == node.label() for node in tree.subtrees())
    assert read_tree_string(text, tree_format="ptb", strip_traces=False, preterminals=False, drop_root=False) == tree


def _tag_words(tree):
    """A POS tag over every word: the word itself, the hardest tag for input_format."""
    return Tree(tree.label(), [_tag_words(c) if isinstance(c, Tree) else Tree(c, [c]) for c in tree])


def test_missing_file_and_directory_errors(tmp_path):
    with pytest.raises(ValueError, match=r"tree file '.*nope\.ptb' does not exist"):
        read_tree_file(tmp_path / "nope.ptb")
    with pytest.raises(ValueError, match=r"nope\.ptb' does not exist"):
        read_trees([tmp_path / "nope.ptb"])
    with pytest.raises(ValueError, match="is a directory"):
        read_tree_file(tmp_path)
    with pytest.raises(ValueError, match="holds no files"):
        read_trees(tmp_path)


def test_file_errors_name_the_file_tree_and_line(tmp_path):
    path = tmp_path / "bad.ptb"
    path.write_text("(S (NP a))\n\n(S\n  (NP b)\n  (VP c)\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.ptb, tree 1, line 3: unbalanced brackets: missing"):
        read_tree_file(path)


def test_tree_without_terminals_after_stripping_traces(tmp_path):
    # Every parsed constituent holds something, so only trace stripping can leave a tree without words.
    path = tmp_path / "traces.mrg"
    path.write_text("( (S (NP (DT a)) (VP (VB b))) )\n( (S\n (NP-SBJ (-NONE- *T*-1)) (VP (-NONE- *))) )\n")
    with pytest.raises(ValueError, match=r"traces\.mrg, tree 1, line 2: tree has only -NONE- traces.*NP-SBJ"):
        read_tree_file(path)
    with pytest.raises(ValueError, match="tree has only -NONE- traces"):
        normalize_tree(parse_tree("(S (-NONE- *))"))
    assert read_tree_file(path, strip_traces=False)[1].leaves() == ["*T*-1", "*"]


def test_large_files_parse_in_linear_time():
    # Line numbers are computed only for an error, so a one-tree-per-line file of 20,000 trees parses in
    # about a second (counting lines per tree made this quadratic) and errors still name the right line.
    text = "(S (NP (DT the) (NN bird)) (VP (VBZ sings)))\n" * 20000
    assert len(parse_trees(text)) == 20000
    with pytest.raises(ValueError, match=r"tree 20000, line 20001: empty tree"):
        parse_trees(text + "()")


def test_every_gum_file_reads():
    directory = DATA / "gum_const" / "const"
    if not directory.is_dir():
        pytest.skip(f"{directory} not found (the shared data folder is not next to this checkout)")
    trees, constituents = [], 0
    for path in sorted(directory.glob("*.ptb")):
        text = path.read_text(encoding="utf-8")
        file_trees = parse_trees(text, source=str(path))
        constituents += text.count("(")
        trees.extend(file_trees)
    assert len(trees) == 9384
    assert sum(1 for tree in trees for _ in tree.subtrees()) == constituents  # every bracket is a constituent
    assert all(tree.label() == "ROOT" and len(tree) == 1 and has_preterminals(tree) for tree in trees)
    for tree in trees[::10]:
        out = normalize_tree(tree, strip_function_tags=True)
        assert out.label() != "ROOT" or len(out) == 1 and isinstance(out[0], str)  # `(ROOT (VB See))`
        assert out.leaves() == tree.leaves()
        assert all("-" not in label or label in ("-LRB-", "-RRB-") for label in labels(out))


# ---------------------------------------------------------------------------------------------------------
# Properties over random trees (tests/tree_strategies.py)

RAW = {"strip_traces": False, "preterminals": False, "drop_root": False}  # normalize_tree options: change nothing


@settings(max_examples=2000, deadline=None)
@given(random_trees())
def test_string_round_trip(tree):
    text = tree_to_string(tree)
    assert parse_trees(text) == [tree]
    assert parse_tree(text.replace(" ", "\n  ")) == tree
    assert normalize_tree(tree, **RAW) == tree


@settings(max_examples=1500, deadline=None)
@given(random_trees())
def test_remove_unary_leaves_only_a_root_over_one_word(tree):
    out = normalize_tree(tree, **RAW, remove_unary=True)
    assert unary_nodes(out) == []
    assert out.leaves() == tree.leaves()
    assert remove_unary_chains(out) == out


@settings(max_examples=1000, deadline=None)
@given(random_trees(), st.sampled_from([None, 1, 2]))
def test_binarization_gives_at_most_two_children_and_the_same_leaves(tree, markov):
    out = normalize_tree(tree, **RAW, binarize=True, horizontal_markov=markov)
    assert max_children(out) <= 2
    assert out.leaves() == tree.leaves()
    assert out.label() == tree.label()
    assert len(list(out.subtrees())) == len(list(tree.subtrees())) + sum(
        max(len(node) - 2, 0) for node in tree.subtrees()
    )  # one new node per child beyond two
    both = normalize_tree(tree, **RAW, binarize=True, remove_unary=True)
    assert max_children(both) <= 2 and unary_nodes(both) == [] and both.leaves() == tree.leaves()


@settings(max_examples=1000, deadline=None)
@given(random_trees())
def test_default_normalization_keeps_every_word_outside_traces(tree):
    def words_outside_traces(node):
        if isinstance(node, str):
            return [node]
        if node.label() == "-NONE-":
            return []
        return [word for child in node for word in words_outside_traces(child)]

    expected = words_outside_traces(tree)
    if not expected:
        with pytest.raises(ValueError, match="only -NONE- traces"):
            normalize_tree(tree)
        return
    for options in [{}, {"strip_function_tags": True}, {"binarize": True, "remove_unary": True}]:
        out = normalize_tree(tree, **options)
        assert out.leaves() == expected
        assert "-NONE-" not in labels(out)
    stripped = normalize_tree(tree, **RAW, strip_function_tags=True)
    assert labels(stripped) == [strip_function_tag(label) for label in labels(tree)]
