"""Segment recurrence (issue 16): training speed and peak memory, and what the memory holds.

    python benchmarks/segments.py [--segment-length 256] [--streams 4] [--steps 5]

Table 1, training: forward + backward + Adam steps over B streams x L positions of GUM documents (TG ids: a
document's trees after one `<s>`), models of d 256, 8 heads, 4 layers, d_ff 1024, dropout 0:
- TG, segments + structure memory (M = L, paper 000's reference setting);
- TG over whole sequences of L positions: the same documents cut into independent windows, no memory (what a
  model of max_sequence_length L reads; the baseline of the ratios);
- TXL (CC), segments + shift memory (M = L): the same actions, causal, without TG's duplicated closings.
Tokens/s counts the B x L positions a step reads (the memory's M are not counted). Peak memory is the growth of
the process's peak resident set over the steps, each configuration in its own process.

Table 2, memory: over the GUM documents' TG sequences, for each segment boundary, how many of the M slots hold a
position that a later position may still attend (on the stack), under the structure memory and under the shift
memory, and how many attendable positions there are (the stack); with the share of them each memory holds.
Documents come from ../shared/data/gum_const (one file per document) or, without it, the sample shipped in the
package (hf_slm/sample_data/gum, documents.json).
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from report import Report, add_markdown_option

REPO = Path(__file__).resolve().parents[1]
SHARED_GUM = REPO.parent / "shared" / "data" / "gum_const" / "const"
SAMPLE = REPO / "hf_slm" / "sample_data" / "gum"
MODEL = dict(hidden_size=256, num_attention_heads=8, num_hidden_layers=4, intermediate_size=1024)
CONFIGURATIONS = ("tg-segments", "tg-whole", "txl-cc-segments")


def documents():
    """(name, [tree strings]) of each GUM document available."""
    if SHARED_GUM.is_dir():
        from hf_slm import read_trees

        found = [(path.stem, [" ".join(str(tree).split()) for tree in read_trees(path)])
                 for path in sorted(SHARED_GUM.glob("*.ptb"))]
        return found, str(SHARED_GUM)
    lines = [line.strip() for line in (SAMPLE / "train.txt").read_text(encoding="utf-8").splitlines() if line.strip()]
    groups, start = [], 0
    for name, count in json.loads((SAMPLE / "documents.json").read_text())["train"]:
        groups.append((name, lines[start : start + count]))
        start += count
    return groups, str(SAMPLE)


def document_ids():
    """(tokenizer, [TG ids of each document]) with a tokenizer trained on the documents' trees."""
    from hf_slm import SyntacticTokenizer

    found, source = documents()
    trees = [tree for _, doc in found for tree in doc]
    tokenizer = SyntacticTokenizer.train(trees, vocab_size=2000)
    ids = [tokenizer.encode_document(doc)["input_ids"] for _, doc in found]
    return tokenizer, ids, source


def model_for(grammar, tokenizer, length):
    import torch

    from hf_slm.families import config_for_grammar
    from hf_slm.families import causal_lm_for_config

    config = config_for_grammar(grammar=grammar, vocab_size=len(tokenizer), document_level=True,
                                max_sequence_length=max(length, 16), core_dropout=0.0, embedding_dropout=0.0,
                                attention_dropout=0.0, **MODEL, **tokenizer.action_layout)
    torch.manual_seed(0)
    return causal_lm_for_config(config).train()


def measure(configuration, segment_length, streams, steps):
    """Run `steps` training steps of one configuration; print a JSON line with tokens/s and peak memory."""
    import torch

    sys.path.insert(0, str(REPO / "benchmarks"))
    from train_step import peak_rss_kb, reset_peak_rss

    from hf_slm.families import get_grammar
    from hf_slm.modeling.segment_recurrence import SegmentBatch, empty_memory, segment_forward
    from hf_slm.training.segment_training import DocumentStreams

    tokenizer, ids, _ = document_ids()
    grammar_name = "choe_charniak" if configuration.startswith("txl-cc") else "tg"
    model = model_for(grammar_name, tokenizer, segment_length)
    grammar = get_grammar(grammar_name, model.grammar.layout, document_level=True)
    memory_length, rule = (0, "shift") if configuration == "tg-whole" else (
        segment_length, "structure" if grammar_name == "tg" else "shift")
    data = DocumentStreams(grammar, ids, streams, segment_length, memory_length, rule, disable_progress=True)

    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    memory = empty_memory(model, streams, memory_length)

    def step(index):
        nonlocal memory
        batch = SegmentBatch(**data[index])
        output = segment_forward(model, batch, memory)
        memory = output.memory
        output.loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step(0)  # warm-up
    reset_peak_rss()
    before = peak_rss_kb()
    started = time.perf_counter()
    for index in range(1, steps + 1):
        step(index)
    seconds = time.perf_counter() - started
    print(json.dumps({"configuration": configuration, "tokens_per_second": streams * segment_length * steps / seconds,
                      "peak_mib": (peak_rss_kb() - before) / 1024, "steps": steps}))


def memory_table(segment_lengths):
    """Per L (M = L): mean over segment boundaries of attendable positions (stack), slots holding one under the
    structure and under the shift memory."""
    import numpy as np

    from hf_slm.families import get_grammar
    from hf_slm.modeling.grammars import ActionLayout
    from hf_slm.modeling.segments import attendable_after_segments, segment_sequence

    tokenizer, ids, source = document_ids()
    grammar = get_grammar("tg", ActionLayout(**tokenizer.action_layout), document_level=True)
    rows = []
    for L in segment_lengths:
        stack, held = [], {"structure": [], "shift": []}
        for doc in ids:
            pushed, removal = grammar.stack_lifetimes(doc)
            attendable = attendable_after_segments(pushed, removal, L)[:-1]  # boundaries a later segment reads
            stack += attendable.sum(1).tolist()
            for rule in held:
                memory = segment_sequence(grammar, doc, L, L, rule).memory_positions[1:]  # after each boundary
                for tau, slots in enumerate(memory):
                    slots = slots[slots >= 0]
                    held[rule].append(int(attendable[tau, slots].sum()))
        rows.append((L, float(np.mean(stack)), float(np.mean(held["structure"])), float(np.mean(held["shift"])),
                     sum(held["structure"]) / max(1, sum(stack)), sum(held["shift"]) / max(1, sum(stack)),
                     len(stack)))
    return rows, source, len(ids)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segment-length", type=int, default=256)
    parser.add_argument("--streams", type=int, default=4, help="batch rows (streams of documents)")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--measure", choices=CONFIGURATIONS, help=argparse.SUPPRESS)  # one configuration, in-process
    add_markdown_option(parser)
    args = parser.parse_args()
    if args.measure:
        measure(args.measure, args.segment_length, args.streams, args.steps)
        return 0

    import torch

    report = Report("Segment recurrence: training speed, peak memory and what the memory holds")
    report.line(f"{torch.get_num_threads()} threads, B = {args.streams} streams x L = {args.segment_length} positions, "
                f"{args.steps} steps, d 256 / 8 heads / 4 layers; ratios against TG over whole sequences of L, "
                "measured in the same run.")
    results = {}
    for configuration in CONFIGURATIONS:
        command = [sys.executable, __file__, "--measure", configuration, "--segment-length", str(args.segment_length),
                   "--streams", str(args.streams), "--steps", str(args.steps)]
        done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ), check=False)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode or not lines:
            raise SystemExit(f"{configuration} failed:\n{done.stderr[-3000:]}")
        results[configuration] = json.loads(lines[-1])
    base = results["tg-whole"]
    names = {"tg-segments": f"TG, segments + structure memory (M={args.segment_length})",
             "tg-whole": f"TG, whole sequences of {args.segment_length}",
             "txl-cc-segments": "TXL (CC), segments + shift memory"}
    report.table("Table 1: training", ["configuration", "tokens/s", "vs whole", "peak MiB", "vs whole"],
                 [[names[configuration], f"{r['tokens_per_second']:.0f}",
                   f"{r['tokens_per_second'] / base['tokens_per_second']:.2f}x", f"{r['peak_mib']:.0f}",
                   f"{r['peak_mib'] / max(base['peak_mib'], 1e-9):.2f}x"] for configuration, r in results.items()])
    rows, source, count = memory_table([64, args.segment_length])
    report.table(f"Table 2: memory slots holding attendable positions (M = L), {count} TG documents of {source}",
                 ["L = M", "boundaries", "attendable", "structure", "shift", "structure %", "shift %"],
                 [[L, boundaries, f"{stack:.1f}", f"{structure:.1f}", f"{shift:.1f}", f"{structure_share:.1%}",
                   f"{shift_share:.1%}"]
                  for L, stack, structure, shift, structure_share, shift_share, boundaries in rows])
    report.finish(args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
