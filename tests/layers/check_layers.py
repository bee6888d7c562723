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

Usage: check_layers.py --root DIR [--stamp FILE] [--depfile FILE]
                       --layer NAME:BELOW,BELOW ... [--generated NAME ...]
                       [--sealed FOLDER:LAYER,LAYER ...]
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--root', required=True)
    ap.add_argument('--layer', action='append', default=[])
    ap.add_argument('--generated', action='append', default=[],
                    help='a header the build generates (any layer may include it)')
    ap.add_argument('--sealed', action='append', default=[],
                    help='FOLDER:LAYER,...: its headers only from its own layer and those')
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
    tops = sorted({name.split('/')[0] for name in layers})

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
                                                f'the root, e.g. "io/base/error.h")')
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
