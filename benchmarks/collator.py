"""Throughput of the data collator: sequences/s by expanded-length bucket, batch 64, one thread.

    python benchmarks/collator.py [--trees PATH ...] [--conllu PATH ...] [--batch-size 64] [--seconds 3] [--clock cpu]

TG and TXL (CC) read GUM constituency trees; buckets hold the trees whose expanded TG length T' is in 1-128,
129-256 and 257-512; batches are drawn from one bucket and padded to their own longest sequence. The baseline in
the same run is the incremental (one action at a time, Algorithm 1) form of the same grammar, which is what a
straightforward per-position implementation costs.

The dependency grammars (DTG, DTG-eager, DTG-swift, paper 002) read the projective (lifted) trees of UD English
EWT (`--conllu`), words in SentencePiece pieces (`--pieces`), bucketed by each grammar's own expanded length T'
(its arcs duplicated). Their baseline is `_batch_from_steps`, the batch replayed from `step` (the construction
before the vectorized one); "/ TG" is the DTG rate over the TG rate of the same T' bucket in this run.
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from hf_slm.families.action_vocab import ActionVocabulary
from hf_slm.data.collator import SyntacticDataCollator
from hf_slm.tokenization.linearizers import top_down_actions  # noqa: E402
from hf_slm.tokenization.trees import read_trees  # noqa: E402
from report import Report, add_markdown_option  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TREES = [REPO.parent / "shared" / "data" / "gum_const" / "const",
                 REPO / "hf_slm" / "sample_data" / "gum" / "train.txt"]
DEFAULT_CONLLU = [REPO.parent / "shared" / "data" / "ud_english_ewt" / "en_ewt-ud-train.conllu"]
DEPENDENCY_GRAMMARS = {"dtg": "arc_standard", "dtg_eager": "arc_eager", "dtg_swift": "arc_swift"}
BUCKETS = (128, 256, 512)
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def throughput(function, batches, seconds, clock=time.perf_counter):
    done, start = 0, clock()
    while clock() - start < seconds:
        for batch in batches:
            function(batch)
            done += len(batch)
    return done / (clock() - start)


def incremental_collate(grammar, batch):
    for ids in batch:
        state = grammar.start()
        for action_id in ids:
            grammar.step(state, action_id)


def bucket_batches(sequences, expanded, batch_size):
    """Per T' bucket with trees: (label, number of trees, mean T', up to 20 shuffled batches)."""
    lower = 0
    for upper in BUCKETS:
        inside = (expanded > lower) & (expanded <= upper)
        chosen = [s for s, keep in zip(sequences, inside) if keep]
        label, lower = f"{lower + 1}-{upper}", upper
        if chosen:
            np.random.default_rng(0).shuffle(chosen)
            batches = [chosen[i : i + batch_size] for i in range(0, len(chosen), batch_size)][:20]
            yield label, len(chosen), expanded[inside].mean(), batches


def dependency_sequences(paths, pieces):
    """Per DTG grammar: its tokenizer's layout and the action ids of every tree of the CoNLL-U files (made
    projective by lifting), all three with one SentencePiece model."""
    from hf_slm.data.conllu_loader import read_conllu_file
    from hf_slm.tokenization.dependency_trees import DependencyTree, projective_tree
    from hf_slm.tokenization.tokenization_dependency import DependencyTokenizer

    trees = [projective_tree(DependencyTree(example["words"], example["heads"]), "lift")[0]
             for path in paths for example in read_conllu_file(path, Path(path).name)]
    swift = DependencyTokenizer.train(trees, vocab_size=pieces, transition_system="arc_swift")  # the k it needs
    proto = swift.sp_model.serialized_model_proto()
    out = {}
    for name, system in DEPENDENCY_GRAMMARS.items():
        tokenizer = swift if system == "arc_swift" else DependencyTokenizer(sp_model_proto=proto,
                                                                              transition_system=system)
        out[name] = (tokenizer.action_layout, [tokenizer.encode(tree) for tree in trees])
    return len(trees), out


def dependency_rows(args, tg_rates, report):
    paths = args.conllu or [p for p in DEFAULT_CONLLU if p.exists()]
    if not paths:
        report.line("No CoNLL-U file (--conllu): the dependency grammar rows are left out.")
        return
    count, grammars = dependency_sequences(paths, args.pieces)
    rows = []
    for name, (layout, sequences) in grammars.items():
        collator = SyntacticDataCollator(name, layout)
        grammar = collator.grammar
        arcs = (layout["left_arc_start"], layout["right_arc_stop"])  # LA[k] and RA[k] ids: two positions each
        expanded = np.array([len(s) + sum(arcs[0] <= i < arcs[1] for i in s) for s in sequences])
        for label, trees, mean_t, batches in bucket_batches(sequences, expanded, args.batch_size):
            rate = throughput(collator, batches, args.seconds, CLOCKS[args.clock])
            steps = throughput(grammar._batch_from_steps, batches[:2], args.seconds, CLOCKS[args.clock])
            tg = tg_rates.get(label)
            rows.append([name, label, trees, f"{mean_t:.1f}", f"{rate:.0f}", f"{steps:.0f}", f"{rate / steps:.1f}x",
                         f"{tg:.0f}" if tg else "-", f"{rate / tg:.2f}x" if tg else "-"])
    report.table(f"{count} dependency trees from {', '.join(map(str, paths))}; {args.pieces} pieces; batch "
                 f"{args.batch_size}; 1 thread; T' = each grammar's own expanded length",
                 ["grammar", "T range", "trees", "mean T", "seq/s", "steps seq/s", "/ steps", "TG seq/s", "/ TG"], rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs="*", default=None)
    parser.add_argument("--conllu", nargs="*", default=None, help="CoNLL-U files for the dependency grammar rows")
    parser.add_argument("--pieces", type=int, default=8000, help="SentencePiece vocabulary of the dependency rows")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall time, or this process's CPU time (steadier on a machine shared with other work)")
    add_markdown_option(parser)
    args = parser.parse_args()
    torch.set_num_threads(1)
    paths = args.trees or [next(p for p in DEFAULT_TREES if p.exists())]
    trees = read_trees(paths)
    actions = [top_down_actions(t) for t in trees]
    vocab = ActionVocabulary.from_action_sequences(actions)
    sequences = [vocab.encode(a) for a in actions]
    collators = {name: SyntacticDataCollator(name, vocab.layout) for name in ("tg", "choe_charniak")}
    tg = collators["tg"].grammar
    expanded = np.array([len(s) + sum(1 for a in acts if a.endswith(")")) for s, acts in zip(sequences, actions)])
    report = Report("Collator throughput")
    tg_rates, rows = {}, []
    for label, trees_in_bucket, mean_t, batches in bucket_batches(sequences, expanded, args.batch_size):
        rates = {name: throughput(c, batches, args.seconds, CLOCKS[args.clock]) for name, c in collators.items()}
        slow = throughput(lambda b: incremental_collate(tg, b), batches[:2], args.seconds, CLOCKS[args.clock])
        tg_rates[label] = rates["tg"]
        rows.append([label, trees_in_bucket, f"{mean_t:.1f}", f"{rates['tg']:.0f}", f"{rates['choe_charniak']:.0f}",
                     f"{slow:.0f}", f"{rates['tg'] / slow:.1f}x"])
    report.table(f"{len(trees)} trees from {', '.join(map(str, paths))}; batch {args.batch_size}; 1 thread; "
                 f"{args.clock} clock", ["T range", "trees", "mean T", "TG seq/s", "CC seq/s", "incremental TG seq/s",
                                         "TG / incremental"], rows)
    dependency_rows(args, tg_rates, report)
    report.finish(args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
