"""How messages and results name the items of a user's input: counted from 1, as the command line, line numbers
and a reader count them, in the Python API as on the command line (a list's item 0 is "sentence 1"). Result
records keep the 0-based Python `index` beside the name."""


def item_name(noun, index):
    """"sentence 1" for index 0."""
    return f"{noun} {index + 1}"


def sentence_name(index):
    return item_name("sentence", index)


__all__ = ["item_name", "sentence_name"]
