// Short TinyStories-style stories from templates, each with a sentence to
// complete about it and the word that completes it: the blocks and questions
// of `kvg bench-compose`. Seeded, so a table can be reproduced.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvg::cli {

struct TemplateStory {
  std::string name;      // the story's one character (distinct across a batch)
  std::string text;      // the story
  std::string question;  // a sentence to complete, e.g. "Zoe had a"
  std::string answer;    // the word that completes it, e.g. "pink"
};

// `n` stories, each about a different name (n <= story_name_count()).
std::vector<TemplateStory> template_stories(size_t n, uint64_t seed);
size_t story_name_count();

}  // namespace kvg::cli
