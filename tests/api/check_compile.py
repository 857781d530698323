#!/usr/bin/env python3
"""What a user's C compiler says about the header (tests/api/meson.build): a 0.x name warns
(KVREG_DEPRECATED), its regular name does not, and each experimental header refuses to be
included without KVREG_EXPERIMENTAL with a message naming the macro, and compiles with it.

usage: check_compile.py INCLUDE_DIR... -- CC [CC ARGS...]"""
import os
import subprocess
import sys
import tempfile

def compile_c(cc, incs, code, extra):
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "t.c")
        with open(src, "w") as f:
            f.write(code)
        cmd = cc + ["-std=c99", "-fsyntax-only"] + ["-I" + i for i in incs] + extra + [src]
        p = subprocess.run(cmd, capture_output=True, text=True)
        return p.returncode, p.stderr

def main():
    sep = sys.argv.index("--")
    incs, cc = sys.argv[1:sep], sys.argv[sep + 1:]
    failures = []

    def expect(name, ok, detail=""):
        print(("ok   " if ok else "FAIL ") + name)
        if not ok:
            failures.append(name)
            if detail:
                print(detail)

    call = "#include <kvreg.h>\nint f(kvreg_pool *p);\nint f(kvreg_pool *p) { return %s(p, 1); }\n"
    rc, err = compile_c(cc, incs, call % "kvreg_release", ["-Werror=deprecated-declarations"])
    expect("kvreg_release warns, naming its new name", rc != 0 and "use kvreg_pool_release" in err, err)
    rc, err = compile_c(cc, incs, call % "kvreg_pool_release", ["-Wall", "-Wextra", "-Werror"])
    expect("kvreg_pool_release compiles clean", rc == 0, err)
    for h in ("kvreg_net.h", "kvreg_index.h", "kvreg_nats.h"):
        rc, err = compile_c(cc, incs, "#include <%s>\n" % h, [])
        expect(h + " without KVREG_EXPERIMENTAL: #error naming it", rc != 0 and "#define KVREG_EXPERIMENTAL" in err, err)
        rc, err = compile_c(cc, incs, "#define KVREG_EXPERIMENTAL\n#include <%s>\n" % h, ["-Wall", "-Werror"])
        expect(h + " with KVREG_EXPERIMENTAL compiles", rc == 0, err)
    return 1 if failures else 0

if __name__ == "__main__":
    sys.exit(main())
