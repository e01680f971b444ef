SELECT kvg_learn('What color is the sky?', 'The sky is blue.', 'blue');
