"""Several `hf-slm` commands in one launch of N processes (torchrun, gloo, CPU), for the tests that compare runs.

Each launch pays the imports of torch and transformers in every process (about 10 s of CPU each); a test module
that compares a dozen commands on one and on two processes spent most of its time importing. A session starts
the processes once: each one connects back to the test over a socket on 127.0.0.1 and runs, in turn, the
commands the test sends it, through `main` in its own interpreter (helpers/cli.py, as the CLI tests do), and
answers with the exit status, stdout and stderr. The process group stays open between commands, as accelerate's
PartialState keeps it within one run. What a session gives for a command is what torchrun would have collected:
the processes' statuses (the first non-zero one), and their stdout and stderr, the main process's first.

Run as a script, this module is the process side: `python cli_session.py PORT` (under torchrun, one per rank).
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path


class CliSession:
    """`processes` processes that run `hf-slm` commands one after another: `session.run(args)` gives a
    subprocess.CompletedProcess as `run_cli(args, processes)` would, checked unless `check=False`."""

    def __init__(self, processes):
        from helpers.distributed import TIMEOUT_SECONDS, free_port, one_thread_environment

        self._timeout = TIMEOUT_SECONDS
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(self._timeout)
        port = str(self._server.getsockname()[1])
        script = str(Path(__file__).resolve())
        if processes == 1:  # no launcher: the single-process path, as `python -m hf_slm.cli` takes it
            command = [sys.executable, script, port]
        else:
            command = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={processes}",
                       "--master-addr=127.0.0.1", f"--master-port={free_port()}", script, port]
        # What the processes write outside a command (the launcher's lines, loggers bound to the real streams) goes
        # to a file: a pipe nobody reads until the end would fill and stop them mid-session.
        self._output = tempfile.TemporaryFile("w+", encoding="utf-8")
        self._launch = subprocess.Popen(command, stdout=self._output, stderr=subprocess.STDOUT, text=True,
                                        env=one_thread_environment())
        self._connections = {}
        try:
            for _ in range(processes):
                connection, _ = self._server.accept()
                connection.settimeout(self._timeout)
                reader = connection.makefile("r", encoding="utf-8")
                self._connections[int(reader.readline())] = (connection, reader)
        except OSError:
            output = self._launch_output()
            self.close()
            raise AssertionError(f"the session's processes did not start:\n{output}") from None

    def run(self, args, check=True):
        request = json.dumps([str(argument) for argument in args]) + "\n"
        for connection, _ in self._connections.values():
            connection.sendall(request.encode())
        answers = []
        for rank in sorted(self._connections):
            line = ""
            try:
                line = self._connections[rank][1].readline()
            except OSError:  # timed out: a process waits on another that failed
                pass
            if not line:
                raise AssertionError(f"process {rank} gave no answer to hf-slm {' '.join(json.loads(request))}; "
                                     f"answers so far: {answers}\n{self._launch_output()}")
            answers.append(json.loads(line))
        status = next((answer["returncode"] for answer in answers if answer["returncode"]), 0)
        result = subprocess.CompletedProcess(["hf-slm", *json.loads(request)], status,
                                             "".join(answer["stdout"] for answer in answers),
                                             "".join(answer["stderr"] for answer in answers))
        assert not check or status == 0, f"{' '.join(result.args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
        return result

    def _launch_output(self):
        """What the processes wrote outside the commands (the end of it), once they are stopped."""
        self._launch.kill()
        self._launch.wait()
        self._output.seek(0)
        return self._output.read()[-6000:]

    def close(self):
        for connection, reader in self._connections.values():
            reader.close()
            connection.close()
        self._server.close()
        try:
            self._launch.wait(timeout=self._timeout)  # the processes end when their connection closes
        except subprocess.TimeoutExpired:
            self._launch.kill()
            self._launch.wait()
        self._output.close()

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.close()


def serve(port):
    """The process side: connect to the test, say this process's rank, then run each command received until the
    connection closes."""
    from helpers.cli import run_cli_in_process

    rank = int(os.environ.get("RANK", "0"))
    with socket.create_connection(("127.0.0.1", port)) as connection, \
            connection.makefile("r", encoding="utf-8") as requests:
        connection.sendall(f"{rank}\n".encode())
        for line in requests:
            completed = run_cli_in_process(*json.loads(line))
            answer = {"returncode": completed.returncode, "stdout": completed.stdout, "stderr": completed.stderr}
            connection.sendall((json.dumps(answer) + "\n").encode())


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, where the helpers package is
    serve(int(sys.argv[1]))
