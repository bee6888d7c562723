#!/usr/bin/env python3
"""Every list of policy names agrees with the policy table
(runtime/policy_table.h, runtime/policies/table.c).

The table's names, in order, come from a program that prints them one a
line (tests/man/policy_table.c). Then:

1. Man pages. Each list of policies in a man page stands between the
   comment lines
       .\\" policies: begin ...
       .\\" policies: end
   and must name exactly the table's policies, in the table's order. A name
   is the first argument of a .B or .BR line (one starting with \\- is an
   option, not a name), or an item of a text line that is nothing but a
   comma-separated list of words, "(a, b, c),". Each --page PAGE:N must
   hold N such lists; a list of three or more table names in a row
   ("a, b, c") outside them, in any page given with --man, fails as a list
   the check cannot see.
2. Code. No source file of the layers (--code DIR: .c, .h, .cu, .cuh,
   comments left out) but those of runtime/policies/ holds a policy's name
   as a string literal of its own ("h2o") or a string holding three or more
   table names in a row: the names come from the table (md_policy_find,
   md_policy_table), not from a second list.

Usage: policies_sync.py --names PROGRAM --root SRC [--page PAGE:N ...]
                        [--man PAGE ...] [--code DIR ...]
Exit 0 when everything agrees, 1 when not (each disagreement named), 2 on
bad usage. --self-test checks that the check fails on a planted missing
name, an unknown name, a wrong order, an unmarked list and a literal in
code.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

BEGIN = re.compile(r'^\.\\"\s*policies:\s*begin\b')
END = re.compile(r'^\.\\"\s*policies:\s*end\b')
WORD_LIST = re.compile(r'^\(?\s*([a-z0-9][a-z0-9\\-]*(?:\s*,\s*[a-z0-9][a-z0-9\\-]*)+)\s*\)?[,.;]?$')
CODE_EXT = ('.c', '.h', '.cu', '.cuh')


def unescape(text):
    return text.replace('\\-', '-').replace('\\fB', '').replace('\\fR', '').replace(
        '\\fI', '').replace('\\fP', '')


def man_lists(lines):
    """[(line number of the begin, [names])] of the marked lists, and the
    errors (an unterminated or nested list)."""
    lists, errors, current, start = [], [], None, 0
    for number, line in enumerate(lines, 1):
        if BEGIN.match(line):
            if current is not None:
                errors.append(f'line {number}: "policies: begin" inside the list of line {start}')
            current, start = [], number
            continue
        if END.match(line):
            if current is None:
                errors.append(f'line {number}: "policies: end" without a begin')
            else:
                lists.append((start, current))
            current = None
            continue
        if current is None:
            continue
        if line.startswith('.B ') or line.startswith('.BR '):
            args = line.split(None, 2)
            if len(args) >= 2:
                name = unescape(args[1].strip('"'))
                if not name.startswith('-'):
                    current.append(name)
        elif not line.startswith('.'):
            m = WORD_LIST.match(line.strip())
            if m:
                current += [unescape(w.strip()) for w in m.group(1).split(',')]
    if current is not None:
        errors.append(f'line {start}: "policies: begin" without an end')
    return lists, errors


def unmarked_lists(lines, names):
    """Runs of three or more table names separated by commas, outside the
    marked lists (the page's macro lines read as text)."""
    text, inside = [], False
    for line in lines:
        if BEGIN.match(line):
            inside = True
            text.append(' | ')
            continue
        if END.match(line):
            inside = False
            continue
        if inside or line.startswith('.\\"'):
            continue
        if line.startswith('.'):
            line = line.split(None, 1)[1] if ' ' in line else ''
            line = line.replace('"', '')
        text.append(unescape(line))
    joined = ' '.join(text)
    alternatives = '|'.join(sorted((re.escape(n) for n in names), key=len, reverse=True))
    name = rf'(?<![\w-])(?:{alternatives})(?![\w-])'
    run = re.compile(rf'{name}(?:\s*,\s*{name}){{2,}}')
    return [m.group(0) for m in run.finditer(joined)]


def check_man(path, want_lists, names, failures):
    with open(path, encoding='utf-8') as f:
        lines = f.read().splitlines()
    lists, errors = man_lists(lines)
    for e in errors:
        failures.append(f'{path}: {e}')
    if want_lists is not None and len(lists) != want_lists:
        failures.append(f'{path}: {len(lists)} marked lists of policies, expected {want_lists}')
    for start, got in lists:
        missing = [n for n in names if n not in got]
        unknown = [n for n in got if n not in names]
        if missing:
            failures.append(f'{path}:{start}: the list misses {", ".join(missing)} '
                            f'(the table: {", ".join(names)})')
        if unknown:
            failures.append(f'{path}:{start}: the list names {", ".join(unknown)}, '
                            f'not in the table ({", ".join(names)})')
        if not missing and not unknown and got != names:
            failures.append(f'{path}:{start}: the list is in the order {", ".join(got)}, '
                            f'the table\'s is {", ".join(names)}')
    for run in unmarked_lists(lines, names):
        failures.append(f'{path}: "{run}": a list of policies outside '
                        '".\\" policies: begin" / "end" (mark it, so that it is checked)')


def strip_c_comments(text):
    """The code without its comments (string literals kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append('\n' * text.count('\n', i, j))
            i = j
        elif text.startswith('//', i):
            j = text.find('\n', i)
            i = n if j < 0 else j
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def check_code(root, folders, names, failures):
    literal = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
    alternatives = '|'.join(sorted((re.escape(n) for n in names), key=len, reverse=True))
    name = rf'(?<![\w-])(?:{alternatives})(?![\w-])'
    run = re.compile(rf'{name}(?:\s*,\s*{name}){{2,}}')
    allowed = os.path.join('runtime', 'policies') + os.sep
    for folder in folders:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for file in sorted(files):
                if not file.endswith(CODE_EXT):
                    continue
                path = os.path.join(dirpath, file)
                relative = os.path.relpath(path, root)
                if relative.startswith(allowed):
                    continue
                with open(path, encoding='utf-8', errors='replace') as f:
                    code = strip_c_comments(f.read())
                for m in literal.finditer(code):
                    line = code.count('\n', 0, m.start()) + 1
                    if m.group(1) in names:
                        failures.append(f'{relative}:{line}: "{m.group(1)}": a policy name in '
                                        'code (take it from the table: md_policy_find)')
                    elif run.search(m.group(1)):
                        failures.append(f'{relative}:{line}: "{m.group(1)}": a list of policy '
                                        'names in code (generate it from md_policy_table)')


def run_checks(args, names):
    failures = []
    pages = {}
    for spec in args.page:
        page, sep, count = spec.rpartition(':')
        if not sep or not count.isdigit():
            raise SystemExit(f'policies_sync: --page {spec!r}: want PAGE:N')
        pages[page] = int(count)
    for page in list(pages) + [m for m in args.man if m not in pages]:
        check_man(os.path.join(args.root, page), pages.get(page), names, failures)
    check_code(args.root, args.code, names, failures)
    return failures


def table_names(program):
    out = subprocess.run([program], check=True, capture_output=True, text=True).stdout
    names = [line.strip() for line in out.splitlines() if line.strip()]
    if not names:
        raise SystemExit(f'policies_sync: {program} printed no policy names')
    return names


def self_test(names):
    """The check must fail on each kind of disagreement, planted in a
    scratch tree, and pass on the agreeing one."""
    ok = True
    marked = ['.\\" policies: begin', *[f'.BR {n.replace("-", chr(92) + "-")} ,' for n in names],
              '.\\" policies: end']
    plants = {
        'agrees (.BR lines)': (marked, '', 0),
        'agrees (a text line)': ([marked[0], '(' + ', '.join(names) + '),', marked[-1]], '', 0),
        'missing': ([marked[0], *marked[1:-2], marked[-1]], '', 1),
        'unknown': ([marked[0], '.B lru', *marked[1:]], '', 1),
        'order': ([marked[0], marked[2], marked[1], *marked[3:]], '', 1),
        'unmarked': (marked + ['Policies ' + ', '.join(names[:3]) + ' and more.'], '', 1),
        'code literal': (marked, f'static const char *x = "{names[-1]}";\n', 1),
        'code list': (marked, 'puts("from ' + ', '.join(names[:3]) + '");\n', 1),
        'comment only': (marked, f'/* "{names[-1]}", {", ".join(names)} */\nint y;\n', 0),
    }
    for label, (page, code, want_failures) in plants.items():
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, 'man'))
            os.makedirs(os.path.join(tmp, 'calib'))
            with open(os.path.join(tmp, 'man', 'x.1'), 'w') as f:
                f.write('\n'.join(page) + '\n')
            with open(os.path.join(tmp, 'calib', 'x.c'), 'w') as f:
                f.write(code)
            args = argparse.Namespace(root=tmp, page=['man/x.1:1'], man=[], code=['calib'])
            failures = run_checks(args, names)
            if bool(failures) != bool(want_failures):
                ok = False
                print(f'self-test {label}: {"failed" if failures else "passed"}, expected the '
                      f'opposite: {failures}', file=sys.stderr)
            else:
                print(f'self-test {label}: {failures[0] if failures else "agrees"}')
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--names', required=True, help='a program printing the table, a name a line')
    ap.add_argument('--root', required=True)
    ap.add_argument('--page', action='append', default=[], help='PAGE:N marked lists it holds')
    ap.add_argument('--man', action='append', default=[], help='a page to search for unmarked lists')
    ap.add_argument('--code', action='append', default=[], help='a folder of code to search')
    ap.add_argument('--self-test', action='store_true')
    args = ap.parse_args()
    names = table_names(args.names)
    if args.self_test:
        return 0 if self_test(names) else 1
    failures = run_checks(args, names)
    for f in failures:
        print(f'FAIL: {f}', file=sys.stderr)
    if failures:
        return 1
    print(f'policies: {", ".join(names)}: the man pages\' {sum(int(p.rpartition(":")[2]) for p in args.page)} '
          f'lists and the code agree with the table')
    return 0


if __name__ == '__main__':
    sys.exit(main())
