"""Proposal files drawn by a proposal parser: J unique trees per sentence, written in the format the evaluations'
`--proposals` read (hf_slm/families/tree_formats.py), journaled so that an interrupted run resumes.

    hf-slm propose --parser runs/crf --data test.txt --num 300 --output test-proposals.txt
    hf-slm eval ppl --model runs/tg --data test.txt --proposal-parser runs/crf --protocol paper000

The file: comment lines (`# ` first, which the readers skip) say what drew it (the parser's source, kind and weights'
sha256, J, the cap on draws, the seed, the data); then one block per sentence, in the order of the data, blocks
separated by blank lines. A block starts with `# sentence K: M unique trees from D draws` (M < J when the sentence
has fewer distinct trees than J can find within the cap), then each tree after its `# log_q = X` line (log q(y | x),
natural log), most probable first. Bracketed trees take one line each; dependency trees are CoNLL-U analyses, each
with `# sent_id = K` (K the sentence's number in the data, from 1), which groups a sentence's analyses.

The journal `<file>.journal.jsonl` (hf_slm/runs/journal.py) keeps each drawn sentence as soon as its chunk is done:
its header is the parser's weights, the data's words, J, the cap and the seed, so a rerun with the same ones draws
only what is missing (or nothing, and writes the same file), and another one is refused unless `overwrite`. Each
sentence's draws depend on the seed and its index only (hf_slm/parsers/parser.py), so a resumed run, another batch
size or torchrun's processes give the same trees (another batch size: their log q equal to float rounding, as the
encoder's sums run over other shapes).
"""

import hashlib
import json
from pathlib import Path

import numpy as np

from ..runs.distributed import is_main_process, main_process_context
from ..runs.journal import RunJournal, map_in_chunks, output_lock, text_fingerprint

JOURNAL_SUFFIX = ".journal.jsonl"


def _file_header(parser, num, max_draws, seed, data):
    fingerprint = parser.fingerprint()
    return [f"# proposal trees drawn by hf-slm: {parser.describe()} (parameters sha256 "
            f"{fingerprint['parameters_sha256'][:16]}), J = {num} unique trees per sentence, at most {max_draws} "
            f"draws, seed {seed}", f"# data: {data}"]


def _block(index, drawn, dependency, sent_id=None):
    """A sentence's block. Dependency: CoNLL-U analyses, each ended by a blank line, the comments before an analysis
    its own (so the block's first comment belongs to its first analysis), `# sent_id` the sentence's own when the
    data gives one (a gold file's, which reranking checks), else its number. Bracketed: comment and tree lines."""
    lines = [f"# sentence {index + 1}: {len(drawn['trees'])} unique trees from {drawn['draws']} draws"]
    for tree, log_q in zip(drawn["trees"], drawn["log_q"]):
        if dependency:
            lines += [f"# sent_id = {sent_id if sent_id is not None else index + 1}", f"# log_q = {log_q:.6f}", tree,
                      ""]
        else:
            lines += [f"# log_q = {log_q:.6f}", tree]
    return "\n".join(lines) + "\n"


def write_proposal_file(path, drawn, header_lines, dependency, sent_ids=None):
    """Write the blocks `drawn` ({"trees", "log_q", "draws"} per sentence) beside, then rename into `path`: blocks
    separated by blank lines (CoNLL-U analyses each end with one already, and the header's comments belong to the
    first analysis). sent_ids: each sentence's, for CoNLL-U (default: its number)."""
    path = Path(path)
    sent_ids = sent_ids or [None] * len(drawn)
    blocks = [_block(index, block, dependency, sent_id) for index, (block, sent_id) in enumerate(zip(drawn, sent_ids))]
    text = "\n".join(header_lines) + "\n" + ("" if dependency else "\n") + ("" if dependency else "\n").join(blocks)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
    return path


def draw_proposals(parser, sentences, output, num=300, max_draws=None, seed=0, batch_size=32, data="sentences",
                   overwrite=False, progress=True, sent_ids=None):
    """Draw `num` unique trees per sentence with `parser` (a ProposalParser) into the proposal file `output` (module
    docstring); `sent_ids`: the sentences' own ids, which a CoNLL-U file names them by (default: their numbers).
    Returns the record the results keep: the parser, J, the cap, the seed, the file and how many trees the
    sentences got."""
    max_draws = 10 * num if max_draws is None else max_draws
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    words = [list(sentence) for sentence in sentences]
    header = {"run": "proposals", "parser": parser.fingerprint(), "num": num, "max_draws": max_draws, "seed": seed,
              "sentences": text_fingerprint(json.dumps(words))}
    # Under torchrun the processes share the sentences (map_in_chunks); the main process alone locks the folder,
    # keeps the journal and writes the file.
    with main_process_context(output_lock(output.parent), f"locking {output.parent}"):
        journal = RunJournal(output.with_name(output.name + JOURNAL_SUFFIX), header, overwrite=overwrite) \
            if is_main_process() else None
        try:
            def compute(chunk):
                return parser.draw([words[index] for index in chunk], num, max_draws, seed, indices=chunk,
                                   batch_size=batch_size)

            indices = list(range(len(words)))
            drawn = map_in_chunks(compute, indices, batch_size, journal, keys=[str(index) for index in indices],
                                  progress=progress, desc="proposals", unit="sentence")
        finally:
            if journal is not None:
                journal.close()
        if is_main_process():
            write_proposal_file(output, drawn, _file_header(parser, num, max_draws, seed, data),
                                parser.kind.tree_kind == "dependency", sent_ids)
    counts = [len(block["trees"]) for block in drawn]
    return {"parser": parser.source, **parser.fingerprint(), "num": num, "max_draws": max_draws, "seed": seed,
            "file": str(output), "sentences": len(counts),
            "trees_per_sentence": {"min": min(counts), "max": max(counts), "mean": float(np.mean(counts))},
            "sentences_short_of_num": sum(count < num for count in counts)}


def proposal_file_name(parser, data_name, num, seed):
    """`proposals-<data>-<kind>-<weights' sha256, 8 digits>-J<num>-seed<seed>.<txt|conllu>`: the file a parser's
    proposals for some data get in a results folder (another parser, J or seed gets another file)."""
    fingerprint = parser.fingerprint()
    suffix = "conllu" if parser.kind.tree_kind == "dependency" else "txt"
    digest = hashlib.sha256(fingerprint["parameters_sha256"].encode()).hexdigest()[:8]
    return f"proposals-{data_name}-{parser.kind.name}-{digest}-J{num}-seed{seed}.{suffix}"
