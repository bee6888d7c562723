"""What made a fixture folder: every fixture generator under tests/ calls
write_versions at the end of its run, which records in DIRECTORY/VERSIONS the
script and the versions of Python and of the packages it used (the reference
the fixtures come from). No test reads the file."""
import importlib.metadata
import os
import platform


def module_version(module):
    """The module's __version__, or, for packages that define none (gguf),
    the version of the installed distribution of the same name."""
    version = getattr(module, "__version__", None)
    return version if version is not None else importlib.metadata.version(module.__name__)


def write_versions(directory, script, modules):
    """DIRECTORY/VERSIONS: "script: SCRIPT", "python: X.Y.Z", then
    "NAME: VERSION" for each module of MODULES (imported modules)."""
    lines = [f"script: {script}", f"python: {platform.python_version()}"]
    lines += [f"{m.__name__}: {module_version(m)}" for m in modules]
    with open(os.path.join(directory, "VERSIONS"), "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
