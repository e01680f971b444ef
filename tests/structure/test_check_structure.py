#!/usr/bin/env python3
"""scripts/check-structure.py fails on each kind of violation it exists for.

Each test builds a small repository in a temporary folder (its own
docs/design.md and sources), runs the checker on it and reads its verdict, so
the check that guards the real tree is itself shown able to fail.

    python3 tests/structure/test_check_structure.py SCRIPT
"""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = None

DESIGN = '''# design

## Layers

```
 extension/  includes: engine/ common/
 engine/     includes: common/
 common/     includes: nothing
```

## The extension by concern

```
  functions/  entry points
  pg/         the boundary
```
'''


def short_function(name):
    return f'int {name}() {{\n  return 1;\n}}\n'


class Repo:
    """A repository that passes the check until a test breaks one rule."""

    def __init__(self, root):
        self.root = root
        self.write('docs/design.md', DESIGN)
        self.write('common/error.hpp', '#pragma once\n' + short_function('error_code'))
        self.write('engine/model.cpp', '#include "common/error.hpp"\n' + short_function('load'))
        self.write('extension/src/module.cpp', '#include "extension/src/functions/answer.hpp"\n')
        self.write('extension/src/functions/answer.hpp',
                   '#pragma once\n#include "extension/src/pg/boundary.hpp"\n#include "engine/model.hpp"\n')
        self.write('engine/model.hpp', '#pragma once\n#include "common/error.hpp"\n')
        self.write('extension/src/pg/boundary.hpp', '#pragma once\n#include "common/error.hpp"\n' + short_function('guard'))

    def write(self, path, text):
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, 'w') as f:
            f.write(text)

    def check(self):
        run = subprocess.run([sys.executable, SCRIPT, self.root], capture_output=True, text=True, timeout=60)
        return run.returncode, run.stdout


class CheckStructure(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.repo = Repo(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def assertFails(self, expected):
        status, out = self.repo.check()
        self.assertEqual(status, 1, out)
        self.assertIn(expected, out)

    def test_a_repository_that_keeps_every_rule_passes(self):
        status, out = self.repo.check()
        self.assertEqual(status, 0, out)
        self.assertIn('; 0 problems', out)

    def test_an_include_cycle_between_units_fails(self):
        self.repo.write('engine/a.hpp', '#pragma once\n#include "engine/b.hpp"\n')
        self.repo.write('engine/b.hpp', '#pragma once\n#include "engine/a.hpp"\n')
        self.assertFails('include cycle between units: engine/a <-> engine/b')

    def test_an_include_between_layers_that_the_diagram_lacks_fails(self):
        self.repo.write('common/uses_engine.hpp', '#pragma once\n#include "engine/model.hpp"\n')
        self.assertFails('layers: common/ -> engine/ is not in docs/design.md')

    def test_an_edge_of_the_diagram_that_no_include_uses_fails(self):
        self.repo.write('docs/design.md', DESIGN.replace('engine/     includes: common/',
                                                          'engine/     includes: common/ extension/'))
        self.assertFails('docs/design.md declares engine/ -> extension/, which no include uses')

    def test_an_extension_include_that_points_up_fails(self):
        self.repo.write('extension/src/pg/boundary.hpp',
                        '#pragma once\n#include "extension/src/functions/answer.hpp"\n')
        self.assertFails('functions/ is not below pg/')

    def test_an_extension_folder_the_design_does_not_list_fails(self):
        self.repo.write('extension/src/misc/helper.hpp', '#pragma once\n')
        self.assertFails('extension/src/misc/ is not listed')

    def test_an_extension_folder_of_thirteen_files_fails(self):
        for i in range(13):
            self.repo.write(f'extension/src/functions/f{i:02}.cpp', short_function(f'f{i}'))
        self.assertFails('extension/src/functions/ holds 14 files (at most 12)')

    def test_a_function_of_121_lines_fails_and_one_of_120_passes(self):
        body = '  int x = 0;\n' * 117
        self.repo.write('engine/long.cpp', 'int fits() {\n' + body + '  return x;\n}\n')  # 120 lines
        status, out = self.repo.check()
        self.assertEqual(status, 0, out)
        self.repo.write('engine/long.cpp', 'int too_long() {\n' + body + '  x++;\n  return x;\n}\n')
        self.assertFails('engine/long.cpp:1: too_long is 121 lines (at most 120)')

    def test_a_long_table_is_not_a_function(self):
        rows = ''.join(f'    {{"row{i}", {i}}},\n' for i in range(200))
        self.repo.write('engine/table.cpp', 'struct Row { const char* name; int value; };\n'
                        'const Row kRows[] = {\n' + rows + '};\n')
        status, out = self.repo.check()
        self.assertEqual(status, 0, out)

    def test_sql_run_through_spi_outside_the_spi_folder_fails(self):
        self.repo.write('extension/src/functions/direct.cpp',
                        '#include "extension/src/pg/boundary.hpp"\n'
                        'int direct() {\n  return SPI_execute("SELECT 1", false, 0);\n}\n')
        self.assertFails('extension/src/functions/direct.cpp runs SQL through SPI_execute outside')

    def test_sql_run_inside_the_spi_folder_passes(self):
        self.repo.write('docs/design.md', DESIGN.replace('  pg/ ', '  spi/        statements\n  pg/ '))
        self.repo.write('extension/src/spi/spi.cpp', '#include "extension/src/pg/boundary.hpp"\n'
                        'int run() {\n  return SPI_execute_with_args("SELECT 1", 0, 0, 0, 0, false, 0);\n}\n')
        status, out = self.repo.check()
        self.assertEqual(status, 0, out)

    def test_unbalanced_parentheses_in_a_macro_do_not_hang_the_scanner(self):
        self.repo.write('engine/odd.cpp', '#define OPEN (\nint odd() { return (1; }\n')
        status, out = self.repo.check()
        self.assertIn('problems', out)


if __name__ == '__main__':
    SCRIPT = sys.argv.pop(1)
    unittest.main(verbosity=2)
