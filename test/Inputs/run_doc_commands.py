"""Runs the shell commands a document shows, top to bottom, as a newcomer would type them, so
that a stale doc fails the build (issue 49):

    run_doc_commands.py DOC.md SRC_ROOT BUILD_DIR WORK_DIR

Every ```sh block of DOC is read (lines joined at a trailing backslash), and every `$ ` line of a
plain ``` block (a transcript: the lines after it are its output); each command runs with bash in
WORK_DIR (one shell per block, so a variable a block sets holds for its later lines), with
`build/` meaning BUILD_DIR, `examples/`, `test/` and `tools/` the source tree's and `../shared`
the shared folder beside SRC_ROOT. A command whose line ends with a comment containing "GPU" or
"(device)", or that names --backend cuda, comm-bench or tools/gpu-, is printed as skipped; so
are the blocks under a heading with "GPU" in it, a block right after a line
`<!-- doc-test: skip WHY -->` (printed with WHY: a transcript of a run on the GPU machine), and
the build commands (scripts/, cmake, ctest, lit: CI runs those around this test). Prints 'ok',
'FAIL' (with the output's tail) or 'skip' per command and 'N of M commands ran' at the end;
exits 1 if one failed.
"""
import os, re, subprocess, sys

doc, src, build, work = sys.argv[1:5]
os.makedirs(work, exist_ok=True)
shared = os.path.normpath(os.path.join(src, "..", "shared"))
text = open(doc).read()
GPU_ONLY = re.compile(r"--backend cuda|comm-bench|tools/gpu-|\.carry/")
# Building and the whole suite: what CI itself runs around this test.
BUILDING = re.compile(r"^(scripts/|cmake |ctest |lit )")


def blocks():
    """(heading, skip reason or "", command lines) of each block."""
    heading, skip = "", ""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if lines[i].startswith("#"):
            heading = lines[i]
        marker = re.match(r"<!-- doc-test: skip (.*?) -->$", line)
        if marker:
            skip = marker.group(1)
        elif line.startswith("```"):
            fence = line
            body = []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            if fence == "```sh":
                yield heading, skip, body
            elif fence == "```":
                yield heading, skip, transcript(body)
            skip = ""
        elif line:
            skip = ""
        i += 1


def transcript(body):
    """The `$ ` commands of a transcript, with their continuation lines."""
    out, more = [], False
    for line in body:
        if line.startswith("$ ") or more:
            out.append(line[2:] if line.startswith("$ ") else line)
            more = line.rstrip().endswith("\\")
    return out


def commands(body):
    out, current = [], ""
    for line in body:
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        current += line
        if current.strip():
            out.append(current.strip())
        current = ""
    return out


pybin = os.path.join(work, ".python")
os.makedirs(pybin, exist_ok=True)
if not os.path.lexists(os.path.join(pybin, "python3")):
    os.symlink(sys.executable, os.path.join(pybin, "python3"))
ran = failed = total = 0
for heading, skip, body in blocks():
    # One shell per block: M=... set on one line holds for the next.
    env_lines = []
    for cmd in commands(body):
        total += 1
        comment = cmd.split(" #", 1)[1] if " #" in cmd else ""
        if skip:
            print("skip", cmd[:100], "(%s)" % skip)
            continue
        if BUILDING.match(cmd):
            print("skip", cmd[:100], "(building: CI runs it)")
            continue
        if "GPU" in heading or "GPU" in comment or "(device)" in comment or GPU_ONLY.search(cmd):
            print("skip", cmd[:100], "(GPU)")
            continue
        line = re.sub(r"(?<![\w/.])build/", build.rstrip("/") + "/", cmd)
        line = line.replace("../shared", shared)
        line = re.sub(r"(?<![\w/.])(examples|test|tools)/", src.rstrip("/") + r"/\1/", line)
        # zcc, zcc-opt and zrun as `cmake --install` puts them on the PATH, and
        # `python3` the interpreter running this script (the one with NumPy
        # and onnx), not whichever python3 comes first on the caller's PATH.
        path = ":".join([pybin] + [os.path.join(build, d)
                                   for d in ("tools/zcc", "tools/zcc-opt", "runtime")])
        script = "set -e\nexport PATH=%s:$PATH\n" % path + "\n".join(env_lines) + "\n" + line
        r = subprocess.run(["bash", "-c", script], cwd=work, capture_output=True, text=True,
                           timeout=600)
        if re.match(r"^[A-Za-z_0-9]+=(\S+|\"[^\"]*\")(\s+#.*)?$", cmd):
            env_lines.append(line)
        if r.returncode == 0:
            ran += 1
            print("ok  ", cmd[:100])
        else:
            failed += 1
            print("FAIL", cmd[:100], "(exit %d)" % r.returncode)
            print("\n".join((r.stdout + r.stderr).strip().splitlines()[-6:]))
print("%d of %d commands ran, %d failed, %d skipped" % (ran, total, failed, total - ran - failed))
sys.exit(1 if failed else 0)
