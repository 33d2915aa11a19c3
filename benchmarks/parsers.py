"""Proposal parsers: how good a parser trained for minutes is, and what J = 300 proposals cost beside the LM.

    python benchmarks/parsers.py [--train-seconds 90] [--rows crf crf-unlabeled biaffine biaffine-ewt] [--num 300]
                                 [--sentences 8] [--lm-batch-sizes 8 32] [--repeats 2] [--threads N]
                                 [--device cuda] [--output DIR] [--markdown PATH]
    python benchmarks/parsers.py --dry-run    # seconds on a CPU: tiny data, steps and sizes; measures nothing

Tables 1 and 2 (quality): each parser is trained at size "tiny" as `hf-slm parser train` trains it
(hf_slm/parsers/training.py: its optimizer, batch 32, dev loss every `--eval-steps` steps and the checkpoint of
lowest dev loss kept at the end) for `--train-seconds` (or the tiny schedule's 1,500 steps, whichever comes first),
then parses the test split: labelled and unlabelled F1 (EVALB's rules) beside the right-branching baseline
(unlabelled) for the constituency parsers on the GUM sample shipped in the package (crf, crf-unlabeled); UAS and LAS
beside the baseline that heads every word by the next one for the biaffine parser on the UD English EWT sample
shipped in the package (100 training sentences) and, where ../shared/data/ud_english_ewt holds the whole treebank
(`hf-slm data fetch ud-english-ewt`), on it (biaffine-ewt). The baselines are scored on the same test trees in the
same run (hf_slm/parsers/evaluation.py). steps = training steps done (the kept checkpoint's in brackets when it is
an earlier one: a time limit stops training between evaluations); train s = the wall time of the whole
`train_parser` call (reading the data, the tokenizer, the steps, the checkpoints, the dev evaluations).

Table 3 (cost): the trained crf parser draws J = `--num` unique trees (ProposalParser.draw: exact samples, drawn
in rounds until J distinct ones are found; draws/sent counts the duplicates too) for each of `--sentences` GUM
test sentences of about 20 words, and the biaffine parser (biaffine-ewt's when it was trained) for as many UD
sentences of about 20 words; then a randomly initialized language model of the quickstart's size scores the same
trees (hf_slm.evaluation.proposals.proposal_log_probs, as `hf-slm eval ppl --proposals` does, the trees read back
from the proposal file): TG for the constituency trees, DTG for the dependency ones. Its time depends on its size
and the trees, not on its weights. proposals/s = distinct trees drawn per second; LM / parser = the LM's scoring
time over the parser's drawing time, both measured in this run; the LM's batch is trees per forward pass (`hf-slm
eval ppl --batch-size`, default 8). Times are medians of `--repeats` runs after a warm-up (a whole pass for the LM:
each new batch shape costs more the first time).
"""

import argparse
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from report import Report, add_markdown_option

REPO = Path(__file__).resolve().parents[1]
GUM = REPO / "hf_slm" / "sample_data" / "gum"
UD_SAMPLE = REPO / "hf_slm" / "sample_data" / "ud_english_ewt_sample"
UD_FULL = REPO.parent / "shared" / "data" / "ud_english_ewt"
SENTENCE_LENGTH = 20
# The quickstart's LM (hf_slm/cli/quickstart.py, QUICKSTART_MODEL) in the real run; a one-layer one in the dry run.
DRY_RUN_LM = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2)


@dataclass(frozen=True)
class ParserRow:
    """One parser trained and scored: its kind, its data (train, eval = dev, test) and what to call the data."""

    name: str
    kind: str
    train: Path
    dev: Path
    test: Path
    data: str

    @property
    def dependency(self):
        return self.kind == "biaffine"


ROWS = {
    "crf": ParserRow("crf", "crf", GUM / "train.txt", GUM / "dev.txt", GUM / "test.txt", "GUM sample"),
    "crf-unlabeled": ParserRow("crf-unlabeled", "crf-unlabeled", GUM / "train.txt", GUM / "dev.txt", GUM / "test.txt",
                               "GUM sample"),
    "biaffine": ParserRow("biaffine", "biaffine", UD_SAMPLE / "en_ewt-sample-ud-train.conllu",
                          UD_SAMPLE / "en_ewt-sample-ud-dev.conllu", UD_SAMPLE / "en_ewt-sample-ud-test.conllu",
                          "UD EWT sample"),
    "biaffine-ewt": ParserRow("biaffine-ewt", "biaffine", UD_FULL / "en_ewt-ud-train.conllu",
                              UD_FULL / "en_ewt-ud-dev.conllu", UD_FULL / "en_ewt-ud-test.conllu", "UD EWT v2.16"),
}


def first_items(path, count, output):
    """Write the first `count` trees (a line each) or CoNLL-U sentences (blank-line separated) of `path` to
    `output` (the dry run's small data)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".conllu":
        kept = "\n\n".join(text.strip().split("\n\n")[:count]) + "\n\n"
    else:
        kept = "\n".join([line for line in text.splitlines() if line.strip()][:count]) + "\n"
    output.write_text(kept, encoding="utf-8")
    return output


def dry_run_row(row, folder):
    """`row` on the first trees of its files (64 training, 20 dev and 20 test ones), so that reading them, building
    the tokenizer and evaluating take no time."""
    folder = folder / "dry-run-data" / row.name
    folder.mkdir(parents=True, exist_ok=True)
    return replace(row, train=first_items(row.train, 64, folder / row.train.name),
                   dev=first_items(row.dev, 20, folder / row.dev.name),
                   test=first_items(row.test, 20, folder / row.test.name), data=f"{row.data} (first trees)")


@contextlib.contextmanager
def logged_to(path):
    """Send what training prints (Trainer's logs, progress bars) to `path`, so that stdout holds the tables; on an
    error, say where the log is and show its end."""
    with open(path, "a", encoding="utf-8") as log:
        try:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                yield
        except Exception:
            log.flush()
            print(f"failed; the end of {path}:\n" + Path(path).read_text(encoding="utf-8")[-3000:], file=sys.stderr)
            raise


def train_and_test(row, args, folder):
    """Train `row`'s parser for the time budget and score it on its test split; a dict of what the tables show."""
    from hf_slm.parsers.evaluation import parser_evaluation
    from hf_slm.parsers.parser import ProposalParser
    from hf_slm.parsers.training import ParserTrainingSetup, train_parser

    output = folder / row.name
    setup = ParserTrainingSetup(kind=row.kind, train=[str(row.train)], eval=[str(row.dev)], output=str(output),
                                size="tiny", max_seconds=args.train_seconds, max_steps=args.max_steps,
                                eval_steps=args.eval_steps, save_steps=args.eval_steps, disable_progress=True,
                                overwrite=True, seed=0)
    start = time.perf_counter()
    with logged_to(folder / "training.log"):
        trainer, _ = train_parser(setup)
    seconds = time.perf_counter() - start
    record = json.loads((output / "training_setup.json").read_text())
    chosen = trainer.state.best_model_checkpoint
    parser = ProposalParser.load(output)
    parser.model.to(args.device)
    with logged_to(folder / "training.log"):
        test = parser_evaluation(parser, row.test, "uas" if row.dependency else "parse", limit=args.test_limit,
                                 progress=False)
    return {"row": row, "parser": parser, "seconds": seconds, "steps": trainer.state.global_step,
            "chosen_step": int(Path(chosen).name.split("-")[-1]) if chosen else None, "record": record,
            "test": test, "device": str(trainer.args.device)}


def steps_cell(result):
    chosen = result["chosen_step"]
    if chosen is None or chosen == result["steps"]:
        return f"{result['steps']}"
    return f"{result['steps']} ({chosen})"


def data_cell(result):
    record, test = result["record"], result["test"]
    dev = record["eval_examples"] + record["eval_examples_left_out"]  # all of them are parsed for the dev score
    return f"{result['row'].data}: {record['train_examples']:,} / {dev:,} / {test['sentences']:,}"


def percent(value):
    return "-" if value is None else f"{value:.2f}"


def constituency_rows(results):
    return [[r["row"].name, data_cell(r), steps_cell(r), f"{r['seconds']:.0f}", percent(r["test"].get("f1")),
             percent(r["test"]["unlabelled_f1"]), percent(r["test"]["right_branching_f1"]),
             percent(r["record"]["held_out"].get("f1", r["record"]["held_out"].get("unlabelled_f1")))]
            for r in results]


def dependency_rows(results):
    return [[r["row"].name, data_cell(r), steps_cell(r), f"{r['seconds']:.0f}", percent(r["test"]["uas"]),
             percent(r["test"]["las"]), percent(r["test"]["right_branching_uas"]),
             percent(r["record"]["held_out"]["uas"])]
            for r in results]


def about_twenty_words(pools, count):
    """The `count` sentences (word lists) closest to SENTENCE_LENGTH words, taken from the pools in order (a later
    pool only when the earlier ones lack sentences within a word of it), ties in file order; and the files used."""
    chosen, used = [], []
    for name, sentences in pools:
        used.append(name)
        chosen += sentences
        if sum(abs(len(words) - SENTENCE_LENGTH) <= 1 for words in chosen) >= count:
            break
    order = sorted(range(len(chosen)), key=lambda index: (abs(len(chosen[index]) - SENTENCE_LENGTH), index))
    return [chosen[index] for index in order[:count]], used


def constituency_sentences(row, count):
    from hf_slm import read_trees

    return about_twenty_words([(path.name, [tree.leaves() for tree in read_trees(path)])
                               for path in (row.test, row.dev, row.train)], count)


def dependency_sentences(row, count):
    from hf_slm.parsers.evaluation import gold_dependencies

    return about_twenty_words([(path.name, [sentence["words"] for sentence in gold_dependencies(path)])
                               for path in (row.test, row.dev, row.train)], count)


def random_language_model(row, sizes, device):
    """A randomly initialized TG (constituency) or DTG (dependency) of `sizes`, its tokenizer trained on the row's
    training trees (2,000 pieces, as benchmarks/beam_search.py's), and its description."""
    from hf_slm import SyntacticTokenizer, preset_config, read_trees
    from hf_slm.families import causal_lm_for_config

    if row.dependency:
        from hf_slm.parsers.evaluation import gold_dependencies
        from hf_slm.tokenization.tokenization_dependency import DependencyTokenizer

        trees = [{"words": s["words"], "heads": s["heads"]} for s in gold_dependencies(row.train)]
        tokenizer = DependencyTokenizer.train(trees, vocab_size=2000, non_projective="lift")
        preset = "dtg-ptb"
    else:
        labels = {t.label() for path in (row.dev, row.test) for tree in read_trees(path) for t in tree.subtrees()}
        tokenizer = SyntacticTokenizer.train(read_trees(row.train), vocab_size=2000, extra_nonterminals=labels)
        preset = "tg-ptb"
    config = preset_config(preset, vocab_size=len(tokenizer), **sizes, **tokenizer.action_layout)
    torch.manual_seed(0)
    model = causal_lm_for_config(config).eval().to(device)
    parameters = sum(p.numel() for p in model.parameters())
    description = (f"{config.grammar.upper()} ({parameters:,} parameters: d {config.hidden_size}, layers "
                   f"{config.num_hidden_layers}, heads {config.num_attention_heads}, d_ff {config.intermediate_size}; "
                   f"{len(tokenizer):,} ids), random weights")
    return model, tokenizer, description


def median_seconds(function, repeats):
    """(the median wall time of `repeats` calls of `function`, the last call's value)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        value = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), value


def measure_cost(result, sentences, model, tokenizer, args, folder):
    """Draw J trees per sentence with the parser, write them as a proposal file, read them back as the LM's
    evaluation does and score them with the LM at each batch size: a dict of seconds (medians of --repeats) and
    counts."""
    from hf_slm.evaluation.proposals import proposal_log_probs, read_proposal_blocks
    from hf_slm.parsers.proposals import write_proposal_file

    parser, row = result["parser"], result["row"]
    parser.draw(sentences[:2], args.num, seed=1)  # warm-up (other trees: another seed)
    parser_seconds, drawn = median_seconds(lambda: parser.draw(sentences, args.num, seed=0, batch_size=32),
                                           args.repeats)
    path = folder / f"proposals-{row.name}.{'conllu' if row.dependency else 'txt'}"
    write_proposal_file(path, drawn, [f"# benchmarks/parsers.py: {parser.describe()}, J = {args.num}"],
                        row.dependency)
    blocks = read_proposal_blocks(path, model, tokenizer)
    lm = {}
    for batch_size in args.lm_batch_sizes:
        def score(batch_size=batch_size):
            return proposal_log_probs(model, tokenizer, blocks, batch_size=batch_size, progress=False)

        # warm-up: a whole pass, since every new batch shape costs its first call more (up to 3x, measured)
        score()
        lm[batch_size], scored = median_seconds(score, args.repeats)
    count = len(sentences)
    return {"row": row, "sentences": count, "words": sum(map(len, sentences)) / count,
            "draws": sum(block["draws"] for block in drawn) / count,
            "trees": sum(len(block["trees"]) for block in drawn) / count,
            "lm_trees": sum(number for _, number, _ in scored) / count,
            "parser_seconds": parser_seconds, "lm_seconds": lm}


def cost_columns(batch_sizes):
    return (["parser", "sentences", "mean words", "draws/sent", "trees/sent", "parser s/sent", "proposals/s",
             "LM trees/sent"] + [f"LM s/sent (batch {b})" for b in batch_sizes]
            + [f"LM / parser (batch {b})" for b in batch_sizes])


def cost_rows(costs, batch_sizes):
    rows = []
    for c in costs:
        count = c["sentences"]
        rows.append([c["row"].name, count, f"{c['words']:.1f}", f"{c['draws']:.0f}", f"{c['trees']:.0f}",
                     f"{c['parser_seconds'] / count:.3f}", f"{c['trees'] * count / c['parser_seconds']:,.0f}",
                     f"{c['lm_trees']:.0f}"]
                    + [f"{c['lm_seconds'][b] / count:.3f}" for b in batch_sizes]
                    + [f"{c['lm_seconds'][b] / c['parser_seconds']:.1f}x" for b in batch_sizes])
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-seconds", type=float, default=90.0,
                        help="training time of each parser (the tiny schedule's 1,500 steps at most)")
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=list(ROWS),
                        help="the parsers to train (biaffine-ewt only where ../shared/data/ud_english_ewt exists)")
    parser.add_argument("--num", type=int, default=300, help="J: unique proposal trees per sentence")
    parser.add_argument("--sentences", type=int, default=8, help="sentences of about 20 words per parser, Table 3")
    parser.add_argument("--lm-batch-sizes", type=int, nargs="+", default=[8, 32],
                        help="trees per LM forward pass (hf-slm eval ppl's --batch-size, default 8)")
    parser.add_argument("--repeats", type=int, default=2,
                        help="timings of Table 3 per measurement, after a warm-up; the median is shown")
    parser.add_argument("--eval-steps", type=int, default=50,
                        help="dev loss (and a checkpoint) every N training steps; the lowest-loss one is kept")
    parser.add_argument("--test-limit", type=int, help="score only the first N test trees")
    parser.add_argument("--threads", type=int, help="torch's CPU threads (default: torch's, one per core); on a busy "
                        "machine 1 is the least slowed (the parsers' CRFs run many small operations)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda: where the parsers draw and the LM scores "
                                                        "(Trainer trains on a GPU whenever one exists)")
    parser.add_argument("--output", type=Path, help="keep the trained parsers, the proposal files and the training "
                                                    "log here (default: a temporary folder, removed at the end)")
    parser.add_argument("--dry-run", action="store_true",
                        help="seconds on the CPU (one thread): 3 training steps on the first 64 training trees of "
                             "the shipped samples (20 dev, 20 test), 2 sentences, J = 8, a one-layer LM: checks that "
                             "the script runs, measures nothing")
    add_markdown_option(parser)
    args = parser.parse_args()
    args.max_steps, lm_sizes = None, None
    if args.dry_run:
        args.train_seconds, args.max_steps, args.eval_steps, args.test_limit = 30.0, 3, 100, None
        args.num, args.sentences, args.lm_batch_sizes, args.device, args.repeats = 8, 2, [8], "cpu", 1
        args.rows = [name for name in args.rows if name != "biaffine-ewt"]
        lm_sizes = DRY_RUN_LM
        torch.set_num_threads(1)  # it measures nothing; one thread is the least slowed by a busy machine
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"--device {args.device}: torch sees no GPU here; leave --device out to measure on the CPU")
    from transformers.utils import logging as transformers_logging

    from hf_slm.cli.quickstart import QUICKSTART_MODEL
    from hf_slm.parsers.kinds import SCHEDULES

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    lm_sizes = lm_sizes or dict(QUICKSTART_MODEL)
    rows = [ROWS[name] for name in args.rows]
    if "biaffine-ewt" in args.rows and not ROWS["biaffine-ewt"].train.exists():
        print(f"{ROWS['biaffine-ewt'].train} is absent: no biaffine-ewt row (`hf-slm data fetch ud-english-ewt` "
              "downloads it)", file=sys.stderr)
        rows = [row for row in rows if row.name != "biaffine-ewt"]

    folder = args.output or Path(tempfile.mkdtemp(prefix="hf-slm-parsers-benchmark-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        results = {}
        if args.dry_run:
            rows = [dry_run_row(row, folder) for row in rows]
        for row in rows:
            print(f"training {row.name} on {row.train} for {args.train_seconds:.0f} s ...", file=sys.stderr, flush=True)
            results[row.name] = train_and_test(row, args, folder)

        costs = []
        constituency = results.get("crf")
        dependency = results.get("biaffine-ewt") or results.get("biaffine")
        for result in (constituency, dependency):
            if result is None:
                continue
            row = result["row"]
            sentences, used = (dependency_sentences if row.dependency else constituency_sentences)(row,
                                                                                                   args.sentences)
            model, tokenizer, description = random_language_model(row, lm_sizes, args.device)
            print(f"drawing {args.num} trees per sentence with {row.name} and scoring them ...", file=sys.stderr,
                  flush=True)
            with logged_to(folder / "training.log"):
                cost = measure_cost(result, sentences, model, tokenizer, args, folder)
            cost["lm"], cost["files"] = description, used
            costs.append(cost)

        report = Report("Proposal parsers: held-out quality and the cost of J proposals")
        devices = sorted({r["device"] for r in results.values()})
        schedule, threads = SCHEDULES["tiny"], torch.get_num_threads()
        limit = f" (its first {args.test_limit})" if args.test_limit else ""
        report.line(("DRY RUN (3 training steps, tiny sizes): the figures mean nothing. " if args.dry_run else "")
                    + f"Parsers of size tiny, each trained for {args.train_seconds:.0f} s at most "
                    f"({args.max_steps or schedule['max_steps']:,} steps, batch {schedule['batch_size']}, as `hf-slm "
                    f"parser train --size tiny`; trained on {', '.join(devices) or '-'}; {threads} "
                    f"thread{'s' if threads != 1 else ''}); the final model is the checkpoint of lowest dev loss (dev "
                    f"evaluated every {args.eval_steps} steps). data: training / dev / test sentences; the test scores "
                    f"and the baselines are on the test split{limit}, percent; dev = the score on the dev split that "
                    "training_setup.json records (labelled F1 for crf).")
        constituency_results = [r for r in results.values() if not r["row"].dependency]
        dependency_results = [r for r in results.values() if r["row"].dependency]
        if constituency_results:
            report.table("Table 1: constituency parsers (labelled F1: crf only; right-branching: unlabelled)",
                         ["parser", "data", "steps", "train s", "labelled F1", "unlabelled F1", "right-branching F1",
                          "dev F1"], constituency_rows(constituency_results))
        if dependency_results:
            report.table("Table 2: dependency parsers (right-branching: each word headed by the next)",
                         ["parser", "data", "steps", "train s", "UAS", "LAS", "right-branching UAS", "dev UAS"],
                         dependency_rows(dependency_results))
        if costs:
            for cost in costs:
                report.line(f"{cost['row'].name}: {cost['sentences']} sentences of about {SENTENCE_LENGTH} words (mean "
                            f"{cost['words']:.1f}) from {', '.join(cost['files'])} ({cost['row'].data}); the LM: "
                            f"{cost['lm']}.")
            report.table(f"Table 3: J = {args.num} unique proposals per sentence on device {args.device}, and the "
                         "LM scoring the same trees", cost_columns(args.lm_batch_sizes),
                         cost_rows(costs, args.lm_batch_sizes))
        report.finish(args.markdown, device=args.device)
    finally:
        if args.output is None:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
