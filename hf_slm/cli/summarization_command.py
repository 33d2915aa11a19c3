"""The summarization commands of `hf-slm` (hf_slm/summarization/summaries.py, hf_slm/summarization/finetuning.py):

    hf-slm finetune --task xsum --model CKPT --train PREPARED --output DIR [--preset xsum-paper003]
    hf-slm summarize --model DIR FILE... [--trees]
    hf-slm eval rouge --model DIR --data XSUM [--split test] [--limit N] [--batch-size 8]

`eval rouge` generates a summary of each document, --batch-size documents at a time (journaled as it goes, in
`eval_results/rouge-DATA[-limitN].generated.journal.jsonl`: an interrupted run resumes without generating again)
and scores them with hf_slm.evaluation.rouge (ROUGE-1/2/L, bootstrap intervals, lead-1 in the same run), which
writes `eval_results/rouge-DATA[-limitN].json` and the per-document `..._documents.jsonl`. Under torchrun /
accelerate launch the processes share the documents and the main process writes (hf_slm/runs/distributed.py).
Everything heavy is imported when a command runs, to keep `hf-slm` quick to start.
"""

import json
import sys
import warnings

from ..option_types import non_negative_int, positive_float, positive_int
from .item_failures import report_failed_items


def _summary_options(args):
    options = {"top_k": args.top_k, "seed": args.seed, "parser": args.parser, "cache_dir": args.cache,
               "batch_size": args.batch_size}
    if args.max_new_words is not None:
        options["max_new_words"] = args.max_new_words
    if args.beam_size is not None:  # sampling keeps what it draws; a wider beam samples more hypotheses
        options.update(beam_size=args.beam_size, word_beam_size=args.beam_size)
    return options


def command_finetune(args):
    from ..summarization.finetuning import FinetuneSetup, finetune

    setup = FinetuneSetup(model=args.model, train=args.train, output=args.output, task=args.task, preset=args.preset,
                          epochs=args.epochs, max_steps=args.max_steps, batch_size=args.batch_size,
                          learning_rate=args.learning_rate, warmup_steps=args.warmup_steps, eval_steps=args.eval_steps,
                          save_steps=args.save_steps, seed=args.seed, resume=args.resume, overwrite=args.overwrite,
                          mixed_precision=args.mixed_precision,
                          gradient_accumulation_steps=args.gradient_accumulation_steps)
    from ..runs.distributed import is_main_process

    finetune(setup)
    if is_main_process():  # under torchrun the main process alone wrote them
        print(f"saved the fine-tuned model, its tokenizer and card to {args.output}")
    return 0


def command_summarize(args):
    from ..checkpoints.loading import load_checkpoint
    from ..summarization.summaries import SummariesLeftEmpty, summarize
    from ..data.text_files import read_text

    documents = {}
    for file in args.files:
        if file in documents:
            raise ValueError(f"text file {file} is given twice")
        documents[file] = read_text(file, "text file")
    model, tokenizer = load_checkpoint(args.model)
    with warnings.catch_warnings():  # said once below, in the batch commands' words (item_failures.py)
        warnings.filterwarnings("ignore", category=SummariesLeftEmpty)
        results = summarize(model, tokenizer, documents, **_summary_options(args))
    for result in results:  # one line per document; an empty one for a document without a summary
        print(result["tree"] if args.trees else result["summary"])
    failed = [{"error": _naming_the_document(result)} for result in results if "error" in result]
    return report_failed_items("summarize", failed, len(results), "documents that got no summary",
                               "their lines are empty; the others' summaries are complete")


def _naming_the_document(result):
    """A failed summary's error, starting with the document it is about."""
    named = f"document {result['id']}"
    return result["error"] if result["error"].startswith(named) else f"{named}: {result['error']}"


def _generated_summaries(model, tokenizer, rows, directory, stem, options, overwrite):
    """The summary and tree of each row, journaled in `<directory>/<stem>.generated.journal.jsonl`.

    The rows are generated options["batch_size"] at a time, each chunk by one summarize call (its sampling seeds
    depend on the chunk, not on the process). Under torchrun / accelerate launch the processes share the chunks
    (hf_slm.runs.journal.map_in_chunks) and every one gets all the summaries; the main process alone locks the
    folder and keeps the journal.
    """
    from ..runs.distributed import is_main_process, main_process_context
    from ..runs.journal import RunJournal, map_in_chunks, model_fingerprint, output_lock, text_fingerprint
    from ..summarization.summaries import SummariesLeftEmpty, summarize

    def generate(chunk):
        with warnings.catch_warnings():  # said once at the end (command_eval_rouge)
            warnings.filterwarnings("ignore", category=SummariesLeftEmpty)
            found = summarize(model, tokenizer, [{"id": row["id"], "document": row["document"]} for row in chunk],
                              **options)
        return [{key: result[key] for key in ("summary", "tree", "error") if key in result} for result in found]

    header = {"run": "rouge generation", "model": model_fingerprint(model),
              "data": text_fingerprint(json.dumps([[row["id"], row["document"]] for row in rows])),
              # batch_size kept: the documents sampled together, and their seeds, are a chunk's
              "options": {key: value for key, value in options.items() if key != "cache_dir"}}
    with main_process_context(output_lock(directory), f"locking the results folder {directory}"):
        journal = (RunJournal(directory / f"{stem}.generated.journal.jsonl", header, overwrite=overwrite)
                   if is_main_process() else None)
        try:
            return map_in_chunks(generate, rows, options["batch_size"], journal, keys=[row["id"] for row in rows],
                                 progress=True, desc="summaries", unit="document")
        finally:
            if journal is not None:
                journal.close()


def _check_cache_on_one_process(args):
    """Refuse --cache under several processes: each process parses the silver trees of its own documents, and
    the cache folder (hf_slm/summarization/silver.py) is locked by the process writing it, so a second one would
    fail."""
    from ..runs.distributed import is_distributed, world_size

    if args.cache is not None and is_distributed():
        raise ValueError(f"--cache {args.cache}: the silver-tree cache is written by one process at a time and "
                         f"{world_size()} were launched; leave --cache out under torchrun / accelerate launch (each "
                         "process then parses the trees of its own documents), or evaluate with one process")


def command_eval_rouge(args):
    from ..data import load_xsum
    from ..runs.distributed import device, is_distributed, is_main_process
    from ..evaluation.results import data_name, results_directory
    from ..evaluation.rouge import evaluate_rouge
    from ..checkpoints.loading import load_checkpoint

    _check_cache_on_one_process(args)
    if args.batch_size < 1:
        raise ValueError(f"--batch-size {args.batch_size}: expected a positive number of documents")
    dataset = load_xsum(args.data)
    split = args.split or ("test" if "test" in dataset else next(iter(dataset)) if len(dataset) == 1 else None)
    if split is None or split not in dataset:
        raise ValueError(f"--data {args.data}: no split {args.split or 'test'!r}; its splits are {list(dataset)} "
                         "(choose one with --split)")
    rows = list(dataset[split])
    if args.limit is not None:
        if args.limit < 1:
            raise ValueError(f"--limit {args.limit}: expected a positive number of documents")
        rows = rows[: args.limit]
    model, tokenizer = load_checkpoint(args.model)
    if is_distributed():  # each process generates on its own device (hf_slm/runs/distributed.py)
        model.to(device())
    directory = results_directory(args.model, args.output)
    # rouge-DATA[-SPLIT][-limitN]: the generation journal and evaluate_rouge's files share the name
    name = data_name(args.data) + (f"-{split}" if args.split else "") + (
        f"-limit{args.limit}" if args.limit is not None else "")
    generated = _generated_summaries(model, tokenizer, rows, directory, f"rouge-{name}", _summary_options(args),
                                     args.overwrite)
    scored = [{"id": row["id"], "document": row["document"], "reference": row["summary"],
               "generated": found["tree"], "tree": found["tree"]} for row, found in zip(rows, generated)]
    metrics = evaluate_rouge(scored, data=name, model=model, output_dir=directory, overwrite=args.overwrite)
    if not is_main_process():  # every process has the merged metrics; the main one wrote the files and reports
        return 0
    print(metrics["summary"])
    print(f"wrote {', '.join(metrics.get('files', {}).values())}", file=sys.stderr)
    failed = [{"error": _naming_the_document({"id": row["id"], **found})} for row, found in zip(rows, generated)
              if "error" in found]
    return report_failed_items("eval rouge", failed, len(rows), "documents that got no summary",
                               "ROUGE counts their summaries as empty")


def _add_generation_options(parser):
    parser.add_argument("--top-k", type=non_negative_int,
                        default=2, help="sample every action among the top k legal ones "
                        "(paper 003: 2)")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="the sampling seed")
    parser.add_argument("--max-new-words", type=positive_int,
                        help="the longest summary (default: the model's limit, 70)")
    parser.add_argument("--parser", help="the checkpoint whose silver trees the documents get (default: the one "
                        "recorded when the model was fine-tuned)")
    parser.add_argument("--cache", metavar="DIR",
                        help="cache the documents' silver trees in DIR (hf_slm/summarization/silver.py)")
    parser.add_argument("--beam-size", type=positive_int, help="hypotheses sampled per document (default 1)")


def add_training_precision_options(parser):
    """--bf16 / --fp16 and --gradient-accumulation-steps, shared by `hf-slm train` and `hf-slm finetune`."""
    precision = parser.add_mutually_exclusive_group()
    precision.add_argument("--bf16", dest="mixed_precision", action="store_const", const="bf16",
                           help="mixed precision: the forward under torch.autocast in bfloat16 (weights, optimizer and "
                           "loss stay float32); on the CPU too")
    precision.add_argument("--fp16", dest="mixed_precision", action="store_const", const="fp16",
                           help="mixed precision in float16 (with loss scaling on CUDA)")
    parser.add_argument("--gradient-accumulation-steps", type=positive_int, default=1, metavar="K",
                        help="accumulate K batches per optimizer step: a step reads batch size x processes x K "
                        "sequences and takes the gradient of one batch holding them all (the loss is the mean over "
                        "all the step's actions: each batch weighted by its share of them)")


def add_summarization_commands(commands, evaluations, add_eval_command):
    """`finetune` and `summarize` on the `hf-slm` subcommands, `rouge` on `hf-slm eval`'s."""
    from ..summarization.finetuning import DEFAULT_PRESET, FINETUNE_PRESETS, TASKS

    finetune = commands.add_parser(
        "finetune", help="fine-tune a checkpoint on prepared XSum summarization data with transformers.Trainer",
        description="Fine-tune --model on the summarization sequences of --train (made by `hf-slm data prepare --loader "
        "xsum --summarization --tokenizer MODEL --parser PARSER`); the model is made document-level, the output "
        "folder gets the model, its tokenizer, hub code and a card that says what it was fine-tuned on. Presets: "
        + "; ".join(f"{name}: {preset['description']}" for name, preset in FINETUNE_PRESETS.items()))
    finetune.add_argument("--task", required=True, choices=TASKS)
    finetune.add_argument("--model", required=True, help="the checkpoint folder to fine-tune")
    finetune.add_argument("--train", required=True, help="the prepared summarization folder")
    finetune.add_argument("--output", required=True, help="output directory (checkpoints, final model)")
    finetune.add_argument("--preset", default=DEFAULT_PRESET, choices=sorted(FINETUNE_PRESETS))
    steps = finetune.add_mutually_exclusive_group()
    steps.add_argument("--epochs", type=positive_float)
    steps.add_argument("--max-steps", type=positive_int)
    finetune.add_argument("--batch-size", type=positive_int)
    finetune.add_argument("--learning-rate", type=positive_float, help="peak learning rate")
    finetune.add_argument("--warmup-steps", type=non_negative_int)
    finetune.add_argument("--eval-steps", type=positive_int, default=200)
    finetune.add_argument("--save-steps", type=positive_int, default=200)
    finetune.add_argument("--seed", type=non_negative_int, default=0)
    finetune.add_argument("--resume", action="store_true", help="continue from the last complete checkpoint in --output")
    finetune.add_argument("--overwrite", action="store_true", help="replace a model (or checkpoints) in --output")
    add_training_precision_options(finetune)
    finetune.set_defaults(function=command_finetune)

    summarize = commands.add_parser(
        "summarize", help="summarize text files with a fine-tuned model (word-synchronized top-k sampling)",
        description="Each FILE is one document (raw text; every line break ends a sentence). The document's silver "
        "trees and the prompt come first; the summary is sampled word-synchronously, every action among the top-k "
        "legal ones, under paper 003's constraints for summaries (p_c = 5). One summary per line, in order.")
    summarize.add_argument("--model", required=True, help="a fine-tuned checkpoint (hf-slm finetune)")
    summarize.add_argument("files", nargs="+", metavar="FILE")
    summarize.add_argument("--trees", action="store_true", help="print each summary's tree instead of its words")
    summarize.add_argument("--batch-size", type=positive_int, default=8, help="documents sampled together")
    _add_generation_options(summarize)
    summarize.set_defaults(function=command_summarize)

    rouge = add_eval_command(evaluations, "rouge", "ROUGE-1/2/L of summaries the model generates for XSum documents, "
                             "with bootstrap intervals and the lead-1 baseline", command_eval_rouge, beam=False)
    rouge.add_argument("--data", required=True, help="XSum data (any form hf_slm.data.load_xsum reads)")
    rouge.add_argument("--split", help="the split to summarize (default: test, or the only one)")
    _add_generation_options(rouge)
