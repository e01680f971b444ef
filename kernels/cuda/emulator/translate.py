#!/usr/bin/env python3
"""Rewrites kernels/cuda/*.cu into plain C++ for the SIMT emulator
(include/simt.hpp):

  kernel<<<grid, block, shared, stream>>>(args);
    -> simt::launch(dim3(grid), dim3(block), shared, stream, BOUND, [&] { kernel(args); });
       (BOUND: the kernel's __launch_bounds__, 0 when it has none)
  __shared__ T name[..];
    -> static T name[..]; simt::shared_array(&name, sizeof name);
       (poisoned at the start of every block, counted against its limit)
  extern __shared__ T name[];
    -> T* name = static_cast<T*>(simt::dynamic_shared());

Constraints on kernel source: launches and __shared__ declarations are
each one statement; a __shared__ variable has no initialiser (as CUDA
requires); __launch_bounds__ stands right before the kernel's name.
Usage: translate.py SOURCE.cu OUTPUT.cpp"""
import re
import sys


def split_top_level(text):
    parts, depth, current = [], 0, ''
    for ch in text:
        depth += ch in '(<[{'
        depth -= ch in ')>]}'
        if ch == ',' and depth == 0:
            parts.append(current.strip())
            current = ''
        else:
            current += ch
    return parts + [current.strip()]


LAUNCH = re.compile(r'([A-Za-z_][\w:]*)((?:<[^<>;]*>)?)\s*<<<(.*?)>>>\s*\((.*?)\);', re.S)
BOUNDS = re.compile(r'__launch_bounds__\(((?:[^()]|\([^()]*\))*)\)\s*([A-Za-z_]\w*)\s*\(')
SHARED = re.compile(r'__shared__\s+([^;{}()]*?\S)\s+([A-Za-z_]\w*)\s*((?:\[[^\]]*\])*)\s*;')
EXTERN_SHARED = re.compile(r'extern\s+__shared__\s+([^;{}()]*?\S)\s+([A-Za-z_]\w*)\s*\[\s*\]\s*;')

source, output = sys.argv[1:3]
text = open(source).read()
bounds = {name: split_top_level(expr)[0] for expr, name in BOUNDS.findall(text)}


def same_lines(original, replacement):
    """Pads a rewrite with the newlines it lost, so that the line numbers the
    emulator reports (and the barrier sites it records) are the .cu file's."""
    return replacement + '\n' * max(0, original.count('\n') - replacement.count('\n'))


def rewrite_launch(match):
    kernel, template, config, args = match.groups()
    parts = split_top_level(config)
    if not 2 <= len(parts) <= 4:
        sys.exit(f'{source}: a launch needs grid, block[, shared[, stream]]: <<<{config}>>>')
    grid, block = parts[:2]
    shared = parts[2] if len(parts) > 2 else '0'
    stream = parts[3] if len(parts) > 3 else 'nullptr'
    bound = bounds.get(kernel.split('::')[-1], '0')
    return same_lines(match[0], f'simt::launch(dim3({grid}), dim3({block}), size_t({shared}), {stream}, '
                                f'int({bound}), [&] {{ {kernel}{template}({args}); }});')


text = EXTERN_SHARED.sub(
    lambda m: same_lines(m[0], f'{m[1]}* {m[2]} = static_cast<{m[1]}*>(simt::dynamic_shared());'), text)
text = SHARED.sub(
    lambda m: same_lines(m[0], f'static {m[1]} {m[2]}{m[3]}; simt::shared_array(&{m[2]}, sizeof {m[2]});'), text)
text = LAUNCH.sub(rewrite_launch, text)
if '<<<' in text:
    sys.exit(f'{source}: a launch the emulator cannot rewrite')
if '__shared__' in text:
    sys.exit(f'{source}: a __shared__ declaration the emulator cannot rewrite')
# Diagnostics and barrier sites name the .cu file (its path as given).
open(output, 'w').write(f'#include "simt.hpp"\n#line 1 "{source}"\n' + text)
