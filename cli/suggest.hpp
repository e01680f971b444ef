// "did you mean --temperature?": the nearest of a few known spellings to a
// mistyped one, by edit distance, for unknown flags and commands.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvg::cli {

// Levenshtein distance (insertions, deletions, substitutions, each 1).
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `word` when it is near enough to be a slip
// (at most 2 edits, or a quarter of the word for long ones); the first of
// equals; empty when none is.
std::string nearest_spelling(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace kvg::cli
