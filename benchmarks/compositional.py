"""Paper 003's inference efficiency (Tables 3 and 5) for the compositional variants that are models and GPT2-tree.

    python benchmarks/compositional.py [--beams 10 30 100 300] [--variants nb-dn-in-m gpt2-tree ...]
                                       [--models DIR] [--repeats 1]

Table 3's shape: seconds per sentence of word-synchronous beam search at each action beam, over five sentences of
20 tokens (word pieces, as the paper's are 20 GPT-2 BPE tokens) from the GUM sample shipped in the package (test,
then dev, then train sentences), searched one at a time, averaged over `--repeats` runs (the paper: 5). Table 5's:
forward calls of the main Transformer for the first of those sentences (calls of the Ex variants' composer are not
counted, as in the paper). Settings as paper 003: word beam = beam / 10, fast track 5, n_c = sentence length, p_c = 3
(CONSTRAINT_SETTINGS["paper003-sg"]; benchmarks/beam_search.py's helpers).

Models: `DIR/<variant>` when `--models DIR` holds one (e.g. the output of examples/train_compositional.py), else a
randomly initialized `<variant>-tiny` (4 layers, d 128) with a CompositionalTokenizer trained on the GUM sample.
What the numbers are not: the paper's models are GPT-2 small, trained, on an H800 GPU with GPT-2's BPE (its 20
tokens are BPE tokens, ours SentencePiece pieces of a 2,000-piece vocabulary, so fewer words); ours are tiny CPU
models. A random model spreads its beam differently from a
trained one, so forward calls compare in shape (Nb above Bi, In above Ex), not number by number; seconds compare
between rows of one run only.
"""

import argparse
import sys
import time
from pathlib import Path

import torch

from beam_search import SAMPLE, paper003_search, run
from report import Report, add_markdown_option

TOKENS = 20  # paper 003 times and counts sentences of 20 tokens

# Paper 003, appendix C, Table 5: main-Transformer forward calls on one sentence of 20 tokens, by beam size.
PAPER_TABLE_5 = {
    "gpt2-tree": (147, 202, 236, 250),
    "bi-up-ex-nm": (165, 175, 179, 182), "bi-up-ex-m": (165, 170, 180, 183),
    "bi-up-in-nm": (309, 329, 341, 345), "bi-up-in-m": (309, 327, 339, 351),
    "bi-dn-ex-nm": (167, 178, 221, 239), "bi-dn-ex-m": (158, 201, 212, 237),
    "bi-dn-in-nm": (267, 300, 339, 407), "bi-dn-in-m": (275, 295, 324, 403),
    "nb-up-ex-nm": (215, 268, 328, 356), "nb-up-ex-m": (385, 390, 399, 405),
    "nb-up-in-nm": (547, 587, 617, 659), "nb-up-in-m": (713, 725, 747, 763),
    "nb-dn-ex-nm": (129, 145, 168, 190), "nb-dn-ex-m": (159, 182, 219, 248),
    "nb-dn-in-nm": (280, 339, 402, 425), "nb-dn-in-m": (310, 352, 416, 435),
}
# Paper 003, section 3.4, Table 3: seconds (five 20-token sentences, averaged over 5 runs, one H800 GPU).
PAPER_TABLE_3 = {
    "gpt2-tree": (2.06, 2.94, 3.98, 5.81),
    "bi-up-ex-nm": (1.28, 1.46, 1.77, 2.62), "bi-up-ex-m": (1.33, 1.49, 1.97, 3.23),
    "bi-up-in-nm": (4.28, 4.81, 5.95, 8.69), "bi-up-in-m": (4.28, 4.80, 5.91, 8.70),
    "bi-dn-ex-nm": (1.20, 1.33, 2.13, 3.76), "bi-dn-ex-m": (1.14, 1.61, 2.44, 4.53),
    "bi-dn-in-nm": (3.79, 4.46, 6.03, 9.73), "bi-dn-in-m": (3.91, 4.44, 5.93, 10.43),
    "nb-up-ex-nm": (1.35, 1.83, 2.53, 4.53), "nb-up-ex-m": (3.04, 3.51, 4.71, 7.74),
    "nb-up-in-nm": (7.98, 8.90, 11.23, 16.97), "nb-up-in-m": (10.52, 11.12, 13.97, 20.84),
    "nb-dn-ex-nm": (0.93, 1.25, 1.70, 3.35), "nb-dn-ex-m": (1.11, 1.71, 2.66, 5.17),
    "nb-dn-in-nm": (3.99, 5.03, 7.22, 11.37), "nb-dn-in-m": (4.43, 5.34, 7.72, 12.17),
}
PAPER_BEAMS = (10, 30, 100, 300)


def benchmarked_variants():
    """Every paper 003 tree model that exists (COMPOSITIONAL_MODEL_VARIANTS, as variants land) and GPT2-tree, the
    paper's row order aside."""
    from hf_slm.modeling.compositional_config import COMPOSITIONAL_MODEL_VARIANTS

    return list(COMPOSITIONAL_MODEL_VARIANTS) + ["gpt2-tree"]


def paper_name(variant):
    return "GPT2-tree" if variant == "gpt2-tree" else "-".join(part.capitalize() for part in variant.split("-"))


def load_or_build(variant, models, tokenizers):
    """(model, tokenizer, where it came from): `models/<variant>` when it holds a checkpoint, else a random
    `<variant>-tiny` over a tokenizer trained on the GUM sample for its linearization (one per linearization)."""
    from hf_slm import preset_config, read_trees
    from hf_slm.families import grammar_class
    from hf_slm.families import causal_lm_for_config
    from hf_slm.tokenization.tokenization_compositional import CompositionalTokenizer

    if models is not None and (Path(models) / variant / "config.json").is_file():
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = Path(models) / variant
        return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path), f"trained ({path})"
    linearization = grammar_class(variant).linearization
    if linearization not in tokenizers:
        tokenizers[linearization] = CompositionalTokenizer.train(read_trees(SAMPLE / "train.txt"), vocab_size=2000,
                                                                 linearization=linearization)
    tokenizer = tokenizers[linearization]
    config = preset_config(f"{variant}-tiny", vocab_size=len(tokenizer), **tokenizer.action_layout)
    torch.manual_seed(0)
    return causal_lm_for_config(config), tokenizer, "random"


def sentences_of_tokens(tokenizer, tokens, count):
    """Word pieces of the first `count` GUM sentences (test, then dev, then train: the sample is small) of exactly
    `tokens` pieces; exits saying so when the sample has fewer."""
    from hf_slm import read_trees
    from hf_slm.search.beam import words_to_pieces

    chosen = []
    for split in ("test", "dev", "train"):
        for tree in read_trees(SAMPLE / f"{split}.txt"):
            pieces = words_to_pieces(tokenizer, tree.leaves())[0]
            if sum(len(word) for word in pieces) == tokens:
                chosen.append(pieces)
                if len(chosen) == count:
                    return chosen
    raise SystemExit(f"the sample has {len(chosen)} sentences of {tokens} tokens; {count} are needed")


def measure(model, tokenizer, beams, repeats):
    """{beam: (seconds per sentence over the five, forward calls on the first)}, and {beam: why it failed} for the
    beams where a search found no tree (a row of the table then says so rather than the run stopping)."""
    sentences = sentences_of_tokens(tokenizer, TOKENS, 5)
    rows, failures = {}, {}
    for beam in beams:
        search = paper003_search(model, tokenizer, beam)
        try:
            calls = run(search, sentences[:1])[1]
            seconds = 0.0
            for _ in range(repeats):
                seconds += sum(run(search, [words])[0] for words in sentences)
        except RuntimeError as error:  # the search's "no complete tree was found under the beam constraints"
            failures[beam] = str(error)
            continue
        rows[beam] = (seconds / (repeats * len(sentences)), calls)
    return rows, failures


def report_tables(report, results, beams, sources, failures):
    def paper(table, variant, beam):
        values = table.get(variant)
        return values[PAPER_BEAMS.index(beam)] if values is not None and beam in PAPER_BEAMS else None

    def cell(value, form):
        return "-" if value is None else f"{value:{form}}"

    columns = ["model", "model is"] + [name for b in beams for name in (f"ours b{b}", f"paper b{b}")]
    report.table("Table 3 shape: ours = seconds per sentence (CPU, tiny models); paper = its Table 3's inference "
                 "time in seconds (H800 GPU, GPT-2 small, five sentences averaged over 5 runs)", columns,
                 [[paper_name(variant), sources[variant]]
                  + [c for b in beams for c in (cell(rows[b][0] if b in rows else None, ".3f"),
                                                cell(paper(PAPER_TABLE_3, variant, b), ".2f"))]
                  for variant, rows in results.items()])
    table_5 = []
    for variant, rows in results.items():
        within = [rows[b][1] <= paper(PAPER_TABLE_5, variant, b) for b in beams
                  if b in rows and paper(PAPER_TABLE_5, variant, b) is not None]
        table_5.append([paper_name(variant), sources[variant]]
                       + [c for b in beams for c in (cell(rows[b][1] if b in rows else None, "d"),
                                                     cell(paper(PAPER_TABLE_5, variant, b), "d"))]
                       + ["yes" if within and all(within) else ("no" if within else "-")])
    report.table(f"Table 5 shape: forward calls of the main Transformer on one sentence of {TOKENS} tokens (paper: "
                 "its Table 5; not comparable, see the docstring)", columns + ["ours <= paper"], table_5)
    for variant, failed in failures.items():
        for beam, message in failed.items():
            report.line(f"{paper_name(variant)} at beam {beam}: '-' above: {message}")
    missing = [paper_name(v) for v in PAPER_TABLE_5 if v not in results]
    if missing:
        report.line(f"Not benchmarked (not models yet, or left out by --variants): {', '.join(missing)}.")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beams", type=int, nargs="+", default=list(PAPER_BEAMS))
    parser.add_argument("--variants", nargs="+", help="default: every compositional variant that is a model, and "
                                                       "gpt2-tree")
    parser.add_argument("--models", help="a folder of checkpoints named by variant (examples/train_compositional.py "
                                         "--output); random tiny models for the others")
    parser.add_argument("--repeats", type=int, default=1, help="runs over the five sentences to average (paper: 5)")
    add_markdown_option(parser)
    args = parser.parse_args()
    known = benchmarked_variants()
    variants = args.variants or known
    unknown = [v for v in variants if v not in known]
    if unknown:
        raise SystemExit(f"--variants {' '.join(unknown)}: expected some of {' '.join(known)} (the compositional "
                         "variants that are models, and gpt2-tree)")
    report = Report("Paper 003's inference efficiency (Tables 3 and 5)")
    report.line(f"{torch.get_num_threads()} threads; beams {args.beams} (word beam = beam / 10, fast track 5, n_c = "
                f"words, p_c = 3); five GUM sentences of {TOKENS} tokens; {args.repeats} repeat(s)")
    results, sources, tokenizers, failures = {}, {}, {}, {}
    for variant in variants:
        model, tokenizer, source = load_or_build(variant, args.models, tokenizers)
        sources[variant] = source.split(" ")[0]
        start = time.perf_counter()
        with torch.no_grad():
            results[variant], failed = measure(model.eval(), tokenizer, args.beams, args.repeats)
        if failed:
            failures[variant] = failed
        print(f"  {paper_name(variant)}: {source} model, measured in {time.perf_counter() - start:.0f}s", flush=True)
    report_tables(report, results, args.beams, sources, failures)
    report.finish(args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
