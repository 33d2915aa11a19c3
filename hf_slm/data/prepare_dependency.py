"""The dependency families' data preparation (paper 002's DTG and TXL (trans); their records name it as
`Family.preparation`): what `hf-slm data prepare` does differently for them. Every other step (the output layout,
saving and journaling each split, resuming, prepare.json) is hf_slm/data/prepare.py's.

    hf-slm data prepare --loader conllu --grammar dtg --path ud_english_ewt --non-projective lift \
        --vocab-size 2000 --output runs/ewt-dtg
    hf-slm train --preset dtg-tiny --train runs/ewt-dtg --output runs/dtg

- The data: a CoNLL-U treebank (the conllu loader). Its sentences become `input_ids`, the transition sequence
  of each tree as a `DependencyTokenizer` encodes it (`<root>`, the oracle's transitions with each word as its
  pieces, `</s>`), instead of the words alone.
- Projectivity: the grammars build projective trees only, so `non_projective` defaults to "error" (naming the
  sentence and two crossing arcs); "skip" and "lift" are the loader's (hf_slm/data/conllu_loader.py); "keep" is
  refused, as no transition sequence exists for a non-projective tree.
- The tokenizer: a saved DependencyTokenizer (`--tokenizer`) is reused as it is; without one, a tokenizer is
  trained on the `train` split (after the projectivity policy) with `vocab_size` pieces, the grammar's
  transition system, `max_k` (arc-swift; default: the largest k the training trees need) and `variant`, and
  saved in `<output>/tokenizer/`. It is journaled like a split: a prepare interrupted after training it
  reloads it instead of training again, so the splits saved before and after the interruption share its ids.
  Pass `--tokenizer <output>/tokenizer` to prepare more data (another treebank's test set) with the same ids.
- A DependencyTokenizer given without a grammar implies one: its transition system says which.
"""

from dataclasses import dataclass
from pathlib import Path

from ..option_types import or_default, positive_int

DEPENDENCY_LOADER = "conllu"
# Transition sequences exist for projective trees only: the loader's default, "keep", would fail at encoding.
DEFAULT_NON_PROJECTIVE = "error"
# Paper 000's BLLIP vocabulary, which paper 002 reuses ("the same scheme as Sartran et al. (2022)"); a small
# treebank yields fewer pieces (SentencePiece's limit is soft).
DEFAULT_VOCAB_SIZE = 32768
TOKENIZER_KEY = "tokenizer"  # the journal entry of a tokenizer trained by the prepare


def is_dependency_tokenizer(tokenizer):
    """Whether `tokenizer` encodes dependency trees: a DependencyTokenizer, this package's or a checkpoint's own
    copy of it (remote code loads its own module), known by its layout's root token."""
    from ..tokenization.tokenization_dependency import DependencyTokenizer

    return isinstance(tokenizer, DependencyTokenizer) or "root_token_id" in getattr(tokenizer, "action_layout", {})


def transition_grammars():
    """{grammar name: transition system} of every grammar that reads a DependencyTokenizer's sequences (dtg,
    dtg_eager, dtg_swift, and the baselines over the same sequences)."""
    from ..families import grammar_class, grammar_names
    from ..modeling.dependency_grammars import SYSTEMS

    return {name: grammar_class(name).linearization for name in grammar_names()
            if grammar_class(name).linearization in SYSTEMS}


def encode_dependency_trees(batch, tokenizer):
    """input_ids of each sentence's dependency tree (CoNLL-U): its transition sequence."""
    from ..tokenization.dependency_trees import DependencyTree
    from .prepare import locate_error

    ids = []
    for position, (words, heads) in enumerate(zip(batch["words"], batch["heads"])):
        try:
            ids.append(tokenizer(DependencyTree(words, heads))["input_ids"])
        except ValueError as error:
            raise locate_error(error, batch, position, "tree", unit="sentence") from error
    return {"input_ids": ids}


@dataclass
class DependencyPreparation:
    """The dependency-specific settings of one prepare (module docstring); `grammar` None: the one the given
    tokenizer implies."""

    grammar: str | None = None
    vocab_size: int | None = None
    max_k: int | None = None
    variant: str | None = None

    @property
    def transition_system(self):
        return transition_grammars()[self.grammar] if self.grammar else None

    def check_tokenizer(self, tokenizer, tokenizer_dir):
        """Raise ValueError where a given tokenizer contradicts the settings; fill in the grammar it implies."""
        where = f"tokenizer {str(tokenizer_dir)!r}"
        if not is_dependency_tokenizer(tokenizer):
            raise ValueError(f"{where} is a {type(tokenizer).__name__}; --grammar {self.grammar} needs a "
                             "DependencyTokenizer (or no --tokenizer, to train one on the training split)")
        if self.vocab_size is not None:
            raise ValueError(f"--vocab-size applies when a tokenizer is trained (no --tokenizer); {where} has "
                             f"{len(tokenizer)} ids already")
        if self.grammar is None:
            self.grammar = next(name for name, system in transition_grammars().items()
                                if system == tokenizer.transition_system)
        elif tokenizer.transition_system != self.transition_system:
            raise ValueError(f"{where} encodes {tokenizer.transition_system} transitions; the {self.grammar} grammar "
                             f"reads {self.transition_system}")
        for name, given in (("max_k", self.max_k), ("variant", self.variant)):
            if given is not None and getattr(tokenizer, name) != given:
                raise ValueError(f"{where} has {name} {getattr(tokenizer, name)!r}, not {given!r}; leave the option "
                                 "out, or leave --tokenizer out to train a tokenizer with it")

    def loader_options(self, options):
        """The conllu loader's options with the projectivity policy DTG needs."""
        options = dict(options)
        policy = options.setdefault("non_projective", DEFAULT_NON_PROJECTIVE)
        if policy == "keep":
            raise ValueError(f"non_projective 'keep': the {self.grammar} grammar reads projective trees only; "
                             "choose error, skip or lift")
        return options

    def journal_entry(self):
        """What a trained tokenizer depends on, for the journal header (a given one: its files' fingerprint)."""
        return {"trained_on": "train", "grammar": self.grammar, "transition_system": self.transition_system,
                "vocab_size": or_default(self.vocab_size, DEFAULT_VOCAB_SIZE), "max_k": self.max_k,
                "variant": self.variant or "paper"}

    def trained_tokenizer(self, dataset, output, journal, log):
        """The tokenizer trained on `dataset["train"]`, or the one an interrupted run of this prepare trained."""
        from ..tokenization.tokenization_dependency import DependencyTokenizer
        from .prepare import TOKENIZER_FOLDER

        folder = Path(output) / TOKENIZER_FOLDER
        if TOKENIZER_KEY in journal.finished and (folder / "tokenizer_config.json").is_file():
            log(f"reusing the tokenizer an earlier run of this prepare trained ({folder})")
            return DependencyTokenizer.from_pretrained(str(folder))
        if "train" not in dataset:
            raise ValueError(f"no train split to train a tokenizer on (splits: {list(dataset)}); pass --tokenizer")
        train = dataset["train"]
        vocab_size = or_default(self.vocab_size, DEFAULT_VOCAB_SIZE)
        log(f"training a DependencyTokenizer for {self.transition_system} transitions ({vocab_size} pieces requested) "
            f"on {len(train):,} training trees")
        trees = ({"words": words, "heads": heads} for batch in train.select_columns(["words", "heads"]).iter(1000)
                 for words, heads in zip(batch["words"], batch["heads"]))
        # The loader has applied the projectivity policy already: every tree here is projective.
        tokenizer = DependencyTokenizer.train(trees, vocab_size=vocab_size, transition_system=self.transition_system,
                                              max_k=self.max_k, variant=self.variant or "paper")
        tokenizer.save_pretrained(str(folder))
        journal.record([(TOKENIZER_KEY, {"ids": len(tokenizer), "max_k": tokenizer.max_k})])
        return tokenizer

    encode = staticmethod(encode_dependency_trees)
    id_columns = ("input_ids",)
    record_key = "dependency"  # prepare.json's entry (training reads it: the ids are trees)

    def record(self, tokenizer):
        """prepare.json's entry for dependency data."""
        return {"grammar": self.grammar, "transition_system": tokenizer.transition_system,
                "max_k": tokenizer.max_k, "variant": tokenizer.variant}


class DependencyDataPreparation:
    """The hook hf_slm/data/prepare.py runs for the dependency families (its "Family preparations")."""

    loader = DEPENDENCY_LOADER
    description = "dependency data"
    options = ("vocab_size", "max_k", "variant")
    record_key = DependencyPreparation.record_key

    def add_arguments(self, parser):
        """The `hf-slm data prepare` flags of `options`."""
        parser.add_argument("--vocab-size", type=positive_int,
                            help="--grammar without --tokenizer: word pieces of the tokenizer trained (default 32768)")
        parser.add_argument("--max-k", type=positive_int,
                            help="--grammar dtg_swift without --tokenizer: the largest LA[k] / RA[k] (default: the "
                                 "largest the training trees need; a larger k in another split is an error naming the "
                                 "sentence)")
        parser.add_argument("--variant", choices=["paper", "reference"],
                            help="--grammar dtg without --tokenizer: 'reference' encodes as the authors' released "
                                 "code (<s> as the root, pop_root)")

    def create(self, loader, tokenizer, tokenizer_dir, grammar=None, vocab_size=None, max_k=None, variant=None):
        """The settings of this prepare (`grammar` None: the one `tokenizer` implies). Errors name the option that
        does not fit."""
        if loader != DEPENDENCY_LOADER:
            raise ValueError(f"--grammar {grammar} reads dependency trees: use --loader {DEPENDENCY_LOADER}, not "
                             f"{loader}")
        preparation = DependencyPreparation(grammar=grammar, vocab_size=vocab_size, max_k=max_k, variant=variant)
        if tokenizer is not None:
            preparation.check_tokenizer(tokenizer, tokenizer_dir)
        else:  # the tokenizer's own checks, before the data is read
            from ..tokenization.tokenization_dependency import check_options

            check_options(preparation.transition_system, or_default(max_k, 1), variant or "paper")
        return preparation


DEPENDENCY_PREPARATION = DependencyDataPreparation()
