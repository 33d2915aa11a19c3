"""What a benchmark prints: its lines and tables as aligned text on stdout and, with `--markdown PATH`, the same as a
Markdown page headed by the machine, the date and the command, which docs/benchmarks.md includes (pymdownx.snippets).
The figures in the manual are therefore written by the run that measured them, never retyped.

    report = Report("Training-step throughput")
    report.line("B 16, T' 256 ...")
    report.table("Table 1", ["model", "tokens/s"], [["GPT-2", "12,345"]])
    report.finish(args.markdown, device="cpu")
"""

import datetime
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def add_markdown_option(parser):
    parser.add_argument("--markdown", type=Path, metavar="PATH",
                        help="also write the tables as a Markdown page (machine, date and command included), e.g. "
                             "benchmarks/results/NAME.md, which docs/benchmarks.md includes")


def cpu_name():
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_description(device="cpu"):
    """One line: the processor and its cores, the accelerator a `cuda` run used, torch's version and threads."""
    import torch

    parts = [f"{cpu_name()}, {os.cpu_count()} cores", f"torch {torch.__version__}, {torch.get_num_threads()} threads"]
    if str(device).startswith("cuda") and torch.cuda.is_available():
        parts.insert(1, f"GPU {torch.cuda.get_device_name(torch.device(device))}")
    return "; ".join(parts)


def source_revision():
    """The commit measured (with `+changes` when the checkout differs from it), or `unknown` outside git."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+changes" if dirty else "")


def is_numeric(cell):
    text = str(cell).replace(",", "").replace("x", "").replace("%", "").strip()
    try:
        float(text)
    except ValueError:
        return False
    return True


class Report:
    def __init__(self, title, echo=True):
        """echo: print lines and tables as they come (False: a page rewritten as rows arrive, printed once)."""
        self.title = title
        self.echo = echo
        self.markdown = []

    def line(self, text=""):
        if self.echo:
            print(text, flush=True)
        self.markdown += [text, ""]

    def table(self, title, columns, rows):
        """`rows`: lists of already formatted cells, one per column. Numbers are right-aligned in both forms."""
        rows = [[str(cell) for cell in row] for row in rows]
        numeric = [all(is_numeric(row[i]) or row[i] == "-" for row in rows) and bool(rows) for i in range(len(columns))]
        widths = [max([len(column)] + [len(row[i]) for row in rows]) for i, column in enumerate(columns)]

        def text_row(cells):
            return " ".join(cell.rjust(w) if right else cell.ljust(w) for cell, w, right in zip(cells, widths, numeric))

        if self.echo:
            print(f"\n{title}" if title else "")
            print(text_row(columns))
            for row in rows:
                print(text_row(row))
        if title:
            self.markdown += ["", f"**{title}**"]
        self.markdown += ["", "| " + " | ".join(columns) + " |",
                          "|" + "|".join("---:" if right else "---" for right in numeric) + "|"]
        self.markdown += ["| " + " | ".join(row) + " |" for row in rows]
        self.markdown.append("")

    def finish(self, path, device="cpu"):
        """Write the Markdown page to `path` (when given), headed by what was measured where and when."""
        if path is None:
            return
        script = Path(sys.argv[0]).resolve()
        try:
            script = script.relative_to(REPO)
        except ValueError:
            pass
        command = shlex.join(["python", str(script), *sys.argv[1:]])
        date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        header = [f"### {self.title}", "",
                  f"Measured {date} on {machine_description(device)}, hf-slm {source_revision()}, by `{command}`.", ""]
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(header + self.markdown).rstrip() + "\n")
        if self.echo:
            print(f"\nwrote {path}", file=sys.stderr)
