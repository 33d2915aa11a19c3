"""Word-synchronous beam search: forward calls and seconds per sentence, with the KV cache and re-encoding.

    python benchmarks/beam_search.py [--model hf-slm-quickstart] [--beams 10 30 100 300] [--no-reencode-above 100]

Five GUM test sentences of 20 words each (from the sample shipped in the package) are parsed one at a time
(as paper 003, Table 5 counts forward calls for one sentence of 20 tokens) and then all five in one batch.
Settings as paper 003: word beam = action beam / 10, fast track 5, n_c = sentence length, p_c = 3. The
model is the quickstart checkpoint (run `hf-slm quickstart` first) or, if it is missing, a randomly
initialized model of the same size (said in the output; forward-call counts then mean less).
"""

import argparse
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "hf_slm" / "sample_data" / "gum"


def load_model(path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if Path(path).exists():
        return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path), f"checkpoint {path}"
    from hf_slm import SyntacticTokenizer, preset_config, read_trees
    from hf_slm.modeling.modeling_slm import causal_lm_for_config
    from hf_slm.quickstart import QUICKSTART_MODEL

    trees = read_trees(SAMPLE / "train.txt")
    labels = {t.label() for tree in read_trees(SAMPLE / "test.txt") for t in tree.subtrees()}
    tokenizer = SyntacticTokenizer.train(trees, vocab_size=2000, extra_nonterminals=labels)
    config = preset_config("tg-ptb", vocab_size=len(tokenizer), **QUICKSTART_MODEL, **tokenizer.action_layout)
    torch.manual_seed(0)
    return causal_lm_for_config(config), tokenizer, "a randomly initialized model (no checkpoint found)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="hf-slm-quickstart")
    parser.add_argument("--beams", type=int, nargs="+", default=[10, 30, 100, 300])
    parser.add_argument("--no-reencode-above", type=int, default=300, help="skip re-encoding for larger beams")
    args = parser.parse_args()

    from hf_slm import BeamSearchOptions, WordSynchronousBeamSearch, read_trees
    from hf_slm.beam import _incomplete_word_ids, words_to_pieces

    model, tokenizer, source = load_model(args.model)
    model.eval()
    sentences = [t.leaves() for t in read_trees(SAMPLE / "test.txt") if len(t.leaves()) == 20][:5]
    if len(sentences) < 5:
        raise SystemExit("fewer than 5 sentences of 20 words in the sample")
    encoded = [words_to_pieces(tokenizer, words)[0] for words in sentences]
    print(f"model: {source} ({model.config.grammar}, {sum(p.numel() for p in model.parameters()):,} parameters); "
          f"5 sentences of 20 words; {torch.get_num_threads()} threads")
    print(f"{'beam':>5} {'word beam':>9} {'calls/sent':>10} {'s/sent cached':>13} {'s/sent re-encoded':>17} "
          f"{'speed-up':>8} {'s/sent, batch of 5':>18}")
    for beam in args.beams:
        options = dict(beam_size=beam, word_beam_size=max(1, beam // 10), fast_track=5, max_consecutive_open=3)
        search = WordSynchronousBeamSearch(model, BeamSearchOptions(**options), word_start_mask=tokenizer.word_start_mask,
                                           incomplete_word_ids=_incomplete_word_ids(tokenizer))
        calls, start = 0, time.perf_counter()
        cached_results = []
        for words in encoded:
            result = search.search([words])[0]
            calls += result.forward_calls
            cached_results.append(result)
        cached = (time.perf_counter() - start) / len(encoded)
        reencoded = float("nan")
        if beam <= args.no_reencode_above:
            slow = WordSynchronousBeamSearch(model, BeamSearchOptions(use_cache=False, **options),
                                             word_start_mask=tokenizer.word_start_mask,
                                             incomplete_word_ids=_incomplete_word_ids(tokenizer))
            start = time.perf_counter()
            for words, fast in zip(encoded, cached_results):
                result = slow.search([words])[0]
                if abs(result.log_prob - fast.log_prob) > 1e-3:
                    raise SystemExit(f"cached and re-encoded searches disagree: {fast.log_prob} vs {result.log_prob}")
            reencoded = (time.perf_counter() - start) / len(encoded)
        start = time.perf_counter()
        search.search(encoded)
        batched = (time.perf_counter() - start) / len(encoded)
        print(f"{beam:>5} {options['word_beam_size']:>9} {calls / len(encoded):>10.0f} {cached:>13.2f} {reencoded:>17.2f} "
              f"{reencoded / cached:>7.1f}x {batched:>18.2f}")
    print("Paper 003, Table 5 (Nb-Dn-In-M, forward calls for one 20-token sentence): 310 / 352 / 416 / 435")
    return 0


if __name__ == "__main__":
    sys.exit(main())
