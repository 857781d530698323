#!/usr/bin/env python3
"""Runs the README's shell blocks as a newcomer would paste them, and fails on the first that
fails.

Blocks: every fenced block opened with ```sh (or ```bash, ```shell) in README.md and then in
docs/install.md (PAGES: the pages a newcomer follows from the README), in order, found
mechanically, so the test follows whatever the pages say. A block whose last non-blank
line before the fence is `<!-- readme-test: skip (REASON) -->` is listed and not run (for
lines that need root, the network or the whole test suite, e.g. apt-get).

Where: a copy of the source tree (no build directories), a fresh HOME, the PATH of a fresh
Debian machine with a decoy `python3` first that fails loudly (a README line must name the
interpreter it needs, or not need one), LANG=C.UTF-8 and nothing else from the caller's
environment. Blocks run one after another, each in one bash; variables exported and the
directory changed in one block carry over to the next, as in a terminal. Within a block, every
top-level command (a line, with its continuations, open quotes and here-documents) must exit
0, `a && b` included (where `set -e` would look away), and pipelines fail when any part does
(pipefail: write `| tail`, not `| head`, after a long writer).
Usage: readme_blocks.py SOURCE_ROOT [--list] | --self-test (the runner on small READMEs)
Exit 77 when run from inside a block (a README block that runs the test suite would recurse)."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

MARK = re.compile(r"<!--\s*readme-test:\s*skip\s*(?:\((.*)\))?\s*-->")
OPEN = re.compile(r"^```(sh|bash|shell)\s*$")
DEBIAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DECOY = """#!/bin/sh
echo "decoy python3 ran ($0 $*): this README line depends on which python3 is first on PATH" >&2
echo "$0 $*" >>"{log}"
exit 97
"""


def blocks(readme):
    """(line number, text, skip reason or None) for each shell block."""
    out, lines, i = [], readme.splitlines(), 0
    while i < len(lines):
        if OPEN.match(lines[i]):
            start, body = i + 1, []
            prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            m = MARK.search(prev)
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            out.append((start, "\n".join(body) + "\n", (m.group(1) or "marked") if m else None))
        i += 1
    return out


HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


def complete(chunk):
    """Is this a whole shell command? (bash -n: no open quote, no dangling && | ...)"""
    if chunk.rstrip().endswith("\\"):
        return False
    return subprocess.run(["/bin/bash", "-n", "-c", chunk], capture_output=True).returncode == 0


def commands(text, first_line):
    """(line number, text) of each top-level command of a block."""
    out, cur, start, heredoc = [], [], first_line, None
    for n, line in enumerate(text.splitlines(), first_line):
        if not cur:
            start = n
        cur.append(line)
        if heredoc:
            if line.lstrip("\t") == heredoc:
                heredoc = None
            else:
                continue
        else:
            m = HEREDOC.search(line)
            if m:
                heredoc = m.group(2)
                continue
        chunk = "\n".join(cur)
        if complete(chunk):
            if chunk.strip() and not all(x.strip().startswith("#") or not x.strip() for x in cur):
                out.append((start, chunk))
            cur = []
    if cur:
        out.append((start, "\n".join(cur)))
    return out


INTERNAL = {"PWD", "OLDPWD", "SHLVL", "_", "PPID", "UID", "EUID", "GROUPS", "RANDOM", "SRANDOM",
            "SECONDS", "LINENO", "HISTCMD", "OPTIND", "OPTERR", "IFS", "PIPESTATUS", "DIRSTACK",
            "FUNCNAME", "HOSTNAME", "HOSTTYPE", "MACHTYPE", "OSTYPE", "PS4", "__rc"}


def keep_variables(dump, state):
    """The shell variables a block left (`declare -p`), exported or not, as a reader's terminal
    keeps them, less bash's own."""
    kept, keep = [], False
    with open(dump, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"declare -(\S+) ([A-Za-z_][A-Za-z0-9_]*)", line)
            if m:
                flags, name = m.groups()
                keep = ("r" not in flags and name not in INTERNAL and
                        not name.startswith(("BASH", "COMP", "EPOCH")))
            if keep:
                kept.append(line)
    with open(state, "w", encoding="utf-8") as f:
        f.writelines(kept)
    os.unlink(dump)


PAGES = ["README.md", "docs/install.md"]


def checked(text, first_line, page="README.md"):
    """The block as a script that stops at the first command that fails, naming it."""
    parts = ["set -o pipefail"]
    for line, cmd in commands(text, first_line):
        label = cmd.splitlines()[0].replace("'", "'\\''")[:120]
        parts.append(cmd)
        parts.append(f"__rc=$?; if [ $__rc -ne 0 ]; then echo '{page}:{line}: exit '$__rc': {label}' >&2; "
                     "exit $__rc; fi")
    return "\n".join(parts) + "\n"


SELF_TESTS = [  # (README text, expected exit status): the runner itself, on small READMEs
    ("```sh\ntrue && false && echo hidden-by-set-e\n```\n", 1),
    ("```sh\npython3 -c 'print(1)' || true\n```\n", 1),            # the decoy ran
    ("```sh\nfalse | tail -1\n```\n", 1),                           # pipefail
    ("<!-- readme-test: skip (needs root) -->\n```sh\nexit 3\n```\n"
     "```sh\nexport A=1\ncat >f <<'EOF'\nx && |\nEOF\ncd /\n```\n"
     "```bash\n[ \"$A\" = 1 ] && [ \"$PWD\" = / ] && [ -z \"$KVREG_SELF_LEAK\" ]\n```\n", 0),
    ("```sh\nP=/x\n```\n```sh\n[ \"$P\" = /x ] && env | grep -q '^HOME=' \n```\n", 0),  # unexported too
    ("```sh\n# only a comment\n```\n```sh\nexit 4\n```\n", 1),
]


def self_test():
    """Runs SELF_TESTS; 0 when every README gives its expected status."""
    os.environ["KVREG_SELF_LEAK"] = "1"  # must not reach the blocks
    bad = 0
    for text, want in SELF_TESTS:
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "README.md"), "w") as f:
                f.write(text)
            got = run(d)
        if got != want:
            print(f"FAIL: exit {got}, want {want}, for README:\n{text}")
            bad = 1
    print("self-test:", "FAILED" if bad else f"{len(SELF_TESTS)} READMEs gave their expected status")
    return bad


def main():
    if os.environ.get("KVREG_README_TEST"):
        print("SKIP: already inside a README block run")
        return 77
    if sys.argv[1] == "--self-test":
        return self_test()
    return run(os.path.abspath(sys.argv[1]), list_only="--list" in sys.argv[2:])


def run(src, list_only=False):
    found = []
    for page in PAGES:
        if os.path.exists(os.path.join(src, page)):
            with open(os.path.join(src, page), encoding="utf-8") as f:
                found += [(page,) + b for b in blocks(f.read())]
    if not found:
        print("FAIL: no ```sh block in " + " or ".join(PAGES))
        return 1
    if list_only:
        for page, line, text, skip in found:
            print(f"{page}:{line}: {'skip: ' + skip if skip else 'run'}: {text.splitlines()[0] if text.strip() else ''}")
        return 0

    tmp = tempfile.mkdtemp(prefix="kvreg-readme.")
    try:
        work, home, decoy_dir = (os.path.join(tmp, d) for d in ("src", "home", "decoy"))
        shutil.copytree(src, work, symlinks=True, ignore=lambda d, names: [
            n for n in names if n in (".git", "__pycache__") or
            (d == src and (n.startswith("build") or n == "subprojects"))])
        os.makedirs(home)
        os.makedirs(decoy_dir)
        decoy_log = os.path.join(tmp, "decoy.log")
        with open(os.path.join(decoy_dir, "python3"), "w") as f:
            f.write(DECOY.format(log=decoy_log))
        os.chmod(os.path.join(decoy_dir, "python3"), 0o755)
        state, cwd = os.path.join(tmp, "state.env"), os.path.join(tmp, "cwd")
        with open(state, "w") as f:
            f.write(f"export PATH={decoy_dir}:{DEBIAN_PATH} HOME={home} LANG=C.UTF-8 "
                    f"KVREG_README_TEST=1 TMPDIR={tmp}\n")
        with open(cwd, "w") as f:
            f.write(work)

        results, failed = [], False
        for n, (page, line, text, skip) in enumerate(found, 1):
            first = text.strip().splitlines()[0] if text.strip() else ""
            if skip:
                results.append((page, line, "skipped: " + skip, first))
                continue
            if failed:
                results.append((page, line, "not run (an earlier block failed)", first))
                continue
            script = (f'. "{state}"\ncd "$(cat "{cwd}")"\n' + checked(text, line, page) +
                      f'declare -p >"{state}.all"\npwd >"{cwd}"\n')
            print(f"== {page}:{line} (block {n})\n{text}", flush=True)
            t0 = time.monotonic()
            proc = subprocess.run(["/bin/bash", "--noprofile", "--norc", "-c", script],
                                  env={"PATH": DEBIAN_PATH}, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=3000)
            took = time.monotonic() - t0
            if os.path.exists(state + ".all"):
                keep_variables(state + ".all", state)
            output = proc.stdout.decode(errors="replace")
            tail = output.splitlines()[-40:]
            print("\n".join(tail), flush=True)
            if proc.returncode != 0:
                failed = True
                results.append((page, line, f"FAILED (exit {proc.returncode}, {took:.0f} s)", first))
            else:
                results.append((page, line, f"ok ({took:.0f} s)", first))
        if os.path.exists(decoy_log):
            with open(decoy_log) as f:
                calls = f.read()
            if calls:
                failed = True
                results.append(("", 0, "FAILED: the decoy python3 ran: " + calls.strip().replace("\n", "; "), ""))
        print("\n== shell blocks")
        for page, line, status, first in results:
            print(f"{page}:{line}: {status}: {first}")
        return 1 if failed else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
