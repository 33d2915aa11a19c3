"""Train a small document-level TG (or a TXL baseline) on the shipped GUM sample; measure document-level perplexity.

Paper 000 (section 3.1) models BLLIP-LG documents: a document's trees follow each other after one `<s>`,
and each sentence attends the earlier ones through their composed roots. This script does the same at toy
scale, with every step a user would run on BLLIP:

  1. cut each GUM document of the sample into windows of --sentences consecutive trees (sequences are
     modeled whole, so a document must fit in max_sequence_length) and write them BLLIP-style: one tree
     per line, a blank line between documents;
  2. train a tokenizer, then `hf-slm data prepare --loader bllip --document-level`;
  3. `hf-slm train` on the prepared folder (its config gets document_level=True);
  4. `hf-slm eval ppl --document-level` on test documents: each sentence scored by beam search after the
     greedy best trees of the sentences before it (an approximation of the perplexity, not a bound).

    python examples/document_level_tg.py --output runs/doc-tg        # about 10 minutes on 2 CPU cores
    python examples/document_level_tg.py --preset txl-terminals-ptb --output runs/doc-txl   # its baselines
"""

import argparse
import json
from pathlib import Path

from transformers import AutoModelForCausalLM

from hf_slm import SyntacticTokenizer, presets, read_trees
from hf_slm.checkpoints.checks import linearization_of
from hf_slm.data.prepare import prepare_dataset
from hf_slm.evaluation.perplexity import word_perplexity
from hf_slm.training.train import TrainingSetup, train

SAMPLE = Path(__file__).resolve().parents[1] / "hf_slm" / "sample_data" / "gum"


def gum_documents(split):
    """The sample's trees of `split`, grouped by the GUM document they come from (documents.json)."""
    lines = [line.strip() for line in (SAMPLE / f"{split}.txt").read_text(encoding="utf-8").splitlines() if line.strip()]
    documents, start = [], 0
    for _name, count in json.loads((SAMPLE / "documents.json").read_text())[split]:
        documents.append(lines[start : start + count])
        start += count
    assert start == len(lines), f"documents.json does not cover {split}.txt"
    return documents


def write_windows(documents, sentences, path):
    """Windows of `sentences` consecutive trees of one document, BLLIP-style; returns how many."""
    windows = [doc[i : i + sentences] for doc in documents for i in range(0, len(doc), sentences)]
    path.write_text("\n\n".join("\n".join(window) for window in windows) + "\n", encoding="utf-8")
    return len(windows)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", default="runs/doc-tg")
    parser.add_argument("--preset", default="tg-ptb", help="tg-ptb, txl-cc-ptb or txl-terminals-ptb (sizes are shrunk)")
    parser.add_argument("--sentences", type=int, default=3, help="sentences per document window")
    parser.add_argument("--max-steps", type=int, default=600)
    parser.add_argument("--eval-documents", type=int, default=10, help="test documents for the perplexity")
    parser.add_argument("--beam-size", type=int, default=50)
    args = parser.parse_args()
    output = Path(args.output)
    corpus = output / "documents"
    corpus.mkdir(parents=True, exist_ok=True)

    for split in ("train", "dev", "test"):
        count = write_windows(gum_documents(split), args.sentences, corpus / f"{split}.txt")
        print(f"{split}: {count} documents of up to {args.sentences} sentences -> {corpus / f'{split}.txt'}")

    # The tokenizer learns every label of the three splits, so that test trees never meet an unknown one.
    splits = {split: read_trees([corpus / f"{split}.txt"]) for split in ("train", "dev", "test")}
    labels = {node.label() for trees in splits.values() for tree in trees for node in tree.subtrees()}
    linearization = linearization_of(presets()[args.preset]["model"]["grammar"])
    tokenizer = SyntacticTokenizer.train(splits["train"], vocab_size=2000, extra_nonterminals=labels,
                                         linearization=linearization)
    tokenizer.save_pretrained(output / "tokenizer")

    prepared = output / "prepared"
    prepare_dataset("bllip", corpus, output / "tokenizer", prepared, document_level=True, overwrite=True)

    setup = TrainingSetup(
        preset=args.preset, train=[prepared], output=str(output / "model"), max_steps=args.max_steps, batch_size=8,
        learning_rate=1e-3, warmup_steps=60, eval_steps=args.max_steps, save_steps=args.max_steps,
        model_overrides=dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=4, intermediate_size=512,
                             max_sequence_length=1024, attention_dropout=0.0),
        overwrite=True,  # every step of this example is rebuilt when it runs again, the data above included
    )
    train(setup)
    model = AutoModelForCausalLM.from_pretrained(output / "model").eval()
    tokenizer = SyntacticTokenizer.from_pretrained(output / "model")
    assert model.config.document_level, "a prepared document-level dataset makes a document-level model"

    metrics = word_perplexity(model, tokenizer, corpus / "test.txt", document_level=True, limit=args.eval_documents,
                              beam_options=dict(beam_size=args.beam_size, word_beam_size=max(1, args.beam_size // 10)),
                              output_dir=output / "model" / "eval_results")
    print(metrics["summary"])


if __name__ == "__main__":
    main()
