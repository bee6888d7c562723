#!/usr/bin/env python3
"""The layering check (ARCHITECTURE.md, "The layers").

Every folder named with --layer is one layer, built as one library. A source
file of layer L may include, of the project's own headers, only those of L
and of the layers L builds on (the arrows given with --layer, followed
transitively); a header named *_internal.h only from its own layer; a header
inside a sealed folder (--sealed FOLDER:LAYER,...: a back end's own folder)
only from the folder's layer and the layers listed. Any other #include "..."
fails, naming the file, the line and the arrow it would need.
Files under a layer's top folder that belong to no layer fail too (a new
folder must be given a place in the table).

Code outside the layers is checked too. A client (--client FOLDER: the
benchmarks) is a program above every layer: it may include any layer's
public headers and its own, never a *_internal.h, a sealed folder's header
or a program's header (--program LAYER: the layer that is the program, not
a library). Test code (--tests FOLDER:LAYER,...: each folder of tests/, and
tests/ itself for what lies at its top) may include any layer's public
headers and the test helpers under tests/, and the internals (*_internal.h,
sealed folders) only of the layers it names: the layers that folder tests.
A file under tests/ whose folder is not given belongs to the nearest given
folder above it.

Usage: check_layers.py --root DIR [--stamp FILE] [--depfile FILE]
                       --layer NAME:BELOW,BELOW ... [--generated NAME ...]
                       [--sealed FOLDER:LAYER,LAYER ...] [--program LAYER ...]
                       [--client FOLDER ...]
                       [--tests FOLDER:LAYER,LAYER ...]
Exit 0 when the tree follows the table, 1 when it does not, 2 on bad usage.
The root meson.build runs it before any layer is compiled (so a wrong-way
include fails the build), and tests/layers/meson.build runs it as a test.
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SOURCE_EXT = ('.c', '.h', '.cu', '.cuh')


def parse_layers(specs):
    layers = {}
    for spec in specs:
        name, sep, below = spec.partition(':')
        if not sep or not name:
            raise SystemExit(f'check_layers: --layer {spec!r}: want NAME:BELOW,BELOW')
        layers[name] = [b for b in below.split(',') if b]
    for name, below in layers.items():
        for b in below:
            if b not in layers:
                raise SystemExit(f'check_layers: layer {name} builds on {b}, which is not a layer')
    return layers


def closure(layers, name, seen=None):
    seen = set() if seen is None else seen
    for b in layers[name]:
        if b not in seen:
            seen.add(b)
            closure(layers, b, seen)
    return seen


def layer_of(path, layers):
    """The layer whose folder holds `path` (the longest matching folder)."""
    best = None
    for name in layers:
        if path == name or path.startswith(name + '/'):
            if best is None or len(name) > len(best):
                best = name
    return best


def folder_of(path, folders):
    """The longest folder of `folders` that holds `path`, or None."""
    best = None
    for folder in folders:
        if path.startswith(folder + '/'):
            if best is None or len(folder) > len(best):
                best = folder
    return best


def check_outside(rel, lineno, inc, dirpath, root, layers, sealed, programs, tested, own, is_test,
                  problems):
    """An #include of client or test code: public headers of every layer,
    helpers under `own`, internals only of the layers in `tested`."""
    target = layer_of(inc, layers)
    if target is None:
        if any(inc.startswith(o + '/') for o in own) or os.path.exists(os.path.join(dirpath, inc)):
            if not (os.path.exists(os.path.join(root, inc)) or
                    os.path.exists(os.path.join(dirpath, inc))):
                problems.append(f'{rel}:{lineno}: #include "{inc}": no such header')
            return
        problems.append(f'{rel}:{lineno}: #include "{inc}": not a header of any layer or of '
                        f'{" or ".join(o + "/" for o in own)}')
        return
    if not os.path.exists(os.path.join(root, inc)):
        problems.append(f'{rel}:{lineno}: #include "{inc}": no such header')
        return
    if target in programs and target not in tested:
        problems.append(f'{rel}:{lineno}: #include "{inc}": a header of the program {target}, '
                        f'not of a library (only the tests of {target} may include it)')
        return
    if not is_test:
        what = 'a program above the layers, public headers only'
    else:
        what = ('this test folder tests only ' + ', '.join(sorted(tested)) if tested
                else 'this test folder tests no layer\'s internals')
    if os.path.basename(inc).endswith('_internal.h') and target not in tested:
        problems.append(f'{rel}:{lineno}: #include "{inc}": a header private to layer {target} '
                        f'({what})')
        return
    for folder in sealed:
        if inc.startswith(folder + '/') and target not in tested:
            problems.append(f'{rel}:{lineno}: #include "{inc}": inside the sealed {folder}/ '
                            f'({what}; {target} is reached through its own headers)')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--root', required=True)
    ap.add_argument('--layer', action='append', default=[])
    ap.add_argument('--generated', action='append', default=[],
                    help='a header the build generates (any layer may include it)')
    ap.add_argument('--sealed', action='append', default=[],
                    help='FOLDER:LAYER,...: its headers only from its own layer and those')
    ap.add_argument('--program', action='append', default=[],
                    help='LAYER: a program, not a library: outside code may not include it')
    ap.add_argument('--client', action='append', default=[],
                    help='FOLDER: a program above every layer (public headers only)')
    ap.add_argument('--tests', action='append', default=[],
                    help='FOLDER:LAYER,...: test code, which may use the internals of the '
                         'layers listed')
    ap.add_argument('--stamp')
    ap.add_argument('--depfile')
    args = ap.parse_args()
    layers = parse_layers(args.layer)
    if not layers:
        print('check_layers: no --layer given', file=sys.stderr)
        return 2
    allowed = {name: closure(layers, name) | {name} for name in layers}
    sealed = {}
    for spec in args.sealed:
        folder, _, readers = spec.partition(':')
        sealed[folder.rstrip('/')] = {r for r in readers.split(',') if r}
    clients = [c.rstrip('/') for c in args.client]
    programs = set(args.program)
    tests = {}
    for spec in args.tests:
        folder, _, tested = spec.partition(':')
        tests[folder.rstrip('/')] = {t for t in tested.split(',') if t}
        for t in tests[folder.rstrip('/')]:
            if t not in layers:
                raise SystemExit(f'check_layers: --tests {spec!r}: {t} is not a layer')
    test_tops = sorted({f.split('/')[0] for f in tests})
    tops = sorted({name.split('/')[0] for name in layers} | set(clients) | set(test_tops))

    scanned, problems = [], []
    for top in tops:
        for dirpath, dirnames, filenames in os.walk(os.path.join(args.root, top)):
            dirnames.sort()
            for fn in sorted(filenames):
                if not fn.endswith(SOURCE_EXT):
                    continue
                full = os.path.join(dirpath, fn)
                rel = os.path.relpath(full, args.root).replace(os.sep, '/')
                scanned.append(full)
                layer = layer_of(rel, layers)
                outside = folder_of(rel, list(tests)) or folder_of(rel, clients)
                if layer is None and outside is not None:
                    tested = tests.get(outside, set())
                    own = ['tests'] if outside in tests else [outside]
                    with open(full, encoding='utf-8', errors='replace') as fp:
                        for lineno, line in enumerate(fp, 1):
                            m = INCLUDE.match(line)
                            if m and m.group(1) not in args.generated:
                                check_outside(rel, lineno, m.group(1), dirpath, args.root, layers,
                                              sealed, programs, tested, own, outside in tests,
                                              problems)
                    continue
                if layer is None:
                    problems.append(f'{rel}: belongs to no layer (add its folder to md_layers '
                                    f'in meson.build)')
                    continue
                with open(full, encoding='utf-8', errors='replace') as fp:
                    for lineno, line in enumerate(fp, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        inc = m.group(1)
                        if inc in args.generated:
                            continue
                        target = layer_of(inc, layers)
                        if target is None:
                            if os.path.exists(os.path.join(dirpath, inc)):
                                target = layer  # beside the file
                            else:
                                problems.append(f'{rel}:{lineno}: #include "{inc}": not a header '
                                                f'of any layer (project headers are named from '
                                                f'the root, e.g. "base/error.h")')
                                continue
                        elif not os.path.exists(os.path.join(args.root, inc)):
                            problems.append(f'{rel}:{lineno}: #include "{inc}": no such header')
                            continue
                        if target not in allowed[layer]:
                            problems.append(f'{rel}:{lineno}: #include "{inc}": layer {layer} '
                                            f'does not build on {target} (it builds on: '
                                            f'{", ".join(sorted(allowed[layer] - {layer})) or "nothing"})')
                        elif target != layer and os.path.basename(inc).endswith('_internal.h'):
                            problems.append(f'{rel}:{lineno}: #include "{inc}": a header private '
                                            f'to layer {target}')
                        else:
                            for folder, readers in sealed.items():
                                if (inc.startswith(folder + '/') and layer != target and
                                        layer not in readers):
                                    problems.append(f'{rel}:{lineno}: #include "{inc}": inside the '
                                                    f'sealed {folder}/ (layer {layer} reaches it '
                                                    f'only through {target}\'s own headers)')
    for p in problems:
        print(f'layering: {p}', file=sys.stderr)
    if problems:
        print(f'layering: {len(problems)} include(s) against the layers (ARCHITECTURE.md)',
              file=sys.stderr)
        return 1
    if args.stamp:
        with open(args.stamp, 'w') as fp:
            fp.write('/* generated: the layering check passed */\n')
        if args.depfile:
            with open(args.depfile, 'w') as fp:
                fp.write(args.stamp.replace(' ', '\\ ') + ': ' +
                         ' '.join(s.replace(' ', '\\ ') for s in scanned) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
