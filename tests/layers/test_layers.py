#!/usr/bin/env python3
"""The layering check on the tree, then on small trees made to break it.

Usage: test_layers.py CHECK_LAYERS.PY SOURCE_ROOT --layer ... (the table of
the root meson.build). The tree must pass; each broken tree must fail with
the message that names the file, the line and the missing arrow."""
import os
import subprocess
import sys
import tempfile

check, root, table = sys.argv[1], sys.argv[2], sys.argv[3:]
failures = 0


def run(tree, extra=()):
    p = subprocess.run([sys.executable, check, '--root', tree, '--generated', 'md_build_config.h',
                        *table, *extra], capture_output=True, text=True)
    return p.returncode, p.stderr


def expect(what, got, want_rc, want_text):
    global failures
    rc, err = got
    if rc != want_rc or want_text not in err:
        failures += 1
        print(f'FAIL {what}: exit {rc} (want {want_rc}), stderr:\n{err}\nwanted: {want_text!r}')
    else:
        print(f'ok   {what}')


expect('the tree follows the table', run(root), 0, '')


# Every tree made below lives in one scratch folder, removed at the end.
scratch = tempfile.TemporaryDirectory(prefix='layers-')


def tree(files):
    d = tempfile.mkdtemp(dir=scratch.name)
    for path, text in files.items():
        full = os.path.join(d, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, 'w') as fp:
            fp.write(text)
    return d


base = {'base/error.h': '', 'io/formats/config.h': '#include "base/error.h"\n',
        'io/plot/plot_internal.h': '', 'survival/km.h': '#include "base/error.h"\n'}

expect('a downward include passes', run(tree(base)), 0, '')
expect('base including io/formats (upward) fails',
       run(tree({**base, 'base/error.c': '#include <stdio.h>\n\n#include "io/formats/config.h"\n'})),
       1, 'base/error.c:3: #include "io/formats/config.h": layer base does not build on io/formats')
expect('survival including io/formats (sideways above) fails',
       run(tree({**base, 'survival/km.c': '#include "io/formats/config.h"\n'})),
       1, 'survival/km.c:1: #include "io/formats/config.h": layer survival does not build on io/formats')
expect('another layer\'s private header fails',
       run(tree({**base, 'calib/cmd.c': '#include "io/plot/plot_internal.h"\n'})),
       1, 'calib/cmd.c:1: #include "io/plot/plot_internal.h": a header private to layer io/plot')
sealed = ['--sealed', 'kernels/cpu:calib']
back_end = {**base, 'kernels/kernels.h': '#include "base/error.h"\n',
            'kernels/cpu/cpu.h': '#include "kernels/kernels.h"\n',
            'collector/capture/x.c': '#include "kernels/kernels.h"\n'}
table_with_collector = ['--layer', 'collector/capture:kernels']
expect('the collector through kernels.h passes',
       run(tree(back_end), sealed + table_with_collector), 0, '')
expect('the collector including a back end\'s header fails',
       run(tree({**back_end, 'collector/capture/y.c': '#include "kernels/cpu/cpu.h"\n'}),
           sealed + table_with_collector),
       1, 'collector/capture/y.c:1: #include "kernels/cpu/cpu.h": inside the sealed kernels/cpu/')
sealed_all = ['--sealed', 'kernels/cpu:']
expect('the program including a back end\'s header fails',
       run(tree({**back_end, 'calib/devices.c': '#include "kernels/cpu/cpu.h"\n'}), sealed_all),
       1, 'calib/devices.c:1: #include "kernels/cpu/cpu.h": inside the sealed kernels/cpu/')
# Code outside the layers: the benchmarks (a client) and the tests.
outside = {**back_end, 'kernels/cpu/cpu_internal.h': '', 'tests/test_util.h': '',
           'tests/kernels/t.c': '#include "kernels/cpu/cpu.h"\n#include "kernels/cpu/cpu_internal.h"\n'
                                '#include "tests/test_util.h"\n',
           'tests/fit/t.c': '#include "survival/km.h"\n#include "tests/test_util.h"\n',
           'bench/b.c': '#include "kernels/kernels.h"\n#include "bench/b.h"\n', 'bench/b.h': ''}
outside_args = sealed_all + ['--client', 'bench', '--program', 'calib', '--tests', 'tests:',
                             '--tests', 'tests/kernels:kernels']
outside['calib/cli.h'] = ''
expect('tests using their own layer\'s internals and a client its public headers pass',
       run(tree(outside), outside_args), 0, '')
expect('the benchmarks including a back end\'s header fail',
       run(tree({**outside, 'bench/c.c': '#include "kernels/cpu/cpu.h"\n'}), outside_args),
       1, 'bench/c.c:1: #include "kernels/cpu/cpu.h": inside the sealed kernels/cpu/ (a program above the layers')
expect('the benchmarks including a private header fail',
       run(tree({**outside, 'bench/c.c': '#include "io/plot/plot_internal.h"\n'}), outside_args),
       1, 'bench/c.c:1: #include "io/plot/plot_internal.h": a header private to layer io/plot')
expect('the benchmarks including the program\'s header fail',
       run(tree({**outside, 'bench/c.c': '#include "calib/cli.h"\n'}), outside_args),
       1, 'bench/c.c:1: #include "calib/cli.h": a header of the program calib, not of a library')
expect('a test of another layer including a back end\'s header fails',
       run(tree({**outside, 'tests/fit/u.c': '#include "kernels/cpu/cpu.h"\n'}), outside_args),
       1, 'tests/fit/u.c:1: #include "kernels/cpu/cpu.h": inside the sealed kernels/cpu/ (this test folder tests no layer')
expect('a test including another layer\'s private header fails',
       run(tree({**outside, 'tests/kernels/u.c': '#include "io/plot/plot_internal.h"\n'}), outside_args),
       1, 'tests/kernels/u.c:1: #include "io/plot/plot_internal.h": a header private to layer io/plot (this test folder tests only kernels)')
expect('a test including a missing helper fails',
       run(tree({**outside, 'tests/fit/v.c': '#include "tests/nope.h"\n'}), outside_args),
       1, 'tests/fit/v.c:1: #include "tests/nope.h": no such header')
expect('a folder outside the table fails',
       run(tree({**base, 'io/newthing/x.c': '#include "base/error.h"\n'})),
       1, 'io/newthing/x.c: belongs to no layer')
expect('a missing header fails', run(tree({**base, 'runtime/p.c': '#include "base/nope.h"\n'})),
       1, 'runtime/p.c:1: #include "base/nope.h": no such header')
expect('the build fails too: no stamp is written',
       run(tree({**base, 'base/error.c': '#include "calib/cli.h"\n', 'calib/cli.h': ''}),
           ['--stamp', os.path.join(tempfile.mkdtemp(dir=scratch.name), 'stamp.h')]),
       1, 'layer base does not build on calib')
scratch.cleanup()
sys.exit(1 if failures else 0)
