"""A proposal parser at work: a checkpoint and its tokenizer that parse sentences and draw proposal trees.

`load_parser(name)` loads a parser checkpoint (a local folder or a hub id) through the Auto classes, as a user
would without hf-slm, and `ProposalParser` wraps it:
- `best(sentences)`: each sentence's most probable tree, written as the parser's trees are (`tree_format`), with its
  log q(y | x) in nats;
- `draw(sentences, num, max_draws, seed)`: J unique trees per sentence drawn without replacement, as paper 000's
  footnote 4 describes its proposals: exact samples from q(y | x) (modeling/span_crf.py, modeling/projective_crf.py)
  are drawn in rounds and duplicates dropped until `num` distinct trees are found or `max_draws` samples were drawn
  (a short sentence may have fewer distinct trees than asked for: its block says how many it got). Each sentence
  draws from a generator of its own, seeded by `seed` and the sentence's index, so its trees do not depend on
  what else is in its batch, on the chunking of a resumed run, or on the number of processes.
Sentences are batched by length (`batch_size` per forward pass) and checked first: a sentence must have words.
"""

import hashlib
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..runs.journal import model_fingerprint
from ..search.beam import sentence_words
from .kinds import is_parser_config, kind_of_config, parser_model_types

# Samples drawn per round for a sentence still short of `num` distinct trees: at least this many, else what it
# still needs (a sentence whose first round gave few new trees has a peaked q, and a bigger round finds more).
MIN_ROUND = 16


def load_parser(name):
    """(model, tokenizer) of a proposal parser checkpoint, a folder or a hub id; a ValueError saying what was
    expected when it is no parser (an LM checkpoint names the option it belongs to)."""
    from transformers import AutoModel, AutoTokenizer

    from ..checkpoints.loading import HUB_ID, check_checkpoint_folder, load_hub_checkpoint

    name = str(name)
    if Path(name).exists() or not HUB_ID.match(name):
        check_checkpoint_folder(name, model_types=parser_model_types(), what="a proposal parser (hf-slm parser train)")
    model, tokenizer = load_hub_checkpoint(name, AutoModel, AutoTokenizer)
    if not is_parser_config(model.config):
        raise ValueError(f"{name} is a {model.config.model_type} model, not a proposal parser; expected a checkpoint "
                         f"of `hf-slm parser train` ({', '.join(parser_model_types())})")
    check_parser_tokenizer(model.config, tokenizer, name)
    return model.eval(), tokenizer


def is_parser_checkpoint(name):
    """Whether a checkpoint folder or hub id holds a proposal parser (its config's model_type), not a language
    model."""
    import json

    config = Path(str(name)) / "config.json"
    if config.is_file():
        try:
            return is_parser_config(json.loads(config.read_text(encoding="utf-8")))
        except ValueError:
            return False  # the loader that reads it next says what is wrong with it
    if Path(str(name)).exists():
        return False
    from transformers import AutoConfig

    return is_parser_config(AutoConfig.from_pretrained(str(name), trust_remote_code=True))


def load_tree_source(name):
    """(model, tokenizer) of a checkpoint that gives trees: a proposal parser (`load_parser`) or a language model
    (hf_slm.checkpoints.loading.load_checkpoint), as its config says; each parses through its own Scorer."""
    if is_parser_checkpoint(name):
        return load_parser(name)
    from ..checkpoints.loading import load_checkpoint

    return load_checkpoint(name)


def check_parser_tokenizer(config, tokenizer, source="parser"):
    """Raise ValueError unless the tokenizer's vocabularies are the ones the config was built from."""
    expected = getattr(config, "vocabulary_fingerprint", None)
    found = getattr(tokenizer, "vocabulary_fingerprint", None)
    if expected is not None and expected != found:
        raise ValueError(f"{source}: the tokenizer's vocabularies (fingerprint {found}) are not those the parser was "
                         f"trained with ({expected}); expected the tokenizer saved with the parser")


def sentence_seed(seed, index):
    """The seed of sentence `index`'s generator: a hash of both, so that neighbouring seeds share no sentence's."""
    return int(hashlib.sha256(f"{seed}:{index}".encode()).hexdigest()[:15], 16)


class ProposalParser:
    """A loaded proposal parser (module docstring): model (a ProposalParserPreTrainedModel) and its tokenizer."""

    def __init__(self, model, tokenizer, source=None):
        check_parser_tokenizer(model.config, tokenizer, source or "parser")
        self.model, self.tokenizer = model.eval(), tokenizer
        self.kind = kind_of_config(model.config)
        self.source = str(source or getattr(model.config, "_name_or_path", "") or "parser")

    @classmethod
    def load(cls, name):
        model, tokenizer = load_parser(name)
        return cls(model, tokenizer, source=name)

    @property
    def tree_format(self):
        """The TreeFormat name of the trees it writes (its kind's)."""
        return self.kind.tree_format

    def fingerprint(self):
        """{"kind", "parameters_sha256"}: the parser by its weights (journals and results record it)."""
        return {"kind": self.kind.name, "parameters_sha256": model_fingerprint(self.model)["parameters_sha256"]}

    def describe(self):
        return f"the {self.kind.name} proposal parser {self.source}"

    def check_serves(self, tree_format_name, what):
        """Refuse to draw trees for a model whose trees are of another kind, naming the kind that fits."""
        if not self.kind.serves(tree_format_name):
            from .kinds import parser_kinds

            fitting = [kind.name for kind in parser_kinds() if kind.serves(tree_format_name)]
            raise ValueError(f"{what} reads {tree_format_name} trees, but {self.describe()} draws {self.tree_format} "
                             f"trees; expected a parser of kind {' or '.join(fitting)} (hf-slm parser train --kind)")

    def _inputs(self, sentences):
        encoded = self.tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
        return {key: value.to(self.model.device) for key, value in encoded.items()}

    def write(self, words, structure, dependency_format="conllu"):
        """A structure as the parser's tree format writes it (a dependency tree in CoNLL-U, with its relations, or
        inline, `The/2 bird/3 sings/0`)."""
        return self.tokenizer.decode_tree(words, structure, dependency_format=dependency_format)

    def _batches(self, sentences, batch_size):
        """(indices, their sentences) in batches of similar lengths (the longest sentence sets a batch's cost)."""
        order = sorted(range(len(sentences)), key=lambda index: len(sentences[index]))
        for start in range(0, len(order), batch_size):
            indices = order[start : start + batch_size]
            yield indices, [sentences[index] for index in indices]

    def best(self, sentences, batch_size=32, progress=False, dependency_format="inline"):
        """Per sentence (a list of words or a string), (its most probable tree, log q(y | x) in nats); a dependency
        tree inline (`The/2 bird/3 sings/0`, what a dependency model's parse gives) or in CoNLL-U."""
        sentences = [self._words(sentence, index) for index, sentence in enumerate(sentences)]
        found = [None] * len(sentences)
        with tqdm(total=len(sentences), desc="parsing", unit="sentence", disable=not progress) as bar:
            for indices, batch in self._batches(sentences, batch_size):
                for index, words, structure in zip(indices, batch, self.model.best_structures(**self._inputs(batch))):
                    found[index] = (self.write(words, structure, dependency_format), structure["log_prob"])
                bar.update(len(indices))
        return found

    def _words(self, sentence, index):
        words = sentence_words(sentence, f"sentence {index + 1}")
        if not words:
            raise ValueError(f"sentence {index + 1} is empty; expected at least one word")
        return words

    def draw(self, sentences, num, max_draws=None, seed=0, indices=None, batch_size=32):
        """Per sentence {"trees", "log_q", "draws"}: up to `num` distinct trees sampled from q(y | x) (module
        docstring), most probable first, each with log q(y | x) in nats, and the number of samples drawn.

        max_draws: the most samples drawn for one sentence (default 10 * num). indices: each sentence's index in its
        data (what seeds its generator; default its position in `sentences`)."""
        if not isinstance(num, int) or num < 1:
            raise ValueError(f"num {num!r}: expected a positive number of trees per sentence")
        max_draws = 10 * num if max_draws is None else max_draws
        if not isinstance(max_draws, int) or max_draws < num:
            raise ValueError(f"max_draws {max_draws!r}: expected at least num ({num}) samples per sentence")
        sentences = [self._words(sentence, index) for index, sentence in enumerate(sentences)]
        indices = list(range(len(sentences))) if indices is None else list(indices)
        device = self.model.device
        generators = [torch.Generator(device=device).manual_seed(sentence_seed(seed, index)) for index in indices]
        found = [{} for _ in sentences]  # per sentence: tree -> log q, in the order first drawn
        draws = [0] * len(sentences)
        pending = list(range(len(sentences)))
        while pending:
            # this round: each pending sentence draws what it still needs (at least MIN_ROUND), within its cap
            rounds = {index: min(max(num - len(found[index]), MIN_ROUND), max_draws - draws[index])
                      for index in pending}
            for size in sorted(set(rounds.values())):
                group = [index for index in pending if rounds[index] == size]
                for start in range(0, len(group), batch_size):
                    batch = group[start : start + batch_size]
                    samples = self.model.sample_structures(size, generator=[generators[i] for i in batch],
                                                           **self._inputs([sentences[i] for i in batch]))
                    for index, drawn in zip(batch, samples):
                        for structure in drawn:
                            found[index].setdefault(self.write(sentences[index], structure), structure["log_prob"])
                        draws[index] += size
            pending = [index for index in pending if len(found[index]) < num and draws[index] < max_draws]
        results = []
        for trees, count in zip(found, draws):
            # the first `num` distinct trees drawn, then the most probable first (a block's first tree is the one a
            # reranker reports as the parser's own choice)
            kept = sorted(list(trees.items())[:num], key=lambda item: -item[1])
            results.append({"trees": [tree for tree, _ in kept], "log_q": [log_q for _, log_q in kept],
                            "draws": count})
        return results
