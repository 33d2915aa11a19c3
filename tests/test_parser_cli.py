"""The proposal parsers from the command line (issue 38), on shipped data only: `hf-slm parser train` for each kind,
`hf-slm propose`, each paper's perplexity protocol end to end with `--proposal-parser` (paper 000 on TG with the
labelled CRF parser, 002 on DTG with the biaffine parser, 003 on a compositional model with the unlabelled CRF
parser), reranking and UAS from drawn proposals, `parse` / `eval parse` / `eval uas --parser`, raw text made into
training trees (`data prepare --loader text --parser`), silver trees of summarization data from a proposal parser,
the card and the checks `hf-slm push` runs."""

import json
from pathlib import Path

import pytest
from conftest import save_tiny_checkpoint

from hf_slm.cli import main
from hf_slm.data import samples
from hf_slm.families.tree_formats import tree_format

GUM = Path(samples.__file__).resolve().parents[1] / "sample_data" / "gum"
EWT = Path(samples.__file__).resolve().parents[1] / "sample_data" / "ud_english_ewt_sample"
TINY_SIZES = ["--set", "lstm_hidden_size=24", "--set", "lstm_layers=1", "--set", "word_embedding_size=16",
              "--set", "char_embedding_size=8", "--set", "char_hidden_size=16"]
TINY_PARSER = [*TINY_SIZES, "--max-steps", "12", "--batch-size", "16", "--save-steps", "12", "--eval-steps", "12",
               "--logging-steps", "6"]
CONSTITUENCY_MLPS = ["--set", "span_mlp_size=16", "--set", "label_mlp_size=16", "--set", "tag_mlp_size=16"]
DEPENDENCY_MLPS = ["--set", "arc_mlp_size=16", "--set", "relation_mlp_size=16"]
TINY_LM = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2)


def _lines(path, count):
    return [line for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()][:count]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Small files cut from the shipped samples: GUM trees and UD EWT sentences."""
    folder = tmp_path_factory.mktemp("parser-data")
    (folder / "train.txt").write_text("\n".join(_lines(GUM / "train.txt", 120)) + "\n")
    (folder / "dev.txt").write_text("\n".join(_lines(GUM / "dev.txt", 12)) + "\n")
    blocks = (EWT / "en_ewt-sample-ud-dev.conllu").read_text(encoding="utf-8").strip().split("\n\n")
    # and a sentence that starts with a bracket, `( And , by the way , ...`: a dependency tree of it written inline,
    # `(/6 And/6 ...`, would read as PTB brackets
    bracketed = (EWT / "en_ewt-sample-ud-test.conllu").read_text(encoding="utf-8").strip().split("\n\n")[3]
    (folder / "dev.conllu").write_text("\n\n".join([bracketed, *blocks[:5]]) + "\n\n")
    return folder


@pytest.fixture(scope="module")
def parsers(data, tmp_path_factory):
    """{kind: its trained checkpoint folder}, each trained from the command line for a few steps."""
    trained = {}
    for kind, train, held_out, mlps in (
            ("crf", data / "train.txt", data / "dev.txt", CONSTITUENCY_MLPS),
            ("crf-unlabeled", data / "train.txt", data / "dev.txt", CONSTITUENCY_MLPS),
            ("biaffine", EWT / "en_ewt-sample-ud-train.conllu", data / "dev.conllu", DEPENDENCY_MLPS)):
        output = tmp_path_factory.mktemp(f"parser-{kind}") / "parser"
        assert main(["parser", "train", "--kind", kind, "--train", str(train), "--eval", str(held_out), "--output",
                     str(output), *TINY_PARSER, *mlps]) == 0
        trained[kind] = output
    return trained


@pytest.fixture(scope="module")
def models(data, tmp_path_factory):
    """Tiny random language models of papers 000 (TG), 003 (Nb-Dn-In-M) and 002 (DTG), saved."""
    trees = _lines(data / "train.txt", 120)
    saved = {grammar: save_tiny_checkpoint(tmp_path_factory.mktemp(grammar), trees, vocab_size=200, grammar=grammar,
                                           **TINY_LM)[0] for grammar in ("tg", "nb-dn-in-m")}
    from hf_slm.families import causal_lm_for_config, config_for_grammar
    from hf_slm.parsers.data import read_dependency_examples
    from hf_slm.tokenization.tokenization_dependency import DependencyTokenizer

    examples = read_dependency_examples([EWT / "en_ewt-sample-ud-train.conllu"], log=lambda *_: None)
    inline = [" ".join(f"{w}/{h}" for w, h in zip(ex["words"], ex["heads"])) for ex, _ in examples]
    tokenizer = DependencyTokenizer.train(inline, vocab_size=300, transition_system="arc_standard")
    model = causal_lm_for_config(config_for_grammar("dtg", vocab_size=len(tokenizer), **tokenizer.action_layout,
                                                    **TINY_LM)).eval()
    saved["dtg"] = tmp_path_factory.mktemp("dtg")
    model.save_pretrained(saved["dtg"])
    tokenizer.save_pretrained(saved["dtg"])
    return saved


def test_parser_train_writes_a_loadable_parser_with_its_held_out_quality(parsers):
    for kind, folder in parsers.items():
        record = json.loads((folder / "training_setup.json").read_text())
        assert record["parser_kind"] == kind and record["steps_done"] == 12
        held_out = record["held_out"]
        if kind == "biaffine":
            assert 0 <= held_out["uas"] <= 100 and 0 <= held_out["las"] <= held_out["uas"]
            assert 0 <= held_out["right_branching_uas"] <= 100
        else:
            assert 0 <= held_out["unlabelled_f1"] <= 100 and 0 <= held_out["right_branching_f1"] <= 100
            assert ("f1" in held_out) == (kind == "crf")  # labelled F1 for the labelled parser only
        config = json.loads((folder / "config.json").read_text())
        assert config["auto_map"]["AutoModel"].split(".")[0] + ".py" in {p.name for p in folder.glob("*.py")}


def test_parser_train_refuses_a_trained_output_without_overwrite(parsers, data, capsys):
    assert main(["parser", "train", "--kind", "crf", "--train", str(data / "dev.txt"), "--output",
                 str(parsers["crf"]), "--max-steps", "1"]) == 2
    assert "holds a trained model" in capsys.readouterr().err


def test_propose_draws_unique_trees_and_a_rerun_resumes(parsers, data, tmp_path, capsys):
    output = tmp_path / "proposals.txt"
    argv = ["propose", "--parser", str(parsers["crf"]), "--data", str(data / "dev.txt"), "--num", "7", "--limit", "4",
            "--output", str(output)]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["num"] == 7 and summary["sentences"] == 4
    blocks = list(tree_format("brackets").proposal_blocks(output))
    words = [tree_format("brackets").words(line) for line in _lines(data / "dev.txt", 4)]
    assert [tree_format("brackets").words(block.trees[0]) for block in blocks] == words
    for block in blocks:
        assert 1 <= len(block.trees) <= 7 and len({str(tree) for tree in block.trees}) == len(block.trees)
    first = output.read_text()
    assert main(argv) == 0
    assert "4 of 4 sentences already finished" in capsys.readouterr().err
    assert output.read_text() == first


@pytest.mark.parametrize("protocol, grammar, kind", [("paper000", "tg", "crf"),
                                                     ("paper003", "nb-dn-in-m", "crf-unlabeled"),
                                                     ("paper002", "dtg", "biaffine")])
def test_each_papers_perplexity_protocol_runs_end_to_end(protocol, grammar, kind, parsers, models, data, tmp_path,
                                                          capsys):
    """One command: proposals drawn by the parser, scored by the LM; the same number as scoring the drawn file."""
    source = data / ("dev.conllu" if kind == "biaffine" else "dev.txt")
    argv = ["eval", "ppl", "--model", str(models[grammar]), "--data", str(source), "--limit", "3", "--protocol",
            protocol, "--proposal-parser", str(parsers[kind]), "--max-proposals", "5", "--output", str(tmp_path / "a")]
    assert main(argv) == 0
    record = json.loads(next((tmp_path / "a").glob("ppl-*.json")).read_text())
    assert record["protocol"]["settings"]["proposals"]["value"] == "drawn by --proposal-parser"
    drawn = record["proposal_parser"]
    assert drawn["kind"] == kind and drawn["num"] == 5 and drawn["seed"] == 0 and len(drawn["parameters_sha256"]) == 64
    assert drawn["paper_parser"]["same_kind"] == (protocol != "paper000")  # paper 000 drew from a discriminative RNNG
    assert record["metrics"]["is_upper_bound"] and record["metrics"]["method"] == "proposals"
    capsys.readouterr()
    assert main(["eval", "ppl", "--model", str(models[grammar]), "--data", str(source), "--limit", "3", "--proposals",
                 drawn["file"], "--output", str(tmp_path / "b")]) == 0
    again = json.loads(next((tmp_path / "b").glob("ppl-*.json")).read_text())
    assert again["metrics"]["log_prob_total"] == pytest.approx(record["metrics"]["log_prob_total"], abs=1e-6)


def test_a_parser_of_the_wrong_kind_is_refused(parsers, models, data, capsys):
    assert main(["eval", "ppl", "--model", str(models["tg"]), "--data", str(data / "dev.txt"), "--limit", "2",
                 "--proposal-parser", str(parsers["biaffine"])]) == 2
    error = capsys.readouterr().err
    assert "reads brackets trees" in error and "draws dependency trees" in error and "kind crf" in error
    assert main(["eval", "ppl", "--model", str(models["tg"]), "--data", str(data / "dev.txt"), "--limit", "2",
                 "--proposal-parser", str(parsers["crf-unlabeled"])]) == 2  # a TG reads labelled trees
    assert "expected a parser of kind crf" in capsys.readouterr().err


def test_rerank_and_uas_from_drawn_proposals(parsers, models, data, tmp_path):
    assert main(["eval", "rerank", "--model", str(models["tg"]), "--gold", str(data / "dev.txt"), "--limit", "3",
                 "--proposal-parser", str(parsers["crf"]), "--max-proposals", "4", "--output", str(tmp_path / "r")]) == 0
    record = json.loads(next((tmp_path / "r").glob("rerank-*.json")).read_text())
    assert 0 <= record["metrics"]["f1"] <= 100 and record["proposal_parser"]["kind"] == "crf"
    assert main(["eval", "uas", "--model", str(models["dtg"]), "--data", str(data / "dev.conllu"), "--limit", "3",
                 "--proposal-parser", str(parsers["biaffine"]), "--max-proposals", "4", "--output",
                 str(tmp_path / "u")]) == 0
    record = json.loads(next((tmp_path / "u").glob("uas-*.json")).read_text())
    assert record["metrics"]["uas"] is not None and record["proposal_parser"]["kind"] == "biaffine"


def test_parse_and_evaluate_with_a_parser(parsers, data, tmp_path, capsys):
    assert main(["parse", "--parser", str(parsers["crf"]), "The students are happy ."]) == 0
    tree = capsys.readouterr().out.strip()
    assert tree_format("brackets").words(tree) == ["The", "students", "are", "happy", "."]
    assert main(["parse", "--parser", str(parsers["biaffine"]), "The students are happy ."]) == 0
    inline = capsys.readouterr().out.strip()
    assert tree_format("dependency").words(inline) == ["The", "students", "are", "happy", "."]
    assert main(["parse", "--parser", str(parsers["crf"]), "--beam-size", "5", "a b"]) == 2
    assert "--beam-size" in capsys.readouterr().err
    assert main(["parse", "a b"]) == 2
    assert "give --model (a language model) or --parser" in capsys.readouterr().err
    assert main(["eval", "parse", "--parser", str(parsers["crf"]), "--gold", str(data / "dev.txt"), "--output",
                 str(tmp_path / "p")]) == 0
    shown = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {"f1", "unlabelled_f1", "right_branching_f1"} <= set(shown) and shown["sentences"] == 12
    assert main(["eval", "uas", "--parser", str(parsers["biaffine"]), "--data", str(data / "dev.conllu"),
                 "--output", str(tmp_path / "u")]) == 0
    shown = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {"uas", "las", "right_branching_uas"} <= set(shown) and shown["sentences"] == 6
    assert main(["eval", "uas", "--parser", str(parsers["crf"]), "--data", str(data / "dev.conllu")]) == 2
    assert "scored by hf-slm eval parse" in capsys.readouterr().err


def test_raw_text_becomes_training_trees(parsers, models, tmp_path):
    raw = tmp_path / "raw.txt"
    raw.write_text("The students are happy.\nA bird sings in the garden.\n\nIt rained.\n")
    output = tmp_path / "prepared"
    assert main(["data", "prepare", "--loader", "text", "--parser", str(parsers["crf"]), "--path", str(raw),
                 "--tokenizer", str(models["tg"]), "--output", str(output)]) == 0
    record = json.loads((output / "prepare.json").read_text())
    assert record["parsed_from"]["parser"] == str(parsers["crf"]) and record["splits"]["train"]["examples"] == 3
    trees = (output / "parsed" / "train.txt").read_text().splitlines()
    assert [tree_format("brackets").words(tree) for tree in trees] == [
        ["The", "students", "are", "happy", "."], ["A", "bird", "sings", "in", "the", "garden", "."], ["It", "rained",
                                                                                                      "."]]
    dependency = tmp_path / "prepared-dtg"
    assert main(["data", "prepare", "--loader", "text", "--parser", str(parsers["biaffine"]), "--path", str(raw),
                 "--grammar", "dtg", "--vocab-size", "60", "--output", str(dependency)]) == 0
    assert json.loads((dependency / "prepare.json").read_text())["splits"]["train"]["examples"] == 3


def test_summarization_silver_trees_from_a_proposal_parser(parsers, models, tmp_path):
    from helpers.summarization import fixture_rows

    from hf_slm.summarization.summaries import document_trees
    from hf_slm.parsers.parser import load_tree_source
    from hf_slm.tokenization.tokenization_slm import SyntacticTokenizer

    tokenizer = SyntacticTokenizer.from_pretrained(str(models["tg"]))
    found = document_trees(fixture_rows(1), tokenizer, load_tree_source(parsers["crf"]), cache_dir=tmp_path / "c")
    assert found[0]["document"] and all(tree.label() for tree in found[0]["document"])
    with pytest.raises(ValueError, match="biaffine proposal parser, which gives dependency trees"):
        document_trees(fixture_rows(1), tokenizer, load_tree_source(parsers["biaffine"]))


def test_the_card_and_the_checks_push_runs(parsers):
    from hf_slm.publishing.hub import check_checkpoint

    for kind, folder in parsers.items():
        kept, _ = check_checkpoint(folder)
        assert "model.safetensors" in kept and "parser_vocab.json" in kept
        assert main(["card", str(folder)]) == 0
        card = (folder / "README.md").read_text()
        assert f"| kind | `{kind}` |" in card and "right-branching baseline" in card
        assert "AutoModel.from_pretrained(REPO, trust_remote_code=True, revision=REVISION)" in card


def test_a_parser_checkpoint_given_as_a_model_says_where_it_belongs(parsers, data, capsys):
    assert main(["eval", "ppl", "--model", str(parsers["crf"]), "--data", str(data / "dev.txt")]) == 2
    assert "it is a proposal parser (hf-slm parser train): give it as --parser or --proposal-parser" in \
        capsys.readouterr().err


def _tiny_bert(folder, data):
    """A BERT of one layer with a WordPiece tokenizer trained on the sample's words, saved in `folder` (no hub)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    words = [word for line in _lines(data / "train.txt", 120) for word in tree_format("brackets").words(line)]
    pieces = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    pieces.normalizer, pieces.pre_tokenizer = normalizers.Lowercase(), pre_tokenizers.Whitespace()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    pieces.train_from_iterator([" ".join(words)], trainers.WordPieceTrainer(vocab_size=200, special_tokens=specials))
    pieces.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[(name, pieces.token_to_id(name)) for name in ("[CLS]", "[SEP]")])
    PreTrainedTokenizerFast(tokenizer_object=pieces, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                            sep_token="[SEP]", mask_token="[MASK]").save_pretrained(folder)
    BertModel(BertConfig(vocab_size=pieces.get_vocab_size(), hidden_size=16, num_hidden_layers=1,
                         num_attention_heads=2, intermediate_size=32)).save_pretrained(folder)
    return folder


def test_a_parser_over_a_pretrained_encoder(data, tmp_path):
    """--encoder (paper 002's Biaffine-roberta is a parser over RoBERTa): the encoder's weights start the parser, its
    fast tokenizer is saved beside, each word's vector is pooled from its pieces, and the checkpoint loads and parses
    without hf-slm (the encoder's code is transformers')."""
    import torch
    from safetensors.torch import load_file

    from conftest import ISOLATION_PREAMBLE, run_without_hf_slm
    from hf_slm.parsers.parser import ProposalParser

    encoder = _tiny_bert(tmp_path / "bert", data)
    output = tmp_path / "parser"
    assert main(["parser", "train", "--kind", "biaffine", "--train", str(EWT / "en_ewt-sample-ud-train.conllu"),
                 "--output", str(output), "--encoder", str(encoder), "--max-steps", "2", "--batch-size", "8",
                 "--learning-rate", "1e-12", *DEPENDENCY_MLPS]) == 0
    config = json.loads((output / "config.json").read_text())
    assert config["encoder"] == "pretrained" and config["pretrained_encoder_name"] == str(encoder)
    assert (output / "encoder_tokenizer.json").is_file()
    # a learning rate of 1e-12 leaves the encoder's weights where the pretrained ones started them
    bert, parser_weights = load_file(encoder / "model.safetensors"), load_file(output / "model.safetensors")
    embeddings = "embeddings.word_embeddings.weight"
    torch.testing.assert_close(parser_weights[f"encoder.pretrained.{embeddings}"], bert[embeddings], rtol=0,
                               atol=1e-6)
    parser = ProposalParser.load(output)
    encoded = parser.tokenizer(["The students are happy ."])
    assert encoded["piece_ids"][0] == parser.tokenizer.encoder_tokenizer.encode(
        ["The", "students", "are", "happy", "."], is_pretokenized=True).ids
    best = parser.best([["The", "students", "are", "happy", "."]])[0][0]
    script = ISOLATION_PREAMBLE + r'''
import sys, torch
from transformers import AutoModel, AutoTokenizer
model = AutoModel.from_pretrained(sys.argv[1], trust_remote_code=True).eval()
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=True)
words = ["The", "students", "are", "happy", "."]
structure = model.best_structures(**tokenizer([words], is_split_into_words=True, return_tensors="pt"))[0]
torch.save(tokenizer.decode_tree(words, structure), sys.argv[-1])
'''
    assert run_without_hf_slm(script, [output], tmp_path) == best


def test_blimp_from_drawn_proposals_under_paper_002s_protocol(parsers, models, tmp_path):
    """Paper 002's BLiMP protocol (section 4.2: the 300 proposal trees of section 4.1): the pairs evaluated get their
    proposals drawn, good sentence then bad one, and the accuracy compares the two bounds."""
    blimp = Path(samples.__file__).resolve().parents[1] / "sample_data" / "blimp_sample"
    assert main(["eval", "blimp", "--model", str(models["dtg"]), "--data", str(blimp), "--limit", "1", "--protocol",
                 "paper002", "--proposal-parser", str(parsers["biaffine"]), "--max-proposals", "3", "--output",
                 str(tmp_path / "b")]) == 0
    record = json.loads(next((tmp_path / "b").glob("blimp-*.json")).read_text())
    paradigms = len(list(blimp.glob("*.jsonl")))
    assert record["metrics"]["pairs"] == paradigms and record["proposal_parser"]["sentences"] == 2 * paradigms
    assert record["protocol"]["settings"]["proposals"]["value"] == "drawn by --proposal-parser"
    assert "sum of p(x, y) over the proposal trees" in record["metrics"]["log_prob"]


def test_a_byte_level_encoders_words_get_the_space_they_had_in_text(data, tmp_path):
    """RoBERTa's byte-level pieces (paper 002's Biaffine-roberta) mark a word that follows a space (`Ġ`): given one
    word at a time, each must be split as it was in running text, not as a word glued to the one before."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaTokenizerFast

    from hf_slm.parsers.training import encoder_pieces

    words = [word for line in _lines(data / "train.txt", 120) for word in tree_format("brackets").words(line)]
    pieces = ByteLevelBPETokenizer()
    pieces.train_from_iterator([" ".join(words)], vocab_size=400,
                               special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    pieces.save_model(str(tmp_path))
    RobertaTokenizerFast.from_pretrained(str(tmp_path)).save_pretrained(tmp_path)
    encoded = encoder_pieces(str(tmp_path)).encode(["The", "students", "are"], is_pretokenized=True)
    starts = [encoded.tokens[encoded.word_ids.index(word)] for word in range(3)]
    assert all(token.startswith("\u0120") for token in starts), encoded.tokens


def test_an_interrupted_parser_training_resumes_from_its_last_checkpoint(data, tmp_path, capsys):
    output = tmp_path / "run"
    common = ["parser", "train", "--kind", "crf", "--train", str(data / "dev.txt"), "--output", str(output),
              *TINY_SIZES, *CONSTITUENCY_MLPS, "--batch-size", "4", "--save-steps", "2", "--logging-steps", "1"]
    assert main([*common, "--max-steps", "2"]) == 0
    vocabulary = (output / "parser_vocab.json").read_text()
    assert main([*common, "--max-steps", "4"]) == 2  # a finished run is not trained over silently
    assert "holds a trained model" in capsys.readouterr().err
    assert main([*common, "--max-steps", "4", "--resume"]) == 0
    record = json.loads((output / "training_setup.json").read_text())
    assert record["steps_done"] == 4 and (output / "checkpoint-4").is_dir()
    assert (output / "parser_vocab.json").read_text() == vocabulary  # the checkpoint's tokenizer, not a new one
    state = json.loads((output / "checkpoint-4" / "trainer_state.json").read_text())
    assert [entry["step"] for entry in state["log_history"] if "loss" in entry] == [1, 2, 3, 4]


def test_parse_says_parsing(parsers, capsys):
    """`hf-slm parse`'s progress bar says what it does (issue 39: it said "silver trees", the cache's name)."""
    assert main(["parse", "--parser", str(parsers["crf"]), "The students are happy ."]) == 0
    err = capsys.readouterr().err
    assert "parsing:" in err and "silver trees" not in err
