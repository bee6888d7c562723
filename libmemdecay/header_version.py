#!/usr/bin/env python3
"""Prints the version memdecay.h declares (MEMDECAY_VERSION_MAJOR, _MINOR,
_PATCH) as MAJOR.MINOR.PATCH: the header is the one place the library's
version is written; meson takes the shared library's version, soname and
pkg-config version from it."""
import re
import sys

text = open(sys.argv[1], encoding='utf-8').read()
parts = []
for part in ('MAJOR', 'MINOR', 'PATCH'):
    m = re.search(rf'^#define MEMDECAY_VERSION_{part} (\d+)$', text, re.M)
    if not m:
        sys.exit(f'{sys.argv[1]}: no MEMDECAY_VERSION_{part}')
    parts.append(m.group(1))
version = '.'.join(parts)
m = re.search(r'^#define MEMDECAY_VERSION_STRING "([^"]*)"$', text, re.M)
if not m or m.group(1) != version:
    sys.exit(f'{sys.argv[1]}: MEMDECAY_VERSION_STRING is not "{version}"')
print(version)
