"""The trusted harness of RepoRepair-v0's commands: runs INSIDE the sandbox, never imported.

:mod:`mathgym.envs.repo.repo_repair_tasks` sends this file's text as the sandboxed program, after a
line that binds ``JOB`` (the command and the limits). The job's files hold the workspace
under ``repo/`` and the test runner beside it. The harness runs the command in ``repo/``
as a child process (its own session, no stdin, output to a file outside the workspace, a
wall clock), then writes one JSON line on file descriptor 3: the command's exit code and
output (head and tail, capped), and every file the workspace now holds (within the caps:
text files only; what did not fit is named in ``skipped``). The command's process never
holds descriptor 3. Standard library only.
"""

import json
import os
import signal
import stat
import subprocess
import sys
import time

JOB = globals().get("JOB") or {}
SKIPPED_DIRS = ("__pycache__", ".pytest_cache", ".git")


def run_command():
    """``(exit_code, timed_out, output_bytes, output_text)`` of the job's command."""
    if JOB.get("test"):
        argv = [sys.executable, "../" + JOB["runner"]]
    else:
        argv = ["/bin/sh", "-c", JOB["command"]]
    env = {
        "PATH": os.path.dirname(sys.executable) + ":/usr/local/bin:/usr/bin:/bin",
        "HOME": os.path.dirname(os.getcwd()),
        "LANG": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    output_path = "../.output"
    timed_out, code = False, None
    with open(output_path, "w+b") as output:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            code = process.wait(timeout=JOB["timeout"])
        except subprocess.TimeoutExpired:
            timed_out = True
        try:
            os.killpg(process.pid, signal.SIGKILL)  # what the command left running
        except OSError:
            pass
        if timed_out:
            process.wait()
        size = output.seek(0, os.SEEK_END)
        cap = JOB["output_cap"]
        output.seek(0)
        if size <= cap:
            text = output.read().decode("utf-8", "replace")
        else:
            head = output.read(cap // 2).decode("utf-8", "replace")
            output.seek(size - cap // 2)
            tail = output.read().decode("utf-8", "replace")
            text = f"{head}\n[... {size - 2 * (cap // 2)} bytes of output cut ...]\n{tail}"
    return code, timed_out, size, text


def snapshot():
    """``(files, skipped)``: the workspace's text files (path -> text) within the caps."""
    files, skipped, total = {}, [], 0
    for folder, dirs, names in os.walk(".", followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in sorted(names):
            path = os.path.join(folder, name)[2:]
            if name.endswith(".pyc"):
                continue
            try:
                info = os.lstat(path)
                if not stat.S_ISREG(info.st_mode):
                    skipped.append([path, "not a regular file"])
                    continue
                if len(files) >= JOB["max_files"]:
                    skipped.append([path, f"over the workspace limit of {JOB['max_files']} files"])
                    continue
                if total + info.st_size > JOB["max_chars"]:
                    skipped.append([path, f"over the workspace limit of {JOB['max_chars']} characters"])
                    continue
                with open(path, "rb") as handle:
                    text = handle.read(JOB["max_chars"] - total + 1).decode("utf-8")
            except UnicodeDecodeError:
                skipped.append([path, "not UTF-8 text"])
                continue
            except OSError as err:
                skipped.append([path, f"unreadable: {err.strerror}"])
                continue
            files[path] = text
            total += len(text)
    return files, skipped


def main():
    started = time.monotonic()
    os.chdir("repo")
    code, timed_out, size, text = run_command()
    files, skipped = snapshot()
    report = {
        "exit_code": code,
        "timed_out": timed_out,
        "output": text,
        "output_bytes": size,
        "files": files,
        "skipped": skipped[:20],
        "seconds": round(time.monotonic() - started, 3),
    }
    data = memoryview((json.dumps(report) + "\n").encode())
    while data:
        data = data[os.write(3, data) :]


if __name__ == "__main__":
    main()
