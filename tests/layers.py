#!/usr/bin/env python3
"""layers.py — the one-way rule of docs/ARCHITECTURE.md, checked on the tree and on the objects.

Each folder of src/ is a layer; a file may use only the layers its row below allows:
  - includes: every #include "X/..." of a file under src/F or tools/ must name an allowed folder X
    (the public headers in include/ are the API, open to all);
  - calls: every symbol an object of src/F (or tools/) needs from another folder of the build must
    be defined in an allowed folder (nm on $FP4_BUILD/src/*/*.o), so a call that runs back up
    through a public header is caught too;
  - ISA: functions compiled for AVX2/AVX-512 (target attributes) live only in src/cpu.
Usage: layers.py ROOT BUILD   (exit 1 and a list on any violation)
       layers.py --self-test  (plants one violation of each kind in a scratch tree: must be caught)
"""
import os, re, subprocess, sys, tempfile

ALLOWED = {
    'common': {'common'},
    'format': {'common', 'format'},
    'io': {'common', 'format', 'io'},
    'text': {'common', 'format', 'io', 'text'},
    'model': {'common', 'format', 'io', 'text', 'model'},
    'comm': {'common', 'comm'},
    'backend': {'common', 'format', 'backend'},
    'cpu': {'common', 'format', 'backend', 'comm', 'cpu'},
    'cuda': {'common', 'format', 'backend', 'comm', 'cuda'},
    'runtime': {'common', 'format', 'io', 'text', 'model', 'backend', 'comm', 'cpu', 'runtime'},
    'bench': {'common', 'bench'},
    'server': {'common', 'format', 'io', 'text', 'model', 'runtime', 'server'},
    # the CLI: the engine, and the public CPU contractions (demo, selftest)
    'tools': {'common', 'format', 'io', 'text', 'model', 'runtime', 'cpu', 'bench', 'server', 'tools'},
}
INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SRC_EXT = ('.c', '.h', '.cu', '.cuh')


def layer_of(rel):
    parts = rel.split('/')
    if parts[0] == 'tools':
        return 'tools'
    if parts[0] != 'src':
        return None
    return 'common' if len(parts) == 2 else parts[1]


def header_layer(inc, cur_dir, root):
    """The layer of an included file, or None for public headers and the file's own folder."""
    if os.path.exists(os.path.join(root, 'include', inc)):
        return None
    if os.path.exists(os.path.join(root, cur_dir, inc)):  # same folder ("model_impl.h")
        return layer_of(os.path.join(cur_dir, inc))
    if os.path.exists(os.path.join(root, 'src', inc)):
        return layer_of('src/' + inc)
    return None  # system or generated


def check_includes(root):
    bad = []
    for top in ('src', 'tools'):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith(SRC_EXT):
                    continue
                rel = os.path.relpath(os.path.join(d, f), root)
                me = layer_of(rel)
                if me not in ALLOWED:
                    bad.append(f'{rel}: folder "{me}" has no row in the layer table')
                    continue
                text = open(os.path.join(root, rel), encoding='utf-8', errors='replace').read()
                for inc in INC.findall(text):
                    lay = header_layer(inc, os.path.dirname(rel), root)
                    if lay and lay not in ALLOWED[me]:
                        bad.append(f'{rel}: includes "{inc}" ({me} -> {lay})')
                if me != 'cpu' and re.search(r'__attribute__\s*\(\(\s*target\s*\(', text):
                    bad.append(f'{rel}: an ISA target attribute outside src/cpu')
    return bad


def nm_all(paths, undefined):
    """{object: set of symbols} from one nm run over every object (one process per object cost
    more than a minute on a loaded 2-core machine)."""
    args = ['nm', '-A', '-u' if undefined else '--defined-only'] + list(paths)
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    syms = {p: set() for p in paths}
    for line in out.splitlines():
        path, sep, rest = line.partition(':')
        p = rest.split()
        if not sep or path not in syms:
            continue
        if undefined and p:
            syms[path].add(p[-1])
        elif len(p) == 3 and p[1] in 'TDBRVWu':
            syms[path].add(p[2])
    return syms


def check_calls(build, root=None):
    objs = []
    for top in ('src', 'tools'):
        for d, _, files in os.walk(os.path.join(build, top)):
            for f in files:
                o = os.path.join(d, f)
                rel = os.path.relpath(o, build)[:-2]
                # an object whose source has moved away is stale: not part of the tree
                if f.endswith('.o') and (root is None or any(os.path.exists(os.path.join(root, rel + e))
                                                             for e in ('.c', '.cu'))):
                    objs.append(o)
    if not objs:
        return [f'{build}: no objects (build first)']
    owner = {}
    defined, needed = nm_all(objs, False), nm_all(objs, True)
    for o in objs:
        for s in defined[o]:
            owner.setdefault(s, layer_of(os.path.relpath(o, build)))
    bad = []
    for o in sorted(objs):
        rel = os.path.relpath(o, build)
        me = layer_of(rel)
        for s in sorted(needed[o]):
            lay = owner.get(s)
            if lay and me in ALLOWED and lay not in ALLOWED[me]:
                bad.append(f'{rel}: calls {s} ({me} -> {lay})')
    return bad


def self_test():
    with tempfile.TemporaryDirectory() as t:
        for p, body in {
            'include/fp4lane.h': '',
            'src/format/pinned.h': '',
            'src/runtime/rt_impl.h': '',
            'src/cpu/ok.c': '#include "format/pinned.h"\n#include "fp4lane.h"\n',
            'src/cpu/bad.c': '#include "runtime/rt_impl.h"\n',
            'src/model/isa.c': 'static int __attribute__((target("avx2"))) f(void) { return 0; }\n',
        }.items():
            os.makedirs(os.path.dirname(os.path.join(t, p)), exist_ok=True)
            open(os.path.join(t, p), 'w').write(body)
        bad = check_includes(t)
        want = ['src/cpu/bad.c: includes "runtime/rt_impl.h" (cpu -> runtime)',
                'src/model/isa.c: an ISA target attribute outside src/cpu']
        ok = sorted(bad) == sorted(want)
        # calls: an object of src/format that needs a symbol defined under src/runtime
        b = os.path.join(t, 'build')
        for rel, code in {'src/runtime/r.c': 'int fp4_rt_up(void) { return 1; }\n',
                          'src/format/f.c': 'int fp4_rt_up(void);\n'
                                            'int f(void) { return fp4_rt_up(); }\n'}.items():
            os.makedirs(os.path.dirname(os.path.join(b, rel)), exist_ok=True)
            open(os.path.join(t, 'x.c'), 'w').write(code)
            subprocess.run(['cc', '-c', os.path.join(t, 'x.c'), '-o', os.path.join(b, rel[:-2] + '.o')],
                           check=True)
        calls = check_calls(b)
        ok = ok and calls == ['src/format/f.o: calls fp4_rt_up (format -> runtime)']
        print(('ok' if ok else 'FAILED') + f': planted violations found: {bad + calls}')
        return 0 if ok else 1


def main():
    if sys.argv[1:] == ['--self-test']:
        return self_test()
    root, build = sys.argv[1], sys.argv[2]
    build = build if os.path.isabs(build) else os.path.join(root, build)
    bad = check_includes(root) + check_calls(build, root)
    for b in bad:
        print(b)
    print(f'layers: {len(bad)} violation(s)')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
