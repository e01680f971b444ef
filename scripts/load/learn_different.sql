\set n random(1, 300)
SELECT kvg_learn('What is thing ' || :n || '?', 'contains', 'Thing ' || :n || ' is red.', 'red');
