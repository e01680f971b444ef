#!/usr/bin/env python3
"""Rewrites the kernel launches of kernels/cuda/*.cu for the SIMT emulator:
kernel<<<grid, block, shared, stream>>>(args); becomes
simt::launch(dim3(grid), dim3(block), [&] { kernel(args); });
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


LAUNCH = re.compile(r'([A-Za-z_][\w:]*(?:<[^<>;]*>)?)\s*<<<(.*?)>>>\s*\((.*?)\);', re.S)


def rewrite(match):
    kernel, config, args = match.groups()
    grid, block = split_top_level(config)[:2]
    return f'simt::launch(dim3({grid}), dim3({block}), [&] {{ {kernel}({args}); }});'


source, output = sys.argv[1:3]
text = LAUNCH.sub(rewrite, open(source).read())
if '<<<' in text:
    sys.exit(f'{source}: a launch the emulator cannot rewrite')
open(output, 'w').write('#include "simt.hpp"\n' + text)
