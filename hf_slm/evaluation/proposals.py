"""Proposal trees: per sentence, candidate trees in the model's own format, whose joint probabilities bound p(x)
from below (paper 000, 3.1): log p(x) >= logsumexp_j log p(x, y_j) over the sentence's distinct proposals, so a
perplexity computed from them is an upper bound.

A proposal file holds one block of trees per sentence, in the order of the data, in the format of the model's
trees (its Variant's `tree_format`, hf_slm/families/tree_formats.py), which reads the file:
- "brackets" (TG, TXL (CC)): one PTB tree per line, POS tags allowed, blocks separated by blank lines; each tree
  normalized with the tokenizer's options, as the tokenizer normalizes bracketed input;
- "unlabelled_brackets" (paper 003's variants): the same layout, each tree unlabelled `( ( The bird ) sings )` or
  labelled PTB brackets, which are normalized and unlabelled as the tokenizer's `unlabel` does;
- "dependency" (DTG, TXL (trans)): CoNLL-U, the analyses of one sentence consecutive (grouped by `# sent_id`, or
  by their words), or inline trees `There/2 is/0 a/4 difference/2` in blank-line separated blocks;
- "words": no trees (a model of words scores p(x) exactly).
Every proposal must spell its sentence. The model's Scorer must score given trees (`Scorer.scores_trees`); one
that cannot (SOM's) is refused by name. Perplexity (`eval ppl --proposals`) and BLiMP (`eval blimp
--proposals`) read and score proposals here; reranking (`eval rerank`, `eval uas --proposals`) reads its files
through the same formats.
"""

import numpy as np

from ..data.numbering import item_name, sentence_name
from ..families import variant_for_config
from ..families.tree_formats import ProposalBlock, tree_format
from ..search.search_scorer import joint_in_length_order


def logsumexp(values):
    values = np.asarray(values, dtype=np.float64)
    top = values.max()
    if not np.isfinite(top):
        return float(top)
    return float(top + np.log(np.exp(values - top).sum()))


def proposal_format(model):
    """The TreeFormat of the model's trees, which reads its proposal files."""
    return tree_format(variant_for_config(model.config).tree_format)


def check_scores_proposals(scorer, what="proposals"):
    """Refuse proposals for a scorer that does not score given trees, saying what it does instead."""
    if not scorer.scores_trees:
        instead = ("; its p(x) is exact without them" if scorer.log_prob_estimate == "exact" else "")
        raise ValueError(f"{what}: {scorer.describe()} does not score given trees{instead}; leave the proposals out")


def read_proposal_blocks(path, model, tokenizer, limit=None):
    """The ProposalBlocks of a proposal file in the model's format, at most `limit`, each tree as the tokenizer
    encodes it (TreeFormat.encodable), normalized with the tokenizer's options."""
    formatted = proposal_format(model)
    normalization = dict(getattr(tokenizer, "normalization", None) or {})
    return [ProposalBlock([formatted.encodable(tree) for tree in block.trees], block.locations, block.sent_id)
            for block in formatted.proposal_blocks(path, limit=limit, normalization=normalization)]


def read_proposals(path, normalization=None, limit=None, tree_format_name="brackets"):
    """The proposal trees of a file of `tree_format_name`, normalized with `normalization`: one list per block
    (sentence), in file order, at most `limit` blocks."""
    blocks = tree_format(tree_format_name).proposal_blocks(path, limit=limit, normalization=normalization or {})
    return [list(block.trees) for block in blocks]


def _trees_and_locations(block, index):
    if isinstance(block, ProposalBlock):
        return block.trees, block.locations
    return list(block), [f"{sentence_name(index)}, {item_name('proposal', j)}" for j in range(len(block))]


def check_proposal_words(sentences, proposals, source="proposals", tree_format_name="brackets"):
    """Raise ValueError unless there is one block per sentence and every proposal spells its sentence; errors name
    the file, the line (or analysis) and what a proposal file of the format holds."""
    formatted = tree_format(tree_format_name)
    if len(proposals) != len(sentences):
        raise ValueError(
            f"{source}: {len(proposals)} block(s) of proposal trees for {len(sentences)} sentence(s); expected one "
            f"block per sentence, in order ({formatted.proposal_description})"
        )
    for index, (words, block) in enumerate(zip(sentences, proposals)):
        trees, locations = _trees_and_locations(block, index)
        for j, (tree, location) in enumerate(zip(trees, locations)):
            leaves = list(formatted.words(tree))
            if leaves != list(words):
                position = next((k for k, (a, b) in enumerate(zip(leaves, words)) if a != b),
                                min(len(leaves), len(words)))
                raise ValueError(
                    f"{location}: {sentence_name(index)}, {item_name('proposal', j)} has the words {' '.join(leaves)!r} but the "
                    f"sentence is {' '.join(words)!r} (first difference at word {position}); expected the "
                    "same words in the same order"
                )


# Fields of a tokenizer's output that describe padding, not a sequence: the rest (input_ids, and a grammar's action
# inputs such as Nb-Up's constituent_starts) is what the model scores.
_PADDING_FIELDS = ("attention_mask", "token_type_ids")


def _encoded(tokenizer, trees, locations):
    """Per tree of a block, what the model scores: its ids, or a mapping of its ids and the grammar's action inputs
    where the tokenizer writes them; a tree the tokenizer refuses is named by its location."""
    try:
        encoded = tokenizer(list(trees))
    except ValueError:
        for tree, location in zip(trees, locations):
            try:
                tokenizer(tree)
            except ValueError as error:
                raise ValueError(f"{location}: {error}") from error
        raise
    fields = [key for key in encoded if key not in _PADDING_FIELDS and key != "input_ids"]
    if not fields:
        return [list(ids) for ids in encoded["input_ids"]]
    return [{key: list(encoded[key][row]) for key in ("input_ids", *fields)} for row in range(len(trees))]


def _identity(sequence):
    """Two proposals are one tree for the model when everything it reads of them is equal."""
    if isinstance(sequence, dict):
        return tuple((key, tuple(values)) for key, values in sorted(sequence.items()))
    return tuple(sequence)


def unique_proposal_ids(tokenizer, proposals, max_proposals=None):
    """Per sentence, the action ids (`<s>` first) of its distinct proposal trees, in file order (with a grammar's
    action inputs beside them, as {"input_ids", ...}, where the tokenizer writes any).

    Trees are distinct when what the model reads of them differs (two trees that differ only in POS tags are one
    tree for the model). With max_proposals, only the first that many distinct trees are kept.
    """
    unique = []
    for index, block in enumerate(proposals):
        trees, locations = _trees_and_locations(block, index)
        seen, kept = set(), []
        for sequence in _encoded(tokenizer, trees, locations) if trees else []:
            key = _identity(sequence)
            if key not in seen:
                seen.add(key)
                kept.append(sequence)
            if max_proposals is not None and len(kept) == max_proposals:
                break
        unique.append(kept)
    return unique


def log_probs_of_ids(model, unique, batch_size=32, progress=True):
    """Per sentence of `unique` (unique_proposal_ids): (logsumexp_j log p(x, y_j) over its distinct proposals,
    number of distinct proposals, index of the best one among them)."""
    flat = [ids for sentence in unique for ids in sentence]
    scores = joint_in_length_order(model, flat, batch_size, progress)
    results, start = [], 0
    for sentence in unique:
        values = scores[start : start + len(sentence)]
        start += len(sentence)
        results.append((logsumexp(values), len(values), int(np.argmax(values))))
    return results


def proposal_log_probs(model, tokenizer, proposals, batch_size=32, progress=True, max_proposals=None):
    """Per sentence: (logsumexp_j log p(x, y_j) over its distinct proposals, number of distinct proposals,
    index of the best one among them)."""
    return log_probs_of_ids(model, unique_proposal_ids(tokenizer, proposals, max_proposals), batch_size, progress)


__all__ = [
    "check_proposal_words",
    "check_scores_proposals",
    "log_probs_of_ids",
    "logsumexp",
    "proposal_format",
    "proposal_log_probs",
    "read_proposal_blocks",
    "read_proposals",
    "unique_proposal_ids",
]
