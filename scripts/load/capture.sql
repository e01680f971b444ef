\set n random(1, 100)
SELECT kvg_capture('Once upon a time there was a girl number ' || :n);
