#!/usr/bin/env python3
"""What libmemdecay.so shows the dynamic linker: every defined dynamic
symbol is memdecay_* (or the version script's node, MEMDECAY_*), the
soname is libmemdecay.so.MAJOR, and the libraries it needs are at most
jansson, libm, libc and the dynamic loader (the layers' other external
libraries, GSL, OpenBLAS, cairo..., must not be reached).

Usage: symbols_test.py LIBRARY MAJOR"""
import re
import subprocess
import sys

ALLOWED_NEEDED = re.compile(r'^(libjansson\.so\.\d+|libm\.so\.6|libc\.so\.6|ld-linux[-\w.]*\.so\.\d)$')


def main():
    library, major = sys.argv[1:3]
    failures = []
    nm = subprocess.run(['nm', '-D', '--defined-only', library], capture_output=True, text=True,
                        check=True).stdout
    names = [line.split()[-1].split('@')[0] for line in nm.splitlines() if line.strip()]
    api = [n for n in names if n.startswith('memdecay_')]
    other = [n for n in names if not n.startswith('memdecay_') and not n.startswith('MEMDECAY_')]
    if other:
        failures.append('exports beyond memdecay_*: ' + ', '.join(other))
    if len(api) < 10:
        failures.append(f'only {len(api)} memdecay_* symbols exported')
    dyn = subprocess.run(['readelf', '-d', library], capture_output=True, text=True,
                         check=True).stdout
    needed = re.findall(r'\(NEEDED\)\s+Shared library: \[([^\]]+)\]', dyn)
    soname = re.findall(r'\(SONAME\)\s+Library soname: \[([^\]]+)\]', dyn)
    if soname != [f'libmemdecay.so.{major}']:
        failures.append(f'soname {soname}, expected libmemdecay.so.{major}')
    extra = [n for n in needed if not ALLOWED_NEEDED.match(n)]
    if extra:
        failures.append('needs ' + ', '.join(extra))
    print(f'{len(api)} memdecay_* symbols; soname {soname}; needs {", ".join(needed)}')
    for f in failures:
        print('symbols_test: ' + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
