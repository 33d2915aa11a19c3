"""Word-synchronous beam search: seconds per sentence by beam and by sentences per search, the model's share of the
time, forward calls, memory; and what BLiMP costs.

    python benchmarks/beam_search.py [--model hf-slm-quickstart | --size quickstart|paper|tiny] [--grammar tg|rnng]
                                     [--beams 10 100 300]
                                     [--per-search 1 5 64] [--reencode-up-to 10] [--blimp DIR] [--blimp-batch 64]
                                     [--device cuda] [--dtype bf16] [--budget SECONDS] [--markdown PATH]
    python benchmarks/beam_search.py --dry-run    # seconds on a CPU: a tiny model, beam 10; measures nothing

Table 1: sentences of 20 words (the GUM sample shipped in the package: its test, dev and training sentences of 20
words or more, cut to their first 20), searched k at a time for each k of `--per-search` (one search of k
sentences; k = 1 searches three sentences one by one). Settings as paper 003: word beam = action beam / 10, fast
track 5, n_c = sentence length, p_c = 3 (`--constraints paper003-sg`). Beside them, paper 003's Table 3 (Nb-Dn-In-M
on an H800: seconds for its sentences of 20 tokens, read here as per sentence, as issue 41 reads it) and Table 5
(its forward calls for one sentence).

Table 2: BLiMP as `hf-slm eval blimp` scores it (as run_blimp does: each distinct sentence once, shortest first, the
model's scorer on `--blimp-batch` sentences per search) at beam 100 with the settings above, over the pairs of
`--blimp` (default: the sample shipped in the package, 130 pairs; `../shared/data/blimp` has all 67,000), as many
as the budget allows: sentences per second, and the hours that rate implies for BLiMP's 67,000 pairs (134,000
sentences; an upper bound, as a sentence that recurs is scored once).

The model is `--model`'s checkpoint when it exists, else a randomly initialized TG of `--size` (quickstart: the
quickstart's shape; paper: GPT-2 small's, d 768, 12 layers, 12 heads, d_ff 3072): its time depends on its shape and
on the trees its weights prefer, so a random model's calls per sentence say less than a trained one's.

Columns: calls/sent = decoder calls per sentence (a call advances every sentence of its search); s/sent = a search's seconds over its sentences; forward = the
share of the time spent in the model's forward (reading the KV cache included); peak KV = the largest key/value cache
held (MiB); re-encoded = s/sent without a cache (the searches must agree). `--budget` bounds the run: a row whose
expected time (from the rows measured before it) does not fit is listed as left out, and the page is rewritten after
every row.
"""

import argparse
import contextlib
import math
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch

from report import Report, add_markdown_option

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "hf_slm" / "sample_data" / "gum"
BLIMP_SAMPLE = REPO / "hf_slm" / "sample_data" / "blimp_sample"
SENTENCE_WORDS = 20
TABLE_3 = {10: 4.43, 30: 5.34, 100: 7.72, 300: 12.17}  # paper 003, Nb-Dn-In-M on an H800, seconds
TABLE_5 = {10: 310, 30: 352, 100: 416, 300: 435}  # paper 003, Nb-Dn-In-M, forward calls for 20 tokens
BLIMP_PAIRS = 67_000  # BLiMP: 67 paradigms of 1,000 pairs
SIZES = {"quickstart": None,  # hf_slm.cli.quickstart.QUICKSTART_MODEL
         "paper": dict(hidden_size=768, num_attention_heads=12, num_hidden_layers=12, intermediate_size=3072),
         "tiny": dict(hidden_size=32, num_attention_heads=2, num_hidden_layers=1, intermediate_size=64)}


def load_model(path, size="quickstart", grammar="tg"):
    """(model, tokenizer, what it is): the checkpoint at `path` when it exists, else a random model of `size`: a TG,
    or with grammar "rnng" a generative RNNG (a 2-layer stack LSTM of the size's width)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hf_slm import register_auto_classes

    register_auto_classes()  # a checkpoint's model type is hf-slm's: the installed classes load it
    if path is not None and Path(path).exists():
        return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path), f"checkpoint {path}"
    from hf_slm import SyntacticTokenizer, preset_config, read_trees
    from hf_slm.cli.quickstart import QUICKSTART_MODEL
    from hf_slm.families import causal_lm_for_config

    trees = read_trees(SAMPLE / "train.txt")
    labels = {t.label() for tree in read_trees(SAMPLE / "test.txt") for t in tree.subtrees()}
    tokenizer = SyntacticTokenizer.train(trees, vocab_size=2000, extra_nonterminals=labels)
    shape = dict(QUICKSTART_MODEL, **(SIZES[size] or {}))
    torch.manual_seed(0)
    if grammar == "rnng":
        config = preset_config("rnng-tiny", vocab_size=len(tokenizer), embedding_size=shape["hidden_size"],
                               hidden_size=shape["hidden_size"], num_hidden_layers=2, **tokenizer.action_layout)
        return (causal_lm_for_config(config), tokenizer,
                f"a randomly initialized generative RNNG ({size}'s width {shape['hidden_size']}, 2 layers; no checkpoint given)")
    config = preset_config("tg-ptb", vocab_size=len(tokenizer), **shape, **tokenizer.action_layout)
    shown = ", ".join(f"{name} {shape[name]}" for name in ("hidden_size", "num_hidden_layers", "num_attention_heads"))
    return causal_lm_for_config(config), tokenizer, f"a randomly initialized TG ({size}: {shown}; no checkpoint given)"


def paper003_settings(beam):
    """Paper 003's search settings at action beam `beam` (section 3.4 and appendix B): word beam = beam / 10,
    fast track 5, n_c = sentence length, p_c = 3 (CONSTRAINT_SETTINGS["paper003-sg"])."""
    from hf_slm.modeling.generation_slm import CONSTRAINT_SETTINGS

    return dict(beam_size=beam, word_beam_size=max(1, beam // 10), fast_track=5, **CONSTRAINT_SETTINGS["paper003-sg"])


def twenty_word_sentences(tokenizer, count):
    """Word pieces of `count` sentences of SENTENCE_WORDS words: the sample's test, dev and training sentences
    of at least that many words, in that order, cut to their first SENTENCE_WORDS words."""
    from hf_slm import read_trees
    from hf_slm.search.beam import words_to_pieces

    trees = [tree for split in ("test", "dev", "train") for tree in read_trees(SAMPLE / f"{split}.txt")]
    chosen = [tree.leaves()[:SENTENCE_WORDS] for tree in trees if len(tree.leaves()) >= SENTENCE_WORDS][:count]
    if len(chosen) < count:
        raise SystemExit(f"the sample has {len(chosen)} sentences of {SENTENCE_WORDS} words or more; {count} are needed")
    return [words_to_pieces(tokenizer, words)[0] for words in chosen]


def paper003_search(model, tokenizer, beam, **extra):
    """A WordSynchronousBeamSearch of `model` with paper003_settings(beam) (and `extra` BeamSearchOptions)."""
    from hf_slm import BeamSearchOptions, WordSynchronousBeamSearch
    from hf_slm.search.beam import _incomplete_word_ids

    return WordSynchronousBeamSearch(model, BeamSearchOptions(**paper003_settings(beam), **extra),
                                     word_start_mask=tokenizer.word_start_mask,
                                     incomplete_word_ids=_incomplete_word_ids(tokenizer))


def synchronize(model):
    device = next(model.parameters()).device
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run(search, sentences):
    """(seconds, forward calls, forward seconds, results) of one search over `sentences`."""
    decoder = search.decoder
    calls, forward = decoder.forward_calls, decoder.forward_seconds
    synchronize(search.model)
    start = time.perf_counter()
    results = search.search(sentences)
    synchronize(search.model)
    return time.perf_counter() - start, decoder.forward_calls - calls, decoder.forward_seconds - forward, results


def measure(model, tokenizer, sentences, beam, per_search, reencode):
    """One row of Table 1: `per_search` sentences in one search (1: three searches of one)."""
    searches = [sentences[i : i + 1] for i in range(3)] if per_search == 1 else [sentences[:per_search]]
    search = paper003_search(model, tokenizer, beam)
    timed = [run(search, group) for group in searches]
    count = sum(len(group) for group in searches)
    seconds = sum(t[0] for t in timed)
    row = dict(beam=beam, word_beam=paper003_settings(beam)["word_beam_size"], per_search=per_search,
               calls=sum(t[1] for t in timed) / count, seconds=seconds / count,
               forward_share=sum(t[2] for t in timed) / seconds, peak_kv=search.decoder.peak_cache_bytes / 2 ** 20,
               reencoded=float("nan"))
    if reencode:
        slow = paper003_search(model, tokenizer, beam, use_cache=False)
        started = time.perf_counter()
        for group, fast in zip(searches, timed):
            for result, cached in zip(slow.search(group), fast[3]):
                if abs(result.log_prob - cached.log_prob) > 1e-3:
                    raise SystemExit(f"cached and re-encoded searches disagree: {cached.log_prob} vs {result.log_prob}")
        row["reencoded"] = (time.perf_counter() - started) / count
    return row


def search_rows(rows):
    return [[r["beam"], r["word_beam"], r["per_search"], f"{r['calls']:.0f}", TABLE_5.get(r["beam"], "-"),
             f"{r['seconds']:.3f}", f"{1 / r['seconds']:.2f}", TABLE_3.get(r["beam"], "-"), f"{r['forward_share']:.0%}",
             f"{r['peak_kv']:.1f}", "-" if math.isnan(r["reencoded"]) else f"{r['reencoded']:.3f}"]
            for r in rows]


SEARCH_COLUMNS = ["beam", "word beam", "sentences per search", "calls/sent", "Table 5 calls", "s/sent", "sent/s",
                  "Table 3 s", "forward", "peak KV MiB", "re-encoded s/sent"]


def blimp_sentences(data_dir):
    """(pairs, distinct sentences as word lists, shortest first): what run_blimp scores for `data_dir`."""
    from hf_slm.evaluation.blimp import read_blimp, split_words

    pairs = read_blimp(data_dir, None)
    words = {tuple(split_words(p[key], "ptb")) for p in pairs for key in ("sentence_good", "sentence_bad")}
    return len(pairs), [list(w) for w in sorted(words, key=lambda w: (len(w), w))]


def measure_blimp(model, tokenizer, data_dir, batch_size, budget, beam=100):
    """The row of Table 2: the distinct sentences of `data_dir` scored as `hf-slm eval blimp` scores them (the
    model's scorer, `batch_size` at a time, shortest first) at `beam`, while the budget lasts."""
    from hf_slm.search.scorers import scorer_for

    pairs, sentences = blimp_sentences(data_dir)
    scorer = scorer_for(model, tokenizer, **paper003_settings(beam))
    scored, seconds = 0, 0.0
    for start in range(0, len(sentences), batch_size):
        chunk = sentences[start : start + batch_size]
        if scored and not budget.fits(2 * seconds / scored * len(chunk)):
            break
        synchronize(model)
        started = time.perf_counter()
        scorer.log_probs(chunk, batch_size=batch_size, progress=False)
        synchronize(model)
        seconds += time.perf_counter() - started
        scored += len(chunk)
    rate = scored / seconds
    return dict(pairs=pairs, distinct=len(sentences), sentences=scored, seconds=seconds, rate=rate, beam=beam,
                batch=batch_size, hours=2 * BLIMP_PAIRS / rate / 3600)


BLIMP_COLUMNS = ["pairs", "distinct sentences", "scored", "beam", "sentences per search", "seconds", "sent/s",
                 "hours for 67,000 pairs"]


def blimp_rows(rows):
    return [[r["pairs"], r["distinct"], r["sentences"], r["beam"], r["batch"], f"{r['seconds']:.1f}", f"{r['rate']:.2f}",
             f"{r['hours']:.2f}"] for r in rows]


class Budget:
    """The run's seconds: whether a row expected to take `seconds` still fits."""

    def __init__(self, seconds):
        self.deadline = time.perf_counter() + seconds

    def fits(self, seconds):
        return time.perf_counter() + seconds <= self.deadline


def expected_seconds(done, beam, per_search):
    """A row's expected time from those measured: the same beam's last s/sent (or the nearest smaller beam's, scaled
    by the beam) times its sentences, doubled for safety (a larger batch's first search meets new shapes). 0 when
    nothing is known yet."""
    known = [r for r in done if r["beam"] <= beam]
    if not known:
        return 0.0
    last = known[-1]
    sentences = 3 if per_search == 1 else per_search
    return 2 * last["seconds"] * sentences * beam / last["beam"]


def write_page(args, source, model, search, blimp, left_out, echo=True):
    report = Report("Word-synchronous beam search", echo=echo)
    if args.dry_run:
        report.line("DRY RUN (a tiny random model, beam 10, a few sentences): the figures mean nothing.")
    precision = "bf16 autocast" if args.dtype == "bf16" else "float32"
    report.line(f"model: {source} ({model.config.grammar}, {sum(p.numel() for p in model.parameters()):,} parameters, "
                f"{precision}); device {next(model.parameters()).device}; "
                f"{torch.get_num_threads()} threads. Settings as paper 003: word beam = beam / 10, fast track 5, n_c = "
                "words, p_c = 3. Table 3 s / Table 5 calls: the paper's Nb-Dn-In-M on an H800, for reference only.")
    if search:
        report.table(f"Table 1: sentences of {SENTENCE_WORDS} words, k per search", SEARCH_COLUMNS, search_rows(search))
    if blimp:
        report.table("Table 2: BLiMP as `hf-slm eval blimp` scores it (each distinct sentence once)", BLIMP_COLUMNS,
                     blimp_rows(blimp))
    if left_out:
        report.line(f"Left out for the {args.budget:.0f} s budget: {'; '.join(left_out)}.")
    report.line(f"peak process memory (max RSS): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 10:.0f} MiB")
    report.finish(args.markdown, device=args.device)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a checkpoint directory (default: hf-slm-quickstart when it exists, else a "
                                        "random TG of --size)")
    parser.add_argument("--size", choices=sorted(SIZES), default="quickstart",
                        help="the random model's shape when no checkpoint is given")
    parser.add_argument("--grammar", choices=["tg", "rnng"], default="tg",
                        help="the random model when no checkpoint is given: a TG, or a generative RNNG of its width")
    parser.add_argument("--beams", type=int, nargs="+", default=[10, 100, 300])
    parser.add_argument("--per-search", type=int, nargs="+", default=[1, 5, 64],
                        help="sentences in one search (Table 1's rows per beam)")
    parser.add_argument("--reencode-up-to", type=int, default=10,
                        help="compare with re-encoding (no cache, the same searches) up to this beam")
    parser.add_argument("--blimp", type=Path, default=BLIMP_SAMPLE, help="BLiMP jsonl folder for Table 2")
    parser.add_argument("--blimp-batch", type=int, default=64, help="sentences per search in Table 2")
    parser.add_argument("--tables", nargs="+", choices=["search", "blimp"], default=["search", "blimp"],
                        help="the tables to measure (Table 1: search; Table 2: blimp)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--dtype", choices=["float32", "bf16"], default="float32",
                        help="bf16: the searches under torch.autocast in bfloat16 (weights in float32)")
    parser.add_argument("--budget", type=float, default=float("inf"), metavar="SECONDS")
    parser.add_argument("--dry-run", action="store_true",
                        help="seconds on the CPU in float32 whatever --device and --dtype say: a tiny random model, beam "
                             "10, 1 and 2 sentences per search, no re-encoding, 4 BLiMP pairs; measures nothing")
    add_markdown_option(parser)
    args = parser.parse_args()
    if args.dry_run:
        args.size, args.model, args.beams, args.per_search, args.reencode_up_to = "tiny", None, [10], [1, 2], 0
        args.device, args.dtype = "cpu", "float32"
        torch.set_num_threads(1)  # the suite runs it beside other work: one thread spins on no other's core
    elif args.model is None and Path("hf-slm-quickstart").exists() and args.size == "quickstart":
        args.model = "hf-slm-quickstart"

    model, tokenizer, source = load_model(args.model, args.size, args.grammar)
    model.to(args.device).eval()
    # --dtype bf16 runs as `hf-slm score --autocast bf16` does: weights in float32, the forward under autocast
    precision = (torch.autocast(torch.device(args.device).type, dtype=torch.bfloat16) if args.dtype == "bf16"
                 else contextlib.nullcontext())
    with precision, tempfile.TemporaryDirectory(prefix="beam-search-") as scratch:
        search, blimp, left_out = measure_tables(args, model, tokenizer, source, Path(scratch))
    write_page(args, source, model, search, blimp, left_out)
    return 0


def measure_tables(args, model, tokenizer, source, scratch):
    """The rows of the tables `args.tables` asks for, within the budget: (search rows, BLiMP rows, left out)."""
    sentences = twenty_word_sentences(tokenizer, max(max(args.per_search), 3))
    budget = Budget(args.budget)
    paper003_search(model, tokenizer, min(args.beams)).search([sentences[0][:3]])  # warm-up: first calls, tables
    search, blimp, left_out = [], [], []
    for beam in sorted(args.beams) if "search" in args.tables else []:
        for per_search in sorted(args.per_search):
            if search and not budget.fits(expected_seconds(search, beam, per_search)):  # the first row always runs
                left_out.append(f"beam {beam}, {per_search} per search")
                continue
            search.append(measure(model, tokenizer, sentences, beam, per_search, beam <= args.reencode_up_to))
            write_page(args, source, model, search, blimp, left_out, echo=False)
    if "blimp" in args.tables:
        data = _first_pairs(args.blimp, 2, scratch) if args.dry_run else args.blimp
        blimp.append(measure_blimp(model, tokenizer, data, args.blimp_batch, budget))
    return search, blimp, left_out


def _first_pairs(folder, count, out):
    """`out`, holding the first `count` pairs of two of `folder`'s paradigms (the dry run's BLiMP)."""
    for path in sorted(Path(folder).glob("*.jsonl"))[:2]:
        (out / path.name).write_text("".join(path.read_text().splitlines(keepends=True)[:count]))
    return out


if __name__ == "__main__":
    sys.exit(main())
