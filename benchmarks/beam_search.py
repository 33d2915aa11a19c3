"""Word-synchronous beam search: forward calls, speed, the model's share of the time, batching, memory.

    python benchmarks/beam_search.py [--model hf-slm-quickstart] [--beams 10 30 100 300] [--reencode-up-to 30]
                                     [--device cuda] [--markdown PATH]

Table 1: five GUM test / dev sentences of 20 words (from the sample shipped in the package), searched one at a
time (paper 003, Table 5 counts forward calls for one sentence of 20 tokens) and then all five in one
batch. Table 2: fifteen BLiMP-length sentences (6-7 words) at beam 100. Settings as paper 003: word beam =
action beam / 10, fast track 5, n_c = sentence length, p_c = 3 (`--constraints paper003-sg`). The model is
the quickstart checkpoint (run `hf-slm quickstart` first) or, if it is missing, a randomly initialized
model of the same size (said in the output; forward-call counts then mean less).

Columns: calls/sent = decoder calls per sentence; s/sent and sent/s one at a time; forward = the share of
the search's time spent in the model's forward (reading the KV cache included); batch-5 s/sent and the
speed-up of batching over one at a time; peak KV = the largest key/value cache held (MiB); re-encoded =
s/sent without a cache (the searches must agree). Peak process memory (max RSS) is printed at the end.
"""

import argparse
import resource
import sys
import time
from pathlib import Path

import torch

from report import Report, add_markdown_option

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "hf_slm" / "sample_data" / "gum"
TABLE_5 = {10: 310, 30: 352, 100: 416, 300: 435}  # paper 003, Nb-Dn-In-M, forward calls for 20 tokens


def load_model(path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hf_slm import register_auto_classes

    register_auto_classes()  # a checkpoint's model type is hf-slm's: the installed classes load it
    if Path(path).exists():
        return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path), f"checkpoint {path}"
    from hf_slm import SyntacticTokenizer, preset_config, read_trees
    from hf_slm.families import causal_lm_for_config
    from hf_slm.cli.quickstart import QUICKSTART_MODEL

    trees = read_trees(SAMPLE / "train.txt")
    labels = {t.label() for tree in read_trees(SAMPLE / "test.txt") for t in tree.subtrees()}
    tokenizer = SyntacticTokenizer.train(trees, vocab_size=2000, extra_nonterminals=labels)
    config = preset_config("tg-ptb", vocab_size=len(tokenizer), **QUICKSTART_MODEL, **tokenizer.action_layout)
    torch.manual_seed(0)
    return causal_lm_for_config(config), tokenizer, "a randomly initialized model (no checkpoint found)"


def paper003_settings(beam):
    """Paper 003's search settings at action beam `beam` (section 3.4 and appendix B): word beam = beam / 10,
    fast track 5, n_c = sentence length, p_c = 3 (CONSTRAINT_SETTINGS["paper003-sg"])."""
    from hf_slm.modeling.generation_slm import CONSTRAINT_SETTINGS

    return dict(beam_size=beam, word_beam_size=max(1, beam // 10), fast_track=5, **CONSTRAINT_SETTINGS["paper003-sg"])


def sample_sentences(tokenizer, lengths, count):
    """Word pieces of the first `count` GUM test / dev sentences (the sample shipped in the package) whose number of
    words is in `lengths`; exits saying so when the sample has fewer."""
    from hf_slm import read_trees
    from hf_slm.search.beam import words_to_pieces

    trees = read_trees(SAMPLE / "test.txt") + read_trees(SAMPLE / "dev.txt")
    chosen = [words_to_pieces(tokenizer, t.leaves())[0] for t in trees if len(t.leaves()) in lengths][:count]
    if len(chosen) < count:
        raise SystemExit(f"the sample has {len(chosen)} sentences of {' or '.join(map(str, lengths))} words; {count} "
                         "are needed")
    return chosen


def paper003_search(model, tokenizer, beam, **extra):
    """A WordSynchronousBeamSearch of `model` with paper003_settings(beam) (and `extra` BeamSearchOptions)."""
    from hf_slm import BeamSearchOptions, WordSynchronousBeamSearch
    from hf_slm.search.beam import _incomplete_word_ids

    return WordSynchronousBeamSearch(model, BeamSearchOptions(**paper003_settings(beam), **extra),
                                     word_start_mask=tokenizer.word_start_mask,
                                     incomplete_word_ids=_incomplete_word_ids(tokenizer))


def run(search, sentences):
    """(seconds, forward calls, forward seconds, results) of one search over `sentences`."""
    decoder = search.decoder
    calls, forward = decoder.forward_calls, decoder.forward_seconds
    start = time.perf_counter()
    results = search.search(sentences)
    return time.perf_counter() - start, decoder.forward_calls - calls, decoder.forward_seconds - forward, results


def measure(model, tokenizer, sentences, beam, reencode):
    settings = paper003_settings(beam)

    def searcher(**extra):
        return paper003_search(model, tokenizer, beam, **extra)

    search = searcher()
    single = [run(search, [words]) for words in sentences]
    seconds = sum(r[0] for r in single)
    row = dict(beam=beam, word_beam=settings["word_beam_size"], calls=sum(r[1] for r in single) / len(sentences),
               seconds=seconds / len(sentences), per_second=len(sentences) / seconds,
               forward_share=sum(r[2] for r in single) / seconds, peak_kv=search.decoder.peak_cache_bytes / 2 ** 20)
    batched = searcher()
    row["batched"] = sum(run(batched, sentences[i : i + 5])[0] for i in range(0, len(sentences), 5)) / len(sentences)
    row["batch_speedup"] = row["seconds"] / row["batched"]
    row["reencoded"] = float("nan")
    if reencode:
        slow = searcher(use_cache=False)
        start = time.perf_counter()
        for words, fast in zip(sentences, single):
            result = slow.search([words])[0]
            if abs(result.log_prob - fast[3][0].log_prob) > 1e-3:
                raise SystemExit(f"cached and re-encoded searches disagree: {fast[3][0].log_prob} vs {result.log_prob}")
        row["reencoded"] = (time.perf_counter() - start) / len(sentences)
    return row


def table_rows(rows, reference=TABLE_5):
    return [[r["beam"], r["word_beam"], f"{r['calls']:.0f}", reference.get(r["beam"], "-"), f"{r['seconds']:.2f}",
             f"{r['per_second']:.2f}", f"{r['forward_share']:.0%}", f"{r['batched']:.2f}", f"{r['batch_speedup']:.2f}x",
             f"{r['peak_kv']:.1f}", "-" if r["reencoded"] != r["reencoded"] else f"{r['reencoded']:.2f}"]
            for r in rows]


COLUMNS = ["beam", "word beam", "calls/sent", "Table 5", "s/sent", "sent/s", "forward", "batch-5 s/sent",
           "batch speed-up", "peak KV MiB", "re-encoded s/sent"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="hf-slm-quickstart")
    parser.add_argument("--beams", type=int, nargs="+", default=[10, 30, 100, 300])
    parser.add_argument("--reencode-up-to", type=int, default=30, help="compare with re-encoding up to this beam")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    add_markdown_option(parser)
    args = parser.parse_args()

    model, tokenizer, source = load_model(args.model)
    model.to(args.device).eval()
    long, short = sample_sentences(tokenizer, (20,), 5), sample_sentences(tokenizer, (6, 7), 15)
    report = Report("Word-synchronous beam search")
    report.line(f"model: {source} ({model.config.grammar}, {sum(p.numel() for p in model.parameters()):,} parameters); "
                f"device {next(model.parameters()).device}; {torch.get_num_threads()} threads. Settings as paper 003: "
                "word beam = beam / 10, fast track 5, n_c = words, p_c = 3. calls/sent = decoder calls per sentence "
                "(Table 5: the paper's Nb-Dn-In-M, for reference only); forward = the share of the search's time in the "
                "model's forward.")
    report.table("Table 1: five sentences of 20 words (batch-5: all five in one search)", COLUMNS,
                 table_rows([measure(model, tokenizer, long, beam, beam <= args.reencode_up_to) for beam in args.beams]))
    report.table("Table 2: fifteen sentences of 6-7 words (BLiMP length), beam 100 (batch-5: three batches of five)",
                 COLUMNS, table_rows([measure(model, tokenizer, short, 100, False)], reference={}))
    report.line(f"peak process memory (max RSS): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 10:.0f} MiB")
    report.finish(args.markdown, device=args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
