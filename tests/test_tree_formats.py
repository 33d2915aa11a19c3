"""Tree formats (hf_slm/families/tree_formats.py): one object per format a Variant names, reading, writing and
recognizing its trees; and `hf-slm masks` for every registered grammar through its format."""

import pytest

from hf_slm.families import grammar_names, registered_families
from hf_slm.families.tree_formats import (
    TREE_FORMATS,
    format_of_grammar,
    grammars_of_linearization,
    recognizing,
    tree_format,
)
from hf_slm.cli.mask_inspection import mask_report, segment_report

# One example string of each format.
EXAMPLES = {
    "brackets": "(S (NP (DT the) (NN bird)) (VP (VBZ sings)))",
    "unlabelled_brackets": "( ( the bird ) sings )",
    "dependency": "There/2 is/0 a/4 difference/2",
    "words": "the bird sings",
}


def test_every_variant_names_a_known_format():
    for family in registered_families():
        for variant in family.variants:
            assert variant.tree_format in TREE_FORMATS, (family.name, variant.name)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_format_recognizes_reads_and_writes_its_trees(name, tmp_path):
    chosen = tree_format(name)
    text = EXAMPLES[name]
    assert recognizing(text) is chosen
    tree = chosen.read(text)
    written = chosen.write(tree)
    assert chosen.write(chosen.read(written)) == written
    assert chosen.words(tree) == ["There", "is", "a", "difference"] if name == "dependency" else \
        chosen.words(tree) == ["the", "bird", "sings"]
    # a file of two trees, one a line (the dependency format also reads CoNLL-U files)
    path = tmp_path / "trees.txt"
    path.write_text(f"{written}\n\n{written}\n")
    assert [chosen.write(tree) for tree in chosen.read_file(path)] == [written, written]


def test_first_words_keeps_what_comes_first():
    assert tree_format("brackets").write(tree_format("brackets").first_words(EXAMPLES["brackets"], 2)) == \
        "(S (NP (DT the) (NN bird)))"
    assert tree_format("words").first_words(EXAMPLES["words"], 2) == ["the", "bird"]
    cut = tree_format("dependency").first_words(EXAMPLES["dependency"], 3)
    assert cut == "There/2 is/0 a/2"  # a's head (difference) was cut: is, its nearest kept ancestor
    dependency = tree_format("dependency")
    assert dependency.first_words(dependency.read("a/2 b/0 c/2"), 1).to_inline() == "a/0"


def test_an_unknown_format_is_named():
    with pytest.raises(ValueError, match="unknown tree format 'conll'.*'dependency'"):
        tree_format("conll")


def test_the_format_of_a_linearization_is_its_readers():
    for name in grammar_names():
        from hf_slm.families import grammar_class

        readers = grammars_of_linearization(grammar_class(name).linearization)
        assert name in readers
        # every grammar that reads the same sequences reads the same kind of trees
        assert {format_of_grammar(reader).name for reader in readers} == {format_of_grammar(name).name}


@pytest.mark.parametrize("grammar", grammar_names())
def test_masks_reads_an_example_of_every_grammar(grammar):
    text = EXAMPLES["dependency"] if format_of_grammar(grammar).name == "dependency" else EXAMPLES["brackets"]
    report = mask_report(text, grammar, variant="paper", pieces=False)  # what the command line passes
    assert report["grammar"] == grammar
    width = len(report["tokens"])
    assert width > 3 and len(report["kinds"]) == len(report["labels"]) == width
    assert all(len(row) == width for row in report["attention_mask"] + report["relative_positions"])
    words = [token for token in report["tokens"] if token in ("the", "bird", "sings", "There", "difference")]
    assert words  # the tree's words are read, whatever the format
    if format_of_grammar(grammar).example_options:
        return
    with pytest.raises(ValueError, match=f"--variant and --pieces are options of the dependency grammars .*not of {grammar}"):
        mask_report(text, grammar, pieces=True)


@pytest.mark.parametrize("grammar", grammar_names())
def test_segment_masks_read_an_example_of_every_grammar(grammar):
    text = EXAMPLES["dependency"] if format_of_grammar(grammar).name == "dependency" else EXAMPLES["brackets"]
    try:
        report = segment_report(text, grammar, 4)
    except ValueError as error:  # a grammar without segment recurrence says so
        assert "has no segment recurrence" in str(error)
        return
    assert report["grammar"] == grammar and report["chunks"]


def test_a_package_registers_a_tree_format_of_its_own():
    from hf_slm.families.tree_formats import (
        RECOGNITION_ORDER,
        TreeFormat,
        register_tree_format,
    )

    class Chunks(TreeFormat):  # `[the bird] [sings]`: flat chunks
        name = "test_chunks"
        description = "chunks"

        def recognizes(self, text):
            return isinstance(text, str) and text.startswith("[")

        def read(self, text, where="tree", **_):
            return [chunk.split() for chunk in text.strip("[]").split("] [")]

    chunks = register_tree_format(Chunks())
    try:
        assert tree_format("test_chunks") is chunks
        assert recognizing("[the bird] [sings]") is chunks  # tried before the formats that take anything
        assert recognizing(EXAMPLES["brackets"]).name == "brackets"
        with pytest.raises(ValueError, match="already registered"):
            register_tree_format(Chunks())
    finally:
        del TREE_FORMATS["test_chunks"]
        RECOGNITION_ORDER.remove("test_chunks")


@pytest.mark.parametrize("name, tree", [("brackets", "(S (NP The students) (VP are (ADJP (ADJP-PRD happy))) .)"),
                                        ("unlabelled_brackets", "( ( The students ) are ( happy ) . )")])
def test_a_drawn_tree_shows_its_words_in_order(name, tree, capsys):
    """`hf-slm parse --pretty` (issue 39): a constituent whose children mix bare words and constituents (`are` beside
    `(ADJP ...)`, `.` beside `(VP ...)`) is drawn with its words in the sentence's order (nltk's printer, given words
    as leaves, drew `The students are . happy`)."""
    tree_format(name).draw(tree)
    bottom = capsys.readouterr().out.rstrip("\n").splitlines()[-1]
    assert bottom.split() == ["The", "students", "are", "happy", "."]
