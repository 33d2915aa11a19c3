"""Class 1 of issue 12: option values are honoured or refused, never silently replaced; a string where a list
is expected is a TypeError."""

import hf_slm
from hf_slm.families.action_vocab import ActionVocabulary

from mistake_cases import ApiCase, CliCase

GUM_SAMPLE = hf_slm.__file__.replace("__init__.py", "sample_data/gum/train.txt")


def _no_model_written(result, tmp):
    assert not (tmp / "out" / "config.json").exists()


CASES = [
    *[CliCase(f"parse {option} 0 is refused, not ignored", ["parse", "--model", "{model}", option, "0", "the bird sings ."],
              message=f"argument {option}: expected a positive integer, got 0$")
      for option in ("--max-nonterminals", "--max-consecutive-open")],
    CliCase("train --set with a misspelled field", ["train", "--preset", "tg-ptb", "--train", GUM_SAMPLE, "--output", "{tmp}/out",
                                                     "--set", "num_hiden_layers=7", "--max-steps", "1"],
            message="num_hiden_layers.*did you mean num_hidden_layers", check=_no_model_written),
    *[ApiCase(f"hf_slm.{call} given one string", lambda model, tokenizer, tmp, directory, call=call:
              getattr(hf_slm, call)(model, tokenizer, "the bird sings .", progress=False),
              TypeError, r"got one string; wrap it in a list: \['the bird sings .'\]") for call in ("score", "parse")],
    ApiCase("score_documents given a document that is a string", lambda model, tokenizer, tmp, directory:
            hf_slm.search.beam.score_documents(model, tokenizer, ["the bird sings ."], progress=False),
            TypeError, "document 0 must be a list of sentences"),
    *[ApiCase(f"action vocabulary given the word {word}", lambda model, tokenizer, tmp, directory, word=word:
              ActionVocabulary.from_action_sequences([["(S", "the", word, "S)"]]),
              ValueError, f"'{word}'.*special tokens") for word in ("<s>", "</s>", "<pad>")],
    ApiCase("generate given a negative top_k", lambda model, tokenizer, tmp, directory:
            model.generate(do_sample=True, top_k=-1, max_new_tokens=3, tokenizer=tokenizer),
            ValueError, "top_k must be a non-negative integer"),
]
