"""Summarization (issue 15, items 2-5): XSum examples as one action sequence (hf_slm/summarization/summaries.py),
prepared data (`hf-slm data prepare --summarization`), fine-tuning (`hf-slm finetune`), generation (`hf_slm.summarize`,
`hf-slm summarize`) and ROUGE (`hf-slm eval rouge`). The memorization tests fine-tune a tiny TG and a tiny
TXL (terminals) on two fixture documents until they give back the reference summaries (ROUGE-L > 0.9)."""

import json
import shutil
import warnings
from pathlib import Path

import pytest
import torch
from conftest import save_tiny_checkpoint
from helpers.dependency_models import tiny

import hf_slm
from hf_slm.cli import main
from hf_slm.data.collator import SyntacticDataCollator
from hf_slm.families import config_for_grammar
from hf_slm.families import causal_lm_for_config
from hf_slm.data.sentence_splitting import split_sentences, treebank_words
from hf_slm.summarization.silver import document_sentences
from hf_slm.summarization.summaries import (
    PROMPT,
    SummarizationFormat,
    check_parser,
    document_grammar,
    document_trees,
    first_words,
    summarization_examples,
    summarization_sequence,
    summarize,
    text_to_keep,
    truncate_sentences,
)
from hf_slm.tokenization.trees import parse_tree
from helpers.summarization import MEMORIZATION_MODEL, PARSER_ARGS, TREES, fixture_rows, memorization_setup

XSUM_SAMPLE = (Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "xsum_sample"
               / "xsum_humaneval_50.derived.jsonl")

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.slow]  # conftest.py


@pytest.fixture(scope="module")
def tokenizers():
    return (hf_slm.SyntacticTokenizer.train(TREES, vocab_size=40),
            hf_slm.SyntacticTokenizer.train(TREES, vocab_size=40, linearization="terminals"))


# ---- the sequence ---------------------------------------------------------------------------------------


def test_the_sequence_is_document_prompt_summary_with_labels_on_the_summary(tokenizers):
    tokenizer, _ = tokenizers
    document = [parse_tree(TREES[0]), parse_tree(TREES[1])]
    summary = [parse_tree("(S (NP A dog) (VP sings) .)")]
    example = summarization_sequence(tokenizer, document, summary, "d1")
    ids, labels, start = example["input_ids"], example["labels"], example["summary_start"]
    assert ids == tokenizer.encode_document(document + [PROMPT] + summary)["input_ids"]
    assert tokenizer.decode(ids[start:], skip_special_tokens=True) == "(S (NP A dog) (VP sings) .)"
    assert tokenizer.decode_actions(ids[:start])[-4:] == ["(NP", "Summary", ":", "NP)"]  # the prompt before it
    assert labels[:start] == [-100] * start and labels[start:] == ids[start:]
    everything = summarization_sequence(tokenizer, document, summary, "d1", SummarizationFormat(labels="all"))
    assert everything["labels"] == ids and everything["input_ids"] == ids
    document_grammar(tokenizer).validate(ids)  # several trees after one <s>: a document-level sequence


def test_a_words_only_tokenizer_gets_the_words_and_learns_the_end(tokenizers):
    _, terminals = tokenizers
    example = summarization_sequence(terminals, [["The", "bird", "sings", "."]], [["A", "dog", "barks", "."]], "d1")
    ids, start = example["input_ids"], example["summary_start"]
    assert terminals.decode(ids[:start], skip_special_tokens=True) == "The bird sings . Summary :"
    assert terminals.decode(ids[start:], skip_special_tokens=True) == "A dog barks ." and ids[-1] == terminals.eos_token_id
    assert example["labels"][start:] == ids[start:]  # `</s>` is trained: it ends the summary


def test_documents_are_cut_at_a_sentence_boundary():
    sentences = [["a"] * 4, ["b"] * 3, ["c"] * 5]
    assert truncate_sentences(sentences, 7, "d") == (sentences[:2], True)
    assert truncate_sentences(sentences, 12, "d") == (sentences, False)
    # Only a first sentence longer than the limit is cut: a tree keeps the constituents over its first words.
    tree = parse_tree("(S (NP The bird) (VP sings (PP in (NP the tree))) .)")
    kept, cut = truncate_sentences([tree, ["x"]], 4, "d")
    assert cut and kept[0].leaves() == ["The", "bird", "sings", "in"]
    assert str(kept[0]) == str(parse_tree("(S (NP The bird) (VP sings (PP in)))"))
    assert first_words(["a", "b", "c"], 2, "d") == ["a", "b"]
    # A dependency tree keeps its first words, each under its nearest kept ancestor; the first whose ancestors
    # were all cut is the root.
    assert first_words("The/2 dog/3 barked/0 at/5 cats/3 ./3", 4, "d") == "The/2 dog/3 barked/0 at/3"
    assert first_words("The/2 dog/3 barked/0 at/5 cats/3 ./3", 2, "d") == "The/2 dog/0"
    assert first_words("a/3 b/3 c/0", 2, "d") == "a/0 b/1"
    with pytest.raises(ValueError, match="document d7: its first sentence alone has more words than the limit"):
        first_words("x y ) z )", 2, "document d7")  # a bottom-up action string


def test_only_the_sentences_truncation_keeps_are_parsed(tokenizers, monkeypatch):
    """Sentences past max_document_words are never parsed, and the kept ones are those truncate_sentences keeps."""
    text = "One two three four .\nFive six seven .\nEight nine ten eleven twelve ."
    assert text_to_keep(text, 9) == "One two three four .\nFive six seven .\n"  # 5 + 4 words; 6 more would pass 9
    assert text_to_keep(text, 3) == "One two three four .\n"  # a first sentence is kept (truncation cuts it)
    assert text_to_keep(text, None) == text
    parsed = []

    class Parsed(Exception):
        pass

    def recording_silver_trees(model, tokenizer, texts, **options):  # what would be parsed, then stop
        parsed.extend(texts.values())
        raise Parsed

    monkeypatch.setattr("hf_slm.summarization.summaries.silver_trees", recording_silver_trees)
    monkeypatch.setattr("hf_slm.summarization.summaries.check_parser", lambda *arguments: None)
    tokenizer, _ = tokenizers
    with pytest.raises(Parsed):
        document_trees([{"id": "d", "document": text}], tokenizer, parser=(None, None), max_document_words=9)
    assert parsed == ["One two three four .\nFive six seven .\n"]


def test_summary_limit_empty_document_and_prompt_errors(tokenizers):
    tokenizer, _ = tokenizers
    document, summary = [parse_tree(TREES[0])], [parse_tree(TREES[0])]  # 7 words
    with pytest.raises(ValueError, match=r"document 42: its summary has 7 words, more than the limit of 5; .*"
                                         r"truncate_summaries=True"):
        summarization_sequence(tokenizer, document, summary, "42", SummarizationFormat(max_summary_words=5))
    cut = summarization_sequence(tokenizer, document, summary, "42",
                                 SummarizationFormat(max_summary_words=5, truncate_summaries=True))
    assert cut["summary_truncated"] and len([i for i in cut["input_ids"][cut["summary_start"]:]
                                             if tokenizer.word_start_mask[i]]) == 5
    with pytest.raises(ValueError, match="document 43 is empty after cleaning"):
        summarization_sequence(tokenizer, [], summary, "43")
    with pytest.raises(ValueError, match="document 44 is empty after cleaning"):
        document_trees([{"id": 44, "document": " \n \n", "summary": "A dog barks."}], tokenizer, parser=None)
    with pytest.raises(ValueError, match=r"the summary prompt '\(QQ Summary :\)' cannot be encoded.*'QQ' is not in "
                                         "the vocabulary"):
        summarization_sequence(tokenizer, document, summary, "45", SummarizationFormat(prompt="(QQ Summary :)"))
    with pytest.raises(ValueError, match=r"the summary prompt '\(NP Summary\) \(NP :\)' .*expected exactly one tree"):
        summarization_sequence(tokenizer, document, summary, "46", SummarizationFormat(prompt="(NP Summary) (NP :)"))


def test_a_parser_of_the_wrong_family_is_refused(tokenizers, tmp_path):
    tokenizer, terminals = tokenizers
    dtg, dtg_tokenizer = tiny("dtg")
    with pytest.raises(ValueError, match="gives dependency trees, but the target tokenizer \\(top_down\\) encodes "
                                         "constituency trees"):
        check_parser(dtg, dtg_tokenizer, tokenizer)
    _, words_model, words_tokenizer = save_tiny_checkpoint(tmp_path / "txl", TREES, vocab_size=40, grammar="terminals",
                                                           linearization="terminals")
    with pytest.raises(ValueError, match="reads words only and gives no trees"):
        check_parser(words_model, words_tokenizer, tokenizer)
    with pytest.raises(ValueError, match="give a parser model"):
        summarization_examples(fixture_rows(1), tokenizer)
    _, eager_tokenizer = tiny("dtg_eager")
    with pytest.raises(ValueError, match=r"cannot read several trees in one: .*arc_eager \(paper\) reads one sentence"):
        document_grammar(eager_tokenizer)


def test_the_collator_passes_per_action_labels_through():
    tokenizer = hf_slm.SyntacticTokenizer.train(TREES, vocab_size=40)
    example = summarization_sequence(tokenizer, [parse_tree(TREES[1])], [parse_tree(TREES[0])], "d")
    short = summarization_sequence(tokenizer, [parse_tree(TREES[0])], [parse_tree(TREES[1])], "e")
    collator = SyntacticDataCollator("tg", tokenizer.action_layout, document_level=True)
    batch = collator([{"input_ids": e["input_ids"], "labels": e["labels"]} for e in (example, short)])
    for row, e in enumerate((example, short)):
        length = len(e["input_ids"])
        assert batch["labels"][row, :length].tolist() == e["labels"]
        assert (batch["labels"][row, length:] == -100).all()
    plain = collator([{"input_ids": example["input_ids"]}])  # without labels: input_ids, as before
    assert plain["labels"][0].tolist() == example["input_ids"]
    with pytest.raises(ValueError, match="some features carry labels and others do not"):
        collator([{"input_ids": example["input_ids"], "labels": example["labels"]}, {"input_ids": short["input_ids"]}])


def test_the_xsum_sample_becomes_sequences():
    if not XSUM_SAMPLE.is_file():
        pytest.skip(f"{XSUM_SAMPLE} is absent (the shared data folder)")
    rows = [json.loads(line) for line in XSUM_SAMPLE.read_text(encoding="utf-8").splitlines()]
    words = [word for row in rows for sentence in split_sentences(row["document"]) for word in treebank_words(sentence)]
    trees = [f"(S {' '.join(words[i:i + 50])})" for i in range(0, len(words), 50)] + [TREES[2]]
    terminals = hf_slm.SyntacticTokenizer.train(trees, vocab_size=500, linearization="terminals")
    examples, counts = summarization_examples(rows, terminals, summary_format=SummarizationFormat(max_document_words=300))
    assert len(examples) == len(rows) == 50 and counts["sentences_left_out"] == 0
    grammar = document_grammar(terminals)
    for row, example in zip(rows, examples):
        grammar.validate(example["input_ids"])
        kept = [i for i in example["input_ids"][: example["summary_start"]] if terminals.word_start_mask[i]]
        assert len(kept) <= 300 + 2  # the document's words and the prompt's two
    longer = sum(sum(len(words) for words, _ in document_sentences(row["document"])) > 300 for row in rows)
    assert counts["documents_truncated"] == longer > 0


# ---- memorization: prepare, fine-tune, summarize, ROUGE -------------------------------------------------


def test_a_tiny_tg_memorizes_two_documents_through_the_commands(tmp_path, capsys):
    rows, data, parser = memorization_setup(tmp_path, "tg")
    prepared, model = tmp_path / "prepared", tmp_path / "tg-xsum"
    assert main(["data", "prepare", "--loader", "xsum", "--summarization", "--parser", str(parser), "--path", str(data),
                 "--tokenizer", str(tmp_path / "base"), "--output", str(prepared), "--max-document-words", "20",
                 *PARSER_ARGS]) == 0
    record = json.loads((prepared / "prepare.json").read_text())
    assert record["document_level"] and record["summarization"]["labels"] == "summary"
    assert record["summarization"]["counts (splits tokenized by this run)"]["documents_truncated"] == 2
    assert main(["finetune", "--task", "xsum", "--model", str(tmp_path / "base"), "--train", str(prepared),
                 "--output", str(model), "--max-steps", "500", "--batch-size", "2", "--learning-rate", "3e-3",
                 "--warmup-steps", "10", "--save-steps", "1000"]) == 0
    # The folder loads with transformers alone (remote code), reads documents and says what it was tuned on.
    from transformers import AutoModelForCausalLM

    loaded = AutoModelForCausalLM.from_pretrained(model, trust_remote_code=True)
    assert loaded.config.document_level and loaded.config.summarization["prompt"] == PROMPT
    card = (model / "README.md").read_text()
    assert "fine-tuned" in card and "XSum summarization" in card
    capsys.readouterr()
    assert main(["eval", "rouge", "--model", str(model), "--data", str(data), "--split", "train"]) == 0
    results = json.loads((model / "eval_results" / "rouge-xsum-train.json").read_text())["metrics"]
    assert results["rougeL"]["f_measure"] > 0.9 and results["documents"] == 2
    assert results["lead1"]["rougeL"]["f_measure"] < 0.5  # the model beats the first sentence
    per_document = [json.loads(line) for line in
                    (model / "eval_results" / "rouge-xsum-train_documents.jsonl").read_text().splitlines()]
    assert [row["id"] for row in per_document] == [row["id"] for row in rows]
    assert all(parse_tree(row["tree"]).leaves() == row["generated"].split() for row in per_document)
    # summarize: one summary per file, the same as the evaluation's (same seed, same documents)
    files = []
    for row in rows:
        files.append(tmp_path / f"{row['id']}.txt")
        files[-1].write_text(row["document"], encoding="utf-8")
    capsys.readouterr()
    assert main(["summarize", "--model", str(model), *map(str, files)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == [row["generated"] for row in per_document]


def test_a_tiny_txl_terminals_memorizes_two_documents(tmp_path):
    from hf_slm.data.prepare import prepare_dataset
    from hf_slm.evaluation.rouge import evaluate_rouge
    from hf_slm.summarization.finetuning import FinetuneSetup, finetune
    from hf_slm.checkpoints.loading import load_checkpoint

    rows, data, parser = memorization_setup(tmp_path, "terminals")
    prepare_dataset("xsum", data, tmp_path / "base", tmp_path / "prepared", summarization={"max_document_words": 20},
                    parser=parser, log=lambda text: None)
    finetune(FinetuneSetup(model=str(tmp_path / "base"), train=str(tmp_path / "prepared"), output=str(tmp_path / "ft"),
                           max_steps=300, batch_size=2, learning_rate=3e-3, warmup_steps=10, save_steps=1000,
                           disable_progress=True), log=lambda text: None)
    model, tokenizer = load_checkpoint(tmp_path / "ft")
    found = summarize(model, tokenizer, {row["id"]: row["document"] for row in rows})
    assert [result["id"] for result in found] == [row["id"] for row in rows]
    metrics = evaluate_rouge([(row["id"], row["document"], row["summary"], result["summary"])
                              for row, result in zip(rows, found)])
    assert metrics["rougeL"]["f_measure"] > 0.9


def test_finetune_errors(tmp_path):
    from hf_slm.summarization.finetuning import FinetuneSetup, finetune

    rows, data, parser = memorization_setup(tmp_path, "terminals")
    with pytest.raises(ValueError, match="is not a folder; expected one made by `hf-slm data prepare"):
        finetune(FinetuneSetup(model=str(tmp_path / "base"), train=str(tmp_path / "none"), output=str(tmp_path / "o")))
    from hf_slm.data.prepare import prepare_dataset

    prepare_dataset("xsum", data, tmp_path / "base", tmp_path / "words", log=lambda text: None)
    with pytest.raises(ValueError, match="holds no summarization sequences"):
        finetune(FinetuneSetup(model=str(tmp_path / "base"), train=str(tmp_path / "words"), output=str(tmp_path / "o")))
    assert not (tmp_path / "o" / "config.json").exists()
    shutil.rmtree(tmp_path / "words")


def _length_setup(tokenizer):
    """(model fields, a tiny TG parser, two documents (one long), the positions each context takes under the
    document grammar, and each document's parsed sentences)."""
    from hf_slm.summarization.summaries import context_ids

    fields = dict(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=32, **tokenizer.action_layout)
    torch.manual_seed(0)
    parser = causal_lm_for_config(config_for_grammar("tg", **fields)).eval()
    documents = {"long": "The bird sings in the tree .\nA dog barks .\nThe dog sings in the tree .",
                 "short": "A dog barks ."}
    entries = document_trees([{"id": key, "document": text} for key, text in documents.items()], tokenizer,
                             parser=(parser, tokenizer), beam_size=4, word_beam_size=2)
    grammar = document_grammar(tokenizer)
    lengths = {entry["id"]: int(grammar.batch([context_ids(tokenizer, entry["document"], PROMPT)])["lengths"][0])
               for entry in entries}
    return fields, parser, documents, lengths, {entry["id"]: entry["document"] for entry in entries}


def test_summaries_sampled_near_the_model_length_close_in_time(tokenizers):
    """The long document's context leaves room for a short summary only: the search allows only actions after
    which a summary can still close within the model's max_sequence_length, so both summaries are sampled (none
    runs past the length and is lost, as 23 of 50 were in a real run) and each document with its summary fits."""
    from hf_slm.summarization.summaries import context_ids

    tokenizer, _ = tokenizers
    grammar_fields, parser, documents, lengths, parsed = _length_setup(tokenizer)
    limit = lengths["long"] + 7  # one word under up to two constituents; 8 words would take far more
    torch.manual_seed(0)
    model = causal_lm_for_config(config_for_grammar("tg", document_level=True, max_sequence_length=limit,
                                                    **grammar_fields)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no summary is lost to the length
        found = summarize(model, tokenizer, documents, parser=(parser, tokenizer), max_new_words=8, batch_size=2,
                          parser_beam_options=dict(beam_size=4, word_beam_size=2))
    grammar = document_grammar(tokenizer)
    assert [result["id"] for result in found] == ["long", "short"]
    for result in found:
        assert "error" not in result and 1 <= len(result["words"]) <= 8
        summary = tokenizer(result["tree"])["input_ids"][1:]  # its actions, without `<s>`
        context = context_ids(tokenizer, parsed[result["id"]], PROMPT)
        assert int(grammar.batch([context + summary])["lengths"][0]) <= limit
    assert len(found[0]["words"]) <= 2  # the long one was cut short by the length, not by max_new_words


def test_a_summary_past_the_model_length_costs_only_its_document(tokenizers):
    """Two documents sampled in one batch: the long one's context leaves no room for any summary under the
    model's max_sequence_length (not even the shortest tree fits, so the search cannot keep it inside), so its
    summary is left empty and named in a warning; the short one's is sampled as usual (the batch is sampled
    again one document at a time)."""
    tokenizer, _ = tokenizers
    grammar_fields, parser, documents, lengths, _ = _length_setup(tokenizer)
    limit = lengths["long"] + 3  # a summary needs at least an opening, a word and a closing (3 + 1 positions)
    assert limit >= lengths["short"] + 4 * 2 + 1  # room for a two-word summary of at most two constituents
    torch.manual_seed(0)
    model = causal_lm_for_config(config_for_grammar("tg", document_level=True, max_sequence_length=limit,
                                                    **grammar_fields)).eval()
    with pytest.warns(UserWarning, match=r"1 of 2 summaries ran past the model's maximum length.*document long"):
        found = summarize(model, tokenizer, documents, parser=(parser, tokenizer), max_new_words=2, batch_size=2,
                          parser_beam_options=dict(beam_size=4, word_beam_size=2))
    assert [result["id"] for result in found] == ["long", "short"]
    assert found[0]["summary"] == "" and "longer than the model's maximum" in found[0]["error"]
    assert 1 <= len(found[1]["words"]) <= 2 and "error" not in found[1]


@pytest.mark.parametrize("grammar", ["nb-dn-in-m", "nb-up-in-m"])
def test_a_tiny_compositional_model_memorizes_two_documents(tmp_path, grammar):
    """Paper 003's variants summarize as the other families do: a TG parser's labeled silver trees are unlabeled
    for the compositional tokenizer, the prompt too (`( Summary : )`), and the document, the prompt and the
    summary are one sequence: top-down (Dn) as TG's, bottom-up (Up) with `</s>` after each sentence and the
    start pointer's starts carried from the prepared data through fine-tuning to the sampled summary."""
    from hf_slm.data.prepare import prepare_dataset
    from hf_slm.evaluation.rouge import evaluate_rouge
    from hf_slm.summarization.finetuning import FinetuneSetup, finetune
    from hf_slm.checkpoints.loading import load_checkpoint
    from hf_slm.tokenization.tokenization_compositional import CompositionalTokenizer

    rows = fixture_rows(2)
    data = tmp_path / "xsum"
    data.mkdir()
    (data / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    texts = [s for row in rows for s in split_sentences(row["document"]) + split_sentences(row["summary"])]
    trees = [f"(S (NP {' '.join(treebank_words(text))}))" for text in texts] + ["(S (VP (PP x)))", TREES[2], PROMPT]
    parser, _, _ = save_tiny_checkpoint(tmp_path / "parser", trees, vocab_size=120)
    tokenizer = CompositionalTokenizer.train(trees, vocab_size=120, linearization=grammar[:5])
    config = config_for_grammar(vocab_size=len(tokenizer), grammar=grammar, **MEMORIZATION_MODEL,
                                **tokenizer.action_layout)
    torch.manual_seed(0)
    causal_lm_for_config(config).save_pretrained(tmp_path / "base")
    tokenizer.save_pretrained(tmp_path / "base")
    prepare_dataset("xsum", data, tmp_path / "base", tmp_path / "prepared", summarization={"max_document_words": 20},
                    parser=parser, parser_beam_options={"beam_size": 10, "word_beam_size": 2}, log=lambda text: None)
    finetune(FinetuneSetup(model=str(tmp_path / "base"), train=str(tmp_path / "prepared"), output=str(tmp_path / "ft"),
                           max_steps=400, batch_size=2, learning_rate=3e-3, warmup_steps=10, save_steps=1000,
                           disable_progress=True), log=lambda text: None)
    model, tokenizer = load_checkpoint(tmp_path / "ft")
    found = summarize(model, tokenizer, {row["id"]: row["document"] for row in rows}, parser=parser)
    for result in found:  # an unlabeled tree, whose words are the summary
        assert result["tree"].startswith("( ") and result["summary"].split() == [
            token for token in result["tree"].split() if token not in "()"]
    metrics = evaluate_rouge([(row["id"], row["document"], row["summary"], result["summary"])
                              for row, result in zip(rows, found)])
    assert metrics["rougeL"]["f_measure"] > 0.9


def test_a_tiny_dtg_memorizes_two_documents(tmp_path):
    """A dependency model summarizes too: the document's silver dependency trees (from a DTG parser, here the base
    model itself), the prompt `Summary/0 :/1` and the summary's tree are one arc-standard sequence after one
    `<root>`, each sentence closed by its arc onto the root; the sampled summary is an inline dependency tree."""
    from hf_slm.data.prepare import prepare_dataset
    from hf_slm.evaluation.rouge import evaluate_rouge
    from hf_slm.summarization.finetuning import FinetuneSetup, finetune
    from hf_slm.checkpoints.loading import load_checkpoint
    from hf_slm.families.tree_formats import DEPENDENCY_PROMPT
    from hf_slm.tokenization.tokenization_dependency import DependencyTokenizer

    rows = fixture_rows(2)
    data = tmp_path / "xsum"
    data.mkdir()
    (data / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    texts = [s for row in rows for s in split_sentences(row["document"]) + split_sentences(row["summary"])]
    # every word depends on the first (a flat tree): the tokenizer needs only the words
    trees = [" ".join(f"{word}/{0 if i == 0 else 1}" for i, word in enumerate(treebank_words(text))) for text in texts]
    tokenizer = DependencyTokenizer.train(trees + [DEPENDENCY_PROMPT], vocab_size=120)
    config = config_for_grammar("dtg", vocab_size=len(tokenizer), **MEMORIZATION_MODEL, **tokenizer.action_layout)
    torch.manual_seed(0)
    causal_lm_for_config(config).save_pretrained(tmp_path / "base")
    tokenizer.save_pretrained(tmp_path / "base")
    prepare_dataset("xsum", data, tmp_path / "base", tmp_path / "prepared", summarization={"max_document_words": 20},
                    parser=tmp_path / "base", parser_beam_options={"beam_size": 10, "word_beam_size": 2},
                    log=lambda text: None)
    finetune(FinetuneSetup(model=str(tmp_path / "base"), train=str(tmp_path / "prepared"), output=str(tmp_path / "ft"),
                           max_steps=400, batch_size=2, learning_rate=3e-3, warmup_steps=10, save_steps=1000,
                           disable_progress=True), log=lambda text: None)
    model, tokenizer = load_checkpoint(tmp_path / "ft")
    assert model.config.document_level and model.config.summarization["prompt"] == DEPENDENCY_PROMPT
    assert "XSum summarization" in (tmp_path / "ft" / "README.md").read_text()  # the DTG card says so
    found = summarize(model, tokenizer, {row["id"]: row["document"] for row in rows}, parser=tmp_path / "base")
    for result in found:  # an inline dependency tree, whose words are the summary
        assert result["summary"].split() == [item.rsplit("/", 1)[0] for item in result["tree"].split()]
    metrics = evaluate_rouge([(row["id"], row["document"], row["summary"], result["summary"])
                              for row, result in zip(rows, found)])
    assert metrics["rougeL"]["f_measure"] > 0.9
