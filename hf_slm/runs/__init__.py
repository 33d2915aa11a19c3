"""Long runs: the output folder's lock and the journal of finished items (journal.py), and running under several
processes (distributed.py), and what it says about the disk (disk.py)."""
