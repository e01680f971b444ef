\set n random(1, 1000000)
SELECT kvg_answer('Where did toy ' || :n || ' go?');
