#!/usr/bin/env python3
"""The house rules that a compiler does not check, checked (docs/design.md, "Layers").

    scripts/check-structure.py [REPO]

1. No include cycle between source units (a .cpp and its .hpp are one unit).
2. The layers: every include between top-level folders is an edge of the
   table in docs/design.md ("Layers"), and every edge of that table is used,
   so the diagram and the code cannot drift apart.
3. extension/src by concern: a folder includes only folders listed below it in
   docs/design.md ("The extension by concern"), which lists every folder; so
   the folder graph is acyclic, and an include that points up fails here.
4. No extension folder holds more than 12 files.
5. No function outside tests is longer than 120 lines (tables are data, not
   functions, and are not counted).
6. SQL runs through extension/src/spi/ (which pins search_path: spi.hpp),
   or in one of the few files listed in PINNED_SPI_FILES, each of which
   pins search_path itself; a new file that calls SPI to run SQL fails.

Prints each violation and a summary line; exits 1 on any violation.
"""
import bisect
import os
import re
import sys

MAX_FOLDER_FILES = 12
MAX_FUNCTION_LINES = 120
SOURCE_SUFFIXES = ('.cpp', '.hpp', '.h', '.cu', '.cuh')
LAYER_FOLDERS = ('common', 'kernels', 'storage', 'engine', 'tools', 'cli', 'extension')
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
SPI_RUNS_SQL = re.compile(r'\bSPI_(execute\w*|exec|prepare\w*|cursor_open\w*)\s*\(')
# Files besides extension/src/spi/ that run SQL through SPI themselves, and
# how each pins search_path = pg_catalog, pg_temp for it.
PINNED_SPI_FILES = {
    'extension/src/workers/writer/writer_main.cpp': 'the writer session sets it (PGC_S_OVERRIDE)',
    'extension/src/workers/verifier/verifier_worker_main.cpp': 'the verifier session sets it',
    'extension/src/workers/verifier/verifier_freeze.cpp': 'runs only in the verifier session, which sets it',
    'extension/src/artifacts/artifact_access.cpp': 'its saved plan runs under OwnerRights (RunAs pins it)',
}


def source_files(root, folder):
    for directory, _, names in os.walk(os.path.join(root, folder)):
        for name in sorted(names):
            if name.endswith(SOURCE_SUFFIXES):
                yield os.path.relpath(os.path.join(directory, name), root)


def read(root, path):
    with open(os.path.join(root, path), encoding='utf-8', errors='replace') as f:
        return f.read()


def includes(root, path, known):
    """The repository files that `path` includes, resolved as the compiler would
    (from the repository root, then from the including file's folder)."""
    found = []
    for name in INCLUDE.findall(read(root, path)):
        for candidate in (name, os.path.join(os.path.dirname(path), name)):
            candidate = os.path.normpath(candidate)
            if candidate in known:
                found.append(candidate)
                break
    return found


def strongly_connected(graph):
    """Tarjan's algorithm, iterative: the sets of more than one node."""
    index, low, on_stack, stack, result, counter = {}, {}, set(), [], [], [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    result.append(sorted(component))
    return result


def design_block(root, heading):
    """The first fenced block after a heading of docs/design.md."""
    text = read(root, 'docs/design.md')
    at = text.find('\n' + heading + '\n')
    if at < 0:
        raise SystemExit(f'docs/design.md has no heading "{heading}"')
    block = re.search(r'```[a-z]*\n(.*?)```', text[at:], re.S)
    if not block:
        raise SystemExit(f'docs/design.md: no fenced block under "{heading}"')
    return block.group(1)


def declared_layer_edges(root):
    """Lines `folder/  includes: a/ b/ ...` of the Layers block."""
    edges = set()
    for line in design_block(root, '## Layers').splitlines():
        match = re.match(r'\s*([a-z]+)/\s.*?includes:\s*(.*)$', line)
        if match:
            for target in re.findall(r'([a-z]+)/', match.group(2)):
                edges.add((match.group(1), target))
    return edges


def declared_extension_order(root):
    """The folders of the "extension by concern" block, top first."""
    order = []
    for line in design_block(root, '## The extension by concern').splitlines():
        match = re.match(r'\s*([a-z_]+(?:/[a-z_]+)*)/\s', line)
        if match:
            order.append(match.group(1))
    return order


def extension_folder(path):
    parts = path.split('/')[2:-1]  # extension/src/<folder...>/file
    return '/'.join(parts) if parts else '.'


# --- function lengths ---------------------------------------------------------

def code_only(text):
    """The text with comments, string and character literals and preprocessor
    lines blanked (newlines kept, so line numbers stay)."""
    out, i, n = [], 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == '#':
            end = i
            while end < n and (text[end] != '\n' or text[end - 1] == '\\'):
                end += 1
            out.append(re.sub(r'[^\n]', ' ', text[i:end]))
            i = end
            continue
        if c in ' \t':
            out.append(c)
            i += 1
            continue
        line_start = c == '\n'
        if text.startswith('//', i):
            end = text.find('\n', i)
            end = n if end < 0 else end
            out.append(' ' * (end - i))
            i = end
        elif text.startswith('/*', i):
            end = text.find('*/', i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:end]))
            i = end
        elif c == 'R' and text.startswith('"', i + 1) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_')):
            open_paren = text.find('(', i + 2)
            delimiter = ')' + text[i + 2:open_paren] + '"'
            end = text.find(delimiter, open_paren)
            end = n if end < 0 else end + len(delimiter)
            out.append('""' + re.sub(r'[^\n]', ' ', text[i + 2:end]))
            i = end
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(c + ' ' * (min(j, n) - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


CONTAINER = re.compile(r'\b(namespace|class|struct|union|enum|extern)\b')


def long_functions(path, text, limit):
    """(name, first line, lines) of each function body longer than `limit`."""
    code = code_only(text)
    line_starts = [i for i, c in enumerate(code) if c == '\n']

    def line_of(offset):
        return bisect.bisect_left(line_starts, offset) + 1

    found = []
    # Each open brace: (kind, line), kind 'container', 'function' or 'block'.
    stack, head_start = [], 0
    for i, c in enumerate(code):
        if c in ';{}':
            head = code[head_start:i]
            head_start = i + 1
        if c == '{':
            in_function = any(kind == 'function' for kind, _, _ in stack)
            if in_function:
                kind = 'block'
            elif CONTAINER.search(head) and '(' not in head.split('{')[0].split('=')[0]:
                kind = 'container'
            else:
                depth0 = re.sub(r'operator\s*[^\w\s(]+', 'operator', head)
                while True:  # collapse nested parentheses to (); stops on unbalanced ones too
                    collapsed = re.sub(r'\([^()]+\)', '()', depth0)
                    if collapsed == depth0:
                        break
                    depth0 = collapsed
                is_function = '(' in depth0 and '=' not in depth0.split('(')[0] and not depth0.rstrip().endswith('=')
                kind = 'function' if is_function else 'block'
            name = ''
            if kind == 'function':
                names = re.findall(r'([~\w:]+)\s*\(', head)
                name = names[0] if names else '?'
            stack.append((kind, line_of(i), name))
        elif c == '}' and stack:
            kind, first, name = stack.pop()
            if kind == 'function':
                lines = line_of(i) - first + 1
                if lines > limit:
                    found.append((name, first, lines))
    return found


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..'))
    problems = []
    files = [p for folder in LAYER_FOLDERS for p in source_files(root, folder)]
    known = set(files)
    graph = {p: includes(root, p, known) for p in files}

    # 1. unit cycles
    units = {}
    for path, targets in graph.items():
        unit = os.path.splitext(path)[0]
        units.setdefault(unit, set()).update(os.path.splitext(t)[0] for t in targets if os.path.splitext(t)[0] != unit)
    cycles = strongly_connected(units)
    problems += ['include cycle between units: ' + ' <-> '.join(c) for c in cycles]

    # 2. layers against the diagram
    declared = declared_layer_edges(root)
    used = {}
    for path, targets in graph.items():
        for target in targets:
            edge = (path.split('/')[0], target.split('/')[0])
            if edge[0] != edge[1]:
                used.setdefault(edge, f'{path} includes {target}')
    for edge, example in sorted(used.items()):
        if edge not in declared:
            problems.append(f'layers: {edge[0]}/ -> {edge[1]}/ is not in docs/design.md ("Layers"): {example}')
    for edge in sorted(declared - set(used)):
        problems.append(f'layers: docs/design.md declares {edge[0]}/ -> {edge[1]}/, which no include uses')

    # 3. extension folders in their order; 4. their sizes
    order = declared_extension_order(root)
    rank = {folder: i for i, folder in enumerate(order)}
    rank['.'] = -1  # module.cpp, the load hook, sits above every folder
    folder_files = {}
    for path in files:
        if path.startswith('extension/src/'):
            folder_files.setdefault(extension_folder(path), []).append(path)
    for folder in sorted(folder_files):
        if folder not in rank:
            problems.append(f'extension/src/{folder}/ is not listed in docs/design.md ("The extension by concern")')
    for folder in order:
        if folder not in folder_files:
            problems.append(f'docs/design.md lists extension/src/{folder}/, which holds no source')
    folder_edges = set()
    for path, targets in graph.items():
        if not path.startswith('extension/src/'):
            continue
        source = extension_folder(path)
        for target in targets:
            if not target.startswith('extension/src/'):
                continue
            dest = extension_folder(target)
            if dest == source:
                continue
            folder_edges.add((source, dest))
            if source in rank and dest in rank and rank[dest] <= rank[source]:
                problems.append(f'extension: {path} includes {target}: {dest}/ is not below {source}/')
    folder_cycles = strongly_connected({s: {d for (s2, d) in folder_edges if s2 == s} for (s, _) in folder_edges})
    problems += ['extension folder cycle: ' + ' <-> '.join(c) for c in folder_cycles]
    for folder, members in sorted(folder_files.items()):
        if len(members) > MAX_FOLDER_FILES:
            problems.append(f'extension/src/{folder}/ holds {len(members)} files (at most {MAX_FOLDER_FILES})')

    # 5. function lengths
    longest = (0, '')
    for path in files:
        for name, first, lines in long_functions(path, read(root, path), 0):
            if lines > longest[0]:
                longest = (lines, f'{path}:{first} {name}')
            if lines > MAX_FUNCTION_LINES:
                problems.append(f'{path}:{first}: {name} is {lines} lines (at most {MAX_FUNCTION_LINES})')

    # 6. SQL only where search_path is pinned
    for path in files:
        if not path.startswith('extension/src/') or path.startswith('extension/src/spi/'):
            continue
        if path in PINNED_SPI_FILES:
            continue
        match = SPI_RUNS_SQL.search(code_only(read(root, path)))
        if match:
            problems.append(f'{path} runs SQL through SPI_{match.group(1)} outside extension/src/spi/, '
                            'which pins search_path (add it to PINNED_SPI_FILES only if it pins it itself)')

    for problem in problems:
        print(problem)
    print(f'structure: {len(files)} files, {len(units)} units, {len(cycles)} unit cycles, '
          f'{len(folder_files)} extension folders ({len(folder_cycles)} cycles, largest '
          f'{max(len(m) for m in folder_files.values())} files), longest function {longest[0]} lines '
          f'({longest[1]}); {len(problems)} problems')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
