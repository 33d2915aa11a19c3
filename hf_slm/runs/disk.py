"""What a long run says about the disk: sizes as a person reads them, and whether a write failed on a full device."""

import errno

# What writers say when the device is full: the OS's errors, safetensors' (which keeps only the text of the OS's
# error) and torch's zip writer's (which only sees that fewer bytes were written than it gave).
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
DISK_FULL_WORDS = ("No space left on device", "StorageFull", "unexpected pos", "file write failed")


def disk_full(error):
    """Whether `error`, or an error it was raised from, says that the device is full."""
    while error is not None:
        if isinstance(error, OSError) and error.errno in DISK_FULL_ERRNOS:
            return True
        if any(words in str(error) for words in DISK_FULL_WORDS):
            return True
        error = error.__cause__ or error.__context__
    return False


def readable_size(size):
    """`size` bytes as '812 kB', '3.4 MB' or '1.2 GB'."""
    if size >= 1e9:
        return f"{size / 1e9:.1f} GB"
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size / 1e3:.0f} kB"
