SELECT kvg_answer('What color is the sky?');
