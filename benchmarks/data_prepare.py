"""`hf-slm data prepare` on a corpus of BLLIP's shape: trees/s and peak memory for 1 and N processes (issue 18).

    python benchmarks/data_prepare.py [--trees 200000] [--processes 1 2] [--keep DIR]

Writes a file of random trees (one per line, BLLIP-LG's format) into a temporary folder: words and labels drawn
from the vocabulary of the shipped GUM sample, shapes from a small random grammar (5-30 words, constituents of
1-4 children), seeded. A SentencePiece tokenizer is trained on the sample, then each configuration prepares the
file (`prepare_dataset("bllip", ..., num_proc=N)`: read and normalized by datasets' from_generator, which writes
Arrow to disk as it goes, then tokenized by Dataset.map with num_proc=N and saved) in a fresh Python process, so
that its peak memory is its own. Printed: one row per configuration, with seconds, trees/s, the speed-up over
1 process, and the peak resident memory of the main process and of its largest worker process (getrusage's
ru_maxrss; datasets runs even num_proc=1 steps in a worker; with N the workers run at the same time, so together
they hold up to N times the largest, pages shared with the main process counted in each).
"""

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from report import Report, add_markdown_option

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "hf_slm" / "sample_data" / "gum" / "train.txt"


def sample_vocabulary():
    """(words, phrase labels, POS tags) of the shipped sample, each sorted (the draw is seeded over them)."""
    from hf_slm.tokenization.trees import read_trees

    words, labels, tags = set(), set(), set()
    for tree in read_trees([SAMPLE]):
        for word, tag in tree.pos():
            words.add(word)
            tags.add(tag)
        labels.update(node.label() for node in tree.subtrees() if node.height() > 2)
    labels.discard("ROOT")
    return sorted(words), sorted(labels), sorted(tags)


def random_tree(rng, words, labels, tags):
    """One bracketed tree over 5-30 random words: (ROOT (X ...)) with constituents of 1-4 children."""
    leaves = [f"({rng.choice(tags)} {rng.choice(words)})" for _ in range(rng.randint(5, 30))]
    while len(leaves) > 1:
        start = rng.randrange(len(leaves))
        width = min(rng.randint(1, 4), len(leaves) - start)
        leaves[start : start + width] = [f"({rng.choice(labels)} {' '.join(leaves[start : start + width])})"]
    return f"(ROOT {leaves[0]})"


def write_trees(path, count, seed=0):
    words, labels, tags = sample_vocabulary()
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for _ in range(count):
            handle.write(random_tree(rng, words, labels, tags) + "\n")


def prepare_once(trees, tokenizer, output, processes, cache):
    """Run in a child process: prepare `trees` and print {"seconds", "examples", "main_rss_mib", "worker_rss_mib"}."""
    from hf_slm.data.prepare import prepare_dataset

    start = time.perf_counter()
    dataset = prepare_dataset("bllip", {"train": trees}, tokenizer, output, num_proc=processes, log=lambda *_: None,
                              cache_dir=cache)
    seconds = time.perf_counter() - start
    # Linux gives ru_maxrss in KiB: the largest of this process's and, for the children, of any one of them.
    main = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    worker = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "examples": len(dataset["train"]), "main_rss_mib": main,
                      "worker_rss_mib": worker or None}))


def measure(trees, tokenizer, directory, processes):
    output, cache = directory / f"prepared-{processes}", directory / f"cache-{processes}"
    command = [sys.executable, __file__, "--child", str(trees), str(tokenizer), str(output), str(processes), str(cache)]
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1",
                                                                          "TOKENIZERS_PARALLELISM": "false"})
    if result.returncode != 0:
        raise RuntimeError(f"preparing with {processes} process(es) failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def table_rows(rows):
    baseline = rows[0]["examples"] / rows[0]["seconds"]
    cells = []
    for row in rows:
        rate = row["examples"] / row["seconds"]
        worker = f"{row['worker_rss_mib']:.0f}" if row["worker_rss_mib"] is not None else "-"
        cells.append([row["processes"], f"{row['seconds']:.1f}", f"{rate:,.0f}", f"{rate / baseline:.2f}",
                      f"{row['main_rss_mib']:.0f}", worker])
    return cells


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", type=int, default=200_000)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--vocab-size", type=int, default=2000)
    parser.add_argument("--keep", help="write into this folder (kept) instead of a temporary one")
    parser.add_argument("--child", nargs=5, metavar=("TREES", "TOKENIZER", "OUTPUT", "N", "CACHE"),
                        help=argparse.SUPPRESS)
    add_markdown_option(parser)
    args = parser.parse_args()
    if args.child:
        trees, tokenizer, output, processes, cache = args.child
        return prepare_once(trees, tokenizer, output, int(processes), cache)
    if 1 not in args.processes:
        parser.error("--processes must include 1: the speed-ups are measured against it")
    with tempfile.TemporaryDirectory() as temporary:
        directory = Path(args.keep or temporary)
        directory.mkdir(parents=True, exist_ok=True)
        trees = directory / "trees.txt"
        start = time.perf_counter()
        write_trees(trees, args.trees)
        print(f"wrote {args.trees:,} random trees ({trees.stat().st_size / 2**20:.0f} MiB) in "
              f"{time.perf_counter() - start:.1f} s", file=sys.stderr)
        import hf_slm

        hf_slm.SyntacticTokenizer.train([SAMPLE], vocab_size=args.vocab_size).save_pretrained(directory / "tokenizer")
        rows = []
        for processes in sorted(set(args.processes)):
            rows.append({"processes": processes, **measure(trees, directory / "tokenizer", directory, processes)})
            print(f"{processes} process(es): {rows[-1]['seconds']:.1f} s", file=sys.stderr)
        report = Report("Data preparation: trees/s and peak memory by number of processes")
        report.table(f"hf-slm data prepare --loader bllip, {args.trees:,} random trees "
                     f"({trees.stat().st_size / 2**20:.0f} MiB), {os.cpu_count()} CPUs",
                     ["processes", "seconds", "trees/s", "x 1 process", "main peak MiB", "worker peak MiB"],
                     table_rows(rows))
        report.finish(args.markdown)


if __name__ == "__main__":
    sys.exit(main())
