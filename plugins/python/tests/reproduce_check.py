"""Runs a kvconform command that must fail, takes the first failing case's reproduce line, checks
it holds every --contains text, then runs it as printed (through sh) from an empty temporary
working directory: it must fail again with exactly that one case (docs/cli.md, "Reproducing a failure").

    reproduce_check.py [--contains TEXT ...] [--absent REGEX ...] -- kvconform run ...

--absent: no line of the first run may match REGEX.
"""
import re
import subprocess
import sys
import tempfile


def main():
    argv = sys.argv[1:]
    split = argv.index("--")
    opts, command = argv[:split], argv[split + 1:]
    contains = [opts[i + 1] for i in range(0, len(opts), 2) if opts[i] == "--contains"]
    absent = [re.compile(opts[i + 1]) for i in range(0, len(opts), 2) if opts[i] == "--absent"]
    first = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = first.stdout.splitlines()
    failing = [l for l in lines if re.search(r"\): FAIL", l)]
    lines_rep = [l.split("reproduce: ", 1)[1] for l in lines if l.startswith("  reproduce: ")]
    problems = []
    for pattern in absent:
        hits = [l for l in lines if pattern.search(l)]
        if hits:
            problems.append(f"{len(hits)} line(s) match {pattern.pattern!r}, e.g. {hits[0]!r}")
    if first.returncode != 1 or not failing or not lines_rep:
        problems.append(f"the command must fail with a reproduce line (exit {first.returncode})")
    else:
        line = lines_rep[0]
        print("reproduce line:", line)
        if not (line.startswith("/") or line.startswith("'/")):
            problems.append("the binary is not an absolute path")
        for text in contains:
            if text not in line:
                problems.append(f"the reproduce line lacks {text!r}")
        with tempfile.TemporaryDirectory() as cwd:
            again = subprocess.run(["sh", "-c", line + " --no-report"], cwd=cwd, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        out = again.stdout.splitlines()
        case_id = failing[0].split("(", 1)[0]
        if again.returncode != 1:
            problems.append(f"the reproduce line exits {again.returncode}, expected 1")
        if not any(l.startswith(case_id + "(") and "): FAIL" in l for l in out):
            problems.append(f"the reproduce line does not fail {case_id}")
        if not any(re.match(r"^0 passed, 1 failed, 0 skipped", l) for l in out):
            problems.append("the reproduce line does not run exactly that one case")
        if problems:
            print(again.stdout)
    if problems:
        print(first.stdout)
        for p in problems:
            print("reproduce_check: " + p)
        sys.exit(1)
    print("reproduce_check: ok")


if __name__ == "__main__":
    main()
