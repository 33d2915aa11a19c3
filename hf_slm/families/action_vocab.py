"""A throwaway vocabulary where every whitespace-separated action is one token.

The inspection CLI, benchmarks and tests use it to run a grammar on action strings without training a
subword tokenizer: `<pad> <s> </s> <unk>`, then the words, then `(X` and `X)` for every label.
"""

from ..modeling.grammars import ActionLayout
from ..tokenization.linearizers import close_label, is_close_nt, is_open_nt, open_label

SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>")


class ActionVocabulary:
    def __init__(self, words, labels):
        """`words` spelled `<unk>` are the unknown word (preprocessed corpora write it); the other special
        tokens cannot be words, since `<s>` or `</s>` inside a tree would read as a sequence boundary."""
        words = set(words)
        reserved = sorted(words & set(SPECIAL_TOKENS) - {"<unk>"})
        if reserved:
            raise ValueError(f"the word(s) {reserved} spell special tokens of the action vocabulary; rename them")
        self.labels = sorted(set(labels))
        tokens = list(SPECIAL_TOKENS) + sorted(words - {"<unk>"})
        self.open_nt_start = len(tokens)
        tokens += ["(" + label for label in self.labels]
        self.close_nt_start = len(tokens)
        tokens += [label + ")" for label in self.labels]
        self.tokens = tokens
        self.ids = {token: index for index, token in enumerate(tokens)}
        self.layout = ActionLayout(
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            open_nt_start=self.open_nt_start,
            open_nt_stop=self.close_nt_start,
            close_nt_start=self.close_nt_start,
            close_nt_stop=len(tokens),
            unk_token_id=3,
        )

    @classmethod
    def from_action_sequences(cls, sequences):
        words, labels = set(), set()
        for actions in sequences:
            for action in actions:
                if is_open_nt(action):
                    labels.add(open_label(action))
                elif is_close_nt(action):
                    labels.add(close_label(action))
                else:
                    words.add(action)
        return cls(words, labels)

    def encode(self, actions, add_bos=True, add_eos=False):
        """Ids of `<s>` + actions (+ `</s>`); an unknown action raises ValueError."""
        ids = [self.ids["<s>"]] if add_bos else []
        for index, action in enumerate(actions):
            if action not in self.ids:
                raise ValueError(f"action {index} ({action!r}) is not in the vocabulary")
            ids.append(self.ids[action])
        if add_eos:
            ids.append(self.ids["</s>"])
        return ids

    def decode(self, ids):
        return [self.tokens[i] for i in ids]
