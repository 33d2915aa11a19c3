"""Training data for Syntactic Ordered Memory: sentences with their gold tree, and the collator for Trainer.

A SOM example is the token ids the model reads (`<s>`, the pieces of the words, `</s>`) and, for each token,
Algorithm 1's first_sibling in the gold tree Gamma (paper 001, section 3.3; see modeling/som_structure.py and
tokenization/som_trees.py): that is all of the tree the structural loss needs, because the labels themselves
depend on the model's decisions and are computed inside forward.

- `som_example(tokenizer, words, heads)`: one feature {"input_ids", "som_first_siblings"} from a dependency
  tree (CoNLL-U's words and 1-based heads; non-projective trees are lifted first), or from a constituency tree,
  or with Table 2's left-branching labels (`tree="left_branching"`).
- `SyntacticOrderedMemoryCollator`: pads features into input_ids, attention_mask, labels and
  som_first_siblings tensors (right padding; -1 marks "no first sibling").
- `check_som_tokenizer(config, tokenizer)`: the family's tokenizer check (Family.check_tokenizer).
"""

import torch

from ...tokenization.dependency_trees import lift_to_projective
from ...tokenization.som_trees import (
    dependency_to_constituency,
    left_binarize,
    left_branching_tree,
    piece_first_siblings,
    token_first_siblings,
)
from ...tokenization.tree_type import Tree

TREE_KINDS = ("dependency", "left_branching")
NO_SIBLING = -1


def check_som_tokenizer(config, tokenizer):
    """Raise ValueError naming every way `tokenizer` disagrees with a SOM `config` (ids and vocabulary)."""
    problems = []
    if len(tokenizer) > config.vocab_size:
        problems.append(f"the tokenizer has {len(tokenizer)} ids but the model's vocab_size is {config.vocab_size}")
    for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if getattr(tokenizer, name, None) != getattr(config, name, None):
            problems.append(f"{name} is {getattr(tokenizer, name, None)} in the tokenizer but "
                            f"{getattr(config, name, None)} in the model config")
    trained_with = getattr(config, "vocabulary_fingerprint", None)
    fingerprint = getattr(tokenizer, "vocabulary_fingerprint", None)
    if trained_with and fingerprint and fingerprint != trained_with:
        problems.append(f"the tokenizer's vocabulary (fingerprint {fingerprint}) is not the one the model was trained "
                        f"with ({trained_with})")
    if problems:
        raise ValueError("tokenizer and model do not match: " + "; ".join(problems))


def gold_tree(words, heads=None, tree="dependency", where="sentence"):
    """Gamma of one sentence (left-binarized): from dependency heads (lifted when non-projective), or the
    left-branching tree of Table 2's ablation."""
    if tree not in TREE_KINDS:
        raise ValueError(f"tree is {tree!r}; expected one of {TREE_KINDS}")
    if tree == "left_branching":
        return left_branching_tree(words)
    if heads is None:
        raise ValueError(f"{where}: tree='dependency' needs heads (one 1-based head per word, 0 for the root)")
    heads, _ = lift_to_projective(list(heads))
    return left_binarize(dependency_to_constituency(words, heads, where))


def som_example(tokenizer, words=None, heads=None, tree="dependency", constituency=None, eos=True, where="sentence"):
    """{"input_ids": [<s>, pieces..., </s>], "som_first_siblings": [...]} for one sentence.

    words, heads: a dependency tree (CoNLL-U columns); or `constituency`: an nltk Tree whose leaves are the words
    (binarized here, left-branching); tree="left_branching" ignores the heads. eos: end with `</s>`, which
    the model then learns to predict; it closes the whole sentence in the grid.
    """
    if constituency is not None:
        if not isinstance(constituency, Tree):
            raise ValueError(f"{where}: constituency is a {type(constituency).__name__}; expected an nltk Tree")
        gamma, words = left_binarize(constituency), constituency.leaves()
    else:
        if not words:
            raise ValueError(f"{where}: no words; expected a non-empty list of words")
        gamma = gold_tree(words, heads, tree, where)
    encoded = tokenizer(list(words), is_split_into_words=True, return_word_starts=True)
    ids, starts = list(encoded["input_ids"]), list(encoded["word_starts"])
    pieces = [1]  # <s>
    for start in starts[1:]:
        if start:
            pieces.append(1)
        else:
            pieces[-1] += 1
    if len(pieces) != len(words) + 1:
        raise ValueError(f"{where}: the tokenizer gave {len(pieces) - 1} words for {len(words)}; expected one each")
    first_siblings = token_first_siblings(gamma, bos=True, eos=eos)
    if eos:
        ids.append(tokenizer.eos_token_id)
        pieces.append(1)
    siblings = piece_first_siblings(first_siblings, pieces)
    return {"input_ids": ids, "som_first_siblings": [NO_SIBLING if s is None else s for s in siblings]}


class SyntacticOrderedMemoryCollator:
    """Collate SOM features into model inputs (right padding):

        input_ids          [B, T] long, padded with the pad id
        attention_mask     [B, T] long, 1 for real tokens
        labels             [B, T] long, input_ids with -100 on padding (the model shifts them)
        som_first_siblings [B, T] long, first_sibling(t) as a token index, -1 for the first token and padding

    Features are dicts with "input_ids" and "som_first_siblings" (som_example), raw sentences with "words"
    and "heads" (converted here with `tokenizer`), or id sequences. Features without "som_first_siblings" train the
    LM only.
    """

    def __init__(self, tokenizer=None, pad_token_id=0, tree="dependency", eos=True):
        self.tokenizer, self.tree, self.eos = tokenizer, tree, eos
        self.pad_token_id = tokenizer.pad_token_id if tokenizer is not None else pad_token_id

    def _feature(self, feature, index):
        if not isinstance(feature, dict):  # a sequence of ids, as the other families' collators take them
            return {"input_ids": [int(i) for i in feature]}
        if "input_ids" in feature:
            return feature
        if "words" not in feature:
            raise ValueError(f"feature {index} has keys {sorted(feature)}; expected input_ids (+ som_first_siblings) "
                             "or words and heads")
        if self.tokenizer is None:
            raise ValueError("SyntacticOrderedMemoryCollator needs a tokenizer to convert words and heads")
        return som_example(self.tokenizer, feature["words"], feature.get("heads"), self.tree, eos=self.eos,
                           where=f"feature {index}")

    def __call__(self, features):
        features = [self._feature(feature, index) for index, feature in enumerate(features)]
        if not features:
            raise ValueError("SyntacticOrderedMemoryCollator got an empty batch")
        length = max(len(feature["input_ids"]) for feature in features)
        input_ids = torch.full((len(features), length), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(features), length), dtype=torch.long)
        first_siblings = torch.full((len(features), length), NO_SIBLING, dtype=torch.long)
        with_structure = ["som_first_siblings" in feature for feature in features]
        if any(with_structure) and not all(with_structure):
            raise ValueError("some features have som_first_siblings and some do not; expected all or none")
        for row, feature in enumerate(features):
            ids = list(feature["input_ids"])
            input_ids[row, :len(ids)] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, :len(ids)] = 1
            if with_structure[row]:
                siblings = list(feature["som_first_siblings"])
                if len(siblings) != len(ids):
                    raise ValueError(f"feature {row}: {len(siblings)} som_first_siblings for {len(ids)} input_ids; "
                                     "expected one per token")
                first_siblings[row, :len(ids)] = torch.tensor(siblings, dtype=torch.long)
        batch = {"input_ids": input_ids, "attention_mask": attention_mask,
                 "labels": input_ids.masked_fill(attention_mask == 0, -100)}
        if all(with_structure):
            batch["som_first_siblings"] = first_siblings
        return batch


def collator_for_model(model, tokenizer=None, **options):
    """SOM's Family.collator: the SyntacticOrderedMemoryCollator that trains `model` with transformers.Trainer
    (features with som_first_siblings, or words and heads converted with `tokenizer`); without a tokenizer it pads
    with the model's pad id (scoring id sequences: hf_slm.joint_log_probs)."""
    options.setdefault("pad_token_id", model.config.pad_token_id)
    return SyntacticOrderedMemoryCollator(tokenizer, **options)
