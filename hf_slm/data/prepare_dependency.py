"""What `hf-slm data prepare` does differently for dependency grammars (paper 002): every other step (the
output layout, saving and journaling each split, resuming, prepare.json) is prepare.py's.

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
                "vocab_size": self.vocab_size or DEFAULT_VOCAB_SIZE, "max_k": self.max_k,
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
        vocab_size = self.vocab_size or DEFAULT_VOCAB_SIZE
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

    def record(self, tokenizer):
        """prepare.json's entry for dependency data."""
        return {"grammar": self.grammar, "transition_system": tokenizer.transition_system,
                "max_k": tokenizer.max_k, "variant": tokenizer.variant}


def dependency_preparation(loader, tokenizer, tokenizer_dir, grammar=None, vocab_size=None, max_k=None,
                           variant=None):
    """The settings of a dependency prepare, or None for a plain one (trees, or words under a words-only
    tokenizer). `tokenizer` is the one loaded from `tokenizer_dir`, None when none was given. Errors name the
    option that does not fit."""
    given = [name for name, value in (("--vocab-size", vocab_size), ("--max-k", max_k), ("--variant", variant))
             if value is not None]
    if grammar is not None:
        grammars = transition_grammars()
        if grammar not in grammars:
            from ..families import grammar_class

            grammar_class(grammar)  # an unknown name: the error lists every grammar
            raise ValueError(f"--grammar {grammar}: prepare encodes dependency trees for the grammars that read "
                             f"transition sequences ({', '.join(grammars)}); {grammar} reads bracketed trees "
                             "(prepare them with the tokenizer --tokenizer names)")
        if loader != DEPENDENCY_LOADER:
            raise ValueError(f"--grammar {grammar} reads dependency trees: use --loader {DEPENDENCY_LOADER}, not "
                             f"{loader}")
    elif loader != DEPENDENCY_LOADER or (tokenizer is not None and not is_dependency_tokenizer(tokenizer)):
        if given:
            raise ValueError(f"{', '.join(given)} apply to dependency data (--loader {DEPENDENCY_LOADER} --grammar "
                             "dtg|dtg_eager|dtg_swift)")
        if tokenizer is None:
            raise ValueError(f"the {loader} loader needs --tokenizer (only --grammar trains a tokenizer, a "
                             "DependencyTokenizer, for dependency data)")
        return None  # bracketed trees, or the words of CoNLL-U sentences under a words-only tokenizer
    elif tokenizer is None:
        raise ValueError("--loader conllu without --tokenizer: pass --grammar (dtg, dtg_eager or dtg_swift) to train "
                         "a DependencyTokenizer on the training split, or --tokenizer")
    preparation = DependencyPreparation(grammar=grammar, vocab_size=vocab_size, max_k=max_k, variant=variant)
    if tokenizer is not None:
        preparation.check_tokenizer(tokenizer, tokenizer_dir)
    else:  # the tokenizer's own checks, before the data is read
        from ..tokenization.tokenization_dependency import check_options

        check_options(preparation.transition_system, max_k or 1, variant or "paper")
    return preparation
