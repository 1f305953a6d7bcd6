"""Checks that make_models.py can write a zoo folder while engine runs read it (parallel ctests):
a file that already holds the right bytes is left alone (same inode), and a wrong one is replaced
through a rename (a new inode), so that a reader holding the old file never sees half a new one.
Exit 0 when both hold, 1 with the reason."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    with tempfile.TemporaryDirectory() as d:
        make = [sys.executable, os.path.join(HERE, "make_models.py"), d, "--only", "gemma2-w4", "--only", "gemma3-w3"]
        subprocess.run(make, check=True, stdout=subprocess.DEVNULL)
        kept = os.path.join(d, "gemma3-w3", "model.safetensors")
        broken = os.path.join(d, "gemma2-w4", "model.safetensors")
        with open(broken, "rb") as f:
            right = f.read()
        kept_inode = os.stat(kept).st_ino
        with open(broken, "r+b") as f:  # one wrong byte, written in place
            f.seek(len(right) - 1)
            f.write(bytes([right[-1] ^ 1]))
        broken_inode = os.stat(broken).st_ino
        with open(broken, "rb") as reader:  # a reader that opened the wrong file before the rewrite
            subprocess.run(make, check=True, stdout=subprocess.DEVNULL)
            old = reader.read()
        with open(broken, "rb") as f:
            now = f.read()
        problems = []
        if now != right:
            problems.append("the wrong file was not rewritten with the right bytes")
        if os.stat(broken).st_ino == broken_inode or old == right:
            problems.append("the wrong file was rewritten in place, not through a rename: a reader saw the new bytes")
        if os.stat(kept).st_ino != kept_inode:
            problems.append("a file that already held the right bytes was rewritten")
        leftovers = [n for _, _, files in os.walk(d) for n in files if ".tmp" in n]
        if leftovers:
            problems.append(f"temporary files left behind: {leftovers}")
        if problems:
            print("FAIL: " + "; ".join(problems))
            return 1
        print("OK: a right file is kept, a wrong one replaced through a rename")
        return 0


if __name__ == "__main__":
    sys.exit(main())
