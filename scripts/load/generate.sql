\set n random(1, 1000)
SELECT kvg_generate('Once upon a time there was a dog number ' || :n, 8);
