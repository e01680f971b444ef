SELECT kvg_learn('What color is the sky?', 'contains', 'The sky is blue.', 'blue');
