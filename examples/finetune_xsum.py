"""Fine-tune a trained syntactic LM on XSum-format data and compare its ROUGE with lead-1 (paper 003, section 3.3).

Every step is the command a user runs on the full XSum (docs/summarization.md):

  1. a base model: the quickstart TG (`hf-slm quickstart`, trained here first when --base does not exist);
  2. `hf-slm data prepare --loader xsum --summarization --parser BASE`: silver trees of every document and
     summary by the base model's own beam search (cached, resumable), then one sequence per example: the
     document's trees, the prompt `(NP Summary :)`, the summary's trees;
  3. `hf-slm finetune --task xsum`: Trainer on those sequences, loss on the summary's actions;
  4. `hf-slm eval rouge`: one summary per document by word-synchronized top-k sampling (k = 2, p_c = 5) after
     the document, ROUGE-1/2/L F-measures with bootstrap intervals, and lead-1 on the same documents.

    python examples/finetune_xsum.py                     # the repo's own two-document fixture: a pipeline check
    python examples/finetune_xsum.py --data xsum.jsonl --max-new-words 30   # your XSum documents (see below)

XSum's text is BBC copyright, so hf-slm ships and fetches none: `--data` takes an XSum-format JSON lines file of
your own (document, summary, id per line, e.g. written from the XSum authors' release); 50 documents take about
10 minutes on 2 CPU cores.

What the numbers are: ROUGE of a 1M-parameter model trained on 1,500 GUM trees and fine-tuned for a few hundred
CPU steps, evaluated on the documents it was fine-tuned on (there is no other split of this size here): a check
that the pipeline runs end to end and that the model uses the document, not paper 003's Table 2 (GPT-2 small,
all of XSum, 15 epochs, the test split). --max-document-words is lowered because the quickstart model reads at most
512 positions; the paper's 600 words need a model with a longer context (max_sequence_length).
"""

import argparse
import json
import shutil
import time
from pathlib import Path

from hf_slm.cli import main as hf_slm

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "data" / "xsum" / "jsonl" / "train.jsonl"


def run(*arguments):
    """One hf-slm command, as a user types it; stops the example when it fails."""
    print("\n$ hf-slm " + " ".join(arguments), flush=True)
    started = time.perf_counter()
    status = hf_slm(list(arguments))
    if status != 0:
        raise SystemExit(f"hf-slm {arguments[0]} failed with exit status {status}")
    return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(FIXTURE), help="an XSum-format JSON lines file (document, summary, id)")
    parser.add_argument("--base", default="hf-slm-quickstart", help="the base checkpoint (trained if missing)")
    parser.add_argument("--output", default="runs/xsum", help="folder for the prepared data and the fine-tuned model")
    parser.add_argument("--max-document-words", type=int, default=60,
                        help="document words kept (paper: 600; 80 already overflows the quickstart's 512 positions)")
    parser.add_argument("--max-steps", type=int, default=300)
    parser.add_argument("--beam-size", type=int, default=50, help="the parser's action beam for the silver trees")
    parser.add_argument("--max-new-words", type=int, default=30, help="the longest summary sampled (XSum's average: 23)")
    args = parser.parse_args()

    output = Path(args.output)
    data = output / "data"  # a folder whose one file names its split: the data is all used for fine-tuning
    data.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(args.data, data / "train.jsonl")
    if not Path(args.base, "config.json").is_file():
        run("quickstart", "--output", args.base)

    prepare_seconds = run("data", "prepare", "--loader", "xsum", "--summarization", "--parser", args.base,
                          "--tokenizer", args.base, "--path", str(data), "--output", str(output / "prepared"),
                          "--max-document-words", str(args.max_document_words), "--beam-size", str(args.beam_size),
                          "--word-beam-size", str(max(1, args.beam_size // 10)))
    record = json.loads((output / "prepared" / "prepare.json").read_text())
    finetune_seconds = run("finetune", "--task", "xsum", "--model", args.base, "--train", str(output / "prepared"),
                           "--output", str(output / "model"), "--max-steps", str(args.max_steps))
    rouge_seconds = run("eval", "rouge", "--model", str(output / "model"), "--data", str(data), "--max-new-words",
                        str(args.max_new_words))

    results = sorted((output / "model" / "eval_results").glob("rouge-*.json"))
    metrics = json.loads(results[-1].read_text())["metrics"]
    rows = [json.loads(line) for line in results[-1].with_name(results[-1].stem + "_documents.jsonl").read_text().splitlines()]
    print(f"\nsilver trees: {record['summarization']}")
    print(f"times: prepare {prepare_seconds:.0f} s, fine-tune {finetune_seconds:.0f} s, generate + ROUGE {rouge_seconds:.0f} s")
    print(f"\nROUGE F-measure x 100 on {metrics['documents']} documents (in brackets the 95% bootstrap interval):")
    print(f"{'':<10} {'R-1':>22} {'R-2':>22} {'R-L':>22}")
    for name, values in (("model", metrics), ("lead-1", metrics["lead1"])):
        cells = []
        for key in ("rouge1", "rouge2", "rougeL"):
            value = values[key]
            low, high = value.get("confidence_interval", (float("nan"), float("nan")))
            cells.append(f"{100 * value['f_measure']:6.2f} [{100 * low:5.2f}, {100 * high:5.2f}]")
        print(f"{name:<10} " + " ".join(f"{cell:>22}" for cell in cells))
    print("\nfirst summaries (reference || generated):")
    for row in rows[:3]:
        print(f"  {row['reference']}\n  || {row['generated']}\n")


if __name__ == "__main__":
    main()
