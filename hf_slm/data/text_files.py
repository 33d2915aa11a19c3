"""Opening the text files a user names (trees, sentences, proposals, JSON lines), with errors that name the file.

Python reports a gzip archive or a weight file given as text as a UnicodeDecodeError ("'utf-8' codec can't
decode byte 0x8b in position 1") that says nothing of which file it was. Every reader of user text in hf_slm
opens it with `open_text` or `read_text`, so that a missing file, a folder, a compressed or a binary file is
one ValueError naming the file and what was expected. A UTF-8 byte-order mark that starts a file is dropped
(utf-8-sig), so that it never becomes part of the first word; tokenization/trees.py's `check_word_separators`,
which the readers of trees and word-separated text go through, says the rest of the rule for what separates words.

(tokenization/trees.py is hub code and cannot import this module; its `read_tree_file` names the file itself.)
"""

import codecs
from contextlib import contextmanager
from pathlib import Path

# The first bytes of compressed files that users pass for text, and the format they mark.
COMPRESSED_MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd",
                    b"PK\x03\x04": "zip"}
# Text files never hold a NUL byte; weight files, pickles and most binary formats do within their first bytes.
SNIFF_BYTES = 4096


def check_text_file(path, what="file"):
    """Raise ValueError naming `path` (as `what`, e.g. "data file") unless it is a file that starts like text:
    it must exist, not be a folder, not be compressed, and hold no NUL byte in its first 4 KiB. Returns a Path."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{what} {path} does not exist")
    if path.is_dir():
        raise ValueError(f"{what} {path} is a directory, not a file")
    with open(path, "rb") as handle:
        head = handle.read(SNIFF_BYTES)
    for magic, kind in COMPRESSED_MAGIC.items():
        if head.startswith(magic):
            raise ValueError(f"{what} {path} is {kind}-compressed; decompress it first")
    if b"\x00" in head:
        raise ValueError(f"{what} {path} is a binary file (a NUL byte at offset {head.index(0)}), not text")
    return path


def _not_utf8(path, what):
    """The ValueError for a file that does not decode as UTF-8, with the offset of its first bad byte.

    The file is decoded again in chunks (a decode error met while reading lines gives a position within the
    reader's buffer, not within the file)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0  # bytes read before `chunk`
    with open(path, "rb") as handle:
        while True:
            chunk = handle.read(1 << 20)
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as error:
                # error.object is the bytes the decoder still held from the last chunk, then `chunk`.
                at = offset - (len(error.object) - len(chunk)) + error.start
                return ValueError(f"{what} {path} is not UTF-8 text (byte 0x{error.object[error.start]:02x} at "
                                  f"offset {at}); expected a UTF-8 text file")
            if not chunk:
                return ValueError(f"{what} {path} is not UTF-8 text")
            offset += len(chunk)


@contextmanager
def open_text(path, what="file", newline=None):
    """`open(path, encoding="utf-8-sig", newline=newline)` for reading, after `check_text_file`; a decoding error
    met while reading becomes a ValueError naming the file and the offset of the bad byte."""
    path = check_text_file(path, what)
    try:
        with open(path, encoding="utf-8-sig", newline=newline) as handle:
            yield handle
    except UnicodeDecodeError:
        raise _not_utf8(path, what) from None


def read_text(path, what="file"):
    """The whole text of `path` (see `open_text`)."""
    with open_text(path, what) as handle:
        return handle.read()
