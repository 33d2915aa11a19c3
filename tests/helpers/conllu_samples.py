"""CoNLL-U text of a few gold sentences whose words a tiny DTG tokenizer (helpers.dependency_models) spells."""


# (sent_id, words, heads, UPOS): the words of helpers.dependency_models' tiny tokenizer, so nothing goes to <unk>.
GOLD = [
    ("s1", ["There", "is", "a", "difference"], [2, 0, 4, 2], ["PRON", "VERB", "DET", "NOUN"]),
    ("s2", ["The", "cat", "sleeps", "."], [2, 3, 0, 3], ["DET", "NOUN", "VERB", "PUNCT"]),
    ("s3", ["Dogs", "bark", "loudly"], [2, 0, 2], ["NOUN", "VERB", "ADV"]),
    ("s4", ["a", "b", "c"], [0, 1, 1], ["X", "X", "X"]),
]


def conllu(sentences, with_upos=True):
    """CoNLL-U text of (sent_id, words, heads, upos) sentences (sent_id None: no comment)."""
    blocks = []
    for sent_id, words, heads, upos in sentences:
        lines = [f"# sent_id = {sent_id}"] if sent_id else []
        for position, (word, head, tag) in enumerate(zip(words, heads, upos), start=1):
            fields = [str(position), word, "_", tag if with_upos else "_", "_", "_", str(head), "dep", "_", "_"]
            lines.append("\t".join(fields))
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks) + "\n"
