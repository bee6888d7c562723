#!/usr/bin/env python3
"""libmemdecay as a user gets it: `meson install` into a temporary
DESTDIR, then examples/evict.c built with the system C compiler and
`pkg-config --cflags --libs memdecay` alone (the example copied out of the
tree, so no header of the tree can be found), run on the golden config,
and its output compared line for line with tests/library/reference_evict.c
(the same episode through the runtime's md_policy_* directly). Also: what
was installed (the header, which includes only system headers; the
library and its soname link; memdecay.pc; memdecay-runtime(3)), and that
the example runs against the installed library, not the build's.

Usage: install_test.py BUILD_ROOT SOURCE_ROOT REFERENCE_PROGRAM
Exit 0 on success, 1 on a failed check (each named)."""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

CONFIG = 'data/golden/qwen2-tiny-agent-450.json'
# The example's policies and budgets: memdecay (pinned pages), h2o and
# streaming (no config regions read), at two budgets.
RUNS = [('memdecay', '8'), ('memdecay', '12'), ('h2o', '8'), ('streaming', '8')]


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f'install_test: {" ".join(cmd)}: exit {p.returncode}\n{p.stdout}{p.stderr}')
    return p.stdout


def main():
    build, source, reference = (os.path.abspath(a) for a in sys.argv[1:4])
    failures = []
    with tempfile.TemporaryDirectory(prefix='memdecay-install-') as dest:
        run(['meson', 'install', '-C', build, '--destdir', dest, '--no-rebuild', '--quiet'])
        pcs = glob.glob(os.path.join(dest, '**', 'pkgconfig', 'memdecay.pc'), recursive=True)
        if len(pcs) != 1:
            sys.exit(f'install_test: {len(pcs)} memdecay.pc installed under DESTDIR')
        headers = glob.glob(os.path.join(dest, '**', 'include', 'memdecay', 'memdecay.h'),
                            recursive=True)
        if len(headers) != 1:
            failures.append('memdecay/memdecay.h is not installed under include/')
        else:
            with open(headers[0], encoding='utf-8') as f:
                includes = re.findall(r'^\s*#\s*include\s*(\S+)', f.read(), re.M)
            wrong = [i for i in includes if i not in ('<stddef.h>', '<stdint.h>')]
            if wrong:
                failures.append(f'the installed header includes {", ".join(wrong)}')
        for pattern in ('libmemdecay.so', 'libmemdecay.so.1', 'libmemdecay.so.1.*'):
            if not glob.glob(os.path.join(dest, '**', pattern), recursive=True):
                failures.append(f'{pattern} is not installed')
        if not glob.glob(os.path.join(dest, '**', 'man3', 'memdecay-runtime.3*'), recursive=True):
            failures.append('memdecay-runtime(3) is not installed')

        # pkg-config sees the installed file through the DESTDIR as a
        # sysroot (its paths are the prefix's; the sysroot prepends DESTDIR).
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pcs[0]),
                   PKG_CONFIG_SYSROOT_DIR=dest)
        flags = run(['pkg-config', '--cflags', '--libs', 'memdecay'], env=env).split()
        for flag in flags:
            if flag.startswith(('-I', '-L')) and not flag[2:].startswith(dest):
                failures.append(f'pkg-config gives {flag}, outside the install')
        libdir = os.path.dirname(glob.glob(os.path.join(dest, '**', 'libmemdecay.so.1'),
                                           recursive=True)[0])
        work = os.path.join(dest, 'example')
        os.mkdir(work)
        example = os.path.join(work, 'evict.c')
        shutil.copy(os.path.join(source, 'examples', 'evict.c'), example)
        cc = shutil.which('cc') or 'cc'
        program = os.path.join(work, 'evict')
        run([cc, '-std=c11', '-Wall', '-Wextra', '-Werror', '-pedantic', '-O2', example, '-o',
             program] + flags, cwd=work, env=env)
        # Only the installed library on the path (meson test puts the
        # build's there for the targets a test depends on).
        run_env = dict(os.environ, LD_LIBRARY_PATH=libdir)
        linked = run(['ldd', program], env=run_env)
        m = re.search(r'libmemdecay\.so\.1 => (\S+)', linked)
        if not m or not os.path.realpath(m.group(1)).startswith(os.path.realpath(dest)):
            failures.append(f'the example does not load the installed library:\n{linked}')
        config = os.path.join(source, CONFIG)
        for policy, budget in RUNS:
            got = run([program, config, policy, budget], cwd=work, env=run_env)
            want = run([reference, config, policy, budget])
            if got != want:
                failures.append(f'{policy} at {budget} pages: the example printed\n{got}'
                                f'the runtime directly gives\n{want}')
            elif not got.startswith(f'policy {policy}, page size 16, budget {budget} pages'):
                failures.append(f'{policy}: unexpected output\n{got}')
            print(got, end='')
        # The pinned region survives any budget with memdecay, not with
        # streaming (which keeps only its sink page of it).
        out = run([program, config, 'memdecay', '4'], cwd=work, env=run_env)
        if 'region system: kept 40 of 40' not in out:
            failures.append(f'memdecay at 4 pages evicted pinned system tokens:\n{out}')
        bad = subprocess.run([program, os.path.join(work, 'missing.json')], capture_output=True,
                             text=True, env=run_env)
        if bad.returncode != 1 or 'missing.json' not in bad.stderr:
            failures.append(f'a missing config: exit {bad.returncode}, {bad.stderr!r}')
    for f in failures:
        print('install_test: ' + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
