"""hf_slm.data loaders on hand-written fixtures (tests/fixtures/data) and, when present, on ../shared/data."""

import json
import shutil
from pathlib import Path

import pytest

import hf_slm.data as data
from hf_slm.data.conllu_loader import read_conllu_file
from hf_slm.data.ptb import read_tree_lines

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "data"
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A datasets cache of this module's own, so that no other run's cached tables are read."""
    return str(tmp_path_factory.mktemp("datasets_cache"))


def rows(dataset):
    return {split: split_data.to_list() for split, split_data in dataset.items()}


# ---- PTB ---------------------------------------------------------------------------------------------------
def test_ptb_standard_wsj_sections(cache):
    ptb = data.load_ptb(FIXTURES / "wsj", cache_dir=cache)
    assert {split: len(ptb[split]) for split in ptb} == {"train": 4, "validation": 1, "test": 2}
    train = ptb["train"]
    assert train["file"] == ["02/wsj_0201.mrg", "02/wsj_0201.mrg", "02/wsj_0202.mrg", "21/wsj_2101.mrg"]
    assert train["index"] == [0, 1, 0, 0]
    assert train[0]["tree"] == "(S (NP-SBJ Farmers) (VP planted (NP more corn) (PP-TMP than (NP last year))) .)"
    assert train[0]["words"] == ["Farmers", "planted", "more", "corn", "than", "last", "year", "."]
    # The trace and the NP-SBJ it leaves empty are gone; function tags and co-indices are kept by default.
    assert train[2]["tree"] == "(S (NP-SBJ-1 A spokesman) (VP declined (S (VP to (VP comment)))) .)"
    assert ptb["validation"][0]["tree"] == "(FRAG (NP Good news) !)"
    assert ptb["test"]["words"] == [["The", "vote", "was", "delayed", "."], ["They", "left", "early", "."]]


def test_ptb_normalization_options(cache):
    ptb = data.load_ptb(FIXTURES / "wsj", splits={"train": "24", "validation": "00"}, strip_function_tags=True,
                        cache_dir=cache)
    assert len(ptb["train"]) == 3 and len(ptb["validation"]) == 1
    assert ptb["train"][0]["tree"] == (
        "(S (NP The committee) (VP agreed (S (VP to (VP review (NP the annual budget) (PP in (NP March)))))) .)"
    )
    # *T*-1 under S under VP: the S is left empty and removed, the VP keeps its verb.
    assert ptb["validation"][0]["tree"] == "(SINV `` (S (NP We) (VP are (ADJP ready))) , '' (VP said) (NP the mayor) .)"
    with_traces = data.load_ptb(FIXTURES / "wsj", splits={"train": "24"}, strip_traces=False, cache_dir=cache)
    assert with_traces["train"][0]["words"][:4] == ["The", "committee", "agreed", "*-1"]
    assert "(-NONE- *-1)" not in with_traces["train"][0]["tree"]  # POS preterminals are dropped, -NONE- too
    kept_pos = data.load_ptb(FIXTURES / "wsj", splits={"train": "wsj_2402.mrg"}, preterminals=False, cache_dir=cache)
    assert kept_pos["train"][0]["tree"].startswith("(S (NP-SBJ (DT The) (NNS shares))")


def test_ptb_splits_by_section_range_file_number_and_glob(cache):
    by_range = data.load_ptb(FIXTURES / "wsj", splits={"train": ["24-24"], "test": ["wsj_0000.mrg"]}, cache_dir=cache)
    assert len(by_range["train"]) == 3 and by_range["test"]["file"] == ["00/wsj_0000.mrg"]
    by_number = data.load_ptb(FIXTURES / "wsj", splits={"train": "2401-2402", "validation": "00/*.mrg",
                                                         "test": ["0201", "21"]}, cache_dir=cache)
    assert by_number["train"]["file"] == ["24/wsj_2401.mrg", "24/wsj_2401.mrg", "24/wsj_2402.mrg"]
    assert by_number["validation"]["file"] == ["00/wsj_0000.mrg"]
    assert by_number["test"]["file"] == ["02/wsj_0201.mrg", "02/wsj_0201.mrg", "21/wsj_2101.mrg"]
    ranged = data.load_ptb(FIXTURES / "wsj", splits={"train": "00-22"}, cache_dir=cache)
    assert sorted({name.split("/")[0] for name in ranged["train"]["file"]}) == ["00", "02", "21", "22"]


def test_ptb_split_errors(tmp_path, cache):
    for section in ("00", "24"):  # a treebank with two sections only, like NLTK's sample (00, 01)
        shutil.copytree(FIXTURES / "wsj" / section, tmp_path / "wsj" / section)
    with pytest.raises(ValueError, match=r"split 'train': '02-21' matches no \.mrg file.*3 \.mrg files in WSJ "
                                         r"section\(s\) 00, 24.*splits=\{'train': '00'"):
        data.load_ptb(tmp_path / "wsj", cache_dir=cache)
    with pytest.raises(ValueError, match="split 'test': '07' matches no .mrg file"):
        data.load_ptb(tmp_path / "wsj", splits={"train": "24", "test": "07"}, cache_dir=cache)
    with pytest.raises(ValueError, match="'24/wsj_2401.mrg' is selected by both split 'train' and split 'test'"):
        data.load_ptb(tmp_path / "wsj", splits={"train": "24", "test": "wsj_2401.mrg"}, cache_dir=cache)
    with pytest.raises(ValueError, match="unknown tree normalization option"):
        data.load_ptb(tmp_path / "wsj", splits={"train": "24"}, strip_tags=True, cache_dir=cache)


def test_ptb_one_tree_per_line_files(cache):
    lines = data.load_ptb(FIXTURES / "ptb_lines", cache_dir=cache)
    assert {split: len(lines[split]) for split in lines} == {"train": 3, "validation": 1, "test": 1}
    # The blank line in train.txt is skipped and not counted.
    assert lines["train"]["index"] == [0, 1, 2] and set(lines["train"]["file"]) == {"train.txt"}
    assert lines["train"][2]["tree"] == "(S (NP Paris) (VP is (ADJP lovely)) .)"
    assert lines["test"][0]["words"] == ["Is", "it", "true", "?"]
    mapped = data.load_ptb({"training": FIXTURES / "ptb_lines" / "train.txt"}, cache_dir=cache)
    assert list(mapped) == ["training"] and mapped["training"]["tree"] == lines["train"]["tree"]
    named = data.load_ptb(FIXTURES / "ptb_lines", splits={"train": "train.txt", "test": "te*.txt"}, cache_dir=cache)
    assert len(named["train"]) == 3 and len(named["test"]) == 1
    with pytest.raises(ValueError, match=r"split 'test': 'eval\.txt' matches no file"):
        data.load_ptb(FIXTURES / "ptb_lines", splits={"test": "eval.txt"}, cache_dir=cache)


def test_ptb_line_errors_name_the_file_and_line(tmp_path, cache):
    bad = tmp_path / "train.txt"
    bad.write_text("(S (NP (DT a) (NN b)) (VP (VBD c)))\n(S (NP (DT a) (NN b)) (VP (VBD c))\n")
    with pytest.raises(ValueError, match=r"train\.txt, line 2.*unbalanced brackets"):
        data.load("ptb", tmp_path, cache_dir=cache)
    bad.write_text("(S (NP (NN a)))\n\n(S (NP (NN a))) (S (NP (NN b)))\n")
    with pytest.raises(ValueError, match=r"train\.txt, line 3.*expected exactly one tree, found 2"):
        data.load("ptb", tmp_path, cache_dir=cache)
    bad.write_text("(S (NP (NN a)))\n(S (-NONE- *))\n")
    with pytest.raises(ValueError, match=r"train\.txt, line 2: tree has only -NONE- traces"):
        data.load("ptb", tmp_path, cache_dir=cache)
    bad.write_text("\n\n")
    with pytest.raises(ValueError, match="split 'train' .*no examples found"):
        data.load("ptb", tmp_path, cache_dir=cache)


def test_tree_lines_are_streamed(tmp_path):
    """Lines are parsed as they are read: the first tree comes out before a bad line further down is seen."""
    path = tmp_path / "train.txt"
    path.write_text("(S (NP (NN a)) (VP (VBD b)))\n" * 3 + "(S (NP (NN broken)\n")
    lines = read_tree_lines(path, {})
    assert next(lines)[0] == 1
    with pytest.raises(ValueError, match="line 4"):
        list(lines)


def test_cache_notices_edited_files(tmp_path, cache):
    path = tmp_path / "train.txt"
    path.write_text("(S (NP (NN a)) (VP (VBD b)))\n")
    assert data.load_ptb(tmp_path, cache_dir=cache)["train"]["words"] == [["a", "b"]]
    path.write_text("(S (NP (NN a)) (VP (VBD b)))\n(S (NP (NN cc)) (VP (VBD dd)))\n")
    assert data.load_ptb(tmp_path, cache_dir=cache)["train"]["words"] == [["a", "b"], ["cc", "dd"]]


# ---- BLLIP -------------------------------------------------------------------------------------------------
def test_bllip_sentence_level(cache):
    bllip = data.load_bllip(FIXTURES / "bllip", cache_dir=cache)
    assert {split: len(bllip[split]) for split in bllip} == {"train": 6, "validation": 2, "test": 2}
    assert bllip["train"][4]["tree"] == "(S (NP Passengers) (VP waited) .)"
    assert bllip["train"]["index"] == [0, 1, 2, 3, 4, 5]


def test_bllip_documents_from_blank_lines(cache):
    documents = data.load_bllip(FIXTURES / "bllip", document_level=True, cache_dir=cache)
    assert {split: len(documents[split]) for split in documents} == {"train": 3, "validation": 1, "test": 2}
    train = documents["train"]
    assert [len(trees) for trees in train["trees"]] == [3, 2, 1]  # two blank lines in a row are one break
    assert train["document_id"] == ["train.txt:0", "train.txt:1", "train.txt:2"]
    assert train["index"] == [0, 3, 5]
    assert train[1]["words"] == [["The", "train", "was", "late", "."], ["Passengers", "waited", "."]]
    assert train[1]["trees"] == ["(S (NP The train) (VP was (ADJP late)) .)", "(S (NP Passengers) (VP waited) .)"]
    assert documents["test"]["document_id"] == ["test.txt:0", "test.txt:1"]


def test_bllip_documents_from_boundary_files(cache):
    blank_lines = data.load_bllip(FIXTURES / "bllip", document_level=True, cache_dir=cache)
    trees = FIXTURES / "bllip_boundaries" / "trees"
    by_folder = data.load_bllip(trees, document_level=True, boundaries=FIXTURES / "bllip_boundaries" / "docs",
                                cache_dir=cache)
    for split in ("train", "validation", "test"):
        assert by_folder[split]["trees"] == blank_lines[split]["trees"]
        assert by_folder[split]["words"] == blank_lines[split]["words"]
    assert by_folder["train"]["document_id"] == ["bike-story", "train-story", "markets-story"]
    assert by_folder["validation"]["document_id"] == ["dev.docs:0"]  # no id on the line
    by_mapping = data.load_bllip({"test": trees / "test.txt"}, document_level=True,
                                 boundaries={"test": FIXTURES / "bllip_boundaries" / "docs" / "test.docs"}, cache_dir=cache)
    assert by_mapping["test"]["document_id"] == ["tom", "shop"]
    one_file = data.load_bllip({"test": trees / "test.txt"}, document_level=True,
                               boundaries=FIXTURES / "bllip_boundaries" / "docs" / "test.docs", cache_dir=cache)
    assert one_file["test"]["trees"] == by_mapping["test"]["trees"]


def test_bllip_boundary_errors(tmp_path, cache):
    trees = {"train": FIXTURES / "bllip_boundaries" / "trees" / "train.txt"}  # 6 sentences
    boundary = tmp_path / "train.docs"

    def load():
        return data.load_bllip(trees, document_level=True, boundaries={"train": boundary}, cache_dir=cache)

    boundary.write_text("3\n2\n4\n")
    with pytest.raises(ValueError, match=r"train\.docs, line 3: document 2 needs 4 sentences but only 1 remain"):
        load()
    boundary.write_text("3\n2\n")
    with pytest.raises(ValueError, match=r"covers 5 sentences but .* hold 6: 1 sentence\(s\) belong to no document"):
        load()
    boundary.write_text("3\nthree\n")
    with pytest.raises(ValueError, match=r"train\.docs, line 2: expected a positive number of sentences"):
        load()
    boundary.write_text("0\n")
    with pytest.raises(ValueError, match="line 1: expected a positive number"):
        load()
    with pytest.raises(ValueError, match=r"missing \['validation'\]"):
        data.load_bllip(FIXTURES / "bllip_boundaries" / "trees", document_level=True,
                        boundaries={"train": boundary, "test": boundary}, cache_dir=cache)
    with pytest.raises(ValueError, match="need document_level=True"):
        data.load_bllip(trees, boundaries={"train": boundary}, cache_dir=cache)


# ---- XSum --------------------------------------------------------------------------------------------------
def test_xsum_four_formats_give_identical_datasets(cache):
    loaded = {kind: data.load_xsum(FIXTURES / "xsum" / kind, cache_dir=cache)
              for kind in ("parquet", "jsonl", "csv", "original")}
    reference = rows(loaded["original"])
    for kind, dataset in loaded.items():
        assert rows(dataset) == reference, kind
        assert list(dataset["train"].features) == ["document", "summary", "id"]
    assert {split: len(examples) for split, examples in reference.items()} == {"train": 2, "validation": 1, "test": 1}
    first = reference["train"][0]
    assert first["id"] == "90000001" and reference["validation"][0]["id"] == "90000003"  # a number in the JSON file
    assert first["summary"] == "A village bakery in the Yorkshire Dales has won a national award for its sourdough bread."
    # The share-widget lines and the blank line of the .summary file are left out, lines joined by newlines.
    assert first["document"].split("\n") == [
        "The Old Mill Bakery in Hawes beat more than 400 entrants to take the top prize at the British Bread Awards.",
        "Owner Jane Ellery said she started baking in her kitchen ten years ago.",
        '"We never expected this, it is a lovely surprise for the whole team," she said.',
    ]


def test_xsum_original_format_errors(tmp_path, cache):
    original = tmp_path / "original"
    shutil.copytree(FIXTURES / "xsum" / "original", original)
    split_file = original / "XSum-TRAINING-DEV-TEST-SPLIT-90-5-5.json"
    split_file.write_text(json.dumps({"train": ["90000001", "123", "456"], "test": ["90000004"]}))
    with pytest.raises(ValueError, match=r"names 2 train document\(s\) missing from .*bbc-summary-data.*: 123, 456"):
        data.load_xsum(original, cache_dir=cache)
    split_file.unlink()
    with pytest.raises(ValueError, match="no split file: pass split_file"):
        data.load_xsum(original, cache_dir=cache)
    (tmp_path / "splits.json").write_text(json.dumps({"test": ["90000004"]}))
    assert len(data.load_xsum(original, split_file=tmp_path / "splits.json", cache_dir=cache)["test"]) == 1
    (original / "bbc-summary-data" / "90000004.summary").write_text("[SN]URL[SN]\nhttp://x\n[SN]BODY[SN]\ntext\n")
    with pytest.raises(ValueError, match=r"90000004\.summary, line 3: unknown section '\[SN\]BODY\[SN\]'"):
        data.load_xsum(original, split_file=tmp_path / "splits.json", cache_dir=cache)
    (original / "bbc-summary-data" / "90000004.summary").write_text("[SN]URL[SN]\nhttp://x\n[SN]RESTBODY[SN]\ntext\n")
    with pytest.raises(ValueError, match=r"90000004\.summary: no \[SN\]FIRST-SENTENCE\[SN\] section"):
        data.load_xsum(original, split_file=tmp_path / "splits.json", cache_dir=cache)


def test_xsum_table_errors(tmp_path, cache):
    good = json.dumps({"document": "A b.", "summary": "C.", "id": "1"})
    (tmp_path / "train.jsonl").write_text(good + "\n" + good[:-3] + "\n")
    with pytest.raises(ValueError, match=r"train\.jsonl, line 2: not a JSON object"):
        data.load_xsum(tmp_path, cache_dir=cache)
    (tmp_path / "train.jsonl").write_text(json.dumps({"document": "A b.", "id": "1"}) + "\n")
    with pytest.raises(ValueError, match=r"train\.jsonl, line 1: missing column\(s\) \['summary'\]"):
        data.load_xsum(tmp_path, cache_dir=cache)
    (tmp_path / "train.jsonl").unlink()
    (tmp_path / "train.csv").write_text("document,summary,id\nA b.,C.,1\nD e.,F.\n")
    with pytest.raises(ValueError, match=r"train\.csv, row 2 .*expected 3 fields"):
        data.load_xsum(tmp_path, cache_dir=cache)
    (tmp_path / "train.csv").unlink()
    (tmp_path / "notes.txt").write_text("not data")
    with pytest.raises(ValueError, match="no file ending in .parquet, .jsonl, .json, .csv is named after a split"):
        data.load_xsum(tmp_path, cache_dir=cache)


# ---- CoNLL-U -----------------------------------------------------------------------------------------------
def test_conllu_skips_multiword_tokens_and_empty_nodes(cache):
    conllu = data.load_conllu(FIXTURES / "conllu", cache_dir=cache)
    assert {split: len(conllu[split]) for split in conllu} == {"train": 2, "validation": 1, "test": 1}
    first, second = conllu["train"][0], conllu["train"][1]
    assert first["words"] == ["I", "ca", "n't", "swim", "."]  # not the multiword token "can't"
    assert first["heads"] == [4, 4, 4, 0, 4]
    assert first["deprels"] == ["nsubj", "aux", "advmod", "root", "punct"]
    assert first["upos"] == ["PRON", "AUX", "PART", "VERB", "PUNCT"]
    assert (first["sent_id"], first["text"]) == ("tiny-train-1", "I can't swim.")
    assert second["words"] == ["Sam", "likes", "tea", "and", "Kim", "coffee", "."]  # no empty node 5.1 "likes"
    assert second["heads"] == [2, 0, 2, 5, 2, 5, 2]
    assert conllu["test"][0]["words"] == ["We", "'re", "here", "."]
    assert (conllu["train"]["file"], conllu["train"]["index"]) == (["en_tiny-ud-train.conllu"] * 2, [0, 1])


def test_conllu_errors_name_the_file_and_line(tmp_path, cache):
    text = (FIXTURES / "conllu" / "en_tiny-ud-train.conllu").read_text().splitlines()
    bad = tmp_path / "x-ud-train.conllu"
    # Line 13 is a word of the second sentence; drop its MISC field.
    bad.write_text("\n".join(text[:12] + [text[12].rsplit("\t", 1)[0]] + text[13:]) + "\n")
    with pytest.raises(ValueError, match=r"x-ud-train\.conllu, line 13: 9 tab-separated field\(s\), expected 10"):
        data.load_conllu(tmp_path, cache_dir=cache)
    assert text[13].startswith("3\ttea") and "\t2\tobj\t" in text[13]
    bad.write_text("\n".join(text[:13] + [text[13].replace("\t2\tobj", "\tx\tobj")] + text[14:]) + "\n")
    with pytest.raises(ValueError, match=r"sentence starting on line 10: .*'x' is not a valid value"):
        data.load_conllu(tmp_path, cache_dir=cache)
    bad.write_text("# text = a b\n1\ta\ta\tX\t_\t_\t0\troot\t_\t_\n3\tb\tb\tX\t_\t_\t1\tdep\t_\t_\n")
    with pytest.raises(ValueError, match="line 1: word IDs must run 1, 2, 3"):
        data.load_conllu(tmp_path, cache_dir=cache)


@pytest.mark.parametrize("heads, message", [
    ((0, 99, 2), "word 2 .'b'. has head 99; expected 0 .the root. or a word position from 1 to 3"),
    ((0, -1, 2), "word 2 .'b'. has head -1"),
    ((0, 2, 2), "word 2 .'b'. is its own head"),
    ((0, 1, 0), r"2 words have head 0 \(positions \[1, 3\]\); expected exactly one root"),
    ((3, 0, 1), r"the heads of words \[1, 3\] form a cycle"),
])
def test_conllu_heads_must_make_one_tree(tmp_path, heads, message):
    lines = ["# text = a b c"] + [f"{i}\t{w}\t{w}\tX\t_\t_\t{h}\tdep\t_\t_" for i, (w, h) in enumerate(zip("abc", heads), 1)]
    path = tmp_path / "x-ud-train.conllu"
    path.write_text("\n".join(lines) + "\n\n")
    with pytest.raises(ValueError, match=r"x-ud-train\.conllu, sentence starting on line 1: " + message):
        list(read_conllu_file(path, "x"))


def test_conllu_is_streamed(tmp_path):
    good = (FIXTURES / "conllu" / "en_tiny-ud-dev.conllu").read_text()
    path = tmp_path / "x-ud-train.conllu"
    path.write_text(good + "1\tbroken\n\n")
    sentences = read_conllu_file(path, "x")
    assert next(sentences)["words"] == ["Birds", "sing", "."]
    with pytest.raises(ValueError, match="line 7"):
        next(sentences)


# ---- load() ------------------------------------------------------------------------------------------------
def test_load_dispatches_and_reports_bad_names_paths_and_options(tmp_path, cache):
    assert data.load("conllu", FIXTURES / "conllu", cache_dir=cache)["validation"]["words"] == [["Birds", "sing", "."]]
    assert set(data.LOADERS) == {"ptb", "bllip", "xsum", "conllu"} and data.LOADERS["ptb"] is data.load_ptb
    with pytest.raises(ValueError, match=r"unknown loader 'penn'; expected one of \['bllip', 'conllu', 'ptb', 'xsum'\]"):
        data.load("penn", FIXTURES / "wsj")
    with pytest.raises(ValueError, match="ptb data path '.*nowhere' does not exist"):
        data.load("ptb", tmp_path / "nowhere")
    with pytest.raises(ValueError, match=r"loader 'xsum' has no option\(s\) \['binarize'\]"):
        data.load("xsum", FIXTURES / "xsum" / "jsonl", binarize=True)
    with pytest.raises(ValueError, match="split 'test': BLLIP tree file '.*missing.txt' does not exist"):
        data.load("bllip", {"test": tmp_path / "missing.txt"})


# ---- real data (skipped when ../shared/data is absent) ----------------------------------------------------
def shared(name):
    if not (SHARED / name).is_dir():
        pytest.skip(f"{SHARED / name} is absent (real data lives outside the repository)")
    return SHARED / name


def test_ptb_sample_by_sections(cache):
    treebank = shared("ptb_sample") / "treebank" / "combined"
    with pytest.raises(ValueError, match=r"WSJ section\(s\) 00, 01.*name the splits by section or file"):
        data.load_ptb(treebank, cache_dir=cache)
    ptb = data.load_ptb(treebank, splits={"train": "0001-0159", "validation": "0160-0179", "test": "0180-0199"},
                        strip_function_tags=True, cache_dir=cache)
    # PROVENANCE.md: 3,914 sentences and 94,084 overt tokens once the -NONE- elements are gone.
    assert sum(len(ptb[split]) for split in ptb) == 3914
    assert sum(len(words) for split in ptb for words in ptb[split]["words"]) == 94084
    assert ptb["train"][0]["words"][:4] == ["Pierre", "Vinken", ",", "61"]


def test_xsum_human_evaluation_sample(cache):
    path = shared("xsum_sample") / "xsum_humaneval_50.derived.jsonl"
    xsum = data.load_xsum({"test": path}, cache_dir=cache)
    test = xsum["test"]
    # PROVENANCE.md: 50 documents, 18,285 document tokens, 1,094 summary tokens; extra columns are not kept.
    assert len(test) == 50 and test.column_names == ["document", "summary", "id"]
    assert sum(len(text.split()) for text in test["document"]) == 18285
    assert sum(len(text.split()) for text in test["summary"]) == 1094
    assert all(isinstance(i, str) for i in test["id"])


def test_conllu_reads_all_of_ud_english_ewt(cache):
    ewt = data.load("conllu", shared("ud_english_ewt"), cache_dir=cache)
    # PROVENANCE.md: 12,544 / 2,001 / 2,077 sentences; 204,577 / 25,147 / 25,094 syntactic words.
    assert {split: len(ewt[split]) for split in ewt} == {"train": 12544, "validation": 2001, "test": 2077}
    words = {split: sum(len(w) for w in ewt[split]["words"]) for split in ewt}
    assert words == {"train": 204577, "validation": 25147, "test": 25094}
    heads = ewt["validation"]["heads"]
    assert all(sum(1 for head in sentence if head == 0) >= 1 for sentence in heads)


def _conllu_file(path, sentences):
    """Write sentences given as inline trees ('a/2 b/0') as a CoNLL-U file, one `# sent_id = sK` each."""
    blocks = []
    for k, sentence in enumerate(sentences):
        items = [item.rpartition("/") for item in sentence.split()]
        lines = [f"# sent_id = s{k}"] + [f"{i}\t{w}\t{w}\tX\t_\t_\t{h}\tdep\t_\t_"
                                         for i, (w, _, h) in enumerate(items, start=1)]
        blocks.append("\n".join(lines))
    path.write_text("\n\n".join(blocks) + "\n\n")


@pytest.mark.parametrize("policy", ["keep", "error", "skip", "lift"])
def test_conllu_non_projective_trees_are_kept_refused_skipped_or_lifted(tmp_path, cache, policy):
    from hf_slm.tokenization.dependency_trees import crossing_arcs

    sentences = ["There/2 is/0 a/4 difference/2", "a/3 b/0 c/2 d/1", "Dogs/2 bark/0"]  # the second crosses
    _conllu_file(tmp_path / "x-ud-train.conllu", sentences)
    if policy == "error":
        with pytest.raises(ValueError, match=r"x-ud-train\.conllu, sentence 2 \(s1\) is not projective: the arc"):
            data.load_conllu(tmp_path, cache_dir=cache, non_projective=policy)
        return
    if policy == "skip":
        with pytest.warns(UserWarning, match=r"split 'train': left out 1 non-projective sentence"):
            train = data.load_conllu(tmp_path, cache_dir=cache, non_projective=policy)["train"]
        assert train["sent_id"] == ["s0", "s2"]
        return
    train = data.load_conllu(tmp_path, cache_dir=cache, non_projective=policy)["train"]
    assert train["sent_id"] == ["s0", "s1", "s2"]
    assert train["heads"][0] == [2, 0, 4, 2] and train["heads"][2] == [2, 0]  # projective ones as they are
    if policy == "keep":
        assert train["heads"][1] == [3, 0, 2, 1] and train["lifted_arcs"] == [0, 0, 0]
    else:
        assert crossing_arcs(train["heads"][1]) is None and train["lifted_arcs"][1] >= 1
        assert train["lifted_arcs"][0] == train["lifted_arcs"][2] == 0
    with pytest.raises(ValueError, match="non_projective must be one of"):
        data.load_conllu(tmp_path, cache_dir=cache, non_projective="drop")
